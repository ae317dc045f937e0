//! A sparse read in an order its tiles do not follow (row-major results of
//! a Hilbert array, row-major of col-major cells, the Hilbert order over
//! several fragments), or whose pieces cut by the subarray would hold its
//! tiles again and again (the global order over tiles spanning several
//! space tiles), under a budget far below the tiles it crosses reads
//! each tile once: its pieces are runs of tiles whose cells are spilled
//! sorted and merged (`tdb-query`'s `read::spill`). Over fragments that
//! rewrite each other's coordinates, a delete between them, nullable and
//! var-size fields, with and without duplicates and a condition, every
//! such read gives the unbudgeted read's cells, reading no more tile bytes
//! than it (cutting the subarray instead read the tiles each piece crossed
//! again).

use tdb::{
    Array, ArraySchema, ArrayType, AttributeBuilder, Datatype, DimensionBuilder, FieldBuffer,
    Layout, OpenOptions, ReadSpec, ResultLayout, Subarray, WriteSpec,
};
use tdb_filters::Filter;
use tdb_storage::{LocalStorage, RecordingStorage, Request};

use crate::common::{chain, range};

fn schema(cell: Layout, tile: Layout, dups: bool) -> ArraySchema {
    schema_of(cell, tile, 250, 24, dups)
}

/// The tests' fields over space tiles of `extent` × `extent` in a domain of
/// 1,000 × 1,000, data tiles of `capacity` cells.
fn schema_of(cell: Layout, tile: Layout, extent: i32, capacity: u64, dups: bool) -> ArraySchema {
    ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", 0i32..=999).tile_extent(extent))
        .dimension(DimensionBuilder::range("y", 0i32..=999).tile_extent(extent))
        .attribute(AttributeBuilder::new("a", Datatype::Int64).filters([Filter::Zstd { level: 1 }]))
        .attribute(AttributeBuilder::new("n", Datatype::Float64).nullable(true))
        .attribute(
            AttributeBuilder::new("s", Datatype::StringUtf8)
                .var()
                .nullable(true)
                .filters([Filter::Zstd { level: 1 }]),
        )
        .cell_order(cell)
        .tile_order(tile)
        .capacity(capacity)
        .allows_duplicates(dups)
        .build()
        .unwrap()
}

/// `n` coordinates scattered over the domain from `seed`; later seeds
/// share some with earlier ones (a grid of 40 × 40 points).
fn coords(seed: u64, n: usize) -> Vec<(i32, i32)> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out: Vec<(i32, i32)> = (0..n)
        .map(|_| {
            let k = next() % 1600;
            ((k / 40) as i32 * 25, (k % 40) as i32 * 25)
        })
        .collect();
    // No coordinate twice in one write (its cells are unordered).
    out.sort_unstable();
    out.dedup();
    out
}

fn write(array: &Array, t: u64, cells: &[(i32, i32)]) {
    let mut x = FieldBuffer::new("x", Datatype::Int32, 1, false);
    let mut y = FieldBuffer::new("y", Datatype::Int32, 1, false);
    let mut a = FieldBuffer::new("a", Datatype::Int64, 1, false);
    let mut n = FieldBuffer::new("n", Datatype::Float64, 1, true);
    let mut s = FieldBuffer::new("s", Datatype::StringUtf8, tdb::VAR_NUM, true);
    for &(cx, cy) in cells {
        let v = i64::from(cx) * 1000 + i64::from(cy) + (t as i64) * 1_000_000;
        x.push(&cx.to_le_bytes(), true);
        y.push(&cy.to_le_bytes(), true);
        a.push(&v.to_le_bytes(), true);
        n.push(&(v as f64 / 4.0).to_le_bytes(), (cx + cy) % 3 != 0);
        let text = format!("{v:x}").repeat((cx / 25 + cy / 25) as usize % 3);
        s.push(text.as_bytes(), (cx * cy) % 7 != 0);
    }
    array
        .write(WriteSpec::new(vec![x, y, a, n, s]).at(t))
        .unwrap();
}

/// Tile bytes a read fetched (every range of every `read_ranges`).
fn fetched(requests: &[Request]) -> u64 {
    (requests.iter())
        .flat_map(Request::ranges)
        .filter_map(|(_, _, b)| *b)
        .sum()
}

