//! Shared by the array metadata and group tests: metadata and members as
//! the real open path resolves them, every file of a kind in the corpus, and
//! expected.json's value encoding.

#![allow(dead_code)]

use serde_json::{json, Value};
use tdb_format::names;
use tdb_format::TimestampedName;
use tdb_fragment::{ArrayMetadata, GroupMembers, MetadataValue, OpenArray, OpenGroup, TimeWindow};
use tdb_storage::LocalStorage;
use tdb_testdata::Object;

/// `(name, bytes)` of the timestamped files of `dir` (`__meta`, `__group`)
/// of `obj` that no `.vac` there lists, optionally only those ending by
/// `at`: raw files for parser tests (visibility is `resolve`'s job).
pub fn select(obj: &Object, dir: &str, at: Option<u64>) -> Vec<(TimestampedName, Vec<u8>)> {
    let prefix = format!("{dir}/");
    let in_dir: Vec<&str> = obj
        .files
        .iter()
        .filter_map(|f| f.strip_prefix(&prefix))
        .filter(|f| !f.contains('/'))
        .collect();
    let vacuumed: Vec<String> = in_dir
        .iter()
        .filter(|f| f.ends_with(".vac"))
        .flat_map(|f| {
            let text = String::from_utf8(obj.read(&format!("{prefix}{f}"))).unwrap();
            text.lines()
                .filter_map(|l| l.trim_end_matches('/').rsplit('/').next())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    in_dir
        .iter()
        .filter(|f| !f.contains('.') && !vacuumed.iter().any(|v| v == *f))
        .map(|f| {
            let name = TimestampedName::parse(f)
                .unwrap_or_else(|e| panic!("{}: {dir}/{f}: {e}", obj.case));
            (name, obj.read(&format!("{prefix}{f}")))
        })
        .filter(|(n, _)| at.is_none_or(|t| n.t2 <= t))
        .collect()
}

/// The files as the API takes them.
pub fn borrowed(files: &[(TimestampedName, Vec<u8>)]) -> Vec<(TimestampedName, &[u8])> {
    files
        .iter()
        .map(|(n, b)| (n.clone(), b.as_slice()))
        .collect()
}

// --------------------------- expected.json side ---------------------------

/// A value in FORMAT.md's encoding, as `tdb` prints it.
pub fn value_json(v: &MetadataValue) -> Value {
    tdb_cli::values::metadata_value(v)
}

/// Equality that tells `-0.0` from `0.0`.
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x == y
            } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                x == y
            } else {
                x.as_f64().map(f64::to_bits) == y.as_f64().map(f64::to_bits)
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        _ => a == b,
    }
}

/// The resolved metadata as expected.json lists it.
pub fn metadata_json(md: &ArrayMetadata) -> Value {
    Value::Array(
        md.iter()
            .map(|(k, v)| {
                json!({
                    "key": k,
                    "datatype": v.datatype.name(),
                    "value_num": v.reported_value_num(),
                    "value": value_json(v),
                })
            })
            .collect(),
    )
}

/// Panics with the first difference between resolved and expected metadata.
pub fn assert_metadata(what: &str, got: &ArrayMetadata, expected: &Value) {
    let got = metadata_json(got);
    let (g, e) = (got.as_array().unwrap(), expected.as_array().unwrap());
    let keys = |v: &Vec<Value>| v.iter().map(|x| x["key"].clone()).collect::<Vec<_>>();
    assert_eq!(keys(g), keys(e), "{what}: keys (in order)");
    for (g, e) in g.iter().zip(e) {
        for field in ["datatype", "value_num", "value"] {
            assert!(
                same(&g[field], &e[field]),
                "{what}: {}: {field}: got {}, expected {}",
                e["key"],
                g[field],
                e[field]
            );
        }
    }
}

/// The metadata `obj` (array or group) shows when opened at `at` (None:
/// now), through the real directory and storage: `OpenArray`/`OpenGroup`.
pub fn resolve(obj: &Object, at: Option<u64>) -> ArrayMetadata {
    let storage = LocalStorage::new(&obj.dir);
    let window = TimeWindow::until(at.unwrap_or(u64::MAX));
    let key = obj.key.as_ref();
    let is_group = obj
        .files
        .iter()
        .any(|f| f == names::GROUP_FILE || f.starts_with(names::GROUP_DETAILS_DIR));
    let md = if is_group {
        OpenGroup::open(&storage, "", window, key).map(|g| g.metadata)
    } else {
        OpenArray::open(&storage, "", window, key).and_then(|a| a.metadata(&storage))
    };
    md.unwrap_or_else(|e| panic!("{}: {e}", obj.case))
}

/// The members of the group `obj` in force now, through `OpenGroup`.
pub fn members(obj: &Object) -> GroupMembers {
    let storage = LocalStorage::new(&obj.dir);
    OpenGroup::open(&storage, "", TimeWindow::ALL, obj.key.as_ref())
        .unwrap_or_else(|e| panic!("{}: {e}", obj.case))
        .members
}

/// Every (object, file name, bytes) of a `dir/` in the corpus.
pub fn all_files(dir: &str) -> Vec<(Object, String, Vec<u8>)> {
    let mut out = Vec::new();
    for obj in tdb_testdata::objects() {
        for (name, bytes) in select(&obj, dir, None) {
            out.push((obj.clone(), format!("{dir}/{name}"), bytes));
        }
    }
    out
}
