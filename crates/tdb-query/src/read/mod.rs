//! The read state machine.
//!
//! Phases: the delete commits' conditions (one batch; they may read fields
//! the query does not), the fragment-metadata sections the read needs (one
//! batch), then piece by piece: the subarray is cut in result order until
//! the tiles a piece needs fit the tile budget (half the budget, or more
//! where one cell's tiles need it: `pieces`), each piece's
//! candidate tiles are fetched (one batch, answered in any order and
//! matched by range), decoded (a step of its own, [`DecodeWork`], which a
//! driver runs where it likes), scanned (`sparse`, `dense`: which cells, in
//! which order, from which fragment) and handed out in batches the rest
//! of the budget bounds (`emit`), then dropped.
//!
//! The reader owns an `Arc` of its snapshot and does no I/O. Two drivers
//! run it: [`SyncRead`] (an iterator; the calling thread waits) and
//! [`ReadStream`] (a `Stream`; fetches are futures, decoding runs on a
//! thread of its own).

mod aggregate;
mod chunk_cache;
mod dense;
mod dense_blocks;
mod dense_runs;
mod drive;
mod emit;
mod fields;
mod null_checks;
mod partition;
mod pieces;
mod plan;
mod prefetch;
mod sparse;
mod spill;
mod spilled;
mod stream;
mod stretches;
mod tiles;
mod whole_tiles;

pub use aggregate::{aggregate, AggregateStep, Aggregation};
pub use drive::SyncRead;
pub use partition::split_for_parallel;
pub use sparse::stored_out_of_order;
pub use stream::ReadStream;
pub use tiles::{DecodeWork, Decoded};

use crate::batch::{Batch, FieldBuffer};
use crate::condition::{self, BoundCondition, BoundDelete};
use crate::{QueryError, ReadSpec, Result, ResultLayout, Snapshot};
use dense::Results;
pub(crate) use fields::FieldInfo;
use fields::{frag_field, special_field, FragField, Kind};
use pieces::{Piece, PlannedPiece};
use plan::{FragPlan, DELETE_TS_SLOT, TIMESTAMPS_SLOT};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use tdb_format::{ArrayType, DataPart, Datatype};
use tdb_fragment::fragment_metadata::{Field, Section};
use tdb_fragment::DeleteCommit;
use tdb_index::DomainOps;
use tdb_schema::ArraySchema;
use tdb_storage::{join, Answers, RangeRead, RangeRequest};
use tiles::{Coalesced, Fetching, PartBytes, TileFetch, TileMap};

/// What the reader wants next.
#[derive(Debug)]
pub enum ReadStep {
    /// Fetch these ranges and [`Reader::push`] the answers: in any order,
    /// in one push or several (the reader matches them by range).
    Need(Vec<RangeRequest>),
    /// Run this (on any thread) and give the result to
    /// [`Reader::push_decoded`]: the piece's tiles, unfiltered.
    Decode(DecodeWork),
    /// The next batch of results.
    Batch(Batch),
    /// Every cell has been returned.
    Done,
}

/// A fragment-metadata section to load: which fragment, which section,
/// where.
struct SectionRead {
    frag: usize,
    section: Section,
    file: String,
    range: Range<u64>,
}

/// The next piece's batch as [`Reader::plan_ahead`] planned it: the
/// requests the piece will ask for, those the bytes read on answered
/// then, and the rest as sent to the driver (some longer).
struct AskedAhead {
    asked: Vec<RangeRequest>,
    answered: Vec<(RangeRequest, tdb_storage::RangeRead)>,
    out: Vec<RangeRequest>,
}

enum Phase {
    Start,
    Sections(Vec<SectionRead>, Coalesced, Answers),
    /// Each delete commit's timestamp and file.
    Deletes(Vec<(u64, String)>, Answers),
    Tiles(Box<Fetching>),
    /// The piece's tiles are in: their decoding, until handed out.
    Decode(Option<DecodeWork>),
    Emit,
    /// Every piece's runs are written: their merge hands out the batches.
    Merge(Box<spilled::Merging>),
    Done,
}

/// What the reader has for its drivers and the aggregation: the steps it
/// hands users, and what aggregates fold besides batches.
pub(crate) enum Event {
    Need(Vec<RangeRequest>),
    Decode(DecodeWork),
    /// A batch, with what aggregates learn of its cells.
    Batch(Batch, BatchNotes),
    /// Sparse tiles answered from their metadata, unread (`md_sparse`),
    /// or read and found whole after all (`md_pending`): (plan, tile).
    FromMetadata(Vec<(usize, u64)>),
    /// Tiles pieces held parts of that are answered from their cells
    /// after all (`md_pending`): their cells folded apart count.
    FromCells(Vec<(usize, u64)>),
    Done,
}

impl Reader {
    /// Takes back a batch the caller is done with: the next batch's fields
    /// are written into its buffers (same fields, same order), whose pages
    /// are already the process's, instead of fresh ones (a page fault per
    /// 4 KiB). See [`SyncRead::next_into`].
    pub fn recycle(&mut self, batch: Batch) {
        self.recycled = batch.fields;
    }

    /// The recycled buffers no batch took, emptied (as a batch of no
    /// cells): the caller's again at the read's end.
    pub fn take_recycled(&mut self) -> Batch {
        let mut fields = std::mem::take(&mut self.recycled);
        fields.iter_mut().for_each(FieldBuffer::clear);
        Batch {
            num_cells: 0,
            fields,
        }
    }
}

impl Drop for Reader {
    /// The read's tile buffers outlive it in the process's idle buffers
    /// (bounded: `tdb_storage::IDLE_LIMIT`), so the next read writes them
    /// without page faults.
    fn drop(&mut self) {
        self.spare.keep_tiles(self.tiles.drain().map(|(_, t)| t));
        self.spare.to_idle();
    }
}

