//! Groups: named collections of arrays and groups, with their own metadata.

use crate::{AnyStorage, Error, OpenOptions, Result};
use std::path::Path;
use tdb_format::ObjectType;
use tdb_fragment::{
    ArrayMetadata, GroupMember, GroupMemberEntry, GroupMembers, MetadataEntry, ObjectKind,
    OpenGroup, ReadStorage, TimeWindow,
};
use tdb_storage::Storage;

/// One change to a group's members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberChange {
    /// Adds the array or group at `uri`: relative to the group's directory
    /// when `relative` (the usual case: the group can be moved), else an
    /// absolute URI stored as given. Keyed by `name` if given, else by URI.
    Add {
        /// Where the member is.
        uri: String,
        /// Whether `uri` is relative to the group.
        relative: bool,
        /// The member's name.
        name: Option<String>,
    },
    /// Removes the member with this name, or this URI when unnamed.
    Remove(String),
}

/// A group opened at a time window, over any storage backend.
#[derive(Debug)]
pub struct Group<S = AnyStorage> {
    storage: S,
    pub(crate) dir: String,
    pub(crate) options: OpenOptions,
    pub(crate) open: OpenGroup,
}

impl Group<AnyStorage> {
    /// Opens the group at a local path or URI ([`crate::storage`]), now,
    /// unencrypted.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Group::open_with(path, OpenOptions::new())
    }

    /// Opens the group at a local path or URI with `options`.
    pub fn open_with(path: impl AsRef<Path>, options: OpenOptions) -> Result<Self> {
        let storage = crate::storage(path, &options.config)?;
        Group::open_in(storage, "", options)
    }

    /// Creates a group at a local path or URI (a directory is made if
    /// missing) and opens it.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let storage = crate::storage(path, &crate::StorageConfig::new())?;
        Group::create_in(storage, "", OpenOptions::new())
    }
}

impl<S: ReadStorage> Group<S> {
    /// Opens the group at key prefix `dir` of `storage` with `options`.
    pub fn open_in(storage: S, dir: &str, options: OpenOptions) -> Result<Self> {
        let window = options.window.unwrap_or(TimeWindow::ALL);
        let open = OpenGroup::open(&storage, dir, window, options.key.as_ref())?;
        Ok(Group {
            storage,
            dir: dir.to_owned(),
            options,
            open,
        })
    }

    /// The storage the group lives in.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// The members in force at the window.
    pub fn members(&self) -> &GroupMembers {
        &self.open.members
    }

    /// The group's metadata at the window.
    pub fn metadata(&self) -> &ArrayMetadata {
        &self.open.metadata
    }

    /// Opens the group again, now (everything committed so far).
    pub fn reopen(&mut self) -> Result<()> {
        self.options.window = None;
        self.open = OpenGroup::open(
            &self.storage,
            &self.dir,
            TimeWindow::ALL,
            self.options.key.as_ref(),
        )?;
        Ok(())
    }
}

impl<S: Storage> Group<S> {
    /// Consolidates the group metadata files the window sees into one, as
    /// TileDB's `GroupMetaConsolidator`: the replayed keys in one file
    /// spanning their timestamps, then a vacuum list naming the files it
    /// replaces by absolute URI (which TileDB's vacuum matches). Reads see
    /// the same metadata. `None` when there are fewer than two files.
    pub fn consolidate_metadata(&self) -> Result<Option<tdb_fragment::MetadataConsolidation>> {
        tdb_fragment::consolidate_group_metadata(
            &self.storage,
            &self.dir,
            &self.open,
            self.options.key.as_ref(),
        )
        .map_err(Error::Write)
    }

    /// Removes what group metadata consolidations replaced: the files the
    /// vacuum lists name, then the lists. Returns how many files went.
    pub fn vacuum_metadata(&self) -> Result<usize> {
        tdb_fragment::vacuum_group_metadata(&self.storage, &self.dir, self.options.key.as_ref())
            .map_err(Error::Write)
    }

