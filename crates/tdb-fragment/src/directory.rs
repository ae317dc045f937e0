//! Which files of an array (or group) directory a read opened at a time
//! window sees, in every format era, by TileDB's rules
//! (`ArrayDirectory` and `GroupDirectory` of TileDB 2.30).
//!
//! Pure: [`DirectoryListing::new`] takes the listing, says which small
//! files decide visibility ([`DirectoryListing::files_to_read`]) and
//! [`DirectoryListing::resolve`] takes their bytes. The rules, in short:
//! - Schemas: `__array_schema.tdb` (pre-v10) first, then `__schema/` in
//!   name order; the one in force at `t` is the last whose end timestamp is
//!   at most `t`, else the first ([`select_latest_schema`]).
//! - Fragments in the array root (v1–v11) are committed by `<name>.ok`
//!   (v5+) or, before v5, by their `__fragment_metadata.tdb`; fragments in
//!   `__fragments/` (v12+) by `__commits/<name>.wrt`. A `.con` in
//!   `__commits/` commits every line it lists, minus the lines of every
//!   `.ign` file.
//! - A `.vac` whose timestamps fall in the window hides the fragments it
//!   lists that also fall in the window (so a consolidated fragment
//!   supersedes its inputs inside the window and not outside it).
//! - A fragment falls in the window when its timestamp range lies inside
//!   it, except for reads of sparse arrays from fragments of format v15+,
//!   which need only overlap it (their cells carry timestamps).
//! - Visible fragments are ordered by start timestamp, ties in listing
//!   order (TileDB's `std::sort` on start timestamps: stable for the small
//!   lists of real arrays, unspecified beyond 16 fragments with equal starts).

use crate::commits::{ConsolidatedCommits, IgnoreFile, VacuumFile};
use crate::{FragmentError, Result};
use std::collections::{BTreeSet, HashMap, HashSet};
use tdb_format::names::*;
use tdb_format::{classify, ObjectFile, TimestampedName};
use tdb_storage::last_component;

/// One file of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ListedFile {
    /// Path relative to the array or group directory, `/`-separated.
    pub path: String,
    /// Size in bytes, where the listing gave it (see
    /// [`tdb_storage::ObjectMeta::size`]).
    pub size: Option<u64>,
}

impl ListedFile {
    /// A listed file, of known size or not.
    pub fn new(path: impl Into<String>, size: impl Into<Option<u64>>) -> Self {
        ListedFile {
            path: path.into(),
            size: size.into(),
        }
    }
}

/// The timestamps `[start, end]` (inclusive, ms) an array is opened at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimeWindow {
    /// First timestamp seen.
    pub start: u64,
    /// Last timestamp seen.
    pub end: u64,
}

impl TimeWindow {
    /// Every timestamp.
    pub const ALL: TimeWindow = TimeWindow {
        start: 0,
        end: u64::MAX,
    };

    /// `[start, end]`.
    pub fn new(start: u64, end: u64) -> Self {
        TimeWindow { start, end }
    }

    /// `[0, end]`: opened at `end`.
    pub fn until(end: u64) -> Self {
        TimeWindow { start: 0, end }
    }

    /// Whether `[t1, t2]` lies inside the window.
    pub fn contains(&self, (t1, t2): (u64, u64)) -> bool {
        t1 >= self.start && t2 <= self.end
    }

    /// Whether `[t1, t2]` meets the window.
    pub fn overlaps(&self, (t1, t2): (u64, u64)) -> bool {
        t1 <= self.end && self.start <= t2
    }
}

/// A file and the timestamped name it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TimestampedFile {
    /// Path relative to the directory (for a fragment: its directory).
    pub path: String,
    /// The parsed name.
    pub name: TimestampedName,
}

impl TimestampedFile {
    pub(crate) fn new(path: String, name: TimestampedName) -> Self {
        TimestampedFile { path, name }
    }

    /// The last path component (a fragment's or schema's name, with any
    /// extension).
    pub fn file_name(&self) -> &str {
        last_component(&self.path)
    }

