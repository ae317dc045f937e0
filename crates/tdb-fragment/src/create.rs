//! Creating arrays and groups, and writing the small files that commit on
//! their own: schemas, enumerations, metadata, delete commits and group
//! details. An array is its schema file and a group its marker file:
//! TileDB lists missing directories as empty (local and object stores
//! alike), so nothing else must exist before the first write, and no empty
//! directory is made. Each of these files is one whole-object write, so it
//! is either there whole or not at all.

use crate::open::{dir_label, object_kind, ReadStorage};
use crate::{
    ConsolidatedCommit, ConsolidatedCommits, DeleteCommit, FragmentError, GroupDetails, IgnoreFile,
    MetadataFile, Result, VacuumFile,
};
use bytes::Bytes;
use tdb_format::names::{
    COMMITS_DIR, CON_EXT, DEL_EXT, ENUMERATIONS_DIR, GROUP_DETAILS_DIR, GROUP_FILE, IGN_EXT,
    LOCK_FILE, METADATA_DIR, SCHEMA_DIR, VAC_EXT, WRT_EXT,
};
use tdb_format::{FormatVersion, TimestampedName};
use tdb_schema::{ArraySchema, Enumeration, Evolved, SchemaEntry, SchemaError};
use tdb_storage::last_component;
use tdb_storage::{join, WritableStorage};

/// Creates an array at `dir`: checks `schema` by TileDB's rules, refuses a
/// directory that already holds a TileDB object, claims the directory by
/// creating its `__lock.tdb` (a legacy file TileDB reads past: schema
/// names are unique, so only a fixed name makes two creators collide, and
/// exactly one wins), then writes the enumerations, the arrays of its
/// dimension labels (TileDB's default label schemas:
/// [`tdb_schema::DimensionLabel::array_schema`], unfiltered) and the schema
/// file (last: it is what makes the directory an array) stamped
/// `timestamp`. `key` encrypts them all (AES-256-GCM).
pub fn create_array<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    schema: &ArraySchema,
    enumerations: &[Enumeration],
    key: Option<&[u8; 32]>,
    timestamp: u64,
) -> Result<SchemaEntry> {
    validate(schema, dir)?;
    let labels = schema
        .dimension_labels
        .iter()
        .filter(|l| !l.is_external)
        .map(|l| {
            let dim = schema.domain.dimensions.get(l.dimension as usize);
            let dim = dim.ok_or_else(|| {
                FragmentError::invalid(dir_label(dir), "dimension labels", "no such dimension")
            })?;
            l.array_schema(dim, None, Default::default())
                .map_err(|e| FragmentError::schema(dir_label(dir), e))
        })
        .collect::<Result<Vec<_>>>()?;
    create_labelled_array(storage, dir, schema, enumerations, &labels, key, timestamp)
}

/// [`create_array`] with the schemas of the label arrays given, one per
/// label the array stores itself (not external), in the schema's order:
/// what a copy does to keep its source's label filters and tiles.
pub fn create_labelled_array<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    schema: &ArraySchema,
    enumerations: &[Enumeration],
    label_schemas: &[ArraySchema],
    key: Option<&[u8; 32]>,
    timestamp: u64,
) -> Result<SchemaEntry> {
    validate(schema, dir)?;
    let internal: Vec<_> = schema
        .dimension_labels
        .iter()
        .filter(|l| !l.is_external)
        .collect();
    if internal.len() != label_schemas.len() {
        return Err(FragmentError::invalid(
            dir_label(dir),
            "dimension labels",
            format!(
                "{} label schemas given for {} labels",
                label_schemas.len(),
                internal.len()
            ),
        ));
    }
    refuse_existing(storage, dir)?;
    claim(storage, dir, LOCK_FILE)?;
    for e in enumerations {
        write_enumeration(storage, dir, e, key)?;
    }
    for (label, label_schema) in internal.iter().zip(label_schemas) {
        create_array(
            storage,
            &join(dir, &label.uri),
            label_schema,
            &[],
            key,
            timestamp,
        )?;
    }
    write_schema(storage, dir, schema, (timestamp, timestamp), key)
}

/// `schema` checked by TileDB's rules, for an array at `dir`.
fn validate(schema: &ArraySchema, dir: &str) -> Result<()> {
    schema
        .validate()
        .map_err(|e| FragmentError::schema(dir_label(dir), SchemaError::from(e)))
}

