//! One test per commit rule of TileDB's array directory, on hand-made
//! listings (names as TileDB writes them in each era).

use std::collections::HashMap;
use tdb_fragment::{
    select_latest_schema, CommitLocation, ConsolidatedCommit, ConsolidatedCommits,
    DirectoryListing, IgnoreFile, ListedFile, TimeWindow, VacuumFile,
};

const U1: &str = "11111111111111111111111111111111";
const U2: &str = "22222222222222222222222222222222";
const U3: &str = "33333333333333333333333333333333";
const U4: &str = "44444444444444444444444444444444";
const SCHEMA: &str = "__schema/__1_1_00000000000000000000000000000000";

/// A v12+ fragment: its directory's metadata and, if committed, its `.wrt`.
fn v22(name: &str, committed: bool) -> Vec<ListedFile> {
    let mut v = vec![
        ListedFile::new(format!("__fragments/{name}/__fragment_metadata.tdb"), 100),
        ListedFile::new(format!("__fragments/{name}/a0.tdb"), 10),
    ];
    if committed {
        v.push(ListedFile::new(format!("__commits/{name}.wrt"), 0));
    }
    v
}

struct Array {
    files: Vec<ListedFile>,
    contents: HashMap<String, Vec<u8>>,
}

impl Array {
    fn new() -> Self {
        Array {
            files: vec![ListedFile::new(SCHEMA, 50)],
            contents: HashMap::new(),
        }
    }

    fn with(mut self, files: Vec<ListedFile>) -> Self {
        self.files.extend(files);
        self
    }

    fn file(mut self, path: &str, bytes: Vec<u8>) -> Self {
        self.files.push(ListedFile::new(path, bytes.len() as u64));
        self.contents.insert(path.to_owned(), bytes);
        self
    }

    /// Fragment names a read of a sparse (or `dense`) array sees.
    fn visible(&self, window: TimeWindow, dense: bool) -> Vec<String> {
        let l = DirectoryListing::new(&self.files);
        for p in l.files_to_read() {
            assert!(self.contents.contains_key(p), "{p} not provided");
        }
        let d = l.resolve(&self.contents, window).unwrap();
        d.visible_fragments(dense)
            .unwrap()
            .into_iter()
            .map(|f| f.file_name().to_owned())
            .collect()
    }

    fn to_vacuum(&self, window: TimeWindow) -> Vec<String> {
        let l = DirectoryListing::new(&self.files);
        let d = l.resolve(&self.contents, window).unwrap();
        d.filtered_fragments(true).unwrap().fragments_to_vacuum
    }
}

#[test]
fn uncommitted_fragment_is_invisible() {
    let a = Array::new()
        .with(v22(&format!("__1_1_{U1}_22"), true))
        .with(v22(&format!("__2_2_{U2}_22"), false));
    assert_eq!(
        a.visible(TimeWindow::ALL, false),
        [format!("__1_1_{U1}_22")]
    );
    // v5–v11: the root fragment needs its .ok.
    let a = Array::new().with(vec![
        ListedFile::new(format!("__1_1_{U1}_7/__fragment_metadata.tdb"), 9),
        ListedFile::new(format!("__2_2_{U2}_7/__fragment_metadata.tdb"), 9),
        ListedFile::new(format!("__2_2_{U2}_7.ok"), 0),
    ]);
    assert_eq!(a.visible(TimeWindow::ALL, true), [format!("__2_2_{U2}_7")]);
}

#[test]
fn pre_v5_fragment_is_committed_by_its_metadata_file() {
    let a = Array::new().with(vec![
        // v1-2 (`__uuid_t`) and v3-4 (`__t1_t2_uuid`) names, no .ok files.
        ListedFile::new(format!("__{U1}_5/__fragment_metadata.tdb"), 9),
        ListedFile::new(format!("__{U1}_5/a.tdb"), 9),
        ListedFile::new(format!("__7_7_{U2}/__fragment_metadata.tdb"), 9),
        // Without its metadata file a pre-v5 fragment is not there yet.
        ListedFile::new(format!("__8_8_{U3}/a.tdb"), 9),
        // From v5 a metadata file alone does not commit.
        ListedFile::new(format!("__9_9_{U4}_5/__fragment_metadata.tdb"), 9),
    ]);
    assert_eq!(
        a.visible(TimeWindow::ALL, true),
        [format!("__{U1}_5"), format!("__7_7_{U2}")]
    );
}