    /// The format version the name implies (TileDB's `FragmentID`).
    pub fn format_version(&self) -> u32 {
        self.name.implied_format_version()
    }

    fn is_vacuum_file(&self) -> bool {
        self.path.ends_with(VAC_EXT)
    }
}

/// An array's commit files by kind (paths relative to the array).
pub(crate) struct CommitFiles {
    /// Consolidated commits (`__commits/*.con`).
    pub con: Vec<String>,
    /// Ignore files (`__commits/*.ign`).
    pub ign: Vec<String>,
    /// Fragment and delete commits (`__commits/*.wrt`, `*.del`).
    pub commits: Vec<String>,
    /// Pre-v12 fragment commits (`<fragment>.ok` in the root).
    pub ok: Vec<String>,
}

/// Where a delete or update commit's serialized condition lives.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommitLocation {
    /// Its own `.del`/`.upd` file (the whole file is the generic tile).
    File {
        /// The file.
        path: String,
    },
    /// Embedded in a consolidated commits file.
    Consolidated {
        /// The `.con` file.
        path: String,
        /// Where the embedded `.del` bytes start.
        offset: u64,
        /// How many bytes they are.
        size: u64,
    },
}

impl CommitLocation {
    /// The file holding the condition's generic tile, and its bytes there.
    pub fn range(&self) -> (&str, tdb_storage::ByteRange) {
        match self {
            CommitLocation::File { path } => (path, tdb_storage::ByteRange::Whole),
            CommitLocation::Consolidated { path, offset, size } => {
                (path, tdb_storage::ByteRange::new(*offset, *size))
            }
        }
    }
}

/// A delete or update commit a read in the window applies.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConditionCommit {
    /// The commit's path relative to the array (`__commits/<name>.del`),
    /// TileDB's condition marker.
    pub marker: String,
    /// Its name.
    pub name: TimestampedName,
    /// Whether it is an update (`.upd`) rather than a delete (`.del`).
    pub is_update: bool,
    /// Where its condition is.
    pub location: CommitLocation,
}

impl ConditionCommit {
    /// The timestamp the condition applies at (start of its name's range).
    pub fn timestamp(&self) -> u64 {
        self.name.t1
    }
}

/// An array (or group) directory listing, classified.
#[derive(Debug, Clone)]
pub struct DirectoryListing {
    /// Every file, sorted by path bytes (TileDB sorts listings).
    files: Vec<(ListedFile, ObjectFile)>,
    /// Directories in the root, listed on their own: a pre-v12 fragment
    /// directory counts when listed even if its files were not.
    root_dirs: BTreeSet<String>,
}

impl DirectoryListing {
    /// Classifies `files` (any order; files matching no pattern of the
    /// format are kept but never seen, as TileDB ignores them).
    pub fn new(files: &[ListedFile]) -> Self {
        let mut files: Vec<_> = files
            .iter()
            .map(|f| (f.clone(), classify(&f.path)))
            .collect();
        files.sort_by(|a, b| a.0.path.cmp(&b.0.path));
        files.dedup_by(|a, b| a.0.path == b.0.path);
        DirectoryListing {
            files,
            root_dirs: BTreeSet::new(),
        }
    }

