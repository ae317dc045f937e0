//! Cell and metadata makers the facade's tests share.
#![allow(dead_code)]

use tdb::{Datatype, FieldBuffer, MetadataEntry, MetadataValue, Range};

/// A non-nullable INT32 field of these cells.
pub fn ints(name: &str, v: &[i32]) -> FieldBuffer {
    let mut b = FieldBuffer::new(name, Datatype::Int32, 1, false);
    b.data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    b
}

/// A non-nullable INT64 field of these cells.
pub fn ints64(name: &str, v: &[i64]) -> FieldBuffer {
    let mut b = FieldBuffer::new(name, Datatype::Int64, 1, false);
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

/// A copy of fixture `case` without TileDB's fragment spanning `t1..=t2`
/// (its directory, commit and vacuum list): the array as it was before
/// TileDB merged it. Returns the copy and TileDB's fragment, saved.
pub fn before_merge(case: &str, t1: u64, t2: u64) -> (tempfile::TempDir, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tdb_testdata::root().join(case).join("array");
    tdb_testdata::copy_dir(&src, tmp.path()).unwrap();
    let prefix = format!("__{t1}_{t2}_");
    let saved = tempfile::tempdir().unwrap();
    let mut found = false;
    for dir in ["__fragments", "__commits"] {
        for e in std::fs::read_dir(tmp.path().join(dir)).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with(&prefix) {
                continue;
            }
            if dir == "__fragments" {
                tdb_testdata::copy_dir(&e.path(), saved.path()).unwrap();
                std::fs::remove_dir_all(e.path()).unwrap();
                found = true;
            } else {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
    }
    assert!(found, "{case} has no fragment {prefix}*");
    (tmp, saved)
}

/// Consolidates the array at `dir` with TileDB's defaults (and `purge`)
/// and checks the one merged fragment spans `t1..=t2` and is TileDB's;
/// first on a copy under a budget that reads two inputs at a time, so a
/// merge of more goes in levels (groups merged into runs, then the runs),
/// which must write the same bytes.
pub fn merge_matches(
    dir: &std::path::Path,
    theirs: &std::path::Path,
    purge: bool,
    span: (u64, u64),
) {
    let small = tempfile::tempdir().unwrap();
    tdb_testdata::copy_dir(dir, small.path()).unwrap();
    for (at, budget) in [(small.path(), 1 << 20), (dir, tdb::DEFAULT_BUDGET)] {
        let a = tdb::Array::open(at).unwrap();
        let mut selection = tdb::FragmentSelection::default();
        selection.purge_deleted_cells = purge;
        let done = a.consolidate_fragments(&selection, budget).unwrap();
        assert_eq!(done.len(), 1);
        let f = &done[0].written.fragment;
        assert_eq!((f.t1, f.t2), span);
        assert_same_files(theirs, &at.join(format!("__fragments/{f}")));
    }
}

/// An error and its causes, as one line (as a user prints them).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out = format!("{out}: {s}");
        source = s.source();
    }
    out
}

/// Every field of `array` over what was written (`None`: a dense array
/// with nothing written).
pub fn whole<S: tdb::Storage>(array: &tdb::Array<S>) -> Option<tdb::ReadSpec> {
    let schema = array.schema();
    let spec = tdb::ReadSpec::new(schema.fields().map(str::to_owned).collect::<Vec<_>>());
    if schema.array_type == tdb::ArrayType::Sparse {
        return Some(spec);
    }
    Some(spec.with_subarray(array.non_empty_subarray().ok()??))
}
