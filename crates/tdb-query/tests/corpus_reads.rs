//! Every query of every fixture without a condition returns TileDB's cell
//! count, and TileDB's values for plain numeric fields. (The full
//! comparison of every field and encoding is `cargo xtask conformance`.)

use serde_json::Value;
use tdb_fragment::TimeWindow;
use tdb_query::{ReadSpec, ResultLayout, Snapshot, Subarray, SyncRead};
use tdb_schema::Range;
use tdb_storage::LocalStorage;

fn bound(dt: tdb_format::Datatype, v: &Value) -> Vec<u8> {
    use tdb_format::Datatype::*;
    match (dt, v) {
        (_, Value::String(s)) => s.as_bytes().to_vec(),
        (Float32, v) => (v.as_f64().unwrap() as f32).to_le_bytes().to_vec(),
        (Float64, v) => v.as_f64().unwrap().to_le_bytes().to_vec(),
        (dt, v) => {
            let x: i128 = v
                .as_i64()
                .map(i128::from)
                .unwrap_or_else(|| v.as_u64().unwrap() as i128);
            x.to_le_bytes()[..dt.size() as usize].to_vec()
        }
    }
}

#[test]
fn unconditioned_queries_match_tiledb_counts() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for obj in tdb_testdata::objects() {
        let Some(exp) = &obj.expected else { continue };
        let Some(queries) = exp["queries"].as_array() else {
            continue;
        };
        let storage = LocalStorage::new(&obj.dir);
        for q in queries {
            if !q["condition"].is_null() || q.get("result").is_none() {
                continue;
            }
            let window = match &q["timestamp"] {
                Value::Null => TimeWindow::ALL,
                Value::Array(a) => TimeWindow::new(a[0].as_u64().unwrap(), a[1].as_u64().unwrap()),
                t => TimeWindow::until(t.as_u64().unwrap()),
            };
            let name = format!("{} {}", obj.case, q["name"]);
            let snap = match Snapshot::load(&storage, "", window, obj.key.as_ref()) {
                Ok(s) => s,
                Err(e) => {
                    failures.push(format!("{name}: open: {e}"));
                    continue;
                }
            };
            let schema = snap.schema();
            let mut sub = Subarray::new(schema.domain.dimensions.len());
            if let Some(dims) = q["subarray"].as_array() {
                for (d, r) in dims.iter().enumerate() {
                    let dim = &schema.domain.dimensions[d];
                    for r in r.as_array().into_iter().flatten() {
                        let (lo, hi) = (bound(dim.datatype, &r[0]), bound(dim.datatype, &r[1]));
                        sub.add_range(d, Range::from_bounds(&lo, &hi, dim.is_var()));
                    }
                }
            }
            let fields: Vec<String> = q["dims"]
                .as_array()
                .unwrap()
                .iter()
                .chain(q["attrs"].as_array().unwrap())
                .map(|v| v.as_str().unwrap().to_owned())
                .collect();
            let layout = ResultLayout::from_name(q["layout"].as_str().unwrap()).unwrap();
            let spec = ReadSpec::new(fields.clone())
                .with_subarray(sub)
                .with_layout(layout);
            ran += 1;
            let mut all = tdb_query::Batch::default();
            let res = SyncRead::new(&storage, &snap, spec).and_then(|r| {
                for b in r {
                    all.append(&b?);
                }
                Ok(())
            });
            if let Err(e) = res {
                let mut s = format!("{name}: {e}");
                let mut src = std::error::Error::source(&e);
                while let Some(x) = src {
                    s += &format!(": {x}");
                    src = x.source();
                }
                failures.push(s);
                continue;
            }
            let want = q["result"]["num_cells"].as_u64().unwrap();
            if all.num_cells != want {
                failures.push(format!("{name}: {} cells, TileDB {want}", all.num_cells));
                continue;
            }
            let ordered = q["ordered"].as_bool().unwrap_or(true);
            for f in &fields {
                let e = &q["result"]["fields"][f];
                let buf = all.field(f).unwrap();
                let dt = buf.datatype.name();
                if buf.cell_val_num != 1 || buf.offsets.is_some() {
                    continue;
                }
                let got: Vec<Value> = match dt {
                    "INT32" => buf
                        .data
                        .chunks(4)
                        .map(|c| i32::from_le_bytes(c.try_into().unwrap()).into())
                        .collect(),
                    "INT64" => buf
                        .data
                        .chunks(8)
                        .map(|c| i64::from_le_bytes(c.try_into().unwrap()).into())
                        .collect(),
                    _ => continue,
                };
                let mut want: Vec<Value> = e["data"].as_array().unwrap().clone();
                let mut got = got;
                if !ordered {
                    want.sort_by_key(|v| v.as_i64());
                    got.sort_by_key(|v| v.as_i64());
                }
                if got != want {
                    failures.push(format!(
                        "{name}: field {f}: {:?}… TileDB {:?}…",
                        &got[..got.len().min(8)],
                        &want[..want.len().min(8)]
                    ));
                    break;
                }
            }
        }
    }
    assert!(ran > 300, "only {ran} queries ran");
    assert!(
        failures.is_empty(),
        "{} of {ran} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
