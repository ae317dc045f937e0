//! Delete queries through the facade: what TileDB deletes (its quirks
//! included, as `cargo xtask interop` shows TileDB reading these commits),
//! and refusals that write nothing.

use tdb::{
    Array, ArraySchema, Datatype, FieldBuffer, MemoryStorage, OpenOptions, Range, ReadSpec,
    Subarray, WriteSpec,
};
use tdb_format::ArrayType;
use tdb_schema::{AttributeBuilder, DimensionBuilder};
use tdb_storage::ListableStorage;

fn schema(array_type: ArrayType) -> ArraySchema {
    ArraySchema::builder(array_type)
        .dimension(DimensionBuilder::range("d", 0i32..=9).tile_extent(5i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .attribute(
            AttributeBuilder::new("s", Datatype::StringAscii)
                .var()
                .nullable(true),
        )
        .build()
        .unwrap()
}

fn cells() -> Vec<FieldBuffer> {
    let mut d = FieldBuffer::new("d", Datatype::Int32, 1, false);
    let mut a = FieldBuffer::new("a", Datatype::Int32, 1, false);
    let mut s = FieldBuffer::new("s", Datatype::StringAscii, u32::MAX, true);
    let (mut offsets, mut validity) = (Vec::new(), Vec::new());
    // d: 0..4; s: "x", "", null, "yy", ""
    for (i, v) in [Some("x"), Some(""), None, Some("yy"), Some("")]
        .iter()
        .enumerate()
    {
        d.data.extend((i as i32).to_le_bytes());
        a.data.extend((i as i32 * 10 - 20).to_le_bytes());
        offsets.push(s.data.len() as u64);
        s.data.extend(v.unwrap_or("").as_bytes());
        validity.push(u8::from(v.is_some()));
    }
    s.offsets = Some(offsets);
    s.validity = Some(validity.into());
    vec![d, a, s]
}

fn array(array_type: ArrayType) -> Array<MemoryStorage> {
    // Opened at 100: the delete is stamped 100, after the write at 10.
    let opts = OpenOptions::new().at(100);
    let array =
        Array::create_in(MemoryStorage::new(), "arr", &schema(array_type), &[], opts).unwrap();
    let mut spec = WriteSpec::new(cells()).at(10);
    if array_type == ArrayType::Dense {
        spec.fields.remove(0);
        let mut sub = Subarray::new(1);
        sub.add_range(
            0,
            Range::from_bounds(&0i32.to_le_bytes(), &4i32.to_le_bytes(), false),
        );
        spec = spec.with_subarray(sub);
    }
    array.write(spec).unwrap();
    array
}

fn remaining(array: &mut Array<MemoryStorage>) -> Vec<i32> {
    array.reopen().unwrap();
    let b = array.read_all(ReadSpec::new(["d"])).unwrap();
    let mut d: Vec<i32> = b.fields[0]
        .data
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    d.sort_unstable();
    d
}

#[test]
fn a_delete_drops_matching_cells_from_its_timestamp_on() {
    let mut arr = array(ArrayType::Sparse);
    arr.delete("a < 0").unwrap();
    assert_eq!(remaining(&mut arr), [2, 3, 4]);
}

#[test]
fn a_null_test_in_a_delete_also_deletes_empty_strings_as_tiledb_does() {
    // TileDB reads `s == None` back from the commit as `s == ''`: its kept
    // cells are those with a non-empty string (see BoundCondition::stored).
    let mut arr = array(ArrayType::Sparse);
    arr.delete("s == None").unwrap();
    assert_eq!(remaining(&mut arr), [0, 3]);
}

#[test]
fn refused_deletes_write_nothing() {
    let dense = array(ArrayType::Dense);
    let sparse = array(ArrayType::Sparse);
    for (arr, condition) in [
        (&dense, "a < 0"),
        (&sparse, "nope < 0"),
        (&sparse, "a < 'text'"),
        (&sparse, "a <"),
    ] {
        let err = arr.delete(condition).unwrap_err();
        assert!(matches!(err, tdb::Error::Query(_)), "{condition}: {err:?}");
        let commits = arr.storage().list_prefix("arr/__commits").unwrap();
        assert!(
            commits.iter().all(|f| !f.key.ends_with(".del")),
            "{condition}: a delete commit was written"
        );
    }
}

#[test]
fn writes_and_deletes_of_an_array_opened_at_t_are_stamped_t() {
    let opts = OpenOptions::new().at(100);
    let arr = Array::create_in(
        MemoryStorage::new(),
        "arr",
        &schema(ArrayType::Sparse),
        &[],
        opts,
    )
    .unwrap();
    let w = arr.write(WriteSpec::new(cells())).unwrap();
    assert_eq!(w.fragment.timestamp_range(), (100, 100));
    let del = arr.delete("a < 0").unwrap();
    assert!(del.starts_with("__commits/__100_100_"), "{del}");
    // A delete removes the cells written at its own timestamp too, as
    // TileDB's (it applies a delete to fragments starting at or before it).
    let mut arr = arr;
    assert_eq!(remaining(&mut arr), [2, 3, 4]);
}

/// tdb's delete commit for TileDB's own deletes of the fixtures is the
/// commit TileDB wrote, byte for byte (same condition, same timestamp).
#[test]
fn delete_commits_are_tiledbs_bytes() {
    for (case, condition, t) in [
        ("delete_query", "a > 5", 3),
        ("delete_query_consolidated", "s == 'b'", 2),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let src = tdb_testdata::root().join(case).join("array");
        tdb_testdata::copy_dir(&src, tmp.path()).unwrap();
        let theirs = std::fs::read_dir(tmp.path().join("__commits"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "del"))
            .unwrap();
        let theirs_bytes = std::fs::read(&theirs).unwrap();
        std::fs::remove_file(&theirs).unwrap();
        let array = Array::open_with(tmp.path(), OpenOptions::new().at(t)).unwrap();
        let ours = array.delete(condition).unwrap();
        assert!(ours.starts_with(&format!("__commits/__{t}_{t}_")), "{ours}");
        let ours_bytes = std::fs::read(tmp.path().join(&ours)).unwrap();
        assert_eq!(ours_bytes, theirs_bytes, "{case}");
    }
}
