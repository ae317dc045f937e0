//! Sparse fragment consolidation: for the four fragments TileDB
//! consolidated in `consolidated_before_vacuum`, tdb's consolidated
//! fragment is TileDB's, file for file; reads at every time answer the same
//! before and after consolidating and vacuuming; stopped at any write or
//! delete, the array reads as before; an array 20 times the budget is read
//! in batches within it; steps and lists merge what TileDB's would.

use tdb::{Datatype, FieldBuffer, FragmentSelection, OpenOptions, ReadSpec, WriteSpec};
use tdb_format::ArrayType;
use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};
use tdb_storage::{FaultyStorage, MemoryStorage};

use crate::common;
use common::*;

/// Cells (sorted, so layouts do not matter) seen at each of 1..=6 and now.
fn seen(open: &dyn Fn(Option<u64>) -> tdb::Result<Vec<FieldBuffer>>) -> Vec<Vec<Vec<u8>>> {
    (1..=6)
        .map(Some)
        .chain([None])
        .map(|t| {
            let fields = open(t).unwrap();
            let n = fields[0].column().len();
            let mut rows: Vec<Vec<u8>> = (0..n)
                .map(|i| {
                    fields
                        .iter()
                        .flat_map(|f| f.column().cell(i).to_vec())
                        .collect()
                })
                .collect();
            rows.sort();
            rows
        })
        .collect()
}

/// [`seen`] of the array at the root of `store`.
fn seen_in<S: tdb_fragment::ReadStorage>(store: &S) -> Vec<Vec<Vec<u8>>> {
    seen(&|t: Option<u64>| {
        let options = t.map_or(OpenOptions::new(), |t| OpenOptions::new().at(t));
        let a = tdb::Array::open_in(store, "", options)?;
        Ok(a.read_all(ReadSpec::new(fields(&a)))?.fields)
    })
}

fn fields(a: &tdb::Array<impl tdb_fragment::ReadStorage>) -> Vec<String> {
    let s = a.schema();
    s.domain
        .dimensions
        .iter()
        .map(|d| d.name.clone())
        .chain(s.attributes.iter().map(|a| a.name.clone()))
        .collect()
}

/// tdb's merge of the four fragments is TileDB's consolidated fragment,
/// file for file: its one tile, short of the capacity, is filtered chunk
/// by chunk as the merge's part comes and its chunk counts written at its
/// end (`write/chunked.rs`: a wrong count fails here on TileDB's bytes);
/// at the default budget and under 64 bytes, where the merge reads its
/// inputs a few cells at a time.
#[test]
fn tdbs_consolidated_fragment_is_tiledbs() {
    for budget in [tdb::DEFAULT_BUDGET, 64] {
        consolidated_as_tiledb(budget);
    }
}

fn consolidated_as_tiledb(budget: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tdb_testdata::root().join("consolidated_before_vacuum/array");
    tdb_testdata::copy_dir(&src, tmp.path()).unwrap();
    // TileDB's consolidated fragment, set aside: tdb consolidates the four.
    let a = tdb::Array::open(tmp.path()).unwrap();
    let theirs = a.fragments()[0].file.path.clone();
    assert!(a.fragments()[0].metadata.footer.has_timestamps);
    let stem = theirs.trim_start_matches("__fragments/").to_owned();
    let saved = tempfile::tempdir().unwrap();
    tdb_testdata::copy_dir(&tmp.path().join(&theirs), saved.path()).unwrap();
    std::fs::remove_dir_all(tmp.path().join(&theirs)).unwrap();
    for ext in ["wrt", "vac"] {
        std::fs::remove_file(tmp.path().join(format!("__commits/{stem}.{ext}"))).unwrap();
    }
    let local = tdb::LocalStorage::new(tmp.path());
    let at = || seen_in(&local);
    let before = at();
    let a = tdb::Array::open(tmp.path()).unwrap();
    assert_eq!(a.fragments().len(), 4);
    let done = a
        .consolidate_fragments(&FragmentSelection::default(), budget)
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(done.replaced.len(), 4);
    let ours = format!("__fragments/{}", done.written.fragment);
    assert!(ours.starts_with("__fragments/__1_4_"), "{ours}");
    assert_same_files(saved.path(), &tmp.path().join(&ours));
    assert_eq!(at(), before, "consolidated, not vacuumed");
    assert_eq!(a.vacuum_fragments().unwrap(), 4);
    assert_eq!(tdb::Array::open(tmp.path()).unwrap().fragments().len(), 1);
    // As after TileDB's own vacuum: windows ending inside the merged span
    // still answer, from the per-cell timestamps.
    assert_eq!(at(), before, "vacuumed");
}