    /// Adds directories of the root (names, or paths whose first component
    /// is taken), as a storage listing reports them beside its files.
    pub fn with_root_dirs<'a>(mut self, dirs: impl IntoIterator<Item = &'a str>) -> Self {
        for d in dirs {
            let first = d.split('/').next().unwrap_or(d);
            self.root_dirs.insert(first.to_owned());
        }
        self
    }

    fn in_dir<'a>(
        &'a self,
        dir: &'a str,
    ) -> impl Iterator<Item = &'a (ListedFile, ObjectFile)> + 'a {
        self.files.iter().filter(move |(f, _)| {
            f.path
                .strip_prefix(dir)
                .and_then(|r| r.strip_prefix('/'))
                .is_some_and(|r| !r.contains('/'))
        })
    }

    /// The commit files, as commit consolidation and vacuuming see them,
    /// each kind in listing order.
    pub(crate) fn commit_files(&self) -> CommitFiles {
        fn ending<'a>(
            files: impl Iterator<Item = &'a (ListedFile, ObjectFile)>,
            exts: &[&str],
        ) -> Vec<String> {
            files
                .filter(|(f, _)| exts.iter().any(|e| f.path.ends_with(e)))
                .map(|(f, _)| f.path.clone())
                .collect()
        }
        CommitFiles {
            con: ending(self.in_dir(COMMITS_DIR), &[CON_EXT]),
            ign: ending(self.in_dir(COMMITS_DIR), &[IGN_EXT]),
            commits: ending(self.in_dir(COMMITS_DIR), &[WRT_EXT, DEL_EXT]),
            ok: ending(self.root_files(), &[OK_EXT]),
        }
    }

    fn root_files(&self) -> impl Iterator<Item = &(ListedFile, ObjectFile)> {
        self.files.iter().filter(|(f, _)| !f.path.contains('/'))
    }

    /// Whether `path` is listed.
    pub fn has(&self, path: &str) -> bool {
        self.files
            .binary_search_by(|(f, _)| f.path.as_str().cmp(path))
            .is_ok()
    }

    /// The files whose bytes [`DirectoryListing::resolve`] (or
    /// [`DirectoryListing::resolve_group`]) needs: consolidated commits and
    /// ignore files in `__commits/`, and every vacuum list (`__commits/`,
    /// the pre-v12 array root, `__meta/`, `__group/`). All small text files.
    pub fn files_to_read(&self) -> Vec<&str> {
        self.files
            .iter()
            .filter(|(f, kind)| {
                let dir = f.path.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
                match kind {
                    ObjectFile::ConsolidatedCommits(_) | ObjectFile::Ignore(_) => {
                        dir == COMMITS_DIR
                    }
                    ObjectFile::Vacuum(_) => {
                        [COMMITS_DIR, METADATA_DIR, GROUP_DETAILS_DIR, ""].contains(&dir)
                    }
                    _ => false,
                }
            })
            .map(|(f, _)| f.path.as_str())
            .collect()
    }

    /// Every group details and metadata file (vacuum lists aside), which a
    /// group open reads in the same batch as the vacuum lists: they are
    /// small, and a second round trip would cost more than the bytes.
    pub fn group_files(&self) -> Vec<String> {
        self.files
            .iter()
            .filter(|(_, kind)| {
                matches!(kind, ObjectFile::GroupDetails(_) | ObjectFile::Metadata(_))
            })
            .map(|(f, _)| f.path.clone())
            .collect()
    }

    /// The schema files, in TileDB's order: `__array_schema.tdb` first,
    /// then `__schema/` by name (enumerations excluded).
    pub fn schema_files(&self) -> Vec<String> {
        self.files
            .iter()
            .filter(|(_, k)| matches!(k, ObjectFile::LegacySchema))
            .chain(
                self.files
                    .iter()
                    .filter(|(_, k)| matches!(k, ObjectFile::Schema(_))),
            )
            .map(|(f, _)| f.path.clone())
            .collect()
    }

    /// Resolves the array directory for a read opened at `window`.
    /// `contents` holds the bytes of (at least) the
    /// [`files_to_read`](DirectoryListing::files_to_read), keyed by path.
    pub fn resolve(
        &self,
        contents: &HashMap<String, Vec<u8>>,
        window: TimeWindow,
    ) -> Result<ArrayDirectory> {
        let schemas = self.schema_files();
        if schemas.is_empty() {
            return Err(FragmentError::missing(".", "array schema"));
        }
        let read = |path: &str| {
            contents
                .get(path)
                .map(Vec::as_slice)
                .ok_or_else(|| FragmentError::missing(path, "contents (not read)"))
        };
        let commits: Vec<_> = self.in_dir(COMMITS_DIR).collect();

        // Ignore files: every one, whatever its timestamps.
        let mut ignored = HashSet::new();
        for (f, _) in commits.iter().filter(|(f, _)| f.path.ends_with(IGN_EXT)) {
            ignored.extend(IgnoreFile::parse(&f.path, read(&f.path)?)?.commits);
        }

        // Consolidated commits, and the deletes/updates they embed.
        let mut consolidated = BTreeSet::new();
        let mut conditions = Vec::new();
        for (f, _) in commits.iter().filter(|(f, _)| f.path.ends_with(CON_EXT)) {
            let con = ConsolidatedCommits::parse(&f.path, read(&f.path)?)?;
            for c in con.commits {
                if !ignored.contains(&c.path) {
                    consolidated.insert(c.path.clone());
                }
                if let Some(tile) = &c.embedded {
                    let name = marker_name(&f.path, &c.path)?;
                    if window.contains(name.timestamp_range()) {
                        conditions.push(ConditionCommit {
                            is_update: c.path.ends_with(UPD_EXT),
                            location: CommitLocation::Consolidated {
                                path: f.path.clone(),
                                offset: c.embedded_offset,
                                size: tile.len() as u64,
                            },
                            marker: c.path,
                            name,
                        });
                    }
                }
            }
        }

        // v1–v11: fragment directories (and vacuum lists) in the root.
        let mut fragments = Vec::new();
        let ok: HashSet<&str> = self
            .root_files()
            .filter_map(|(f, _)| f.path.strip_suffix(OK_EXT))
            .collect();
        let root_entries: BTreeSet<&str> = self
            .files
            .iter()
            .map(|(f, _)| f.path.split('/').next().unwrap_or(""))
            .chain(self.root_dirs.iter().map(String::as_str))
            .collect();
        for entry in root_entries {
            if entry.ends_with('.') {
                continue;
            }
            if entry.ends_with(VAC_EXT) {
                if let Ok(name) = TimestampedName::parse(entry) {
                    fragments.push(TimestampedFile::new(entry.to_owned(), name));
                }
                continue;
            }
            if entry.contains('.') || ARRAY_DIRS.contains(&entry) {
                continue;
            }
            let Ok(name) = TimestampedName::parse(entry) else {
                continue;
            };
            let committed = ok.contains(entry)
                || consolidated.contains(&format!("{entry}{OK_EXT}"))
                || (name.implied_format_version() < 5
                    && self.has(&format!("{entry}/{FRAGMENT_METADATA_FILE}")));
            if committed {
                fragments.push(TimestampedFile::new(entry.to_owned(), name));
            }
        }

        // v12+: commits in `.con` files, then `__commits/` itself.
        for c in consolidated.iter().filter(|c| c.ends_with(WRT_EXT)) {
            let file = last_component(c);
            let stem = file.strip_suffix(WRT_EXT).unwrap_or(file);
            let name = marker_name(c, stem)?;
            fragments.push(TimestampedFile::new(
                format!("{FRAGMENTS_DIR}/{stem}"),
                name,
            ));
        }
        for (f, kind) in &commits {
            match kind {
                ObjectFile::WriteCommit(n) if !consolidated.contains(&f.path) => {
                    let stem = last_component(&f.path).trim_end_matches(WRT_EXT);
                    fragments.push(TimestampedFile::new(
                        format!("{FRAGMENTS_DIR}/{stem}"),
                        n.clone(),
                    ));
                }
                ObjectFile::Vacuum(n) => {
                    fragments.push(TimestampedFile::new(f.path.clone(), n.clone()))
                }
                ObjectFile::DeleteCommit(n) | ObjectFile::UpdateCommit(n)
                    if window.contains(n.timestamp_range()) && !consolidated.contains(&f.path) =>
                {
                    conditions.push(ConditionCommit {
                        marker: f.path.clone(),
                        name: n.clone(),
                        is_update: matches!(kind, ObjectFile::UpdateCommit(_)),
                        location: CommitLocation::File {
                            path: f.path.clone(),
                        },
                    });
                }
                _ => {}
            }
        }
        conditions.sort_by_key(|c| c.timestamp());

        // Consolidated fragment metadata: root `.meta` (pre-v12), then
        // `__fragment_meta/`.
        let fragment_metadata = self
            .root_files()
            .chain(self.in_dir(FRAGMENT_META_DIR))
            .filter(|(_, k)| matches!(k, ObjectFile::ConsolidatedFragmentMetadata(_)))
            .map(|(f, _)| f.path.clone())
            .collect();

        // Vacuum lists, kept for filtering (only those in the window are
        // ever consulted; a missing one is an error only then).
        let mut vacuum_lists = HashMap::new();
        for (f, kind) in &self.files {
            if matches!(kind, ObjectFile::Vacuum(_)) {
                if let Some(bytes) = contents.get(&f.path) {
                    vacuum_lists.insert(f.path.clone(), VacuumFile::parse(&f.path, bytes)?);
                }
            }
        }

        // Array metadata: `__meta/` with TileDB's full-overlap rule.
        let meta_entries = timestamped_entries(self.in_dir(METADATA_DIR));
        let meta = filter(&meta_entries, &vacuum_lists, window, true, vac_array_path)?;

        Ok(ArrayDirectory {
            window,
            schemas,
            unfiltered_fragments: fragments,
            consolidated_commits: consolidated,
            fragment_metadata,
            array_metadata: meta.visible,
            array_metadata_vac_to_vacuum: meta.vac_to_vacuum,
            array_metadata_replaced: meta.replaced,
            array_metadata_vacuum_lists: meta.lists,
            conditions,
            vacuum_lists,
        })
    }

    /// Resolves a group directory for a group opened at `window`, by
    /// TileDB's `GroupDirectory`: group details (`__group/`) and metadata
    /// (`__meta/`) inside the window, minus what vacuum lists in the
    /// window name. TileDB writes group vacuum lists with absolute URIs and
    /// compares them with `group_uri` + the file's path, so pass the URI
    /// the group was consolidated under (a moved group's lists match
    /// nothing, as in TileDB).
    pub fn resolve_group(
        &self,
        contents: &HashMap<String, Vec<u8>>,
        window: TimeWindow,
        group_uri: &str,
    ) -> Result<GroupDirectory> {
        let is_group = self.has(GROUP_FILE)
            || self
                .files
                .iter()
                .any(|(f, _)| f.path.starts_with(&format!("{GROUP_DETAILS_DIR}/")));
        if !is_group {
            return Err(FragmentError::missing(
                ".",
                "group (no __tiledb_group.tdb or __group/)",
            ));
        }
        let mut vacuum_lists = HashMap::new();
        for (f, kind) in &self.files {
            if matches!(kind, ObjectFile::Vacuum(_)) {
                if let Some(bytes) = contents.get(&f.path) {
                    vacuum_lists.insert(f.path.clone(), VacuumFile::parse(&f.path, bytes)?);
                }
            }
        }
        let base = format!("{}/", group_uri.trim_end_matches('/'));
        let to_rel = |_: &str, entry: &str| -> Result<String> {
            Ok(entry
                .strip_prefix(base.as_str())
                .map(str::to_owned)
                // An entry naming no file under the group: never matches.
                .unwrap_or_else(|| format!("\u{0}{entry}")))
        };
        let details = timestamped_entries(self.in_dir(GROUP_DETAILS_DIR));
        let details = filter(&details, &vacuum_lists, window, true, to_rel)?;
        let meta = timestamped_entries(self.in_dir(METADATA_DIR));
        let meta = filter(&meta, &vacuum_lists, window, true, to_rel)?;
        Ok(GroupDirectory {
            window,
            has_group_file: self.has(GROUP_FILE),
            details: details.visible,
            details_to_vacuum: details.to_vacuum,
            details_vac_to_vacuum: details.vac_to_vacuum,
            metadata: meta.visible,
            metadata_vac_to_vacuum: meta.vac_to_vacuum,
            metadata_replaced: meta.replaced,
            metadata_vacuum_lists: (meta.lists.into_iter())
                .map(|(vac, named)| {
                    let named = named.into_iter().filter(|p| !p.starts_with('\u{0}'));
                    (vac, named.collect())
                })
                .collect(),
        })
    }
}

