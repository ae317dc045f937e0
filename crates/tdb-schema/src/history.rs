//! Schema evolution as data: every schema file of an array, in TileDB's
//! order (listing and reading them is the array directory's job, in
//! `tdb-fragment`), with TileDB 2.30's rules for which one is in force at a timestamp
//! (`ArrayDirectory::select_latest_array_schema_uri`) and which one a
//! fragment uses (by the name in its metadata footer).

use crate::change::{diff, SchemaChange};
use crate::{ArraySchema, Enumeration, Result, SchemaError};
use std::collections::HashMap;
use tdb_format::names::{LEGACY_SCHEMA_FILE, SCHEMA_DIR};
use tdb_format::TimestampedName;

/// The one schema file of arrays before format v10, and the schema name
/// TileDB gives fragments of those versions (their footers name none).
pub const LEGACY_SCHEMA_NAME: &str = LEGACY_SCHEMA_FILE;

/// One schema file of an array.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaEntry {
    /// The file name, as fragment footers name it: `__t1_t2_uuid`, or
    /// [`LEGACY_SCHEMA_NAME`].
    pub name: String,
    /// The name's timestamps; `None` for the legacy file, which has none.
    pub timestamps: Option<TimestampedName>,
    /// The parsed schema.
    pub schema: ArraySchema,
}

impl SchemaEntry {
    /// Parses the schema file `name` (its bytes, encrypted when `key` is
    /// given). Any name but [`LEGACY_SCHEMA_NAME`] must be timestamped.
    pub fn from_file(name: &str, bytes: &[u8], key: Option<&[u8; 32]>) -> Result<Self> {
        let file = file_key(name);
        let timestamps = if name == LEGACY_SCHEMA_NAME {
            None
        } else {
            let t = TimestampedName::parse(name).map_err(|source| SchemaError::Format {
                file: file.clone(),
                field: "schema file name".into(),
                source,
            })?;
            Some(t)
        };
        Ok(SchemaEntry {
            name: name.to_owned(),
            timestamps,
            schema: ArraySchema::from_file(&file, bytes, key)?,
        })
    }

    /// The file's key relative to the array directory.
    pub fn file(&self) -> String {
        file_key(&self.name)
    }
}

fn file_key(name: &str) -> String {
    if name == LEGACY_SCHEMA_NAME {
        name.to_owned()
    } else {
        format!("{SCHEMA_DIR}/{name}")
    }
}

/// One evolution: the changes from one schema to the next.
#[derive(Debug, Clone, PartialEq)]
pub struct Evolution {
    /// The earlier schema's name.
    pub from: String,
    /// The later schema's name.
    pub to: String,
    /// What changed.
    pub changes: Vec<SchemaChange>,
}

/// All schemas of an array, never empty, in TileDB's order: the legacy file
/// first, then `__schema/` by name bytes (TileDB sorts every listing by
/// path). That is timestamp order whenever the timestamps have as many
/// digits, as real millisecond timestamps do; TileDB itself uses the
/// listing order, so tdb does too.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaHistory {
    entries: Vec<SchemaEntry>,
}

impl SchemaHistory {
    /// Orders parsed schema files. An array without any schema is an error
    /// (TileDB: "Array does not exist"), as is a name given twice.
    pub fn new(mut entries: Vec<SchemaEntry>) -> Result<Self> {
        entries.sort_by(|a, b| {
            let timestamped = |e: &SchemaEntry| e.timestamps.is_some();
            (timestamped(a), &a.name).cmp(&(timestamped(b), &b.name))
        });
        if entries.is_empty() {
            return Err(
                SchemaError::invalid("array schema", "the array has none").in_file(SCHEMA_DIR)
            );
        }
        let mut pairs = entries.iter().zip(entries.iter().skip(1));
        if let Some((a, _)) = pairs.find(|(a, b)| a.name == b.name) {
            return Err(SchemaError::invalid("schema file name", "given twice").in_file(&a.file()));
        }
        Ok(SchemaHistory { entries })
    }

    /// Every schema, in TileDB's order.
    pub fn entries(&self) -> &[SchemaEntry] {
        &self.entries
    }

    /// The last schema: what TileDB writes and evolves with (any open mode
    /// but read), and what a read sees when no schema is in the future.
    pub fn latest(&self) -> &SchemaEntry {
        self.at(u64::MAX)
    }

    /// The schema a read of the array opened at `timestamp` uses: the last
    /// timestamped one whose end timestamp is at most `timestamp`, else the
    /// first of all, so that fragments older than every schema and legacy
    /// arrays still open (TileDB's rule and its reasons).
    pub fn at(&self, timestamp: u64) -> &SchemaEntry {
        let in_force = |e: &&SchemaEntry| e.timestamps.as_ref().is_some_and(|t| t.t2 <= timestamp);
        let first = || self.entries.first();
        let found = self.entries.iter().rev().find(in_force).or_else(first);
        // `new` refuses an empty history.
        found.unwrap_or_else(|| unreachable!("a schema history is never empty"))
    }

    /// The schema a fragment uses, by the name in its metadata footer (v10),
    /// or [`LEGACY_SCHEMA_NAME`] for older fragments.
    pub fn by_name(&self, name: &str) -> Option<&SchemaEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// What each evolution changed. `enumeration` loads an enumeration by
    /// its path (as [`crate::EnumerationRef`] names it); it is called only
    /// for enumerations whose path changed, each path once.
    pub fn evolutions(
        &self,
        enumeration: &mut dyn FnMut(&str) -> Result<Enumeration>,
    ) -> Result<Vec<Evolution>> {
        let mut cache: HashMap<String, Enumeration> = HashMap::new();
        let mut load = |path: &str| match cache.get(path) {
            Some(e) => Ok(e.clone()),
            None => {
                let e = enumeration(path)?;
                cache.insert(path.to_owned(), e.clone());
                Ok(e)
            }
        };
        let next = self.entries.iter().skip(1);
        self.entries
            .iter()
            .zip(next)
            .map(|(a, b)| {
                Ok(Evolution {
                    from: a.name.clone(),
                    to: b.name.clone(),
                    changes: diff(&a.schema, &b.schema, &mut load)?,
                })
            })
            .collect()
    }
}