#[test]
fn consolidated_commits_commit_and_ignore_files_hide() {
    let (f1, f2) = (format!("__1_1_{U1}_22"), format!("__2_2_{U2}_22"));
    let con = ConsolidatedCommits::new(vec![
        ConsolidatedCommit::commit(format!("__commits/{f1}.wrt")),
        ConsolidatedCommit::commit(format!("__commits/{f2}.wrt")),
    ]);
    let a = Array::new()
        .with(v22(&f1, false))
        .with(v22(&f2, false))
        .file(&format!("__commits/__1_2_{U3}_22.con"), con.write());
    assert_eq!(a.visible(TimeWindow::ALL, false), [f1.clone(), f2.clone()]);
    // An ignore file takes f1's line out of the .con.
    let ign = IgnoreFile::new(vec![format!("__commits/{f1}.wrt")]);
    let a = a.file(&format!("__commits/__1_1_{U4}_22.ign"), ign.write());
    assert_eq!(a.visible(TimeWindow::ALL, false), [f2]);
}

#[test]
fn vacuumed_inputs_are_gone_and_listed_to_vacuum() {
    let inputs = [format!("__1_1_{U1}_22"), format!("__2_2_{U2}_22")];
    let merged = format!("__1_2_{U3}_22");
    let vac = VacuumFile::new(inputs.iter().map(|n| format!("/__fragments/{n}")).collect());
    let mut a = Array::new().with(v22(&merged, true));
    for n in &inputs {
        a = a.with(v22(n, true));
    }
    let a = a.file(&format!("__commits/{merged}.vac"), vac.write());
    assert_eq!(a.visible(TimeWindow::ALL, true), [merged.as_str()]);
    assert_eq!(
        a.to_vacuum(TimeWindow::ALL),
        inputs.map(|n| format!("__fragments/{n}"))
    );
}

#[test]
fn consolidated_fragment_supersedes_its_inputs_inside_the_window_only() {
    // Two v14 writes at 1 and 3, consolidated into [1, 3] (v14: no
    // per-cell timestamps, so only full overlap counts).
    let (f1, f2, merged) = (
        format!("__1_1_{U1}_14"),
        format!("__3_3_{U2}_14"),
        format!("__1_3_{U3}_14"),
    );
    let vac = VacuumFile::new(vec![
        format!("file:///data/arr/__fragments/{f1}"),
        format!("file:///data/arr/__fragments/{f2}"),
    ]);
    let a = Array::new()
        .with(v22(&f1, true))
        .with(v22(&f2, true))
        .with(v22(&merged, true))
        .file(&format!("__commits/{merged}.vac"), vac.write());
    // Inside: the consolidated fragment alone.
    assert_eq!(a.visible(TimeWindow::until(5), false), [merged.as_str()]);
    // Window ending before the consolidated fragment's end: its inputs.
    assert_eq!(a.visible(TimeWindow::until(2), false), [f1.as_str()]);
    assert!(a.to_vacuum(TimeWindow::until(2)).is_empty());

    // v15+: a sparse read sees the consolidated fragment (its cells carry
    // timestamps) as soon as it overlaps the window, and it hides inputs;
    // a dense read still needs full overlap.
    let (f1, f2, merged) = (
        format!("__1_1_{U1}_22"),
        format!("__3_3_{U2}_22"),
        format!("__1_3_{U3}_22"),
    );
    let vac = VacuumFile::new(vec![
        format!("/__fragments/{f1}"),
        format!("/__fragments/{f2}"),
    ]);
    let a = Array::new()
        .with(v22(&f1, true))
        .with(v22(&f2, true))
        .with(v22(&merged, true))
        .file(&format!("__commits/{merged}.vac"), vac.write());
    assert_eq!(a.visible(TimeWindow::until(2), false), [merged.as_str()]);
    assert_eq!(a.visible(TimeWindow::until(2), true), [f1.as_str()]);
    // A window starting after the inputs: neither input, only the overlap.
    assert_eq!(a.visible(TimeWindow::new(2, 9), false), [merged]);
}

