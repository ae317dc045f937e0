//! Consolidation and vacuuming of an array's small files, as TileDB 2.30
//! does them: array metadata (`ArrayMetaConsolidator`), commits
//! (`CommitsConsolidator`) and fragment metadata
//! (`FragmentMetaConsolidator`).
//!
//! Metadata (an array's, or a group's: `GroupMetaConsolidator`):
//! consolidating replays the metadata files a window sees into one file of
//! every live key (named with the first file's start and the last file's
//! end timestamp), then writes a vacuum list `<that name>.vac` naming the
//! files it replaces (relative to the array, `/__meta/<name>`, as TileDB
//! writes them from format v19; a group's by absolute URI, as TileDB
//! writes those). Each is one whole-object write, the list
//! last: stopped between the two, the array holds the new file beside the
//! old ones, which replay to the same state, and windows ending before the
//! new file's end still see the old files alone. Vacuuming deletes the
//! files the lists name, then the lists: stopped at any delete, what is
//! left still reads the same.
//!
//! Commits: every commit `.con` files list (less those `.ign` files name),
//! then root `.ok` and `__commits/` `.wrt` and `.del` commits not listed,
//! go into one new `.con` (deletes embed their file), named for the first
//! entry's start and the last one's end timestamp (their whole span where
//! that would be reversed). Vacuuming deletes the
//! listed commit files that exist; once one `.con` lists every commit,
//! the other `.con` files, then the `.ign` files (in that order, so an
//! ignored commit never shows again through an older `.con`).
//!
//! Fragments (consolidated in `tdb-query`, which reads and writes cells):
//! vacuuming writes an ignore file for the replaced fragments' commits a
//! `.con` holds, deletes each one's commit file and directory (a directory
//! without its commit is never read), then the vacuum lists.
//!
//! Fragment metadata: the footers of the fragments a read sees (format
//! v3 and later) go into one `__fragment_meta/<name>.meta` file, named for
//! the first fragment's start and the last one's end timestamp, so opening
//! the array reads one file instead of one per fragment. Vacuuming deletes
//! every `.meta` file but those ending last.

use crate::array_metadata::ArrayMetadata;
use crate::commits::{ConsolidatedCommit, ConsolidatedCommits, IgnoreFile};
use crate::create::{named, put, span_name, write_ignore_file, write_vacuum_lines};
use crate::directory::TimeWindow;
use crate::fragment_metadata::{ConsolidatedEntry, ConsolidatedFragmentMeta};
use crate::open::{
    dir_label, file_bytes, list_object, read_files, LoadedFragment, OpenArray, OpenGroup,
    ReadStorage,
};
use crate::{FragmentError, Result, TimestampedFile};
use std::collections::{BTreeMap, HashMap, HashSet};
use tdb_format::names::{COMMITS_DIR, CON_EXT, DEL_EXT, FRAGMENT_META_DIR, METADATA_DIR, META_EXT};
use tdb_format::{FormatVersion, TimestampedName};
use tdb_storage::last_component;
use tdb_storage::{join, WritableStorage};

/// What a metadata consolidation wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetadataConsolidation {
    /// The consolidated file (`None` when no key is left: TileDB writes no
    /// empty metadata file, and the vacuum list alone empties the map).
    pub file: Option<String>,
    /// The vacuum list.
    pub vacuum_list: String,
    /// The files it replaces.
    pub replaced: Vec<String>,
}

/// Consolidates the array metadata files `open` sees (its window; read in
/// one batch); nothing when there are fewer than two, as in TileDB. The
/// array's key decrypts them and encrypts the new file.
pub fn consolidate_metadata<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    open: &OpenArray,
) -> Result<Option<MetadataConsolidation>> {
    if open.directory.array_metadata.len() < 2 {
        return Ok(None);
    }
    let files = open.metadata_files(storage)?;
    let files: Vec<(&TimestampedFile, &[u8])> =
        files.iter().map(|(f, b)| (*f, b.as_slice())).collect();
    merge_metadata(storage, &open.dir, &files, open.key(), |p| format!("/{p}"))
}

/// Consolidates the group metadata files `open` sees, as
/// [`consolidate_metadata`] does an array's, except that the vacuum list
/// names them by absolute URI (`<group URI>/__meta/<name>`), as TileDB's
/// `GroupMetaConsolidator` writes it: the group's URI is
/// [`OpenGroup::uri`].
pub fn consolidate_group_metadata<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    open: &OpenGroup,
    key: Option<&[u8; 32]>,
) -> Result<Option<MetadataConsolidation>> {
    if open.metadata_files.len() < 2 {
        return Ok(None);
    }
    let files: Vec<(&TimestampedFile, &[u8])> = open
        .metadata_files
        .iter()
        .map(|(f, b)| (f, b.as_slice()))
        .collect();
    let base = open.uri.trim_end_matches('/');
    merge_metadata(storage, dir, &files, key, |p| format!("{base}/{p}"))
}

