//! TileDB's compression filter: the framing every compressor shares, and the
//! general-purpose codecs (GZIP, ZSTD, LZ4, BZIP2).
//!
//! Forward, each metadata part and then each data part is compressed on its
//! own into one data buffer; the new metadata is
//! `u32 metadata part count, u32 data part count`, then per part
//! `u32 original size, u32 compressed size`. Var-length string tiles under
//! RLE or dictionary encoding take the whole tile at once ([`strings`]).
//!
//! [`strings`]: super::strings

use super::strings::{self, StringCodec};
use super::{delta, double_delta, rle};
use crate::buffer::{tail, to_u32, MetaReader, Parts, Stage, StringOffsets, Unfiltered};
use crate::workspace::Codecs;
use crate::{FilterError, Result};
use std::io::{Read, Write};
use tdb_format::{Datatype, FilterType};

/// A compressor and what it needs to know.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Codec {
    /// zlib stream (TileDB's `deflateInit`) at a level.
    Gzip(i32),
    /// Zstandard frame at a level.
    Zstd(i32),
    /// LZ4 block without size prefix.
    Lz4,
    /// bzip2 stream with a block size level.
    Bzip2(i32),
    /// TileDB's RLE.
    Rle,
    /// TileDB's dictionary encoding (var-length strings only).
    Dictionary,
    /// Delta over values of this datatype.
    Delta(Datatype),
    /// Double delta over values of this datatype.
    DoubleDelta(Datatype),
}

impl Codec {
    fn name(self) -> &'static str {
        match self {
            Codec::Gzip(_) => FilterType::Gzip,
            Codec::Zstd(_) => FilterType::Zstd,
            Codec::Lz4 => FilterType::Lz4,
            Codec::Bzip2(_) => FilterType::Bzip2,
            Codec::Rle => FilterType::Rle,
            Codec::Dictionary => FilterType::Dictionary,
            Codec::Delta(_) => FilterType::Delta,
            Codec::DoubleDelta(_) => FilterType::DoubleDelta,
        }
        .name()
    }

    fn string_codec(self) -> Option<StringCodec> {
        match self {
            Codec::Rle => Some(StringCodec::Rle),
            Codec::Dictionary => Some(StringCodec::Dictionary),
            _ => None,
        }
    }
}

fn is_string(datatype: Datatype) -> bool {
    matches!(datatype, Datatype::StringAscii | Datatype::StringUtf8)
}

/// Forward over one chunk.
pub(crate) fn forward(
    st: &Stage<'_>,
    codecs: &mut Codecs,
    codec: Codec,
    metadata: Parts,
    data: Parts,
) -> Result<(Parts, Parts)> {
    let name = codec.name();
    if let (Some(sc), StringOffsets::Forward(offsets), true) = (
        codec.string_codec(),
        st.string_offsets,
        is_string(st.datatype),
    ) {
        if data.count() != 1 {
            return Err(FilterError::bad_input(
                name,
                "var-length strings must be one part",
            ));
        }
        let input = data.concat();
        let (meta_tail, out) = strings::forward(sc, &input, offsets)?;
        let mut meta = Vec::with_capacity(meta_tail.len().saturating_add(8));
        meta.extend_from_slice(&0u32.to_le_bytes());
        meta.extend_from_slice(&1u32.to_le_bytes());
        meta.extend_from_slice(&meta_tail);
        return Ok((Parts::one(meta), Parts::one(out)));
    }
    if codec == Codec::Dictionary {
        return Err(FilterError::bad_input(
            name,
            "dictionary encoding only applies to var-length strings",
        ));
    }
    to_u32(name, data.byte_len(), "input")?;
    let total_parts = metadata.count().saturating_add(data.count());
    let mut meta = Vec::with_capacity(total_parts.saturating_mul(8).saturating_add(8));
    meta.extend_from_slice(&to_u32(name, metadata.count(), "part count")?.to_le_bytes());
    meta.extend_from_slice(&to_u32(name, data.count(), "part count")?.to_le_bytes());
    let mut out = Vec::with_capacity((data.byte_len() / 2).saturating_add(64));
    for part in metadata.iter().chain(data.iter()) {
        let start = out.len();
        compress_part(st, codecs, codec, part, &mut out)?;
        meta.extend_from_slice(&to_u32(name, part.len(), "part")?.to_le_bytes());
        let compressed = out.len().saturating_sub(start);
        meta.extend_from_slice(&to_u32(name, compressed, "compressed part")?.to_le_bytes());
    }
    Ok((Parts::one(meta), Parts::one(out)))
}