/// Parses a condition marker's or commit's name (TileDB's `FragmentID`).
fn marker_name(file: &str, marker: &str) -> Result<TimestampedName> {
    TimestampedName::parse(last_component(marker))
        .map_err(|e| FragmentError::format(file, format!("commit name {marker:?}"), e))
}

fn timestamped_entries<'a>(
    files: impl Iterator<Item = &'a (ListedFile, ObjectFile)>,
) -> Vec<TimestampedFile> {
    files
        .filter_map(|(f, k)| match k {
            ObjectFile::Metadata(n) | ObjectFile::GroupDetails(n) | ObjectFile::Vacuum(n) => {
                Some(TimestampedFile::new(f.path.clone(), n.clone()))
            }
            _ => None,
        })
        .collect()
}

fn vac_array_path(file: &str, entry: &str) -> Result<String> {
    VacuumFile::array_relative_path(file, entry)
}

struct Filtered {
    visible: Vec<TimestampedFile>,
    to_vacuum: Vec<String>,
    vac_to_vacuum: Vec<String>,
    /// The entries vacuum lists in the window supersede (`to_vacuum`'s).
    replaced: Vec<TimestampedFile>,
    /// Each vacuum list in the window with the entries it names.
    lists: Vec<(TimestampedFile, Vec<String>)>,
}

