//! Results as slabs: runs of result cells that come from one tile of one
//! fragment at a fixed cell stride (or are fill), so results are copied a
//! run at a time and nothing is kept per cell.
//!
//! A dense read's slabs come straight from the subarray: it is walked in
//! lines along the result's fastest dimension, each line cut at space-tile
//! boundaries, and each piece cut again where fragments cover it, the
//! newest fragment winning. A sparse read's ordered cells are merged into
//! slabs where they run on in one tile; an unordered read's cells of one
//! tile, where they seldom run on (a condition or a box keeping a cell here
//! and there), are listed in one slab instead of a slab each.

// Coordinates here are i128 values of 64-bit domains and tile positions
// below them: sums and differences of a few cannot overflow, and the
// saturating forms below say so to the no-panic lints.

use super::fields::{FieldInfo, Kind};
use super::plan::{CellRef, FragPlan};
use super::tiles::TileMap;
use crate::{QueryError, Result, ResultLayout};
use std::collections::HashMap;
use tdb_format::Layout;
use tdb_index::dense::int_value;
use tdb_index::dense::{origin_and_extent, tile_of, FragmentGrid};
use tdb_schema::{ArraySchema, NDRange};

/// Cells `cell, cell + stride, ...` (`len` of them) of tile `tile` of
/// fragment `frag`, or `len` fill cells; or, with stride [`Slab::LISTED`],
/// the cells its results list at `picks[cell..cell + len]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slab {
    pub frag: u32,
    pub tile: u64,
    pub cell: u64,
    pub stride: u64,
    pub len: u64,
}

impl Slab {
    const FILL: u32 = u32::MAX;
    /// The stride of a slab whose cells are listed in its results' `picks`
    /// (positions among its tile's held cells): a slab costs 40 bytes, a
    /// listed cell 4.
    pub const LISTED: u64 = 0;

    pub fn fill(len: u64) -> Self {
        Slab {
            frag: Self::FILL,
            tile: 0,
            cell: 0,
            stride: 1,
            len,
        }
    }

    pub fn is_fill(&self) -> bool {
        self.frag == Self::FILL
    }

    pub fn is_listed(&self) -> bool {
        self.stride == Self::LISTED
    }

    /// Cells `from..from + len` of this slab.
    pub fn part(&self, from: u64, len: u64) -> Slab {
        // (A listed slab's cells follow each other in its list.)
        let step = if self.is_listed() { 1 } else { self.stride };
        Slab {
            cell: self.cell.saturating_add(from.saturating_mul(step)),
            len,
            ..*self
        }
    }

    /// The tile positions of this slab's cells, in order (a listed slab's
    /// from its results' `picks`).
    pub fn cells<'p>(&self, picks: &'p [u32]) -> impl Iterator<Item = usize> + 'p {
        let (cell, stride) = (self.cell, self.stride);
        let (listed, strided) = match self.is_listed() {
            true => (self.listed(picks), 0),
            false => (&[][..], self.len),
        };
        (listed.iter().map(|&c| c as usize)).chain(
            (0..strided).map(move |j| cell.saturating_add(j.saturating_mul(stride)) as usize),
        )
    }

    /// A listed slab's cells in `picks` (none where they fall outside).
    pub fn listed<'p>(&self, picks: &'p [u32]) -> &'p [u32] {
        let from = usize::try_from(self.cell).unwrap_or(usize::MAX);
        let to = usize::try_from(self.len).map_or(usize::MAX, |n| from.saturating_add(n));
        picks.get(from..to).unwrap_or_default()
    }

    /// The tile's cells this slab spans, as a half-open range (a strided
    /// slab's: only dense results, which list none, ask).
    pub fn cell_span(&self) -> (u64, u64) {
        let last = (self.len.saturating_sub(1)).saturating_mul(self.stride);
        (self.cell, self.cell.saturating_add(last).saturating_add(1))
    }
}

/// A read's results: slabs in result order; for dense reads, each slab's
/// first cell's coordinates (`dims` values per slab), the next cells
/// stepping by one along `step_dim`.
#[derive(Debug, Default)]
pub(crate) struct Results {
    pub slabs: Vec<Slab>,
    /// The cells of listed slabs (see [`Slab::LISTED`]).
    pub picks: Vec<u32>,
    pub coords: Vec<i128>,
    pub dims: usize,
    pub step_dim: usize,
}

