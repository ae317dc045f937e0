//! Groups on TileDB-written fixtures: members and metadata of the group, its
//! subgroups and its member arrays, byte-exact rewrites of details files,
//! truncations, and TileDB's snapshot-or-replay rule.

use crate::support_meta;

use serde_json::Value;
use std::path::Path;
use support_meta::{all_files, assert_metadata, borrowed, members, resolve, select};
use tdb_format::{single_generic_tile, ObjectType, TimestampedName};
use tdb_fragment::{GroupDetails, GroupMember, GroupMemberEntry, GroupMembers};
use tdb_testdata::Object;

fn basename(uri: &str) -> &str {
    uri.trim_end_matches('/').rsplit('/').next().unwrap()
}

/// Compares members with expected.json's `members` as sets.
fn assert_members(what: &str, got: &GroupMembers, expected: &Value) {
    let mut got: Vec<(String, String, String, bool)> = got
        .iter()
        .map(|m| {
            (
                m.name.clone().unwrap_or_default(),
                basename(&m.uri).to_owned(),
                m.object_type.name().to_lowercase(),
                m.relative,
            )
        })
        .collect();
    let mut want: Vec<(String, String, String, bool)> = expected
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap_or_default().to_owned(),
                m["uri_basename"].as_str().unwrap().to_owned(),
                m["type"].as_str().unwrap().to_lowercase(),
                m["relative"].as_bool().unwrap(),
            )
        })
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "{what}: members");
}

/// `(path, entry)` of a list of objects carrying `path`, or of an object
/// keyed by path (FORMAT.md allows both).
fn by_path(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Array(list) => list
            .iter()
            .map(|e| (e["path"].as_str().unwrap().to_owned(), e.clone()))
            .collect(),
        Value::Object(map) => map.iter().map(|(k, e)| (k.clone(), e.clone())).collect(),
        _ => Vec::new(),
    }
}

fn rel(top: &Path, dir: &Path) -> String {
    dir.strip_prefix(top).unwrap().display().to_string()
}

#[test]
fn group_members_and_metadata_equal_expected() {
    let objects = tdb_testdata::objects();
    let mut groups = 0;
    let (mut subgroups_seen, mut arrays_seen) = (0, 0);
    for top in objects.iter().filter(|o| o.expected.is_some()) {
        let expected = top.expected.as_ref().unwrap();
        if expected["kind"] != "group" {
            continue;
        }
        groups += 1;
        let nested: Vec<&Object> = objects
            .iter()
            .filter(|o| o.case == top.case && o.dir.starts_with(&top.dir))
            .collect();
        let find = |path: &str| {
            *nested
                .iter()
                .find(|o| rel(&top.dir, &o.dir) == path)
                .unwrap_or_else(|| panic!("{}: no object at {path}", top.case))
        };
        // The group itself.
        assert_eq!(top.read("__tiledb_group.tdb"), b"", "the marker is empty");
        let group = &expected["group"];
        assert_members(&top.case, &members(top), &group["members"]);
        assert_metadata(&top.case, &resolve(top, None), &group["metadata"]);
        // Subgroups.
        let subgroups = by_path(&expected["subgroups"]);
        for (path, sub) in &subgroups {
            let obj = find(path);
            let what = format!("{} {path}", top.case);
            assert_members(&what, &members(obj), &sub["members"]);
            assert_metadata(&what, &resolve(obj, None), &sub["metadata"]);
        }
        // Member arrays' metadata.
        let arrays = by_path(&expected["member_arrays"]);
        for (path, arr) in &arrays {
            let what = format!("{} {path}", top.case);
            assert_metadata(&what, &resolve(find(path), None), &arr["metadata"]);
        }
        subgroups_seen += subgroups.len();
        arrays_seen += arrays.len();
    }
    assert!(groups >= 1);
    // Subgroups and member arrays were among them.
    assert!(
        subgroups_seen >= 1 && arrays_seen >= 3,
        "{subgroups_seen} {arrays_seen}"
    );
}

#[test]
fn details_files_rewrite_byte_for_byte() {
    let files = all_files("__group");
    assert!(files.len() >= 2, "{} details files", files.len());
    for (obj, name, bytes) in &files {
        let key = obj.key.as_ref();
        let version = single_generic_tile(bytes).unwrap().header.version.get();
        let content = tdb_tile::read_generic_tile_file(name, bytes, key).unwrap();
        let details = GroupDetails::parse_content(name, &content).unwrap();
        // TileDB 2.16+ writes details v2; TileDB's own input `group_v1`
        // (generic tile v17) is v1.
        let v1 = obj.case == "tiledb_inputs/group_v1";
        assert_eq!(details.version, if v1 { 1 } else { 2 }, "{name}");
        assert!(details.entries.iter().all(|e| e.version == details.version));
        let mut out = Vec::new();
        details.write_content(&mut out).unwrap();
        assert_eq!(out, content, "{}: {name}", obj.case);
        let written = details.write(name, key).unwrap();
        assert_eq!(GroupDetails::parse(name, &written, key).unwrap(), details);
        assert_eq!(version, if v1 { 17 } else { 22 }, "{name}");
        if key.is_none() && !v1 {
            assert!(
                written == *bytes,
                "{}: {name}: not TileDB's bytes",
                obj.case
            );
        }
    }
}

