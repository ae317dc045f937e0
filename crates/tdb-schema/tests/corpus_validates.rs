//! Every schema TileDB wrote for the corpus keeps TileDB's rules.

use tdb_storage::LocalStorage;

#[test]
fn every_latest_schema_validates() {
    let mut failures = Vec::new();
    let mut n = 0;
    for object in tdb_testdata::objects() {
        if !object
            .files
            .iter()
            .any(|f| f.starts_with("__schema/") || f == "__array_schema.tdb")
        {
            continue; // a group
        }
        let storage = LocalStorage::new(&object.dir);
        let history = tdb_fragment::load_schemas(&storage, "", object.key.as_ref())
            .unwrap_or_else(|e| panic!("{}: {e}", object.case));
        let latest = history.latest();
        let label = format!("{}/{}", object.case, latest.file());
        if let Err(e) = latest.schema.validate() {
            failures.push(format!("{label}: {e}"));
        }
        n += 1;
    }
    assert!(n > 100, "only {n} schemas");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