/// A read in progress: a state machine that does no I/O. Drive it with
/// [`Reader::step`], answering each [`ReadStep::Need`] with
/// [`Reader::push`]; [`SyncRead`] does that over a storage backend.
pub struct Reader {
    snapshot: Arc<Snapshot>,
    spec: ReadSpec,
    fields: Vec<FieldInfo>,
    /// Slots of the requested fields, in order.
    requested: Vec<usize>,
    condition: Option<BoundCondition>,
    deletes: Vec<BoundDelete>,
    /// Range operations of each dimension.
    ops: DomainOps,
    /// One per visible fragment whose non-empty domain meets the
    /// subarray, in the snapshot's order.
    plans: Vec<FragPlan>,
    tiles: TileMap,
    /// What the decoding of the piece's bounded tiles checked.
    checked: tiles::Checked,
    /// The caller's buffers of a batch it is done with ([`Reader::recycle`]),
    /// for the next batch's fields.
    recycled: Vec<FieldBuffer>,
    /// The allocation of a batch's copy jobs, kept for the next batch
    /// (`emit`): a job a run, a dense piece of 8 MiB makes 8,192 of them,
    /// a MiB of pages the allocator would hand back and fault in again
    /// each piece.
    copy_jobs: std::sync::Mutex<Vec<emit::CopyJob<'static, 'static>>>,
    /// Buffers of the last piece's tiles, for the next piece's (shared
    /// with the piece's [`DecodeWork`]).
    spare: Arc<tiles::Spare>,
    /// Sliced tiles' chunks decoded by the last pieces, for the next.
    chunks: Arc<chunk_cache::ChunkCache>,
    /// Pieces installed so far: decoded tiles must be the current one's.
    pieces_started: u64,
    /// Result cells in order, with the dense coordinates when dense.
    results: Results,
    /// Where the next batch starts: slab, and cell in it.
    next: (usize, u64),
    phase: Phase,
    /// Aggregates: the aggregated attributes (slots) and their ops, whose
    /// tile metadata (mins, maxes, sums, null counts) loads with the other
    /// sections: dense aggregates answer whole space tiles from it (the
    /// tiles are still fetched and folded), sparse ones whole tiles, unread,
    /// when `md_sparse`.
    md_fields: Vec<(usize, Vec<crate::AggregateOp>)>,
    /// Whether this sparse read answers tiles the piece holds whole from
    /// their metadata instead of reading them: the aggregation asks for it
    /// when every field's ops allow, and the read keeps it only without a
    /// condition, deletes, or a newer fragment that could replace a cell.
    md_sparse: bool,
    /// Whether this sparse read answers from their metadata the tiles it
    /// keeps every cell of, once it has read them, as TileDB's unordered
    /// reader with duplicates does, and its global-order reader where its
    /// merge took the tile whole: under a condition, past deletes, or in a
    /// box cutting a tile's MBR but none of its cells.
    /// Answers change only for lossy filters (FLOAT_SCALE: the metadata
    /// holds the values as written).
    md_kept: bool,
    /// Tiles answered from metadata and not read, for the aggregation.
    md_answered: Vec<(usize, u64)>,
    /// Tiles found partly kept or cut by the merge after pieces held
    /// parts of them (`md_pending`), for the aggregation.
    md_from_cells: Vec<(usize, u64)>,
    /// Every tile answered from metadata so far (pieces that cut one each
    /// list it; it answers once), or found not to be after pieces held
    /// parts of it.
    md_done: std::collections::HashSet<(usize, u64)>,
    /// Tiles `md_kept` may yet answer that pieces so far held part of:
    /// their cells go to the aggregation marked ([`BatchNotes::pending`]),
    /// and once the last is seen, the tile answers from metadata if whole.
    md_pending: HashMap<(usize, u64), whole_tiles::Pending, tiles::FastHash>,
    /// The tile that ended the last piece's merge ([`whole_tiles::MdFound::open`]).
    md_open: Option<(usize, u64)>,
    /// Whether dense batches record each cell's [`CellState`] (aggregates
    /// fold only cells a fragment wrote and the condition kept).
    with_states: bool,
    last_notes: BatchNotes,
    /// Pieces still to read, the next last; the piece being read. Each
    /// piece's tiles fit the tile budget.
    partitions: Vec<Piece>,
    /// Cuts so far whose halves each need as many tile bytes as the piece
    /// cut (see [`pieces::MAX_FRUITLESS_CUTS`]).
    fruitless_cuts: u32,
    current: Piece,
    /// The largest tile of each fragment, all fields read, filtered and
    /// unfiltered bytes.
    tile_max: Vec<u64>,
    /// The part of the budget tiles get ([`Reader::tile_budget`]).
    tile_share: u64,
    /// The part batches get ([`Reader::batch_cells`]).
    batch_share: u64,
    /// Whether any batch went out (an empty read is one empty batch).
    emitted: bool,
    /// Whether sparse tiles whose min/max metadata rule the condition out
    /// are skipped: safe where no other fragment's cell could win over a
    /// skipped one (duplicates allowed, or one fragment without per-cell
    /// timestamps), since the condition applies to the newest cell of each
    /// coordinate.
    minmax_skip: bool,
    /// Whether the storage is remote ([`Reader::set_remote`]).
    remote: bool,
    /// The next piece, planned while the current one is handed out
    /// ([`Reader::plan_ahead`]).
    ahead: Option<PlannedPiece>,
    /// The next piece's requests as [`Reader::plan_ahead`] shaped them
    /// through `prefetch`: when the piece asks for them, it is answered
    /// from the bytes kept then and asks for what went to the driver.
    asked_ahead: Option<AskedAhead>,
    /// Tile files' bytes read on past what pieces ask for, for the pieces
    /// after them.
    prefetch: prefetch::Prefetch,
    /// Where the chunk walks of sliced tiles stood, so the next piece's
    /// walk over the same tile goes on from there.
    walk_points: tiles::WalkPoints,
    /// Where pieces are runs of tiles spilled, for a merge
    /// ([`Reader::spills`]): the runs so far.
    spill: Option<spilled::Spilled>,
    /// Whether this read spills to find a few cells of large sorted tiles
    /// by probes ([`Reader::narrow_read`]).
    narrow: bool,
    /// Whether this unordered read goes in runs of each fragment's tiles
    /// without spilling ([`Reader::reads_unordered_in_runs`]).
    unordered_runs: bool,
    /// The shares TileDB's threads would test each tile's string ranges
    /// in ([`sparse::tiledb_range_shares`]).
    string_shares: usize,
    /// A local dense read that would be one piece of a few MiB: the aim
    /// that cuts it in two ([`Reader::storage_aim`]).
    halved_aim: Option<u64>,
}

/// What an aggregation learns of a batch's cells besides their values.
#[derive(Debug, Default)]
pub(crate) struct BatchNotes {
    /// Each cell's state, where asked for (`with_states`).
    pub states: Option<Vec<CellState>>,
    /// Runs of the cells of tiles the aggregation may yet answer from
    /// their metadata (`md_pending`), in order: first cell in the batch,
    /// cells, and (plan, tile).
    pub pending: Vec<(usize, usize, (usize, u64))>,
}

/// What a dense result cell is, for aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CellState {
    /// No fragment wrote it: a fill value.
    Unwritten,
    /// Written, but the condition rejected it.
    Rejected,
    /// Written and kept.
    Kept,
}

