//! Array metadata consolidation and vacuuming, as TileDB 2.30's
//! `ArrayMetaConsolidator` does them.
//!
//! Consolidating replays the metadata files a window sees into one file of
//! every live key (named with the first file's start and the last file's
//! end timestamp), then writes a vacuum list `<that name>.vac` naming the
//! files it replaces (relative to the array, `/__meta/<name>`, as TileDB
//! writes them from format v19). Each is one whole-object write, the list
//! last: stopped between the two, the array holds the new file beside the
//! old ones, which replay to the same state, and windows ending before the
//! new file's end still see the old files alone. Vacuuming deletes the
//! files the lists name, then the lists: stopped at any delete, what is
//! left still reads the same.

use crate::array_metadata::ArrayMetadata;
use crate::create::{put, write_metadata};
use crate::directory::TimestampedFile;
use crate::open::ReadStorage;
use crate::{FragmentError, MetadataFile, Result, VacuumFile};
use tdb_format::names::{METADATA_DIR, VAC_EXT};
use tdb_format::TimestampedName;
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
