//! TileDB's orders of cells by their coordinates: row-major, column-major,
//! and the global order (space tiles in the tile order, then cells in the
//! cell order; Hilbert cell orders by the Hilbert value of the bucketed
//! coordinates, ties broken row-major, as TileDB's `HilbertCmp`). Readers
//! sort results with it; writers sort cells into fragments with it.

use crate::RangeOps;
use std::cmp::Ordering;
use tdb_format::Layout;
use tdb_schema::Domain;

/// An order of cells by coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellOrder {
    /// The first dimension slowest.
    RowMajor,
    /// The last dimension slowest.
    ColMajor,
    /// The array's global order.
    Global {
        /// The schema's tile order (ignored for Hilbert cell orders).
        tile_order: Layout,
        /// The schema's cell order (row-major, col-major or Hilbert).
        cell_order: Layout,
    },
}

/// Sorts `order` (indices of cells `0..cells`) by `order_kind`; `coord(i, d)`
/// is cell `i`'s value of dimension `d`, compared by `ops[d]`. Cells with
/// equal coordinates keep `tie`'s order. Keys that cost more than a
/// comparison (tiles, Hilbert values) are computed once per cell.
pub fn sort_cells<'c>(
    order: &mut [usize],
    cells: usize,
    domain: &Domain,
    ops: &[RangeOps],
    order_kind: CellOrder,
    coord: impl Fn(usize, usize) -> &'c [u8],
    tie: impl Fn(usize, usize) -> Ordering,
) {
    let n = ops.len();
    let by_coords = |a: usize, b: usize, col_major: bool| cmp_coords(ops, &coord, a, b, col_major);
    match order_kind {
        CellOrder::RowMajor => {
            order.sort_by(|&a, &b| by_coords(a, b, false).then_with(|| tie(a, b)))
        }
        CellOrder::ColMajor => {
            order.sort_by(|&a, &b| by_coords(a, b, true).then_with(|| tie(a, b)))
        }
        CellOrder::Global {
            cell_order: Layout::Hilbert,
            ..
        } => {
            // Sorted as (key, cell) pairs side by side, not through a
            // key table each comparison looks up at random.
            let bits = crate::hilbert::bits(n);
            let mut buckets = vec![0u64; n];
            let mut keyed: Vec<(u64, usize)> = order
                .iter()
                .map(|&i| (hilbert_key(domain, n, &coord, i, bits, &mut buckets), i))
                .collect();
            keyed.sort_by(|&(ka, a), &(kb, b)| {
                ka.cmp(&kb)
                    .then_with(|| by_coords(a, b, false))
                    .then_with(|| tie(a, b))
            });
            for (slot, (_, i)) in order.iter_mut().zip(keyed) {
                *slot = i;
            }
        }
        CellOrder::Global {
            tile_order,
            cell_order,
        } => {
            let col_tiles = tile_order == Layout::ColMajor;
            let col_cells = cell_order == Layout::ColMajor;
            // Space tile of every cell per dimension, once.
            let mut tile_of: Vec<Option<u64>> = vec![None; cells.saturating_mul(n)];
            // One key of `n` tiles per cell (a schema has a dimension).
            let width = n.max(1);
            for (i, key) in tile_of.chunks_exact_mut(width).enumerate() {
                tile_key(domain, &coord, i, key);
            }
            let key = |i: usize| tile_of.chunks_exact(width).nth(i).unwrap_or_default();
            order.sort_by(|&a, &b| {
                let (ta, tb) = (key(a), key(b));
                let at = |k: &[Option<u64>], d: usize| k.get(d).copied().flatten();
                cmp_tiles(n, col_tiles, |d| (at(ta, d), at(tb, d)))
                    .then_with(|| by_coords(a, b, col_cells))
                    .then_with(|| tie(a, b))
            });
        }
    }
}

