//! A read with a budget smaller than its result returns the same cells, in
//! the same order, over several batches.

use std::sync::Arc;
use tdb_fragment::TimeWindow;
use tdb_query::{Batch, ReadSpec, Snapshot, SyncRead};
use tdb_storage::LocalStorage;
use tdb_storage::ReadableStorage as _;

#[test]
fn a_small_budget_gives_the_same_cells_in_batches() {
    let (storage, snap) = fixture("dense_multi_chunk");
    let read = |budget: u64| -> Vec<Batch> {
        let spec = ReadSpec::new(["r", "c", "a", "s"]).with_budget(budget);
        SyncRead::new(&storage, snap.clone(), spec)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let joined = |batches: &[Batch]| {
        let mut all = Batch::default();
        batches.iter().for_each(|b| all.append(b));
        all
    };
    // Unbudgeted, a local read of a few MiB goes in two pieces.
    let whole = read(tdb_query::DEFAULT_BUDGET);
    assert!(whole.len() <= 2, "{} batches", whole.len());
    // Tiles of the four fields take 550 kB a tile: a budget of 2 MiB holds
    // two at a time, so the read goes in pieces and batches.
    let small = read(2 << 20);
    assert!(small.len() > 4, "{} batches", small.len());
    assert_eq!(joined(&small), joined(&whole));
}

/// Steps a read to the end: its batches joined, and how many pieces it
/// decoded (what shows a read went in pieces: their requests may be
/// answered from bytes read on, in fewer rounds).
fn run<S: tdb_storage::ReadableStorage + ?Sized>(
    storage: &S,
    snap: &Arc<Snapshot>,
    spec: ReadSpec,
) -> (Batch, usize) {
    let m = stepped(storage, snap, spec);
    (m.all, m.pieces)
}

/// [`run`], and the bytes the read fetched.
fn fetching<S: tdb_storage::ReadableStorage + ?Sized>(
    storage: &S,
    snap: &Arc<Snapshot>,
    spec: ReadSpec,
) -> (Batch, usize, u64) {
    let m = stepped(storage, snap, spec);
    (m.all, m.rounds, m.bytes)
}

/// TileDB's fixture `case` (its array), opened.
fn fixture(case: &str) -> (LocalStorage, Arc<Snapshot>) {
    let storage = LocalStorage::new(tdb_testdata::root().join(case).join("array"));
    let snap = Arc::new(Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap());
    (storage, snap)
}

/// What a read stepped by hand gave and cost.
struct Stepped {
    /// Its batches joined.
    all: Batch,
    /// Rounds of requests, ranges asked for, bytes fetched.
    rounds: usize,
    ranges: usize,
    bytes: u64,
    /// Decoding steps.
    pieces: usize,
}

/// A read of `spec` stepped by hand to its end ([`Stepped`]).
fn stepped<S: tdb_storage::ReadableStorage + ?Sized>(
    storage: &S,
    snap: &Arc<Snapshot>,
    spec: ReadSpec,
) -> Stepped {
    let mut reader = tdb_query::Reader::new(snap.clone(), spec).unwrap();
    let mut m = Stepped {
        all: Batch::default(),
        rounds: 0,
        ranges: 0,
        bytes: 0,
        pieces: 0,
    };
    loop {
        match reader.step().unwrap() {
            tdb_query::ReadStep::Need(r) => {
                m.rounds += 1;
                m.ranges += r.len();
                m.bytes += (r.iter())
                    .map(|q| match q.range {
                        tdb_storage::ByteRange::Bounded { len, .. } => len,
                        tdb_storage::ByteRange::Suffix(n) => n,
                        tdb_storage::ByteRange::Whole => 0,
                    })
                    .sum::<u64>();
                let got = storage.read_ranges(&r).unwrap();
                reader.push(r.into_iter().zip(got)).unwrap();
            }
            tdb_query::ReadStep::Decode(w) => {
                m.pieces += 1;
                reader.push_decoded(w.run().unwrap()).unwrap();
            }
            tdb_query::ReadStep::Batch(b) => m.all.append(&b),
            tdb_query::ReadStep::Done => return m,
        }
    }
}

/// A sparse read over two overlapping fragments whose tiles exceed the
/// budget is read piece by piece (more pieces decoded), and still
/// returns the same cells in the same order: the newest cell per
/// coordinate, row-major and in global order.
#[test]
fn a_sparse_read_over_budget_goes_piece_by_piece() {
    use tdb_query::ResultLayout;
    let (storage, snap) = fixture("aggregates_sparse");
    for layout in [
        ResultLayout::RowMajor,
        ResultLayout::GlobalOrder,
        ResultLayout::ColMajor,
    ] {
        let spec = ReadSpec::new(["x", "y", "i", "s"]).with_layout(layout);
        let (whole, steps) = run(&storage, &snap, spec.clone());
        let (pieces, more) = run(&storage, &snap, spec.with_budget(2048));
        assert!(
            more > steps + 2,
            "{layout:?}: {more} pieces against {steps}"
        );
        assert_eq!(pieces, whole, "{layout:?}");
    }
}

/// A sparse array over a float and a string dimension (two overlapping
/// fragments, 50 cells a tile, column-major cells), written by tdb.
fn float_and_string_dims() -> (tdb_storage::MemoryStorage, Arc<Snapshot>) {
    use tdb_format::{ArrayType, Datatype};
    use tdb_query::{FieldBuffer, ResultLayout, WriteSpec};
    use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("f", 0f64..=1000.0).tile_extent(100f64))
        .dimension(DimensionBuilder::string("s"))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .capacity(50)
        // Cells ordered by `s` within a space tile of `f`: a cut of `f`
        // inside a tile would put the global order out of order.
        .cell_order(tdb_format::Layout::ColMajor)
        .build()
        .unwrap();
    let storage = tdb_storage::MemoryStorage::new();
    let entry = tdb_fragment::create_array(&storage, "arr", &schema, &[], None, 1).unwrap();
    let mut rng = tdb_testdata::XorShift::new(7);
    for t in [2u64, 3] {
        let mut f = FieldBuffer::new("f", Datatype::Float64, 1, false);
        let mut a = FieldBuffer::new("a", Datatype::Int32, 1, false);
        let mut s = FieldBuffer::new("s", Datatype::StringAscii, u32::MAX, false);
        let mut offsets = Vec::new();
        // The second fragment writes every other coordinate of the first
        // again (the newer wins), in another order.
        let cells: Vec<u64> = if t == 2 {
            (0..2000).collect()
        } else {
            (0..2000).rev().step_by(2).collect()
        };
        for i in cells {
            let x = (i % 400) as f64 * 2.5;
            f.data.extend_from_slice(&x.to_le_bytes());
            offsets.push(s.data.len() as u64);
            s.data
                .extend_from_slice(["a", "bb", "b", "ca", "d"][(i / 400) as usize].as_bytes());
            a.data
                .extend_from_slice(&((rng.next_u64() % 1000) as i32).to_le_bytes());
        }
        s.offsets = Some(offsets);
        let spec = WriteSpec::new(vec![f, s, a])
            .with_layout(ResultLayout::Unordered)
            .at(t);
        tdb_query::write_fragment(&storage, "arr", &entry, None, &spec).unwrap();
    }
    let snap = Arc::new(Snapshot::load(&storage, "arr", TimeWindow::ALL, None).unwrap());
    (storage, snap)
}

