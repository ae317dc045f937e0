//! `tdb export --format arrow|parquet` and `tdb import FILE.arrow|.parquet`:
//! an array's cells through an Arrow IPC or Parquet file into a new array
//! with its schema give the same export.

#![cfg(feature = "sql")]

use crate::common::{ok, ok_bytes, tdb};

#[test]
fn arrays_go_through_arrow_files_and_back() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        "attr_nullable",
        "attr_var_numeric",
        "attr_datetime_types",
        "attr_fixed_cvn",
        "enumeration",
        "dense_2d_row_row",
        "dense_var_nullable",
        "sparse_string_dim",
    ];
    for (format, ext) in [("arrow", "arrow"), ("parquet", "parquet")] {
        for case in cases {
            let dir = tdb_testdata::root().join(case);
            let src = dir.join("array");
            let src = src.to_str().unwrap();
            let file = tmp.path().join(format!("{case}.{ext}"));
            std::fs::write(&file, ok_bytes(&tdb(&["export", src, "--format", format]))).unwrap();
            let copy = tmp.path().join(format!("{case}_{format}"));
            let copy = copy.to_str().unwrap();
            let schema = dir.join("expected.json");
            ok(&tdb(&[
                "create",
                copy,
                "--schema",
                schema.to_str().unwrap(),
            ]));
            ok(&tdb(&["import", copy, file.to_str().unwrap()]));
            let cells = |array: &str| {
                let json: serde_json::Value =
                    serde_json::from_slice(ok_bytes(&tdb(&["export", array]))).unwrap();
                if format == "parquet" {
                    hide_null_values(json)
                } else {
                    json
                }
            };
            assert_eq!(cells(copy), cells(src), "{case} through {format}");
        }
    }
}

/// Parquet stores no value under a null (Arrow IPC keeps the buffer, so
/// it carries TileDB's): export's `data` with nulls' entries blanked.
fn hide_null_values(mut json: serde_json::Value) -> serde_json::Value {
    for (_, field) in json["fields"].as_object_mut().unwrap() {
        let Some(validity) = field.get("validity").cloned() else {
            continue;
        };
        let data = field["data"].as_array_mut().unwrap();
        for (v, valid) in data.iter_mut().zip(validity.as_array().unwrap()) {
            if valid == 0 {
                *v = serde_json::Value::Null;
            }
        }
    }
    json
}

/// Rows with no cell: a Parquet file of the fields' columns and no row,
/// which imports as nothing.
#[test]
fn an_empty_read_exports_an_empty_parquet_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tdb_testdata::root().join("attr_nullable");
    let copy = tmp.path().join("empty");
    let copy = copy.to_str().unwrap();
    ok(&tdb(&[
        "create",
        copy,
        "--schema",
        dir.join("expected.json").to_str().unwrap(),
    ]));
    let out = tdb(&["export", copy, "--format", "parquet"]);
    let bytes = ok_bytes(&out);
    assert!(bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"));
}

#[test]
fn a_file_that_is_not_arrow_is_an_input_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tdb_testdata::root().join("attr_nullable");
    let copy = tmp.path().join("copy");
    let copy = copy.to_str().unwrap();
    let schema = dir.join("expected.json");
    ok(&tdb(&[
        "create",
        copy,
        "--schema",
        schema.to_str().unwrap(),
    ]));
    for (ext, says) in [
        ("arrow", "not an Arrow IPC file"),
        ("parquet", "not a Parquet file"),
    ] {
        let bad = tmp.path().join(format!("bad.{ext}"));
        std::fs::write(&bad, b"not arrow at all").unwrap();
        let out = tdb(&["import", copy, bad.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains(says), "{ext}");
    }
}

/// An Arrow file of another array: the error names what does not fit,
/// with tdb-arrow's reason printed once.
#[test]
fn an_arrow_file_of_another_array_names_what_does_not_fit() {
    let tmp = tempfile::tempdir().unwrap();
    let strings = tdb_testdata::root().join("sparse_string_dim/array");
    let file = tmp.path().join("strings.arrow");
    std::fs::write(
        &file,
        ok_bytes(&tdb(&[
            "export",
            strings.to_str().unwrap(),
            "--format",
            "arrow",
        ])),
    )
    .unwrap();
    let copy = tmp.path().join("copy");
    let copy = copy.to_str().unwrap();
    let schema = tdb_testdata::root().join("attr_nullable/expected.json");
    ok(&tdb(&[
        "create",
        copy,
        "--schema",
        schema.to_str().unwrap(),
    ]));
    let out = tdb(&["import", copy, file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: ") && err.contains("field"), "{err}");
}
