//! `tdb metadata`, `tdb delete`, `tdb consolidate` and `tdb vacuum` change
//! a copy of a TileDB-written array; the changes read back through tdb
//! (TileDB reading such changes is `cargo xtask interop`'s generated and
//! consolidation passes).

use serde_json::Value;
use std::process::Output;

use crate::common;
use common::{fixture_copy, ok, tdb};

fn json(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).unwrap()
}

#[test]
fn metadata_set_get_delete() {
    let tmp = tempfile::tempdir().unwrap();
    let arr = fixture_copy("metadata_types", tmp.path());
    let p = arr.to_str().unwrap();
    let before = json(&tdb(&["metadata", p])).as_array().unwrap().len();
    assert!(tdb(&["metadata", p, "set", "new_key", "[1, -2]"])
        .status
        .success());
    assert!(
        tdb(&["metadata", p, "set", "small", "7", "--type", "uint8"])
            .status
            .success()
    );
    let got = json(&tdb(&["metadata", p, "get", "new_key"]));
    assert_eq!(
        got,
        serde_json::json!([{"key": "new_key", "datatype": "INT64", "value_num": 2, "value": [1, -2]}])
    );
    let got = json(&tdb(&["metadata", p, "get", "small"]));
    assert_eq!(got[0]["datatype"], "UINT8");
    assert_eq!(
        json(&tdb(&["metadata", p])).as_array().unwrap().len(),
        before + 2
    );
    assert!(tdb(&["metadata", p, "delete", "new_key"]).status.success());
    let missing = tdb(&["metadata", p, "get", "new_key"]);
    assert_eq!(missing.status.code(), Some(2));
    // A value that does not fit its type writes nothing.
    let bad = tdb(&["metadata", p, "set", "k", "300", "--type", "uint8"]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(
        json(&tdb(&["metadata", p])).as_array().unwrap().len(),
        before + 1
    );
}

#[test]
fn delete_then_export() {
    let tmp = tempfile::tempdir().unwrap();
    let arr = fixture_copy("sparse_2d_int", tmp.path());
    let p = arr.to_str().unwrap();
    let count = |extra: &[&str]| {
        let mut args = vec!["export", p];
        args.extend_from_slice(extra);
        json(&tdb(&args))["num_cells"].as_u64().unwrap()
    };
    let all = count(&[]);
    let keep = count(&["--condition", "not (a < 5)"]);
    assert!(keep < all && keep > 0, "{keep} of {all}");
    let out = tdb(&["delete", p, "--condition", "a < 5"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(count(&[]), keep);
    // Dense arrays take no deletes, as in TileDB.
    let dense = fixture_copy("dense_1d_int32", tmp.path());
    let out = tdb(&["delete", dense.to_str().unwrap(), "--condition", "a < 5"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn consolidate_and_vacuum_array_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let arr = fixture_copy("metadata_types", tmp.path());
    let p = arr.to_str().unwrap();
    for (k, v) in [("a", "1"), ("b", "2"), ("a", "3")] {
        assert!(tdb(&["metadata", p, "set", k, v]).status.success());
    }
    let meta_files = || std::fs::read_dir(arr.join("__meta")).unwrap().count();
    let before = json(&tdb(&["metadata", p]));
    let files = meta_files();
    assert!(files >= 4, "{files}");
    // A mode TileDB does not know is refused and changes nothing.
    let out = tdb(&["consolidate", p, "--mode", "everything"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--mode takes"));
    let out = tdb(&["consolidate", p, "--mode", "array_meta"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(meta_files(), files + 2, "the new file and its vacuum list");
    assert_eq!(json(&tdb(&["metadata", p])), before);
    assert!(tdb(&["vacuum", p, "--mode", "array_meta"]).status.success());
    assert_eq!(meta_files(), 1);
    assert_eq!(json(&tdb(&["metadata", p])), before);
}

#[test]
fn consolidate_and_vacuum_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let arr = fixture_copy("sparse_2d_int", tmp.path());
    let p = arr.to_str().unwrap();
    assert!(tdb(&["delete", p, "--condition", "a < 0"]).status.success());
    let cells = || ok(&tdb(&["export", p, "--format", "csv"]));
    let before = cells();
    assert!(before.lines().count() > 1, "cells to compare: {before}");
    let commits = || std::fs::read_dir(arr.join("__commits")).unwrap().count();
    let n = commits();
    assert!(n >= 2, "{n}");
    let out = tdb(&["consolidate", p, "--mode", "commits"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(commits(), n + 1);
    assert!(tdb(&["vacuum", p, "--mode", "commits"]).status.success());
    assert_eq!(commits(), 1, "the .con alone");
    assert_eq!(cells(), before);
}

#[test]
fn consolidate_and_vacuum_fragment_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let arr = fixture_copy("consolidated_commits", tmp.path());
    let p = arr.to_str().unwrap();
    let cells = || ok(&tdb(&["export", p, "--format", "csv"]));
    let before = cells();
    assert!(before.lines().count() > 1, "cells to compare: {before}");
    let metas = || {
        std::fs::read_dir(arr.join("__fragment_meta"))
            .map(|r| r.count())
            .unwrap_or(0)
    };
    assert_eq!(metas(), 0);
    for _ in 0..2 {
        let out = tdb(&["consolidate", p, "--mode", "fragment_meta"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(metas(), 2);
    assert_eq!(cells(), before);
    // Both end at the same time: vacuum keeps both, as TileDB's would.
    assert!(tdb(&["vacuum", p, "--mode", "fragment_meta"])
        .status
        .success());
    assert_eq!(metas(), 2);
    assert_eq!(cells(), before);
}

#[test]
fn consolidate_and_vacuum_fragments() {
    let tmp = tempfile::tempdir().unwrap();
    let arr = fixture_copy("consolidated_commits", tmp.path());
    let p = arr.to_str().unwrap();
    let cells = |at: &str| ok(&tdb(&["export", p, "--format", "csv", "--at", at]));
    let before: Vec<_> = ["2", "4"].iter().map(|t| cells(t)).collect();
    assert!(before.iter().all(|c| c.lines().count() > 1), "{before:?}");
    let fragments = || std::fs::read_dir(arr.join("__fragments")).unwrap().count();
    assert_eq!(fragments(), 4);
    let out = tdb(&["consolidate", p]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fragments(), 5);
    assert!(tdb(&["vacuum", p]).status.success());
    assert_eq!(fragments(), 1);
    let after: Vec<_> = ["2", "4"].iter().map(|t| cells(t)).collect();
    assert_eq!(
        after, before,
        "time travel answers from the per-cell timestamps"
    );
    // What TileDB left after the same steps (consolidated_commits_then_fragments):
    // the .con, an ignore file for its commits, the new fragment's commit.
    let theirs = tdb_testdata::root().join("consolidated_commits_then_fragments/array");
    assert_eq!(
        tdb_testdata::commit_kinds(&arr),
        tdb_testdata::commit_kinds(&theirs)
    );
}

#[test]
fn consolidate_chosen_or_listed_fragments() {
    let tmp = tempfile::tempdir().unwrap();
    let arr = fixture_copy("consolidated_commits", tmp.path());
    let p = arr.to_str().unwrap();
    let cells = || ok(&tdb(&["export", p, "--format", "csv"]));
    let before = cells();
    assert!(before.lines().count() > 1, "cells to compare: {before}");
    let mut names: Vec<String> = std::fs::read_dir(arr.join("__fragments"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // Settings TileDB refuses are refused.
    let refused = |args: &[&str], why: &str| {
        let out = tdb(&[&["consolidate", p][..], args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(why), "{err}");
    };
    refused(
        &["--step-size-ratio", "2"],
        "step_size_ratio 2 is not in [0, 1]",
    );
    // Only max below TileDB's default min: refused, as TileDB refuses it.
    refused(
        &["--step-max-frags", "2"],
        "is larger than step_max_frags 2",
    );
    // One step of two fragments: the first pair.
    let two = [
        "--steps",
        "1",
        "--step-min-frags",
        "2",
        "--step-max-frags",
        "2",
    ];
    let out = tdb(&[&["consolidate", p][..], &two].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("2 fragments consolidated into __1_2_"),
        "{text}"
    );
    // A list: exactly those two.
    let list = format!("{},{}", names[2], names[3]);
    let out = tdb(&["consolidate", p, "--fragments", &list]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2 fragments consolidated into __3_4_"),
        "{text}"
    );
    assert!(tdb(&["vacuum", p]).status.success());
    let left = std::fs::read_dir(arr.join("__fragments")).unwrap().count();
    assert_eq!(left, 2);
    assert_eq!(cells(), before);
}

/// `delete_query` (writes at 1, 2 and 4, a delete at 3) merged with and
/// without `--purge-deleted-cells`: reads now answer the same either way;
/// a read at 2 still sees the deleted cells only where they were kept.
#[test]
fn consolidate_over_deletes_keeps_or_purges_deleted_cells() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str, purge: bool| -> (String, String) {
        let arr = fixture_copy("delete_query", &tmp.path().join(name));
        let p = arr.to_str().unwrap();
        let cells = |at: &[&str]| ok(&tdb(&[&["export", p, "--format", "csv"][..], at].concat()));
        let (now, at2) = (cells(&[]), cells(&["--at", "2"]));
        let mut args = vec!["consolidate", p];
        if purge {
            args.push("--purge-deleted-cells");
        }
        let text = ok(&tdb(&args));
        assert!(
            text.contains("3 fragments consolidated into __1_4_"),
            "{text}"
        );
        ok(&tdb(&["vacuum", p]));
        assert_eq!(cells(&[]), now, "read now");
        (at2, cells(&["--at", "2"]))
    };
    let (before, kept) = run("kept", false);
    assert_eq!(
        kept, before,
        "deleted cells kept for reads before the delete"
    );
    let (before, purged) = run("purged", true);
    assert!(
        purged.lines().count() < before.lines().count(),
        "purged:\n{purged}\nbefore:\n{before}"
    );
}

/// A group's metadata files (TileDB's three of `group_meta_consolidated`,
/// its own merge removed) consolidated and vacuumed with `--mode
/// group_meta`: one file is left, and the list named the three by URI.
#[test]
fn consolidate_and_vacuum_group_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let g = tmp.path().join("g");
    let src = tdb_testdata::root().join("group_meta_consolidated/group");
    tdb_testdata::copy_dir(&src, &g).unwrap();
    let meta = g.join("__meta");
    for e in std::fs::read_dir(&meta).unwrap() {
        let path = e.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("__1_3_")
        {
            std::fs::remove_file(path).unwrap();
        }
    }
    let p = g.to_str().unwrap();
    let text = ok(&tdb(&["consolidate", p, "--mode", "group_meta"]));
    assert!(
        text.contains("3 group metadata files consolidated"),
        "{text}"
    );
    let list = std::fs::read_dir(&meta)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "vac"))
        .unwrap();
    let lines = std::fs::read_to_string(list).unwrap();
    assert_eq!(lines.lines().count(), 3);
    assert!(lines.lines().all(|l| l.starts_with("file:///")), "{lines}");
    let text = ok(&tdb(&["vacuum", p, "--mode", "group_meta"]));
    assert!(text.contains("4 files removed"), "{text}");
    assert_eq!(std::fs::read_dir(&meta).unwrap().count(), 1);
}

/// Two fixture copies stand for what killed writes leave: an array whose
/// fragment lost its commit file (a write stopped before committing) and
/// a group with a file a local write left in progress. `--uncommitted-
/// older-than` removes both (`--mode fragments` and `--mode group_meta`),
/// and nothing younger than the grace period.
#[test]
fn vacuum_removes_what_killed_writes_left() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    tdb_testdata::copy_dir(&tdb_testdata::root().join("attr_char_bytes/array"), &a).unwrap();
    let commit = std::fs::read_dir(a.join("__commits"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .next()
        .unwrap();
    let fragment = commit.file_stem().unwrap().to_owned();
    std::fs::remove_file(&commit).unwrap();
    let array = a.to_str().unwrap();
    // Its name says it was written at 1 ms past 1970: past any grace.
    let text = ok(&tdb(&["vacuum", array, "--uncommitted-older-than", "3600"]));
    assert!(text.contains("removed uncommitted"), "{text}");
    assert!(!a.join("__fragments").join(&fragment).exists());

    let g = tmp.path().join("g");
    tdb_testdata::copy_dir(
        &tdb_testdata::root().join("group_meta_consolidated/group"),
        &g,
    )
    .unwrap();
    let stale = g.join(format!("{}1-1", tdb_storage::LOCAL_TEMP_PREFIX));
    let fresh = g.join(format!("{}1-2", tdb_storage::LOCAL_TEMP_PREFIX));
    for f in [&stale, &fresh] {
        std::fs::write(f, b"half a file").unwrap();
    }
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
    let p = g.to_str().unwrap();
    let text = ok(&tdb(&[
        "vacuum",
        p,
        "--mode",
        "group_meta",
        "--uncommitted-older-than",
        "60",
    ]));
    assert!(text.contains("removed uncommitted"), "{text}");
    assert!(!stale.exists());
    assert!(fresh.exists(), "younger than the grace period");
    let err = tdb(&[
        "vacuum",
        array,
        "--mode",
        "commits",
        "--uncommitted-older-than",
        "1",
    ]);
    assert!(!err.status.success());
    assert!(String::from_utf8_lossy(&err.stderr).contains("goes with --mode fragments"));
}
