//! The serialized filter pipeline: max chunk size, filter count, and per
//! filter a type byte and a length-prefixed options block.
//!
//! Options by type (TileDB's `FilterCreate::deserialize`): compressors
//! (GZIP, ZSTD, LZ4, RLE, BZIP2, DICTIONARY, DELTA, DOUBLE_DELTA) store a
//! compressor byte and an `i32` level, plus a reinterpret datatype byte for
//! DELTA from v19 and DOUBLE_DELTA from v20; bit-width reduction and positive
//! delta a `u32` window; float scaling `f64` scale, `f64` offset, `u64` byte
//! width; WebP its C struct (`f32` quality, `u8` format, `u8` lossless, `u16`
//! y and x extents, two padding bytes); the rest nothing.

use crate::{FilterError, Result};
use tdb_format::le::{self, PResult};
use tdb_format::{Compressor, Datatype, FilterType, FormatError, FormatVersion};

/// One filter with its options.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Filter {
    /// No-op.
    None,
    /// Gzip at a level.
    Gzip {
        /// Compression level.
        level: i32,
    },
    /// Zstandard at a level.
    Zstd {
        /// Compression level.
        level: i32,
    },
    /// LZ4 (the level is stored but unused).
    Lz4 {
        /// Compression level.
        level: i32,
    },
    /// Run-length encoding (level stored, unused).
    Rle {
        /// Compression level.
        level: i32,
    },
    /// Bzip2 at a level.
    Bzip2 {
        /// Compression level.
        level: i32,
    },
    /// Dictionary encoding (level stored, unused).
    Dictionary {
        /// Compression level.
        level: i32,
    },
    /// Double-delta encoding.
    DoubleDelta {
        /// Compression level (unused).
        level: i32,
        /// Datatype the input is read as (stored from v20; `None` before).
        reinterpret: Option<Datatype>,
    },
    /// Delta encoding.
    Delta {
        /// Compression level (unused).
        level: i32,
        /// Datatype the input is read as (stored from v19; `None` before).
        reinterpret: Option<Datatype>,
    },
    /// Bit-width reduction over windows.
    BitWidthReduction {
        /// Window size in bytes.
        max_window: u32,
    },
    /// Bit shuffle.
    Bitshuffle,
    /// Byte shuffle.
    Byteshuffle,
    /// Positive-delta encoding over windows.
    PositiveDelta {
        /// Window size in bytes.
        max_window: u32,
    },
    /// MD5 checksum.
    ChecksumMd5,
    /// SHA-256 checksum.
    ChecksumSha256,
    /// Float scaling to integers of `byte_width` bytes.
    ScaleFloat {
        /// Scale.
        scale: f64,
        /// Offset.
        offset: f64,
        /// Width of the stored integers.
        byte_width: u64,
    },
    /// XOR with the previous value.
    Xor,
    /// WebP image compression.
    Webp {
        /// Quality, 0–100.
        quality: f32,
        /// Input pixel format code.
        format: u8,
        /// Lossless flag byte.
        lossless: u8,
        /// Tile extent in rows.
        y_extent: u16,
        /// Tile extent in columns (pixels × channels).
        x_extent: u16,
        /// The struct's trailing padding, kept so writes are byte-exact.
        padding: [u8; 2],
    },
    /// The internal AES-256-GCM filter: serialized in the pipelines of
    /// encrypted generic tiles; appended by readers and writers (never
    /// stored in a schema) to every data tile's pipeline of an encrypted
    /// array.
    InternalAes256Gcm,
}

impl Filter {
    /// The filter's type code.
    pub fn filter_type(&self) -> FilterType {
        match self {
            Filter::None => FilterType::None,
            Filter::Gzip { .. } => FilterType::Gzip,
            Filter::Zstd { .. } => FilterType::Zstd,
            Filter::Lz4 { .. } => FilterType::Lz4,
            Filter::Rle { .. } => FilterType::Rle,
            Filter::Bzip2 { .. } => FilterType::Bzip2,
            Filter::Dictionary { .. } => FilterType::Dictionary,
            Filter::DoubleDelta { .. } => FilterType::DoubleDelta,
            Filter::Delta { .. } => FilterType::Delta,
            Filter::BitWidthReduction { .. } => FilterType::BitWidthReduction,
            Filter::Bitshuffle => FilterType::Bitshuffle,
            Filter::Byteshuffle => FilterType::Byteshuffle,
            Filter::PositiveDelta { .. } => FilterType::PositiveDelta,
            Filter::ChecksumMd5 => FilterType::ChecksumMd5,
            Filter::ChecksumSha256 => FilterType::ChecksumSha256,
            Filter::ScaleFloat { .. } => FilterType::ScaleFloat,
            Filter::Xor => FilterType::Xor,
            Filter::Webp { .. } => FilterType::Webp,
            Filter::InternalAes256Gcm => FilterType::InternalAes256Gcm,
        }
    }

