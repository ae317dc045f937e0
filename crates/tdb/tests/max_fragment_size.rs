//! `max_fragment_size`: a global-order write, and so a consolidation, is
//! split into fragments of at most that many bytes of filtered tiles, as
//! TileDB 2.30's global-order writer splits them. (`cargo xtask interop`'s
//! `split` setting compares tdb's split merges with TileDB's on every
//! fixture.)

use tdb::WriteSpec;
use tdb::{Datatype, FieldBuffer, FragmentSelection, OpenOptions, ReadSpec, ResultLayout};
use tdb_format::ArrayType;
use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};
use tdb_storage::MemoryStorage;

use crate::common::{chain, ints};

/// Every cell of the array at `dir` (sorted rows of every field's bytes).
fn cells(dir: &std::path::Path) -> Vec<Vec<u8>> {
    let a = tdb::Array::open(dir).unwrap();
    let b = a.read_all(ReadSpec::new(["d", "a"])).unwrap();
    let n = b.num_cells as usize;
    let mut rows: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            (b.fields.iter())
                .flat_map(|f| f.column().cell(i).to_vec())
                .collect()
        })
        .collect();
    rows.sort();
    rows
}

/// Per fragment of the array at `dir` spanning `t1..=t2`: its cells and
/// its non-empty domain along the (integer) dimension, in order.
fn fragments_of(dir: &std::path::Path, (t1, t2): (u64, u64)) -> Vec<(u64, (i64, i64))> {
    let a = tdb::Array::open(dir).unwrap();
    let capacity = a.schema().capacity;
    let mut out: Vec<(u64, (i64, i64))> = (a.fragments().iter())
        .filter(|f| (f.file.name.t1, f.file.name.t2) == (t1, t2))
        .map(|f| {
            let footer = &f.metadata.footer;
            let cells = (footer.sparse_tile_num - 1) * capacity + footer.last_tile_cell_num;
            let ned = footer.non_empty_domain.as_ref().unwrap();
            let (lo, hi) = ned[0].bounds();
            let int = |b: &[u8]| match b.len() {
                4 => i64::from(i32::from_le_bytes(b.try_into().unwrap())),
                _ => i64::from_le_bytes(b.try_into().unwrap()),
            };
            (cells, (int(lo), int(hi)))
        })
        .collect();
    out.sort_by_key(|f| f.1);
    out
}

/// A copy of `sparse_small_capacity` (two fragments, 50 cells, capacity
/// 8), its cells, and the settings of a merge split at `bytes`.
fn small_capacity_copy(bytes: u64) -> (tempfile::TempDir, Vec<Vec<u8>>, FragmentSelection) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tdb_testdata::root().join("sparse_small_capacity/array");
    tdb_testdata::copy_dir(&src, tmp.path()).unwrap();
    let before = cells(tmp.path());
    let mut selection = FragmentSelection::default();
    selection.max_fragment_size = Some(bytes);
    (tmp, before, selection)
}

