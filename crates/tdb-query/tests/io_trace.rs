//! The requests a read makes, pinned: a dense slice across tiles of two
//! fragments and a sparse box, on TileDB-written arrays. Each read's cell
//! count is TileDB's for the same query (its expected.json).

use tdb_fragment::TimeWindow;
use tdb_query::{ReadSpec, ResultLayout, Snapshot, Subarray, SyncRead};
use tdb_schema::Range;
use tdb_storage::{LocalStorage, RecordingStorage};

fn range<const N: usize>(lo: i64, hi: i64) -> Range {
    Range::from_bounds(&lo.to_le_bytes()[..N], &hi.to_le_bytes()[..N], false)
}

/// Reads `subarray` of `case` and returns the read's trace (the open's
/// requests are taken first) and its cell count.
fn read_trace(case: &str, subarray: Subarray, layout: ResultLayout) -> (String, u64) {
    let dir = tdb_testdata::root().join(case).join("array");
    let storage = RecordingStorage::new(LocalStorage::new(&dir));
    let snap = Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap();
    storage.take();
    let fields = ["a", "s"];
    let spec = ReadSpec::new(fields)
        .with_subarray(subarray)
        .with_layout(layout);
    let cells = SyncRead::new(&storage, &snap, spec)
        .unwrap()
        .map(|b| b.unwrap().num_cells)
        .sum();
    (storage.trace(), cells)
}

#[test]
fn dense_slice_across_tiles() {
    // expected.json query `cross_global`: 60 cells.
    let mut s = Subarray::new(2);
    s.add_range(0, range::<8>(145, 154));
    s.add_range(1, range::<8>(147, 152));
    let (trace, cells) = read_trace("dense_multi_chunk", s, ResultLayout::GlobalOrder);
    assert_eq!(cells, 60);
    insta::assert_snapshot!(trace);
}

#[test]
fn sparse_box() {
    // expected.json query `box_global`: 46 cells.
    let mut s = Subarray::new(2);
    s.add_range(0, range::<4>(5, 34));
    s.add_range(1, range::<4>(8, 41));
    let (trace, cells) = read_trace("sparse_multi_range", s, ResultLayout::GlobalOrder);
    assert_eq!(cells, 46);
    insta::assert_snapshot!(trace);
}
