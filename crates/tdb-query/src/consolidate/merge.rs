//! The sparse merge: the chosen fragments' cells, every version with its
//! timestamp, into one fragment in the global order.
//!
//! Delete commits are carried on as TileDB 2.30 carries them. When one
//! was made at or after the first input's start, or an input already
//! keeps delete metadata, the merged fragment keeps every cell and records
//! for each when it was deleted (`__delete_timestamps`, `u64::MAX` for
//! never) and by which commit (`__delete_condition_index`, into the
//! fragment's processed conditions: every delete commit the merge saw), so
//! reads at every time still answer as before. With `purge` (TileDB's
//! `sm.consolidation.purge_deleted_cells`) deleted cells are dropped
//! instead, and where duplicates are not allowed so is every older
//! version of a coordinate behind a deleted one.

use super::runs::{self, Run, RunReader, RunSink};
use super::unsupported;
use crate::column::{Column, Columns};
use crate::condition::BoundDelete;
use crate::write::{FragmentWriter, WriteSpec, Written};
use crate::{Batch, FieldBuffer, QueryError, ReadSpec, Result, ResultLayout, Snapshot, SyncRead};
use tdb_format::names::{DELETE_CONDITION_INDEX_FIELD, DELETE_TIMESTAMPS_FIELD, TIMESTAMPS_FIELD};
use tdb_format::Datatype;
use tdb_fragment::{LoadedFragment, OpenArray, TimeWindow};
use tdb_index::order::{cmp_cells, CellOrder};
use tdb_index::DomainOps;
use tdb_storage::Storage;

/// Never: the delete timestamp and condition index of a cell no delete
/// removed.
const NEVER: (u64, u64) = (u64::MAX, u64::MAX);

/// One input fragment of a merge: its global-order read, the batch at
/// hand and the next cell in it.
struct Input<'a, S: Storage> {
    read: Batches<'a, S>,
    batch: Option<Batch>,
    at: usize,
    /// The timestamp of every cell when the fragment keeps none of its own.
    stamp: [u8; 8],
    /// Where the batch holds its per-cell timestamps and delete metadata.
    own_ts: Option<usize>,
    own_deletes: Option<usize>,
    /// Per delete commit of the merge: whether this fragment's delete
    /// metadata holds it already (its processed conditions).
    processed: Vec<bool>,
    /// This fragment's condition indexes as the merge's.
    renumber: Vec<u64>,
    /// The batch's cells' delete timestamps and condition indexes.
    deleted: Vec<(u64, u64)>,
    /// Attributes of the latest schema this fragment was written without:
    /// deletes test them as absent (see `condition::eval`), not as the fill
    /// values the batch holds, as TileDB evaluates them on the fragment's
    /// own schema.
    lacks: Vec<String>,
}

/// A batch's columns without the attributes its fragment lacks.
struct Own<'a> {
    batch: &'a Batch,
    lacks: &'a [String],
}

impl Columns for Own<'_> {
    fn column(&self, field: &str) -> Option<Column<'_>> {
        if self.lacks.iter().any(|l| l == field) {
            return None;
        }
        self.batch.column(field)
    }

    fn cell_num(&self) -> usize {
        self.batch.cell_num()
    }
}

