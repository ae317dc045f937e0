//! `tdb schema`: the array schema in force, as a text dump or the
//! conformance JSON summary.

use crate::summary;
use crate::CliError;
use serde_json::Value;
use tdb_schema::{ArraySchema, Enumeration, SchemaEntry};
use tdb_storage::Storage;

/// The schema in force at `at` (TileDB's rule for reads opened at a
/// timestamp; the latest when `None`), and its enumerations in the order
/// attributes first refer to them (as the conformance summary lists them).
pub fn load(
    storage: &dyn Storage,
    at: Option<u64>,
    key: Option<&[u8; 32]>,
) -> Result<(SchemaEntry, Vec<Enumeration>), CliError> {
    let history = tdb_fragment::load_schemas(storage, "", key)?;
    let entry = match at {
        Some(t) => history.at(t),
        None => history.latest(),
    };
    let enumerations = tdb_fragment::load_referenced_enumerations(storage, "", entry, key)?;
    Ok((entry.clone(), enumerations))
}

/// The conformance summary of a loaded schema.
pub fn summary(schema: &ArraySchema, enumerations: &[Enumeration]) -> Result<Value, CliError> {
    let enumerations = enumerations
        .iter()
        .map(summary::enumeration)
        .collect::<Result<_, _>>()?;
    Ok(summary::summary(schema, enumerations))
}

/// The conformance summary of the schema an opened array reads with, its
/// enumerations in the order attributes first refer to them.
pub fn snapshot_summary(snapshot: &tdb::Snapshot) -> Result<Value, CliError> {
    let schema = snapshot.schema();
    let enumerations = schema
        .referenced_enumerations()
        .into_iter()
        .map(|name| {
            snapshot
                .enumerations
                .get(name)
                .ok_or_else(|| {
                    CliError::from(tdb_fragment::FragmentError::missing(
                        &snapshot.open.schema().file(),
                        format!("enumeration {name:?}"),
                    ))
                })
                .and_then(|e| Ok(summary::enumeration(e)?))
        })
        .collect::<Result<_, _>>()?;
    Ok(summary::summary(schema, enumerations))
}

/// The schema and enumerations a JSON file describes, for `tdb create`:
/// the conformance summary that `tdb schema --json` prints, or a whole
/// conformance case's `expected.json` (its `schema`). `file` names it in
/// errors.
pub fn from_json(file: &str, text: &str) -> Result<(ArraySchema, Vec<Enumeration>), CliError> {
    let input = |reason: String| CliError::Input {
        file: file.to_owned(),
        reason,
    };
    let v: Value = serde_json::from_str(text).map_err(|e| input(e.to_string()))?;
    let v = v.get("schema").unwrap_or(&v);
    summary::parse(v).map_err(input)
}
