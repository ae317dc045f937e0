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

/// The path (relative to the array) of the one file of `o` ending in `name`.
fn file_of(o: &Object, name: &str) -> String {
    let mut found = o.files.iter().filter(|f| f.ends_with(name));
    let f = found
        .next()
        .unwrap_or_else(|| panic!("{}: no {name}", o.case));
    assert!(found.next().is_none(), "{}: several {name}", o.case);
    f.clone()
}

/// Tiles of the (only) fragment of the array at `dir`, from its footer.
fn tile_count(dir: &Path) -> u64 {
    use tdb_fragment::{OpenArray, TimeWindow};
    let storage = LocalStorage::new(dir);
    let array = OpenArray::open(&storage, "", TimeWindow::ALL, None).unwrap();
    let frags = array.load_fragments(&storage).unwrap();
    assert_eq!(frags.len(), 1);
    frags[0].metadata.tile_num(&array.schema().schema).unwrap()
}

fn flip_last_byte(path: &Path) {
    let mut b = std::fs::read(path).unwrap();
    *b.last_mut().unwrap() ^= 0x5a;
    std::fs::write(path, b).unwrap();
}

/// One problem, of `kind`, in `file`.
fn only(problems: &[Problem], kind: ProblemKind, file: &str) -> Problem {
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0].kind, kind, "{problems:#?}");
    assert_eq!(problems[0].file, file, "{problems:#?}");
    problems[0].clone()
}

#[test]
fn flipped_byte_in_a_checksummed_tile_is_a_tile_problem() {
    for case in ["filter_checksum_md5", "filter_checksum_sha256"] {
        let (tmp, o) = copy(case);
        let a0 = file_of(&o, "/a0.tdb");
        flip_last_byte(&tmp.path().join(&a0));
        let p = only(&verify(tmp.path(), None), ProblemKind::Tile, &a0);
        assert_eq!(p.tile, Some(tile_count(tmp.path()) - 1), "{p}");
        assert!(p.detail.contains("checksum mismatch"), "{p}");
    }
}

#[test]
fn flipped_byte_in_a_compressed_tile_is_a_tile_problem() {
    // The last byte of a GZIP (zlib) stream is its Adler-32.
    let (tmp, o) = copy("filter_gzip");
    let a0 = file_of(&o, "/a0.tdb");
    flip_last_byte(&tmp.path().join(&a0));
    let p = only(&verify(tmp.path(), None), ProblemKind::Tile, &a0);
    assert_eq!(p.tile, Some(tile_count(tmp.path()) - 1), "{p}");
}

#[test]
fn truncated_data_file_is_a_file_size_and_a_tile_problem() {
    let (tmp, o) = copy("sparse_2d_int");
    let a0 = file_of(&o, "/a0.tdb");
    let path = tmp.path().join(&a0);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 3).unwrap();
    let problems = verify(tmp.path(), None);
    assert_eq!(
        kinds(&problems),
        [ProblemKind::FileSize, ProblemKind::Tile],
        "{problems:#?}"
    );
    assert!(problems.iter().all(|p| p.file == a0), "{problems:#?}");
    assert_eq!(problems[1].tile, Some(tile_count(tmp.path()) - 1));
}

#[test]
fn missing_data_file_is_reported() {
    let (tmp, o) = copy("sparse_2d_int");
    let a0 = file_of(&o, "/a0.tdb");
    std::fs::remove_file(tmp.path().join(&a0)).unwrap();
    only(&verify(tmp.path(), None), ProblemKind::MissingFile, &a0);
}

#[test]
fn footer_cut_short_is_a_fragment_metadata_problem() {
    let (tmp, o) = copy("sparse_2d_int");
    let meta = file_of(&o, "/__fragment_metadata.tdb");
    let path = tmp.path().join(&meta);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 5).unwrap();
    only(
        &verify(tmp.path(), None),
        ProblemKind::FragmentMetadata,
        &meta,
    );
}

