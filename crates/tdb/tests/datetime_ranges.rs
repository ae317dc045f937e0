//! Datetime dimensions read by chrono ranges (the `chrono` feature): the
//! same cells TileDB returned for the numpy datetimes the fixture's
//! generator asked with.

use chrono::NaiveDate;
use tdb::{Array, ReadSpec};

fn i64s(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// `sparse_datetime_dim`'s `sub` query: TileDB-Py read
/// `np.datetime64("2005-01-01")..=np.datetime64("2021-01-01")` on a
/// DATETIME_DAY dimension.
#[test]
fn chrono_dates_select_what_tiledb_selected() {
    let dir = tdb_testdata::root().join("sparse_datetime_dim");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let query = expected["queries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "sub")
        .unwrap();
    let array = Array::open(dir.join("array")).unwrap();
    let day = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap();
    let spec = ReadSpec::new(["t", "s", "ms"])
        .range(array.schema(), "t", day(2005, 1, 1)..=day(2021, 1, 1))
        .unwrap();
    // The bounds are the day counts numpy gave TileDB.
    let bounds = &query["subarray"][0][0];
    let (lo, hi) = spec.subarray.ranges(0)[0].bounds();
    assert_eq!(i64s(lo), [bounds[0].as_i64().unwrap()]);
    assert_eq!(i64s(hi), [bounds[1].as_i64().unwrap()]);
    let got = array.read_all(spec).unwrap();
    let result = &query["result"];
    assert_eq!(got.num_cells, result["num_cells"].as_u64().unwrap());
    for name in ["t", "s", "ms"] {
        let want: Vec<i64> = result["fields"][name]["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(i64s(&got.field(name).unwrap().data), want, "{name}");
    }
    // A time of day inside the last day still selects it (counts floor);
    // a value the dimension's type cannot hold is refused, named.
    let later = day(2021, 1, 1).and_hms_opt(23, 59, 59).unwrap();
    let spec = ReadSpec::new(["t"])
        .range(
            array.schema(),
            "t",
            day(2005, 1, 1).and_hms_opt(0, 0, 0).unwrap()..=later,
        )
        .unwrap();
    assert_eq!(array.read_all(spec).unwrap().num_cells, got.num_cells);
    let err = ReadSpec::new(["t"])
        .range(array.schema(), "t", chrono::NaiveTime::MIN)
        .unwrap_err()
        .to_string();
    assert!(err.contains("DATETIME_DAY"), "{err}");
}
