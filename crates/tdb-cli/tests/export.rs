//! `tdb export` and `tdb aggregate`: the subarray syntax and field lists
//! against schemas real TileDB wrote, usage errors of the commands, and
//! their output against what TileDB read.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tdb::{Array, Range};
use tdb_cli::export::{default_fields, parse_fields, parse_subarray};

fn array_dir(case: &str) -> PathBuf {
    tdb_testdata::root().join(case).join("array")
}

fn tdb(args: &[&str], dir: &Path) -> Output {
    tdb_cmd("export", args, dir)
}

fn tdb_cmd(command: &str, args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tdb"))
        .arg(command)
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
}

fn usage_error(args: &[&str], dir: &Path) -> String {
    let out = tdb(args, dir);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    assert!(out.stdout.is_empty(), "{args:?}");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn subarrays_parse_per_dimension_in_each_datatype() {
    let array = Array::open(array_dir("sparse_string_dim")).unwrap();
    let schema = array.schema();
    let s = parse_subarray(schema, "apple:apple,kiwi:zz;0:5").unwrap();
    assert_eq!(
        s.ranges(0),
        [
            Range::from_bounds(b"apple", b"apple", true),
            Range::from_bounds(b"kiwi", b"zz", true)
        ]
    );
    assert_eq!(
        s.ranges(1),
        [Range::from_bounds(
            &0i32.to_le_bytes(),
            &5i32.to_le_bytes(),
            false
        )]
    );
    // `*`, empty and left-out entries read a dimension whole; one value is
    // a one-cell range.
    let s = parse_subarray(schema, "*;7").unwrap();
    assert!(s.ranges(0).is_empty());
    assert_eq!(
        s.ranges(1),
        [Range::from_bounds(
            &7i32.to_le_bytes(),
            &7i32.to_le_bytes(),
            false
        )]
    );
    assert!(parse_subarray(schema, ";").unwrap().ranges(1).is_empty());
    assert!(parse_subarray(schema, "b").unwrap().ranges(1).is_empty());

    let err = parse_subarray(schema, "a;1;2").unwrap_err().to_string();
    assert!(err.contains("3 entries for 2 dimensions"), "{err}");
    let err = parse_subarray(schema, "*;x:3").unwrap_err().to_string();
    assert!(
        err.contains("dimension i") && err.contains("INT32"),
        "{err}"
    );

    let int8 = Array::open(array_dir("dense_int8_dims")).unwrap();
    let s = parse_subarray(int8.schema(), "-4:-1;10:12").unwrap();
    assert_eq!(s.ranges(0), [Range::from_bounds(&[0xfc], &[0xff], false)]);
    let err = parse_subarray(int8.schema(), "-4:200")
        .unwrap_err()
        .to_string();
    assert!(err.contains("out of range for INT8"), "{err}");

    let floats = Array::open(array_dir("sparse_float_dims")).unwrap();
    let s = parse_subarray(floats.schema(), "-0.5:1;2:2.5").unwrap();
    assert_eq!(
        s.ranges(0),
        [Range::from_bounds(
            &(-0.5f64).to_le_bytes(),
            &1f64.to_le_bytes(),
            false
        )]
    );
    assert_eq!(
        s.ranges(1),
        [Range::from_bounds(
            &2f32.to_le_bytes(),
            &2.5f32.to_le_bytes(),
            false
        )]
    );
}

#[test]
fn fields_default_to_dimensions_then_attributes() {
    let array = Array::open(array_dir("sparse_string_dim")).unwrap();
    assert_eq!(default_fields(array.schema()), ["s", "i", "a"]);
    assert_eq!(parse_fields(array.schema(), "a, s").unwrap(), ["a", "s"]);
    let err = parse_fields(array.schema(), "a,zz")
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"zz\" is no dimension or attribute"), "{err}");
}

