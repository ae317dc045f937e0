//! Splitting a read's subarray into pieces read one after the other, so
//! the tiles a piece needs fit the memory budget.
//!
//! A piece is the subarray with one dimension's ranges clipped to an
//! interval. Pieces come in result order when the split dimension is the
//! one the layout varies slowest: row-major splits dimension 0 first (then,
//! once a piece holds a single value of it, dimension 1, ...), col-major
//! the last first, global order splits at tile boundaries in tile order and
//! then, inside one tile, by value in cell order. Every coordinate lies in
//! exactly one piece, so deduplication (newest wins) and deletes stay
//! exact; a tile overlapping several pieces is read once per piece. Where
//! row- and col-major results follow a dimension's ranges in the order
//! given ([`follows_ranges`]), a dimension with several ranges is cut
//! between them first.
//!
//! Integer dimensions are cut at tile boundaries or midpoints. Float and
//! string dimensions are cut where the data says: just after a bound of a
//! tile's MBR that lies inside the piece, the median of those (`left ≤ u`,
//! `right ≥` the value right after `u`: the next float up, or `u` followed
//! by a zero byte). A bisection of strings by value could go on forever
//! (between two strings lie infinitely many); a bound used is outside both
//! halves, so each cut leaves fewer candidates and cutting ends. Where the
//! tiles' bounds all span the piece (data ordered along another dimension)
//! it is read whole. In the global order a float dimension is first cut at
//! space tile boundaries (found by a search over the floats, as TileDB's
//! arithmetic places them) and a string dimension, which has no tiles, is
//! passed by until the cell order reaches it.

use super::plan::int_ranges;
use crate::{ResultLayout, Subarray};
use std::cmp::Ordering;
use tdb_format::{ArrayType, Datatype, Layout};
use tdb_index::dense::{int_range_of, origin_and_extent, tile_index, tile_of};
use tdb_index::RangeOps;
use tdb_schema::{ArraySchema, Dimension, Range};

/// The bounds along dimension `d` of the MBRs of the sparse tiles a piece
/// overlaps (every fragment's): where float and string dimensions are cut.
pub(crate) type TileBounds<'a> = dyn Fn(usize, &Subarray) -> Vec<(Vec<u8>, Vec<u8>)> + 'a;

/// How finely one step of the split sequence cuts its dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grain {
    /// At tile boundaries (global order across tiles).
    Tile,
    /// Anywhere.
    Value,
    /// Anywhere, in no order (see [`any_order`]): where cuts must fall on
    /// tile boundaries and this dimension's span lies in one tile, the
    /// next dimension is cut instead (a row-major read must cut this one
    /// or none, to keep its order).
    Any,
}

/// `order` for a read whose results have no order (sparse, unordered):
/// every dimension may be cut at its tile boundaries, whichever comes
/// first, so a piece over one row of space tiles is cut between them
/// instead of staying whole.
pub(crate) fn any_order(order: &[(usize, Grain)]) -> Vec<(usize, Grain)> {
    order.iter().map(|&(d, _)| (d, Grain::Any)).collect()
}

/// The dimensions a read may split, in order. Empty where no split keeps
/// the result order (Hilbert global order: see `split_run`).
pub(crate) fn split_order(schema: &ArraySchema, layout: ResultLayout) -> Vec<(usize, Grain)> {
    let n = schema.domain.dimensions.len();
    let forward: Vec<usize> = (0..n).collect();
    let backward: Vec<usize> = (0..n).rev().collect();
    let by = |dims: &[usize], g: Grain| dims.iter().map(|&d| (d, g)).collect::<Vec<_>>();
    match layout {
        ResultLayout::RowMajor | ResultLayout::Unordered => by(&forward, Grain::Value),
        ResultLayout::ColMajor => by(&backward, Grain::Value),
        ResultLayout::GlobalOrder => {
            if schema.cell_order == Layout::Hilbert {
                return Vec::new();
            }
            let tiles = if schema.tile_order == Layout::ColMajor {
                &backward
            } else {
                &forward
            };
            let cells = if schema.cell_order == Layout::ColMajor {
                &backward
            } else {
                &forward
            };
            let mut order = by(tiles, Grain::Tile);
            order.extend(by(cells, Grain::Value));
            order
        }
    }
}

/// `sub` with dimension `d`'s ranges clipped to `[lo, hi]`; `None` when
/// nothing is left.
pub(crate) fn clip(
    schema: &ArraySchema,
    sub: &Subarray,
    d: usize,
    lo: i128,
    hi: i128,
) -> Option<Subarray> {
    let dim = schema.domain.dimensions.get(d)?;
    let mut out = Subarray::new(schema.domain.dimensions.len());
    for k in 0..schema.domain.dimensions.len() {
        if k != d {
            for r in sub.ranges(k) {
                out.add_range(k, r.clone());
            }
            continue;
        }
        for (a, b) in int_ranges(schema, sub, d)? {
            let (a, b) = (a.max(lo), b.min(hi));
            if a <= b {
                out.add_range(d, int_range_of(dim, a, b)?);
            }
        }
        if out.ranges(d).is_empty() {
            return None;
        }
    }
    Some(out)
}

