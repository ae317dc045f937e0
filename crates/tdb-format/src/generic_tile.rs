//! The generic tile: a tile with a self-describing header, used for schemas,
//! fragment metadata parts, array metadata, groups, enumerations and more.
//!
//! The header is the same in every format version since 1 (TileDB 1.4):
//! version `u32`, persisted size `u64`, tile size `u64`, datatype `u8`, cell
//! size `u64`, encryption type `u8`, filter pipeline size `u32`, then the
//! serialized filter pipeline and the filtered bytes. The pipeline is kept
//! as raw bytes here; decoding it is `tdb-filters`' job.

use crate::le::{self, PResult};
use crate::{Datatype, EncryptionType, FormatError, FormatVersion, Result};

/// Bytes of the fixed part of the header, before the filter pipeline.
pub const GENERIC_TILE_BASE_SIZE: u64 = 34;

/// The fields of a generic tile header that are not derived from lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct GenericTileHeader {
    /// Format version of the writer.
    pub version: FormatVersion,
    /// Unfiltered size of the tile.
    pub tile_size: u64,
    /// Datatype of the tile's cells (CHAR for almost everything TileDB writes).
    pub datatype: Datatype,
    /// Size of one cell.
    pub cell_size: u64,
    /// Whether the filtered bytes are encrypted.
    pub encryption: EncryptionType,
}

impl GenericTileHeader {
    /// A header of these fields.
    pub fn new(
        version: FormatVersion,
        tile_size: u64,
        datatype: Datatype,
        cell_size: u64,
        encryption: EncryptionType,
    ) -> Self {
        GenericTileHeader {
            version,
            tile_size,
            datatype,
            cell_size,
            encryption,
        }
    }
}

/// A generic tile borrowed from a file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenericTile<'a> {
    /// The header fields.
    pub header: GenericTileHeader,
    /// The serialized filter pipeline, undecoded.
    pub filter_pipeline: &'a [u8],
    /// The filtered (persisted) tile bytes.
    pub data: &'a [u8],
}

impl GenericTile<'_> {
    /// Size of the filtered bytes as stored.
    pub fn persisted_size(&self) -> u64 {
        self.data.len() as u64
    }

    /// Bytes this tile occupies in its file, header included.
    pub fn encoded_len(&self) -> u64 {
        GENERIC_TILE_BASE_SIZE
            .saturating_add(self.filter_pipeline.len() as u64)
            .saturating_add(self.data.len() as u64)
    }

    /// Appends the tile in TileDB's layout: the mirror of [`generic_tile`].
    pub fn write(&self, out: &mut Vec<u8>) -> Result<()> {
        let pipeline_len =
            u32::try_from(self.filter_pipeline.len()).map_err(|_| FormatError::Invalid {
                field: "filter pipeline size",
                reason: format!("{} bytes do not fit a u32", self.filter_pipeline.len()),
            })?;
        le::put_u32(out, self.header.version.get());
        le::put_u64(out, self.persisted_size());
        le::put_u64(out, self.header.tile_size);
        le::put_u8(out, self.header.datatype.code());
        le::put_u64(out, self.header.cell_size);
        le::put_u8(out, self.header.encryption.code());
        le::put_u32(out, pipeline_len);
        out.extend_from_slice(self.filter_pipeline);
        out.extend_from_slice(self.data);
        Ok(())
    }
}

/// The size of a generic tile header before format versions (TileDB 1.3
/// and older): persisted size, tile size, datatype, cell size, compressor,
/// level.
const PRE_V1_HEADER: u64 = 8 + 8 + 1 + 8 + 1 + 4;

