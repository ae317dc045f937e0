//! `tdb schema`: the array schema in force, as a text dump or the
//! conformance JSON summary.

use crate::summary;
use crate::CliError;
use serde_json::Value;
use tdb_format::TimestampedName;
use tdb_schema::{ArraySchema, Enumeration};
use tdb_storage::Storage;

/// The schema file in force at `at` (the latest when `None`): of
/// `__schema/` (v10+) the last in TileDB's order of timestamped names whose
/// range ends at or before `at`; before v10 the one `__array_schema.tdb`.
pub fn schema_file(storage: &dyn Storage, at: Option<u64>) -> Result<String, CliError> {
    if storage.is_dir("__schema")? {
        let mut best: Option<(TimestampedName, String)> = None;
        for entry in storage.list("__schema")? {
            if entry.is_dir {
                continue; // __enumerations
            }
            let name = TimestampedName::parse(entry.name()).map_err(|source| CliError::Format {
                path: entry.path.clone(),
                source,
            })?;
            if at.is_some_and(|t| name.timestamp_range().1 > t) {
                continue;
            }
            if best.as_ref().is_none_or(|(b, _)| name > *b) {
                best = Some((name, entry.path.clone()));
            }
        }
        return best.map(|(_, p)| p).ok_or_else(|| {
            CliError::NotAnObject(match at {
                Some(t) => format!("no schema at or before timestamp {t}"),
                None => "no schema file in __schema".to_owned(),
            })
        });
    }
    if storage.is_file("__array_schema.tdb")? {
        return Ok("__array_schema.tdb".to_owned());
    }
    Err(CliError::NotAnObject("no array schema".to_owned()))
}

/// The schema in force at `at`, and its enumerations in the order
/// attributes first refer to them (as the conformance summary lists them).
pub fn load(
    storage: &dyn Storage,
    at: Option<u64>,
    key: Option<&[u8; 32]>,
) -> Result<(ArraySchema, Vec<Enumeration>), CliError> {
    let file = schema_file(storage, at)?;
    let schema = ArraySchema::from_file(&file, &storage.read(&file)?, key)?;
    let mut referenced: Vec<&str> = Vec::new();
    for name in schema
        .attributes
        .iter()
        .filter_map(|a| a.enumeration.as_deref())
    {
        if !referenced.contains(&name) {
            referenced.push(name);
        }
    }
    let mut enumerations = Vec::new();
    for name in referenced {
        let Some(e) = schema.enumerations.iter().find(|e| e.name == name) else {
            return Err(CliError::Output(format!(
                "{file}: enumeration {name} is not listed"
            )));
        };
        let path = format!("__schema/__enumerations/{}", e.path);
        enumerations.push(Enumeration::from_file(&path, &storage.read(&path)?, key)?);
    }
    Ok((schema, enumerations))
}

/// The conformance summary of a loaded schema.
pub fn summary(schema: &ArraySchema, enumerations: &[Enumeration]) -> Value {
    summary::summary(
        schema,
        enumerations.iter().map(summary::enumeration).collect(),
    )
}
