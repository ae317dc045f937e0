//! `tdb inspect` on arrays and groups real TileDB wrote: snapshots of the
//! text dump (review every change as code), the JSON form, and errors.

use crate::common::{ok, ok_bytes, tdb};
use std::path::Path;
use std::process::Command;
use tdb_cli::inspect::inspect;
use tdb_fragment::TimeWindow;
use tdb_storage::LocalStorage;

fn dump(case: &str) -> String {
    let o = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == case && o.expected.is_some())
        .unwrap_or_else(|| panic!("no case {case}"));
    inspect(
        &LocalStorage::new(&o.dir),
        "",
        TimeWindow::ALL,
        o.key.as_ref(),
    )
    .unwrap()
    .to_string()
}

/// Current-format cases: one of each kind of directory layout.
#[test]
fn snapshots_of_current_cases() {
    for case in [
        "dense_2d_row_row",
        "sparse_string_dim",
        "encrypted_aes256",
        "consolidated_commits",
        "consolidated_fragment_meta",
        "consolidated_after_vacuum",
        "delete_query",
        "schema_evolution",
        "enumeration",
        "metadata_types",
        "group_basic",
    ] {
        insta::assert_snapshot!(case, dump(case));
    }
}

/// One two-fragment case per legacy writer: every format version 2..22.
#[test]
fn snapshots_of_legacy_cases() {
    let mut versions: Vec<_> = std::fs::read_dir(tdb_testdata::root().join("legacy"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    versions.sort();
    assert!(versions.len() >= 10, "{versions:?}");
    for v in versions {
        let case = format!("legacy/{v}/two_fragments");
        insta::assert_snapshot!(format!("legacy_{v}_two_fragments"), dump(&case));
    }
}

#[test]
fn json_output_parses_and_matches_the_text() {
    let dir = tdb_testdata::root().join("sparse_string_dim/array");
    let out = tdb(&["inspect", "--json", dir.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(ok_bytes(&out)).unwrap();
    assert_eq!(v["kind"], "array");
    let report = inspect(&LocalStorage::new(&dir), "", TimeWindow::ALL, None).unwrap();
    assert_eq!(v["files"].as_array().unwrap().len(), report.files.len());
    assert_eq!(
        v["fragments"].as_array().unwrap().len(),
        report.fragments.len()
    );
    assert!(v["fragments"][0]["format_version"].as_u64() == Some(22));
}

#[test]
fn a_directory_that_is_no_tiledb_object_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("README"), b"hello").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tdb"))
        .arg("inspect")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a TileDB array or group"), "{err}");

    let missing = dir.path().join("nope");
    let out = Command::new(env!("CARGO_BIN_EXE_tdb"))
        .arg("inspect")
        .arg(&missing)
        .output()
        .unwrap();
    // A missing directory lists as empty (as a prefix does on object
    // stores), so it is reported as no TileDB object, naming the path.
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nope: not a TileDB array or group"), "{err}");
}

#[test]
fn corrupt_fragment_metadata_is_reported_with_its_path() {
    let src = tdb_testdata::root().join("dense_2d_row_row/array");
    let dir = tempfile::tempdir().unwrap();
    tdb_testdata::copy_dir(&src, dir.path()).unwrap();
    let frag = std::fs::read_dir(dir.path().join("__fragments"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let meta = frag.path().join("__fragment_metadata.tdb");
    let bytes = std::fs::read(&meta).unwrap();
    std::fs::write(&meta, &bytes[..bytes.len() - 3]).unwrap();
    let err = inspect(&LocalStorage::new(dir.path()), "", TimeWindow::ALL, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("__fragment_metadata.tdb"), "{err}");
}

fn json(dir: &Path, window: TimeWindow, key: Option<&[u8; 32]>) -> serde_json::Value {
    let report = inspect(&LocalStorage::new(dir), "", window, key)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    serde_json::to_value(&report).unwrap()
}

/// `inspect --json` holds `fragments`, `fragments_to_vacuum`, `metadata`
/// (and `metadata_at` when opened at those timestamps) and `group` in the
/// shapes of the conformance format, equal to what TileDB reported for
/// every case of every format version.
#[test]
fn inspect_agrees_with_tiledb() {
    let (mut arrays, mut groups, mut at_checks) = (0, 0, 0);
    for o in tdb_testdata::objects() {
        let Some(e) = &o.expected else { continue };
        let key = o.key.as_ref();
        let got = json(&o.dir, TimeWindow::ALL, key);
        if e["kind"] == "group" {
            let g = &got["group"];
            assert_eq!(g["metadata"], e["group"]["metadata"], "{}", o.case);
            assert_eq!(g["members"], e["group"]["members"], "{}", o.case);
            for (path, sub) in e["subgroups"].as_object().into_iter().flatten() {
                let got = json(&o.dir.join(path), TimeWindow::ALL, key);
                assert_eq!(
                    got["group"]["metadata"], sub["metadata"],
                    "{} {path}",
                    o.case
                );
                assert_eq!(got["group"]["members"], sub["members"], "{} {path}", o.case);
            }
            groups += 1;
            continue;
        }
        let case = &o.case;
        assert_eq!(got["metadata"], e["metadata"], "{case}: metadata");
        assert_eq!(
            got["fragments_to_vacuum"], e["fragments_to_vacuum"],
            "{case}: fragments to vacuum"
        );
        let fragments = got["fragments"].as_array().unwrap();
        let expected = e["fragments"].as_array().unwrap();
        assert_eq!(fragments.len(), expected.len(), "{case}: fragments");
        for (g, x) in fragments.iter().zip(expected) {
            for field in [
                "name",
                "timestamp_range",
                "format_version",
                "sparse",
                "cell_num",
                "nonempty_domain",
                "has_consolidated_metadata",
                "array_schema_name",
            ] {
                assert_eq!(
                    g[field], x[field],
                    "{case}: fragment {}: {field}",
                    x["name"]
                );
            }
        }
        for at in e["metadata_at"].as_array().into_iter().flatten() {
            let t = at["timestamp"].as_u64().unwrap();
            let got = json(&o.dir, TimeWindow::until(t), key);
            assert_eq!(got["metadata"], at["metadata"], "{case}: metadata at {t}");
            at_checks += 1;
        }
        arrays += 1;
    }
    assert!(
        arrays > 150 && groups >= 1 && at_checks >= 20,
        "{arrays} {groups} {at_checks}"
    );
}

/// An encrypted array inspected without its key: the files and generic
/// tile headers (readable without it), the fragments its commits make
/// visible, and what needs the key with how to pass it; no failure.
#[test]
fn an_encrypted_array_without_its_key_shows_what_it_can() {
    let dir = tdb_testdata::root().join("encrypted_aes256/array");
    let text = ok(&tdb(&["inspect", dir.to_str().unwrap()]));
    assert!(text.contains("AES_256_GCM"), "{text}");
    assert!(
        text.contains("needs the key") && text.contains("--key"),
        "{text}"
    );
    assert!(
        text.contains("__1_1_7463c9ad4f9926c4d6f1aefa63fa273b_22  t=[1,1] v22, 6 files"),
        "{text}"
    );
    let json = tdb(&["inspect", "--json", dir.to_str().unwrap()]);
    let v: serde_json::Value = serde_json::from_slice(ok_bytes(&json)).unwrap();
    assert!(v["needs_key"].as_str().unwrap().contains("--key"));
    assert_eq!(v["committed_fragments"].as_array().unwrap().len(), 1);
    assert!(v["schema"].is_null());
    // With the key, the whole report.
    let storage = LocalStorage::new(&dir);
    let key = *b"0123456789abcdeF0123456789abcdeF";
    let full = inspect(&storage, "", TimeWindow::ALL, Some(&key)).unwrap();
    assert!(full.needs_key.is_none() && full.schema.is_some());
    assert_eq!(full.fragments.len(), 1);
}

/// A reader that stops reading (`tdb export ... | head`) ends the command
/// quietly, with success, not a panic.
#[test]
fn a_closed_output_stops_the_command_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let dir = tdb_testdata::root().join("dense_multi_chunk/array");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tdb"))
        .args(["export", "--format", "csv"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The pipe's reader is gone; the export has megabytes left to write.
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("panicked"), "{said}");
}
