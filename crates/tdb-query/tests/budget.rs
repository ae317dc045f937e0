//! A read with a budget smaller than its result returns the same cells, in
//! the same order, over several batches.

use tdb_fragment::TimeWindow;
use tdb_query::{Batch, ReadSpec, Snapshot, SyncRead};
use tdb_storage::LocalStorage;

#[test]
fn a_small_budget_gives_the_same_cells_in_batches() {
    let dir = tdb_testdata::root().join("dense_multi_chunk").join("array");
    let storage = LocalStorage::new(&dir);
    let snap = Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap();
    let read = |budget: u64| -> Vec<Batch> {
        let spec = ReadSpec::new(["r", "c", "a", "s"]).with_budget(budget);
        SyncRead::new(&storage, &snap, spec)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let whole = read(tdb_query::DEFAULT_BUDGET);
    assert_eq!(whole.len(), 1);
    let small = read(64 * 1024);
    assert!(small.len() > 10, "{} batches", small.len());
    let mut joined = Batch::default();
    for b in &small {
        joined.append(b);
    }
    assert_eq!(joined, whole[0]);
}
