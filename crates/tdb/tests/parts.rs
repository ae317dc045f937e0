//! Global-order writes in several parts make one fragment: the same bytes,
//! file for file, as the same cells written in one go; the parts stream
//! (each tile is uploaded as it fills); a part that breaks the order is
//! refused and changes nothing; an unfinished or failed write leaves
//! nothing a reader sees.

use tdb::{
    ArraySchema, Batch, Datatype, FieldBuffer, OpenOptions, ReadSpec, ResultLayout, Subarray,
    WriteSpec,
};
use tdb_format::{ArrayType, Layout};
use tdb_schema::{AttributeBuilder, DimensionBuilder, Range};
use tdb_storage::{ListableStorage, MemoryStorage, ReadableStorage, RecordingStorage, Request};

type Array = tdb::Array<RecordingStorage<MemoryStorage>>;

fn schema(array_type: ArrayType, cell_order: Layout) -> ArraySchema {
    ArraySchema::builder(array_type)
        .dimension(DimensionBuilder::range("x", 0i32..=15).tile_extent(4i32))
        .dimension(DimensionBuilder::range("y", 0i32..=15).tile_extent(4i32))
        .attribute(AttributeBuilder::new("a", Datatype::Float64))
        .attribute(
            AttributeBuilder::new("s", Datatype::StringAscii)
                .var()
                .nullable(true),
        )
        .cell_order(cell_order)
        .capacity(5)
        .build()
        .unwrap()
}

fn create(s: &ArraySchema) -> Array {
    let storage = RecordingStorage::new(MemoryStorage::new());
    Array::create_in(storage, "arr", s, &[], OpenOptions::new()).unwrap()
}

/// Cells at `coords` (sparse: with their coordinates).
fn cells(coords: &[(i32, i32)], with_coords: bool) -> Vec<FieldBuffer> {
    let mut x = FieldBuffer::new("x", Datatype::Int32, 1, false);
    let mut y = FieldBuffer::new("y", Datatype::Int32, 1, false);
    let mut a = FieldBuffer::new("a", Datatype::Float64, 1, false);
    let mut s = FieldBuffer::new("s", Datatype::StringAscii, u32::MAX, true);
    for &(i, j) in coords {
        x.push(&i.to_le_bytes(), true);
        y.push(&j.to_le_bytes(), true);
        a.push(&(f64::from(i) * 0.5 - f64::from(j)).to_le_bytes(), true);
        let text = "abcdefg".repeat(usize::try_from(i + j).unwrap() % 4);
        s.push(text.as_bytes(), (i + j) % 5 != 0);
    }
    let mut out = vec![a, s];
    if with_coords {
        out.extend([x, y]);
    }
    out
}

fn parts_of(fields: &[FieldBuffer], splits: &[usize]) -> Vec<Vec<FieldBuffer>> {
    let n = fields[0].column().len();
    let mut bounds = vec![0];
    bounds.extend(splits.iter().copied().filter(|&s| s < n));
    bounds.push(n);
    bounds
        .windows(2)
        .map(|w| fields.iter().map(|f| f.slice(w[0]..w[1])).collect())
        .collect()
}

/// Every file of fragment `name`, by file name.
fn fragment_files(array: &Array, name: &str) -> Vec<(String, Vec<u8>)> {
    let dir = format!("arr/__fragments/{name}");
    let store = array.storage().inner();
    store
        .list_prefix(&dir)
        .unwrap()
        .into_iter()
        .map(|f| {
            let bytes = store.read(&f.key).unwrap().unwrap().to_vec();
            (f.key[dir.len() + 1..].to_owned(), bytes)
        })
        .collect()
}

/// Everything committed, in the global order.
fn read_global(array: &mut Array) -> Batch {
    read_global_in(array, None)
}

/// The same, inside `sub`.
fn read_global_in(array: &mut Array, sub: Option<&Subarray>) -> Batch {
    array.reopen().unwrap();
    let mut spec = ReadSpec::new(["x", "y", "a", "s"]).with_layout(ResultLayout::GlobalOrder);
    if let Some(sub) = sub {
        spec = spec.with_subarray(sub.clone());
    }
    array.read_all(spec).unwrap()
}