/// `sub` cut in two along the first step of `order` that still spans more
/// than one value (or tile), both halves non-empty, in result order. Cuts
/// fall on tile boundaries wherever the span crosses one, so each tile
/// stays in one piece; with `tiles_only`, nowhere else (`None` when the
/// first dimension to cut lies in one tile). `in_range_order`: results
/// follow each dimension's ranges as given (see [`follows_ranges`]), so a
/// dimension with several is cut between them. `None` when nothing can be
/// cut.
pub(crate) fn split(
    schema: &ArraySchema,
    ops: &[RangeOps],
    sub: &Subarray,
    order: &[(usize, Grain)],
    tiles_only: bool,
    in_range_order: bool,
    tile_bounds: &TileBounds<'_>,
) -> Option<(Subarray, Subarray)> {
    for &(d, grain) in order {
        let (o, dim) = (ops.get(d)?, schema.domain.dimensions.get(d)?);
        let given = sub.ranges(d);
        if in_range_order && grain == Grain::Value && given.len() > 1 {
            // Results follow the dimension's ranges in the order given
            // (overlapping ones repeat cells): cut between them.
            let (a, b) = given.split_at_checked(given.len().checked_div(2)?)?;
            let (mut left, mut right) = (sub.clone(), sub.clone());
            left.set_ranges(d, a.to_vec());
            right.set_ranges(d, b.to_vec());
            return Some((left, right));
        }
        let Some(ranges) = int_ranges(schema, sub, d) else {
            if grain == Grain::Tile {
                match split_at_space_tile(dim, o, sub, d)? {
                    Some(halves) => return Some(halves),
                    None => continue,
                }
            }
            match split_at_tile_bound(ops, sub, d, &tile_bounds(d, sub)) {
                Some(halves) => return Some(halves),
                // One value: the next dimension varies within it.
                None if one_value(o, sub.ranges(d)) => continue,
                None => return None,
            }
        };
        let (lo, hi) = super::plan::int_span(&ranges)?;
        // The last cell of the middle tile the span crosses.
        let at_tile = origin_and_extent(dim).and_then(|(origin, ext)| {
            let (tlo, thi) = (tile_of(lo, origin, ext)?, tile_of(hi, origin, ext)?);
            let mid = tlo.checked_add(thi)?.checked_div(2)?.checked_add(1)?;
            (tlo < thi).then(|| mid.checked_mul(ext)?.checked_add(origin)?.checked_sub(1))?
        });
        let cut = match (grain, at_tile) {
            (_, Some(cut)) => Some(cut),
            (Grain::Any, None) if tiles_only => None,
            (Grain::Value, None) if lo < hi && tiles_only => return None,
            (Grain::Value | Grain::Any, None) => (lo < hi)
                .then(|| lo.checked_add(hi.checked_sub(lo)?.checked_div(2)?))
                .flatten(),
            (Grain::Tile, None) => None,
        };
        let Some(cut) = cut else {
            continue;
        };
        // `lo` lies left of the cut and `hi` right of it: both halves hold
        // cells.
        if let (Some(a), Some(b)) = (
            clip(schema, sub, d, lo, cut),
            clip(schema, sub, d, cut.checked_add(1)?, hi),
        ) {
            return Some((a, b));
        }
    }
    None
}

/// `sub` cut into at most `n` subarrays along its first dimension, for
/// reads run side by side (a query engine's partitions): each coordinate
/// lies in exactly one, so deduplication and deletes stay exact, and they
/// come in the order of that dimension. Cuts fall on tile boundaries where
/// the dimension has tiles. `ned` (the array's non-empty domain) bounds
/// the span cut, so no part lies where nothing was written. Only integer
/// first dimensions are cut: others give `sub` whole.
pub fn split_for_parallel(
    schema: &ArraySchema,
    sub: &Subarray,
    ned: Option<&[Range]>,
    n: usize,
) -> Vec<Subarray> {
    let whole = || vec![sub.clone()];
    if n <= 1 || schema.domain.dimensions.is_empty() {
        return whole();
    }
    let (Some(dim), Some(ranges)) = (schema.domain.dimensions.first(), int_ranges(schema, sub, 0))
    else {
        return whole();
    };
    let Some((mut lo, mut hi)) = super::plan::int_span(&ranges) else {
        return whole();
    };
    if let Some((a, b)) = ned
        .and_then(|ned| ned.first())
        .and_then(|r| tdb_index::dense::int_range(dim, r))
    {
        (lo, hi) = (lo.max(a), hi.min(b));
    }
    if lo >= hi {
        return whole();
    }
    // Parts of `step` values (whole tiles where the dimension has them),
    // the first from `start`, where a tile does.
    let steps = || -> Option<(i128, i128)> {
        let step = hi.checked_sub(lo)?.checked_div(n as i128)?.checked_add(1)?;
        match origin_and_extent(dim) {
            Some((origin, extent)) => {
                let tiles = step
                    .checked_add(extent)?
                    .checked_sub(1)?
                    .checked_div(extent)?;
                let first = tile_of(lo, origin, extent)?;
                Some((
                    tiles.checked_mul(extent)?,
                    first.checked_mul(extent)?.checked_add(origin)?,
                ))
            }
            None => Some((step, lo)),
        }
    };
    let Some((step, start)) = steps().filter(|&(step, _)| step > 0) else {
        return whole();
    };
    let mut out = Vec::new();
    let mut a = start;
    while a <= hi {
        let b = a.saturating_add(step.saturating_sub(1));
        if let Some(part) = clip(schema, sub, 0, a.max(lo), b.min(hi)) {
            out.push(part);
        }
        a = b.saturating_add(1);
    }
    if out.is_empty() {
        return whole();
    }
    out
}