/// Writes `schema` as a new schema file of the array at `dir`, named for
/// `timestamps` (TileDB's schema names carry no format version), in the
/// written format version's layout.
pub fn write_schema<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    schema: &ArraySchema,
    (t1, t2): (u64, u64),
    key: Option<&[u8; 32]>,
) -> Result<SchemaEntry> {
    let (name, file) = named(SCHEMA_DIR, t1, t2, None, "")?;
    let mut schema = schema.clone();
    schema.version = schema.written_version();
    let bytes = schema
        .write_file(&file, key)
        .map_err(|e| FragmentError::schema(&file, e))?;
    put(storage, &join(dir, &file), bytes)?;
    Ok(SchemaEntry {
        name: name.to_string(),
        timestamps: Some(name),
        schema,
    })
}

/// Stores an evolved schema of the array at `dir`: the enumeration files
/// it needs first, then its schema file stamped `timestamps` (last: from
/// then on it is the schema in force), as TileDB's `evolve_array_schema`.
pub fn write_evolved_schema<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    evolved: &Evolved,
    timestamps: (u64, u64),
    key: Option<&[u8; 32]>,
) -> Result<SchemaEntry> {
    for e in &evolved.enumerations {
        write_enumeration(storage, dir, e, key)?;
    }
    write_schema(storage, dir, &evolved.schema, timestamps, key)
}

/// Writes an enumeration file where the schema's reference (its `path`)
/// points, at the written format version.
pub fn write_enumeration<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    enumeration: &Enumeration,
    key: Option<&[u8; 32]>,
) -> Result<()> {
    let file = format!("{SCHEMA_DIR}/{ENUMERATIONS_DIR}/{}", enumeration.path);
    let bytes = enumeration
        .write_file(&file, FormatVersion::WRITTEN, key)
        .map_err(|e| FragmentError::schema(&file, e))?;
    put(storage, &join(dir, &file), bytes)
}

/// Creates a group at `dir`: refuses a directory that already holds a
/// TileDB object, then writes the empty marker file TileDB tests for.
pub fn create_group<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
) -> Result<()> {
    refuse_existing(storage, dir)?;
    claim(storage, dir, GROUP_FILE)
}

/// Creates the file whose existence claims `dir` for one creator.
fn claim<S: WritableStorage + ?Sized>(storage: &S, dir: &str, marker: &str) -> Result<()> {
    let key = join(dir, marker);
    match storage.create(&key, Bytes::new()) {
        Err(e) if e.is_already_exists() => Err(FragmentError::invalid(
            dir_label(dir),
            "directory",
            format!(
                "another writer created an object here first ({marker} exists; \
                 if no object ever appears, a creation stopped before it finished: remove {marker})"
            ),
        )),
        other => other.map_err(|e| FragmentError::storage(&key, e)),
    }
}

/// Writes one batch of metadata changes of the array or group at `dir` as
/// a new file `__meta/__t1_t2_<uuid>` (no version suffix, as TileDB names
/// them) and returns its path. TileDB writes no file for an empty batch;
/// nor does this (`None`).
pub fn write_metadata<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    file: &MetadataFile,
    (t1, t2): (u64, u64),
    key: Option<&[u8; 32]>,
) -> Result<Option<String>> {
    if file.entries.is_empty() {
        return Ok(None);
    }
    let (_, path) = named(METADATA_DIR, t1, t2, None, "")?;
    put(storage, &join(dir, &path), file.write(&path, key)?)?;
    Ok(Some(path))
}

/// Writes a delete commit `__commits/__t1_t2_<uuid>_<v>.del` of the array at
/// `dir` at the written format version and returns its path. The commit
/// holds the condition of the cells kept (see [`DeleteCommit`]).
pub fn write_delete<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    commit: &DeleteCommit,
    (t1, t2): (u64, u64),
    key: Option<&[u8; 32]>,
) -> Result<String> {
    let (_, path) = named(COMMITS_DIR, t1, t2, Some(FormatVersion::WRITTEN), DEL_EXT)?;
    put(
        storage,
        &join(dir, &path),
        commit.write(&path, FormatVersion::WRITTEN, key)?,
    )?;
    Ok(path)
}

/// Writes a group details file `__group/__t_t_<uuid>_<details version>` of
/// the group at `dir` and returns its path.
pub fn write_group_details<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    details: &GroupDetails,
    timestamp: u64,
    key: Option<&[u8; 32]>,
) -> Result<String> {
    let name = details.generate_name(timestamp)?;
    let path = format!("{GROUP_DETAILS_DIR}/{name}");
    put(storage, &join(dir, &path), details.write(&path, key)?)?;
    Ok(path)
}

/// Writes the vacuum list `<replacing>.vac` naming the files or fragments
/// a consolidated `replacing` (a path relative to `dir`, without
/// extension) replaces, each as TileDB writes them from v19: relative to
/// the array, with a leading `/`. Returns its path.
pub fn write_vacuum_list<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    replacing: &str,
    replaced: &[String],
) -> Result<String> {
    let lines = replaced.iter().map(|p| format!("/{p}")).collect();
    write_vacuum_lines(storage, dir, replacing, lines)
}

