//! Consolidation and vacuuming of an array's small files, as TileDB 2.30
//! does them: array metadata (`ArrayMetaConsolidator`), commits
//! (`CommitsConsolidator`) and fragment metadata
//! (`FragmentMetaConsolidator`).
//!
//! Metadata: consolidating replays the metadata files a window sees into one file of
//! every live key (named with the first file's start and the last file's
//! end timestamp), then writes a vacuum list `<that name>.vac` naming the
//! files it replaces (relative to the array, `/__meta/<name>`, as TileDB
//! writes them from format v19). Each is one whole-object write, the list
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
//! Fragment metadata: the footers of the fragments a read sees (format
//! v3 and later) go into one `__fragment_meta/<name>.meta` file, named for
//! the first fragment's start and the last one's end timestamp, so opening
//! the array reads one file instead of one per fragment. Vacuuming deletes
//! every `.meta` file but those ending last.

use crate::array_metadata::ArrayMetadata;
use crate::commits::{ConsolidatedCommit, ConsolidatedCommits, IgnoreFile};
use crate::create::{put, write_metadata};
use crate::directory::TimestampedFile;
use crate::fragment_metadata::{ConsolidatedEntry, ConsolidatedFragmentMeta};
use crate::open::{list_object, LoadedFragment, ReadStorage};
use crate::{FragmentError, MetadataFile, Result, VacuumFile};
use std::collections::{BTreeMap, HashSet};
use tdb_format::names::{
    COMMITS_DIR, CON_EXT, DEL_EXT, FRAGMENT_META_DIR, METADATA_DIR, META_EXT, VAC_EXT,
};
use tdb_format::{FormatVersion, TimestampedName};
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

/// Consolidates the array metadata `files` of the array at `dir` (those a
/// window sees, in the directory's order); nothing when there are fewer
/// than two, as in TileDB. `key` decrypts the files and encrypts the new
/// one.
pub fn consolidate_metadata<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    files: &[TimestampedFile],
    key: Option<&[u8; 32]>,
) -> Result<Option<MetadataConsolidation>> {
    if files.len() < 2 {
        return Ok(None);
    }
    let mut contents = Vec::with_capacity(files.len());
    for f in files {
        let path = join(dir, &f.path);
        let bytes = storage
            .read(&path)
            .map_err(|e| FragmentError::storage(&path, e))?
            .ok_or_else(|| FragmentError::missing(&path, "metadata file"))?;
        contents.push((f.name.clone(), bytes));
    }
    let named: Vec<(TimestampedName, &[u8])> = contents
        .iter()
        .map(|(n, b)| (n.clone(), b.as_ref()))
        .collect();
    let state = ArrayMetadata::from_files(&named, key)?;
    // TileDB names the file for the replayed files' span: the first start
    // and the last end, in replay order.
    let replay = crate::array_metadata::in_tiledb_order(&named);
    let (first, last) = match (replay.first(), replay.last()) {
        (Some(a), Some(b)) => (a.0.t1, b.0.t2),
        _ => return Ok(None),
    };
    let file: MetadataFile = state.to_file();
    let written = write_metadata(storage, dir, &file, (first, last), key)?;
    let name = match &written {
        Some(path) => path.clone(),
        None => {
            let name = TimestampedName::generate(first, last, None)
                .map_err(|e| FragmentError::format(METADATA_DIR, "file name", e))?;
            format!("{METADATA_DIR}/{name}")
        }
    };
    let replaced: Vec<String> = files.iter().map(|f| f.path.clone()).collect();
    let list = VacuumFile::new(replaced.iter().map(|p| format!("/{p}")).collect());
    let vacuum_list = format!("{name}{VAC_EXT}");
    put(storage, &join(dir, &vacuum_list), list.write())?;
    Ok(Some(MetadataConsolidation {
        file: written,
        vacuum_list,
        replaced,
    }))
}

/// Vacuums what metadata consolidation replaced: the files the lists name
/// (`to_vacuum`), then the lists (`lists`), paths relative to `dir` as the
/// array directory gives them. Returns how many files went.
pub fn vacuum_files<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    to_vacuum: &[String],
    lists: &[String],
) -> Result<usize> {
    for path in to_vacuum.iter().chain(lists) {
        let key = join(dir, path);
        storage
            .delete(&key)
            .map_err(|e| FragmentError::storage(&key, e))?;
    }
    Ok(to_vacuum.len() + lists.len())
}

/// TileDB's rule for what lives in `__commits/` and `__fragment_meta/`:
/// arrays of format version 12 and later.
fn from_v12(dir: &str, version: FormatVersion, what: &str) -> Result<()> {
    if version.get() < 12 {
        return Err(FragmentError::invalid(
            if dir.is_empty() { "." } else { dir },
            "array",
            format!("{what} from format version 12 on"),
        ));
    }
    Ok(())
}

fn read_file<S: ReadStorage + ?Sized>(storage: &S, dir: &str, path: &str) -> Result<Vec<u8>> {
    let key = join(dir, path);
    Ok(storage
        .read(&key)
        .map_err(|e| FragmentError::storage(&key, e))?
        .ok_or_else(|| FragmentError::missing(&key, "file"))?
        .to_vec())
}

