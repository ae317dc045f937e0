//! CHECKSUM: not yet implemented (stub with the final signatures).

use crate::buffer::{Parts, Stage, Unfiltered};
use crate::{FilterError, Result};

/// Which digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// MD5 (16 bytes).
    Md5,
    /// SHA-256 (32 bytes).
    Sha256,
}

/// Forward over one chunk.
pub(crate) fn forward(
    _st: &Stage<'_>,
    _kind: Kind,
    _metadata: Parts,
    _data: Parts,
) -> Result<(Parts, Parts)> {
    Err(FilterError::unsupported("CHECKSUM", "not implemented yet"))
}

/// Reverse over one chunk.
pub(crate) fn reverse(
    _st: &Stage<'_>,
    _kind: Kind,
    _metadata: &[u8],
    _data: &[u8],
    _out: &mut Unfiltered,
) -> Result<()> {
    Err(FilterError::unsupported("CHECKSUM", "not implemented yet"))
}
