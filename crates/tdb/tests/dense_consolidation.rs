//! Dense fragment consolidation: for the writes TileDB consolidated in
//! `consolidated_dense` and `consolidated_dense_edge_tiles` (a domain that
//! is no multiple of its tile extent), tdb's merged fragment is TileDB's
//! file for file;
//! a merge of fragments that leave a gap records their union, not the
//! tiles, and reads answer as before; a list that would cover an older
//! fragment with fill values is refused.

use tdb::{Datatype, FieldBuffer, FragmentSelection, OpenOptions, ReadSpec, Subarray, WriteSpec};

use crate::common;
use common::*;

fn floats(name: &str, v: &[f32]) -> FieldBuffer {
    let mut b = FieldBuffer::new(name, Datatype::Float32, 1, false);
    b.data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    b
}

fn write(a: &tdb::Array, t: u64, lo: i32, hi: i32, v: &[f32]) {
    let mut sub = Subarray::new(1);
    sub.add_range(0, range(lo, hi));
    a.write(
        WriteSpec::new(vec![floats("a", v)])
            .with_subarray(sub)
            .at(t),
    )
    .unwrap();
}

fn cells(dir: &std::path::Path, at: Option<u64>) -> Vec<u8> {
    let options = at.map_or(OpenOptions::new(), |t| OpenOptions::new().at(t));
    let a = tdb::Array::open_with(dir, options).unwrap();
    let got = a.read_all(ReadSpec::new(["d", "a"])).unwrap();
    got.fields.iter().flat_map(|f| f.data.clone()).collect()
}

#[test]
fn tdbs_merged_dense_fragment_is_tiledbs() {
    // The writes xtask/fixtures/gen_current.py made, at the same times.
    let first: Vec<f32> = (0..12).map(|x| x as f32).collect();
    // At the default budget the merge's batches hold whole tiles; under
    // 64 bytes they hold fewer cells than a tile, so every tile is
    // filtered chunk by chunk as its cells come (`write/chunked.rs`).
    for budget in [tdb::DEFAULT_BUDGET, 64] {
        merged_as_tiledb(
            "consolidated_dense",
            &[
                (1, 1, 12, &first),
                (2, 3, 6, &[-1.0; 4]),
                (3, 6, 9, &[-2.0; 4]),
            ],
            budget,
        );
        // A domain of 1..=10 in tiles of 4: the merge covers the last tile
        // whole (to 12), past the domain, as TileDB's does.
        merged_as_tiledb(
            "consolidated_dense_edge_tiles",
            &[
                (1, 1, 10, &first[..10]),
                (2, 3, 6, &[-1.0; 4]),
                (3, 8, 10, &[-2.0; 3]),
            ],
            budget,
        );
    }
}

/// Makes again, in a copy of `case` without TileDB's merged fragment, the
/// `writes` (time, first and last cell, values) it merged; tdb's merge of
/// them under `budget` must be TileDB's file for file, and read as they
/// did.
fn merged_as_tiledb(case: &str, writes: &[(u64, i32, i32, &[f32])], budget: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tdb_testdata::root().join(case).join("array");
    tdb_testdata::copy_dir(&src, tmp.path()).unwrap();
    let a = tdb::Array::open(tmp.path()).unwrap();
    let theirs = a.fragments()[0].file.path.clone();
    let stem = theirs.trim_start_matches("__fragments/").to_owned();
    let saved = tempfile::tempdir().unwrap();
    tdb_testdata::copy_dir(&tmp.path().join(&theirs), saved.path()).unwrap();
    std::fs::remove_dir_all(tmp.path().join(&theirs)).unwrap();
    std::fs::remove_file(tmp.path().join(format!("__commits/{stem}.wrt"))).unwrap();
    let a = tdb::Array::open(tmp.path()).unwrap();
    for &(t, lo, hi, v) in writes {
        write(&a, t, lo, hi, v);
    }
    let before = cells(tmp.path(), None);
    let a = tdb::Array::open(tmp.path()).unwrap();
    let done = a
        .consolidate_fragments(&FragmentSelection::default(), budget)
        .unwrap();
    assert_eq!(done.len(), 1, "{case}");
    let last = writes.last().map_or(0, |w| w.0);
    assert_eq!(
        (done[0].written.fragment.t1, done[0].written.fragment.t2),
        (1, last),
        "{case}"
    );
    let ours = format!("__fragments/{}", done[0].written.fragment);
    assert_same_files(saved.path(), &tmp.path().join(&ours));
    a.vacuum_fragments().unwrap();
    assert_eq!(cells(tmp.path(), None), before, "{case}");
}

/// A 1-D INT32 domain 1..=12 in tiles of 4, attribute `a` FLOAT32.
fn dense_array(dir: &std::path::Path) -> tdb::Array {
    let src = tdb_testdata::root().join("consolidated_dense/array");
    tdb_testdata::copy_dir(&src, dir).unwrap();
    for sub in ["__fragments", "__commits"] {
        std::fs::remove_dir_all(dir.join(sub)).unwrap();
    }
    tdb::Array::open(dir).unwrap()
}

#[test]
fn a_merge_records_its_union_and_a_list_must_not_cover_older_cells() {
    let tmp = tempfile::tempdir().unwrap();
    let a = dense_array(tmp.path());
    write(&a, 1, 1, 2, &[1.0, 2.0]);
    write(&a, 2, 2, 3, &[3.0, 4.0]);
    write(&a, 3, 3, 3, &[5.0]);
    let a = tdb::Array::open(tmp.path()).unwrap();
    let names: Vec<String> = a
        .fragments()
        .iter()
        .map(|f| f.file.file_name().to_owned())
        .collect();
    let before: Vec<Vec<u8>> = [Some(1), Some(2), None]
        .map(|t| cells(tmp.path(), t))
        .to_vec();
    // The last two merged would put fill values over the first's cell 2,
    // which was written before them: refused, as TileDB refuses.
    let last_two = [names[1].as_str(), names[2].as_str()];
    assert!(a
        .consolidate_fragment_list(
            &last_two,
            &FragmentSelection::default(),
            tdb::DEFAULT_BUDGET
        )
        .is_err());
    let done = a
        .consolidate_fragments(&FragmentSelection::default(), tdb::DEFAULT_BUDGET)
        .unwrap();
    assert_eq!(done.len(), 1);
    let merged = tdb::Array::open(tmp.path()).unwrap();
    let f = &merged.fragments()[0];
    assert_eq!(f.file.name.timestamp_range(), (1, 3));
    assert_eq!(f.metadata.footer.non_empty_domain, Some(vec![range(1, 3)]));
    assert_eq!(cells(tmp.path(), None), before[2]);
    // Before vacuuming, windows ending inside the span see the inputs.
    assert_eq!(cells(tmp.path(), Some(1)), before[0]);
    assert_eq!(cells(tmp.path(), Some(2)), before[1]);
    a.vacuum_fragments().unwrap();
    assert_eq!(cells(tmp.path(), None), before[2]);
}
