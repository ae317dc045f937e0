//! Sparse aggregates answer the tiles a subarray holds whole from their
//! tile metadata, without reading them, and give the answers reading them
//! gives (the fixture's own, from TileDB).

use std::sync::Arc;
use tdb_fragment::TimeWindow;
use tdb_query::{
    aggregate, AggregateOp, AggregateValue, ReadSpec, ResultLayout, Snapshot, Subarray,
};
use tdb_schema::Range;
use tdb_storage::{LocalStorage, RecordingStorage, Request};

/// Bytes of data files (not fragment metadata) fetched while `f` runs.
fn data_bytes<T>(storage: &RecordingStorage<LocalStorage>, f: impl FnOnce() -> T) -> (T, u64) {
    storage.take();
    let out = f();
    let bytes = (storage.take().iter())
        .flat_map(Request::ranges)
        .filter(|(file, _, _)| file.ends_with(".tdb") && !file.ends_with("__fragment_metadata.tdb"))
        .filter_map(|(_, _, got)| *got)
        .sum();
    (out, bytes)
}

#[test]
fn whole_tiles_come_from_metadata_and_agree_with_tiledb() {
    let dir = tdb_testdata::root().join("aggregates_sparse").join("array");
    let storage = RecordingStorage::new(LocalStorage::new(&dir));
    // At timestamp 1 one fragment is visible: no newer cell can replace
    // one of a tile, so its metadata answers for it.
    let snap = Arc::new(Snapshot::load(&storage, "", TimeWindow::until(1), None).unwrap());
    let requests: Vec<(String, AggregateOp)> = [
        ("i", AggregateOp::Count),
        ("i", AggregateOp::Sum),
        ("i", AggregateOp::Min),
        ("i", AggregateOp::Max),
        ("n", AggregateOp::NullCount),
        ("n", AggregateOp::Sum),
        ("x", AggregateOp::Count),
    ]
    .into_iter()
    .map(|(f, o)| (f.to_owned(), o))
    .collect();
    let run = |spec: ReadSpec| {
        data_bytes(&storage, || {
            aggregate(&storage, snap.clone(), spec, &requests)
                .unwrap()
                .into_iter()
                .map(|r| r.value)
                .collect::<Vec<_>>()
        })
    };
    // TileDB's answers (expected.json, query `t1`).
    let want = vec![
        Some(AggregateValue::Count(50)),
        Some(AggregateValue::Int(-1298)),
        Some(AggregateValue::Cell((-465i32).to_le_bytes().to_vec())),
        Some(AggregateValue::Cell(481i32.to_le_bytes().to_vec())),
        Some(AggregateValue::Count(10)),
        Some(AggregateValue::Int(8_272_225_694_556)),
        Some(AggregateValue::Count(50)),
    ];
    let (got, bytes) = run(ReadSpec::new(Vec::<String>::new()));
    assert_eq!(got, want);
    assert_eq!(
        bytes, 0,
        "every tile is whole in the subarray: none is read"
    );
    // A condition needs the cells: tiles are read, same answers.
    let (got, bytes) = run(ReadSpec::new(Vec::<String>::new()).with_condition("i > -100000"));
    assert_eq!(got, want);
    assert!(bytes > 0);
    // Unordered over ranges whose union is the domain (TileDB's reader
    // merges them, counting a cell once): no tile is read either.
    let x = |lo: i32, hi: i32| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
    let mut sub = Subarray::new(2);
    sub.add_range(0, x(8, 19)).add_range(0, x(0, 11));
    let spec = ReadSpec::new(Vec::<String>::new())
        .with_subarray(sub)
        .with_layout(ResultLayout::Unordered);
    let (got, bytes) = run(spec);
    assert_eq!(got, want);
    assert_eq!(bytes, 0, "the union of the ranges holds every tile");
    // A gap between them: the tiles across it are read.
    let mut sub = Subarray::new(2);
    sub.add_range(0, x(0, 9)).add_range(0, x(11, 19));
    let spec = ReadSpec::new(Vec::<String>::new())
        .with_subarray(sub)
        .with_layout(ResultLayout::Unordered);
    assert!(run(spec).1 > 0);
}
