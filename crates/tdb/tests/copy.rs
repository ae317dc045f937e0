//! `tdb::copy` writes what TileDB 2.30 writes: for every unencrypted v22
//! array of the corpus (fragments consolidated with timestamps included),
//! each copied fragment's data files and fragment metadata are TileDB's
//! bytes, except where TileDB's output is not a
//! function of the cells (lossy filters, whose input a copy no longer
//! has; the schema's name in the footer, a fresh uuid).

use tdb::{Array, MemoryStorage};
use tdb_filters::Filter;
use tdb_format::{classify, ObjectFile};
use tdb_storage::{ListableStorage, ReadableStorage};

/// Filters whose output a copy cannot reproduce byte for byte.
fn not_reproducible(f: &Filter) -> bool {
    matches!(f, Filter::ScaleFloat { .. } | Filter::Webp { .. })
}

#[test]
fn copies_of_v22_arrays_are_tiledbs_bytes() {
    let (mut files, mut fragments, mut with_timestamps) = (0, 0, 0);
    for obj in tdb_testdata::objects() {
        if obj.key.is_some() || !obj.files.iter().any(|f| f.starts_with("__schema/")) {
            continue;
        }
        let array = Array::open(&obj.dir).unwrap_or_else(|e| panic!("{}: {e}", obj.case));
        if array.fragments().is_empty()
            || array
                .fragments()
                .iter()
                .any(|f| f.metadata.footer.version != 22)
        {
            continue;
        }
        let dst = MemoryStorage::new();
        let summary = match tdb::copy(&array, &dst, "", None) {
            Ok(s) => s,
            Err(tdb::Error::Unsupported(_)) => continue,
            Err(e) => panic!("{}: {e:?}", obj.case),
        };
        let new_schemas: Vec<String> = dst
            .list_dir("__schema")
            .unwrap()
            .files
            .iter()
            .map(|f| f.name().to_owned())
            .collect();
        // Every fragment is copied, those a consolidation replaced too.
        let history = array.snapshot().with_history(array.storage()).unwrap();
        assert_eq!(
            history.fragments.len(),
            summary.fragments.len(),
            "{}",
            obj.case
        );
        for (f, (name, _)) in history.fragments.iter().zip(&summary.fragments) {
            let footer = &f.metadata.footer;
            let schema = &array
                .snapshot()
                .open
                .schemas
                .by_name(&footer.array_schema_name)
                .unwrap()
                .schema;
            // TileDB 2.25 wrote zeros for this array's var tile mins, where
            // 2.30 (and tdb) write the values.
            let exact_metadata = obj.case != "legacy/2.25.0/attr_types_dense"
                && !schema
                    .attributes
                    .iter()
                    .flat_map(|a| &a.filters.filters)
                    .any(not_reproducible);
            let prefix = format!("{}/", f.file.path);
            for rel in obj.files.iter().filter(|r| r.starts_with(&prefix)) {
                let file = &rel[prefix.len()..];
                let theirs = obj.read(rel);
                let ours = dst
                    .read(&format!("__fragments/{name}/{file}"))
                    .unwrap()
                    .unwrap_or_else(|| panic!("{}: copy has no {file}", obj.case));
                match classify(rel) {
                    ObjectFile::Data { field, part, .. } => {
                        let pf = schema.part_filters(&field, part, false).unwrap();
                        if pf.pipeline.filters.iter().any(not_reproducible) {
                            continue;
                        }
                    }
                    // Processed conditions name delete commits: new files
                    // in the copy (checked on their own below).
                    ObjectFile::FragmentMetadata { .. }
                        if array.snapshot().open.directory.conditions.is_empty()
                            || !footer.has_timestamps =>
                    {
                        if !exact_metadata {
                            continue;
                        }
                        // The footer names the schema: a new file in the copy.
                        let t = footer.array_schema_name.as_bytes();
                        let ours_name = new_schemas
                            .iter()
                            .find(|n| {
                                n.split('_')
                                    .take(4)
                                    .eq(footer.array_schema_name.split('_').take(4))
                            })
                            .unwrap();
                        let mut ours = ours.to_vec();
                        let at = ours
                            .windows(t.len())
                            .position(|w| w == ours_name.as_bytes())
                            .unwrap();
                        ours[at..at + t.len()].copy_from_slice(t);
                        assert!(theirs == ours, "{}: {rel} differs", obj.case);
                        files += 1;
                        continue;
                    }
                    _ => continue,
                }
                assert!(theirs == ours.as_ref(), "{}: {rel} differs", obj.case);
                files += 1;
            }
            fragments += 1;
            with_timestamps += usize::from(footer.has_timestamps);
        }
    }
    assert!(
        fragments > 50 && files > 150,
        "{fragments} fragments, {files} files"
    );
    // Fragments consolidated with timestamps (every version of a cell, with
    // its timestamp in `t.tdb`) are among them.
    assert!(with_timestamps >= 3, "{with_timestamps} with timestamps");
}

