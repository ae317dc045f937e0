//! Query conditions on TileDB's own answers: every condition string of the
//! fixture corpus parses and binds against its array's schema, and
//! evaluating it over the cells of the same case's unconditioned query
//! selects exactly the cells TileDB returned for the conditioned query
//! (sparse), or exactly the cells TileDB did not replace by fill values
//! (dense). Where the case has no unconditioned query, every cell TileDB
//! returned as matching must satisfy the condition. Conditions on fields
//! some fragment lacks (schema evolution) are left to the conformance run:
//! TileDB judges those cells by their fragment, which the cells of a result
//! do not show; so are dense null tests across the tiles' cell order (they
//! read other cells' validity).

use serde_json::Value;
use std::collections::HashMap;
use tdb_format::{Datatype, Layout};
use tdb_query::condition::{parse_with_enumerations, BoundCondition};
use tdb_query::{Batch, FieldBuffer, VAR_NUM};
use tdb_schema::{ArraySchema, Enumeration};
use tdb_storage::LocalStorage;

/// A result field of `expected.json` as a buffer.
fn field_buffer(name: &str, f: &Value) -> FieldBuffer {
    let d = Datatype::from_name(f["datatype"].as_str().unwrap()).unwrap();
    let cvn = f["cell_val_num"].as_u64().unwrap() as u32;
    let mut b = FieldBuffer::new(name, d, cvn, f.get("validity").is_some());
    for cell in f["data"].as_array().unwrap() {
        if let Some(o) = &mut b.offsets {
            o.push(b.data.len() as u64);
        }
        let bytes =
            tdb_cli::values::to_bytes(d, cell).unwrap_or_else(|e| panic!("{name}: {cell}: {e}"));
        b.data.extend_from_slice(&bytes);
    }
    if let Some(v) = f.get("validity") {
        b.validity = Some(
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u8)
                .collect::<Vec<u8>>()
                .into(),
        );
    }
    assert_eq!(b.cell_val_num == VAR_NUM, b.offsets.is_some());
    b
}

fn batch(result: &Value) -> Batch {
    let mut b = Batch::default();
    b.num_cells = result["num_cells"].as_u64().unwrap();
    for (name, f) in result["fields"].as_object().unwrap() {
        b.fields.push(field_buffer(name, f));
    }
    b
}

struct Case {
    name: String,
    expected: Value,
    schema: ArraySchema,
    enumerations: HashMap<String, Enumeration>,
    /// Fields of the latest schema that some fragment's schema lacks.
    not_everywhere: Vec<String>,
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for o in tdb_testdata::objects() {
        let Some(expected) = o.expected.clone() else {
            continue;
        };
        let has_condition = expected["queries"]
            .as_array()
            .is_some_and(|qs| qs.iter().any(|q| q["condition"].is_string()));
        if !has_condition {
            continue;
        }
        let storage = LocalStorage::new(&o.dir);
        let history = tdb_fragment::load_schemas(&storage, "", o.key.as_ref())
            .unwrap_or_else(|e| panic!("{}: {e}", o.case));
        let entry = history.latest();
        let enumerations =
            tdb_fragment::load_referenced_enumerations(&storage, "", entry, o.key.as_ref())
                .unwrap_or_else(|e| panic!("{}: {e}", o.case))
                .into_iter()
                .map(|e| (e.name.clone(), e))
                .collect();
        let fragment_schemas: Vec<&ArraySchema> = expected["fragments"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| history.by_name(f["array_schema_name"].as_str()?))
            .map(|e| &e.schema)
            .collect();
        let not_everywhere = entry
            .schema
            .attributes
            .iter()
            .map(|a| a.name.clone())
            .filter(|n| fragment_schemas.iter().any(|s| s.attribute(n).is_none()))
            .collect();
        out.push(Case {
            name: o.case.clone(),
            expected,
            schema: entry.schema.clone(),
            enumerations,
            not_everywhere,
        });
    }
    out
}

fn bound(case: &Case, cond: &str) -> BoundCondition {
    let tree = parse_with_enumerations(cond, &case.schema, &case.enumerations)
        .unwrap_or_else(|e| panic!("{}: `{cond}`: {e}", case.name));
    BoundCondition::new(&tree, &case.schema, &case.enumerations)
        .unwrap_or_else(|e| panic!("{}: `{cond}`: {e}", case.name))
}

