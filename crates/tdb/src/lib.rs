//! tdb: read and write TileDB arrays in pure Rust.
//!
//! ```no_run
//! use tdb::{Array, ReadSpec};
//! let array = Array::open("my_array")?;
//! for batch in array.read(ReadSpec::new(["x", "a"]))? {
//!     let batch = batch?;
//!     println!("{} cells", batch.num_cells);
//! }
//! # Ok::<(), tdb::Error>(())
//! ```
//!
//! Arrays and groups open by path or URI: local paths and `file://`, and
//! `s3://`, `az://`, `abfs(s)://`, `gs://` and `http(s)://` through
//! `tdb-object-store`, configured by the environment object_store reads
//! (`AWS_*`, `AZURE_*`, `GOOGLE_*`) and by [`OpenOptions::config`], which
//! takes TileDB's config names too (`vfs.s3.endpoint_override`, ...).
//!
//! An [`Array`] is opened at a time window ([`OpenOptions`]); reads return
//! their cells in [`Batch`]es whose size the query's memory budget bounds.
//! Every layer below is a crate of its own (`tdb-storage`, `tdb-schema`,
//! `tdb-fragment`, `tdb-query`, ...) for users who need only one.

mod copy;
mod group;

use std::path::Path;
use std::sync::Arc;
use thiserror::Error;

pub use copy::{copy, copy_group, CopySummary, GroupCopySummary};
pub use group::{Group, MemberChange};
pub use tdb_query::write::{now_ms, FragmentWriter, WriteSpec, Written};
pub use tdb_schema::{Enumeration, SchemaEntry, SchemaEvolution};

pub use tdb_format::ObjectType;
pub use tdb_format::{ArrayType, Datatype, Layout};
pub use tdb_fragment::{
    ArrayMetadata, GroupMember, GroupMembers, LoadedFragment, MetadataEntry, MetadataValue,
    TimeWindow,
};
pub use tdb_object_store::{Config as StorageConfig, ObjectStorage, RequestStats};
pub use tdb_query::condition::{field, Cond};
pub use tdb_query::label::{self, LabelArray};
pub use tdb_query::{
    split_for_parallel, AggregateOp, AggregateResult, AggregateValue, AttributeBounds, Batch,
    Column, DimRange, DimValue, FieldBuffer, FragmentConsolidation, FragmentSelection, ReadSpec,
    ResultLayout, Snapshot, Subarray, Validity, DEFAULT_BUDGET, VAR_NUM,
};
pub use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder, DimensionLabel, Range};
pub use tdb_storage::{LocalStorage, MemoryStorage, Storage};

/// Storage chosen at run time by path or URI ([`storage`]).
pub type AnyStorage = Arc<dyn Storage>;

/// The storage a path or URI names: a local directory for a plain path or
/// `file://`, an object store prefix for `s3://`, `az://`, `abfs(s)://`,
/// `gs://` and `http(s)://`, configured by the environment and `config`.
/// Makes no request.
pub fn storage(path: impl AsRef<Path>, config: &StorageConfig) -> Result<AnyStorage> {
    let path = path.as_ref();
    match path.to_str() {
        Some(uri) => tdb_object_store::open(uri, config).map_err(Error::Storage),
        // Not UTF-8, so no URI: a local path.
        None => Ok(Arc::new(LocalStorage::new(path))),
    }
}

