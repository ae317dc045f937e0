//! The directory rules on TileDB-written arrays of every format version:
//! the fragments a read at "now" sees and the vacuum candidates equal what
//! TileDB reported (expected.json), and every commit file of the corpus
//! parses and writes back byte for byte.

use std::collections::HashMap;
use std::fs;
use tdb_format::{single_generic_tile, FormatVersion};
use tdb_fragment::{
    ArrayDirectory, CommitLocation, ConsolidatedCommits, DeleteCommit, DirectoryListing,
    IgnoreFile, ListedFile, TimeWindow, UpdateCommit, VacuumFile,
};
use tdb_testdata::Object;
use tdb_tile::read_generic_tile_file;

/// The listing, read with std::fs, and the bytes of the files it asks for.
fn listing(o: &Object) -> (DirectoryListing, HashMap<String, Vec<u8>>) {
    let files: Vec<ListedFile> = o
        .files
        .iter()
        .map(|p| ListedFile::new(p.clone(), fs::metadata(o.dir.join(p)).unwrap().len()))
        .collect();
    let listing = DirectoryListing::new(&files);
    let contents = listing
        .files_to_read()
        .into_iter()
        .map(|p| (p.to_owned(), o.read(p)))
        .collect();
    (listing, contents)
}

fn resolve(o: &Object) -> ArrayDirectory {
    let (l, c) = listing(o);
    l.resolve(&c, TimeWindow::ALL)
        .unwrap_or_else(|e| panic!("{}: {e:?}", o.case))
}

fn names(paths: impl IntoIterator<Item = String>) -> Vec<String> {
    paths
        .into_iter()
        .map(|p| p.rsplit('/').next().unwrap().to_owned())
        .collect()
}

fn is_array(o: &Object) -> bool {
    o.files
        .iter()
        .any(|f| f == "__array_schema.tdb" || f.starts_with("__schema/"))
}