    /// Removes what local writes killed mid-file left in progress in the
    /// group's directory once unchanged for `grace` (younger ones may be
    /// writes still going on). A group has nothing else to leave: its
    /// details and metadata files each appear whole or not at all. Returns
    /// the files removed.
    pub fn vacuum_uncommitted(&self, grace: std::time::Duration) -> Result<Vec<String>> {
        let grace = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        let removed = self
            .storage
            .remove_abandoned_uploads(&self.dir, crate::now_ms().saturating_sub(grace))
            .map_err(|e| Error::Write(tdb_fragment::FragmentError::storage(&self.dir, e)))?;
        Ok(removed
            .iter()
            .map(|k| tdb_storage::last_component(k).to_owned())
            .collect())
    }

    /// Creates a group at key prefix `dir` of `storage` and opens it; a
    /// directory that already holds an array or group is refused.
    pub fn create_in(storage: S, dir: &str, options: OpenOptions) -> Result<Self> {
        tdb_fragment::create_group(&storage, dir).map_err(Error::Write)?;
        Group::open_in(storage, dir, options)
    }

    /// Commits `changes` to the members as one details file, by TileDB's
    /// rules: a key added twice, or added and removed, in one commit is
    /// refused, as is removing a member the group does not have. A relative
    /// member's kind (array or group) is read from storage, as TileDB does;
    /// an absolute URI's is recorded as unknown.
    pub fn change_members(&self, changes: &[MemberChange]) -> Result<()> {
        let mut added = std::collections::HashSet::new();
        let mut removed = std::collections::HashSet::new();
        let mut entries = Vec::with_capacity(changes.len());
        for c in changes {
            let entry = match c {
                MemberChange::Add {
                    uri,
                    relative,
                    name,
                } => {
                    let kind = if *relative {
                        tdb_fragment::object_kind(
                            &self.storage,
                            &tdb_storage::join(&self.dir, uri),
                        )?
                    } else {
                        None
                    };
                    let object_type = match kind {
                        Some(ObjectKind::Array) => ObjectType::Array,
                        Some(ObjectKind::Group) => ObjectType::Group,
                        None => ObjectType::Invalid,
                    };
                    let m = GroupMember::new(uri.clone(), *relative, object_type, name.clone());
                    if !added.insert(m.key().to_owned()) {
                        return Err(self.refuse(m.key(), "is added twice in one commit"));
                    }
                    GroupMemberEntry::new(m, false)
                }
                MemberChange::Remove(key) => {
                    let m = self.find(key)?.clone();
                    if added.contains(m.key()) {
                        return Err(self.refuse(m.key(), "is added and removed in one commit"));
                    }
                    if !removed.insert(m.key().to_owned()) {
                        return Err(self.refuse(m.key(), "is removed twice in one commit"));
                    }
                    GroupMemberEntry::new(m, true)
                }
            };
            entries.push(entry);
        }
        if entries.is_empty() {
            return Ok(());
        }
        let details = self.open.members.details_for_write(&entries);
        tdb_fragment::write_group_details(
            &self.storage,
            &self.dir,
            &details,
            self.options.stamp(),
            self.options.key.as_ref(),
        )
        .map_err(Error::Write)?;
        Ok(())
    }

    /// Commits one batch of group metadata changes as one file (the last
    /// change of a key wins). An empty batch writes nothing.
    pub fn write_metadata(&self, changes: impl IntoIterator<Item = MetadataEntry>) -> Result<()> {
        crate::commit_metadata(
            &self.storage,
            &self.dir,
            changes,
            self.options.stamp(),
            self.options.key.as_ref(),
        )
    }

    /// The member keyed `key` (its name), or else the one member whose URI
    /// is `key`: as TileDB, a URI shared by several members must be removed
    /// by name.
    fn find(&self, key: &str) -> Result<&GroupMember> {
        if let Some(m) = self.open.members.get(key) {
            return Ok(m);
        }
        let mut by_uri = self.open.members.iter().filter(|m| m.uri == key);
        match (by_uri.next(), by_uri.next()) {
            (Some(m), None) => Ok(m),
            (Some(_), Some(_)) => {
                Err(self.refuse(key, "is the URI of several members: remove them by name"))
            }
            _ => Err(self.refuse(key, "is not a member of the group")),
        }
    }

    fn refuse(&self, key: &str, reason: &str) -> Error {
        Error::Group {
            group: if self.dir.is_empty() { "." } else { &self.dir }.to_owned(),
            reason: format!("member `{key}` {reason}"),
        }
    }
}