/// Replays metadata `files` (decrypted with `key`) into one file of every
/// live key in `__meta/` of the object at `dir`, then writes the vacuum
/// list naming each replaced file as `entry(path)`.
fn merge_metadata<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    files: &[(&TimestampedFile, &[u8])],
    key: Option<&[u8; 32]>,
    entry: impl Fn(&str) -> String,
) -> Result<Option<MetadataConsolidation>> {
    let named_files: Vec<(TimestampedName, &[u8])> = files
        .iter()
        .map(|(f, bytes)| (f.name.clone(), *bytes))
        .collect();
    let state = ArrayMetadata::from_files(&named_files, key)?;
    // TileDB names the file for the replayed files' span: the first start
    // and the last end, in replay order.
    let replay = crate::array_metadata::in_tiledb_order(&named_files);
    let (Some(first), Some(last)) = (replay.first(), replay.last()) else {
        return Ok(None);
    };
    let (_, path) = named(METADATA_DIR, first.0.t1, last.0.t2, None, "")?;
    // TileDB writes no empty metadata file: the vacuum list alone then
    // empties the map.
    let file = state.to_file();
    let written = if file.entries.is_empty() {
        None
    } else {
        put(storage, &join(dir, &path), file.write(&path, key)?)?;
        Some(path.clone())
    };
    let replaced: Vec<String> = files.iter().map(|(f, _)| f.path.clone()).collect();
    let lines = replaced.iter().map(|p| entry(p)).collect();
    let vacuum_list = write_vacuum_lines(storage, dir, &path, lines)?;
    Ok(Some(MetadataConsolidation {
        file: written,
        vacuum_list,
        replaced,
    }))
}

/// Vacuums what group metadata consolidations replaced in the group at
/// `dir` (over its whole history): the files the lists name, then the
/// lists. Returns how many files went.
pub fn vacuum_group_metadata<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    key: Option<&[u8; 32]>,
) -> Result<usize> {
    let all = OpenGroup::open(storage, dir, TimeWindow::ALL, key)?;
    let d = &all.directory;
    delete_files(
        storage,
        dir,
        (d.metadata_replaced.iter().map(|f| &f.path)).chain(&d.metadata_vac_to_vacuum),
    )
}

/// Vacuums what array metadata consolidations replaced in the array at
/// `dir` (over its whole history; `key` for encrypted arrays): the files
/// the vacuum lists name, then the lists. Returns how many files went.
pub fn vacuum_metadata<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    key: Option<&[u8; 32]>,
) -> Result<usize> {
    let all = OpenArray::open(storage, dir, TimeWindow::ALL, key)?;
    let d = &all.directory;
    delete_files(
        storage,
        dir,
        (d.array_metadata_replaced.iter().map(|f| &f.path)).chain(&d.array_metadata_vac_to_vacuum),
    )
}

/// Deletes `paths` (relative to `dir`) in order; how many.
fn delete_files<'p, S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    paths: impl IntoIterator<Item = &'p String>,
) -> Result<usize> {
    let mut n = 0usize;
    for path in paths {
        let key = join(dir, path);
        storage
            .delete(&key)
            .map_err(|e| FragmentError::storage(&key, e))?;
        n = n.saturating_add(1);
    }
    Ok(n)
}

/// TileDB's rule for what lives in `__commits/` and `__fragment_meta/`:
/// arrays of format version 12 and later.
fn from_v12(dir: &str, version: FormatVersion, what: &str) -> Result<()> {
    if version.get() < 12 {
        return Err(FragmentError::invalid(
            dir_label(dir),
            "array",
            format!("{what} from format version 12 on"),
        ));
    }
    Ok(())
}

/// What the `.con` files of an array list: every commit once, less those
/// `.ign` files name, sorted (TileDB sorts their URIs) with the delete
/// files they embed; and each `.con` file with its entries as written.
struct Listed {
    commits: BTreeMap<String, Option<Vec<u8>>>,
    files: Vec<(String, Vec<String>)>,
}

