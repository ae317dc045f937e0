//! Fault injection: a change stopped at its N-th write, for every N,
//! leaves an array (or group) that opens, shows exactly what committed
//! before, and reads it as before. For dense and sparse writes, metadata
//! and deletes the change made again afterwards commits whole; a group
//! change is two commits (members, then metadata), and a stop between them
//! keeps the first whole and nothing of the second.

use tdb::{
    ArraySchema, Datatype, FieldBuffer, Group, MemberChange, MetadataEntry, OpenOptions, ReadSpec,
    Subarray, WriteSpec,
};
use tdb_format::ArrayType;
use tdb_schema::{AttributeBuilder, DimensionBuilder};
use tdb_storage::{FaultyStorage, MemoryStorage};

use crate::common;
use common::*;

type Store = FaultyStorage<MemoryStorage>;
type Array = tdb::Array<Store>;

fn strings(name: &str, v: &[Option<&str>]) -> FieldBuffer {
    let mut b = FieldBuffer::new(name, Datatype::StringAscii, u32::MAX, true);
    let mut offsets = Vec::new();
    let mut validity = Vec::new();
    for s in v {
        offsets.push(b.data.len() as u64);
        b.data.extend_from_slice(s.unwrap_or("").as_bytes());
        validity.push(u8::from(s.is_some()));
    }
    b.offsets = Some(offsets);
    b.validity = Some(validity.into());
    b
}

fn schema(array_type: ArrayType) -> ArraySchema {
    ArraySchema::builder(array_type)
        .dimension(DimensionBuilder::range("x", 0i32..=99).tile_extent(10i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int32).nullable(true))
        .attribute(
            AttributeBuilder::new("s", Datatype::StringAscii)
                .var()
                .nullable(true),
        )
        .build()
        .unwrap()
}

fn nullable(mut b: FieldBuffer) -> FieldBuffer {
    b.validity = Some(vec![1; b.data.len() / 4].into());
    b
}

fn sparse_cells(xs: &[i32], t: u64) -> WriteSpec {
    let a: Vec<i32> = xs.iter().map(|x| x * 10).collect();
    let s: Vec<Option<&str>> = xs.iter().map(|x| (x % 3 != 0).then_some("cell")).collect();
    WriteSpec::new(vec![
        ints("x", xs),
        nullable(ints("a", &a)),
        strings("s", &s),
    ])
    .at(t)
}

fn dense_cells(lo: i32, hi: i32, t: u64) -> WriteSpec {
    let xs: Vec<i32> = (lo..=hi).collect();
    let s: Vec<Option<&str>> = xs.iter().map(|_| Some("d")).collect();
    let mut sub = Subarray::new(1);
    sub.add_range(0, range(lo, hi));
    WriteSpec::new(vec![nullable(ints("a", &xs)), strings("s", &s)])
        .with_subarray(sub)
        .at(t)
}

/// Everything a reader sees, fragment names aside (they are fresh UUIDs).
fn state(array: &Array) -> String {
    let dense = array.schema().array_type == ArrayType::Dense;
    let fields: Vec<&str> = if dense {
        vec!["a", "s"]
    } else {
        vec!["x", "a", "s"]
    };
    let mut spec = ReadSpec::new(fields);
    if dense {
        let mut sub = Subarray::new(1);
        sub.add_range(0, range(0, 29));
        spec = spec.with_subarray(sub);
    }
    let cells = array.read_all(spec).unwrap();
    let fragments: Vec<_> = array
        .fragments()
        .iter()
        .map(|f| f.file.name.timestamp_range())
        .collect();
    let metadata: Vec<_> = array
        .metadata()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}={:?}", v.scalars()))
        .collect();
    format!("fragments {fragments:?}\nmetadata {metadata:?}\ncells {cells:?}")
}

fn new_array(array_type: ArrayType, setup: &dyn Fn(&Array)) -> Array {
    let store = FaultyStorage::new(MemoryStorage::new());
    let options = OpenOptions::new().at(1000);
    let mut array = tdb::Array::create_in(store, "arr", &schema(array_type), &[], options).unwrap();
    setup(&array);
    array.reopen().unwrap();
    array
}

