//! `tdb::copy_group` copies a group's history: its metadata and member
//! commits keep their timestamps (the copy answers the same at every
//! time), member arrays and subgroups inside it are copied (a member
//! removed since included), absolute members are kept as references.

use tdb::{
    ArraySchema, Datatype, FieldBuffer, Group, MemberChange, OpenOptions, ReadSpec, WriteSpec,
};
use tdb_format::ArrayType;
use tdb_schema::{AttributeBuilder, DimensionBuilder};
use tdb_storage::MemoryStorage;

use crate::common;
use common::*;

fn at(t: u64) -> OpenOptions {
    OpenOptions::new().at(t)
}

fn array(mem: &MemoryStorage, dir: &str, values: &[i32]) {
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("d", 0i32..=(values.len() as i32 - 1)).tile_extent(2i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap();
    let a = tdb::Array::create_in(mem, dir, &schema, &[], at(5)).unwrap();
    let mut b = FieldBuffer::new("a", Datatype::Int32, 1, false);
    b.data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    a.write(WriteSpec::new(vec![b]).between(7, 7)).unwrap();
}

fn cells(storage: &MemoryStorage, dir: &str) -> Vec<u8> {
    let a = tdb::Array::open_in(storage, dir, OpenOptions::new()).unwrap();
    let got = a.read_all(ReadSpec::new(vec!["a".to_owned()])).unwrap();
    got.fields[0].data.clone()
}

fn add(uri: &str, relative: bool, name: &str) -> MemberChange {
    MemberChange::Add {
        uri: uri.into(),
        relative,
        name: Some(name.into()),
    }
}

/// Member names and the value of metadata key `k` at time `t`.
fn seen(storage: &MemoryStorage, dir: &str, t: u64) -> (Vec<String>, Option<Vec<u8>>) {
    let g = Group::open_in(storage, dir, at(t)).unwrap();
    let mut names: Vec<String> = g.members().iter().map(|m| m.key().to_owned()).collect();
    names.sort();
    (names, g.metadata().get("k").map(|v| v.bytes.clone()))
}

#[test]
fn a_group_copy_answers_the_same_at_every_time() {
    let mem = MemoryStorage::new();
    let g = Group::create_in(&mem, "g", at(10)).unwrap();
    array(&mem, "g/a", &[1, 2, 3, 4]);
    let sub = Group::create_in(&mem, "g/sub", at(10)).unwrap();
    array(&mem, "g/sub/b", &[5, 6]);
    sub.change_members(&[add("b", true, "b")]).unwrap();
    sub.write_metadata([put_int("k", 9)]).unwrap();
    g.change_members(&[
        add("a", true, "a"),
        add("sub", true, "sub"),
        add("s3://elsewhere/x", false, "ext"),
    ])
    .unwrap();
    g.write_metadata([put_int("k", 1)]).unwrap();
    let later = Group::open_in(&mem, "g", at(20)).unwrap();
    later
        .change_members(&[MemberChange::Remove("a".into())])
        .unwrap();
    later.write_metadata([put_int("k", 2)]).unwrap();

    let dst = MemoryStorage::new();
    let src = Group::open_in(&mem, "g", OpenOptions::new()).unwrap();
    let summary = tdb::copy_group(&src, &dst, "c", None).unwrap();
    assert_eq!(summary.details_files, 3);
    assert_eq!(summary.metadata_files, 3);
    assert_eq!(summary.groups, ["sub"]);
    let arrays: Vec<&str> = summary.arrays.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(arrays, ["a", "sub/b"]);

    for t in [9, 10, 15, 20, 30] {
        assert_eq!(seen(&mem, "g", t), seen(&dst, "c", t), "at {t}");
        assert_eq!(seen(&mem, "g/sub", t), seen(&dst, "c/sub", t), "at {t}");
    }
    // The removal is still there at 20, and `a` before it.
    assert_eq!(seen(&dst, "c", 20).0, ["ext", "sub"]);
    assert_eq!(seen(&dst, "c", 15).0, ["a", "ext", "sub"]);
    let ext = Group::open_in(&dst, "c", OpenOptions::new()).unwrap();
    let m = ext.members().get("ext").unwrap();
    assert_eq!((m.uri.as_str(), m.relative), ("s3://elsewhere/x", false));
    for dir in ["a", "sub/b"] {
        assert_eq!(
            cells(&mem, &format!("g/{dir}")),
            cells(&dst, &format!("c/{dir}"))
        );
    }
    // A second copy into the same place is refused, as for arrays.
    assert!(tdb::copy_group(&src, &dst, "c", None).is_err());
}

/// Group metadata a consolidation superseded but no vacuum removed is what
/// opens before the consolidation's end read: the copy keeps those files
/// and a vacuum list naming their copies by URI, as TileDB's group lists
/// do. (`group_meta_consolidated`'s list names the files by the URIs of
/// the machine TileDB wrote it on, which no checkout shares.)
#[test]
fn a_group_copy_keeps_metadata_a_consolidation_superseded() {
    let mem = MemoryStorage::new();
    Group::create_in(&mem, "g", at(1)).unwrap();
    for t in [1, 2, 3] {
        let g = Group::open_in(&mem, "g", at(t)).unwrap();
        g.write_metadata([put_int("k", t as i64), put_int(&format!("k{t}"), 1)])
            .unwrap();
    }
    let src = Group::open_in(&mem, "g", OpenOptions::new()).unwrap();
    assert!(src.consolidate_metadata().unwrap().is_some());
    let src = Group::open_in(&mem, "g", OpenOptions::new()).unwrap();
    let dst = MemoryStorage::new();
    tdb::copy_group(&src, &dst, "c", None).unwrap();
    for t in [1, 2, 3, 4] {
        let theirs = Group::open_in(&mem, "g", at(t)).unwrap();
        let ours = Group::open_in(&dst, "c", at(t)).unwrap();
        assert_eq!(ours.metadata(), theirs.metadata(), "at {t}");
    }
    // Before the consolidation's end the superseded files answer.
    let first = Group::open_in(&mem, "g", at(1)).unwrap();
    assert_eq!(first.metadata().len(), 2);
    assert_eq!(src.metadata().len(), 4);
}
