//! `tdb schema`: the array schema in force, as a text dump or the
//! conformance JSON summary.

use crate::summary;
use crate::CliError;
use serde_json::Value;
use tdb_schema::{ArraySchema, Enumeration, SchemaEntry, SchemaHistory};
use tdb_storage::Storage;

/// The schema in force at `at` (TileDB's rule for reads opened at a
/// timestamp; the latest when `None`), and its enumerations in the order
/// attributes first refer to them (as the conformance summary lists them).
pub fn load(
    storage: &dyn Storage,
    at: Option<u64>,
    key: Option<&[u8; 32]>,
) -> Result<(SchemaEntry, Vec<Enumeration>), CliError> {
    let history = SchemaHistory::load(storage, key)?;
    let entry = match at {
        Some(t) => history.at(t),
        None => history.latest(),
    };
    let schema = &entry.schema;
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
            let file = entry.file();
            return Err(CliError::Output(format!(
                "{file}: enumeration {name} is not listed"
            )));
        };
        enumerations.push(SchemaHistory::enumeration(storage, &e.path, key)?);
    }
    Ok((entry.clone(), enumerations))
}

/// The conformance summary of a loaded schema.
pub fn summary(schema: &ArraySchema, enumerations: &[Enumeration]) -> Value {
    summary::summary(
        schema,
        enumerations.iter().map(summary::enumeration).collect(),
    )
}
