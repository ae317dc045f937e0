//! Dense tiles spilled in stretches: a dense read whose tiles, or a few
//! result lines' tiles, pass the tile budget. Cut by the subarray, a
//! piece of a few result lines across the tiles' cell order (col-major
//! results of row-major tiles, and the reverse) reaches every chunk of
//! each tile it crosses, so pieces shrink to a cell or two
//! (`dense_large_tiles` col-major under 1 MiB: 33,068 rounds of requests,
//! about 10 s); along the order, pieces of part of a line decode each
//! chunk again for every line it holds (W2 4096² under 1 MiB: 14 times
//! the unbudgeted read). As a sparse read against its order does (see
//! `spill`), pieces are instead runs of one fragment's tiles, or of one
//! tile's cells, read by the chunks holding them, so each chunk is read
//! once; a run's cells inside the subarray come out of each tile as
//! stretches in the result order ([`DenseBox::tile_places`]) and are
//! written so (`super::stretches`), whose merge takes the newest
//! fragment's version of each cell (dense arrays have no duplicates) and
//! gives fill where no fragment wrote. Across the order, a tile's cells go
//! in blocks where they can (`super::dense_blocks`), each result line of a
//! block a stretch of its band's cells.

use super::chunk_cache::ChunkCache;
use super::fields::{FieldInfo, Kind};
use super::null_checks::{null_check_validity, NullChecked};
use super::plan;
use super::stretches::{Stretch, Stretches};
use super::Reader;
use crate::batch::Batch;
use crate::condition::BoundCondition;
use crate::{QueryError, Result, ResultLayout};
use std::ops::Range;
use tdb_format::{ArrayType, Datatype, Layout};
use tdb_index::dense::{push_int, TileCells};

/// One dimension's result coordinates: its ranges in the order given,
/// each value once for every range holding it (TileDB's dense reads give
/// a cell of overlapping ranges once for each).
#[derive(Debug, Clone)]
struct Axis {
    /// The ranges, each with its first value's offset on the axis.
    ranges: Vec<(i128, i128, u64)>,
    /// Values on the axis.
    len: u64,
}

impl Axis {
    /// `None` where the axis has more values than 64 bits count.
    fn new(given: &[(i128, i128)]) -> Option<Self> {
        let mut ranges = Vec::with_capacity(given.len());
        let mut len = 0u64;
        for &(lo, hi) in given.iter().filter(|(lo, hi)| lo <= hi) {
            ranges.push((lo, hi, len));
            let n = u64::try_from(hi.checked_sub(lo)?.checked_add(1)?).ok()?;
            len = len.checked_add(n)?;
        }
        Some(Axis { ranges, len })
    }

    /// The value at offset `off`.
    fn value(&self, off: u64) -> Option<i128> {
        let i = self.ranges.partition_point(|r| r.2 <= off).checked_sub(1)?;
        let &(lo, hi, first) = self.ranges.get(i)?;
        let v = lo.checked_add(i128::from(off.checked_sub(first)?))?;
        (v <= hi).then_some(v)
    }
}

/// A dense read's result cells in order: every combination of one
/// coordinate a dimension (each dimension's ranges in the order given),
/// walked in the result order, each cell numbered by its place in it.
#[derive(Debug, Clone)]
pub(crate) struct DenseBox {
    axes: Vec<Axis>,
    /// Dimensions, the fastest-varying in the result order first.
    order: Vec<usize>,
    types: Vec<Datatype>,
    /// Cells in the box.
    cells: u64,
    /// The next cell to hand out.
    place: u64,
}

impl DenseBox {
    /// The cells of `ranges` (per dimension, its ranges in order) of
    /// dimensions of `types`, walked col-major (`col`) or row-major.
    /// `None` where the box has more cells than 64 bits count.
    pub fn new(ranges: &[Vec<(i128, i128)>], col: bool, types: Vec<Datatype>) -> Option<Self> {
        let n = ranges.len();
        let order = if col {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        };
        let axes = (ranges.iter())
            .map(|r| Axis::new(r))
            .collect::<Option<Vec<_>>>()?;
        let cells = (axes.iter()).try_fold(1u64, |a, x| a.checked_mul(x.len))?;
        Some(DenseBox {
            axes,
            order,
            types,
            cells,
            place: 0,
        })
    }