/// Reads the `.con` and `.ign` files (one batch) into what they list.
fn listed_commits<S: ReadStorage + ?Sized>(
    storage: &S,
    dir: &str,
    con: &[String],
    ign: &[String],
) -> Result<Listed> {
    let paths: Vec<&str> = con.iter().chain(ign).map(String::as_str).collect();
    let contents = read_files(storage, dir, &paths)?;
    let mut ignored = HashSet::new();
    for f in ign {
        ignored.extend(IgnoreFile::parse(f, file_bytes(&contents, f)?)?.commits);
    }
    let mut listed = BTreeMap::new();
    let mut files = Vec::with_capacity(con.len());
    for f in con {
        let parsed = ConsolidatedCommits::parse(f, file_bytes(&contents, f)?)?;
        let mut entries = Vec::with_capacity(parsed.commits.len());
        for c in parsed.commits {
            entries.push(c.path.clone());
            if !ignored.contains(&c.path) {
                listed.entry(c.path).or_insert(c.embedded);
            }
        }
        files.push((f.clone(), entries));
    }
    Ok(Listed {
        commits: listed,
        files,
    })
}

/// Consolidates the commits of the array at `dir` into one `.con` file
/// (named at `version`, the array's write version, which must be 12 or
/// later as TileDB requires); returns its path, or `None` when there is no
/// commit.
pub fn consolidate_commits<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    version: FormatVersion,
) -> Result<Option<String>> {
    from_v12(dir, version, "commits are consolidated")?;
    let listing = list_object(storage, dir)?;
    let files = listing.commit_files();
    let listed = listed_commits(storage, dir, &files.con, &files.ign)?.commits;
    // Delete commits not listed yet embed their files: read in one batch.
    let new: Vec<&String> = files
        .ok
        .iter()
        .chain(&files.commits)
        .filter(|p| !listed.contains_key(*p))
        .collect();
    let deletes: Vec<&str> = new
        .iter()
        .filter(|p| p.ends_with(DEL_EXT))
        .map(|p| p.as_str())
        .collect();
    let mut del_files: HashMap<String, Vec<u8>> = read_files(storage, dir, &deletes)?;
    let mut commits: Vec<ConsolidatedCommit> = Vec::new();
    for (path, embedded) in &listed {
        commits.push(match embedded {
            Some(tile) => ConsolidatedCommit::delete(path.clone(), tile.clone()),
            None => ConsolidatedCommit::commit(path.clone()),
        });
    }
    for path in new {
        commits.push(match del_files.remove(path.as_str()) {
            Some(tile) => ConsolidatedCommit::delete(path.clone(), tile),
            None => ConsolidatedCommit::commit(path.clone()),
        });
    }
    if commits.is_empty() {
        return Ok(None);
    }
    let entries: Vec<String> = commits.iter().map(|c| c.path.clone()).collect();
    let path = format!("{COMMITS_DIR}/{}{CON_EXT}", span_name(&entries, version)?);
    put(
        storage,
        &join(dir, &path),
        ConsolidatedCommits::new(commits).write(),
    )?;
    Ok(Some(path))
}

/// Vacuums the commits of the array at `dir` that consolidated commits
/// replaced: the listed commit files that exist, then (once one `.con`
/// lists every commit) the other `.con` files, then the `.ign` files.
/// Returns how many files went.
pub fn vacuum_commits<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
) -> Result<usize> {
    let listing = list_object(storage, dir)?;
    let files = listing.commit_files();
    let Listed {
        commits: listed,
        files: cons,
    } = listed_commits(storage, dir, &files.con, &files.ign)?;
    let mut out: Vec<String> = listed.keys().filter(|p| listing.has(p)).cloned().collect();
    let complete = cons.iter().find(|(_, entries)| {
        entries.len() == listed.len() && entries.iter().all(|e| listed.contains_key(e))
    });
    if let Some((keep, _)) = complete {
        out.extend(files.con.iter().filter(|c| *c != keep).cloned());
        out.extend(files.ign.iter().cloned());
    }
    delete_files(storage, dir, &out)
}

/// Consolidates the footers of `fragments` (those a read of the array at
/// `dir` sees, in its order) into one consolidated fragment metadata file
/// named at `version` (the array's write version, 12 or later: older
/// arrays keep such files in their root); returns its path, or `None`
/// with fewer than two fragments of format v3 or later. `schemas` finds
/// each footer's schema; `key` encrypts the file.
pub fn consolidate_fragment_metadata<'s, S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    fragments: &[LoadedFragment],
    schemas: &dyn Fn(&str) -> Option<&'s tdb_schema::ArraySchema>,
    version: FormatVersion,
    key: Option<&[u8; 32]>,
) -> Result<Option<String>> {
    from_v12(dir, version, "fragment metadata is consolidated here")?;
    let kept: Vec<&LoadedFragment> = fragments
        .iter()
        .filter(|f| f.metadata.footer.version > 2)
        .collect();
    let (Some(first), Some(last)) = (kept.first(), kept.last()) else {
        return Ok(None);
    };
    if kept.len() < 2 {
        return Ok(None);
    }
    let (_, path) = named(
        FRAGMENT_META_DIR,
        first.file.name.t1,
        last.file.name.t2,
        Some(version),
        META_EXT,
    )?;
    let file = ConsolidatedFragmentMeta {
        entries: kept
            .iter()
            .map(|f| ConsolidatedEntry {
                stored_name: last_component(&f.file.path).to_owned(),
                offset: 0,
                footer: f.metadata.footer.clone(),
            })
            .collect(),
    };
    let bytes = file.write(version, key, schemas, &path)?;
    put(storage, &join(dir, &path), bytes)?;
    Ok(Some(path))
}