impl<S: Storage> Input<'_, S> {
    /// Reads the next batch once this one is done; `batch` is `None` at
    /// the end. Each batch's cells are checked against `deletes`.
    fn refill(&mut self, deletes: &[BoundDelete]) -> Result<()> {
        while self
            .batch
            .as_ref()
            .is_none_or(|b| self.at >= b.num_cells as usize)
        {
            self.at = 0;
            match self.read.next() {
                Some(b) => {
                    let b = b?;
                    self.deleted = self.deletions(&b, deletes)?;
                    self.batch = Some(b);
                }
                None => {
                    self.batch = None;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// When and by which commit each cell of `batch` was deleted: the
    /// first of `deletes` (in time order) this fragment has not applied
    /// that removes it, unless the fragment's own metadata says it went
    /// earlier.
    fn deletions(&self, batch: &Batch, deletes: &[BoundDelete]) -> Result<Vec<(u64, u64)>> {
        let n = batch.num_cells as usize;
        let mut out = vec![NEVER; n];
        if deletes.is_empty() && self.own_deletes.is_none() {
            return Ok(out);
        }
        let stamp = u64::from_le_bytes(self.stamp);
        let stamps: Vec<u64> = match self.own_ts {
            Some(k) => tdb_format::le::u64_values(&batch_field(batch, k)?.data).collect(),
            None => vec![stamp; n],
        };
        for (c, delete) in deletes.iter().enumerate() {
            if self.processed.get(c).copied().unwrap_or(false) {
                continue;
            }
            let own = Own {
                batch,
                lacks: &self.lacks,
            };
            let gone = delete.removes(&own, |i| stamps.get(i).copied().unwrap_or(stamp))?;
            for (o, g) in out.iter_mut().zip(gone) {
                if g && *o == NEVER {
                    *o = (delete.timestamp, c as u64);
                }
            }
        }
        if let Some(k) = self.own_deletes {
            let times = tdb_format::le::u64_values(&batch_field(batch, k)?.data);
            let indexes =
                tdb_format::le::u64_values(&batch_field(batch, k.saturating_add(1))?.data);
            for ((o, t), i) in out.iter_mut().zip(times).zip(indexes) {
                if o.0 >= t {
                    let i = usize::try_from(i)
                        .ok()
                        .and_then(|i| self.renumber.get(i).copied())
                        .unwrap_or(u64::MAX);
                    *o = (t, i);
                }
            }
        }
        Ok(out)
    }

    /// Field `k` of the batch at hand (a refilled input has one).
    fn field(&self, k: usize) -> Result<&FieldBuffer> {
        let batch = self
            .batch
            .as_ref()
            .ok_or_else(|| QueryError::invalid("a merge input read past its end"))?;
        batch_field(batch, k)
    }

    /// The coordinate of dimension `d` of the cell at hand.
    fn coord(&self, d: usize) -> &[u8] {
        self.field(d).map_or(&[], |f| f.column().cell(self.at))
    }
}

/// Field `k` of a merge input's batch (as asked for: the schema's fields,
/// then the fragment's per-cell ones).
fn batch_field(batch: &Batch, k: usize) -> Result<&FieldBuffer> {
    batch
        .fields
        .get(k)
        .ok_or_else(|| QueryError::invalid(format!("a merge input's batch without field {k}")))
}

/// The attributes of the latest schema fragment `f` was written without.
fn lacks(open: &OpenArray, f: &LoadedFragment) -> Vec<String> {
    let Some(own) = open.schemas.by_name(&f.metadata.footer.array_schema_name) else {
        return Vec::new();
    };
    open.schemas
        .latest()
        .schema
        .attributes
        .iter()
        .filter(|a| !own.schema.attributes.iter().any(|o| o.name == a.name))
        .map(|a| a.name.clone())
        .collect()
}

/// The delete commits of `snapshot` made in `window`, in time order,
/// bound to the latest schema (read in one batch).
fn load_deletes<S: Storage>(
    storage: &S,
    snapshot: &Snapshot,
    window: TimeWindow,
) -> Result<Vec<BoundDelete>> {
    let open = &snapshot.open;
    if open.directory.conditions.iter().any(|c| c.is_update) {
        return Err(unsupported("arrays with update commits"));
    }
    open.delete_commits(storage)?
        .into_iter()
        .filter(|(c, _)| window.contains(c.name.timestamp_range()))
        .map(|(c, commit)| {
            BoundDelete::bind(
                &c.marker,
                c.timestamp(),
                &commit,
                &open.schemas.latest().schema,
                &snapshot.enumerations,
            )
        })
        .collect()
}

/// Where a merge's cells come from: one of the chosen fragments (its
/// position among them), or a run an earlier level merged.
enum Source {
    Fragment(usize),
    Run(Run),
}

/// A merge input's batches: a fragment's global-order read, or a run.
enum Batches<'a, S: Storage> {
    Read(Box<SyncRead<'a, S>>),
    Run(RunReader),
}

impl<S: Storage> Batches<'_, S> {
    fn next(&mut self) -> Option<Result<Batch>> {
        match self {
            Batches::Read(r) => r.next(),
            Batches::Run(r) => r.next_batch(),
        }
    }
}

/// What every level of one merge shares.
struct Merging<'a, S: Storage> {
    storage: &'a S,
    snapshot: &'a Snapshot,
    chosen: &'a [usize],
    frags: Vec<&'a LoadedFragment>,
    /// Per chosen fragment, the delete commits it already applied.
    processed: Vec<Vec<String>>,
    deletes: Vec<BoundDelete>,
    markers: Vec<String>,
    /// The latest schema's fields.
    names: Vec<String>,
    window: TimeWindow,
}

impl<'a, S: Storage> Merging<'a, S> {
    /// Empty buffers for a part: the schema's fields, the per-cell
    /// timestamps, then (with `meta`) the delete metadata.
    fn empty(&self, meta: bool) -> Result<Vec<FieldBuffer>> {
        let schema = &self.snapshot.open.schemas.latest().schema;
        let mut fields: Vec<FieldBuffer> = self
            .names
            .iter()
            .map(|n| {
                FieldBuffer::for_field(schema, n)
                    .map_err(|_| QueryError::invalid(format!("{n}: no such field")))
            })
            .collect::<Result<_>>()?;
        let mut per_cell = vec![TIMESTAMPS_FIELD];
        if meta {
            per_cell.extend([DELETE_TIMESTAMPS_FIELD, DELETE_CONDITION_INDEX_FIELD]);
        }
        for name in per_cell {
            fields.push(FieldBuffer::new(name, Datatype::UInt64, 1, false));
        }
        Ok(fields)
    }

    /// Opens `source` as an input reading under `share` bytes.
    fn input(&self, source: Source, share: u64) -> Result<Input<'a, S>> {
        let names = self.names.len();
        let pos = match source {
            Source::Fragment(pos) => pos,
            // A run's cells carry their timestamps and delete metadata, the
            // commits applied already.
            Source::Run(run) => {
                return Ok(Input {
                    read: Batches::Run(RunReader::new(run, self.empty(true)?)),
                    batch: None,
                    at: 0,
                    stamp: [0; 8],
                    own_ts: Some(names),
                    own_deletes: Some(names.saturating_add(1)),
                    processed: vec![true; self.markers.len()],
                    renumber: (0..self.markers.len() as u64).collect(),
                    deleted: Vec::new(),
                    lacks: Vec::new(),
                })
            }
        };
        let (Some(f), Some(&i), Some(applied)) = (
            self.frags.get(pos),
            self.chosen.get(pos),
            self.processed.get(pos),
        ) else {
            return Err(QueryError::invalid(
                "a merge input is not a chosen fragment",
            ));
        };
        // The fragment alone, every version of its cells (deleted ones too),
        // read in the global order under the latest schema as TileDB reads
        // them: attributes added since read as their fill values, dropped
        // ones are gone.
        let open = &self.snapshot.open;
        let mut one = self
            .snapshot
            .sparse_fragment_alone(i)?
            .ok_or_else(|| QueryError::invalid("a fragment vanished"))?;
        one.open = one.open.reading_view(open.directory.window.end);
        let footer = &f.metadata.footer;
        let mut fields = self.names.clone();
        let own_ts = footer.has_timestamps.then(|| {
            fields.push(TIMESTAMPS_FIELD.to_owned());
            fields.len().saturating_sub(1)
        });
        let own_deletes = footer.has_delete_meta.then(|| {
            fields.push(DELETE_TIMESTAMPS_FIELD.to_owned());
            fields.push(DELETE_CONDITION_INDEX_FIELD.to_owned());
            fields.len().saturating_sub(2)
        });
        let read = ReadSpec::new(fields)
            .with_layout(ResultLayout::GlobalOrder)
            .with_budget(share);
        Ok(Input {
            read: Batches::Read(Box::new(SyncRead::new(
                self.storage,
                std::sync::Arc::new(one),
                read,
            )?)),
            batch: None,
            at: 0,
            stamp: f.file.name.t1.to_le_bytes(),
            own_ts,
            own_deletes,
            // TileDB skips a fragment's processed conditions only where its
            // delete metadata stands for them.
            processed: self
                .markers
                .iter()
                .map(|m| own_deletes.is_some() && applied.contains(m))
                .collect(),
            renumber: applied
                .iter()
                .map(|m| {
                    self.markers
                        .iter()
                        .position(|x| x == m)
                        .map_or(u64::MAX, |p| p as u64)
                })
                .collect(),
            deleted: Vec::new(),
            lacks: lacks(open, f),
        })
    }

    /// Merges `sources` (oldest first) into `sink`, a part of `capacity`
    /// cells at a time, each part laid out as [`Merging::empty`] with
    /// `meta`, under `budget` bytes shared by the sources. `purge` drops
    /// deleted cells (see the module's docs): the last level only, where
    /// every version of a coordinate meets.
    fn merge(
        &self,
        sources: Vec<Source>,
        budget: u64,
        purge: bool,
        meta: bool,
        sink: &mut dyn FnMut(&[FieldBuffer]) -> Result<()>,
    ) -> Result<()> {
        let schema = &self.snapshot.open.schemas.latest().schema;
        let share = budget
            .checked_div((sources.len() as u64).saturating_add(1))
            .unwrap_or(budget)
            .max(1);
        let mut inputs = Vec::with_capacity(sources.len());
        for source in sources {
            inputs.push(self.input(source, share)?);
        }
        let deletes = &self.deletes;
        let window = self.window;
        let ops = DomainOps::new(&schema.domain)?;
        let kind = CellOrder::Global {
            tile_order: schema.tile_order,
            cell_order: schema.cell_order,
        };
        let part_cells = usize::try_from(schema.capacity.max(1)).unwrap_or(usize::MAX);
        let mut part = self.empty(meta)?;
        let names = self.names.len();
        let mut in_part = 0usize;
        // Purging without duplicates: the coordinates of the last deleted
        // cell, whose older versions go with it.
        let mut purged: Option<Vec<Vec<u8>>> = None;
        let dims = schema.domain.dimensions.len();
        // Merge: the least cell in the global order next; of equal
        // coordinates the newest input's first (its versions are stored
        // newest first too), as TileDB stores a coordinate's versions. The
        // inputs holding a cell wait in `queue`, the next to take last (a
        // binary search places each input again after its cell is taken: a
        // merge of many fragments costs a search per cell, not a pass over
        // every input).
        let goes_before = |inputs: &[Input<'_, S>], a: usize, b: usize| {
            let coord = |i: usize, d: usize| -> &[u8] {
                let which = if i == 0 { a } else { b };
                inputs.get(which).map_or(&[], |input| input.coord(d))
            };
            cmp_cells(&schema.domain, ops.dims(), kind, &coord, 0, 1).then_with(|| b.cmp(&a))
        };
        let mut queue: Vec<usize> = Vec::with_capacity(inputs.len());
        let enqueue = |queue: &mut Vec<usize>, inputs: &[Input<'_, S>], k: usize| {
            let at = queue.partition_point(|&q| goes_before(inputs, q, k).is_gt());
            queue.insert(at, k);
        };
        for k in 0..inputs.len() {
            if let Some(input) = inputs.get_mut(k) {
                input.refill(deletes)?;
            }
            if inputs.get(k).is_some_and(|i| i.batch.is_some()) {
                enqueue(&mut queue, &inputs, k);
            }
        }
        while let Some(k) = queue.pop() {
            'cell: {
                let Some(input) = inputs.get_mut(k) else {
                    break 'cell;
                };
                let at = input.at;
                let next = at.saturating_add(1);
                input.at = next;
                let (deleted_at, condition) = input.deleted.get(at).copied().unwrap_or(NEVER);
                if purge {
                    if let Some(p) = &purged {
                        // The same coordinates are the same bytes, as TileDB
                        // deduplicates (-0.0 is not 0.0).
                        let same = p.iter().enumerate().all(|(d, v)| {
                            input
                                .field(d)
                                .is_ok_and(|f| f.column().cell(at) == v.as_slice())
                        });
                        if same {
                            break 'cell;
                        }
                        purged = None;
                    }
                    if deleted_at != u64::MAX && deleted_at <= window.end {
                        if !schema.allows_dups {
                            purged = Some(
                                (0..dims)
                                    .map(|d| Ok(input.field(d)?.column().cell(at).to_vec()))
                                    .collect::<Result<_>>()?,
                            );
                        }
                        break 'cell;
                    }
                }
                // The schema's fields, then the per-cell timestamps and (kept)
                // delete metadata, as `empty` lays them out.
                let (fields, per_cell) = part
                    .split_at_mut_checked(names)
                    .ok_or_else(|| QueryError::invalid("a merge part without its fields"))?;
                for (d, out) in fields.iter_mut().enumerate() {
                    out.extend_from(input.field(d)?, at..next);
                }
                let [stamps, meta @ ..] = per_cell else {
                    return Err(QueryError::invalid("a merge part without timestamps"));
                };
                match input.own_ts {
                    Some(k) => stamps.extend_from(input.field(k)?, at..next),
                    None => stamps.push(&input.stamp, true),
                }
                if let [times, conditions] = meta {
                    times.push(&deleted_at.to_le_bytes(), true);
                    conditions.push(&condition.to_le_bytes(), true);
                }
                in_part = in_part.saturating_add(1);
                // A tile's cells a part, or fewer where they pass a share
                // of the budget (the writer filters a tile chunk by chunk
                // as its parts come).
                let full = in_part == part_cells
                    || (in_part % 64 == 0
                        && part.iter().map(FieldBuffer::byte_len).sum::<u64>() >= share);
                if full {
                    sink(&part)?;
                    part.iter_mut().for_each(FieldBuffer::clear);
                    in_part = 0;
                }
            }
            if let Some(input) = inputs.get_mut(k) {
                input.refill(deletes)?;
            }
            if inputs.get(k).is_some_and(|i| i.batch.is_some()) {
                enqueue(&mut queue, &inputs, k);
            }
        }
        if in_part > 0 {
            sink(&part)?;
        }
        Ok(())
    }
}