/// A tile offset moved by one byte: the tile before it gains a byte, the
/// tile at it starts inside the tile before. The tile offsets section is a
/// GZIP-compressed generic tile, so its bytes cannot be patched in place:
/// it is written again with `SectionData::write` (same length here, which
/// the test checks) at its range.
#[test]
fn wrong_tile_offset_is_a_tile_problem() {
    use tdb_fragment::{fragment_metadata::Section, OpenArray, SectionData, TimeWindow};
    let (tmp, o) = copy("dense_2d_row_row");
    let storage = LocalStorage::new(tmp.path());
    let array = OpenArray::open(&storage, "", TimeWindow::ALL, None).unwrap();
    let mut frag = array.load_fragments(&storage).unwrap().remove(0);
    let name = frag.file.name.to_string();
    let meta = format!("{}/__fragment_metadata.tdb", frag.file.path);
    let section = Section::TileOffsets(0);
    let range = frag.metadata.footer.section_range(section, &name).unwrap();
    let path = tmp.path().join(&meta);
    let mut bytes = std::fs::read(&path).unwrap();
    let original = &bytes[range.start as usize..range.end as usize];
    let schema = &array.schema().schema;
    let SectionData::U64s(mut offsets) = frag
        .metadata
        .load_section(section, original, None, schema)
        .unwrap()
        .clone()
    else {
        panic!("offsets")
    };
    assert!(offsets.len() >= 2, "{offsets:?}");
    offsets[1] += 1;
    let version = tdb_format::FormatVersion::new(frag.metadata.footer.version).unwrap();
    let patched = SectionData::U64s(offsets)
        .write(version, None, &name)
        .unwrap();
    assert_eq!(
        patched.len(),
        original.len(),
        "rewritten section changed length"
    );
    bytes[range.start as usize..range.end as usize].copy_from_slice(&patched);
    std::fs::write(&path, bytes).unwrap();
    let problems = verify(tmp.path(), None);
    let a0 = file_of(&o, "/a0.tdb");
    assert_eq!(
        kinds(&problems),
        [ProblemKind::Tile, ProblemKind::Tile],
        "{problems:#?}"
    );
    assert!(problems.iter().all(|p| p.file == a0), "{problems:#?}");
    assert_eq!(problems[0].tile, Some(0));
    assert_eq!(problems[1].tile, Some(1));
}

/// A flipped byte in an unfiltered dense tile (no checksum, no compressor:
/// the tile still reads) is caught by the tile metadata TileDB computed
/// over the written cells.
#[test]
fn flipped_value_in_an_unfiltered_dense_tile_disagrees_with_its_metadata() {
    let (tmp, o) = copy("dense_2d_row_row");
    let a0 = file_of(&o, "/a0.tdb");
    let path = tmp.path().join(&a0);
    let mut b = std::fs::read(&path).unwrap();
    // Tile 0: a u64 chunk count and one chunk header (3 × u32), then the
    // first cell, (1, 1), which the write gave.
    b[8 + 12] ^= 0x40;
    std::fs::write(&path, b).unwrap();
    let problems = verify(tmp.path(), None);
    assert!(!problems.is_empty());
    for p in &problems {
        assert_eq!(p.kind, ProblemKind::Mismatch, "{p}");
        assert!(p.file.ends_with("__fragment_metadata.tdb"), "{p}");
        assert_eq!(p.tile, Some(0), "{p}");
    }
    assert!(
        problems.iter().any(|p| p.detail.contains("sum")),
        "{problems:#?}"
    );
}

/// Every corruption of a fragment's metadata file (bytes flipped across
/// the whole file, cuts at many lengths) gives problems, never a panic.
#[test]
fn damaged_fragment_metadata_never_panics() {
    use bytes::Bytes;
    use tdb_storage::{MemoryStorage, WritableStorage};
    for case in [
        "sparse_string_dim",
        "dense_var_nullable",
        "legacy/2.3.3/two_fragments",
    ] {
        let o = object(case);
        let meta = o
            .files
            .iter()
            .find(|f| f.ends_with("__fragment_metadata.tdb"))
            .unwrap()
            .clone();
        let original = o.read(&meta);
        let store = MemoryStorage::new();
        for f in &o.files {
            store.write(f, Bytes::from(o.read(f))).unwrap();
        }
        let check = |bytes: Vec<u8>| {
            store.write(&meta, Bytes::from(bytes)).unwrap();
            let mut problems = 0;
            let result = verify_array(&store, "", o.key.as_ref(), &mut |_| problems += 1);
            assert!(result.is_ok(), "{case}: {result:?}");
            problems
        };
        let step = (original.len() / 150).max(1);
        let (mut flips, mut flagged) = (0, 0);
        for at in (0..original.len()).step_by(step) {
            let mut b = original.clone();
            b[at] ^= 0xff;
            flips += 1;
            flagged += usize::from(check(b) > 0);
        }
        for len in (0..original.len()).step_by(step) {
            assert!(check(original[..len].to_vec()) > 0, "{case}: cut at {len}");
        }
        // Most flips land in compressed sections or the footer and must be
        // seen; a few (padding, unused bytes) may not change anything read.
        assert!(
            flagged * 10 >= flips * 8,
            "{case}: {flagged} of {flips} flips seen"
        );
    }
}