/// Everything that can go wrong; the variants wrap each layer's error, which
/// names the file, tile or field at fault.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// Opening the array: its directory, schemas, fragments or metadata.
    #[error("cannot open the array")]
    Open(#[from] tdb_fragment::FragmentError),
    /// Opening the array at a local path: the path, and why (storage is
    /// rooted at the path, so the cause names files relative to it).
    #[error("cannot open the array at {path}")]
    OpenAt {
        /// The path given.
        path: String,
        /// What went wrong.
        #[source]
        source: tdb_fragment::FragmentError,
    },
    /// Creating an array or group, or committing a change to it (schema,
    /// metadata, members): what was refused, or the file that failed.
    #[error("cannot write the change")]
    Write(#[source] tdb_fragment::FragmentError),
    /// Misuse of a group: the group, and what to change.
    #[error("group {group}: {reason}")]
    Group {
        /// The group's directory.
        group: String,
        /// What is wrong.
        reason: String,
    },
    /// Planning or running a query.
    #[error("query failed")]
    Query(#[source] tdb_query::QueryError),
    /// A path or URI that names no storage tdb can reach, or settings it
    /// cannot use: says what to set.
    #[error("cannot reach the storage")]
    Storage(#[source] tdb_object_store::OpenError),
    /// Something tdb does not do yet; the message says what.
    #[error("not supported yet: {0}")]
    Unsupported(String),
    /// A key that is not 32 bytes.
    #[error("an AES-256-GCM key is 32 bytes, not {0}")]
    KeyLength(usize),
}

impl From<tdb_query::QueryError> for Error {
    /// A query crate's "not supported yet" stays one here, whichever call
    /// met it.
    fn from(e: tdb_query::QueryError) -> Self {
        match e {
            tdb_query::QueryError::Unsupported(what) => Error::Unsupported(what),
            e => Error::Query(e),
        }
    }
}

/// This crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How to open an array: the time window and the encryption key.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct OpenOptions {
    window: Option<TimeWindow>,
    key: Option<[u8; 32]>,
    config: StorageConfig,
}

impl OpenOptions {
    /// Now, unencrypted.
    pub fn new() -> Self {
        OpenOptions::default()
    }

    /// One storage setting for paths and URIs opened with these options:
    /// TileDB's config names (`vfs.s3.endpoint_override`,
    /// `vfs.s3.aws_access_key_id`, `vfs.azure.storage_account_name`, ...)
    /// or object_store's keys (`aws_endpoint`, ...); the environment
    /// applies first.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config = self.config.set(key, value);
        self
    }

    /// Storage settings for paths and URIs opened with these options.
    pub fn storage_config(mut self, config: StorageConfig) -> Self {
        self.config = config;
        self
    }

    /// Opens as of timestamp `t` (ms since the epoch): everything written
    /// up to it.
    pub fn at(mut self, t: u64) -> Self {
        self.window = Some(TimeWindow::until(t));
        self
    }

    /// Opens at the window `[start, end]`.
    pub fn between(mut self, start: u64, end: u64) -> Self {
        self.window = Some(TimeWindow::new(start, end));
        self
    }

    /// The timestamp metadata writes, deletes and group changes are
    /// stamped with, as TileDB stamps them: the end of the window when one
    /// was given, else now.
    fn stamp(&self) -> u64 {
        self.window.map_or_else(now_ms, |w| w.end)
    }

    /// The AES-256-GCM key, exactly as TileDB's `sm.encryption_key` takes
    /// it (32 bytes).
    pub fn key(mut self, key: &[u8]) -> Result<Self> {
        let k: [u8; 32] = key.try_into().map_err(|_| Error::KeyLength(key.len()))?;
        self.key = Some(k);
        Ok(self)
    }
}

/// An array opened at a time window, over any storage backend.
#[derive(Debug)]
pub struct Array<S = AnyStorage> {
    storage: S,
    /// Shared with the reads in progress, which own a reference each.
    snapshot: Arc<Snapshot>,
    options: OpenOptions,
    /// When the snapshot was loaded: the end of its window when opened
    /// now, so a read that must load it again sees no later write.
    loaded_at: u64,
}

impl Array<AnyStorage> {
    /// Opens the array at a local path or URI ([`storage`]), now,
    /// unencrypted.
    ///
    /// ```
    /// let array = tdb::Array::open("../../testdata/arrays/sparse_2d_int/array")?;
    /// assert_eq!(array.schema().domain.dimensions.len(), 2);
    /// # Ok::<(), tdb::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Array::open_with(path, OpenOptions::new())
    }

    /// Opens the array at a local path or URI with `options`.
    ///
    /// ```
    /// use tdb::{Array, OpenOptions};
    /// // The array as it was once its first fragment (timestamp 1) was written.
    /// let array = Array::open_with(
    ///     "../../testdata/arrays/sparse_timestamps/array",
    ///     OpenOptions::new().at(1),
    /// )?;
    /// assert_eq!(array.fragments().len(), 1);
    /// # Ok::<(), tdb::Error>(())
    /// ```
    pub fn open_with(path: impl AsRef<Path>, options: OpenOptions) -> Result<Self> {
        let path = path.as_ref();
        let storage = storage(path, &options.config)?;
        Array::open_in(storage, "", options).map_err(|e| match e {
            Error::Open(source) => Error::OpenAt {
                path: path.display().to_string(),
                source,
            },
            other => other,
        })
    }

    /// [`Array::open_with`] for async code: listings and reads awaited
    /// (object stores do them on their own I/O runtime, so any executor
    /// drives it). Read it with [`Array::read_stream`].
    pub async fn open_async(path: impl AsRef<Path>, options: OpenOptions) -> Result<Self> {
        let path = path.as_ref();
        let storage = storage(path, &options.config)?;
        Array::open_in_async(storage, "", options)
            .await
            .map_err(|e| match e {
                Error::Open(source) => Error::OpenAt {
                    path: path.display().to_string(),
                    source,
                },
                other => other,
            })
    }

    /// Creates an array at a local path or URI (a directory is made if
    /// missing) and opens it.
    ///
    /// ```
    /// use tdb::{Array, ArraySchema, ArrayType, AttributeBuilder, Datatype, DimensionBuilder};
    /// let schema = ArraySchema::builder(ArrayType::Dense)
    ///     .dimension(DimensionBuilder::range("x", 1i32..=100).tile_extent(10i32))
    ///     .attribute(AttributeBuilder::new("a", Datatype::Float64))
    ///     .build()?;
    /// let dir = std::env::temp_dir().join(format!("tdb-doc-create-{}", std::process::id()));
    /// let array = Array::create(&dir, &schema)?;
    /// assert!(array.fragments().is_empty());
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create(path: impl AsRef<Path>, schema: &ArraySchema) -> Result<Self> {
        Array::create_with(path, schema, OpenOptions::new())
    }

    /// Creates an array at a local path or URI with `options` (the key
    /// encrypts it; the storage settings reach it) and opens it.
    pub fn create_with(
        path: impl AsRef<Path>,
        schema: &ArraySchema,
        options: OpenOptions,
    ) -> Result<Self> {
        let storage = storage(path, &options.config)?;
        Array::create_in(storage, "", schema, &[], options)
    }
}