#[test]
fn usage_errors_name_the_option() {
    let dir = array_dir("sparse_string_dim");
    let cases: &[(&[&str], &str)] = &[
        (
            &["--format", "xml"],
            "--format takes json, csv, arrow or parquet",
        ),
        (&["--layout", "diagonal"], "--layout takes row-major"),
        (&["--at", "9..3"], "the window ends before it starts"),
        (&["--at", "soon"], "--at takes T or T1..T2"),
        (&["--key", "short"], "--key must be 32 bytes"),
        (&["--subarray", "a;b;c"], "3 entries for 2 dimensions"),
        (&["--subarray", "*;1:x"], "dimension i"),
        (
            &["--fields", "nope"],
            "\"nope\" is no dimension or attribute",
        ),
    ];
    for (args, message) in cases {
        let err = usage_error(args, &dir);
        assert!(
            err.starts_with("error: ") && err.contains(message),
            "{args:?}: {err}"
        );
    }
    let missing = tdb_testdata::root().join("nope");
    let err = usage_error(&[], &missing);
    assert!(err.contains("missing array schema"), "{err}");
    // The user's path, not the storage's root ".".
    assert!(err.contains(&missing.display().to_string()), "{err}");
    // clap's own errors (unknown options) exit 2 as well.
    let out = tdb(&["--bogus"], &dir);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn help_documents_the_subarray_syntax() {
    let out = Command::new(env!("CARGO_BIN_EXE_tdb"))
        .args(["export", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "--subarray",
        "lo:hi",
        "separated by `;`",
        "--format",
        "--budget",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}

fn expected_query(case: &str, name: &str) -> Value {
    let e: Value = serde_json::from_slice(
        &std::fs::read(tdb_testdata::root().join(case).join("expected.json")).unwrap(),
    )
    .unwrap();
    e["queries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == name)
        .unwrap()
        .clone()
}

#[test]
fn json_output_is_what_tiledb_read() {
    let dir = array_dir("sparse_string_dim");
    let out = tdb(&["--subarray", "b:d"], &dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got, expected_query("sparse_string_dim", "sub")["result"]);
}

#[test]
fn csv_output_has_a_header_and_a_row_per_cell() {
    let dir = array_dir("sparse_string_dim");
    let out = tdb(
        &["--format", "csv", "--fields", "i,s", "--subarray", "b:d"],
        &dir,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "i,s\n2,b\n3,banana\n4,cherry\n"
    );
}

/// `tdb aggregate` answers what TileDB-Py's `agg` answered on the same
/// subarray and condition (integers: exact).
#[test]
fn aggregate_prints_what_tiledb_aggregated() {
    let dir = array_dir("aggregates_sparse");
    let out = tdb_cmd(
        "aggregate",
        &[
            "--agg",
            "i:count,sum,min,max",
            "--agg",
            "n:null_count,sum",
            "--condition",
            "i > 0 and f < 5.0",
        ],
        &dir,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let want = &expected_query("aggregates_sparse", "cond")["aggregates"];
    for (field, op) in [
        ("i", "count"),
        ("i", "sum"),
        ("i", "min"),
        ("i", "max"),
        ("n", "null_count"),
        ("n", "sum"),
    ] {
        assert_eq!(got[field][op], want[field][op], "{field}.{op}");
    }
}

/// A sparse array is aggregated unordered unless told otherwise, as
/// TileDB-Py's queries are: under FLOAT_SCALE, TileDB answers the tiles its
/// merge takes whole from their metadata (the values as written), which a
/// row-major read does not; both orders give TileDB's answer for them.
#[test]
fn aggregate_reads_a_sparse_array_unordered_as_tiledb_py() {
    let case = "sparse_float_scale_tiles_merged";
    let dir = array_dir(case);
    let run = |extra: &[&str]| -> Value {
        let mut args = vec!["--agg", "f:count,sum,max"];
        args.extend_from_slice(extra);
        let out = tdb_cmd("aggregate", &args, &dir);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let close = |a: &Value, b: &Value| {
        let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    };
    let unordered = &expected_query(case, "agg")["aggregates"]["f"];
    let plain = run(&[]);
    for op in ["count", "sum", "max"] {
        assert!(
            close(&plain["f"][op], &unordered[op]),
            "{op}: {plain} against {unordered}"
        );
    }
    // Row-major: every tile from its cells, quantized.
    let row = run(&["--layout", "row-major"]);
    assert!(!close(&row["f"]["max"], &unordered["max"]), "{row}");
    let bad = tdb_cmd(
        "aggregate",
        &["--agg", "f:sum", "--layout", "diagonal"],
        &dir,
    );
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn aggregate_usage_errors_name_the_option() {
    let dir = array_dir("aggregates_sparse");
    for (args, needle) in [
        (&["--agg", "i"][..], "FIELD:OP"),
        (
            &["--agg", "zz:sum"][..],
            "\"zz\" is no dimension or attribute",
        ),
        (&["--agg", "i:median"][..], "\"median\" is no aggregate"),
    ] {
        let out = tdb_cmd("aggregate", args, &dir);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // A type the op does not apply to is the query's error, naming both.
    let out = tdb_cmd("aggregate", &["--agg", "s:mean"], &dir);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("aggregate mean of `s`"), "{err}");
}

/// A dense array whose domain is 16 × 2^31 cells (tiledb-vector-search
/// writes such): an export without `--subarray` reads the non-empty domain
/// (the cells written), says so, and a dense array with nothing written
/// exports no cell.
#[test]
fn a_dense_export_without_a_subarray_reads_what_was_written() {
    use tdb::{ArraySchema, Datatype, FieldBuffer, Subarray, WriteSpec};
    use tdb_schema::{AttributeBuilder, DimensionBuilder};
    fn ok(out: &Output) -> String {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
    let tmp = tempfile::tempdir().unwrap();
    let schema = ArraySchema::builder(tdb_format::ArrayType::Dense)
        .dimension(DimensionBuilder::range("v", 0i32..=15).tile_extent(16i32))
        .dimension(DimensionBuilder::range("i", 0i32..=i32::MAX - 1).tile_extent(1024i32))
        .attribute(AttributeBuilder::new("a", Datatype::Float32))
        .build()
        .unwrap();
    let range = |lo: i32, hi: i32| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
    let written = tmp.path().join("written");
    let array = Array::create(&written, &schema).unwrap();
    let mut sub = Subarray::new(2);
    sub.add_range(0, range(0, 15));
    sub.add_range(1, range(10, 13));
    let mut a = FieldBuffer::new("a", Datatype::Float32, 1, false);
    a.data = (0..64).flat_map(|i| (i as f32).to_le_bytes()).collect();
    array
        .write(WriteSpec::new(vec![a]).with_subarray(sub))
        .unwrap();
    let out = tdb(&["--format", "csv"], &written);
    let csv = ok(&out);
    assert_eq!(csv.lines().count(), 1 + 64, "{csv}");
    assert!(csv.lines().nth(1).unwrap().starts_with("0,10,"), "{csv}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("non-empty domain (64 cells of the domain's 34359738352)"),
        "{said}"
    );

    let empty = tmp.path().join("empty");
    Array::create(&empty, &schema).unwrap();
    let out = tdb(&["--format", "csv"], &empty);
    assert_eq!(ok(&out), "v,i,a\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing was written"));
    let json = ok(&tdb(&["--format", "json"], &empty));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["num_cells"], 0, "{json}");
    assert_eq!(v["fields"].as_object().unwrap().len(), 3, "{json}");
}

/// `--label NAME=RANGES` reads by label ranges: the cells TileDB read for
/// `dim_labels_dense`'s `lx_multi_ky` and `dim_labels_sparse`'s
/// `lx_range`; a range holding no label and an unknown label are refused.
#[test]
fn labels_select_the_cells_tiledb_read() {
    let dense = array_dir("dim_labels_dense");
    let out = tdb(
        &[
            "--label",
            "lx=0.26:2.5,5.0:6.0",
            "--label",
            "ky=15:45",
            "--fields",
            "a",
        ],
        &dense,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let want = expected_query("dim_labels_dense", "lx_multi_ky")["result"].clone();
    assert_eq!(got["fields"]["a"], want["fields"]["a"]);
    assert_eq!(got["num_cells"], want["num_cells"]);
    let sparse = array_dir("dim_labels_sparse");
    let out = tdb(&["--label", "lx=-30:3", "--fields", "x,y,a"], &sparse);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        got,
        expected_query("dim_labels_sparse", "lx_range")["result"]
    );
    let out = tdb(&["--label", "lx=0.3:0.4"], &dense);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("holds no label"), "{e}");
    let e = usage_error(&["--label", "nope=1"], &dense);
    assert!(e.contains("labels: lx, tx, ky, sy"), "{e}");
    let e = usage_error(&["--label", "lx"], &dense);
    assert!(e.contains("NAME=RANGES"), "{e}");
}
