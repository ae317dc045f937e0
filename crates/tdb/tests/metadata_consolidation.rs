//! Array metadata consolidation and vacuuming: the metadata reads the same
//! at every time before vacuuming, and by TileDB's rule after (windows
//! ending inside the consolidated span see nothing): for the writes of
//! `consolidated_array_meta`, what TileDB saw after its own consolidation;
//! stopped at any write or delete, the array reads as before.

use tdb::{Datatype, MetadataEntry, MetadataValue, OpenOptions};
use tdb_format::ArrayType;
use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};
use tdb_storage::{FaultyStorage, ListableStorage, MemoryStorage};

use crate::common;
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
fn consolidated_metadata_reads_the_same_before_vacuum_and_by_tiledbs_rule_after() {
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

/// The writes of `consolidated_array_meta` (xtask/fixtures/gen_current.py),
/// consolidated and vacuumed by tdb, read at 1, 2 and 3 as TileDB read
/// its own consolidation of them (the case's `metadata_at`).
#[test]
fn tdbs_consolidation_reads_as_tiledbs_consolidated_array_meta() {
    let case = tdb_testdata::root().join("consolidated_array_meta");
    let tmp = tempfile::tempdir().unwrap();
    tdb_testdata::copy_dir(&case.join("array"), tmp.path()).unwrap();
    std::fs::remove_dir_all(tmp.path().join("__meta")).unwrap();
    let at = |t: u64| tdb::Array::open_with(tmp.path(), OpenOptions::new().at(t)).unwrap();
    for t in 1..=3u64 {
        let text = format!("v{t}");
        let shared =
            MetadataValue::new(Datatype::StringUtf8, text.len() as u32, text.into_bytes()).unwrap();
        at(t)
            .write_metadata([
                put_int(&format!("k{t}"), t as i64),
                MetadataEntry::Put {
                    key: "shared".into(),
                    value: shared,
                },
            ])
            .unwrap();
    }
    let a = at(u64::MAX);
    a.consolidate_metadata().unwrap().unwrap();
    a.vacuum_metadata().unwrap();
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(case.join("expected.json")).unwrap()).unwrap();
    for want in expected["metadata_at"].as_array().unwrap() {
        let t = want["timestamp"].as_u64().unwrap();
        let want: Vec<(String, String)> = want["metadata"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["key"].as_str().unwrap().to_owned(),
                    m["value"].to_string(),
                )
            })
            .collect();
        let got: Vec<(String, String)> = at(t)
            .metadata()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                let value = match v.datatype {
                    Datatype::Int64 => {
                        format!("[{}]", i64::from_le_bytes(v.bytes[..8].try_into().unwrap()))
                    }
                    _ => format!("{:?}", String::from_utf8_lossy(&v.bytes)),
                };
                (k.to_owned(), value)
            })
            .collect();
        assert_eq!(got, want, "at {t}");
    }
}
