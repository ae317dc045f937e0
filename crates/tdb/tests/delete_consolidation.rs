//! Fragment consolidation over delete commits, against TileDB's own: for
//! the writes and deletes of `delete_consolidated_*` (t=1 write, t=2
//! delete, t=3 write, t=4 delete), tdb's merged fragment is TileDB's file
//! for file — keeping delete metadata, purging, and merging a fragment that
//! already keeps some — and reads at every time answer as before.

use tdb::ReadSpec;

use crate::common;
use common::*;

/// Every cell `(d, a, s)` of the array at `dir` read at `at` (or now),
/// sorted: reads return a coordinate's duplicates in no set order.
fn cells(dir: &std::path::Path, at: Option<u64>) -> Vec<(i32, i32, Vec<u8>)> {
    let options = at.map_or(tdb::OpenOptions::new(), |t| tdb::OpenOptions::new().at(t));
    let a = tdb::Array::open_with(dir, options).unwrap();
    let got = a.read_all(ReadSpec::new(["d", "a", "s"])).unwrap();
    assert!(got.num_cells > 0);
    let int = |f: &tdb::FieldBuffer, i: usize| {
        i32::from_le_bytes(f.data[i * 4..i * 4 + 4].try_into().unwrap())
    };
    let (d, a, s) = (&got.fields[0], &got.fields[1], got.fields[2].column());
    let mut v: Vec<_> = (0..got.num_cells as usize)
        .map(|i| (int(d, i), int(a, i), s.cell(i).to_vec()))
        .collect();
    v.sort();
    v
}

/// Merges the array at `dir` (see `merge_matches`: TileDB's fragment
/// `theirs`, spanning `span`), keeping deleted cells, vacuums, and checks
/// reads at each of `times` answer as before.
fn merge_reads_as_before(
    dir: &std::path::Path,
    theirs: &std::path::Path,
    span: (u64, u64),
    times: std::ops::RangeInclusive<u64>,
) {
    let before: Vec<_> = times.clone().map(|t| cells(dir, Some(t))).collect();
    merge_matches(dir, theirs, false, span);
    tdb::Array::open(dir).unwrap().vacuum_fragments().unwrap();
    for (t, want) in times.zip(before) {
        assert_eq!(cells(dir, Some(t)), want, "read at t={t}");
    }
}

#[test]
fn a_merge_over_deletes_keeps_tiledbs_delete_metadata() {
    // Reads before, between and after the deletes answer as before.
    let (tmp, theirs) = before_merge("delete_consolidated_meta", 1, 3);
    merge_reads_as_before(tmp.path(), theirs.path(), (1, 3), 1..=4);
}

/// A copy of fixture `case` holding its schema and delete commits only,
/// with the writes `deletes_between_writes` (xtask/fixtures/gen_current.py)
/// made, at the same times, made again by tdb: the array as it was before
/// TileDB merged (and vacuumed) it.
fn rewritten(case: &str, t1: u64, t2: u64) -> (tempfile::TempDir, tempfile::TempDir) {
    written(case, t1, t2, &[(1, 0..10, 0, "x"), (3, 5..15, 10, "y")])
}

/// A copy of fixture `case` holding its schema and delete commits only
/// (TileDB's merge spanning `t1..=t2` saved aside), and `writes` made by
/// tdb: per write its time, coordinates, first value of `a` and the
/// prefix of `s`.
fn written(
    case: &str,
    t1: u64,
    t2: u64,
    writes: &[(u64, std::ops::Range<i32>, i32, &str)],
) -> (tempfile::TempDir, tempfile::TempDir) {
    let (tmp, saved) = before_merge(case, t1, t2);
    std::fs::remove_dir_all(tmp.path().join("__fragments")).unwrap();
    for e in std::fs::read_dir(tmp.path().join("__commits")).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x != "del") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let a = tdb::Array::open(tmp.path()).unwrap();
    for (t, d, a0, prefix) in writes {
        let d: Vec<i32> = d.clone().collect();
        let values: Vec<i32> = (0..d.len() as i32).map(|i| a0 + i).collect();
        let mut s = tdb::FieldBuffer::for_field(a.schema(), "s").unwrap();
        for i in 0..d.len() {
            s.push(format!("{prefix}{i}").as_bytes(), true);
        }
        a.write(tdb::WriteSpec::new(vec![ints("d", &d), ints("a", &values), s]).at(*t))
            .unwrap();
    }
    (tmp, saved)
}

