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
    let (mut traces, cells) = read_traces(case, &["a", "s"], subarray, layout, 1);
    (traces.remove(0), cells)
}

/// `case`'s array opened through a recording storage (the open's
/// requests taken), and its directory.
fn opened(
    case: &str,
) -> (
    RecordingStorage<LocalStorage>,
    Arc<Snapshot>,
    std::path::PathBuf,
) {
    let dir = tdb_testdata::root().join(case).join("array");
    let storage = RecordingStorage::new(LocalStorage::new(&dir));
    let snap = Arc::new(Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap());
    storage.take();
    (storage, snap, dir)
}

/// The requests a trace counts in all.
fn requests_in(trace: &str) -> u64 {
    (trace.lines())
        .find_map(|l| l.strip_prefix("total: ")?.split(' ').next()?.parse().ok())
        .unwrap()
}

/// The traces of `times` reads of `subarray` on one opened array.
fn read_traces(
    case: &str,
    fields: &[&str],
    subarray: Subarray,
    layout: ResultLayout,
    times: usize,
) -> (Vec<String>, u64) {
    read_traces_under(case, fields, subarray, layout, times, None)
}

/// [`read_traces`] under `budget` (`None`: the default).
fn read_traces_under(
    case: &str,
    fields: &[&str],
    subarray: Subarray,
    layout: ResultLayout,
    times: usize,
    budget: Option<u64>,
) -> (Vec<String>, u64) {
    let (storage, snap, _) = opened(case);
    let mut traces = Vec::new();
    let mut cells = 0;
    for _ in 0..times {
        let mut spec = ReadSpec::new(fields.iter().copied())
            .with_subarray(subarray.clone())
            .with_layout(layout);
        if let Some(b) = budget {
            spec = spec.with_budget(b);
        }
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
    // expected.json query `cross_global`: 60 cells. The tiles of `a` and
    // `s` (180 KB unfiltered, three chunks) are sliced: after a walk over
    // their chunk headers, only the chunks holding the slice's rows are
    // read and decoded.
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
    let (traces, cells) = read_traces(
        "sparse_multi_range",
        &["a", "s"],
        s,
        ResultLayout::GlobalOrder,
        2,
    );
    assert_eq!(cells, 46);
    assert!(traces[0].contains("__fragment_metadata.tdb"));
    assert!(!traces[1].contains("__fragment_metadata.tdb"));
    insta::assert_snapshot!(traces[1]);
}

#[test]
fn a_few_cells_of_a_large_tile_fetch_only_the_chunks_holding_them() {
    // expected.json query `few_cells`: 4 cells of tile 0 (512 x 1024
    // cells; `a` in 32 chunks, `f` in 64, its validity in 8), by the
    // default budget. The chunk headers are walked 4 KiB at a time up to
    // the chunks holding cells 16,404..16,408; only those are read whole.
    let mut s = Subarray::new(2);
    s.add_range(0, range::<8>(16, 16));
    s.add_range(1, range::<8>(1020, 1023));
    let (mut traces, cells) = read_traces(
        "dense_large_tiles",
        &["a", "f"],
        s,
        ResultLayout::RowMajor,
        1,
    );
    assert_eq!(cells, 4);
    let trace = traces.remove(0);
    // The tiles' data files hold far more than what was read of them.
    let data_read = bytes_read(&trace, |l| l.contains("/a0.tdb") || l.contains("/a1"));
    assert!(data_read < 64 << 10, "{data_read} bytes of tiles read");
    insta::assert_snapshot!(trace);
}

#[test]
fn a_read_of_large_tiles_in_many_pieces_walks_each_tile_once() {
    // Tiles of 6.5 MiB unfiltered under a 1 MiB budget: dozens of pieces
    // per tile, each fetching the chunks of its cells. Each piece's walk
    // over a tile's chunk headers goes on from where the last one stood
    // (the chunk it ended in), so the read takes each data file's bytes
    // about twice, not once per piece.
    let (storage, snap, dir) = opened("dense_large_tiles");
    let spec = ReadSpec::new(["a", "f"]).with_budget(1 << 20);
    let (mut cells, mut batches) = (0, 0);
    for b in SyncRead::new(&storage, snap, spec).unwrap() {
        cells += b.unwrap().num_cells;
        batches += 1;
    }
    assert_eq!(cells, 1 << 20);
    assert!(batches > 20, "{batches} batches");
    let trace = storage.trace();
    let read = |file: &str| bytes_read(&trace, |l| l.contains(file));
    let size = |file: &str| -> u64 {
        std::fs::read_dir(dir.join("__fragments"))
            .unwrap()
            .map(|d| {
                std::fs::metadata(d.unwrap().path().join(file))
                    .unwrap()
                    .len()
            })
            .sum()
    };
    for file in ["a0.tdb", "a1.tdb", "a1_validity.tdb"] {
        let (read, size) = (read(&format!("/{file}")), size(file));
        // A piece's walk reads at least a window (4 KiB) of the tile from
        // where the last stood; restarting at each tile's first chunk,
        // the int32 tiles' file was read 8 times over.
        let bound = 2 * size + batches * 4096;
        assert!(read <= bound, "{file}: {read} bytes read of {size}");
    }
    // A piece whose cells begin past the chunk the last one ended in
    // starts its walk past that chunk, its header not read again: 36
    // requests (63, and 355 KB read instead of 244, when it was).
    let requests = requests_in(&trace);
    assert!(requests <= 40, "{requests} requests");
}

#[test]
fn pieces_that_take_turns_over_tiles_side_by_side_keep_each_tiles_last_chunk() {
    // TileDB's `dense_multi_chunk` read row-major under 64 KiB: a row of
    // two tiles in two fragments does not fit, so pieces are half a row,
    // one tile column after the other. Each tile's walk keeps the chunk it
    // ended in for its next piece, though the piece between took the other
    // tiles: the read takes each chunk about once. (When only the latest
    // piece's walks kept theirs, every half row fetched its chunks again:
    // 622 rounds of requests.) Its files are read on past what its pieces
    // ask (`read::prefetch`): 16 rounds under 256 KiB (47 before), 17
    // under 64 KiB (50 before reads on under every budget).
    let (storage, snap, _) = opened("dense_multi_chunk");
    let requests = |budget: u64| {
        let spec = ReadSpec::new(["a", "s"])
            .with_layout(ResultLayout::RowMajor)
            .with_budget(budget);
        let (mut cells, mut batches) = (0, 0);
        for b in SyncRead::new(&storage, snap.clone(), spec).unwrap() {
            cells += b.unwrap().num_cells;
            batches += 1;
        }
        assert_eq!(cells, 300 * 300);
        let requests = requests_in(&storage.trace());
        storage.take();
        (requests, batches)
    };
    let (read_on, _) = requests(256 << 10);
    let (turns, batches) = requests(64 << 10);
    assert!(batches > 100, "{batches} batches");
    assert!(turns <= 25, "{turns} rounds under 64 KiB");
    assert!(read_on <= 25, "{read_on} rounds under 256 KiB");
}

#[test]
fn a_box_holding_tiles_along_one_dimension_fetches_none_of_its_coordinates() {
    // Duplicates, unordered, the attribute alone: the box holds three of
    // the five tiles it meets along x (MBRs x 0-24, 16-60 and 0-48 within
    // 0-60) but none along y (each spans 0-98). Those tiles' x is not
    // fetched: every cell is inside along x. Asking for the coordinates
    // too fetches and checks them all, and gives the same cells.
    let (storage, snap, _) = opened("sparse_dups_scattered");
    let mut s = Subarray::new(2);
    s.add_range(0, range::<4>(0, 60));
    s.add_range(1, range::<4>(10, 90));
    let read = |fields: &[&str]| {
        storage.take();
        let spec = ReadSpec::new(fields.iter().copied())
            .with_subarray(s.clone())
            .with_layout(ResultLayout::Unordered);
        let mut a: Vec<i64> = Vec::new();
        for b in SyncRead::new(&storage, snap.clone(), spec).unwrap() {
            let b = b.unwrap();
            let data = &b.field("a").unwrap().data;
            a.extend(
                data.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap())),
            );
        }
        a.sort_unstable();
        let trace = storage.trace();
        let bytes = |file: &str| bytes_read(&trace, |l| l.contains(file));
        (a, bytes("/d0.tdb"), bytes("/d1.tdb"))
    };
    let (a, x, y) = read(&["a"]);
    let (all_a, all_x, all_y) = read(&["a", "x", "y"]);
    assert!(!a.is_empty());
    assert_eq!(a, all_a);
    assert!(
        x < all_x,
        "x: {x} bytes fetched, {all_x} with the coordinates"
    );
    assert_eq!(y, all_y);
}