/// Writes the vacuum list `<replacing>.vac` of exactly `lines` (a group's
/// name its files by absolute URI, as TileDB writes them).
pub fn write_vacuum_lines<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    replacing: &str,
    lines: Vec<String>,
) -> Result<String> {
    let path = format!("{replacing}{VAC_EXT}");
    put(storage, &join(dir, &path), VacuumFile::new(lines).write())?;
    Ok(path)
}

/// Commits fragments `names` of the array at `dir` (format `version`),
/// written together: one `__commits/<name>.wrt` marker for one fragment;
/// for several (a write split by a maximum fragment size) one consolidated
/// commits file listing each one's `.wrt`, named for their span, as
/// TileDB's global-order writer commits them, so that all become visible
/// at once. Returns the path written.
pub fn write_fragment_commits<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    names: &[TimestampedName],
    version: FormatVersion,
) -> Result<String> {
    let commits: Vec<String> = (names.iter())
        .map(|n| format!("{COMMITS_DIR}/{n}{WRT_EXT}"))
        .collect();
    let path = match commits.as_slice() {
        [one] => {
            put(storage, &join(dir, one), Vec::new())?;
            return Ok(one.clone());
        }
        _ => format!("{COMMITS_DIR}/{}{CON_EXT}", span_name(&commits, version)?),
    };
    let file = ConsolidatedCommits::new(
        commits
            .into_iter()
            .map(ConsolidatedCommit::commit)
            .collect(),
    );
    put(storage, &join(dir, &path), file.write())?;
    Ok(path)
}

/// Writes an ignore file `__commits/<name>.ign` listing `commits` (paths
/// relative to the array) that a `.con` holds but no reader may follow any
/// more, named for their span at `version`. Returns its path.
pub(crate) fn write_ignore_file<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    commits: &[String],
    version: FormatVersion,
) -> Result<String> {
    let name = span_name(commits, version)?;
    let path = format!("{COMMITS_DIR}/{name}{IGN_EXT}");
    put(
        storage,
        &join(dir, &path),
        IgnoreFile::new(commits.to_vec()).write(),
    )?;
    Ok(path)
}

/// The name TileDB gives a file that stands for `paths` (commits, in
/// their order): the first one's start and the last one's end timestamp
/// (`generate_consolidated_fragment_name`). With timestamps of different
/// lengths (1 beside a time in ms) path order can make that range
/// reversed, which no reader accepts: then their whole span.
pub(crate) fn span_name(paths: &[String], version: FormatVersion) -> Result<TimestampedName> {
    let stamp = |p: &String| {
        TimestampedName::parse(last_component(p))
            .map_err(|e| FragmentError::format(p, "commit name", e))
    };
    let (Some(first), Some(last)) = (paths.first(), paths.last()) else {
        return Err(FragmentError::invalid(
            COMMITS_DIR,
            "file name",
            "no commit to name it for",
        ));
    };
    let (mut t1, mut t2) = (stamp(first)?.t1, stamp(last)?.t2);
    if t1 > t2 {
        let names = paths.iter().map(stamp).collect::<Result<Vec<_>>>()?;
        t1 = names.iter().map(|n| n.t1).min().unwrap_or(t1);
        t2 = names.iter().map(|n| n.t2).max().unwrap_or(t2);
    }
    Ok(named(COMMITS_DIR, t1, t2, Some(version), "")?.0)
}

/// A fresh name `__t1_t2_<uuid>[_v]`, and its path `folder/<name>ext`.
pub(crate) fn named(
    folder: &str,
    t1: u64,
    t2: u64,
    version: Option<FormatVersion>,
    ext: &str,
) -> Result<(TimestampedName, String)> {
    let name = TimestampedName::generate(t1, t2, version)
        .map_err(|e| FragmentError::format(folder, "file name", e))?;
    let path = format!("{folder}/{name}{ext}");
    Ok((name, path))
}

/// Refuses a directory that already holds an array or group.
fn refuse_existing<S: ReadStorage + ?Sized>(storage: &S, dir: &str) -> Result<()> {
    match object_kind(storage, dir)? {
        Some(kind) => Err(FragmentError::invalid(
            dir_label(dir),
            "directory",
            format!("already holds a TileDB {}", kind.name()),
        )),
        None => Ok(()),
    }
}

/// One whole-object write of a file that must be new: every file written
/// here has a fresh name (or is a marker whose existence is the point), so
/// finding one there means another writer made it, and it stays.
pub(crate) fn put<S: WritableStorage + ?Sized>(
    storage: &S,
    key: &str,
    bytes: Vec<u8>,
) -> Result<()> {
    storage
        .create(key, Bytes::from(bytes))
        .map_err(|e| FragmentError::storage(key, e))
}
