//! Test helpers: the schema file of a corpus object, and the JSON summary of
//! a schema in the corpus format (`/work/shared/conformance/FORMAT.md`).
//!
//! The summary lives with the tests because no library layer depends on
//! serde (see docs/architecture.md, Decisions).

#![allow(dead_code)]

pub mod summary;

use tdb_format::TimestampedName;
use tdb_testdata::Object;

/// The latest schema file of an object, relative to its directory:
/// `__schema/<name>` in TileDB's order of timestamped names from v10,
/// `__array_schema.tdb` before. `None` for groups.
pub fn latest_schema(object: &Object) -> Option<String> {
    let latest = object
        .files
        .iter()
        .filter_map(|f| f.strip_prefix("__schema/"))
        .filter(|n| !n.contains('/'))
        .map(|n| (TimestampedName::parse(n).expect(n), n))
        .max_by(|a, b| a.0.cmp(&b.0));
    match latest {
        Some((_, n)) => Some(format!("__schema/{n}")),
        None => object
            .files
            .iter()
            .any(|f| f == "__array_schema.tdb")
            .then(|| "__array_schema.tdb".to_owned()),
    }
}
