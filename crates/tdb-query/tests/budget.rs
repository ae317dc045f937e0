//! A read with a budget smaller than its result returns the same cells, in
//! the same order, over several batches.

use tdb_fragment::TimeWindow;
use tdb_query::{Batch, ReadSpec, Snapshot, SyncRead};
use tdb_storage::LocalStorage;
use tdb_storage::ReadableStorage as _;

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
    // Tiles of the four fields take 550 kB a tile: a budget of 2 MiB holds
    // two at a time, so the read goes in pieces and batches.
    let small = read(2 << 20);
    assert!(small.len() > 4, "{} batches", small.len());
    let mut joined = Batch::default();
    for b in &small {
        joined.append(b);
    }
    assert_eq!(joined, whole[0]);
}

/// Steps a read to the end: its batches joined, and how many rounds of
/// requests it made.
fn run(storage: &LocalStorage, snap: &Snapshot, spec: ReadSpec) -> (Batch, usize) {
    let mut reader = tdb_query::Reader::new(snap, spec).unwrap();
    let (mut all, mut rounds) = (Batch::default(), 0);
    loop {
        match reader.step().unwrap() {
            tdb_query::ReadStep::Need(r) => {
                rounds += 1;
                reader.push(storage.read_ranges(&r).unwrap()).unwrap();
            }
            tdb_query::ReadStep::Batch(b) => all.append(&b),
            tdb_query::ReadStep::Done => return (all, rounds),
        }
    }
}

/// A sparse read over two overlapping fragments whose tiles exceed the
/// budget is read piece by piece (more rounds of requests), and still
/// returns the same cells in the same order: the newest cell per
/// coordinate, row-major and in global order.
#[test]
fn a_sparse_read_over_budget_goes_piece_by_piece() {
    use tdb_query::ResultLayout;
    let dir = tdb_testdata::root().join("aggregates_sparse").join("array");
    let storage = LocalStorage::new(&dir);
    let snap = Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap();
    for layout in [
        ResultLayout::RowMajor,
        ResultLayout::GlobalOrder,
        ResultLayout::ColMajor,
    ] {
        let spec = ReadSpec::new(["x", "y", "i", "s"]).with_layout(layout);
        let (whole, rounds) = run(&storage, &snap, spec.clone());
        let (pieces, more) = run(&storage, &snap, spec.with_budget(2048));
        assert!(
            more > rounds + 2,
            "{layout:?}: {more} rounds against {rounds}"
        );
        assert_eq!(pieces, whole, "{layout:?}");
    }
}

/// A budget too small for one tile is an error before any tile is read,
/// and it says what budget would do.
#[test]
fn a_budget_below_one_tile_is_refused_up_front() {
    let dir = tdb_testdata::root().join("dense_multi_chunk").join("array");
    let storage = LocalStorage::new(&dir);
    let snap = Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap();
    let mut reader =
        tdb_query::Reader::new(&snap, ReadSpec::new(["a"]).with_budget(100_000)).unwrap();
    let mut tile_requests = 0;
    let err = loop {
        match reader.step() {
            Ok(tdb_query::ReadStep::Need(r)) => {
                tile_requests += r
                    .iter()
                    .filter(|r| !r.key.ends_with("__fragment_metadata.tdb"))
                    .count();
                // The check runs once the sections are in.
                if let Err(e) = reader.push(storage.read_ranges(&r).unwrap()) {
                    break e;
                }
            }
            Ok(other) => panic!("{other:?}"),
            Err(e) => break e,
        }
    };
    assert_eq!(tile_requests, 0);
    let msg = err.to_string();
    assert!(
        msg.contains("memory budget of 100000 bytes is too small"),
        "{msg}"
    );
    assert!(msg.contains("give at least"), "{msg}");
}

/// Tiles whose min/max metadata rule the condition out are not fetched
/// (one fragment: no older cell could win over a skipped one), and the
/// answer stays TileDB's: here the single cell holding the minimum.
#[test]
fn tiles_the_condition_rules_out_are_not_fetched() {
    let dir = tdb_testdata::root().join("sparse_2d_int").join("array");
    let storage = tdb_storage::RecordingStorage::new(LocalStorage::new(&dir));
    let snap = Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap();
    let tile_bytes = |condition: &str| -> (u64, u64) {
        storage.take();
        let spec = ReadSpec::new(["x", "y", "a"]).with_condition(condition);
        let cells: u64 = SyncRead::new(&storage, &snap, spec)
            .unwrap()
            .map(|b| b.unwrap().num_cells)
            .sum();
        let bytes = storage
            .take()
            .into_iter()
            .filter_map(|r| match r {
                tdb_storage::Request::ReadRanges { ranges } => Some(ranges),
                _ => None,
            })
            .flatten()
            .filter(|(file, _, _)| !file.ends_with("__fragment_metadata.tdb"))
            .filter_map(|(_, _, got)| got)
            .sum();
        (cells, bytes)
    };
    let (all, all_bytes) = tile_bytes("a >= -928");
    let (one, one_bytes) = tile_bytes("a <= -928");
    assert_eq!((all, one), (60, 1));
    assert!(
        one_bytes * 2 < all_bytes,
        "{one_bytes} bytes against {all_bytes}"
    );
    // Nothing can match: no tile is read at all.
    assert_eq!(tile_bytes("a < -928"), (0, 0));
}
