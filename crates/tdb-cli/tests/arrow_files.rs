//! `tdb export --format arrow` and `tdb import FILE.arrow`: an array's
//! cells through an Arrow IPC file into a new array with its schema give
//! the same export.

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
    for case in cases {
        let dir = tdb_testdata::root().join(case);
        let src = dir.join("array");
        let src = src.to_str().unwrap();
        let file = tmp.path().join(format!("{case}.arrow"));
        std::fs::write(&file, ok_bytes(&tdb(&["export", src, "--format", "arrow"]))).unwrap();
        let copy = tmp.path().join(case);
        let copy = copy.to_str().unwrap();
        let schema = dir.join("expected.json");
        ok(&tdb(&[
            "create",
            copy,
            "--schema",
            schema.to_str().unwrap(),
        ]));
        ok(&tdb(&["import", copy, file.to_str().unwrap()]));
        assert_eq!(
            ok_bytes(&tdb(&["export", copy])),
            ok_bytes(&tdb(&["export", src])),
            "{case}"
        );
    }
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
    let bad = tmp.path().join("bad.arrow");
    std::fs::write(&bad, b"not arrow at all").unwrap();
    let out = tdb(&["import", copy, bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an Arrow IPC file"));
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
