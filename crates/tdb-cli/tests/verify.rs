//! `tdb verify`: exit codes and output on a clean fixture, a corrupted copy
//! and a directory that is no array.

use std::path::Path;
use std::process::{Command, Output};

fn tdb_verify(dir: &Path, json: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tdb"));
    cmd.arg("verify").arg(dir);
    if json {
        cmd.arg("--json");
    }
    cmd.output().unwrap()
}

fn fixture(case: &str) -> tdb_testdata::Object {
    tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == case && o.expected.is_some())
        .unwrap()
}

#[test]
fn clean_array_exits_0() {
    let o = fixture("delete_query");
    let out = tdb_verify(&o.dir, false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.trim_end().ends_with("clean"), "{text}");
}

#[test]
fn problems_exit_1_and_are_listed() {
    let o = fixture("sparse_2d_int");
    let tmp = tempfile::tempdir().unwrap();
    for f in &o.files {
        let to = tmp.path().join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(o.dir.join(f), to).unwrap();
    }
    std::fs::write(tmp.path().join("stray.bin"), b"x").unwrap();
    let out = tdb_verify(tmp.path(), true);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["clean"], false);
    assert_eq!(v["problems"][0]["file"], "stray.bin");
    assert_eq!(v["problems"][0]["kind"], "UnknownFile");
}

#[test]
fn no_array_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tdb_verify(tmp.path(), false);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a TileDB array"), "{err}");
}

#[test]
fn an_encrypted_array_without_its_key_is_a_usage_error() {
    let o = fixture("encrypted_aes256");
    let out = tdb_verify(&o.dir, false);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the array is encrypted"), "{err}");
}