/// Whether a read's results follow each dimension's ranges in the order
/// given rather than the coordinates' order: dense row- and col-major
/// reads, and sparse ones of one dimension whose kept cells all come from
/// one fragment (TileDB's legacy sparse reader sorts them otherwise). For
/// those, pieces are cut between ranges, and the sparse choice is made
/// per piece, as TileDB's partitions make it per partition.
pub(crate) fn follows_ranges(schema: &ArraySchema, layout: ResultLayout) -> bool {
    matches!(layout, ResultLayout::RowMajor | ResultLayout::ColMajor)
        && (schema.array_type == ArrayType::Dense || schema.domain.dimensions.len() == 1)
}

/// Whether `ranges` (not the whole dimension) hold a single value.
fn one_value(ops: &RangeOps, ranges: &[Range]) -> bool {
    let Some(first) = ranges.first() else {
        return false;
    };
    let v = first.bounds().0;
    ranges.iter().all(|r| {
        let (lo, hi) = r.bounds();
        ops.cmp_values(lo, v) == Ordering::Equal && ops.cmp_values(hi, v) == Ordering::Equal
    })
}

/// The value right after `v` along a float or string dimension.
fn successor(datatype: Datatype, v: &[u8]) -> Option<Vec<u8>> {
    match datatype {
        Datatype::Float32 => {
            let x = f32::from_le_bytes(v.try_into().ok()?);
            Some(x.next_up().to_le_bytes().to_vec())
        }
        Datatype::Float64 => {
            let x = f64::from_le_bytes(v.try_into().ok()?);
            Some(x.next_up().to_le_bytes().to_vec())
        }
        t if t.is_string() => Some([v, &[0]].concat()),
        _ => None,
    }
}

/// A run of one fragment's tiles cut in two: the first part the longest
/// prefix of `tiles` (those of the run the piece overlaps, in order) whose
/// `cost` fits `aim`, one tile at the least and all but one at the most;
/// at the middle tile where all fit. `None` with fewer than two tiles.
/// Filling each piece up to the aim, not halving until one fits, makes
/// the fewest pieces, and a piece costs a request per file it reads
/// (halves come out between half the aim and the aim: W7's Hilbert read
/// under 16 KiB made 16 runs of a fragment where 13 hold it).
pub(crate) fn split_run(
    tiles: &[u64],
    run: Range64,
    aim: u64,
    cost: impl Fn(u64) -> u64,
) -> Option<(Range64, Range64)> {
    if tiles.len() < 2 {
        return None;
    }
    let mut sum = 0u64;
    let fit = (tiles.iter())
        .take_while(|&&t| {
            sum = sum.saturating_add(cost(t));
            sum <= aim
        })
        .count();
    let k = match fit {
        0 => 1,
        n if n >= tiles.len() => tiles.len() / 2,
        n => n,
    };
    let at = *tiles.get(k)?;
    Some((run.start..at, at..run.end))
}

type Range64 = std::ops::Range<u64>;

/// The lesser of two values along one dimension (the first on a tie).
fn min_of<'v>(o: &RangeOps, a: &'v [u8], b: &'v [u8]) -> &'v [u8] {
    if o.cmp_values(b, a) == Ordering::Less {
        b
    } else {
        a
    }
}

/// The greater of two values along one dimension (the first on a tie).
fn max_of<'v>(o: &RangeOps, a: &'v [u8], b: &'v [u8]) -> &'v [u8] {
    if o.cmp_values(a, b) == Ordering::Less {
        b
    } else {
        a
    }
}

/// The lowest start and highest end of `ranges`.
fn span<'r>(o: &RangeOps, ranges: &'r [Range]) -> Option<(&'r [u8], &'r [u8])> {
    let (mut bottom, mut top) = ranges.first()?.bounds();
    for r in ranges {
        let (a, b) = r.bounds();
        bottom = min_of(o, bottom, a);
        top = max_of(o, top, b);
    }
    Some((bottom, top))
}