/// Reads over budget cut float and string dimensions too (after tile
/// bounds) and answer as one read does: the same cells, in the same order
/// where the layout has one, newest versions only.
#[test]
fn float_and_string_dimensions_are_read_piece_by_piece() {
    use tdb_query::ResultLayout;
    let (storage, snap) = float_and_string_dims();
    let rows = |b: &Batch| -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
        (0..b.num_cells as usize)
            .map(|i| {
                let cell = |k: usize| b.fields[k].column().cell(i).to_vec();
                (cell(0), cell(1), cell(2))
            })
            .collect()
    };
    for layout in [
        ResultLayout::RowMajor,
        ResultLayout::ColMajor,
        ResultLayout::Unordered,
        ResultLayout::GlobalOrder,
    ] {
        let spec = ReadSpec::new(["f", "s", "a"]).with_layout(layout);
        let (whole, steps) = run(&storage, &snap, spec.clone());
        assert!(whole.num_cells > 1000, "{}", whole.num_cells);
        let (pieces, more) = run(&storage, &snap, spec.with_budget(48 << 10));
        // Column-major cuts the strings first, and every tile (ordered by
        // `f` first) spans all of them: nothing tells where to cut.
        if layout != ResultLayout::ColMajor {
            assert!(
                more > steps + 4,
                "{layout:?}: {more} pieces against {steps}"
            );
        }
        let (mut a, mut b) = (rows(&whole), rows(&pieces));
        if layout == ResultLayout::Unordered {
            a.sort();
            b.sort();
        }
        assert!(a == b, "{layout:?}: the cells differ");
    }
}

/// The same on TileDB's bytes: a float dimension whose domain starts at
/// -100 (space tiles of 25) and a string dimension holding `e` and `e\0`,
/// column-major cells, two overlapping fragments.
#[test]
fn a_tiledb_array_over_float_and_string_dimensions_goes_piece_by_piece() {
    use tdb_query::ResultLayout;
    let (storage, snap) = fixture("sparse_float_string_pieces");
    for layout in [
        ResultLayout::RowMajor,
        ResultLayout::ColMajor,
        ResultLayout::GlobalOrder,
    ] {
        let spec = ReadSpec::new(["f", "s", "a"]).with_layout(layout);
        let (whole, steps) = run(&storage, &snap, spec.clone());
        assert_eq!(whole.num_cells, 600);
        let (pieces, more) = run(&storage, &snap, spec.with_budget(4096));
        assert!(
            more > steps + 4,
            "{layout:?}: {more} pieces against {steps}"
        );
        assert!(pieces == whole, "{layout:?}: the cells differ");
    }
}

/// A global-order read of one fragment in Hilbert order goes in runs of
/// its tiles (no subarray cut keeps that order), on TileDB's bytes: the
/// same cells in the same order; over two fragments too, in runs spilled
/// sorted and merged (`read::spill`).
#[test]
fn a_hilbert_global_order_read_goes_in_runs_of_tiles() {
    use tdb_query::ResultLayout;
    for (case, at) in [
        ("sparse_hilbert", TimeWindow::ALL),
        ("sparse_hilbert_multi", TimeWindow::until(1)),
        ("sparse_hilbert_multi", TimeWindow::ALL),
    ] {
        let dir = tdb_testdata::root().join(case).join("array");
        let storage = LocalStorage::new(&dir);
        let snap = Arc::new(Snapshot::load(&storage, "", at, None).unwrap());
        let spec = ReadSpec::new(["x", "y", "a"]).with_layout(ResultLayout::GlobalOrder);
        let (whole, steps) = run(&storage, &snap, spec.clone());
        let (pieces, more) = run(&storage, &snap, spec.with_budget(4096));
        assert!(more > steps, "{case}: {more} pieces against {steps}");
        assert!(pieces == whole, "{case}: the cells differ");
    }
}

/// Where TileDB tests a string dimension's ranges in parts of a tile
/// (keeping cells outside them and dropping cells inside), a read cut into
/// pieces along that dimension returns what the read in one piece does, in
/// the same order (each piece decides by the query's ranges and returns
/// the cells of its share of the values): on TileDB's bytes, one range and
/// overlapping ones (cells repeated), in every layout.
#[test]
fn pieces_cut_along_tiledbs_string_parts_dimension_answer_as_one_piece() {
    use tdb_query::{ResultLayout, Subarray};
    use tdb_schema::Range;
    for (case, d) in [
        ("sparse_string_parts_col", 1),
        ("sparse_string_parts_row", 0),
    ] {
        let (storage, snap) = fixture(case);
        // Reads that went in pieces (more pieces decoded).
        let mut cut = 0;
        for ranges in [
            &[("a", "b")][..],
            &[("a", "m"), ("k", "z")],
            &[("k", "k"), ("x", "x")],
        ] {
            let mut sub = Subarray::new(2);
            for (lo, hi) in ranges {
                sub.add_range(d, Range::from_bounds(lo.as_bytes(), hi.as_bytes(), true));
            }
            for layout in [
                ResultLayout::RowMajor,
                ResultLayout::ColMajor,
                ResultLayout::GlobalOrder,
                ResultLayout::Unordered,
            ] {
                let spec = ReadSpec::new(["i", "s", "a"])
                    .with_subarray(sub.clone())
                    .with_layout(layout);
                let (whole, steps) = run(&storage, &snap, spec.clone());
                for budget in [2048, 4096] {
                    let (pieces, more) = run(&storage, &snap, spec.clone().with_budget(budget));
                    let what = format!("{case} {ranges:?} {layout:?} at {budget}");
                    assert!(pieces == whole, "{what}: the cells differ");
                    cut += usize::from(more > steps);
                }
            }
        }
        assert!(cut >= 16, "{case}: {cut} reads went in pieces");
    }
}

/// Reads under a budget below the chunks a piece of their tiles needs
/// (TileDB's 64 KiB chunks: `dense_multi_chunk`'s strings, `sparse_large_tiles`'
/// tiles of 100,000 cells, read by runs of their cells; 21-22 KB for one
/// cell's chunks, two of a var field's offsets) go over the budget by those
/// chunks, and answer as the unbudgeted read does, in more pieces (or,
/// for a narrow read, as many).
#[test]
fn a_budget_below_a_cells_chunks_reads_the_cells() {
    use tdb_query::{ResultLayout, Subarray};
    let range = |lo: i64, hi: i64, n: usize| {
        tdb_schema::Range::from_bounds(&lo.to_le_bytes()[..n], &hi.to_le_bytes()[..n], false)
    };
    let mut dense = Subarray::new(2);
    dense.add_range(0, range(145, 154, 8));
    dense.add_range(1, range(70, 79, 8));
    dense.add_range(1, range(147, 152, 8));
    let mut sparse = Subarray::new(2);
    sparse.add_range(0, range(300, 306, 4));
    sparse.add_range(1, range(100, 110, 4));
    for (case, fields, sub) in [
        ("dense_multi_chunk", &["a", "s"][..], dense),
        ("sparse_large_tiles", &["x", "y", "a", "f", "s"], sparse),
    ] {
        let (storage, snap) = fixture(case);
        let spec = ReadSpec::new(fields.iter().copied())
            .with_subarray(sub)
            .with_layout(ResultLayout::RowMajor);
        let (whole, steps) = run(&storage, &snap, spec.clone());
        assert!(whole.num_cells > 10, "{case}: {} cells", whole.num_cells);
        for budget in [16 << 10, 1 << 10] {
            let (pieces, more) = run(&storage, &snap, spec.clone().with_budget(budget));
            assert!(pieces == whole, "{case} at {budget}: the cells differ");
            // (`sparse_large_tiles`' box is a narrow read: unbudgeted too
            // its probes find the chunks of its cells in as many rounds of
            // requests, but not in as many pieces.)
            assert!(
                more > steps,
                "{case} at {budget}: {more} pieces, {steps} unbudgeted"
            );
            let batches = SyncRead::new(&storage, snap.clone(), spec.clone().with_budget(budget))
                .unwrap()
                .count();
            // Batches get half the budget: 8 cells of 61 bytes at 1 KiB.
            assert!(
                budget > 1024 || batches > 1,
                "{case} at {budget}: {batches} batches"
            );
        }
    }
}