/// A dense array with a sparse fragment (TileDB 2.3.3 wrote it; 2.30
/// reads it, `cargo xtask interop` checks that TileDB reads the copy): the
/// copy keeps the fragment sparse and reads the same at every time.
#[test]
fn sparse_fragments_of_dense_arrays_are_copied_as_such() {
    use tdb::{OpenOptions, ReadSpec};
    let src_dir = tdb_testdata::root().join("legacy/2.3.3/dense_with_sparse_fragments/array");
    let src = Array::open(&src_dir).unwrap();
    let dst = MemoryStorage::new();
    tdb::copy(&src, &dst, "", None).unwrap();
    let copy = tdb::Array::open_in(&dst, "", OpenOptions::new()).unwrap();
    let kinds = |a: &[tdb::LoadedFragment]| -> Vec<bool> {
        a.iter().map(|f| f.metadata.footer.dense).collect()
    };
    assert_eq!(kinds(src.fragments()), [true, false, true]);
    assert_eq!(kinds(copy.fragments()), kinds(src.fragments()));
    let fields: Vec<String> = src
        .schema()
        .attributes
        .iter()
        .map(|a| a.name.clone())
        .collect();
    for t in [1, 2, 3] {
        let theirs = Array::open_with(&src_dir, OpenOptions::new().at(t))
            .unwrap()
            .read_all(ReadSpec::new(fields.clone()))
            .unwrap()
            .fields;
        let ours = tdb::Array::open_in(&dst, "", OpenOptions::new().at(t))
            .unwrap()
            .read_all(ReadSpec::new(fields.clone()))
            .unwrap()
            .fields;
        assert_eq!(theirs, ours, "at {t}");
    }
}

/// Fragments stored in an order TileDB no longer sorts by (TileDB 2.2's
/// Hilbert, 1.x's real coordinates), which a global-order read returns as
/// stored, are copied sorted into today's order: a global-order write of
/// them as stored was refused. The copy's cells are the source's.
#[test]
fn fragments_stored_in_an_old_order_are_copied_in_todays() {
    use tdb::{OpenOptions, ReadSpec, ResultLayout};
    for case in [
        "legacy/2.2.9/hilbert_2_2",
        "legacy/1.6.3/sparse_dims_float64",
        "legacy/1.5.0/sparse_dims_float32",
    ] {
        let src = Array::open(tdb_testdata::root().join(case).join("array")).unwrap();
        let dst = MemoryStorage::new();
        tdb::copy(&src, &dst, "", None).unwrap_or_else(|e| panic!("{case}: {e}"));
        let copy = tdb::Array::open_in(&dst, "", OpenOptions::new()).unwrap();
        let fields: Vec<String> = src.schema().fields().map(str::to_owned).collect();
        let row_major = ReadSpec::new(fields.clone()).with_layout(ResultLayout::RowMajor);
        assert_eq!(
            tdb::Array::read_all(&copy, row_major.clone())
                .unwrap()
                .fields,
            src.read_all(row_major).unwrap().fields,
            "{case}"
        );
        // In the global order: the same cells (the copy's in today's order,
        // the source's as stored).
        let rows = |b: tdb::Batch| {
            let columns: Vec<_> = b.fields.iter().map(|f| f.column()).collect();
            let mut rows: Vec<Vec<Vec<u8>>> = (0..b.num_cells as usize)
                .map(|i| columns.iter().map(|c| c.cell(i).to_vec()).collect())
                .collect();
            rows.sort();
            rows
        };
        let global = ReadSpec::new(fields.clone()).with_layout(ResultLayout::GlobalOrder);
        assert_eq!(
            rows(tdb::Array::read_all(&copy, global.clone()).unwrap()),
            rows(src.read_all(global).unwrap()),
            "{case}"
        );
    }
}

