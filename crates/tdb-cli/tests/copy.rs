//! `tdb copy` on TileDB-written arrays and groups: the copy exports the
//! same cells, and a group's copy has the same members, metadata and
//! member arrays (TileDB reading copies is `cargo xtask interop`'s copy
//! pass).

use crate::common;
use common::{ok, tdb};

fn export(dir: &std::path::Path) -> String {
    ok(&tdb(&["export", dir.to_str().unwrap(), "--format", "csv"]))
}

#[test]
fn an_array_copy_exports_the_same_cells() {
    let tmp = tempfile::tempdir().unwrap();
    for case in ["dense_1d_int32", "sparse_2d_int"] {
        let src = tdb_testdata::root().join(case).join("array");
        let dst = tmp.path().join(case);
        let said = ok(&tdb(&[
            "copy",
            src.to_str().unwrap(),
            dst.to_str().unwrap(),
        ]));
        assert!(said.contains("fragments"), "{said}");
        assert_eq!(export(&src), export(&dst), "{case}");
        // Copying onto an existing array is refused.
        let again = tdb(&["copy", src.to_str().unwrap(), dst.to_str().unwrap()]);
        assert!(!again.status.success(), "{case}");
    }
}

#[test]
fn a_group_copy_keeps_members_metadata_and_member_arrays() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tdb_testdata::root().join("group_basic").join("group");
    let dst = tmp.path().join("g");
    let said = ok(&tdb(&[
        "copy",
        src.to_str().unwrap(),
        dst.to_str().unwrap(),
    ]));
    assert!(said.contains("3 member arrays, 1 subgroups"), "{said}");
    let (a, b) = (
        tdb::Group::open(&src).unwrap(),
        tdb::Group::open(&dst).unwrap(),
    );
    let members = |g: &tdb::Group| -> Vec<String> {
        let mut m: Vec<String> = g
            .members()
            .iter()
            .map(|m| format!("{} {} {:?}", m.key(), m.uri, m.object_type))
            .collect();
        m.sort();
        m
    };
    assert_eq!(members(&a), members(&b));
    let metadata = |g: &tdb::Group| -> Vec<String> {
        g.metadata()
            .iter()
            .map(|(k, v)| format!("{k} {v:?}"))
            .collect()
    };
    assert_eq!(metadata(&a), metadata(&b));
    assert!(!metadata(&a).is_empty());
    for member in ["dense_a", "sparse_b", "sub/inner"] {
        assert_eq!(
            export(&src.join(member)),
            export(&dst.join(member)),
            "{member}"
        );
    }
}

/// A copy keeps its source's encryption: with `--key` alone the copy
/// opens only with that key; `--to-key` re-encrypts, `--decrypt` writes
/// plaintext, and the two together are refused.
#[test]
fn a_copy_keeps_its_sources_encryption_unless_told_otherwise() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tdb_testdata::root().join("encrypted_aes256").join("array");
    let (key, other) = (
        "0123456789abcdeF0123456789abcdeF",
        "fedcba9876543210FEDCBA9876543210",
    );
    let copy = |name: &str, extra: &[&str]| {
        let dst = tmp.path().join(name);
        let mut args = vec!["copy", src.to_str().unwrap(), dst.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = tdb(&args);
        (dst, out)
    };
    let exports = |dst: &std::path::Path, key: Option<&str>| -> bool {
        let mut args = vec!["export", dst.to_str().unwrap(), "--format", "csv"];
        if let Some(k) = key {
            args.extend(["--key", k]);
        }
        tdb(&args).status.success()
    };
    let theirs = ok(&tdb(&[
        "export",
        src.to_str().unwrap(),
        "--format",
        "csv",
        "--key",
        key,
    ]));

    let (same, out) = copy("same", &["--key", key]);
    assert!(ok(&out).contains("; encrypted"));
    assert!(!exports(&same, None), "a copy readable without the key");
    assert_eq!(
        ok(&tdb(&[
            "export",
            same.to_str().unwrap(),
            "--format",
            "csv",
            "--key",
            key
        ])),
        theirs
    );

    let (re, out) = copy("re", &["--key", key, "--to-key", other]);
    assert!(ok(&out).contains("; encrypted"));
    assert!(!exports(&re, Some(key)) && !exports(&re, None));
    assert!(exports(&re, Some(other)));

    let (plain, out) = copy("plain", &["--key", key, "--decrypt"]);
    assert!(ok(&out).contains("; unencrypted"));
    assert_eq!(export(&plain), theirs);

    let (_, both) = copy("both", &["--key", key, "--to-key", other, "--decrypt"]);
    assert!(!both.status.success());
}