/// A budget too small for a tile that must be held whole (var-size cells
/// whose filters keep their offsets inside the data, TileDB's DICTIONARY
/// on strings: no cell's bytes can be found without the tile's, which
/// TileDB writes as one chunk) is passed by that tile, as by a chunk: the
/// read answers, each tile fetched once, in more than one batch.
#[test]
fn a_budget_below_a_tile_held_whole_is_passed_by_the_tile() {
    let (storage, snap) = fixture("filter_dictionary");
    let spec = ReadSpec::new(["a"]);
    let read = |budget: Option<u64>| {
        let spec = budget.map_or(spec.clone(), |b| spec.clone().with_budget(b));
        let (cells, _, bytes) = fetching(&storage, &snap, spec.clone());
        let batches = SyncRead::new(&storage, snap.clone(), spec).unwrap().count();
        (cells, bytes, batches)
    };
    let (whole, bytes, _) = read(None);
    assert_eq!(whole.num_cells, 200);
    let (cells, fetched, batches) = read(Some(200));
    assert!(cells == whole, "the cells differ");
    // Each tile once: no more bytes than unbudgeted (which reads on
    // past the tiles).
    assert!(fetched <= bytes, "{fetched} bytes, {bytes} unbudgeted");
    assert!(batches > 1, "{batches} batch");
}

/// TileDB's `strings_large_whole_tiles` (string RLE and DICTIONARY tiles
/// of 100,000 cells, one chunk each) and `strings_whole_tiles_2d` (four
/// RLE tiles of 300 × 300 strings, each result line crossing two) under
/// 16 KiB and 1 MiB, in every dense layout: each piece holds whole tiles,
/// never part of one (whose every part would fetch and decode the tile
/// again: 7,863 requests and 10.7 MB fetched under 1 MiB, against 23 and
/// 94 KB, when pieces were cut inside the first; the second's lines,
/// cut so, 1,719 requests and 514 MB against 22 and 3 MB, until runs of
/// its tiles spilled), so the read fetches no more than the unbudgeted
/// one and gives its cells.
#[test]
fn tiles_held_whole_are_never_cut_inside() {
    use tdb_query::ResultLayout;
    for (case, fields) in [
        ("strings_large_whole_tiles", ["r", "w"]),
        ("strings_whole_tiles_2d", ["s", "a"]),
    ] {
        let (storage, snap) = fixture(case);
        for layout in [
            ResultLayout::RowMajor,
            ResultLayout::ColMajor,
            ResultLayout::GlobalOrder,
        ] {
            let spec = ReadSpec::new(fields).with_layout(layout);
            let (whole, rounds, bytes) = fetching(&storage, &snap, spec.clone());
            assert!(whole.num_cells >= 200_000, "{case}");
            for budget in [16 << 10, 1 << 20] {
                let (got, r, b) = fetching(&storage, &snap, spec.clone().with_budget(budget));
                let at = format!("{case} {layout:?} under {budget}");
                assert!(got == whole, "{at}: the cells differ");
                assert!(b <= bytes, "{at}: {b} bytes, {bytes} unbudgeted");
                assert!(r <= rounds + 4, "{at}: {r} rounds, {rounds} unbudgeted");
            }
        }
    }
}

/// Tiles whose min/max metadata rule the condition out are not fetched
/// (one fragment: no older cell could win over a skipped one), and the
/// answer stays TileDB's: here the single cell holding the minimum.
#[test]
fn tiles_the_condition_rules_out_are_not_fetched() {
    let dir = tdb_testdata::root().join("sparse_2d_int").join("array");
    let storage = tdb_storage::RecordingStorage::new(LocalStorage::new(&dir));
    let snap = Arc::new(Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap());
    let tile_bytes = |condition: &str| -> (u64, u64) {
        storage.take();
        let spec = ReadSpec::new(["x", "y", "a"]).with_condition(condition);
        let cells: u64 = SyncRead::new(&storage, snap.clone(), spec)
            .unwrap()
            .map(|b| b.unwrap().num_cells)
            .sum();
        let bytes = (storage.take().iter())
            .flat_map(tdb_storage::Request::ranges)
            .filter(|(file, _, _)| !file.ends_with("__fragment_metadata.tdb"))
            .filter_map(|(_, _, got)| *got)
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

/// A sparse tile two consecutive pieces read is fetched once: the second
/// piece keeps it (a read under a small budget is many pieces, and tiles
/// that span them cost a fetch and a decode each time otherwise). Checked
/// on TileDB's Hilbert-ordered arrays read row-major, whose tiles span
/// many pieces, with the same cells as one unbudgeted read.
#[test]
fn consecutive_pieces_fetch_a_shared_tile_once() {
    for case in ["sparse_hilbert_multi", "sparse_float_string_pieces"] {
        let (storage, snap) = fixture(case);
        let fields: Vec<String> = snap.schema().fields().map(str::to_owned).collect();
        let spec = ReadSpec::new(fields).with_layout(tdb_query::ResultLayout::RowMajor);
        let (whole, _) = run(&storage, &snap, spec.clone());
        // Below a tile (which the read then holds over the budget): the
        // most pieces.
        let budget = 2048;
        let mut reader =
            tdb_query::Reader::new(snap.clone(), spec.clone().with_budget(budget)).unwrap();
        let mut step = reader.step().unwrap();
        let (mut all, mut last_tiles, mut pieces) = (Batch::default(), Vec::new(), 0);
        loop {
            match step {
                tdb_query::ReadStep::Need(r) => {
                    let tiles: Vec<_> = r
                        .iter()
                        .filter(|q| !q.key.ends_with("__fragment_metadata.tdb"))
                        .cloned()
                        .collect();
                    if !tiles.is_empty() {
                        pieces += 1;
                        for t in &tiles {
                            assert!(
                                !last_tiles.contains(t),
                                "{case} at {budget}: {} {} fetched by two pieces in a row",
                                t.key,
                                t.range
                            );
                        }
                        last_tiles = tiles;
                    }
                    let got = storage.read_ranges(&r).unwrap();
                    reader.push(r.into_iter().zip(got)).unwrap();
                }
                tdb_query::ReadStep::Decode(w) => reader.push_decoded(w.run().unwrap()).unwrap(),
                tdb_query::ReadStep::Batch(b) => all.append(&b),
                tdb_query::ReadStep::Done => break,
            }
            step = reader.step().unwrap();
        }
        assert!(pieces > 3, "{case}: {pieces} pieces at {budget}");
        assert_eq!(all, whole, "{case} at {budget}");
    }
}

/// A dense array written by tdb: 100×100 cells in tiles of 50×50 whose
/// cells go `cell_order`; an int32, a nullable string and a nullable pair
/// of int16s (the string's fill is its default, the int's 7, the pair's
/// (-3, 4) and null). Fragment 1 covers rows
/// 0-59, columns 0-79; fragment 2, newer, rows 30-99, columns 20-99; the
/// rest is fill.
fn dense_overlapping(
    cell_order: tdb_format::Layout,
) -> (tdb_storage::MemoryStorage, Arc<Snapshot>) {
    use tdb_format::{ArrayType, Datatype};
    use tdb_query::{FieldBuffer, Subarray, Validity, WriteSpec};
    use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder, Range};
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("r", 0i64..=99).tile_extent(50i64))
        .dimension(DimensionBuilder::range("c", 0i64..=99).tile_extent(50i64))
        .attribute(AttributeBuilder::new("a", Datatype::Int32).fill(7i32))
        .attribute(
            AttributeBuilder::new("s", Datatype::StringUtf8)
                .var()
                .nullable(true),
        )
        .attribute(
            AttributeBuilder::new("n", Datatype::Int16)
                .cell_val_num(2)
                .nullable(true)
                .fill_bytes([(-3i16).to_le_bytes(), 4i16.to_le_bytes()].concat()),
        )
        .cell_order(cell_order)
        .build()
        .unwrap();
    let storage = tdb_storage::MemoryStorage::new();
    let entry = tdb_fragment::create_array(&storage, "arr", &schema, &[], None, 1).unwrap();
    for (t, (r0, r1), (c0, c1)) in [
        (2u64, (0i64, 59i64), (0i64, 79i64)),
        (3, (30, 99), (20, 99)),
    ] {
        let mut a = FieldBuffer::new("a", Datatype::Int32, 1, false);
        let mut s = FieldBuffer::new("s", Datatype::StringUtf8, u32::MAX, true);
        let mut n = FieldBuffer::new("n", Datatype::Int16, 2, true);
        let (mut offsets, mut valid, mut n_valid) = (Vec::new(), Vec::new(), Vec::new());
        for r in r0..=r1 {
            for c in c0..=c1 {
                let v = (t as i64 * 100_000 + r * 100 + c) as i32;
                a.data.extend_from_slice(&v.to_le_bytes());
                n.data
                    .extend_from_slice(&(r as i16 * t as i16).to_le_bytes());
                n.data.extend_from_slice(&(c as i16).to_le_bytes());
                n_valid.push(u8::from((r * c) % 5 != 1));
                offsets.push(s.data.len() as u64);
                s.data.extend_from_slice(
                    format!("{t}:{r}:{}", "x".repeat((c % 5) as usize)).as_bytes(),
                );
                valid.push(u8::from((r + c) % 7 != 0));
            }
        }
        s.offsets = Some(offsets);
        s.validity = Some(Validity::Bytes(valid));
        n.validity = Some(Validity::Bytes(n_valid));
        let mut sub = Subarray::new(2);
        let range =
            |lo: i64, hi: i64| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
        sub.add_range(0, range(r0, r1));
        sub.add_range(1, range(c0, c1));
        let spec = WriteSpec::new(vec![a, s, n]).with_subarray(sub).at(t);
        tdb_query::write_fragment(&storage, "arr", &entry, None, &spec).unwrap();
    }
    let snap = Arc::new(Snapshot::load(&storage, "arr", TimeWindow::ALL, None).unwrap());
    (storage, snap)
}