impl<S: tdb_storage::Storage> Array<S> {
    /// Creates an array at key prefix `dir` of `storage` with `schema` (and
    /// the enumerations it refers to), encrypted with `options`' key, and
    /// opens it. The schema is checked by TileDB's rules first; a
    /// directory that already holds an array or group is refused.
    pub fn create_in(
        storage: S,
        dir: &str,
        schema: &ArraySchema,
        enumerations: &[Enumeration],
        options: OpenOptions,
    ) -> Result<Self> {
        tdb_fragment::create_array(
            &storage,
            dir,
            schema,
            enumerations,
            options.key.as_ref(),
            now_ms(),
        )
        .map_err(Error::Write)?;
        Array::open_in(storage, dir, options)
    }

    /// Writes one fragment with the latest schema and commits it, stamped
    /// with the spec's timestamps or else, as TileDB stamps writes, with the
    /// end of the window the array was opened at (now without one). The
    /// array stays open at its window: [`Array::reopen`] to read what was
    /// written.
    ///
    /// ```
    /// use tdb::{Array, ArraySchema, ArrayType, AttributeBuilder, Datatype, DimensionBuilder};
    /// use tdb::{FieldBuffer, ReadSpec, WriteSpec};
    /// let schema = ArraySchema::builder(ArrayType::Sparse)
    ///     .dimension(DimensionBuilder::range("x", 0i64..=99).tile_extent(10i64))
    ///     .attribute(AttributeBuilder::new("a", Datatype::Int32))
    ///     .build()?;
    /// let dir = std::env::temp_dir().join(format!("tdb-doc-write-{}", std::process::id()));
    /// let array = Array::create(&dir, &schema)?;
    /// let mut x = FieldBuffer::new("x", Datatype::Int64, 1, false);
    /// let mut a = FieldBuffer::new("a", Datatype::Int32, 1, false);
    /// for (xi, ai) in [(7i64, 70i32), (3, 30)] {
    ///     x.push(&xi.to_le_bytes(), true);
    ///     a.push(&ai.to_le_bytes(), true);
    /// }
    /// assert_eq!(array.write(WriteSpec::new(vec![x, a]))?.cells, 2);
    /// let cells = Array::open(&dir)?.read_all(ReadSpec::new(["x"]))?;
    /// assert_eq!(cells.fields[0].data, [3i64.to_le_bytes(), 7i64.to_le_bytes()].concat());
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write(&self, spec: WriteSpec) -> Result<Written> {
        let open = &self.snapshot.open;
        Ok(tdb_query::write_fragment(
            &self.storage,
            &open.dir,
            open.schemas.latest(),
            open.key(),
            &self.stamped(spec),
        )?)
    }

    /// Commits fragments written [`WriteSpec::uncommitted`] (by this
    /// process or others), all at once: one commit file names them, so
    /// readers see all of them or none. Returns the commit's path.
    pub fn commit_fragments(&self, fragments: &[tdb_format::TimestampedName]) -> Result<String> {
        let open = &self.snapshot.open;
        Ok(tdb_fragment::write_fragment_commits(
            &self.storage,
            &open.dir,
            fragments,
            tdb_format::FormatVersion::WRITTEN,
        )?)
    }

    /// `spec`, stamped with the open window's end unless it has timestamps.
    fn stamped(&self, spec: WriteSpec) -> WriteSpec {
        match spec.timestamps {
            Some(_) => spec,
            None => spec.at(self.options.stamp()),
        }
    }

