//! The sparse scan: once a piece's tiles are decoded, which cells of them
//! are results (inside the piece and the window, not deleted, the newest
//! of each coordinate unless duplicates are allowed, passing the
//! condition), in which order.

use super::dense::{Results, Slab};
use super::fields::{FieldInfo, Kind};
use super::plan::{
    mbr_within, mbr_within_union, CellRef, FragPlan, DELETE_TS_SLOT, TIMESTAMPS_SLOT,
};
use super::spill::{RunFormat, RunWriter};
use super::tiles::{Checked, FastHash, TileMap};
use super::whole_tiles::{merges_fragments, MdFound, Pending};
use crate::column::{Column, Columns};
use crate::condition::{BoundCondition, BoundDelete};
use crate::{QueryError, Result, ResultLayout, Subarray};
use std::cmp::Ordering;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use tdb_format::Layout;
use tdb_index::order::{cmp_coord_bytes, sort_cells, CellOrder};
use tdb_index::RangeOps;
use tdb_schema::{ArraySchema, Range};

/// The columns of one tile of one fragment, by field name. Fields the
/// fragment lacks have none: conditions and deletes take them as TileDB's
/// sparse readers do (see `condition::eval`), not as fill values.
pub(crate) struct TileColumns<'a> {
    pub cols: HashMap<&'a str, Column<'a>>,
    pub n: usize,
}

impl Columns for TileColumns<'_> {
    fn column(&self, field: &str) -> Option<Column<'_>> {
        self.cols.get(field).copied()
    }
    fn cell_num(&self) -> usize {
        self.n
    }
}

/// The columns of tile `t` of fragment `fi` (`n` cells): its decoded tiles.
fn tile_columns<'a>(
    fields: &'a [FieldInfo],
    tiles: &'a TileMap,
    fi: usize,
    t: u64,
    n: usize,
) -> TileColumns<'a> {
    let cols = fields
        .iter()
        .enumerate()
        .filter_map(|(s, f)| {
            let tile = tiles.get(&(fi, s, t))?;
            Some((f.name.as_str(), tile.column(f.datatype, f.cell_val_num)))
        })
        .collect();
    TileColumns { cols, n }
}

/// What one sparse read checks each candidate tile's cells against.
struct TileCheck<'r> {
    schema: &'r ArraySchema,
    plans: &'r [FragPlan],
    fields: &'r [FieldInfo],
    tiles: &'r TileMap,
    checked: &'r Checked,
    ops: &'r [RangeOps],
    subarray: &'r Subarray,
    window: (u64, u64),
    deletes: &'r [BoundDelete],
    condition: Option<&'r BoundCondition>,
    dim_slots: &'r [usize],
    parts: Option<PartsRule<'r>>,
    held: Option<&'r HeldPart>,
}

/// The cells of one tile a piece holds, where it holds part of it: the
/// fragment, the tile, and the cells (a run of tiles that spills may be
/// one tile's cells, decoded by the chunks holding them).
pub(crate) type HeldPart = (usize, u64, std::ops::Range<u64>);

/// The cells of tile `t` of fragment `fi` (of `plan`) held: the first, and
/// how many.
fn held_cells(held: Option<&HeldPart>, plan: &FragPlan, fi: usize, t: u64) -> (u64, u64) {
    match held {
        Some((f, tile, cells)) if *f == fi && *tile == t => {
            (cells.start, cells.end.saturating_sub(cells.start))
        }
        _ => (0, plan.cells(t, plan.tile_num())),
    }
}

/// Which cells of a tile a read keeps, by their position among its held
/// cells: runs of adjacent cells `(first, count)`, or, where the runs are
/// short (a condition or a box keeping a cell here and there), each cell.
#[derive(Debug, PartialEq)]
enum Kept {
    Runs(Vec<(u32, u32)>),
    Listed(Vec<u32>),
}

impl Kept {
    /// Kept cells running on for fewer than this many cells on average are
    /// listed (4 bytes a cell, and one slab for the tile) rather than each
    /// run a slab (40 bytes): a condition keeping one cell in ten took half
    /// as long again as the whole read, cell by cell.
    const LIST_BELOW: usize = 10;

    /// The cells `mask` sets (it has at most 2^32 cells).
    fn of(mask: &[bool]) -> Kept {
        let count = mask.iter().filter(|&&m| m).count();
        if count == mask.len() {
            return Kept::Runs(match count {
                0 => Vec::new(),
                n => vec![(0, n as u32)],
            });
        }
        let starts = (mask.iter().zip(mask.iter().skip(1)))
            .filter(|&(&a, &b)| !a && b)
            .count()
            .saturating_add(usize::from(mask.first() == Some(&true)));
        if count < starts.saturating_mul(Self::LIST_BELOW) {
            // Every position written, the next slot taken only past a kept
            // one: no branch a cell for the processor to guess (the runs'
            // were most of the cost).
            let mut cells = vec![0u32; count.saturating_add(1)];
            let mut k = 0usize;
            for (i, &m) in mask.iter().enumerate() {
                if let Some(c) = cells.get_mut(k) {
                    *c = i as u32;
                }
                k = k.saturating_add(usize::from(m));
            }
            cells.truncate(count);
            return Kept::Listed(cells);
        }
        let mut runs = Vec::with_capacity(starts);
        let mut start = 0usize;
        for run in mask.chunk_by(|a, b| a == b) {
            if run.first() == Some(&true) {
                runs.push((start as u32, run.len() as u32));
            }
            start = start.saturating_add(run.len());
        }
        Kept::Runs(runs)
    }

    /// How many cells it keeps.
    fn len(&self) -> usize {
        match self {
            Kept::Runs(r) => (r.iter()).fold(0usize, |n, &(_, l)| n.saturating_add(l as usize)),
            Kept::Listed(l) => l.len(),
        }
    }

    /// The kept cells, in order.
    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let (runs, listed) = match self {
            Kept::Runs(r) => (&r[..], &[][..]),
            Kept::Listed(l) => (&[][..], &l[..]),
        };
        (runs.iter())
            .flat_map(|&(s, l)| s..s.saturating_add(l))
            .chain(listed.iter().copied())
    }
}

/// The cells of one tile a sparse read keeps, with per-cell timestamps
/// each kept cell's, and where duplicates are not allowed whether each
/// kept cell is deleted; where a part's first cell decided
/// (`tiledb_string_parts`), how many ranges of that dimension each kept
/// cell counts as in.
struct KeptCells {
    cells: Kept,
    stamps: Option<Vec<u64>>,
    deleted: Option<Vec<bool>>,
    range_hits: Option<Vec<u32>>,
}