impl Results {
    /// Sparse results: cells merged into slabs where they run on.
    pub fn from_cells(cells: &[CellRef]) -> Self {
        let mut slabs: Vec<Slab> = Vec::new();
        for r in cells {
            if let Some(last) = slabs.last_mut() {
                if last.frag == r.frag
                    && last.tile == r.tile
                    && last.cell.saturating_add(last.len) == u64::from(r.cell)
                {
                    last.len = last.len.saturating_add(1);
                    continue;
                }
            }
            slabs.push(Slab {
                frag: r.frag,
                tile: r.tile,
                cell: u64::from(r.cell),
                stride: 1,
                len: 1,
            });
        }
        Results {
            slabs,
            ..Results::default()
        }
    }

    /// Per tile (fragment, tile) the results use, the cells they use as
    /// sorted, disjoint half-open ranges in the tile's cell order.
    pub fn needed_cells(&self) -> HashMap<(usize, u64), Vec<(u64, u64)>> {
        let mut needed: HashMap<(usize, u64), Vec<(u64, u64)>> = HashMap::new();
        for r in self.slabs.iter().filter(|r| !r.is_fill()) {
            needed
                .entry((r.frag as usize, r.tile))
                .or_default()
                .push(r.cell_span());
        }
        for spans in needed.values_mut() {
            spans.sort_unstable();
            let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
            for &(c0, c1) in spans.iter() {
                match ranges.last_mut() {
                    Some((_, e)) if *e >= c0 => *e = (*e).max(c1),
                    _ => ranges.push((c0, c1)),
                }
            }
            *spans = ranges;
        }
        needed
    }

    /// The coordinates of slab `k`'s first cell (dense reads).
    pub fn first_coords(&self, k: usize) -> &[i128] {
        let at = k.saturating_mul(self.dims);
        (self.coords)
            .get(at..at.saturating_add(self.dims))
            .unwrap_or(&[])
    }
}

/// A dense fragment as the slab planner sees it: its index among the
/// read's fragments, its tile grid and its non-empty domain.
pub(crate) struct DenseFrag {
    pub index: u32,
    pub grid: FragmentGrid,
    pub bounds: Vec<(i128, i128)>,
}

impl DenseFrag {
    /// Fragment `index` with non-empty domain `ned`, written with
    /// `domain`, tiles and cells in `schema`'s orders.
    pub fn new(
        index: u32,
        schema: &ArraySchema,
        domain: &tdb_schema::Domain,
        ned: &NDRange,
    ) -> Option<Self> {
        let grid = FragmentGrid::new(domain, schema.tile_order, schema.cell_order, ned)?;
        Some(DenseFrag {
            index,
            bounds: grid.bounds().collect(),
            grid,
        })
    }
}