#[test]
fn reads_against_the_tile_order_under_a_small_budget_read_each_tile_once() {
    let orders = [
        (Layout::Hilbert, Layout::RowMajor),
        (Layout::ColMajor, Layout::ColMajor),
        (Layout::RowMajor, Layout::ColMajor),
        (Layout::RowMajor, Layout::RowMajor),
    ];
    let mut spilled = 0;
    for (cell, tile) in orders {
        for dups in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let array = Array::create(dir.path(), &schema(cell, tile, dups)).unwrap();
            write(&array, 1, &coords(1, 700));
            write(&array, 2, &coords(2, 500));
            let deleting = Array::open_with(dir.path(), OpenOptions::new().at(3)).unwrap();
            deleting.delete("x < 200").unwrap();
            write(&array, 4, &coords(4, 300));
            let storage = RecordingStorage::new(LocalStorage::new(dir.path()));
            let array = Array::open_in(storage, "", OpenOptions::new()).unwrap();
            let mut boxed = Subarray::new(2);
            boxed.add_range(0, range(100, 800));
            boxed.add_range(1, range(300, 999));
            for layout in [
                ResultLayout::RowMajor,
                ResultLayout::ColMajor,
                ResultLayout::GlobalOrder,
            ] {
                for sub in [None, Some(&boxed)] {
                    for condition in [None, Some("a < 3000000")] {
                        let mut spec = ReadSpec::new(["x", "y", "a", "s"]).with_layout(layout);
                        if let Some(sub) = sub {
                            spec = spec.with_subarray(sub.clone());
                        }
                        if let Some(c) = condition {
                            spec = spec.with_condition(c);
                        }
                        let what = format!(
                            "{cell:?} cells, {tile:?} tiles, dups {dups}, {layout:?}, box {}, \
                             {condition:?}",
                            sub.is_some()
                        );
                        array.storage().take();
                        let whole = array.read_all(spec.clone()).unwrap();
                        let whole_bytes = fetched(&array.storage().take());
                        assert!(whole.num_cells > 100, "{what}: {} cells", whole.num_cells);
                        let small = array
                            .read_all(spec.with_budget(16 << 10))
                            .unwrap_or_else(|e| panic!("{what}: {}", chain(&e)));
                        let small_bytes = fetched(&array.storage().take());
                        assert_eq!(small, whole, "{what}");
                        // Runs apply where the order crosses the tiles;
                        // there every tile is fetched once. Reads along
                        // an array's order are spilled too where pieces
                        // would fetch its tiles again and again: here a
                        // data tile spans a quarter of its space tile's
                        // rows (row- and col-major), or its cells lie in
                        // several space tiles (global order), and a piece
                        // (8 KiB of tiles) holds fewer. Bytes the read
                        // reads on past its pieces go unused where a box
                        // skips the tiles after them (18% of these small
                        // tiles' bytes at most, with the Hilbert box).
                        assert!(
                            small_bytes <= whole_bytes + whole_bytes / 4,
                            "{what}: {small_bytes} bytes fetched, {whole_bytes} unbudgeted"
                        );
                        spilled += 1;
                    }
                }
            }
        }
    }
    assert_eq!(spilled, 4 * 2 * 3 * 4);
}

