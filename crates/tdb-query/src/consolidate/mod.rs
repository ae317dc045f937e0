//! Fragment consolidation, as TileDB 2.30 does it. Vacuuming what it
//! replaced is file-level: `tdb_fragment::vacuum_fragments`.
//!
//! A step chooses fragments of the window by TileDB's rule
//! ([`FragmentSelection`], or an explicit list) and merges them into one
//! whose name spans their timestamps: every cell of every fragment, each
//! with its timestamp (the fragment's start, or its own where the fragment
//! already keeps per-cell timestamps), in the global order, a coordinate's
//! versions newest first, as TileDB writes them; then the fragment's
//! commit and, last, a vacuum list `__commits/<name>.vac` naming the
//! fragments it replaces. Reads at every time answer as before (the inputs
//! stay visible to windows that end inside the merged span, the per-cell
//! timestamps answer the rest).
//!
//! Dense arrays merge without timestamps ([`dense`]'s docs).
//!
//! Delete commits are carried on as TileDB's delete metadata, or their
//! cells purged ([`merge`]'s docs).
//!
//! Fragments written under older schemas are read under the latest one,
//! as TileDB reads them (added attributes as fill values, dropped ones
//! gone).
//!
//! With a `max_fragment_size` ([`FragmentSelection::max_fragment_size`])
//! the merge writes several fragments with the same timestamps, split as
//! TileDB's global-order writer splits them (dense ones into rectangles of
//! tiles); the vacuum list is named after the first. A split dense merge
//! ends the consolidation (TileDB's next steps could lose cells).

mod dense;
pub use dense::dense_merge_specs;
mod merge;
mod runs;
mod select;

pub use select::FragmentSelection;

use crate::write::Written;
use crate::{QueryError, Result, Snapshot};
use select::{Candidate, DenseRules};
use tdb_format::names::COMMITS_DIR;
use tdb_format::ArrayType;
use tdb_fragment::{write_vacuum_list, TimeWindow};
use tdb_index::{DomainOps, NDRange};
use tdb_storage::Storage;

fn unsupported(what: &str) -> QueryError {
    QueryError::Unsupported(format!("consolidating {what}"))
}

/// What one fragment consolidation step wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FragmentConsolidation {
    /// The new fragment (the fragments, where a maximum fragment size
    /// split the merge).
    pub written: Written,
    /// Its vacuum list (`__commits/<name>.vac`).
    pub vacuum_list: String,
    /// The fragments it replaces.
    pub replaced: Vec<String>,
}

/// Consolidates the fragments of the array at `dir` whose timestamps lie
/// in `window`, step by step as TileDB does with the same settings: each
/// step merges the run `selection` chooses, the next step sees its result
/// in place of its inputs. Reads and merges under `budget` bytes: a larger
/// array takes more batches, not more memory. Returns the steps taken
/// (none when no run of two or more fragments qualifies).
pub fn consolidate_fragments<S: Storage>(
    storage: &S,
    dir: &str,
    key: Option<&[u8; 32]>,
    window: TimeWindow,
    selection: &FragmentSelection,
    budget: u64,
) -> Result<Vec<FragmentConsolidation>> {
    selection.validate()?;
    let mut steps: Vec<FragmentConsolidation> = Vec::new();
    // A step split by `max_fragment_size` stands in the next steps' choice
    // as its first fragment only, as in TileDB (whose fragment info then
    // replaces the run with the first new fragment): the others are not
    // candidates again.
    let mut set_aside: std::collections::HashSet<String> = std::collections::HashSet::new();
    while steps.len() < selection.steps as usize {
        let snapshot = Snapshot::load(storage, dir, TimeWindow::ALL, key)?;
        let Some(chosen) = next_run(storage, &snapshot, window, selection, &set_aside)? else {
            break;
        };
        let schema = snapshot.schema();
        tracing::info!(array = %dir, fragments = chosen.len(), "consolidation step merges");
        let step = merge_chosen(storage, &snapshot, &chosen, window, selection, budget)?;
        let split_dense = schema.array_type == ArrayType::Dense && step.written.fragments.len() > 1;
        set_aside.extend(step.written.fragments.iter().skip(1).map(|f| f.to_string()));
        steps.push(step);
        if split_dense {
            // TileDB goes on with the first fragment alone standing for the
            // split merge, and a later dense merge of it (read over the
            // union with its neighbours, the other split fragments left
            // out) covers their cells with fill values: committed cells
            // lost (docs/research/dense_max_fragment_size.md, 5a). tdb
            // stops here instead.
            break;
        }
    }
    Ok(steps)
}

