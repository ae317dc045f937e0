//! Cell and metadata makers the facade's tests share.
#![allow(dead_code)]

use tdb::{Datatype, FieldBuffer, MetadataEntry, MetadataValue, Range};

/// A non-nullable INT32 field of these cells.
pub fn ints(name: &str, v: &[i32]) -> FieldBuffer {
    let mut b = FieldBuffer::new(name, Datatype::Int32, 1, false);
    b.data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    b
}

/// An INT32 range `[lo, hi]`.
pub fn range(lo: i32, hi: i32) -> Range {
    Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false)
}

/// One INT64 metadata value.
pub fn int_value(v: i64) -> MetadataValue {
    MetadataValue::new(Datatype::Int64, 1, v.to_le_bytes().to_vec()).expect("one value")
}

/// `key` set to one INT64.
pub fn put_int(key: &str, v: i64) -> MetadataEntry {
    MetadataEntry::Put {
        key: key.into(),
        value: int_value(v),
    }
}

/// The files of directory `ours` are those of `theirs` (TileDB's), name
/// for name and byte for byte.
pub fn assert_same_files(theirs: &std::path::Path, ours: &std::path::Path) {
    let names = |dir: &std::path::Path| -> Vec<String> {
        let mut n: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        n.sort();
        n
    };
    let files = names(theirs);
    assert_eq!(names(ours), files, "the files differ from TileDB's");
    for name in files {
        let (t, o) = (
            std::fs::read(theirs.join(&name)).unwrap(),
            std::fs::read(ours.join(&name)).unwrap(),
        );
        assert!(t == o, "{name} differs from TileDB's");
    }
}