fn coords_scattered(n: usize) -> Vec<(i32, i32)> {
    // Distinct cells in no particular order.
    let mut out: Vec<(i32, i32)> = (0..256).map(|k| (k / 16, k % 16)).collect();
    let mut state = 0x2545_f491_u64;
    for i in (1..out.len()).rev() {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        out.swap(i, (state >> 33) as usize % (i + 1));
    }
    out.truncate(n);
    out
}

fn global_coords(b: &Batch) -> Vec<(i32, i32)> {
    let v = |name: &str| -> Vec<i32> {
        b.field(name)
            .unwrap()
            .data
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    v("x").into_iter().zip(v("y")).collect()
}

#[test]
fn sparse_parts_make_the_fragment_one_unordered_write_makes() {
    for order in [Layout::RowMajor, Layout::ColMajor, Layout::Hilbert] {
        let mut array = create(&schema(ArrayType::Sparse, order));
        let scattered = coords_scattered(61);
        let whole = array
            .write(WriteSpec::new(cells(&scattered, true)).at(10))
            .unwrap();
        let sorted = global_coords(&read_global(&mut array));
        assert_eq!(sorted.len(), 61);
        // Parts cut inside tiles, on tile bounds, of one cell, of nothing.
        for (t, splits) in [
            (20, vec![]),
            (21, vec![1, 2, 3, 17, 40]),
            (22, vec![5, 10, 15, 60]),
            (23, vec![0, 0, 33]),
        ] {
            let fields = cells(&sorted, true);
            let mut w = array
                .writer(
                    WriteSpec::new(Vec::new())
                        .with_layout(ResultLayout::GlobalOrder)
                        .at(t),
                )
                .unwrap();
            for part in parts_of(&fields, &splits) {
                w.submit(&part).unwrap();
            }
            let written = w.finish().unwrap();
            assert_eq!(
                (written.cells, written.tiles),
                (61, 13),
                "{order:?} {splits:?}"
            );
            assert_eq!(
                fragment_files(&array, &written.fragment.to_string()),
                fragment_files(&array, &whole.fragment.to_string()),
                "{order:?}: parts {splits:?}"
            );
        }
    }
}

#[test]
fn dense_parts_make_the_fragment_one_row_major_write_makes() {
    for order in [Layout::RowMajor, Layout::ColMajor] {
        let mut array = create(&schema(ArrayType::Dense, order));
        let mut sub = Subarray::new(2);
        sub.add_range(0, range(4, 11));
        sub.add_range(1, range(0, 7));
        let row_major: Vec<(i32, i32)> = (4..=11)
            .flat_map(|i| (0..=7).map(move |j| (i, j)))
            .collect();
        let whole = array
            .write(
                WriteSpec::new(cells(&row_major, false))
                    .with_subarray(sub.clone())
                    .at(10),
            )
            .unwrap();
        let global = global_coords(&read_global_in(&mut array, Some(&sub)));
        let fields = cells(&global, false);
        let mut w = array
            .writer(
                WriteSpec::new(Vec::new())
                    .with_layout(ResultLayout::GlobalOrder)
                    .with_subarray(sub.clone())
                    .at(20),
            )
            .unwrap();
        for part in parts_of(&fields, &[7, 16, 17, 50]) {
            w.submit(&part).unwrap();
        }
        let written = w.finish().unwrap();
        assert_eq!((written.cells, written.tiles), (64, 4));
        assert_eq!(
            fragment_files(&array, &written.fragment.to_string()),
            fragment_files(&array, &whole.fragment.to_string()),
            "{order:?}"
        );
    }
}

#[test]
fn parts_are_uploaded_a_tile_at_a_time() {
    let mut array = create(&schema(ArrayType::Sparse, Layout::RowMajor));
    let sorted = {
        array
            .write(WriteSpec::new(cells(&coords_scattered(40), true)).at(10))
            .unwrap();
        global_coords(&read_global(&mut array))
    };
    array.storage().take();
    let fields = cells(&sorted, true);
    let mut w = array
        .writer(
            WriteSpec::new(Vec::new())
                .with_layout(ResultLayout::GlobalOrder)
                .at(20),
        )
        .unwrap();
    for part in parts_of(&fields, &[12, 26]) {
        w.submit(&part).unwrap();
    }
    // Every tile has gone out as a part before the end, yet no file is
    // there before it: 40 cells, capacity 5, eight tiles in every file.
    let files = [
        "a0.tdb",
        "a1.tdb",
        "a1_var.tdb",
        "a1_validity.tdb",
        "d0.tdb",
        "d1.tdb",
    ];
    let name = |key: &str| key.rsplit('/').next().unwrap_or_default().to_owned();
    let before = array.storage().take();
    for file in files {
        let puts = before
            .iter()
            .filter(|r| matches!(r, Request::Put { key, .. } if name(key) == file))
            .count();
        assert_eq!(puts, 8, "{file} in {before:?}");
    }
    assert!(!before.iter().any(|r| matches!(r, Request::Upload { .. })));
    w.finish().unwrap();
    let uploads: Vec<(String, u64)> = array
        .storage()
        .take()
        .into_iter()
        .filter_map(|r| match r {
            Request::Upload { key, parts, .. } => Some((name(&key), parts)),
            _ => None,
        })
        .collect();
    for file in files {
        assert!(
            uploads.contains(&(file.to_owned(), 8)),
            "{file} in {uploads:?}"
        );
    }
}

fn range(lo: i32, hi: i32) -> Range {
    Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false)
}