/// One dimension's ranges.
type Ranges<'a> = &'a [(i64, i64)];

/// A read of `fields` of [`dense_overlapping`]'s array over `rows` ×
/// `cols` (each dimension's ranges in the order given), in `layout`, with
/// `condition`.
fn overlapping_spec(
    fields: &[&str],
    (rows, cols): (Ranges<'_>, Ranges<'_>),
    layout: tdb_query::ResultLayout,
    condition: Option<&str>,
) -> ReadSpec {
    use tdb_query::Subarray;
    use tdb_schema::Range;
    let range = |lo: i64, hi: i64| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
    let mut sub = Subarray::new(2);
    for &(lo, hi) in rows {
        sub.add_range(0, range(lo, hi));
    }
    for &(lo, hi) in cols {
        sub.add_range(1, range(lo, hi));
    }
    let spec = ReadSpec::new(fields.iter().copied())
        .with_layout(layout)
        .with_subarray(sub);
    match condition {
        Some(c) => spec.with_condition(c),
        None => spec,
    }
}

/// Checks `got`, a whole-array read of [`dense_overlapping`] in `layout`
/// under "a < 305000 and c != 40" with `a` first: (55, 50) is fill (7),
/// as fragment 2 wrote 305,550 there, which fails, over fragment 1's
/// 205,550, which passes.
fn rejected_newer_hides_older(got: &Batch, layout: tdb_query::ResultLayout, what: &str) {
    let at = match layout {
        tdb_query::ResultLayout::ColMajor => 50 * 100 + 55,
        _ => 55 * 100 + 50,
    };
    let a = &got.fields[0].data[at * 4..at * 4 + 4];
    assert_eq!(i32::from_le_bytes(a.try_into().unwrap()), 7, "{what}");
}

/// A read of [`dense_overlapping`]'s array: its fields, rows, columns
/// and condition.
type OverlappingCase<'a> = (&'a [&'a str], Ranges<'a>, Ranges<'a>, Option<&'a str>);