impl Reader {
    /// Plans `spec` over `snapshot`: checks fields, subarray and condition
    /// against the schema (typed errors that say what to change).
    pub fn new(snapshot: Arc<Snapshot>, mut spec: ReadSpec) -> Result<Self> {
        let schema = snapshot.schema();
        let prefetch = prefetch::Prefetch::new(prefetch::Prefetch::LIMIT);
        if let Some((label, _)) = spec.subarray.label_ranges().first() {
            // Turning them into index ranges reads the labels' arrays: I/O
            // the sync drivers do first ([`crate::label::resolve`]).
            return Err(QueryError::Label {
                label: label.clone(),
                reason: "this read takes index ranges only; turn label ranges into them                          first with `tdb_query::label::resolve`"
                    .into(),
            });
        }
        let mut fields: Vec<FieldInfo> = Vec::new();
        let mut requested = Vec::new();
        let slot = |fields: &mut Vec<FieldInfo>, name: &str| -> Result<usize> {
            if let Some(i) = fields.iter().position(|f| f.name == name) {
                return Ok(i);
            }
            fields.push(FieldInfo::resolve(schema, name)?);
            Ok(fields.len().saturating_sub(1))
        };
        for name in &spec.fields {
            let s = slot(&mut fields, name)?;
            requested.push(s);
        }
        let ops = DomainOps::new(&schema.domain)?;
        spec.subarray.check(schema, &ops, spec.whole_tiles)?;
        let sparse = schema.array_type == ArrayType::Sparse;
        if sparse
            && matches!(
                spec.layout,
                ResultLayout::GlobalOrder | ResultLayout::Unordered
            )
        {
            // TileDB's readers for these layouts read the ranges merged its
            // way; its row- and col-major reader reads them as given.
            spec.subarray.merge_string_ranges_as_tiledb(schema);
        }
        if sparse {
            for d in &schema.domain.dimensions {
                slot(&mut fields, &d.name)?;
            }
        } else {
            plan::dense_coords(schema, &spec.subarray)?;
            if spec.layout == ResultLayout::Unordered {
                return Err(QueryError::invalid(
                    "dense arrays have no unordered layout: read row-major, col-major or global order",
                ));
            }
            // Sparse fragments of dense arrays carry coordinates.
            if snapshot.fragments.iter().any(|f| !f.metadata.footer.dense) {
                for d in &schema.domain.dimensions {
                    slot(&mut fields, &d.name)?;
                }
            }
        }
        let condition = match &spec.condition {
            Some(expr) => {
                let c = condition::parse_with_enumerations(expr, schema, &snapshot.enumerations)?;
                let b = BoundCondition::new(&c, schema, &snapshot.enumerations)?;
                for f in b.fields() {
                    slot(&mut fields, f)?;
                }
                Some(b)
            }
            None => None,
        };
        Ok(Reader {
            snapshot,
            spare: Arc::new(tiles::Spare::new(spec.budget / 2)),
            chunks: Arc::default(),
            tile_share: spec.budget / 2,
            batch_share: spec.budget.saturating_sub(spec.budget / 2),
            pieces_started: 0,
            spec,
            fields,
            requested,
            condition,
            deletes: Vec::new(),
            ops,
            plans: Vec::new(),
            tiles: TileMap::default(),
            checked: Default::default(),
            recycled: Vec::new(),
            copy_jobs: std::sync::Mutex::default(),
            results: Results::default(),
            next: (0, 0),
            phase: Phase::Start,
            md_fields: Vec::new(),
            md_sparse: false,
            md_kept: false,
            md_answered: Vec::new(),
            md_from_cells: Vec::new(),
            md_done: Default::default(),
            md_pending: HashMap::default(),
            md_open: None,
            with_states: false,
            last_notes: BatchNotes::default(),
            partitions: Vec::new(),
            fruitless_cuts: 0,
            current: Piece::default(),
            tile_max: Vec::new(),
            emitted: false,
            minmax_skip: false,
            remote: false,
            ahead: None,
            asked_ahead: None,
            prefetch,
            walk_points: Default::default(),
            spill: None,
            narrow: false,
            halved_aim: None,
            unordered_runs: false,
            string_shares: 1,
        })
    }

    fn key(&self) -> Option<&[u8; 32]> {
        self.snapshot.open.key()
    }

    fn dir(&self) -> &str {
        &self.snapshot.open.dir
    }

    /// The next thing the reader needs or has.
    pub fn step(&mut self) -> Result<ReadStep> {
        loop {
            return Ok(match self.next_event()? {
                Event::Need(r) => ReadStep::Need(r),
                Event::Decode(w) => ReadStep::Decode(w),
                Event::Batch(b, _) => ReadStep::Batch(b),
                // Only aggregations ask for tiles answered from metadata.
                Event::FromMetadata(_) | Event::FromCells(_) => continue,
                Event::Done => ReadStep::Done,
            });
        }
    }

    /// Whether the reader is still loading what reads of its snapshot
    /// share (delete commits, fragment-metadata sections), not yet its
    /// own tiles.
    pub(crate) fn loading_metadata(&self) -> bool {
        matches!(
            self.phase,
            Phase::Start | Phase::Sections(..) | Phase::Deletes(..)
        )
    }

    /// The next event: what [`Reader::step`] hands out, and what an
    /// aggregation folds besides batches.
    pub(crate) fn next_event(&mut self) -> Result<Event> {
        if let Some(e) = self.md_event() {
            return Ok(e);
        }
        loop {
            // (Whether a batch of tile requests may read on.)
            let more = self.more_pieces(self.ahead.is_some());
            match &mut self.phase {
                Phase::Start => {
                    self.load_deletes()?;
                    continue;
                }
                Phase::Sections(_, _, answers) | Phase::Deletes(_, answers) => {
                    return ask(answers);
                }
                Phase::Tiles(fetching) => {
                    let Some(requests) = fetching.answers.ask() else {
                        return ask(&mut fetching.answers);
                    };
                    let (out, answered) = match self.asked_ahead.take() {
                        Some(a) if a.asked == requests => (a.out, a.answered),
                        other => {
                            // (Not what was planned: its answers will not come.)
                            if let Some(a) = other {
                                self.prefetch.forget(&a.out);
                            }
                            self.prefetch.shape(requests, more)
                        }
                    };
                    for (r, read) in answered {
                        (fetching.answers.take(&r, Some(read)))
                            .map_err(|e| QueryError::invalid(e.to_string()))?;
                    }
                    if !out.is_empty() {
                        return Ok(Event::Need(out));
                    }
                    // Every request answered from bytes read on before.
                    if let Phase::Tiles(f) = std::mem::replace(&mut self.phase, Phase::Done) {
                        self.fetched(f)?;
                    }
                    continue;
                }
                Phase::Decode(work) => {
                    return match work.take() {
                        Some(w) => Ok(Event::Decode(w)),
                        None => Err(QueryError::invalid(
                            "the reader is waiting for its tiles decoded (call push_decoded)",
                        )),
                    };
                }
                Phase::Emit => {
                    if let Some(b) = self.next_batch()? {
                        self.emitted = true;
                        return Ok(Event::Batch(b, std::mem::take(&mut self.last_notes)));
                    }
                    // This piece is done: go on with the next, which keeps
                    // the tiles it reads too and frees the others.
                    self.results = Results::default();
                    self.next = (0, 0);
                    let last = self.ahead.is_none() && self.partitions.is_empty();
                    self.settle_pending(last);
                    if let Some(spilled::Spilled::Records(spill)) = &mut self.spill {
                        // A spilled piece's tiles go now (no later piece
                        // reads them), and the runs merge in their room.
                        self.spare.keep_tiles(self.tiles.drain().map(|(_, t)| t));
                        if spill.unsettled() {
                            self.spare.release();
                            spill.settle()?;
                        }
                    }
                    if self.ahead.is_some() || !self.partitions.is_empty() {
                        self.next_partition()?;
                        if let Some(e) = self.md_event() {
                            return Ok(e);
                        }
                        continue;
                    }
                    self.spare.keep_tiles(self.tiles.drain().map(|(_, t)| t));
                    if let Some(spill) = self.spill.take() {
                        self.phase = Phase::Merge(Box::new(self.merge(spill)?));
                        continue;
                    }
                    self.phase = Phase::Done;
                    if let Some(e) = self.md_event() {
                        return Ok(e);
                    }
                    if let Some(b) = self.empty_batch() {
                        return Ok(b);
                    }
                }
                Phase::Merge(merge) => {
                    let (fields, packed) = (&self.fields, self.spec.packed_validity);
                    let batch = merge.next_batch(fields, packed, &mut self.recycled)?;
                    let (pending, settled) = match &mut **merge {
                        spilled::Merging::Records(m) => {
                            (m.take_pending(), m.settled(batch.is_none()))
                        }
                        spilled::Merging::Stretches(_) => Default::default(),
                    };
                    self.md_settled(settled);
                    if let Some(b) = batch {
                        self.emitted = true;
                        let notes = BatchNotes {
                            states: None,
                            pending,
                        };
                        return Ok(Event::Batch(b, notes));
                    }
                    self.phase = Phase::Done;
                    if let Some(e) = self.md_event() {
                        return Ok(e);
                    }
                    if let Some(b) = self.empty_batch() {
                        return Ok(b);
                    }
                }
                Phase::Done => return Ok(Event::Done),
            }
        }
    }

