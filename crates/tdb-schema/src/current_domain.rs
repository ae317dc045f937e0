//! The current domain (v22): the part of the domain in use, which schema
//! evolution can grow. Versioned on its own (version 0 today); empty or an
//! N-dimensional rectangle with one range per dimension.

use crate::domain::Domain;
use crate::read::{fail, lift, SResult};
use crate::{Result, SchemaError};
use tdb_format::le;
use tdb_format::CurrentDomainType;

/// TileDB's `constants::current_domain_version`, also what older schemas get.
pub const CURRENT_DOMAIN_VERSION: u32 = 0;

/// The current domain of a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentDomain {
    /// Its own format version.
    pub version: u32,
    /// One range per dimension, or `None` when empty.
    pub ranges: Option<Vec<Range>>,
}

impl Default for CurrentDomain {
    fn default() -> Self {
        CurrentDomain {
            version: CURRENT_DOMAIN_VERSION,
            ranges: None,
        }
    }
}

/// One dimension's range of an N-dimensional rectangle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Range {
    /// A fixed-size dimension: `lo` then `hi`, one value each.
    Fixed(Vec<u8>),
    /// A var-size dimension: `lo` (the first `start_size` bytes) then `hi`.
    Var {
        /// Length of `lo`.
        start_size: u64,
        /// `lo` and `hi` back to back.
        data: Vec<u8>,
    },
}

impl Range {
    /// The bounds' bytes.
    pub fn bounds(&self) -> (&[u8], &[u8]) {
        match self {
            Range::Fixed(d) => d.split_at(d.len() / 2),
            // `start_size` is checked against the data when parsed.
            Range::Var { start_size, data } => {
                data.split_at((*start_size as usize).min(data.len()))
            }
        }
    }
}

impl CurrentDomain {
    /// Parses a current domain; the rectangle's layout depends on `domain`.
    pub(crate) fn parse<'a>(input: &'a [u8], domain: &Domain) -> SResult<'a, Self> {
        let field = |what: &str| format!("current domain {what}");
        let (input, version) = lift(le::u32("version")(input), || field("version"))?;
        if version > CURRENT_DOMAIN_VERSION {
            return fail(SchemaError::invalid(
                field("version"),
                format!("{version} is newer than {CURRENT_DOMAIN_VERSION}"),
            ));
        }
        let (mut input, empty) = lift(le::bool("empty")(input), || field("empty"))?;
        if empty {
            return Ok((
                input,
                CurrentDomain {
                    version,
                    ranges: None,
                },
            ));
        }
        let code;
        (input, code) = lift(le::u8("type")(input), || field("type"))?;
        CurrentDomainType::from_code(code)
            .map_err(|e| nom::Err::Error(crate::read::format_error(field("type"), e)))?;
        let mut ranges = Vec::with_capacity(domain.dimensions.len());
        for (d, dim) in domain.dimensions.iter().enumerate() {
            let at = || format!("current domain range {d} ({})", dim.name);
            let range;
            if dim.is_var() {
                let (size, start);
                (input, size) = lift(le::u64("range size")(input), at)?;
                (input, start) = lift(le::u64("range start size")(input), at)?;
                let data;
                (input, data) = lift(le::bytes("range", size)(input), at)?;
                if start > size {
                    return fail(SchemaError::invalid(
                        at(),
                        format!("start size {start} beyond the range's {size} bytes"),
                    ));
                }
                range = Range::Var {
                    start_size: start,
                    data: data.to_vec(),
                };
            } else {
                let data;
                (input, data) = lift(le::bytes("range", 2 * dim.datatype.size())(input), at)?;
                range = Range::Fixed(data.to_vec());
            }
            ranges.push(range);
        }
        Ok((
            input,
            CurrentDomain {
                version,
                ranges: Some(ranges),
            },
        ))
    }

    pub(crate) fn write(&self, out: &mut Vec<u8>) -> Result<()> {
        le::put_u32(out, self.version);
        le::put_bool(out, self.ranges.is_none());
        if let Some(ranges) = &self.ranges {
            le::put_u8(out, CurrentDomainType::NdRectangle.code());
            for r in ranges {
                match r {
                    Range::Fixed(d) => out.extend_from_slice(d),
                    Range::Var { start_size, data } => {
                        le::put_u64(out, data.len() as u64);
                        le::put_u64(out, *start_size);
                        out.extend_from_slice(data);
                    }
                }
            }
        }
        Ok(())
    }
}
