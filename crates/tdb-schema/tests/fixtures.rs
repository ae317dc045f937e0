//! The schema of every corpus object, parsed, compared with TileDB's own
//! summary, and (v22 and later) written back byte for byte.

mod common;

use common::{
    latest_schema,
    summary::{enumeration, summary},
};
use serde_json::Value;
use tdb_format::single_generic_tile;
use tdb_schema::{ArraySchema, Enumeration};
use tdb_testdata::Object;

/// Every schema file of an object (all of `__schema/`, not only the latest).
fn schema_files(object: &Object) -> Vec<String> {
    object
        .files
        .iter()
        .filter(|f| {
            f.as_str() == "__array_schema.tdb"
                || f.strip_prefix("__schema/")
                    .is_some_and(|n| !n.contains('/'))
        })
        .cloned()
        .collect()
}

fn parse(object: &Object, file: &str) -> ArraySchema {
    let label = format!("{}/{file}", object.case);
    ArraySchema::from_file(&label, &object.read(file), object.key.as_ref())
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_schema_file_parses() {
    let mut versions = std::collections::BTreeSet::new();
    let mut n = 0;
    for object in tdb_testdata::objects() {
        for file in schema_files(&object) {
            versions.insert(parse(&object, &file).version.get());
            n += 1;
        }
    }
    assert!(n > 100, "only {n} schema files");
    // The corpus holds every version from TileDB 1.5 (v2) to 2.30 (v22).
    assert_eq!(versions, (2..=22).collect());
}

#[test]
fn v22_schemas_write_back_tiledb_bytes() {
    let mut n = 0;
    for object in tdb_testdata::objects() {
        for file in schema_files(&object) {
            let schema = parse(&object, &file);
            if schema.version.get() < 22 {
                continue;
            }
            let bytes = object.read(&file);
            let tile = single_generic_tile(&bytes).unwrap();
            let tiledb = tdb_tile::read_generic_tile(&file, &tile, object.key.as_ref()).unwrap();
            let ours = schema.write().unwrap();
            assert!(
                ours == tiledb,
                "{}/{file}: written bytes differ",
                object.case
            );
            n += 1;
        }
    }
    assert!(n > 50, "only {n} v22 schemas");
}

fn compare(case: &str, ours: Value, expected: Value, failures: &mut Vec<String>) {
    if ours != expected {
        let keys = expected.as_object().unwrap().keys();
        let diff: Vec<String> = keys
            .filter(|k| ours[k.as_str()] != expected[k.as_str()])
            .map(|k| {
                format!(
                    "  {k}: ours {} expected {}",
                    ours[k.as_str()],
                    expected[k.as_str()]
                )
            })
            .collect();
        failures.push(format!("{case}:\n{}", diff.join("\n")));
    }
}

#[test]
fn summaries_match_expected_json() {
    let mut failures = Vec::new();
    let mut n = 0;
    let objects = tdb_testdata::objects();
    for object in &objects {
        let Some(expected) = &object.expected else {
            continue;
        };
        if expected["kind"] == "group" {
            continue;
        }
        let file = latest_schema(object).expect("an array has a schema");
        let schema = parse(object, &file);
        // Listed as TileDB's expectation pass lists them: in the order
        // attributes first refer to them.
        let mut referenced: Vec<&str> = Vec::new();
        for name in schema
            .attributes
            .iter()
            .filter_map(|a| a.enumeration.as_deref())
        {
            if !referenced.contains(&name) {
                referenced.push(name);
            }
        }
        let enumerations = referenced
            .iter()
            .map(|name| {
                schema
                    .enumerations
                    .iter()
                    .find(|e| e.name == *name)
                    .expect(name)
            })
            .map(|e| {
                let file = format!("__schema/__enumerations/{}", e.path);
                let bytes = object.read(&file);
                let label = format!("{}/{file}", object.case);
                let e = Enumeration::from_file(&label, &bytes, object.key.as_ref()).unwrap();
                enumeration(&e)
            })
            .collect();
        let ours = summary(&schema, enumerations);
        compare(
            &object.case,
            ours,
            expected["schema"].clone(),
            &mut failures,
        );
        n += 1;
    }
    assert!(n > 100, "only {n} cases");
    assert!(
        failures.is_empty(),
        "{} of {n} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    for object in tdb_testdata::objects() {
        for file in schema_files(&object) {
            let bytes = object.read(&file);
            let tile = single_generic_tile(&bytes).unwrap();
            let data = tdb_tile::read_generic_tile(&file, &tile, object.key.as_ref()).unwrap();
            for cut in 0..data.len() {
                assert!(
                    ArraySchema::parse(&file, &data[..cut]).is_err(),
                    "{}/{file}: {cut} bytes parsed",
                    object.case
                );
            }
        }
    }
}
