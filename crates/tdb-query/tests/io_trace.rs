//! The requests a read makes, pinned: a dense slice across tiles of two
//! fragments and a sparse box, on TileDB-written arrays. Each read's cell
//! count is TileDB's for the same query (its expected.json).

use std::sync::Arc;
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
    let (mut traces, cells) = read_traces(case, subarray, layout, 1);
    (traces.remove(0), cells)
}

/// The traces of `times` reads of `subarray` on one opened array.
fn read_traces(
    case: &str,
    subarray: Subarray,
    layout: ResultLayout,
    times: usize,
) -> (Vec<String>, u64) {
    let dir = tdb_testdata::root().join(case).join("array");
    let storage = RecordingStorage::new(LocalStorage::new(&dir));
    let snap = Arc::new(Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap());
    storage.take();
    let fields = ["a", "s"];
    let mut traces = Vec::new();
    let mut cells = 0;
    for _ in 0..times {
        let spec = ReadSpec::new(fields)
            .with_subarray(subarray.clone())
            .with_layout(layout);
        cells = SyncRead::new(&storage, snap.clone(), spec)
            .unwrap()
            .map(|b| b.unwrap().num_cells)
            .sum();
        traces.push(storage.trace());
        storage.take();
    }
    (traces, cells)
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

#[test]
fn a_second_read_of_an_opened_array_fetches_no_fragment_metadata() {
    // The first read loads the fragment's R-tree and tile offsets; the
    // second, on the same snapshot, fetches tiles only.
    let mut s = Subarray::new(2);
    s.add_range(0, range::<4>(5, 34));
    s.add_range(1, range::<4>(8, 41));
    let (traces, cells) = read_traces("sparse_multi_range", s, ResultLayout::GlobalOrder, 2);
    assert_eq!(cells, 46);
    assert!(traces[0].contains("__fragment_metadata.tdb"));
    assert!(!traces[1].contains("__fragment_metadata.tdb"));
    insta::assert_snapshot!(traces[1]);
}
