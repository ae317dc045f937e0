//! `Array::attribute_bounds` on every fixture TileDB wrote: the bounds the
//! fragments' summaries give hold TileDB's own min and max of each
//! attribute over the whole array now (its aggregate answers in
//! expected.json), and are tight where nothing was overwritten, deleted or
//! left unwritten.

use tdb::{Array, OpenOptions};
use tdb_format::Scalar;

fn value(datatype: tdb_format::Datatype, bytes: &[u8]) -> f64 {
    match Scalar::decode(datatype, bytes).expect("a numeric bound") {
        Scalar::Int(v) => v as f64,
        Scalar::UInt(v) => v as f64,
        Scalar::Float(v) => v,
        Scalar::Bool(v) => f64::from(u8::from(v)),
    }
}

#[test]
fn bounds_hold_tiledbs_min_and_max_of_every_fixture() {
    let (mut checked, mut tight) = (0, 0);
    for object in tdb_testdata::objects() {
        let Some(expected) = &object.expected else {
            continue;
        };
        // Aggregates over the whole array now, no condition.
        let whole = expected["queries"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|q| {
                q["subarray"].is_null() && q["condition"].is_null() && q["timestamp"].is_null()
            });
        let mut options = OpenOptions::new();
        if let Some(k) = &object.key {
            options = options.key(k).unwrap();
        }
        for q in whole {
            let Some(aggs) = q["aggregates"].as_object() else {
                continue;
            };
            let array = Array::open_with(&object.dir, options.clone()).unwrap();
            for (name, answer) in aggs {
                let (Some(lo), Some(hi)) = (answer["min"].as_f64(), answer["max"].as_f64()) else {
                    continue;
                };
                let bounds = array.attribute_bounds(&[name.as_str()]).unwrap();
                let Some(attr) = array.schema().attributes.iter().find(|a| &a.name == name) else {
                    continue;
                };
                let (Some(min), Some(max)) = (&bounds[0].min, &bounds[0].max) else {
                    continue;
                };
                let (min, max) = (value(attr.datatype, min), value(attr.datatype, max));
                assert!(
                    min <= lo && hi <= max,
                    "{}: {name}: bounds [{min}, {max}] do not hold TileDB's [{lo}, {hi}]",
                    object.case
                );
                checked += 1;
                tight += usize::from(min == lo && max == hi);
            }
        }
    }
    // Loose where cells were overwritten or deleted since (aggregates_sparse's
    // i, u, f) or a dense array's fill value may show (dense_multi_chunk).
    assert!(checked >= 6, "only {checked} attributes checked");
    assert!(tight >= 2, "only {tight} of {checked} bounds tight");
}

/// Fragments without summaries (before v12) give no bounds, not wrong ones.
#[test]
fn fragments_before_v12_give_no_bounds() {
    let object = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case.starts_with("legacy/") && o.expected.is_some())
        .expect("a legacy fixture");
    let array = Array::open(&object.dir).unwrap();
    let names: Vec<&str> = array
        .schema()
        .attributes
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert!(!names.is_empty(), "{} has no attributes", object.case);
    let bounds = array.attribute_bounds(&names).unwrap();
    assert!(
        bounds.iter().all(|b| b.min.is_none() && b.max.is_none()),
        "{}",
        object.case
    );
}

#[test]
fn unknown_names_get_no_bounds() {
    let dir = tdb_testdata::root().join("aggregates_sparse/array");
    let array = Array::open(&dir).unwrap();
    let bounds = array.attribute_bounds(&["no_such_field", "s"]).unwrap();
    assert_eq!(bounds, vec![tdb::AttributeBounds::default(); 2]);
}
