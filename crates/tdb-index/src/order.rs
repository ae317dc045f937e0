//! TileDB's orders of cells by their coordinates: row-major, column-major,
//! and the global order (space tiles in the tile order, then cells in the
//! cell order; Hilbert cell orders by the Hilbert value of the bucketed
//! coordinates, ties broken row-major, as TileDB's `HilbertCmp`). Readers
//! sort results with it; writers sort cells into fragments with it.

use crate::RangeOps;
use std::cmp::Ordering;
use tdb_format::{with_native, Layout, NativeType};
use tdb_schema::{Dimension, Domain};

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
    if sort_by_words(order, domain, n, order_kind, &coord, &tie) {
        return;
    }
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

/// Dimensions at most for [`sort_by_words`] (a key of one word more).
const MAX_WORD_DIMS: usize = 4;

/// [`sort_cells`] where every dimension is an integer (all but Hilbert
/// orders): each cell's key made once, as words that sort as the order
/// does (its space tile's position in the tile order, then its
/// coordinates in the cell order), and sorted beside its index. A
/// comparison then reads one contiguous pair of keys instead of two cells'
/// coordinates, scattered, through their datatype (a write of 4M cells
/// spent half its time sorting). Equal keys are equal coordinates, left
/// to `tie`. `false`, with `order` untouched, where this does not apply.
fn sort_by_words<'c>(
    order: &mut [usize],
    domain: &Domain,
    n: usize,
    order_kind: CellOrder,
    coord: &impl Fn(usize, usize) -> &'c [u8],
    tie: &impl Fn(usize, usize) -> Ordering,
) -> bool {
    let dims = &domain.dimensions;
    if n == 0 || n > MAX_WORD_DIMS || dims.len() != n {
        return false;
    }
    let Some(words) = dims.iter().map(word_fn).collect::<Option<Vec<_>>>() else {
        return false;
    };
    let (col_cells, tiles) = match order_kind {
        CellOrder::RowMajor => (false, None),
        CellOrder::ColMajor => (true, None),
        CellOrder::Global {
            cell_order: Layout::Hilbert,
            ..
        } => return false,
        CellOrder::Global {
            tile_order,
            cell_order,
        } => match TileWord::new(domain, &words, tile_order == Layout::ColMajor) {
            Some(t) => (cell_order == Layout::ColMajor, Some(t)),
            None => return false,
        },
    };
    let lead = usize::from(tiles.is_some());
    let key = |i: usize, out: &mut [u64]| {
        let mut values = [0u64; MAX_WORD_DIMS];
        for (d, (v, f)) in values.iter_mut().zip(&words).enumerate() {
            *v = f(coord(i, d));
        }
        let (tile, coords) = out.split_at_mut(lead);
        if let (Some(t), Some(w)) = (&tiles, tile.first_mut()) {
            *w = t.word(&values, coord, i);
        }
        for (k, w) in coords.iter_mut().enumerate() {
            let d = if col_cells {
                n.saturating_sub(1).saturating_sub(k)
            } else {
                k
            };
            *w = values.get(d).copied().unwrap_or_default();
        }
    };
    match lead.saturating_add(n) {
        1 => sort_keyed::<1>(order, key, tie),
        2 => sort_keyed::<2>(order, key, tie),
        3 => sort_keyed::<3>(order, key, tie),
        4 => sort_keyed::<4>(order, key, tie),
        5 => sort_keyed::<5>(order, key, tie),
        _ => return false,
    }
    true
}

/// Sorts `order` by keys of `W` words, `key` writing cell `i`'s.
fn sort_keyed<const W: usize>(
    order: &mut [usize],
    key: impl Fn(usize, &mut [u64]),
    tie: &impl Fn(usize, usize) -> Ordering,
) {
    let mut keyed: Vec<([u64; W], usize)> = order
        .iter()
        .map(|&i| {
            let mut k = [0u64; W];
            key(i, &mut k);
            (k, i)
        })
        .collect();
    keyed.sort_by(|(ka, a), (kb, b)| ka.cmp(kb).then_with(|| tie(*a, *b)));
    for (slot, (_, i)) in order.iter_mut().zip(keyed) {
        *slot = i;
    }
}

