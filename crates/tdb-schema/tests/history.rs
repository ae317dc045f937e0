//! Schema histories of the corpus (which schema every fragment of every case
//! uses), TileDB's ordering and fallback rules on hand-made arrays, and the
//! change list of hand-made evolutions.

use std::collections::HashMap;
use tdb_fragment::{load_enumeration, load_schemas};
use tdb_schema::{
    diff, ArraySchema, Enumeration, Range, SchemaChange, SchemaHistory, LEGACY_SCHEMA_NAME,
};
use tdb_storage::LocalStorage;
use tdb_testdata::Object;

fn object(case: &str) -> Object {
    tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == case && o.expected.is_some())
        .unwrap_or_else(|| panic!("no case {case}"))
}

fn history(o: &Object) -> SchemaHistory {
    load_schemas(&LocalStorage::new(&o.dir), "", o.key.as_ref())
        .unwrap_or_else(|e| panic!("{}: {e}", o.case))
}

fn enumeration(o: &Object, path: &str) -> Enumeration {
    load_enumeration(&LocalStorage::new(&o.dir), "", path, None).unwrap()
}

fn names(h: &SchemaHistory) -> Vec<&str> {
    h.entries().iter().map(|e| e.name.as_str()).collect()
}

#[test]
fn schema_evolution_history() {
    let o = object("schema_evolution");
    let h = history(&o);
    assert_eq!(
        names(&h),
        [
            "__1_1_763c85709364db4d82355a0e40d62b6d",
            "__3_3_20f335b369628491b613b25035bffe53",
            "__5_5_0ccf8acba49908fefc4417008be20473",
        ]
    );
    assert_eq!(h.latest().name, names(&h)[2]);
    let attrs = |t| -> Vec<&str> {
        let s = &h.at(t).schema;
        s.attributes.iter().map(|a| a.name.as_str()).collect()
    };
    assert_eq!(attrs(0), ["a", "b"], "before every schema: the first");
    assert_eq!(attrs(2), ["a", "b"]);
    assert_eq!(attrs(4), ["a", "b", "c"]);
    assert_eq!(attrs(6), ["a", "c"]);
    let evolutions = h.evolutions(&mut |p| Ok(enumeration(&o, p))).unwrap();
    let changes: Vec<_> = evolutions.iter().map(|e| e.changes.clone()).collect();
    assert_eq!(
        changes,
        [
            vec![SchemaChange::AttributeAdded("c".into())],
            vec![SchemaChange::AttributeDropped("b".into())],
        ]
    );
    assert_eq!(
        (evolutions[1].from.as_str(), evolutions[1].to.as_str()),
        (names(&h)[1], names(&h)[2])
    );
}

/// Every fragment of every corpus array names the schema that TileDB's
/// open-at-timestamp rule picks at the fragment's end timestamp.
#[test]
fn every_fragment_names_the_schema_in_force() {
    let mut n = 0;
    for o in tdb_testdata::objects() {
        let Some(expected) = &o.expected else {
            continue;
        };
        if expected["kind"] != "array" {
            continue;
        }
        let h = history(&o);
        let legacy = o.files.iter().any(|f| f == LEGACY_SCHEMA_NAME);
        if legacy {
            assert_eq!(h.entries()[0].name, LEGACY_SCHEMA_NAME, "{}", o.case);
            assert!(h.entries()[0].timestamps.is_none());
        }
        for f in expected["fragments"].as_array().into_iter().flatten() {
            let name = f["array_schema_name"].as_str().unwrap();
            let t2 = f["timestamp_range"][1].as_u64().unwrap();
            assert!(h.by_name(name).is_some(), "{}: {name}", o.case);
            assert_eq!(h.at(t2).name, name, "{}: fragment at {t2}", o.case);
            n += 1;
        }
    }
    assert!(n > 100, "only {n} fragments");
}

#[test]
fn legacy_and_single_schema_arrays() {
    let pre_v10 = history(&object("legacy/2.3.3/two_fragments"));
    assert_eq!(names(&pre_v10), [LEGACY_SCHEMA_NAME]);
    assert_eq!(pre_v10.at(0).name, LEGACY_SCHEMA_NAME);
    assert_eq!(pre_v10.latest().schema.version.get(), 9);

    // Schema written at wall-clock time, fragments at 1 and 2: before the
    // schema, so the first (only) schema is used.
    let v10 = history(&object("legacy/2.6.4/two_fragments"));
    assert_eq!(v10.entries().len(), 1);
    assert_eq!(v10.at(1), v10.latest());
    assert!(v10.by_name(LEGACY_SCHEMA_NAME).is_none());
    assert!(v10.evolutions(&mut no_enumerations).unwrap().is_empty());
}

