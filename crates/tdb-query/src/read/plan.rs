//! The plan of a read: per fragment, its metadata, schema and fields, the
//! tiles a piece touches, and the dense coordinates a subarray covers.

use super::fields::{FieldInfo, FragField};
use crate::{QueryError, Result, Subarray};
use std::sync::Arc;
use tdb_format::Datatype;
use tdb_fragment::fragment_metadata::{Section, SectionData};
use tdb_fragment::{FragmentMetadata, TimestampedFile};
use tdb_index::dense::{int_range, int_value, tile_of};
use tdb_index::{NDRange, RTree, RangeOps};
use tdb_schema::{ArraySchema, Range};

/// Where a result cell comes from: a cell of a decoded tile, or fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CellRef {
    pub frag: u32,
    pub cell: u32,
    pub tile: u64,
}

/// Per fragment: its metadata (sections load into it), its schema and how
/// each field slot is stored there.
pub(crate) struct FragPlan {
    pub file: TimestampedFile,
    pub meta: FragmentMetadata,
    /// Shared by the plans of fragments written under one schema.
    pub schema: Arc<ArraySchema>,
    /// By field slot (the reader's `fields` index).
    pub fields: Vec<Option<FragField>>,
    pub timestamps: Option<FragField>,
    pub delete_timestamps: Option<FragField>,
    /// Candidate tiles (those the subarray may touch).
    pub tiles: Vec<u64>,
    /// Sparse fragments: the R-tree over each tile's MBR (parsed, or built
    /// over the MBRs of fragments too old for one), shared by the reads of
    /// a snapshot.
    pub rtree: Arc<RTree>,
    /// Dense fragments: the tile grid over the non-empty domain, made once
    /// ([`FragPlan::grid`]: a read cutting thousands of pieces asked for
    /// it several times a piece, 8% of `dense_large_tiles` row-major
    /// under 16 KiB).
    pub grid: std::sync::OnceLock<Option<tdb_index::dense::FragmentGrid>>,
}

impl FragPlan {
    /// The timestamp of a cell of this fragment that keeps none of its
    /// own: the fragment's first.
    pub fn cell_stamp(&self) -> u64 {
        self.file.name.t1
    }

    /// Each tile's MBR (sparse fragments).
    pub fn leaves(&self) -> &[NDRange] {
        self.rtree.leaves()
    }

    /// Whether every cell of sparse tile `t` lies within `sub` along
    /// dimension `d`, by the tile's MBR: that dimension rules out none of
    /// its cells, so its coordinates need no check.
    pub fn tile_within_dim(&self, ops: &[RangeOps], sub: &Subarray, t: u64, d: usize) -> bool {
        let m = (self.leaves().get(t as usize)).and_then(|mbr| mbr.get(d));
        m.zip(ops.get(d))
            .is_some_and(|(m, o)| range_within(o, m, sub.ranges(d)))
    }

    /// The tiles of this dense fragment that `sub` touches, in the order
    /// stored, by its tile grid (`None` where the grid cannot say).
    pub fn dense_tiles(&self, sub: &Subarray) -> Option<tdb_index::dense::TilesTouched> {
        self.grid()?
            .tiles_touched(&dense_coords(&self.schema, sub).ok()?)
    }

    /// This dense fragment's tile grid over its non-empty domain (`None`
    /// where it has none, or the grid cannot say).
    pub fn grid(&self) -> Option<&tdb_index::dense::FragmentGrid> {
        self.grid
            .get_or_init(|| {
                let ned = self.meta.footer.non_empty_domain.as_ref()?;
                let s = &self.schema;
                tdb_index::dense::FragmentGrid::new(&s.domain, s.tile_order, s.cell_order, ned)
            })
            .as_ref()
    }

    /// The tiles whose MBR overlaps `piece`, in order, found through the
    /// R-tree (a piece of a large read touches few of its tiles).
    pub fn tiles_overlapping(&self, ops: &[RangeOps], piece: &Subarray) -> Vec<u64> {
        self.rtree.leaves_where(|mbr| mbr_overlaps(ops, mbr, piece))
    }