/// Cells `a` and `b` compared in `order_kind`, one pair at a time (the
/// keys [`sort_cells`] computes once per cell are computed here per call):
/// how a writer checks that cells said to be in an order are.
pub fn cmp_cells<'c>(
    domain: &Domain,
    ops: &[RangeOps],
    order_kind: CellOrder,
    coord: &impl Fn(usize, usize) -> &'c [u8],
    a: usize,
    b: usize,
) -> Ordering {
    let n = ops.len();
    match order_kind {
        CellOrder::RowMajor => cmp_coords(ops, coord, a, b, false),
        CellOrder::ColMajor => cmp_coords(ops, coord, a, b, true),
        CellOrder::Global {
            cell_order: Layout::Hilbert,
            ..
        } => {
            let bits = crate::hilbert::bits(n);
            let mut buckets = [0u64; crate::hilbert::MAX_DIMS];
            let (buckets, _) = buckets.split_at_mut(n.min(crate::hilbert::MAX_DIMS));
            let ha = hilbert_key(domain, n, coord, a, bits, buckets);
            let hb = hilbert_key(domain, n, coord, b, bits, buckets);
            ha.cmp(&hb)
                .then_with(|| cmp_coords(ops, coord, a, b, false))
        }
        CellOrder::Global {
            tile_order,
            cell_order,
        } => {
            // Each dimension's tiles worked out only when the ones before
            // tie: no key vectors per pair.
            let dims = &domain.dimensions;
            let tile = |d: usize, i| crate::dense::tile_index(dims.get(d)?, coord(i, d));
            cmp_tiles(dims.len(), tile_order == Layout::ColMajor, |d| {
                (tile(d, a), tile(d, b))
            })
            .then_with(|| cmp_coords(ops, coord, a, b, cell_order == Layout::ColMajor))
        }
    }
}

/// Cell `i`'s Hilbert value over its bucketed coordinates.
fn hilbert_key<'c>(
    domain: &Domain,
    n: usize,
    coord: &impl Fn(usize, usize) -> &'c [u8],
    i: usize,
    bits: u32,
    buckets: &mut [u64],
) -> u64 {
    let dims = domain.dimensions.iter().take(n);
    for (d, (dim, bucket)) in dims.zip(buckets.iter_mut()).enumerate() {
        *bucket = crate::hilbert::bucket(dim, coord(i, d), bits);
    }
    crate::hilbert::value(buckets, bits)
}

/// Cell `i`'s space tile per dimension (`None` where a dimension has no
/// tiles: var-size or no extent).
fn tile_key<'c>(
    domain: &Domain,
    coord: &impl Fn(usize, usize) -> &'c [u8],
    i: usize,
    out: &mut [Option<u64>],
) {
    for (d, (dim, t)) in domain.dimensions.iter().zip(out).enumerate() {
        *t = crate::dense::tile_index(dim, coord(i, d));
    }
}

/// Two cells' space tiles compared in the tile order: `tiles(d)` gives
/// both cells' tile on dimension `d` (`None` where it has no tiles), asked
/// only while the dimensions before tie.
#[inline]
fn cmp_tiles(
    n: usize,
    col_tiles: bool,
    tiles: impl Fn(usize) -> (Option<u64>, Option<u64>),
) -> Ordering {
    for k in 0..n {
        let d = if col_tiles {
            n.saturating_sub(1).saturating_sub(k)
        } else {
            k
        };
        if let (Some(x), Some(y)) = tiles(d) {
            if x != y {
                return x.cmp(&y);
            }
        }
    }
    Ordering::Equal
}

/// Cells `a` and `b` (over `n` dimensions) compared by their coordinates'
/// bytes, dimension by dimension: whether they are the same coordinates as
/// TileDB decides it when it deduplicates and checks writes (`memcmp`:
/// -0.0 and 0.0 differ, though [`cmp_coords`] finds them equal), and an
/// order that puts equal ones side by side among values that tie.
pub fn cmp_coord_bytes<'c>(
    n: usize,
    coord: &impl Fn(usize, usize) -> &'c [u8],
    a: usize,
    b: usize,
) -> Ordering {
    (0..n)
        .map(|d| coord(a, d).cmp(coord(b, d)))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

/// Cells `a` and `b` compared by coordinates, the first dimension slowest
/// (row-major) or the last (`col_major`).
pub fn cmp_coords<'c>(
    ops: &[RangeOps],
    coord: &impl Fn(usize, usize) -> &'c [u8],
    a: usize,
    b: usize,
    col_major: bool,
) -> Ordering {
    let n = ops.len();
    for (k, _) in ops.iter().enumerate() {
        let d = if col_major {
            n.saturating_sub(1).saturating_sub(k)
        } else {
            k
        };
        let Some(op) = ops.get(d) else { continue };
        let o = op.cmp_values(coord(a, d), coord(b, d));
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}
