//! N-dimensional ranges as TileDB serializes them: one range per dimension,
//! fixed-size ones as `lo ‖ hi`, var-size ones as `u64` total length, `u64`
//! length of `lo`, then `lo ‖ hi`. The current domain, fragment non-empty
//! domains and R-tree MBRs all use this layout.

use crate::domain::Domain;
use crate::read::{fail, lift, SResult};
use crate::{Result, SchemaError};
use tdb_format::le;

/// One dimension's range of an N-dimensional rectangle.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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

    /// A range from its two bounds (fixed or var by `var`).
    pub fn from_bounds(lo: &[u8], hi: &[u8], var: bool) -> Self {
        let mut data = Vec::with_capacity(lo.len().saturating_add(hi.len()));
        data.extend_from_slice(lo);
        data.extend_from_slice(hi);
        if var {
            Range::Var {
                start_size: lo.len() as u64,
                data,
            }
        } else {
            Range::Fixed(data)
        }
    }
}

/// One range per dimension.
pub type NDRange = Vec<Range>;

impl Domain {
    /// Parses one range per dimension. `what` names the structure in errors.
    pub(crate) fn nd_range<'a>(&self, mut input: &'a [u8], what: &str) -> SResult<'a, NDRange> {
        let mut ranges = Vec::with_capacity(self.dimensions.len());
        for (d, dim) in self.dimensions.iter().enumerate() {
            let at = || format!("{what} range {d} ({})", dim.name);
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
                (input, data) = lift(le::bytes("range", dim.datatype.cell_size(2))(input), at)?;
                range = Range::Fixed(data.to_vec());
            }
            ranges.push(range);
        }
        Ok((input, ranges))
    }

    /// Reads one range per dimension from the front of `input`, advancing it
    /// past them. `what` names the structure in errors ("non-empty domain",
    /// "MBR 3").
    pub fn read_nd_range(&self, input: &mut &[u8], what: &str) -> Result<NDRange> {
        let (rest, ranges) = self.nd_range(input, what)?;
        *input = rest;
        Ok(ranges)
    }

    /// Writes ranges in the layout [`Domain::read_nd_range`] reads.
    pub fn write_nd_range(ranges: &[Range], out: &mut Vec<u8>) {
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
}
