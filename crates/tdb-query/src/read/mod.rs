//! The read state machine and its synchronous driver.
//!
//! Phases: the delete commits' conditions (one batch; they may read fields
//! the query does not), the fragment-metadata sections the read needs (one
//! batch), then piece by piece: the subarray is cut in result order until
//! the tiles a piece needs fit half the budget (`partition`), each piece's
//! candidate tiles are fetched (one batch), decoded on a bounded pool,
//! computed (which cells, in which order, from which fragment) and handed
//! out in batches the other half of the budget bounds, then dropped.

mod aggregate;
mod fields;
mod partition;
mod plan;
mod slabs;
mod tiles;

pub use aggregate::{aggregate, AggregateStep, Aggregation};

use crate::batch::{Batch, FieldBuffer};
use crate::condition::{self, BoundCondition, BoundDelete};
use crate::{Column, QueryError, ReadSpec, Result, ResultLayout, Snapshot, Subarray};
use bytes::Bytes;
pub(crate) use fields::FieldInfo;
use fields::{frag_field, special_field, FragField, Kind};
use plan::{CellRef, FragPlan, DELETE_TS_SLOT, TIMESTAMPS_SLOT};
use slabs::{DenseFrag, Results, Slab};
use std::collections::HashMap;
use std::ops::Range;
use tdb_format::{ArrayType, DataPart, FormatVersion};
use tdb_fragment::fragment_metadata::{Field, Section};
use tdb_fragment::{DeleteCommit, ReadStorage};
use tdb_index::dense::{int_value, push_int};
use tdb_index::DomainOps;
use tdb_storage::{join, RangeRead, RangeRequest};
use tiles::{Coalesced, TileFetch, TileMap};

/// What the reader wants next.
#[derive(Debug)]
pub enum ReadStep {
    /// Fetch these ranges and [`Reader::push`] the answers, in order.
    Need(Vec<RangeRequest>),
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

enum Phase {
    Start,
    Sections(Vec<SectionRead>, Coalesced),
    /// Each delete commit's timestamp and file.
    Deletes(Vec<(u64, String)>),
    Tiles(Vec<TileFetch>, Coalesced),
    Emit,
    Done,
}

/// A read in progress: a state machine that does no I/O. Drive it with
/// [`Reader::step`], answering each [`ReadStep::Need`] with
/// [`Reader::push`]; [`SyncRead`] does that over a storage backend.
pub struct Reader<'a> {
    snapshot: &'a Snapshot,
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
    plans: Vec<FragPlan<'a>>,
    tiles: TileMap,
    /// Buffers of the last piece's tiles, for the next piece's.
    spare: tiles::Spare,
    /// Result cells in order, with the dense coordinates when dense.
    results: Results,
    /// Where the next batch starts: slab, and cell in it.
    next: (usize, u64),
    phase: Phase,
    /// Requests of the current phase not yet handed out.
    pending_requests: Option<Vec<RangeRequest>>,
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
    /// Tiles answered from metadata and not read, for the aggregation.
    md_answered: Vec<(usize, u64)>,
    /// Whether dense batches record each cell's [`CellState`] (aggregates
    /// fold only cells a fragment wrote and the condition kept).
    with_states: bool,
    last_states: Option<Vec<CellState>>,
    /// Pieces still to read, the next last; the piece being read. Each
    /// piece's tiles fit half the budget.
    partitions: Vec<Piece>,
    current: Piece,
    /// The largest tile of each fragment, all fields read, filtered and
    /// unfiltered bytes.
    tile_max: Vec<u64>,
    /// Whether any batch went out (an empty read is one empty batch).
    emitted: bool,
    /// Whether sparse tiles whose min/max metadata rule the condition out
    /// are skipped: safe where no other fragment's cell could win over a
    /// skipped one (duplicates allowed, or one fragment), since the
    /// condition applies to the newest cell of each coordinate.
    minmax_skip: bool,
    /// Whether the storage is remote ([`Reader::set_remote`]).
    remote: bool,
    /// The next piece, planned while the current one is handed out
    /// ([`Reader::plan_ahead`]).
    ahead: Option<PlannedPiece>,
}

/// A piece planned: everything [`Reader::plan_piece`] works out, which
/// [`Reader::install`] makes the reader's state.
struct PlannedPiece {
    piece: Piece,
    /// Dense result cells.
    results: Results,
    /// Per fragment plan, the tiles the piece reads.
    tiles: Vec<Vec<u64>>,
    /// Tiles aggregates answer from metadata instead.
    md_answered: Vec<(usize, u64)>,
    fetches: Vec<TileFetch>,
    /// The requests for `fetches`; `None` when there are none.
    coalesced: Option<Coalesced>,
}

/// A piece of a read: part of the subarray and, in a Hilbert global-order
/// read of one fragment, a run of that fragment's tiles (stored in that
/// order, so consecutive runs come out in it, which no subarray cut does).
#[derive(Debug, Clone, Default)]
struct Piece {
    sub: Subarray,
    run: Option<std::ops::Range<u64>>,
}

impl Piece {
    /// The tiles of sparse fragment `plan` this piece overlaps.
    fn tiles(&self, plan: &FragPlan<'_>, ops: &[tdb_index::RangeOps]) -> Vec<u64> {
        let mut tiles = plan.tiles_overlapping(ops, &self.sub);
        if let Some(run) = &self.run {
            tiles.retain(|t| run.contains(t));
        }
        tiles
    }
}

/// What a dense result cell is, for aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CellState {
    /// No fragment wrote it: a fill value.
    Unwritten,
    /// Written, but the condition rejected it.
    Rejected,
    /// Written and kept.
    Kept,
}