    /// [`FragPlan::tiles_overlapping`] among the tiles of `run`: a short
    /// run's MBRs are looked at one by one instead of the R-tree walked
    /// (a read that spills plans thousands of pieces of one tile's cells,
    /// and walked the tree for each: 4% of `sparse_bounded_tiles` under 16
    /// KiB).
    pub fn tiles_overlapping_in(
        &self,
        ops: &[RangeOps],
        piece: &Subarray,
        run: &std::ops::Range<u64>,
    ) -> Vec<u64> {
        const SHORT: u64 = 64;
        if run.end.saturating_sub(run.start) > SHORT {
            let mut tiles = self.tiles_overlapping(ops, piece);
            tiles.retain(|t| run.contains(t));
            return tiles;
        }
        let leaves = self.leaves();
        (run.clone())
            .filter(|&t| {
                usize::try_from(t)
                    .ok()
                    .and_then(|t| leaves.get(t))
                    .is_some_and(|mbr| mbr_overlaps(ops, mbr, piece))
            })
            .collect()
    }

    /// How the field in `slot` is stored here: a requested field's slot,
    /// or [`TIMESTAMPS_SLOT`] or [`DELETE_TS_SLOT`].
    pub fn field(&self, slot: usize) -> Option<&FragField> {
        match slot {
            TIMESTAMPS_SLOT => self.timestamps.as_ref(),
            DELETE_TS_SLOT => self.delete_timestamps.as_ref(),
            s => self.fields.get(s)?.as_ref(),
        }
    }

    /// Cells tile `t` holds.
    pub fn cells(&self, t: u64, tile_num: u64) -> u64 {
        let f = &self.meta.footer;
        if f.dense {
            tdb_index::dense::tiledb_cell_num_per_tile(&self.schema.domain).unwrap_or(0)
        } else if t.saturating_add(1) == tile_num {
            f.last_tile_cell_num
        } else {
            self.schema.capacity
        }
    }

    /// Tile `t`'s min and max cell of field `slot` (`field`), from the
    /// fragment's tile metadata; `None` where it is not loaded or absent.
    pub fn tile_min_max(&self, slot: usize, field: &FieldInfo, t: u64) -> Option<(&[u8], &[u8])> {
        let ff = self.fields.get(slot)?.as_ref()?;
        let size = (!field.is_var()).then(|| field.cell_size());
        let t = usize::try_from(t).ok()?;
        let bound = |s: Section| match self.meta.section(s) {
            Some(SectionData::Bounds(b)) => b.value(t, size),
            _ => None,
        };
        Some((
            bound(Section::Mins(ff.index))?,
            bound(Section::Maxes(ff.index))?,
        ))
    }

    /// Tile `t`'s min and max of field `slot` where they bound every cell,
    /// for skipping tiles a condition rules out. A float's do only where
    /// the tile's sum shows no NaN and no saturation: TileDB's running
    /// bounds take a NaN and then the next value (`tdb_fragment::
    /// tile_metadata`), so they hold only the cells after the last NaN.
    pub fn tile_bounds(&self, slot: usize, field: &FieldInfo, t: u64) -> Option<(&[u8], &[u8])> {
        if matches!(field.datatype, Datatype::Float32 | Datatype::Float64) {
            let ff = self.fields.get(slot)?.as_ref()?;
            let sum = match self.meta.section(Section::Sums(ff.index))? {
                SectionData::Sums(v) => f64::from_bits(*v.get(usize::try_from(t).ok()?)?),
                _ => return None,
            };
            if !sum.is_finite() || sum.abs() == f64::MAX {
                return None;
            }
        }
        self.tile_min_max(slot, field, t)
    }

    pub fn tile_num(&self) -> u64 {
        let f = &self.meta.footer;
        if f.dense {
            f.tile_num(&self.schema).unwrap_or(0)
        } else {
            f.sparse_tile_num
        }
    }
}

/// Whether a leaf MBR may hold cells of the subarray.
pub(crate) fn mbr_overlaps(ops: &[RangeOps], mbr: &[Range], subarray: &Subarray) -> bool {
    ops.iter().zip(mbr).enumerate().all(|(d, (o, m))| {
        let r = subarray.ranges(d);
        r.is_empty() || r.iter().any(|r| o.overlaps(r, m))
    })
}