/// A fragment TileDB merged over delete commits (twice: its condition
/// indexes renumbered) keeps its delete metadata in the copy, its
/// processed conditions naming the copied commits, and reads the same at
/// every time.
#[test]
fn delete_metadata_is_copied_naming_the_copied_commits() {
    use tdb::{OpenOptions, ReadSpec};
    let src_dir = tdb_testdata::root().join("delete_consolidated_twice/array");
    let src = Array::open(&src_dir).unwrap();
    let dst = MemoryStorage::new();
    let summary = tdb::copy(&src, &dst, "", None).unwrap();
    assert_eq!(summary.deletes, 3);
    let copy = tdb::Array::open_in(&dst, "", OpenOptions::new()).unwrap();
    fn processed<S: tdb_fragment::ReadStorage>(a: &Array<S>) -> Vec<Vec<String>> {
        let frags: Vec<_> = a.fragments().iter().collect();
        let open = &a.snapshot().open;
        open.processed_conditions(a.storage(), &frags).unwrap()
    }
    fn conditions<S: tdb_fragment::ReadStorage>(a: &Array<S>) -> Vec<String> {
        let open = &a.snapshot().open;
        open.directory
            .conditions
            .iter()
            .map(|c| c.marker.clone())
            .collect()
    }
    assert!(copy
        .fragments()
        .iter()
        .all(|f| f.metadata.footer.has_delete_meta));
    assert_eq!(processed(&src), [conditions(&src)]);
    assert_eq!(processed(&copy), [conditions(&copy)]);
    assert_ne!(conditions(&src), conditions(&copy));
    let fields = vec!["d".to_owned(), "a".to_owned(), "s".to_owned()];
    for t in 1..=7 {
        let theirs = Array::open_with(&src_dir, OpenOptions::new().at(t)).unwrap();
        let ours = tdb::Array::open_in(&dst, "", OpenOptions::new().at(t)).unwrap();
        let spec = ReadSpec::new(fields.clone());
        assert_eq!(
            theirs.read_all(spec.clone()).unwrap().fields,
            ours.read_all(spec).unwrap().fields,
            "at {t}"
        );
    }
}

/// The array cases of the corpus, each with the options that open it.
fn array_cases() -> Vec<(tdb_testdata::Object, tdb::OpenOptions)> {
    (tdb_testdata::objects().into_iter())
        .filter(|o| o.expected.as_ref().is_some_and(|e| e["kind"] == "array"))
        .map(|o| {
            let options = match &o.key {
                Some(k) => tdb::OpenOptions::new().key(k).unwrap(),
                None => tdb::OpenOptions::new(),
            };
            (o, options)
        })
        .collect()
}

/// `options` opening at time `t` (`u64::MAX`: now, as [`times_of`] says).
fn opened_at(options: &tdb::OpenOptions, t: u64) -> tdb::OpenOptions {
    match t {
        u64::MAX => options.clone(),
        t => options.clone().at(t),
    }
}