/// Reverse over one chunk.
pub(crate) fn reverse(
    st: &Stage<'_>,
    codecs: &mut Codecs,
    codec: Codec,
    metadata: &[u8],
    data: &[u8],
    out: &mut Unfiltered,
) -> Result<()> {
    let name = codec.name();
    let mut meta = MetaReader::new(name, metadata);
    let metadata_parts = meta.u32("metadata part count")?;
    let data_parts = meta.u32("data part count")?;
    // Whether the tile carries its offsets inside is decided once, by
    // `FilterPipeline::skip_offsets_filtering` (version and datatype rules),
    // and arrives here as `StringOffsets::Reverse`.
    if let (Some(sc), StringOffsets::Reverse, true) = (
        codec.string_codec(),
        st.string_offsets,
        is_string(st.datatype),
    ) {
        if (metadata_parts, data_parts) != (0, 1) {
            return Err(FilterError::corrupt(
                name,
                format!("string tile with {metadata_parts} metadata and {data_parts} data parts, not 0 and 1"),
            ));
        }
        strings::reverse(sc, &mut meta, data, out)?;
        out.pass_on_metadata(meta.rest());
        return Ok(());
    }
    if codec == Codec::Dictionary {
        return Err(FilterError::corrupt(
            name,
            "dictionary encoding outside a var-length string tile",
        ));
    }
    let mut input = data;
    let metadata_start = out.metadata.len();
    let mut stored_metadata = 0usize;
    for i in 0..u64::from(metadata_parts).saturating_add(u64::from(data_parts)) {
        let original = meta.u32("part original size")? as usize;
        let compressed = meta.u32("part compressed size")? as usize;
        let part = crate::buffer::take_data(name, &mut input, compressed, "compressed part")?;
        let target = if i < u64::from(metadata_parts) {
            stored_metadata = stored_metadata.saturating_add(compressed);
            &mut out.metadata
        } else {
            &mut out.data
        };
        decompress_part(st, codecs, codec, part, target, original)?;
    }
    let stored = data.get(..stored_metadata).unwrap_or_default();
    out.pass_on_after_decoding(metadata_start, stored, meta.rest());
    Ok(())
}

fn compress_part(
    st: &Stage<'_>,
    codecs: &mut Codecs,
    codec: Codec,
    part: &[u8],
    out: &mut Vec<u8>,
) -> Result<()> {
    let name = codec.name();
    let io = |e: std::io::Error| FilterError::bad_input(name, e.to_string());
    match codec {
        Codec::Gzip(level) => {
            if level > 9 {
                return Err(FilterError::bad_input(
                    name,
                    format!("level {level} above 9"),
                ));
            }
            // TileDB maps levels below 0 to zlib's default (6).
            let level = if level < 0 { 6 } else { level as u32 };
            let mut enc =
                flate2::write::ZlibEncoder::new(&mut *out, flate2::Compression::new(level));
            enc.write_all(part).map_err(io)?;
            enc.finish().map_err(io)?;
        }
        Codec::Zstd(level) => {
            let level = if level < -7 { 3 } else { level };
            // Into the vector's spare room after what it holds: no zeroing
            // of what zstd writes anyway.
            out.reserve(zstd::zstd_safe::compress_bound(part.len()));
            let start = out.len() as u64;
            let mut tail = std::io::Cursor::new(&mut *out);
            tail.set_position(start);
            codecs
                .zstd_compressor(name, level)?
                .compress_to_buffer(part, &mut tail)
                .map_err(io)?;
        }
        // liblz4's encoder, ported: TileDB's bytes, so TileDB's tile sizes
        // (`max_fragment_size` splits by them).
        Codec::Lz4 => super::lz4::compress(part, out),
        Codec::Bzip2(level) => {
            let level = if level < 1 { 1 } else { level.min(9) as u32 };
            let mut enc = bzip2::write::BzEncoder::new(&mut *out, bzip2::Compression::new(level));
            enc.write_all(part).map_err(io)?;
            enc.finish().map_err(io)?;
        }
        Codec::Rle => rle::compress(usize::try_from(st.cell_size).unwrap_or(1), part, out)?,
        Codec::Delta(t) => delta::compress(t, part, out)?,
        Codec::DoubleDelta(t) => double_delta::compress(t, part, out)?,
        Codec::Dictionary => unreachable!("dictionary encoding is handled by the caller"),
    }
    Ok(())
}

/// Deflate's largest expansion (zlib's technical notes: 1032:1).
const DEFLATE_MAX_RATIO: usize = 1032;

/// Up to this expansion a zstd frame's stated size is reserved at once.
const ZSTD_EAGER_RATIO: usize = 64;