/// TileDB's consolidation of `sparse_large_tiles`' two fragments (tiles of
/// 100,000 and 20,000 cells, 3 MB unfiltered) is tdb's byte for byte,
/// under 1 MiB too: there the merge cuts its parts at a share of the
/// budget, and each tile is filtered chunk by chunk across several parts,
/// its chunk counts written at its end (the short last tile's too).
#[test]
fn a_merge_of_tiles_larger_than_its_parts_is_tiledbs() {
    let (tmp, theirs) = before_merge("sparse_large_tiles_consolidated", 1, 2);
    merge_matches(tmp.path(), theirs.path(), false, (1, 2));
}

/// Fragments written under three schemas (an attribute added, then
/// another dropped) merge under the latest as TileDB's: the added
/// attribute's fill values where it was not written, the dropped one gone;
/// reads at the latest time answer as before.
#[test]
fn fragments_under_older_schemas_merge_under_the_latest_as_tiledbs() {
    let (tmp, theirs) = before_merge("schema_evolution_consolidated", 2, 6);
    let local = tdb::LocalStorage::new(tmp.path());
    let a = tdb::Array::open(tmp.path()).unwrap();
    let schemas: std::collections::BTreeSet<_> = a
        .fragments()
        .iter()
        .map(|f| f.metadata.footer.array_schema_name.clone())
        .collect();
    assert_eq!(schemas.len(), 3);
    let now = seen_in(&local).pop();
    merge_matches(tmp.path(), theirs.path(), false, (2, 6));
    a.vacuum_fragments().unwrap();
    assert_eq!(seen_in(&local).pop(), now);
}

/// A delete on an attribute added after a fragment was written deletes
/// that fragment's cells (TileDB tests the field as absent there, not as
/// its fill value): merged, they stay deleted from the delete's time on,
/// as in TileDB's own consolidation of the case.
#[test]
fn a_delete_on_an_attribute_a_fragment_lacks_deletes_its_cells_through_a_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tdb_testdata::root().join("schema_evolution_conditions/array");
    tdb_testdata::copy_dir(&src, tmp.path()).unwrap();
    let local = tdb::LocalStorage::new(tmp.path());
    let before = seen_in(&local);
    // At 4, `c == 6` (made at 4) took the cells of the fragment at 1.
    let coords = |rows: &[Vec<u8>]| -> Vec<i32> {
        rows.iter()
            .map(|r| i32::from_le_bytes(r[..4].try_into().unwrap()))
            .collect()
    };
    assert_eq!(coords(&before[2]), [0, 1, 2, 3, 10, 11, 12]);
    assert_eq!(coords(&before[3]), [10, 12]);
    let a = tdb::Array::open(tmp.path()).unwrap();
    let done = a
        .consolidate_fragments(&FragmentSelection::default(), tdb::DEFAULT_BUDGET)
        .unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].replaced.len(), 3);
    assert_eq!(seen_in(&local), before, "consolidated");
    a.vacuum_fragments().unwrap();
    assert_eq!(seen_in(&local), before, "vacuumed");
}