#[test]
fn truncated_details_files_are_errors() {
    for (obj, name, bytes) in all_files("__group") {
        let key = obj.key.as_ref();
        for cut in 0..bytes.len() {
            assert!(GroupDetails::parse(&name, &bytes[..cut], key).is_err());
        }
        // The member count makes every cut of the content an error too.
        let content = tdb_tile::read_generic_tile_file(&name, &bytes, key).unwrap();
        for cut in 0..content.len() {
            let err = GroupDetails::parse_content(&name, &content[..cut]).unwrap_err();
            assert!(err.to_string().contains(&name), "{err}");
        }
        let mut long = content.clone();
        long.push(0);
        assert!(GroupDetails::parse_content(&name, &long).is_err());
    }
}

const U: &str = "0123456789abcdef0123456789abcdef";

fn name(t: u64, suffix: &str) -> TimestampedName {
    TimestampedName::parse(&format!("__{t}_{t}_{U}{suffix}")).unwrap()
}

fn file(details: &GroupDetails) -> Vec<u8> {
    details.write("test", None).unwrap()
}

fn real_group() -> (Object, Vec<(TimestampedName, Vec<u8>)>) {
    let obj = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == "group_basic" && o.expected.is_some())
        .unwrap();
    let files = select(&obj, "__group", None);
    (obj, files)
}

#[test]
fn v2_files_replay_removals_on_tiledb_members() {
    let (_, files) = real_group();
    let (first, bytes) = &files[0];
    let base = GroupMembers::resolve(&borrowed(&files), None).unwrap();
    // A later v2 file removing `sub` and adding an absolute, unnamed member.
    let sub = base.get("sub").unwrap().clone();
    let extra = GroupMember::new(
        "file:///elsewhere/arr".into(),
        false,
        ObjectType::Array,
        None,
    );
    let change = base.details_for_write(&[
        GroupMemberEntry::new(sub, true),
        GroupMemberEntry::new(extra, false),
    ]);
    assert_eq!(change.entries.len(), 4, "current members plus the new one");
    let later = file(&change);
    let both = [
        (first.clone(), &bytes[..]),
        (name(first.t1 + 1, "_2"), &later[..]),
    ];
    let got = GroupMembers::resolve(&both, None).unwrap();
    let keys: Vec<_> = got.iter().map(GroupMember::key).collect();
    assert_eq!(keys, ["dense_a", "file:///elsewhere/arr", "sparse_b"]);
}

#[test]
fn snapshot_names_read_the_latest_file_alone() {
    let member = |uri: &str| GroupMember::new(uri.into(), true, ObjectType::Group, None);
    let v1 = |uris: &[&str]| {
        let mut d = GroupDetails::new(
            uris.iter()
                .map(|u| GroupMemberEntry::new(member(u), false))
                .collect(),
        );
        d.version = 1;
        for e in &mut d.entries {
            e.version = 1;
        }
        d
    };
    // TileDB 2.9–2.18 named v1 files without a suffix, 2.19+ with `_1`.
    for suffix in ["", "_1"] {
        let (a, b) = (file(&v1(&["x", "y"])), file(&v1(&["z"])));
        let files = [(name(1, suffix), &a[..]), (name(2, suffix), &b[..])];
        let got = GroupMembers::resolve(&files, None).unwrap();
        assert_eq!(got.version(), 1);
        assert_eq!(got.iter().map(GroupMember::key).collect::<Vec<_>>(), ["z"]);
        // A v1 group stays v1: its next file is a snapshot without removals.
        let next = got.details_for_write(&[GroupMemberEntry::new(member("z"), true)]);
        assert_eq!((next.version, next.entries.len()), (1, 0));
    }
    // Under a v2 name every file is replayed and each must be version 2.
    let (a, b) = (file(&v1(&["x"])), file(&GroupDetails::new(Vec::new())));
    let files = [(name(1, ""), &a[..]), (name(2, "_2"), &b[..])];
    let err = GroupMembers::resolve(&files, None).unwrap_err();
    assert!(err.to_string().contains("details version"), "{err}");
    // No details files at all (a pre-2.9 group): no members.
    assert!(GroupMembers::resolve(&[], None).unwrap().is_empty());
}