/// Parses one generic tile at the start of `input`, checking every length
/// against the bytes that remain.
pub fn generic_tile(input: &[u8]) -> PResult<'_, GenericTile<'_>> {
    let (rest, version) = le::u32("generic tile version")(input)?;
    let version = FormatVersion::new(version).map_err(|e| {
        // Before 1.4 the header began with the persisted size (a u64) and
        // was 30 bytes long: a file that is one such tile says so.
        let pre_v1 = input
            .first_chunk::<8>()
            .map(|b| u64::from_le_bytes(*b))
            .is_some_and(|persisted| {
                persisted.checked_add(PRE_V1_HEADER) == Some(input.len() as u64)
            });
        if pre_v1 {
            FormatError::BeforeVersion1
        } else {
            e
        }
    })?;
    let (rest, persisted_size) = le::u64("generic tile persisted size")(rest)?;
    let (rest, tile_size) = le::u64("generic tile size")(rest)?;
    let (rest, datatype) = le::code("generic tile datatype", Datatype::from_code)(rest)?;
    let (rest, cell_size) = le::u64("generic tile cell size")(rest)?;
    let (rest, encryption) =
        le::code("generic tile encryption type", EncryptionType::from_code)(rest)?;
    let (rest, pipeline_size) = le::u32("generic tile filter pipeline size")(rest)?;
    let (rest, filter_pipeline) =
        le::bytes("generic tile filter pipeline", u64::from(pipeline_size))(rest)?;
    let (rest, data) = le::bytes("generic tile data", persisted_size)(rest)?;
    let header = GenericTileHeader {
        version,
        tile_size,
        datatype,
        cell_size,
        encryption,
    };
    Ok((
        rest,
        GenericTile {
            header,
            filter_pipeline,
            data,
        },
    ))
}

/// Parses a file that must be exactly one generic tile (schemas, array
/// metadata, group details, enumerations, delete commits).
pub fn single_generic_tile(file: &[u8]) -> Result<GenericTile<'_>> {
    let (tile, rest) = le::run(generic_tile, file)?;
    if !rest.is_empty() {
        return Err(FormatError::Invalid {
            field: "generic tile",
            reason: format!("{} bytes follow the tile", rest.len()),
        });
    }
    Ok(tile)
}

/// A generic tile found in a file, with its byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocatedTile<'a> {
    /// Offset of the tile's header in the file.
    pub offset: u64,
    /// The tile.
    pub tile: GenericTile<'a>,
}

/// Whether `pipeline` is framed like a serialized filter pipeline: max chunk
/// size, filter count, then per filter a known type code and a length-prefixed
/// options block, ending exactly at the end. Decoding the options is
/// `tdb-filters`' job; this only tells a real header from look-alike bytes.
pub fn pipeline_is_well_framed(pipeline: &[u8]) -> bool {
    let parse = |input| -> PResult<'_, ()> {
        let (mut rest, _max_chunk) = le::u32("max chunk size")(input)?;
        let n;
        (rest, n) = le::u32("filter count")(rest)?;
        for _ in 0..n {
            let (r, _) = le::code("filter type", crate::FilterType::from_code)(rest)?;
            let (r, _) = le::bytes_u32("filter options")(r)?;
            rest = r;
        }
        Ok((rest, ()))
    };
    matches!(parse(pipeline), Ok((rest, ())) if rest.is_empty())
}

fn well_framed_tile(input: &[u8]) -> Option<(&[u8], GenericTile<'_>)> {
    generic_tile(input)
        .ok()
        .filter(|(_, t)| pipeline_is_well_framed(t.filter_pipeline))
}

/// Splits a file that is a run of generic tiles followed by bytes that are
/// not one. Stops at the first position where no complete header with a
/// known version, datatype and encryption, a well-framed pipeline and sizes
/// within the file starts. Look-alike bytes can fool this; for fragment
/// metadata use [`fragment_metadata_tiles`], which knows where the footer is.
pub fn generic_tile_run(file: &[u8]) -> (Vec<LocatedTile<'_>>, &[u8]) {
    let mut tiles = Vec::new();
    let mut rest = file;
    while let Some((after, tile)) = well_framed_tile(rest) {
        tiles.push(LocatedTile {
            offset: file.len().saturating_sub(rest.len()) as u64,
            tile,
        });
        rest = after;
    }
    (tiles, rest)
}