#[test]
fn tiles_stored_without_filters_are_fetched_as_the_tile() {
    // expected.json query `tile_column`: 512 cells, in the two tiles of
    // rows 0-127 (128 x 256 cells each). Their `ch` tiles (3-byte cells,
    // chunks of 65,535 and 32,769 bytes) and `n` tiles (four chunks of
    // 64 KiB) are stored without filters: each is fetched on its own,
    // arranged (the chunks' data first, then the headers), and the data
    // is the decoded tile. The validity tiles (32 KiB) are coalesced as
    // before.
    let mut s = Subarray::new(2);
    s.add_range(0, range::<8>(0, 127));
    s.add_range(1, range::<8>(254, 257));
    let (mut traces, cells) = read_traces(
        "dense_unfiltered_tiles",
        &["ch", "n"],
        s,
        ResultLayout::RowMajor,
        1,
    );
    assert_eq!(cells, 512);
    let trace = traces.remove(0);
    let arranged = trace.lines().filter(|l| l.ends_with(" arranged")).count();
    assert_eq!(arranged, 4, "{trace}");
    insta::assert_snapshot!(trace);
}

#[test]
fn a_band_along_the_cell_order_under_a_small_budget_fetches_each_chunk_once() {
    // expected.json query `band`: rows 126-131 of all 512 columns, 3,072
    // cells, across the tiles' row boundary at 128 (128 x 256 tiles, `a`
    // and `n` in chunks of 64 and 32 rows, stored as they are). Under 16
    // KiB the chunks a line of the band crosses pass the budget: the read
    // spills in stretches (`read::stretches`) and fetches each chunk the
    // band touches once: within 2% of the unbudgeted read's bytes (a file
    // is read on by twice a request until it uses what was read on; here
    // it never does, the band jumping from a chunk to the next tile), in
    // no more ranges. (Read on by 8 times, it fetched a third more.)
    let mut s = Subarray::new(2);
    s.add_range(0, range::<8>(126, 131));
    s.add_range(1, range::<8>(0, 511));
    let fields = ["r", "c", "a", "ch", "n"];
    let band = |budget| {
        let (mut traces, cells) = read_traces_under(
            "dense_unfiltered_tiles",
            &fields,
            s.clone(),
            ResultLayout::RowMajor,
            1,
            budget,
        );
        assert_eq!(cells, 3072);
        traces.remove(0)
    };
    let (whole, small) = (band(None), band(Some(16 << 10)));
    let all = |_: &str| true;
    let once = bytes_read(&whole, all);
    assert!(
        bytes_read(&small, all) <= once + once / 50,
        "{small}\nagainst\n{whole}"
    );
    let ranges = |t: &str| t.lines().filter(|l| l.starts_with("    ")).count();
    assert!(
        ranges(&small) <= ranges(&whole),
        "{small}\nagainst\n{whole}"
    );
    insta::assert_snapshot!(small);
}

/// The bytes a trace's requests of the lines `which` picks read.
fn bytes_read(trace: &str, which: impl Fn(&str) -> bool) -> u64 {
    (trace.lines())
        .filter(|l| which(l))
        .filter_map(|l| {
            l.rsplit(": ")
                .next()?
                .trim_end_matches(" arranged")
                .strip_suffix(" B")?
                .parse::<u64>()
                .ok()
        })
        .sum()
}