impl TileCheck<'_> {
    /// Tile `t` of fragment `fi`: its cells inside the subarray and the
    /// window, and with duplicates not deleted and passing the condition.
    /// Without duplicates deletes apply after deduplication, as TileDB's
    /// readers apply them: a deleted cell still hides the older versions
    /// of its coordinates, so its deletion is returned, not applied.
    fn kept(&self, fi: usize, t: u64) -> Result<KeptCells> {
        let (fields, tiles) = (self.fields, self.tiles);
        let plan = (self.plans.get(fi))
            .ok_or_else(|| QueryError::invalid(format!("no fragment {fi} planned")))?;
        // (Runs count from the first cell held.)
        let (_, n) = held_cells(self.held, plan, fi, t);
        // Kept cells are indexed in 32 bits (`CellRef::cell`, the runs).
        if n > u64::from(u32::MAX) {
            return Err(QueryError::invalid(format!(
                "fragment {}: tile {t} holds {n} cells, more than a sparse read indexes (2^32)",
                plan.file.path
            )));
        }
        let n = n as usize;
        let frag_ts = plan.cell_stamp();
        let tc = tile_columns(fields, tiles, fi, t, n);
        // Dimensions the tile's decoding checked, its cells already
        // checked along them (`tiles::TileBound`).
        let (checked_dims, mut mask) = match self.checked.get(&(fi, t)) {
            Some((dims, mask)) if mask.len() == n => (dims.as_slice(), mask.clone()),
            _ => (&[][..], vec![true; n]),
        };
        // Per cell, how many ranges of `parts_dim` TileDB found it in when
        // a part's first cell decided for it (`u32::MAX`: its own value
        // decides); see `tiledb_string_parts`.
        let mut stand_in: Option<Vec<u32>> = None;
        // Subarray: per cell only in tiles it holds in part.
        let inside = plan
            .leaves()
            .get(t as usize)
            .is_some_and(|mbr| mbr_within(self.ops, mbr, self.subarray));
        for (d, o) in self.ops.iter().enumerate().filter(|_| !inside) {
            // The rule's dimension is tested against the query's ranges
            // (the piece's share of its values is applied after).
            let rule = self.parts.filter(|p| p.dim == d);
            // Any other dimension along which the tile lies inside the
            // piece keeps every cell (its coordinates may not be read:
            // `Reader::plan_piece`); one the decoding checked is done.
            if rule.is_none()
                && (checked_dims.contains(&d)
                    || plan.tile_within_dim(self.ops, self.subarray, t, d))
            {
                continue;
            }
            let r = rule.map_or(self.subarray.ranges(d), |p| p.given);
            if r.is_empty() {
                continue;
            }
            let name = self.dim_slots.get(d).and_then(|&s| fields.get(s));
            let Some(col) = name.and_then(|f| tc.column(&f.name)) else {
                continue;
            };
            if !o.retain_within(r, col.fixed, &mut mask) {
                let parts = match rule {
                    Some(p) => tiledb_string_parts(n, p.shares),
                    None => Vec::new(),
                };
                // A part whose ends agree: its first cell decides for all.
                for part in parts {
                    let first = col.cell(part.start);
                    if !strncmp_equal(first, col.cell(part.end.saturating_sub(1))) {
                        continue;
                    }
                    let count = r.iter().filter(|r| o.contains(r, first)).count();
                    let hits = stand_in.get_or_insert_with(|| vec![u32::MAX; n]);
                    let (Some(m), Some(h)) = (mask.get_mut(part.clone()), hits.get_mut(part))
                    else {
                        continue;
                    };
                    for (m, h) in m.iter_mut().zip(h) {
                        *m &= count > 0;
                        *h = count as u32;
                    }
                }
                // Every other cell by its own value. (A part's first cell
                // decides along the rule's dimension only: TileDB tests
                // every other dimension cell by cell.)
                let decided = |i: usize| {
                    rule.is_some()
                        && (stand_in.as_ref())
                            .is_some_and(|h| h.get(i).is_some_and(|&h| h != u32::MAX))
                };
                for (i, m) in mask.iter_mut().enumerate() {
                    if *m && !decided(i) {
                        let v = col.cell(i);
                        *m = r.iter().any(|r| o.contains(r, v));
                    }
                }
            }
            // Each cell kept in the piece that owns its own value.
            if let Some(share) = rule.and_then(|p| p.share) {
                for (i, m) in mask.iter_mut().enumerate() {
                    *m = *m && share.holds(o, col.cell(i));
                }
            }
        }
        // Per-cell timestamps.
        let ts: Option<Vec<u64>> = plan.timestamps.as_ref().and_then(|_| {
            tiles
                .get(&(fi, TIMESTAMPS_SLOT, t))
                .map(|tile| tdb_format::le::u64_values(&tile.fixed).collect())
        });
        if let Some(ts) = &ts {
            for (i, m) in mask.iter_mut().enumerate() {
                let x = ts.get(i).copied().unwrap_or(frag_ts);
                if x < self.window.0 || x > self.window.1 {
                    *m = false;
                }
            }
        }
        // Which cells a delete took; none asked for where nothing deletes.
        let deletes = plan.delete_timestamps.is_some() || !self.deletes.is_empty();
        let mut deleted = if deletes { vec![false; n] } else { Vec::new() };
        // Consolidated delete metadata: the time each cell was deleted
        // (`u64::MAX`: never).
        if plan.delete_timestamps.is_some() {
            if let Some(tile) = tiles.get(&(fi, DELETE_TS_SLOT, t)) {
                for (i, d) in tdb_format::le::u64_values(&tile.fixed).enumerate() {
                    if d <= self.window.1 && d != u64::MAX {
                        if let Some(g) = deleted.get_mut(i) {
                            *g = true;
                        }
                    }
                }
            }
        }
        // Delete commits.
        let cell_ts = |i: usize| {
            ts.as_ref()
                .and_then(|v| v.get(i).copied())
                .unwrap_or(frag_ts)
        };
        for delete in self.deletes {
            for (g, gone) in deleted.iter_mut().zip(delete.removes(&tc, cell_ts)?) {
                *g |= gone;
            }
        }
        if self.schema.allows_dups {
            // (`deleted` is empty where nothing deletes.)
            for (m, g) in mask.iter_mut().zip(&deleted) {
                *m &= !g;
            }
            if let Some(c) = self.condition {
                c.evaluate(&tc, &mut mask)?;
            }
        }
        let cells = Kept::of(&mask);
        let kept = || cells.iter().map(|i| i as usize);
        let stamps = ts.map(|ts| {
            kept()
                .map(|i| ts.get(i).copied().unwrap_or(frag_ts))
                .collect()
        });
        let deleted = (!self.schema.allows_dups && deleted.contains(&true))
            .then(|| kept().map(|i| deleted.get(i) == Some(&true)).collect());
        let range_hits = stand_in.map(|h| {
            kept()
                .map(|i| h.get(i).copied().unwrap_or(u32::MAX))
                .collect()
        });
        Ok(KeptCells {
            cells,
            stamps,
            deleted,
            range_hits,
        })
    }
}

/// The dimension whose string ranges a read tests as TileDB 2.30 does
/// (see [`tiledb_string_parts`]): the one a sparse tile's cell order sorts
/// first (row-major cells: the first, col-major: the last), if it is a
/// string dimension of an array of several and the query gives it ranges.
/// (With one dimension a tile is sorted and the rule changes nothing.)
pub(crate) fn parts_dim(schema: &ArraySchema, query: &Subarray) -> Option<usize> {
    let dims = &schema.domain.dimensions;
    let d = match schema.cell_order {
        _ if dims.len() < 2 => return None,
        Layout::RowMajor => 0,
        Layout::ColMajor => dims.len().checked_sub(1)?,
        _ => return None,
    };
    (dims.get(d)?.is_var() && !query.ranges(d).is_empty()).then_some(d)
}

/// TileDB's string-parts rule in one piece of a read: the dimension, the
/// ranges the query gives it, and the share of its values the piece owns
/// where pieces were cut along it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PartsRule<'a> {
    pub dim: usize,
    pub given: &'a [Range],
    pub share: Option<&'a Share>,
    /// The shares TileDB's threads split each tile's cells into before
    /// cutting each into six parts (see [`tiledb_string_parts`]).
    pub shares: usize,
}