/// Vacuums the consolidated fragment metadata files of the array at `dir`
/// but those ending at the latest timestamp, as TileDB does. Returns how
/// many went.
pub fn vacuum_fragment_metadata<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    key: Option<&[u8; 32]>,
) -> Result<usize> {
    let all = OpenArray::open(storage, dir, TimeWindow::ALL, key)?;
    let files = &all.directory.fragment_metadata;
    let end = |p: &String| TimestampedName::parse(last_component(p)).ok().map(|n| n.t2);
    let latest = files.iter().filter_map(end).max();
    delete_files(
        storage,
        dir,
        files
            .iter()
            .filter(|p| end(p).is_some() && end(p) != latest),
    )
}

/// Removes the fragment directories of the array at `dir` that hold files
/// but no commit makes visible (writes that stopped before their commit,
/// which `verify_array` reports), whose names' end timestamp is before
/// `before` (ms since the epoch): a grace period spares writes still in
/// progress. Then what uploads a stopped process left in the array's
/// directory under no name (a local file still being written, see
/// `WritableStorage::remove_abandoned_uploads`), last changed before
/// `before`. Returns the directories, then the files, removed.
pub fn vacuum_uncommitted<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    key: Option<&[u8; 32]>,
    before: u64,
) -> Result<Vec<String>> {
    let all = OpenArray::open(storage, dir, TimeWindow::ALL, key)?;
    let files = crate::open::object_files(storage, dir)?.files;
    let (present, committed) = crate::verify::fragment_directories(&files, &all.directory);
    let mut removed = Vec::new();
    for path in present.difference(&committed) {
        let old = TimestampedName::parse(last_component(path)).is_ok_and(|n| n.t2 < before);
        if !old {
            continue;
        }
        let key = join(dir, path);
        storage
            .delete_prefix(&key)
            .map_err(|e| FragmentError::storage(&key, e))?;
        removed.push(path.clone());
    }
    let abandoned = storage
        .remove_abandoned_uploads(dir, before)
        .map_err(|e| FragmentError::storage(dir, e))?;
    removed.extend(abandoned.iter().map(|k| last_component(k).to_owned()));
    Ok(removed)
}

/// Vacuums the fragments consolidations replaced in the array at `dir`
/// (over its whole history; `key` for encrypted arrays). Returns how many
/// fragments went.
pub fn vacuum_fragments<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    key: Option<&[u8; 32]>,
) -> Result<usize> {
    let all = OpenArray::open(storage, dir, TimeWindow::ALL, key)?;
    let f = all.directory.filtered_fragments(true)?;
    if !f.commits_to_ignore.is_empty() {
        write_ignore_file(storage, dir, &f.commits_to_ignore, FormatVersion::WRITTEN)?;
    }
    // Each commit file, wherever it is listed (one a `.con` also holds is
    // ignored from now on but may exist on its own too), then the
    // directories, then the lists.
    delete_files(
        storage,
        dir,
        f.commits_to_vacuum.iter().chain(&f.commits_to_ignore),
    )?;
    // The directories, and those of fragments the lists going now name
    // whose commits are already gone: a vacuum stopped before its end
    // deleted them, and nothing but these lists names the directories any
    // more (a rerun that only followed commits would leave them for good).
    let committed: std::collections::HashSet<String> = all
        .directory
        .committed_fragments()
        .into_iter()
        .map(|f| f.path)
        .collect();
    let mut leftovers = Vec::new();
    for (vac, named) in all.directory.fragment_vacuum_lists()? {
        if f.vac_files_to_vacuum.contains(&vac.path) {
            leftovers.extend(named.into_iter().filter(|p| !committed.contains(p)));
        }
    }
    for frag in f.fragments_to_vacuum.iter().chain(&leftovers) {
        let key = join(dir, frag);
        storage
            .delete_prefix(&key)
            .map_err(|e| FragmentError::storage(&key, e))?;
    }
    delete_files(storage, dir, &f.vac_files_to_vacuum)?;
    Ok(f.fragments_to_vacuum.len())
}