/// Each of `cases`, over [`dense_overlapping`]'s array of each cell order
/// read in its layout (`orders`), gives under 4 and 16 KiB the cells of
/// the read in one piece, in under 100 rounds (thousands in pieces cut by
/// the subarray: `["n", "s"]` along the order under 4 KiB took 1,319),
/// rejected newer cells hiding older ones where a condition reads the
/// whole array, and under 4 KiB the same validity as bits.
fn same_cells_as_one_piece(
    orders: [(tdb_format::Layout, tdb_query::ResultLayout); 2],
    cases: &[OverlappingCase<'_>],
) {
    let whole_rows: &[(i64, i64)] = &[(0, 99)];
    for (cells, layout) in orders {
        let (storage, snap) = dense_overlapping(cells);
        for &(fields, rows, cols, condition) in cases {
            let spec = overlapping_spec(fields, (rows, cols), layout, condition);
            let (whole, _) = run(&storage, &snap, spec.clone());
            let what = format!(
                "{layout:?} of {cells:?} cells, {fields:?} of {rows:?} × {cols:?} where {condition:?}"
            );
            let count = |r: &[(i64, i64)]| r.iter().map(|(lo, hi)| hi - lo + 1).sum::<i64>();
            assert_eq!(
                whole.num_cells,
                (count(rows) * count(cols)) as u64,
                "{what}"
            );
            for budget in [4096, 16 << 10] {
                let (got, rounds, _) = fetching(&storage, &snap, spec.clone().with_budget(budget));
                assert_eq!(got, whole, "{what} under {budget}");
                assert!(rounds < 100, "{what} under {budget}: {rounds} rounds");
                if condition.is_some() && rows == whole_rows {
                    rejected_newer_hides_older(&got, layout, &what);
                }
            }
            let packed = spec.clone().with_packed_validity();
            let (bits, _) = run(&storage, &snap, packed.clone());
            let (got, _) = run(&storage, &snap, packed.with_budget(4096));
            assert_eq!(got, bits, "{what}, validity as bits");
        }
    }
}

/// Dense reads along the cell order whose chunks hold more lines than a
/// piece under the budget go in stretches (`read::stretches`): the same
/// cells in the same order as the read in one piece, newest fragment first
/// and fill (the fields' own, null where so) where none wrote, with and
/// without the dimensions, over several ranges a dimension (out of order
/// and overlapping), a field asked for twice, a var-size one, and with a
/// condition, whose rejected cells are fill and hide older fragments'
/// cells beneath them; each tile read about once.
#[test]
fn dense_reads_along_the_cell_order_go_in_stretches() {
    use tdb_query::ResultLayout;
    let whole_rows: &[(i64, i64)] = &[(0, 99)];
    let cases: &[OverlappingCase<'_>] = &[
        (&["a", "n"][..], whole_rows, whole_rows, None),
        (
            &["c", "n", "r", "a"][..],
            &[(5, 94)][..],
            &[(3, 97)][..],
            None,
        ),
        (&["a", "a"][..], &[(61, 61)][..], whole_rows, None),
        (
            &["r", "a", "c", "n"][..],
            &[(70, 90), (2, 20), (10, 55), (60, 60)][..],
            &[(40, 99), (0, 45)][..],
            None,
        ),
        (&["n", "s"][..], whole_rows, whole_rows, None),
        // Fragment 2's cells from row 50 on fail: fill, not fragment
        // 1's older cells beneath them.
        (
            &["a", "n", "s"][..],
            whole_rows,
            whole_rows,
            Some("a < 305000 and c != 40"),
        ),
        (
            &["s", "a", "r"][..],
            &[(90, 99), (0, 60)][..],
            &[(30, 30), (5, 80), (81, 81)][..],
            Some("a < 305000 and c != 40"),
        ),
    ];
    same_cells_as_one_piece(
        [
            (tdb_format::Layout::RowMajor, ResultLayout::RowMajor),
            (tdb_format::Layout::ColMajor, ResultLayout::ColMajor),
        ],
        cases,
    );
}

/// Dense reads whose result order crosses their tiles' cell order, with
/// tiles past the budget, go in stretches too, each a cell of every line
/// of a piece (`read::stretches`), runs merged down where many meet: the
/// same cells in the same order as the read in one piece, newest fragment
/// first and fill (the fields' own, null where so) where none wrote, with
/// and without the dimensions asked for, over several ranges a dimension
/// (out of order and overlapping: a cell once for each range holding it),
/// with a condition whose rejected cells hide older ones; each tile's
/// chunks read about once, not again for every few cells (a few dozen
/// rounds, not thousands).
#[test]
fn dense_reads_across_the_cell_order_go_in_stretches() {
    use tdb_query::ResultLayout;
    let whole_rows: &[(i64, i64)] = &[(0, 99)];
    let cases: &[OverlappingCase<'_>] = &[
        (&["a", "s"][..], whole_rows, whole_rows, None),
        (&["n", "a", "n"][..], whole_rows, whole_rows, None),
        (
            &["c", "s", "r", "a"][..],
            &[(5, 94)][..],
            &[(3, 97)][..],
            None,
        ),
        (&["a"][..], &[(61, 61)][..], whole_rows, None),
        // Fragment 2's cells from row 50 on fail: fill, not fragment
        // 1's older cells beneath them.
        (
            &["a", "s"][..],
            whole_rows,
            whole_rows,
            Some("a < 305000 and c != 40"),
        ),
        // Out of order, overlapping, and across both fragments.
        (
            &["r", "a", "c", "s"][..],
            &[(70, 90), (2, 20), (10, 55), (60, 60)][..],
            &[(40, 99), (0, 45)][..],
            None,
        ),
        (
            &["s", "a"][..],
            &[(90, 99), (0, 60)][..],
            &[(30, 30), (5, 80), (81, 81)][..],
            Some("a < 305000 and c != 40"),
        ),
    ];
    same_cells_as_one_piece(
        [
            (tdb_format::Layout::RowMajor, ResultLayout::ColMajor),
            (tdb_format::Layout::ColMajor, ResultLayout::RowMajor),
        ],
        cases,
    );
}

/// Pieces of one tile's cells hand their stretches to the spill as they
/// come, a block at a time, each block a sorted run or the next part of
/// one: a tile of 3,000 × 7 int32 cells (pieces of many short lines, cut
/// anywhere in a line: stretches of a piece's rows, a line's cells apart)
/// and one of 4 × 30,000 (pieces of part of a line: a stretch a cell) read
/// col-major under 16 and 64 KiB, whole and over ranges: the unbudgeted
/// read's cells.
#[test]
fn pieces_of_one_tile_hand_their_stretches_on_as_they_come() {
    use tdb_format::{ArrayType, Datatype};
    use tdb_query::{FieldBuffer, ResultLayout, WriteSpec};
    use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};
    let range = |lo: i64, hi: i64| {
        tdb_schema::Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false)
    };
    for (rows, cols) in [(3_000i64, 7i64), (4, 30_000)] {
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dimension(DimensionBuilder::range("r", 0i64..=rows - 1).tile_extent(rows))
            .dimension(DimensionBuilder::range("c", 0i64..=cols - 1).tile_extent(cols))
            .attribute(AttributeBuilder::new("a", Datatype::Int32))
            .build()
            .unwrap();
        let storage = tdb_storage::MemoryStorage::new();
        let entry = tdb_fragment::create_array(&storage, "arr", &schema, &[], None, 1).unwrap();
        let mut a = FieldBuffer::new("a", Datatype::Int32, 1, false);
        for v in 0..(rows * cols) as i32 {
            a.data.extend_from_slice(&v.to_le_bytes());
        }
        let write = WriteSpec::new(vec![a]).at(2);
        tdb_query::write_fragment(&storage, "arr", &entry, None, &write).unwrap();
        let snap = Arc::new(Snapshot::load(&storage, "arr", TimeWindow::ALL, None).unwrap());
        let cuts = [
            None,
            Some((1, rows - 2, 1, cols - 1)),
            Some((0, rows - 1, cols / 3, cols / 2)),
        ];
        for cut in cuts {
            let mut spec = ReadSpec::new(["a", "r", "c"]).with_layout(ResultLayout::ColMajor);
            if let Some((r0, r1, c0, c1)) = cut {
                let mut sub = tdb_query::Subarray::new(2);
                sub.add_range(0, range(r0, r1));
                sub.add_range(1, range(c0, c1));
                spec = spec.with_subarray(sub);
            }
            let (whole, _) = run(&storage, &snap, spec.clone());
            for budget in [16 << 10, 64 << 10] {
                let (got, rounds, _) = fetching(&storage, &snap, spec.clone().with_budget(budget));
                let what = format!("{rows} × {cols}, {cut:?} under {budget}");
                assert_eq!(got, whole, "{what}");
                assert!(rounds < 100, "{what}: {rounds} rounds");
            }
        }
    }
}

/// A dense array written by tdb: 1024 × 256 int32 cells in square tiles
/// of `extent`, row-major, through ZSTD (`zstd`) or stored as they are.
fn dense_square_tiles(extent: i64, zstd: bool) -> (tdb_storage::MemoryStorage, Arc<Snapshot>) {
    dense_tiles((1024, 256), extent, zstd)
}

/// [`dense_square_tiles`] of `rows` × `cols` cells.
fn dense_tiles(
    (rows, cols): (i64, i64),
    extent: i64,
    zstd: bool,
) -> (tdb_storage::MemoryStorage, Arc<Snapshot>) {
    use tdb_format::{ArrayType, Datatype};
    use tdb_query::{FieldBuffer, WriteSpec};
    use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};
    let filters = zstd.then_some(tdb_filters::Filter::Zstd { level: 1 });
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("r", 0i64..=rows - 1).tile_extent(extent))
        .dimension(DimensionBuilder::range("c", 0i64..=cols - 1).tile_extent(extent))
        .attribute(AttributeBuilder::new("a", Datatype::Int32).filters(filters))
        .build()
        .unwrap();
    let storage = tdb_storage::MemoryStorage::new();
    let entry = tdb_fragment::create_array(&storage, "arr", &schema, &[], None, 1).unwrap();
    let mut a = FieldBuffer::new("a", Datatype::Int32, 1, false);
    let mut rng = tdb_testdata::XorShift::new(5);
    for _ in 0..rows * cols {
        a.data
            .extend_from_slice(&(rng.next_u64() as i32).to_le_bytes());
    }
    let spec = WriteSpec::new(vec![a]).at(2);
    tdb_query::write_fragment(&storage, "arr", &entry, None, &spec).unwrap();
    let snap = Arc::new(Snapshot::load(&storage, "arr", TimeWindow::ALL, None).unwrap());
    (storage, snap)
}