    /// Whether this is one of TileDB's compression filters (its
    /// `CompressionFilter`: GZIP, ZSTD, LZ4, RLE, BZIP2, DICTIONARY,
    /// DOUBLE_DELTA, DELTA).
    pub fn is_compression(&self) -> bool {
        self.compression().is_some()
    }

    /// The compressor byte and level of compression filters.
    fn compression(&self) -> Option<(Compressor, i32)> {
        let level = match *self {
            Filter::Gzip { level }
            | Filter::Zstd { level }
            | Filter::Lz4 { level }
            | Filter::Rle { level }
            | Filter::Bzip2 { level }
            | Filter::Dictionary { level }
            | Filter::DoubleDelta { level, .. }
            | Filter::Delta { level, .. } => level,
            _ => return None,
        };
        self.filter_type().compressor().map(|c| (c, level))
    }

    fn write_options(&self, version: FormatVersion, out: &mut Vec<u8>) {
        if let Some((compressor, level)) = self.compression() {
            le::put_u8(out, compressor.code());
            le::put_i32(out, level);
        }
        match *self {
            Filter::Delta { reinterpret, .. } if version.delta_has_reinterpret_datatype() => {
                le::put_u8(out, reinterpret.unwrap_or(Datatype::Any).code());
            }
            Filter::DoubleDelta { reinterpret, .. }
                if version.double_delta_has_reinterpret_datatype() =>
            {
                le::put_u8(out, reinterpret.unwrap_or(Datatype::Any).code());
            }
            Filter::BitWidthReduction { max_window } | Filter::PositiveDelta { max_window } => {
                le::put_u32(out, max_window);
            }
            Filter::ScaleFloat {
                scale,
                offset,
                byte_width,
            } => {
                le::put_f64(out, scale);
                le::put_f64(out, offset);
                le::put_u64(out, byte_width);
            }
            Filter::Webp {
                quality,
                format,
                lossless,
                y_extent,
                x_extent,
                padding,
            } => {
                le::put_f32(out, quality);
                le::put_u8(out, format);
                le::put_u8(out, lossless);
                le::put_u16(out, y_extent);
                le::put_u16(out, x_extent);
                out.extend_from_slice(&padding);
            }
            _ => {}
        }
    }
}

/// A pipeline of filters applied in order when writing, reversed when reading.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterPipeline {
    /// Stored chunk size; TileDB only checks it for zero (no chunking) and
    /// otherwise cuts 64 KiB chunks whatever it says.
    pub max_chunk_size: u32,
    /// The filters, first applied first.
    pub filters: Vec<Filter>,
}

/// The `max_chunk_size` TileDB stores in new pipelines
/// (`constants::max_tile_chunk_size`, also the size it cuts chunks to).
pub const DEFAULT_MAX_CHUNK_SIZE: u32 = 64 * 1024;

impl Default for FilterPipeline {
    /// No filters, TileDB's default chunk size.
    fn default() -> Self {
        FilterPipeline::new([])
    }
}

impl FilterPipeline {
    /// A pipeline of `filters` with the chunk size TileDB stores in new
    /// pipelines.
    pub fn new(filters: impl IntoIterator<Item = Filter>) -> Self {
        FilterPipeline {
            max_chunk_size: DEFAULT_MAX_CHUNK_SIZE,
            filters: filters.into_iter().collect(),
        }
    }

    /// Parses a whole serialized pipeline written with format `version`.
    pub fn parse(bytes: &[u8], version: FormatVersion) -> Result<Self> {
        match filter_pipeline(version)(bytes)? {
            ([], p) => Ok(p),
            (rest, _) => Err(FilterError::Format(FormatError::Invalid {
                field: "filter pipeline",
                reason: format!("{} bytes after the last filter", rest.len()),
            })),
        }
    }

    /// Serializes for format `version`: the mirror of [`FilterPipeline::parse`].
    pub fn write(&self, version: FormatVersion, out: &mut Vec<u8>) {
        le::put_u32(out, self.max_chunk_size);
        le::put_u32(out, self.filters.len() as u32);
        let mut options = Vec::new();
        for f in &self.filters {
            options.clear();
            f.write_options(version, &mut options);
            le::put_u8(out, f.filter_type().code());
            le::put_u32(out, options.len() as u32);
            out.extend_from_slice(&options);
        }
    }
}

fn bad(filter: FilterType, index: usize, reason: String) -> FilterError {
    FilterError::BadOptions {
        filter: filter.name(),
        index,
        reason,
    }
}

