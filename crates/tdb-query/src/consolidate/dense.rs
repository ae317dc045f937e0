//! The dense merge, as TileDB's: the chosen fragments alone read over the
//! whole tiles their union touches, in the global order (newest fragment
//! winning per cell, fill values where none wrote), streamed into one
//! global-order fragment of those tiles that records the union as its
//! non-empty domain (with a `max_fragment_size`, several: rectangles of
//! those tiles, each recording its tiles clipped to the union). Dense fragments keep no per-cell timestamps: inside
//! the merged span, time travel after vacuuming sees the merge whole.

use super::unsupported;
use crate::write::{FragmentWriter, WriteSpec, Written};
use crate::{QueryError, ReadSpec, Result, ResultLayout, Snapshot, Subarray, SyncRead};
use tdb_index::NDRange;
use tdb_schema::ArraySchema;
use tdb_storage::Storage;

/// Merges dense fragments `chosen` of `snapshot` (time order), whose
/// non-empty domains' union is `union`, under `budget` bytes.
pub(super) fn merge_dense<S: Storage>(
    storage: &S,
    snapshot: &Snapshot,
    chosen: &[usize],
    union: &NDRange,
    max_fragment_size: Option<u64>,
    budget: u64,
) -> Result<Written> {
    let open = &snapshot.open;
    let latest = open.schemas.latest();
    let schema = &latest.schema;
    // TileDB 2.30 fails on these itself (its global-order writer stops on
    // "bad optional access", current domain tile-aligned or not), so there
    // is no merge of TileDB's to match yet.
    if schema.current_domain.ranges.is_some() {
        return Err(unsupported(
            "dense fragments of arrays with a current domain (TileDB 2.30 fails on them too)",
        ));
    }
    let name = |i: Option<&usize>| {
        let f = snapshot.fragments.get(*i?)?;
        Some(&f.file.name)
    };
    let (Some(first), Some(last)) = (name(chosen.first()), name(chosen.last())) else {
        return Err(QueryError::invalid("a dense merge of no fragments"));
    };
    let (read, mut spec) = dense_merge_specs(schema, union, (first.t1, last.t2), budget)?;
    spec.max_fragment_size = max_fragment_size;
    // The chosen fragments as if they were the array's only ones.
    let only = snapshot.with_fragments(open.reading_view(open.directory.window.end), chosen);
    let mut writer = FragmentWriter::new(storage, &open.dir, latest, open.key(), &spec)?;
    for batch in SyncRead::new(storage, std::sync::Arc::new(only), read)? {
        writer.submit(&batch?.fields)?;
    }
    writer.finish()
}

/// The read and the write that lay out a dense merge as TileDB's does: the
/// whole tiles of `union` read in the global order under half of `budget`
/// (fill values where no input wrote, past the domain too), streamed into
/// a global-order write of those tiles that records `union` and spans
/// `t1..=t2`. A copy rewrites a merged fragment with them, byte for byte.
pub fn dense_merge_specs(
    schema: &ArraySchema,
    union: &NDRange,
    (t1, t2): (u64, u64),
    budget: u64,
) -> Result<(ReadSpec, WriteSpec)> {
    let tiles = tdb_index::dense::expand_to_tiles(&schema.domain, union)
        .ok_or_else(|| unsupported("dense fragments whose tiles pass the datatype's range"))?;
    let mut subarray = Subarray::new(tiles.len());
    for (d, r) in tiles.iter().enumerate() {
        subarray.add_range(d, r.clone());
    }
    let attributes: Vec<String> = schema.attributes.iter().map(|a| a.name.clone()).collect();
    let read = ReadSpec::new(attributes)
        .with_subarray(subarray.clone())
        .with_layout(ResultLayout::GlobalOrder)
        .with_budget((budget / 2).max(1))
        .over_whole_tiles();
    let write = WriteSpec::new(Vec::new())
        .with_layout(ResultLayout::GlobalOrder)
        .with_subarray(subarray)
        .between(t1, t2)
        .recording(union.clone());
    Ok((read, write))
}
