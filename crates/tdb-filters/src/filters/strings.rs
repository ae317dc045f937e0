//! RLE and dictionary encoding of var-length string tiles, which TileDB
//! runs over the whole tile with its offsets (format v12+ for ASCII RLE, v13+
//! for ASCII dictionary, v17+ for UTF-8): not yet implemented (stub).

use crate::buffer::{MetaReader, Unfiltered};
use crate::{FilterError, Result};

/// Which string codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StringCodec {
    /// TileDB's string RLE.
    Rle,
    /// TileDB's dictionary encoding.
    Dictionary,
}

/// Forward: the metadata TileDB writes after the two part counts, and the
/// data. `offsets` are the cell start offsets into `data`.
pub(crate) fn forward(
    codec: StringCodec,
    _data: &[u8],
    _offsets: &[u64],
) -> Result<(Vec<u8>, Vec<u8>)> {
    Err(FilterError::unsupported(name(codec), "not implemented yet"))
}

/// Reverse: `metadata` is positioned after the two part counts; fills
/// `out.data` and `out.offsets`.
pub(crate) fn reverse(
    codec: StringCodec,
    _metadata: &mut MetaReader<'_>,
    _data: &[u8],
    _out: &mut Unfiltered,
) -> Result<()> {
    Err(FilterError::unsupported(name(codec), "not implemented yet"))
}

fn name(codec: StringCodec) -> &'static str {
    match codec {
        StringCodec::Rle => "RLE",
        StringCodec::Dictionary => "DICTIONARY",
    }
}
