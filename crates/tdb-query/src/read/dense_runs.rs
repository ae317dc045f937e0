//! Dense tiles spilled as sorted runs: a dense read whose result order
//! crosses its tiles' cell order (col-major results of row-major tiles,
//! and the reverse) and whose tiles pass the tile budget. Cut by the
//! subarray, a piece of a few result lines reaches every chunk of each
//! tile it crosses, so pieces shrink to a cell or two (`dense_large_tiles`
//! col-major under 1 MiB: 33,068 rounds of requests, about 10 s). As a
//! sparse read against its order does (see `spill`), pieces are instead
//! runs of one fragment's tiles, or of one tile's cells, read by the
//! chunks holding them, so each chunk is read once; a run's cells inside
//! the subarray are written sorted in the result order. The merge takes
//! the newest fragment's version of each cell (dense arrays have no
//! duplicates) and gives fill where no fragment wrote ([`DenseBox`]).

use super::fields::Kind;
use super::plan::{self, CellRef};
use super::spill::Spill;
use super::Reader;
use crate::batch::{Batch, FieldBuffer};
use crate::condition::BoundCondition;
use crate::{QueryError, Result, ResultLayout};
use std::ops::Range;
use tdb_format::{ArrayType, Datatype, Layout};
use tdb_index::dense::{next_row, push_int, FragmentGrid};

/// A dense read's result cells in order: the subarray's box (one range a
/// dimension), walked in the result order, each cell numbered by its
/// place in it.
#[derive(Debug, Clone)]
pub(crate) struct DenseBox {
    lo: Vec<i128>,
    hi: Vec<i128>,
    /// Dimensions, the fastest-varying in the result order first.
    order: Vec<usize>,
    types: Vec<Datatype>,
    /// The next cell to hand out (`None`: every one is out).
    at: Option<Vec<i128>>,
    /// Its place in the box's order.
    place: u64,
}

impl DenseBox {
    /// The box from `lo` to `hi` (inclusive) of dimensions of `types`,
    /// walked col-major (`col`) or row-major.
    pub fn new(lo: Vec<i128>, hi: Vec<i128>, col: bool, types: Vec<Datatype>) -> Self {
        let n = lo.len();
        let order = if col {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        };
        let empty = lo.iter().zip(&hi).any(|(l, h)| l > h);
        DenseBox {
            at: (!empty).then(|| lo.clone()),
            lo,
            hi,
            order,
            types,
            place: 0,
        }
    }

    /// `at`'s place in the box's order (`None` outside it, or past what
    /// 64 bits count).
    pub fn key(&self, at: &[i128]) -> Option<u64> {
        let mut key = 0u128;
        for &d in self.order.iter().rev() {
            let (lo, hi, v) = (*self.lo.get(d)?, *self.hi.get(d)?, *at.get(d)?);
            if v < lo || v > hi {
                return None;
            }
            let len = u128::try_from(hi.checked_sub(lo)?.checked_add(1)?).ok()?;
            let off = u128::try_from(v.checked_sub(lo)?).ok()?;
            key = key.checked_mul(len)?.checked_add(off)?;
        }
        u64::try_from(key).ok()
    }

    /// The coordinates of the cell at place `key` into `at`.
    pub fn coords(&self, key: u64, at: &mut [i128]) -> Option<()> {
        let mut rest = i128::from(key);
        for &d in &self.order {
            let (lo, hi) = (*self.lo.get(d)?, *self.hi.get(d)?);
            let len = hi.checked_sub(lo)?.checked_add(1)?;
            let (q, r) = tdb_index::dense::div_rem_euclid(rest, len)?;
            *at.get_mut(d)? = lo.checked_add(r)?;
            rest = q;
        }
        (rest == 0).then_some(())
    }

    /// The next cell's place in the box's order, `None` once every one
    /// is out.
    pub fn place(&self) -> Option<u64> {
        self.at.as_ref().map(|_| self.place)
    }

