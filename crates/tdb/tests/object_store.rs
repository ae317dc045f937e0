//! Arrays in an S3 server (moto, on loopback, started by the test): the
//! requests an open, a dense slice and a sparse box make, pinned beside
//! the same reads on local storage; opening many fragments with
//! consolidated fragment metadata in a constant number of requests.

use crate::common;

use std::sync::OnceLock;
use tdb::{Array, ObjectStorage, OpenOptions, ReadSpec, ResultLayout, StorageConfig, Subarray};
use tdb_storage::{LocalStorage, RecordingStorage, WritableStorage};
use tdb_test_servers::S3Server;

fn s3() -> &'static S3Server {
    static SERVER: OnceLock<S3Server> = OnceLock::new();
    SERVER.get_or_init(|| S3Server::start().unwrap_or_else(|e| panic!("S3 server: {e}")))
}

/// Storage below `s3://BUCKET/` of the test server, in a new bucket.
fn bucket(name: &str) -> ObjectStorage {
    let server = s3();
    server.create_bucket(name).unwrap();
    let config: StorageConfig = server.settings().into_iter().collect();
    ObjectStorage::open(&format!("s3://{name}"), &config).unwrap()
}

/// Puts the TileDB-written array of fixture `case` under key `case`, byte
/// for byte.
fn upload(s: &ObjectStorage, case: &str) {
    let dir = tdb_testdata::root().join(case).join("array");
    for rel in tdb_testdata::files_in(&dir) {
        let bytes = std::fs::read(dir.join(&rel)).unwrap();
        s.write(&format!("{case}/{rel}"), bytes.into()).unwrap();
    }
}

fn range<const N: usize>(lo: i64, hi: i64) -> tdb::Range {
    tdb::Range::from_bounds(&lo.to_le_bytes()[..N], &hi.to_le_bytes()[..N], false)
}

/// The trace of opening `dir` of `storage` and reading `subarray` of
/// `a, s` in the global order, and the cell count.
fn traces<S: tdb::Storage>(
    storage: &RecordingStorage<S>,
    dir: &str,
    subarray: Subarray,
) -> (String, String, u64) {
    let array = Array::open_in(storage, dir, OpenOptions::new()).unwrap();
    let open = storage.trace();
    storage.take();
    let spec = ReadSpec::new(["a", "s"])
        .with_subarray(subarray)
        .with_layout(ResultLayout::GlobalOrder);
    let cells = array.read_all(spec).unwrap().num_cells;
    let read = storage.trace();
    storage.take();
    (open, read, cells)
}

/// Local and S3 traces of one read, with the S3 server's requests.
fn local_and_s3(case: &str, subarray: Subarray, cells: u64) -> String {
    let local = RecordingStorage::new(LocalStorage::new(tdb_testdata::root().join(case)));
    let (l_open, l_read, l_cells) = traces(&local, "array", subarray.clone());
    let s = bucket(&case.replace('_', "-"));
    upload(&s, case);
    s.take_stats();
    let remote = RecordingStorage::new(s.clone());
    let array = Array::open_in(&remote, case, OpenOptions::new()).unwrap();
    let r_open = remote.trace();
    remote.take();
    let open_http = s.take_stats();
    let spec = ReadSpec::new(["a", "s"])
        .with_subarray(subarray)
        .with_layout(ResultLayout::GlobalOrder);
    let r_cells = array.read_all(spec).unwrap().num_cells;
    let r_read = remote.trace();
    let read_http = s.take_stats();
    assert_eq!((l_cells, r_cells), (cells, cells), "TileDB's cell count");
    format!(
        "== open, local\n{l_open}\n== open, s3\n{}\nhttp: {open_http}\n\
         == read, local\n{l_read}\n== read, s3\n{}\nhttp: {read_http}\n",
        r_open.replace(&format!("{case}/"), ""),
        r_read.replace(&format!("{case}/"), "")
    )
}

#[test]
fn dense_slice_on_s3() {
    // expected.json query `cross_global`: 60 cells. Locally the tiles
    // (180 KB unfiltered) are sliced, their chunk headers walked in small
    // reads; on S3, where each read is a round trip, they are fetched
    // whole in one request.
    let mut s = Subarray::new(2);
    s.add_range(0, range::<8>(145, 154));
    s.add_range(1, range::<8>(147, 152));
    insta::assert_snapshot!(local_and_s3("dense_multi_chunk", s, 60));
}