fn parse_options(
    kind: FilterType,
    index: usize,
    opts: &[u8],
    version: FormatVersion,
) -> Result<Filter> {
    let compressor_of = |o| -> PResult<'_, i32, FilterError> {
        let (o, c) = le::u8("compressor")(o)?;
        let (o, level) = le::i32("compression level")(o)?;
        let expected = kind.compressor();
        if Some(c) != expected.map(Compressor::code) {
            return Err(bad(
                kind,
                index,
                format!("compressor byte {c} does not match the type"),
            ));
        }
        Ok((o, level))
    };
    let reinterpret = |o, present: bool| -> PResult<'_, Option<Datatype>, FilterError> {
        if !present {
            return Ok((o, None));
        }
        let (o, c) = le::u8("reinterpret datatype")(o)?;
        let dt = Datatype::from_code(c)?;
        Ok((o, Some(dt)))
    };
    let (rest, filter) = match kind {
        FilterType::None => (opts, Filter::None),
        FilterType::Gzip => compressor_of(opts).map(|(o, level)| (o, Filter::Gzip { level }))?,
        FilterType::Zstd => compressor_of(opts).map(|(o, level)| (o, Filter::Zstd { level }))?,
        FilterType::Lz4 => compressor_of(opts).map(|(o, level)| (o, Filter::Lz4 { level }))?,
        FilterType::Rle => compressor_of(opts).map(|(o, level)| (o, Filter::Rle { level }))?,
        FilterType::Bzip2 => compressor_of(opts).map(|(o, level)| (o, Filter::Bzip2 { level }))?,
        FilterType::Dictionary => {
            compressor_of(opts).map(|(o, level)| (o, Filter::Dictionary { level }))?
        }
        FilterType::Delta => {
            let (o, level) = compressor_of(opts)?;
            let (o, reinterpret) = reinterpret(o, version.delta_has_reinterpret_datatype())?;
            (o, Filter::Delta { level, reinterpret })
        }
        FilterType::DoubleDelta => {
            let (o, level) = compressor_of(opts)?;
            let (o, reinterpret) = reinterpret(o, version.double_delta_has_reinterpret_datatype())?;
            (o, Filter::DoubleDelta { level, reinterpret })
        }
        FilterType::BitWidthReduction => {
            let (o, max_window) = le::u32("max window")(opts)?;
            (o, Filter::BitWidthReduction { max_window })
        }
        FilterType::PositiveDelta => {
            let (o, max_window) = le::u32("max window")(opts)?;
            (o, Filter::PositiveDelta { max_window })
        }
        FilterType::Bitshuffle => (opts, Filter::Bitshuffle),
        FilterType::Byteshuffle => (opts, Filter::Byteshuffle),
        FilterType::ChecksumMd5 => (opts, Filter::ChecksumMd5),
        FilterType::ChecksumSha256 => (opts, Filter::ChecksumSha256),
        FilterType::Xor => (opts, Filter::Xor),
        FilterType::InternalAes256Gcm => (opts, Filter::InternalAes256Gcm),
        FilterType::ScaleFloat => {
            let (o, scale) = le::f64("scale")(opts)?;
            let (o, offset) = le::f64("offset")(o)?;
            let (o, byte_width) = le::u64("byte width")(o)?;
            (
                o,
                Filter::ScaleFloat {
                    scale,
                    offset,
                    byte_width,
                },
            )
        }
        FilterType::Webp => {
            let (o, quality) = le::f32("quality")(opts)?;
            let (o, format) = le::u8("input format")(o)?;
            let (o, lossless) = le::u8("lossless")(o)?;
            let (o, y_extent) = le::u16("y extent")(o)?;
            let (o, x_extent) = le::u16("x extent")(o)?;
            let (o, padding) = le::array::<2>("padding")(o)?;
            (
                o,
                Filter::Webp {
                    quality,
                    format,
                    lossless,
                    y_extent,
                    x_extent,
                    padding,
                },
            )
        }
        FilterType::Deprecated => {
            return Err(bad(
                kind,
                index,
                "retired filter code 17 is not readable".into(),
            ));
        }
    };
    if !rest.is_empty() {
        return Err(bad(
            kind,
            index,
            format!("{} unexpected option bytes", rest.len()),
        ));
    }
    Ok(filter)
}

