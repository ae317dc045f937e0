//! Groups: which arrays and groups a group holds.
//!
//! A group directory is marked by the empty file `__tiledb_group.tdb`
//! (TileDB only tests that it exists; from TileDB 2.9 a `__group/` folder
//! marks it too). Its members live in timestamped *details* files under
//! `__group/`, each one generic tile holding `u32` details version, `u64`
//! member count and the members, each `u32` member version, `u8` object
//! type, `u8` relative flag, `u64`-length URI, `u8` name-set flag and, when
//! set, a `u64`-length name, then (member version 2 only) a `u8` deleted
//! flag. (The spec's table says the count is `u32`; TileDB has always
//! written `u64`.) Group metadata is array metadata under the group's
//! `__meta/` ([`crate::ArrayMetadata`]).
//!
//! Details version 1 (TileDB 2.9–2.15) files are whole snapshots; version 2
//! (TileDB 2.16+) files record additions and removals, replayed in order
//! from the first file. TileDB decides by the latest file's *name*: without
//! a version suffix (`__t1_t2_uuid`) or with `_1` it reads that file alone,
//! otherwise it replays every file and each must be version 2. Members are
//! keyed by name, or by URI when unnamed: a later member with the same key
//! replaces an earlier one, a deleted one removes it.

use crate::array_metadata::in_tiledb_order;
use crate::tile_file::{read_tile_file, write_tile_file};
use crate::{FragmentError, Result};
use std::collections::BTreeMap;
use tdb_format::le::{self, PResult};
use tdb_format::{FormatError, FormatVersion, ObjectType, TimestampedName};

/// The details version TileDB writes today.
pub const GROUP_DETAILS_VERSION: u32 = 2;

/// One member of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupMember {
    /// The member's URI as stored: relative to the group directory when
    /// `relative`, else absolute (e.g. `file:///...`, `s3://...`).
    pub uri: String,
    /// Whether `uri` is relative to the group.
    pub relative: bool,
    /// Array or group (INVALID when the writer could not tell).
    pub object_type: ObjectType,
    /// The member's name, if it was given one.
    pub name: Option<String>,
}

impl GroupMember {
    /// A member.
    pub fn new(uri: String, relative: bool, object_type: ObjectType, name: Option<String>) -> Self {
        GroupMember {
            uri,
            relative,
            object_type,
            name,
        }
    }

    /// The member's URI as TileDB reports it: a relative URI joined to
    /// `group_uri` (the group's own URI or path), an absolute one as is.
    pub fn resolved_uri(&self, group_uri: &str) -> String {
        if self.relative {
            format!("{}/{}", group_uri.trim_end_matches('/'), self.uri)
        } else {
            self.uri.clone()
        }
    }

    /// What TileDB keys members by: the name, else the URI.
    pub fn key(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.uri)
    }
}

/// One member record of a details file, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupMemberEntry {
    /// The member record's own version (1: no deleted flag; 2).
    pub version: u32,
    /// The member.
    pub member: GroupMember,
    /// Whether this record removes the member (version 2 only).
    pub deleted: bool,
}

impl GroupMemberEntry {
    /// A record at the current member version.
    pub fn new(member: GroupMember, deleted: bool) -> Self {
        GroupMemberEntry {
            version: GROUP_DETAILS_VERSION,
            member,
            deleted,
        }
    }
}

/// The content of one group details file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupDetails {
    /// The details version (1 or 2).
    pub version: u32,
    /// The member records in file order.
    pub entries: Vec<GroupMemberEntry>,
}

fn text<'a>(field: &'static str, input: &'a [u8]) -> PResult<'a, String> {
    let (input, b) = le::bytes_u64(field)(input)?;
    let s = String::from_utf8(b.to_vec()).map_err(|_| FormatError::Invalid {
        field,
        reason: "not UTF-8".to_owned(),
    })?;
    Ok((input, s))
}

fn version<'a>(field: &'static str, input: &'a [u8]) -> PResult<'a, u32> {
    let (input, v) = le::u32(field)(input)?;
    if v == 1 || v == 2 {
        Ok((input, v))
    } else {
        Err(FormatError::Invalid {
            field,
            reason: format!("unsupported version {v} (TileDB knows 1 and 2)"),
        })
    }
}

fn member(input: &[u8]) -> PResult<'_, GroupMemberEntry> {
    let (input, version) = version("member version", input)?;
    let (input, code) = le::u8("object type")(input)?;
    let object_type = ObjectType::from_code(code)?;
    let (input, relative) = le::bool("relative")(input)?;
    let (input, uri) = text("uri", input)?;
    let (mut input, name_set) = le::bool("name set")(input)?;
    let mut name = None;
    if name_set {
        let (rest, n) = text("name", input)?;
        name = Some(n);
        input = rest;
    }
    let mut deleted = false;
    if version >= 2 {
        let (rest, d) = le::bool("deleted")(input)?;
        deleted = d;
        input = rest;
    }
    let member = GroupMember {
        uri,
        relative,
        object_type,
        name,
    };
    Ok((
        input,
        GroupMemberEntry {
            version,
            member,
            deleted,
        },
    ))
}