/// Dense reads across the cell order whose tiles each fit the budget but
/// whose lines' tiles do not spill too (`Reader::lines_read_again`): a
/// column of the array above in 64 × 64 tiles crosses 16 of them, 512 KiB
/// with their ZSTD bytes, and pieces of half a column each read 8 tiles
/// whole (512 rounds under 1 MiB, 2,048 under 256 KiB, before). A tile
/// of 64 KiB stored as it is costs its bytes once (fetched bare): in
/// 128 × 128 tiles unfiltered, a column's 8 tiles fit a 2 MiB budget and
/// the read goes in two pieces of whole tile columns (8 rounds spilled
/// when they were counted twice). Lines are weighed at every tile along
/// the slowest dimension, as fragments may join anywhere.
#[test]
fn dense_lines_whose_tiles_pass_the_budget_spill() {
    use tdb_query::ResultLayout;
    for (extent, zstd, budget, most) in [
        (64, true, 1 << 20, 40),
        (64, true, 256 << 10, 100),
        (128, false, 2 << 20, 4),
        (128, false, 1 << 20, 40),
    ] {
        let (storage, snap) = dense_square_tiles(extent, zstd);
        let spec = ReadSpec::new(["a", "c"]).with_layout(ResultLayout::ColMajor);
        let (whole, _) = run(&storage, &snap, spec.clone());
        let (pieces, rounds, _) = fetching(&storage, &snap, spec.with_budget(budget));
        assert_eq!(whole.num_cells, 1024 * 256);
        assert_eq!(pieces, whole, "zstd {zstd} under {budget}");
        assert!(
            rounds <= most,
            "zstd {zstd} under {budget}: {rounds} rounds"
        );
    }
    // TileDB's `dense_multi_chunk`: the first columns' tiles fit, but not
    // those where the second fragment joins (302 rounds before, weighed
    // at the first columns alone).
    let (storage, snap) = fixture("dense_multi_chunk");
    let spec = ReadSpec::new(["a"]).with_layout(ResultLayout::ColMajor);
    let (whole, _) = run(&storage, &snap, spec.clone());
    let (pieces, rounds, _) = fetching(&storage, &snap, spec.with_budget(1 << 20));
    assert_eq!(whole.num_cells, 300 * 300);
    assert_eq!(pieces, whole);
    assert!(rounds <= 30, "dense_multi_chunk: {rounds} rounds");
}

/// Dense reads along the cell order whose rows of tiles pass the budget:
/// a piece is charged the chunks its span touches in each tile (one for a
/// span inside a chunk), not its share of the tile and a chunk at each
/// end. 256 × 4096 int32 cells in 256² tiles (four chunks of 64 rows
/// each, sixteen tiles a row, 4 MiB) read row-major under 4 MiB go in
/// pieces of whole rows and fetch each chunk about once: 520 rounds and
/// 37 MB fetched (9 times the array) when pieces were a part of one row
/// and fetched each chunk again for each of its rows. (Under 1 MiB a
/// row's sixteen chunks pass the budget, and pieces still fetch each
/// chunk 64 times: 268 MB, not fixed.)
#[test]
fn dense_reads_along_the_cell_order_hold_the_chunks_their_rows_touch() {
    use tdb_query::ResultLayout;
    for zstd in [false, true] {
        let (storage, snap) = dense_tiles((256, 4096), 256, zstd);
        let spec = ReadSpec::new(["a", "c"]).with_layout(ResultLayout::RowMajor);
        let (whole, _, once) = fetching(&storage, &snap, spec.clone());
        assert_eq!(whole.num_cells, 256 * 4096);
        let (pieces, rounds, bytes) = fetching(&storage, &snap, spec.with_budget(4 << 20));
        assert_eq!(pieces, whole, "zstd {zstd}");
        assert!(
            rounds <= 16 && bytes <= once + once / 10,
            "zstd {zstd}: {rounds} rounds, {bytes} bytes against {once}"
        );
    }
}

/// The pieces of a read in runs of a tile's cells are charged the chunks
/// each run touches, not its share and a chunk at each end: the array
/// above (64 lines a chunk, stored as it is) read row-major in stretches
/// under 16 and 64 KiB goes in pieces of half a chunk's lines and of a
/// chunk's (128 and 64 pieces), with the unbudgeted read's cells and bytes
/// (4,096 pieces of one line each before: 8.7 times the unbudgeted read's
/// time in W7's `dense_rows`).
#[test]
fn runs_of_a_tiles_cells_are_charged_the_chunks_they_touch() {
    use tdb_query::ResultLayout;
    let (storage, snap) = dense_tiles((256, 4096), 256, false);
    let spec = ReadSpec::new(["a"]).with_layout(ResultLayout::RowMajor);
    let (whole, _, once) = fetching(&storage, &snap, spec.clone());
    for budget in [16 << 10, 64 << 10] {
        let (all, rounds, bytes, pieces) =
            pieces_of(&storage, &snap, spec.clone().with_budget(budget));
        assert_eq!(all, whole, "under {budget}");
        assert!(
            bytes <= once + once / 50,
            "under {budget}: {bytes} bytes against {once}"
        );
        assert!(
            pieces <= 128,
            "under {budget}: {pieces} pieces, {rounds} rounds"
        );
    }
}

/// A read in stretches makes no batch while its pieces are read, so its
/// pieces hold the batch's share of the budget too: the array above with
/// ZSTD tiles (256 KiB decoded, as much filtered: more than the tile
/// share of 1 MiB) read row-major under 1 MiB goes in a piece a tile, 16,
/// each fetched in one round (32 pieces of half a tile and 48 rounds, each
/// walking its chunk headers, before).
#[test]
fn a_read_in_stretches_takes_the_batch_share_for_its_pieces() {
    use tdb_query::ResultLayout;
    let (storage, snap) = dense_tiles((256, 4096), 256, true);
    let spec = ReadSpec::new(["a"]).with_layout(ResultLayout::RowMajor);
    let (whole, ..) = fetching(&storage, &snap, spec.clone());
    let (all, rounds, _, pieces) = pieces_of(&storage, &snap, spec.with_budget(1 << 20));
    assert_eq!(all, whole);
    assert!(
        pieces <= 16 && rounds <= 16,
        "{pieces} pieces, {rounds} rounds"
    );
}

/// A read of `spec` stepped by hand: its cells, rounds of requests, bytes
/// fetched and pieces (a decoding step each).
fn pieces_of<S: tdb_storage::ReadableStorage + ?Sized>(
    storage: &S,
    snap: &Arc<Snapshot>,
    spec: ReadSpec,
) -> (Batch, usize, u64, usize) {
    let m = stepped(storage, snap, spec);
    (m.all, m.rounds, m.bytes, m.pieces)
}

