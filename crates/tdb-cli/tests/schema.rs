//! `tdb schema` on every array real TileDB wrote (all format versions): the
//! JSON summary equals what TileDB reported (`expected.json`), the text dump
//! is pinned by snapshots, `--at` picks the schema each fragment names, and
//! keys are demanded and checked.

use serde_json::Value;
use tdb_cli::error_report;
use tdb_cli::schema::{load, summary};
use tdb_storage::LocalStorage;

fn arrays() -> Vec<tdb_testdata::Object> {
    let arrays: Vec<_> = tdb_testdata::objects()
        .into_iter()
        .filter(|o| o.expected.as_ref().is_some_and(|e| e["kind"] != "group"))
        .collect();
    assert!(arrays.len() > 180, "only {} arrays", arrays.len());
    arrays
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
            let keys = expected.as_object().unwrap().keys();
            let diff: Vec<String> = keys
                .filter(|k| ours[k.as_str()] != expected[k.as_str()])
                .map(|k| {
                    format!(
                        "  {k}: ours {} TileDB {}",
                        ours[k.as_str()],
                        expected[k.as_str()]
                    )
                })
                .collect();
            failures.push(format!("{}:\n{}", object.case, diff.join("\n")));
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