fn group_file_label(name: &TimestampedName) -> String {
    format!("__group/{name}")
}

impl GroupDetails {
    /// Details at the current version holding `entries`.
    pub fn new(entries: Vec<GroupMemberEntry>) -> Self {
        GroupDetails {
            version: GROUP_DETAILS_VERSION,
            entries,
        }
    }

    /// Parses a whole details file (one generic tile) named `file` in
    /// errors (e.g. `__group/__1_1_<uuid>_2`).
    pub fn parse(file: &str, bytes: &[u8], key: Option<&[u8; 32]>) -> Result<Self> {
        let content = read_tile_file(file, "group details tile", bytes, key)?;
        Self::parse_content(file, &content)
    }

    /// Parses the unfiltered content of a details file.
    pub fn parse_content(file: &str, content: &[u8]) -> Result<Self> {
        let fmt = |field: String| move |source| FragmentError::format(file, field, source);
        let (version, rest) =
            le::run(|i| version("details version", i), content).map_err(fmt("header".into()))?;
        let (count, mut rest) =
            le::run(le::u64("member count"), rest).map_err(fmt("header".into()))?;
        // No allocation from the count: each record is pushed as it is read.
        let mut entries = Vec::new();
        for i in 0..count {
            let (e, r) = le::run(member, rest).map_err(fmt(format!("member {i}")))?;
            entries.push(e);
            rest = r;
        }
        if !rest.is_empty() {
            return Err(FragmentError::invalid(
                file,
                "members",
                format!("{} bytes after the last of {count} members", rest.len()),
            ));
        }
        Ok(GroupDetails { version, entries })
    }

    /// Writes the unfiltered content: the exact mirror of
    /// [`GroupDetails::parse_content`].
    pub fn write_content(&self, out: &mut Vec<u8>) -> Result<()> {
        le::put_u32(out, self.version);
        le::put_u64(out, self.entries.len() as u64);
        for e in &self.entries {
            if e.version < 2 && e.deleted {
                return Err(FragmentError::invalid(
                    "group details",
                    format!("member {}", e.member.key()),
                    "a version 1 member record cannot be a removal",
                ));
            }
            le::put_u32(out, e.version);
            le::put_u8(out, e.member.object_type.code());
            le::put_bool(out, e.member.relative);
            le::put_bytes_u64(out, e.member.uri.as_bytes());
            le::put_bool(out, e.member.name.is_some());
            if let Some(name) = &e.member.name {
                le::put_bytes_u64(out, name.as_bytes());
            }
            if e.version >= 2 {
                le::put_bool(out, e.deleted);
            }
        }
        Ok(())
    }

    /// Writes the whole file as TileDB does at the current format version:
    /// the content in one generic tile (GZIP, plus AES-256-GCM with a key).
    pub fn write(&self, file: &str, key: Option<&[u8; 32]>) -> Result<Vec<u8>> {
        let mut content = Vec::new();
        self.write_content(&mut content)?;
        write_tile_file(
            file,
            "group details tile",
            FormatVersion::WRITTEN,
            &content,
            key,
        )
    }

    /// A fresh name for a details file written at `timestamp`, as TileDB
    /// names them: `__t_t_uuid_<details version>`.
    pub fn generate_name(&self, timestamp: u64) -> Result<TimestampedName> {
        let v = FormatVersion::new(self.version)
            .map_err(|source| FragmentError::format("__group", "details version", source))?;
        TimestampedName::generate(timestamp, timestamp, Some(v))
            .map_err(|source| FragmentError::format("__group", "file name", source))
    }
}

/// A group's members as a read sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMembers {
    version: u32,
    members: BTreeMap<String, GroupMember>,
}

impl Default for GroupMembers {
    fn default() -> Self {
        GroupMembers {
            version: GROUP_DETAILS_VERSION,
            members: BTreeMap::new(),
        }
    }
}

/// TileDB's test for a details file that is a whole snapshot: four
/// underscores in the name, or five ending in `_1`.
fn is_snapshot_name(name: &TimestampedName) -> bool {
    let s = name.to_string();
    let underscores = s.bytes().filter(|&b| b == b'_').count();
    underscores == 4 || (underscores == 5 && s.ends_with("_1"))
}