/// Dense aggregates fold the subarray's cells in the order they are
/// stored, whatever the layout asked: col-major over `dense_large_tiles`'
/// row-major 6.5 MiB tiles under 1 MiB answers as the unbudgeted
/// row-major read does, in a few rounds of requests (cut by the subarray
/// against the cell order, 4.2 s against 0.16). So do they over several
/// ranges a dimension, out of order and overlapping (a cell counted once
/// for each range holding it): their count, sum, min and max are those of
/// the cells a plain read gives (7.5 s and 77,462 requests before).
#[test]
fn dense_aggregates_fold_in_storage_order_whatever_the_layout() {
    use tdb_query::{
        AggregateOp, AggregateStep, AggregateValue, Aggregation, ResultLayout, Subarray,
    };
    let (storage, snap) = fixture("dense_large_tiles");
    let ops = [
        AggregateOp::Count,
        AggregateOp::Min,
        AggregateOp::Max,
        AggregateOp::Sum,
    ];
    let requests: Vec<(String, AggregateOp)> = ["a", "f"]
        .iter()
        .flat_map(|f| ops.map(|op| (f.to_string(), op)))
        .collect();
    let aggregate = |spec: ReadSpec, requests: &[(String, AggregateOp)]| {
        let mut agg = Aggregation::new(snap.clone(), spec, requests).unwrap();
        let mut rounds = 0;
        loop {
            match agg.step().unwrap() {
                AggregateStep::Need(r) => {
                    rounds += 1;
                    let got = storage.read_ranges(&r).unwrap();
                    agg.push(r.into_iter().zip(got)).unwrap();
                }
                AggregateStep::Decode(w) => agg.push_decoded(w.run().unwrap()).unwrap(),
                AggregateStep::Done(results) => return (results, rounds),
            }
        }
    };
    let run = |layout, budget| {
        let spec = ReadSpec::new(["a"]).with_layout(layout).with_budget(budget);
        let (results, rounds) = aggregate(spec, &requests);
        (format!("{results:?}"), rounds)
    };
    let (whole, _) = run(ResultLayout::RowMajor, tdb_query::DEFAULT_BUDGET);
    let (col, rounds) = run(ResultLayout::ColMajor, 1 << 20);
    assert_eq!(col, whole);
    assert!(rounds < 200, "{rounds} rounds");

    let range = |lo: i64, hi: i64| {
        tdb_schema::Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false)
    };
    let mut sub = Subarray::new(2);
    for (d, lo, hi) in [
        (0, 700, 1023),
        (0, 0, 300),
        (0, 200, 520),
        (1, 400, 1023),
        (1, 0, 500),
    ] {
        sub.add_range(d, range(lo, hi));
    }
    let spec = ReadSpec::new(["a"]).with_subarray(sub);
    let (cells, _) = self::run(&storage, &snap, spec.clone());
    let values: Vec<i64> = (cells.fields[0].data.chunks_exact(4))
        .map(|v| i64::from(i32::from_le_bytes(v.try_into().unwrap())))
        .collect();
    assert_eq!(values.len(), (324 + 301 + 321) * (624 + 501));
    let sum_a: Vec<(String, AggregateOp)> = ops.map(|op| ("a".to_string(), op)).into();
    let spec = spec
        .with_layout(ResultLayout::ColMajor)
        .with_budget(1 << 20);
    let (results, rounds) = aggregate(spec, &sum_a);
    let got: Vec<Option<AggregateValue>> = results.into_iter().map(|r| r.value).collect();
    let cell = |v: Option<&i64>| {
        Some(AggregateValue::Cell(
            (*v.unwrap() as i32).to_le_bytes().to_vec(),
        ))
    };
    let want = vec![
        Some(AggregateValue::Count(values.len() as u64)),
        cell(values.iter().min()),
        cell(values.iter().max()),
        Some(AggregateValue::Int(values.iter().sum())),
    ];
    assert_eq!(got, want);
    assert!(rounds < 200, "{rounds} rounds");
}

