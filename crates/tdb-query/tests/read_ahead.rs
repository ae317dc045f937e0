//! Over remote storage a read fetches the next piece while it hands out
//! the current one: the answers are the same cells in the same order,
//! fetched ahead only while two pieces fit the tile budget together (and
//! what the next piece asks for was not read on before).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tdb_fragment::TimeWindow;
use tdb_query::{Batch, ReadSpec, ResultLayout, Snapshot, SyncRead};
use tdb_storage::{
    ByteRange, ListableStorage, Listing, LocalStorage, RangeRead, RangeRequest, RangesFuture,
    ReadableStorage, Result,
};

/// A local directory that says it is remote and "fetches ahead" by
/// reading at once, counting the batches taken that way and the others.
#[derive(Debug)]
struct Remote {
    local: LocalStorage,
    ahead: AtomicUsize,
    asked: AtomicUsize,
}

impl ReadableStorage for Remote {
    fn read(&self, key: &str) -> Result<Option<bytes::Bytes>> {
        self.local.read(key)
    }
    fn read_ranges(&self, requests: &[RangeRequest]) -> Result<Vec<Option<RangeRead>>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.local.read_ranges(requests)
    }
    fn size(&self, key: &str) -> Result<Option<u64>> {
        self.local.size(key)
    }
    fn read_range(&self, key: &str, range: ByteRange) -> Result<Option<RangeRead>> {
        self.local.read_range(key, range)
    }
    fn remote(&self) -> bool {
        true
    }
    /// Only reads ahead come this way (the synchronous driver's other
    /// batches are `read_ranges`).
    fn read_ranges_async(&self, requests: Vec<RangeRequest>) -> RangesFuture<'_> {
        self.ahead.fetch_add(1, Ordering::SeqCst);
        Box::pin(std::future::ready(self.local.read_ranges(&requests)))
    }
}

impl ListableStorage for Remote {
    fn list_dir(&self, dir: &str) -> Result<Listing> {
        self.local.list_dir(dir)
    }
}

fn joined(batches: impl Iterator<Item = tdb_query::Result<Batch>>) -> Batch {
    let mut all = Batch::default();
    for b in batches {
        all.append(&b.unwrap());
    }
    all
}

#[test]
fn pieces_fetched_ahead_give_the_same_cells_in_the_same_order() {
    for (case, fields, layout) in [
        (
            "dense_multi_chunk",
            &["r", "c", "a", "s"][..],
            ResultLayout::RowMajor,
        ),
        (
            "dense_multi_chunk",
            &["a", "s"][..],
            ResultLayout::GlobalOrder,
        ),
        (
            "sparse_multi_range",
            &["x", "y", "a", "s"][..],
            ResultLayout::RowMajor,
        ),
        (
            "sparse_float_string_pieces",
            &["a"][..],
            ResultLayout::ColMajor,
        ),
    ] {
        let dir = tdb_testdata::root().join(case).join("array");
        let local = LocalStorage::new(&dir);
        let remote = Remote {
            local: LocalStorage::new(&dir),
            ahead: AtomicUsize::new(0),
            asked: AtomicUsize::new(0),
        };
        let snap = Arc::new(Snapshot::load(&local, "", TimeWindow::ALL, None).unwrap());
        let whole = joined(
            SyncRead::new(
                &local,
                snap.clone(),
                ReadSpec::new(fields.iter().copied()).with_layout(layout),
            )
            .unwrap(),
        );
        // Budgets that cut the read in pieces: a few at a time fit, so some
        // are fetched ahead; at the smallest two never fit together.
        let mut aheads = Vec::new();
        for budget in [8 << 10, 64 << 10, 1 << 20, 4 << 20, 8 << 20, 16 << 20] {
            remote.ahead.store(0, Ordering::SeqCst);
            remote.asked.store(0, Ordering::SeqCst);
            let spec = ReadSpec::new(fields.iter().copied())
                .with_layout(layout)
                .with_budget(budget);
            let read = SyncRead::new(&remote, snap.clone(), spec).unwrap();
            let got: Vec<_> = read.collect();
            assert_eq!(joined(got.into_iter()), whole, "{case} at {budget} bytes");
            let ahead = remote.ahead.load(Ordering::SeqCst);
            aheads.push((ahead, remote.asked.load(Ordering::SeqCst)));
        }
        // Some piece fetched ahead, or none needed to be: the bytes read
        // on with the first batch or two answered every later piece
        // (`sparse_multi_range`: 2 batches under 8 KiB, 1 from 64 KiB).
        assert!(
            aheads.iter().any(|(ahead, _)| *ahead > 0)
                || aheads.iter().all(|(_, batches)| *batches <= 2),
            "{case}: no piece fetched ahead ((ahead, batches): {aheads:?})"
        );
    }
}