/// Fragments at 1..=4 overwriting some cells (no duplicates allowed).
fn array() -> FaultyStorage<MemoryStorage> {
    let store = FaultyStorage::new(MemoryStorage::new());
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("d", 0i32..=99).tile_extent(10i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .capacity(3)
        .build()
        .unwrap();
    let a = tdb::Array::create_in(&store, "", &schema, &[], OpenOptions::new().at(1)).unwrap();
    for t in 1..=4u64 {
        let t32 = t as i32;
        let d: Vec<i32> = (0..5).map(|i| i * 3 + t32 % 2).collect();
        let v: Vec<i32> = d.iter().map(|x| x * 100 + t32).collect();
        a.write(WriteSpec::new(vec![ints("d", &d), ints("a", &v)]).at(t))
            .unwrap();
    }
    store
}

/// [`array`] with a delete at 3 (cells with `a` over 800): the merge
/// carries it as delete metadata.
fn array_with_delete() -> FaultyStorage<MemoryStorage> {
    let store = array();
    tdb::Array::open_in(&store, "", OpenOptions::new().at(3))
        .unwrap()
        .delete("a > 800")
        .unwrap();
    store
}

#[test]
fn consolidation_or_vacuum_stopped_anywhere_reads_as_before() {
    stopped_anywhere_reads_as_before(array);
}

#[test]
fn consolidation_over_a_delete_stopped_anywhere_reads_as_before() {
    // The delete removes cells, and the merge keeps them as delete
    // metadata (reads before 3 still see them).
    let store = array_with_delete();
    let seen = seen_in(&store);
    assert_ne!(seen[1], seen[4], "the delete removes cells");
    let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    a.consolidate_fragments(&FragmentSelection::default(), tdb::DEFAULT_BUDGET)
        .unwrap();
    a.vacuum_fragments().unwrap();
    let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    assert!(a.fragments()[0].metadata.footer.has_delete_meta);
    assert_eq!(seen_in(&store), seen);
    stopped_anywhere_reads_as_before(array_with_delete);
}

/// Consolidating and vacuuming the array `array()` makes, stopped at each
/// write and each delete in turn, leaves it reading as before at every
/// time, and the rerun completes.
fn stopped_anywhere_reads_as_before(array: fn() -> FaultyStorage<MemoryStorage>) {
    let store = array();
    let before = seen_in(&store);
    store.fail_from(u64::MAX);
    let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    let steps = a
        .consolidate_fragments(&FragmentSelection::default(), tdb::DEFAULT_BUDGET)
        .unwrap();
    assert_eq!(steps.len(), 1);
    let writes = store.mutations();
    assert!(writes >= 4, "{writes}");
    assert_eq!(seen_in(&store), before);
    store.fail_from(u64::MAX);
    let removed = a.vacuum_fragments().unwrap();
    let deletes = store.mutations();
    assert_eq!(removed, 4);
    assert_eq!(seen_in(&store), before);
    for n in 1..=writes {
        let store = array();
        let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
        store.fail_from(n);
        assert!(
            a.consolidate_fragments(&FragmentSelection::default(), tdb::DEFAULT_BUDGET)
                .is_err(),
            "write {n}"
        );
        store.fail_from(u64::MAX);
        assert_eq!(
            seen_in(&store),
            before,
            "consolidation stopped at write {n}"
        );
    }
    for n in 1..=deletes {
        let store = array();
        let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
        a.consolidate_fragments(&FragmentSelection::default(), tdb::DEFAULT_BUDGET)
            .unwrap();
        store.fail_from(n);
        assert!(a.vacuum_fragments().is_err(), "delete {n}");
        store.fail_from(u64::MAX);
        assert_eq!(seen_in(&store), before, "vacuum stopped at delete {n}");
        a.vacuum_fragments().unwrap();
        assert_eq!(seen_in(&store), before);
        // The rerun finished the job: the merged fragment is all that is
        // left of the fragments, and no vacuum list stays.
        use tdb_storage::ListableStorage;
        let left = store.list_dir("__fragments").unwrap().dirs;
        assert_eq!(left.len(), 1, "vacuum stopped at delete {n}: {left:?}");
        let lists = store.list_dir("__commits").unwrap().files;
        assert!(
            lists.iter().all(|f| !f.key.ends_with(".vac")),
            "vacuum stopped at delete {n}: {lists:?}"
        );
    }
}

/// An array 20 times larger than the budget consolidates through it (each
/// fragment read in batches within its share), into the same cells: over
/// an integer dimension, a float and a string one, and float dimensions in
/// Hilbert order (each input read in runs of its tiles).
#[test]
fn an_array_twenty_times_the_budget_consolidates() {
    let per = 5_000;
    let ids = |t: u64| -> Vec<i32> { (0..per).map(|i| i * 7 + t as i32).collect() };
    let floats = |name: &str, v: &[f64]| {
        let mut b = FieldBuffer::new(name, Datatype::Float64, 1, false);
        b.data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        b
    };
    let int_dim = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("d", 0i32..=999_999).tile_extent(1000i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .capacity(32)
        .build()
        .unwrap();
    merges_within_budget(&int_dim, &|t| {
        let d = ids(t);
        let v: Vec<i32> = d.iter().map(|x| x ^ 0x55).collect();
        vec![ints("d", &d), ints("a", &v)]
    });
    let float_string = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("f", 0f64..=1e6).tile_extent(1e4))
        .dimension(DimensionBuilder::string("s"))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .capacity(32)
        .build()
        .unwrap();
    merges_within_budget(&float_string, &|t| {
        let d = ids(t);
        let f: Vec<f64> = d.iter().map(|&x| f64::from(x) / 3.0).collect();
        let mut s = FieldBuffer::new("s", Datatype::StringAscii, u32::MAX, false);
        let mut offsets = Vec::new();
        for x in &d {
            offsets.push(s.data.len() as u64);
            s.data.extend_from_slice(format!("k{}", x % 97).as_bytes());
        }
        s.offsets = Some(offsets);
        vec![floats("f", &f), s, ints("a", &d)]
    });
    let hilbert = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", 0f64..=1000.0).tile_extent(100.0))
        .dimension(DimensionBuilder::range("y", 0f64..=1000.0).tile_extent(100.0))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .cell_order(tdb_format::Layout::Hilbert)
        .capacity(32)
        .build()
        .unwrap();
    merges_within_budget(&hilbert, &|t| {
        let d = ids(t);
        let x: Vec<f64> = d.iter().map(|&v| f64::from(v % 997)).collect();
        let y: Vec<f64> = d
            .iter()
            .map(|&v| f64::from(v / 997) * 25.0 + t as f64)
            .collect();
        vec![floats("x", &x), floats("y", &y), ints("a", &d)]
    });
}

/// Writes `cells(t)` at 1..=4 into a new array of `schema` (no coordinate
/// twice, `a` an INT32 last), consolidates it under a twentieth of its cells' bytes
/// and checks the inputs were read in batches within that, and that reads
/// answer as before.
fn merges_within_budget(schema: &ArraySchema, cells: &dyn Fn(u64) -> Vec<FieldBuffer>) {
    let store = tdb_storage::RecordingStorage::new(MemoryStorage::new());
    let a = tdb::Array::create_in(&store, "", schema, &[], OpenOptions::new().at(1)).unwrap();
    let (mut bytes, mut cell_num) = (0, 0);
    for t in 1..=4u64 {
        let fields = cells(t);
        bytes += fields.iter().map(|f| f.data.len() as u64).sum::<u64>();
        // The last field is `a`, an INT32.
        cell_num += fields.last().map_or(0, |f| f.data.len() as u64 / 4);
        a.write(WriteSpec::new(fields).at(t)).unwrap();
    }
    merge_within(&store, bytes / 20, cell_num, 20);
}

/// The same on TileDB's bytes: float and string dimensions (column-major
/// cells), and float dimensions in Hilbert order.
#[test]
fn tiledb_arrays_over_float_string_and_hilbert_dimensions_merge_within_budget() {
    for (case, cells) in [
        ("sparse_float_string_pieces", 800),
        ("sparse_hilbert_multi", 300),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let src = tdb_testdata::root().join(case).join("array");
        tdb_testdata::copy_dir(&src, tmp.path()).unwrap();
        let store = tdb_storage::RecordingStorage::new(tdb::LocalStorage::new(tmp.path()));
        // (Inputs of 21 and 11 kB: in a few batches, the pieces' later
        // tiles mostly answered from what the first ones read on.)
        merge_within(&store, 16 << 10, cells, 3);
    }
}

/// Consolidates the array at the root of `store` under `budget` (its
/// fragments holding `cell_num` cells) and checks the inputs were read in
/// at least `batches` batches within it, and that reads answer as before.
fn merge_within<S: tdb_storage::Storage>(
    store: &tdb_storage::RecordingStorage<S>,
    budget: u64,
    cell_num: u64,
    batches: usize,
) {
    let at = || seen_in(store);
    let before = at();
    let a = tdb::Array::open_in(store, "", OpenOptions::new()).unwrap();
    let inputs: Vec<String> = a.fragments().iter().map(|f| f.file.path.clone()).collect();
    store.take();
    let done = a
        .consolidate_fragments(&FragmentSelection::default(), budget)
        .unwrap()
        .pop()
        .unwrap();
    assert_eq!(done.written.cells, cell_num);
    // The inputs' tiles came in many batches, none larger than the budget
    // but for the bytes the reader reads on past what its pieces ask for
    // (kept outside the budget, a fixed 256 KiB at most, as its chunk
    // caches are; what the merge holds is pinned by `budget_peak`'s merges).
    let batches_read: Vec<u64> = store
        .take()
        .iter()
        .map(|r| {
            (r.ranges().iter())
                .filter(|(key, _, _)| {
                    !key.ends_with("__fragment_metadata.tdb")
                        && inputs.iter().any(|f| key.starts_with(f.as_str()))
                })
                .map(|(_, _, bytes)| bytes.unwrap_or(0))
                .sum::<u64>()
        })
        .filter(|&b| b > 0)
        .collect();
    let read = batches_read;
    assert!(read.len() >= batches, "{} batches", read.len());
    let most = read.iter().max().copied().unwrap_or(0);
    let read_on: u64 = 256 << 10;
    assert!(
        most <= budget + read_on,
        "a batch of {most} bytes under a budget of {budget}"
    );
    a.vacuum_fragments().unwrap();
    assert_eq!(at(), before);
}

/// Steps of at most two fragments: the first merges the first pair, the
/// second sees that merge in place of its inputs (TileDB's steps); reads
/// answer as before at every time.
#[test]
fn steps_merge_runs_and_see_earlier_steps() {
    let store = array();
    let at = || seen_in(&store);
    let before = at();
    let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    let mut pairs = FragmentSelection::default();
    pairs.steps = 2;
    pairs.max_frags = 2;
    pairs.min_frags = 2;
    let steps = a
        .consolidate_fragments(&pairs, tdb::DEFAULT_BUDGET)
        .unwrap();
    let spans: Vec<(usize, u64, u64)> = steps
        .iter()
        .map(|s| {
            (
                s.replaced.len(),
                s.written.fragment.t1,
                s.written.fragment.t2,
            )
        })
        .collect();
    // Sizes within 25% of each other (metadata files dominate these tiny
    // fragments): the earliest pair, then the merged pair with the third.
    assert_eq!(spans, [(2, 1, 2), (2, 1, 3)], "{steps:?}");
    assert_eq!(at(), before, "consolidated");
    a.vacuum_fragments().unwrap();
    assert_eq!(at(), before, "vacuumed");
    let names: Vec<String> = tdb::Array::open_in(&store, "", OpenOptions::new())
        .unwrap()
        .fragments()
        .iter()
        .map(|f| f.file.file_name()[..6].to_owned())
        .collect();
    assert_eq!(names, ["__1_3_", "__4_4_"]);
}

/// An explicit list merges exactly those fragments, even apart in time;
/// a name that is not there refuses the whole list.
#[test]
fn a_list_merges_exactly_its_fragments() {
    let store = array();
    let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    let names: Vec<String> = a
        .fragments()
        .iter()
        .map(|f| f.file.file_name().to_owned())
        .collect();
    let missing = [
        names[0].as_str(),
        "__9_9_00000000000000000000000000000000_22",
    ];
    assert!(a
        .consolidate_fragment_list(&missing, &FragmentSelection::default(), tdb::DEFAULT_BUDGET)
        .is_err());
    assert!(a
        .consolidate_fragment_list(
            &[names[0].as_str()],
            &FragmentSelection::default(),
            tdb::DEFAULT_BUDGET
        )
        .unwrap()
        .is_none());
    let with_dir = format!("__fragments/{}", names[3]);
    let done = a
        .consolidate_fragment_list(
            &[names[1].as_str(), &with_dir],
            &FragmentSelection::default(),
            tdb::DEFAULT_BUDGET,
        )
        .unwrap()
        .unwrap();
    assert_eq!(done.replaced.len(), 2);
    assert_eq!((done.written.fragment.t1, done.written.fragment.t2), (2, 4));
    a.vacuum_fragments().unwrap();
    let left: Vec<String> = tdb::Array::open_in(&store, "", OpenOptions::new())
        .unwrap()
        .fragments()
        .iter()
        .map(|f| f.file.file_name()[..6].to_owned())
        .collect();
    assert_eq!(left, ["__1_1_", "__2_4_", "__3_3_"]);
}

/// A dense merge whose tile mixes INT64's fill value (its minimum) with
/// small values cannot be written under DOUBLE_DELTA: a delta passes
/// int64. TileDB 2.30 refuses such a merge too ("Cannot compress with
/// DoubleDelta", seen on random case 7018 in the interop pass). The
/// refusal is a typed error naming the filter, and the array is left as
/// it was: no file, no directory of the merge stays behind.
#[test]
fn a_merge_a_filter_refuses_leaves_the_array_as_it_was() {
    use tdb_filters::Filter;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("arr");
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("d", 0i32..=19).tile_extent(10i32))
        .attribute(
            AttributeBuilder::new("a", Datatype::Int64)
                .nullable(true)
                .filters([Filter::DoubleDelta {
                    level: -1,
                    reinterpret: None,
                }]),
        )
        .build()
        .unwrap();
    let array = tdb::Array::create(&path, &schema).unwrap();
    // The merge's first tile (cells 0-9, all written) encodes; its second
    // (fill around cells 12-15) does not, once the first went out.
    for (t, lo, hi) in [(1u64, 0, 9), (2, 12, 15)] {
        let mut a = FieldBuffer::new("a", Datatype::Int64, 1, true);
        let n = (hi - lo + 1) as usize;
        a.data = (0..n as i64).flat_map(|v| v.to_le_bytes()).collect();
        a.validity = Some(vec![1; n].into());
        let mut sub = tdb::Subarray::new(1);
        sub.add_range(0, range(lo, hi));
        array
            .write(WriteSpec::new(vec![a]).with_subarray(sub).at(t))
            .unwrap();
    }
    let files = |dir: &std::path::Path| -> Vec<String> {
        let mut all = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                all.push(p.strip_prefix(dir).unwrap().display().to_string());
                if p.is_dir() {
                    stack.push(p);
                }
            }
        }
        all.sort();
        all
    };
    let before = files(&path);
    let array = tdb::Array::open(&path).unwrap();
    let err = array
        .consolidate_fragments(&FragmentSelection::default(), tdb::DEFAULT_BUDGET)
        .unwrap_err();
    let said = chain(&err);
    assert!(
        said.contains("DOUBLE_DELTA") && said.contains("int64"),
        "{said}"
    );
    assert_eq!(files(&path), before);
    // And the array reads as before.
    let cells = tdb::Array::open(&path)
        .unwrap()
        .read_all(ReadSpec::new(["a"]).with_subarray({
            let mut s = tdb::Subarray::new(1);
            s.add_range(0, range(0, 15));
            s
        }))
        .unwrap();
    assert_eq!(cells.num_cells, 16);
}

