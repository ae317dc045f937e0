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
//! exact; a tile overlapping several pieces is read once per piece.

use super::plan::int_ranges;
use crate::{ResultLayout, Subarray};
use tdb_format::Layout;
use tdb_index::dense::{int_range_of, origin_and_extent};
use tdb_schema::ArraySchema;

/// How finely one step of the split sequence cuts its dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grain {
    /// At tile boundaries (global order across tiles).
    Tile,
    /// Anywhere.
    Value,
}

/// The dimensions a read may split, in order. Empty where no split keeps
/// the result order (Hilbert global order).
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
fn clip(schema: &ArraySchema, sub: &Subarray, d: usize, lo: i128, hi: i128) -> Option<Subarray> {
    let dim = &schema.domain.dimensions[d];
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
/// first dimension to cut lies in one tile). `None` when nothing can be cut.
pub(crate) fn split(
    schema: &ArraySchema,
    sub: &Subarray,
    order: &[(usize, Grain)],
    tiles_only: bool,
) -> Option<(Subarray, Subarray)> {
    for &(d, grain) in order {
        let Some(ranges) = int_ranges(schema, sub, d) else {
            // Cells along a non-integer dimension cannot be cut in order.
            return None;
        };
        let lo = ranges.iter().map(|r| r.0).min()?;
        let hi = ranges.iter().map(|r| r.1).max()?;
        let at_tile = origin_and_extent(&schema.domain.dimensions[d]).and_then(|(origin, ext)| {
            let (tlo, thi) = ((lo - origin).div_euclid(ext), (hi - origin).div_euclid(ext));
            (tlo < thi).then(|| origin + ((tlo + thi) / 2 + 1) * ext - 1)
        });
        let cut = match (grain, at_tile) {
            (_, Some(cut)) => Some(cut),
            (Grain::Value, None) if lo < hi && tiles_only => return None,
            (Grain::Value, None) => (lo < hi).then(|| lo + (hi - lo) / 2),
            (Grain::Tile, None) => None,
        };
        let Some(cut) = cut else {
            continue;
        };
        // `lo` lies left of the cut and `hi` right of it: both halves hold
        // cells.
        if let (Some(a), Some(b)) = (
            clip(schema, sub, d, lo, cut),
            clip(schema, sub, d, cut + 1, hi),
        ) {
            return Some((a, b));
        }
    }
    None
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

    fn bounds(s: &ArraySchema, sub: &Subarray, d: usize) -> Vec<(i128, i128)> {
        int_ranges(s, sub, d).unwrap()
    }

    #[test]
    fn row_major_cuts_the_first_dimension_then_the_next() {
        let s = schema(Layout::RowMajor, Layout::RowMajor);
        let order = split_order(&s, ResultLayout::RowMajor);
        // Rows 1..=10 in tiles of 4: the cut falls on a tile boundary, so
        // no tile is read by both pieces.
        let (a, b) = split(&s, &Subarray::new(2), &order, false).unwrap();
        assert_eq!(bounds(&s, &a, 0), [(1, 8)]);
        assert_eq!(bounds(&s, &b, 0), [(9, 10)]);
        assert_eq!(bounds(&s, &b, 1), [(0, 99)]);
        // Rows 9..=10 lie in one tile: cut by value only when the budget
        // needs it, never merely to keep pieces small.
        assert!(split(&s, &b, &order, true).is_none());
        let (c, d) = split(&s, &b, &order, false).unwrap();
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
        let (a, b) = split(&s, &one, &order, false).unwrap();
        assert_eq!(
            (bounds(&s, &a, 1), bounds(&s, &b, 1)),
            (vec![(0, 49)], vec![(50, 99)])
        );
        assert_eq!(bounds(&s, &a, 0), [(3, 3)]);
    }

    #[test]
    fn global_order_cuts_at_tile_boundaries_and_ranges_keep_their_order() {
        let s = schema(Layout::ColMajor, Layout::RowMajor);
        let order = split_order(&s, ResultLayout::GlobalOrder);
        // Col-major tiles: the last dimension first, at a multiple of 10.
        let (a, b) = split(&s, &Subarray::new(2), &order, false).unwrap();
        assert_eq!(
            (bounds(&s, &a, 1), bounds(&s, &b, 1)),
            (vec![(0, 49)], vec![(50, 99)])
        );
        // Two ranges with a gap: each side keeps its part of each range.
        let mut two = Subarray::new(2);
        let r = |lo: i64, hi: i64| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
        two.add_range(1, r(5, 12)).add_range(1, r(70, 71));
        let (a, b) = split(&s, &two, &order, false).unwrap();
        assert_eq!(bounds(&s, &a, 1), [(5, 12)]);
        assert_eq!(bounds(&s, &b, 1), [(70, 71)]);
        // Hilbert global order cannot be cut.
        let h = schema(Layout::RowMajor, Layout::Hilbert);
        assert!(split_order(&h, ResultLayout::GlobalOrder).is_empty());
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
        assert!(split(&s, &one, &split_order(&s, ResultLayout::ColMajor), false).is_none());
    }
}