fn fields_of(q: &Value) -> Vec<String> {
    q["dims"]
        .as_array()
        .unwrap()
        .iter()
        .chain(q["attrs"].as_array().unwrap())
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

fn cells(result: &Value, field: &str) -> (Vec<Value>, Option<Vec<Value>>) {
    let f = &result["fields"][field];
    (
        f["data"].as_array().unwrap().clone(),
        f.get("validity").map(|v| v.as_array().unwrap().clone()),
    )
}

#[test]
fn every_corpus_condition_selects_what_tiledb_selected() {
    let cases = cases();
    let (mut exact, mut consistent, mut total) = (0, 0, 0);
    for case in &cases {
        let dense = case.expected["schema"]["array_type"] == "dense";
        let queries = case.expected["queries"].as_array().unwrap();
        for q in queries {
            // (Aggregate-only queries have no cells to compare.)
            let (Some(cond), Some(_)) = (q["condition"].as_str(), q.get("result")) else {
                continue;
            };
            let what = format!("{} / {} `{cond}`", case.name, q["name"]);
            let b = bound(case, cond);
            if b.fields().iter().any(|f| case.not_everywhere.contains(f)) {
                continue;
            }
            // Null tests of a dense read across its tiles' cell order read
            // other cells' validity where a fragment begins inside a slab
            // (`read/null_checks.rs`): also left to the conformance run.
            let across = match q["layout"].as_str() {
                Some("row-major") => case.schema.cell_order == Layout::ColMajor,
                Some("col-major") => case.schema.cell_order == Layout::RowMajor,
                _ => false,
            };
            if dense && across && case.schema.domain.dimensions.len() > 1 && b.tests_nulls() {
                continue;
            }
            total += 1;
            let result = &q["result"];
            // The unconditioned query over the same cells, holding every
            // field the conditioned one returns and the condition reads.
            let mut need = fields_of(q);
            need.extend(b.fields().iter().cloned());
            let base = queries.iter().find(|o| {
                o["condition"].is_null()
                    && o["subarray"] == q["subarray"]
                    && o["timestamp"] == q["timestamp"]
                    && o["layout"] == q["layout"]
                    && o.get("result").is_some()
                    && need.iter().all(|f| o["result"]["fields"].get(f).is_some())
            });
            if let Some(base) = base {
                let all = &base["result"];
                let cols = batch(all);
                let n = cols.num_cells as usize;
                let mut mask = vec![true; n];
                b.evaluate(&cols, &mut mask).unwrap();
                for field in result["fields"].as_object().unwrap().keys() {
                    let (data, validity) = cells(all, field);
                    let (got, got_validity) = cells(result, field);
                    if dense {
                        // Non-matching cells come back as the fill value.
                        let attr = case.expected["schema"]["attrs"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .find(|a| a["name"] == *field.as_str());
                        assert_eq!(got.len(), n, "{what}: {field}");
                        for i in 0..n {
                            if mask[i] {
                                assert_eq!(got[i], data[i], "{what}: {field} cell {i}");
                                if let (Some(v), Some(g)) = (&validity, &got_validity) {
                                    assert_eq!(g[i], v[i], "{what}: {field} validity {i}");
                                }
                            } else if let Some(attr) = attr {
                                assert_eq!(got[i], attr["fill"], "{what}: {field} cell {i}");
                                if let Some(g) = &got_validity {
                                    assert_eq!(g[i], attr["fill_validity"], "{what}: {field} {i}");
                                }
                            }
                        }
                    } else {
                        let keep = |v: &[Value]| -> Vec<Value> {
                            v.iter()
                                .zip(&mask)
                                .filter(|(_, m)| **m)
                                .map(|(x, _)| x.clone())
                                .collect()
                        };
                        assert_eq!(got, keep(&data), "{what}: {field}");
                        assert_eq!(
                            got_validity,
                            validity.as_deref().map(keep),
                            "{what}: {field} validity"
                        );
                    }
                }
                exact += 1;
            } else {
                // No unconditioned twin: what TileDB returned as matching
                // must match.
                if !b.fields().iter().all(|f| result["fields"].get(f).is_some()) {
                    continue;
                }
                let cols = batch(result);
                let n = cols.num_cells as usize;
                let mut mask = vec![true; n];
                b.evaluate(&cols, &mut mask).unwrap();
                for (i, m) in mask.iter().enumerate() {
                    let is_fill = dense
                        && result["fields"]
                            .as_object()
                            .unwrap()
                            .iter()
                            .all(|(name, f)| {
                                let attr = case.expected["schema"]["attrs"]
                                    .as_array()
                                    .unwrap()
                                    .iter()
                                    .find(|a| a["name"] == *name.as_str());
                                attr.is_none_or(|a| {
                                    f["data"][i] == a["fill"]
                                        && f.get("validity")
                                            .is_none_or(|v| v[i] == a["fill_validity"])
                                })
                            });
                    assert!(*m || is_fill, "{what}: returned cell {i} does not match");
                }
                consistent += 1;
            }
        }
    }
    eprintln!("{total} conditions: {exact} exact, {consistent} consistency-checked");
    assert!(total >= 29, "only {total} conditions in the corpus");
    assert!(exact >= 18, "only {exact} exact checks");
}