#[test]
fn sparse_box_on_s3() {
    // expected.json query `box_global`: 46 cells.
    let mut s = Subarray::new(2);
    s.add_range(0, range::<4>(5, 34));
    s.add_range(1, range::<4>(8, 41));
    insta::assert_snapshot!(local_and_s3("sparse_multi_range", s, 46));
}

/// Requests beyond the listings of opening an array of `n` one-cell
/// fragments whose fragment metadata is consolidated.
fn open_requests(s: &ObjectStorage, dir: &str, n: i32) -> tdb::RequestStats {
    let schema = tdb::ArraySchema::builder(tdb_format::ArrayType::Sparse)
        .dimension(tdb_schema::DimensionBuilder::range("d", 0i32..=9999).tile_extent(100i32))
        .attribute(tdb_schema::AttributeBuilder::new("a", tdb::Datatype::Int32))
        .build()
        .unwrap();
    let array = Array::create_in(s.clone(), dir, &schema, &[], OpenOptions::new()).unwrap();
    for i in 0..n {
        let spec = tdb::WriteSpec::new(vec![common::ints("d", &[i]), common::ints("a", &[i])]);
        array.write(spec.at(i as u64 + 1)).unwrap();
    }
    let array = Array::open_in(s.clone(), dir, OpenOptions::new()).unwrap();
    array.consolidate_fragment_metadata().unwrap().unwrap();
    s.take_stats();
    let array = Array::open_in(s.clone(), dir, OpenOptions::new()).unwrap();
    let opened = s.take_stats();
    assert_eq!(array.fragments().len(), n as usize);
    let got = array.read_all(ReadSpec::new(["a"])).unwrap();
    assert_eq!(got.num_cells, n as u64);
    opened
}

#[test]
fn opening_many_fragments_with_consolidated_metadata_costs_a_constant_number_of_requests() {
    let s = bucket("many-fragments");
    let few = open_requests(&s, "few", 4);
    let many = open_requests(&s, "many", 40);
    // Listings grow with the fragments (a page per 1,000 names); the reads
    // of fragment metadata do not.
    assert_eq!(
        (few.gets, few.heads, few.lists),
        (many.gets, many.heads, many.lists),
        "4 fragments: {few}; 40 fragments: {many}"
    );
}

/// The async path over S3, driven by an executor that is not tokio's: an
/// awaited open and a stream of batches give the synchronous path's
/// batches, with as many requests.
#[test]
fn an_async_open_and_stream_on_s3_give_the_sync_batches() {
    let s = bucket("async-stream");
    for (case, fields) in [
        ("dense_multi_chunk", ["r", "c", "a", "s"]),
        ("sparse_multi_range", ["x", "y", "a", "s"]),
    ] {
        upload(&s, case);
        for budget in [tdb::DEFAULT_BUDGET, 2 << 20] {
            let spec = ReadSpec::new(fields)
                .with_layout(ResultLayout::RowMajor)
                .with_budget(budget);
            s.take_stats();
            let array = Array::open_in(s.clone(), case, OpenOptions::new()).unwrap();
            let want: Vec<tdb::Batch> = array
                .read(spec.clone())
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let sync = s.take_stats();
            let opening = Array::open_in_async(s.clone(), case, OpenOptions::new());
            let array = futures_executor::block_on(opening).unwrap();
            let stream = array.read_stream(spec).unwrap();
            let got: Vec<tdb::Batch> = futures_executor::block_on_stream(stream)
                .map(Result::unwrap)
                .collect();
            let stream = s.take_stats();
            assert_eq!(got, want, "{case} at {budget} bytes");
            assert_eq!(
                (stream.gets, stream.heads, stream.lists),
                (sync.gets, sync.heads, sync.lists),
                "{case} at {budget} bytes: stream {stream}; iterator {sync}"
            );
        }
    }
}

/// The async open can be spawned on a multi-threaded executor.
#[test]
fn the_async_open_is_send() {
    fn send<T: Send>(_: &T) {}
    let opening = Array::open_in_async(LocalStorage::new("."), "none", OpenOptions::new());
    send(&opening);
}
