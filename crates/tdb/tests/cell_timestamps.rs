//! Per-cell timestamps (`__timestamps`), as fragments consolidated with
//! timestamps keep them: read from TileDB's fragments, written back with
//! cells that share coordinates (a coordinate's versions), and time travel
//! over them answers as over the fragments they came from.

use crate::common;
use common::chain;
use tdb::{Datatype, FieldBuffer, OpenOptions, ReadSpec, WriteSpec};
use tdb_format::{names::TIMESTAMPS_FIELD, ArrayType};
use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};
use tdb_storage::MemoryStorage;

fn u64s(name: &str, datatype: Datatype, v: &[u64]) -> FieldBuffer {
    let mut b = FieldBuffer::new(name, datatype, 1, false);
    b.data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    b
}

fn values(f: &FieldBuffer) -> Vec<u64> {
    f.data
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn timestamps_read_from_tiledb_and_refused_where_there_are_none() {
    let dir = tdb_testdata::root().join("consolidated_after_vacuum/array");
    let a = tdb::Array::open(&dir).unwrap();
    let got = a
        .read_all(ReadSpec::new(vec![
            "a".to_owned(),
            TIMESTAMPS_FIELD.to_owned(),
        ]))
        .unwrap();
    // The latest version of each of the 10 cells, written at 1 to 4: the
    // generator wrote `a = i + 100 t` at time t, so each cell's timestamp
    // is its value's hundreds.
    let ts = values(&got.fields[1]);
    let a_values: Vec<u64> = got.fields[0]
        .data
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as u64)
        .collect();
    assert_eq!(ts.len(), 10);
    let from_values: Vec<u64> = a_values.iter().map(|v| v / 100).collect();
    assert_eq!(ts, from_values, "values {a_values:?}");
    assert!(ts.contains(&1) && ts.contains(&4), "{ts:?}");
    let plain = tdb::Array::open(tdb_testdata::root().join("sparse_2d_int/array")).unwrap();
    let e = plain
        .read_all(ReadSpec::new(vec![TIMESTAMPS_FIELD.to_owned()]))
        .unwrap_err();
    let e = chain(&e);
    assert!(e.contains("no per-cell timestamps"), "{e}");
}

#[test]
fn versions_of_a_cell_written_with_their_timestamps_time_travel() {
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("d", 0u64..=99).tile_extent(10u64))
        .attribute(AttributeBuilder::new("a", Datatype::UInt64))
        .build()
        .unwrap();
    let mem = MemoryStorage::new();
    let a = tdb::Array::create_in(&mem, "", &schema, &[], OpenOptions::new().at(1)).unwrap();
    // Cell 5 written at 1, 2 and 3; cell 7 at 2.
    let fields = vec![
        u64s("d", Datatype::UInt64, &[5, 5, 7, 5]),
        u64s("a", Datatype::UInt64, &[50, 51, 70, 52]),
        u64s(TIMESTAMPS_FIELD, Datatype::UInt64, &[1, 2, 2, 3]),
    ];
    a.write(WriteSpec::new(fields.clone()).between(1, 3))
        .unwrap();
    // Without timestamps, the same coordinates twice are refused.
    let e = a
        .write(WriteSpec::new(fields[..2].to_vec()).at(4))
        .unwrap_err();
    let e = chain(&e);
    assert!(e.contains("duplicate") || e.contains("twice"), "{e}");
    for (t, want) in [
        (1, vec![(5, 50)]),
        (2, vec![(5, 51), (7, 70)]),
        (3, vec![(5, 52), (7, 70)]),
    ] {
        let at = tdb::Array::open_in(&mem, "", OpenOptions::new().at(t)).unwrap();
        let got = at
            .read_all(ReadSpec::new(vec!["d".to_owned(), "a".to_owned()]))
            .unwrap();
        let cells: Vec<(u64, u64)> = values(&got.fields[0])
            .into_iter()
            .zip(values(&got.fields[1]))
            .collect();
        assert_eq!(cells, want, "at {t}");
    }
    // A writer given timestamps in its first part takes them in every part.
    let mut w = a
        .writer(
            WriteSpec::new(vec![
                u64s("d", Datatype::UInt64, &[1]),
                u64s("a", Datatype::UInt64, &[1]),
                u64s(TIMESTAMPS_FIELD, Datatype::UInt64, &[5]),
            ])
            .with_layout(tdb::ResultLayout::GlobalOrder)
            .at(5),
        )
        .unwrap();
    let e = w
        .submit(&[
            u64s("d", Datatype::UInt64, &[2]),
            u64s("a", Datatype::UInt64, &[2]),
        ])
        .unwrap_err();
    let e = chain(&e);
    assert!(e.contains("per-cell timestamps"), "{e}");
}