    /// Once a piece's batches are out (the aggregation has folded their
    /// cells), the tiles pieces held parts of whose answer is known
    /// ([`whole_tiles::Pending::settled`]; `last`: every tile) settle: answered
    /// from their metadata where every cell was kept and no piece found
    /// the merge cut them, else from the cells.
    fn settle_pending(&mut self, last: bool) {
        let plans = &self.plans;
        let mut settled = whole_tiles::Settled::default();
        self.md_pending.retain(|&(fi, t), p| {
            let n = (plans.get(fi)).map_or(u64::MAX, |plan| plan.cells(t, plan.tile_num()));
            if !(last || p.settled(n)) {
                return true;
            }
            match p.whole(n) {
                true => settled.whole.push((fi, t)),
                false => settled.cells.push((fi, t)),
            }
            false
        });
        self.md_settled(settled);
    }

    /// Tiles settled, for the aggregation: `whole` answered from their
    /// metadata (where it is there), the others from their cells folded
    /// apart; each tile once.
    fn md_settled(&mut self, settled: whole_tiles::Settled) {
        let (plans, fields, md_fields) = (&self.plans, &self.fields, &self.md_fields);
        let whole_tiles::Settled {
            mut whole,
            mut cells,
        } = settled;
        whole.retain(|&(fi, t)| {
            let answers = (plans.get(fi))
                .is_some_and(|p| aggregate::metadata_answers(p, fields, md_fields, t));
            if !answers {
                cells.push((fi, t));
            }
            answers
        });
        whole.sort_unstable();
        cells.sort_unstable();
        for tile in whole {
            if self.md_done.insert(tile) {
                self.md_answered.push(tile);
            }
        }
        for tile in cells {
            if self.md_done.insert(tile) {
                self.md_from_cells.push(tile);
            }
        }
    }

    /// The tiles of each plan a merge of spilled runs may find whole
    /// ([`whole_tiles::MergeWatch`]): those whose metadata answers.
    fn merge_watch(&self) -> whole_tiles::MergeWatch {
        let plans = (self.plans.iter())
            .map(|p| {
                let f = &p.meta.footer;
                let answers = !f.dense
                    && p.tile_num() > 0
                    && aggregate::metadata_answers(p, &self.fields, &self.md_fields, 0);
                answers.then_some(whole_tiles::TileCells {
                    capacity: p.schema.capacity,
                    tiles: p.tile_num(),
                    last: f.last_tile_cell_num,
                })
            })
            .collect();
        whole_tiles::MergeWatch::new(plans)
    }

    /// What the aggregation learns of tiles next, if anything.
    fn md_event(&mut self) -> Option<Event> {
        if !self.md_answered.is_empty() {
            return Some(Event::FromMetadata(std::mem::take(&mut self.md_answered)));
        }
        if !self.md_from_cells.is_empty() {
            return Some(Event::FromCells(std::mem::take(&mut self.md_from_cells)));
        }
        None
    }

    /// Whether pieces come after the one whose requests go out now
    /// (`planned`: one is planned ahead), so its files are worth reading
    /// on. (Not for a narrow read: its probes jump about its tiles, and
    /// bytes read on past them went unused, twice the bytes.)
    fn more_pieces(&self, planned: bool) -> bool {
        !self.narrow && (planned || !self.partitions.is_empty())
    }

    /// The one empty batch of a read that found no cell, once.
    fn empty_batch(&mut self) -> Option<Event> {
        if self.emitted {
            return None;
        }
        self.emitted = true;
        let fields = self
            .requested
            .iter()
            .filter_map(|&s| Some(self.fields.get(s)?.empty_buffer()))
            .collect();
        let batch = Batch {
            num_cells: 0,
            fields,
        };
        Some(Event::Batch(batch, BatchNotes::default()))
    }