/// TileDB's `compute_uris_to_vacuum` + `compute_filtered_uris` over one
/// list of timestamped entries (fragments or metadata files, with the
/// vacuum lists among them). With `full_overlap_only` false, entries of
/// format v15+ need only overlap the window (sparse reads).
fn filter(
    entries: &[TimestampedFile],
    vacuum_lists: &HashMap<String, VacuumFile>,
    window: TimeWindow,
    full_overlap_only: bool,
    entry_path: impl Fn(&str, &str) -> Result<String>,
) -> Result<Filtered> {
    let in_window = |e: &TimestampedFile| {
        if !full_overlap_only && e.format_version() >= CONSOLIDATION_WITH_TIMESTAMPS_MIN_VERSION {
            window.overlaps(e.name.timestamp_range())
        } else {
            window.contains(e.name.timestamp_range())
        }
    };
    let mut inside = HashSet::new();
    let mut outside = HashSet::new();
    for e in entries.iter().filter(|e| !e.is_vacuum_file()) {
        if in_window(e) {
            inside.insert(e.path.as_str());
        } else {
            outside.insert(e.path.as_str());
        }
    }
    let mut to_vacuum = HashSet::new();
    let mut vac_to_vacuum = Vec::new();
    let mut lists = Vec::new();
    for vac in entries
        .iter()
        .filter(|e| e.is_vacuum_file() && in_window(e))
    {
        let list = vacuum_lists
            .get(&vac.path)
            .ok_or_else(|| FragmentError::missing(&vac.path, "contents (not read)"))?;
        let mut removable = true;
        let mut named = Vec::with_capacity(list.entries.len());
        for line in &list.entries {
            let path = entry_path(&vac.path, line)?;
            if let Some(p) = inside.get(path.as_str()) {
                to_vacuum.insert(*p);
            }
            if outside.contains(path.as_str()) {
                removable = false;
            }
            named.push(path);
        }
        if removable {
            vac_to_vacuum.push(vac.path.clone());
        }
        lists.push((vac.clone(), named));
    }
    let mut visible: Vec<TimestampedFile> = entries
        .iter()
        .filter(|e| !e.is_vacuum_file() && !to_vacuum.contains(e.path.as_str()) && in_window(e))
        .cloned()
        .collect();
    visible.sort_by_key(|e| e.name.t1);
    let replaced: Vec<TimestampedFile> = entries
        .iter()
        .filter(|e| to_vacuum.contains(e.path.as_str()))
        .cloned()
        .collect();
    Ok(Filtered {
        visible,
        to_vacuum: replaced.iter().map(|e| e.path.clone()).collect(),
        vac_to_vacuum,
        replaced,
        lists,
    })
}

