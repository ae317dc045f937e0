//! `tdb import` takes back what `tdb export` prints: for every array real
//! TileDB wrote, its cells exported (CSV and JSON), imported into a new array
//! created from its schema summary, export the same again. Bad input is
//! refused with the row and field at fault, and writes nothing.

use std::path::Path;

use tdb::{Array, LocalStorage, OpenOptions, ReadSpec};
use tdb_cli::export::{default_fields, export, Format};
use tdb_cli::import::{read_csv, read_json, write_spec};

fn exported(array: &Array, format: Format) -> String {
    let spec = ReadSpec::new(default_fields(array.schema()));
    let mut out = Vec::new();
    export(array, spec, format, &mut out, &mut |_| {}).unwrap();
    String::from_utf8(out).unwrap()
}

/// Lines in order, or sorted when cells may repeat (their order among
/// equal coordinates is the fragments', not the data's).
fn rows(text: &str, dups: bool) -> Vec<String> {
    let mut rows: Vec<String> = text.lines().map(String::from).collect();
    if dups {
        rows.sort();
    }
    rows
}

/// A new, empty array with `array`'s schema, created from its summary.
fn empty_like(array: &Array, key: Option<&[u8; 32]>, dir: &Path) -> Array {
    let summary = tdb_cli::schema::snapshot_summary(array.snapshot()).unwrap();
    let (schema, enumerations) =
        tdb_cli::schema::from_json("summary", &summary.to_string()).unwrap();
    let mut options = OpenOptions::new();
    if let Some(k) = key {
        options = options.key(k).unwrap();
    }
    let storage: tdb::AnyStorage = std::sync::Arc::new(LocalStorage::new(dir));
    Array::create_in(storage, "", &schema, &enumerations, options).unwrap()
}

/// Whether a string field holds bytes that are not UTF-8, which CSV cannot
/// carry both ways (JSON can).
fn non_utf8_text(array: &Array) -> bool {
    let result: serde_json::Value = serde_json::from_str(&exported(array, Format::Json)).unwrap();
    let fields = result["fields"].as_object().unwrap();
    fields.iter().any(|(name, f)| {
        let text = matches!(
            array.schema().field_type(name),
            Some((
                tdb::Datatype::Char | tdb::Datatype::StringAscii | tdb::Datatype::StringUtf8,
                _
            ))
        );
        text && f["data"].as_array().unwrap().iter().any(|c| c.is_object())
    })
}

