//! TileDB's orders of cells by their coordinates: row-major, column-major,
//! and the global order (space tiles in the tile order, then cells in the
//! cell order; Hilbert cell orders by the Hilbert value of the bucketed
//! coordinates, ties broken row-major, as TileDB's `HilbertCmp`). Readers
//! sort results with it; writers sort cells into fragments with it.

use crate::RangeOps;
use std::cmp::Ordering;
use tdb_format::{with_native, Layout, NativeType};
use tdb_schema::{Dimension, Domain, Range};

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

/// Sorts `order` (indices of cells) by `order_kind`; `coord(i, d)` is cell
/// `i`'s value of dimension `d`, compared by `ops[d]`. Cells with equal
/// coordinates keep `tie`'s order. Keys that cost more than a comparison
/// (tiles, Hilbert values, integer coordinates) are computed once per
/// cell, those of a large sort on up to `threads` threads.
pub fn sort_cells<'c>(
    order: &mut [usize],
    domain: &Domain,
    ops: &[RangeOps],
    order_kind: CellOrder,
    coord: impl Fn(usize, usize) -> &'c [u8] + Sync,
    tie: impl Fn(usize, usize) -> Ordering,
    threads: usize,
) {
    let n = ops.len();
    if sort_by_words(order, domain, n, order_kind, &coord, &tie, threads) {
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
            let cells = order.iter().max().map_or(0, |&m| m.saturating_add(1));
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

/// Cells at least per thread that makes keys (fewer are not worth a
/// thread's start).
const PARALLEL_KEYS: usize = 1 << 19;

/// Words at most in a [`CellKeys`] key: a tile word and
/// [`MAX_WORD_DIMS`] coordinates.
pub const MAX_KEY_WORDS: usize = MAX_WORD_DIMS + 1;

/// Cells' keys in an order where every dimension is an integer (all but
/// Hilbert orders): words that compare as the order does (the space
/// tile's position in the tile order, then the coordinates in the cell
/// order). Equal keys are equal coordinates. Made once a cell, a key
/// spares every comparison reading two cells' coordinates through their
/// datatype: sorts and the merge of sorted runs compare keys.
#[derive(Debug, Clone)]
pub struct CellKeys {
    words: Vec<fn(&[u8]) -> u64>,
    tiles: Option<TileWord>,
    col_cells: bool,
}

impl CellKeys {
    /// The keys of `order_kind` over `domain`; `None` where a dimension
    /// is not an integer, there are more than [`MAX_WORD_DIMS`], the
    /// order is Hilbert's, or the domain has more tiles than a word counts.
    pub fn new(domain: &Domain, order_kind: CellOrder) -> Option<Self> {
        let dims = &domain.dimensions;
        if dims.is_empty() || dims.len() > MAX_WORD_DIMS {
            return None;
        }
        let words = dims.iter().map(word_fn).collect::<Option<Vec<_>>>()?;
        let (col_cells, tiles) = match order_kind {
            CellOrder::RowMajor => (false, None),
            CellOrder::ColMajor => (true, None),
            CellOrder::Global {
                cell_order: Layout::Hilbert,
                ..
            } => return None,
            CellOrder::Global {
                tile_order,
                cell_order,
            } => (
                cell_order == Layout::ColMajor,
                Some(TileWord::new(
                    domain,
                    &words,
                    tile_order == Layout::ColMajor,
                )?),
            ),
        };
        Some(CellKeys {
            words,
            tiles,
            col_cells,
        })
    }

    /// Words a key: one per dimension, and the tile's in a global order.
    pub fn width(&self) -> usize {
        self.words
            .len()
            .saturating_add(usize::from(self.tiles.is_some()))
    }

    /// The dimension whose value is a key's `k`-th coordinate word.
    fn cell_dim(&self, k: usize) -> usize {
        if self.col_cells {
            self.words.len().saturating_sub(1).saturating_sub(k)
        } else {
            k
        }
    }

    /// Writes the key of the cell whose value of dimension `d` is
    /// `coord(d)` into `out` (its first [`width`](Self::width) words).
    #[inline]
    pub fn key<'c>(&self, coord: impl Fn(usize) -> &'c [u8], out: &mut [u64]) {
        let mut values = [0u64; MAX_WORD_DIMS];
        for (d, (v, f)) in values.iter_mut().zip(&self.words).enumerate() {
            *v = f(coord(d));
        }
        let lead = usize::from(self.tiles.is_some());
        let (tile, coords) = out.split_at_mut(lead.min(out.len()));
        if let (Some(t), Some(w)) = (&self.tiles, tile.first_mut()) {
            *w = t.word(&values, &coord);
        }
        for (k, w) in coords.iter_mut().take(self.words.len()).enumerate() {
            *w = values.get(self.cell_dim(k)).copied().unwrap_or_default();
        }
    }

    /// Per key word, its lowest value and span over `domain` (the one
    /// these keys were made for): `None` where a bound is malformed.
    fn spans(&self, domain: &Domain) -> Option<Vec<(u64, u64)>> {
        let dims = &domain.dimensions;
        let mut spans: Vec<(u64, u64)> = (self.tiles.iter())
            .map(|t| (0, t.count.saturating_sub(1)))
            .collect();
        for k in 0..self.words.len() {
            let d = self.cell_dim(k);
            let (lo, hi) = dims.get(d)?.bounds()?;
            let word = self.words.get(d)?;
            let (lo, hi) = (word(lo), word(hi));
            spans.push((lo, hi.checked_sub(lo)?));
        }
        Some(spans)
    }
}

/// [`sort_cells`] by [`CellKeys`]: each cell's key made once and sorted
/// beside its index, so a comparison reads one contiguous pair of keys
/// instead of two cells' coordinates, scattered, through their datatype
/// (a write of 4M cells spent half its time sorting). Equal keys are
/// equal coordinates, left to `tie`. `false`, with `order` untouched,
/// where there are no such keys.
fn sort_by_words<'c>(
    order: &mut [usize],
    domain: &Domain,
    n: usize,
    order_kind: CellOrder,
    coord: &(impl Fn(usize, usize) -> &'c [u8] + Sync),
    tie: &impl Fn(usize, usize) -> Ordering,
    threads: usize,
) -> bool {
    if domain.dimensions.len() != n {
        return false;
    }
    let Some(keys) = CellKeys::new(domain, order_kind) else {
        return false;
    };
    let Some(spans) = keys.spans(domain) else {
        return false;
    };
    let key = |i: usize, out: &mut [u64]| keys.key(|d| coord(i, d), out);
    if sort_packed(order, &spans, &key, tie, threads) {
        return true;
    }
    match keys.width() {
        1 => sort_keyed::<1>(order, key, tie),
        2 => sort_keyed::<2>(order, key, tie),
        3 => sort_keyed::<3>(order, key, tie),
        4 => sort_keyed::<4>(order, key, tie),
        5 => sort_keyed::<5>(order, key, tie),
        _ => return false,
    }
    true
}

/// Bits that hold every value up to `max`.
fn bits(max: u64) -> u32 {
    u64::BITS.saturating_sub(max.leading_zeros())
}

/// [`sort_by_words`]'s keys packed into one `u128` a cell where they fit:
/// each part less its lowest word, in as many bits as its span needs
/// (W3's 4M cells: tiles in 7 bits, coordinates in 20 each), and below
/// them the cell's place, so keys are unique and sort without a
/// comparison function, in half the memory of words side by side (whose
/// page faults alone were a fifth of the sort). Large sorts make their
/// keys on several threads, each its share. Cells whose keys tie
/// (equal coordinates) are then ordered by `tie`, keeping their order in
/// `order` where it ties too. `false`, `order` untouched, where the keys
/// do not fit (or a coordinate lies outside the domain).
fn sort_packed(
    order: &mut [usize],
    spans: &[(u64, u64)],
    key: &(impl Fn(usize, &mut [u64]) + Sync),
    tie: &impl Fn(usize, usize) -> Ordering,
    threads: usize,
) -> bool {
    let widths: Vec<u32> = spans.iter().map(|&(_, span)| bits(span)).collect();
    // Cells given in ascending order are their own place; others carry
    // their place in `order`, which a copy maps back.
    let ascending = order.windows(2).all(|w| w.first() < w.get(1));
    let last_place = if ascending {
        order.last().copied().unwrap_or(0)
    } else {
        order.len().saturating_sub(1)
    };
    let place_bits = bits(last_place as u64);
    let key_bits = widths.iter().sum::<u32>();
    if key_bits.saturating_add(place_bits) > u128::BITS || spans.len() > MAX_WORD_DIMS + 1 {
        return false;
    }
    // Zeroed memory comes from the system untouched: each thread faults
    // in the pages of its own share.
    let mut keyed: Vec<u128> = vec![0; order.len()];
    let fill = |first: usize, cells: &[usize], out: &mut [u128]| {
        let mut parts = [0u64; MAX_WORD_DIMS + 1];
        let parts = parts.get_mut(..spans.len()).unwrap_or_default();
        for (p, (&i, slot)) in (first..).zip(cells.iter().zip(out)) {
            key(i, parts);
            let mut k = 0u128;
            for ((&w, &(low, span)), &width) in parts.iter().zip(spans).zip(&widths) {
                match w.checked_sub(low).filter(|&v| v <= span) {
                    Some(v) => k = (k << width) | u128::from(v),
                    None => return false,
                }
            }
            let place = if ascending { i } else { p };
            *slot = (k << place_bits) | place as u128;
        }
        true
    };
    let threads = threads.min(order.len() / PARALLEL_KEYS).max(1);
    let share = order.len().div_ceil(threads).max(1);
    let filled = std::thread::scope(|s| {
        let mut shares = order.chunks(share).zip(keyed.chunks_mut(share));
        let first = shares.next();
        let others: Vec<_> = (1..)
            .zip(shares)
            .map(|(t, (cells, out))| s.spawn(move || fill(share.saturating_mul(t), cells, out)))
            .collect();
        let mine = first.is_none_or(|(cells, out)| fill(0, cells, out));
        // Every thread joined, whatever the first answered.
        let theirs = others.into_iter().map(|h| h.join().unwrap_or(false));
        theirs.fold(mine, |all, ok| all && ok)
    });
    if !filled {
        return false;
    }
    keyed.sort_unstable();
    let given = if ascending {
        Vec::new()
    } else {
        order.to_vec()
    };
    let place_mask = (1u128 << place_bits).wrapping_sub(1);
    let mut runs = Vec::new();
    let cell = |k: u128| {
        let place = (k & place_mask) as usize;
        if ascending {
            place
        } else {
            given.get(place).copied().unwrap_or(place)
        }
    };
    // Back into `order`, runs of equal coordinates then ordered by the tie.
    let mut run_start = 0;
    let mut run_coords = None;
    for (j, (slot, &k)) in order.iter_mut().zip(&keyed).enumerate() {
        *slot = cell(k);
        let coords = Some(k >> place_bits);
        if coords != run_coords {
            if j.saturating_sub(run_start) > 1 {
                runs.push((run_start, j));
            }
            (run_start, run_coords) = (j, coords);
        }
    }
    if keyed.len().saturating_sub(run_start) > 1 {
        runs.push((run_start, keyed.len()));
    }
    for (start, end) in runs {
        if let Some(run) = order.get_mut(start..end) {
            run.sort_by(|&a, &b| tie(a, b));
        }
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
#[derive(Debug, Clone)]
struct TileWord {
    dims: Vec<Dimension>,
    /// Per dimension with tiles: the domain's low bound and the tile
    /// extent as words, and what one tile step adds to the position.
    steps: Vec<Option<(u64, u64, u64)>>,
    /// Tiles in the domain.
    count: u64,
}

impl TileWord {
    /// `None` when the domain has more tiles than a word counts (or a
    /// bound is malformed).
    fn new(domain: &Domain, words: &[fn(&[u8]) -> u64], col_tiles: bool) -> Option<Self> {
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
            let count = crate::dense::dim_tile_count(dim, &Range::from_bounds(lo, hi, false))?;
            *steps.get_mut(d)? = Some((word(lo), extent, stride));
            stride = stride.checked_mul(count)?;
        }
        Some(TileWord {
            dims: dims.clone(),
            steps,
            count: stride,
        })
    }

    /// The tile word of a cell whose coordinates' words are `values`
    /// (`coord(d)`: its value of dimension `d`).
    fn word<'c>(&self, values: &[u64], coord: &impl Fn(usize) -> &'c [u8]) -> u64 {
        let dims = self.dims.iter().zip(&self.steps).zip(values).enumerate();
        dims.fold(0u64, |w, (d, ((dim, step), &v))| {
            let Some((lo, extent, stride)) = *step else {
                return w;
            };
            // From the low bound up the words differ as the values do;
            // below it (outside the domain) TileDB's own arithmetic.
            let t = match v.checked_sub(lo) {
                Some(diff) => diff.checked_div(extent),
                None => crate::dense::tile_index(dim, coord(d)),
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