/// The names of the fragments the first step of
/// [`consolidate_fragments`] with the same arguments would merge: TileDB's
/// consolidation candidates, found without writing anything (empty when
/// no run of two or more qualifies).
pub fn next_consolidation<S: Storage>(
    storage: &S,
    dir: &str,
    key: Option<&[u8; 32]>,
    window: TimeWindow,
    selection: &FragmentSelection,
) -> Result<Vec<String>> {
    selection.validate()?;
    let snapshot = Snapshot::load(storage, dir, TimeWindow::ALL, key)?;
    let chosen = next_run(storage, &snapshot, window, selection, &Default::default())?;
    Ok(chosen
        .unwrap_or_default()
        .into_iter()
        .filter_map(|i| snapshot.fragments.get(i))
        .map(|f| f.file.file_name().to_owned())
        .collect())
}

/// The fragments (indexes into `snapshot.fragments`) of the run a
/// consolidation step over `window` merges next, TileDB's choice under
/// `selection`; `set_aside` fragments are no candidates. `None`: nothing
/// to merge.
fn next_run<S: Storage>(
    storage: &S,
    snapshot: &Snapshot,
    window: TimeWindow,
    selection: &FragmentSelection,
    set_aside: &std::collections::HashSet<String>,
) -> Result<Option<Vec<usize>>> {
    let in_window: Vec<(usize, &tdb_fragment::LoadedFragment)> =
        (snapshot.fragments.iter().enumerate())
            .filter(|(_, f)| window.contains(f.file.name.timestamp_range()))
            .filter(|(_, f)| !set_aside.contains(&f.file.name.to_string()))
            .collect();
    if in_window.len() < 2 {
        return Ok(None);
    }
    let schema = snapshot.schema();
    let ops = DomainOps::new(&schema.domain)?;
    let candidates: Vec<Candidate> = in_window
        .iter()
        .map(|&(_, f)| {
            let non_empty = f
                .metadata
                .footer
                .non_empty_domain
                .clone()
                .unwrap_or_default();
            // TileDB counts a dense fragment's cells in whole tiles.
            let cells = if f.metadata.footer.dense {
                tdb_index::dense::dense_cell_num(&schema.domain, &non_empty)
            } else {
                tdb_index::dense::cell_count(&schema.domain, &non_empty)
            };
            Ok(Candidate {
                size: snapshot.open.fragment_size(storage, f)?,
                cells: cells.unwrap_or(u64::MAX),
                non_empty,
            })
        })
        .collect::<Result<_>>()?;
    let dense = (schema.array_type == ArrayType::Dense).then(|| {
        let mut anterior = NDRange::new();
        for f in &snapshot.fragments {
            if f.file.name.t1 < window.start {
                if let Some(ned) = &f.metadata.footer.non_empty_domain {
                    ops.expand(&mut anterior, ned);
                }
            }
        }
        DenseRules {
            domain: &schema.domain,
            anterior: (!anterior.is_empty()).then_some(anterior),
        }
    });
    let Some(run) = select::choose(selection, &candidates, dense.as_ref(), &ops) else {
        return Ok(None);
    };
    Ok(Some(
        in_window
            .get(run)
            .unwrap_or_default()
            .iter()
            .map(|&(i, _)| i)
            .collect(),
    ))
}