/// Sparse tiles far larger than the budget (one tile of 30,000 cells a
/// fragment: 2.3 MB of the fields read, filtered and unfiltered) are read
/// under 1 MiB in runs of their cells, by the chunks holding them, in
/// every order: the unbudgeted read's cells, each chunk fetched about
/// once (a piece's walk goes on where the last one stood, from the chunk
/// it ended in), where a whole tile was refused before.
#[test]
fn sparse_tiles_past_the_budget_are_read_by_runs_of_their_cells() {
    for (cell, dups) in [(Layout::RowMajor, false), (Layout::Hilbert, true)] {
        let dir = tempfile::tempdir().unwrap();
        let schema = schema_of(cell, Layout::RowMajor, 1000, 60_000, dups);
        let array = Array::create(dir.path(), &schema).unwrap();
        let grid = |step: i32, shift: i32| -> Vec<(i32, i32)> {
            (0..200)
                .flat_map(|i| (0..150).map(move |j| (i * step + shift, j * 6 + shift)))
                .filter(|&(x, y)| x <= 999 && y <= 999)
                .collect()
        };
        write(&array, 1, &grid(5, 0));
        write(&array, 2, &grid(3, 0));
        let storage = RecordingStorage::new(LocalStorage::new(dir.path()));
        let array = Array::open_in(storage, "", OpenOptions::new()).unwrap();
        let mut boxed = Subarray::new(2);
        boxed.add_range(0, range(300, 700));
        boxed.add_range(1, range(0, 500));
        for layout in [
            ResultLayout::RowMajor,
            ResultLayout::ColMajor,
            ResultLayout::GlobalOrder,
        ] {
            for (sub, condition) in [(None, None), (Some(&boxed), Some("a < 2500000"))] {
                let mut spec = ReadSpec::new(["x", "y", "a", "s"]).with_layout(layout);
                if let Some(sub) = sub {
                    spec = spec.with_subarray(sub.clone());
                }
                if let Some(c) = condition {
                    spec = spec.with_condition(c);
                }
                let what = format!("{cell:?} cells, {layout:?}, box {}", sub.is_some());
                array.storage().take();
                let whole = array.read_all(spec.clone()).unwrap();
                let whole_bytes = fetched(&array.storage().take());
                assert!(
                    whole.num_cells > 10_000,
                    "{what}: {} cells",
                    whole.num_cells
                );
                let small = array
                    .read_all(spec.with_budget(1 << 20))
                    .unwrap_or_else(|e| panic!("{what}: {}", chain(&e)));
                let small_bytes = fetched(&array.storage().take());
                assert_eq!(small, whole, "{what}");
                // Runs of about 5,000 cells, fewer than a chunk of some
                // fields: a run takes the chunk the last one ended in from
                // it (fetched by each run, 5.6x the bytes here; now 1.3-1.5x,
                // the rest the walks' header reads).
                assert!(
                    small_bytes * 5 <= whole_bytes * 8,
                    "{what}: {small_bytes} bytes fetched, {whole_bytes} unbudgeted"
                );
            }
        }
    }
}