/// `sub` with dimension `d`'s `ranges` cut after `at`: the parts at or
/// below it, and those from `next` (the value right after it) on; `None`
/// when either side is empty.
fn cut_after(
    o: &RangeOps,
    sub: &Subarray,
    d: usize,
    ranges: &[Range],
    at: &[u8],
) -> Option<(Subarray, Subarray)> {
    let next = successor(o.datatype(), at)?;
    let var = o.datatype().is_string();
    let (mut left, mut right) = (Vec::new(), Vec::new());
    for r in ranges {
        let (a, b) = r.bounds();
        if o.cmp_values(a, at) != Ordering::Greater {
            left.push(Range::from_bounds(a, min_of(o, b, at), var));
        }
        if o.cmp_values(b, &next) != Ordering::Less {
            right.push(Range::from_bounds(max_of(o, a, &next), b, var));
        }
    }
    if left.is_empty() || right.is_empty() {
        return None;
    }
    let (mut l, mut r) = (sub.clone(), sub.clone());
    l.set_ranges(d, left);
    r.set_ranges(d, right);
    Some((l, r))
}

/// `sub` cut along float or string dimension `d` after the median of the
/// tile bounds (`bounds`, of the MBRs the piece overlaps) that lie inside
/// it, below its top; `None` when none does.
fn split_at_tile_bound(
    ops: &[RangeOps],
    sub: &Subarray,
    d: usize,
    bounds: &[(Vec<u8>, Vec<u8>)],
) -> Option<(Subarray, Subarray)> {
    let o = ops.get(d)?;
    // The cells the piece can hold lie within the tiles' bounds.
    let (first, rest) = bounds.split_first()?;
    let (mut lo, mut hi) = (first.0.as_slice(), first.1.as_slice());
    for (a, b) in rest {
        lo = min_of(o, lo, a);
        hi = max_of(o, hi, b);
    }
    let ranges: Vec<Range> = match sub.ranges(d) {
        [] => vec![Range::from_bounds(lo, hi, o.datatype().is_string())],
        rs => rs.to_vec(),
    };
    // A cut at or above the lowest range's start and below the highest
    // range's end (and the tiles' top) leaves ranges on both sides.
    let (bottom, top) = span(o, &ranges)?;
    let top = min_of(o, top, hi);
    let mut candidates: Vec<&[u8]> = bounds
        .iter()
        .flat_map(|(a, b)| [a.as_slice(), b.as_slice()])
        .filter(|b| {
            o.cmp_values(b, top) == Ordering::Less && o.cmp_values(b, bottom) != Ordering::Less
        })
        .collect();
    if candidates.is_empty() {
        return None;
    }
    candidates.sort_by(|a, b| o.cmp_values(a, b));
    let median = candidates.get(candidates.len().checked_div(2)?)?;
    cut_after(o, sub, d, &ranges, median)
}

/// `sub` cut along float dimension `d` at the space tile boundary amid the
/// tiles it spans, as the global order needs: `Some(None)` when it spans
/// one tile or `d` has no tiles (a string dimension, which the tile order
/// passes by), `None` when that cannot be worked out.
fn split_at_space_tile(
    dim: &Dimension,
    o: &RangeOps,
    sub: &Subarray,
    d: usize,
) -> Option<Option<(Subarray, Subarray)>> {
    if dim.is_var() || dim.tile_extent.is_none() {
        return Some(None);
    }
    let ranges: Vec<Range> = match sub.ranges(d) {
        [] => {
            let (lo, hi) = dim.bounds()?;
            vec![Range::from_bounds(lo, hi, false)]
        }
        rs => rs.to_vec(),
    };
    let (bottom, top) = span(o, &ranges)?;
    let (first, last) = (tile_index(dim, bottom)?, tile_index(dim, top)?);
    if first >= last {
        return Some(None);
    }
    let k = first.checked_add(last.checked_sub(first)?.checked_div(2)?)?;
    let at = last_in_tile(dim, bottom, top, k)?;
    cut_after(o, sub, d, &ranges, &at).map(Some)
}

/// A float's bytes to its place among the floats, and back.
type FloatKeys = (fn(&[u8]) -> Option<u64>, fn(u64) -> Vec<u8>);