    /// Moves on to the next cell in the box's order.
    pub fn step(&mut self) {
        if let Some(at) = &mut self.at {
            self.place = self.place.saturating_add(1);
            if !next_row(at, &self.lo, &self.hi, self.order.iter().copied()) {
                self.at = None;
            }
        }
    }

    /// Appends dimension `d`'s value of the current cell to `out`.
    pub fn push_coord(&self, d: usize, out: &mut FieldBuffer) {
        let mut bytes = Vec::with_capacity(8);
        if let Some(at) = &self.at {
            self.coord_bytes(at, d, &mut bytes);
        }
        out.push(&bytes, true);
    }

    /// Dimension `d`'s value of the cell at `at`, in the dimension's type,
    /// into `out` (emptied first).
    pub fn coord_bytes(&self, at: &[i128], d: usize, out: &mut Vec<u8>) {
        out.clear();
        if let (Some(&v), Some(&t)) = (at.get(d), self.types.get(d)) {
            push_int(t, v, out);
        }
    }
}

impl Reader {
    /// Whether this dense read spills (see the module): more than one
    /// dimension, results row- (col-) major over cells that go the other
    /// way, a reached tile past the tile budget, dense fragments alone
    /// whose tiles can be sliced, one range a dimension and no aggregate.
    pub(super) fn dense_spills(&self) -> bool {
        let schema = self.snapshot.schema();
        let sub = &self.spec.subarray;
        let dims = schema.domain.dimensions.len();
        let against = match self.spec.layout {
            ResultLayout::RowMajor => schema.cell_order != Layout::RowMajor,
            ResultLayout::ColMajor => schema.cell_order != Layout::ColMajor,
            _ => false,
        };
        schema.array_type == ArrayType::Dense
            && dims > 1
            && against
            && !self.with_states
            && (0..dims).all(|d| sub.ranges(d).len() <= 1)
            && (self.plans.iter()).all(|p| p.meta.footer.dense && Self::sliceable(p))
            && self.tile_past_budget(true)
    }

    /// The subarray's box, walked in the result order.
    pub(super) fn dense_box(&self) -> Result<DenseBox> {
        let schema = self.snapshot.schema();
        let ranges = plan::dense_coords(schema, &self.spec.subarray)?;
        let mut lo = Vec::with_capacity(ranges.len());
        let mut hi = Vec::with_capacity(ranges.len());
        for rs in &ranges {
            let (Some(l), Some(h)) = (rs.iter().map(|r| r.0).min(), rs.iter().map(|r| r.1).max())
            else {
                return Err(QueryError::invalid("a dense dimension without a range"));
            };
            lo.push(l);
            hi.push(h);
        }
        let types = (schema.domain.dimensions.iter())
            .map(|d| d.datatype)
            .collect();
        let col = self.spec.layout == ResultLayout::ColMajor;
        Ok(DenseBox::new(lo, hi, col, types))
    }

    /// The cells of tile `t` of dense fragment `i` from the first inside
    /// the subarray (and the fragment's non-empty domain) to the last, in
    /// the tile's cell order: the corners of that box are its least and
    /// greatest positions. Empty where the subarray misses the tile;
    /// `None` for a sparse fragment, or where the grid cannot say.
    pub(super) fn dense_span(&self, i: usize, t: u64) -> Option<Range<u64>> {
        let plan = self.plans.get(i).filter(|p| p.meta.footer.dense)?;
        let grid = Self::grid(plan)?;
        let cells = grid.tile_cells(t)?;
        let ranges = plan::dense_coords(&plan.schema, &self.spec.subarray).ok()?;
        let mut lo = Vec::with_capacity(ranges.len());
        let mut hi = Vec::with_capacity(ranges.len());
        for ((rs, &from), &to) in ranges.iter().zip(&cells.from).zip(&cells.to) {
            let l = rs.iter().map(|r| r.0).min()?.max(from);
            let h = rs.iter().map(|r| r.1).max()?.min(to);
            if l > h {
                return Some(0..0);
            }
            lo.push(l);
            hi.push(h);
        }
        let (tl, first) = grid.position(&lo)?;
        let (th, last) = grid.position(&hi)?;
        (tl == t && th == t).then(|| first..last.saturating_add(1))
    }

