//! `tdb inspect`: every file of an array or group directory classified, its
//! fragments with timestamps and format versions, and the header of every
//! generic tile, from tdb-format and tdb-storage alone.

use crate::CliError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use tdb_format::{classify, names, ObjectFile, TimestampedName};
use tdb_storage::{last_component, Storage};

/// What `inspect` found.
#[derive(Debug, Serialize)]
pub struct Inspection {
    /// `array`, `group` or `unknown`.
    pub kind: &'static str,
    /// Every file, sorted by path, relative to the object.
    pub files: Vec<FileReport>,
    /// Fragments, in TileDB's order (timestamp range, then name).
    pub fragments: Vec<FragmentReport>,
    /// Subdirectories that are TileDB objects of their own (group members
    /// stored inside the group), not descended into.
    pub nested_objects: Vec<NestedObject>,
}

/// One file.
#[derive(Debug, Serialize)]
pub struct FileReport {
    /// Path relative to the object, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// What the file is (see [`ObjectFile::label`]).
    pub kind: &'static str,
    /// The timestamp range its name carries.
    pub timestamps: Option<[u64; 2]>,
    /// Generic tiles at the start of the file, for files made of them.
    pub generic_tiles: Option<Vec<TileReport>>,
    /// Bytes after the generic tiles (a fragment metadata footer).
    pub trailing_bytes: Option<u64>,
}

/// One generic tile header.
#[derive(Debug, Serialize)]
pub struct TileReport {
    /// Offset of the header in the file.
    pub offset: u64,
    /// Format version of the writer.
    pub version: u32,
    /// Filtered size.
    pub persisted_size: u64,
    /// Unfiltered size.
    pub tile_size: u64,
    /// Cell datatype.
    pub datatype: &'static str,
    /// Cell size.
    pub cell_size: u64,
    /// Encryption type.
    pub encryption: &'static str,
    /// Bytes of the serialized filter pipeline.
    pub filter_pipeline_size: u64,
}

/// One fragment directory.
#[derive(Debug, Serialize)]
pub struct FragmentReport {
    /// Directory name.
    pub name: String,
    /// `__fragments` (v12+) or `root` (earlier layout).
    pub location: &'static str,
    /// Timestamp range from the name.
    pub timestamp_range: [u64; 2],
    /// Format version: the name's `_v`, else the fragment metadata's first
    /// generic tile header (pre-v5 names carry none).
    pub format_version: Option<u32>,
    /// The `.ok`/`.wrt` file that commits it, if one exists (fragments can
    /// also be committed through a consolidated commits file, or, before v5,
    /// by their metadata file alone).
    pub commit_file: Option<String>,
    /// Number of files in the fragment directory.
    pub file_count: usize,
    /// Bytes in the fragment directory.
    pub bytes: u64,
}

/// A TileDB object stored inside the inspected one.
#[derive(Debug, Serialize)]
pub struct NestedObject {
    /// Path relative to the inspected object.
    pub path: String,
    /// `array` or `group`.
    pub kind: &'static str,
}

fn object_kind(storage: &dyn Storage, dir: &str) -> Result<&'static str, CliError> {
    let listing = storage.list_dir(dir)?;
    let has_dir = |name: &str| listing.dirs.iter().any(|d| last_component(d) == name);
    let has_file = |name: &str| listing.files.iter().any(|f| f.name() == name);
    Ok(
        if has_dir(names::SCHEMA_DIR) || has_file(names::LEGACY_SCHEMA_FILE) {
            "array"
        } else if has_dir(names::GROUP_DETAILS_DIR) || has_file(names::GROUP_FILE) {
            "group"
        } else {
            "unknown"
        },
    )
}

/// Collects the files of the object at `dir` with their sizes, skipping
/// nested objects.
fn walk(
    storage: &dyn Storage,
    dir: &str,
    rel: &str,
    files: &mut Vec<(String, u64)>,
    nested: &mut Vec<NestedObject>,
) -> Result<(), CliError> {
    let listing = storage.list_dir(&tdb_storage::join(dir, rel))?;
    for f in listing.files {
        files.push((tdb_storage::join(rel, f.name()), f.size));
    }
    for d in listing.dirs {
        let name = last_component(&d);
        let child = tdb_storage::join(rel, name);
        let reserved = rel.is_empty()
            && (names::ARRAY_DIRS.contains(&name)
                || name == names::GROUP_DETAILS_DIR
                || TimestampedName::parse(name).is_ok());
        if !reserved && rel.is_empty() {
            let kind = object_kind(storage, &tdb_storage::join(dir, &child))?;
            if kind != "unknown" {
                nested.push(NestedObject { path: child, kind });
                continue;
            }
        }
        walk(storage, dir, &child, files, nested)?;
    }
    Ok(())
}

fn tiles(path: &str, class: &ObjectFile, bytes: &[u8]) -> Result<(Vec<TileReport>, u64), CliError> {
    let (tiles, rest) = class
        .generic_tiles(bytes)
        .map_err(|source| CliError::Format {
            path: path.to_owned(),
            source,
        })?;
    let reports = tiles
        .iter()
        .map(|t| TileReport {
            offset: t.offset,
            version: t.tile.header.version.get(),
            persisted_size: t.tile.persisted_size(),
            tile_size: t.tile.header.tile_size,
            datatype: t.tile.header.datatype.name(),
            cell_size: t.tile.header.cell_size,
            encryption: t.tile.header.encryption.name(),
            filter_pipeline_size: t.tile.filter_pipeline.len() as u64,
        })
        .collect();
    Ok((reports, rest.len() as u64))
}

