//! `tdb inspect`: every file of an array or group directory classified, its
//! fragments with timestamps and format versions, and the header of every
//! generic tile, from tdb-format and tdb-storage alone.

use crate::CliError;
use serde::Serialize;
use std::fmt::{self, Write as _};
use tdb_format::{classify, names, ObjectFile};
use tdb_fragment::{
    object_files, object_kind, ArrayMetadata, CommitLocation, ListedFile, LoadedFragment,
    ObjectFiles, ObjectKind, OpenArray, OpenGroup, TimeWindow,
};
use tdb_schema::{ArraySchema, SchemaHistory};
use tdb_storage::{last_component, ByteRange, RangeRequest, Storage};

/// What `inspect` found.
#[derive(Debug, Serialize)]
pub struct Inspection {
    /// `array` or `group`.
    pub kind: &'static str,
    /// The time window the object was opened at, `[start, end]`.
    pub window: [u64; 2],
    /// Every file, sorted by path, relative to the object.
    pub files: Vec<FileReport>,
    /// For arrays: the schema a read in the window uses.
    pub schema: Option<String>,
    /// For arrays: the fragments a read in the window sees, in TileDB's
    /// order (its fragment info's).
    pub fragments: Vec<FragmentReport>,
    /// For arrays: fragments that consolidation superseded and vacuuming
    /// may remove.
    pub fragments_to_vacuum: Vec<String>,
    /// For arrays: delete and update commits a read in the window applies.
    pub conditions: Vec<ConditionReport>,
    /// For arrays: the array metadata in the window.
    pub metadata: Vec<MetadataReport>,
    /// For groups: members and metadata.
    pub group: Option<GroupReport>,
    /// Subdirectories that are TileDB objects of their own (group members
    /// stored inside the group), not descended into.
    pub nested_objects: Vec<NestedObject>,
    /// For encrypted arrays inspected without their key: what needs the
    /// key and how to pass it (schema, fragment footers, metadata, deletes
    /// and cells are then not shown).
    pub needs_key: Option<String>,
    /// For encrypted arrays inspected without their key: the fragments
    /// committed in the window, from their names and listings alone.
    pub committed_fragments: Vec<FragmentName>,
}