/// Keys under `arr/__fragments` and `arr/__commits`.
fn fragment_keys(array: &Array) -> Vec<String> {
    let store = array.storage().inner();
    ["arr/__fragments", "arr/__commits"]
        .iter()
        .flat_map(|d| store.list_prefix(d).unwrap())
        .map(|f| f.key)
        .collect()
}

#[test]
fn a_part_out_of_order_is_refused_and_the_write_goes_on() {
    let mut array = create(&schema(ArrayType::Sparse, Layout::RowMajor));
    let spec = || {
        WriteSpec::new(Vec::new())
            .with_layout(ResultLayout::GlobalOrder)
            .at(5)
    };
    let mut w = array.writer(spec()).unwrap();
    w.submit(&cells(&[(0, 1), (0, 2), (1, 0)], true)).unwrap();
    // Before the last cell given: refused, naming the previous part.
    let e = w.submit(&cells(&[(0, 3)], true)).unwrap_err().to_string();
    assert!(e.contains("previous part's last cell"), "{e}");
    // The same coordinates as the last cell: no duplicates allowed.
    let e = w.submit(&cells(&[(1, 0)], true)).unwrap_err().to_string();
    assert!(e.contains("does not allow duplicates"), "{e}");
    // Out of order inside a part.
    let e = w
        .submit(&cells(&[(1, 2), (1, 1)], true))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cell 1 comes before cell 0"), "{e}");
    w.submit(&cells(&[(1, 1), (3, 3)], true)).unwrap();
    let written = w.finish().unwrap();
    assert_eq!(written.cells, 5);
    assert_eq!(
        global_coords(&read_global(&mut array)),
        vec![(0, 1), (0, 2), (1, 0), (1, 1), (3, 3)]
    );

    // Only global-order writes take parts.
    let mut w = array
        .writer(WriteSpec::new(cells(&[(0, 0)], true)).at(6))
        .unwrap();
    let e = w.submit(&cells(&[(0, 1)], true)).unwrap_err().to_string();
    assert!(
        e.contains("only global-order writes take several parts"),
        "{e}"
    );
}