/// TileDB 2.30 consolidates `sparse_small_capacity` (two fragments, 50
/// cells, capacity 8) with `sm.consolidation.max_fragment_size` 300 into
/// these six fragments: tdb's merge is the same, the last partial tile
/// joining the fragment before whatever its size, as TileDB's writer puts
/// it, and the fragments committed by one `.con`, as TileDB commits them.
/// Reads answer as before; the vacuum list is named after the first.
#[test]
fn a_split_merge_gives_tiledbs_fragments() {
    let (tmp, before, selection) = small_capacity_copy(300);
    let a = tdb::Array::open(tmp.path()).unwrap();
    let steps = a
        .consolidate_fragments(&selection, tdb::DEFAULT_BUDGET)
        .unwrap();
    assert_eq!(steps.len(), 1, "the split outputs are not merged again");
    let step = &steps[0];
    let tiledb = [
        (8, (2, 246)),
        (8, (250, 394)),
        (8, (401, 581)),
        (8, (591, 775)),
        (8, (781, 824)),
        (10, (840, 975)),
    ];
    assert_eq!(fragments_of(tmp.path(), (1, 2)), tiledb);
    assert_eq!(step.written.fragments.len(), 6);
    assert_eq!(step.written.fragment, step.written.fragments[0]);
    let vac = format!("__commits/{}.vac", step.written.fragments[0]);
    assert_eq!(step.vacuum_list, vac);
    // Committed at once, as TileDB commits a split write: one consolidated
    // commits file listing each fragment's `.wrt`, in order, and no `.wrt`.
    let commits: Vec<String> = std::fs::read_dir(tmp.path().join("__commits"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("__1_2_"))
        .collect();
    let con: Vec<&String> = commits.iter().filter(|n| n.ends_with(".con")).collect();
    assert_eq!(con.len(), 1, "{commits:?}");
    assert!(!commits.iter().any(|n| n.ends_with(".wrt")), "{commits:?}");
    let listed = std::fs::read_to_string(tmp.path().join("__commits").join(con[0])).unwrap();
    let want: String = (step.written.fragments.iter())
        .map(|f| format!("__commits/{f}.wrt\n"))
        .collect();
    assert_eq!(listed, want);
    assert_eq!(cells(tmp.path()), before, "consolidated");
    let storage = tdb::LocalStorage::new(tmp.path());
    let report = tdb_fragment::verify_array(&storage, "", None, &mut |p| panic!("{p}")).unwrap();
    assert_eq!(report.problems, 0);
    assert_eq!(a.vacuum_fragments().unwrap(), 2);
    assert_eq!(tdb::Array::open(tmp.path()).unwrap().fragments().len(), 6);
    assert_eq!(cells(tmp.path()), before, "vacuumed");
}

/// A size below one tile is refused, as TileDB refuses it, and nothing
/// new is committed.
#[test]
fn a_size_below_one_tile_is_refused_with_nothing_committed() {
    let (tmp, before, selection) = small_capacity_copy(100);
    let a = tdb::Array::open(tmp.path()).unwrap();
    let e = chain(
        &a.consolidate_fragments(&selection, tdb::DEFAULT_BUDGET)
            .unwrap_err(),
    );
    assert!(e.contains("too small to write a single tile"), "{e}");
    assert_eq!(tdb::Array::open(tmp.path()).unwrap().fragments().len(), 2);
    assert_eq!(cells(tmp.path()), before);
}

/// A global-order write splits the same way (every fragment committed,
/// the same cells read back); other layouts and dense writes refuse the
/// setting.
#[test]
fn global_order_writes_split_and_other_writes_refuse() {
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("d", 0i32..=999).tile_extent(100i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .capacity(4)
        .build()
        .unwrap();
    let mem = MemoryStorage::new();
    let a = tdb::Array::create_in(&mem, "", &schema, &[], OpenOptions::new().at(1)).unwrap();
    let d: Vec<i32> = (0..40).map(|i| i * 3).collect();
    let v: Vec<i32> = (0..40).map(|i| i * 7).collect();
    let fields: Vec<FieldBuffer> = vec![ints("d", &d), ints("a", &v)];
    let spec = || {
        WriteSpec::new(fields.clone())
            .with_layout(ResultLayout::GlobalOrder)
            .at(2)
    };
    // Every tile (4 cells of each field, filtered) is the same size: the
    // refusal of a 1-byte maximum says it.
    let e = chain(&a.write(spec().with_max_fragment_size(1)).unwrap_err());
    let tile: u64 = e
        .split("single tile (")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{e}"));
    assert!(tdb::Array::open_in(&mem, "", OpenOptions::new())
        .unwrap()
        .fragments()
        .is_empty());
    // Three tiles fit, a fourth does not: 10 tiles in 3 + 3 + 3 + 1.
    let written = a
        .write(spec().with_max_fragment_size(3 * tile + 1))
        .unwrap();
    assert_eq!(written.tiles, 10);
    assert_eq!(written.fragments.len(), 4, "{written:?}");
    let a = tdb::Array::open_in(&mem, "", OpenOptions::new()).unwrap();
    assert_eq!(a.fragments().len(), written.fragments.len());
    let got = a.read_all(ReadSpec::new(["d", "a"])).unwrap();
    assert_eq!(got.fields[0].data, ints("d", &d).data);
    assert_eq!(got.fields[1].data, ints("a", &v).data);
    let unordered = WriteSpec::new(fields.clone()).with_max_fragment_size(1 << 20);
    let e = chain(&a.write(unordered).unwrap_err());
    assert!(e.contains("applies to global-order writes"), "{e}");
}

/// A fragment a merge wrote: its cells, and `(lo, hi)` per dimension.
type Written = (u64, Vec<(i32, i32)>);

/// A dense array over `dims` (`(lo, hi, tile extent)` each, int32), one
/// int32 attribute `a` (unfiltered: a tile of n cells is 20 + 4n bytes),
/// with a fragment per `(t, box)` of `writes`; consolidated with
/// `max_fragment_size` `max`. The fragments the merge wrote, in write
/// order: each one's cells and non-empty domain (`(lo, hi)` per
/// dimension).
fn dense_split(
    dims: &[(i32, i32, i32)],
    tile_order: tdb::Layout,
    writes: &[Vec<(i32, i32)>],
    max: u64,
) -> Result<Vec<Written>, String> {
    let mut b = ArraySchema::builder(ArrayType::Dense).tile_order(tile_order);
    for (i, &(lo, hi, tile)) in dims.iter().enumerate() {
        b = b.dimension(DimensionBuilder::range(format!("d{i}"), lo..=hi).tile_extent(tile));
    }
    let schema = b
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap();
    let mem = MemoryStorage::new();
    tdb::Array::create_in(&mem, "", &schema, &[], OpenOptions::new().at(1)).unwrap();
    for (t, rect) in writes.iter().enumerate() {
        let a = tdb::Array::open_in(&mem, "", OpenOptions::new().at(t as u64 + 1)).unwrap();
        let mut sub = tdb::Subarray::new(rect.len());
        let mut n = 1;
        for (d, &(lo, hi)) in rect.iter().enumerate() {
            sub.add(a.schema(), &format!("d{d}"), lo..=hi).unwrap();
            n *= (hi - lo + 1) as usize;
        }
        let v: Vec<i32> = (0..n as i32).collect();
        a.write(WriteSpec::new(vec![ints("a", &v)]).with_subarray(sub))
            .unwrap();
    }
    let a = tdb::Array::open_in(&mem, "", OpenOptions::new()).unwrap();
    let before = a.read_all(ReadSpec::new(["a"])).unwrap();
    let mut selection = FragmentSelection::default();
    selection.max_fragment_size = Some(max);
    let steps = a
        .consolidate_fragments(&selection, tdb::DEFAULT_BUDGET)
        .map_err(|e| chain(&e))?;
    let written = &steps[0].written.fragments;
    let a = tdb::Array::open_in(&mem, "", OpenOptions::new()).unwrap();
    a.vacuum_fragments().unwrap();
    let a = tdb::Array::open_in(&mem, "", OpenOptions::new()).unwrap();
    assert_eq!(
        a.read_all(ReadSpec::new(["a"])).unwrap(),
        before,
        "cells changed"
    );
    let cells_per_tile: u64 = dims.iter().map(|d| d.2 as u64).product();
    Ok(written
        .iter()
        .map(|name| {
            let f = a.fragments().iter().find(|f| &f.file.name == name).unwrap();
            let footer = &f.metadata.footer;
            let ned = footer.non_empty_domain.as_ref().unwrap();
            let ned = ned
                .iter()
                .map(|r| {
                    let (lo, hi) = r.bounds();
                    (
                        i32::from_le_bytes(lo.try_into().unwrap()),
                        i32::from_le_bytes(hi.try_into().unwrap()),
                    )
                })
                .collect();
            (footer.tile_num(a.schema()).unwrap() * cells_per_tile, ned)
        })
        .collect())
}

/// TileDB 2.30's splits of dense merges, as `consolidate` with
/// `sm.consolidation.max_fragment_size` gave them
/// (docs/research/dense_max_fragment_size.md, section 6).
#[test]
fn dense_merges_split_into_tiledbs_rectangles_of_tiles() {
    use tdb::Layout::{ColMajor, RowMajor};
    let one = |lo, hi| vec![(lo, hi)];
    // 1-D [1,20] in tiles of 4 (36 bytes a tile): [1,4]@1, [5,12]@2, [13,20]@3.
    let writes = [one(1, 4), one(5, 12), one(13, 20)];
    let nds = |max| {
        dense_split(&[(1, 20, 4)], RowMajor, &writes, max)
            .unwrap()
            .into_iter()
            .map(|(_, n)| n[0])
            .collect::<Vec<_>>()
    };
    assert_eq!(nds(1000), [(1, 20)]);
    assert_eq!(nds(150), [(1, 16), (17, 20)]);
    assert_eq!(nds(100), [(1, 8), (9, 16), (17, 20)]);
    assert_eq!(nds(40), [(1, 4), (5, 8), (9, 12), (13, 16), (17, 20)]);
    let e = dense_split(&[(1, 20, 4)], RowMajor, &writes, 30).unwrap_err();
    assert!(e.contains("single tile"), "{e}");
    // A union off the tiles: [3,6]@1, [9,14]@2; each fragment records its
    // tiles clipped to the union, and counts whole tiles.
    let writes = [one(3, 6), one(9, 14)];
    let split = |max| dense_split(&[(1, 20, 4)], RowMajor, &writes, max).unwrap();
    let ned = |v: Vec<Written>| v.into_iter().map(|(_, n)| n[0]).collect::<Vec<_>>();
    assert_eq!(ned(split(36)), [(3, 4), (5, 8), (9, 12), (13, 14)]);
    assert_eq!(split(36)[0].0, 4);
    assert_eq!(ned(split(72)), [(3, 8), (9, 14)]);
    assert_eq!(ned(split(108)), [(3, 12), (13, 14)]);
    // 2-D [1,8] × [1,12] in tiles of 2 × 4 (52 bytes a tile): rows 1-4 and
    // 5-8 written apart.
    let writes = [vec![(1, 4), (1, 12)], vec![(5, 8), (1, 12)]];
    let dims = [(1, 8, 2), (1, 12, 4)];
    let grid = |order, k: u64| {
        dense_split(&dims, order, &writes, 52 * k)
            .unwrap()
            .into_iter()
            .map(|(_, n)| (n[0], n[1]))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        grid(RowMajor, 2),
        [
            ((1, 2), (1, 8)),
            ((1, 2), (9, 12)),
            ((3, 4), (1, 8)),
            ((3, 4), (9, 12)),
            ((5, 6), (1, 8)),
            ((5, 6), (9, 12)),
            ((7, 8), (1, 8)),
            ((7, 8), (9, 12)),
        ]
    );
    assert_eq!(
        grid(RowMajor, 5),
        [
            ((1, 2), (1, 12)),
            ((3, 4), (1, 12)),
            ((5, 6), (1, 12)),
            ((7, 8), (1, 12))
        ]
    );
    assert_eq!(grid(RowMajor, 9), [((1, 6), (1, 12)), ((7, 8), (1, 12))]);
    assert_eq!(
        grid(ColMajor, 2),
        [
            ((1, 4), (1, 4)),
            ((5, 8), (1, 4)),
            ((1, 4), (5, 8)),
            ((5, 8), (5, 8)),
            ((1, 4), (9, 12)),
            ((5, 8), (9, 12)),
        ]
    );
    assert_eq!(grid(ColMajor, 9), [((1, 8), (1, 8)), ((1, 8), (9, 12))]);
}

/// TileDB goes on after a split dense merge with its first fragment alone
/// and a later step can cover the others with fill values
/// (docs/research/dense_max_fragment_size.md, 5a): tdb's consolidation
/// stops after such a merge, and every cell survives.
#[test]
fn a_split_dense_merge_ends_the_consolidation_and_loses_no_cell() {
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("d", 1i32..=32).tile_extent(4i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap();
    let mem = MemoryStorage::new();
    tdb::Array::create_in(&mem, "", &schema, &[], OpenOptions::new().at(1)).unwrap();
    for t in 0..4 {
        let a = tdb::Array::open_in(&mem, "", OpenOptions::new().at(t + 1)).unwrap();
        let lo = (t * 8 + 1) as i32;
        let mut sub = tdb::Subarray::new(1);
        sub.add(a.schema(), "d", lo..=lo + 7).unwrap();
        let v: Vec<i32> = (0..8).map(|i| i + 100 * t as i32).collect();
        a.write(WriteSpec::new(vec![ints("a", &v)]).with_subarray(sub))
            .unwrap();
    }
    let a = tdb::Array::open_in(&mem, "", OpenOptions::new()).unwrap();
    let before = a.read_all(ReadSpec::new(["a"])).unwrap();
    let mut selection = FragmentSelection::default();
    selection.max_fragment_size = Some(36);
    selection.steps = 10;
    selection.min_frags = 2;
    selection.max_frags = 2;
    selection.amplification = 10.0;
    let steps = a
        .consolidate_fragments(&selection, tdb::DEFAULT_BUDGET)
        .unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].written.fragments.len(), 4);
    tdb::Array::open_in(&mem, "", OpenOptions::new())
        .unwrap()
        .vacuum_fragments()
        .unwrap();
    let a = tdb::Array::open_in(&mem, "", OpenOptions::new()).unwrap();
    assert_eq!(a.read_all(ReadSpec::new(["a"])).unwrap(), before);
}
