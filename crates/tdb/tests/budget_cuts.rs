//! A budgeted read cuts its subarray into pieces whose tiles fit; where
//! tiles' MBRs span every piece (sparse data of many dimensions), cuts
//! separate nothing and multiply. `legacy/2.25.0/sparse_dims_ints` (eight
//! dimensions, 14 cells in tiles of 5) under a 2 KiB budget once took
//! longer than any test waits: the cuts that separate no tile are now
//! bounded, and the read answers as the unbudgeted one in a bounded number
//! of requests. Also how other cuts fall: a long row of space tiles, one
//! space tile past two aims (in runs of its tiles), and the budget checked
//! against the tiles a subarray reaches.

use tdb::{Array, OpenOptions, ReadSpec, ResultLayout};
use tdb_storage::{LocalStorage, RecordingStorage};

use crate::common;

#[test]
fn many_dimensions_under_a_tiny_budget_answer_in_bounded_requests() {
    let dir = tdb_testdata::root().join("legacy/2.25.0/sparse_dims_ints/array");
    let storage = RecordingStorage::new(LocalStorage::new(&dir));
    let array = Array::open_in(storage, "", OpenOptions::new()).unwrap();
    let fields: Vec<String> = array.schema().fields().map(str::to_owned).collect();
    for layout in [ResultLayout::RowMajor, ResultLayout::Unordered] {
        let spec = ReadSpec::new(fields.clone()).with_layout(layout);
        let whole = array.read_all(spec.clone()).unwrap();
        array.storage().take();
        let tiny = array.read_all(spec.with_budget(2048)).unwrap();
        assert_eq!(tiny, whole, "{layout:?}");
        let requests = array.storage().take().len();
        assert!(requests < 2000, "{layout:?}: {requests} requests");
    }
}

/// A sparse unordered read whose pieces would each hold a whole row of
/// space tiles (one million cells, about 110 MB as the reader counts
/// tiles and per-cell bookkeeping, past eight piece aims of 8 MiB),
/// written in two fragments of an array without duplicates (so not in
/// runs of tiles: the versions of a coordinate must meet), cuts the row
/// between its space tiles: the cells come in several batches, each once.
#[test]
fn an_unordered_read_cuts_a_long_row_of_space_tiles_between_them() {
    let (_dir, array) = one_row_of_cells(999_999, 10_000, 1_000_000, false, 2);
    read_each_cell_once_in_batches(&array, 1_000_000, "the whole row in one piece");
}

/// An array whose `n` cells (`x` from 0, `y` = x · 7919 mod 1000, `a` =
/// x) lie in one row of space tiles (`y` in one tile, `x` up to `x_max`
/// in tiles of `x_tile`), written in `fragments` fragments of equal runs
/// of `x`.
fn one_row_of_cells(
    x_max: i64,
    x_tile: i64,
    n: i64,
    duplicates: bool,
    fragments: i64,
) -> (tempfile::TempDir, Array) {
    let schema = tdb::ArraySchema::builder(tdb_format::ArrayType::Sparse)
        .dimension(tdb_schema::DimensionBuilder::range("y", 0i64..=999).tile_extent(1000i64))
        .dimension(tdb_schema::DimensionBuilder::range("x", 0i64..=x_max).tile_extent(x_tile))
        .attribute(tdb_schema::AttributeBuilder::new("a", tdb::Datatype::Int64))
        .capacity(10_000)
        .allows_duplicates(duplicates)
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let array = Array::create(dir.path(), &schema).unwrap();
    let per = n / fragments;
    for f in 0..fragments {
        let xs: Vec<i64> = (f * per..(f + 1) * per).collect();
        let ys: Vec<i64> = xs.iter().map(|x| x * 7919 % 1000).collect();
        let spec = tdb::WriteSpec::new(vec![
            common::ints64("y", &ys),
            common::ints64("x", &xs),
            common::ints64("a", &xs),
        ]);
        array.write(spec.at(f as u64 + 1)).unwrap();
    }
    let array = Array::open(dir.path()).unwrap();
    (dir, array)
}

/// Reads `x` and `a` of [`one_row_of_cells`]'s array unordered: each of
/// its `n` cells comes back once, `a` beside its `x`, in two batches or
/// more (`one`: what a single batch would mean).
fn read_each_cell_once_in_batches(array: &Array, n: usize, one: &str) {
    let read = ReadSpec::new(["x", "a"]).with_layout(ResultLayout::Unordered);
    let mut seen = vec![false; n];
    let mut batches = 0;
    for batch in array.read(read).unwrap() {
        let batch = batch.unwrap();
        let (x, a) = (batch.fields[0].column(), batch.fields[1].column());
        for i in 0..batch.num_cells as usize {
            assert_eq!(x.cell(i), a.cell(i));
            let x = i64::from_le_bytes(x.cell(i).try_into().unwrap()) as usize;
            assert!(!std::mem::replace(&mut seen[x], true), "cell {x} twice");
        }
        batches += 1;
    }
    assert!(seen.iter().all(|&s| s), "a cell missing");
    assert!(batches >= 2, "{batches} batches: {one}");
}