    /// A dense fragment's tile grid.
    fn grid(plan: &plan::FragPlan) -> Option<FragmentGrid> {
        let ned = plan.meta.footer.non_empty_domain.as_ref()?;
        let s = &plan.schema;
        FragmentGrid::new(&s.domain, s.tile_order, s.cell_order, ned)
    }

    /// The current piece's cells (a run of one dense fragment's tiles, or
    /// of one tile's cells) inside the subarray, written to `spill` as a
    /// run sorted in the result order.
    pub(super) fn spill_dense(&self, spill: &mut Spill) -> Result<()> {
        let Some(i) = self.current.frag else {
            return Ok(());
        };
        let plan = (self.plans.get(i))
            .ok_or_else(|| QueryError::invalid(format!("no fragment {i} planned")))?;
        let grid = Self::grid(plan).ok_or_else(|| {
            QueryError::invalid(format!(
                "dense fragment {}: no tile grid over its non-empty domain",
                plan.file.path
            ))
        })?;
        let bx = self.dense_box()?;
        let n = plan.schema.domain.dimensions.len();
        let frag = u32::try_from(i).map_err(|_| QueryError::invalid("too many fragments"))?;
        // Per cell: its place in the result order, its tile (an index in
        // the piece's) and its position there.
        let mut found: Vec<(u64, u32, u32)> = Vec::new();
        let mut at = vec![0i128; n];
        for (k, &t) in plan.tiles.iter().enumerate() {
            let cells = match &self.current.cells {
                Some(c) => c.clone(),
                None => self.dense_span(i, t).unwrap_or(0..0),
            };
            if cells.is_empty() {
                continue;
            }
            let tc = grid.tile_cells(t).ok_or_else(|| {
                QueryError::invalid(format!("{}: no tile {t} in its grid", plan.file.path))
            })?;
            tc.coords(cells.start, &mut at)
                .ok_or_else(|| QueryError::invalid(format!("no cell {} in a tile", cells.start)))?;
            let k = u32::try_from(k).map_err(|_| QueryError::invalid("too many tiles"))?;
            for pos in cells {
                if tc.written(&at) {
                    if let Some(key) = bx.key(&at) {
                        let pos = u32::try_from(pos)
                            .map_err(|_| QueryError::invalid("a tile of over 2^32 cells"))?;
                        found.push((key, k, pos));
                    }
                }
                tc.step(&mut at);
            }
        }
        found.sort_unstable_by_key(|f| f.0);
        // Each tile's columns looked up once.
        let slots: Vec<usize> = spill.fmt.slots().collect();
        let mut cols = Vec::with_capacity(plan.tiles.len());
        for &t in &plan.tiles {
            let row = (slots.iter())
                .map(|&slot| {
                    let f = (self.fields.get(slot))
                        .ok_or_else(|| QueryError::invalid(format!("no field in slot {slot}")))?;
                    Ok((self.tiles.get(&(i, slot, t)))
                        .map(|tile| (tile.column(f.datatype, f.cell_val_num), tile.first)))
                })
                .collect::<Result<Vec<_>>>()?;
            cols.push(row);
        }
        let mut run = spill.writer(0);
        let fmt = &spill.fmt;
        let mut coord = Vec::with_capacity(8);
        // Cells the condition rejects stay in the run, so that they hide
        // older fragments' versions: the merge hands out fill for them, as
        // a dense read does for a cell that fails its condition.
        let rejected = match &self.condition {
            Some(cond) => self.rejected(cond, i, &plan.tiles, &found, &bx)?,
            None => Vec::new(),
        };
        // Coordinates only where a dimension is asked for.
        let coords_asked = (slots.iter())
            .any(|&slot| matches!(self.fields.get(slot).map(|f| f.kind), Some(Kind::Dim(_))));
        for (c, &(key, k, pos)) in found.iter().enumerate() {
            if coords_asked {
                bx.coords(key, &mut at)
                    .ok_or_else(|| QueryError::invalid("a cell outside the subarray"))?;
            }
            let row = (cols.get(k as usize))
                .ok_or_else(|| QueryError::invalid("a cell without its tile"))?;
            // Known by its place in the result order (`RunFormat::placed`).
            let cell = CellRef {
                frag,
                tile: key,
                cell: pos,
            };
            let rejected = rejected.get(c).copied().unwrap_or(false);
            run.head(cell, u64::from(frag), (false, rejected))?;
            for (s, (col, &slot)) in row.iter().zip(&slots).enumerate() {
                let f = self.fields.get(slot);
                match (f.map(|f| f.kind), col) {
                    (Some(Kind::Dim(d)), _) => {
                        bx.coord_bytes(&at, d, &mut coord);
                        run.field(fmt, s, &coord, true)?;
                    }
                    (_, Some((col, first))) => {
                        let c = (pos as usize).saturating_sub(*first as usize);
                        run.field(fmt, s, col.cell(c), !col.is_null(c))?;
                    }
                    // A fragment without the field gives its fill value.
                    (_, None) => match f {
                        Some(f) => run.field(fmt, s, &f.fill, f.fill_validity != 0)?,
                        None => run.field(fmt, s, &[], false)?,
                    },
                }
            }
        }
        let run = run.finish()?;
        tracing::debug!(
            piece = self.pieces_started,
            cells = run.records(),
            "dense run spilled"
        );
        spill.push(run)
    }
}