/// A cell's space tile as one word: its position in the tile order among
/// the domain's tiles (a dimension without tiles counts as one tile).
struct TileWord<'d> {
    dims: &'d [Dimension],
    /// Per dimension with tiles: the domain's low bound and the tile
    /// extent as words, and what one tile step adds to the position.
    steps: Vec<Option<(u64, u64, u64)>>,
}

impl<'d> TileWord<'d> {
    /// `None` when the domain has more tiles than a word counts (or a
    /// bound is malformed).
    fn new(domain: &'d Domain, words: &[fn(&[u8]) -> u64], col_tiles: bool) -> Option<Self> {
        let dims = &domain.dimensions;
        let mut steps = vec![None; dims.len()];
        let mut stride = 1u64;
        let slowest_last: Vec<usize> = if col_tiles {
            (0..dims.len()).collect()
        } else {
            (0..dims.len()).rev().collect()
        };
        for d in slowest_last {
            let dim = dims.get(d)?;
            let Some(extent) = dim.tile_extent.as_deref() else {
                continue;
            };
            let (lo, hi) = dim.bounds()?;
            let word = words.get(d)?;
            // The extent's value: its word less zero's.
            let zero = [0u8; 8];
            let extent = word(extent).wrapping_sub(word(zero.get(..extent.len())?));
            let count = crate::dense::tile_index(dim, hi)?.checked_add(1)?;
            *steps.get_mut(d)? = Some((word(lo), extent, stride));
            stride = stride.checked_mul(count)?;
        }
        Some(TileWord { dims, steps })
    }

    /// Cell `i`'s tile word from its coordinates' words `values`.
    fn word<'c>(&self, values: &[u64], coord: &impl Fn(usize, usize) -> &'c [u8], i: usize) -> u64 {
        let dims = self.dims.iter().zip(&self.steps).zip(values).enumerate();
        dims.fold(0u64, |w, (d, ((dim, step), &v))| {
            let Some((lo, extent, stride)) = *step else {
                return w;
            };
            // From the low bound up the words differ as the values do;
            // below it (outside the domain) TileDB's own arithmetic.
            let t = match v.checked_sub(lo) {
                Some(diff) => diff.checked_div(extent),
                None => crate::dense::tile_index(dim, coord(i, d)),
            };
            w.wrapping_add(t.unwrap_or(0).wrapping_mul(stride))
        })
    }
}

/// A value of an integer type as a word that sorts as the value does.
trait Word: NativeType {
    fn word(self) -> u64;
}

macro_rules! word {
    (signed $($t:ty),*; unsigned $($u:ty),*) => {
        $(impl Word for $t {
            #[inline(always)]
            fn word(self) -> u64 {
                // Two's complement with the sign bit flipped: the lowest
                // value is word 0.
                (self as i64 as u64) ^ (1 << 63)
            }
        })*
        $(impl Word for $u {
            #[inline(always)]
            fn word(self) -> u64 {
                self as u64
            }
        })*
    };
}
word!(signed i8, i16, i32, i64; unsigned u8, u16, u32, u64);

/// How a dimension's value becomes a [`Word`]; `None` for floats (-0.0
/// and 0.0 tie, NaN ties with everything) and strings.
fn word_fn(dim: &Dimension) -> Option<fn(&[u8]) -> u64> {
    fn word<T: Word>(v: &[u8]) -> u64 {
        T::read_le(v).word()
    }
    if dim.is_var() {
        return None;
    }
    with_native!(dim.datatype.native()?, int T => Some(word::<T> as fn(&[u8]) -> u64), float => None)
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
