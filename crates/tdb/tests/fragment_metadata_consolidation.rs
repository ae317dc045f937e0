//! Fragment metadata consolidation: the `.meta` file tdb writes for
//! TileDB's fragments holds what TileDB's holds (names, footer offsets,
//! footers); reads answer the same through it; vacuuming keeps the latest.

use tdb::{OpenOptions, ReadSpec};
use tdb_fragment::ConsolidatedFragmentMeta;

fn parse(a: &tdb::Array, bytes: &[u8], file: &str) -> ConsolidatedFragmentMeta {
    let open = &a.snapshot().open;
    let schemas = |n: &str| open.schemas.by_name(n).map(|e| &e.schema);
    ConsolidatedFragmentMeta::parse(bytes, None, &schemas, file).unwrap()
}

fn metas(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join("__fragment_meta"))
        .map(|r| {
            r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn tdbs_meta_file_holds_what_tiledbs_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tdb_testdata::root().join("consolidated_fragment_meta/array");
    tdb_testdata::copy_dir(&src, tmp.path()).unwrap();
    let theirs_name = metas(tmp.path()).pop().unwrap();
    let theirs = std::fs::read(tmp.path().join("__fragment_meta").join(&theirs_name)).unwrap();
    std::fs::remove_file(tmp.path().join("__fragment_meta").join(&theirs_name)).unwrap();

    let a = tdb::Array::open(tmp.path()).unwrap();
    assert!(a.fragments().iter().all(|f| !f.from_consolidated));
    let cells = |a: &tdb::Array| {
        a.read_all(ReadSpec::new(vec!["a".to_owned()]))
            .unwrap()
            .fields
    };
    let before = cells(&a);
    let ours_path = a.consolidate_fragment_metadata().unwrap().unwrap();
    assert!(ours_path.starts_with("__fragment_meta/__1_4_") && ours_path.ends_with("_22.meta"));
    let ours = std::fs::read(tmp.path().join(&ours_path)).unwrap();
    assert_eq!(
        parse(&a, &ours, &ours_path),
        parse(&a, &theirs, &theirs_name),
        "names, footer offsets and footers"
    );

    let again = tdb::Array::open(tmp.path()).unwrap();
    assert!(again.fragments().iter().all(|f| f.from_consolidated));
    assert_eq!(cells(&again), before);
    // A newer .meta (TileDB's, ending at the same time) and ours: vacuum
    // keeps those ending last, so both stay; a third, older one goes.
    std::fs::write(
        tmp.path().join("__fragment_meta").join(&theirs_name),
        &theirs,
    )
    .unwrap();
    let older = "__1_2_00000000000000000000000000000000_22.meta";
    std::fs::write(tmp.path().join("__fragment_meta").join(older), &theirs).unwrap();
    assert_eq!(metas(tmp.path()).len(), 3);
    assert_eq!(again.vacuum_fragment_metadata().unwrap(), 1);
    assert!(!metas(tmp.path()).contains(&older.to_owned()));
    assert_eq!(cells(&tdb::Array::open(tmp.path()).unwrap()), before);
}

#[test]
fn one_fragment_is_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tdb_testdata::root().join("sparse_2d_int/array");
    tdb_testdata::copy_dir(&src, tmp.path()).unwrap();
    let a = tdb::Array::open_with(tmp.path(), OpenOptions::new()).unwrap();
    assert_eq!(a.fragments().len(), 1);
    assert_eq!(a.consolidate_fragment_metadata().unwrap(), None);
    assert!(metas(tmp.path()).is_empty());
}