/// Aggregates read ahead too (or from bytes read on), with the same
/// answers.
#[test]
fn aggregates_fetched_ahead_give_the_same_answers() {
    let dir = tdb_testdata::root().join("dense_multi_chunk").join("array");
    let local = LocalStorage::new(&dir);
    let remote = Remote {
        local: LocalStorage::new(&dir),
        ahead: AtomicUsize::new(0),
        asked: AtomicUsize::new(0),
    };
    let snap = Arc::new(Snapshot::load(&local, "", TimeWindow::ALL, None).unwrap());
    let requests: Vec<(String, tdb_query::AggregateOp)> = ["count", "sum", "min", "max"]
        .iter()
        .map(|op| {
            (
                "a".to_owned(),
                tdb_query::AggregateOp::from_name(op).unwrap(),
            )
        })
        .collect();
    let want = tdb_query::aggregate(&local, snap.clone(), ReadSpec::new(["a"]), &requests).unwrap();
    let mut aheads = Vec::new();
    for budget in [1 << 20, 2 << 20, 4 << 20, 8 << 20] {
        remote.ahead.store(0, Ordering::SeqCst);
        remote.asked.store(0, Ordering::SeqCst);
        let spec = ReadSpec::new(["a"]).with_budget(budget);
        let Ok(got) = tdb_query::aggregate(&remote, snap.clone(), spec, &requests) else {
            continue; // a tile larger than half the budget
        };
        assert_eq!(got, want, "at {budget} bytes");
        let ahead = remote.ahead.load(Ordering::SeqCst);
        aheads.push((ahead, remote.asked.load(Ordering::SeqCst)));
    }
    // Some piece fetched ahead, or none needed to be: since files' first
    // requests read on where the footer records their sizes, the first
    // batch holds every tile's bytes here (one batch a budget).
    assert!(
        aheads.iter().any(|(ahead, _)| *ahead > 0)
            || aheads.iter().all(|(_, batches)| *batches <= 2),
        "no piece fetched ahead ((ahead, batches): {aheads:?})"
    );
}

/// Aggregates over files far larger than the bytes a read keeps read on
/// (256 KiB), in tiles under half the budget, fetch the next piece while
/// one is folded: a 2 MiB dense array of incompressible int32s in 128 KiB
/// tiles, written by tdb (no fixture of TileDB's has files that large and
/// tiles that small), under 2 and 4 MiB over storage that says it is
/// remote (under 1 MiB two pieces do not fit the tile budget together, and
/// none is fetched ahead, as for a plain read). The answers are those of
/// the unbudgeted local read.
#[test]
fn aggregates_over_large_files_fetch_the_next_piece_ahead() {
    use tdb_format::{ArrayType, Datatype};
    use tdb_query::{AggregateOp, FieldBuffer, WriteSpec};
    use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};
    let tmp = tempfile::tempdir().unwrap();
    let local = LocalStorage::new(tmp.path());
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("r", 0i64..=511).tile_extent(32i64))
        .dimension(DimensionBuilder::range("c", 0i64..=1023).tile_extent(1024i64))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap();
    let entry = tdb_fragment::create_array(&local, "", &schema, &[], None, 1).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut a = FieldBuffer::new("a", Datatype::Int32, 1, false);
    a.data = (0..512 * 1024)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state as i32).to_le_bytes()
        })
        .collect();
    tdb_query::write_fragment(&local, "", &entry, None, &WriteSpec::new(vec![a]).at(2)).unwrap();
    let remote = Remote {
        local: LocalStorage::new(tmp.path()),
        ahead: AtomicUsize::new(0),
        asked: AtomicUsize::new(0),
    };
    let snap = Arc::new(Snapshot::load(&local, "", TimeWindow::ALL, None).unwrap());
    let requests: Vec<(String, AggregateOp)> = ["count", "sum", "min", "max"]
        .iter()
        .map(|op| ("a".to_owned(), AggregateOp::from_name(op).unwrap()))
        .collect();
    let want = tdb_query::aggregate(&local, snap.clone(), ReadSpec::new(["a"]), &requests).unwrap();
    for budget in [2 << 20, 4 << 20] {
        remote.ahead.store(0, Ordering::SeqCst);
        remote.asked.store(0, Ordering::SeqCst);
        let spec = ReadSpec::new(["a"]).with_budget(budget);
        let got = tdb_query::aggregate(&remote, snap.clone(), spec, &requests).unwrap();
        assert_eq!(got, want, "at {budget} bytes");
        let (ahead, asked) = (
            remote.ahead.load(Ordering::SeqCst),
            remote.asked.load(Ordering::SeqCst),
        );
        assert!(
            ahead > 0,
            "at {budget} bytes: none of {asked} batches fetched ahead"
        );
    }
}
