//! TileDB's DOUBLE_DELTA codec: not yet implemented (stub).

use crate::{FilterError, Result};
use tdb_format::Datatype;

/// Appends the encoding of `input` (values of `datatype`) to `out`.
pub(crate) fn compress(_datatype: Datatype, _input: &[u8], _out: &mut Vec<u8>) -> Result<()> {
    Err(FilterError::unsupported(
        "DOUBLE_DELTA",
        "not implemented yet",
    ))
}

/// Appends exactly `expected_len` decoded bytes to `out`, or errors.
pub(crate) fn decompress(
    _datatype: Datatype,
    _input: &[u8],
    _out: &mut Vec<u8>,
    _expected_len: usize,
) -> Result<()> {
    Err(FilterError::unsupported(
        "DOUBLE_DELTA",
        "not implemented yet",
    ))
}