/// The slabs of a dense read of `ranges` (per dimension, as integers, in
/// the order given) in `layout`; `frags` oldest first.
pub(crate) fn dense_results(
    schema: &ArraySchema,
    frags: &[DenseFrag],
    ranges: &[Vec<(i128, i128)>],
    layout: ResultLayout,
) -> Result<Results> {
    let dims = &schema.domain.dimensions;
    let n = dims.len();
    let grid: Vec<(i128, i128)> = dims
        .iter()
        .map(|d| {
            origin_and_extent(d).ok_or_else(|| QueryError::Subarray {
                dim: d.name.clone(),
                reason: "a dense dimension without an integer domain and extent".into(),
            })
        })
        .collect::<Result<_>>()?;
    let global = matches!(layout, ResultLayout::GlobalOrder | ResultLayout::Unordered);
    let step_dim = step_dim(schema, layout);
    let col = step_dim == 0 && n > 1;
    // Cells per step along `step_dim` inside a tile (its cell order; at
    // least 1: a stride of 0 marks a listed slab).
    let stride: u64 = {
        let faster = if schema.cell_order == Layout::ColMajor {
            grid.get(..step_dim)
        } else {
            grid.get(step_dim.saturating_add(1)..)
        };
        (faster.unwrap_or_default().iter())
            .map(|&(_, extent)| u64::try_from(extent).unwrap_or(u64::MAX))
            .fold(1u64, u64::saturating_mul)
            .max(1)
    };
    let mut planner = Planner {
        frags,
        grid: &grid,
        step_dim,
        stride,
        out: Results {
            dims: n,
            step_dim,
            ..Results::default()
        },
        uncovered: Vec::new(),
        pieces: Vec::new(),
        coords: vec![0; n],
    };
    // Lines: every combination of the other dimensions' coordinates, in
    // the order results take them; each line a list of runs along
    // `step_dim`.
    let others: Vec<usize> = if col {
        (1..n).rev().collect()
    } else {
        (0..n.saturating_sub(1)).collect()
    };
    let given = |d: usize| ranges.get(d).map_or(&[][..], Vec::as_slice);
    if !global {
        let lists: Vec<Vec<i128>> = others.iter().map(|&d| flatten(given(d))).collect();
        let runs = given(step_dim);
        odometer(&lists, |values| {
            for (&d, &v) in others.iter().zip(values) {
                planner.set(d, v);
            }
            for &(lo, hi) in runs {
                planner.run(lo, hi)?;
            }
            Ok(())
        })?;
        return Ok(planner.out);
    }
    // Global order: space tiles in tile order, then each tile's cells in
    // cell order. Per dimension, its coordinates sorted and grouped by tile.
    let tile_col = schema.tile_order == Layout::ColMajor;
    let sorted: Vec<Vec<i128>> = ranges
        .iter()
        .map(|r| {
            let mut v = flatten(r);
            v.sort();
            v
        })
        .collect();
    let groups: Vec<Vec<(usize, usize)>> = sorted
        .iter()
        .zip(&grid)
        .map(|(v, &(lo, extent))| {
            // Runs of values in one tile, as index ranges into `v`.
            let mut g: Vec<(usize, usize)> = Vec::new();
            let mut start = 0usize;
            for run in v.chunk_by(|&a, &b| tile_of(a, lo, extent) == tile_of(b, lo, extent)) {
                let end = start.saturating_add(run.len());
                g.push((start, end));
                start = end;
            }
            g
        })
        .collect();
    // Tile tuples in tile order: odometer over group indices.
    let tile_dims: Vec<usize> = if tile_col {
        (0..n).rev().collect()
    } else {
        (0..n).collect()
    };
    let group_idx: Vec<Vec<i128>> = tile_dims
        .iter()
        .map(|&d| (0..groups.get(d).map_or(0, Vec::len) as i128).collect())
        .collect();
    // Dimension `d`'s sorted values in `span`.
    let values = |d: usize, span: &[(usize, usize)]| -> &[i128] {
        let (Some(v), Some(&(a, b))) = (sorted.get(d), span.get(d)) else {
            return &[];
        };
        v.get(a..b).unwrap_or_default()
    };
    odometer(&group_idx, |gi| {
        let mut span = vec![(0usize, 0usize); n];
        for (&d, &g) in tile_dims.iter().zip(gi) {
            let group = groups.get(d).and_then(|g_d| g_d.get(g as usize));
            if let (Some(s), Some(&group)) = (span.get_mut(d), group) {
                *s = group;
            }
        }
        // The other dimensions' values in this tile, each once with its
        // count: a value given twice is a cell given twice, and the copies
        // of a cell sit next to each other in cell order.
        let mut counted: Vec<Vec<(i128, u64)>> = Vec::with_capacity(others.len());
        for &d in &others {
            let c: Vec<(i128, u64)> = (values(d, &span).chunk_by(|a, b| a == b))
                .filter_map(|same| Some((*same.first()?, same.len() as u64)))
                .collect();
            counted.push(c);
        }
        let index_lists: Vec<Vec<i128>> = counted
            .iter()
            .map(|c| (0..c.len() as i128).collect())
            .collect();
        let line = values(step_dim, &span);
        odometer(&index_lists, |idx| {
            let mut copies = 1u64;
            for ((&d, &i), c) in others.iter().zip(idx).zip(&counted) {
                let Some(&(v, k)) = c.get(i as usize) else {
                    continue;
                };
                planner.set(d, v);
                copies = copies.saturating_mul(k);
            }
            if copies > 1 {
                for &v in line {
                    for _ in 0..copies {
                        planner.run(v, v)?;
                    }
                }
                return Ok(());
            }
            // Runs of consecutive values (a repeated value starts a run).
            for run in line.chunk_by(|&a, &b| a.checked_add(1) == Some(b)) {
                if let (Some(&lo), Some(&hi)) = (run.first(), run.last()) {
                    planner.run(lo, hi)?;
                }
            }
            Ok(())
        })
    })?;
    Ok(planner.out)
}

