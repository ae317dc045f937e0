//! Loading an array's schemas and enumerations from storage, for callers
//! that want nothing else of the array.

use crate::open::{list_object, read_files, schema_history, ReadStorage};
use crate::{FragmentError, Result};
use tdb_format::names::{ENUMERATIONS_DIR, SCHEMA_DIR};
use tdb_schema::{Enumeration, SchemaEntry, SchemaHistory};
use tdb_storage::{join, ReadableStorage};

/// Every schema of the array at `dir` of `storage`, in TileDB's order: the
/// pre-v10 `__array_schema.tdb` if present, then every file of `__schema/`
/// (enumerations are not schemas), read in one batch. Encrypted arrays need
/// their `key`.
pub fn load_schemas<S: ReadStorage + ?Sized>(
    storage: &S,
    dir: &str,
    key: Option<&[u8; 32]>,
) -> Result<SchemaHistory> {
    let listing = list_object(storage, dir)?;
    let files = listing.schema_files();
    let paths: Vec<&str> = files.iter().map(String::as_str).collect();
    let contents = read_files(storage, dir, &paths)?;
    schema_history(dir, &files, &contents, key)
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