/// A write that stopped before its commit leaves a fragment directory no
/// read sees; `vacuum_uncommitted` removes it once it is older than the
/// grace period, and nothing committed.
#[test]
fn uncommitted_fragments_past_the_grace_period_are_removed() {
    use tdb_storage::{ListableStorage, WritableStorage};
    let store = MemoryStorage::new();
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("d", 0i32..=99).tile_extent(10i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap();
    let a = tdb::Array::create_in(&store, "", &schema, &[], OpenOptions::new()).unwrap();
    for t in [1u64, 2] {
        let spec = WriteSpec::new(vec![ints("d", &[t as i32]), ints("a", &[t as i32])]);
        a.write(spec.at(t)).unwrap();
    }
    // The second write's commit never happened.
    let commits = store.list_dir("__commits").unwrap().files;
    let second = commits.iter().find(|f| f.key.contains("__2_2_")).unwrap();
    store.delete(&second.key).unwrap();
    let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    assert_eq!(a.read_all(ReadSpec::new(["a"])).unwrap().num_cells, 1);
    let dirs = || store.list_dir("__fragments").unwrap().dirs;
    assert_eq!(dirs().len(), 2);
    // Written at 2 ms after the epoch: within a grace of forever, kept.
    let forever = std::time::Duration::from_secs(u64::MAX / 1000);
    assert!(a.vacuum_uncommitted(forever).unwrap().is_empty());
    assert_eq!(dirs().len(), 2);
    let gone = a
        .vacuum_uncommitted(std::time::Duration::from_secs(3600))
        .unwrap();
    assert_eq!(gone.len(), 1, "{gone:?}");
    assert!(gone[0].contains("__2_2_"));
    assert_eq!(dirs().len(), 1);
    let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    assert_eq!(a.read_all(ReadSpec::new(["a"])).unwrap().num_cells, 1);
}

/// A local write killed mid-file leaves its file in progress in the
/// array's (or group's) directory, under a name no listing shows:
/// `vacuum_uncommitted` removes it too once older than the grace period.
#[test]
fn files_a_killed_write_left_in_progress_are_removed_past_the_grace_period() {
    let tmp = tempfile::tempdir().unwrap();
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("d", 0i32..=99).tile_extent(10i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap();
    let store = tdb::LocalStorage::new(tmp.path());
    let a = tdb::Array::create_in(&store, "", &schema, &[], OpenOptions::new()).unwrap();
    a.write(WriteSpec::new(vec![ints("d", &[1]), ints("a", &[1])]))
        .unwrap();
    // What a process killed writing a file leaves (its name as tdb's).
    let left = tmp.path().join(".tdb-tmp-4242-0");
    let f = std::fs::File::create(&left).unwrap();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    f.set_modified(hour_ago).unwrap();
    let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    assert!(a
        .vacuum_uncommitted(std::time::Duration::from_secs(7200))
        .unwrap()
        .is_empty());
    assert!(left.exists());
    assert_eq!(
        a.vacuum_uncommitted(std::time::Duration::from_secs(60))
            .unwrap(),
        [".tdb-tmp-4242-0"]
    );
    assert!(!left.exists());
    assert_eq!(a.read_all(ReadSpec::new(["a"])).unwrap().num_cells, 1);
    // A group's killed write leaves its file in the group's directory.
    let g = tdb::Group::create_in(&store, "g", OpenOptions::new()).unwrap();
    let left = tmp.path().join("g/.tdb-tmp-4242-1");
    let f = std::fs::File::create(&left).unwrap();
    f.set_modified(hour_ago).unwrap();
    let grace = std::time::Duration::from_secs(60);
    assert_eq!(g.vacuum_uncommitted(grace).unwrap(), [".tdb-tmp-4242-1"]);
    assert!(!left.exists());
    assert!(g.vacuum_uncommitted(grace).unwrap().is_empty());
}

#[test]
fn a_read_whose_fragments_were_vacuumed_since_the_open_loads_the_array_again() {
    let store = array();
    let fields = |a: &tdb::Array<_>| ReadSpec::new(fields(a));
    // Opened now and at 3, before anything is merged.
    let now = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    let at3 = tdb::Array::open_in(&store, "", OpenOptions::new().at(3)).unwrap();
    let want_now = now.read_all(fields(&now)).unwrap().fields;
    let want_at3 = at3.read_all(fields(&at3)).unwrap().fields;
    // Another process merges and vacuums the fragments both opened...
    let other = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    other
        .consolidate_fragments(&FragmentSelection::default(), tdb::DEFAULT_BUDGET)
        .unwrap();
    assert_eq!(other.vacuum_fragments().unwrap(), 4);
    // ... and writes a newer one (stamped now, after the opens), which the
    // reads opened before must not see.
    std::thread::sleep(std::time::Duration::from_millis(5));
    other
        .write(WriteSpec::new(vec![ints("d", &[50]), ints("a", &[-1])]))
        .unwrap();
    assert_eq!(now.read_all(fields(&now)).unwrap().fields, want_now);
    assert_eq!(at3.read_all(fields(&at3)).unwrap().fields, want_at3);
}
