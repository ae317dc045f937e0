//! A budgeted read cuts its subarray into pieces whose tiles fit; where
//! tiles' MBRs span every piece (sparse data of many dimensions), cuts
//! separate nothing and multiply. `legacy/2.25.0/sparse_dims_ints` (eight
//! dimensions, 14 cells in tiles of 5) under a 2 KiB budget once took
//! longer than any test waits: the cuts that separate no tile are now
//! bounded, and the read answers as the unbudgeted one in a bounded number
//! of requests.

use tdb::{Array, OpenOptions, ReadSpec, ResultLayout};
use tdb_storage::{LocalStorage, RecordingStorage};

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
