//! Generic tiles: schemas, fragment metadata, array metadata, groups and
//! more are each one tile with a self-describing header that carries its
//! own filter pipeline (GZIP level 1 from TileDB, plus AES-256-GCM when the
//! array is encrypted).

use crate::tile::TileFilters;
use crate::{Result, TileError};
use tdb_filters::{Filter, FilterPipeline, Workspace};
use tdb_format::{
    single_generic_tile, Datatype, EncryptionType, FormatVersion, GenericTile, GenericTileHeader,
};

/// TileDB's `constants::generic_tile_compression_level` for GZIP.
pub const GENERIC_TILE_GZIP_LEVEL: i32 = 1;

/// Unfilters a parsed generic tile. `location` names it in errors. The key
/// is needed only when the header says the tile is encrypted.
pub fn read_generic_tile(
    location: &str,
    tile: &GenericTile<'_>,
    key: Option<&[u8; 32]>,
) -> Result<Vec<u8>> {
    let header = &tile.header;
    let pipeline =
        FilterPipeline::parse(tile.filter_pipeline, header.version).map_err(|source| {
            TileError::Pipeline {
                location: location.to_owned(),
                source,
            }
        })?;
    let encrypted = pipeline
        .filters
        .iter()
        .any(|f| matches!(f, Filter::InternalAes256Gcm));
    if encrypted != (header.encryption == EncryptionType::Aes256Gcm) {
        return Err(TileError::Corrupt {
            location: location.to_owned(),
            reason: format!(
                "header says {} but the pipeline {} the encryption filter",
                header.encryption.name(),
                if encrypted { "has" } else { "lacks" }
            ),
        });
    }
    let filters = TileFilters {
        key,
        ..TileFilters::new(&pipeline, header.datatype, header.cell_size, header.version)
    };
    // What the chunks promise must be what the header says, and no more
    // than TileDB's generic tile filters (GZIP, checksums, encryption) can
    // make of the stored bytes, before anything is decoded: a lying size
    // sizes no allocation.
    let chunks = filters.chunks(location, tile.data)?;
    let promised = crate::unfiltered_size(&chunks);
    let most = (tile.data.len() as u64)
        .saturating_mul(GENERIC_TILE_MAX_RATIO)
        .saturating_add(64 << 10);
    if promised != header.tile_size || promised > most {
        return Err(TileError::Corrupt {
            location: location.to_owned(),
            reason: format!(
                "its chunks promise {promised} bytes from {} stored, its header {}",
                tile.data.len(),
                header.tile_size
            ),
        });
    }
    let data = filters.unfilter_whole(location, tile.data, false)?.data;
    tdb_format::span::decoded(tile.data, &data, "generic tile contents");
    if data.len() as u64 != header.tile_size {
        return Err(TileError::Corrupt {
            location: location.to_owned(),
            reason: format!(
                "the tile unfilters to {} bytes, its header says {}",
                data.len(),
                header.tile_size
            ),
        });
    }
    Ok(data)
}

/// The most a generic tile's bytes expand: deflate's 1032-fold (TileDB
/// compresses generic tiles with GZIP; its other filters there, checksums
/// and encryption, do not expand).
const GENERIC_TILE_MAX_RATIO: u64 = 1032;

/// Reads a file that is exactly one generic tile (a schema, an enumeration,
/// array metadata, group details) and unfilters it.
pub fn read_generic_tile_file(
    location: &str,
    bytes: &[u8],
    key: Option<&[u8; 32]>,
) -> Result<Vec<u8>> {
    let tile = single_generic_tile(bytes).map_err(|source| TileError::Format {
        location: location.to_owned(),
        source,
    })?;
    read_generic_tile(location, &tile, key)
}

/// Writes `data` as one generic tile the way TileDB does: CHAR cells of one
/// byte, GZIP level 1, then AES-256-GCM when a key is given. Appends the
/// header and the filtered bytes to `out`.
pub fn write_generic_tile(
    location: &str,
    version: FormatVersion,
    data: &[u8],
    key: Option<&[u8; 32]>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let mut pipeline = FilterPipeline::new([Filter::Gzip {
        level: GENERIC_TILE_GZIP_LEVEL,
    }]);
    if key.is_some() {
        pipeline.filters.push(Filter::InternalAes256Gcm);
    }
    let filters = TileFilters::new(&pipeline, Datatype::Char, 1, version).with_key(key);
    let mut filtered = Vec::new();
    filters.filter(
        location,
        &mut Workspace::default(),
        data,
        None,
        &mut filtered,
    )?;
    let mut serialized = Vec::new();
    pipeline.write(version, &mut serialized);
    let tile = GenericTile {
        header: GenericTileHeader::new(
            version,
            data.len() as u64,
            Datatype::Char,
            1,
            if key.is_some() {
                EncryptionType::Aes256Gcm
            } else {
                EncryptionType::NoEncryption
            },
        ),
        filter_pipeline: &serialized,
        data: &filtered,
    };
    tile.write(out).map_err(|source| TileError::Format {
        location: location.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A generic tile whose header and chunk promise more than its bytes
    /// can hold is refused before anything is decoded; one that keeps its
    /// word reads back.
    #[test]
    fn a_generic_tile_promising_more_than_its_bytes_hold_is_refused() {
        let content = vec![7u8; 1000];
        let mut file = Vec::new();
        write_generic_tile("t", FormatVersion::WRITTEN, &content, None, &mut file).unwrap();
        assert_eq!(read_generic_tile_file("t", &file, None).unwrap(), content);
        let tile = single_generic_tile(&file).unwrap();
        // Header: version u32, persisted u64, tile size u64 (at 12), ...;
        // the data starts with the chunk count u64, then the first chunk's
        // unfiltered size u32.
        let data_at = file.len() - tile.data.len();
        let huge: u32 = 0xFFFF_FFF0;
        let mut bad = file.clone();
        bad[12..20].copy_from_slice(&u64::from(huge).to_le_bytes());
        bad[data_at + 8..data_at + 12].copy_from_slice(&huge.to_le_bytes());
        let err = read_generic_tile_file("t", &bad, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("promise"), "{err}");
    }
}