/// The shares of a tile's cells TileDB 2.30 tests string ranges in, one a
/// thread: its global-order and unordered readers (TileDB's index readers),
/// given fewer result tiles than compute threads (`threads`: its
/// `sm.compute_concurrency_level`, by default the machine's cores), split
/// each tile among `1 + (threads - 1) / tiles` threads
/// (`SparseIndexReaderBase::compute_tile_bitmaps`); one otherwise, and in
/// its row- and col-major reads. So TileDB's answers under the rule depend
/// on the machine's cores, as tdb's do: a read of one tile on two cores
/// tests it in two halves of six parts each (`rand_21803`).
pub(crate) fn tiledb_range_shares(index_reader: bool, tiles: usize, threads: usize) -> usize {
    if index_reader && tiles > 0 && tiles < threads {
        threads
            .saturating_sub(1)
            .checked_div(tiles)
            .map_or(1, |s| s.saturating_add(1))
    } else {
        1
    }
}

/// The values along the parts dimension one piece owns, `(above, upto]`
/// (unbounded where `None`), once pieces are cut along it. The rule keeps
/// cells outside the query's ranges, which no piece's clipped ranges hold,
/// and a part's verdict comes from the query's ranges, not the piece's: so
/// every piece decides by the query's ranges, and returns the cells whose
/// own value it owns. Cuts share out the whole line of values, so each
/// cell is returned once, as by the read in one piece.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Share {
    pub dim: usize,
    above: Option<Vec<u8>>,
    upto: Option<Vec<u8>>,
}

impl Share {
    /// Every value of dimension `dim`.
    pub(crate) fn whole(dim: usize) -> Share {
        Share {
            dim,
            above: None,
            upto: None,
        }
    }

    /// Whether the piece owns value `v`.
    pub(crate) fn holds(&self, o: &RangeOps, v: &[u8]) -> bool {
        (self.above.as_deref()).is_none_or(|a| o.cmp_values(v, a).is_gt())
            && (self.upto.as_deref()).is_none_or(|u| o.cmp_values(v, u).is_le())
    }

    /// Whether the piece owns a value in `[lo, hi]` (a tile's MBR bounds).
    pub(crate) fn meets(&self, o: &RangeOps, lo: &[u8], hi: &[u8]) -> bool {
        (self.above.as_deref()).is_none_or(|a| o.cmp_values(hi, a).is_gt())
            && (self.upto.as_deref()).is_none_or(|u| o.cmp_values(lo, u).is_le())
    }

    /// The share cut after `at`: the values up to it, and those above.
    pub(crate) fn cut_after(&self, at: &[u8]) -> (Share, Share) {
        let low = Share {
            upto: Some(at.to_vec()),
            ..self.clone()
        };
        let high = Share {
            above: Some(at.to_vec()),
            ..self.clone()
        };
        (low, high)
    }
}

/// The parts in which TileDB 2.30 tests a tile's `n` cells against the
/// string ranges of the dimension its cell order sorts first:
/// a tile of at least 12 cells is cut into six parts (the last takes the
/// remainder), and a part whose first and last strings are equal takes
/// the first's verdict for all its cells
/// (`ResultTile::compute_results_sparse<char>` and its counting twin).
/// That assumes the dimension sorted across the tile, true within one
/// space tile; a data tile spanning several keeps or drops the cells
/// between on the first's verdict, inside the ranges or not. TileDB's
/// answers are the reference, so tdb decides as TileDB does: the whole
/// tile in six parts, or where TileDB's threads split it first (global
/// order and unordered over fewer tiles than threads), each of `shares`
/// in six ([`tiledb_range_shares`]). None for a share smaller than 12
/// cells: each cell on its own.
fn tiledb_string_parts(n: usize, shares: usize) -> Vec<std::ops::Range<usize>> {
    const PARTS: usize = 6;
    let shares = shares.clamp(1, n.max(1));
    // Share `i` starts at the ceiling of i * n / shares (shares <= n).
    let start = |i: usize| {
        let m = (i as u128).saturating_mul(n as u128);
        usize::try_from(m.div_ceil(shares as u128)).unwrap_or(n)
    };
    let mut parts = Vec::new();
    for i in 0..shares {
        let (lo, hi) = (start(i), start(i.saturating_add(1)).min(n));
        let size = hi.saturating_sub(lo) / PARTS;
        if size < 2 {
            continue;
        }
        parts.extend((0..PARTS).map(|p| {
            let a = lo.saturating_add(p.saturating_mul(size));
            // The last takes the remainder.
            let b = if p == PARTS - 1 {
                hi
            } else {
                a.saturating_add(size)
            };
            a..b
        }));
    }
    parts
}

/// Equal as TileDB finds two strings equal there: the same length, and
/// `strncmp` (which stops at a NUL) finding no difference.
fn strncmp_equal(a: &[u8], b: &[u8]) -> bool {
    fn upto_nul(s: &[u8]) -> &[u8] {
        s.split(|&c| c == 0).next().unwrap_or(s)
    }
    a.len() == b.len() && upto_nul(a) == upto_nul(b)
}

/// One sparse read of a piece's decoded tiles: what
/// [`SparseScan::cells`] (the piece's results) and [`SparseScan::spill`]
/// (a sorted run of them, for a merge) check cells against.
pub(crate) struct SparseScan<'r> {
    pub schema: &'r ArraySchema,
    pub plans: &'r [FragPlan],
    pub fields: &'r [FieldInfo],
    pub tiles: &'r TileMap,
    pub checked: &'r Checked,
    pub ops: &'r [RangeOps],
    pub subarray: &'r Subarray,
    pub window: (u64, u64),
    pub deletes: &'r [BoundDelete],
    pub condition: Option<&'r BoundCondition>,
    pub layout: ResultLayout,
    pub parts: Option<PartsRule<'r>>,
    pub held: Option<&'r HeldPart>,
    /// Whether an aggregation answers tile `t` of fragment `fi` from its
    /// metadata should the read keep every cell of it (the reader's
    /// `md_kept`): [`SparseScan::cells`] then leaves its cells out and
    /// lists it.
    pub whole: Option<&'r dyn Fn(usize, u64) -> bool>,
    /// What earlier pieces found of such tiles that they held part of.
    pub pending: Option<&'r HashMap<(usize, u64), Pending, FastHash>>,
    /// The tile whose cells ended the last piece's merge: it goes on at
    /// the start of this one's, or the cells before are another's.
    pub open: Option<(usize, u64)>,
}

/// The cells the tile checks kept, in tile order: where each is, its
/// timestamp, whether a delete took it (duplicates not allowed: applied
/// after deduplication) and, where the parts rule decided, in how many
/// ranges it counts (`u32::MAX`: by its own value; empty where no tile
/// had such cells).
struct Candidates {
    refs: Vec<CellRef>,
    stamps: Vec<u64>,
    gone: Vec<bool>,
    hits: Vec<u32>,
}