/// A merge of more fragments than its budget reads at once goes in levels
/// (groups merged into temporary runs, then the runs): it writes what one
/// merge of them all writes (the merge `merge_matches` pins to TileDB's),
/// over deletes between the fragments, kept or purged, with duplicates or
/// not; reads answer as before.
#[test]
fn merges_in_levels_write_what_one_merge_writes() {
    let writes = [
        (1, 0..10, 0, "x"),
        (3, 5..15, 10, "y"),
        (5, 3..8, 20, "z"),
        (6, 0..20, 30, "w"),
        (7, 12..13, 40, "v"),
    ];
    for case in ["delete_consolidated_dups", "delete_consolidated_purge"] {
        for purge in [false, true] {
            let (one, _) = written(case, 1, 3, &writes);
            let levels = tempfile::tempdir().unwrap();
            tdb_testdata::copy_dir(one.path(), levels.path()).unwrap();
            let times = 1..=8;
            let before: Vec<_> = times.clone().map(|t| cells(one.path(), Some(t))).collect();
            let mut merged = Vec::new();
            // 1 MiB: two inputs at a time, so five fragments take three
            // levels; the default budget reads them all at once.
            for (dir, budget) in [(one.path(), tdb::DEFAULT_BUDGET), (levels.path(), 1 << 20)] {
                let a = tdb::Array::open(dir).unwrap();
                let mut selection = tdb::FragmentSelection::default();
                selection.purge_deleted_cells = purge;
                let done = a.consolidate_fragments(&selection, budget).unwrap();
                assert_eq!(done.len(), 1, "{case}");
                let f = done[0].written.fragment.clone();
                assert_eq!((f.t1, f.t2), (1, 7));
                merged.push(dir.join(format!("__fragments/{f}")));
                a.vacuum_fragments().unwrap();
            }
            assert_same_files(&merged[0], &merged[1]);
            for (t, want) in times.zip(before) {
                let got = cells(levels.path(), Some(t));
                if !purge {
                    assert_eq!(got, want, "{case}: read at t={t}");
                }
                assert_eq!(got, cells(one.path(), Some(t)), "{case}: read at t={t}");
            }
        }
    }
}

#[test]
fn a_merge_with_duplicates_keeps_each_deleted_cell_as_tiledb() {
    let (tmp, theirs) = rewritten("delete_consolidated_dups", 1, 3);
    merge_reads_as_before(tmp.path(), theirs.path(), (1, 3), 1..=4);
}

#[test]
fn a_purging_merge_drops_deleted_cells_and_their_older_versions_as_tiledb() {
    let (tmp, theirs) = rewritten("delete_consolidated_purge", 1, 3);
    let now = cells(tmp.path(), None);
    merge_matches(tmp.path(), theirs.path(), true, (1, 3));
    tdb::Array::open(tmp.path())
        .unwrap()
        .vacuum_fragments()
        .unwrap();
    // Reads after the deletes answer as before; the deleted cells are gone
    // for earlier reads too (TileDB's answers: the fixture's expected.json).
    assert_eq!(cells(tmp.path(), None), now);
    let fixture = tdb_testdata::root().join("delete_consolidated_purge/array");
    for t in 1..=4 {
        assert_eq!(
            cells(tmp.path(), Some(t)),
            cells(&fixture, Some(t)),
            "read at t={t}"
        );
    }
}

#[test]
fn a_second_merge_renumbers_the_first_ones_conditions() {
    // The fragment TileDB merged over the t=2 and t=4 deletes, merged
    // again with a t=5 write over a t=6 delete.
    let (tmp, theirs) = before_merge("delete_consolidated_twice", 1, 5);
    merge_reads_as_before(tmp.path(), theirs.path(), (1, 5), 1..=6);
}