/// What the `.con` files of an array list: every commit once, less those
/// `.ign` files name, sorted (TileDB sorts their URIs) with the delete
/// files they embed; and each `.con` file with its entries as written.
struct Listed {
    commits: BTreeMap<String, Option<Vec<u8>>>,
    files: Vec<(String, Vec<String>)>,
}

fn listed_commits<S: ReadStorage + ?Sized>(
    storage: &S,
    dir: &str,
    con: &[String],
    ign: &[String],
) -> Result<Listed> {
    let mut ignored = HashSet::new();
    for f in ign {
        ignored.extend(IgnoreFile::parse(f, &read_file(storage, dir, f)?)?.commits);
    }
    let mut listed = BTreeMap::new();
    let mut files = Vec::with_capacity(con.len());
    for f in con {
        let parsed = ConsolidatedCommits::parse(f, &read_file(storage, dir, f)?)?;
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
    let mut commits: Vec<ConsolidatedCommit> = Vec::new();
    for (path, embedded) in &listed {
        commits.push(match embedded {
            Some(tile) => ConsolidatedCommit::delete(path.clone(), tile.clone()),
            None => ConsolidatedCommit::commit(path.clone()),
        });
    }
    for path in files.ok.iter().chain(&files.commits) {
        if listed.contains_key(path) {
            continue;
        }
        commits.push(if path.ends_with(DEL_EXT) {
            ConsolidatedCommit::delete(path.clone(), read_file(storage, dir, path)?)
        } else {
            ConsolidatedCommit::commit(path.clone())
        });
    }
    let (Some(first), Some(last)) = (commits.first(), commits.last()) else {
        return Ok(None);
    };
    let stamp = |c: &ConsolidatedCommit| {
        let stem = c.path.rsplit('/').next().unwrap_or(&c.path);
        TimestampedName::parse(stem).map_err(|e| FragmentError::format(&c.path, "commit name", e))
    };
    // TileDB names it for the first entry's start and the last one's end
    // in path order; with timestamps of different lengths (1 beside a
    // time in ms) that range can come out reversed, which no reader
    // accepts: then the entries' whole span.
    let (mut t1, mut t2) = (stamp(first)?.t1, stamp(last)?.t2);
    if t1 > t2 {
        let names = commits.iter().map(stamp).collect::<Result<Vec<_>>>()?;
        t1 = names.iter().map(|n| n.t1).min().unwrap_or(t1);
        t2 = names.iter().map(|n| n.t2).max().unwrap_or(t2);
    }
    let name = TimestampedName::generate(t1, t2, Some(version))
        .map_err(|e| FragmentError::format(COMMITS_DIR, "file name", e))?;
    let path = format!("{COMMITS_DIR}/{name}{CON_EXT}");
    put(
        storage,
        &join(dir, &path),
        ConsolidatedCommits::new(commits).write(),
    )?;
    Ok(Some(path))
}

/// What vacuuming commits removes: the listed commit files that exist,
/// then (once one `.con` lists every commit) the other `.con` files, then
/// the `.ign` files; in that order, paths relative to `dir`.
pub fn commits_to_vacuum<S: ReadStorage + ?Sized>(storage: &S, dir: &str) -> Result<Vec<String>> {
    let listing = list_object(storage, dir)?;
    let files = listing.commit_files();
    let Listed {
        commits: listed,
        files: cons,
    } = listed_commits(storage, dir, &files.con, &files.ign)?;
    let mut out: Vec<String> = listed
        .keys()
        .filter(|p| listing.contains(p))
        .cloned()
        .collect();
    let complete = cons.iter().find(|(_, entries)| {
        entries.len() == listed.len() && entries.iter().all(|e| listed.contains_key(e))
    });
    if let Some((keep, _)) = complete {
        out.extend(files.con.iter().filter(|c| *c != keep).cloned());
        out.extend(files.ign.iter().cloned());
    }
    Ok(out)
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
    let name = TimestampedName::generate(first.file.name.t1, last.file.name.t2, Some(version))
        .map_err(|e| FragmentError::format(FRAGMENT_META_DIR, "file name", e))?;
    let path = format!("{FRAGMENT_META_DIR}/{name}{META_EXT}");
    let file = ConsolidatedFragmentMeta {
        entries: kept
            .iter()
            .map(|f| ConsolidatedEntry {
                stored_name: f
                    .file
                    .path
                    .rsplit('/')
                    .next()
                    .unwrap_or(&f.file.path)
                    .to_owned(),
                offset: 0,
                footer: f.metadata.footer.clone(),
            })
            .collect(),
    };
    let bytes = file.write(version, key, schemas, &path)?;
    put(storage, &join(dir, &path), bytes)?;
    Ok(Some(path))
}

/// The consolidated fragment metadata files vacuuming removes: all but
/// those ending at the latest timestamp (`files` as the array directory
/// lists them, paths relative to the array).
pub fn fragment_metadata_to_vacuum(files: &[String]) -> Vec<String> {
    let end = |p: &String| {
        let stem = p.rsplit('/').next().unwrap_or(p);
        TimestampedName::parse(stem).ok().map(|n| n.t2)
    };
    let latest = files.iter().filter_map(end).max();
    files
        .iter()
        .filter(|p| end(p).is_some() && end(p) != latest)
        .cloned()
        .collect()
}
