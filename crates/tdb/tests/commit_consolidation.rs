//! Commit consolidation and vacuuming: fragments, deletes and time travel
//! read the same before and after each, and after either is stopped at any
//! write or delete; vacuuming TileDB's `consolidated_commits` leaves what
//! TileDB's own vacuum left (`consolidated_commits_vacuumed`).

use tdb::{Datatype, OpenOptions, ReadSpec, WriteSpec};
use tdb_format::ArrayType;
use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};
use tdb_storage::{FaultyStorage, ListableStorage, MemoryStorage};

use crate::common;
use common::*;

type Store = FaultyStorage<MemoryStorage>;

/// Fragments at 1, 2, 3, a delete at 4, a fragment at 5.
fn array() -> Store {
    let store = FaultyStorage::new(MemoryStorage::new());
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("d", 0i32..=99).tile_extent(10i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap();
    let a = tdb::Array::create_in(&store, "", &schema, &[], OpenOptions::new().at(1)).unwrap();
    for t in [1, 2, 3, 5] {
        let d: Vec<i32> = (0..5).map(|i| i * 7 + t as i32).collect();
        let v: Vec<i32> = d.iter().map(|x| x * 10).collect();
        a.write(WriteSpec::new(vec![ints("d", &d), ints("a", &v)]).at(t))
            .unwrap();
    }
    tdb::Array::open_in(&store, "", OpenOptions::new().at(4))
        .unwrap()
        .delete("a > 150")
        .unwrap();
    store
}

/// Fragments and cells seen at 2, 4 and now.
fn seen(store: &Store) -> Vec<String> {
    [Some(2), Some(4), None]
        .into_iter()
        .map(|t| {
            let options = t.map_or(OpenOptions::new(), |t| OpenOptions::new().at(t));
            let a = tdb::Array::open_in(store, "", options).unwrap();
            // Timestamps, not names: arrays made alike get other uuids.
            let frags: Vec<(u64, u64)> = a
                .fragments()
                .iter()
                .map(|f| f.file.name.timestamp_range())
                .collect();
            let got = a
                .read_all(ReadSpec::new(vec!["d".to_owned(), "a".to_owned()]))
                .unwrap();
            format!("{frags:?} {:?}", got.fields)
        })
        .collect()
}

fn commit_files(store: &Store) -> Vec<String> {
    store
        .inner()
        .list_dir("__commits")
        .unwrap()
        .files
        .iter()
        .map(|f| f.name().to_owned())
        .collect()
}

fn ends(files: &[String], ext: &str) -> usize {
    files.iter().filter(|f| f.ends_with(ext)).count()
}

#[test]
fn consolidated_commits_read_the_same_before_and_after_vacuuming() {
    let store = array();
    let before = seen(&store);
    let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    let con = a.consolidate_commits().unwrap().unwrap();
    assert!(
        con.starts_with("__commits/__1_5_") && con.ends_with("_22.con"),
        "{con}"
    );
    assert_eq!(seen(&store), before);
    assert_eq!(a.vacuum_commits().unwrap(), 5, "four .wrt and a .del");
    assert_eq!(commit_files(&store), [con.trim_start_matches("__commits/")]);
    assert_eq!(seen(&store), before, "the delete lives on inside the .con");
    // A later write, consolidated again: one .con lists everything, so the
    // older one goes too.
    let d = ints("d", &[50]);
    a.write(WriteSpec::new(vec![d, ints("a", &[1])]).at(6))
        .unwrap();
    let after_write = seen(&store);
    a.consolidate_commits().unwrap().unwrap();
    assert_eq!(
        a.vacuum_commits().unwrap(),
        2,
        "the new .wrt and the old .con"
    );
    let files = commit_files(&store);
    assert_eq!((files.len(), ends(&files, ".con")), (1, 1), "{files:?}");
    assert_eq!(seen(&store), after_write);
}

#[test]
fn consolidation_or_vacuum_stopped_anywhere_reads_as_before() {
    let before = seen(&array());
    let store = array();
    let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    store.fail_from(1);
    assert!(a.consolidate_commits().is_err());
    store.fail_from(u64::MAX);
    assert_eq!(seen(&store), before);
    for n in 1..=5 {
        let store = array();
        let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
        a.consolidate_commits().unwrap();
        store.fail_from(n);
        assert!(a.vacuum_commits().is_err(), "delete {n}");
        store.fail_from(u64::MAX);
        assert_eq!(seen(&store), before, "stopped at delete {n}");
        a.vacuum_commits().unwrap();
        assert_eq!(seen(&store), before);
    }
}

#[test]
fn vacuuming_tiledbs_consolidated_commits_leaves_what_tiledb_left() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tdb_testdata::root().join("consolidated_commits/array");
    tdb_testdata::copy_dir(&src, tmp.path()).unwrap();
    let a = tdb::Array::open(tmp.path()).unwrap();
    let cells = |a: &tdb::Array| {
        a.read_all(ReadSpec::new(vec!["a".to_owned()]))
            .unwrap()
            .fields
    };
    let before = cells(&a);
    assert_eq!(a.vacuum_commits().unwrap(), 4);
    let theirs = tdb_testdata::root().join("consolidated_commits_vacuumed/array");
    assert_eq!(
        tdb_testdata::commit_kinds(tmp.path()),
        tdb_testdata::commit_kinds(&theirs)
    );
    assert_eq!(cells(&tdb::Array::open(tmp.path()).unwrap()), before);
}