/// A few cells of a sparse tile past the budget whose cells are sorted
/// along the dimension the subarray narrows (row-major cells in one space
/// tile) are found by probing the tile's middle cells: runs of cells that
/// cannot hold the subarray's range there are never read, at the default
/// budget too (where the tile fits: a narrow read). Under 16 KiB and
/// unbudgeted the read gives the cells of the same box read with two
/// ranges on a dimension (never narrow: tiles whole), fetching no more
/// than its bytes (half of them or fewer for rows near the start of the
/// tile), where runs over the whole tile fetched 1.5 times them. (A
/// run further on walks the chunk headers before it, 4 KiB a hop over
/// chunks of a few KiB: in the middle, about all the bytes again.)
#[test]
fn a_few_cells_of_a_sorted_tile_past_the_budget_read_only_the_runs_that_hold_them() {
    // Row-major cells are sorted along x, col-major ones along y.
    for (cell, sorted) in [(Layout::RowMajor, 0), (Layout::ColMajor, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let schema = schema_of(cell, Layout::RowMajor, 1000, 100_000, false);
        let array = Array::create(dir.path(), &schema).unwrap();
        // One tile of 100,000 cells, then a fragment rewriting some of
        // them (the newest version stands in the merge of runs).
        let cells: Vec<(i32, i32)> = (0..400)
            .flat_map(|i| (0..250).map(move |j| (i * 2, j * 4)))
            .collect();
        write(&array, 1, &cells);
        let again: Vec<(i32, i32)> = (0..100).map(|k| (k * 8, k * 8)).collect();
        write(&array, 2, &again);
        let storage = RecordingStorage::new(LocalStorage::new(dir.path()));
        let array = Array::open_in(storage, "", OpenOptions::new()).unwrap();
        // Values near the start, the middle and the end of the tile on
        // the sorted dimension; the other dimension narrower too.
        for (v0, v1) in [(5, 12), (500, 505), (790, 999), (0, 1)] {
            let mut boxed = Subarray::new(2);
            boxed.add_range(sorted, range(v0, v1));
            boxed.add_range(1 - sorted, range(100, 700));
            for layout in [ResultLayout::RowMajor, ResultLayout::Unordered] {
                let spec = ReadSpec::new(["x", "y", "a", "s"])
                    .with_layout(layout)
                    .with_subarray(boxed.clone());
                let what = format!("{cell:?} cells, {v0}..={v1}, {layout:?}");
                array.storage().take();
                let whole = array.read_all(spec.clone()).unwrap();
                let whole_bytes = fetched(&array.storage().take());
                assert!(whole.num_cells > 0, "{what}");
                // At the default budget too the read is narrow (a few
                // cells of a large sorted tile): its probes find the
                // chunks holding them. The same box with a second, empty
                // range on the other dimension, never narrow, reads the
                // tiles whole: the same cells, fetching more.
                let mut two = boxed.clone();
                two.add_range(1 - sorted, range(999, 999));
                let reference = array.read_all(spec.clone().with_subarray(two)).unwrap();
                let tiles_bytes = fetched(&array.storage().take());
                assert_eq!(whole.num_cells, reference.num_cells, "{what}");
                if layout == ResultLayout::RowMajor {
                    assert_eq!(whole, reference, "{what}");
                }
                let near_the_start = v0 < 100;
                let small = array
                    .read_all(spec.with_budget(16 << 10))
                    .unwrap_or_else(|e| panic!("{what}: {}", chain(&e)));
                let small_bytes = fetched(&array.storage().take());
                assert_eq!(small, whole, "{what}");
                for (bytes, how) in [(small_bytes, "under 16 KiB"), (whole_bytes, "unbudgeted")] {
                    assert!(
                        bytes <= tiles_bytes && (!near_the_start || bytes * 2 <= tiles_bytes),
                        "{what}: {bytes} bytes fetched {how}, {tiles_bytes} by whole tiles"
                    );
                }
            }
        }
    }
}

/// A consolidated fragment keeps each cell's timestamp and, after a
/// delete, the time it was deleted, in tiles of their own: a run of a
/// large tile's cells reads them at the run's cells too. (They were taken
/// for one byte a cell, so a run past the tile's first cells read the
/// zeros of another part of the tile: every cell written at time 0, and
/// after a delete every cell deleted.) Read before and after the delete,
/// narrow at the default budget and under 16 KiB, the consolidated array
/// gives the cells the same box gives read with a second, empty range on
/// a dimension (never narrow: tiles whole), and the cells it gave before
/// it was consolidated.
#[test]
fn a_consolidated_fragments_timestamps_are_read_by_runs_of_its_cells() {
    let dir = tempfile::tempdir().unwrap();
    let schema = schema_of(Layout::RowMajor, Layout::RowMajor, 1000, 100_000, false);
    let array = Array::create(dir.path(), &schema).unwrap();
    let cells: Vec<(i32, i32)> = (0..400)
        .flat_map(|i| (0..250).map(move |j| (i * 2, j * 4)))
        .collect();
    write(&array, 1, &cells);
    let again: Vec<(i32, i32)> = (0..400).map(|k| (k * 2, 500)).collect();
    write(&array, 2, &again);
    tdb::Array::open_with(dir.path(), OpenOptions::new().at(3))
        .unwrap()
        .delete("a < 1610000")
        .unwrap();
    let read = |at: u64, sub: &Subarray, budget: Option<u64>| {
        let array = Array::open_with(dir.path(), OpenOptions::new().at(at)).unwrap();
        let mut spec = ReadSpec::new(["x", "y", "a", "s"]).with_subarray(sub.clone());
        if let Some(b) = budget {
            spec = spec.with_budget(b);
        }
        array.read_all(spec).unwrap()
    };
    let mut boxed = Subarray::new(2);
    boxed.add_range(0, range(600, 610));
    boxed.add_range(1, range(400, 600));
    let mut two = boxed.clone();
    two.add_range(1, range(999, 999));
    let before: Vec<_> = [1, 2, 3].map(|t| read(t, &two, None)).into();
    Array::open(dir.path())
        .unwrap()
        .consolidate_fragments(&tdb::FragmentSelection::default(), tdb::DEFAULT_BUDGET)
        .unwrap();
    for (t, want) in [1u64, 2, 3].into_iter().zip(&before) {
        assert!(want.num_cells > 0, "t={t}");
        assert_eq!(&read(t, &two, None), want, "t={t}, tiles whole");
        for budget in [None, Some(16 << 10)] {
            assert_eq!(&read(t, &boxed, budget), want, "t={t}, {budget:?}");
        }
    }
}

/// Narrow reads over float dimensions too: a box a thirtieth of a tile's
/// span on its sorted dimension (x, row-major cells; one tile of 100,000
/// cells) gives the cells of the same box read with a second, empty range
/// (never narrow: tiles whole), fetching half their bytes or fewer.
#[test]
fn a_few_cells_of_a_large_tile_over_float_dimensions_are_found_by_probes() {
    let dir = tempfile::tempdir().unwrap();
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", 0f64..=1000.0).tile_extent(1000.0f64))
        .dimension(DimensionBuilder::range("y", 0f64..=1000.0).tile_extent(1000.0f64))
        .attribute(AttributeBuilder::new("a", Datatype::Int64).filters([Filter::Zstd { level: 1 }]))
        .capacity(100_000)
        .build()
        .unwrap();
    let array = Array::create(dir.path(), &schema).unwrap();
    let mut x = FieldBuffer::new("x", Datatype::Float64, 1, false);
    let mut y = FieldBuffer::new("y", Datatype::Float64, 1, false);
    let mut a = FieldBuffer::new("a", Datatype::Int64, 1, false);
    for i in 0..400 {
        for j in 0..250 {
            x.push(&(f64::from(i) * 2.5).to_le_bytes(), true);
            y.push(&(f64::from(j) * 4.0).to_le_bytes(), true);
            a.push(&(i64::from(i) * 1000 + i64::from(j)).to_le_bytes(), true);
        }
    }
    array.write(WriteSpec::new(vec![x, y, a]).at(1)).unwrap();
    let storage = RecordingStorage::new(LocalStorage::new(dir.path()));
    let array = Array::open_in(storage, "", OpenOptions::new()).unwrap();
    let f = |lo: f64, hi: f64| {
        tdb_schema::Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false)
    };
    let mut boxed = Subarray::new(2);
    boxed.add_range(0, f(10.0, 42.5));
    boxed.add_range(1, f(100.0, 700.0));
    let mut two = boxed.clone();
    two.add_range(1, f(999.5, 999.5));
    let spec = ReadSpec::new(["x", "y", "a"]);
    array.storage().take();
    let narrow = array.read_all(spec.clone().with_subarray(boxed)).unwrap();
    let narrow_bytes = fetched(&array.storage().take());
    let whole = array.read_all(spec.with_subarray(two)).unwrap();
    let whole_bytes = fetched(&array.storage().take());
    assert_eq!(narrow.num_cells, 14 * 151);
    assert_eq!(narrow, whole);
    assert!(
        narrow_bytes * 2 <= whole_bytes,
        "{narrow_bytes} bytes fetched, {whole_bytes} by whole tiles"
    );
}

