//! Loading an array's schemas and enumerations from storage, for callers
//! that want nothing else of the array.

use crate::open::{list_object, read_files, schema_history, ReadStorage};
use crate::{FragmentError, Result};
use tdb_format::names::{ENUMERATIONS_DIR, SCHEMA_DIR};
use tdb_schema::{Enumeration, SchemaEntry, SchemaHistory};
use tdb_storage::{join, ByteRange, RangeRequest, ReadableStorage};

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

/// The key of enumeration file `path` (as an `EnumerationRef` names it) of
/// the array at `dir`.
pub(crate) fn enumeration_file(dir: &str, path: &str) -> String {
    join(dir, &format!("{SCHEMA_DIR}/{ENUMERATIONS_DIR}/{path}"))
}

/// Parses enumeration file `file` (`None`: it is missing).
pub(crate) fn parse_enumeration(
    file: &str,
    bytes: Option<&[u8]>,
    key: Option<&[u8; 32]>,
) -> Result<Enumeration> {
    let bytes = bytes.ok_or_else(|| FragmentError::missing(file, "enumeration file"))?;
    Enumeration::from_file(file, bytes, key).map_err(|e| FragmentError::schema(file, e))
}

/// The files of the enumerations `entry`'s attributes refer to, in
/// `ArraySchema::referenced_enumerations` order.
pub(crate) fn referenced_enumeration_files(dir: &str, entry: &SchemaEntry) -> Result<Vec<String>> {
    entry
        .schema
        .referenced_enumerations()
        .into_iter()
        .map(|name| match entry.schema.enumeration(name) {
            Some(e) => Ok(enumeration_file(dir, &e.path)),
            None => Err(FragmentError::invalid(
                &join(dir, &entry.file()),
                "enumerations",
                format!("attributes refer to {name:?}, which the schema does not list"),
            )),
        })
        .collect()
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
    let file = enumeration_file(dir, path);
    let bytes = storage
        .read(&file)
        .map_err(|e| FragmentError::storage(&file, e))?;
    parse_enumeration(&file, bytes.as_deref(), key)
}

/// The enumerations `entry`'s attributes refer to, in
/// `ArraySchema::referenced_enumerations` order, read in one batch.
pub fn load_referenced_enumerations<S>(
    storage: &S,
    dir: &str,
    entry: &SchemaEntry,
    key: Option<&[u8; 32]>,
) -> Result<Vec<Enumeration>>
where
    S: ReadableStorage + ?Sized,
{
    let files = referenced_enumeration_files(dir, entry)?;
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let requests: Vec<RangeRequest> = files
        .iter()
        .map(|f| RangeRequest::new(f.as_str(), ByteRange::Whole))
        .collect();
    let got = storage
        .read_ranges(&requests)
        .map_err(|e| FragmentError::storage(dir, e))?;
    files
        .iter()
        .zip(got)
        .map(|(f, read)| parse_enumeration(f, read.as_ref().map(|r| &r.bytes[..]), key))
        .collect()
}
