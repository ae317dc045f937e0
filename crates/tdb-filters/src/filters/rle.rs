//! TileDB's RLE of fixed-size cells: not yet implemented (stub).

use crate::{FilterError, Result};

/// Appends the RLE encoding of `input` (cells of `cell_size` bytes) to `out`.
pub(crate) fn compress(_cell_size: usize, _input: &[u8], _out: &mut Vec<u8>) -> Result<()> {
    Err(FilterError::unsupported("RLE", "not implemented yet"))
}

/// Appends exactly `expected_len` decoded bytes to `out`, or errors.
pub(crate) fn decompress(
    _cell_size: usize,
    _input: &[u8],
    _out: &mut Vec<u8>,
    _expected_len: usize,
) -> Result<()> {
    Err(FilterError::unsupported("RLE", "not implemented yet"))
}
