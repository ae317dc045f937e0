//! Reads into the caller's buffers (`Query::next_into`) give the cells
//! plain reads give, over every fixture, with one batch handed from read
//! to read across arrays of other fields; and they write into the
//! buffers they were given rather than new ones.

use crate::common::whole;
use tdb::{Array, ArrayType, Batch, LocalStorage, OpenOptions, ReadSpec};

#[test]
fn reads_into_handed_back_buffers_give_the_cells_of_plain_reads() {
    let mut batch = Batch::default();
    let (mut arrays, mut batches) = (0, 0);
    for object in tdb_testdata::objects() {
        let mut options = OpenOptions::new();
        if let Some(k) = &object.key {
            options = options.key(k).unwrap();
        }
        let Ok(array) = Array::open_in(LocalStorage::new(&object.dir), "", options) else {
            continue; // a group
        };
        let Some(spec) = whole(&array) else {
            continue; // nothing written
        };
        let what = format!("{} ({})", object.case, object.dir.display());
        // No read is refused (a tile held whole past the budget is held
        // over it).
        let want = (array.read_all(spec.clone())).unwrap_or_else(|e| panic!("{what}: {e}"));
        for spec in [spec.clone(), spec.with_budget(64 << 10)] {
            let mut read = array.read(spec).unwrap_or_else(|e| panic!("{what}: {e}"));
            let mut got = Batch::default();
            while let Some(next) = read.next_into(&mut batch) {
                next.unwrap_or_else(|e| panic!("{what}: {e}"));
                got.append(&batch);
                batches += 1;
            }
            assert_eq!(
                batch.num_cells, 0,
                "{what}: the end hands back an empty batch"
            );
            assert_eq!(got, want, "{what}");
        }
        arrays += 1;
    }
    assert!(
        arrays > 100 && batches > arrays,
        "{arrays} arrays, {batches} batches"
    );
}

#[test]
fn a_read_into_a_batch_writes_its_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let schema = tdb::ArraySchema::builder(ArrayType::Dense)
        .dimension(tdb::DimensionBuilder::range("x", 0i32..=9999).tile_extent(1000i32))
        .attribute(tdb::AttributeBuilder::new("a", tdb::Datatype::Int32))
        .attribute(
            tdb::AttributeBuilder::new("s", tdb::Datatype::StringAscii)
                .var()
                .nullable(true),
        )
        .build()
        .unwrap();
    let array = Array::create(dir.path(), &schema).unwrap();
    let mut s = tdb::FieldBuffer::for_field(array.schema(), "s").unwrap();
    let mut a = tdb::FieldBuffer::for_field(array.schema(), "a").unwrap();
    for i in 0..10_000i32 {
        a.push(&i.to_le_bytes(), true);
        s.push(format!("cell {i}").as_bytes(), i % 7 != 0);
    }
    array
        .write(tdb::WriteSpec::new(vec![a, s]).with_subarray({
            let mut sub = tdb::Subarray::new(1);
            sub.add_range(0, crate::common::range(0, 9999));
            sub
        }))
        .unwrap();
    let mut batch = Batch::default();
    let spec = ReadSpec::new(["a", "s"]);
    let mut read = array.read(spec.clone()).unwrap();
    assert!(read.next_into(&mut batch).is_some());
    let first = batch.clone();
    assert!(read.next_into(&mut batch).is_none());
    // The next read writes the same allocations, with the same cells: a
    // buffer made anew would have the capacity its cells need, not the
    // larger one given.
    for f in &mut batch.fields {
        f.data.reserve(1 << 20);
    }
    let at: Vec<(*const u8, usize)> = (batch.fields.iter())
        .map(|f| (f.data.as_ptr(), f.data.capacity()))
        .collect();
    let mut read = array.read(spec).unwrap();
    assert!(read.next_into(&mut batch).unwrap().is_ok());
    assert_eq!(batch, first);
    let again: Vec<(*const u8, usize)> = (batch.fields.iter())
        .map(|f| (f.data.as_ptr(), f.data.capacity()))
        .collect();
    assert_eq!(again, at, "the batch's buffers were not reused");
}