/// Every start and end of `files`' timestamp ranges, and `u64::MAX` for
/// now, sorted once each.
fn times_of<'a>(files: impl IntoIterator<Item = &'a tdb_fragment::TimestampedFile>) -> Vec<u64> {
    let mut times: Vec<u64> = (files.into_iter())
        .flat_map(|f| {
            let (t1, t2) = f.name.timestamp_range();
            [t1, t2]
        })
        .chain([u64::MAX])
        .collect();
    times.sort_unstable();
    times.dedup();
    times
}

/// Every fixture whose consolidated fragments were not vacuumed, dense
/// and sparse: the copy keeps the fragments they replace and the vacuum
/// lists, so it reads as its source at every time a fragment starts or
/// ends, and now.
#[test]
fn copies_keep_the_history_of_consolidations_not_yet_vacuumed() {
    use tdb::{ReadSpec, ResultLayout};
    let mut cases = Vec::new();
    for (o, opened) in array_cases() {
        let src = Array::open_with(&o.dir, opened.clone()).unwrap();
        let directory = &src.snapshot().open.directory;
        let committed = directory.committed_fragments();
        if committed.len() == src.fragments().len() {
            continue;
        }
        let dst = MemoryStorage::new();
        let summary = tdb::copy(&src, &dst, "", o.key.as_ref()).unwrap();
        assert_eq!(summary.fragments.len(), committed.len(), "{}", o.case);
        assert!(summary.vacuum_lists > 0, "{}", o.case);
        let dense = src.schema().array_type == tdb_format::ArrayType::Dense;
        for t in times_of(committed.iter()) {
            /// Every field of the schema in force at the array's window.
            fn read<S: tdb_fragment::ReadStorage>(a: Array<S>) -> (usize, Vec<tdb::FieldBuffer>) {
                let schema = a.schema();
                let fields: Vec<String> = schema.fields().map(str::to_owned).collect();
                let spec = ReadSpec::new(fields).with_layout(ResultLayout::RowMajor);
                (a.fragments().len(), a.read_all(spec).unwrap().fields)
            }
            let theirs = read(Array::open_with(&o.dir, opened_at(&opened, t)).unwrap());
            let ours = read(Array::open_in(&dst, "", opened_at(&opened, t)).unwrap());
            assert_eq!(ours, theirs, "{} at {t}", o.case);
        }
        cases.push((o.case.clone(), dense));
    }
    assert!(
        cases.iter().any(|(_, d)| *d) && cases.iter().any(|(_, d)| !*d),
        "dense and sparse cases: {cases:?}"
    );
}

/// Array metadata a consolidation superseded but no vacuum removed is what
/// opens before the consolidation's end read: the copy keeps those files
/// and the vacuum list naming their copies, so its metadata is its
/// source's at every time a file starts or ends, and now
/// (`consolidated_array_meta_kept`; random case 22013 lost them).
#[test]
fn copies_keep_metadata_a_consolidation_superseded() {
    let mut cases = Vec::new();
    for (o, opened) in array_cases() {
        let src = Array::open_with(&o.dir, opened.clone()).unwrap();
        let directory = &src.snapshot().open.directory;
        if directory.array_metadata_replaced.is_empty() {
            continue;
        }
        let dst = MemoryStorage::new();
        tdb::copy(&src, &dst, "", o.key.as_ref()).unwrap();
        let files = (directory.array_metadata.iter()).chain(&directory.array_metadata_replaced);
        for t in times_of(files) {
            let theirs = Array::open_with(&o.dir, opened_at(&opened, t)).unwrap();
            let ours = Array::open_in(&dst, "", opened_at(&opened, t)).unwrap();
            let (theirs, ours) = (theirs.metadata().unwrap(), ours.metadata().unwrap());
            assert_eq!(ours, theirs, "{} at {t}", o.case);
        }
        cases.push(o.case.clone());
    }
    assert!(
        cases.iter().any(|c| c == "consolidated_array_meta_kept"),
        "cases: {cases:?}"
    );
}