#[test]
fn unfinished_or_short_writes_leave_nothing() {
    let dense = create(&schema(ArrayType::Dense, Layout::RowMajor));
    let before = fragment_keys(&dense);
    let mut sub = Subarray::new(2);
    sub.add_range(0, range(0, 3));
    sub.add_range(1, range(0, 7));
    let spec = || {
        WriteSpec::new(Vec::new())
            .with_layout(ResultLayout::GlobalOrder)
            .with_subarray(sub.clone())
            .at(5)
    };
    // Fewer cells than the subarray holds: refused at the end.
    let mut w = dense.writer(spec()).unwrap();
    let coords: Vec<(i32, i32)> = (0..20).map(|k| (k / 8, k % 8)).collect();
    w.submit(&cells(&coords, false)).unwrap();
    let e = w.finish().unwrap_err().to_string();
    assert!(e.contains("20 cells written, the subarray holds 32"), "{e}");
    assert_eq!(fragment_keys(&dense), before);
    // More than it holds: refused when given.
    let mut w = dense.writer(spec()).unwrap();
    let coords: Vec<(i32, i32)> = (0..33).map(|k| (k / 8, k % 8)).collect();
    assert!(w.submit(&cells(&coords, false)).is_err());
    // Dropped half way: nothing.
    let mut w = dense.writer(spec()).unwrap();
    w.submit(&cells(&coords[..16], false)).unwrap();
    drop(w);
    assert_eq!(fragment_keys(&dense), before);
    // A global-order dense write covers whole tiles, as in TileDB.
    let mut sub = Subarray::new(2);
    sub.add_range(0, range(1, 4));
    sub.add_range(1, range(0, 3));
    let e = dense
        .writer(
            WriteSpec::new(Vec::new())
                .with_layout(ResultLayout::GlobalOrder)
                .with_subarray(sub),
        )
        .err()
        .unwrap();
    let e = format!("{e:?}");
    assert!(e.contains("whole space tiles"), "{e}");
    assert_eq!(fragment_keys(&dense), before);
}

/// A dense write of fixed-size fields in parts filters the tile a part
/// leaves unfinished chunk by chunk as its cells come (`write/chunked.rs`),
/// where other writes filter whole tiles: the same bytes, file for file,
/// as one row-major write and as one global-order part, whatever the cuts
/// (inside a chunk, on a chunk's or a tile's edge, one cell at a time) and
/// whichever field (float values over chunks of 64 KiB, nullable int32
/// with its validity, a byte field cut at another count).
#[test]
fn dense_parts_of_fixed_size_fields_are_filtered_chunk_by_chunk_as_whole_tiles() {
    use tdb_filters::Filter;
    let s = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("x", 0i32..=255).tile_extent(128i32))
        .dimension(DimensionBuilder::range("y", 0i32..=255).tile_extent(128i32))
        .attribute(
            AttributeBuilder::new("a", Datatype::Float64)
                .filters([Filter::Byteshuffle, Filter::Zstd { level: 3 }]),
        )
        .attribute(
            AttributeBuilder::new("n", Datatype::Int32)
                .nullable(true)
                .filters([Filter::Zstd { level: 1 }]),
        )
        .attribute(AttributeBuilder::new("b", Datatype::UInt8))
        .validity_filters([Filter::Rle { level: -1 }])
        .build()
        .unwrap();
    let array = create(&s);
    let mut sub = Subarray::new(2);
    sub.add_range(0, range(0, 255));
    sub.add_range(1, range(0, 255));
    let fields = |coords: &[(i32, i32)]| {
        let mut a = FieldBuffer::new("a", Datatype::Float64, 1, false);
        let mut n = FieldBuffer::new("n", Datatype::Int32, 1, true);
        let mut b = FieldBuffer::new("b", Datatype::UInt8, 1, false);
        for &(i, j) in coords {
            a.push(&(f64::from(i * 3 + j) * 0.25).to_le_bytes(), true);
            n.push(&(i * j - 7).to_le_bytes(), (i + 2 * j) % 7 != 0);
            b.push(&[(i ^ j) as u8], true);
        }
        vec![a, n, b]
    };
    let row_major: Vec<(i32, i32)> = (0..=255)
        .flat_map(|i| (0..=255).map(move |j| (i, j)))
        .collect();
    let whole = array
        .write(
            WriteSpec::new(fields(&row_major))
                .with_subarray(sub.clone())
                .at(10),
        )
        .unwrap();
    let want = fragment_files(&array, &whole.fragment.to_string());
    // The tiles' cells in the global order: tile by tile, row-major in each.
    let global: Vec<(i32, i32)> = [(0, 0), (0, 128), (128, 0), (128, 128)]
        .iter()
        .flat_map(|&(ti, tj)| (ti..ti + 128).flat_map(move |i| (tj..tj + 128).map(move |j| (i, j))))
        .collect();
    let input = fields(&global);
    let tile = 128 * 128;
    let cuts: Vec<Vec<usize>> = vec![
        vec![],
        // Inside the first chunk of a's first tile, then across a tile.
        vec![100, 9_000, tile + 5, 3 * tile - 1],
        // On a's chunk edge (8,192 values), and one cell at a time there.
        vec![8_192, 8_193, 8_194, 2 * tile],
        // Small parts everywhere.
        (1..64).map(|k| k * 1_021).collect(),
    ];
    for (k, cut) in cuts.iter().enumerate() {
        let mut w = array
            .writer(
                WriteSpec::new(Vec::new())
                    .with_layout(ResultLayout::GlobalOrder)
                    .with_subarray(sub.clone())
                    .at(20 + k as u64),
            )
            .unwrap();
        for part in parts_of(&input, cut) {
            w.submit(&part).unwrap();
        }
        let written = w.finish().unwrap();
        assert_eq!(
            (written.cells, written.tiles),
            (4 * tile as u64, 4),
            "{cut:?}"
        );
        let got = fragment_files(&array, &written.fragment.to_string());
        assert_eq!(got.len(), want.len(), "{cut:?}");
        for ((name, bytes), (want_name, want_bytes)) in got.iter().zip(&want) {
            assert_eq!(name, want_name);
            assert!(bytes == want_bytes, "{name} differs, cuts {cut:?}");
        }
    }
}