/// Inspects the array or group stored at `dir` in `storage`.
pub fn inspect(storage: &dyn Storage, dir: &str) -> Result<Inspection, CliError> {
    let kind = object_kind(storage, dir)?;
    let mut paths = Vec::new();
    let mut nested_objects = Vec::new();
    walk(storage, dir, "", &mut paths, &mut nested_objects)?;
    paths.sort();
    if kind == "unknown" && paths.iter().all(|p| classify(&p.0) == ObjectFile::Unknown) {
        return Err(CliError::NotAnObject(dir.to_owned()));
    }

    let mut files = Vec::with_capacity(paths.len());
    let mut fragments: BTreeMap<TimestampedName, FragmentReport> = BTreeMap::new();
    let mut commits: BTreeMap<String, String> = BTreeMap::new();
    for (path, size) in paths {
        let full = tdb_storage::join(dir, &path);
        let class = classify(&path);
        let (generic_tiles, trailing_bytes) = if class.holds_generic_tiles() {
            let bytes = storage
                .read(&full)?
                .ok_or_else(|| tdb_storage::StorageError::not_found(&full))?;
            let (t, rest) = tiles(&path, &class, &bytes)?;
            (Some(t), Some(rest))
        } else {
            (None, None)
        };
        let fragment_of = match &class {
            ObjectFile::FragmentMetadata {
                fragment,
                in_fragments_dir,
            } => Some((fragment, *in_fragments_dir, true)),
            ObjectFile::Data {
                fragment,
                in_fragments_dir,
                ..
            } => Some((fragment, *in_fragments_dir, false)),
            ObjectFile::OkCommit(n) | ObjectFile::WriteCommit(n) => {
                commits.insert(n.to_string(), path.clone());
                None
            }
            _ => None,
        };
        if let Some((fragment, in_dir, is_metadata)) = fragment_of {
            let report = fragments
                .entry(fragment.clone())
                .or_insert_with(|| FragmentReport {
                    name: fragment.to_string(),
                    location: if in_dir { "__fragments" } else { "root" },
                    timestamp_range: [fragment.t1, fragment.t2],
                    format_version: fragment.version,
                    commit_file: None,
                    file_count: 0,
                    bytes: 0,
                });
            report.file_count += 1;
            report.bytes += size;
            let first_tile = generic_tiles.as_ref().and_then(|t| t.first());
            if let (true, None, Some(first)) = (is_metadata, report.format_version, first_tile) {
                report.format_version = Some(first.version);
            }
        }
        files.push(FileReport {
            timestamps: class.timestamped_name().map(|n| [n.t1, n.t2]),
            path,
            size,
            kind: class.label(),
            generic_tiles,
            trailing_bytes,
        });
    }
    let fragments = fragments
        .into_values()
        .map(|mut f| {
            f.commit_file = commits.get(&f.name).cloned();
            f
        })
        .collect();
    Ok(Inspection {
        kind,
        files,
        fragments,
        nested_objects,
    })
}

impl fmt::Display for Inspection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "kind: {}", self.kind)?;
        writeln!(f, "files ({}):", self.files.len())?;
        for file in &self.files {
            let mut line = format!("  {:<28} {:>8}  {}", file.kind, file.size, file.path);
            if let Some([t1, t2]) = file.timestamps {
                let _ = write!(line, "  t=[{t1},{t2}]");
            }
            writeln!(f, "{line}")?;
            for t in file.generic_tiles.iter().flatten() {
                writeln!(
                    f,
                    "      tile @{} v{} {} cell={} {} persisted={} size={} pipeline={}B",
                    t.offset,
                    t.version,
                    t.datatype,
                    t.cell_size,
                    t.encryption,
                    t.persisted_size,
                    t.tile_size,
                    t.filter_pipeline_size
                )?;
            }
            if let Some(n) = file.trailing_bytes.filter(|n| *n > 0) {
                writeln!(f, "      then {n} bytes that are not a generic tile")?;
            }
        }
        writeln!(f, "fragments ({}):", self.fragments.len())?;
        for fr in &self.fragments {
            let version = fr
                .format_version
                .map_or("v?".to_owned(), |v| format!("v{v}"));
            writeln!(
                f,
                "  {}  t=[{},{}] {} in {}, {} files, {} bytes, commit: {}",
                fr.name,
                fr.timestamp_range[0],
                fr.timestamp_range[1],
                version,
                fr.location,
                fr.file_count,
                fr.bytes,
                fr.commit_file.as_deref().unwrap_or("none")
            )?;
        }
        if !self.nested_objects.is_empty() {
            writeln!(f, "nested objects ({}):", self.nested_objects.len())?;
            for n in &self.nested_objects {
                writeln!(f, "  {} {}", n.kind, n.path)?;
            }
        }
        Ok(())
    }
}
