//! Array metadata consolidation and vacuuming: the metadata reads the same
//! at every time before vacuuming, and as TileDB's consolidated fixture
//! reads after (windows ending inside the consolidated span see nothing);
//! stopped at any write or delete, the array reads as before.

use tdb::{Datatype, MetadataEntry, MetadataValue, OpenOptions};
use tdb_format::ArrayType;
use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};
use tdb_storage::{FaultyStorage, ListableStorage, MemoryStorage};

mod common;
use common::*;

type Store = FaultyStorage<MemoryStorage>;

/// An array whose metadata was changed at 2, 3 and 4.
fn array() -> Store {
    let store = FaultyStorage::new(MemoryStorage::new());
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("d", 0i32..=9).tile_extent(5i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap();
    tdb::Array::create_in(&store, "", &schema, &[], OpenOptions::new().at(1)).unwrap();
    let at = |t: u64| tdb::Array::open_in(&store, "", OpenOptions::new().at(t)).unwrap();
    at(2)
        .write_metadata([put_int("k1", 1), put_int("shared", 10)])
        .unwrap();
    at(3)
        .write_metadata([
            put_int("k2", 2),
            MetadataEntry::Delete {
                key: "shared".into(),
            },
        ])
        .unwrap();
    at(4)
        .write_metadata([put_int("k3", 3), put_int("shared", 30)])
        .unwrap();
    store
}

/// The metadata seen at each of these times, and now.
fn seen(store: &Store) -> Vec<Vec<(String, MetadataValue)>> {
    [Some(1), Some(2), Some(3), Some(4), None]
        .into_iter()
        .map(|t| {
            let options = match t {
                Some(t) => OpenOptions::new().at(t),
                None => OpenOptions::new(),
            };
            let a = tdb::Array::open_in(store, "", options).unwrap();
            let md = a.metadata().unwrap();
            md.iter().map(|(k, v)| (k.to_owned(), v.clone())).collect()
        })
        .collect()
}

fn meta_files(store: &Store) -> usize {
    store.inner().list_prefix("__meta").unwrap().len()
}

#[test]
fn consolidated_metadata_reads_the_same_and_vacuums_as_tiledb() {
    let store = array();
    let before = seen(&store);
    assert_eq!(before[4].len(), 4, "{:?}", before[4]);
    let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    let done = a.consolidate_metadata().unwrap().unwrap();
    assert_eq!(done.replaced.len(), 3);
    let file = done.file.unwrap();
    assert!(file.starts_with("__meta/__2_4_"), "{file}");
    assert_eq!(seen(&store), before, "before vacuuming");
    assert_eq!(meta_files(&store), 5);
    assert_eq!(a.vacuum_metadata().unwrap(), 4);
    assert_eq!(meta_files(&store), 1);
    // TileDB's consolidated_array_meta: windows that end inside the
    // consolidated span see no metadata once the old files are gone.
    let after = seen(&store);
    assert_eq!(after[4], before[4]);
    assert_eq!(after[3], before[3]);
    assert!(after[1].is_empty() && after[2].is_empty(), "{after:?}");
    // One file left: nothing more to consolidate or vacuum.
    let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    assert_eq!(a.consolidate_metadata().unwrap(), None);
    assert_eq!(a.vacuum_metadata().unwrap(), 0);
}

#[test]
fn consolidation_or_vacuum_stopped_at_any_write_reads_as_before() {
    let store = array();
    let before = seen(&store);
    store.fail_from(u64::MAX);
    let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
    a.consolidate_metadata().unwrap();
    let writes = store.mutations();
    assert_eq!(writes, 2, "the file, then the vacuum list");
    for n in 1..=writes {
        let store = array();
        store.fail_from(n);
        let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
        assert!(a.consolidate_metadata().is_err(), "write {n}");
        assert_eq!(seen(&store), before, "stopped at write {n}");
    }
    // Vacuum stopped at each of its deletes: the latest metadata stays.
    for n in 1..=4 {
        let store = array();
        let a = tdb::Array::open_in(&store, "", OpenOptions::new()).unwrap();
        a.consolidate_metadata().unwrap();
        store.fail_from(n);
        assert!(a.vacuum_metadata().is_err(), "delete {n}");
        store.fail_from(u64::MAX);
        let now = seen(&store);
        assert_eq!(now[4], before[4], "stopped at delete {n}");
        // Vacuuming again finishes the job.
        a.vacuum_metadata().unwrap();
        assert_eq!(meta_files(&store), 1);
        assert_eq!(seen(&store)[4], before[4]);
    }
}