/// From this format version on, reads of sparse arrays see fragments that
/// only overlap the window (TileDB's
/// `consolidation_with_timestamps_min_version`).
pub const CONSOLIDATION_WITH_TIMESTAMPS_MIN_VERSION: u32 = 15;

/// The schema in force at `timestamp`, from names alone (TileDB's
/// `select_latest_array_schema_uri`): among `schemas` in TileDB's order
/// (see [`DirectoryListing::schema_files`]), the last timestamped schema
/// whose end timestamp is at most `timestamp`, else the first schema.
pub fn select_latest_schema(schemas: &[String], timestamp: u64) -> Option<&str> {
    schemas
        .iter()
        .filter(|p| last_component(p) != LEGACY_SCHEMA_FILE)
        .rfind(|p| TimestampedName::parse(last_component(p)).is_ok_and(|n| n.t2 <= timestamp))
        .or_else(|| schemas.first())
        .map(String::as_str)
}

/// An array directory resolved for a time window.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ArrayDirectory {
    /// The window it was resolved for.
    pub window: TimeWindow,
    /// Schema files in TileDB's order.
    pub schemas: Vec<String>,
    /// Committed fragments (paths of their directories) and fragment vacuum
    /// lists, in TileDB's listing order, before window and vacuum
    /// filtering ([`ArrayDirectory::filtered_fragments`] applies them).
    pub unfiltered_fragments: Vec<TimestampedFile>,
    /// Commits listed by consolidated commits files, minus ignored ones.
    pub consolidated_commits: BTreeSet<String>,
    /// Consolidated fragment metadata files (`.meta`), root ones first.
    pub fragment_metadata: Vec<String>,
    /// Array metadata files visible, ordered by start timestamp.
    pub array_metadata: Vec<TimestampedFile>,
    /// Array metadata vacuum lists that can go.
    pub array_metadata_vac_to_vacuum: Vec<String>,
    /// Array metadata files that vacuum lists in the window supersede:
    /// hidden in the window by a consolidation, yet seen by opens at
    /// earlier times until vacuumed (a copy keeps them).
    pub array_metadata_replaced: Vec<TimestampedFile>,
    /// Each array metadata vacuum list in the window with the files it
    /// names (paths relative to the array).
    pub array_metadata_vacuum_lists: Vec<(TimestampedFile, Vec<String>)>,
    /// Delete and update commits inside the window, by timestamp.
    pub conditions: Vec<ConditionCommit>,
    vacuum_lists: HashMap<String, VacuumFile>,
}

