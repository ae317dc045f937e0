//! BIT_WIDTH_REDUCTION: not yet implemented (stub with the final signatures).

use crate::buffer::{Parts, Stage, Unfiltered};
use crate::{FilterError, Result};

/// Forward over one chunk.
pub(crate) fn forward(
    _st: &Stage<'_>,
    _max_window: u32,
    _metadata: Parts,
    _data: Parts,
) -> Result<(Parts, Parts)> {
    Err(FilterError::unsupported(
        "BIT_WIDTH_REDUCTION",
        "not implemented yet",
    ))
}

/// Reverse over one chunk.
pub(crate) fn reverse(
    _st: &Stage<'_>,
    _max_window: u32,
    _metadata: &[u8],
    _data: &[u8],
    _out: &mut Unfiltered,
) -> Result<()> {
    Err(FilterError::unsupported(
        "BIT_WIDTH_REDUCTION",
        "not implemented yet",
    ))
}