#[test]
fn delete_commit_listed_at_its_timestamp_only_inside_the_window() {
    let del = format!("__commits/__5_5_{U2}_22.del");
    let embedded = format!("__commits/__7_7_{U3}_22.del");
    let con = ConsolidatedCommits::new(vec![
        ConsolidatedCommit::commit(format!("__commits/__1_1_{U1}_22.wrt")),
        ConsolidatedCommit::delete(embedded.clone(), vec![1, 2, 3]),
    ]);
    let con_path = format!("__commits/__1_7_{U4}_22.con");
    let a = Array::new()
        .with(v22(&format!("__1_1_{U1}_22"), false))
        .with(vec![ListedFile::new(&del, 42)])
        .file(&con_path, con.write());
    let l = DirectoryListing::new(&a.files);
    let at = |w| l.resolve(&a.contents, w).unwrap().conditions;
    let all = at(TimeWindow::ALL);
    assert_eq!(all.len(), 2);
    assert_eq!(
        (all[0].marker.as_str(), all[0].timestamp()),
        (del.as_str(), 5)
    );
    assert_eq!(all[0].location, CommitLocation::File { path: del.clone() });
    assert_eq!(all[1].marker, embedded);
    let CommitLocation::Consolidated { path, offset, size } = &all[1].location else {
        panic!("{:?}", all[1].location)
    };
    assert_eq!((path, *size), (&con_path, 3));
    let bytes = &a.contents[&con_path];
    assert_eq!(&bytes[*offset as usize..][..3], [1, 2, 3]);
    // Before 5: none; [6, 9]: only the embedded one; before 7: only the file.
    assert!(at(TimeWindow::until(4)).is_empty());
    let mid: Vec<_> = at(TimeWindow::new(6, 9))
        .into_iter()
        .map(|c| c.marker)
        .collect();
    assert_eq!(mid, [embedded]);
    let early: Vec<_> = at(TimeWindow::until(6))
        .into_iter()
        .map(|c| c.marker)
        .collect();
    assert_eq!(early, [del]);
}

#[test]
fn unknown_files_are_ignored() {
    let f = format!("__1_1_{U1}_22");
    let a = Array::new().with(v22(&f, true)).with(vec![
        ListedFile::new("README.md", 5),
        ListedFile::new("__commits/notes.txt", 5),
        ListedFile::new("__commits/__x_y.wrt", 0),
        ListedFile::new("__fragments/junk/a0.tdb", 5),
        ListedFile::new("something/deep/inside.tdb", 5),
        ListedFile::new("__meta/__1_1_broken.tmp", 5),
        ListedFile::new(format!("__fragment_meta/__1_1_{U2}_22.meta"), 5),
    ]);
    assert_eq!(a.visible(TimeWindow::ALL, false), [f]);
    let l = DirectoryListing::new(&a.files);
    assert!(l.files_to_read().is_empty());
    let d = l.resolve(&a.contents, TimeWindow::ALL).unwrap();
    assert!(d.array_metadata.is_empty());
    assert_eq!(
        d.fragment_metadata,
        [format!("__fragment_meta/__1_1_{U2}_22.meta")]
    );
}

#[test]
fn both_eras_in_one_array() {
    // Written by v11 (root fragments, .ok), then by v22 after an upgrade,
    // with a v11-era consolidation whose .vac lists absolute URIs.
    let (old1, old2, old_merged) = (
        format!("__1_1_{U1}_11"),
        format!("__2_2_{U2}_11"),
        format!("__1_2_{U3}_11"),
    );
    let new = format!("__3_3_{U4}_22");
    let mut a = Array::new()
        .with(vec![ListedFile::new("__array_schema.tdb", 40)])
        .with(v22(&new, true));
    for n in [&old1, &old2, &old_merged] {
        a = a.with(vec![
            ListedFile::new(format!("{n}/__fragment_metadata.tdb"), 9),
            ListedFile::new(format!("{n}.ok"), 0),
        ]);
    }
    let vac = VacuumFile::new(vec![
        format!("file:///data/arr/{old1}"),
        format!("file:///data/arr/{old2}"),
    ]);
    let a = a.file(&format!("{old_merged}.vac"), vac.write());
    assert_eq!(a.visible(TimeWindow::ALL, true), [old_merged.clone(), new]);
    assert_eq!(a.to_vacuum(TimeWindow::ALL), [old1.clone(), old2.clone()]);
    let l = DirectoryListing::new(&a.files);
    let d = l.resolve(&a.contents, TimeWindow::ALL).unwrap();
    let f = d.filtered_fragments(true).unwrap();
    assert_eq!(
        f.commits_to_vacuum,
        [format!("{old1}.ok"), format!("{old2}.ok")]
    );
    assert_eq!(f.vac_files_to_vacuum, [format!("{old_merged}.vac")]);
    // The legacy schema comes first.
    assert_eq!(d.schemas, ["__array_schema.tdb", SCHEMA]);
}