/// A fragment as its name and directory tell it, without reading it.
#[derive(Debug, Serialize)]
pub struct FragmentName {
    /// Directory name.
    pub name: String,
    /// Timestamp range from the name.
    pub timestamp_range: [u64; 2],
    /// Format version, from the name.
    pub format_version: u32,
    /// Number of files in the fragment directory.
    pub file_count: usize,
    /// Bytes in the fragment directory.
    pub bytes: u64,
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

/// One fragment a read sees: the conformance format's fields, exactly as
/// `expected.json` holds them (TileDB's fragment info).
#[derive(Debug, Serialize)]
pub struct FragmentInfo {
    /// Directory name.
    pub name: String,
    /// Timestamp range from the name.
    pub timestamp_range: [u64; 2],
    /// Format version, from the metadata.
    pub format_version: u32,
    /// Whether the fragment is sparse.
    pub sparse: bool,
    /// Cells (for dense fragments, whole tiles' cells, as TileDB counts).
    pub cell_num: Option<u64>,
    /// `[lo, hi]` per dimension, in the conformance value encoding.
    pub nonempty_domain: Option<Vec<[serde_json::Value; 2]>>,
    /// Whether its footer came from consolidated fragment metadata.
    pub has_consolidated_metadata: bool,
    /// The schema it was written with.
    pub array_schema_name: String,
}

/// One fragment a read sees: the conformance format's fields, then more.
#[derive(Debug, Serialize)]
pub struct FragmentReport {
    /// What TileDB's fragment info reports.
    #[serde(flatten)]
    pub info: FragmentInfo,
    /// Tiles per field.
    pub tile_num: Option<u64>,
    /// Size of its metadata's footer in bytes.
    pub footer_size: u64,
    /// Where its commit is: its own `.wrt`/`.ok` file, a consolidated
    /// commits file, or (before v5) its metadata file.
    pub commit: String,
    /// Number of files in the fragment directory.
    pub file_count: usize,
    /// Bytes in the fragment directory.
    pub bytes: u64,
}

/// A delete or update commit.
#[derive(Debug, Serialize)]
pub struct ConditionReport {
    /// The commit's name.
    pub name: String,
    /// `delete` or `update`.
    pub kind: &'static str,
    /// The timestamp it applies at.
    pub timestamp: u64,
    /// The file holding its condition.
    pub file: String,
}

/// One metadata entry, in the conformance format's shape.
#[derive(Debug, Serialize)]
pub struct MetadataReport {
    /// The key.
    pub key: String,
    /// TileDB's datatype name.
    pub datatype: &'static str,
    /// Number of values (1 for an empty value, as TileDB reports it).
    pub value_num: u32,
    /// The value in the conformance format's encoding.
    pub value: serde_json::Value,
}

/// A group's members and metadata, in the conformance format's shape.
#[derive(Debug, Serialize)]
pub struct GroupReport {
    /// The group metadata.
    pub metadata: Vec<MetadataReport>,
    /// The members, sorted by name (else URI).
    pub members: Vec<MemberReport>,
}

/// One group member.
#[derive(Debug, Serialize)]
pub struct MemberReport {
    /// Its name (its URI when it has none).
    pub name: String,
    /// The last component of its URI.
    pub uri_basename: String,
    /// `array` or `group`.
    #[serde(rename = "type")]
    pub member_type: String,
    /// Whether its URI is relative to the group.
    pub relative: bool,
}

/// A TileDB object stored inside the inspected one.
#[derive(Debug, Serialize)]
pub struct NestedObject {
    /// Path relative to the inspected object.
    pub path: String,
    /// `array` or `group`.
    pub kind: &'static str,
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

/// Inspects the array or group stored at `dir` in `storage`, opened at
/// `window` (with `key` for encrypted arrays).
pub fn inspect(
    storage: &dyn Storage,
    dir: &str,
    window: TimeWindow,
    key: Option<&[u8; 32]>,
) -> Result<Inspection, CliError> {
    let kind = object_kind(storage, dir)?.ok_or_else(|| CliError::NotAnObject(dir.to_owned()))?;
    let ObjectFiles {
        files: listed,
        nested,
        ..
    } = object_files(storage, dir)?;
    // Every file made of generic tiles is fetched whole, in one batch.
    let tiled: Vec<&ListedFile> = listed
        .iter()
        .filter(|f| classify(&f.path).holds_generic_tiles())
        .collect();
    let requests: Vec<RangeRequest> = tiled
        .iter()
        .map(|f| RangeRequest::new(tdb_storage::join(dir, &f.path), ByteRange::Whole))
        .collect();
    let mut fetched = storage.read_ranges(&requests)?.into_iter();
    let mut files = Vec::with_capacity(listed.len());
    for f in &listed {
        let class = classify(&f.path);
        let (generic_tiles, trailing_bytes) = if class.holds_generic_tiles() {
            let full = tdb_storage::join(dir, &f.path);
            let read = fetched
                .next()
                .flatten()
                .ok_or_else(|| tdb_storage::StorageError::not_found(&full))?;
            let (t, rest) = tiles(&f.path, &class, &read.bytes)?;
            (Some(t), Some(rest))
        } else {
            (None, None)
        };
        files.push(FileReport {
            timestamps: class.timestamped_name().map(|n| [n.t1, n.t2]),
            path: f.path.clone(),
            // `object_files` gives every size.
            size: f.size.unwrap_or_default(),
            kind: class.label(),
            generic_tiles,
            trailing_bytes,
        });
    }
    let mut report = Inspection {
        kind: kind.name(),
        window: [window.start, window.end],
        files,
        schema: None,
        fragments: Vec::new(),
        fragments_to_vacuum: Vec::new(),
        conditions: Vec::new(),
        metadata: Vec::new(),
        group: None,
        nested_objects: nested
            .into_iter()
            .map(|(path, k)| NestedObject {
                path,
                kind: k.name(),
            })
            .collect(),
        needs_key: None,
        committed_fragments: Vec::new(),
    };
    // The headers of encrypted generic tiles are not: without the key, what
    // they and the names say is all there is to show.
    let encrypted = report
        .files
        .iter()
        .flat_map(|f| f.generic_tiles.iter().flatten())
        .any(|t| t.encryption != tdb_format::EncryptionType::NoEncryption.name());
    match kind {
        ObjectKind::Array if encrypted && key.is_none() => {
            inspect_without_key(storage, dir, window, &mut report)?
        }
        ObjectKind::Array => inspect_array(storage, dir, window, key, &mut report)?,
        ObjectKind::Group => {
            let group = OpenGroup::open(storage, dir, window, key)?;
            report.group = Some(GroupReport {
                metadata: metadata(&group.metadata),
                members: group
                    .members
                    .iter()
                    .map(|m| MemberReport {
                        name: m.key().to_owned(),
                        uri_basename: last_component(m.uri.trim_end_matches('/')).to_owned(),
                        member_type: m.object_type.name().to_lowercase(),
                        relative: m.relative,
                    })
                    .collect(),
            });
        }
    }
    Ok(report)
}

fn inspect_array(
    storage: &dyn Storage,
    dir: &str,
    window: TimeWindow,
    key: Option<&[u8; 32]>,
    report: &mut Inspection,
) -> Result<(), CliError> {
    let array = OpenArray::open(storage, dir, window, key)?;
    report.schema = Some(array.schema().name.clone());
    let (files, inside) = (&report.files, |dir: &str, f: &FileReport| {
        f.path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
    });
    let mut fragments = Vec::new();
    for loaded in array.load_fragments(storage)? {
        let (f, footer) = (&loaded.file, &loaded.metadata.footer);
        let schema = fragment_schema(&array.schemas, &loaded)?;
        let info = fragment_info(&array.schemas, &loaded)?;
        let name = f.file_name().to_owned();
        let commit = [
            format!("{}/{name}{}", names::COMMITS_DIR, names::WRT_EXT),
            format!("{name}{}", names::OK_EXT),
        ]
        .into_iter()
        .find(|c| files.iter().any(|file| &file.path == c))
        .or_else(|| {
            array
                .directory
                .consolidated_commits
                .iter()
                .find(|c| last_component(c).starts_with(name.as_str()))
                .map(|c| format!("consolidated: {c}"))
        })
        .unwrap_or_else(|| format!("{}/{}", f.path, names::FRAGMENT_METADATA_FILE));
        let in_fragment = files.iter().filter(|file| inside(&f.path, file));
        fragments.push(FragmentReport {
            info,
            tile_num: loaded.metadata.tile_num(schema),
            footer_size: footer.size,
            commit,
            file_count: in_fragment.clone().count(),
            bytes: in_fragment.map(|f| f.size).sum(),
        });
    }
    report.fragments = fragments;
    report.fragments_to_vacuum = fragments_to_vacuum(&array)?;
    report.conditions = array
        .directory
        .conditions
        .iter()
        .map(|c| ConditionReport {
            name: c.name.to_string(),
            kind: if c.is_update { "update" } else { "delete" },
            timestamp: c.timestamp(),
            file: match &c.location {
                CommitLocation::File { path, .. } => path.clone(),
                CommitLocation::Consolidated { path, .. } => path.clone(),
                _ => c.marker.clone(),
            },
        })
        .collect();
    report.metadata = metadata(&array.metadata(storage)?);
    Ok(())
}

/// An encrypted array without its key: the fragments its commits and
/// vacuum lists make visible at `window` (fragment info's rule, which needs
/// no schema), from their names and files.
fn inspect_without_key(
    storage: &dyn Storage,
    dir: &str,
    window: TimeWindow,
    report: &mut Inspection,
) -> Result<(), CliError> {
    report.needs_key = Some(
        "the array is encrypted (AES-256-GCM): its schema, fragment footers, metadata, \
         deletes and cells need its key; pass --key KEY (the 32 bytes it was written with)"
            .to_owned(),
    );
    let listing = tdb_fragment::list_object(storage, dir)?;
    let paths: Vec<&str> = listing.files_to_read();
    let requests: Vec<RangeRequest> = paths
        .iter()
        .map(|p| RangeRequest::new(tdb_storage::join(dir, p), ByteRange::Whole))
        .collect();
    let got = storage.read_ranges(&requests)?;
    let mut contents = std::collections::HashMap::new();
    for (p, read) in paths.iter().zip(got) {
        let read = read.ok_or_else(|| tdb_storage::StorageError::not_found(p))?;
        contents.insert((*p).to_owned(), read.bytes.to_vec());
    }
    let directory = listing.resolve(&contents, window)?;
    let files = &report.files;
    report.committed_fragments = directory
        .filtered_fragments(true)?
        .fragments
        .iter()
        .map(|f| {
            let inside = files.iter().filter(|file| {
                file.path
                    .strip_prefix(f.path.as_str())
                    .is_some_and(|r| r.starts_with('/'))
            });
            FragmentName {
                name: f.file_name().to_owned(),
                timestamp_range: [f.name.t1, f.name.t2],
                format_version: f.format_version(),
                file_count: inside.clone().count(),
                bytes: inside.map(|file| file.size).sum(),
            }
        })
        .collect();
    Ok(())
}

/// The schema a fragment was written with (its footer names it).
pub(crate) fn fragment_schema<'a>(
    schemas: &'a SchemaHistory,
    loaded: &LoadedFragment,
) -> Result<&'a ArraySchema, CliError> {
    let name = &loaded.metadata.footer.array_schema_name;
    Ok(&schemas
        .by_name(name)
        .ok_or_else(|| {
            tdb_fragment::FragmentError::missing(
                &loaded.file.path,
                format!("schema {name} its footer names"),
            )
        })?
        .schema)
}