    /// Starts a fragment written in parts (global-order writes take any
    /// number, each continuing where the last ended; memory stays at a
    /// tile per field however large the write), stamped as
    /// [`Array::write`] stamps. The spec's fields, if any, are the first
    /// part; [`FragmentWriter::finish`] commits.
    pub fn writer(&self, spec: WriteSpec) -> Result<FragmentWriter<'_, S>> {
        let open = &self.snapshot.open;
        Ok(FragmentWriter::new(
            &self.storage,
            &open.dir,
            open.schemas.latest(),
            open.key(),
            &self.stamped(spec),
        )?)
    }

    /// Evolves the schema as TileDB's `ArraySchemaEvolution` does and
    /// stores the result as the new schema in force (fragments written
    /// before keep theirs: a dropped attribute disappears from every read,
    /// an added one reads its fill value where older fragments lack it).
    /// Stamped as metadata writes are; with no window, never at or before
    /// the latest schema's timestamp, so the new schema is the latest even
    /// within the millisecond the array was made. [`Array::reopen`] to
    /// read and write with it.
    pub fn evolve(&self, evolution: &SchemaEvolution) -> Result<SchemaEntry> {
        let open = &self.snapshot.open;
        let latest = open.schemas.latest();
        let known = latest
            .schema
            .enumerations
            .iter()
            .map(|e| tdb_fragment::load_enumeration(&self.storage, &open.dir, &e.path, open.key()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(Error::Write)?;
        let evolved = evolution
            .apply(&latest.schema, &known)
            .map_err(|e| Error::Write(tdb_fragment::FragmentError::schema(&open.dir, e)))?;
        let t = match self.options.window {
            Some(w) => w.end,
            None => {
                let last = latest.timestamps.as_ref().map_or(0, |n| n.t2);
                now_ms().max(last.saturating_add(1))
            }
        };
        tdb_fragment::write_evolved_schema(&self.storage, &open.dir, &evolved, (t, t), open.key())
            .map_err(Error::Write)
    }

    /// Commits one batch of array metadata changes as one file (the
    /// last change of a key wins), stamped as [`OpenOptions`] says. An
    /// empty batch writes nothing, as in TileDB.
    pub fn write_metadata(&self, changes: impl IntoIterator<Item = MetadataEntry>) -> Result<()> {
        let open = &self.snapshot.open;
        commit_metadata(
            &self.storage,
            &open.dir,
            changes,
            self.options.stamp(),
            open.key(),
        )
    }

    /// Sets metadata `key` to `value`: [`Array::write_metadata`] of one change.
    pub fn put_metadata(&self, key: &str, value: MetadataValue) -> Result<()> {
        self.write_metadata([MetadataEntry::Put {
            key: key.to_owned(),
            value,
        }])
    }

    /// Removes metadata `key`: [`Array::write_metadata`] of one change.
    pub fn delete_metadata(&self, key: &str) -> Result<()> {
        self.write_metadata([MetadataEntry::Delete {
            key: key.to_owned(),
        }])
    }

    /// Deletes the cells where `condition` (TileDB-Py syntax) holds, as
    /// TileDB's delete queries do: reads from its timestamp on no longer
    /// see the cells written before it that match. Sparse arrays only.
    /// Returns the commit file's path in the array.
    pub fn delete(&self, condition: &str) -> Result<String> {
        Ok(tdb_query::delete_cells(
            &self.storage,
            &self.snapshot,
            condition,
            self.options.stamp(),
        )?)
    }

    /// Consolidates the array metadata files the array's window sees into
    /// one, as TileDB's array metadata consolidation does (a file of every
    /// live key spanning their timestamps, then a vacuum list naming them);
    /// `None` when there are fewer than two. Readers see the same metadata
    /// before and after; [`Array::vacuum_metadata`] then removes the old
    /// files.
    pub fn consolidate_metadata(&self) -> Result<Option<tdb_fragment::MetadataConsolidation>> {
        tdb_fragment::consolidate_metadata(&self.storage, &self.snapshot.open).map_err(Error::Write)
    }

    /// Removes the array metadata files that consolidations replaced, then
    /// their vacuum lists (over the array's whole history, as TileDB
    /// vacuums). Returns how many files went.
    pub fn vacuum_metadata(&self) -> Result<usize> {
        let open = &self.snapshot.open;
        tdb_fragment::vacuum_metadata(&self.storage, &open.dir, open.key()).map_err(Error::Write)
    }

    /// Consolidates the array's commits into one `.con` file, as TileDB's
    /// commit consolidation does (every commit listed once, deletes
    /// embedded); `None` when there is none. Readers see the same
    /// fragments and deletes; [`Array::vacuum_commits`] then removes the
    /// files it replaced.
    pub fn consolidate_commits(&self) -> Result<Option<String>> {
        let open = &self.snapshot.open;
        let version = open.schemas.latest().schema.written_version();
        tdb_fragment::consolidate_commits(&self.storage, &open.dir, version).map_err(Error::Write)
    }

    /// Removes the commit files consolidated commits list, then the
    /// consolidated commits and ignore files a newer one makes redundant.
    /// Returns how many files went.
    pub fn vacuum_commits(&self) -> Result<usize> {
        tdb_fragment::vacuum_commits(&self.storage, &self.snapshot.open.dir).map_err(Error::Write)
    }

    /// Consolidates the footers of the fragments the array's window sees
    /// into one `__fragment_meta/*.meta` file, as TileDB's fragment
    /// metadata consolidation does, so opening reads one file instead of
    /// one per fragment; `None` with fewer than two fragments.
    pub fn consolidate_fragment_metadata(&self) -> Result<Option<String>> {
        let open = &self.snapshot.open;
        let schemas = |name: &str| open.schemas.by_name(name).map(|e| &e.schema);
        tdb_fragment::consolidate_fragment_metadata(
            &self.storage,
            &open.dir,
            &self.snapshot.fragments,
            &schemas,
            open.schemas.latest().schema.written_version(),
            open.key(),
        )
        .map_err(Error::Write)
    }

    /// Removes every consolidated fragment metadata file but the latest.
    /// Returns how many went.
    pub fn vacuum_fragment_metadata(&self) -> Result<usize> {
        let open = &self.snapshot.open;
        tdb_fragment::vacuum_fragment_metadata(&self.storage, &open.dir, open.key())
            .map_err(Error::Write)
    }

    /// Consolidates the fragments whose timestamps lie in the array's
    /// window, as TileDB's fragment consolidation does with the same
    /// settings (`FragmentSelection::default()` is TileDB's: every fragment
    /// of the window in one step): sparse fragments keep every cell's
    /// timestamp, so reads at every time answer as before; dense ones merge
    /// over whole tiles, as TileDB's; then a vacuum list naming the
    /// fragments replaced. Returns the steps taken. Delete commits are
    /// carried on as TileDB's delete metadata (or their cells purged:
    /// [`FragmentSelection::purge_deleted_cells`]); fragments under older
    /// schemas merge under the latest, as TileDB's. The fragments are read and merged
    /// under `budget` bytes (`tdb::DEFAULT_BUDGET` is the reads' default):
    /// a larger array takes more batches, not more memory.
    pub fn consolidate_fragments(
        &self,
        selection: &FragmentSelection,
        budget: u64,
    ) -> Result<Vec<tdb_query::FragmentConsolidation>> {
        let open = &self.snapshot.open;
        Ok(tdb_query::consolidate_fragments(
            &self.storage,
            &open.dir,
            open.key(),
            self.options.window.unwrap_or(TimeWindow::ALL),
            selection,
            budget,
        )?)
    }

    /// The names of the fragments [`Array::consolidate_fragments`] with
    /// `selection` would merge first (TileDB's consolidation candidates),
    /// without writing anything; empty when nothing qualifies.
    pub fn consolidation_candidates(&self, selection: &FragmentSelection) -> Result<Vec<String>> {
        let open = &self.snapshot.open;
        Ok(tdb_query::next_consolidation(
            &self.storage,
            &open.dir,
            open.key(),
            self.options.window.unwrap_or(TimeWindow::ALL),
            selection,
        )?)
    }

    /// Consolidates exactly the fragments `names` (fragment names, or
    /// paths ending in them), whatever the window, as TileDB's
    /// consolidation of a fragment list does; of `settings` only how the
    /// merge writes applies (deleted cells dropped, fragment size);
    /// `None` for fewer than two.
    pub fn consolidate_fragment_list(
        &self,
        names: &[&str],
        settings: &FragmentSelection,
        budget: u64,
    ) -> Result<Option<tdb_query::FragmentConsolidation>> {
        let open = &self.snapshot.open;
        Ok(tdb_query::consolidate_fragment_list(
            &self.storage,
            &open.dir,
            open.key(),
            names,
            settings,
            budget,
        )?)
    }

    /// Removes the fragments consolidations replaced (their commits and
    /// directories), then the vacuum lists. Returns how many fragments went.
    pub fn vacuum_fragments(&self) -> Result<usize> {
        let open = &self.snapshot.open;
        tdb_fragment::vacuum_fragments(&self.storage, &open.dir, open.key()).map_err(Error::Write)
    }

    /// Removes fragment directories no commit makes visible (writes that
    /// stopped before committing, which `tdb verify` reports) whose names
    /// end more than `grace` before now: younger ones may be writes still
    /// in progress. Files a local write killed mid-file left in progress
    /// (in the array's directory, under names no listing shows) go too once
    /// unchanged for `grace`. Returns the directories, then the files,
    /// removed.
    pub fn vacuum_uncommitted(&self, grace: std::time::Duration) -> Result<Vec<String>> {
        let open = &self.snapshot.open;
        let grace = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        tdb_fragment::vacuum_uncommitted(
            &self.storage,
            &open.dir,
            open.key(),
            now_ms().saturating_sub(grace),
        )
        .map_err(Error::Write)
    }

    /// Opens the array again, now (everything committed so far).
    pub fn reopen(&mut self) -> Result<()> {
        self.loaded_at = now_ms();
        let open = &self.snapshot.open;
        self.snapshot = Arc::new(Snapshot::load(
            &self.storage,
            &open.dir.clone(),
            TimeWindow::ALL,
            open.key(),
        )?);
        self.options.window = None;
        Ok(())
    }
}

impl<S: tdb_fragment::ReadStorage> Array<S> {
    /// Opens the array at key prefix `dir` of `storage` (`""`: its root).
    pub fn open_in(storage: S, dir: &str, options: OpenOptions) -> Result<Self> {
        let window = options.window.unwrap_or(TimeWindow::ALL);
        let loaded_at = now_ms();
        let snapshot = Arc::new(load_snapshot(|| {
            Snapshot::load(&storage, dir, window, options.key.as_ref())
        })?);
        Ok(Array {
            storage,
            snapshot,
            options,
            loaded_at,
        })
    }

    /// [`Array::open_in`] for async code (see [`Array::open_async`]).
    pub async fn open_in_async(storage: S, dir: &str, options: OpenOptions) -> Result<Self> {
        let window = options.window.unwrap_or(TimeWindow::ALL);
        let loaded_at = now_ms();
        let opening = tdb_fragment::Opening::new(dir, window, options.key.as_ref());
        let snapshot = Arc::new(Snapshot::from(opening.run_async(&storage).await?));
        Ok(Array {
            storage,
            snapshot,
            options,
            loaded_at,
        })
    }

    /// The storage the array lives in.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// The schema reads use.
    pub fn schema(&self) -> &ArraySchema {
        self.snapshot.schema()
    }

    /// The window the array shows: the one it was opened at, or, opened
    /// now, from 0 to when it was loaded (or its newest fragment, if
    /// later). Opened again at this window, it shows the same fragments
    /// (merged ones hold the same cells) and nothing written since: what
    /// another process must open to read the same cells.
    pub fn window(&self) -> TimeWindow {
        self.options.window.unwrap_or_else(|| {
            let newest = self
                .snapshot
                .fragments
                .iter()
                .map(|f| f.file.name.timestamp_range().1)
                .max()
                .unwrap_or(0);
            TimeWindow {
                start: 0,
                end: self.loaded_at.max(newest),
            }
        })
    }

    /// The fragments reads see, oldest first.
    pub fn fragments(&self) -> &[LoadedFragment] {
        &self.snapshot.fragments
    }

    /// What the array was opened as: directory, schemas, fragments,
    /// enumerations.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The box every cell written (and visible at the window) lies in,
    /// one range per dimension (TileDB's `nonempty_domain`); `None` when
    /// nothing was written.
    ///
    /// ```
    /// let array = tdb::Array::open("../../testdata/arrays/dense_2d_row_row/array")?;
    /// let ned = array.non_empty_domain()?.expect("cells were written");
    /// assert_eq!(ned.len(), 2);
    /// # Ok::<(), tdb::Error>(())
    /// ```
    pub fn non_empty_domain(&self) -> Result<Option<Vec<Range>>> {
        Ok(self.snapshot.non_empty_domain()?)
    }

    /// [`Array::non_empty_domain`] as a subarray: what a read of every
    /// cell written covers (a dense read without one covers the whole
    /// domain, fill values included).
    pub fn non_empty_subarray(&self) -> Result<Option<Subarray>> {
        Ok(self.non_empty_domain()?.map(|ned| {
            let mut sub = Subarray::new(ned.len());
            for (d, r) in ned.into_iter().enumerate() {
                sub.add_range(d, r);
            }
            sub
        }))
    }

    /// The array metadata at the window.
    ///
    /// ```
    /// let array = tdb::Array::open("../../testdata/arrays/metadata_types/array")?;
    /// for (key, value) in array.metadata()?.iter() {
    ///     println!("{key}: {:?}", value.datatype);
    /// }
    /// # Ok::<(), tdb::Error>(())
    /// ```
    pub fn metadata(&self) -> Result<ArrayMetadata> {
        Ok(self.snapshot.open.metadata(&self.storage)?)
    }

    /// Starts a read: an iterator of batches.
    ///
    /// ```
    /// use tdb::{field, Array, ReadSpec};
    /// let array = Array::open("../../testdata/arrays/aggregates_sparse/array")?;
    /// let spec = ReadSpec::new(["x", "i"])
    ///     .range(array.schema(), "x", 0..=9)?
    ///     .with_condition(field("i").gt(0).and(field("s").eq("k1")));
    /// for batch in array.read(spec)? {
    ///     println!("{} cells", batch?.num_cells);
    /// }
    /// # Ok::<(), tdb::Error>(())
    /// ```
    pub fn read(&self, spec: ReadSpec) -> Result<Query<'_, S>> {
        Ok(Query {
            inner: tdb_query::SyncRead::new(
                &self.storage,
                Arc::clone(&self.snapshot),
                spec.clone(),
            )?,
            array: self,
            spec,
            handed_out: false,
            reloads: 0,
            left: None,
            batch_rows: None,
            pending: None,
        })
    }

    /// The snapshot loaded again at the same window (fragments a
    /// consolidation merged since hold the same cells; none written since
    /// is seen), for a read whose fragments a vacuum removed under it.
    fn reload(&self) -> Result<Arc<Snapshot>> {
        let window = self.window();
        let open = &self.snapshot.open;
        Ok(Arc::new(load_snapshot(|| {
            Snapshot::load(&self.storage, &open.dir, window, open.key())
        })?))
    }

    /// Starts a read as a `Stream` of batches (futures-core's trait), for
    /// async code: fetches are the storage's futures (object stores fetch
    /// on their own I/O runtime, so any executor drives it), tiles are
    /// decoded off the executor, and the cells are those [`Array::read`]
    /// gives.
    pub fn read_stream(&self, spec: ReadSpec) -> Result<tdb_query::ReadStream<'_, S>> {
        Ok(tdb_query::ReadStream::new(
            &self.storage,
            Arc::clone(&self.snapshot),
            spec,
        )?)
    }

    /// Aggregates over the cells `spec` selects (its subarray, condition
    /// and budget; its fields are ignored): one answer per `(field, op)`
    /// request, in order, as TileDB computes them. `spec`'s layout counts
    /// where a lossy filter (FLOAT_SCALE) stored the values: TileDB answers
    /// the sparse tiles its unordered and global-order reads keep whole
    /// from their metadata (the values as written), so ask
    /// [`ResultLayout::Unordered`], TileDB-Py's default for sparse arrays,
    /// to get TileDB-Py's answer.
    ///
    /// ```no_run
    /// use tdb::{AggregateOp, Array, ReadSpec};
    /// let array = Array::open("my_array")?;
    /// let sums = array.aggregate(
    ///     ReadSpec::new(Vec::<String>::new()).with_condition("a > 5"),
    ///     &[("a".into(), AggregateOp::Sum), ("a".into(), AggregateOp::Count)],
    /// )?;
    /// println!("{:?}", sums[0].value);
    /// # Ok::<(), tdb::Error>(())
    /// ```
    pub fn aggregate(
        &self,
        spec: ReadSpec,
        requests: &[(String, AggregateOp)],
    ) -> Result<Vec<AggregateResult>> {
        Ok(tdb_query::aggregate(
            &self.storage,
            Arc::clone(&self.snapshot),
            spec,
            requests,
        )?)
    }

    /// Bounds of attributes' values from the fragments' own summaries
    /// (fragment metadata v12+), no tile read: for planners. See
    /// [`AttributeBounds`] for what each part promises.
    ///
    /// ```
    /// let array = tdb::Array::open("../../testdata/arrays/aggregates_sparse/array")?;
    /// let b = &array.attribute_bounds(&["i"])?[0];
    /// assert!(b.min.is_some() && b.max.is_some());
    /// # Ok::<(), tdb::Error>(())
    /// ```
    pub fn attribute_bounds(&self, names: &[&str]) -> Result<Vec<AttributeBounds>> {
        Ok(tdb_query::attribute_bounds(
            &self.storage,
            &self.snapshot,
            names,
        )?)
    }

    /// Dimension label `name`'s own array, opened at this array's window
    /// with its key, as TileDB opens it for a read by label.
    pub fn label(&self, name: &str) -> Result<LabelArray> {
        Ok(LabelArray::open(&self.storage, &self.snapshot, name)?)
    }

    /// `subarray` with its label ranges ([`Subarray::add_label`]) turned
    /// into ranges of the dimensions they label, as TileDB does before a
    /// read: reads do this themselves; this shows what they will read.
    ///
    /// ```
    /// use tdb::{Array, Subarray};
    /// let array = Array::open("../../testdata/arrays/dim_labels_dense/array")?;
    /// let mut sub = Subarray::default();
    /// sub.add_label(array.schema(), "lx", 0.3..=3.0)?;
    /// let by_index = array.resolve_labels(&sub)?;
    /// assert_eq!(by_index.ranges(0).len(), 1);
    /// # Ok::<(), tdb::Error>(())
    /// ```
    pub fn resolve_labels(&self, subarray: &Subarray) -> Result<Subarray> {
        Ok(tdb_query::label::resolve(
            &self.storage,
            &self.snapshot,
            subarray,
            DEFAULT_BUDGET,
        )?)
    }

    /// The values of label `name` at the indexes `subarray` reads on its
    /// dimension (label ranges turned into index ranges first; the whole
    /// dimension when it has none): TileDB's label data of a read, one
    /// value per index, not per cell.
    pub fn label_values(&self, name: &str, subarray: &Subarray) -> Result<FieldBuffer> {
        let label = self.label(name)?;
        let sub = self.resolve_labels(subarray)?;
        let ranges = sub.ranges(label.label().dimension as usize);
        Ok(label.values(&self.storage, ranges, DEFAULT_BUDGET)?)
    }

    /// Runs a read to the end and joins its batches.
    ///
    /// ```
    /// let array = tdb::Array::open("../../testdata/arrays/attr_nullable/array")?;
    /// let all = array.read_all(tdb::ReadSpec::new(["d", "ni"]))?;
    /// assert_eq!(all.num_cells, 8);
    /// assert_eq!(all.fields[1].validity, Some(vec![1, 0, 1, 0, 1, 1, 1, 0].into()));
    /// # Ok::<(), tdb::Error>(())
    /// ```
    pub fn read_all(&self, spec: ReadSpec) -> Result<Batch> {
        let mut all = Batch::default();
        for b in self.read(spec)? {
            all.append(&b?);
        }
        Ok(all)
    }
}

