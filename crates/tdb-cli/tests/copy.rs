//! `tdb copy` on TileDB-written arrays and groups: the copy exports the
//! same cells, and a group's copy has the same members, metadata and
//! member arrays (TileDB reading copies is `cargo xtask interop`'s copy
//! pass).

mod common;
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