impl SparseScan<'_> {
    /// The slot of each dimension's field.
    fn dim_slots(&self) -> Result<Vec<usize>> {
        (0..self.schema.domain.dimensions.len())
            .map(|d| {
                self.fields
                    .iter()
                    .position(|f| f.kind == Kind::Dim(d))
                    .ok_or_else(|| QueryError::invalid("coordinates not read"))
            })
            .collect()
    }

    /// Each candidate tile's kept cells: the subarray, the window, deletes
    /// and (with duplicates) the condition, checked on the pool.
    fn check_tiles(&self, dim_slots: &[usize]) -> Result<Vec<((usize, u64), KeptCells)>> {
        let plans = self.plans;
        let jobs: Vec<(usize, u64)> = plans
            .iter()
            .enumerate()
            .flat_map(|(fi, plan)| plan.tiles.iter().map(move |&t| (fi, t)))
            .collect();
        let check = TileCheck {
            schema: self.schema,
            plans,
            fields: self.fields,
            tiles: self.tiles,
            checked: self.checked,
            ops: self.ops,
            subarray: self.subarray,
            window: self.window,
            deletes: self.deletes,
            condition: self.condition,
            dim_slots,
            parts: self.parts,
            held: self.held,
        };
        // Few candidate cells are checked on the calling thread (see
        // `pool::SMALL_WORK`; a cell's check reads a few bytes of each field).
        let cells = (jobs.iter())
            .filter_map(|&(fi, t)| Some(held_cells(self.held, plans.get(fi)?, fi, t).1))
            .fold(0u64, u64::saturating_add);
        let threads = match cells.saturating_mul(64) < crate::pool::SMALL_WORK as u64 {
            true => 1,
            false => crate::threads(),
        };
        let kept = crate::pool::map_all(&jobs, threads, || (), |_, &(fi, t)| check.kept(fi, t))?;
        Ok(jobs.into_iter().zip(kept).collect())
    }

    /// The kept cells one record each, in tile order.
    fn candidates(&self, kept: Vec<((usize, u64), KeptCells)>) -> Candidates {
        // (Sized at once: grown cell by cell, they were 1% of a read
        // spilled in pieces of a few hundred cells.)
        let n = (kept.iter()).fold(0usize, |n, (_, k)| n.saturating_add(k.cells.len()));
        let mut c = Candidates {
            refs: Vec::with_capacity(n),
            stamps: Vec::with_capacity(n),
            gone: Vec::with_capacity(n),
            hits: Vec::new(),
        };
        for ((fi, t), kept) in kept {
            let frag_ts = self.plans.get(fi).map_or(0, FragPlan::cell_stamp);
            let first = (self.plans.get(fi)).map_or(0, |p| held_cells(self.held, p, fi, t).0);
            // Kept cells of the tile, in order (`KeptCells` lists them so).
            let mut at = 0usize;
            for k in kept.cells.iter() {
                // (Cell numbers count from the tile's first.)
                let cell = u32::try_from(first).unwrap_or(u32::MAX).saturating_add(k);
                if let Some(h) = &kept.range_hits {
                    c.hits.resize(c.refs.len(), u32::MAX);
                    c.hits.push(h.get(at).copied().unwrap_or(u32::MAX));
                }
                c.refs.push(CellRef {
                    frag: fi as u32,
                    cell,
                    tile: t,
                });
                let stamp = kept.stamps.as_ref().and_then(|s| s.get(at).copied());
                c.stamps.push(stamp.unwrap_or(frag_ts));
                c.gone.push(
                    kept.deleted
                        .as_ref()
                        .is_some_and(|d| d.get(at) == Some(&true)),
                );
                at = at.saturating_add(1);
            }
        }
        c
    }

    /// Coordinates of every candidate, `n` a candidate, looked up once:
    /// comparisons index this table rather than the tile map. Candidates
    /// come tile by tile: each tile's columns are looked up once.
    fn coordinates(&self, refs: &[CellRef], dim_slots: &[usize]) -> Result<Vec<&[u8]>> {
        let n = dim_slots.len();
        let mut table: Vec<&[u8]> = Vec::with_capacity(refs.len().saturating_mul(n));
        let mut cols: Vec<(Column<'_>, u64)> = Vec::with_capacity(n);
        let mut current = None;
        for r in refs {
            if current != Some((r.frag, r.tile)) {
                current = Some((r.frag, r.tile));
                cols.clear();
                for &slot in dim_slots {
                    let missing = || QueryError::invalid("coordinates not decoded");
                    let f = self.fields.get(slot).ok_or_else(missing)?;
                    let tile =
                        (self.tiles.get(&(r.frag as usize, slot, r.tile))).ok_or_else(missing)?;
                    cols.push((tile.column(f.datatype, f.cell_val_num), tile.first));
                }
            }
            let at = |first: u64| u64::from(r.cell).saturating_sub(first) as usize;
            table.extend(cols.iter().map(|(c, first)| c.cell(at(*first))));
        }
        Ok(table)
    }

    /// The order results come in: `None` for unordered reads.
    fn order_kind(&self) -> Option<CellOrder> {
        result_order(self.schema, self.layout)
    }

    /// Whether the result is the merge of the fragments' cells as stored
    /// ([`merge_as_stored`]): a global-order read over a fragment stored in
    /// an order TileDB no longer sorts by.
    fn merges_as_stored(&self) -> bool {
        self.layout == ResultLayout::GlobalOrder
            && (self.plans.iter())
                .any(|p| stored_out_of_order(self.schema, p.file.format_version()))
    }

    /// The piece's candidate cells as one sorted run (see `spill`): every
    /// version of each coordinate, with whether a delete took it and (no
    /// duplicates) whether the condition rejects it, for the merge to
    /// decide which stands. With duplicates, deletes and the condition
    /// apply here, as [`SparseScan::cells`] applies them.
    pub(crate) fn spill(&self, fmt: &RunFormat, out: &mut RunWriter) -> Result<()> {
        let kind = spill_order(self.schema, self.layout);
        let dim_slots = self.dim_slots()?;
        let kept = self.check_tiles(&dim_slots)?;
        let Candidates {
            refs, stamps, gone, ..
        } = self.candidates(kept);
        let table = self.coordinates(&refs, &dim_slots)?;
        let n = dim_slots.len();
        let at = |i: usize, d: usize| coordinate(&table, n, i, d);
        let mut rejected = Vec::new();
        if let (Some(c), false) = (self.condition, self.schema.allows_dups) {
            let all: Vec<usize> = (0..refs.len()).collect();
            rejected = vec![true; refs.len()];
            for i in self.filter_by_condition(c, &all, &refs)? {
                if let Some(r) = rejected.get_mut(i) {
                    *r = false;
                }
            }
        }
        let mut order: Vec<usize> = (0..refs.len()).collect();
        let layout = self.layout;
        sort_cells(
            &mut order,
            &self.schema.domain,
            self.ops,
            kind,
            at,
            |a, b| match (refs.get(a), refs.get(b)) {
                (Some(x), Some(y)) => result_tie(layout, x, y),
                _ => a.cmp(&b),
            },
            crate::threads(),
        );
        if self.merges_as_stored() {
            merge_as_stored(&mut order, &refs);
        }
        // Each tile's columns looked up once, not a map lookup a cell and
        // field: per candidate, the index of its tile's in `tiles`.
        let slots: Vec<usize> = fmt.slots().collect();
        let mut tiles: Vec<Vec<Option<(Column<'_>, usize)>>> = Vec::new();
        let mut tile_of: Vec<usize> = Vec::with_capacity(refs.len());
        let mut last = None;
        for r in &refs {
            if last != Some((r.frag, r.tile)) {
                last = Some((r.frag, r.tile));
                let cols = (slots.iter())
                    .map(|&slot| {
                        let f = (self.fields.get(slot)).ok_or_else(|| {
                            QueryError::invalid(format!("no field in slot {slot}"))
                        })?;
                        // A fragment without the field gives its fill value.
                        Ok(
                            (self.tiles.get(&(r.frag as usize, slot, r.tile))).map(|tile| {
                                let col = tile.column(f.datatype, f.cell_val_num);
                                (col, tile.first as usize)
                            }),
                        )
                    })
                    .collect::<Result<_>>()?;
                tiles.push(cols);
            }
            tile_of.push(tiles.len().saturating_sub(1));
        }
        let mut values: Vec<(&[u8], bool)> = Vec::with_capacity(slots.len());
        for i in order {
            let Some(&r) = refs.get(i) else { continue };
            let cols = (tile_of.get(i).and_then(|&t| tiles.get(t)))
                .ok_or_else(|| QueryError::invalid("a candidate without its tile"))?;
            values.clear();
            for (col, &slot) in cols.iter().zip(&slots) {
                let v = match col {
                    Some((col, first)) => {
                        let c = (r.cell as usize).saturating_sub(*first);
                        (col.cell(c), !col.is_null(c))
                    }
                    None => match self.fields.get(slot) {
                        Some(f) => (f.fill.as_slice(), f.fill_validity != 0),
                        None => (&[][..], false),
                    },
                };
                values.push(v);
            }
            let flags = (gone.get(i) == Some(&true), rejected.get(i) == Some(&true));
            let stamp = stamps.get(i).copied().unwrap_or(0);
            out.push(fmt, r, stamp, flags, &values)?;
        }
        Ok(())
    }

    /// Whether an aggregation answers tile `t` of fragment `fi` from its
    /// metadata should the read keep every cell of it ([`SparseScan::whole`]).
    fn candidate(&self, fi: usize, t: u64) -> bool {
        self.whole.is_some_and(|whole| whole(fi, t))
    }

    /// The cells of tile `t` of fragment `fi`, all of them.
    fn tile_cells(&self, fi: usize, t: u64) -> u64 {
        (self.plans.get(fi)).map_or(u64::MAX, |p| p.cells(t, p.tile_num()))
    }

    /// Whether the piece holds every cell of tile `t` of fragment `fi`
    /// the read may keep (its MBR within the piece): no other piece adds
    /// to what this one found of it.
    fn holds_tile(&self, fi: usize, t: u64) -> bool {
        self.held.is_none()
            && (self.plans.get(fi))
                .and_then(|p| p.leaves().get(usize::try_from(t).ok()?))
                .is_some_and(|mbr| mbr_within_union(self.ops, mbr, self.subarray))
    }

    /// The tiles TileDB's global-order reader merges whole and keeps every
    /// cell of (`survivors`: the candidates left after deduplication,
    /// deletes and the condition), answered; the shares of those the piece
    /// holds part of. `merged` is every candidate in the global order,
    /// equal coordinates newest first. The merge takes a tile's cells in
    /// one slab up to the next fragment's next cell, exclusive, so the tile
    /// is whole unless another fragment's candidate (kept or not) falls
    /// after its first cell and up to its last (ties included), or a newer
    /// one equals its first (which wins it). Over several fragments,
    /// pieces are intervals of that merge, in its order
    /// (`Reader::cut_layout`): a tile going on from the last piece must
    /// start this one's merge, one going on into the next must end it
    /// (`open`).
    fn merged_whole<'t>(
        &self,
        survivors: &[usize],
        refs: &[CellRef],
        merged: &[usize],
        at: &(impl Fn(usize, usize) -> &'t [u8] + Sync),
    ) -> MdFound {
        let key = |r: &CellRef| (r.frag as usize, r.tile);
        // Candidates come tile by tile (`candidates`): each one's tile as
        // a place in `tiles`, counted in vectors, not maps (hashing every
        // candidate twice was a sixth of an aggregation's time).
        let mut tiles: Vec<(usize, u64)> = Vec::new();
        let slot: Vec<usize> = (refs.iter())
            .map(|r| {
                if tiles.last() != Some(&key(r)) {
                    tiles.push(key(r));
                }
                tiles.len().saturating_sub(1)
            })
            .collect();
        let mut kept = vec![0u64; tiles.len()];
        for &i in survivors {
            if let Some(k) = slot.get(i).and_then(|&s| kept.get_mut(s)) {
                *k = k.saturating_add(1);
            }
        }
        let n = self.schema.domain.dimensions.len();
        let same = |a: usize, b: usize| cmp_coord_bytes(n, at, a, b).is_eq();
        // Each tile's first and last place in the merge, and its cells.
        let mut span: Vec<Option<(usize, usize, u64)>> = vec![None; tiles.len()];
        for (p, &i) in merged.iter().enumerate() {
            if let Some(e) = slot.get(i).and_then(|&s| span.get_mut(s)) {
                let e = e.get_or_insert((p, p, 0));
                e.1 = p;
                e.2 = e.2.saturating_add(1);
            }
        }
        let mut found = MdFound::default();
        let first_tile = merged.first().and_then(|&i| refs.get(i)).map(key);
        let last_at = merged.len().saturating_sub(1);
        match self.open {
            // Nothing here: the open tile may go on in the next piece.
            Some(open) if merged.is_empty() => found.open = Some(open),
            Some(open) if first_tile != Some(open) => {
                let cut = Pending {
                    ok: false,
                    ..Pending::NONE
                };
                found.parts.push((open, cut));
            }
            _ => {}
        }
        for ((&tile, span), &k) in tiles.iter().zip(&span).zip(&kept) {
            let Some((first, last, seen)) = *span else {
                continue;
            };
            if !self.candidate(tile.0, tile.1) {
                continue;
            }
            let (Some(&c0), Some(&cn)) = (merged.get(first), merged.get(last)) else {
                continue;
            };
            let before = (self.pending.and_then(|p| p.get(&tile)))
                .copied()
                .unwrap_or(Pending::NONE);
            let cells = self.tile_cells(tile.0, tile.1);
            let starts = before.seen == 0;
            let ends = before.seen.saturating_add(seen) >= cells;
            let ours = |i: usize| refs.get(i).is_some_and(|r| key(r) == tile);
            // A newer cell equal to its first comes before it.
            let fair_start = match starts {
                true => {
                    first == 0
                        || merged
                            .get(first.wrapping_sub(1))
                            .is_none_or(|&i| !same(i, c0))
                }
                false => first == 0 && self.open == Some(tile),
            };
            // Between first and last only the tile's cells, and older ones
            // equal to its first; after its last none equal to it (unless
            // the last is the first).
            let inside = (merged.get(first..=last).unwrap_or_default().iter())
                .all(|&i| ours(i) || (starts && same(i, c0)));
            let fair_end = match ends {
                true => {
                    let after = merged
                        .get(last.saturating_add(1))
                        .is_some_and(|&i| same(i, cn));
                    !after || (starts && same(c0, cn))
                }
                false => last == last_at,
            };
            // One fragment's tiles never meet in the merge: pieces of any
            // shape may hold its parts.
            let alone = !merges_fragments(self.plans);
            let ok = self.held.is_none() && (alone || (fair_start && inside && fair_end));
            if (starts && ends) || self.holds_tile(tile.0, tile.1) {
                if ok && k == cells {
                    found.answered.push(tile);
                }
                continue;
            }
            if !ends && last == last_at && !alone {
                found.open = Some(tile);
            }
            let share = Pending { seen, kept: k, ok };
            found.parts.push((tile, share));
        }
        found
    }

    /// The sparse result: cells of candidate tiles inside the subarray and
    /// the window, not deleted, deduplicated (newest wins) unless the schema
    /// allows duplicates, passing the condition, in `layout` order; and
    /// the tiles answered from their metadata instead (`whole`), left out.
    pub(crate) fn cells(&self) -> Result<(Results, MdFound)> {
        let (schema, layout, ops, subarray, parts) = (
            self.schema,
            self.layout,
            self.ops,
            self.subarray,
            self.parts,
        );
        let dims = &schema.domain.dimensions;
        let dim_slots = self.dim_slots()?;
        let mut kept = self.check_tiles(&dim_slots)?;
        let mut md = MdFound::default();
        if self.whole.is_some() && schema.allows_dups {
            // (Without duplicates a cell may yet lose to a newer version, or
            // fail the condition: below, once they are applied.) With
            // duplicates nothing cuts a tile: it is whole where every cell
            // of it is kept, in this piece or, held in part, in several.
            kept.retain(|((fi, t), k)| {
                let n = k.cells.len() as u64;
                if n == 0 || !self.candidate(*fi, *t) {
                    return true;
                }
                if self.held.is_none() && n == self.tile_cells(*fi, *t) {
                    md.answered.push((*fi, *t));
                    return false;
                }
                if self.holds_tile(*fi, *t) {
                    return true;
                }
                let share = Pending {
                    seen: n,
                    kept: n,
                    ok: self.held.is_none(),
                };
                md.parts.push(((*fi, *t), share));
                true
            });
        }
        // Unordered reads with duplicates keep cells in the order found:
        // each tile's kept cells go straight into slabs, no per-cell record,
        // listed in one slab where they seldom run on (they cost less so).
        if schema.allows_dups && layout == ResultLayout::Unordered {
            let mut out = Results::default();
            for ((fi, t), kept) in kept {
                let runs = match kept.cells {
                    Kept::Runs(runs) => runs,
                    Kept::Listed(cells) => {
                        out.slabs.push(Slab {
                            frag: fi as u32,
                            tile: t,
                            cell: out.picks.len() as u64,
                            stride: Slab::LISTED,
                            len: cells.len() as u64,
                        });
                        out.picks.extend_from_slice(&cells);
                        continue;
                    }
                };
                let first = (self.plans.get(fi)).map_or(0, |p| held_cells(self.held, p, fi, t).0);
                for (start, len) in runs {
                    out.slabs.push(Slab {
                        frag: fi as u32,
                        tile: t,
                        cell: first.saturating_add(u64::from(start)),
                        stride: 1,
                        len: u64::from(len),
                    });
                }
            }
            return Ok((out, md));
        }
        let Candidates {
            refs,
            stamps,
            gone,
            hits,
        } = self.candidates(kept);
        let table = self.coordinates(&refs, &dim_slots)?;
        let n = dims.len();
        // Candidate `i`'s coordinate along `d` (every candidate has `n`).
        let at = |i: usize, d: usize| coordinate(&table, n, i, d);
        // Candidates' records, by index (every index below `refs.len()`).
        let stamp = |i: usize| stamps.get(i).copied().unwrap_or(0);
        let frag = |i: usize| refs.get(i).map_or(0, |r| r.frag);
        let mut order: Vec<usize> = (0..refs.len()).collect();
        // Every candidate in TileDB's merge order, where tiles may answer
        // from their metadata (`merged_whole`).
        let mut merged = None;
        // The order the cells are in once deduplicated.
        let mut sorted = None;
        if !schema.allows_dups {
            // Newest wins per coordinate: sort by coordinates, newest first.
            // A coordinate is its bytes, as TileDB compares them when it
            // deduplicates (`memcmp`): -0.0 and 0.0 are two cells, though they
            // sort as equal values. Any order by coordinates serves: the
            // result's, unless the merge's (the global order) is wanted.
            let by_bytes = |a: usize, b: usize| cmp_coord_bytes(n, &at, a, b);
            let global = CellOrder::Global {
                tile_order: schema.tile_order,
                cell_order: schema.cell_order,
            };
            let merge = self.whole.is_some();
            let kind = match self.order_kind() {
                _ if merge => global,
                Some(kind) => kind,
                None => CellOrder::RowMajor,
            };
            let newest_first = |a: usize, b: usize| {
                by_bytes(a, b)
                    .then_with(|| stamp(b).cmp(&stamp(a)))
                    .then_with(|| frag(b).cmp(&frag(a)))
            };
            sort_cells(
                &mut order,
                &schema.domain,
                ops,
                kind,
                at,
                newest_first,
                crate::threads(),
            );
            if merge {
                merged = Some(order.clone());
            }
            sorted = Some(kind);
            order.dedup_by(|b, a| by_bytes(*a, *b).is_eq());
            // Deleted survivors go, older versions of their coordinates with
            // them.
            order.retain(|&i| gone.get(i) != Some(&true));
            if let Some(c) = self.condition {
                // The condition applies to the surviving (newest) cells.
                order = self.filter_by_condition(c, &order, &refs)?;
            }
            if let Some(merged) = &merged {
                md = self.merged_whole(&order, &refs, merged, &at);
                md.answered.sort_unstable();
                let whole: HashSet<(usize, u64)> = md.answered.iter().copied().collect();
                order.retain(|&i| {
                    refs.get(i)
                        .is_none_or(|r| !whole.contains(&(r.frag as usize, r.tile)))
                });
            }
        }
        // Deduplicated cells are in the result's order already, where no
        // two compare equal (no float dimension: -0.0 and 0.0 are two cells
        // the result orders otherwise).
        let floats = dims.iter().any(|d| d.datatype.is_float());
        let kind = self.order_kind().filter(|k| floats || sorted != Some(*k));
        if let Some(kind) = kind {
            sort_cells(
                &mut order,
                &schema.domain,
                ops,
                kind,
                at,
                |a, b| match (refs.get(a), refs.get(b)) {
                    (Some(x), Some(y)) => result_tie(layout, x, y),
                    _ => a.cmp(&b),
                },
                crate::threads(),
            );
        }
        if self.order_kind().is_some() && self.merges_as_stored() {
            merge_as_stored(&mut order, &refs);
        }
        let mut out: Vec<CellRef> = Vec::with_capacity(order.len());
        // (A cell kept by the parts rule may count for several of the query's
        // ranges where the piece's clipped ranges are one.)
        let multi = (0..dims.len()).any(|d| subarray.ranges(d).len() > 1)
            || hits.iter().any(|&h| h != u32::MAX && h > 1);
        let one_fragment = order
            .iter()
            .all(|&i| Some(frag(i)) == order.first().map(|&f| frag(f)));
        if multi && n == 1 && one_fragment && super::partition::follows_ranges(schema, layout) {
            // One dimension, every cell from one fragment: TileDB's legacy
            // reader leaves the cells range by range, in the order the ranges
            // were given (it sorts them only when fragments mix).
            let o = ops
                .first()
                .ok_or_else(|| QueryError::invalid("no dimension"))?;
            for r in subarray.ranges(0) {
                let (lo, hi) = r.bounds();
                let first =
                    order.partition_point(|&i| o.cmp_values(at(i, 0), lo) == Ordering::Less);
                let end =
                    order.partition_point(|&i| o.cmp_values(at(i, 0), hi) != Ordering::Greater);
                let held = order.get(first..end.max(first)).unwrap_or_default();
                out.extend(held.iter().filter_map(|&i| refs.get(i).copied()));
            }
        } else if multi && matches!(layout, ResultLayout::RowMajor | ResultLayout::ColMajor) {
            // Ordered layouts return a cell once per range combination that
            // holds it (overlapping ranges repeat cells, as TileDB does).
            for i in order {
                let mut times = 1usize;
                for (d, o) in ops.iter().enumerate() {
                    let r = subarray.ranges(d);
                    if r.is_empty() {
                        continue;
                    }
                    times = times.saturating_mul(match hits.get(i) {
                        Some(&h) if h != u32::MAX && parts.is_some_and(|p| p.dim == d) => {
                            h as usize
                        }
                        _ => r.iter().filter(|r| o.contains(r, at(i, d))).count(),
                    });
                }
                if let Some(&r) = refs.get(i) {
                    out.extend(std::iter::repeat_n(r, times));
                }
            }
        } else {
            out.extend(order.into_iter().filter_map(|i| refs.get(i).copied()));
        }
        Ok((Results::from_cells(&out), md))
    }
}

/// Candidate `i`'s coordinate along `d` in a table of `n` a candidate
/// ([`SparseScan::coordinates`]).
fn coordinate<'t>(table: &[&'t [u8]], n: usize, i: usize, d: usize) -> &'t [u8] {
    let k = i.saturating_mul(n).saturating_add(d);
    table.get(k).copied().unwrap_or_default()
}