#[test]
fn schema_in_force_is_chosen_from_names() {
    let schemas: Vec<String> = [
        "__array_schema.tdb".to_owned(),
        format!("__schema/__5_5_{U1}"),
        format!("__schema/__9_9_{U2}"),
    ]
    .into();
    assert_eq!(
        select_latest_schema(&schemas, 4),
        Some("__array_schema.tdb")
    );
    assert_eq!(select_latest_schema(&schemas, 5), Some(schemas[1].as_str()));
    assert_eq!(
        select_latest_schema(&schemas, u64::MAX),
        Some(schemas[2].as_str())
    );
    // Without a legacy schema, before the first: the first.
    assert_eq!(
        select_latest_schema(&schemas[1..], 1),
        Some(schemas[1].as_str())
    );
    assert_eq!(select_latest_schema(&[], 1), None);
}

#[test]
fn array_metadata_in_the_window_minus_vacuumed() {
    let (m1, m2, merged) = (
        format!("__meta/__1_1_{U1}"),
        format!("__meta/__2_2_{U2}"),
        format!("__meta/__1_2_{U3}"),
    );
    let vac = VacuumFile::new(vec![format!("/{m1}"), format!("/{m2}")]);
    let a = Array::new()
        .with(vec![
            ListedFile::new(&m1, 9),
            ListedFile::new(&m2, 9),
            ListedFile::new(&merged, 9),
        ])
        .file(&format!("{merged}.vac"), vac.write());
    let l = DirectoryListing::new(&a.files);
    let at = |w| l.resolve(&a.contents, w).unwrap();
    let all = at(TimeWindow::ALL);
    let paths: Vec<_> = all.array_metadata.iter().map(|m| m.path.clone()).collect();
    assert_eq!(paths, [merged.as_str()]);
    let replaced: Vec<_> = all
        .array_metadata_replaced
        .iter()
        .map(|m| m.path.clone())
        .collect();
    assert_eq!(replaced, [m1.clone(), m2.clone()]);
    assert_eq!(all.array_metadata_vac_to_vacuum, [format!("{merged}.vac")]);
    let early = at(TimeWindow::until(1));
    let paths: Vec<_> = early
        .array_metadata
        .iter()
        .map(|m| m.path.clone())
        .collect();
    assert_eq!(paths, [m1]);
}

#[test]
fn group_vacuum_lists_match_absolute_uris() {
    let (m1, m2, merged) = (
        format!("__meta/__1_1_{U1}"),
        format!("__meta/__2_2_{U2}"),
        format!("__meta/__1_2_{U3}"),
    );
    let vac = VacuumFile::new(vec![format!("file:///g/{m1}"), format!("file:///g/{m2}")]);
    let mut contents = HashMap::new();
    contents.insert(format!("{merged}.vac"), vac.write());
    let files = vec![
        ListedFile::new("__tiledb_group.tdb", 0),
        ListedFile::new(format!("__group/__1_1_{U4}_2"), 9),
        ListedFile::new(&m1, 9),
        ListedFile::new(&m2, 9),
        ListedFile::new(&merged, 9),
        ListedFile::new(format!("{merged}.vac"), 9),
    ];
    let l = DirectoryListing::new(&files);
    assert_eq!(l.files_to_read(), [format!("{merged}.vac")]);
    let g = l
        .resolve_group(&contents, TimeWindow::ALL, "file:///g")
        .unwrap();
    let paths: Vec<_> = g.metadata.iter().map(|m| m.path.clone()).collect();
    assert_eq!(paths, [merged.as_str()]);
    assert!(g.has_group_file);
    // Under another URI (a moved group) TileDB's lists match nothing.
    let g = l
        .resolve_group(&contents, TimeWindow::ALL, "file:///h")
        .unwrap();
    assert_eq!(g.metadata.len(), 3);
    // Not a group at all.
    let l = DirectoryListing::new(&[ListedFile::new(SCHEMA, 1)]);
    assert!(l.resolve_group(&contents, TimeWindow::ALL, "x").is_err());
}
