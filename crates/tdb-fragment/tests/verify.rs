//! `verify_array`: clean on every TileDB-written fixture, and each injected
//! corruption of a copy is found, named by file (and tile), never a panic.

use std::path::Path;
use tdb_fragment::{verify_array, Problem, ProblemKind};
use tdb_storage::LocalStorage;
use tdb_testdata::Object;

fn object(case: &str) -> Object {
    tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == case && o.expected.is_some())
        .unwrap_or_else(|| panic!("no case {case}"))
}

fn verify(dir: &Path, key: Option<&[u8; 32]>) -> Vec<Problem> {
    let mut problems = Vec::new();
    verify_array(&LocalStorage::new(dir), "", key, &mut |p| problems.push(p)).unwrap();
    problems
}

/// A copy of `case`'s array to corrupt.
fn copy(case: &str) -> (tempfile::TempDir, Object) {
    let o = object(case);
    let tmp = tempfile::tempdir().unwrap();
    for f in &o.files {
        let to = tmp.path().join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(o.dir.join(f), to).unwrap();
    }
    (tmp, o)
}

fn kinds(problems: &[Problem]) -> Vec<ProblemKind> {
    problems.iter().map(|p| p.kind).collect()
}

#[test]
fn every_fixture_array_is_clean() {
    let (mut n, mut tiles, mut bytes) = (0, 0, 0);
    let mut dirty = Vec::new();
    for o in tdb_testdata::objects() {
        let is_array = o
            .files
            .iter()
            .any(|f| f.starts_with("__schema/") || f == "__array_schema.tdb");
        if !is_array {
            continue;
        }
        let mut problems = Vec::new();
        let report = verify_array(&LocalStorage::new(&o.dir), "", o.key.as_ref(), &mut |p| {
            problems.push(p)
        })
        .unwrap();
        for p in problems {
            dirty.push(format!("{} ({}): {p}", o.case, o.dir.display()));
        }
        tiles += report.tiles;
        bytes += report.bytes_read;
        n += 1;
    }
    eprintln!("{n} arrays, {tiles} tiles, {bytes} bytes read");
    assert!(dirty.is_empty(), "{}", dirty.join("\n"));
    assert!(n > 150, "{n} arrays");
    assert!(tiles > 1800, "{tiles} tiles");
}

#[test]
fn uncommitted_fragment_is_flagged() {
    let (tmp, o) = copy("sparse_2d_int");
    let wrt = o.files.iter().find(|f| f.ends_with(".wrt")).unwrap();
    std::fs::remove_file(tmp.path().join(wrt)).unwrap();
    let problems = verify(tmp.path(), None);
    assert_eq!(kinds(&problems), [ProblemKind::UncommittedFragment]);
    assert!(problems[0].file.starts_with("__fragments/"), "{problems:?}");
}

#[test]
fn missing_fragment_directory_is_an_orphaned_commit() {
    let (tmp, o) = copy("sparse_2d_int");
    let frag = o
        .files
        .iter()
        .find(|f| f.starts_with("__fragments/"))
        .unwrap();
    let frag_dir = Path::new(frag).parent().unwrap();
    std::fs::remove_dir_all(tmp.path().join(frag_dir)).unwrap();
    let problems = verify(tmp.path(), None);
    assert_eq!(kinds(&problems), [ProblemKind::OrphanedCommit]);
    assert_eq!(Path::new(&problems[0].file), frag_dir);
}

#[test]
fn unknown_file_is_flagged() {
    let (tmp, _) = copy("sparse_2d_int");
    std::fs::write(tmp.path().join("notes.txt"), b"hello").unwrap();
    let problems = verify(tmp.path(), None);
    assert_eq!(kinds(&problems), [ProblemKind::UnknownFile]);
    assert_eq!(problems[0].file, "notes.txt");
}

#[test]
fn a_directory_that_is_no_array_is_an_error_not_a_report() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("notes.txt"), b"hello").unwrap();
    let err = verify_array(&LocalStorage::new(tmp.path()), "", None, &mut |_| {
        panic!("no problem should be reported")
    })
    .unwrap_err();
    assert!(err.to_string().contains("not a TileDB array"), "{err}");
}