/// The fragments a read (or fragment info, or vacuuming) sees.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FilteredFragments {
    /// Visible fragments, by start timestamp.
    pub fragments: Vec<TimestampedFile>,
    /// Fragments that vacuum lists in the window supersede (listing order).
    pub fragments_to_vacuum: Vec<String>,
    /// Commit files of `fragments_to_vacuum` that exist on their own.
    pub commits_to_vacuum: Vec<String>,
    /// Commit files of `fragments_to_vacuum` that only a `.con` holds (an
    /// ignore file must name them).
    pub commits_to_ignore: Vec<String>,
    /// Fragment vacuum lists all of whose entries can go.
    pub vac_files_to_vacuum: Vec<String>,
}

impl ArrayDirectory {
    /// A directory of nothing but `window` and the schema files: what a
    /// view reading fragments it was handed needs.
    pub(crate) fn bare(window: TimeWindow, schemas: Vec<String>) -> Self {
        ArrayDirectory {
            window,
            schemas,
            unfiltered_fragments: Vec::new(),
            consolidated_commits: BTreeSet::new(),
            fragment_metadata: Vec::new(),
            array_metadata: Vec::new(),
            array_metadata_vac_to_vacuum: Vec::new(),
            array_metadata_replaced: Vec::new(),
            array_metadata_vacuum_lists: Vec::new(),
            conditions: Vec::new(),
            vacuum_lists: HashMap::new(),
        }
    }