/// The dimension results step along: the result layout's fastest, or in
/// global order the cell order's fastest.
fn step_dim(schema: &ArraySchema, layout: ResultLayout) -> usize {
    let col = match layout {
        ResultLayout::GlobalOrder | ResultLayout::Unordered => {
            schema.cell_order == Layout::ColMajor
        }
        _ => layout == ResultLayout::ColMajor,
    };
    if col {
        0
    } else {
        schema.domain.dimensions.len().saturating_sub(1)
    }
}

/// At most how many slabs a dense read of `ranges` makes with `frags`
/// dense fragments: per line, its pieces along the step dimension (cut at
/// tile boundaries), each cut at most `2 × frags + 1` ways by fragments;
/// never more than its cells.
pub(crate) fn slab_bound(
    schema: &ArraySchema,
    ranges: &[Vec<(i128, i128)>],
    layout: ResultLayout,
    frags: u64,
) -> Option<u64> {
    let s = step_dim(schema, layout);
    let count = |r: &[(i128, i128)]| -> Option<u64> {
        r.iter()
            .map(|&(lo, hi)| u64::try_from(hi.checked_sub(lo)?.checked_add(1)?).ok())
            .try_fold(0u64, |a, n| a.checked_add(n?))
    };
    let mut lines = 1u64;
    let mut cells = 1u64;
    for (d, r) in ranges.iter().enumerate() {
        let n = count(r)?;
        cells = cells.checked_mul(n)?;
        if d != s {
            lines = lines.checked_mul(n)?;
        }
    }
    let (origin, extent) = origin_and_extent(schema.domain.dimensions.get(s)?)?;
    let pieces = ranges.get(s)?.iter().try_fold(0u64, |a, &(lo, hi)| {
        let tiles = tile_of(hi, origin, extent)?
            .checked_sub(tile_of(lo, origin, extent)?)?
            .checked_add(1)?;
        a.checked_add(u64::try_from(tiles).ok()?)
    })?;
    let per_line = pieces.checked_mul(frags.saturating_mul(2).saturating_add(1))?;
    Some(lines.saturating_mul(per_line).min(cells))
}

/// Every value of `ranges` in order.
fn flatten(ranges: &[(i128, i128)]) -> Vec<i128> {
    ranges.iter().flat_map(|&(lo, hi)| lo..=hi).collect()
}

/// Calls `f` with every combination of one value per list, the last list
/// fastest; once with no values when there are no lists.
fn odometer(lists: &[Vec<i128>], mut f: impl FnMut(&[i128]) -> Result<()>) -> Result<()> {
    let Some(mut values) = (lists.iter())
        .map(|l| l.first().copied())
        .collect::<Option<Vec<i128>>>()
    else {
        // A list without values: no combination.
        return Ok(());
    };
    let mut idx = vec![0usize; lists.len()];
    loop {
        f(&values)?;
        // The last list steps; one that runs out starts again and the one
        // before it steps; the first running out ends.
        let mut stepped = false;
        for ((list, i), v) in lists.iter().zip(&mut idx).zip(&mut values).rev() {
            *i = i.saturating_add(1);
            if let Some(&x) = list.get(*i) {
                *v = x;
                stepped = true;
                break;
            }
            *i = 0;
            *v = list.first().copied().unwrap_or_default();
        }
        if !stepped {
            return Ok(());
        }
    }
}

