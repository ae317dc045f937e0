//! Every filter, forward (write) and reverse (read), one module each.
//!
//! Compressors (GZIP, ZSTD, LZ4, BZIP2, RLE, DICTIONARY, DELTA, DOUBLE_DELTA)
//! share TileDB's compression framing in [`compression`], which also holds
//! the general-purpose codecs; TileDB's own codecs (RLE, strings, delta,
//! double delta) live in their own modules.

pub(crate) mod bit_width_reduction;
pub(crate) mod bitshuffle;
pub(crate) mod byteshuffle;
pub(crate) mod checksum;
pub(crate) mod compression;
pub(crate) mod delta;
pub(crate) mod double_delta;
pub(crate) mod encryption;
mod framed;
pub(crate) mod lz4;
pub(crate) mod positive_delta;
pub(crate) mod rle;
pub(crate) mod scale_float;
pub(crate) mod strings;
pub(crate) mod webp;
mod windows;
pub(crate) mod xor;

use crate::buffer::{Parts, Stage, Unfiltered};
use crate::workspace::Codecs;
use crate::{Filter, Result};
use compression::Codec;
use tdb_format::Datatype;

/// Which way a transposing filter (BITSHUFFLE, BYTESHUFFLE) runs.
#[derive(Clone, Copy, PartialEq)]
enum Direction {
    /// Elements to rows (bit rows, byte planes): writing.
    Forward,
    /// Rows to elements: reading.
    Reverse,
}

impl Filter {
    /// The datatype this filter hands to the next one, given its input's
    /// (TileDB's `Filter::output_datatype`).
    pub fn output_datatype(&self, input: Datatype) -> Datatype {
        match *self {
            Filter::Delta { .. } | Filter::DoubleDelta { .. } => {
                self.reinterpret().unwrap_or(input)
            }
            Filter::ScaleFloat { byte_width, .. } => {
                scale_float::output_datatype(input, byte_width)
            }
            Filter::Xor => xor::output_datatype(input),
            // TileDB: "encryption gives us meaningless bits".
            Filter::InternalAes256Gcm => Datatype::Blob,
            _ => input,
        }
    }

    /// The datatype DELTA or DOUBLE_DELTA read their input as, when set
    /// (TileDB stores ANY for "not set").
    pub fn reinterpret(&self) -> Option<Datatype> {
        match *self {
            Filter::Delta { reinterpret, .. } | Filter::DoubleDelta { reinterpret, .. } => {
                reinterpret.filter(|&t| t != Datatype::Any)
            }
            _ => None,
        }
    }

    /// The compression codec of a compression filter.
    fn codec(&self, st: &Stage<'_>) -> Option<Codec> {
        Some(match *self {
            Filter::Gzip { level } => Codec::Gzip(level),
            Filter::Zstd { level } => Codec::Zstd(level),
            Filter::Lz4 { .. } => Codec::Lz4,
            Filter::Bzip2 { level } => Codec::Bzip2(level),
            Filter::Rle { .. } => Codec::Rle,
            Filter::Dictionary { .. } => Codec::Dictionary,
            Filter::Delta { .. } => Codec::Delta(self.output_datatype(st.datatype)),
            Filter::DoubleDelta { .. } => Codec::DoubleDelta(self.output_datatype(st.datatype)),
            _ => return None,
        })
    }

    /// Runs the filter forward over one chunk's metadata and data streams.
    /// `codecs` are the calling thread's, kept across chunks.
    pub fn forward(
        &self,
        st: &Stage<'_>,
        codecs: &mut Codecs,
        metadata: Parts,
        data: Parts,
    ) -> Result<(Parts, Parts)> {
        if let Some(codec) = self.codec(st) {
            return compression::forward(st, codecs, codec, metadata, data);
        }
        match *self {
            Filter::None => Ok((metadata, data)),
            Filter::BitWidthReduction { max_window } => {
                bit_width_reduction::forward(st, max_window, metadata, data)
            }
            Filter::PositiveDelta { max_window } => {
                positive_delta::forward(st, max_window, metadata, data)
            }
            Filter::Bitshuffle => bitshuffle::forward(st, metadata, data),
            Filter::Byteshuffle => byteshuffle::forward(st, metadata, data),
            Filter::Xor => xor::forward(st, metadata, data),
            Filter::ChecksumMd5 => checksum::forward(st, checksum::Kind::Md5, metadata, data),
            Filter::ChecksumSha256 => checksum::forward(st, checksum::Kind::Sha256, metadata, data),
            Filter::ScaleFloat {
                scale,
                offset,
                byte_width,
            } => scale_float::forward(st, scale, offset, byte_width, metadata, data),
            Filter::InternalAes256Gcm => encryption::forward(st, codecs, metadata, data),
            Filter::Webp {
                format,
                lossless,
                y_extent,
                x_extent,
                ..
            } => {
                let opts = webp::Options {
                    format,
                    lossless: lossless != 0,
                    y_extent,
                    x_extent,
                };
                webp::forward(st, opts, metadata, data)
            }
            _ => unreachable!("compression filters are handled above"),
        }
    }

    /// Runs the filter in reverse over one chunk: reads this filter's
    /// metadata from the front of `metadata`, leaves the rest for the filters
    /// before it in `out.metadata`, and appends the data to `out.data`.
    /// `codecs` are the calling thread's codec contexts, reused across chunks.
    pub fn reverse(
        &self,
        st: &Stage<'_>,
        codecs: &mut Codecs,
        metadata: &[u8],
        data: &[u8],
        out: &mut Unfiltered,
    ) -> Result<()> {
        if let Some(codec) = self.codec(st) {
            return compression::reverse(st, codecs, codec, metadata, data, out);
        }
        match *self {
            Filter::None => {
                out.pass_through(metadata, data);
                Ok(())
            }
            Filter::BitWidthReduction { .. } => {
                bit_width_reduction::reverse(st, metadata, data, out)
            }
            Filter::PositiveDelta { .. } => positive_delta::reverse(st, metadata, data, out),
            Filter::Bitshuffle => bitshuffle::reverse(st, metadata, data, out),
            Filter::Byteshuffle => byteshuffle::reverse(st, metadata, data, out),
            Filter::Xor => xor::reverse(st, metadata, data, out),
            Filter::ChecksumMd5 => checksum::reverse(st, checksum::Kind::Md5, metadata, data, out),
            Filter::ChecksumSha256 => {
                checksum::reverse(st, checksum::Kind::Sha256, metadata, data, out)
            }
            Filter::ScaleFloat {
                scale,
                offset,
                byte_width,
            } => scale_float::reverse(st, scale, offset, byte_width, metadata, data, out),
            Filter::InternalAes256Gcm => encryption::reverse(st, codecs, metadata, data, out),
            Filter::Webp {
                format,
                lossless,
                y_extent,
                x_extent,
                ..
            } => {
                let opts = webp::Options {
                    format,
                    lossless: lossless != 0,
                    y_extent,
                    x_extent,
                };
                webp::reverse(st, opts, metadata, data, out)
            }
            _ => unreachable!("compression filters are handled above"),
        }
    }
}
