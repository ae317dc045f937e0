//! `tdb export --format arrow` and `tdb import FILE.arrow`: an array's
//! cells through an Arrow IPC file into a new array with its schema give
//! the same export.

#![cfg(feature = "sql")]

use std::process::{Command, Output};

fn tdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tdb"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: Output) -> Vec<u8> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

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
        std::fs::write(&file, ok(tdb(&["export", src, "--format", "arrow"]))).unwrap();
        let copy = tmp.path().join(case);
        let copy = copy.to_str().unwrap();
        let schema = dir.join("expected.json");
        ok(tdb(&["create", copy, "--schema", schema.to_str().unwrap()]));
        ok(tdb(&["import", copy, file.to_str().unwrap()]));
        assert_eq!(
            String::from_utf8(ok(tdb(&["export", copy]))).unwrap(),
            String::from_utf8(ok(tdb(&["export", src]))).unwrap(),
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
    ok(tdb(&["create", copy, "--schema", schema.to_str().unwrap()]));
    let bad = tmp.path().join("bad.arrow");
    std::fs::write(&bad, b"not arrow at all").unwrap();
    let out = tdb(&["import", copy, bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an Arrow IPC file"));
}
