//! `tdb verify` (`tdb_fragment::verify_array`) finds nothing wrong with the
//! tile metadata tdb writes where TileDB's rules are odd: tiles whose cells
//! are all null (their min and max stored as zeros), a dense partial tile
//! of a field without min/max (nulls counted over the whole tile, fill
//! included), var-size nullable fields.

use tdb::{ArraySchema, Datatype, FieldBuffer, OpenOptions, Subarray, WriteSpec};
use tdb_format::ArrayType;
use tdb_schema::{AttributeBuilder, DimensionBuilder, Range};
use tdb_storage::MemoryStorage;

fn schema(array_type: ArrayType) -> ArraySchema {
    ArraySchema::builder(array_type)
        .dimension(DimensionBuilder::range("x", 0i32..=19).tile_extent(4i32))
        .attribute(AttributeBuilder::new("n", Datatype::Int32).nullable(true))
        .attribute(
            AttributeBuilder::new("pair", Datatype::Int32)
                .cell_val_num(2)
                .nullable(true),
        )
        .attribute(
            AttributeBuilder::new("s", Datatype::StringAscii)
                .var()
                .nullable(true),
        )
        .capacity(4)
        .build()
        .unwrap()
}

/// Cells `xs`: null everywhere but where `x % 7 == 0`.
fn cells(xs: &[i32], with_coords: bool) -> Vec<FieldBuffer> {
    let mut x = FieldBuffer::new("x", Datatype::Int32, 1, false);
    let mut n = FieldBuffer::new("n", Datatype::Int32, 1, true);
    let mut pair = FieldBuffer::new("pair", Datatype::Int32, 2, true);
    let mut s = FieldBuffer::new("s", Datatype::StringAscii, u32::MAX, true);
    for &v in xs {
        let valid = v % 7 == 0;
        x.push(&v.to_le_bytes(), true);
        n.push(&(v * 3).to_le_bytes(), valid);
        pair.push(&[v.to_le_bytes(), (-v).to_le_bytes()].concat(), valid);
        s.push(b"ab", valid);
    }
    let mut out = vec![n, pair, s];
    if with_coords {
        out.push(x);
    }
    out
}

fn problems(array: &tdb::Array<MemoryStorage>) -> Vec<String> {
    let mut found = Vec::new();
    tdb_fragment::verify_array(array.storage(), "arr", None, &mut |p| {
        found.push(p.to_string())
    })
    .unwrap();
    found
}

#[test]
fn tile_metadata_tdb_writes_verifies_clean() {
    let sparse = tdb::Array::create_in(
        MemoryStorage::new(),
        "arr",
        &schema(ArrayType::Sparse),
        &[],
        OpenOptions::new(),
    )
    .unwrap();
    // Tiles of four: 1..=4 and 8..=11 are all null.
    let xs: Vec<i32> = (1..=11).chain([14]).collect();
    sparse
        .write(WriteSpec::new(cells(&xs, true)).at(1))
        .unwrap();
    assert_eq!(problems(&sparse), Vec::<String>::new());

    let dense = tdb::Array::create_in(
        MemoryStorage::new(),
        "arr",
        &schema(ArrayType::Dense),
        &[],
        OpenOptions::new(),
    )
    .unwrap();
    // Partial tiles at both ends; 1..=3 all null.
    let mut sub = Subarray::new(1);
    sub.add_range(
        0,
        Range::from_bounds(&1i32.to_le_bytes(), &14i32.to_le_bytes(), false),
    );
    let xs: Vec<i32> = (1..=14).collect();
    dense
        .write(WriteSpec::new(cells(&xs, false)).with_subarray(sub).at(1))
        .unwrap();
    assert_eq!(problems(&dense), Vec::<String>::new());
}