/// Splits a fragment metadata file into its generic tiles and its footer.
///
/// The footer itself is not parsed (that needs the schema), so a truncated
/// file whose last bytes pass for a footer can be split wrongly; the footer
/// parser in `tdb-fragment` catches it.
///
/// - v1–v2: the whole file is one generic tile; the footer is empty.
/// - v10+: the footer ends with its own `u64` length, which fixes where the
///   tiles stop; the footer must start with the fragment's version.
/// - v3–v9: the tiles are walked, and the footer is the first remainder that
///   starts with the fragment's version (the footer's first field), so
///   footer bytes that happen to look like a tile header are not taken for one.
pub fn fragment_metadata_tiles(file: &[u8]) -> Result<(Vec<LocatedTile<'_>>, &[u8])> {
    let (first, _) = le::run(generic_tile, file)?;
    let version = first.header.version;
    if !version.has_fragment_metadata_footer() {
        let tile = single_generic_tile(file)?;
        return Ok((vec![LocatedTile { offset: 0, tile }], &[]));
    }
    if version.has_schema_evolution() {
        let too_short = || FormatError::Truncated {
            field: "fragment metadata footer length",
            needed: 8,
            available: file.len() as u64,
        };
        let tail_at = file.len().checked_sub(8).ok_or_else(too_short)?;
        let tail = file.get(tail_at..).ok_or_else(too_short)?;
        let (footer_len, _) = le::run(le::u64("fragment metadata footer length"), tail)?;
        let footer_start = u64::try_from(tail_at)
            .ok()
            .and_then(|t| t.checked_sub(footer_len))
            .ok_or_else(|| FormatError::Invalid {
                field: "fragment metadata footer length",
                reason: format!("{footer_len} exceeds the file's {} bytes", file.len()),
            })? as usize;
        let (before, footer) = file.split_at_checked(footer_start).ok_or_else(too_short)?;
        let (tiles, rest) = generic_tile_run(before);
        if !rest.is_empty() {
            return Err(FormatError::Invalid {
                field: "fragment metadata",
                reason: format!(
                    "{} bytes before the footer are not generic tiles",
                    rest.len()
                ),
            });
        }
        if !footer.starts_with(&version.get().to_le_bytes()) {
            return Err(FormatError::Invalid {
                field: "fragment metadata footer",
                reason: format!("does not start with the fragment's version {version}"),
            });
        }
        return Ok((tiles, footer));
    }
    let (mut tiles, _) = generic_tile_run(file);
    let version_bytes = version.get().to_le_bytes();
    loop {
        let end = tiles
            .last()
            .map_or(0, |t| t.offset.saturating_add(t.tile.encoded_len()));
        // A tile the run found ends within the file.
        let after = usize::try_from(end).ok().and_then(|e| file.get(e..));
        if let Some(footer) = after.filter(|f| f.starts_with(&version_bytes)) {
            return Ok((tiles, footer));
        }
        if tiles.pop().is_none() {
            return Err(FormatError::Invalid {
                field: "fragment metadata footer",
                reason: format!("no footer starting with version {version} follows the tiles"),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let tile = GenericTile {
            header: GenericTileHeader {
                version: FormatVersion::new(22).unwrap(),
                tile_size: 5,
                datatype: Datatype::Char,
                cell_size: 1,
                encryption: EncryptionType::NoEncryption,
            },
            filter_pipeline: &[0, 0, 1, 0, 0, 0, 0, 0],
            // max chunk 65536, no filters
            data: b"hello",
        };
        let mut out = Vec::new();
        tile.write(&mut out).unwrap();
        out
    }

    #[test]
    fn write_then_parse() {
        let bytes = sample();
        assert_eq!(bytes.len() as u64, GENERIC_TILE_BASE_SIZE + 8 + 5);
        let tile = single_generic_tile(&bytes).unwrap();
        assert_eq!(tile.data, b"hello");
        assert_eq!(tile.header.version.get(), 22);
        let mut again = Vec::new();
        tile.write(&mut again).unwrap();
        assert_eq!(again, bytes);
    }

    #[test]
    fn every_prefix_is_a_typed_error() {
        let bytes = sample();
        for n in 0..bytes.len() {
            assert!(single_generic_tile(&bytes[..n]).is_err(), "prefix {n}");
        }
    }

    #[test]
    fn runs_stop_at_the_footer() {
        let mut bytes = sample();
        bytes.extend(sample());
        bytes.extend_from_slice(&[9, 9, 9]);
        let (tiles, rest) = generic_tile_run(&bytes);
        assert_eq!(tiles.len(), 2);
        assert_eq!(tiles[1].offset, 47);
        assert!(!pipeline_is_well_framed(&[0, 0, 1, 0, 1, 0, 0, 0]));
        assert!(pipeline_is_well_framed(&[
            0, 0, 1, 0, 1, 0, 0, 0, 2, 4, 0, 0, 0, 1, 2, 3, 4
        ]));
        assert_eq!(rest, &[9, 9, 9]);
    }

    #[test]
    fn bad_codes_are_named() {
        let mut bytes = sample();
        bytes[20] = 99; // datatype
        assert!(matches!(
            single_generic_tile(&bytes),
            Err(FormatError::UnknownCode {
                kind: "datatype",
                code: 99
            })
        ));
    }
}
