//! Delete queries: a commit file, not a fragment. TileDB stores the
//! negation of the delete's condition (the cells kept) in
//! `__commits/__t_t_<uuid>_<v>.del`; reads at or after its timestamp drop
//! the cells written before it that the condition selected. One
//! whole-object write, so a delete is committed whole or not at all.

use crate::condition::{self, BoundCondition};
use crate::{QueryError, Result, Snapshot};
use tdb_format::ArrayType;
use tdb_fragment::{DeleteCommit, CONSOLIDATION_WITH_TIMESTAMPS_MIN_VERSION};
use tdb_storage::WritableStorage;

/// The first format version whose arrays take deletes (TileDB's
/// `deletes_min_version`).
const DELETES_MIN_VERSION: u32 = 16;

/// Commits the deletion of every cell of `snapshot`'s array where `expr`
/// (TileDB-Py syntax, over the latest schema) holds, stamped `timestamp`,
/// and returns the commit's path in the array. TileDB's rules: sparse
/// arrays only, format v16 or later, and not at a timestamp inside a
/// fragment consolidated without timestamps.
pub fn delete_cells<S: WritableStorage + ?Sized>(
    storage: &S,
    snapshot: &Snapshot,
    expr: &str,
    timestamp: u64,
) -> Result<String> {
    let open = &snapshot.open;
    let schema = &open.schemas.latest().schema;
    if schema.array_type == ArrayType::Dense {
        return Err(QueryError::invalid(
            "deletes: only sparse arrays take deletes (as in TileDB)",
        ));
    }
    if schema.version.get() < DELETES_MIN_VERSION {
        return Err(QueryError::invalid(format!(
            "deletes: the array is format version {}; deletes need {DELETES_MIN_VERSION} or \
             later (`tdb copy` rewrites it at the current version)",
            schema.version.get()
        )));
    }
    for f in &open.directory.unfiltered_fragments {
        let (t1, t2) = f.name.timestamp_range();
        let old = f.format_version() < CONSOLIDATION_WITH_TIMESTAMPS_MIN_VERSION;
        if old && (t1..=t2).contains(&timestamp) {
            return Err(QueryError::invalid(format!(
                "deletes: timestamp {timestamp} lies inside fragment {} (consolidated \
                 without timestamps); choose another",
                f.path
            )));
        }
    }
    let parsed = condition::parse_with_enumerations(expr, schema, &snapshot.enumerations)?;
    let bound = BoundCondition::new(&parsed, schema, &snapshot.enumerations)?;
    if let Some(f) = bound
        .fields()
        .iter()
        .find(|f| schema.attribute(f).is_some_and(|a| a.enumeration.is_some()))
    {
        return Err(QueryError::condition(
            expr,
            format!("deletes over the enumerated attribute `{f}` are not supported yet"),
        ));
    }
    let kept = condition::negate(parsed).map_err(|r| QueryError::condition(expr, r))?;
    Ok(tdb_fragment::write_delete(
        storage,
        &open.dir,
        &DeleteCommit::new(kept),
        (timestamp, timestamp),
        open.key(),
    )?)
}
