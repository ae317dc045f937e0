//! Group metadata consolidation and vacuuming, against TileDB's own: for
//! the three metadata files of `group_meta_consolidated`, tdb's merged file
//! is TileDB's byte for byte, and its vacuum list names the files by
//! absolute URI as TileDB's `GroupMetaConsolidator` does (so TileDB's
//! vacuum matches them); the metadata reads the same before and after
//! vacuuming.

use tdb::OpenOptions;

/// `dir`'s `__meta/` file names, sorted.
fn meta_files(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join("__meta"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn tdbs_group_metadata_consolidation_is_tiledbs() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tdb_testdata::root().join("group_meta_consolidated/group");
    tdb_testdata::copy_dir(&src, tmp.path()).unwrap();
    // TileDB's merged file and vacuum list, set aside.
    let theirs = meta_files(tmp.path())
        .into_iter()
        .find(|n| n.starts_with("__1_3_") && !n.ends_with(".vac"))
        .unwrap();
    let their_bytes = std::fs::read(tmp.path().join("__meta").join(&theirs)).unwrap();
    let their_list =
        std::fs::read_to_string(tmp.path().join("__meta").join(format!("{theirs}.vac"))).unwrap();
    for n in [theirs.clone(), format!("{theirs}.vac")] {
        std::fs::remove_file(tmp.path().join("__meta").join(n)).unwrap();
    }
    let originals = meta_files(tmp.path());
    assert_eq!(originals.len(), 3);
    let g = tdb::Group::open(tmp.path()).unwrap();
    let before = g.metadata().clone();
    let done = g.consolidate_metadata().unwrap().unwrap();
    let ours = done.file.clone().unwrap();
    assert!(ours.starts_with("__meta/__1_3_"), "{ours}");
    assert_eq!(std::fs::read(tmp.path().join(&ours)).unwrap(), their_bytes);
    // The list: TileDB's lines but for where the group lies.
    let uri = format!(
        "file://{}",
        std::path::absolute(tmp.path()).unwrap().display()
    );
    let ours_list = std::fs::read_to_string(tmp.path().join(&done.vacuum_list)).unwrap();
    let want: String = originals
        .iter()
        .map(|n| format!("{uri}/__meta/{n}\n"))
        .collect();
    assert_eq!(ours_list, want);
    let their_lines: Vec<&str> = their_list
        .lines()
        .map(|l| l.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(their_lines, originals);
    // Reads see the same metadata through the list; vacuum removes exactly
    // the three files, then the list.
    assert_eq!(tdb::Group::open(tmp.path()).unwrap().metadata(), &before);
    assert_eq!(g.vacuum_metadata().unwrap(), 4);
    assert_eq!(meta_files(tmp.path()), [ours.trim_start_matches("__meta/")]);
    let g = tdb::Group::open(tmp.path()).unwrap();
    assert_eq!(g.metadata(), &before);
    // A window ending inside the merged span sees the merged file alone no
    // more: nothing, as TileDB after its own vacuum.
    let at2 = tdb::Group::open_in(
        tdb::LocalStorage::new(tmp.path()),
        "",
        OpenOptions::new().at(2),
    )
    .unwrap();
    assert!(at2.metadata().is_empty());
}
