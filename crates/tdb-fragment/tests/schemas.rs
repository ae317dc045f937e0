//! Loading schemas from storage: TileDB's listing order, the legacy file,
//! encrypted arrays, errors that name the file, and the requests it makes.

use bytes::Bytes;
use tdb_fragment::{load_enumeration, load_schemas, FragmentError};
use tdb_schema::LEGACY_SCHEMA_NAME;
use tdb_storage::{LocalStorage, MemoryStorage, RecordingStorage, WritableStorage};
use tdb_testdata::Object;

fn object(case: &str) -> Object {
    tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == case && o.expected.is_some())
        .unwrap_or_else(|| panic!("no case {case}"))
}

/// A schema of the corpus written as a file, for hand-made arrays.
fn schema_bytes() -> Bytes {
    let o = object("schema_evolution");
    let h = load_schemas(&LocalStorage::new(&o.dir), "", None).unwrap();
    Bytes::from(h.entries()[0].schema.write_file("test", None).unwrap())
}

const U: &str = "0123456789abcdef0123456789abcdef";

fn names(h: &tdb_schema::SchemaHistory) -> Vec<&str> {
    h.entries().iter().map(|e| e.name.as_str()).collect()
}

#[test]
fn encrypted_array_needs_its_key() {
    let o = object("encrypted_aes256");
    assert!(o.key.is_some());
    let storage = LocalStorage::new(&o.dir);
    let h = load_schemas(&storage, "", o.key.as_ref()).unwrap();
    assert_eq!(h.entries().len(), 1);
    let err = load_schemas(&storage, "", None).unwrap_err();
    assert!(err.to_string().starts_with("__schema/"), "{err}");
}

#[test]
fn order_is_tiledbs_listing_order() {
    let bytes = schema_bytes();
    let m = MemoryStorage::new();
    for name in [format!("__9_9_{U}"), format!("__10_10_{U}")] {
        m.write(&format!("arr/__schema/{name}"), bytes.clone())
            .unwrap();
    }
    let enumeration = format!("arr/__schema/__enumerations/__{U}_0");
    m.write(&enumeration, Bytes::from_static(b"x")).unwrap();
    let h = load_schemas(&m, "arr", None).unwrap();
    // By name bytes, as TileDB lists: `__10_10` sorts before `__9_9`.
    assert_eq!(names(&h), [format!("__10_10_{U}"), format!("__9_9_{U}")]);
    // So, like TileDB, the last listed schema in force wins ...
    assert_eq!(h.at(10).name, format!("__9_9_{U}"));
    // ... and before every schema the first listed is used.
    assert_eq!(h.at(5).name, format!("__10_10_{U}"));

    m.write(&format!("arr/{LEGACY_SCHEMA_NAME}"), bytes)
        .unwrap();
    let h = load_schemas(&m, "arr", None).unwrap();
    assert_eq!(h.entries()[0].name, LEGACY_SCHEMA_NAME);
    assert_eq!(h.at(5).name, LEGACY_SCHEMA_NAME, "legacy holds from time 0");
    assert_eq!(h.at(9).name, format!("__9_9_{U}"));
}

#[test]
fn bad_input_is_an_error_naming_the_file() {
    let m = MemoryStorage::new();
    let err = load_schemas(&m, "", None).unwrap_err();
    assert!(matches!(err, FragmentError::Missing { .. }), "{err}");
    assert_eq!(err.to_string(), ".: missing array schema");

    // A file of `__schema/` whose name is not timestamped is no schema:
    // TileDB's listing rules ignore it.
    let bytes = schema_bytes();
    m.write("__schema/not_a_name", bytes.clone()).unwrap();
    let err = load_schemas(&m, "", None).unwrap_err();
    assert!(matches!(err, FragmentError::Missing { .. }), "{err}");

    let m = MemoryStorage::new();
    let half = bytes.slice(..bytes.len() / 2);
    m.write(&format!("__schema/__1_1_{U}"), half).unwrap();
    let err = load_schemas(&m, "", None).unwrap_err();
    let file = format!("__schema/__1_1_{U}:");
    assert!(err.to_string().starts_with(&file), "{err}");

    let err = load_enumeration(&m, "", "missing", None).unwrap_err();
    assert!(matches!(err, FragmentError::Missing { .. }), "{err}");
}

/// Two listings and one batched read, whatever the number of schemas.
#[test]
fn io_trace_of_loading_an_evolved_array() {
    let o = object("schema_evolution");
    let storage = RecordingStorage::new(LocalStorage::new(&o.dir));
    let h = load_schemas(&storage, "", None).unwrap();
    assert_eq!(h.entries().len(), 3);
    insta::assert_snapshot!(storage.trace());
}