/// Merges fragments `chosen` of `snapshot` (indices in its time order, at
/// least two) into one, streaming: each is read alone in the global order
/// under a share of `budget` bytes and merged cell by cell into a
/// global-order write, so memory does not grow with the array. Of equal
/// coordinates the newest fragment's cells come first, as TileDB stores a
/// coordinate's versions. The delete commits of `window` apply (see the
/// module's docs; `purge` drops deleted cells). More fragments than the
/// budget reads at once ([`runs::fan_in`]) merge in levels: groups of
/// them into temporary runs, then the runs.
pub(super) fn merge_sparse<S: Storage>(
    storage: &S,
    snapshot: &Snapshot,
    chosen: &[usize],
    window: TimeWindow,
    purge: bool,
    max_fragment_size: Option<u64>,
    budget: u64,
) -> Result<Written> {
    let open = &snapshot.open;
    let latest = open.schemas.latest();
    let frags: Vec<&LoadedFragment> = chosen
        .iter()
        .map(|&i| snapshot.fragments.get(i))
        .collect::<Option<_>>()
        .ok_or_else(|| QueryError::invalid("a fragment to merge is not in the snapshot"))?;
    let (Some(oldest), Some(newest)) = (frags.first(), frags.last()) else {
        return Err(QueryError::invalid("a merge of no fragments"));
    };
    let (first, last) = (oldest.file.name.t1, newest.file.name.t2);
    let deletes = load_deletes(storage, snapshot, window)?;
    let markers: Vec<String> = deletes.iter().map(|d| d.marker.clone()).collect();
    // TileDB applies the commits only when one is as new as the inputs or
    // an input already carries some.
    let applies = deletes.iter().any(|d| d.timestamp >= first)
        || frags.iter().any(|f| f.metadata.footer.has_delete_meta);
    let deletes = if applies { deletes } else { Vec::new() };
    let keep_meta = applies && !purge;
    let processed = open.processed_conditions(storage, &frags)?;
    let merging = Merging {
        storage,
        snapshot,
        chosen,
        frags,
        processed,
        deletes,
        markers: markers.clone(),
        names: latest.schema.fields().map(str::to_owned).collect(),
        window,
    };
    let fan_in = runs::fan_in(budget);
    let mut sources: Vec<Source> = (0..chosen.len()).map(Source::Fragment).collect();
    while sources.len() > fan_in {
        // The next level reads this one's runs at once (or in groups
        // again): each run is written in batches of its share there.
        let groups = sources.len().div_ceil(fan_in);
        let batch = budget
            .checked_div((groups.min(fan_in) as u64).saturating_add(1))
            .unwrap_or(budget);
        tracing::debug!(
            inputs = sources.len(),
            groups,
            "consolidation merges a level"
        );
        let mut level = Vec::with_capacity(groups);
        let mut rest = sources.into_iter();
        loop {
            let group: Vec<Source> = rest.by_ref().take(fan_in).collect();
            if group.is_empty() {
                break;
            }
            let mut run = RunSink::new(batch)?;
            merging.merge(group, budget, false, true, &mut |part| run.push(part))?;
            level.push(Source::Run(run.finish()?));
        }
        sources = level;
    }
    let mut spec = WriteSpec::new(Vec::new())
        .with_layout(ResultLayout::GlobalOrder)
        .with_cell_timestamps()
        .with_processed_conditions(markers)
        .between(first, last);
    if keep_meta {
        spec = spec.with_delete_metadata();
    }
    spec.max_fragment_size = max_fragment_size;
    let mut writer = FragmentWriter::new(storage, &open.dir, latest, open.key(), &spec)?;
    merging.merge(sources, budget, purge, keep_meta, &mut |part| {
        writer.submit(part)
    })?;
    writer.finish()
}