    /// TileDB's `filtered_fragment_uris(full_overlap_only)`: reads pass
    /// `dense` (true for dense arrays), fragment info and vacuuming pass
    /// `true`.
    pub fn filtered_fragments(&self, full_overlap_only: bool) -> Result<FilteredFragments> {
        let f = filter(
            &self.unfiltered_fragments,
            &self.vacuum_lists,
            self.window,
            full_overlap_only,
            vac_array_path,
        )?;
        let (mut commits_to_vacuum, mut commits_to_ignore) = (Vec::new(), Vec::new());
        for path in &f.to_vacuum {
            let name = last_component(path);
            let commit = match self
                .unfiltered_fragments
                .iter()
                .find(|e| &e.path == path)
                .map(TimestampedFile::format_version)
            {
                Some(v) if v < 12 => format!("{path}{OK_EXT}"),
                _ => format!("{COMMITS_DIR}/{name}{WRT_EXT}"),
            };
            if self.consolidated_commits.contains(&commit) {
                commits_to_ignore.push(commit);
            } else {
                commits_to_vacuum.push(commit);
            }
        }
        Ok(FilteredFragments {
            fragments: f.visible,
            fragments_to_vacuum: f.to_vacuum,
            commits_to_vacuum,
            commits_to_ignore,
            vac_files_to_vacuum: f.vac_to_vacuum,
        })
    }

    /// Every fragment committed and not yet vacuumed, whatever the window
    /// and the vacuum lists say, by start timestamp (ties in listing
    /// order): the array's whole history, which a copy keeps so that it
    /// answers as its source at every time.
    pub fn committed_fragments(&self) -> Vec<TimestampedFile> {
        let mut all: Vec<TimestampedFile> = self
            .unfiltered_fragments
            .iter()
            .filter(|e| !e.is_vacuum_file())
            .cloned()
            .collect();
        all.sort_by_key(|e| e.name.t1);
        all
    }

    /// The fragment vacuum lists, oldest first, each with the fragments it
    /// names (paths relative to the array).
    pub fn fragment_vacuum_lists(&self) -> Result<Vec<(TimestampedFile, Vec<String>)>> {
        let mut out = Vec::new();
        for vac in self
            .unfiltered_fragments
            .iter()
            .filter(|e| e.is_vacuum_file())
        {
            let list = self
                .vacuum_lists
                .get(&vac.path)
                .ok_or_else(|| FragmentError::missing(&vac.path, "contents (not read)"))?;
            let paths = list
                .entries
                .iter()
                .map(|line| vac_array_path(&vac.path, line))
                .collect::<Result<Vec<_>>>()?;
            out.push((vac.clone(), paths));
        }
        out.sort_by_key(|(v, _)| v.name.t1);
        Ok(out)
    }

    /// The fragments a read of a dense (`dense`) or sparse array sees.
    pub fn visible_fragments(&self, dense: bool) -> Result<Vec<TimestampedFile>> {
        Ok(self.filtered_fragments(dense)?.fragments)
    }

    /// The schema in force at the window's end ([`select_latest_schema`]).
    pub fn latest_schema(&self) -> &str {
        select_latest_schema(&self.schemas, self.window.end).unwrap_or_default()
    }
}

/// A group directory resolved for a time window.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupDirectory {
    /// The window it was resolved for.
    pub window: TimeWindow,
    /// Whether the legacy marker `__tiledb_group.tdb` is there.
    pub has_group_file: bool,
    /// Group details files visible, by start timestamp; the last is the
    /// group's membership.
    pub details: Vec<TimestampedFile>,
    /// Details files that vacuum lists supersede.
    pub details_to_vacuum: Vec<String>,
    /// Details vacuum lists that can go.
    pub details_vac_to_vacuum: Vec<String>,
    /// Group metadata files visible, by start timestamp.
    pub metadata: Vec<TimestampedFile>,
    /// Metadata vacuum lists that can go.
    pub metadata_vac_to_vacuum: Vec<String>,
    /// Metadata files that vacuum lists supersede, which opens at earlier
    /// times still read until vacuumed (a copy keeps them).
    pub metadata_replaced: Vec<TimestampedFile>,
    /// Each metadata vacuum list in the window with the files it names
    /// (paths relative to the group; entries naming no file under it are
    /// left out).
    pub metadata_vacuum_lists: Vec<(TimestampedFile, Vec<String>)>,
}

impl GroupDirectory {
    /// The details file in force (TileDB's `latest_group_details_uri`).
    pub fn latest_details(&self) -> Option<&TimestampedFile> {
        self.details.last()
    }
}
