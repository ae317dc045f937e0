//! Files (and sections) that are one generic tile: metadata, group details,
//! delete and update commits, consolidated fragment metadata, fragment
//! metadata sections. One way in and one way out, so every structure of
//! this crate reads and writes its tile the same way and names it the same
//! way in errors.

use crate::{FragmentError, Result};
use tdb_format::FormatVersion;

/// The unfiltered content of `bytes`, which must be exactly one generic
/// tile (decrypted with `key` when encrypted). `what` names the tile.
pub(crate) fn read_tile_file(
    file: &str,
    what: &str,
    bytes: &[u8],
    key: Option<&[u8; 32]>,
) -> Result<Vec<u8>> {
    tdb_tile::read_generic_tile_file(file, bytes, key)
        .map_err(|e| FragmentError::tile(file, what, e))
}

/// `content` as one generic tile of format `version`, as TileDB writes it
/// (GZIP level 1, then AES-256-GCM when a key is given).
pub(crate) fn write_tile_file(
    file: &str,
    what: &str,
    version: FormatVersion,
    content: &[u8],
    key: Option<&[u8; 32]>,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    tdb_tile::write_generic_tile(file, version, content, key, &mut out)
        .map_err(|e| FragmentError::tile(file, what, e))?;
    Ok(out)
}