/// The conformance fields of a loaded fragment (`schemas`: the array's).
pub fn fragment_info(
    schemas: &SchemaHistory,
    loaded: &LoadedFragment,
) -> Result<FragmentInfo, CliError> {
    let schema = fragment_schema(schemas, loaded)?;
    let (f, footer) = (&loaded.file, &loaded.metadata.footer);
    let nonempty_domain = footer.non_empty_domain.as_ref().map(|ranges| {
        ranges
            .iter()
            .zip(&schema.domain.dimensions)
            .map(|(r, d)| {
                let (lo, hi) = r.bounds();
                [
                    crate::values::cell(d.datatype, 1, lo),
                    crate::values::cell(d.datatype, 1, hi),
                ]
            })
            .collect()
    });
    Ok(FragmentInfo {
        name: f.file_name().to_owned(),
        timestamp_range: [f.name.t1, f.name.t2],
        format_version: footer.version,
        sparse: !footer.dense,
        cell_num: loaded.metadata.cell_num(schema),
        nonempty_domain,
        has_consolidated_metadata: loaded.from_consolidated,
        array_schema_name: footer.array_schema_name.clone(),
    })
}

/// Names of the fragments consolidation superseded and vacuuming may
/// remove (TileDB's vacuum candidates).
pub fn fragments_to_vacuum(array: &OpenArray) -> Result<Vec<String>, CliError> {
    Ok(array
        .directory
        .filtered_fragments(true)?
        .fragments_to_vacuum
        .iter()
        .map(|p| last_component(p).to_owned())
        .collect())
}