/// One batch of metadata changes (an array's or a group's) committed as
/// one file stamped `t`.
fn commit_metadata<S: tdb_storage::WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    changes: impl IntoIterator<Item = MetadataEntry>,
    t: u64,
    key: Option<&[u8; 32]>,
) -> Result<()> {
    let file = tdb_fragment::MetadataFile::from_changes(changes);
    tdb_fragment::write_metadata(storage, dir, &file, (t, t), key).map_err(Error::Write)?;
    Ok(())
}

/// A read in progress: batches of results in order.
///
/// ```
/// use tdb::{Array, ReadSpec};
/// let array = Array::open("../../testdata/arrays/sparse_2d_int/array")?;
/// let spec = ReadSpec::new(["x", "a"]).range(array.schema(), "x", 10..=40)?;
/// let mut cells = 0;
/// for batch in array.read(spec)?.limit(5).batch_rows(2) {
///     let batch = batch?;
///     assert!(batch.num_cells <= 2);
///     cells += batch.num_cells;
/// }
/// assert_eq!(cells, 5);
/// # Ok::<(), tdb::Error>(())
/// ```
/// A read whose fragments a vacuum removes before it hands out its first
/// batch loads the array again (at the same window) and starts over, a few
/// times at most; after a batch it fails, as starting over would repeat
/// cells.
pub struct Query<'a, S> {
    inner: tdb_query::SyncRead<'a, S>,
    array: &'a Array<S>,
    spec: ReadSpec,
    /// Whether a batch went out.
    handed_out: bool,
    /// Times the snapshot was loaded again.
    reloads: u32,
    /// Cells still to hand out, when limited.
    left: Option<u64>,
    /// The most cells a batch holds, when set.
    batch_rows: Option<usize>,
    /// A batch being handed out in parts, and where the next part starts.
    pending: Option<(Batch, usize)>,
}