#[test]
fn visible_fragments_and_vacuum_candidates_match_tiledb() {
    let mut checked = 0;
    let mut versions = std::collections::BTreeSet::new();
    for o in tdb_testdata::objects() {
        let Some(expected) = &o.expected else {
            continue;
        };
        if expected["kind"] != "array" {
            continue;
        }
        let dir = resolve(&o);
        let dense = expected["schema"]["array_type"] == "dense";
        let filtered = dir.filtered_fragments(dense).unwrap();
        let got = names(filtered.fragments.iter().map(|f| f.path.clone()));
        let want: Vec<String> = expected["fragments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(got, want, "{}: visible fragments", o.case);
        for f in &filtered.fragments {
            versions.insert(f.format_version());
        }

        let info = dir.filtered_fragments(true).unwrap();
        let got = names(info.fragments_to_vacuum);
        let want: Vec<String> = expected["fragments_to_vacuum"]
            .as_array()
            .map(|v| v.iter().map(|f| f.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default();
        assert_eq!(got, want, "{}: fragments to vacuum", o.case);
        checked += 1;
    }
    assert!(checked > 80, "only {checked} arrays");
    // Every era of fragment names: uuid-first (v1-2), times-first (v3-4),
    // versioned in the root (v5-11) and in __fragments/ (v12+).
    for v in [1, 4, 5, 11, 12, 22] {
        assert!(
            versions
                .iter()
                .any(|&x| (x <= 4) == (v <= 4) && (x >= 12) == (v >= 12)),
            "no fragment of the era of v{v}"
        );
    }
}

/// Group member arrays have no fragment list in expected.json: there every
/// fragment directory with its commit file is visible, and nothing else.
#[test]
fn group_member_arrays_see_their_committed_fragments() {
    let mut checked = 0;
    for o in tdb_testdata::objects() {
        if o.expected.is_some() || !is_array(&o) {
            continue;
        }
        let dir = resolve(&o);
        let mut got = names(
            dir.visible_fragments(false)
                .unwrap()
                .into_iter()
                .map(|f| f.path),
        );
        got.sort();
        let mut want: Vec<String> = o
            .files
            .iter()
            .filter_map(|f| f.strip_prefix("__commits/")?.strip_suffix(".wrt"))
            .filter(|n| {
                o.files
                    .contains(&format!("__fragments/{n}/__fragment_metadata.tdb"))
            })
            .map(str::to_owned)
            .collect();
        want.sort();
        assert_eq!(got, want, "{}", o.case);
        assert_eq!(dir.schemas.len(), 1, "{}", o.case);
        // Some member arrays hold nothing yet (a vector index's updates).
        checked += usize::from(!want.is_empty());
    }
    assert!(checked >= 3, "only {checked} member arrays with fragments");
}

#[test]
fn groups_resolve_their_details_and_metadata() {
    let mut checked = 0;
    for o in tdb_testdata::objects() {
        if is_array(&o) {
            continue;
        }
        let (l, c) = listing(&o);
        let g = l
            .resolve_group(&c, TimeWindow::ALL, &o.dir.display().to_string())
            .unwrap_or_else(|e| panic!("{}: {e:?}", o.case));
        let details: Vec<_> = o
            .files
            .iter()
            .filter(|f| f.starts_with("__group/"))
            .collect();
        // The fixture's vacuum lists name files where the corpus was
        // written, so here they hide nothing.
        let meta: Vec<_> = o
            .files
            .iter()
            .filter(|f| f.starts_with("__meta/") && !f.ends_with(".vac"))
            .collect();
        assert_eq!(g.details.len(), details.len(), "{}", o.case);
        assert_eq!(g.metadata.len(), meta.len(), "{}", o.case);
        assert_eq!(
            g.latest_details().map(|d| &d.path),
            details.last().copied(),
            "{}",
            o.case
        );
        // Nothing at all before the first write.
        let early = l.resolve_group(&c, TimeWindow::until(0), "x").unwrap();
        assert!(early.details.is_empty() && early.metadata.is_empty());
        checked += 1;
    }
    assert!(checked >= 2, "only {checked} groups");
}

#[test]
fn schema_in_force_by_name() {
    for o in tdb_testdata::objects() {
        let Some(expected) = &o.expected else {
            continue;
        };
        if expected["kind"] != "array" {
            continue;
        }
        let dir = resolve(&o);
        // At "now" the last schema is in force (TileDB's latest schema).
        assert_eq!(
            dir.latest_schema(),
            dir.schemas.last().unwrap(),
            "{}",
            o.case
        );
        if o.files.iter().any(|f| f == "__array_schema.tdb") {
            assert_eq!(dir.schemas[0], "__array_schema.tdb", "{}", o.case);
        }
    }
}

/// Key of a case, for encrypted delete commits.
fn key(o: &Object) -> Option<&[u8; 32]> {
    o.key.as_ref()
}

#[test]
fn every_commit_file_parses_and_writes_back() {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for o in tdb_testdata::objects() {
        for f in &o.files {
            let ext = f.rsplit('.').next().unwrap();
            let bytes = o.read(f);
            match ext {
                "con" => {
                    let con = ConsolidatedCommits::parse(f, &bytes).unwrap();
                    assert_eq!(con.write(), bytes, "{}: {f}", o.case);
                    assert!(!con.commits.is_empty());
                    for c in &con.commits {
                        if let Some(del) = &c.embedded {
                            DeleteCommit::parse(&c.path, del, key(&o)).unwrap();
                        }
                    }
                }
                "ign" => assert_eq!(IgnoreFile::parse(f, &bytes).unwrap().write(), bytes),
                "vac" => {
                    let v = VacuumFile::parse(f, &bytes).unwrap();
                    assert_eq!(v.write(), bytes, "{}: {f}", o.case);
                    for e in &v.entries {
                        // Group metadata lists name files by absolute URI
                        // (where the corpus was written); others fragments.
                        if f.starts_with("__meta/") {
                            let name = e.rsplit('/').next().unwrap();
                            assert!(
                                o.files.contains(&format!("__meta/{name}")),
                                "{}: {f}: {e} names no metadata file",
                                o.case
                            );
                            continue;
                        }
                        let p = VacuumFile::array_relative_path(f, e).unwrap();
                        assert!(
                            o.files.iter().any(|x| x.starts_with(&format!("{p}/"))),
                            "{}: {f}: {e} names no fragment",
                            o.case
                        );
                    }
                }
                "del" => {
                    let d = DeleteCommit::parse(f, &bytes, key(&o)).unwrap();
                    let v = single_generic_tile(&bytes).unwrap().header.version;
                    // The tile's contents are TileDB's bytes exactly, and so
                    // is the whole file unencrypted (zlib level 1 as TileDB's).
                    let tile = read_generic_tile_file(f, &bytes, key(&o)).unwrap();
                    if v == FormatVersion::WRITTEN {
                        assert_eq!(d.serialize(f).unwrap(), tile, "{}: {f}", o.case);
                    }
                    let ours = d.write(f, v, key(&o)).unwrap();
                    assert_eq!(DeleteCommit::parse(f, &ours, key(&o)).unwrap(), d);
                    if key(&o).is_none() && v == FormatVersion::WRITTEN {
                        assert!(ours == bytes, "{}: {f}: not TileDB's bytes", o.case);
                    }
                }
                "upd" => {
                    let u = UpdateCommit::parse(f, &bytes, key(&o)).unwrap();
                    let v = single_generic_tile(&bytes).unwrap().header.version;
                    let tile = read_generic_tile_file(f, &bytes, key(&o)).unwrap();
                    if v == FormatVersion::WRITTEN {
                        assert_eq!(u.serialize(f).unwrap(), tile, "{}: {f}", o.case);
                    }
                }
                _ => continue,
            }
            *seen.entry(ext.to_owned()).or_default() += 1;
        }
    }
    // The corpus has consolidated commits, vacuum lists and delete commits.
    for ext in ["con", "vac", "del"] {
        assert!(
            seen.get(ext).copied().unwrap_or(0) > 0,
            "no .{ext} file in the corpus"
        );
    }
}

/// Delete commits in the corpus: listed in the window, from their own file
/// or from inside a consolidated commits file, with TileDB's timestamps.
#[test]
fn delete_commits_are_listed_with_their_locations() {
    let mut checked = 0;
    for o in tdb_testdata::objects().into_iter().filter(is_array) {
        let dir = resolve(&o);
        let dels: Vec<&String> = o.files.iter().filter(|f| f.ends_with(".del")).collect();
        let cons: Vec<&String> = o.files.iter().filter(|f| f.ends_with(".con")).collect();
        let mut embedded = 0;
        for c in &cons {
            let con = ConsolidatedCommits::parse(c, &o.read(c)).unwrap();
            embedded += con.commits.iter().filter(|c| c.embedded.is_some()).count();
        }
        assert_eq!(dir.conditions.len(), dels.len() + embedded, "{}", o.case);
        for c in &dir.conditions {
            let (path, range) = match &c.location {
                CommitLocation::File { path } => (path, None),
                CommitLocation::Consolidated { path, offset, size } => {
                    (path, Some(*offset as usize..(offset + size) as usize))
                }
                other => panic!("{other:?}"),
            };
            let bytes = o.read(path);
            let tile = match range {
                Some(r) => &bytes[r],
                None => &bytes[..],
            };
            DeleteCommit::parse(&c.marker, tile, key(&o)).unwrap();
            // Opened before the delete: not applied.
            let (l, contents) = listing(&o);
            let before = l
                .resolve(&contents, TimeWindow::until(c.timestamp() - 1))
                .unwrap();
            assert!(before.conditions.iter().all(|x| x.marker != c.marker));
            checked += 1;
        }
    }
    assert!(checked >= 2, "only {checked} delete commits");
}
