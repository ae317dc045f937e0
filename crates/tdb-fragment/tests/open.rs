//! Opening arrays and groups through storage: what an open sees equals what
//! TileDB reported, and the requests it makes are pinned (I/O traces), so a
//! change that adds a round trip or reads more bytes fails here.

use tdb_fragment::{OpenArray, OpenGroup, TimeWindow};
use tdb_storage::{LocalStorage, RecordingStorage};
use tdb_testdata::Object;

fn object(case: &str) -> Object {
    tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == case && o.expected.is_some())
        .unwrap_or_else(|| panic!("no case {case}"))
}

fn expected_fragments(o: &Object) -> Vec<String> {
    let e = o.expected.as_ref().unwrap();
    e["fragments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Opens `case` at "now", checks its fragments against TileDB's, loads
/// their footers and reads its metadata; returns the trace.
fn open_trace(case: &str) -> String {
    let o = object(case);
    let storage = RecordingStorage::new(LocalStorage::new(&o.dir));
    let array = OpenArray::open(&storage, "", TimeWindow::ALL, o.key.as_ref()).unwrap();
    let names: Vec<String> = array
        .fragments()
        .unwrap()
        .iter()
        .map(|f| f.file_name().to_owned())
        .collect();
    assert_eq!(names, expected_fragments(&o), "{case}");
    let loaded = array.load_fragments(&storage).unwrap();
    assert_eq!(loaded.len(), names.len());
    array.metadata(&storage).unwrap();
    storage.trace()
}

#[test]
fn every_array_opens_with_tiledbs_fragments() {
    let mut n = 0;
    for o in tdb_testdata::objects() {
        let Some(e) = &o.expected else { continue };
        if e["kind"] != "array" {
            continue;
        }
        let storage = LocalStorage::new(&o.dir);
        let array = OpenArray::open(&storage, "", TimeWindow::ALL, o.key.as_ref())
            .unwrap_or_else(|e| panic!("{}: {e}", o.case));
        let names: Vec<String> = array
            .fragments()
            .unwrap()
            .iter()
            .map(|f| f.file_name().to_owned())
            .collect();
        assert_eq!(names, expected_fragments(&o), "{}", o.case);
        n += 1;
    }
    assert!(n > 150, "{n} arrays");
}

#[test]
fn io_trace_consolidated_commits() {
    insta::assert_snapshot!(open_trace("consolidated_commits"));
}

#[test]
fn io_trace_consolidated_before_vacuum() {
    insta::assert_snapshot!(open_trace("consolidated_before_vacuum"));
}

#[test]
fn io_trace_consolidated_fragment_metadata() {
    insta::assert_snapshot!(open_trace("consolidated_fragment_meta"));
}

#[test]
fn io_trace_metadata_types() {
    insta::assert_snapshot!(open_trace("metadata_types"));
}

#[test]
fn io_trace_pre_v5_array() {
    insta::assert_snapshot!(open_trace("legacy/1.5.0/dense"));
}

#[test]
fn io_trace_v9_array_with_fragments_in_the_root() {
    insta::assert_snapshot!(open_trace("legacy/2.3.3/two_fragments"));
}

#[test]
fn io_trace_group() {
    let o = object("group_basic");
    let storage = RecordingStorage::new(LocalStorage::new(&o.dir));
    let g = OpenGroup::open(&storage, "", TimeWindow::ALL, None).unwrap();
    assert_eq!(g.members.len(), 3);
    insta::assert_snapshot!(storage.trace());
}

/// `FragmentMetadata::write_file` lays out every v22 fragment's metadata as
/// TileDB does: sections in footer order, then the footer pointing at them.
/// Unencrypted, the file is TileDB's byte for byte; encrypted (fresh IVs),
/// it reads back to the same footer fields and sections.
#[test]
fn fragment_metadata_files_write_back_in_tiledbs_layout() {
    use tdb_format::FormatVersion;
    use tdb_fragment::FragmentMetadata;
    let mut rewritten = 0;
    for o in tdb_testdata::objects() {
        let Some(e) = &o.expected else { continue };
        if e["kind"] != "array" {
            continue;
        }
        let storage = LocalStorage::new(&o.dir);
        let key = o.key.as_ref();
        let array = OpenArray::open(&storage, "", TimeWindow::ALL, key).unwrap();
        for f in array.load_fragments(&storage).unwrap() {
            if f.metadata.footer.version != FormatVersion::WRITTEN.get() || f.from_consolidated {
                continue;
            }
            let schema = &array
                .schemas
                .by_name(&f.metadata.footer.array_schema_name)
                .unwrap()
                .schema;
            let file = format!("{}/__fragment_metadata.tdb", f.file.path);
            let tiledb = o.read(&file);
            let mut meta = f.metadata.clone();
            let offsets: Vec<u64> = meta
                .footer
                .sections()
                .into_iter()
                .map(|s| meta.footer.section_offset(s).unwrap())
                .collect();
            assert_eq!(offsets.first(), Some(&0), "{}: {file}", o.case);
            assert!(
                offsets.windows(2).all(|w| w[0] < w[1]),
                "{}: {file}: {offsets:?}",
                o.case
            );
            meta.load_all_sections(&tiledb, key, schema).unwrap();
            let ours = meta.write_file(schema, key).unwrap();
            // Read back: the same footer (but offsets) and sections.
            let lookup = |n: &str| array.schemas.by_name(n).map(|e| &e.schema);
            let read =
                tdb_fragment::Footer::parse(&ours, ours.len() as u64, &lookup, 22, &f.file.path)
                    .unwrap();
            let tdb_fragment::FooterRead::Done(footer) = read else {
                panic!("{}: {file}: footer not whole", o.case)
            };
            let mut back = FragmentMetadata::new(meta.name.clone(), footer);
            back.load_all_sections(&ours, key, schema).unwrap();
            for section in back.footer.sections() {
                assert_eq!(
                    back.section(section),
                    meta.section(section),
                    "{}: {file}",
                    o.case
                );
            }
            assert_eq!(back.footer.non_empty_domain, meta.footer.non_empty_domain);
            assert_eq!(back.footer.file_sizes, meta.footer.file_sizes);
            if key.is_none() {
                assert!(ours == tiledb, "{}: {file}: not TileDB's bytes", o.case);
            }
            rewritten += 1;
        }
    }
    assert!(rewritten > 60, "{rewritten} metadata files rewritten");
}