/// Whether the subarray holds all of `mbr`: per dimension, one range
/// covering it (or no range: the whole domain). Several ranges never count,
/// so no cell can be counted twice.
pub(crate) fn mbr_within(ops: &[RangeOps], mbr: &[Range], subarray: &Subarray) -> bool {
    ops.iter()
        .zip(mbr)
        .enumerate()
        .all(|(d, (o, m))| range_within(o, m, subarray.ranges(d)))
}

/// Whether every cell of `mbr` lies in the subarray, each dimension's
/// ranges taken as their union, as TileDB's unordered and global-order
/// readers sort and merge them (a cell counts once): per dimension, from
/// the MBR's low bound to its high one, ranges that overlap or touch in
/// turn. (Integer ranges side by side, `[0, 3]` and `[4, 9]`, do not
/// count as one: a tile across them is read, and answers alike.)
pub(crate) fn mbr_within_union(ops: &[RangeOps], mbr: &[Range], subarray: &Subarray) -> bool {
    ops.iter().zip(mbr).enumerate().all(|(d, (o, m))| {
        let ranges = subarray.ranges(d);
        range_within(o, m, ranges) || union_within(o, m, ranges)
    })
}

/// Whether the union of `ranges` holds all of `m` ([`mbr_within_union`]).
fn union_within(o: &RangeOps, m: &Range, ranges: &[Range]) -> bool {
    let (lo, hi) = m.bounds();
    let mut sorted: Vec<&Range> = ranges.iter().collect();
    sorted.sort_by(|a, b| o.cmp_values(a.bounds().0, b.bounds().0));
    // Covered from `lo` up to `reach`.
    let mut reach: Option<&[u8]> = None;
    for r in sorted {
        let (rlo, rhi) = r.bounds();
        if o.cmp_values(rlo, reach.unwrap_or(lo)).is_gt() {
            // A gap: later ranges start later still.
            return false;
        }
        if reach.is_none_or(|x| o.cmp_values(rhi, x).is_gt()) && o.cmp_values(rhi, lo).is_ge() {
            reach = Some(rhi);
        }
        if reach.is_some_and(|x| o.cmp_values(x, hi).is_ge()) {
            return true;
        }
    }
    false
}

/// Whether `ranges` (one dimension's) hold all of `m`, an MBR's range along
/// it, as [`mbr_within`] judges each dimension.
pub(crate) fn range_within(o: &RangeOps, m: &Range, ranges: &[Range]) -> bool {
    let (lo, hi) = m.bounds();
    match ranges {
        [] => true,
        [r] => o.contains(r, lo) && o.contains(r, hi),
        _ => false,
    }
}

/// Slots for a fragment's per-cell timestamps and delete timestamps, beyond
/// any field's slot.
pub(crate) const TIMESTAMPS_SLOT: usize = usize::MAX - 1;
pub(crate) const DELETE_TS_SLOT: usize = usize::MAX - 2;

/// How many of a dense fragment's tiles the bounding box of `sub` touches
/// (within the fragment's non-empty domain); `None` for non-integer
/// domains.
pub(crate) fn dense_tiles_touched(plan: &FragPlan, sub: &Subarray) -> Option<u64> {
    dense_tiles_at(plan, &dense_coords(&plan.schema, sub).ok()?)
}

/// [`dense_tiles_touched`] by a subarray's [`dense_coords`].
pub(crate) fn dense_tiles_at(plan: &FragPlan, coords: &[Vec<(i128, i128)>]) -> Option<u64> {
    // The grid keeps the tiling and the non-empty domain as integers (a
    // read cutting thousands of pieces asks this for each).
    let grid = plan.grid()?;
    let mut tiles: u64 = 1;
    for (((origin, ext), (nlo, nhi)), ranges) in grid.tiling().zip(grid.bounds()).zip(coords) {
        let (lo, hi) = int_span(ranges)?;
        let (lo, hi) = (lo.max(nlo), hi.min(nhi));
        if lo > hi {
            return Some(0);
        }
        let n = tile_of(hi, origin, ext)?
            .checked_sub(tile_of(lo, origin, ext)?)?
            .checked_add(1)?;
        tiles = tiles.checked_mul(u64::try_from(n).ok()?)?;
    }
    Some(tiles)
}