impl<'a> Reader<'a> {
    /// Plans `spec` over `snapshot`: checks fields, subarray and condition
    /// against the schema (typed errors that say what to change).
    pub fn new(snapshot: &'a Snapshot, spec: ReadSpec) -> Result<Self> {
        let schema = snapshot.schema();
        let mut fields: Vec<FieldInfo> = Vec::new();
        let mut requested = Vec::new();
        let slot = |fields: &mut Vec<FieldInfo>, name: &str| -> Result<usize> {
            if let Some(i) = fields.iter().position(|f| f.name == name) {
                return Ok(i);
            }
            fields.push(FieldInfo::resolve(schema, name)?);
            Ok(fields.len() - 1)
        };
        for name in &spec.fields {
            let s = slot(&mut fields, name)?;
            requested.push(s);
        }
        let ops = DomainOps::new(&schema.domain)?;
        spec.subarray.check(schema, &ops, spec.whole_tiles)?;
        let sparse = schema.array_type == ArrayType::Sparse;
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
            spare: tiles::Spare::new(spec.budget / 2),
            spec,
            fields,
            requested,
            condition,
            deletes: Vec::new(),
            ops,
            plans: Vec::new(),
            tiles: HashMap::new(),
            results: Results::default(),
            next: (0, 0),
            phase: Phase::Start,
            pending_requests: None,
            md_fields: Vec::new(),
            md_sparse: false,
            md_answered: Vec::new(),
            with_states: false,
            last_states: None,
            partitions: Vec::new(),
            current: Piece::default(),
            tile_max: Vec::new(),
            emitted: false,
            minmax_skip: false,
            remote: false,
            ahead: None,
        })
    }

    fn key(&self) -> Option<&'a [u8; 32]> {
        self.snapshot.open.key()
    }

    fn dir(&self) -> &'a str {
        &self.snapshot.open.dir
    }

    /// The next thing the reader needs or has.
    pub fn step(&mut self) -> Result<ReadStep> {
        loop {
            match &self.phase {
                Phase::Start => {
                    self.load_deletes()?;
                    continue;
                }
                Phase::Sections(..) | Phase::Deletes(_) | Phase::Tiles(..) => {
                    return match self.pending_requests.take() {
                        Some(r) => Ok(ReadStep::Need(r)),
                        None => Err(QueryError::invalid(
                            "the reader is waiting for the bytes it asked for (call push)",
                        )),
                    };
                }
                Phase::Emit => {
                    if let Some(b) = self.next_batch()? {
                        self.emitted = true;
                        return Ok(ReadStep::Batch(b));
                    }
                    // This piece is done: free it, go on with the next.
                    self.spare.keep_tiles(self.tiles.drain().map(|(_, t)| t));
                    self.results = Results::default();
                    self.next = (0, 0);
                    if self.ahead.is_some() || !self.partitions.is_empty() {
                        self.next_partition()?;
                        continue;
                    }
                    self.phase = Phase::Done;
                    if !self.emitted {
                        self.emitted = true;
                        let fields = self
                            .requested
                            .iter()
                            .map(|&s| self.empty_buffer(s))
                            .collect();
                        return Ok(ReadStep::Batch(Batch {
                            num_cells: 0,
                            fields,
                        }));
                    }
                }
                Phase::Done => return Ok(ReadStep::Done),
            }
        }
    }

    /// The answers to the last [`ReadStep::Need`], in its order (`None`
    /// where a file was missing).
    pub fn push(&mut self, reads: Vec<Option<RangeRead>>) -> Result<()> {
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Sections(wanted, coalesced) => {
                for (want, read) in wanted.into_iter().zip(coalesced.split(&reads)) {
                    let (i, section) = (want.frag, want.section);
                    let bytes = read.ok_or_else(|| {
                        QueryError::from(tdb_fragment::FragmentError::missing(
                            &self.plans[i].file.path,
                            "fragment metadata",
                        ))
                    })?;
                    let plan = &mut self.plans[i];
                    plan.meta.load_section(
                        section,
                        &bytes,
                        self.snapshot.open.key(),
                        plan.schema,
                    )?;
                    if let Some(data) = plan.meta.shared_section(section) {
                        self.snapshot
                            .sections()
                            .keep(&plan.file.path, section, data);
                    }
                }
                self.start_partitions()
            }
            Phase::Deletes(wanted) => {
                let schema = self.snapshot.schema();
                for ((ts, file), read) in wanted.into_iter().zip(reads) {
                    let read = read.ok_or_else(|| {
                        QueryError::from(tdb_fragment::FragmentError::missing(
                            &file,
                            "delete commit",
                        ))
                    })?;
                    let commit = DeleteCommit::parse(&file, &read.bytes, self.key())?;
                    let delete =
                        BoundDelete::bind(&file, ts, &commit, schema, &self.snapshot.enumerations)?;
                    for f in delete.condition.fields() {
                        if !self.fields.iter().any(|x| &x.name == f) {
                            self.fields.push(FieldInfo::resolve(schema, f)?);
                        }
                    }
                    self.deletes.push(delete);
                }
                self.after_deletes()
            }
            Phase::Tiles(fetches, coalesced) => {
                self.decode(fetches, coalesced.split(&reads))?;
                self.compute()?;
                self.phase = Phase::Emit;
                Ok(())
            }
            other => {
                self.phase = other;
                Err(QueryError::invalid("push without a pending request"))
            }
        }
    }

    fn build_plans(&mut self) -> Result<()> {
        let snapshot = self.snapshot;
        let encrypted = self.key().is_some();
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
            let schema = snapshot
                .open
                .schemas
                .by_name(&frag.metadata.footer.array_schema_name)
                .map_or(snapshot.schema(), |e| &e.schema);
            let footer = &frag.metadata.footer;
            let fields: Vec<_> = self
                .fields
                .iter()
                .map(|f| frag_field(footer, schema, f, encrypted))
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
            self.plans.push(FragPlan {
                file: &frag.file,
                meta,
                schema,
                fields,
                timestamps: footer
                    .has_timestamps
                    .then(|| special_field(footer, schema, Field::Timestamps, encrypted))
                    .flatten(),
                delete_timestamps: (footer.has_delete_meta && !reads_delete_meta)
                    .then(|| special_field(footer, schema, Field::DeleteTimestamps, encrypted))
                    .flatten(),
                tiles: Vec::new(),
                rtree: tdb_index::RTree::empty(tdb_index::DEFAULT_FANOUT),
            });
        }
        Ok(())
    }

    fn frag_fields<'p>(plan: &'p FragPlan<'_>) -> Vec<(usize, &'p FragField)> {
        let mut v: Vec<(usize, &FragField)> = plan
            .fields
            .iter()
            .enumerate()
            .filter_map(|(s, f)| f.as_ref().map(|f| (s, f)))
            .collect();
        if let Some(t) = &plan.timestamps {
            v.push((TIMESTAMPS_SLOT, t));
        }
        if let Some(t) = &plan.delete_timestamps {
            v.push((DELETE_TS_SLOT, t));
        }
        v
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
            if (footer.dense || self.md_sparse) && footer.version >= 11 {
                for &(slot, _) in &self.md_fields {
                    let Some(ff) = &plan.fields[slot] else {
                        continue;
                    };
                    let i = ff.index;
                    let mut md = vec![Section::Mins(i), Section::Maxes(i), Section::Sums(i)];
                    if self.fields[slot].nullable {
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
                    if let Some(ff) = slot.and_then(|s| plan.fields[s].as_ref()) {
                        let i = ff.index;
                        sections.extend(
                            [Section::Mins(i), Section::Maxes(i)]
                                .into_iter()
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
        self.phase = Phase::Deletes(wanted);
        self.pending_requests = Some(requests);
        Ok(())
    }

    fn after_deletes(&mut self) -> Result<()> {
        // Every field the read touches is known now.
        self.build_plans()?;
        let schema = self.snapshot.schema();
        let one_cell_per_coordinate = schema.allows_dups || self.plans.len() == 1;
        self.minmax_skip = schema.array_type == ArrayType::Sparse
            && self.condition.is_some()
            && one_cell_per_coordinate;
        self.md_sparse = self.md_sparse
            && schema.array_type == ArrayType::Sparse
            && self.condition.is_none()
            && self.deletes.is_empty()
            && one_cell_per_coordinate;
        let wanted = self.section_requests()?;
        if wanted.is_empty() {
            return self.start_partitions();
        }
        let coalesced = Coalesced::new(wanted.iter().map(|w| (w.file.as_str(), w.range.clone())));
        self.pending_requests = Some(coalesced.requests.clone());
        self.phase = Phase::Sections(wanted, coalesced);
        Ok(())
    }

    /// Every section is in: R-tree leaves parsed once, the largest tile
    /// of each fragment checked against the budget (up front, before any
    /// tile is fetched), then the first piece of the subarray.
    fn start_partitions(&mut self) -> Result<()> {
        for plan in &mut self.plans {
            let meta = &plan.meta;
            if meta.footer.dense {
                continue;
            }
            plan.rtree = match (meta.legacy_mbrs(), meta.section(Section::RTree)) {
                (Some(m), _) => tdb_index::RTree::build(
                    &plan.schema.domain,
                    m.to_vec(),
                    tdb_index::DEFAULT_FANOUT,
                )?,
                (None, Some(tdb_fragment::SectionData::RTree(bytes))) => {
                    let version = FormatVersion::new(meta.footer.version).map_err(|e| {
                        QueryError::invalid(format!("fragment {}: {e}", plan.file.path))
                    })?;
                    tdb_index::RTree::parse(bytes, &plan.schema.domain, version)?
                }
                _ => tdb_index::RTree::empty(tdb_index::DEFAULT_FANOUT),
            };
        }
        self.tile_max = (0..self.plans.len())
            .map(|i| {
                let plan = &self.plans[i];
                (0..plan.tile_num())
                    .map(|t| self.tile_bytes(i, t))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let allowed = self.tile_budget();
        if let Some((i, &need)) = self
            .tile_max
            .iter()
            .enumerate()
            .max_by_key(|(_, b)| **b)
            .filter(|(_, b)| **b > allowed)
        {
            return Err(QueryError::Budget {
                budget: self.spec.budget,
                need: format!(
                    "a tile of fragment {} needs {need} bytes (the fields read, filtered and \
                     unfiltered), and tiles get half the budget: give at least {}",
                    self.plans[i].file.path,
                    need.saturating_mul(2)
                ),
            });
        }
        self.partitions = vec![Piece {
            sub: self.spec.subarray.clone(),
            run: None,
        }];
        self.next_partition()
    }

    /// Half the budget holds tiles, the other half one batch of results.
    fn tile_budget(&self) -> u64 {
        self.spec.budget / 2
    }

    /// The piece size reads aim at even when the budget allows more: a
    /// finished piece's pages go to the next one (its tile buffers through
    /// [`tiles::Spare`], fetch and result buffers through the allocator)
    /// instead of fresh pages faulted in, so the smaller the first piece,
    /// the fewer faults, until per-piece costs win (measured on W2's dense
    /// reads, tdb seconds: 4096² 0.30 in one piece, 0.055 in 32 MiB
    /// pieces, 0.042 in 8 MiB, 0.050 in 4 MiB; 1024² 0.012 in one piece,
    /// 0.0065 in 8 MiB). Pieces only shrink to it at space tile
    /// boundaries. A dense read reads no tile twice for it; a sparse one
    /// reads a data tile that straddles a cut once per piece, and still
    /// gains where it reads much (W3, 4M cells: whole 0.084 -> 0.045 s,
    /// condition 0.116 -> 0.09) and loses a little where it reads little
    /// (W3's 1% boxes 0.078 -> 0.087, W4's 10% range 0.018 -> 0.019).
    /// Sparse aggregates answered from tile metadata are not cut for it: a
    /// tile across a cut would be read instead of answered (W3's sum and
    /// count 0.0013 -> 0.0086 s).
    const PIECE_TARGET: u64 = 8 << 20;

    /// The piece size reads from remote storage aim at (the budget's half
    /// still bounds it): there each piece costs a round trip of requests
    /// (milliseconds each), which outweighs the page faults a larger piece
    /// takes. W3's 4M cells from S3 through 10 ms of latency: 44 GETs and
    /// 0.35 s in pieces aimed at 64 MiB, 17 GETs at 128 MiB, 12 GETs and
    /// 0.12 s at 256 MiB (TileDB: 15, 0.26 s); W2 4096² then holds 167 MiB
    /// at its peak (TileDB 186 MiB). See docs/performance.md.
    const REMOTE_PIECE_TARGET: u64 = 256 << 20;

    /// Aims pieces at sizes that suit remote storage (`remote`), where
    /// each batch of requests costs milliseconds, or local storage.
    /// [`SyncRead`] sets it from its storage.
    pub fn set_remote(&mut self, remote: bool) {
        self.remote = remote;
    }

    /// The piece size aimed at below the tile budget: on remote storage
    /// at most half of it too, so that the next piece can be fetched while
    /// one is read ([`Reader::plan_ahead`]).
    fn piece_aim(&self) -> u64 {
        if self.remote {
            Self::REMOTE_PIECE_TARGET.min(self.tile_budget() / 2)
        } else {
            Self::PIECE_TARGET
        }
    }

    /// Bytes tile `t` of fragment `i` holds while read: every field part
    /// fetched (filtered) and unfiltered.
    fn tile_bytes(&self, i: usize, t: u64) -> u64 {
        let plan = &self.plans[i];
        let cells = plan.cells(t, plan.tile_num());
        let meta = &plan.meta;
        let mut total = 0u64;
        for (slot, ff) in Self::frag_fields(plan) {
            for (part, _) in &ff.parts {
                let (filtered, unfiltered) = match part {
                    DataPart::Fixed => {
                        let size = match self.fields.get(slot) {
                            Some(f) if f.is_var() => 8,
                            Some(f) => f.cell_size() as u64,
                            None => 8,
                        };
                        (meta.tile_range(ff.index, t), cells.saturating_mul(size))
                    }
                    DataPart::Var => {
                        let var = meta.var_tile_size(ff.index, t).unwrap_or(0);
                        (meta.var_tile_range(ff.index, t), var)
                    }
                    DataPart::Validity => (meta.validity_tile_range(ff.index, t), cells),
                };
                let filtered = filtered.map_or(0, |r| r.end.saturating_sub(r.start));
                total = total.saturating_add(filtered).saturating_add(unfiltered);
            }
        }
        total
    }

    /// What reading piece `p` holds at once: its tiles, and per candidate
    /// cell the plan's bookkeeping.
    fn estimate(&self, piece: &Piece) -> u64 {
        let p = &piece.sub;
        let schema = self.snapshot.schema();
        let dims = schema.domain.dimensions.len() as u64;
        let mut total = 0u64;
        for (i, plan) in self.plans.iter().enumerate() {
            if plan.meta.footer.dense {
                let tiles = plan::dense_tiles_touched(plan, p).unwrap_or(u64::MAX);
                total = total.saturating_add(tiles.saturating_mul(self.tile_max[i]));
            } else {
                let tile_num = plan.tile_num();
                for t in piece.tiles(plan, self.ops.dims()) {
                    let cells = plan.cells(t, tile_num);
                    total = total
                        .saturating_add(self.tile_bytes(i, t))
                        .saturating_add(cells.saturating_mul(64));
                }
            }
        }
        if schema.array_type == ArrayType::Dense {
            // Per slab: where its cells come from and its first coordinates.
            let frags = self.plans.iter().filter(|p| p.meta.footer.dense).count() as u64;
            let slabs = plan::dense_coords(schema, p)
                .ok()
                .and_then(|r| slabs::slab_bound(schema, &r, self.spec.layout, frags))
                .unwrap_or(u64::MAX);
            total = total.saturating_add(slabs.saturating_mul(40 + 16 * dims));
        }
        total
    }

    /// `p` in two halves when its estimate passes the tile budget, or the
    /// piece size aimed at (at tile boundaries only).
    fn cut(&self, p: &Piece) -> Option<(Piece, Piece)> {
        let schema = self.snapshot.schema();
        let order = partition::split_order(schema, self.spec.layout);
        let bounds = |d: usize, piece: &Subarray| self.tile_bounds(d, piece);
        let estimate = self.estimate(p);
        let tiles_only = if estimate > self.tile_budget() {
            false
        } else if estimate > self.piece_aim() && !self.md_sparse {
            true
        } else {
            return None;
        };
        if order.is_empty() {
            // The Hilbert global order: no subarray cut keeps it, but one
            // fragment's tiles are stored in it, so runs of them do.
            let [plan] = self.plans.as_slice() else {
                return None;
            };
            let run = p.run.clone().unwrap_or(0..plan.tile_num());
            let whole = Piece {
                sub: p.sub.clone(),
                run: Some(run.clone()),
            };
            let (a, b) = partition::split_run(&whole.tiles(plan, self.ops.dims()), run)?;
            let half = |run| Piece {
                sub: p.sub.clone(),
                run: Some(run),
            };
            return Some((half(a), half(b)));
        }
        let in_order = self.range_cuts(&p.sub)?;
        let (a, b) = partition::split(
            schema,
            self.ops.dims(),
            &p.sub,
            &order,
            tiles_only,
            in_order,
            &bounds,
        )?;
        let half = |sub| Piece {
            sub,
            run: p.run.clone(),
        };
        Some((half(a), half(b)))
    }

    /// Whether piece `sub` is cut between ranges (`Some(true)`), anywhere
    /// (`Some(false)`) or not at all. Where results may follow the ranges
    /// as given (`partition::follows_ranges`), a sparse read of one
    /// dimension does so only if every cell it keeps comes from one
    /// fragment, known only at its end: with several ranges out of order
    /// (or overlapping) and several fragments in reach, no cut keeps the
    /// answer TileDB gives unpartitioned, and the piece is read whole.
    fn range_cuts(&self, sub: &Subarray) -> Option<bool> {
        let schema = self.snapshot.schema();
        if !partition::follows_ranges(schema, self.spec.layout) {
            return Some(false);
        }
        if schema.array_type == ArrayType::Dense {
            return Some(true);
        }
        let o = &self.ops.dims()[0];
        let ranges = sub.ranges(0);
        let in_order = ranges
            .windows(2)
            .all(|w| o.cmp_values(w[0].bounds().1, w[1].bounds().0).is_lt());
        if in_order {
            // Range order is the coordinates' order.
            return Some(false);
        }
        let reach = self
            .plans
            .iter()
            .filter(|p| {
                p.meta
                    .footer
                    .non_empty_domain
                    .as_ref()
                    .is_none_or(|ned| plan::mbr_overlaps(self.ops.dims(), ned, sub))
            })
            .count();
        (reach <= 1).then_some(true)
    }

    /// The bounds along dimension `d` of the MBRs of every sparse tile
    /// `piece` overlaps (see `partition::TileBounds`).
    fn tile_bounds(&self, d: usize, piece: &Subarray) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        for plan in self.plans.iter().filter(|p| !p.meta.footer.dense) {
            for t in plan.tiles_overlapping(self.ops.dims(), piece) {
                if let Some(r) = usize::try_from(t)
                    .ok()
                    .and_then(|t| plan.leaves().get(t))
                    .and_then(|mbr| mbr.get(d))
                {
                    let (lo, hi) = r.bounds();
                    out.push((lo.to_vec(), hi.to_vec()));
                }
            }
        }
        out
    }

    /// Takes pieces off the stack, cutting each in two while its estimate
    /// exceeds the tile budget, and plans the first that fits. A piece that
    /// cannot be cut (one cell; one tile, or tiles all spanning it, along a
    /// float or string dimension; the Hilbert global order over several
    /// fragments) is read as it is.
    fn next_partition(&mut self) -> Result<()> {
        if let Some(planned) = self.ahead.take() {
            return self.install(planned);
        }
        match self.next_piece() {
            Some(p) => {
                self.current = p;
                self.plan_tiles()
            }
            None => {
                self.phase = Phase::Emit;
                Ok(())
            }
        }
    }

    /// The next piece that fits, cutting those that do not.
    fn next_piece(&mut self) -> Option<Piece> {
        while let Some(p) = self.partitions.pop() {
            if let Some((a, b)) = self.cut(&p) {
                self.partitions.push(b);
                self.partitions.push(a);
                continue;
            }
            return Some(p);
        }
        None
    }

    /// Plans the next piece while the current one is handed out, and
    /// returns the requests it will ask for, so that a driver can fetch
    /// them ahead (remote storage, where they cost milliseconds) and answer
    /// the reader's next [`ReadStep::Need`], which asks exactly for them,
    /// from that fetch. `None` when there is nothing to fetch ahead: no
    /// next piece, one that needs no tile, the current piece not yet
    /// fetched, or two pieces' tiles that would not fit the tile budget
    /// together (the next piece is then planned when its turn comes).
    pub fn plan_ahead(&mut self) -> Result<Option<Vec<RangeRequest>>> {
        if self.ahead.is_some() || !matches!(self.phase, Phase::Emit) {
            return Ok(None);
        }
        let Some(piece) = self.next_piece() else {
            return Ok(None);
        };
        let both = self
            .estimate(&self.current)
            .saturating_add(self.estimate(&piece));
        if both > self.tile_budget() {
            self.partitions.push(piece);
            return Ok(None);
        }
        let planned = self.plan_piece(&piece)?;
        let requests = planned.coalesced.as_ref().map(|c| c.requests.clone());
        self.ahead = Some(planned);
        Ok(requests)
    }

    /// Plans the current piece and makes it the one being read.
    fn plan_tiles(&mut self) -> Result<()> {
        let planned = self.plan_piece(&self.current)?;
        self.install(planned)
    }

    /// What reading `piece` takes: its result cells (dense), the tiles of
    /// every fragment it needs, and the fetches for them. Changes nothing,
    /// so the next piece can be planned (and fetched) while one is read.
    fn plan_piece(&self, piece: &Piece) -> Result<PlannedPiece> {
        let schema = self.snapshot.schema();
        // Dense arrays: each result cell from the newest dense fragment
        // whose non-empty domain holds it (sparse fragments overlay these
        // once their coordinates are read); only those tiles are fetched.
        let results = if schema.array_type == ArrayType::Dense {
            let ranges = plan::dense_coords(schema, &piece.sub)?;
            let frags: Vec<DenseFrag> = self
                .plans
                .iter()
                .enumerate()
                .filter(|(_, p)| p.meta.footer.dense)
                .filter_map(|(i, p)| {
                    let ned = p.meta.footer.non_empty_domain.as_ref()?;
                    DenseFrag::new(i as u32, schema, &p.schema.domain, ned)
                })
                .collect();
            slabs::dense_results(schema, &frags, &ranges, self.spec.layout)?
        } else {
            Results::default()
        };
        let mut fetches = Vec::new();
        let mut md_answered = Vec::new();
        let mut tiles_of = Vec::with_capacity(self.plans.len());
        for (i, plan) in self.plans.iter().enumerate() {
            let meta = &plan.meta;
            let tiles: Vec<u64> = if meta.footer.dense {
                let mut set: Vec<u64> = results
                    .slabs
                    .iter()
                    .filter(|r| r.frag as usize == i)
                    .map(|r| r.tile)
                    .collect();
                set.sort_unstable();
                set.dedup();
                set
            } else {
                let skip = self.condition.as_ref().filter(|_| self.minmax_skip);
                let fields = &self.fields;
                // Tiles aggregates answer from their metadata: held whole
                // by the piece, every cell in the window and undeleted.
                let md = self.md_sparse
                    && meta.footer.version >= 11
                    && plan.timestamps.is_none()
                    && plan.delete_timestamps.is_none();
                let md_fields = &self.md_fields;
                let mut from_md = |t: u64, mbr: &[tdb_schema::Range]| {
                    let answered = md
                        && plan::mbr_within(self.ops.dims(), mbr, &piece.sub)
                        && md_fields.iter().all(|(slot, ops)| {
                            aggregate::tile_metadata(plan, &fields[*slot], *slot, ops, t).is_some()
                        });
                    if answered {
                        md_answered.push((i, t));
                    }
                    answered
                };
                piece
                    .tiles(plan, self.ops.dims())
                    .into_iter()
                    .filter(|&t| !from_md(t, &plan.leaves()[t as usize]))
                    .filter(|&t| {
                        skip.is_none_or(|c| {
                            c.may_match(&|f| {
                                let slot = fields.iter().position(|x| x.name == f)?;
                                plan.tile_min_max(slot, &fields[slot], t)
                            })
                        })
                    })
                    .collect()
            };
            // Unordered reads with duplicates need no coordinates of a
            // tile the piece holds whole (nothing to check or sort), unless
            // asked for or named by the condition.
            let coordinates_optional = !meta.footer.dense
                && schema.allows_dups
                && self.spec.layout == ResultLayout::Unordered
                && self.deletes.is_empty();
            for (slot, ff) in Self::frag_fields(plan) {
                let optional = coordinates_optional
                    && self.fields.get(slot).is_some_and(|f| {
                        matches!(f.kind, Kind::Dim(_))
                            && !self.requested.contains(&slot)
                            && !self
                                .condition
                                .iter()
                                .any(|c| c.fields().iter().any(|n| n == &f.name))
                    });
                for &t in &tiles {
                    let whole = || {
                        plan.leaves()
                            .get(t as usize)
                            .is_some_and(|mbr| plan::mbr_within(self.ops.dims(), mbr, &piece.sub))
                    };
                    if optional && whole() {
                        continue;
                    }
                    fetches.push(tiles::plan_tile(
                        self.snapshot.open.dir.as_str(),
                        &plan.file.path,
                        meta,
                        ff,
                        (i, slot, t),
                    )?);
                }
            }
            tiles_of.push(tiles);
        }
        let coalesced = (!fetches.is_empty()).then(|| Coalesced::tiles(&fetches));
        Ok(PlannedPiece {
            piece: piece.clone(),
            results,
            tiles: tiles_of,
            md_answered,
            fetches,
            coalesced,
        })
    }

    /// Makes `planned` the piece being read: asks for its tiles, or
    /// computes it at once when it needs none.
    fn install(&mut self, planned: PlannedPiece) -> Result<()> {
        let PlannedPiece {
            piece,
            results,
            tiles,
            md_answered,
            fetches,
            coalesced,
        } = planned;
        self.current = piece;
        self.results = results;
        self.md_answered.extend(md_answered);
        for (plan, tiles) in self.plans.iter_mut().zip(tiles) {
            plan.tiles = tiles;
        }
        let Some(coalesced) = coalesced else {
            self.compute()?;
            self.phase = Phase::Emit;
            return Ok(());
        };
        self.pending_requests = Some(coalesced.requests.clone());
        self.phase = Phase::Tiles(fetches, coalesced);
        Ok(())
    }

    /// Unfilters `fetches` from their parts' bytes (in order).
    fn decode(&mut self, fetches: Vec<TileFetch>, parts: Vec<Option<Bytes>>) -> Result<()> {
        let mut reads = parts.into_iter();
        let mut bytes = Vec::with_capacity(fetches.len());
        for f in &fetches {
            let mut b = Vec::with_capacity(f.parts.len());
            for (_, path, _) in &f.parts {
                let r = reads.next().flatten().ok_or_else(|| {
                    QueryError::from(tdb_fragment::FragmentError::missing(path, "data file"))
                })?;
                b.push(r);
            }
            bytes.push(b);
        }
        // Dense fragments' result cells are known before decoding: per
        // tile, the cells used, so chunks without any are skipped.
        let mut used: HashMap<(usize, u64), Vec<(u64, u64)>> = HashMap::new();
        for r in self.results.slabs.iter().filter(|r| !r.is_fill()) {
            used.entry((r.frag as usize, r.tile))
                .or_default()
                .push(r.cell_span());
        }
        let needed: HashMap<(usize, u64), Vec<(u64, u64)>> = used
            .into_iter()
            .map(|(k, mut spans)| {
                spans.sort_unstable();
                let mut ranges: Vec<(u64, u64)> = Vec::new();
                for (c0, c1) in spans {
                    match ranges.last_mut() {
                        Some((_, e)) if *e >= c0 => *e = (*e).max(c1),
                        _ => ranges.push((c0, c1)),
                    }
                }
                (k, ranges)
            })
            .collect();
        let plans = &self.plans;
        let jobs = fetches
            .iter()
            .zip(&bytes)
            .map(|(fetch, bytes)| {
                let (i, slot, t) = fetch.key;
                let plan = &plans[i];
                let field = match slot {
                    TIMESTAMPS_SLOT => plan.timestamps.as_ref(),
                    DELETE_TS_SLOT => plan.delete_timestamps.as_ref(),
                    s => plan.fields[s].as_ref(),
                }
                .ok_or_else(|| QueryError::invalid("tile of an unknown field"))?;
                Ok(tiles::TileJob {
                    fetch,
                    bytes,
                    field,
                    version: plan.schema.version,
                    cells: plan.cells(t, plan.tile_num()),
                    needed: plan
                        .meta
                        .footer
                        .dense
                        .then(|| needed.get(&(i, t)).map(Vec::as_slice))
                        .flatten(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let decoded = tiles::decode_tiles(&jobs, self.key(), crate::threads(), &self.spare)?;
        self.spare.release();
        for (f, tile) in fetches.iter().zip(decoded) {
            self.tiles.insert(f.key, tile);
        }
        Ok(())
    }

    fn compute(&mut self) -> Result<()> {
        let schema = self.snapshot.schema();
        let window = self.snapshot.open.directory.window;
        if schema.array_type == ArrayType::Sparse {
            self.results = plan::sparse_cells(
                schema,
                &self.plans,
                &self.fields,
                &self.tiles,
                self.ops.dims(),
                &self.current.sub,
                (window.start, window.end),
                &self.deletes,
                self.condition.as_ref(),
                self.spec.layout,
            )?;
            return Ok(());
        }
        if self.plans.iter().all(|p| p.meta.footer.dense) {
            return Ok(());
        }
        // Dense arrays with sparse fragments: their cells overlay the
        // slabs, one cell at a time (only such reads pay per cell).
        let dims = schema.domain.dimensions.len();
        let dim_slots: Vec<Option<usize>> = (0..dims)
            .map(|d| self.fields.iter().position(|f| f.kind == Kind::Dim(d)))
            .collect();
        let mut sparse_maps: Vec<Option<HashMap<Vec<i128>, CellRef>>> = Vec::new();
        for (i, plan) in self.plans.iter().enumerate() {
            if plan.meta.footer.dense {
                sparse_maps.push(None);
                continue;
            }
            let mut map = HashMap::new();
            let tile_num = plan.tile_num();
            for &t in &plan.tiles {
                let n = plan.cells(t, tile_num) as usize;
                for c in 0..n {
                    let mut coords = Vec::with_capacity(dims);
                    for (d, slot) in dim_slots.iter().enumerate() {
                        let dt = schema.domain.dimensions[d].datatype;
                        let v = slot
                            .and_then(|s| self.tiles.get(&(i, s, t)))
                            .and_then(|tile| int_value(dt, tile.column(dt, 1).cell(c)));
                        coords.push(v.unwrap_or(i128::MIN));
                    }
                    map.insert(
                        coords,
                        CellRef {
                            frag: i as u32,
                            cell: c as u32,
                            tile: t,
                        },
                    );
                }
            }
            sparse_maps.push(Some(map));
        }
        // Sparse fragments of a dense array win over every dense fragment
        // whatever their timestamps (TileDB 2.30 reads them so:
        // `legacy/2.3.3/dense_with_sparse_fragments`); the newest wins.
        let old = std::mem::take(&mut self.results);
        let step = old.step_dim;
        let mut out = Results {
            dims: old.dims,
            step_dim: step,
            ..Results::default()
        };
        let mut key = Vec::with_capacity(dims);
        for (k, slab) in old.slabs.iter().enumerate() {
            let first = old.first_coords(k);
            let mut from = 0;
            for j in 0..slab.len {
                key.clear();
                key.extend_from_slice(first);
                key[step] += i128::from(j);
                let hit = sparse_maps
                    .iter()
                    .rev()
                    .find_map(|m| m.as_ref().and_then(|m| m.get(&key[..]).copied()));
                let Some(h) = hit else { continue };
                if j > from {
                    out.slabs.push(slab.part(from, j - from));
                    out.coords.extend_from_slice(first);
                    let at = out.coords.len() - dims + step;
                    out.coords[at] += i128::from(from);
                }
                out.slabs.push(Slab {
                    frag: h.frag,
                    tile: h.tile,
                    cell: u64::from(h.cell),
                    stride: 1,
                    len: 1,
                });
                out.coords.extend_from_slice(&key);
                from = j + 1;
            }
            if slab.len > from {
                out.slabs.push(slab.part(from, slab.len - from));
                out.coords.extend_from_slice(first);
                let at = out.coords.len() - dims + step;
                out.coords[at] += i128::from(from);
            }
        }
        self.results = out;
        Ok(())
    }

    /// Result cells per batch: the budget over a generous per-cell cost.
    fn batch_cells(&self) -> usize {
        let per_cell: u64 = self
            .requested
            .iter()
            .map(|&s| {
                let f = &self.fields[s];
                let data = if f.is_var() {
                    8 + 32
                } else {
                    f.cell_size() as u64
                };
                data + u64::from(f.nullable)
            })
            .sum::<u64>()
            .max(1);
        ((self.spec.budget - self.tile_budget()) / per_cell).max(1) as usize
    }

    fn next_batch(&mut self) -> Result<Option<Batch>> {
        // The batch's slabs, cut where the batch starts and ends, each with
        // its slab's index and first cell's offset in that slab.
        let mut want = self.batch_cells() as u64;
        let mut parts: Vec<(Slab, usize, u64)> = Vec::new();
        let (mut k, mut off) = self.next;
        while want > 0 && k < self.results.slabs.len() {
            let slab = self.results.slabs[k];
            let take = (slab.len - off).min(want);
            if take > 0 {
                parts.push((slab.part(off, take), k, off));
            }
            want -= take;
            off += take;
            if off >= slab.len {
                (k, off) = (k + 1, 0);
            }
        }
        self.next = (k, off);
        if parts.is_empty() {
            return Ok(None);
        }
        let num_cells: u64 = parts.iter().map(|p| p.0.len).sum();
        let dense = self.snapshot.schema().array_type == ArrayType::Dense;
        let keep = match (&self.condition, dense) {
            (Some(cond), true) => {
                let slots: Vec<usize> = cond
                    .fields()
                    .iter()
                    .filter_map(|n| self.fields.iter().position(|f| &f.name == n))
                    .collect();
                let fields = slots
                    .iter()
                    .map(|&s| self.materialize(s, &parts, None))
                    .collect::<Result<_>>()?;
                let b = Batch { num_cells, fields };
                let mut mask = vec![true; num_cells as usize];
                cond.evaluate(&b, &mut mask)?;
                Some(mask)
            }
            _ => None,
        };
        if self.with_states {
            let mut states = Vec::with_capacity(num_cells as usize);
            for (slab, _, _) in &parts {
                for _ in 0..slab.len {
                    let k = states.len();
                    states.push(if slab.is_fill() {
                        CellState::Unwritten
                    } else if keep.as_ref().is_some_and(|m| !m[k]) {
                        CellState::Rejected
                    } else {
                        CellState::Kept
                    });
                }
            }
            self.last_states = Some(states);
        }
        let fields = self
            .requested
            .iter()
            .map(|&s| self.materialize(s, &parts, keep.as_deref()))
            .collect::<Result<_>>()?;
        Ok(Some(Batch { num_cells, fields }))
    }

    fn empty_buffer(&self, slot: usize) -> FieldBuffer {
        self.fields[slot].empty_buffer()
    }

    /// Calls `f` with each run of the batch's slabs `parts` for field
    /// `slot`, in order: its source column (`None`: fill, for unwritten
    /// cells and, with `keep`, cells the condition rejected) and its cells.
    fn for_each_run<'t>(
        &'t self,
        slot: usize,
        parts: &[(Slab, usize, u64)],
        keep: Option<&[bool]>,
        mut f: impl FnMut(Option<Column<'t>>, Slab),
    ) {
        let info = &self.fields[slot];
        let mut at = 0usize;
        // Consecutive slabs mostly share a tile (a sparse read's cells are
        // each a slab): it is looked up once per run of them.
        let mut last: Option<((u32, u64), Option<Column<'t>>)> = None;
        for &(slab, _, _) in parts {
            let len = slab.len as usize;
            let tile = if slab.is_fill() {
                None
            } else {
                match last {
                    Some((key, col)) if key == (slab.frag, slab.tile) => col,
                    _ => {
                        let col = self
                            .tiles
                            .get(&(slab.frag as usize, slot, slab.tile))
                            .map(|t| t.column(info.datatype, info.cell_val_num));
                        last = Some(((slab.frag, slab.tile), col));
                        col
                    }
                }
            };
            let Some(keep) = keep else {
                f(tile, slab);
                at += len;
                continue;
            };
            let mut j = 0;
            while j < len {
                let kept = keep[at + j];
                let mut e = j + 1;
                while e < len && keep[at + e] == kept {
                    e += 1;
                }
                f(tile.filter(|_| kept), slab.part(j as u64, (e - j) as u64));
                j = e;
            }
            at += len;
        }
    }

    /// Field `slot`'s cells of the batch's slabs `parts` (each with its
    /// slab's index and offset, for dense coordinates), a slab at a time;
    /// where `keep` is false (a dense cell failing the condition) the fill
    /// value.
    fn materialize(
        &self,
        slot: usize,
        parts: &[(Slab, usize, u64)],
        keep: Option<&[bool]>,
    ) -> Result<FieldBuffer> {
        let f = &self.fields[slot];
        let mut out = self.empty_buffer(slot);
        let cells: usize = parts.iter().map(|p| p.0.len as usize).sum();
        let dense_dim = match f.kind {
            Kind::Dim(d) if self.snapshot.schema().array_type == ArrayType::Dense => Some(d),
            _ => None,
        };
        if let Some(d) = dense_dim {
            // Dense coordinates come from the slabs, not from tiles.
            out.data.reserve_exact(cells * f.cell_size());
            for &(slab, k, off) in parts {
                let first = self.results.first_coords(k).get(d).copied().unwrap_or(0);
                let step = self.results.step_dim == d;
                for j in 0..i128::from(slab.len) {
                    let v = if step {
                        first + i128::from(off) + j
                    } else {
                        first
                    };
                    push_int(f.datatype, v, &mut out.data);
                }
            }
            return Ok(out);
        }
        if f.is_var() {
            if let Some(o) = &mut out.offsets {
                o.reserve_exact(cells);
            }
            if let Some(v) = &mut out.validity {
                v.reserve_exact(cells);
            }
            self.for_each_run(slot, parts, keep, |source, slab| match source {
                Some(col) => {
                    for j in 0..slab.len {
                        let i = (slab.cell + j * slab.stride) as usize;
                        push_cell(&mut out, col.cell(i), !col.is_null(i));
                    }
                }
                None => {
                    for _ in 0..slab.len {
                        push_cell(&mut out, &f.fill, f.fill_validity != 0);
                    }
                }
            });
            return Ok(out);
        }
        // Fixed-size cells: every run's bytes have a known place, so the
        // buffer is sized once and each run is copied into its slice.
        let size = f.cell_size();
        out.data = vec![0; cells * size];
        if let Some(v) = &mut out.validity {
            *v = vec![0; cells];
        }
        let fill = Fill {
            bytes: &f.fill,
            valid: f.fill_validity,
        };
        let (mut data, mut validity) = (&mut out.data[..], out.validity.as_deref_mut());
        // Long runs (dense slabs) are gathered and copied on every core;
        // short ones (sparse cells) straight away.
        let bytes = cells * size;
        let shared = bytes >= PARALLEL_COPY && bytes / parts.len().max(1) >= PARALLEL_RUN;
        let mut jobs: Vec<CopyJob<'_, '_>> = Vec::new();
        self.for_each_run(slot, parts, keep, |source, slab| {
            let n = slab.len as usize;
            let (d, rest) = std::mem::take(&mut data).split_at_mut(n * size);
            data = rest;
            let v = validity.take().map(|v| {
                let (a, b) = v.split_at_mut(n);
                validity = Some(b);
                a
            });
            if shared {
                jobs.push((d, v, source, slab));
            } else {
                copy_run((d, v, source, slab), size, fill);
            }
        });
        crate::pool::for_each_share(
            jobs,
            crate::threads(),
            |job| job.0.len(),
            |job| copy_run(job, size, fill),
        )?;
        Ok(out)
    }
}

/// A field's fill value and fill validity.
#[derive(Clone, Copy)]
struct Fill<'a> {
    bytes: &'a [u8],
    valid: u8,
}

/// Where one run of fixed-size cells goes (data and validity slices of the
/// batch), where it comes from (none: fill), and which cells.
type CopyJob<'o, 't> = (&'o mut [u8], Option<&'o mut [u8]>, Option<Column<'t>>, Slab);

/// Batches of at least this many bytes, in runs of this many on average,
/// are copied on every core: a large dense read's copy into its results
/// was a serial stage between the parallel decoding of one piece and the
/// next. Short runs are not worth gathering (a sparse read's cells, each
/// its own run: gathering them took more time and memory than the copy).
const PARALLEL_COPY: usize = 1 << 20;
const PARALLEL_RUN: usize = 512;

/// Copies one run: whole byte ranges where the cells are adjacent in their
/// tile, else cell by cell; fill where there is no source.
fn copy_run((data, validity, source, slab): CopyJob<'_, '_>, size: usize, fill: Fill<'_>) {
    let (first, len) = (slab.cell as usize, slab.len as usize);
    match source {
        Some(col) if slab.stride == 1 && (first + len) * size <= col.fixed.len() => {
            data.copy_from_slice(&col.fixed[first * size..(first + len) * size]);
            if let Some(v) = validity {
                match col.validity {
                    Some(valid) if first + len <= valid.len() => {
                        v.copy_from_slice(&valid[first..first + len]);
                    }
                    _ => v.fill(1),
                }
            }
        }
        Some(col) => {
            for (j, cell) in data.chunks_exact_mut(size).enumerate() {
                let i = first + j * slab.stride as usize;
                let bytes = col.cell(i);
                if bytes.len() == size {
                    cell.copy_from_slice(bytes);
                }
            }
            if let Some(v) = validity {
                for (j, b) in v.iter_mut().enumerate() {
                    *b = u8::from(!col.is_null(first + j * slab.stride as usize));
                }
            }
        }
        None => {
            if fill.bytes.len() == size {
                for cell in data.chunks_exact_mut(size) {
                    cell.copy_from_slice(fill.bytes);
                }
            }
            if let Some(v) = validity {
                v.fill(fill.valid);
            }
        }
    }
}

/// Appends one cell.
fn push_cell(out: &mut FieldBuffer, bytes: &[u8], valid: bool) {
    if let Some(o) = &mut out.offsets {
        o.push(out.data.len() as u64);
    }
    out.data.extend_from_slice(bytes);
    if let Some(v) = &mut out.validity {
        v.push(u8::from(valid));
    }
}

/// One batch of requests from `storage`.
fn fetch<S: ReadStorage + ?Sized>(
    storage: &S,
    requests: &[RangeRequest],
) -> Result<Vec<Option<RangeRead>>> {
    storage
        .read_ranges(requests)
        .map_err(|source| storage_error(requests, source))
}

/// A failed batch, named by its first file.
fn storage_error(requests: &[RangeRequest], source: tdb_storage::StorageError) -> QueryError {
    QueryError::Storage {
        file: requests.first().map_or(String::new(), |r| r.key.clone()),
        source,
    }
}

/// Drives a [`Reader`] over a storage backend: an iterator of batches.
/// Over remote storage it fetches the next piece's tiles while the
/// current piece's batches are handed out ([`Reader::plan_ahead`],
/// [`ReadableStorage::read_ranges_ahead`](tdb_storage::ReadableStorage::read_ranges_ahead)).
pub struct SyncRead<'a, S: ?Sized> {
    fetcher: Fetcher<'a, S>,
    reader: Reader<'a>,
    finished: bool,
}

/// How a synchronous driver answers a reader's needs: from storage, or
/// from the batch it started fetching ahead (remote storage).
pub(crate) struct Fetcher<'a, S: ?Sized> {
    storage: &'a S,
    /// Requests being fetched ahead, and their answers to come.
    ahead: Option<(Vec<RangeRequest>, Box<dyn tdb_storage::PendingRanges>)>,
}

impl<'a, S: ReadStorage + ?Sized> Fetcher<'a, S> {
    pub(crate) fn new(storage: &'a S) -> Self {
        Fetcher {
            storage,
            ahead: None,
        }
    }

    /// The answers to `requests`.
    pub(crate) fn answer(&mut self, requests: &[RangeRequest]) -> Result<Vec<Option<RangeRead>>> {
        match self.ahead.take() {
            Some((asked, pending)) if asked == requests => pending
                .wait()
                .map_err(|source| storage_error(requests, source)),
            // Another need came first (never, by `plan_ahead`'s promise):
            // those answers go unused.
            _ => fetch(self.storage, requests),
        }
    }

    /// After an answer is pushed: on remote storage, plans the reader's
    /// next piece and starts fetching it.
    pub(crate) fn look_ahead(&mut self, reader: &mut Reader<'_>) -> Result<()> {
        if !self.storage.remote() {
            return Ok(());
        }
        if let Some(next) = reader.plan_ahead()? {
            if let Some(p) = self.storage.read_ranges_ahead(&next) {
                self.ahead = Some((next, p));
            }
        }
        Ok(())
    }
}

impl<'a, S: ReadStorage + ?Sized> SyncRead<'a, S> {
    /// Starts `spec` over `snapshot`, fetching from `storage`.
    pub fn new(storage: &'a S, snapshot: &'a Snapshot, spec: ReadSpec) -> Result<Self> {
        let mut reader = Reader::new(snapshot, spec)?;
        reader.set_remote(storage.remote());
        Ok(SyncRead {
            fetcher: Fetcher::new(storage),
            reader,
            finished: false,
        })
    }

    fn advance(&mut self) -> Result<Option<Batch>> {
        loop {
            match self.reader.step()? {
                ReadStep::Need(requests) => {
                    let got = self.fetcher.answer(&requests)?;
                    self.reader.push(got)?;
                    self.fetcher.look_ahead(&mut self.reader)?;
                }
                ReadStep::Batch(b) => return Ok(Some(b)),
                ReadStep::Done => return Ok(None),
            }
        }
    }
}

impl<S: ReadStorage + ?Sized> Iterator for SyncRead<'_, S> {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let r = self.advance();
        if !matches!(r, Ok(Some(_))) {
            self.finished = true;
        }
        r.transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_format::Datatype;

    /// Runs of every kind (whole ranges, strided cells, fill), enough bytes
    /// to be shared among threads, land where the serial copy puts them.
    #[test]
    fn copies_shared_among_threads_match_the_serial_copy() {
        let cells = 1u64 << 20;
        let fixed: Vec<u8> = (0..cells as u32).flat_map(u32::to_le_bytes).collect();
        let validity: Vec<u8> = (0..cells).map(|i| u8::from(i % 5 != 0)).collect();
        let col = Column {
            datatype: Datatype::UInt32,
            cell_val_num: 1,
            fixed: &fixed,
            offsets: &[],
            var: &[],
            validity: Some(&validity),
        };
        let slab = |cell, stride, len| Slab {
            frag: 0,
            tile: 0,
            cell,
            stride,
            len,
        };
        let runs: Vec<(Option<Column<'_>>, Slab)> = (0..3000u64)
            .map(|k| match k % 3 {
                0 => (Some(col), slab(k * 97, 1, 300)),
                1 => (Some(col), slab(k * 13, 3, 100)),
                _ => (None, Slab::fill(50)),
            })
            .collect();
        let total: usize = runs.iter().map(|(_, s)| s.len as usize).sum();
        assert!(total * 4 >= PARALLEL_COPY);
        let fill = Fill {
            bytes: &[0xAB; 4],
            valid: 0,
        };
        let copy = |shared: bool| -> (Vec<u8>, Vec<u8>) {
            let (mut data, mut valid) = (vec![0u8; total * 4], vec![7u8; total]);
            let (mut d, mut v) = (&mut data[..], &mut valid[..]);
            let mut jobs = Vec::new();
            for &(source, s) in &runs {
                let n = s.len as usize;
                let (a, rest) = std::mem::take(&mut d).split_at_mut(n * 4);
                d = rest;
                let (b, rest) = std::mem::take(&mut v).split_at_mut(n);
                v = rest;
                jobs.push((a, Some(b), source, s));
            }
            if shared {
                // Two threads whatever the machine has.
                crate::pool::for_each_share(
                    jobs,
                    2,
                    |job| job.0.len(),
                    |job| copy_run(job, 4, fill),
                )
                .unwrap();
            } else {
                jobs.into_iter().for_each(|job| copy_run(job, 4, fill));
            }
            (data, valid)
        };
        let serial = copy(false);
        assert_eq!(serial.0[300 * 4..301 * 4], 13u32.to_le_bytes());
        assert_eq!(serial.0[400 * 4..401 * 4], [0xAB; 4]);
        assert_eq!(copy(true), serial);
    }
}
