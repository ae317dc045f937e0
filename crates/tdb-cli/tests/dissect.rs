//! `tdb dissect`: a listing of one file of each kind (pinned), the JSON
//! shapes for a file and for an array, and a path in no array.

use crate::common::{ok, tdb};
use std::collections::BTreeMap;

/// The smallest file of each kind in the corpus (by size, then case and
/// path), among the releases' own arrays (`legacy/`) and among the
/// current one's: each one's listing, pinned.
#[test]
fn one_file_of_each_kind() {
    let mut smallest: BTreeMap<String, (u64, String, String, tdb_testdata::Object)> =
        BTreeMap::new();
    for o in tdb_testdata::objects() {
        let era = if o.case.starts_with("legacy/") {
            "-legacy"
        } else {
            ""
        };
        // Label arrays' files are dissected as their own array's; they
        // are in the corpus test.
        for f in o.files.iter().filter(|f| !f.starts_with("__labels/")) {
            let class = tdb_format::classify(f);
            // The footer of the current format as well as the oldest.
            let current = matches!(&class, tdb_format::ObjectFile::FragmentMetadata { fragment, .. }
                if fragment.implied_format_version() == 22);
            let kind = format!(
                "{}{era}{}",
                class.label(),
                if current { "-v22" } else { "" }
            );
            let size = std::fs::metadata(o.dir.join(f)).unwrap().len();
            let candidate = (size, o.case.clone(), f.clone());
            let better = smallest
                .get(&kind)
                .is_none_or(|(s, c, p, _)| candidate < (*s, c.clone(), p.clone()));
            if better && size > 0 {
                smallest.insert(kind, (size, o.case.clone(), f.clone(), o.clone()));
            }
        }
    }
    assert!(smallest.len() >= 20, "{:?}", smallest.keys());
    for (kind, (_, case, file, o)) in &smallest {
        let storage = tdb_storage::LocalStorage::new(&o.dir);
        let mut listing = format!("{case}\n");
        tdb_fragment::dissect(&storage, "", o.key.as_ref(), Some(file), &mut |d| {
            assert_eq!(d.error, None, "{case} {file}");
            listing.push_str(&tdb_cli::dissect::text(&d));
        })
        .unwrap();
        assert!(!listing.contains("unexplained"), "{listing}");
        insta::assert_snapshot!(format!("dissect_{kind}"), listing);
    }
}

/// Each filter of a chain explains its own metadata: the smallest data
/// file of the filter-chain fixture, pinned.
#[test]
fn a_filter_chain_explains_its_metadata() {
    let o = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == "filter_chains_int")
        .unwrap();
    let file = o
        .files
        .iter()
        .filter(|f| f.ends_with(".tdb") && !f.ends_with("__fragment_metadata.tdb"))
        .min_by_key(|f| {
            (
                std::fs::metadata(o.dir.join(f)).unwrap().len(),
                (*f).clone(),
            )
        })
        .unwrap();
    let storage = tdb_storage::LocalStorage::new(&o.dir);
    let mut listing = String::new();
    tdb_fragment::dissect(&storage, "", None, Some(file), &mut |d| {
        listing.push_str(&tdb_cli::dissect::text(&d));
    })
    .unwrap();
    assert!(!listing.contains("unexplained") && !listing.contains("chunk metadata ="));
    insta::assert_snapshot!(listing);
}

#[test]
fn json_of_a_file_and_of_an_array() {
    let dir = tdb_testdata::root().join("attr_nullable/array");
    let schema = std::fs::read_dir(dir.join("__schema"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_file())
        .unwrap();
    let out = ok(&tdb(&[
        "dissect",
        schema.to_str().unwrap(),
        "--format",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let size = std::fs::metadata(&schema).unwrap().len();
    assert_eq!(v["size"], size);
    assert_eq!(v["kind"], "schema");
    assert!(v["file"].as_str().unwrap().starts_with("__schema/"));
    assert_eq!(v["unexplained"], serde_json::json!([]));
    // The fields tile the file: each starts where the last ended.
    let mut at = 0;
    for f in v["fields"].as_array().unwrap() {
        assert_eq!(f["offset"], at, "{f}");
        at += f["length"].as_u64().unwrap();
        for key in ["path", "type", "value"] {
            assert!(f.get(key).is_some(), "{f}");
        }
    }
    assert_eq!(at, size);
    let decoded = &v["decoded"][0];
    assert_eq!(decoded["what"], "generic tile contents");
    assert!(decoded["fields"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["path"] == "attributes[0]/name" && f["type"] == "bytes"));

    let out = ok(&tdb(&[
        "dissect",
        dir.to_str().unwrap(),
        "--format",
        "json",
    ]));
    let all: serde_json::Value = serde_json::from_str(&out).unwrap();
    let files = all.as_array().unwrap();
    let on_disk = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.dir == dir)
        .unwrap()
        .files
        .len();
    assert_eq!(files.len(), on_disk);
    assert!(files
        .iter()
        .all(|f| f["unexplained"] == serde_json::json!([])));
    assert!(files.iter().any(|f| f["kind"] == "data-validity"));
}

#[test]
fn a_path_in_no_array_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("x.bin");
    std::fs::write(&f, b"abc").unwrap();
    let out = tdb(&["dissect", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not in a TileDB array or group"), "{err}");
}
