//! `dissect` on the corpus: the fields of every file (and of every decoded
//! generic tile) tile it exactly.

use std::collections::BTreeMap;
use tdb_format::span::Document;
use tdb_fragment::{dissect, Dissection};

/// What is wrong with how `doc`'s fields cover it, if anything.
fn problems(doc: &Document) -> Option<String> {
    let gaps = doc.unexplained();
    let overlaps = doc.overlaps();
    if gaps.is_empty() && overlaps.is_empty() {
        return None;
    }
    let shown: Vec<String> = overlaps
        .iter()
        .take(3)
        .map(|(a, b)| {
            format!(
                "{}@{}+{} / {}@{}+{}",
                a.path, a.offset, a.length, b.path, b.offset, b.length
            )
        })
        .collect();
    Some(format!(
        "unexplained {:?}, overlapping {shown:?}",
        &gaps[..gaps.len().min(4)]
    ))
}

/// Every file of every corpus object (every release, encrypted arrays with
/// their key, groups with their members, dimension-label arrays) parses
/// whole, and its fields cover each of its bytes exactly once, as do the
/// fields of every generic tile's decoded contents.
#[test]
fn every_corpus_file_is_explained_exactly() {
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut decoded = 0;
    for o in tdb_testdata::objects() {
        let storage = tdb_storage::LocalStorage::new(&o.dir);
        dissect(&storage, "", o.key.as_ref(), None, &mut |d: Dissection| {
            *by_kind.entry(d.kind).or_default() += 1;
            let mut bad = d.error.clone();
            for (i, doc) in d.documents.iter().enumerate() {
                decoded += usize::from(i > 0);
                if let Some(p) = problems(doc) {
                    let b = bad.get_or_insert_with(String::new);
                    b.push_str(&format!(" document {i} ({}): {p}", doc.what));
                }
            }
            if let Some(b) = bad {
                failures.push(format!("{} {}: {b}", o.case, d.file));
            }
        })
        .unwrap();
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // Every kind of file the corpus holds was seen (update commits and
    // unknown files are in none of its arrays).
    for kind in [
        "legacy-schema",
        "schema",
        "enumeration",
        "fragment-metadata",
        "data",
        "data-var",
        "data-validity",
        "commit-ok",
        "commit-wrt",
        "delete-commit",
        "consolidated-commits",
        "ignore",
        "vacuum",
        "consolidated-fragment-metadata",
        "metadata",
        "group-details",
        "group-marker",
        "lock",
    ] {
        assert!(by_kind.contains_key(kind), "no {kind} file in {by_kind:?}");
    }
    assert!(decoded > 1000, "{decoded} decoded generic tiles");
}

/// Bytes after what the fragment metadata says a data file holds are no
/// field's: they are listed as unexplained, and everything before them is
/// still explained.
#[test]
fn trailing_garbage_is_unexplained() {
    let (tmp, fragment, name) = copy_of("aggregates_sparse");
    let data = fragment.join("a0.tdb");
    let mut bytes = std::fs::read(&data).unwrap();
    let size = bytes.len() as u64;
    bytes.extend_from_slice(b"garbage!");
    std::fs::write(&data, &bytes).unwrap();
    let storage = tdb_storage::LocalStorage::new(tmp.path());
    let file = format!("__fragments/{name}/a0.tdb");
    let mut seen = Vec::new();
    dissect(&storage, "", None, Some(&file), &mut |d| seen.push(d)).unwrap();
    let d = &seen[0];
    assert_eq!(d.error, None);
    let doc = d.file_document().unwrap();
    assert_eq!(doc.size, size + 8);
    assert_eq!(doc.unexplained(), [(size, 8)]);
    assert!(doc.overlaps().is_empty());
    assert!(doc.leaves().iter().any(|f| f.path.ends_with("chunk data")));
}

/// A tile whose filters cannot undo it (a corrupted compressed stream) is
/// still explained chunk by chunk, with nothing left of the failed attempt.
#[test]
fn a_tile_that_cannot_be_unfiltered_is_walked_by_its_chunks() {
    let (tmp, fragment, name) = copy_of("filter_checksum_md5");
    let file = format!("__fragments/{name}/a0.tdb");
    let storage = tdb_storage::LocalStorage::new(tmp.path());
    let paths = |storage: &tdb_storage::LocalStorage| {
        let mut seen = Vec::new();
        dissect(storage, "", None, Some(&file), &mut |d| seen.push(d)).unwrap();
        let d = seen.remove(0);
        assert_eq!(d.error, None);
        let doc = d.file_document().unwrap().clone();
        assert!(doc.unexplained().is_empty() && doc.overlaps().is_empty());
        doc.leaves().into_iter().map(|f| f.path).collect::<Vec<_>>()
    };
    let whole = paths(&storage);
    assert!(
        whole.iter().any(|p| p.ends_with("MD5 checksum")),
        "{whole:?}"
    );
    // The last byte of the first tile's data: the checksum no longer holds.
    let data = fragment.join("a0.tdb");
    let mut bytes = std::fs::read(&data).unwrap();
    let (at, _) = first_chunk_data_end(&bytes);
    bytes[at - 1] ^= 0xff;
    std::fs::write(&data, &bytes).unwrap();
    let walked = paths(&storage);
    assert!(
        walked
            .iter()
            .any(|p| p == "tile[0]/chunks[0]/chunk metadata"),
        "{walked:?}"
    );
    assert!(!walked
        .iter()
        .any(|p| p.starts_with("tile[0]/") && p.ends_with("MD5 checksum")));
    assert!(walked
        .iter()
        .any(|p| p.starts_with("tile[1]/") && p.ends_with("MD5 checksum")));
}

/// The end of the first chunk's data in a data file (chunk count, three
/// sizes, metadata, data).
fn first_chunk_data_end(bytes: &[u8]) -> (usize, usize) {
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap()) as usize;
    let data = u32_at(12);
    let metadata = u32_at(16);
    (20 + metadata + data, data)
}

/// A copy of fixture `case`'s array, and its first fragment's name.
fn copy_of(case: &str) -> (tempfile::TempDir, std::path::PathBuf, String) {
    let src = tdb_testdata::root().join(case).join("array");
    let tmp = tempfile::tempdir().unwrap();
    tdb_testdata::copy_dir(&src, tmp.path()).unwrap();
    let fragment = std::fs::read_dir(tmp.path().join("__fragments"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let name = fragment.file_name().unwrap().to_str().unwrap().to_owned();
    (tmp, fragment, name)
}