    /// The cells at positions `span` of the tile `tc` that lie in the box
    /// and inside the fragment's non-empty domain, handed to `out` in the
    /// order of their places (a cell of overlapping ranges once for each
    /// of its places) as (place, position, cells, step): that many cells
    /// whose places go up one a cell and positions `step` (a line of the
    /// tile along the result order, step one; across it, the stride of
    /// the result's fastest dimension in the tile). They come in sorted
    /// stretches: how many it handed out. Walked in the result order over the
    /// span's bounding box (along the cell order from the slowest
    /// dimension, coordinates the span's ends share pin it, the first that
    /// differs runs between them, faster ones over the tile). Where that
    /// box holds more than about twice the span (a span of a few cells
    /// across the end of one line of a long tile), the span is cut at the
    /// start of its second line, so no walk holds more than that.
    pub fn tile_places(
        &self,
        tc: &TileCells,
        span: Range<u64>,
        out: &mut impl FnMut(u64, u64, u64, u64),
    ) -> Option<usize> {
        if span.is_empty() {
            return Some(0);
        }
        let n = self.axes.len();
        let (mut first, mut last) = (vec![0i128; n], vec![0i128; n]);
        tc.coords(span.start, &mut first)?;
        tc.coords(span.end.checked_sub(1)?, &mut last)?;
        let (mut lo, mut hi) = (first.clone(), last.clone());
        let mut differs = None;
        for &d in tc.order().iter().rev() {
            let (l, h) = (lo.get_mut(d)?, hi.get_mut(d)?);
            match differs {
                None if *l == *h => {}
                None => differs = Some(d),
                Some(_) => (*l, *h) = (*tc.corner.get(d)?, *tc.last.get(d)?),
            }
        }
        let volume = (lo.iter().zip(&hi))
            .map(|(l, h)| u64::try_from(h.checked_sub(*l)?.checked_add(1)?).ok())
            .try_fold(1u64, |a, v| a.checked_mul(v?))?;
        let len = span.end.saturating_sub(span.start);
        if let Some(d) = differs.filter(|_| volume > len.saturating_mul(2).saturating_add(64)) {
            // The start of the line after the first's.
            let mut at = first.clone();
            *at.get_mut(d)? = first.get(d)?.checked_add(1)?;
            let mut cut = 0i128;
            for &e in tc.order() {
                if e != d && tc.stride(e)? < tc.stride(d)? {
                    *at.get_mut(e)? = *tc.corner.get(e)?;
                }
                let off = at.get(e)?.checked_sub(*tc.corner.get(e)?)?;
                cut = cut.checked_add(off.checked_mul(tc.stride(e)?)?)?;
            }
            let cut = u64::try_from(cut).ok()?;
            let a = self.tile_places(tc, span.start..cut, out)?;
            let b = self.tile_places(tc, cut..span.end, out)?;
            return Some(a.saturating_add(b));
        }
        // Per dimension, in the result order (fastest first): the
        // coordinates the span's box holds on the axis, each as what it
        // adds to a cell's place and to its position.
        let mut lists: Vec<Vec<(u64, u64)>> = Vec::with_capacity(n);
        let mut place_stride = 1u64;
        for &d in &self.order {
            let axis = self.axes.get(d)?;
            let lo = (*lo.get(d)?).max(*tc.from.get(d)?);
            let hi = (*hi.get(d)?).min(*tc.to.get(d)?);
            let corner = *tc.corner.get(d)?;
            let stride = tc.stride(d)?;
            let mut list = Vec::new();
            for &(rlo, rhi, off) in &axis.ranges {
                for v in rlo.max(lo)..=rhi.min(hi) {
                    let place = off.checked_add(u64::try_from(v.checked_sub(rlo)?).ok()?)?;
                    let pos = v.checked_sub(corner)?.checked_mul(stride)?;
                    list.push((place.checked_mul(place_stride)?, u64::try_from(pos).ok()?));
                }
            }
            if list.is_empty() {
                return Some(0);
            }
            lists.push(list);
            place_stride = place_stride.checked_mul(axis.len)?;
        }
        // An odometer over the slower dimensions, the fastest walked inside
        // in runs whose places step by one and positions by that
        // dimension's stride in the tile (one along the cell order).
        let (inner, outer) = lists.split_first()?;
        let step = u64::try_from(tc.stride(*self.order.first()?)?).ok()?;
        let mut runs: Vec<(u64, u64, u64)> = Vec::new();
        for &(p, q) in inner {
            match runs.last_mut() {
                Some((p0, q0, n))
                    if p0.checked_add(*n) == Some(p)
                        && n.checked_mul(step).and_then(|d| q0.checked_add(d)) == Some(q) =>
                {
                    *n = n.saturating_add(1);
                }
                _ => runs.push((p, q, 1)),
            }
        }
        let mut idx = vec![0usize; outer.len()];
        loop {
            let (mut place, mut pos) = (0u64, 0u64);
            for (list, &i) in outer.iter().zip(&idx) {
                let &(p, q) = list.get(i)?;
                place = place.saturating_add(p);
                pos = pos.saturating_add(q);
            }
            for &(p, q, n) in &runs {
                // The run's cells whose positions lie in the span.
                let from = pos.saturating_add(q);
                let into = |bound: u64| (bound.saturating_sub(from)).div_ceil(step).min(n);
                let (a, b) = (into(span.start), into(span.end));
                if a < b {
                    out(
                        place.saturating_add(p).saturating_add(a),
                        from.saturating_add(a.saturating_mul(step)),
                        b.saturating_sub(a),
                        step,
                    );
                }
            }
            let mut stepped = false;
            for (list, i) in outer.iter().zip(&mut idx) {
                *i = i.saturating_add(1);
                if *i < list.len() {
                    stepped = true;
                    break;
                }
                *i = 0;
            }
            if !stepped {
                return Some(1);
            }
        }
    }

