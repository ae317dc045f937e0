//! The backend's own code (range planning, uploads, conditional creates,
//! listings) over object_store's in-memory store: the storage conformance
//! suite without a server, and the requests a batch of ranges costs.

use std::sync::Arc;
use tdb_object_store::{ObjectStorage, Scheme, Tuning};
use tdb_storage::{ByteRange, RangeRequest, ReadableStorage, WritableStorage};

fn storage(tuning: Tuning) -> ObjectStorage {
    let store = Arc::new(object_store::memory::InMemory::new());
    ObjectStorage::new(
        Scheme::S3,
        store,
        "root/prefix",
        "s3://bucket/root/prefix",
        tuning,
    )
    .unwrap()
}

#[test]
fn in_memory_object_store_passes_the_storage_conformance_suite() {
    tdb_storage::conformance::run(&storage(Tuning::default()));
}

#[test]
fn close_ranges_go_as_one_request_and_far_ones_side_by_side() {
    let tuning = Tuning {
        coalesce_gap: 100,
        max_request: 1000,
        ..Tuning::default()
    };
    let s = storage(tuning);
    s.write("f", vec![7u8; 10_000].into()).unwrap();
    s.write("g", vec![9u8; 10].into()).unwrap();
    s.take_stats();
    let r = |k: &str, offset, len| RangeRequest::new(k, ByteRange::new(offset, len));
    let got = s
        .read_ranges(&[
            r("f", 0, 10),
            r("f", 50, 10),     // within the gap: same GET as the first
            r("f", 5_000, 10),  // far: a GET of its own
            r("f", 6_000, 900), // far too, and 900 bytes: a GET of its own
            r("g", 2, 0),       // empty: answered by the size of g
            r("missing", 0, 1), // None
        ])
        .unwrap();
    let stats = s.take_stats();
    // f: three GETs (0..60, 5000..5010, 6000..6900); g: a HEAD; missing: a GET.
    assert_eq!((stats.gets, stats.heads), (4, 1), "{stats}");
    assert_eq!(stats.bytes_read, 60 + 10 + 900, "{stats}");
    let lens: Vec<Option<usize>> = got
        .iter()
        .map(|g| g.as_ref().map(|g| g.bytes.len()))
        .collect();
    assert_eq!(
        lens,
        [Some(10), Some(10), Some(10), Some(900), Some(0), None]
    );
    assert_eq!(got[4].as_ref().unwrap().file_size, 10);
    assert!(got[3].as_ref().unwrap().bytes.iter().all(|b| *b == 7));
    assert!(s.remote());
    assert_eq!(s.uri("a/b").as_deref(), Some("s3://bucket/root/prefix/a/b"));

    // TileDB's batch rule: far ranges of a file go as one GET while it
    // stays within `min_batch` (and `max_request`), gaps read too.
    let s = storage(Tuning {
        coalesce_gap: 100,
        min_batch: 2_000,
        max_request: 8_000,
        ..Tuning::default()
    });
    s.write("f", vec![7u8; 10_000].into()).unwrap();
    s.take_stats();
    s.read_ranges(&[r("f", 5_000, 10), r("f", 6_000, 900), r("f", 9_000, 10)])
        .unwrap();
    let stats = s.take_stats();
    assert_eq!((stats.gets, stats.bytes_read), (2, 1_900 + 10), "{stats}");
}