/// The order a sparse read's results come in (`None`: unordered, as
/// found).
pub(crate) fn result_order(schema: &ArraySchema, layout: ResultLayout) -> Option<CellOrder> {
    match layout {
        ResultLayout::RowMajor => Some(CellOrder::RowMajor),
        ResultLayout::ColMajor => Some(CellOrder::ColMajor),
        ResultLayout::GlobalOrder => Some(CellOrder::Global {
            tile_order: schema.tile_order,
            cell_order: schema.cell_order,
        }),
        // Unordered results keep the order they were found in (fragment,
        // tile, cell), as TileDB's unordered reader returns tiles as they
        // come; a schema without duplicates has them in coordinate order
        // from the deduplication.
        ResultLayout::Unordered => None,
    }
}

/// Whether a fragment of format `version` is stored in another global
/// order than TileDB compares its cells by today: a Hilbert fragment of
/// TileDB 2.2 (formats 7 and 8), which bucketed integers over one value more
/// (fixed in 2.3); a fragment of real coordinates before TileDB 2.0 (format
/// 4 and older), whose space tiles were not floored, so that its cells
/// are in the tile order of their coordinates.
pub fn stored_out_of_order(schema: &ArraySchema, version: u32) -> bool {
    let dims = &schema.domain.dimensions;
    match schema.cell_order {
        Layout::Hilbert => {
            // (Integers in C++: datetimes too; strings were bucketed apart.)
            let integral =
                |d: &tdb_schema::Dimension| !d.datatype.is_float() && !d.datatype.is_string();
            (7..=8).contains(&version) && dims.iter().any(integral)
        }
        _ => version <= 4 && dims.iter().any(|d| d.datatype.is_float()),
    }
}