/// Consolidates exactly the fragments `names` (their names, or paths
/// ending in them) of the array at `dir`, as TileDB's consolidation of a
/// fragment list does: every one must exist, whatever the window. Of
/// `settings`, only how the merge writes applies
/// ([`FragmentSelection::purge_deleted_cells`],
/// [`FragmentSelection::max_fragment_size`]). `None` for fewer than two
/// names.
pub fn consolidate_fragment_list<S: Storage>(
    storage: &S,
    dir: &str,
    key: Option<&[u8; 32]>,
    names: &[&str],
    settings: &FragmentSelection,
    budget: u64,
) -> Result<Option<FragmentConsolidation>> {
    if names.len() < 2 {
        return Ok(None);
    }
    let snapshot = Snapshot::load(storage, dir, TimeWindow::ALL, key)?;
    let wanted: std::collections::HashSet<&str> = names
        .iter()
        .map(|n| n.rsplit('/').next().unwrap_or(n))
        .collect();
    let chosen: Vec<usize> = (snapshot.fragments.iter().enumerate())
        .filter(|(_, f)| wanted.contains(f.file.file_name()))
        .map(|(i, _)| i)
        .collect();
    if chosen.len() != names.len() {
        return Err(QueryError::invalid(format!(
            "cannot consolidate: found {} of {} required fragments",
            chosen.len(),
            names.len()
        )));
    }
    if snapshot.schema().array_type == ArrayType::Dense {
        // Fill values in the merged tiles would cover an older fragment's
        // cells: TileDB refuses such a list.
        let domain = &snapshot.schema().domain;
        let ops = DomainOps::new(domain)?;
        let union = union(&snapshot, &chosen)?;
        let tiles = tdb_index::dense::expand_to_tiles(domain, &union).unwrap_or(union);
        let newest = chosen
            .iter()
            .filter_map(|&i| Some(snapshot.fragments.get(i)?.file.name.t2))
            .max()
            .unwrap_or(0);
        for (i, f) in snapshot.fragments.iter().enumerate() {
            let older = !chosen.contains(&i) && f.file.name.t1 <= newest;
            if older
                && f.metadata
                    .footer
                    .non_empty_domain
                    .as_ref()
                    .is_some_and(|ned| ops.overlaps(&tiles, ned))
            {
                return Err(QueryError::invalid(format!(
                    "cannot consolidate: fragment {} is not listed, was written before the listed ones end and lies under the tiles they cover",
                    f.file.file_name()
                )));
            }
        }
    }
    merge_chosen(
        storage,
        &snapshot,
        &chosen,
        TimeWindow::ALL,
        settings,
        budget,
    )
    .map(Some)
}

/// Merges fragments `chosen` of `snapshot` (as `settings` say the merge
/// writes), then writes the vacuum list naming them, after the first new
/// fragment: until it is there, the inputs stay visible.
fn merge_chosen<S: Storage>(
    storage: &S,
    snapshot: &Snapshot,
    chosen: &[usize],
    window: TimeWindow,
    settings: &FragmentSelection,
    budget: u64,
) -> Result<FragmentConsolidation> {
    let max = settings.max_fragment_size;
    let written = if snapshot.schema().array_type == ArrayType::Dense {
        let union = union(snapshot, chosen)?;
        dense::merge_dense(storage, snapshot, chosen, &union, max, budget)?
    } else {
        let purge = settings.purge_deleted_cells;
        merge::merge_sparse(storage, snapshot, chosen, window, purge, max, budget)?
    };
    let replaced: Vec<String> = chosen
        .iter()
        .filter_map(|&i| Some(snapshot.fragments.get(i)?.file.path.clone()))
        .collect();
    let vacuum_list = write_vacuum_list(
        storage,
        &snapshot.open.dir,
        &format!("{COMMITS_DIR}/{}", written.fragment),
        &replaced,
    )?;
    Ok(FragmentConsolidation {
        written,
        vacuum_list,
        replaced,
    })
}

/// The union of the non-empty domains of fragments `chosen`.
fn union(snapshot: &Snapshot, chosen: &[usize]) -> Result<NDRange> {
    Ok(snapshot.non_empty_domain_of(chosen)?.unwrap_or_default())
}