struct Planner<'a> {
    frags: &'a [DenseFrag],
    grid: &'a [(i128, i128)],
    step_dim: usize,
    stride: u64,
    out: Results,
    /// Reused per run: parts no fragment covers yet, and the pieces found.
    uncovered: Vec<(i128, i128)>,
    pieces: Vec<(i128, i128, Option<usize>)>,
    /// The current line's coordinates (`step_dim` set per piece).
    coords: Vec<i128>,
}

impl Planner<'_> {
    /// Sets the current line's coordinate along `d`.
    fn set(&mut self, d: usize, v: i128) {
        if let Some(c) = self.coords.get_mut(d) {
            *c = v;
        }
    }

    /// The slabs of values `lo..=hi` along the step dimension on the
    /// current line: cut at tile boundaries, then by fragment coverage.
    fn run(&mut self, lo: i128, hi: i128) -> Result<()> {
        let (origin, extent) = (self.grid.get(self.step_dim))
            .copied()
            .ok_or_else(|| QueryError::invalid("no step dimension"))?;
        let mut a = lo;
        while a <= hi {
            let next_tile = (tile_of(a, origin, extent))
                .ok_or_else(|| QueryError::invalid("a dense tile past the integer range"))?
                .saturating_add(1);
            let tile_end = next_tile
                .saturating_mul(extent)
                .saturating_add(origin)
                .saturating_sub(1);
            let b = hi.min(tile_end);
            self.piece(a, b)?;
            let Some(next) = b.checked_add(1) else {
                break;
            };
            a = next;
        }
        Ok(())
    }

    /// Values `a..=b` of one tile along the step dimension.
    fn piece(&mut self, a: i128, b: i128) -> Result<()> {
        let s = self.step_dim;
        self.uncovered.clear();
        self.uncovered.push((a, b));
        self.pieces.clear();
        for (fi, f) in self.frags.iter().enumerate().rev() {
            if self.uncovered.is_empty() {
                break;
            }
            let on_line = (f.bounds.iter().zip(&self.coords).enumerate())
                .all(|(d, (&(lo, hi), &c))| d == s || (lo <= c && c <= hi));
            let Some(&(n0, n1)) = f.bounds.get(s).filter(|_| on_line) else {
                continue;
            };
            let mut k = 0;
            while let Some(&(u0, u1)) = self.uncovered.get(k) {
                let (c0, c1) = (u0.max(n0), u1.min(n1));
                if c0 > c1 {
                    k = k.saturating_add(1);
                    continue;
                }
                self.pieces.push((c0, c1, Some(fi)));
                self.uncovered.swap_remove(k);
                if u0 < c0 {
                    self.uncovered.push((u0, c0.saturating_sub(1)));
                }
                if c1 < u1 {
                    self.uncovered.push((c1.saturating_add(1), u1));
                }
            }
        }
        self.pieces
            .extend(self.uncovered.iter().map(|&(u0, u1)| (u0, u1, None)));
        self.pieces.sort_unstable_by_key(|p| p.0);
        for k in 0..self.pieces.len() {
            let Some(&(p0, p1, frag)) = self.pieces.get(k) else {
                break;
            };
            let len = u64::try_from(p1.saturating_sub(p0).saturating_add(1)).unwrap_or(0);
            self.set(s, p0);
            let slab = match frag {
                None => Slab::fill(len),
                Some(fi) => {
                    let f = (self.frags.get(fi))
                        .ok_or_else(|| QueryError::invalid("a dense piece of no fragment"))?;
                    let (tile, cell) = f
                        .grid
                        .position(&self.coords)
                        .ok_or_else(|| QueryError::invalid("a dense cell outside its fragment"))?;
                    Slab {
                        frag: f.index,
                        tile,
                        cell,
                        stride: self.stride,
                        len,
                    }
                }
            };
            self.out.slabs.push(slab);
            self.out.coords.extend_from_slice(&self.coords);
        }
        Ok(())
    }
}

