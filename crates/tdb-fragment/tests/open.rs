//! Opening arrays and groups through storage: what an open sees equals what
//! TileDB reported, and the requests it makes are pinned (I/O traces), so a
//! change that adds a round trip or reads more bytes fails here.

use tdb_fragment::{
    load_referenced_enumerations, OpenArray, OpenGroup, OpenStep, OpenedArray, Opening, TimeWindow,
};
use tdb_storage::{ListableStorage, LocalStorage, ReadableStorage, RecordingStorage};
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

/// Drives an opening the way an async driver may: each batch's answers
/// last first, in two pushes; returns it with the steps it took
/// (`L` a round of listings, `R` a batch of ranges).
fn open_scrambled(storage: &LocalStorage, key: Option<&[u8; 32]>) -> (OpenedArray, String) {
    let mut opening = Opening::new("", TimeWindow::ALL, key);
    let mut steps = String::new();
    loop {
        match opening.step().unwrap() {
            OpenStep::List(dirs) => {
                steps.push('L');
                let listings = dirs.iter().map(|d| storage.list_dir(d).unwrap()).collect();
                opening.push_listings(listings).unwrap();
            }
            OpenStep::Need(requests) => {
                steps.push('R');
                let got = storage.read_ranges(&requests).unwrap();
                let mut answers: Vec<_> = requests.into_iter().zip(got).collect();
                answers.reverse();
                let rest = answers.split_off(answers.len() / 2);
                opening.push(answers).unwrap();
                opening.push(rest).unwrap();
            }
            OpenStep::Done(opened) => return (*opened, steps),
        }
    }
}

/// The opening machine, driven with answers in any order, opens every
/// array as the synchronous open does: the same fragments and footers,
/// the same enumerations.
#[test]
fn an_opening_answered_in_any_order_opens_every_array_alike() {
    let mut n = 0;
    for o in tdb_testdata::objects() {
        let Some(e) = &o.expected else { continue };
        if e["kind"] != "array" {
            continue;
        }
        let storage = LocalStorage::new(&o.dir);
        let key = o.key.as_ref();
        let (opened, _) = open_scrambled(&storage, key);
        let open = OpenArray::open(&storage, "", TimeWindow::ALL, key).unwrap();
        let fragments = open.load_fragments(&storage).unwrap();
        let entry = open.schema();
        let enumerations = load_referenced_enumerations(&storage, "", entry, key).unwrap();
        // Footers and where they came from (sections sit in hash maps,
        // whose order differs between runs).
        let summary = |f: &[tdb_fragment::LoadedFragment]| -> Vec<String> {
            f.iter()
                .map(|f| {
                    format!(
                        "{:?} {:?} {}",
                        f.file, f.metadata.footer, f.from_consolidated
                    )
                })
                .collect()
        };
        assert_eq!(
            summary(&opened.fragments),
            summary(&fragments),
            "{}",
            o.case
        );
        assert_eq!(
            format!("{:?}", opened.enumerations),
            format!("{enumerations:?}"),
            "{}",
            o.case
        );
        assert_eq!(
            format!("{:?}", opened.open.directory),
            format!("{:?}", open.directory),
            "{}",
            o.case
        );
        n += 1;
    }
    assert!(n > 150, "{n} arrays");
}

/// The rounds an opening takes: listings, then one batch of schemas and
/// commits, consolidated fragment metadata, footers, enumerations (each
/// only where there is something to read).
#[test]
fn an_opening_takes_a_batch_per_kind_of_file() {
    for (case, want) in [
        // Root, subdirectories; files; footers.
        ("dense_multi_chunk", "LLRR"),
        // Footers from the consolidated file: no footer batch.
        ("consolidated_fragment_meta", "LLRR"),
        // Enumerations: one batch more.
        ("enumeration", "LLRRR"),
    ] {
        let o = object(case);
        let storage = LocalStorage::new(&o.dir);
        let (_, steps) = open_scrambled(&storage, o.key.as_ref());
        assert_eq!(steps, want, "{case}");
    }
}

#[test]
fn an_opening_refuses_what_it_did_not_ask_for() {
    let o = object("dense_multi_chunk");
    let storage = LocalStorage::new(&o.dir);
    let mut opening = Opening::new("", TimeWindow::ALL, None);
    assert!(opening.push([]).is_err());
    assert!(opening.push_listings(Vec::new()).is_err());
    let OpenStep::List(dirs) = opening.step().unwrap() else {
        panic!("an opening starts with a listing");
    };
    assert!(opening.step().is_err(), "asked twice");
    // Two listings where one was asked for.
    let root = storage.list_dir(&dirs[0]).unwrap();
    assert!(opening
        .push_listings(vec![root.clone(), root.clone()])
        .is_err());
    opening.push_listings(vec![root]).unwrap();
    let OpenStep::List(dirs) = opening.step().unwrap() else {
        panic!("then its directories");
    };
    let listings = dirs.iter().map(|d| storage.list_dir(d).unwrap()).collect();
    opening.push_listings(listings).unwrap();
    let OpenStep::Need(requests) = opening.step().unwrap() else {
        panic!("then its files");
    };
    let mut stranger = requests[0].clone();
    stranger.key.push_str(".other");
    let err = opening.push([(stranger, None)]).unwrap_err().to_string();
    assert!(err.contains("not asked for"), "{err}");
}
