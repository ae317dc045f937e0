//! Aggregates: a read of the aggregated fields folded batch by batch, with
//! TileDB's dense rules. A dense read aggregates only the cells some
//! fragment wrote (and the condition kept); a space tile the subarray
//! covers whole, whose cells come from one fragment and where the condition
//! rejected none, is answered from that fragment's tile metadata — which
//! changes answers, not just speed: the metadata counts every cell of the
//! tile in the mean's divisor, written or not, as TileDB does.
//!
//! Sparse tiles the reader answers from their metadata come as events of
//! their own, before the read (the subarray holds them whole) or once read
//! (every cell kept, TileDB's merge took them whole); the cells of one a
//! piece holds part of are folded apart until the reader settles it
//! (`super::whole_tiles`).

use super::drive::Fetcher;
use super::{BatchNotes, CellState, DecodeWork, Decoded, Event, Reader};
use crate::aggregate::{Accumulator, AggregateOp, AggregateResult};
use crate::batch::Batch;
use crate::read::fields::{FieldInfo, Kind};
use crate::read::plan::FragPlan;
use crate::read::tiles::FastHash;
use crate::{QueryError, ReadSpec, Result, ResultLayout, Snapshot};
use std::collections::HashMap;
use std::sync::Arc;
use tdb_format::{ArrayType, Datatype};
use tdb_fragment::fragment_metadata::{Section, SectionData};
use tdb_fragment::ReadStorage;
use tdb_index::dense::{
    cell_num_per_tile, cell_position, int_range, int_value, origin_and_extent, tile_of,
};
use tdb_storage::{RangeRead, RangeRequest};

/// What an aggregation needs next.
#[derive(Debug)]
pub enum AggregateStep {
    /// Fetch these ranges and [`Aggregation::push`] the answers (in any
    /// order, as [`Reader::push`] takes them).
    Need(Vec<RangeRequest>),
    /// Run this and give the result to [`Aggregation::push_decoded`].
    Decode(DecodeWork),
    /// The answers, in the order asked.
    Done(Vec<AggregateResult>),
}

/// One aggregated field; the `i`-th is the `i`-th column of the read's
/// batches.
struct FieldAgg {
    name: String,
    /// Its slot among the reader's fields.
    slot: usize,
    acc: Accumulator,
    ops: Vec<AggregateOp>,
    /// An attribute (dimensions have no tile metadata).
    attribute: bool,
}

/// A space tile of a dense read the tile metadata may answer.
struct MdTile {
    /// Fragment (plan index) and its tile holding the space tile.
    frag: usize,
    tile: u64,
    /// The condition rejected a written cell of it.
    rejected: bool,
    /// Its cells folded per field, used when the metadata cannot be.
    partial: Vec<Option<Accumulator>>,
}

/// The cells of a sparse tile the reader may yet answer from its metadata
/// (its pieces held parts of it), folded apart until it settles.
struct TilePartial {
    /// Per field.
    accs: Vec<Accumulator>,
    rows: u64,
}

/// The dense tile grid, to find each cell's space tile.
struct DenseGrid {
    /// Per dimension: domain low bound and tile extent.
    dims: Vec<(i128, i128)>,
    /// Per dimension: the subarray's ranges.
    ranges: Vec<Vec<(i128, i128)>>,
    tile_cells: u64,
    /// Columns of the dimensions in the batches.
    dim_columns: Vec<usize>,
    tiles: HashMap<Vec<i128>, Option<MdTile>>,
}

/// An aggregation in progress: a state machine that does no I/O, like
/// [`Reader`]. [`aggregate`] drives it over a storage backend.
pub struct Aggregation {
    reader: Reader,
    fields: Vec<FieldAgg>,
    /// The requests in order: field index and op.
    requests: Vec<(usize, AggregateOp)>,
    rows: u64,
    grid: Option<DenseGrid>,
    /// Sparse tiles pieces held parts of ([`BatchNotes::pending`]), by
    /// (plan, tile).
    partials: HashMap<(usize, u64), TilePartial, FastHash>,
}