/// Metadata entries in the conformance format's shape, in TileDB's order.
pub fn metadata(md: &ArrayMetadata) -> Vec<MetadataReport> {
    md.iter()
        .map(|(k, v)| MetadataReport {
            key: k.to_owned(),
            datatype: v.datatype.name(),
            value_num: v.reported_value_num(),
            value: crate::values::metadata_value(v),
        })
        .collect()
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
                if file.kind == "fragment-metadata" {
                    writeln!(
                        f,
                        "      then the footer, {n} bytes (its fields: see fragments)"
                    )?;
                } else {
                    writeln!(f, "      then {n} bytes that are not a generic tile")?;
                }
            }
        }
        if let Some(schema) = &self.schema {
            writeln!(f, "schema in force: {schema}")?;
        }
        if let Some(why) = &self.needs_key {
            writeln!(f, "needs the key: {why}")?;
            let [t1, t2] = self.window;
            writeln!(
                f,
                "fragments committed at [{t1},{t2}], from their names ({}):",
                self.committed_fragments.len()
            )?;
            for fr in &self.committed_fragments {
                writeln!(
                    f,
                    "  {}  t=[{},{}] v{}, {} files, {} bytes",
                    fr.name,
                    fr.timestamp_range[0],
                    fr.timestamp_range[1],
                    fr.format_version,
                    fr.file_count,
                    fr.bytes
                )?;
            }
        }
        if self.kind == "array" && self.needs_key.is_none() {
            let [t1, t2] = self.window;
            writeln!(f, "fragments at [{t1},{t2}] ({}):", self.fragments.len())?;
        }
        for fr in &self.fragments {
            writeln!(
                f,
                "  {}  t=[{},{}] v{}, {} files, {} bytes, commit: {}",
                fr.info.name,
                fr.info.timestamp_range[0],
                fr.info.timestamp_range[1],
                fr.info.format_version,
                fr.file_count,
                fr.bytes,
                fr.commit
            )?;
            let count = |n: Option<u64>| n.map_or("?".to_owned(), |n| n.to_string());
            let domain = fr
                .info
                .nonempty_domain
                .as_ref()
                .map_or("none".to_owned(), |d| {
                    let dims: Vec<String> =
                        d.iter().map(|[lo, hi]| format!("[{lo}, {hi}]")).collect();
                    dims.join(" × ")
                });
            writeln!(
                f,
                "      {}, {} cells in {} tiles, non-empty domain {domain}, schema {}, {}{}",
                if fr.info.sparse { "sparse" } else { "dense" },
                count(fr.info.cell_num),
                count(fr.tile_num),
                fr.info.array_schema_name,
                match fr.footer_size {
                    0 => "no footer (one metadata tile)".to_owned(),
                    n => format!("footer {n} B"),
                },
                if fr.info.has_consolidated_metadata {
                    " (from consolidated fragment metadata)"
                } else {
                    ""
                }
            )?;
        }
        if !self.fragments_to_vacuum.is_empty() {
            writeln!(
                f,
                "fragments to vacuum ({}):",
                self.fragments_to_vacuum.len()
            )?;
            for name in &self.fragments_to_vacuum {
                writeln!(f, "  {name}")?;
            }
        }
        if !self.conditions.is_empty() {
            writeln!(f, "delete/update commits ({}):", self.conditions.len())?;
            for c in &self.conditions {
                writeln!(
                    f,
                    "  {} at {}: {} in {}",
                    c.kind, c.timestamp, c.name, c.file
                )?;
            }
        }
        let write_metadata = |f: &mut fmt::Formatter<'_>, md: &[MetadataReport]| {
            writeln!(f, "metadata ({}):", md.len())?;
            for m in md {
                writeln!(
                    f,
                    "  {} {} x{} = {}",
                    m.key, m.datatype, m.value_num, m.value
                )?;
            }
            Ok(())
        };
        if self.kind == "array" && self.needs_key.is_none() {
            write_metadata(f, &self.metadata)?;
        }
        if let Some(g) = &self.group {
            writeln!(f, "members ({}):", g.members.len())?;
            for m in &g.members {
                let rel = if m.relative { "relative" } else { "absolute" };
                writeln!(
                    f,
                    "  {} {} ({}, {rel})",
                    m.member_type, m.name, m.uri_basename
                )?;
            }
            write_metadata(f, &g.metadata)?;
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
