//! Every schema TileDB wrote for the corpus keeps TileDB's rules.

mod common;

use tdb_schema::ArraySchema;

#[test]
fn every_latest_schema_validates() {
    let mut failures = Vec::new();
    let mut n = 0;
    for object in tdb_testdata::objects() {
        let Some(file) = common::latest_schema(&object) else {
            continue;
        };
        let label = format!("{}/{file}", object.case);
        let schema = ArraySchema::from_file(&label, &object.read(&file), object.key.as_ref())
            .unwrap_or_else(|e| panic!("{e}"));
        if let Err(e) = schema.validate() {
            failures.push(format!("{label}: {e}"));
        }
        n += 1;
    }
    assert!(n > 100, "only {n} schemas");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
