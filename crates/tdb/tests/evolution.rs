//! Schema evolution through the facade: the new schema is stored beside
//! the old, fragments keep theirs, reads see dropped attributes gone and
//! added ones filled where older fragments lack them, extended
//! enumerations keep their old file; refused changes write nothing.

use tdb::{
    ArraySchema, Datatype, Enumeration, FieldBuffer, OpenOptions, ReadSpec, SchemaEvolution,
    WriteSpec,
};
use tdb_format::ArrayType;
use tdb_schema::{AttributeBuilder, DimensionBuilder, SchemaChange, VAR_NUM};
use tdb_storage::{ListableStorage, MemoryStorage};

use crate::common;
use common::*;

type Array = tdb::Array<MemoryStorage>;

fn colors() -> Enumeration {
    Enumeration::from_values(
        "colors",
        Datatype::StringAscii,
        VAR_NUM,
        ["red", "green", "blue"],
    )
}

fn create() -> Array {
    let colors = colors();
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", 0i32..=99).tile_extent(10i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .attribute(AttributeBuilder::new("s", Datatype::StringAscii).var())
        .attribute(AttributeBuilder::new("c", Datatype::UInt8).enumeration("colors"))
        .enumeration(colors.clone())
        .current_domain(vec![range(0, 49)])
        .build()
        .unwrap();
    Array::create_in(
        MemoryStorage::new(),
        "arr",
        &schema,
        &[colors],
        OpenOptions::new(),
    )
    .unwrap()
}

fn column(name: &str, datatype: Datatype, cells: &[&[u8]]) -> FieldBuffer {
    let var = datatype == Datatype::StringAscii;
    let mut b = FieldBuffer::new(name, datatype, if var { VAR_NUM } else { 1 }, false);
    for c in cells {
        b.push(c, true);
    }
    b
}

fn ints(v: &[i32]) -> Vec<Vec<u8>> {
    v.iter().map(|x| x.to_le_bytes().to_vec()).collect()
}

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(Vec::as_slice).collect()
}

fn schema_files(array: &Array) -> usize {
    array
        .storage()
        .list_dir("arr/__schema")
        .unwrap()
        .files
        .len()
}

#[test]
fn evolved_schemas_read_old_and_new_fragments() {
    let mut array = create();
    let (x, a) = (ints(&[1, 2]), ints(&[10, 20]));
    array
        .write(
            WriteSpec::new(vec![
                column("x", Datatype::Int32, &refs(&x)),
                column("a", Datatype::Int32, &refs(&a)),
                column("s", Datatype::StringAscii, &[b"one", b"two"]),
                column("c", Datatype::UInt8, &[&[0], &[2]]),
            ])
            .at(10),
        )
        .unwrap();
    let evolution = SchemaEvolution::new()
        .add_attribute(AttributeBuilder::new("b", Datatype::Float64).nullable(true))
        .drop_attribute("s")
        .extend_enumeration("colors", vec![b"purple".to_vec()])
        .expand_current_domain(vec![range(0, 99)]);
    let entry = array.evolve(&evolution).unwrap();
    assert_eq!(schema_files(&array), 2);
    array.reopen().unwrap();
    let s = array.schema();
    assert_eq!(
        s.attributes
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>(),
        ["a", "c", "b"]
    );
    assert_eq!(s, &entry.schema);
    // What the history says changed, and the old enumeration file kept.
    let history = &array.snapshot().open.schemas;
    let old = &history.entries()[0].schema;
    let store = array.storage();
    let mut load =
        |path: &str| Ok(tdb_fragment::load_enumeration(store, "arr", path, None).unwrap());
    let changes = tdb_schema::diff(old, s, &mut load).unwrap();
    assert!(
        changes.contains(&SchemaChange::AttributeAdded("b".into())),
        "{changes:?}"
    );
    assert!(changes.contains(&SchemaChange::AttributeDropped("s".into())));
    assert!(changes.iter().any(|c| matches!(c,
        SchemaChange::EnumerationExtended { name, added, .. }
            if name == "colors" && added == &vec![b"purple".to_vec()])));
    // A cell beyond the old current domain, with the new enumeration value.
    let (x2, a2) = (ints(&[70]), ints(&[700]));
    let mut b = FieldBuffer::new("b", Datatype::Float64, 1, true);
    b.push(&1.5f64.to_le_bytes(), true);
    array
        .write(
            WriteSpec::new(vec![
                column("x", Datatype::Int32, &refs(&x2)),
                column("a", Datatype::Int32, &refs(&a2)),
                column("c", Datatype::UInt8, &[&[3]]),
                b,
            ])
            .at(entry.timestamps.as_ref().unwrap().t2 + 1),
        )
        .unwrap();
    array.reopen().unwrap();
    let got = array.read_all(ReadSpec::new(["x", "a", "b", "c"])).unwrap();
    assert_eq!(got.num_cells, 3);
    let b = got.field("b").unwrap();
    // The old fragment has no `b`: null there, the value in the new one.
    assert_eq!(b.validity, Some(vec![0u8, 0, 1].into()));
    assert_eq!(&b.data[16..], &1.5f64.to_le_bytes());
    assert_eq!(got.field("c").unwrap().data, vec![0, 2, 3]);
    assert!(array.read_all(ReadSpec::new(["s"])).is_err());
}

#[test]
fn refused_evolutions_write_nothing() {
    let array = create();
    let cases = [
        (
            SchemaEvolution::new().drop_attribute("nope"),
            "cannot be dropped",
        ),
        (
            SchemaEvolution::new().drop_attribute("x"),
            "cannot be dropped",
        ),
        (
            SchemaEvolution::new().add_attribute(AttributeBuilder::new("a", Datatype::Int8)),
            "name \"a\" is used twice",
        ),
        (
            SchemaEvolution::new().extend_enumeration("shapes", vec![b"x".to_vec()]),
            "has none of that name",
        ),
        (
            SchemaEvolution::new().extend_enumeration("colors", vec![b"red".to_vec()]),
            "already in it",
        ),
        (
            SchemaEvolution::new().drop_enumeration("colors"),
            "attribute \"c\" uses it",
        ),
        (
            SchemaEvolution::new().expand_current_domain(vec![range(10, 99)]),
            "can only grow",
        ),
        (
            SchemaEvolution::new().add_enumeration(colors()),
            "added twice",
        ),
    ];
    for (evolution, message) in cases {
        let e = array.evolve(&evolution).unwrap_err();
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            text = format!("{text}: {s}");
            source = s.source();
        }
        assert!(text.contains(message), "{message}: {text}");
        assert_eq!(schema_files(&array), 1, "{message}");
    }
}
