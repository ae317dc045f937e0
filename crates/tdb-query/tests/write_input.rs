//! Writes refuse cells that do not fit the schema with a typed error and
//! write nothing; a good write commits last and reads back.

use std::sync::Arc;
use tdb_format::{ArrayType, Datatype};
use tdb_fragment::{create_array, OpenArray, TimeWindow};
use tdb_query::{FieldBuffer, QueryError, ResultLayout, Snapshot, Subarray, WriteSpec};
use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder, Range, SchemaEntry};
use tdb_storage::{ListableStorage, MemoryStorage};

fn sparse() -> ArraySchema {
    ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", 0i32..=99).tile_extent(10i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .attribute(
            AttributeBuilder::new("s", Datatype::StringAscii)
                .var()
                .nullable(true),
        )
        .build()
        .unwrap()
}

fn fixed(name: &str, datatype: Datatype, data: Vec<u8>) -> FieldBuffer {
    let mut b = FieldBuffer::new(name, datatype, 1, false);
    b.data = data;
    b
}

fn ints(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn strings(v: &[&str], validity: Vec<u8>) -> FieldBuffer {
    let mut b = FieldBuffer::new("s", Datatype::StringAscii, u32::MAX, true);
    let mut offsets = Vec::new();
    for s in v {
        offsets.push(b.data.len() as u64);
        b.data.extend_from_slice(s.as_bytes());
    }
    b.offsets = Some(offsets);
    b.validity = Some(validity.into());
    b
}

fn setup(schema: &ArraySchema) -> (MemoryStorage, SchemaEntry) {
    let storage = MemoryStorage::new();
    let entry = create_array(&storage, "arr", schema, &[], None, 1).unwrap();
    (storage, entry)
}

fn nothing_written(storage: &MemoryStorage) {
    for dir in ["arr/__fragments", "arr/__commits"] {
        assert!(
            storage.list_prefix(dir).unwrap().is_empty(),
            "{dir} written"
        );
    }
}

fn good() -> Vec<FieldBuffer> {
    vec![
        fixed("x", Datatype::Int32, ints(&[5, 1, 3])),
        fixed("a", Datatype::Int32, ints(&[50, 10, 30])),
        strings(&["e", "a", "c"], vec![1, 0, 1]),
    ]
}

#[test]
fn each_bad_input_is_refused_and_nothing_is_written() {
    let schema = sparse();
    let cases: Vec<(&str, Vec<FieldBuffer>)> = vec![
        ("outside the domain", {
            let mut f = good();
            f[0] = fixed("x", Datatype::Int32, ints(&[5, 100, 3]));
            f
        }),
        ("lengths differ", {
            let mut f = good();
            f[1] = fixed("a", Datatype::Int32, ints(&[50, 10]));
            f
        }),
        ("offsets decrease", {
            let mut f = good();
            f[2].offsets = Some(vec![0, 2, 1]);
            f
        }),
        ("null in a non-nullable field", {
            let mut f = good();
            f[1].validity = Some(vec![1, 0, 1].into());
            f
        }),
        ("duplicates not allowed", {
            let mut f = good();
            f[0] = fixed("x", Datatype::Int32, ints(&[5, 1, 5]));
            f
        }),
        ("missing attribute", good().into_iter().take(2).collect()),
        ("wrong datatype", {
            let mut f = good();
            f[1] = fixed("a", Datatype::Int64, vec![0; 24]);
            f
        }),
    ];
    for (what, fields) in cases {
        let (storage, entry) = setup(&schema);
        let err = tdb_query::write_fragment(&storage, "arr", &entry, None, &WriteSpec::new(fields))
            .expect_err(what);
        assert!(
            matches!(err, QueryError::BadInput { .. }),
            "{what}: {err:?}"
        );
        nothing_written(&storage);
    }
    // Unknown fields are named as in reads.
    let (storage, entry) = setup(&schema);
    let mut f = good();
    f.push(fixed("nope", Datatype::Int32, ints(&[1, 2, 3])));
    let err = tdb_query::write_fragment(&storage, "arr", &entry, None, &WriteSpec::new(f));
    assert!(matches!(err, Err(QueryError::UnknownField { .. })));
    nothing_written(&storage);
}

/// Coordinates are checked in blocks, runs of blocks side by side; the
/// error still names the first cell outside the domain, wherever it lies
/// (here in the second run, the third has one too).
#[test]
fn the_first_coordinate_outside_the_domain_is_named() {
    let schema = sparse();
    let n = 200_000;
    let mut x: Vec<i32> = (0..n).map(|i| i % 100).collect();
    x[70_000] = 100;
    x[150_000] = -1;
    let mut s = FieldBuffer::new("s", Datatype::StringAscii, u32::MAX, true);
    s.offsets = Some(vec![0; n as usize]);
    s.validity = Some(vec![0; n as usize].into());
    let fields = vec![
        fixed("x", Datatype::Int32, ints(&x)),
        fixed("a", Datatype::Int32, ints(&x)),
        s,
    ];
    let (storage, entry) = setup(&schema);
    let err = tdb_query::write_fragment(&storage, "arr", &entry, None, &WriteSpec::new(fields))
        .expect_err("outside the domain");
    assert!(
        err.to_string()
            .contains("cell 70000's coordinate 100 is outside the domain [0, 99]"),
        "{err}"
    );
    nothing_written(&storage);
}

#[test]
fn a_sparse_write_reads_back_sorted_and_a_dense_one_in_its_subarray() {
    let (storage, entry) = setup(&sparse());
    let spec = WriteSpec::new(good())
        .with_layout(ResultLayout::Unordered)
        .at(7);
    let w = tdb_query::write_fragment(&storage, "arr", &entry, None, &spec).unwrap();
    assert_eq!((w.cells, w.fragment.timestamp_range()), (3, (7, 7)));
    let snap = Arc::new(Snapshot::load(&storage, "arr", TimeWindow::ALL, None).unwrap());
    let spec = tdb_query::ReadSpec::new(["x", "a", "s"]).with_layout(ResultLayout::GlobalOrder);
    let mut all = tdb_query::Batch::default();
    for b in tdb_query::SyncRead::new(&storage, snap.clone(), spec).unwrap() {
        all.append(&b.unwrap());
    }
    assert_eq!(all.fields[0].data, ints(&[1, 3, 5]));
    assert_eq!(all.fields[1].data, ints(&[10, 30, 50]));
    assert_eq!(all.fields[2].data, b"ace");
    assert_eq!(all.fields[2].validity, Some(vec![0, 1, 1].into()));

    let dense = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("r", 1i32..=6).tile_extent(4i32))
        .dimension(DimensionBuilder::range("c", 1i32..=6).tile_extent(4i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap();
    let (storage, entry) = setup(&dense);
    let range = |lo: i32, hi: i32| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
    let mut sub = Subarray::new(2);
    sub.add_range(0, range(3, 5)).add_range(1, range(2, 3));
    let spec = WriteSpec::new(vec![fixed("a", Datatype::Int32, ints(&[1, 2, 3, 4, 5, 6]))])
        .with_subarray(sub.clone())
        .with_layout(ResultLayout::ColMajor);
    let w = tdb_query::write_fragment(&storage, "arr", &entry, None, &spec).unwrap();
    assert_eq!(w.tiles, 2);
    let open = OpenArray::open(&storage, "arr", TimeWindow::ALL, None).unwrap();
    assert_eq!(open.fragments().unwrap().len(), 1);
    let snap = Arc::new(Snapshot::load(&storage, "arr", TimeWindow::ALL, None).unwrap());
    let spec = tdb_query::ReadSpec::new(["a"]).with_subarray(sub);
    let mut all = tdb_query::Batch::default();
    for b in tdb_query::SyncRead::new(&storage, snap.clone(), spec).unwrap() {
        all.append(&b.unwrap());
    }
    // Given column-major (r fastest), read row-major.
    assert_eq!(all.fields[0].data, ints(&[1, 4, 2, 5, 3, 6]));
}

/// A coordinate is its bytes, as TileDB checks duplicates: -0.0 and 0.0
/// are two cells, and 0.0 twice is refused even with -0.0 between them.
#[test]
fn signed_zeros_are_two_coordinates_and_equal_bytes_a_duplicate() {
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("f", -10f64..=10.0).tile_extent(5.0))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap();
    let floats = |v: &[f64]| {
        fixed(
            "f",
            Datatype::Float64,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        )
    };
    let (storage, entry) = setup(&schema);
    let spec = WriteSpec::new(vec![
        floats(&[0.0, -0.0, 0.0]),
        fixed("a", Datatype::Int32, ints(&[1, 2, 3])),
    ])
    .with_layout(ResultLayout::Unordered);
    let err = tdb_query::write_fragment(&storage, "arr", &entry, None, &spec).unwrap_err();
    assert!(
        err.to_string().contains("does not allow duplicates"),
        "{err}"
    );
    nothing_written(&storage);
    let spec = WriteSpec::new(vec![
        floats(&[0.0, -0.0]),
        fixed("a", Datatype::Int32, ints(&[1, 2])),
    ])
    .with_layout(ResultLayout::Unordered);
    let w = tdb_query::write_fragment(&storage, "arr", &entry, None, &spec).unwrap();
    assert_eq!(w.cells, 2);
    let snap = Arc::new(Snapshot::load(&storage, "arr", TimeWindow::ALL, None).unwrap());
    let spec = tdb_query::ReadSpec::new(["f", "a"]);
    let cells: u64 = tdb_query::SyncRead::new(&storage, snap.clone(), spec)
        .unwrap()
        .map(|b| b.unwrap().num_cells)
        .sum();
    assert_eq!(cells, 2);
}
