//! Where TileDB 2.30's dense reader reads the validity of a null test.
//!
//! Reading across its tiles' cell order (row-major results of col-major
//! tiles or the reverse, two or more dimensions), TileDB walks a tile in
//! cell slabs, each a range of the subarray along the layout's fastest
//! dimension within the tile, a cell `stride` cells after the one before;
//! of a slab's cells a fragment holds those from `start` on (where its
//! non-empty domain begins). A value test reads the slab's cell
//! `start + c` at `first + (start + c) * stride`, but a null test
//! (`== None`, `!= None`) reads the validity at `first + start + c * stride`
//! (`QueryCondition::apply_ast_node_dense`): where a fragment begins
//! inside a slab its null tests read other cells of its tile. tdb's dense
//! conditions test nulls there too, so that they keep the cells TileDB
//! keeps.

use super::Reader;
use crate::batch::Batch;
use crate::validity::ValidityRef;
use crate::{Column, Columns, ResultLayout};
use tdb_format::Layout;
use tdb_index::dense::{int_range, int_value, origin_and_extent, tile_of};

/// What places a dense read's null tests: present where they move.
pub(super) struct NullShift {
    /// The layout's fastest dimension, which slabs run along.
    pub step: usize,
    origin: i128,
    extent: i128,
    /// The subarray's ranges on `step` (its domain without any).
    ranges: Vec<(i128, i128)>,
    /// Cells between a slab's neighbours in a tile (TileDB's
    /// `Domain::stride`: the other dimensions' extents multiplied).
    stride: u64,
}

impl NullShift {
    /// The shift of `reader`'s null tests, `None` where they stay put.
    pub fn of(reader: &Reader) -> Option<NullShift> {
        let schema = reader.snapshot.schema();
        let dims = &schema.domain.dimensions;
        let (step, others) = match (reader.spec.layout, schema.cell_order) {
            (ResultLayout::RowMajor, Layout::ColMajor) => (
                dims.len().checked_sub(1)?,
                dims.get(..dims.len().checked_sub(1)?)?,
            ),
            (ResultLayout::ColMajor, Layout::RowMajor) => (0, dims.get(1..)?),
            _ => return None,
        };
        if others.is_empty() {
            return None;
        }
        let stride = (others.iter())
            .map(|d| origin_and_extent(d).map(|(_, e)| e))
            .try_fold(1i128, |acc, e| Some(acc.saturating_mul(e?)))?;
        let dim = dims.get(step)?;
        let (origin, extent) = origin_and_extent(dim)?;
        let mut ranges: Vec<(i128, i128)> = (reader.spec.subarray.ranges(step).iter())
            .filter_map(|r| int_range(dim, r))
            .collect();
        if ranges.is_empty() {
            let (lo, hi) = dim.bounds()?;
            ranges.push((int_value(dim.datatype, lo)?, int_value(dim.datatype, hi)?));
        }
        Some(NullShift {
            step,
            origin,
            extent,
            ranges,
            stride: u64::try_from(stride).ok()?,
        })
    }

    /// Where fragment `frag` (a plan of `reader`) begins along `step`.
    pub fn frag_lo(&self, reader: &Reader, frag: usize) -> Option<i128> {
        let plan = reader.plans.get(frag)?;
        let ned = plan.meta.footer.non_empty_domain.as_ref()?;
        let dim = reader.snapshot.schema().domain.dimensions.get(self.step)?;
        Some(int_range(dim, ned.get(self.step)?)?.0)
    }

    /// How many cells before its own a null test of a cell of tile `t` of
    /// dense fragment `frag` may read: where the fragment begins inside
    /// the tile along `step`, each cell before it there moves the reads by
    /// `stride - 1` (see [`NullShift::position`]). A read that holds only
    /// some of a tile's cells holds these too.
    pub fn reach_back(&self, reader: &Reader, frag: usize, t: u64) -> u64 {
        let tc = (reader.plans.get(frag))
            .and_then(|p| p.grid())
            .and_then(|g| g.tile_cells(t));
        let tile_lo = tc.and_then(|tc| tc.corner.get(self.step).copied());
        let start = match (self.frag_lo(reader, frag), tile_lo) {
            (Some(f), Some(lo)) => u64::try_from(f.saturating_sub(lo)).unwrap_or(0),
            _ => 0,
        };
        start.saturating_mul(self.stride.saturating_sub(1))
    }

    /// Where TileDB reads the null test of the cell at `pos` in its tile,
    /// `x` along `step`, of a dense fragment beginning at `frag_lo`.
    pub fn position(&self, frag_lo: Option<i128>, pos: u64, x: i128) -> u64 {
        let tile_lo = tile_of(x, self.origin, self.extent)
            .map(|t| self.origin.saturating_add(t.saturating_mul(self.extent)));
        let range_lo = (self.ranges.iter()).find(|(lo, hi)| *lo <= x && x <= *hi);
        let slab_lo = match (tile_lo, range_lo) {
            (Some(t), Some(&(r, _))) => t.max(r),
            _ => return pos,
        };
        let start = frag_lo.map_or(0, |f| f.saturating_sub(slab_lo).max(0));
        let start = u64::try_from(start).unwrap_or(0);
        pos.saturating_sub(start.saturating_mul(self.stride.saturating_sub(1)))
    }
}