/// A sparse array written by tdb: 4,000 cells over 200×200 in space tiles
/// of 20×20, col-major cells, 16 cells a tile, two fragments writing
/// cells again (duplicates allowed, or not).
fn col_major_twice(dups: bool) -> (tdb_storage::MemoryStorage, Arc<Snapshot>) {
    use tdb_format::{ArrayType, Datatype};
    use tdb_query::{FieldBuffer, ResultLayout, WriteSpec};
    use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", 0i32..=199).tile_extent(20i32))
        .dimension(DimensionBuilder::range("y", 0i32..=199).tile_extent(20i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .capacity(16)
        .cell_order(tdb_format::Layout::ColMajor)
        .allows_duplicates(dups)
        .build()
        .unwrap();
    let storage = tdb_storage::MemoryStorage::new();
    let entry = tdb_fragment::create_array(&storage, "arr", &schema, &[], None, 1).unwrap();
    let mut rng = tdb_testdata::XorShift::new(11);
    for t in [2u64, 3] {
        let (mut x, mut y, mut a) = (
            FieldBuffer::new("x", Datatype::Int32, 1, false),
            FieldBuffer::new("y", Datatype::Int32, 1, false),
            FieldBuffer::new("a", Datatype::Int32, 1, false),
        );
        for i in 0..2000u64 {
            let (cx, cy) = ((rng.next_u64() % 200) as i32, (rng.next_u64() % 200) as i32);
            // Without duplicates, one fragment's coordinates each once.
            let (cx, cy) = if dups {
                (cx, cy)
            } else {
                ((i / 10) as i32, (i % 10) as i32 * 20 + cx % 20)
            };
            x.data.extend_from_slice(&cx.to_le_bytes());
            y.data.extend_from_slice(&cy.to_le_bytes());
            a.data
                .extend_from_slice(&((t * 10_000 + i) as i32).to_le_bytes());
        }
        let spec = WriteSpec::new(vec![x, y, a])
            .with_layout(ResultLayout::Unordered)
            .at(t);
        tdb_query::write_fragment(&storage, "arr", &entry, None, &spec).unwrap();
    }
    let snap = Arc::new(Snapshot::load(&storage, "arr", TimeWindow::ALL, None).unwrap());
    (storage, snap)
}

/// Every cell of `b` as (x, y, a), sorted: an unordered read's answer.
fn cell_set(b: &Batch) -> Vec<(i32, i32, i32)> {
    let v = |f: usize, i: usize| {
        i32::from_le_bytes(b.fields[f].data[i * 4..i * 4 + 4].try_into().unwrap())
    };
    let mut cells: Vec<_> = (0..b.num_cells as usize)
        .map(|i| (v(0, i), v(1, i), v(2, i)))
        .collect();
    cells.sort_unstable();
    cells
}

/// Unordered reads whose pieces, cut by the subarray, would cross their
/// tiles (Hilbert or col-major cells) read each tile once under a small
/// budget: without duplicates over several fragments (or a fragment that
/// keeps older versions), runs spilled and merged, each coordinate's
/// newest version once; otherwise runs of tiles, not spilled. The same
/// cells as the unbudgeted read, in a few dozen rounds (hundreds to
/// thousands cut by the subarray).
#[test]
fn unordered_reads_across_their_tiles_read_each_tile_once() {
    use tdb_query::ResultLayout;
    let mut cases: Vec<(String, Box<dyn tdb_storage::ReadableStorage>, Arc<Snapshot>)> = Vec::new();
    for name in ["sparse_hilbert", "sparse_hilbert_multi"] {
        let (storage, snap) = fixture(name);
        cases.push((name.into(), Box::new(storage), snap));
    }
    for dups in [true, false] {
        let (storage, snap) = col_major_twice(dups);
        cases.push((
            format!("col-major, duplicates {dups}"),
            Box::new(storage),
            snap,
        ));
    }
    for (name, storage, snap) in &cases {
        let schema = snap.schema();
        let dims: Vec<&str> = schema
            .domain
            .dimensions
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        let attr = schema.attributes[0].name.as_str();
        let spec = ReadSpec::new([dims[0], dims[1], attr]).with_layout(ResultLayout::Unordered);
        let (whole, _) = run(storage.as_ref(), snap, spec.clone());
        let (pieces, rounds, _) = fetching(storage.as_ref(), snap, spec.with_budget(16 << 10));
        assert_eq!(pieces.num_cells, whole.num_cells, "{name}");
        if schema.domain.dimensions[0].datatype == tdb_format::Datatype::Int32 {
            assert_eq!(cell_set(&pieces), cell_set(&whole), "{name}");
        }
        assert!(rounds < 100, "{name}: {rounds} rounds");
    }
}

/// Every cell of `b`, its fields' bytes and validity, sorted: an
/// unordered read's answer whatever its fields.
fn rows(b: &Batch) -> Vec<Vec<(Vec<u8>, bool)>> {
    let cols: Vec<_> = b.fields.iter().map(|f| f.column()).collect();
    let mut rows: Vec<Vec<(Vec<u8>, bool)>> = (0..b.num_cells as usize)
        .map(|i| {
            cols.iter()
                .map(|c| (c.cell(i).to_vec(), !c.is_null(i)))
                .collect()
        })
        .collect();
    rows.sort_unstable();
    rows
}

/// TileDB's `sparse_bounded_tiles` fixture, opened.
fn sparse_bounded_tiles() -> (LocalStorage, Arc<Snapshot>) {
    let (storage, snap) = fixture("sparse_bounded_tiles");
    (storage, snap)
}

/// A tile past the budget is read in runs of its cells cut after the
/// most that fit, not in halves (which hold between half the budget and
/// all of it): `sparse_bounded_tiles` (tiles of 10,000 cells, five
/// fields) row-major under 16 and 64 KiB, the cells of the unbudgeted
/// read in 1,252 and 1,077 pieces (3,715 and 1,889 halved). The pieces
/// take half the batch's share that the spill's writer and held runs
/// leave (no batch is made while runs are written; their merges wait for
/// the pieces' tiles to go, `Spill::settle`): 2,233 and 1,262 pieces of
/// the tile share alone. And a run starting in the chunk the last walk
/// over its part kept is not charged that chunk's filtered bytes (it
/// fetches none): 2,009 pieces under 16 KiB where it was.
#[test]
fn runs_of_a_sparse_tiles_cells_are_cut_where_the_budget_is_filled() {
    use tdb_query::ResultLayout;
    let (storage, snap) = sparse_bounded_tiles();
    let spec = ReadSpec::new(["x", "y", "a", "f", "s"]).with_layout(ResultLayout::RowMajor);
    let (whole, _) = run(&storage, &snap, spec.clone());
    for (budget, most) in [(16u64 << 10, 1_500), (64 << 10, 1_100)] {
        let (all, rounds, _, pieces) = pieces_of(&storage, &snap, spec.clone().with_budget(budget));
        assert_eq!(all, whole, "under {budget}");
        assert!(
            pieces <= most,
            "under {budget}: {pieces} pieces, {rounds} rounds"
        );
    }
}

/// A sparse read in pieces reads each fragment's files on past what a
/// piece asks for, and answers the pieces after it from those bytes:
/// `sparse_bounded_tiles` read whole in global and row-major order
/// (spilled in runs of each fragment's tiles) asked for 467 ranges under
/// 16 KiB, 64 KiB and 1 MiB alike, 3.6 and 8.8 times the unbudgeted reads'
/// 128 and 53, each a round trip on an object store. Within 3 times now
/// under each, the same cells, and the bytes read on and let go unused a
/// small share (the small budgets read on as much as the large: a share
/// of 16 KiB let pages go before their pieces came, twice the bytes).
#[test]
fn pieces_of_a_sparse_read_are_answered_from_the_files_read_on() {
    use tdb_query::ResultLayout;
    let (storage, snap) = sparse_bounded_tiles();
    for layout in [ResultLayout::GlobalOrder, ResultLayout::RowMajor] {
        let spec = ReadSpec::new(["x", "y", "a", "f", "s"]).with_layout(layout);
        let whole = stepped(&storage, &snap, spec.clone());
        for budget in [16u64 << 10, 64 << 10, 1 << 20] {
            let pieces = stepped(&storage, &snap, spec.clone().with_budget(budget));
            assert_eq!(pieces.all, whole.all, "{layout:?} under {budget}");
            eprintln!(
                "{layout:?} under {budget}: {} pieces, {} ranges, {} bytes; unbudgeted {} \
                 ranges, {} bytes",
                pieces.pieces, pieces.ranges, pieces.bytes, whole.ranges, whole.bytes
            );
            assert!(pieces.pieces > 10, "{layout:?}: {} pieces", pieces.pieces);
            assert!(
                pieces.ranges <= 3 * whole.ranges,
                "{layout:?} under {budget}: {} ranges, {} unbudgeted",
                pieces.ranges,
                whole.ranges
            );
            assert!(
                pieces.bytes <= whole.bytes + whole.bytes / 4,
                "{layout:?} under {budget}: {} bytes, {} unbudgeted",
                pieces.bytes,
                whole.bytes
            );
        }
    }
}

/// The same on an object store, where each request is a round trip: the
/// reads of `sparse_bounded_tiles` above under 16 KiB, 64 KiB and 1 MiB,
/// driven as on a remote backend (the next piece's whole tiles fetched
/// ahead as planned, walks in large windows), ask for 40 ranges where
/// they asked for 397 (16 times the unbudgeted global-order read's 25),
/// with its cells: 1.6 times the global-order read's, 2.7 times the
/// row-major's 15, within the issue's goal of 3 (54 when the first
/// request to each of the 16 files went out as asked, its size unknown
/// until the footer's recorded sizes were used).
#[test]
fn remote_reads_in_pieces_ask_for_few_more_ranges_than_the_whole_read() {
    use tdb_query::ResultLayout;
    use tdb_storage::RecordingStorage;
    let dir = tdb_testdata::root()
        .join("sparse_bounded_tiles")
        .join("array");
    let storage = RecordingStorage::as_remote(LocalStorage::new(&dir));
    let snap = Arc::new(Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap());
    let read = |spec: ReadSpec| {
        storage.take();
        let mut all = Batch::default();
        for b in SyncRead::new(&storage, snap.clone(), spec).unwrap() {
            all.append(&b.unwrap());
        }
        let ranges: usize = storage.take().iter().map(|r| r.ranges().len()).sum();
        (all, ranges)
    };
    for layout in [ResultLayout::GlobalOrder, ResultLayout::RowMajor] {
        let spec = ReadSpec::new(["x", "y", "a", "f", "s"]).with_layout(layout);
        let (whole, whole_ranges) = read(spec.clone());
        for budget in [16u64 << 10, 64 << 10, 1 << 20] {
            let (pieces, ranges) = read(spec.clone().with_budget(budget));
            assert_eq!(pieces, whole, "{layout:?} under {budget}");
            eprintln!("{layout:?}: {ranges} ranges under {budget}, {whole_ranges} unbudgeted");
            assert!(
                ranges <= 3 * whole_ranges,
                "{layout:?}: {ranges} ranges under {budget}, {whole_ranges} unbudgeted"
            );
        }
    }
}

/// An unordered read of an array with duplicates whose tiles pass the
/// budget (`sparse_bounded_tiles`: tiles of 10,000 cells, 477 KB of the
/// fields read, in two fragments, a delete) goes in runs of each tile's
/// cells, read by the chunks holding them, without spilling: the
/// unbudgeted read's cells (the string field too, whose runs are slices of
/// its tiles: a slice is never taken for the tile by the next piece).
#[test]
fn unordered_reads_of_tiles_past_the_budget_go_in_runs_of_their_cells() {
    use tdb_query::ResultLayout;
    let (storage, snap) = sparse_bounded_tiles();
    let spec = ReadSpec::new(["a", "f", "s"]).with_layout(ResultLayout::Unordered);
    let (whole, _) = run(&storage, &snap, spec.clone());
    assert_eq!(whole.num_cells, 313_250);
    let want = rows(&whole);
    for budget in [16u64 << 10, 1 << 20] {
        let (pieces, rounds, _) = fetching(&storage, &snap, spec.clone().with_budget(budget));
        assert_eq!(rows(&pieces), want, "under {budget}");
        assert!(rounds < 1_000, "under {budget}: {rounds} rounds");
    }
}