#[test]
fn every_tiledb_array_exported_imports_to_the_same_cells() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for object in tdb_testdata::objects() {
        let Some(expected) = &object.expected else {
            continue;
        };
        if expected["kind"] == "group" {
            continue;
        }
        let mut options = OpenOptions::new();
        if let Some(k) = &object.key {
            options = options.key(k).unwrap();
        }
        let array = Array::open_with(&object.dir, options).unwrap();
        let schema = array.schema().clone();
        let dups = schema.allows_dups;
        for format in [Format::Csv, Format::Json] {
            let text = exported(&array, format);
            if format == Format::Csv && non_utf8_text(&array) {
                // CSV shows such strings base64, and reads text as it is.
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let mut copy = empty_like(&array, object.key.as_ref(), dir.path());
            let fields = match format {
                Format::Csv => read_csv(&schema, text.as_bytes()),
                Format::Json => read_json(&schema, &text),
                Format::Arrow | Format::Parquet => {
                    unreachable!("Arrow and Parquet files: tests/arrow_files.rs")
                }
            };
            let outcome = fields
                .and_then(|f| write_spec(&schema, f))
                .map_err(|e| e.to_string())
                .and_then(|spec| copy.write(spec).map_err(|e| e.to_string()));
            // An array with no cell has nothing to import.
            let empty = text.lines().count() <= 1 || text.contains("\"num_cells\":0");
            match outcome {
                Ok(_) => {
                    copy.reopen().unwrap();
                    let again = exported(&copy, format);
                    let same = match format {
                        Format::Csv => rows(&text, dups) == rows(&again, dups),
                        // Duplicates come back in any order: compare rows.
                        Format::Json if dups => {
                            non_utf8_text(&array)
                                || rows(&exported(&array, Format::Csv), true)
                                    == rows(&exported(&copy, Format::Csv), true)
                        }
                        Format::Json => text == again,
                        Format::Arrow | Format::Parquet => {
                            unreachable!("Arrow and Parquet files: tests/arrow_files.rs")
                        }
                    };
                    if !same {
                        failures.push(format!("{} ({format:?}): cells differ", object.case));
                    }
                    checked += 1;
                }
                // A write tdb refuses as unsupported (`dense_int8_wrapped_tiles`:
                // TileDB's own tiles there are smaller than their cells).
                Err(e) if e.contains("not supported yet") => {}
                Err(e) if empty => {
                    assert!(
                        e.contains("do not fill") || e.contains("0 cells"),
                        "{} ({format:?}): {e}",
                        object.case
                    );
                }
                Err(e) => failures.push(format!("{} ({format:?}): {e}", object.case)),
            }
        }
    }
    assert!(checked > 300, "only {checked} imports checked");
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

use crate::common;
use common::tdb;

fn sparse_array(dir: &Path) -> String {
    let schema = dir.join("schema.json");
    std::fs::write(
        &schema,
        r#"{"array_type": "sparse",
            "dims": [{"name": "d", "datatype": "INT32", "domain": [1, 100], "tile": 10}],
            "attrs": [{"name": "v", "datatype": "FLOAT64", "cell_val_num": 2},
                      {"name": "s", "datatype": "STRING_UTF8", "var": true, "nullable": true}]}"#,
    )
    .unwrap();
    let array = dir.join("array");
    let out = tdb(&[
        "create",
        array.to_str().unwrap(),
        "--schema",
        schema.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    array.to_str().unwrap().to_owned()
}

#[test]
fn import_reads_csv_with_quotes_and_nulls_at_a_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let array = sparse_array(dir.path());
    let csv = dir.path().join("cells.csv");
    std::fs::write(&csv, "s,d,v\n\"a,\"\"b\"\"\",7,0.5 -1\n,3,NaN 2e3\n").unwrap();
    let out = tdb(&["import", &array, csv.to_str().unwrap(), "--at", "42"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cells = tdb(&["export", &array, "--format", "csv"]);
    assert_eq!(
        String::from_utf8_lossy(&cells.stdout),
        "d,v,s\n3,NaN 2000.0,\n7,0.5 -1.0,\"a,\"\"b\"\"\"\n"
    );
    let before = tdb(&["export", &array, "--at", "41"]);
    assert!(String::from_utf8_lossy(&before.stdout).contains("\"num_cells\":0"));
}

#[test]
fn bad_input_names_the_row_and_field_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let array = sparse_array(dir.path());
    let cases = [
        (
            "cells.csv",
            "d,v,s\n1,0.5,x\n",
            "row 1: v: 8 bytes, but a cell of FLOAT64 holds 2 values",
        ),
        ("cells.csv", "d,v,s\n1,0.5 1,x\n2,1 x,y\n", "row 2: v: "),
        (
            "cells.csv",
            "d,w\n1,2\n",
            "\"w\" is no dimension or attribute",
        ),
        (
            "cells.csv",
            "d,v,s\n1,1 2\n",
            "row 1: 2 fields, the header names 3",
        ),
        ("cells.csv", "d,v,s\n1000,1 2,x\n", "outside"),
        (
            "cells.json",
            r#"{"fields": {"d": {"data": [1]}, "v": {"data": [[1, 2]]}, "s": {"data": ["x"], "validity": [1, 0]}}}"#,
            "validity must be a list as long as data",
        ),
        ("cells.json", "[1]", "no \"fields\" object"),
        (
            "cells.txt",
            "d\n1\n",
            "--format takes json, csv, arrow or parquet",
        ),
    ];
    for (name, text, message) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        let out = tdb(&["import", &array, file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(message), "{text}: {stderr}");
    }
    let fragments = std::fs::read_dir(Path::new(&array).join("__fragments"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(fragments, 0, "a refused import left a fragment");
}

#[test]
fn dense_imports_must_cover_a_box_once() {
    let dir = tempfile::tempdir().unwrap();
    let schema = dir.path().join("schema.json");
    std::fs::write(
        &schema,
        r#"{"array_type": "dense",
            "dims": [{"name": "r", "datatype": "INT64", "domain": [1, 4], "tile": 2},
                     {"name": "c", "datatype": "INT64", "domain": [1, 4], "tile": 2}],
            "attrs": [{"name": "a", "datatype": "INT32"}]}"#,
    )
    .unwrap();
    let array = dir.path().join("array");
    let a = array.to_str().unwrap();
    assert!(tdb(&["create", a, "--schema", schema.to_str().unwrap()])
        .status
        .success());
    let file = dir.path().join("cells.csv");
    // Given column by column; written as the box [2,3] x [3,4].
    std::fs::write(&file, "c,r,a\n3,2,1\n3,3,2\n4,2,3\n4,3,4\n").unwrap();
    let out = tdb(&["import", a, file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cells = tdb(&["export", a, "--format", "csv", "--subarray", "2:3;3:4"]);
    assert_eq!(
        String::from_utf8_lossy(&cells.stdout),
        "r,c,a\n2,3,1\n2,4,3\n3,3,2\n3,4,4\n"
    );
    for (text, message) in [
        ("r,c,a\n1,1,1\n2,2,2\n", "do not fill the box"),
        ("r,c,a\n1,1,1\n1,1,2\n1,2,3\n", "do not fill the box"),
        (
            "r,c,a\n1,1,1\n1,1,2\n1,2,3\n2,2,4\n",
            "cell (1, 1) is given twice",
        ),
        (
            "r,a\n1,1\n",
            "a dense write by coordinates needs every dimension",
        ),
    ] {
        std::fs::write(&file, text).unwrap();
        let out = tdb(&["import", a, file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(stderr.contains(message), "{text}: {stderr}");
    }
}