impl Reader {
    /// The shift of this read's null tests, where its condition has some
    /// and they move ([`NullShift::of`]).
    pub(super) fn null_shift(&self) -> Option<NullShift> {
        let tests_nulls = self.condition.as_ref().is_some_and(|c| c.tests_nulls());
        tests_nulls.then(|| NullShift::of(self)).flatten()
    }

    /// The cells before a run of tile `t` of dense fragment `i` that its
    /// null tests read, fetched with it ([`NullShift::reach_back`]): what
    /// a piece's estimate charges for them (for every field, though only
    /// nullable ones fetch them: at most a tile's worth).
    pub(super) fn null_reach(&self, i: usize, t: u64) -> u64 {
        let dense = self.plans.get(i).is_some_and(|p| p.meta.footer.dense);
        let nullable = self.fields.iter().any(|f| f.nullable);
        match (dense && nullable).then(|| self.null_shift()).flatten() {
            Some(s) => s.reach_back(self, i, t),
            None => 0,
        }
    }
}

/// `runs` of a tile's cells (sorted, disjoint, half-open) each reaching
/// `back` cells further down, where their null tests may read
/// ([`NullShift::reach_back`]), merged where they meet.
pub(super) fn with_reach_back(runs: &[(u64, u64)], back: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
    for &(a, b) in runs {
        let a = a.saturating_sub(back);
        match out.last_mut() {
            Some(last) if last.1 >= a => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// The validity a null test of the cell at `pos` reads from `col` (a tile
/// holding its cells from `first` on) at `read`: the cell's own where the
/// tile lacks `read` (decoded from later chunks on), `fill` where it lacks
/// both.
pub(super) fn null_check_validity(
    col: &Column<'_>,
    first: u64,
    read: u64,
    pos: u64,
    fill: u8,
) -> u8 {
    let valid = |at: u64| {
        let i = usize::try_from(at.checked_sub(first)?).ok()?;
        (i < col.len()).then(|| u8::from(!col.is_null(i)))
    };
    valid(read).or_else(|| valid(pos)).unwrap_or(fill)
}

/// A batch's columns, where `== None` and `!= None` tests read the
/// validity given for some fields (by name) instead of their own.
pub(super) struct NullChecked<'b> {
    pub batch: &'b Batch,
    pub validity: &'b [(String, Vec<u8>)],
}

impl Columns for NullChecked<'_> {
    fn column(&self, field: &str) -> Option<Column<'_>> {
        self.batch.column(field)
    }

    fn cell_num(&self) -> usize {
        self.batch.cell_num()
    }

    fn null_test_column(&self, field: &str) -> Option<Column<'_>> {
        let col = self.batch.column(field)?;
        Some(match self.validity.iter().find(|(name, _)| name == field) {
            Some((_, v)) => Column {
                validity: Some(ValidityRef::Bytes(v)),
                ..col
            },
            None => col,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::with_reach_back;

    /// Each run reaches down by `back` cells (not below the tile's first),
    /// and runs that then meet or overlap become one.
    #[test]
    fn runs_reaching_back_merge_where_they_meet() {
        let runs = [(10, 12), (20, 22), (40, 41)];
        assert_eq!(with_reach_back(&runs, 9), vec![(1, 22), (31, 41)]);
        assert_eq!(with_reach_back(&runs, 0), runs.to_vec());
        assert_eq!(with_reach_back(&runs, 100), vec![(0, 41)]);
    }

    /// TileDB's `dense_null_checks_in_pieces` (fragment 1 begins at the
    /// sixth cell of its tiles along the slabs' dimension, col-major cells
    /// 30 high): a row-major read's null tests of a tile's cells read up
    /// to 5 × 29 cells before their own, fetched with them, and a piece
    /// holding a run of them is charged those; a value test of the same
    /// field reaches none.
    #[test]
    fn a_runs_estimate_charges_the_cells_its_null_tests_reach_back_to() {
        use crate::read::ReadStep;
        use crate::{ReadSpec, Snapshot};
        use std::sync::Arc;
        use tdb_fragment::TimeWindow;
        use tdb_storage::ReadableStorage;
        let dir = tdb_testdata::root()
            .join("dense_null_checks_in_pieces")
            .join("array");
        let storage = tdb_storage::LocalStorage::new(&dir);
        let snap = Arc::new(Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap());
        let estimate = |condition: &str| {
            let spec = ReadSpec::new(["a"]).with_condition(condition);
            let mut reader = super::Reader::new(Arc::clone(&snap), spec).unwrap();
            // Up to the first tiles' fetch: the plans are made.
            while reader.plans.is_empty() {
                match reader.step().unwrap() {
                    ReadStep::Need(r) => {
                        let got = storage.read_ranges(&r).unwrap();
                        reader.push(r.into_iter().zip(got)).unwrap();
                    }
                    _ => panic!("no plans before the tiles"),
                }
            }
            let run = 200..260;
            (
                reader.null_reach(0, 0),
                reader.run_held(0, 0, Some(&run), None),
            )
        };
        let (reach, with_nulls) = estimate("a != None");
        let (none, values) = estimate("a > 6");
        assert_eq!((reach, none), (5 * 29, 0));
        assert!(with_nulls > values, "{with_nulls} against {values}");
    }
}