/// A tile held whole (DICTIONARY strings, never sliced) larger than the
/// budget: a box away from it reads under the budget, and the whole
/// array, which was refused until 2026-12-07, is read over the budget by
/// that tile, with the cells of the unbudgeted read. Sparse (tiles found
/// through the R-tree) and dense (by the tile grid).
#[test]
fn a_tile_held_whole_past_the_budget_is_read_over_it() {
    for array_type in [tdb_format::ArrayType::Sparse, tdb_format::ArrayType::Dense] {
        let dense = array_type == tdb_format::ArrayType::Dense;
        // Dense: tiles of four cells over 0..=7; sparse: one space tile,
        // data tiles of four cells.
        let (hi, extent) = if dense { (7i64, 4i64) } else { (999, 1000) };
        let schema = tdb::ArraySchema::builder(array_type)
            .dimension(tdb_schema::DimensionBuilder::range("d", 0i64..=hi).tile_extent(extent))
            .attribute(
                tdb_schema::AttributeBuilder::new("s", tdb::Datatype::StringUtf8)
                    .var()
                    .filters([tdb_filters::Filter::Dictionary { level: 0 }]),
            )
            .capacity(4)
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let array = Array::create(dir.path(), &schema).unwrap();
        // Tile 0: four strings of 20,000 bytes; tile 1: four short ones.
        let ds: Vec<i64> = if dense {
            (0..8).collect()
        } else {
            (0..4).chain(100..104).collect()
        };
        let mut s = tdb::FieldBuffer::new("s", tdb::Datatype::StringUtf8, tdb::VAR_NUM, false);
        for (k, &d) in ds.iter().enumerate() {
            let len = if k < 4 { 20_000 } else { 3 };
            s.push(&vec![b'a' + d as u8 % 26; len], true);
        }
        let one = |lo: i64, hi: i64| {
            let mut sub = tdb::Subarray::new(1);
            sub.add_range(
                0,
                tdb_schema::Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false),
            );
            sub
        };
        let write = if dense {
            tdb::WriteSpec::new(vec![s]).with_subarray(one(0, 7))
        } else {
            tdb::WriteSpec::new(vec![common::ints64("d", &ds), s])
        };
        array.write(write.at(1)).unwrap();
        let array = Array::open(dir.path()).unwrap();
        let budget = 16 << 10;
        let (lo, hi) = (ds[4], ds[7]);
        let boxed = ReadSpec::new(["d", "s"]).with_subarray(one(lo, hi));
        let want = array.read_all(boxed.clone()).unwrap();
        assert_eq!(want.num_cells, 4, "{array_type:?}");
        let got = array.read_all(boxed.with_budget(budget));
        assert_eq!(got.ok(), Some(want), "{array_type:?}");
        let all = ReadSpec::new(["d", "s"]);
        let want = array.read_all(all.clone()).unwrap();
        assert_eq!(want.num_cells, 8, "{array_type:?}");
        let got = array.read_all(all.with_budget(budget)).unwrap();
        assert_eq!(got, want, "{array_type:?}");
    }
}

/// A sparse unordered read of one space tile past two piece aims (720,000
/// cells: past 16 MiB as the reader counts tiles and per-cell bookkeeping,
/// which for an unordered read with duplicates is a few bytes a cell),
/// which no tile boundary cuts, goes in runs of its data tiles: several
/// batches, each cell once.
#[test]
fn an_unordered_read_of_one_space_tile_past_two_aims_goes_in_runs_of_its_tiles() {
    let (_dir, array) = one_row_of_cells(1_999_999, 2_000_000, 720_000, true, 1);
    read_each_cell_once_in_batches(&array, 720_000, "the space tile in one piece");
}

/// What an unordered read with duplicates holds per cell is its slabs'
/// few bytes, not a sorted read's 64-byte records: 300,000 cells of one
/// space tile stay under two piece aims (16 MiB), below which no data
/// tile boundary cuts them, and come in one batch; counted at 64 bytes a
/// cell they passed two aims and came in runs of tiles.
#[test]
fn an_unordered_read_with_duplicates_counts_a_few_bytes_a_cell() {
    let n = 300_000;
    let (_dir, array) = one_row_of_cells(1_999_999, 2_000_000, n as i64, true, 1);
    let read = ReadSpec::new(["x", "a"]).with_layout(ResultLayout::Unordered);
    let batches: Vec<u64> = (array.read(read).unwrap())
        .map(|b| b.unwrap().num_cells)
        .collect();
    assert_eq!(batches, [n], "{batches:?}");
}

/// The same space tile written in three fragments of an array with
/// duplicates: cut between its fragments, then in runs of each one's
/// tiles (no version of a cell hides another). Several batches, each cell
/// once.
#[test]
fn an_unordered_read_over_fragments_of_an_array_with_duplicates_goes_fragment_by_fragment() {
    let (_dir, array) = one_row_of_cells(1_999_999, 2_000_000, 720_000, true, 3);
    read_each_cell_once_in_batches(&array, 720_000, "the fragments in one piece");
}