/// Dimension `d`'s ranges in `sub` as integers, the domain when it has
/// none; `None` for a dimension that is not an integer. (The reader checked
/// the ranges against the domain when it was built.)
pub(crate) fn int_ranges(
    schema: &ArraySchema,
    sub: &Subarray,
    d: usize,
) -> Option<Vec<(i128, i128)>> {
    let dim = schema.domain.dimensions.get(d)?;
    match sub.ranges(d) {
        [] => {
            let (lo, hi) = dim.bounds()?;
            Some(vec![(
                int_value(dim.datatype, lo)?,
                int_value(dim.datatype, hi)?,
            )])
        }
        rs => rs.iter().map(|r| int_range(dim, r)).collect(),
    }
}

/// The least and greatest values a dimension's integer ranges hold
/// (`None` for no range).
pub(crate) fn int_span(ranges: &[(i128, i128)]) -> Option<(i128, i128)> {
    let lo = ranges.iter().map(|r| r.0).min()?;
    let hi = ranges.iter().map(|r| r.1).max()?;
    Some((lo, hi))
}

/// Per dimension, integer ranges.
pub(crate) type IntRanges = Vec<Vec<(i128, i128)>>;

/// A dense read's result coordinates per dimension: the subarray's ranges
/// (or the domain) as integers.
pub(crate) fn dense_coords(schema: &ArraySchema, subarray: &Subarray) -> Result<IntRanges> {
    (schema.domain.dimensions.iter().enumerate())
        .map(|(d, dim)| {
            int_ranges(schema, subarray, d).ok_or_else(|| QueryError::Subarray {
                dim: dim.name.clone(),
                reason: "a dense dimension that is not an integer".into(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tile's MBR lies within the union of a dimension's ranges where
    /// they overlap or touch in turn from its low bound to its high one,
    /// in any order given; a gap (integers side by side too) rules it out.
    #[test]
    fn an_mbr_within_the_union_of_ranges() {
        let schema = tdb_schema::ArraySchema::builder(tdb_format::ArrayType::Sparse)
            .dimension(
                tdb_schema::Dimension::builder("x", tdb_format::Datatype::Int32)
                    .domain(0i32, 99)
                    .tile_extent(10i32),
            )
            .attribute(tdb_schema::Attribute::builder(
                "a",
                tdb_format::Datatype::Int32,
            ))
            .build()
            .unwrap();
        let ops = tdb_index::DomainOps::new(&schema.domain).unwrap();
        let ops = ops.dims();
        let r = |lo: i32, hi: i32| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
        let within = |mbr: (i32, i32), ranges: &[(i32, i32)]| {
            let mut sub = Subarray::new(1);
            for &(lo, hi) in ranges {
                sub.add_range(0, r(lo, hi));
            }
            mbr_within_union(ops, &[r(mbr.0, mbr.1)], &sub)
        };
        assert!(within((10, 30), &[]));
        assert!(within((10, 30), &[(0, 50)]));
        assert!(within((10, 30), &[(25, 40), (0, 12), (12, 25)]));
        assert!(within((10, 30), &[(60, 70), (5, 20), (15, 35)]));
        assert!(!within((10, 30), &[(0, 20), (22, 40)]), "a gap at 21");
        assert!(!within((10, 30), &[(0, 20), (21, 40)]), "side by side");
        assert!(!within((10, 30), &[(11, 40), (0, 5)]), "10 left out");
        assert!(!within((10, 30), &[(0, 15), (12, 29)]), "30 left out");
        // One range must hold the MBR alone for `mbr_within`.
        let mut sub = Subarray::new(1);
        sub.add_range(0, r(0, 20)).add_range(0, r(15, 40));
        assert!(!mbr_within(ops, &[r(10, 30)], &sub));
    }
}
