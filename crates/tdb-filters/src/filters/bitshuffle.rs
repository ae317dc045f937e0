//! BITSHUFFLE: not yet implemented (stub with the final signatures).

use crate::buffer::{Parts, Stage, Unfiltered};
use crate::{FilterError, Result};

/// Forward over one chunk.
pub(crate) fn forward(_st: &Stage<'_>, _metadata: Parts, _data: Parts) -> Result<(Parts, Parts)> {
    Err(FilterError::unsupported(
        "BITSHUFFLE",
        "not implemented yet",
    ))
}

/// Reverse over one chunk.
pub(crate) fn reverse(
    _st: &Stage<'_>,
    _metadata: &[u8],
    _data: &[u8],
    _out: &mut Unfiltered,
) -> Result<()> {
    Err(FilterError::unsupported(
        "BITSHUFFLE",
        "not implemented yet",
    ))
}
