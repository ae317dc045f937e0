//! `tdb schema` on every array real TileDB wrote (all format versions): the
//! JSON summary equals what TileDB reported (`expected.json`), the text dump
//! is pinned by snapshots, `--at` picks the schema each fragment names, and
//! keys are demanded and checked.

use serde_json::Value;
use tdb_cli::error_report;
use tdb_cli::schema::{load, summary};
use tdb_storage::LocalStorage;

use crate::common;
use common::tdb;

fn arrays() -> Vec<tdb_testdata::Object> {
    let arrays: Vec<_> = tdb_testdata::objects()
        .into_iter()
        .filter(|o| o.expected.as_ref().is_some_and(|e| e["kind"] != "group"))
        .collect();
    assert!(arrays.len() > 180, "only {} arrays", arrays.len());
    arrays
}

/// The top-level keys of summary `want` where `ours` differs, one line each.
fn differences(ours: &Value, want: &Value) -> String {
    let keys = want.as_object().unwrap().keys();
    keys.filter(|k| ours[k.as_str()] != want[k.as_str()])
        .map(|k| {
            format!(
                "  {k}: ours {} wanted {}",
                ours[k.as_str()],
                want[k.as_str()]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn summaries_match_what_tiledb_reported() {
    let mut failures = Vec::new();
    let arrays = arrays();
    for object in &arrays {
        let storage = LocalStorage::new(&object.dir);
        let (entry, enumerations) = load(&storage, None, object.key.as_ref())
            .unwrap_or_else(|e| panic!("{}: {e}", object.case));
        let ours = summary(&entry.schema, &enumerations).unwrap();
        let expected = &object.expected.as_ref().unwrap()["schema"];
        if &ours != expected {
            failures.push(format!(
                "{}:\n{}",
                object.case,
                differences(&ours, expected)
            ));
        }
    }
    assert!(arrays.len() > 180, "only {} arrays", arrays.len());
    assert!(
        failures.is_empty(),
        "{} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn text_dumps_are_pinned() {
    for object in arrays() {
        let storage = LocalStorage::new(&object.dir);
        let (entry, _) = load(&storage, None, object.key.as_ref()).unwrap();
        let name = format!("schema__{}", object.case.replace('/', "__"));
        insta::assert_snapshot!(name, entry.schema.to_string());
    }
}

/// Each fragment was written under the schema its metadata names; `--at`
/// its timestamp picks that schema.
#[test]
fn at_picks_the_schema_each_fragment_was_written_with() {
    let object = arrays()
        .into_iter()
        .find(|o| o.case == "schema_evolution")
        .unwrap();
    let storage = LocalStorage::new(&object.dir);
    let fragments = object.expected.as_ref().unwrap()["fragments"]
        .as_array()
        .unwrap()
        .clone();
    assert!(fragments.len() >= 3);
    for f in &fragments {
        let t = f["timestamp_range"][1].as_u64().unwrap();
        let (entry, _) = load(&storage, Some(t), None).unwrap();
        assert_eq!(
            Some(entry.name.as_str()),
            f["array_schema_name"].as_str(),
            "at {t}"
        );
    }
    // Before the first schema, TileDB falls back to the first.
    let (first, _) = load(&storage, Some(0), None).unwrap();
    let (latest, _) = load(&storage, None, None).unwrap();
    assert_eq!(first.name, load(&storage, Some(1), None).unwrap().0.name);
    assert_ne!(latest.schema, first.schema);
}

#[test]
fn encrypted_arrays_need_the_right_key() {
    let object = arrays().into_iter().find(|o| o.key.is_some()).unwrap();
    let storage = LocalStorage::new(&object.dir);
    let missing = error_report(&load(&storage, None, None).unwrap_err());
    assert!(missing.contains("no key was given"), "{missing}");
    let wrong = error_report(&load(&storage, None, Some(&[1; 32])).unwrap_err());
    assert!(wrong.contains("authentication failed"), "{wrong}");
    let expected: &Value = &object.expected.as_ref().unwrap()["schema"];
    let (entry, e) = load(&storage, None, object.key.as_ref()).unwrap();
    assert_eq!(&summary(&entry.schema, &e).unwrap(), expected);
}

/// `tdb` prints a failure as its chain: the message, then each cause once.
#[test]
fn the_command_prints_each_cause_once() {
    let object = arrays().into_iter().find(|o| o.key.is_some()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tdb"))
        .arg("schema")
        .arg(&object.dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(lines.len() >= 3, "{err}");
    assert!(
        lines[1..].iter().all(|l| l.starts_with("  caused by: ")),
        "{err}"
    );
    assert_eq!(err.matches("no key was given").count(), 1, "{err}");
    // No message repeats the one of its cause.
    let messages: Vec<&str> = lines
        .iter()
        .map(|l| {
            l.trim_start_matches("error: ")
                .trim_start_matches("  caused by: ")
        })
        .collect();
    for pair in messages.windows(2) {
        assert!(!pair[0].contains(pair[1]), "{err}");
    }
}

/// `expected`'s schema as a v22 schema shows it: from v5 a dimension without
/// filters of its own reads with the coordinate filters, so the summaries of
/// older schemas (dimensions without filters) cannot be kept at v22.
fn as_v22(expected: &Value) -> Value {
    let mut s = expected.clone();
    s["schema_format_version"] = Value::from(22);
    let coords = s["coords_filters"].clone();
    for d in s["dims"].as_array_mut().unwrap() {
        if d["filters"]["filters"]
            .as_array()
            .is_some_and(Vec::is_empty)
        {
            d["filters"] = coords.clone();
        }
    }
    s
}

#[test]
fn every_tiledb_schema_summary_creates_the_schema_it_describes() {
    let mut failures = Vec::new();
    let arrays = arrays();
    for object in &arrays {
        let expected = object.expected.as_ref().unwrap();
        let text = expected.to_string();
        let (schema, enumerations) = match tdb_cli::schema::from_json(&object.case, &text) {
            Ok(s) => s,
            Err(e) => {
                failures.push(error_report(&e));
                continue;
            }
        };
        let dir = tempfile::tempdir().unwrap();
        let mut options = tdb::OpenOptions::new();
        if let Some(k) = &object.key {
            options = options.key(k).unwrap();
        }
        tdb::Array::create_in(
            LocalStorage::new(dir.path()),
            "",
            &schema,
            &enumerations,
            options,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", object.case));
        let storage = LocalStorage::new(dir.path());
        let (entry, enumerations) = load(&storage, None, object.key.as_ref()).unwrap();
        let ours = summary(&entry.schema, &enumerations).unwrap();
        // A v22 schema TileDB wrote comes back whole, down to what the
        // summary leaves out (WebP extents, ...); enumeration paths are random.
        let theirs = load(&LocalStorage::new(&object.dir), None, object.key.as_ref())
            .unwrap()
            .0
            .schema;
        if theirs.version.get() == 22 && theirs.enumerations.is_empty() && theirs != entry.schema {
            failures.push(format!(
                "{}: the schemas differ beyond the summary",
                object.case
            ));
        }
        let want = as_v22(&expected["schema"]);
        if ours != want {
            failures.push(format!("{}:\n{}", object.case, differences(&ours, &want)));
        }
    }
    assert!(
        failures.is_empty(),
        "{} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn create_refuses_bad_schema_files_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("not json", "{", "EOF"),
        ("no type", r#"{"dims": []}"#, "array_type is missing"),
        (
            "bad datatype",
            r#"{"array_type": "dense", "dims": [{"name": "d", "datatype": "INT99", "domain": [0, 9]}]}"#,
            "INT99",
        ),
        (
            "out of range",
            r#"{"array_type": "dense", "dims": [{"name": "d", "datatype": "INT8", "domain": [0, 300]}], "attrs": [{"name": "a", "datatype": "INT32"}]}"#,
            "300 is out of range for INT8",
        ),
        (
            "invalid",
            r#"{"array_type": "dense", "dims": [{"name": "d", "datatype": "INT32", "domain": [9, 0]}], "attrs": [{"name": "a", "datatype": "INT32"}]}"#,
            "lower bound 9 is above upper bound 0",
        ),
        (
            "current domain outside",
            r#"{"array_type": "sparse", "dims": [{"name": "d", "datatype": "INT32", "domain": [0, 9]}], "attrs": [{"name": "a", "datatype": "INT32"}], "current_domain": {"type": "NDRECTANGLE", "ranges": [[0, 10]]}}"#,
            "outside the domain",
        ),
        (
            "unknown filter",
            r#"{"array_type": "sparse", "dims": [{"name": "d", "datatype": "INT32", "domain": [0, 9]}], "attrs": [{"name": "a", "datatype": "INT32", "filters": {"filters": [{"type": "ZIP"}]}}]}"#,
            "ZIP",
        ),
    ];
    for (what, text, message) in cases {
        let file = dir.path().join("schema.json");
        std::fs::write(&file, text).unwrap();
        let target = dir.path().join("array");
        let out = tdb(&[
            "create",
            target.to_str().unwrap(),
            "--schema",
            file.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
        assert!(stderr.contains(message), "{what}: {stderr}");
        assert!(!target.exists(), "{what}: something was written");
    }
}

#[test]
fn create_makes_an_array_that_reads_empty() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("schema.json");
    std::fs::write(
        &file,
        r#"{"array_type": "sparse", "capacity": 3,
            "dims": [{"name": "d", "datatype": "INT64", "domain": [1, 100], "tile": 10}],
            "attrs": [{"name": "s", "datatype": "STRING_UTF8", "var": true, "nullable": true,
                       "filters": {"filters": [{"type": "ZSTD", "options": {"COMPRESSION_LEVEL": 5}}]}}]}"#,
    )
    .unwrap();
    let target = dir.path().join("array");
    let t = target.to_str().unwrap();
    let out = tdb(&["create", t, "--schema", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown: Value = serde_json::from_slice(&tdb(&["schema", t, "--json"]).stdout).unwrap();
    assert_eq!(shown["capacity"], 3);
    assert_eq!(shown["attrs"][0]["nullable"], true);
    assert_eq!(
        shown["attrs"][0]["filters"]["filters"][0]["options"]["COMPRESSION_LEVEL"],
        5
    );
    let cells: Value = serde_json::from_slice(&tdb(&["export", t]).stdout).unwrap();
    assert_eq!(cells["num_cells"], 0);
    // A second create on the same path is refused and changes nothing.
    let again = tdb(&["create", t, "--schema", file.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
}