impl Aggregation {
    /// Aggregates over the read `spec` describes (its subarray, condition,
    /// layout and budget; its fields are ignored): `requests` are
    /// `(field, op)` pairs, answered in their order.
    pub fn new(
        snapshot: Arc<Snapshot>,
        spec: ReadSpec,
        requests: &[(String, AggregateOp)],
    ) -> Result<Self> {
        let schema = snapshot.schema();
        let dense = schema.array_type == ArrayType::Dense;
        let mut names: Vec<String> = Vec::new();
        for (name, _) in requests {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        let dim_names: Vec<String> = schema
            .domain
            .dimensions
            .iter()
            .map(|d| d.name.clone())
            .collect();
        let mut read_fields = names.clone();
        if dense || read_fields.is_empty() {
            // Dense: each cell's space tile comes from its coordinates.
            // Sparse with only `count`: any field gives the rows.
            read_fields.extend(dim_names.iter().filter(|d| !names.contains(d)).cloned());
        }
        let mut spec = spec;
        spec.fields = read_fields;
        // A dense read's cells are its subarray's whatever their order (a
        // cell of overlapping ranges once for each, in the global order as
        // in any other), so it folds them in the order they are stored:
        // against it, under a budget smaller than a tile, pieces of a few
        // result lines would read every chunk of their tiles again
        // (`dense_large_tiles` col-major under 1 MiB: 4.2 s against 0.16).
        // Only a float sum's last bits can change, as TileDB's own vary
        // with its threads.
        // (Except where the condition tests nulls: TileDB's dense reader
        // tests them on other cells reading across the tiles' cell order,
        // `Reader::dense_null_checks`.)
        let asked = spec.clone();
        if dense {
            spec.layout = ResultLayout::GlobalOrder;
        }
        let mut reader = Reader::new(Arc::clone(&snapshot), spec)?;
        if dense && reader.condition.as_ref().is_some_and(|c| c.tests_nulls()) {
            reader = Reader::new(Arc::clone(&snapshot), asked)?;
        }
        let mut fields: Vec<FieldAgg> = Vec::new();
        let ops_of = |name: &str| -> Vec<AggregateOp> {
            requests
                .iter()
                .filter(|(n, _)| n == name)
                .map(|&(_, o)| o)
                .collect()
        };
        for (column, name) in names.iter().enumerate() {
            let (slot, info) = reader
                .requested
                .get(column)
                .and_then(|&slot| Some((slot, reader.fields.get(slot)?)))
                .ok_or_else(|| QueryError::invalid(format!("{name}: not read")))?;
            let ops = ops_of(name);
            let mut kind = None;
            for &op in &ops {
                kind = Some(op.check(name, info.datatype, info.cell_val_num, info.nullable)?);
            }
            let kind = kind.ok_or_else(|| QueryError::invalid("an aggregate without an op"))?;
            fields.push(FieldAgg {
                name: name.clone(),
                slot,
                acc: Accumulator::new(kind, &ops),
                attribute: matches!(info.kind, Kind::Attr(_)),
                ops,
            });
        }
        let requests = requests
            .iter()
            .map(|(n, op)| (names.iter().position(|x| x == n).unwrap_or(0), *op))
            .collect();
        let sparse_frags = snapshot.fragments.iter().any(|f| !f.metadata.footer.dense);
        let grid = if dense && !sparse_frags {
            let mut dims = Vec::new();
            for d in &schema.domain.dimensions {
                let (lo, ext) = origin_and_extent(d).ok_or_else(|| {
                    QueryError::invalid("a dense dimension without a tile extent")
                })?;
                dims.push((lo, ext));
            }
            let ranges = super::plan::dense_coords(schema, &reader.spec.subarray)?;
            let dim_columns = dim_names
                .iter()
                .map(|d| reader.spec.fields.iter().position(|f| f == d).unwrap_or(0))
                .collect();
            Some(DenseGrid {
                dims,
                ranges,
                tile_cells: cell_num_per_tile(&schema.domain).unwrap_or(0),
                dim_columns,
                tiles: HashMap::new(),
            })
        } else {
            None
        };
        // Sparse tiles the subarray holds whole may be answered from their
        // metadata when every field's ops can be: attributes, and
        // dimensions asked only for counts.
        let counts = [AggregateOp::Count, AggregateOp::NullCount];
        reader.md_sparse = !dense
            && fields
                .iter()
                .all(|f| f.attribute || f.ops.iter().all(|o| counts.contains(o)));
        if grid.is_some() || reader.md_sparse {
            reader.md_fields = fields
                .iter()
                .filter(|f| f.attribute)
                .map(|f| (f.slot, f.ops.clone()))
                .collect();
        }
        reader.with_states = dense;
        Ok(Aggregation {
            reader,
            fields,
            requests,
            rows: 0,
            grid,
            partials: HashMap::default(),
        })
    }

    /// The next thing the aggregation needs, or its answers.
    pub fn step(&mut self) -> Result<AggregateStep> {
        loop {
            match self.reader.next_event()? {
                Event::Need(r) => return Ok(AggregateStep::Need(r)),
                Event::Decode(w) => return Ok(AggregateStep::Decode(w)),
                Event::Batch(b, notes) => self.fold(&b, &notes)?,
                Event::FromMetadata(tiles) => self.fold_metadata(tiles)?,
                Event::FromCells(tiles) => self.fold_partials(tiles),
                Event::Done => return Ok(AggregateStep::Done(self.finish())),
            }
        }
    }

    /// Answers to the last [`AggregateStep::Need`] ([`Reader::push`]).
    pub fn push(
        &mut self,
        answers: impl IntoIterator<Item = (RangeRequest, Option<RangeRead>)>,
    ) -> Result<()> {
        self.reader.push(answers)
    }

    /// The result of the last [`AggregateStep::Decode`]'s work.
    pub fn push_decoded(&mut self, decoded: Decoded) -> Result<()> {
        self.reader.push_decoded(decoded)
    }

    /// Folds sparse tiles the reader answered from their metadata (it
    /// checked each field's metadata is there): (plan, tile).
    fn fold_metadata(&mut self, tiles: Vec<(usize, u64)>) -> Result<()> {
        let missing = || QueryError::invalid("a tile answered from metadata that is not planned");
        for (frag, tile) in tiles {
            // Its cells folded apart give way to its metadata.
            if let Some(part) = self.partials.remove(&(frag, tile)) {
                self.rows = self.rows.saturating_sub(part.rows);
            }
            let plan = self.reader.plans.get(frag).ok_or_else(missing)?;
            let cells = plan.cells(tile, plan.tile_num());
            self.rows = self.rows.saturating_add(cells);
            for f in &mut self.fields {
                let info = self.reader.fields.get(f.slot).ok_or_else(missing)?;
                match tile_metadata(plan, info, f.slot, &f.ops, tile) {
                    Some(md) => f.acc.add_tile(cells, md.nulls, md.sum, md.min_max),
                    // A dimension asked for counts: never null.
                    None => f.acc.add_tile(cells, 0, None, None),
                }
            }
        }
        Ok(())
    }

    /// Folds in the cells of `tiles` folded apart, which their metadata
    /// does not answer after all.
    fn fold_partials(&mut self, tiles: impl IntoIterator<Item = (usize, u64)>) {
        for tile in tiles {
            if let Some(part) = self.partials.remove(&tile) {
                for (f, acc) in self.fields.iter_mut().zip(&part.accs) {
                    f.acc.merge(acc);
                }
            }
        }
    }

    fn fold(&mut self, batch: &Batch, notes: &BatchNotes) -> Result<()> {
        let states = notes.states.as_deref();
        // Runs in order, each starting at a cell: (first cell, cells, tile).
        let mut pending = notes.pending.iter().peekable();
        let mut folded_apart = 0usize;
        let n = batch.num_cells as usize;
        self.rows = self.rows.saturating_add(batch.num_cells);
        let columns: Vec<_> = batch
            .fields
            .get(..self.fields.len())
            .ok_or_else(|| QueryError::invalid("a batch without the aggregated fields"))?
            .iter()
            .map(|b| b.column())
            .collect();
        let mut tc = Vec::new();
        for k in 0..n {
            let state = states
                .and_then(|s| s.get(k).copied())
                .unwrap_or(CellState::Kept);
            if state == CellState::Unwritten || k < folded_apart {
                continue;
            }
            // A run of a sparse tile that may yet answer from its metadata:
            // folded apart, its tile looked up once.
            if let Some((at, len, tile)) = pending.next_if(|(at, _, _)| *at <= k) {
                let end = at.saturating_add(*len).min(n);
                let fields = &self.fields;
                let part = self.partials.entry(*tile).or_insert_with(|| TilePartial {
                    accs: fields.iter().map(|f| f.acc.empty()).collect(),
                    rows: 0,
                });
                part.rows = part.rows.saturating_add(end.saturating_sub(k) as u64);
                for (acc, col) in part.accs.iter_mut().zip(&columns) {
                    for c in k..end {
                        acc.add_cell(col.cell(c), !col.is_null(c));
                    }
                }
                folded_apart = end;
                continue;
            }
            let mut md = None;
            if let Some(grid) = &mut self.grid {
                grid.tile_coords(batch, k, &mut tc)?;
                if !grid.tiles.contains_key(tc.as_slice()) {
                    let t = grid.md_tile(&tc, &self.reader.plans, self.fields.len());
                    grid.tiles.insert(tc.clone(), t);
                }
                md = grid.tiles.get_mut(tc.as_slice()).and_then(Option::as_mut);
            }
            if state == CellState::Rejected {
                if let Some(t) = md {
                    t.rejected = true;
                }
                continue;
            }
            for (i, (f, col)) in self.fields.iter_mut().zip(&columns).enumerate() {
                let (bytes, valid) = (col.cell(k), !col.is_null(k));
                // Attributes of a tile the metadata may answer fold apart.
                let partial = match md.as_deref_mut() {
                    Some(t) if f.attribute => t
                        .partial
                        .get_mut(i)
                        .map(|p| p.get_or_insert_with(|| f.acc.empty())),
                    _ => None,
                };
                match partial {
                    Some(p) => p.add_cell(bytes, valid),
                    None => f.acc.add_cell(bytes, valid),
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Vec<AggregateResult> {
        // (The reader settles every tile before it is done.)
        let left: Vec<(usize, u64)> = self.partials.keys().copied().collect();
        self.fold_partials(left);
        if let Some(grid) = self.grid.take() {
            for t in grid.tiles.into_values().flatten() {
                for (f, partial) in self.fields.iter_mut().zip(&t.partial) {
                    let Some(partial) = partial else {
                        continue;
                    };
                    let plan = self.reader.plans.get(t.frag);
                    let info = self.reader.fields.get(f.slot);
                    let md = plan
                        .zip(info)
                        .and_then(|(plan, info)| tile_metadata(plan, info, f.slot, &f.ops, t.tile));
                    match (t.rejected, md) {
                        (false, Some(md)) => {
                            f.acc
                                .add_tile(grid.tile_cells, md.nulls, md.sum, md.min_max)
                        }
                        _ => f.acc.merge(partial),
                    }
                }
            }
        }
        self.requests
            .iter()
            .filter_map(|&(i, op)| {
                let f = self.fields.get(i)?;
                Some(AggregateResult {
                    field: f.name.clone(),
                    op,
                    value: f.acc.finish(op, self.rows),
                })
            })
            .collect()
    }
}

/// Runs an [`Aggregation`] over `storage`: the answers to `requests` over
/// the read `spec` describes.
pub fn aggregate<S: ReadStorage + ?Sized>(
    storage: &S,
    snapshot: Arc<Snapshot>,
    spec: ReadSpec,
    requests: &[(String, AggregateOp)],
) -> Result<Vec<AggregateResult>> {
    let spec = crate::label::resolve_spec(storage, &snapshot, spec)?;
    let mut agg = Aggregation::new(snapshot, spec, requests)?;
    agg.reader.set_remote(storage.remote());
    let mut fetcher = Fetcher::new(storage);
    loop {
        match agg.step()? {
            AggregateStep::Need(r) => fetcher.serve(&mut agg.reader, r)?,
            AggregateStep::Decode(w) => {
                fetcher.decoding(&mut agg.reader)?;
                agg.push_decoded(w.run()?)?;
            }
            AggregateStep::Done(results) => return Ok(results),
        }
    }
}

/// One tile's metadata for one field.
pub(super) struct TileMd<'p> {
    nulls: u64,
    sum: Option<u64>,
    min_max: Option<(&'p [u8], &'p [u8])>,
}

/// Whether tile `tile` of `plan` has the metadata every field of
/// `md_fields` ((slot, ops)) needs, so an aggregation may fold it instead
/// of the tile's cells.
pub(super) fn metadata_answers(
    plan: &FragPlan,
    fields: &[FieldInfo],
    md_fields: &[(usize, Vec<AggregateOp>)],
    tile: u64,
) -> bool {
    md_fields.iter().all(|(slot, ops)| {
        (fields.get(*slot)).is_some_and(|f| tile_metadata(plan, f, *slot, ops, tile).is_some())
    })
}

/// Tile `tile` of `plan`'s metadata for `f`: `None` when the fragment lacks
/// some of what `f`'s ops need.
pub(super) fn tile_metadata<'p>(
    plan: &'p FragPlan,
    info: &FieldInfo,
    slot: usize,
    ops: &[AggregateOp],
    tile: u64,
) -> Option<TileMd<'p>> {
    let ff = plan.fields.get(slot)?.as_ref()?;
    let meta = &plan.meta;
    let t = usize::try_from(tile).ok()?;
    let nulls = if info.nullable {
        match meta.section(Section::NullCounts(ff.index))? {
            SectionData::U64s(v) => *v.get(t)?,
            _ => return None,
        }
    } else {
        0
    };
    let wants = |o: &[AggregateOp]| ops.iter().any(|x| o.contains(x));
    let sum = if wants(&[AggregateOp::Sum, AggregateOp::Mean]) {
        match meta.section(Section::Sums(ff.index))? {
            SectionData::Sums(v) => Some(*v.get(t)?),
            _ => return None,
        }
    } else {
        None
    };
    let min_max = if wants(&[AggregateOp::Min, AggregateOp::Max]) {
        let datatype = info.datatype;
        // Min/max metadata: numbers and CHAR/ASCII strings only; TileDB
        // wrote wrong values for fixed nullable strings until version 20.
        let string = matches!(datatype, Datatype::Char | Datatype::StringAscii);
        let absent = (datatype.is_string() && !string)
            || (string && info.nullable && !info.is_var() && meta.footer.version <= 20);
        if absent {
            return None;
        }
        Some(plan.tile_min_max(slot, info, tile)?)
    } else {
        None
    };
    Some(TileMd {
        nulls,
        sum,
        min_max,
    })
}

impl DenseGrid {
    /// The space tile of cell `k` of `batch`, into `tc`.
    fn tile_coords(&self, batch: &Batch, k: usize, tc: &mut Vec<i128>) -> Result<()> {
        tc.clear();
        let bad = || QueryError::invalid("a dense coordinate that is not an integer");
        for (&(lo, ext), &c) in self.dims.iter().zip(&self.dim_columns) {
            let col = batch.fields.get(c).ok_or_else(bad)?.column();
            let v = int_value(col.datatype, col.cell(k)).ok_or_else(bad)?;
            tc.push(tile_of(v, lo, ext).ok_or_else(bad)?);
        }
        Ok(())
    }

    /// Whether space tile `tc` may be answered from tile metadata (TileDB's
    /// `can_aggregate_tile_with_frag_md`): the subarray covers it whole and
    /// exactly one fragment intersects it without a newer fragment covering
    /// its part of the tile. Which fields the metadata serves is decided
    /// per field at the end.
    fn md_tile(&self, tc: &[i128], plans: &[FragPlan], fields: usize) -> Option<MdTile> {
        let boxes: Vec<(i128, i128)> = self
            .dims
            .iter()
            .zip(tc)
            .map(|(&(lo, ext), &t)| {
                let first = t.checked_mul(ext)?.checked_add(lo)?;
                Some((first, first.checked_add(ext)?.checked_sub(1)?))
            })
            .collect::<Option<_>>()?;
        // Cells of the subarray in the tile, counted as TileDB counts them
        // (per dimension, over every range).
        let mut covered: u64 = 1;
        for (rs, &(blo, bhi)) in self.ranges.iter().zip(&boxes) {
            let n = rs.iter().try_fold(0i128, |n, &(lo, hi)| {
                let k = hi.min(bhi).checked_sub(lo.max(blo))?.checked_add(1)?;
                n.checked_add(k.max(0))
            })?;
            covered = covered.checked_mul(u64::try_from(n).ok()?)?;
        }
        if covered != self.tile_cells {
            return None;
        }
        // Each dense fragment's part of the tile, newest first.
        let mut parts: Vec<(usize, Vec<(i128, i128)>)> = Vec::new();
        for (i, p) in plans.iter().enumerate().rev() {
            let footer = &p.meta.footer;
            if !footer.dense {
                continue;
            }
            let ned = footer.non_empty_domain.as_ref()?;
            let mut part = Vec::with_capacity(boxes.len());
            for ((r, &(blo, bhi)), dim) in ned.iter().zip(&boxes).zip(&p.schema.domain.dimensions) {
                let (lo, hi) = int_range(dim, r)?;
                part.push((lo.max(blo), hi.min(bhi)));
            }
            if part.iter().any(|&(lo, hi)| lo > hi) {
                continue;
            }
            parts.push((i, part));
        }
        let covers = |a: &[(i128, i128)], b: &[(i128, i128)]| {
            a.iter().zip(b).all(|(x, y)| x.0 <= y.0 && y.1 <= x.1)
        };
        let uncovered: Vec<&(usize, Vec<(i128, i128)>)> = parts
            .iter()
            .enumerate()
            .filter(|(k, (_, part))| {
                let newer = parts.get(..*k).unwrap_or_default();
                !newer.iter().any(|(_, newer)| covers(newer, part))
            })
            .map(|(_, p)| p)
            .collect();
        let [(frag, part)] = uncovered.as_slice() else {
            return None;
        };
        let plan = plans.get(*frag)?;
        if plan.meta.footer.version < 11 {
            return None;
        }
        let corner: Vec<i128> = part.iter().map(|&(lo, _)| lo).collect();
        let schema = &plan.schema;
        let (tile, _) = cell_position(
            &schema.domain,
            schema.tile_order,
            schema.cell_order,
            plan.meta.footer.non_empty_domain.as_ref()?,
            &corner,
        )?;
        Some(MdTile {
            frag: *frag,
            tile,
            rejected: false,
            partial: vec![None; fields],
        })
    }
}