impl<S> Query<'_, S> {
    /// Hands out at most `n` cells: the read ends there (later pieces are
    /// never fetched).
    pub fn limit(mut self, n: u64) -> Self {
        self.left = Some(n);
        self
    }

    /// Hands out batches of at most `rows` cells (larger ones are cut; none
    /// is merged). `0` is taken as 1.
    pub fn batch_rows(mut self, rows: usize) -> Self {
        self.batch_rows = Some(rows.max(1));
        self
    }
}

/// Loads of the snapshot a read makes at most when vacuums keep removing
/// its fragments.
const MAX_RELOADS: u32 = 3;

/// Whether a read failed on a file that is gone: a vacuum removed a
/// fragment the read's snapshot holds.
fn vacuumed(e: &tdb_query::QueryError) -> bool {
    matches!(e, tdb_query::QueryError::Fragment(f) if gone(f))
}

/// Whether a file the array's listing named is gone.
fn gone(e: &tdb_fragment::FragmentError) -> bool {
    matches!(e, tdb_fragment::FragmentError::Missing { .. })
}

/// Loads a snapshot, again where a vacuum removed a fragment between the
/// listing and the reading of its footer.
fn load_snapshot(
    mut load: impl FnMut() -> tdb_fragment::Result<Snapshot>,
) -> tdb_fragment::Result<Snapshot> {
    let mut tries = 0;
    loop {
        match load() {
            Err(e) if tries < MAX_RELOADS && gone(&e) => tries += 1,
            done => return done,
        }
    }
}