impl GroupMembers {
    /// Resolves the details files a read sees (chosen by the group
    /// directory: vacuumed files dropped, the open window applied), each
    /// the whole file as stored, by TileDB's rule (see the module docs).
    /// No files: no members.
    pub fn resolve(files: &[(TimestampedName, &[u8])], key: Option<&[u8; 32]>) -> Result<Self> {
        let sorted = in_tiledb_order(files);
        let Some((latest, bytes)) = sorted.last() else {
            return Ok(GroupMembers::default());
        };
        if is_snapshot_name(latest) {
            let details = GroupDetails::parse(&group_file_label(latest), bytes, key)?;
            let mut out = GroupMembers {
                version: details.version,
                members: BTreeMap::new(),
            };
            out.apply(&details);
            return Ok(out);
        }
        let mut out = GroupMembers::default();
        for (name, bytes) in sorted {
            let file = group_file_label(name);
            let details = GroupDetails::parse(&file, bytes, key)?;
            if details.version != 2 {
                return Err(FragmentError::invalid(
                    &file,
                    "details version",
                    format!(
                        "{} where every file is replayed: expected 2",
                        details.version
                    ),
                ));
            }
            out.apply(&details);
        }
        Ok(out)
    }

    /// Replays one details file on top of these members.
    pub fn apply(&mut self, details: &GroupDetails) {
        for e in &details.entries {
            let key = e.member.key().to_owned();
            if e.deleted {
                self.members.remove(&key);
            } else {
                self.members.insert(key, e.member.clone());
            }
        }
    }

    /// The details version the group is at (a group stays at version 1 if
    /// its latest file is version 1).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The member keyed `key` (its name, or its URI when unnamed).
    pub fn get(&self, key: &str) -> Option<&GroupMember> {
        self.members.get(key)
    }

    /// Every member, sorted by key. (TileDB's own order is its hash map's,
    /// which nothing may rely on.)
    pub fn iter(&self) -> impl Iterator<Item = &GroupMember> {
        self.members.values()
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the group has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The details file TileDB writes when a group read at this state
    /// commits `changes`. Version 2: every current member, then each change
    /// replacing the record of its key (removals kept as records). Version
    /// 1: the resulting snapshot, removals left out.
    pub fn details_for_write(&self, changes: &[GroupMemberEntry]) -> GroupDetails {
        let mut records: BTreeMap<String, GroupMemberEntry> = self
            .members
            .iter()
            .map(|(k, m)| (k.clone(), GroupMemberEntry::new(m.clone(), false)))
            .collect();
        for c in changes {
            records.insert(c.member.key().to_owned(), c.clone());
        }
        let mut entries: Vec<GroupMemberEntry> = records.into_values().collect();
        for e in &mut entries {
            e.version = self.version;
        }
        if self.version < 2 {
            entries.retain(|e| !e.deleted);
        }
        GroupDetails {
            version: self.version,
            entries,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(uri: &str, name: Option<&str>) -> GroupMember {
        GroupMember::new(uri.into(), true, ObjectType::Array, name.map(Into::into))
    }

    #[test]
    fn v1_members_have_no_deleted_flag() {
        let d = GroupDetails {
            version: 1,
            entries: vec![GroupMemberEntry {
                version: 1,
                member: m("a", None),
                deleted: false,
            }],
        };
        let mut out = Vec::new();
        d.write_content(&mut out).unwrap();
        assert_eq!(out.len(), 4 + 8 + 4 + 1 + 1 + 8 + 1 + 1);
        assert_eq!(GroupDetails::parse_content("t", &out).unwrap(), d);
    }

    #[test]
    fn removals_and_replacements_by_key() {
        let mut g = GroupMembers::default();
        g.apply(&GroupDetails::new(vec![
            GroupMemberEntry::new(m("a", Some("x")), false),
            GroupMemberEntry::new(m("b", None), false),
        ]));
        g.apply(&GroupDetails::new(vec![
            GroupMemberEntry::new(m("c", Some("x")), false),
            GroupMemberEntry::new(m("b", None), true),
        ]));
        let got: Vec<_> = g.iter().map(|m| m.uri.as_str()).collect();
        assert_eq!(got, ["c"]);
        assert_eq!(g.get("x").unwrap().resolved_uri("s3://b/g/"), "s3://b/g/c");
        let d = g.details_for_write(&[GroupMemberEntry::new(m("c", Some("x")), true)]);
        assert_eq!(d.entries.len(), 1);
        assert!(d.entries[0].deleted);
    }

    #[test]
    fn snapshot_names() {
        let u = "0123456789abcdef0123456789abcdef";
        let p = |s: String| TimestampedName::parse(&s).unwrap();
        assert!(is_snapshot_name(&p(format!("__1_1_{u}"))));
        assert!(is_snapshot_name(&p(format!("__1_1_{u}_1"))));
        assert!(!is_snapshot_name(&p(format!("__1_1_{u}_2"))));
    }
}