impl Reader {
    /// Per cell of `found` (its place in the box `bx`, its tile's index
    /// in `tiles` of fragment `i`, its position there), whether `cond`
    /// rejects it: evaluated on a block of cells at a time, each field's
    /// value (fill where the fragment lacks the field, coordinates for a
    /// dimension).
    fn rejected(
        &self,
        cond: &BoundCondition,
        i: usize,
        tiles: &[u64],
        found: &[(u64, u32, u32)],
        bx: &DenseBox,
    ) -> Result<Vec<bool>> {
        /// Cells a block: what one evaluation holds of each field.
        const BLOCK: usize = 4096;
        let slots: Vec<usize> = (cond.fields().iter())
            .filter_map(|n| self.fields.iter().position(|f| &f.name == n))
            .collect();
        let n = bx.lo.len();
        let mut at = vec![0i128; n];
        let mut coord = Vec::with_capacity(8);
        let mut out = Vec::with_capacity(found.len());
        for block in found.chunks(BLOCK) {
            let mut fields = Vec::with_capacity(slots.len());
            for &slot in &slots {
                let f = (self.fields.get(slot))
                    .ok_or_else(|| QueryError::invalid(format!("no field in slot {slot}")))?;
                let mut buf = f.empty_buffer();
                for &(key, k, pos) in block {
                    if let Kind::Dim(d) = f.kind {
                        bx.coords(key, &mut at)
                            .ok_or_else(|| QueryError::invalid("a cell outside the subarray"))?;
                        bx.coord_bytes(&at, d, &mut coord);
                        buf.push(&coord, true);
                        continue;
                    }
                    let tile = (tiles.get(k as usize)).and_then(|&t| self.tiles.get(&(i, slot, t)));
                    match tile {
                        Some(tile) => {
                            let col = tile.column(f.datatype, f.cell_val_num);
                            let c = (pos as usize).saturating_sub(tile.first as usize);
                            buf.push(col.cell(c), !col.is_null(c));
                        }
                        None => buf.push(&f.fill, f.fill_validity != 0),
                    }
                }
                fields.push(buf);
            }
            let batch = Batch {
                num_cells: block.len() as u64,
                fields,
            };
            let mut keep = vec![true; block.len()];
            cond.evaluate(&batch, &mut keep)?;
            out.extend(keep.iter().map(|k| !k));
        }
        Ok(out)
    }
}
