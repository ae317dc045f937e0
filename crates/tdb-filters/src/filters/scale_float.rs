//! SCALE_FLOAT: not yet implemented (stub with the final signatures).

use crate::buffer::{Parts, Stage, Unfiltered};
use crate::{FilterError, Result};

/// Forward over one chunk.
pub(crate) fn forward(
    _st: &Stage<'_>,
    _scale: f64,
    _offset: f64,
    _byte_width: u64,
    _metadata: Parts,
    _data: Parts,
) -> Result<(Parts, Parts)> {
    Err(FilterError::unsupported(
        "SCALE_FLOAT",
        "not implemented yet",
    ))
}

/// Reverse over one chunk.
pub(crate) fn reverse(
    _st: &Stage<'_>,
    _scale: f64,
    _offset: f64,
    _byte_width: u64,
    _metadata: &[u8],
    _data: &[u8],
    _out: &mut Unfiltered,
) -> Result<()> {
    Err(FilterError::unsupported(
        "SCALE_FLOAT",
        "not implemented yet",
    ))
}

/// The integer type float scaling writes (TileDB's `output_datatype`).
pub(crate) fn output_datatype(
    input: tdb_format::Datatype,
    _byte_width: u64,
) -> tdb_format::Datatype {
    input
}