/// The greatest float in `[lo, hi]` whose space tile is at most `k`, where
/// `lo`'s is and `hi`'s is not: a binary search over the floats in order
/// (tile indexes grow with the value, and TileDB's float arithmetic
/// decides where a tile ends, not the extent's multiples).
fn last_in_tile(dim: &Dimension, lo: &[u8], hi: &[u8], k: u64) -> Option<Vec<u8>> {
    // Floats as unsigned integers in the same order (sign bit flipped for
    // positives, every bit for negatives).
    let (key, value): FloatKeys = match dim.datatype {
        Datatype::Float32 => (
            |b| {
                let x = u32::from_le_bytes(b.try_into().ok()?);
                Some(u64::from(if x >> 31 == 1 { !x } else { x | 1 << 31 }))
            },
            |k| {
                let k = k as u32;
                let x = if k >> 31 == 1 { k & !(1 << 31) } else { !k };
                x.to_le_bytes().to_vec()
            },
        ),
        Datatype::Float64 => (
            |b| {
                let x = u64::from_le_bytes(b.try_into().ok()?);
                Some(if x >> 63 == 1 { !x } else { x | 1 << 63 })
            },
            |k| {
                let x = if k >> 63 == 1 { k & !(1 << 63) } else { !k };
                x.to_le_bytes().to_vec()
            },
        ),
        _ => return None,
    };
    let (mut yes, mut no) = (key(lo)?, key(hi)?);
    while no > yes.saturating_add(1) {
        let mid = yes.saturating_add(no.saturating_sub(yes).checked_div(2)?);
        if tile_index(dim, &value(mid))? <= k {
            yes = mid;
        } else {
            no = mid;
        }
    }
    Some(value(yes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_format::{ArrayType, Datatype};
    use tdb_schema::{Attribute, Dimension, Range};

    fn schema(tile_order: Layout, cell_order: Layout) -> ArraySchema {
        ArraySchema::builder(ArrayType::Sparse)
            .dimension(
                Dimension::builder("r", Datatype::Int32)
                    .domain(1i32, 10)
                    .tile_extent(4i32),
            )
            .dimension(
                Dimension::builder("c", Datatype::Int64)
                    .domain(0i64, 99)
                    .tile_extent(10i64),
            )
            .attribute(Attribute::builder("a", Datatype::Int32))
            .tile_order(tile_order)
            .cell_order(cell_order)
            .build()
            .unwrap()
    }

    /// [`split`] with no tile bounds (integer dimensions need none).
    fn cut(
        s: &ArraySchema,
        sub: &Subarray,
        order: &[(usize, Grain)],
        tiles_only: bool,
    ) -> Option<(Subarray, Subarray)> {
        let ops = tdb_index::DomainOps::new(&s.domain).unwrap();
        let layout = match order.first() {
            Some((_, Grain::Tile)) => ResultLayout::GlobalOrder,
            _ => ResultLayout::RowMajor,
        };
        let in_order = follows_ranges(s, layout);
        split(s, ops.dims(), sub, order, tiles_only, in_order, &|_, _| {
            Vec::new()
        })
    }

    fn bounds(s: &ArraySchema, sub: &Subarray, d: usize) -> Vec<(i128, i128)> {
        int_ranges(s, sub, d).unwrap()
    }

    /// A run is cut after the most tiles whose costs fit the aim: pieces
    /// as full as the aim allows, one tile at the least, never all.
    #[test]
    fn runs_are_cut_where_the_aim_is_filled() {
        // Tiles 2, 3, 5, 7, 8 of the run 2..9, each costing its number.
        let tiles = [2, 3, 5, 7, 8];
        let cut = |aim| split_run(&tiles, 2..9, aim, |t| t);
        assert_eq!(cut(10), Some((2..7, 7..9)));
        assert_eq!(cut(9), Some((2..5, 5..9)));
        assert_eq!(cut(17), Some((2..8, 8..9)));
        // The first tile alone is past the aim: cut after it.
        assert_eq!(cut(1), Some((2..3, 3..9)));
        // All fit (not asked for by the reader): at the middle tile.
        assert_eq!(cut(100), Some((2..5, 5..9)));
        assert_eq!(split_run(&[4], 0..9, 1, |t| t), None);
    }

    #[test]
    fn row_major_cuts_the_first_dimension_then_the_next() {
        let s = schema(Layout::RowMajor, Layout::RowMajor);
        let order = split_order(&s, ResultLayout::RowMajor);
        // Rows 1..=10 in tiles of 4: the cut falls on a tile boundary, so
        // no tile is read by both pieces.
        let (a, b) = cut(&s, &Subarray::new(2), &order, false).unwrap();
        assert_eq!(bounds(&s, &a, 0), [(1, 8)]);
        assert_eq!(bounds(&s, &b, 0), [(9, 10)]);
        assert_eq!(bounds(&s, &b, 1), [(0, 99)]);
        // Rows 9..=10 lie in one tile: cut by value only when the budget
        // needs it, never merely to keep pieces small.
        assert!(cut(&s, &b, &order, true).is_none());
        let (c, d) = cut(&s, &b, &order, false).unwrap();
        assert_eq!(
            (bounds(&s, &c, 0), bounds(&s, &d, 0)),
            (vec![(9, 9)], vec![(10, 10)])
        );
        // One row left: the columns are cut.
        let mut one = Subarray::new(2);
        one.add_range(
            0,
            Range::from_bounds(&3i32.to_le_bytes(), &3i32.to_le_bytes(), false),
        );
        let (a, b) = cut(&s, &one, &order, false).unwrap();
        assert_eq!(
            (bounds(&s, &a, 1), bounds(&s, &b, 1)),
            (vec![(0, 49)], vec![(50, 99)])
        );
        assert_eq!(bounds(&s, &a, 0), [(3, 3)]);
    }

    /// In no order, a piece whose rows lie in one tile is cut between its
    /// column tiles, where a row-major read cuts nothing at tiles.
    #[test]
    fn any_order_cuts_the_next_dimension_at_tiles() {
        let s = schema(Layout::RowMajor, Layout::RowMajor);
        let order = split_order(&s, ResultLayout::RowMajor);
        let mut row = Subarray::new(2);
        row.add_range(
            0,
            Range::from_bounds(&9i32.to_le_bytes(), &10i32.to_le_bytes(), false),
        );
        assert!(cut(&s, &row, &order, true).is_none());
        let (a, b) = cut(&s, &row, &any_order(&order), true).unwrap();
        assert_eq!(bounds(&s, &a, 0), [(9, 10)]);
        assert_eq!(
            (bounds(&s, &a, 1), bounds(&s, &b, 1)),
            (vec![(0, 49)], vec![(50, 99)])
        );
        // The right half's five column tiles are cut again; one column
        // tile has nothing to cut at tiles.
        assert!(cut(&s, &b, &any_order(&order), true).is_some());
        let mut one = row.clone();
        one.set_ranges(
            1,
            vec![Range::from_bounds(
                &60i64.to_le_bytes(),
                &69i64.to_le_bytes(),
                false,
            )],
        );
        assert!(cut(&s, &one, &any_order(&order), true).is_none());
    }

    #[test]
    fn parallel_parts_cut_the_first_dimension_at_tiles_within_the_written_span() {
        let s = schema(Layout::RowMajor, Layout::RowMajor);
        let r = |lo: i32, hi: i32| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
        let whole = Subarray::new(2);
        // Rows 1..=10 in tiles of 4 (1-4, 5-8, 9-12), three parts at most.
        let parts = split_for_parallel(&s, &whole, None, 3);
        let rows: Vec<_> = parts.iter().map(|p| bounds(&s, p, 0)).collect();
        assert_eq!(rows, [vec![(1, 4)], vec![(5, 8)], vec![(9, 10)]]);
        assert!(parts.iter().all(|p| bounds(&s, p, 1) == [(0, 99)]));
        // Two parts: two tiles each at most.
        let rows: Vec<_> = split_for_parallel(&s, &whole, None, 2)
            .iter()
            .map(|p| bounds(&s, p, 0))
            .collect();
        assert_eq!(rows, [vec![(1, 8)], vec![(9, 10)]]);
        // Written only in rows 6..=7: one part (inside one tile).
        let ned = [
            r(6, 7),
            Range::from_bounds(&0i64.to_le_bytes(), &9i64.to_le_bytes(), false),
        ];
        let parts = split_for_parallel(&s, &whole, Some(&ned), 4);
        assert_eq!(parts.len(), 1);
        assert_eq!(bounds(&s, &parts[0], 0), [(6, 7)]);
        // A subarray's ranges are kept, each in the part it falls in.
        let mut sub = Subarray::new(2);
        sub.add_range(0, r(2, 3)).add_range(0, r(9, 9));
        let rows: Vec<_> = split_for_parallel(&s, &sub, None, 8)
            .iter()
            .map(|p| bounds(&s, p, 0))
            .collect();
        assert_eq!(rows, [vec![(2, 3)], vec![(9, 9)]]);
        // One part asked: the subarray as it is.
        assert_eq!(split_for_parallel(&s, &sub, None, 1), [sub]);
    }

    #[test]
    fn global_order_cuts_at_tile_boundaries_and_ranges_keep_their_order() {
        let s = schema(Layout::ColMajor, Layout::RowMajor);
        let order = split_order(&s, ResultLayout::GlobalOrder);
        // Col-major tiles: the last dimension first, at a multiple of 10.
        let (a, b) = cut(&s, &Subarray::new(2), &order, false).unwrap();
        assert_eq!(
            (bounds(&s, &a, 1), bounds(&s, &b, 1)),
            (vec![(0, 49)], vec![(50, 99)])
        );
        // Two ranges with a gap: each side keeps its part of each range.
        let mut two = Subarray::new(2);
        let r = |lo: i64, hi: i64| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
        two.add_range(1, r(5, 12)).add_range(1, r(70, 71));
        let (a, b) = cut(&s, &two, &order, false).unwrap();
        assert_eq!(bounds(&s, &a, 1), [(5, 12)]);
        assert_eq!(bounds(&s, &b, 1), [(70, 71)]);
        // Hilbert global order cannot be cut.
        let h = schema(Layout::RowMajor, Layout::Hilbert);
        assert!(split_order(&h, ResultLayout::GlobalOrder).is_empty());
    }

    #[test]
    fn a_dense_dimension_with_several_ranges_is_cut_between_them_in_their_order() {
        let s = ArraySchema::builder(ArrayType::Dense)
            .dimension(
                Dimension::builder("r", Datatype::Int32)
                    .domain(1i32, 16)
                    .tile_extent(4i32),
            )
            .attribute(Attribute::builder("a", Datatype::Int32))
            .build()
            .unwrap();
        let r = |lo: i32, hi: i32| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
        let mut sub = Subarray::new(1);
        sub.add_range(0, r(9, 14))
            .add_range(0, r(2, 5))
            .add_range(0, r(4, 7));
        // Results follow the ranges as given: a cut by value (at 8) would
        // put 2..=7 before 9..=14.
        let (a, b) = cut(&s, &sub, &split_order(&s, ResultLayout::RowMajor), false).unwrap();
        assert_eq!(bounds(&s, &a, 0), [(9, 14)]);
        assert_eq!(bounds(&s, &b, 0), [(2, 5), (4, 7)]);
        // The global order does not follow them: cut at a tile boundary.
        let (a, b) = cut(&s, &sub, &split_order(&s, ResultLayout::GlobalOrder), false).unwrap();
        assert_eq!(bounds(&s, &a, 0), [(2, 5), (4, 7)]);
        assert_eq!(bounds(&s, &b, 0), [(9, 14)]);
    }

    #[test]
    fn a_single_cell_cannot_be_cut() {
        let s = schema(Layout::RowMajor, Layout::RowMajor);
        let mut one = Subarray::new(2);
        one.add_range(
            0,
            Range::from_bounds(&3i32.to_le_bytes(), &3i32.to_le_bytes(), false),
        );
        one.add_range(
            1,
            Range::from_bounds(&7i64.to_le_bytes(), &7i64.to_le_bytes(), false),
        );
        assert!(cut(&s, &one, &split_order(&s, ResultLayout::ColMajor), false).is_none());
    }

    /// A sparse schema with a float64 and a string dimension.
    fn float_string() -> ArraySchema {
        ArraySchema::builder(ArrayType::Sparse)
            .dimension(
                Dimension::builder("f", Datatype::Float64)
                    .domain(0f64, 100.0)
                    .tile_extent(10f64),
            )
            .dimension(tdb_schema::DimensionBuilder::string("s"))
            .dimension(
                Dimension::builder("i", Datatype::Int32)
                    .domain(0i32, 9)
                    .tile_extent(10i32),
            )
            .attribute(Attribute::builder("a", Datatype::Int32))
            .build()
            .unwrap()
    }

    /// Cuts `sub` again and again, as the reader does, with the tiles of
    /// `mbrs` (per dimension: lo, hi) that a piece overlaps: the pieces.
    fn pieces(
        s: &ArraySchema,
        sub: Subarray,
        layout: ResultLayout,
        mbrs: &[Vec<(Vec<u8>, Vec<u8>)>],
    ) -> Vec<Subarray> {
        let ops = tdb_index::DomainOps::new(&s.domain).unwrap();
        let bounds = |d: usize, piece: &Subarray| -> Vec<(Vec<u8>, Vec<u8>)> {
            mbrs.iter()
                .filter(|mbr| {
                    mbr.iter().enumerate().all(|(k, (lo, hi))| {
                        let r = Range::from_bounds(lo, hi, k == 1);
                        let rs = piece.ranges(k);
                        rs.is_empty() || rs.iter().any(|p| ops.dims()[k].overlaps(p, &r))
                    })
                })
                .map(|mbr| mbr[d].clone())
                .collect()
        };
        let order = split_order(s, layout);
        let (mut stack, mut out) = (vec![sub], Vec::new());
        while let Some(p) = stack.pop() {
            assert!(out.len() < 100, "cutting does not end");
            // As the reader's estimate: one tile always fits.
            if bounds(0, &p).len() <= 1 {
                out.push(p);
                continue;
            }
            match split(s, ops.dims(), &p, &order, false, false, &bounds) {
                Some((a, b)) => {
                    stack.push(b);
                    stack.push(a);
                }
                None => out.push(p),
            }
        }
        out
    }

    fn f(v: f64) -> Vec<u8> {
        v.to_le_bytes().to_vec()
    }

    fn fbounds(sub: &Subarray) -> Vec<(f64, f64)> {
        let v = |b: &[u8]| f64::from_le_bytes(b.try_into().unwrap());
        sub.ranges(0)
            .iter()
            .map(|r| (v(r.bounds().0), v(r.bounds().1)))
            .collect()
    }

    #[test]
    fn float_dimensions_are_cut_after_tile_bounds_until_one_tile_is_left() {
        let s = float_string();
        let whole = |lo: f64, hi: f64| {
            vec![
                (f(lo), f(hi)),
                (b"a".to_vec(), b"z".to_vec()),
                (0i32.to_le_bytes().to_vec(), 9i32.to_le_bytes().to_vec()),
            ]
        };
        let mbrs: Vec<_> = (0..4)
            .map(|t| whole(t as f64 * 10.0, t as f64 * 10.0 + 9.5))
            .collect();
        let got = pieces(&s, Subarray::new(3), ResultLayout::RowMajor, &mbrs);
        // The first cut follows the median bound, 19.5; every piece then
        // holds one tile, and the pieces cover the data without a gap.
        let up = |v: f64| v.next_up();
        assert_eq!(
            got.iter().map(fbounds).collect::<Vec<_>>(),
            [
                vec![(0.0, 9.5)],
                vec![(up(9.5), 19.5)],
                vec![(up(19.5), 29.5)],
                vec![(up(29.5), 39.5)],
            ]
        );
        // A subarray's own ranges are kept where they lie: the cut falls
        // inside them, and a range wholly on one side stays there.
        let mut sub = Subarray::new(3);
        sub.add_range(0, Range::from_bounds(&f(5.0), &f(25.0), false))
            .add_range(0, Range::from_bounds(&f(31.0), &f(32.0), false));
        let got = pieces(&s, sub, ResultLayout::Unordered, &mbrs);
        assert_eq!(
            got.iter().map(fbounds).collect::<Vec<_>>(),
            [
                vec![(5.0, 9.5)],
                vec![(up(9.5), 10.0)],
                vec![(up(10.0), 19.5)],
                vec![(up(19.5), 20.0)],
                vec![(up(20.0), 25.0)],
                vec![(31.0, 32.0)],
            ]
        );
        // Tiles whose bounds overlap give fewer places to cut, never a
        // wrong one: the pieces follow each other without a gap.
        let wide = [whole(0.0, 40.0), whole(1.0, 2.0)];
        let got = pieces(&s, Subarray::new(3), ResultLayout::RowMajor, &wide);
        assert_eq!(
            got.iter().map(fbounds).collect::<Vec<_>>(),
            [
                vec![(0.0, 0.0)],
                vec![(up(0.0), 1.0)],
                vec![(up(1.0), 2.0)],
                vec![(up(2.0), 40.0)],
            ]
        );
        // The global order cuts at space tiles (multiples of 10 here)
        // first: each piece starts where a tile does.
        let got = pieces(&s, Subarray::new(3), ResultLayout::GlobalOrder, &mbrs);
        let below = |v: f64| v.next_down();
        assert_eq!(
            got.iter().map(fbounds).collect::<Vec<_>>(),
            [
                vec![(0.0, below(10.0))],
                vec![(10.0, below(20.0))],
                vec![(20.0, below(30.0))],
                vec![(30.0, below(60.0))],
                vec![(60.0, 100.0)],
            ]
        );
    }

    #[test]
    fn string_dimensions_are_cut_before_the_next_string_and_one_string_passes_on() {
        let s = float_string();
        let tile = |lo: &str, hi: &str, i: (i32, i32)| {
            vec![
                (f(1.0), f(1.0)),
                (lo.as_bytes().to_vec(), hi.as_bytes().to_vec()),
                (i.0.to_le_bytes().to_vec(), i.1.to_le_bytes().to_vec()),
            ]
        };
        let mbrs = [
            tile("a", "c", (0, 9)),
            tile("c", "f", (0, 9)),
            tile("g", "k", (0, 9)),
        ];
        // f holds one value in every tile (a single range pins it): s is cut.
        let mut sub = Subarray::new(3);
        sub.add_range(0, Range::from_bounds(&f(1.0), &f(1.0), false));
        let got = pieces(&s, sub.clone(), ResultLayout::RowMajor, &mbrs);
        let strs = |p: &Subarray| -> Vec<(String, String)> {
            p.ranges(1)
                .iter()
                .map(|r| {
                    let (a, b) = r.bounds();
                    (
                        String::from_utf8_lossy(a).into(),
                        String::from_utf8_lossy(b).into(),
                    )
                })
                .collect()
        };
        assert_eq!(
            got.iter().map(strs).collect::<Vec<_>>(),
            [
                vec![("a".into(), "a".into())],
                vec![("a\0".into(), "c".into())],
                vec![("c\0".into(), "f".into())],
                vec![("f\0".into(), "g".into())],
                vec![("g\0".into(), "k".into())],
            ]
        );
        // One string: the integer dimension after it is cut.
        sub.add_range(1, Range::from_bounds(b"c", b"c", true));
        let got = pieces(&s, sub, ResultLayout::RowMajor, &mbrs);
        assert_eq!(got.len(), 10);
        assert!(got
            .iter()
            .all(|p| strs(p) == [("c".to_owned(), "c".to_owned())]));
    }
}