/// Cells `cells` of `batch`, offsets rebased.
fn slice_batch(batch: &Batch, cells: std::ops::Range<usize>) -> Batch {
    let mut out = Batch::default();
    out.num_cells = (cells.end - cells.start) as u64;
    out.fields = batch
        .fields
        .iter()
        .map(|f| f.slice(cells.clone()))
        .collect();
    out
}

impl<S: tdb_fragment::ReadStorage> Query<'_, S> {
    /// The next batch, written into `batch`'s buffers (a batch of this
    /// read or of an earlier one of the same fields): a scan over many
    /// batches, or many reads, writes memory it touched before instead of
    /// fresh pages, which cost the kernel a fault each. `Some(Ok(()))` with
    /// `batch` holding the next batch; `None` at the end, `batch` then
    /// emptied, its buffers kept for the next read.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// use tdb::{Array, ArraySchema, ArrayType, AttributeBuilder, Batch, Datatype, DimensionBuilder, ReadSpec};
    /// let schema = ArraySchema::builder(ArrayType::Dense)
    ///     .dimension(DimensionBuilder::range("x", 0i32..=99).tile_extent(10i32))
    ///     .attribute(AttributeBuilder::new("a", Datatype::Int32))
    ///     .build()?;
    /// let array = Array::create(dir.path(), &schema)?;
    /// let mut batch = Batch::default();
    /// for _ in 0..3 {
    ///     let mut read = array.read(ReadSpec::new(["a"]))?;
    ///     while let Some(next) = read.next_into(&mut batch) {
    ///         next?;
    ///         assert_eq!(batch.num_cells, 100);
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn next_into(&mut self, batch: &mut Batch) -> Option<Result<()>> {
        self.inner.recycle(std::mem::take(batch));
        let next = self.next();
        self.inner.settle(batch, next)
    }
}

