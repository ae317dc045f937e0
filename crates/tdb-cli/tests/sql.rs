//! `tdb sql`: aggregates beside TileDB-Py's answers in expected.json, the
//! output formats, and the errors a user sees.

#![cfg(feature = "sql")]

use crate::common::tdb;
use serde_json::Value;

fn case(name: &str) -> (String, Value) {
    let dir = tdb_testdata::root().join(name);
    let expected = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    (
        dir.join("array").display().to_string(),
        serde_json::from_str(&expected).unwrap(),
    )
}

#[test]
fn aggregates_answer_as_tiledb_py_does() {
    let (array, expected) = case("aggregates_sparse");
    let table = format!("t={array}");
    // TileDB's count counts cells, nulls included; SQL's count(n) does not.
    let queries = [
        ("all", "", None),
        (
            "sub",
            "WHERE (x BETWEEN 0 AND 4 OR x BETWEEN 12 AND 19) AND y BETWEEN 3 AND 15",
            None,
        ),
        ("cond", "WHERE i > 0 AND f < 5.0", None),
        ("t1", "", Some("1")),
    ];
    let mut checked = 0;
    for (name, filter, at) in queries {
        let q = expected["queries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["name"] == name)
            .unwrap();
        let agg = &q["aggregates"];
        let sql = format!(
            "SELECT count(*) AS c, sum(i) AS si, min(i) AS mi, max(i) AS ma, sum(u) AS su, \
             count(n) AS cn, sum(n) AS sn FROM t {filter}"
        );
        let mut args = vec!["sql", &sql, "--table", &table, "--format", "json"];
        if let Some(t) = at {
            args.extend(["--at", t]);
        }
        let out = tdb(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
        let row = &rows[0];
        assert_eq!(row["c"], agg["i"]["count"], "{name}");
        assert_eq!(row["si"], agg["i"]["sum"], "{name}");
        assert_eq!(row["mi"], agg["i"]["min"], "{name}");
        assert_eq!(row["ma"], agg["i"]["max"], "{name}");
        assert_eq!(row["su"], agg["u"]["sum"], "{name}");
        let nulls = agg["n"]["null_count"].as_u64().unwrap();
        assert_eq!(
            row["cn"].as_u64().unwrap(),
            agg["n"]["count"].as_u64().unwrap() - nulls,
            "{name}"
        );
        assert_eq!(row["sn"], agg["n"]["sum"], "{name}");
        checked += 1;
    }
    assert_eq!(checked, 4);
}

#[test]
fn the_answer_prints_as_a_table_csv_or_json() {
    let (array, _) = case("attr_nullable");
    let table = format!("t={array}");
    let sql = "SELECT d, ni, ns FROM t ORDER BY d LIMIT 3";
    let csv = tdb(&["sql", sql, "--table", &table, "--format", "csv"]);
    assert_eq!(
        String::from_utf8_lossy(&csv.stdout),
        "d,ni,ns\n0,0,a\n1,,b\n2,2,\n"
    );
    let text = tdb(&["sql", sql, "--table", &table]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.starts_with("+---+----+----+\n| d | ni | ns |"),
        "{text}"
    );
    let none = tdb(&[
        "sql",
        "SELECT d FROM t WHERE d > 100",
        "--table",
        &table,
        "--format",
        "json",
    ]);
    assert_eq!(String::from_utf8_lossy(&none.stdout), "[]\n");
}

#[test]
fn bad_sql_and_tables_are_usage_errors() {
    let (array, _) = case("attr_nullable");
    let table = format!("t={array}");
    for (args, message) in [
        (vec!["sql", "SELEC 1", "--table", &table], "SQL"),
        (vec!["sql", "SELECT * FROM nope", "--table", &table], "nope"),
        (vec!["sql", "SELECT 1", "--table", "t"], "NAME=URI"),
        (
            vec!["sql", "SELECT 1", "--table", "t=/no/such/array"],
            "table t",
        ),
    ] {
        let out = tdb(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}