/// A global-order read of TileDB's `sparse_dups_scattered` (two fragments
/// of cells scattered over 100 × 100, data tiles of 100 cells whose MBRs
/// span several space tiles) under a budget below its tiles: cut at space
/// tiles and then inside them, every piece held the tiles crossing it
/// again (273 pieces of 700 cells under 64 KiB, 346 requests against 30
/// unbudgeted, 7 times the time spilled); spilled, each tile is fetched
/// once and the cells are the unbudgeted read's.
#[test]
fn a_global_order_read_over_tiles_spanning_many_space_tiles_reads_each_tile_once() {
    let dir = tdb_testdata::root()
        .join("sparse_dups_scattered")
        .join("array");
    let storage = RecordingStorage::new(LocalStorage::new(&dir));
    let array = Array::open_in(storage, "", OpenOptions::new()).unwrap();
    let spec = ReadSpec::new(["x", "y", "a", "n", "r", "s"]).with_layout(ResultLayout::GlobalOrder);
    array.storage().take();
    let whole = array.read_all(spec.clone()).unwrap();
    let whole_bytes = fetched(&array.storage().take());
    assert_eq!(whole.num_cells, 700);
    for budget in [16 << 10, 64 << 10] {
        let small = array
            .read_all(spec.clone().with_budget(budget))
            .unwrap_or_else(|e| panic!("{budget}: {}", chain(&e)));
        let small_bytes = fetched(&array.storage().take());
        assert_eq!(small, whole, "{budget}");
        assert!(
            small_bytes <= whole_bytes,
            "{budget}: {small_bytes} bytes fetched, {whole_bytes} unbudgeted"
        );
    }
}
