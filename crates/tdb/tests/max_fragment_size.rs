//! `max_fragment_size`: a global-order write, and so a consolidation, is
//! split into fragments of at most that many bytes of filtered tiles, as
//! TileDB 2.30's global-order writer splits them. (`cargo xtask interop`'s
//! `split` setting compares tdb's split merges with TileDB's on every
//! fixture.)

use tdb::{Datatype, FieldBuffer, FragmentSelection, OpenOptions, ReadSpec, ResultLayout};
use tdb::{Error, WriteSpec};
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
    let dense = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("d", 0i32..=39).tile_extent(4i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap();
    let mem = MemoryStorage::new();
    let a = tdb::Array::create_in(&mem, "", &dense, &[], OpenOptions::new().at(1)).unwrap();
    let spec = WriteSpec::new(vec![ints("a", &v)])
        .with_layout(ResultLayout::GlobalOrder)
        .with_max_fragment_size(1 << 20);
    assert!(matches!(a.write(spec), Err(Error::Unsupported(_))));
}