    /// The coordinates of the cell at place `key` into `at`.
    pub fn coords(&self, key: u64, at: &mut [i128]) -> Option<()> {
        let mut rest = key;
        for &d in &self.order {
            let axis = self.axes.get(d)?;
            let off = rest.checked_rem(axis.len)?;
            rest = rest.checked_div(axis.len)?;
            *at.get_mut(d)? = axis.value(off)?;
        }
        (rest == 0).then_some(())
    }

    /// The next cell's place in the box's order, `None` once every one
    /// is out.
    pub fn place(&self) -> Option<u64> {
        (self.place < self.cells).then_some(self.place)
    }

    /// Moves on past `n` cells.
    pub fn advance(&mut self, n: u64) {
        self.place = self.place.saturating_add(n).min(self.cells);
    }

    /// Cells not yet handed out.
    pub fn left(&self) -> u64 {
        self.cells.saturating_sub(self.place)
    }

    /// Dimensions.
    pub fn dims(&self) -> usize {
        self.axes.len()
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

/// A field's values part in a space tile of `cells` cells (a var-size
/// field's offsets, 8 bytes a cell): bytes a cell, and bytes a chunk of it
/// holds as TileDB's writer cuts them.
fn values_chunk(f: &FieldInfo, cells: u64) -> Option<(u64, u64)> {
    let size = match f.is_var() {
        true => 8,
        false => u64::try_from(f.cell_size()).ok()?.max(1),
    };
    let chunk = tdb_tile::fixed_chunk_size(cells.checked_mul(size)?, size).ok()?;
    Some((size, chunk))
}

impl Reader {
    /// Whether this dense read spills (see the module): more than one
    /// dimension, results row- (col-) major over cells that go the other
    /// way, dense fragments alone whose tiles can be sliced, no aggregate
    /// (`with_states`), and a reached tile past the tile budget or lines
    /// whose tiles pass it ([`Reader::lines_read_again`]).
    pub(super) fn dense_spills(&self) -> bool {
        let schema = self.snapshot.schema();
        let dims = schema.domain.dimensions.len();
        // Along the cell order (row-major results of row-major cells,
        // col-major of col-major) or against it; neither in other layouts.
        let along = match self.spec.layout {
            ResultLayout::RowMajor => Some(schema.cell_order == Layout::RowMajor),
            ResultLayout::ColMajor => Some(schema.cell_order == Layout::ColMajor),
            _ => None,
        };
        schema.array_type == ArrayType::Dense
            && dims > 1
            && !self.with_states
            && (self.plans.iter()).all(|p| p.meta.footer.dense)
            && if (self.plans.iter()).all(Self::sliceable) {
                match along {
                    Some(false) => self.tile_past_budget(true) || self.lines_read_again(),
                    Some(true) => self.chunks_read_again(),
                    None => false,
                }
            } else {
                // Tiles held whole (string RLE and dictionary): pieces of
                // a result line passing the tile budget would be cut
                // inside them, each part fetching and decoding them again
                // (600² of RLE strings in four tiles, two fragments,
                // under 1 MiB: 1,719 requests, 170 times the bytes, 70
                // times the time). Runs of them spill, each tile read once.
                along.is_some() && self.lines_pass_budget(1)
            }
    }

    /// Whether pieces of a read along the cell order would decode chunks
    /// again and again: a chunk of a requested field holds several lines
    /// of its tile (along the slowest result dimension), and a piece of a
    /// quarter of them passes the tile budget, so each chunk would be
    /// fetched and decoded more than four times (W2 4096² under 1 and 2
    /// MiB: 64 lines a chunk, pieces of part of a line, 14 times the
    /// unbudgeted read; under 3 MiB, pieces of 51 lines, 1.3 times, and
    /// 0.064 s against 0.109 spilled).
    ///
    /// Not where the chunks one result line crosses (every requested
    /// field's parts in every tile along it, of every fragment) fit the
    /// chunks kept between pieces ([`ChunkCache::LIMIT`]) and pieces of a
    /// line slice every tile they reach: the next pieces along the line,
    /// and the lines after it, find their chunks there, decoded once, and
    /// each walk over a tile's chunks goes on where the last stopped
    /// (`dense_large_tiles` row-major under 16 KiB, a line a tile's 1,024
    /// cells, 192 KiB of chunks: 0.063 s spilled, 0.044 in pieces, the
    /// same 26 requests; W2 4096²'s lines cross 16 tiles' 64 KiB chunks).
    /// A tile too small to slice is fetched and decoded whole again for
    /// every piece that reaches it: those spill.
    fn chunks_read_again(&self) -> bool {
        let Some((tile_cells, line)) = self.tile_lines() else {
            return false;
        };
        if self
            .line_chunks(tile_cells)
            .is_some_and(|b| b <= ChunkCache::LIMIT as u128)
            && self.lines_sliced()
        {
            return false;
        }
        let cells = u64::try_from(tile_cells).unwrap_or(0);
        let lines = (self.requested.iter())
            .filter_map(|&s| self.fields.get(s))
            .filter(|f| !matches!(f.kind, Kind::Dim(_)))
            .filter_map(|f| {
                let (size, chunk) = values_chunk(f, cells)?;
                i128::from(chunk.checked_div(size)?).checked_div(line)
            })
            .max()
            .unwrap_or(0);
        lines / 4 >= 1 && self.lines_pass_budget(lines / 4)
    }

    /// Whether pieces of a line slice every tile the read reaches: each
    /// passes what a piece holds anyway ([`Reader::share_holding`]; a
    /// tile of a chunk a part fits in it, and is held whole).
    fn lines_sliced(&self) -> bool {
        let (_, chunks) = self.piece_least(false);
        let held = self.share_holding(chunks);
        (0..self.plans.len()).all(|i| self.reached_tiles(i).all(|t| self.tile_bytes(i, t) > held))
    }

    /// Bytes of the decoded chunks one result line of the subarray
    /// crosses, at most: per requested field, a chunk of each of its parts
    /// (values or offsets, validity, var-size bytes) in each tile the line
    /// crosses, in each fragment. `None` where the grid cannot say.
    fn line_chunks(&self, tile_cells: i128) -> Option<u128> {
        let schema = self.snapshot.schema();
        let slowest = self.slowest_result_dim();
        let ranges = plan::dense_coords(schema, &self.spec.subarray).ok()?;
        let mut tiles = 1u128;
        for (d, dim) in schema.domain.dimensions.iter().enumerate() {
            if d == slowest {
                continue;
            }
            let (lo, hi) = plan::int_span(ranges.get(d)?)?;
            let span = tdb_index::dense::int_range_of(dim, lo, hi)?;
            let n = tdb_index::dense::dim_tile_count(dim, &span)?;
            tiles = tiles.checked_mul(u128::from(n))?;
        }
        let cells = u64::try_from(tile_cells).ok()?;
        let mut parts = 0u128;
        for f in (self.requested.iter()).filter_map(|&s| self.fields.get(s)) {
            if matches!(f.kind, Kind::Dim(_)) {
                continue;
            }
            parts = parts.checked_add(u128::from(values_chunk(f, cells)?.1))?;
            if f.is_var() {
                parts = parts.checked_add(u128::from(tdb_tile::MAX_TILE_CHUNK_SIZE))?;
            }
            if f.nullable {
                let validity = tdb_tile::fixed_chunk_size(cells, 1).ok()?;
                parts = parts.checked_add(u128::from(validity))?;
            }
        }
        let frags = u128::try_from(self.plans.len()).ok()?;
        parts.checked_mul(tiles)?.checked_mul(frags)
    }

    /// A space tile's cells, and the cells of one of its lines along the
    /// slowest result dimension.
    fn tile_lines(&self) -> Option<(i128, i128)> {
        let slowest = self.slowest_result_dim();
        let extents = self.tile_extents()?;
        let tile = (extents.iter()).try_fold(1i128, |a, &e| a.checked_mul(e))?;
        let line = (extents.iter().enumerate())
            .filter(|&(d, _)| d != slowest)
            .try_fold(1i128, |a, (_, &e)| a.checked_mul(e))?;
        Some((tile, line))
    }

    /// Stretches a piece of one tile's cells hands to the spill at a time.
    const STREAMED_BLOCK: usize = 64;

    /// Bytes `cells` cells of a spilled dense tile (a run of them in its
    /// cell order) cost a piece besides the tile: a [`Stretch`] (24 bytes)
    /// each run of them along the result's fastest dimension, and with a
    /// condition each cell's place, tile and position to evaluate it and
    /// whether it is rejected (17). Along the cell order a stretch is a
    /// line of the tile; across it, a stretch takes one cell of each of
    /// the run's lines, so a run of part of a line is a stretch a cell.
    /// A piece of one tile's cells (`streamed`) without a condition hands
    /// its stretches on a block at a time ([`Self::STREAMED_BLOCK`]).
    pub(super) fn stretch_bookkeeping(&self, cells: u64, streamed: bool) -> u64 {
        if streamed && self.condition.is_none() {
            let block = Self::STREAMED_BLOCK.saturating_mul(std::mem::size_of::<Stretch>());
            return block as u64;
        }
        let stretches = self
            .fastest_stride_and_extent()
            .map_or(cells, |(stride, extent)| {
                let lines = cells
                    .checked_div(stride.saturating_mul(extent))
                    .unwrap_or(0);
                cells.min(stride).saturating_mul(lines.saturating_add(1))
            });
        let per_cell = if self.condition.is_some() { 17 } else { 0 };
        let stretch = std::mem::size_of::<Stretch>() as u64;
        (stretches.saturating_mul(stretch)).saturating_add(cells.saturating_mul(per_cell))
    }

    /// The stride in a space tile's cell order of the result's fastest
    /// dimension, and its extent.
    fn fastest_stride_and_extent(&self) -> Option<(u64, u64)> {
        let schema = self.snapshot.schema();
        let extents = (self.tile_extents()?.into_iter())
            .map(|e| u64::try_from(e).ok())
            .collect::<Option<Vec<u64>>>()?;
        let n = extents.len();
        let fastest = match self.spec.layout {
            ResultLayout::ColMajor => 0,
            _ => n.checked_sub(1)?,
        };
        // Dimensions faster than it in the cell order.
        let faster = match schema.cell_order {
            Layout::ColMajor => 0..fastest,
            _ => fastest.saturating_add(1)..n,
        };
        let stride = (extents.get(faster)?.iter()).try_fold(1u64, |a, &e| a.checked_mul(e))?;
        Some((stride, *extents.get(fastest)?))
    }

    /// A space tile's extent along each dimension.
    fn tile_extents(&self) -> Option<Vec<i128>> {
        (self.snapshot.schema().domain.dimensions.iter())
            .map(|d| tdb_index::dense::origin_and_extent(d).map(|(_, e)| e))
            .collect()
    }

    /// The slowest dimension of the read's result order.
    fn slowest_result_dim(&self) -> usize {
        let n = self.snapshot.schema().domain.dimensions.len();
        match self.spec.layout {
            ResultLayout::ColMajor => n.saturating_sub(1),
            _ => 0,
        }
    }

    /// Whether pieces of a read across the cell order, cut by the
    /// subarray, would read each tile again and again: a piece of a few
    /// result lines (the subarray with its slowest result dimension at a
    /// few values) reaches every tile those lines cross, and the next
    /// piece the same tiles for the next few lines. A piece holding `k`
    /// lines reads a tile `extent / k` times over; spilled, a dense read
    /// costs about three times the unbudgeted one. So spill where a
    /// quarter of a tile's extent along the slowest dimension, as lines
    /// from the start of a tile, pass the tile budget: at every tile
    /// along it, or at 64 spread over them (fragments cover the subarray
    /// unevenly). (A 1024 × 256 array in 64 × 64 tiles read col-major
    /// under 1 MiB: a column's 16 tiles were just past the budget, every
    /// piece half a column reading 8 tiles whole, 4,097 requests and 12×
    /// the unbudgeted read's time. At 2/5 of the extent
    /// `dense_unfiltered_tiles` spilled, 0.012 s, where pieces of 64 of
    /// its 256-column tiles' columns took 0.002.)
    fn lines_read_again(&self) -> bool {
        let schema = self.snapshot.schema();
        let slowest = self.slowest_result_dim();
        (schema.domain.dimensions.get(slowest))
            .and_then(tdb_index::dense::origin_and_extent)
            .is_some_and(|(_, extent)| self.lines_pass_budget(extent / 4))
    }

    /// Whether a piece of `lines` result lines from the start of a tile
    /// along the slowest result dimension passes the tile budget: at every
    /// tile along it, or at 64 spread over them (fragments cover the
    /// subarray unevenly).
    fn lines_pass_budget(&self, lines: i128) -> bool {
        /// Tiles along the slowest dimension probed at most.
        const PROBES: i128 = 64;
        let schema = self.snapshot.schema();
        let slowest = self.slowest_result_dim();
        let Some((origin, extent)) =
            (schema.domain.dimensions.get(slowest)).and_then(tdb_index::dense::origin_and_extent)
        else {
            return false;
        };
        let Some((lo, hi)) = (plan::dense_coords(schema, &self.spec.subarray).ok())
            .and_then(|r| plan::int_span(r.get(slowest)?))
        else {
            return false;
        };
        let tile = |v| tdb_index::dense::tile_of(v, origin, extent);
        let (Some(first), Some(last)) = (tile(lo), tile(hi)) else {
            return false;
        };
        let step = (last.saturating_sub(first) / PROBES).max(1);
        let mut k = first;
        while lines >= 1 && k <= last {
            let start = origin.saturating_add(k.saturating_mul(extent)).max(lo);
            let end = start.saturating_add(lines.saturating_sub(1));
            let piece = super::partition::clip(schema, &self.spec.subarray, slowest, start, end)
                .map(|sub| super::pieces::Piece {
                    sub,
                    ..Default::default()
                });
            if piece.is_some_and(|p| self.estimate(&p) > self.tile_budget()) {
                return true;
            }
            k = k.saturating_add(step);
        }
        false
    }

    /// The subarray's cells, walked in the result order.
    pub(super) fn dense_box(&self) -> Result<DenseBox> {
        let schema = self.snapshot.schema();
        let ranges = plan::dense_coords(schema, &self.spec.subarray)?;
        let types = (schema.domain.dimensions.iter())
            .map(|d| d.datatype)
            .collect();
        let col = self.spec.layout == ResultLayout::ColMajor;
        DenseBox::new(&ranges, col, types)
            .ok_or_else(|| QueryError::invalid("a dense subarray of over 2^64 cells"))
    }

    /// The cells of tile `t` of dense fragment `i` from the first inside
    /// the subarray (and the fragment's non-empty domain) to the last, in
    /// the tile's cell order: the corners of that box are its least and
    /// greatest positions. Empty where the subarray misses the tile;
    /// `None` for a sparse fragment, or where the grid cannot say.
    pub(super) fn dense_span(&self, i: usize, t: u64) -> Option<Range<u64>> {
        let plan = self.plans.get(i).filter(|p| p.meta.footer.dense)?;
        let grid = plan.grid()?;
        let cells = grid.tile_cells(t)?;
        let ranges = plan::dense_coords(&plan.schema, &self.spec.subarray).ok()?;
        let mut lo = Vec::with_capacity(ranges.len());
        let mut hi = Vec::with_capacity(ranges.len());
        for ((rs, &from), &to) in ranges.iter().zip(&cells.from).zip(&cells.to) {
            let (l, h) = plan::int_span(rs)?;
            let (l, h) = (l.max(from), h.min(to));
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

    /// The current piece's cells (a run of one dense fragment's tiles, or
    /// of one tile's cells) inside the subarray, written to `st` as a run
    /// of stretches in place order.
    pub(super) fn spill_dense(&self, st: &mut Stretches) -> Result<()> {
        let Some(i) = self.current.frag else {
            return Ok(());
        };
        let plan = (self.plans.get(i))
            .ok_or_else(|| QueryError::invalid(format!("no fragment {i} planned")))?;
        let grid = plan.grid().ok_or_else(|| {
            QueryError::invalid(format!(
                "dense fragment {}: no tile grid over its non-empty domain",
                plan.file.path
            ))
        })?;
        let bx = self.dense_box()?;
        let frag = u32::try_from(i).map_err(|_| QueryError::invalid("too many fragments"))?;
        let slots: Vec<usize> = st.slots().collect();
        let tiles: Vec<Vec<_>> = (plan.tiles.iter())
            .map(|&t| {
                slots
                    .iter()
                    .map(|&slot| self.tiles.get(&(i, slot, t)))
                    .collect()
            })
            .collect();
        // A piece of one tile's cells without a condition goes to the
        // spill as its stretches come, a block at a time (each block in
        // place order: a walk that comes back before its last place starts
        // a run); else they are gathered, sorted and judged first.
        let streamed = self.current.cells.is_some() && self.condition.is_none();
        let mut found: Vec<Stretch> = Vec::new();
        let mut failed: Option<QueryError> = None;
        // The step of every stretch (a dimension's stride in a tile), once
        // a stretch set it; `odd` if one is too long or steps otherwise.
        let (mut step, mut stepped, mut odd) = (1u64, false, false);
        let mut sorted = 0usize;
        for (k, &t) in plan.tiles.iter().enumerate() {
            let cells = match &self.current.cells {
                Some(c) => c.clone(),
                None => self.dense_span(i, t).unwrap_or(0..0),
            };
            let tc = grid.tile_cells(t).ok_or_else(|| {
                QueryError::invalid(format!("{}: no tile {t} in its grid", plan.file.path))
            })?;
            // A block's cells are held packed: positions in it.
            let (tc, cells) = match &self.current.block {
                Some(b) => match b.cells_in(&tc) {
                    Some(packed) => (packed, 0..b.cells()),
                    None => {
                        return Err(QueryError::invalid(format!(
                            "{}: a block outside tile {t}",
                            plan.file.path
                        )))
                    }
                },
                None => (tc, cells),
            };
            let tile = u32::try_from(k).map_err(|_| QueryError::invalid("too many tiles"))?;
            let mut put = |place: u64, pos, len: u64, by: u64| {
                let Ok(len) = u32::try_from(len).map_err(|_| odd = true) else {
                    return;
                };
                if stepped && by != step {
                    odd = true;
                    return;
                }
                (step, stepped) = (by, true);
                if streamed && failed.is_none() {
                    let back = (found.last())
                        .is_some_and(|l| l.place.saturating_add(u64::from(l.len)) > place);
                    if back || found.len() >= Self::STREAMED_BLOCK {
                        failed = st.push_run(frag, &found, step, &tiles, &[]).err();
                        found.clear();
                    }
                }
                found.push(Stretch {
                    place,
                    pos,
                    len,
                    tile,
                });
            };
            let n = bx.tile_places(&tc, cells, &mut put).ok_or_else(|| {
                QueryError::invalid(format!("{}: tile {t} past its grid", plan.file.path))
            })?;
            sorted = sorted.saturating_add(n);
            if odd {
                return Err(QueryError::invalid(format!(
                    "{}: tile {t}'s stretches past 2^32 cells or of two steps",
                    plan.file.path
                )));
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if sorted > 1 && !streamed {
            found.sort_unstable();
        }
        // Per cell of the stretches in turn, whether the condition rejects
        // it (its record then holds fill).
        let rejected = match &self.condition {
            Some(cond) => {
                let mut cells: Vec<(u64, u32, u32)> = Vec::new();
                for s in &found {
                    for c in 0..u64::from(s.len) {
                        let pos = u32::try_from(s.at(c, step))
                            .map_err(|_| QueryError::invalid("a tile of over 2^32 cells"))?;
                        cells.push((s.place.saturating_add(c), s.tile, pos));
                    }
                }
                self.rejected(cond, i, &plan.tiles, &cells, &bx)?
            }
            None => Vec::new(),
        };
        st.push_run(frag, &found, step, &tiles, &rejected)?;
        tracing::debug!(piece = self.pieces_started, "dense stretches spilled");
        Ok(())
    }

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
        let n = bx.axes.len();
        let mut at = vec![0i128; n];
        let mut coord = Vec::with_capacity(8);
        let mut out = Vec::with_capacity(found.len());
        // Where null tests read (`null_checks`): a dense fragment's cells.
        let shift = self.null_shift();
        let frag_lo = shift.as_ref().and_then(|s| s.frag_lo(self, i));
        for block in found.chunks(BLOCK) {
            let mut fields = Vec::with_capacity(slots.len());
            let mut null_checks = Vec::new();
            for &slot in &slots {
                let f = (self.fields.get(slot))
                    .ok_or_else(|| QueryError::invalid(format!("no field in slot {slot}")))?;
                let mut buf = f.empty_buffer();
                let mut shifted = (shift.as_ref())
                    .filter(|_| f.nullable)
                    .map(|s| (s, Vec::with_capacity(block.len())));
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
                            if let Some((s, v)) = &mut shifted {
                                bx.coords(key, &mut at).ok_or_else(|| {
                                    QueryError::invalid("a cell outside the subarray")
                                })?;
                                let x = at.get(s.step).copied().unwrap_or(0);
                                let read = s.position(frag_lo, u64::from(pos), x);
                                let fill = f.fill_validity;
                                v.push(null_check_validity(
                                    &col,
                                    tile.first,
                                    read,
                                    u64::from(pos),
                                    fill,
                                ));
                            }
                        }
                        None => {
                            buf.push(&f.fill, f.fill_validity != 0);
                            if let Some((_, v)) = &mut shifted {
                                v.push(f.fill_validity);
                            }
                        }
                    }
                }
                if let Some((_, v)) = shifted {
                    null_checks.push((f.name.clone(), v));
                }
                fields.push(buf);
            }
            let batch = Batch {
                num_cells: block.len() as u64,
                fields,
            };
            let mut keep = vec![true; block.len()];
            let columns = NullChecked {
                batch: &batch,
                validity: &null_checks,
            };
            cond.evaluate(&columns, &mut keep)?;
            out.extend(keep.iter().map(|k| !k));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::DenseBox;
    use tdb_format::{ArrayType, Datatype, Layout};
    use tdb_index::dense::FragmentGrid;
    use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder, Range};

    /// Dimensions `r` and `c` from 0 to the first of each pair, in tiles
    /// of the second.
    fn domain(r: (i32, i32), c: (i32, i32)) -> tdb_schema::Domain {
        ArraySchema::builder(ArrayType::Dense)
            .dimension(DimensionBuilder::range("r", 0i32..=r.0).tile_extent(r.1))
            .dimension(DimensionBuilder::range("c", 0i32..=c.0).tile_extent(c.1))
            .attribute(AttributeBuilder::new("a", Datatype::Int32))
            .build()
            .unwrap()
            .domain
    }

    fn range(lo: i32, hi: i32) -> Range {
        Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false)
    }

    /// Over ranges out of order and overlapping, a place's coordinates are
    /// the odometer's (each dimension's ranges in the order given), and a
    /// tile's cells come out as the places that hold them, sorted: the
    /// brute force's answer for spans of every shape, tiles of both cell
    /// orders, cells outside the fragment's non-empty domain left out.
    #[test]
    fn a_tiles_cells_come_out_in_the_order_of_their_places() {
        let ranges = [
            vec![(3, 5), (1, 4), (9, 8), (7, 9)],
            vec![(0, 1), (1, 2), (4, 4)],
        ];
        let values =
            |r: &[(i128, i128)]| -> Vec<i128> { r.iter().flat_map(|&(lo, hi)| lo..=hi).collect() };
        let (rows, cols) = (values(&ranges[0]), values(&ranges[1]));
        let domain = domain((11, 4), (5, 3));
        // The fragment wrote rows 1..=10, columns 0..=4.
        let ned = vec![range(1, 10), range(0, 4)];
        for col in [false, true] {
            let mut bx = DenseBox::new(&ranges, col, vec![Datatype::Int64; 2]).unwrap();
            // The cells in the result order, as TileDB gives them.
            let mut want = Vec::new();
            if col {
                for &c in &cols {
                    for &r in &rows {
                        want.push([r, c]);
                    }
                }
            } else {
                for &r in &rows {
                    for &c in &cols {
                        want.push([r, c]);
                    }
                }
            }
            let mut at = [0i128; 2];
            for (place, cell) in want.iter().enumerate() {
                assert_eq!(bx.place(), Some(place as u64));
                bx.coords(place as u64, &mut at).unwrap();
                assert_eq!(&at, cell, "col {col}");
                bx.advance(1);
            }
            assert_eq!(bx.place(), None);
            for cell_order in [Layout::RowMajor, Layout::ColMajor] {
                let grid = FragmentGrid::new(&domain, Layout::RowMajor, cell_order, &ned).unwrap();
                for t in 0..6 {
                    let tc = grid.tile_cells(t).unwrap();
                    for span in [0..12, 0..1, 2..9, 5..6, 11..12, 4..4, 1..11] {
                        let mut brute = Vec::new();
                        for pos in span.clone() {
                            tc.coords(pos, &mut at).unwrap();
                            if tc.written(&at) {
                                for (p, cell) in want.iter().enumerate() {
                                    if *cell == at {
                                        brute.push((p as u64, pos));
                                    }
                                }
                            }
                        }
                        brute.sort();
                        let mut got = Vec::new();
                        let stretches = bx
                            .tile_places(&tc, span.clone(), &mut |p, q, n, step| {
                                got.extend((0..n).map(|c| (p + c, q + c * step)))
                            })
                            .unwrap();
                        let what = format!("col {col}, {cell_order:?} cells, tile {t}, {span:?}");
                        assert_eq!(stretches, usize::from(!brute.is_empty()), "{what}");
                        assert_eq!(got, brute, "{what}");
                    }
                }
            }
        }
    }

    /// A span of a few cells across the end of one line of a long tile
    /// is walked as two stretches, not over the two lines' box; the cells
    /// are the brute force's all the same.
    #[test]
    fn a_short_span_across_a_long_line_is_cut_there() {
        let domain = domain((3, 4), (99_999, 100_000));
        let ned = vec![range(0, 3), range(0, 99_999)];
        let grid = FragmentGrid::new(&domain, Layout::RowMajor, Layout::RowMajor, &ned).unwrap();
        let tc = grid.tile_cells(0).unwrap();
        let bx = DenseBox::new(
            &[vec![(0, 3)], vec![(0, 99_999)]],
            true,
            vec![Datatype::Int32; 2],
        )
        .unwrap();
        let span = 99_998..100_003;
        let mut got = Vec::new();
        assert_eq!(
            bx.tile_places(&tc, span.clone(), &mut |p, q, n, step| got
                .extend((0..n).map(|c| (p + c, q + c * step)))),
            Some(2)
        );
        got.sort();
        // Col-major places: c × 4 + r.
        let want: Vec<(u64, u64)> = span
            .map(|pos| ((pos % 100_000) * 4 + pos / 100_000, pos))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(got, want);
    }
}

#[cfg(test)]
mod spill_tests {
    use crate::read::dense_blocks::tests::read;
    use crate::{ReadSpec, ResultLayout, Snapshot, Subarray};
    use std::sync::Arc;
    use tdb_format::{ArrayType, Datatype};
    use tdb_fragment::TimeWindow;
    use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder, Range};
    use tdb_storage::ReadableStorage;

    /// Whether `spec`'s read of `snap` spills.
    fn spills<S: ReadableStorage + ?Sized>(
        storage: &S,
        snap: &Arc<Snapshot>,
        spec: ReadSpec,
    ) -> bool {
        read(storage, snap, spec).spilled
    }

    /// Along the cell order, a read whose pieces would hold a part of a
    /// line goes in pieces where the chunks a line crosses fit the chunks
    /// kept between pieces, and spills where they do not: TileDB's
    /// `dense_large_tiles` (a line a tile's 1,024 cells, 192 KiB of
    /// chunks) under 16 and 64 KiB goes in pieces; a line across 16 tiles
    /// of four 64 KiB chunks (1 MiB) spills, a quarter of it does not.
    /// Across the order the large tiles spill all the same.
    #[test]
    fn reads_along_the_order_spill_where_a_lines_chunks_pass_those_kept() {
        let dir = tdb_testdata::root().join("dense_large_tiles").join("array");
        let storage = tdb_storage::LocalStorage::new(&dir);
        let snap = Arc::new(Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap());
        for budget in [16 << 10, 64 << 10] {
            let spec = ReadSpec::new(["a", "f"]).with_budget(budget);
            let row = spec.clone().with_layout(ResultLayout::RowMajor);
            assert!(!spills(&storage, &snap, row), "row-major under {budget}");
            let col = spec.with_layout(ResultLayout::ColMajor);
            assert!(spills(&storage, &snap, col), "col-major under {budget}");
        }

        let schema = ArraySchema::builder(ArrayType::Dense)
            .dimension(DimensionBuilder::range("r", 0i64..=63).tile_extent(64i64))
            .dimension(DimensionBuilder::range("c", 0i64..=16383).tile_extent(1024i64))
            .attribute(AttributeBuilder::new("a", Datatype::Int32))
            .build()
            .unwrap();
        let storage = tdb_storage::MemoryStorage::new();
        let entry = tdb_fragment::create_array(&storage, "arr", &schema, &[], None, 1).unwrap();
        let mut a = crate::FieldBuffer::new("a", Datatype::Int32, 1, false);
        a.data = (0..64 * 16384u32)
            .flat_map(|v| v.wrapping_mul(2_654_435_761).to_le_bytes())
            .collect();
        let spec = crate::WriteSpec::new(vec![a]).at(2);
        crate::write_fragment(&storage, "arr", &entry, None, &spec).unwrap();
        let snap = Arc::new(Snapshot::load(&storage, "arr", TimeWindow::ALL, None).unwrap());
        let range =
            |lo: i64, hi: i64| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
        for (cols, spilled) in [(16383, true), (4095, false)] {
            let mut sub = Subarray::new(2);
            sub.add_range(0, range(0, 63));
            sub.add_range(1, range(0, cols));
            let spec = ReadSpec::new(["a"])
                .with_subarray(sub)
                .with_layout(ResultLayout::RowMajor)
                .with_budget(16 << 10);
            assert_eq!(spills(&storage, &snap, spec), spilled, "columns 0-{cols}");
        }
    }
}
