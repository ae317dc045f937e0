//! TileDB's own back-compat inputs (`test/inputs/` of TileDB-Inc/TileDB,
//! copied byte for byte into `testdata/arrays/tiledb_inputs` and
//! `testdata/refused`): tdb gives the answers TileDB's tests state, and
//! refuses with a typed error, saying why, what TileDB refuses. The
//! conformance pass checks the same cases against TileDB 2.30's reads.

use crate::common;
use common::chain;
use tdb::{Array, Group, OpenOptions, ReadSpec, ResultLayout, Subarray};

fn dir(path: &str) -> std::path::PathBuf {
    tdb_testdata::root().join(path)
}

fn ints(b: &tdb::FieldBuffer) -> Vec<i32> {
    b.data
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// `unit-backwards_compat.cc`: "a" is 1, 2, 3, 4 for d1 in [1, 4] and
/// d2 = 10, row-major. Format v1 keeps the coordinates of a tile cell by
/// cell (no compressor), which a reader must not take for v2's layout.
#[test]
fn a_format_v1_sparse_array_reads_as_tiledbs_test_states() {
    let array = Array::open(dir("tiledb_inputs/non_split_coords_v1_4_0/array")).unwrap();
    let range =
        |lo: i32, hi: i32| tdb::Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
    let mut sub = Subarray::new(2);
    sub.add_range(0, range(1, 4));
    sub.add_range(1, range(10, 10));
    let got = array
        .read_all(
            ReadSpec::new(["d1", "d2", "a"])
                .with_subarray(sub)
                .with_layout(ResultLayout::RowMajor),
        )
        .unwrap();
    assert_eq!(ints(&got.fields[0]), [1, 2, 3, 4]);
    assert_eq!(ints(&got.fields[1]), [10, 10, 10, 10]);
    assert_eq!(ints(&got.fields[2]), [1, 2, 3, 4]);
    // Its tiles' coordinates lie in their MBRs.
    let storage = tdb::LocalStorage::new(dir("tiledb_inputs/non_split_coords_v1_4_0/array"));
    let report = tdb_fragment::verify_array(&storage, "", None, &mut |p| panic!("{p}")).unwrap();
    assert_eq!(report.problems, 0);
}

/// `sc-33480.cc`: one cell, d = "" (a var tile of zero chunks), a = 1.
#[test]
fn a_var_tile_of_zero_chunks_reads_as_an_empty_string() {
    let array = Array::open(dir("tiledb_inputs/zero_var_chunks_v10/array")).unwrap();
    let got = array.read_all(ReadSpec::new(["d", "a"])).unwrap();
    assert_eq!(got.num_cells, 1);
    assert!(got.fields[0].data.is_empty());
    assert_eq!(got.fields[0].offsets.as_deref(), Some(&[0][..]));
    assert_eq!(ints(&got.fields[1]), [1]);
}

/// `unit-backwards_compat.cc`: TileDB opens the v11 array for reads and
/// writes but not for deletes, which need format v16.
#[test]
fn deletes_on_a_format_v11_array_are_refused_as_tiledb_refuses_them() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("v11");
    tdb_testdata::copy_dir(&dir("tiledb_inputs/sparse_array_v11/array"), &copy).unwrap();
    let array = Array::open(&copy).unwrap();
    assert_eq!(array.read_all(ReadSpec::new(["a1"])).unwrap().num_cells, 0);
    let err = array.delete("a1 == 1").unwrap_err();
    let msg = chain(&err);
    assert!(
        msg.contains("format version 11") && msg.contains("16"),
        "{msg}"
    );
}

/// `unit-backwards_compat.cc`: a group of details format v1 with one
/// member.
#[test]
fn a_group_of_details_v1_has_its_member() {
    let group = Group::open(dir("tiledb_inputs/group_v1/group")).unwrap();
    let members: Vec<String> = group.members().iter().map(|m| m.key().to_owned()).collect();
    assert_eq!(members, ["subgroup1"]);
}

/// What TileDB refuses, tdb refuses, saying why: an array of TileDB 1.3
/// (before format versions; TileDB: "Reading data past end of serialized
/// data size.") and one of a format version newer than any (TileDB: "is
/// newer than the library format version").
#[test]
fn arrays_tiledb_refuses_are_typed_errors_that_say_why() {
    for (case, why) in [
        ("dense_array_v1_3_0", "written by TileDB before 1.4"),
        (
            "experimental_array_vUINT32_MAX",
            "format version 4294967295 is newer than the newest this library reads",
        ),
    ] {
        let path = tdb_testdata::root()
            .parent()
            .unwrap()
            .join("refused")
            .join(case)
            .join("array");
        let err = Array::open_with(&path, OpenOptions::new()).unwrap_err();
        let msg = chain(&err);
        assert!(msg.contains(why), "{case}: {msg}");
    }
}
