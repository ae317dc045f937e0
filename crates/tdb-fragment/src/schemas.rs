//! Loading an array's schemas and enumerations from storage: one listing
//! per schema directory and one batched read of every schema file.

use crate::{FragmentError, Result};
use tdb_format::names::{ENUMERATIONS_DIR, LEGACY_SCHEMA_FILE, SCHEMA_DIR};
use tdb_schema::{Enumeration, SchemaEntry, SchemaHistory};
use tdb_storage::{join, ByteRange, ListableStorage, RangeRequest, ReadableStorage};

/// Every schema of the array at `dir` of `storage`, in TileDB's order: the
/// pre-v10 `__array_schema.tdb` if present, then every file of `__schema/`
/// (enumerations are not schemas). Encrypted arrays need their `key`.
pub fn load_schemas<S>(storage: &S, dir: &str, key: Option<&[u8; 32]>) -> Result<SchemaHistory>
where
    S: ReadableStorage + ListableStorage + ?Sized,
{
    let list = |d: &str| {
        storage
            .list_dir(d)
            .map_err(|e| FragmentError::storage(d, e))
    };
    let mut files = Vec::new();
    let root = list(dir)?;
    files.extend(
        root.files
            .into_iter()
            .filter(|f| f.name() == LEGACY_SCHEMA_FILE),
    );
    files.extend(list(&join(dir, SCHEMA_DIR))?.files);
    let requests: Vec<_> = files
        .iter()
        .map(|f| RangeRequest::new(f.key.clone(), ByteRange::new(0, f.size)))
        .collect();
    let contents = storage
        .read_ranges(&requests)
        .map_err(|e| FragmentError::storage(&join(dir, SCHEMA_DIR), e))?;
    let entries = files
        .iter()
        .zip(contents)
        .map(|(f, bytes)| {
            let bytes = bytes.ok_or_else(|| FragmentError::missing(&f.key, "schema file"))?;
            SchemaEntry::from_file(f.name(), &bytes, key)
                .map_err(|e| FragmentError::schema(&f.key, e))
        })
        .collect::<Result<Vec<_>>>()?;
    SchemaHistory::new(entries).map_err(|e| FragmentError::schema(dir, e))
}

/// The enumeration file `path` (as an `EnumerationRef` names it) of the
/// array at `dir`.
pub fn load_enumeration<S>(
    storage: &S,
    dir: &str,
    path: &str,
    key: Option<&[u8; 32]>,
) -> Result<Enumeration>
where
    S: ReadableStorage + ?Sized,
{
    let file = join(dir, &format!("{SCHEMA_DIR}/{ENUMERATIONS_DIR}/{path}"));
    let bytes = storage
        .read(&file)
        .map_err(|e| FragmentError::storage(&file, e))?
        .ok_or_else(|| FragmentError::missing(&file, "enumeration file"))?;
    Enumeration::from_file(&file, &bytes, key).map_err(|e| FragmentError::schema(&file, e))
}

/// The enumerations `entry`'s attributes refer to, in
/// `ArraySchema::referenced_enumerations` order.
pub fn load_referenced_enumerations<S>(
    storage: &S,
    dir: &str,
    entry: &SchemaEntry,
    key: Option<&[u8; 32]>,
) -> Result<Vec<Enumeration>>
where
    S: ReadableStorage + ?Sized,
{
    entry
        .schema
        .referenced_enumerations()
        .into_iter()
        .map(|name| match entry.schema.enumeration(name) {
            Some(e) => load_enumeration(storage, dir, &e.path, key),
            None => Err(FragmentError::invalid(
                &join(dir, &entry.file()),
                "enumerations",
                format!("attributes refer to {name:?}, which the schema does not list"),
            )),
        })
        .collect()
}