/// A dense read's results with the cells of its sparse fragments laid
/// over them, one cell at a time (only such reads pay per cell): `old`'s
/// slabs cut around each cell a sparse fragment of `plans` holds.
pub(crate) fn overlay_sparse(
    schema: &ArraySchema,
    plans: &[FragPlan],
    fields: &[FieldInfo],
    tiles: &TileMap,
    old: Results,
) -> Results {
    let dims = schema.domain.dimensions.len();
    let dim_slots: Vec<Option<usize>> = (0..dims)
        .map(|d| fields.iter().position(|f| f.kind == Kind::Dim(d)))
        .collect();
    let mut sparse_maps: Vec<Option<HashMap<Vec<i128>, CellRef>>> = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
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
                for (dim, slot) in schema.domain.dimensions.iter().zip(&dim_slots) {
                    let dt = dim.datatype;
                    let v = slot
                        .and_then(|s| tiles.get(&(i, s, t)))
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

    let step = old.step_dim;
    let mut out = Results {
        dims: old.dims,
        step_dim: step,
        ..Results::default()
    };
    // Appends slab `from..` (`len` cells) of a slab whose first cell is at
    // `first`: its first cell steps `from` along `step`.
    let push_part = |out: &mut Results, slab: &Slab, first: &[i128], from: u64, len: u64| {
        out.slabs.push(slab.part(from, len));
        let at = out.coords.len().saturating_add(step);
        out.coords.extend_from_slice(first);
        if let Some(c) = out.coords.get_mut(at) {
            *c = c.saturating_add(i128::from(from));
        }
    };
    let mut key = Vec::with_capacity(dims);
    for (k, slab) in old.slabs.iter().enumerate() {
        let first = old.first_coords(k);
        let mut from = 0;
        for j in 0..slab.len {
            key.clear();
            key.extend_from_slice(first);
            if let Some(c) = key.get_mut(step) {
                *c = c.saturating_add(i128::from(j));
            }
            let hit = sparse_maps
                .iter()
                .rev()
                .find_map(|m| m.as_ref().and_then(|m| m.get(&key[..]).copied()));
            let Some(h) = hit else { continue };
            if j > from {
                push_part(&mut out, slab, first, from, j.saturating_sub(from));
            }
            out.slabs.push(Slab {
                frag: h.frag,
                tile: h.tile,
                cell: u64::from(h.cell),
                stride: 1,
                len: 1,
            });
            out.coords.extend_from_slice(&key);
            from = j.saturating_add(1);
        }
        if slab.len > from {
            push_part(&mut out, slab, first, from, slab.len.saturating_sub(from));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_format::{ArrayType, Datatype};
    use tdb_schema::{Attribute, Dimension, Range};

    fn schema(tile_order: Layout, cell_order: Layout) -> ArraySchema {
        ArraySchema::builder(ArrayType::Dense)
            .dimension(
                Dimension::builder("r", Datatype::Int32)
                    .domain(1i32, 10)
                    .tile_extent(3i32),
            )
            .dimension(
                Dimension::builder("c", Datatype::Int32)
                    .domain(1i32, 12)
                    .tile_extent(4i32),
            )
            .attribute(Attribute::builder("a", Datatype::Int32))
            .tile_order(tile_order)
            .cell_order(cell_order)
            .build()
            .unwrap()
    }

    fn ned(r: (i32, i32), c: (i32, i32)) -> NDRange {
        let range =
            |(lo, hi): (i32, i32)| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
        vec![range(r), range(c)]
    }

    /// Per result cell: (coordinates, fragment or none, tile, cell).
    type Cell = (Vec<i128>, Option<u32>, u64, u64);

    fn expand(res: &Results) -> Vec<Cell> {
        let mut out = Vec::new();
        for (k, s) in res.slabs.iter().enumerate() {
            for j in 0..s.len {
                let mut c = res.first_coords(k).to_vec();
                c[res.step_dim] += i128::from(j);
                let p = s.part(j, 1);
                out.push(if s.is_fill() {
                    (c, None, 0, 0)
                } else {
                    (c, Some(s.frag), p.tile, p.cell)
                });
            }
        }
        out
    }

    /// What each result cell must be, cell by cell: the result grid in the
    /// layout's order (global: sorted by tile, then cell, in the schema's
    /// orders), each cell from the newest fragment holding it.
    fn brute(
        schema: &ArraySchema,
        neds: &[NDRange],
        ranges: &[Vec<(i128, i128)>],
        layout: ResultLayout,
    ) -> Vec<Cell> {
        let lists: Vec<Vec<i128>> = ranges.iter().map(|r| flatten(r)).collect();
        let mut grid = Vec::new();
        for &a in &lists[0] {
            for &b in &lists[1] {
                grid.push(vec![a, b]);
            }
        }
        if layout == ResultLayout::ColMajor {
            grid.clear();
            for &b in &lists[1] {
                for &a in &lists[0] {
                    grid.push(vec![a, b]);
                }
            }
        }
        if layout == ResultLayout::GlobalOrder {
            grid.sort_by_key(|c| {
                let t = [(c[0] - 1).div_euclid(3), (c[1] - 1).div_euclid(4)];
                let t = if schema.tile_order == Layout::ColMajor {
                    [t[1], t[0]]
                } else {
                    t
                };
                let p = if schema.cell_order == Layout::ColMajor {
                    [c[1], c[0]]
                } else {
                    [c[0], c[1]]
                };
                (t, p)
            });
        }
        grid.into_iter()
            .map(|c| {
                let hit = neds.iter().enumerate().rev().find_map(|(i, ned)| {
                    let (t, cell) = tdb_index::dense::cell_position(
                        &schema.domain,
                        schema.tile_order,
                        schema.cell_order,
                        ned,
                        &c,
                    )?;
                    Some((i as u32, t, cell))
                });
                match hit {
                    Some((f, t, cell)) => (c, Some(f), t, cell),
                    None => (c, None, 0, 0),
                }
            })
            .collect()
    }

    /// Slabs expand to exactly the cells a cell-by-cell walk gives, for
    /// every layout and tile/cell order, multi-range subarrays and three
    /// overlapping fragments that leave some cells unwritten; and a
    /// row-major read of row-major cells copies whole runs.
    #[test]
    fn slabs_expand_to_the_cell_by_cell_answer() {
        let neds = [
            ned((1, 9), (1, 12)),
            ned((2, 6), (3, 9)),
            ned((5, 8), (1, 4)),
        ];
        let subarrays: [Vec<Vec<(i128, i128)>>; 3] = [
            vec![vec![(1, 10)], vec![(1, 12)]],
            vec![vec![(1, 3), (5, 9)], vec![(2, 11)]],
            vec![vec![(4, 4), (2, 7)], vec![(1, 2), (6, 12), (7, 8)]],
        ];
        for tile_order in [Layout::RowMajor, Layout::ColMajor] {
            for cell_order in [Layout::RowMajor, Layout::ColMajor] {
                let s = schema(tile_order, cell_order);
                let frags: Vec<DenseFrag> = neds
                    .iter()
                    .enumerate()
                    .map(|(i, n)| DenseFrag::new(i as u32, &s, &s.domain, n).unwrap())
                    .collect();
                for ranges in &subarrays {
                    for layout in [
                        ResultLayout::RowMajor,
                        ResultLayout::ColMajor,
                        ResultLayout::GlobalOrder,
                    ] {
                        let ctx = format!("{tile_order:?}/{cell_order:?} {ranges:?} {layout:?}");
                        let res = dense_results(&s, &frags, ranges, layout).unwrap();
                        assert_eq!(expand(&res), brute(&s, &neds, ranges, layout), "{ctx}");
                        let bound = slab_bound(&s, ranges, layout, frags.len() as u64).unwrap();
                        assert!(res.slabs.len() as u64 <= bound, "{ctx}");
                    }
                }
            }
        }
        // Row-major cells read row-major: a whole row of a tile is one slab.
        let s = schema(Layout::RowMajor, Layout::RowMajor);
        let n = ned((1, 10), (1, 12));
        let one = [DenseFrag::new(0, &s, &s.domain, &n).unwrap()];
        let res = dense_results(
            &s,
            &one,
            &[vec![(1, 10)], vec![(1, 12)]],
            ResultLayout::RowMajor,
        )
        .unwrap();
        assert_eq!(res.slabs.len(), 10 * 3);
        assert!(res.slabs.iter().all(|s| s.len == 4 && s.stride == 1));
    }
}