/// Sparse tiles, and var-size cells dense or sparse, filtered chunk by
/// chunk as their parts come make the bytes of whole tiles too: a sparse
/// tile's chunk count is known only at its end (the fragment's last tile
/// is short), var data is cut where its cells' sizes say (cells around the
/// half and one-and-a-half marks of a chunk, larger than a chunk, empty,
/// null), a sparse tile's MBR and string bounds are folded part by part,
/// and filtered chunks waiting for a sparse tile's end past 64 KiB go to a
/// scratch file. Each write's files, byte for byte, are one unordered (sparse) or
/// row-major (dense) write's, whatever the cuts.
#[test]
fn sparse_and_var_parts_are_filtered_chunk_by_chunk_as_whole_tiles() {
    use tdb_filters::Filter;
    // Cells given a length of their own: the last of a tile, to end its
    // last chunk (then TileDB writes an empty one) or have one of its own.
    let mut lengths = std::collections::HashMap::<(i32, i32), usize>::new();
    let text = |k: usize, special: Option<&usize>| -> Vec<u8> {
        let len = match k % 997 {
            _ if special.is_some() => special.copied().unwrap_or(0),
            0 => 70_000,
            1 => 40_000,
            2 => 33_000,
            3 => 0,
            _ => k % 23,
        };
        (0..len).map(|i| b'a' + ((i * 7 + k) % 26) as u8).collect()
    };
    let fields = |coords: &[(i32, i32)],
                  with_coords: bool,
                  lengths: &std::collections::HashMap<(i32, i32), usize>| {
        let mut x = FieldBuffer::new("x", Datatype::Int32, 1, false);
        let mut y = FieldBuffer::new("y", Datatype::Int32, 1, false);
        let mut a = FieldBuffer::new("a", Datatype::Float64, 1, false);
        let mut s = FieldBuffer::new("s", Datatype::StringAscii, u32::MAX, true);
        let mut c = FieldBuffer::new("c", Datatype::Char, 3, false);
        let mut r = FieldBuffer::new("r", Datatype::UInt64, 1, false);
        for &(i, j) in coords {
            let k = (i * 211 + j) as usize;
            x.push(&i.to_le_bytes(), true);
            y.push(&j.to_le_bytes(), true);
            a.push(&(f64::from(i) * 0.25 - f64::from(j)).to_le_bytes(), true);
            let special = lengths.get(&(i, j));
            s.push(&text(k, special), k % 11 != 0 || special.is_some());
            c.push(&[b'a' + (k % 5) as u8, b'q', (k % 3) as u8], true);
            r.push(
                &(k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes(),
                true,
            );
        }
        let mut out = vec![a, s, c, r];
        if with_coords {
            out.extend([x, y]);
        }
        out
    };
    let attributes = |b: tdb_schema::ArraySchemaBuilder| {
        b.attribute(
            AttributeBuilder::new("a", Datatype::Float64)
                .filters([Filter::Byteshuffle, Filter::Zstd { level: 3 }]),
        )
        .attribute(
            AttributeBuilder::new("s", Datatype::StringAscii)
                .var()
                .nullable(true)
                .filters([Filter::Zstd { level: 1 }]),
        )
        .attribute(AttributeBuilder::new("c", Datatype::Char).cell_val_num(3))
        // Unfiltered: a sparse tile's 160 KB wait in a scratch file.
        .attribute(AttributeBuilder::new("r", Datatype::UInt64))
    };
    let check = |array: &Array,
                 whole: &str,
                 input: &[FieldBuffer],
                 cuts: &[Vec<usize>],
                 t0: u64,
                 sub: Option<&Subarray>| {
        let want = fragment_files(array, whole);
        for (k, cut) in cuts.iter().enumerate() {
            let mut spec = WriteSpec::new(Vec::new())
                .with_layout(ResultLayout::GlobalOrder)
                .at(t0 + k as u64);
            if let Some(sub) = sub {
                spec = spec.with_subarray(sub.clone());
            }
            let mut w = array.writer(spec).unwrap();
            for part in parts_of(input, cut) {
                w.submit(&part).unwrap();
            }
            let written = w.finish().unwrap();
            let got = fragment_files(array, &written.fragment.to_string());
            assert_eq!(got.len(), want.len(), "{cut:?}");
            for ((name, bytes), (want_name, want_bytes)) in got.iter().zip(&want) {
                assert_eq!(name, want_name);
                assert!(bytes == want_bytes, "{name} differs, cuts {cut:?}");
            }
        }
    };
    // Sparse: tiles of 20,000 cells, the last of 5,000.
    let s = attributes(
        ArraySchema::builder(ArrayType::Sparse)
            .dimension(DimensionBuilder::range("x", 0i32..=299).tile_extent(100i32))
            .dimension(DimensionBuilder::range("y", 0i32..=299).tile_extent(100i32)),
    )
    .capacity(20_000)
    .build()
    .unwrap();
    let array = create(&s);
    let coords: Vec<(i32, i32)> = (0..45_000)
        .map(|k: i32| {
            let p = k * 7_919 % 90_000;
            (p / 300, p % 300)
        })
        .collect();
    // The global order, from a first write of the cells.
    let sorted = {
        let mut probe = create(&s);
        probe
            .write(WriteSpec::new(fields(&coords, true, &lengths)).at(1))
            .unwrap();
        global_coords(&read_global(&mut probe))
    };
    assert_eq!(sorted.len(), 45_000);
    lengths.extend([
        (sorted[19_999], 40_000),
        // 60,000 and 50,000 bytes leave a chunk more than half full
        // that 70,000 cannot join: a chunk of its own, the tile's last.
        (sorted[39_997], 60_000),
        (sorted[39_998], 50_000),
        (sorted[39_999], 70_000),
        (sorted[44_999], 40_000),
    ]);
    let whole = array
        .write(WriteSpec::new(fields(&coords, true, &lengths)).at(10))
        .unwrap();
    assert_eq!(whole.tiles, 3);
    let cuts: Vec<Vec<usize>> = vec![
        // Inside the first tile, across a tile, inside the last.
        vec![100, 9_000, 20_005, 39_999, 44_000],
        // On tile edges, one cell at a time there.
        vec![19_999, 20_000, 20_001, 40_000],
        // Small parts everywhere.
        (1..90).map(|k| k * 503).collect(),
    ];
    check(
        &array,
        &whole.fragment.to_string(),
        &fields(&sorted, true, &lengths),
        &cuts,
        20,
        None,
    );
    // Dense: tiles of 128 x 128, var strings.
    let s = attributes(
        ArraySchema::builder(ArrayType::Dense)
            .dimension(DimensionBuilder::range("x", 0i32..=255).tile_extent(128i32))
            .dimension(DimensionBuilder::range("y", 0i32..=255).tile_extent(128i32)),
    )
    .build()
    .unwrap();
    let array = create(&s);
    let mut sub = Subarray::new(2);
    sub.add_range(0, range(0, 255));
    sub.add_range(1, range(0, 255));
    let row_major: Vec<(i32, i32)> = (0..=255)
        .flat_map(|i| (0..=255).map(move |j| (i, j)))
        .collect();
    lengths.clear();
    lengths.extend([
        ((127, 127), 40_000),
        ((127, 253), 60_000),
        ((127, 254), 50_000),
        ((127, 255), 70_000),
        ((255, 127), 40_000),
    ]);
    let whole = array
        .write(
            WriteSpec::new(fields(&row_major, false, &lengths))
                .with_subarray(sub.clone())
                .at(10),
        )
        .unwrap();
    let global: Vec<(i32, i32)> = [(0, 0), (0, 128), (128, 0), (128, 128)]
        .iter()
        .flat_map(|&(ti, tj)| (ti..ti + 128).flat_map(move |i| (tj..tj + 128).map(move |j| (i, j))))
        .collect();
    let tile = 128 * 128;
    let cuts: Vec<Vec<usize>> = vec![
        vec![100, 9_000, tile + 5, 3 * tile - 1],
        (1..64).map(|k| k * 1_021).collect(),
    ];
    check(
        &array,
        &whole.fragment.to_string(),
        &fields(&global, false, &lengths),
        &cuts,
        20,
        Some(&sub),
    );
}

/// A dense row- or col-major write given in bands of whole space tiles
/// (`tdb_query::write::dense_bands`, what a copy of a dense fragment
/// reads one at a time) makes the fragment one write makes, byte for
/// byte: edge tiles reaching past the subarray (zeros with validity 0
/// there, tile metadata of the cells given), row- and col-major tile
/// orders. Bands out of order, or after a whole part, are refused.
#[test]
fn dense_bands_make_the_fragment_one_write_makes() {
    for (cell_order, tile_order) in [
        (Layout::RowMajor, Layout::RowMajor),
        (Layout::ColMajor, Layout::ColMajor),
        (Layout::RowMajor, Layout::ColMajor),
    ] {
        let mut s = schema(ArrayType::Dense, cell_order);
        s.tile_order = tile_order;
        let array = create(&s);
        let nd = vec![range(2, 13), range(1, 10)];
        let mut sub = Subarray::new(2);
        sub.add_range(0, nd[0].clone());
        sub.add_range(1, nd[1].clone());
        let in_box = |lo: (i32, i32), hi: (i32, i32)| -> Vec<(i32, i32)> {
            (lo.0..=hi.0)
                .flat_map(|i| (lo.1..=hi.1).map(move |j| (i, j)))
                .collect()
        };
        let spec = || {
            WriteSpec::new(Vec::new())
                .with_subarray(sub.clone())
                .with_layout(ResultLayout::RowMajor)
        };
        let mut whole = spec();
        whole.fields = cells(&in_box((2, 1), (13, 10)), false);
        let whole = array.write(whole.at(10)).unwrap();
        let bands = tdb_query::write::dense_bands(&s, &nd).unwrap();
        // Tiles of 4: x 2..=13 in four bands (row-major tiles), y 1..=10 in three.
        let want = if tile_order == Layout::RowMajor { 4 } else { 3 };
        assert_eq!(bands.len(), want, "{tile_order:?}");
        let mut w = array.writer(spec().at(20)).unwrap();
        for band in &bands {
            let (x, y) = (band[0].clone(), band[1].clone());
            let b = |r: &Range| {
                let (lo, hi) = r.bounds();
                (
                    i32::from_le_bytes(lo.try_into().unwrap()),
                    i32::from_le_bytes(hi.try_into().unwrap()),
                )
            };
            let ((x0, x1), (y0, y1)) = (b(&x), b(&y));
            w.submit_band(band, &cells(&in_box((x0, y0), (x1, y1)), false))
                .unwrap();
        }
        let written = w.finish().unwrap();
        assert_eq!(written.cells, 120);
        assert_eq!(
            fragment_files(&array, &written.fragment.to_string()),
            fragment_files(&array, &whole.fragment.to_string()),
            "{cell_order:?} cells, {tile_order:?} tiles"
        );
        // The second band first: refused.
        let mut w = array.writer(spec().at(30)).unwrap();
        assert!(w.submit_band(&bands[1], &[]).is_err());
    }
}