/// Leaves `order`, sorted in the global order, as TileDB's
/// global-order reader returns the cells: it merges the fragments' cells as
/// stored, each time taking the least of each fragment's next cell. Where
/// every fragment's cells are stored in the order, that is the sort; a
/// fragment stored in another order ([`stored_out_of_order`]) comes out as
/// stored, merged with the others by its next cell. (TileDB takes runs of a
/// fragment's cells at once, found by a search that assumes the order, so
/// over several such fragments its cells come out in yet another order, and
/// duplicates that never meet are not merged: not followed here.)
fn merge_as_stored(order: &mut [usize], refs: &[CellRef]) {
    let stored = |i: usize| refs.get(i).map(|r| (r.frag, r.tile, r.cell));
    let frag = |i: &usize| refs.get(*i).map(|r| r.frag);
    // Each cell's place in the sorted order.
    let mut rank = vec![0usize; refs.len()];
    for (place, &i) in order.iter().enumerate() {
        if let Some(r) = rank.get_mut(i) {
            *r = place;
        }
    }
    let place = |i: usize| rank.get(i).copied().unwrap_or(0);
    let mut stored_order: Vec<usize> = order.to_vec();
    stored_order.sort_unstable_by_key(|&i| stored(i));
    let in_order = stored_order.windows(2).all(|w| match w {
        [a, b] => frag(a) != frag(b) || place(*a) < place(*b),
        _ => true,
    });
    if in_order {
        return;
    }
    // Each fragment's run, and a heap of their next cells by place.
    let mut runs: Vec<std::iter::Peekable<std::slice::Iter<'_, usize>>> = (stored_order
        .chunk_by(|a, b| frag(a) == frag(b)))
    .map(|run| run.iter().peekable())
    .collect();
    let mut heads: BinaryHeap<Reverse<(usize, usize)>> = (runs.iter_mut().enumerate())
        .filter_map(|(r, run)| run.peek().map(|&&i| Reverse((place(i), r))))
        .collect();
    let mut out = order.iter_mut();
    while let Some(Reverse((_, r))) = heads.pop() {
        let Some(run) = runs.get_mut(r) else { break };
        if let (Some(&i), Some(slot)) = (run.next(), out.next()) {
            *slot = i;
        }
        if let Some(&&i) = run.peek() {
            heads.push(Reverse((place(i), r)));
        }
    }
}

