//! TileDB 2.30 tests string ranges on the dimension a sparse tile's cell
//! order sorts first in six parts of the tile, a part's equal ends deciding
//! for its middle cells (`tdb_query`'s `tiledb_string_parts`). On tiles
//! that span several space tiles it keeps cells outside the ranges and
//! drops cells inside: tdb's reads answer as TileDB does (the conformance
//! corpus pins the cells), in one piece or cut into many along that
//! dimension under a small budget.

use serde_json::Value;
use tdb::{Array, Range, ReadSpec, Subarray};

/// `(s, a)` of every cell a read gives, sorted.
fn cells(array: &Array, spec: ReadSpec) -> Vec<(Vec<u8>, i32)> {
    let b = array.read_all(spec).unwrap();
    let s = b.field("s").unwrap().column();
    let a = b.field("a").unwrap();
    let mut out: Vec<(Vec<u8>, i32)> = a
        .data
        .chunks_exact(4)
        .enumerate()
        .map(|(i, v)| {
            (
                s.cell(i).to_vec(),
                i32::from_le_bytes(v.try_into().unwrap()),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn reads_in_one_piece_or_many_answer_as_tiledb() {
    for (case, d) in [
        ("sparse_string_parts_col", 1),
        ("sparse_string_parts_row", 0),
    ] {
        let root = tdb_testdata::root().join(case);
        let array = Array::open(root.join("array")).unwrap();
        let expected: Value =
            serde_json::from_str(&std::fs::read_to_string(root.join("expected.json")).unwrap())
                .unwrap();
        let query = |name: &str| {
            let q = expected["queries"].as_array().unwrap();
            q.iter().find(|q| q["name"] == name).unwrap()["result"].clone()
        };
        let spec = |lo: &str, hi: &str| {
            let mut sub = Subarray::new(2);
            sub.add_range(d, Range::from_bounds(lo.as_bytes(), hi.as_bytes(), true));
            ReadSpec::new(["s", "a"]).with_subarray(sub)
        };
        let all = cells(&array, ReadSpec::new(["s", "a"]));
        // Every cell whose own value lies in ["a", "b"].
        let exact: Vec<_> = all
            .iter()
            .filter(|(s, _)| s.as_slice() >= b"a".as_slice() && s.as_slice() <= b"b".as_slice())
            .cloned()
            .collect();
        let whole = cells(&array, spec("a", "b"));
        let mut tiledb: Vec<i32> = query("single")["fields"]["a"]["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap() as i32)
            .collect();
        tiledb.sort();
        let mut got: Vec<i32> = whole.iter().map(|c| c.1).collect();
        got.sort();
        assert_eq!(got, tiledb, "{case}: a whole read answers as TileDB");
        assert_ne!(
            whole, exact,
            "{case}: the fixture no longer shows TileDB's rule"
        );
        let cut = cells(&array, spec("a", "b").with_budget(2048));
        assert_eq!(cut, whole, "{case}: pieces answer as one piece");
    }
}