/// A parser for a serialized pipeline of format `version` at the front of
/// its input, returning the rest and the pipeline. Every length is
/// checked against the remaining input before it is used.
pub fn filter_pipeline<'a>(
    version: FormatVersion,
) -> impl Fn(&'a [u8]) -> PResult<'a, FilterPipeline, FilterError> {
    move |input: &'a [u8]| {
        let (mut rest, max_chunk_size) = le::u32("max chunk size")(input)?;
        let count;
        (rest, count) = le::u32("filter count")(rest)?;
        // Each filter takes at least 5 bytes: a count beyond that is corrupt,
        // and refusing it keeps the allocation bounded by the input.
        if u64::from(count) * 5 > rest.len() as u64 {
            return Err(FilterError::Format(FormatError::Truncated {
                field: "filters",
                needed: u64::from(count) * 5,
                available: rest.len() as u64,
            }));
        }
        let mut filters = Vec::with_capacity(count as usize);
        for index in 0..count as usize {
            let _filter = tdb_format::span::scope(format_args!("filters[{index}]"));
            let (r, kind) = le::code("filter type", FilterType::from_code)(rest)?;
            let (r, opts) = le::bytes_u32("filter options")(r)?;
            filters.push(parse_options(kind, index, opts, version)?);
            rest = r;
        }
        Ok((
            rest,
            FilterPipeline {
                max_chunk_size,
                filters,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(n: u32) -> FormatVersion {
        FormatVersion::new(n).unwrap()
    }

    fn round_trip(p: &FilterPipeline, version: FormatVersion) -> Vec<u8> {
        let mut out = Vec::new();
        p.write(version, &mut out);
        assert_eq!(&FilterPipeline::parse(&out, version).unwrap(), p);
        out
    }

    #[test]
    fn every_filter_round_trips() {
        let p = FilterPipeline {
            max_chunk_size: 65536,
            filters: vec![
                Filter::None,
                Filter::Gzip { level: 9 },
                Filter::Zstd { level: -1 },
                Filter::Lz4 { level: 1 },
                Filter::Rle { level: -1 },
                Filter::Bzip2 { level: 5 },
                Filter::Dictionary { level: -1 },
                Filter::DoubleDelta {
                    level: -1,
                    reinterpret: Some(Datatype::Int64),
                },
                Filter::Delta {
                    level: -1,
                    reinterpret: Some(Datatype::Any),
                },
                Filter::BitWidthReduction { max_window: 256 },
                Filter::Bitshuffle,
                Filter::Byteshuffle,
                Filter::PositiveDelta { max_window: 1024 },
                Filter::ChecksumMd5,
                Filter::ChecksumSha256,
                Filter::ScaleFloat {
                    scale: 0.5,
                    offset: 1.0,
                    byte_width: 4,
                },
                Filter::Xor,
                Filter::Webp {
                    quality: 100.0,
                    format: 1,
                    lossless: 1,
                    y_extent: 4,
                    x_extent: 12,
                    padding: [0, 0],
                },
            ],
        };
        round_trip(&p, v(22));
    }

    #[test]
    fn reinterpret_fields_follow_the_version() {
        let delta = |r| FilterPipeline {
            max_chunk_size: 1,
            filters: vec![Filter::Delta {
                level: -1,
                reinterpret: r,
            }],
        };
        let dd = |r| FilterPipeline {
            max_chunk_size: 1,
            filters: vec![Filter::DoubleDelta {
                level: -1,
                reinterpret: r,
            }],
        };
        assert_eq!(round_trip(&delta(None), v(18)).len(), 8 + 5 + 5);
        assert_eq!(
            round_trip(&delta(Some(Datatype::Int32)), v(19)).len(),
            8 + 5 + 6
        );
        assert_eq!(round_trip(&dd(None), v(19)).len(), 8 + 5 + 5);
        assert_eq!(round_trip(&dd(Some(Datatype::Any)), v(20)).len(), 8 + 5 + 6);
    }

    #[test]
    fn corrupt_pipelines_are_typed_errors() {
        let p = FilterPipeline {
            max_chunk_size: 65536,
            filters: vec![
                Filter::Zstd { level: 3 },
                Filter::ScaleFloat {
                    scale: 1.0,
                    offset: 0.0,
                    byte_width: 8,
                },
            ],
        };
        let bytes = round_trip(&p, v(22));
        for n in 0..bytes.len() {
            assert!(
                FilterPipeline::parse(&bytes[..n], v(22)).is_err(),
                "prefix {n}"
            );
        }
        let mut wrong = bytes.clone();
        wrong[13] = 1; // ZSTD's compressor byte says GZIP
        assert!(matches!(
            FilterPipeline::parse(&wrong, v(22)),
            Err(FilterError::BadOptions {
                filter: "ZSTD",
                index: 0,
                ..
            })
        ));
        let mut huge = bytes.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(FilterPipeline::parse(&huge, v(22)).is_err());
        let mut extra = bytes;
        extra.push(0);
        assert!(FilterPipeline::parse(&extra, v(22)).is_err());
    }
}
