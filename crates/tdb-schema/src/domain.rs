//! The domain: its dimensions, in order.

use crate::dimension::Dimension;
use crate::read::{datatype, lift, SResult};
use crate::Result;
use tdb_format::le;
use tdb_format::FormatVersion;

/// The array's domain.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Domain {
    /// The dimensions; before v5 they all share one datatype.
    pub dimensions: Vec<Dimension>,
}

impl Domain {
    /// A domain of these dimensions.
    pub fn new(dimensions: Vec<Dimension>) -> Self {
        Domain { dimensions }
    }

    /// Parses a domain of format `version`: before v5 one datatype byte for
    /// every dimension precedes the count.
    pub(crate) fn parse(input: &[u8], version: FormatVersion) -> SResult<'_, Self> {
        let (mut input, domain_type) = if version.has_heterogeneous_dimensions() {
            (input, None)
        } else {
            let (input, dt) = datatype(input, || "domain datatype".into())?;
            (input, Some(dt))
        };
        let count;
        (input, count) = lift(le::u32("dimension count")(input), || {
            "dimension count".into()
        })?;
        // No capacity from the count: each dimension consumes bytes, so the
        // vector grows only as far as the input really goes.
        let mut dimensions = Vec::new();
        for index in 0..count as usize {
            let _dimension = tdb_format::span::scope(format_args!("dimensions[{index}]"));
            let dim;
            (input, dim) = Dimension::parse(input, version, index, domain_type)?;
            dimensions.push(dim);
        }
        Ok((input, Domain { dimensions }))
    }

    /// Writes the v5+ layout.
    pub(crate) fn write(&self, version: FormatVersion, out: &mut Vec<u8>) -> Result<()> {
        le::put_u32(out, count_u32("dimension count", self.dimensions.len())?);
        for d in &self.dimensions {
            d.write(version, out)?;
        }
        Ok(())
    }
}

/// A collection's length as the `u32` count TileDB stores.
pub(crate) fn count_u32(field: &'static str, n: usize) -> Result<u32> {
    u32::try_from(n)
        .map_err(|_| crate::SchemaError::invalid(field, format!("{n} does not fit a u32")))
}