    /// Answers to the ranges of the last [`ReadStep::Need`]: any of them,
    /// in any order (`None` where a file was missing). The reader goes on
    /// once every range has its answer; an answer to a range it did not
    /// ask for, or a second answer to one, is an error.
    pub fn push(
        &mut self,
        answers: impl IntoIterator<Item = (RangeRequest, Option<RangeRead>)>,
    ) -> Result<()> {
        let pending = match &mut self.phase {
            Phase::Sections(_, _, a) | Phase::Deletes(_, a) => a,
            Phase::Tiles(f) => &mut f.answers,
            _ => return Err(QueryError::invalid("push without a pending request")),
        };
        for (sent, read) in answers {
            for (request, read) in self.prefetch.take(sent, read) {
                pending
                    .take(&request, read)
                    .map_err(|e| QueryError::invalid(e.to_string()))?;
            }
        }
        if !pending.complete() {
            return Ok(());
        }
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Sections(wanted, coalesced, answers) => {
                let reads = answers.into_reads();
                for (want, read) in wanted.into_iter().zip(coalesced.split(&reads)) {
                    let (i, section) = (want.frag, want.section);
                    let plan = self.plans.get_mut(i).ok_or_else(|| unknown_fragment(i))?;
                    let bytes = read.ok_or_else(|| {
                        QueryError::from(tdb_fragment::FragmentError::missing(
                            &plan.file.path,
                            "fragment metadata",
                        ))
                    })?;
                    plan.meta.load_section(
                        section,
                        &bytes,
                        self.snapshot.open.key(),
                        &plan.schema,
                    )?;
                    if let Some(data) = plan.meta.shared_section(section) {
                        self.snapshot
                            .sections()
                            .keep(&plan.file.path, section, data);
                    }
                }
                self.start_partitions()
            }
            Phase::Deletes(wanted, answers) => {
                let snapshot = Arc::clone(&self.snapshot);
                let schema = snapshot.schema();
                for ((ts, file), read) in wanted.into_iter().zip(answers.into_reads()) {
                    let read = read.ok_or_else(|| {
                        QueryError::from(tdb_fragment::FragmentError::missing(
                            &file,
                            "delete commit",
                        ))
                    })?;
                    let commit = DeleteCommit::parse(&file, &read.bytes, self.key())?;
                    let delete =
                        BoundDelete::bind(&file, ts, &commit, schema, &snapshot.enumerations)?;
                    for f in delete.condition.fields() {
                        if !self.fields.iter().any(|x| &x.name == f) {
                            self.fields.push(FieldInfo::resolve(schema, f)?);
                        }
                    }
                    self.deletes.push(delete);
                }
                self.after_deletes()
            }
            Phase::Tiles(fetching) => self.fetched(fetching),
            _ => Err(QueryError::invalid("push without a pending request")),
        }
    }

    /// A piece's fetch whose last batch of requests is answered: the next
    /// batch of its sliced tiles' walks, or once every tile is in, their
    /// decoding. (A batch may need no request: a walk that starts with a
    /// chunk the last piece's walk kept.)
    fn fetched(&mut self, mut fetching: Box<Fetching>) -> Result<()> {
        while fetching.answers.complete() {
            if fetching.absorb(|fetch, found| self.var_bytes(fetch, found))? {
                let (fetches, parts) = fetching.finish(&mut self.walk_points, self.pieces_started);
                let work = self.decode_work(fetches, parts)?;
                self.phase = Phase::Decode(Some(work));
                return Ok(());
            }
        }
        // Sliced tiles walk on.
        self.phase = Phase::Tiles(fetching);
        Ok(())
    }

    /// The decoded tiles of the last [`ReadStep::Decode`]'s work.
    pub fn push_decoded(&mut self, decoded: Decoded) -> Result<()> {
        if !matches!(self.phase, Phase::Decode(None)) || decoded.piece != self.pieces_started {
            return Err(QueryError::invalid(
                "push_decoded with tiles the reader is not waiting for",
            ));
        }
        self.tiles.extend(decoded.tiles);
        self.checked = decoded.checked;
        self.compute()?;
        self.phase = Phase::Emit;
        Ok(())
    }

    fn build_plans(&mut self) -> Result<()> {
        let snapshot = Arc::clone(&self.snapshot);
        let encrypted = self.key().is_some();
        // One copy of each schema fragments were written under.
        let mut schemas: HashMap<&str, Arc<ArraySchema>> = HashMap::new();
        for frag in &snapshot.fragments {
            // A fragment with nothing in the subarray takes no part: none of
            // its sections is read (opening many small fragments stays cheap).
            let outside = frag
                .metadata
                .footer
                .non_empty_domain
                .as_ref()
                .is_some_and(|ned| !plan::mbr_overlaps(self.ops.dims(), ned, &self.spec.subarray));
            if outside {
                continue;
            }
            let name = frag.metadata.footer.array_schema_name.as_str();
            let schema = schemas.entry(name).or_insert_with(|| {
                Arc::new(
                    snapshot
                        .open
                        .schemas
                        .by_name(name)
                        .map_or(snapshot.schema(), |e| &e.schema)
                        .clone(),
                )
            });
            let schema = Arc::clone(schema);
            let footer = &frag.metadata.footer;
            let frag_dir = join(self.dir(), &frag.file.path);
            let fields: Vec<_> = self
                .fields
                .iter()
                .map(|f| frag_field(footer, &schema, f, encrypted).map(|ff| ff.in_dir(&frag_dir)))
                .collect();
            // Per-cell fields are read where fragments have them only.
            if let Some((f, _)) = self
                .fields
                .iter()
                .zip(&fields)
                .find(|(f, ff)| matches!(f.kind, Kind::PerCell(_)) && ff.is_none())
            {
                let (what, kept_by) = if f.kind == Kind::PerCell(Field::Timestamps) {
                    ("per-cell timestamps", "consolidated with timestamps")
                } else {
                    ("delete metadata", "merged over delete commits")
                };
                return Err(QueryError::invalid(format!(
                    "{}: fragment {} has no {what} (only fragments {kept_by} do)",
                    f.name, frag.file.path
                )));
            }
            // A read of the delete metadata itself (a merge carrying it
            // on) sees deleted cells too, as TileDB's does.
            let reads_delete_meta = self
                .fields
                .iter()
                .any(|f| f.kind == Kind::PerCell(Field::DeleteTimestamps));
            let mut meta = frag.metadata.clone();
            snapshot.sections().restore(&frag.file.path, &mut meta);
            let timestamps = footer
                .has_timestamps
                .then(|| special_field(footer, &schema, Field::Timestamps, encrypted))
                .flatten()
                .map(|ff| ff.in_dir(&frag_dir));
            let delete_timestamps = (footer.has_delete_meta && !reads_delete_meta)
                .then(|| special_field(footer, &schema, Field::DeleteTimestamps, encrypted))
                .flatten()
                .map(|ff| ff.in_dir(&frag_dir));
            let plan = FragPlan {
                file: frag.file.clone(),
                meta,
                schema,
                fields,
                timestamps,
                delete_timestamps,
                tiles: Vec::new(),
                rtree: Arc::new(tdb_index::RTree::empty(tdb_index::DEFAULT_FANOUT)),
                grid: Default::default(),
            };
            // The data files' sizes the footer records: a file's first
            // request may read on too (it waited for an answer to tell
            // the size: on remote storage a request a file).
            for (_, ff) in Self::frag_fields(&plan) {
                for ((part, _), path) in ff.parts.iter().zip(&ff.paths) {
                    if let Some(size) = footer.file_size(ff.index, *part) {
                        self.prefetch.recorded_size(path, size);
                    }
                }
            }
            self.plans.push(plan);
        }
        Ok(())
    }

    /// The fields fragment `plan` stores for the read, by slot: the
    /// requested ones it has, then its per-cell timestamps and delete
    /// times. (An iterator: estimates ask for them a few times a piece.)
    fn frag_fields(plan: &FragPlan) -> impl Iterator<Item = (usize, &FragField)> {
        let fields =
            (plan.fields.iter().enumerate()).filter_map(|(s, f)| f.as_ref().map(|f| (s, f)));
        let stamps = (plan.timestamps.iter()).map(|t| (TIMESTAMPS_SLOT, t));
        let deletes = (plan.delete_timestamps.iter()).map(|t| (DELETE_TS_SLOT, t));
        fields.chain(stamps).chain(deletes)
    }

    /// The sections the read needs that are not loaded yet, and where.
    fn section_requests(&self) -> Result<Vec<SectionRead>> {
        let mut wanted = Vec::new();
        for (i, plan) in self.plans.iter().enumerate() {
            let meta = &plan.meta;
            let footer = &meta.footer;
            let mut sections = Vec::new();
            if !footer.dense && meta.legacy_mbrs().is_none() {
                sections.push(Section::RTree);
            }
            for (_, ff) in Self::frag_fields(plan) {
                for (part, _) in &ff.parts {
                    match part {
                        DataPart::Fixed => sections.push(Section::TileOffsets(ff.index)),
                        DataPart::Var => {
                            sections.push(Section::VarOffsets(ff.index));
                            sections.push(Section::VarSizes(ff.index));
                        }
                        DataPart::Validity => sections.push(Section::ValidityOffsets(ff.index)),
                    }
                }
            }
            // Tile metadata exists from format version 11.
            if (footer.dense || self.md_sparse || self.md_kept) && footer.version >= 11 {
                for &(slot, _) in &self.md_fields {
                    let Some(Some(ff)) = plan.fields.get(slot) else {
                        continue;
                    };
                    let i = ff.index;
                    let mut md = vec![Section::Mins(i), Section::Maxes(i), Section::Sums(i)];
                    if self.fields.get(slot).is_some_and(|f| f.nullable) {
                        md.push(Section::NullCounts(i));
                    }
                    // Fields without some of it (sums of strings) lack
                    // the section: the aggregate then reads their cells.
                    sections.extend(
                        md.into_iter()
                            .filter(|&s| footer.section_offset(s).is_some()),
                    );
                }
            }
            if self.minmax_skip && !footer.dense && footer.version >= 11 {
                for f in self.condition.iter().flat_map(|c| c.fields()) {
                    let slot = self.fields.iter().position(|x| &x.name == f);
                    if let Some(ff) = slot.and_then(|s| plan.fields.get(s)?.as_ref()) {
                        let i = ff.index;
                        // (A float's sums tell where its bounds hold:
                        // `FragPlan::tile_bounds`.)
                        let float = slot.and_then(|s| self.fields.get(s)).is_some_and(|f| {
                            matches!(f.datatype, Datatype::Float32 | Datatype::Float64)
                        });
                        let sums = float.then_some(Section::Sums(i));
                        sections.extend(
                            [Section::Mins(i), Section::Maxes(i)]
                                .into_iter()
                                .chain(sums)
                                .filter(|&s| footer.section_offset(s).is_some()),
                        );
                    }
                }
            }
            let name = plan.file.file_name().to_owned();
            let file = join(
                &join(self.dir(), &plan.file.path),
                tdb_format::names::FRAGMENT_METADATA_FILE,
            );
            for s in sections {
                if meta.section(s).is_some() {
                    continue;
                }
                wanted.push(SectionRead {
                    frag: i,
                    section: s,
                    file: file.clone(),
                    range: footer.section_range(s, &name)?,
                });
            }
        }
        Ok(wanted)
    }

    /// Delete commits first: their conditions may read fields the query
    /// does not, whose sections must then load too.
    fn load_deletes(&mut self) -> Result<()> {
        // Delete commits apply to sparse arrays.
        let mut wanted = Vec::new();
        let mut requests = Vec::new();
        if self.snapshot.schema().array_type == ArrayType::Sparse {
            for c in &self.snapshot.open.directory.conditions {
                if c.is_update {
                    continue;
                }
                let (path, range) = c.location.range();
                requests.push(RangeRequest::new(join(self.dir(), path), range));
                wanted.push((c.timestamp(), c.marker.clone()));
            }
        }
        if requests.is_empty() {
            return self.after_deletes();
        }
        self.phase = Phase::Deletes(wanted, Answers::new(requests));
        Ok(())
    }

    fn after_deletes(&mut self) -> Result<()> {
        // Every field the read touches is known now.
        self.build_plans()?;
        let schema = self.snapshot.schema();
        // One fragment holds one cell per coordinate, unless consolidation
        // kept its cells' timestamps: then older versions stay beside the
        // newest, in other tiles maybe.
        let one_cell_per_coordinate =
            schema.allows_dups || matches!(self.plans.as_slice(), [p] if p.timestamps.is_none());
        self.minmax_skip = schema.array_type == ArrayType::Sparse
            && self.condition.is_some()
            && one_cell_per_coordinate;
        let md_asked = self.md_sparse && schema.array_type == ArrayType::Sparse;
        self.md_sparse = md_asked
            && self.condition.is_none()
            && self.deletes.is_empty()
            && one_cell_per_coordinate;
        // Where TileDB's merge cuts tiles (`SparseScan::merged_whole`): at
        // every other fragment's cell, whether the condition or a delete
        // keeps it or not, and at its own cells they remove (its tiles
        // then are not whole). Not over fragments whose cells carry
        // timestamps (versions of a coordinate side by side in one
        // fragment; TileDB's consolidation wrote their metadata from the
        // cells as read, so it answers alike either way).
        let merged = !schema.allows_dups
            && (one_cell_per_coordinate
                || (self.plans.iter())
                    .all(|p| p.timestamps.is_none() && p.delete_timestamps.is_none()));
        let merges_whole = match self.spec.layout {
            ResultLayout::Unordered => schema.allows_dups || merged,
            ResultLayout::GlobalOrder => merged,
            _ => false,
        };
        // (Over several ranges a dimension too: these readers sort and
        // merge the ranges first, so a tile is whole where every cell of
        // it lies in their union.)
        self.md_kept = md_asked && merges_whole;
        let wanted = self.section_requests()?;
        if wanted.is_empty() {
            return self.start_partitions();
        }
        let coalesced = Coalesced::new(wanted.iter().map(|w| (w.file.as_str(), w.range.clone())));
        let answers = Answers::new(coalesced.requests.clone());
        self.phase = Phase::Sections(wanted, coalesced, answers);
        Ok(())
    }

    /// Every section is in: R-tree leaves parsed once, the largest tile
    /// of each fragment the subarray reaches checked against the budget
    /// (up front, before any tile is fetched), then the first piece of the
    /// subarray.
    fn start_partitions(&mut self) -> Result<()> {
        let snapshot = Arc::clone(&self.snapshot);
        for plan in &mut self.plans {
            let meta = &plan.meta;
            if meta.footer.dense {
                continue;
            }
            let tree =
                (snapshot.sections()).rtree(&plan.file.path, || meta.rtree(&plan.schema.domain))?;
            plan.rtree = tree
                .unwrap_or_else(|| Arc::new(tdb_index::RTree::empty(tdb_index::DEFAULT_FANOUT)));
        }
        // A fragment's tile count comes from its footer (sparse) or its
        // non-empty domain (dense), which nothing authenticates; the tile
        // offsets of each field are as many as their bytes hold. Tiles are
        // counted against those before anything loops over them.
        for plan in &self.plans {
            let tiles = plan.tile_num();
            for (_, ff) in Self::frag_fields(plan) {
                let recorded = plan.meta.recorded_tiles(ff.index)?;
                if recorded != tiles {
                    return Err(QueryError::invalid(format!(
                        "fragment {}: {tiles} tiles by its footer, but field {} has {recorded} \
                         tile offsets",
                        plan.file.path, ff.index
                    )));
                }
            }
        }
        self.tile_max = (0..self.plans.len())
            .map(|i| {
                (self.reached_tiles(i))
                    .map(|t| self.tile_bytes(i, t))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        if sparse::parts_dim(snapshot.schema(), &self.spec.subarray).is_some() {
            let index_reader = matches!(
                self.spec.layout,
                ResultLayout::GlobalOrder | ResultLayout::Unordered
            );
            let tiles = (0..self.plans.len())
                .map(|i| self.reached_tiles(i).count())
                .sum();
            self.string_shares =
                sparse::tiledb_range_shares(index_reader, tiles, crate::tiledb_threads());
        }
        self.narrow = self.narrow_read();
        let spills = self.spills();
        self.unordered_runs = !spills && self.reads_unordered_in_runs();
        // What a piece must hold whatever its cells.
        let (whole, chunks) = self.piece_least(spills || self.unordered_runs);
        // Tiles get half the budget. Tiles held whole must fit in it: where
        // one needs more, tiles get that and half the rest, batches then
        // hold fewer cells, down to one. Where even one cell does not fit
        // beside the tile, the read goes over the budget by that tile, as
        // by a chunk below, rather than refuse: such a tile is one chunk
        // to its filters (TileDB writes string RLE and dictionary tiles
        // unchunked), a pre-v5 tile of zipped coordinates, or a small tile
        // the read does not slice under a budget of a few kilobytes (25
        // legacy fixture queries under 2 KiB). Tiles then get it and a
        // quarter, batches a quarter.
        // Chunks need not fit either: where they need more than a
        // quarter, tiles get them and a quarter, and the read goes over
        // the budget by at most those chunks, as it does by the decoder's
        // own chunk, a cost the fields' filter pipelines set (their chunk
        // size), never the tiles or the data. Pieces then hold more than
        // one cell (one-cell pieces cost 1,000 times the unbudgeted read).
        let budget = self.spec.budget;
        let cell = self.result_cell_bytes();
        if whole.0 > budget / 2 {
            let batch = budget.saturating_sub(whole.0) / 2;
            if batch < cell {
                let quarter = (budget / 4).max(cell);
                self.tile_share = whole.0.saturating_add(quarter);
                self.batch_share = quarter;
                let plan = self.plans.get(whole.1);
                // Why the tile is held whole, where a field says so.
                let field = plan.and_then(|p| {
                    let (slot, _) = Self::frag_fields(p)
                        .find(|(_, ff)| !tiles::sliceable(ff, p.schema.version))?;
                    Some(
                        self.fields
                            .get(slot)
                            .map_or("per-cell metadata", |f| &f.name),
                    )
                });
                tracing::warn!(
                    budget,
                    tile = whole.0,
                    fragment = plan.map_or("?", |p| p.file.path.as_str()),
                    field = field.unwrap_or("(none: the read does not slice the tile)"),
                    "a tile held whole needs more than the memory budget: the read goes over it"
                );
            } else {
                self.tile_share = budget.saturating_sub(batch);
                self.batch_share = batch;
            }
        }
        self.tile_share = self.share_holding(chunks);
        self.partitions = vec![Piece {
            sub: self.spec.subarray.clone(),
            ..Piece::default()
        }];
        // Fresh memory costs a page fault a page, as much as the copy
        // into it: a local dense read of one piece of a few MiB goes in
        // two, so the second half's fetch reuses the first's buffers (W2's
        // whole 1024² read, 4 MiB stored as it is: 6.5 -> 3.8 ms, its peak
        // 17 -> 13 MiB). Not sparse reads, whose halves may each need
        // every tile (MBRs across the domain); nor remote ones, which
        // fetch the next piece while one is read.
        let dense = (self.plans.iter()).all(|p| p.meta.footer.dense);
        if dense && !self.remote && self.spec.piece_aim.is_none() && !spills {
            let whole = self.partitions.first().map_or(0, |p| self.estimate(p));
            if whole > Self::HALVED_MIN && whole <= self.piece_aim() {
                self.halved_aim = Some(whole / 2);
            }
        }
        if spills || self.unordered_runs {
            if spills {
                // (The tile budget before the spill takes its part.)
                let budget = self.tile_budget();
                self.spill = Some(match self.snapshot.schema().array_type {
                    ArrayType::Dense => {
                        let buffer = usize::try_from(budget / 4).unwrap_or(usize::MAX);
                        let st = stretches::Stretches::new(&self.fields, &self.requested, buffer)?;
                        spilled::Spilled::Stretches(st)
                    }
                    ArrayType::Sparse => {
                        // Records store their stamps only where some
                        // fragment keeps its cells' own.
                        let own = self.plans.iter().any(|p| p.timestamps.is_some());
                        let stamps =
                            (!own).then(|| self.plans.iter().map(FragPlan::cell_stamp).collect());
                        let most = (self.plans.iter()).map(FragPlan::tile_num).max();
                        let fmt = spill::RunFormat::new(&self.fields, &self.requested)?
                            .implied(stamps, most.unwrap_or(0));
                        let writer = usize::try_from(self.batch_share / 2).unwrap_or(usize::MAX);
                        let spill = spill::Spill::within(fmt, self.run_order(), budget, writer);
                        spilled::Spilled::Records(spill)
                    }
                });
            }
            // Runs of each fragment's tiles, the first fragment's first.
            self.partitions = (self.plans.iter().enumerate().rev())
                .map(|(i, plan)| Piece {
                    sub: self.spec.subarray.clone(),
                    run: Some(0..plan.tile_num()),
                    frag: Some(i),
                    ..Piece::default()
                })
                .collect();
        }
        self.next_partition()
    }

    /// A piece's tiles are decoded: its result cells.
    fn compute(&mut self) -> Result<()> {
        let schema = self.snapshot.schema();
        let window = self.snapshot.open.directory.window;
        if schema.array_type == ArrayType::Sparse {
            // A probe read one dimension of one cell: no result.
            if self.current.probe {
                self.after_probe();
                return Ok(());
            }
            // A piece of one tile's cells (a read that spills).
            let held = (self.current.frag)
                .zip(self.current.run.as_ref())
                .zip(self.current.cells.clone())
                .map(|((f, run), cells)| (f, run.start, cells));
            let scan = sparse::SparseScan {
                schema,
                plans: &self.plans,
                fields: &self.fields,
                tiles: &self.tiles,
                checked: &self.checked,
                ops: self.ops.dims(),
                subarray: &self.current.sub,
                window: (window.start, window.end),
                deletes: &self.deletes,
                condition: self.condition.as_ref(),
                layout: self.cut_layout(),
                parts: sparse::parts_dim(schema, &self.spec.subarray).map(|dim| {
                    sparse::PartsRule {
                        dim,
                        given: self.spec.subarray.ranges(dim),
                        share: self.current.share.as_ref(),
                        shares: self.string_shares,
                    }
                }),
                held: held.as_ref(),
                whole: None,
                pending: None,
                open: None,
            };
            // Tiles kept whole answer from their metadata (`md_kept`).
            let (plans, fields, md_fields, done) =
                (&self.plans, &self.fields, &self.md_fields, &self.md_done);
            let whole = |fi: usize, t: u64| {
                !done.contains(&(fi, t))
                    && (plans.get(fi))
                        .is_some_and(|p| aggregate::metadata_answers(p, fields, md_fields, t))
            };
            let scan = sparse::SparseScan {
                whole: self
                    .md_kept
                    .then_some(&whole as &dyn Fn(usize, u64) -> bool),
                pending: Some(&self.md_pending),
                open: self.md_open,
                ..scan
            };
            match &mut self.spill {
                Some(spilled::Spilled::Stretches(_)) => {
                    return Err(QueryError::invalid(
                        "a sparse fragment's cells in stretches",
                    ));
                }
                Some(spilled::Spilled::Records(spill)) => {
                    let mut run = spill.writer(0)?;
                    scan.spill(&spill.fmt, &mut run)?;
                    let run = run.finish(&spill.fmt)?;
                    tracing::debug!(
                        piece = self.pieces_started,
                        cells = run.records(),
                        "run spilled"
                    );
                    spill.push(run)?;
                }
                None => {
                    let (results, md) = scan.cells()?;
                    self.results = results;
                    for tile in md.answered {
                        if self.md_done.insert(tile) {
                            self.md_answered.push(tile);
                        }
                    }
                    for (tile, share) in md.parts {
                        (self.md_pending.entry(tile))
                            .or_insert(whole_tiles::Pending::NONE)
                            .add(share);
                    }
                    self.md_open = md.open;
                }
            }
        } else if let Some(mut spill) = self.spill.take() {
            let spilled = match &mut spill {
                spilled::Spilled::Stretches(st) => self.spill_dense(st),
                spilled::Spilled::Records(_) => {
                    Err(QueryError::invalid("a dense fragment's cells in records"))
                }
            };
            self.spill = Some(spill);
            spilled?;
        } else if self.plans.iter().any(|p| !p.meta.footer.dense) {
            let old = std::mem::take(&mut self.results);
            self.results =
                dense::overlay_sparse(schema, &self.plans, &self.fields, &self.tiles, old);
        }
        Ok(())
    }

    /// A sliced var-size tile's data bytes its cells hold, from its
    /// offsets' chunks `found` (see [`tiles::var_bytes`]).
    fn var_bytes(
        &self,
        fetch: &TileFetch,
        found: &[(tdb_tile::WalkedChunk, bytes::Bytes)],
    ) -> Result<Vec<std::ops::Range<u64>>> {
        let (i, slot, t) = fetch.key;
        let plan = self.plans.get(i).ok_or_else(|| unknown_fragment(i))?;
        let ff = (plan.field(slot))
            .ok_or_else(|| QueryError::invalid("var data of an unknown field"))?;
        let (part, (_, pf)) = (ff.parts.iter().enumerate())
            .find(|(_, (p, _))| *p == DataPart::Fixed)
            .ok_or_else(|| QueryError::invalid("var data without offsets"))?;
        let filters = pf.tile_filters(plan.schema.version, self.key());
        let var_size = plan.meta.var_tile_size(ff.index, t)?;
        tiles::var_bytes(fetch, found, (&filters, part), var_size, &self.chunks)
    }

    /// The decoding of `fetches` from their parts' bytes (in order).
    fn decode_work(
        &self,
        fetches: Vec<TileFetch>,
        parts: Vec<Vec<Option<PartBytes>>>,
    ) -> Result<DecodeWork> {
        let mut bytes = Vec::with_capacity(fetches.len());
        for (f, got) in fetches.iter().zip(parts) {
            let mut b = Vec::with_capacity(f.parts.len());
            for ((_, path, _), r) in f.parts.iter().zip(got) {
                let r = r.ok_or_else(|| {
                    QueryError::from(tdb_fragment::FragmentError::missing(path, "data file"))
                })?;
                b.push(r);
            }
            bytes.push(b);
        }
        // Each field of each fragment once, however many of its tiles.
        let mut fields: Vec<FragField> = Vec::new();
        let mut field_of: HashMap<(usize, usize), usize> = HashMap::new();
        let mut jobs = Vec::with_capacity(fetches.len());
        for fetch in &fetches {
            let (i, slot, t) = fetch.key;
            let plan = self.plans.get(i).ok_or_else(|| unknown_fragment(i))?;
            let field = match field_of.get(&(i, slot)) {
                Some(&f) => f,
                None => {
                    let ff = (plan.field(slot))
                        .ok_or_else(|| QueryError::invalid("tile of an unknown field"))?;
                    fields.push(ff.clone());
                    let f = fields.len().saturating_sub(1);
                    field_of.insert((i, slot), f);
                    f
                }
            };
            let ff = fields
                .get(field)
                .ok_or_else(|| QueryError::invalid("tile of an unknown field"))?;
            let var_size = ff
                .parts
                .iter()
                .any(|(p, _)| *p == DataPart::Var)
                .then(|| plan.meta.var_tile_size(ff.index, t).ok())
                .flatten();
            jobs.push(tiles::TileInfo {
                field,
                version: plan.schema.version,
                var_size,
            });
        }
        let bounds = self.bounded_tiles(&fetches);
        Ok(DecodeWork {
            piece: self.pieces_started,
            bounds,
            fetches,
            bytes,
            jobs,
            fields,
            key: self.key().copied(),
            spare: Arc::clone(&self.spare),
            chunks: Arc::clone(&self.chunks),
        })
    }

    /// The sparse tiles of `fetches` whose fields decode in the chunks
    /// holding cells within the piece's ranges ([`tiles::TileBound`]):
    /// those the piece cuts along a fixed-size dimension whose tile it
    /// fetches, the dimension its cell order sorts first decoded first.
    /// None for a piece of one tile's cells (already cut to them), or
    /// where a delete's condition decides over every cell of a tile
    /// (arrays without duplicates: a deleted cell hides older ones).
    fn bounded_tiles(&self, fetches: &[TileFetch]) -> Vec<tiles::TileBound> {
        let schema = self.snapshot.schema();
        let piece = &self.current;
        if piece.cells.is_some() || piece.probe || !(schema.allows_dups || self.deletes.is_empty())
        {
            return Vec::new();
        }
        let n = schema.domain.dimensions.len();
        let order: Vec<usize> = match schema.cell_order {
            tdb_format::Layout::ColMajor => (0..n).rev().collect(),
            _ => (0..n).collect(),
        };
        let mut by_tile: std::collections::BTreeMap<(usize, u64), Vec<usize>> = Default::default();
        for (k, f) in fetches.iter().enumerate() {
            let (i, _, t) = f.key;
            if f.needed.is_none() && !f.sliced {
                by_tile.entry((i, t)).or_default().push(k);
            }
        }
        let slot_of = |k: usize| fetches.get(k).map(|f| f.key.1);
        let mut bounds = Vec::new();
        for ((i, t), ks) in by_tile {
            let Some(plan) = self.plans.get(i).filter(|p| !p.meta.footer.dense) else {
                continue;
            };
            let mut dims = Vec::new();
            for &d in &order {
                let ranges = piece.sub.ranges(d);
                let fixed = (schema.domain.dimensions.get(d)).is_some_and(|dim| !dim.is_var());
                if !fixed
                    || ranges.is_empty()
                    || plan.tile_within_dim(self.ops.dims(), &piece.sub, t, d)
                {
                    continue;
                }
                let slot = self.fields.iter().position(|f| f.kind == Kind::Dim(d));
                let k = ks
                    .iter()
                    .copied()
                    .find(|&k| slot.is_some() && slot_of(k) == slot);
                if let (Some(k), Some(&ops)) = (k, self.ops.dims().get(d)) {
                    dims.push((k, d, ops, ranges.to_vec()));
                }
            }
            let rest: Vec<usize> = (ks.iter().copied())
                .filter(|&k| !dims.iter().any(|d| d.0 == k))
                .filter(|&k| !matches!(slot_of(k), Some(TIMESTAMPS_SLOT | DELETE_TS_SLOT)))
                .collect();
            if dims.is_empty() || (rest.is_empty() && dims.len() < 2) {
                continue;
            }
            bounds.push(tiles::TileBound {
                tile: (i, t),
                dims,
                rest,
            });
        }
        bounds
    }
}

/// The requests of a batch the reader waits for, the first time it is
/// asked; then an error: the driver must push their answers.
fn ask(answers: &mut Answers) -> Result<Event> {
    match answers.ask() {
        Some(r) => Ok(Event::Need(r)),
        None => Err(QueryError::invalid(format!(
            "the reader is waiting for {} answers to the ranges it asked for (call push)",
            answers.missing()
        ))),
    }
}

/// A fragment index the reader's own plans lack (a bug, not bad input).
fn unknown_fragment(i: usize) -> QueryError {
    QueryError::invalid(format!("no fragment {i} in the read's plan"))
}