/// The order a read's sorted runs are merged in: its result order, and
/// for an unordered read (spilled for its large tiles) row-major, the
/// order a read without duplicates deduplicates in.
pub(crate) fn spill_order(schema: &ArraySchema, layout: ResultLayout) -> CellOrder {
    result_order(schema, layout).unwrap_or(CellOrder::RowMajor)
}

/// Cells of equal values (duplicates, or -0.0 and 0.0) in a `layout`
/// read: TileDB's global-order reader takes the newest fragment's first;
/// row- and col-major take the oldest's (TileDB's legacy reader has no
/// fixed order there), then tile and cell.
pub(crate) fn result_tie(layout: ResultLayout, a: &CellRef, b: &CellRef) -> Ordering {
    if layout == ResultLayout::GlobalOrder && a.frag != b.frag {
        b.frag.cmp(&a.frag)
    } else {
        (a.frag, a.tile, a.cell).cmp(&(b.frag, b.tile, b.cell))
    }
}

impl SparseScan<'_> {
    /// Keeps the cells of `order` where `cond` holds, evaluated tile by
    /// tile.
    fn filter_by_condition(
        &self,
        cond: &BoundCondition,
        order: &[usize],
        refs: &[CellRef],
    ) -> Result<Vec<usize>> {
        // Group by tile, evaluate each tile once: (first cell held, mask).
        let mut by_tile: HashMap<(u32, u64), (u64, Vec<bool>)> = HashMap::new();
        for r in order.iter().filter_map(|&i| refs.get(i)) {
            if by_tile.contains_key(&(r.frag, r.tile)) {
                continue;
            }
            let fi = r.frag as usize;
            let plan = (self.plans.get(fi))
                .ok_or_else(|| QueryError::invalid(format!("no fragment {fi} planned")))?;
            let (first, n) = held_cells(self.held, plan, fi, r.tile);
            let tc = tile_columns(self.fields, self.tiles, fi, r.tile, n as usize);
            let mut mask = vec![true; n as usize];
            cond.evaluate(&tc, &mut mask)?;
            by_tile.insert((r.frag, r.tile), (first, mask));
        }
        Ok(order
            .iter()
            .copied()
            .filter(|&i| {
                refs.get(i).is_some_and(|r| {
                    (by_tile.get(&(r.frag, r.tile)))
                        .and_then(|(first, m)| {
                            m.get(u64::from(r.cell).saturating_sub(*first) as usize)
                        })
                        .copied()
                        .unwrap_or(false)
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::{
        merge_as_stored, strncmp_equal, tiledb_range_shares, tiledb_string_parts, CellRef, Kept,
        Share,
    };

    /// Cells sorted (by place, their index here) come out as TileDB's
    /// global-order reader merges its fragments: a sort where each
    /// fragment is stored in the order, each fragment's cells as stored
    /// where it is not (TileDB 2.2's Hilbert fragments).
    #[test]
    fn fragments_merge_as_stored() {
        let cell = |frag, tile, cell| CellRef { frag, tile, cell };
        // Two fragments stored in the order: the sort stands.
        let refs = [cell(0, 0, 0), cell(1, 0, 0), cell(0, 0, 1), cell(1, 1, 0)];
        let mut order = vec![0, 1, 2, 3];
        merge_as_stored(&mut order, &refs);
        assert_eq!(order, [0, 1, 2, 3]);
        // One fragment stored out of the order: as stored.
        let refs = [cell(0, 0, 2), cell(0, 1, 0), cell(0, 0, 0), cell(0, 0, 1)];
        let mut order = vec![0, 1, 2, 3];
        merge_as_stored(&mut order, &refs);
        assert_eq!(order, [2, 3, 0, 1]);
        // Fragment 0 stored as places 2, 0, 4; fragment 1 as 1, 3: the
        // least next cell each time, fragment 0's 2 holding back its 0.
        let refs = [
            cell(0, 0, 1),
            cell(1, 0, 0),
            cell(0, 0, 0),
            cell(1, 0, 1),
            cell(0, 0, 2),
        ];
        let mut order = vec![0, 1, 2, 3, 4];
        merge_as_stored(&mut order, &refs);
        assert_eq!(order, [1, 2, 0, 3, 4]);
    }

    /// Kept cells are runs where they run on, listed where they are
    /// scattered, and the same cells either way.
    #[test]
    fn kept_cells_are_listed_where_their_runs_are_short() {
        let mask = |s: &str| s.bytes().map(|b| b == b'1').collect::<Vec<bool>>();
        assert_eq!(Kept::of(&mask("")), Kept::Runs(vec![]));
        assert_eq!(Kept::of(&mask("000")), Kept::Runs(vec![]));
        assert_eq!(Kept::of(&mask("111")), Kept::Runs(vec![(0, 3)]));
        assert_eq!(Kept::of(&mask("0100101")), Kept::Listed(vec![1, 4, 6]));
        let long = format!("0{}00{}0", "1".repeat(12), "1".repeat(30));
        assert_eq!(Kept::of(&mask(&long)), Kept::Runs(vec![(1, 12), (15, 30)]));
        // One run of 9 and one of 10: 19 cells < 2 × 10, listed.
        let short = format!("{}0{}", "1".repeat(9), "1".repeat(10));
        let listed: Vec<u32> = (0..9).chain(10..20).collect();
        assert_eq!(Kept::of(&mask(&short)), Kept::Listed(listed));
        let mut rng = tdb_testdata::XorShift::new(0x5eed_cafe);
        for _ in 0..50 {
            let ones = rng.next_u64() % 100;
            let m: Vec<bool> = (0..997).map(|_| rng.next_u64() % 100 < ones).collect();
            let want: Vec<u32> = (0..997u32).filter(|&i| m[i as usize]).collect();
            assert_eq!(Kept::of(&m).iter().collect::<Vec<u32>>(), want, "{ones}%");
        }
    }

    /// Cuts share out every value: each in exactly one share, a tile's
    /// bounds meeting the shares that hold a value between them.
    #[test]
    fn shares_cut_the_line_of_values_in_two_with_nothing_left_over() {
        let schema = tdb_schema::ArraySchema::builder(tdb_format::ArrayType::Sparse)
            .dimension(tdb_schema::DimensionBuilder::string("s"))
            .attribute(tdb_schema::Attribute::builder(
                "a",
                tdb_format::Datatype::Int32,
            ))
            .build()
            .unwrap();
        let ops = tdb_index::DomainOps::new(&schema.domain).unwrap();
        let o = ops.dims().first().unwrap();
        let (low, high) = Share::whole(0).cut_after(b"k");
        let (mid, top) = high.cut_after(b"r");
        let shares = [&low, &mid, &top];
        for v in [
            &b""[..],
            b"a",
            b"k",
            b"k\0",
            b"ka",
            b"q",
            b"r",
            b"r\0",
            b"zz",
        ] {
            let holders = shares.iter().filter(|s| s.holds(o, v)).count();
            assert_eq!(holders, 1, "{v:?}");
        }
        assert!(low.holds(o, b"k") && mid.holds(o, b"k\0") && top.holds(o, b"zz"));
        assert!(!low.meets(o, b"k\0", b"m") && mid.meets(o, b"k\0", b"m"));
        assert!(mid.meets(o, b"a", b"z") && !top.meets(o, b"a", b"r"));
    }

    #[test]
    fn parts_are_six_of_at_least_two_cells_the_last_taking_the_rest() {
        assert!(tiledb_string_parts(11, 1).is_empty());
        assert_eq!(
            tiledb_string_parts(17, 1),
            vec![0..2, 2..4, 4..6, 6..8, 8..10, 10..17]
        );
        assert_eq!(tiledb_string_parts(18, 1).last(), Some(&(15..18)));
    }

    #[test]
    fn a_tile_split_among_threads_is_cut_into_six_share_by_share() {
        // 25 cells in two shares: 0..13 and 13..25, each of six parts.
        assert_eq!(
            tiledb_string_parts(25, 2),
            vec![
                0..2,
                2..4,
                4..6,
                6..8,
                8..10,
                10..13,
                13..15,
                15..17,
                17..19,
                19..21,
                21..23,
                23..25
            ]
        );
        // A share below 12 cells is tested cell by cell; the others still in parts.
        assert_eq!(
            tiledb_string_parts(23, 2),
            vec![0..2, 2..4, 4..6, 6..8, 8..10, 10..12]
        );
        assert!(tiledb_string_parts(23, 3).is_empty());
        // More threads than cells: one cell each.
        assert!(tiledb_string_parts(3, 8).is_empty());
        assert_eq!(tiledb_range_shares(true, 1, 2), 2);
        assert_eq!(tiledb_range_shares(true, 3, 8), 3);
        assert_eq!(tiledb_range_shares(true, 2, 2), 1);
        assert_eq!(tiledb_range_shares(false, 1, 8), 1);
    }

    #[test]
    fn ends_agree_as_strncmp_finds_them() {
        assert!(strncmp_equal(b"ab", b"ab"));
        assert!(!strncmp_equal(b"ab", b"abc"));
        // `strncmp` stops at a NUL: what follows one is not compared.
        assert!(strncmp_equal(b"a\0x", b"a\0y"));
        assert!(!strncmp_equal(b"a\0x", b"abx"));
    }
}
