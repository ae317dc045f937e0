//! Creating arrays and writing the small files a write commits: schemas,
//! enumerations. An array is its schema file: TileDB lists missing
//! directories as empty (local and object stores alike), so nothing else
//! must exist before the first write, and no empty directory is made.

use crate::open::{object_kind, ReadStorage};
use crate::{FragmentError, Result};
use bytes::Bytes;
use tdb_format::names::{ENUMERATIONS_DIR, SCHEMA_DIR};
use tdb_format::{FormatVersion, TimestampedName};
use tdb_schema::{ArraySchema, Enumeration, SchemaEntry, SchemaError};
use tdb_storage::{join, WritableStorage};

/// Creates an array at `dir`: checks `schema` by TileDB's rules, refuses a
/// directory that already holds a TileDB object, then writes the
/// enumerations and the schema file (last: it is what makes the directory
/// an array) stamped `timestamp`. `key` encrypts both (AES-256-GCM).
pub fn create_array<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    schema: &ArraySchema,
    enumerations: &[Enumeration],
    key: Option<&[u8; 32]>,
    timestamp: u64,
) -> Result<SchemaEntry> {
    let label = if dir.is_empty() { "." } else { dir };
    schema
        .validate()
        .map_err(|e| FragmentError::schema(label, SchemaError::from(e)))?;
    if let Some(kind) = object_kind(storage, dir)? {
        return Err(FragmentError::invalid(
            label,
            "directory",
            format!("already holds a TileDB {}", kind.name()),
        ));
    }
    for e in enumerations {
        write_enumeration(storage, dir, e, key)?;
    }
    write_schema(storage, dir, schema, (timestamp, timestamp), key)
}

/// Writes `schema` as a new schema file of the array at `dir`, named for
/// `timestamps` (TileDB's schema names carry no format version), in the
/// written format version's layout.
pub fn write_schema<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    schema: &ArraySchema,
    (t1, t2): (u64, u64),
    key: Option<&[u8; 32]>,
) -> Result<SchemaEntry> {
    let name = TimestampedName::generate(t1, t2, None)
        .map_err(|e| FragmentError::format(SCHEMA_DIR, "schema name", e))?;
    let mut schema = schema.clone();
    schema.version = schema.written_version();
    let file = format!("{SCHEMA_DIR}/{name}");
    let bytes = schema
        .write_file(&file, key)
        .map_err(|e| FragmentError::schema(&file, e))?;
    put(storage, &join(dir, &file), bytes)?;
    Ok(SchemaEntry {
        name: name.to_string(),
        timestamps: Some(name),
        schema,
    })
}

/// Writes an enumeration file where the schema's reference (its `path`)
/// points, at the written format version.
pub fn write_enumeration<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    enumeration: &Enumeration,
    key: Option<&[u8; 32]>,
) -> Result<()> {
    let file = format!("{SCHEMA_DIR}/{ENUMERATIONS_DIR}/{}", enumeration.path);
    let bytes = enumeration
        .write_file(&file, FormatVersion::WRITTEN, key)
        .map_err(|e| FragmentError::schema(&file, e))?;
    put(storage, &join(dir, &file), bytes)
}

/// One whole-object write.
pub(crate) fn put<S: WritableStorage + ?Sized>(
    storage: &S,
    key: &str,
    bytes: Vec<u8>,
) -> Result<()> {
    storage
        .write(key, Bytes::from(bytes))
        .map_err(|e| FragmentError::storage(key, e))
}
