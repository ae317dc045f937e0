//! The schema of every corpus object parses, (v22 and later) writes back
//! byte for byte, and refuses every truncation. That the parsed schemas say
//! what TileDB says is `tdb-cli`'s `tests/schema.rs` (the JSON summary).

use tdb_format::single_generic_tile;
use tdb_schema::ArraySchema;
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
    // The corpus holds every version from TileDB 1.4 (v1, TileDB's own
    // input) and 1.5 (v2) to 2.30 (v22).
    assert_eq!(versions, (1..=22).collect());
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

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let mut n = 0;
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
            n += 1;
        }
    }
    assert!(n > 100, "only {n} schema files");
}

/// Every enumeration file of the corpus parses, writes back TileDB's
/// bytes, and (as a file) reads back.
#[test]
fn enumeration_files_write_back_tiledb_bytes() {
    let mut n = 0;
    for object in tdb_testdata::objects() {
        for file in object
            .files
            .iter()
            .filter(|f| f.starts_with("__schema/__enumerations/"))
        {
            let bytes = object.read(file);
            let tile = single_generic_tile(&bytes).unwrap();
            let tiledb = tdb_tile::read_generic_tile(file, &tile, object.key.as_ref()).unwrap();
            let e = tdb_schema::Enumeration::from_file(file, &bytes, object.key.as_ref()).unwrap();
            assert_eq!(e.write().unwrap(), tiledb, "{}/{file}", object.case);
            let again = e
                .write_file(file, tile.header.version, object.key.as_ref())
                .unwrap();
            let back = tdb_schema::Enumeration::from_file(file, &again, object.key.as_ref());
            assert_eq!(back.unwrap(), e);
            n += 1;
        }
    }
    assert!(n >= 2, "only {n} enumeration files");
}

/// Every dimension label of the corpus: the schema TileDB made for the
/// label's own array is the one [`tdb_schema::DimensionLabel::array_schema`]
/// makes (given the attribute's filters, which the parent schema does not
/// record), byte for byte.
#[test]
fn label_arrays_have_the_schemas_tiledb_makes() {
    let mut n = 0;
    for object in tdb_testdata::objects() {
        let Some(latest) = schema_files(&object).last().cloned() else {
            continue;
        };
        let parent = parse(&object, &latest);
        for label in &parent.dimension_labels {
            let prefix = format!("{}/__schema/", label.uri);
            let file = object
                .files
                .iter()
                .find(|f| f.strip_prefix(&prefix).is_some_and(|n| !n.contains('/')))
                .unwrap_or_else(|| panic!("{}: no schema for {}", object.case, label.name));
            let theirs = parse(&object, file);
            let filters = theirs.attributes[0].filters.clone();
            let dim = &parent.domain.dimensions[label.dimension as usize];
            let ours = label.array_schema(dim, None, filters).unwrap();
            let bytes = object.read(file);
            let tile = single_generic_tile(&bytes).unwrap();
            let tiledb = tdb_tile::read_generic_tile(file, &tile, object.key.as_ref()).unwrap();
            assert!(
                ours.write().unwrap() == tiledb,
                "{}: label {}: schemas differ:\nours {ours:?}\ntheirs {theirs:?}",
                object.case,
                label.name
            );
            n += 1;
        }
    }
    assert!(n >= 5, "only {n} labels in the corpus");
}