fn decompress_part(
    st: &Stage<'_>,
    codecs: &mut Codecs,
    codec: Codec,
    part: &[u8],
    out: &mut Vec<u8>,
    original: usize,
) -> Result<()> {
    let name = codec.name();
    let start = out.len();
    match codec {
        Codec::Gzip(_) => {
            // Deflate expands at most 1032-fold: a larger promise is a lie,
            // refused before it sizes anything.
            if original
                > part
                    .len()
                    .saturating_mul(DEFLATE_MAX_RATIO)
                    .saturating_add(64)
            {
                return Err(size_mismatch(
                    name,
                    original,
                    part.len().saturating_mul(DEFLATE_MAX_RATIO),
                ));
            }
            // One byte beyond the promise shows a stream that goes on.
            out.resize(start.saturating_add(original).saturating_add(1), 0);
            let inflate = codecs.inflate();
            let status = inflate
                .decompress(part, tail(out, start), flate2::FlushDecompress::Finish)
                .map_err(|e| FilterError::corrupt(name, e.to_string()))?;
            let got = inflate.total_out() as usize;
            out.truncate(start.saturating_add(got));
            if status != flate2::Status::StreamEnd && got == original {
                return Err(FilterError::corrupt(name, "the zlib stream does not end"));
            }
        }
        Codec::Bzip2(_) => {
            read_exact_stream(name, bzip2::read::BzDecoder::new(part), out, original)?
        }
        Codec::Zstd(_) => {
            // TileDB's frames state their content size; trusting it only
            // after it matches the metadata keeps a lying header from
            // sizing our allocation.
            // A frame may state any size: it sizes the output at once only
            // within what its bytes can plausibly hold; beyond, the output
            // grows as the stream really produces it.
            let plausible = original <= part.len().saturating_mul(ZSTD_EAGER_RATIO);
            match zstd::zstd_safe::get_frame_content_size(part) {
                Ok(Some(n)) if n == original as u64 && plausible => {
                    // Into the vector's spare room after `start`: no
                    // zeroing of what zstd writes anyway.
                    out.reserve_exact(original);
                    let mut tail = std::io::Cursor::new(&mut *out);
                    tail.set_position(start as u64);
                    codecs
                        .zstd(name)?
                        .decompress(&mut tail, part)
                        .map_err(|code| {
                            let e = zstd::zstd_safe::get_error_name(code);
                            FilterError::corrupt(name, e.to_string())
                        })?;
                }
                Ok(Some(n)) if n != original as u64 => {
                    return Err(size_mismatch(name, original, n as usize))
                }
                _ => {
                    let decoder =
                        zstd::stream::read::Decoder::with_context(part, codecs.zstd(name)?);
                    read_exact_stream(name, decoder, out, original)?
                }
            }
        }
        Codec::Lz4 => {
            // An LZ4 block expands at most 255-fold; a larger claim is a lie.
            if original > part.len().saturating_mul(255).saturating_add(16) {
                return Err(size_mismatch(
                    name,
                    original,
                    part.len().saturating_mul(255),
                ));
            }
            out.resize(start.saturating_add(original), 0);
            let n = lz4_flex::block::decompress_into(part, tail(out, start))
                .map_err(|e| FilterError::corrupt(name, e.to_string()))?;
            out.truncate(start.saturating_add(n));
        }
        Codec::Rle => rle::decompress(
            usize::try_from(st.cell_size).unwrap_or(1),
            part,
            out,
            original,
        )?,
        Codec::Delta(t) => delta::decompress(t, part, out, original)?,
        Codec::DoubleDelta(t) => double_delta::decompress(t, part, out, original)?,
        Codec::Dictionary => unreachable!("dictionary encoding is handled by the caller"),
    }
    // Decoders only append to `out`.
    let got = out.len().saturating_sub(start);
    if got != original {
        return Err(size_mismatch(name, original, got));
    }
    Ok(())
}

fn size_mismatch(name: &'static str, expected: usize, got: usize) -> FilterError {
    FilterError::corrupt(
        name,
        format!("part decodes to {got} bytes, metadata says {expected}"),
    )
}

/// Decodes a stream into exactly `original` bytes: never more (a lying
/// stream cannot make us allocate beyond what the metadata promised, itself
/// bounded by u32), and the stream must end there.
fn read_exact_stream(
    name: &'static str,
    decoder: impl Read,
    out: &mut Vec<u8>,
    original: usize,
) -> Result<()> {
    let start = out.len();
    let mut limited = decoder.take((original as u64).saturating_add(1));
    limited
        .read_to_end(out)
        .map_err(|e| FilterError::corrupt(name, e.to_string()))?;
    let got = out.len().saturating_sub(start);
    if got != original {
        return Err(size_mismatch(name, original, got));
    }
    Ok(())
}