impl<S: tdb_fragment::ReadStorage> Iterator for Query<'_, S> {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == Some(0) {
            return None;
        }
        let (batch, start) = match self.pending.take() {
            Some(p) => p,
            None => loop {
                match self.inner.next()? {
                    Ok(b) => break (b, 0),
                    Err(e) if !self.handed_out && self.reloads < MAX_RELOADS && vacuumed(&e) => {
                        self.reloads += 1;
                        let restarted = self.array.reload().and_then(|snapshot| {
                            let spec = self.spec.clone();
                            Ok(tdb_query::SyncRead::new(
                                &self.array.storage,
                                snapshot,
                                spec,
                            )?)
                        });
                        match restarted {
                            Ok(inner) => self.inner = inner,
                            Err(e) => return Some(Err(e)),
                        }
                    }
                    Err(e) => return Some(Err(Error::from(e))),
                }
            },
        };
        self.handed_out = true;
        let total = batch.num_cells as usize;
        let mut end = match self.batch_rows {
            Some(rows) => total.min(start.saturating_add(rows)),
            None => total,
        };
        if let Some(left) = self.left {
            end = end.min(start.saturating_add(usize::try_from(left).unwrap_or(usize::MAX)));
        }
        let out = if start == 0 && end == total {
            batch
        } else {
            let part = slice_batch(&batch, start..end);
            if end < total {
                self.pending = Some((batch, end));
            }
            part
        };
        if let Some(left) = &mut self.left {
            *left -= out.num_cells;
        }
        Some(Ok(out))
    }
}