#[test]
fn enumerations_are_not_schemas_and_load_on_demand() {
    let o = object("enumeration");
    let h = history(&o);
    assert_eq!(h.entries().len(), 1);
    assert_eq!(h.latest().schema.enumerations.len(), 2);
    for r in &h.latest().schema.enumerations {
        let e = enumeration(&o, &r.path);
        assert_eq!(
            (e.name.as_str(), e.path.as_str()),
            (r.name.as_str(), r.path.as_str())
        );
    }
}

const U: &str = "0123456789abcdef0123456789abcdef";

/// A schema of the corpus written as a file, for hand-made arrays.
fn schema_bytes() -> (ArraySchema, Vec<u8>) {
    let o = object("schema_evolution");
    let s = history(&o).entries()[0].schema.clone();
    let bytes = s.write_file("test", None).unwrap();
    (s, bytes)
}

fn no_enumerations(path: &str) -> tdb_schema::Result<Enumeration> {
    panic!("no enumeration file should be read, asked for {path}")
}

#[test]
fn diff_of_hand_made_evolutions() {
    let (old, _) = schema_bytes();
    assert!(diff(&old, &old, &mut no_enumerations).unwrap().is_empty());

    let mut new = old.clone();
    let mut c = new.attributes[0].clone();
    c.name = "c".into();
    new.attributes.push(c);
    new.attributes.remove(0);
    new.capacity += 1;
    new.attributes[0].nullable = true;
    new.current_domain.ranges = Some(vec![Range::Fixed(vec![0; 8])]);
    let changes = diff(&old, &new, &mut no_enumerations).unwrap();
    assert_eq!(
        changes,
        [
            SchemaChange::Other("capacity changed".into()),
            SchemaChange::AttributeDropped("a".into()),
            SchemaChange::Other("attribute b changed".into()),
            SchemaChange::AttributeAdded("c".into()),
            SchemaChange::CurrentDomainExpanded {
                old: None,
                new: Some(vec![Range::Fixed(vec![0; 8])]),
            },
        ]
    );
}

#[test]
fn diff_of_enumerations() {
    let o = object("enumeration");
    let old = history(&o).latest().schema.clone();
    let mut files: HashMap<String, Enumeration> = HashMap::new();
    for r in &old.enumerations {
        let e = enumeration(&o, &r.path);
        files.insert(r.path.clone(), e);
    }
    // `colors` (var-length strings) gets one value appended under a new path;
    // `sizes` is dropped; `shapes` is added.
    let colors = old
        .enumerations
        .iter()
        .find(|e| e.name == "colors")
        .unwrap();
    let mut extended = files[&colors.path].clone();
    extended.path = format!("__{U}_0");
    extended
        .offsets
        .extend((extended.data.len() as u64).to_le_bytes());
    extended.data.extend(b"cyan");
    files.insert(extended.path.clone(), extended.clone());
    let mut new = old.clone();
    new.enumerations.retain(|e| e.name == "colors");
    new.enumerations[0].path = extended.path.clone();
    new.enumerations.push(tdb_schema::EnumerationRef {
        name: "shapes".into(),
        path: "shapes_path".into(),
    });
    let mut load = |p: &str| Ok(files[p].clone());
    let changes = diff(&old, &new, &mut load).unwrap();
    assert_eq!(
        changes,
        // In the order of the old schema's enumerations, then the new ones.
        [
            SchemaChange::EnumerationDropped("sizes".into()),
            SchemaChange::EnumerationExtended {
                name: "colors".into(),
                old_path: colors.path.clone(),
                new_path: extended.path.clone(),
                added: vec![b"cyan".to_vec()],
            },
            SchemaChange::EnumerationAdded {
                name: "shapes".into(),
                path: "shapes_path".into(),
            },
        ]
    );

    // A new file whose values do not start with the old ones is no extension.
    let mut replaced = files[&colors.path].clone();
    replaced.data[0] ^= 1;
    replaced.path = "replaced".into();
    files.insert("replaced".into(), replaced);
    let mut new = old.clone();
    let at = new
        .enumerations
        .iter()
        .position(|e| e.name == "colors")
        .unwrap();
    new.enumerations[at].path = "replaced".into();
    let mut load = |p: &str| Ok(files[p].clone());
    let changes = diff(&old, &new, &mut load).unwrap();
    assert!(
        matches!(&changes[..], [SchemaChange::Other(s)] if s.contains("colors")),
        "{changes:?}"
    );
}
