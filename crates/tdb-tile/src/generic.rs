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
    let data = filters.unfilter_whole(location, tile.data, false)?.data;
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