/// Runs `change` once to count its writes, then once per write N stopping
/// at N: each time the array must read as before, and the change made
/// again must read as the uninterrupted one did.
fn crash_at_every_write(
    array_type: ArrayType,
    setup: &dyn Fn(&Array),
    change: &dyn Fn(&Array) -> tdb::Result<()>,
) -> u64 {
    let mut array = new_array(array_type, setup);
    let before = state(&array);
    faulty(&array).fail_from(u64::MAX);
    change(&array).unwrap();
    let writes = faulty(&array).mutations();
    array.reopen().unwrap();
    let after = state(&array);
    assert_ne!(before, after, "the change changes nothing visible");
    assert!(writes >= 1);
    for n in 1..=writes {
        let mut array = new_array(array_type, setup);
        faulty(&array).fail_from(n);
        assert!(
            change(&array).is_err(),
            "write {n} of {writes} failed silently"
        );
        faulty(&array).fail_from(u64::MAX);
        array.reopen().unwrap();
        assert_eq!(state(&array), before, "stopped at write {n} of {writes}");
        change(&array).unwrap();
        array.reopen().unwrap();
        assert_eq!(state(&array), after, "redone after a stop at write {n}");
    }
    writes
}

fn faulty(array: &Array) -> &Store {
    array.storage()
}

fn sparse_setup(a: &Array) {
    a.write(sparse_cells(&[1, 5, 9, 12, 40], 10)).unwrap();
    a.put_metadata("kept", int_value(1)).unwrap();
}

#[test]
fn sparse_write_stopped_at_any_write() {
    let n = crash_at_every_write(ArrayType::Sparse, &sparse_setup, &|a| {
        a.write(sparse_cells(&[3, 5, 77, 2], 20)).map(|_| ())
    });
    // Data files of x, a (+validity), s (+offsets, validity), fragment
    // metadata, commit.
    assert!(n >= 7, "{n} writes");
}

#[test]
fn dense_write_stopped_at_any_write() {
    let setup = |a: &Array| {
        a.write(dense_cells(0, 19, 10)).unwrap();
    };
    let n = crash_at_every_write(ArrayType::Dense, &setup, &|a| {
        a.write(dense_cells(5, 24, 20)).map(|_| ())
    });
    assert!(n >= 6, "{n} writes");
}

#[test]
fn metadata_write_stopped_at_any_write() {
    crash_at_every_write(ArrayType::Sparse, &sparse_setup, &|a| {
        a.write_metadata([
            MetadataEntry::Put {
                key: "new".into(),
                value: int_value(2),
            },
            MetadataEntry::Delete { key: "kept".into() },
        ])
    });
}

#[test]
fn delete_stopped_at_any_write() {
    crash_at_every_write(ArrayType::Sparse, &sparse_setup, &|a| {
        a.delete("x > 4 and a < 100").map(|_| ())
    });
}

#[test]
fn group_changes_stopped_at_any_write() {
    let fresh = || {
        // Stamped 10, so the changes below (stamped now) replay after.
        let mut g = Group::create_in(
            FaultyStorage::new(MemoryStorage::new()),
            "g",
            OpenOptions::new().at(10),
        )
        .unwrap();
        g.change_members(&[MemberChange::Add {
            uri: "one".into(),
            relative: true,
            name: Some("first".into()),
        }])
        .unwrap();
        g.write_metadata([MetadataEntry::Put {
            key: "k".into(),
            value: int_value(1),
        }])
        .unwrap();
        g.reopen().unwrap();
        g
    };
    let seen = |g: &mut Group<Store>| {
        g.reopen().unwrap();
        let members: Vec<_> = g.members().iter().cloned().collect();
        let md: Vec<_> = g
            .metadata()
            .iter()
            .map(|(k, v)| (k.to_owned(), v.clone()))
            .collect();
        format!("{members:?} {md:?}")
    };
    let change = |g: &Group<Store>| -> tdb::Result<()> {
        g.change_members(&[
            MemberChange::Remove("first".into()),
            MemberChange::Add {
                uri: "two".into(),
                relative: true,
                name: None,
            },
        ])?;
        g.write_metadata([MetadataEntry::Delete { key: "k".into() }])
    };
    let mut g = fresh();
    let before = seen(&mut g);
    g.storage().fail_from(u64::MAX);
    change(&g).unwrap();
    let writes = g.storage().mutations();
    let after = seen(&mut g);
    assert_eq!(writes, 2);
    assert_ne!(before, after);
    for n in 1..=writes {
        let mut g = fresh();
        g.storage().fail_from(n);
        assert!(change(&g).is_err());
        g.storage().fail_from(u64::MAX);
        let seen_now = seen(&mut g);
        // Members commit before metadata: a stop at the second write keeps
        // the first change, and nothing half-made.
        if n == 1 {
            assert_eq!(seen_now, before);
        } else {
            assert!(seen_now.contains("\"two\"") && !seen_now.contains("first"));
            assert!(seen_now.contains("\"k\""), "{seen_now}");
        }
    }
}
