//! tdb's storage traits over object stores, and URIs to storage.
//!
//! [`ObjectStorage`] implements [`tdb_storage`]'s traits over the
//! `object_store` crate: S3 (and S3-compatible servers), Azure Blob
//! Storage, Google Cloud Storage, and plain HTTP servers (read-only).
//! [`open`] turns any URI tdb accepts into storage: those stores, and
//! `file://` URIs and plain paths as [`tdb_storage::LocalStorage`].
//!
//! Object stores charge milliseconds a request, so reads are shaped for
//! them: ranges of one file close together are fetched as one request,
//! requests run concurrently, a missing object is learned from the read
//! itself, and listings carry sizes and entity tags. Writes are whole
//! objects (uploads in parts of at least 5 MiB, aborted when dropped
//! unfinished) and conditional creates, so nothing needs a rename.
//! Retries on throttling and server errors are bounded in count and time.

mod config;
mod error;
mod fetch;
mod runtime;
mod stats;
mod upload;

pub use config::{Config, Scheme, Tuning, MIN_PART_SIZE};
pub use error::OpenError;
pub use stats::RequestStats;

use bytes::Bytes;
use error::{is_missing, storage_error};
use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use std::sync::Arc;
use tdb_storage::{
    check_path, ListableStorage, Listing, LocalStorage, ObjectMeta, RangeRead, RangeRequest,
    ReadableStorage, Result, Storage, StorageError, Upload, WritableStorage,
};

/// Storage over one prefix of an object store (`s3://bucket/prefix`).
/// Keys are `/`-separated paths below the prefix.
#[derive(Debug, Clone)]
pub struct ObjectStorage {
    scheme: Scheme,
    store: Arc<dyn ObjectStore>,
    root: Path,
    /// The URI of the root, without a trailing `/`: names every error.
    base: String,
    tuning: Tuning,
    /// The requests sent through `store`, shared by clones.
    counters: Arc<stats::Counters>,
}

/// Whether `uri` names a remote store (anything but a plain path or
/// `file://`).
pub fn is_remote(uri: &str) -> bool {
    match uri.split_once("://") {
        Some((scheme, _)) => scheme != "file" && !scheme.contains(['/', '\\']),
        None => false,
    }
}

/// Storage for any URI tdb accepts: `s3://`, `az://`, `abfs(s)://`,
/// `gs://`, `http(s)://` through [`ObjectStorage`], and `file://` URIs and
/// plain paths through [`LocalStorage`].
pub fn open(uri: &str, config: &Config) -> std::result::Result<Arc<dyn Storage>, OpenError> {
    if let Some(path) = uri.strip_prefix("file://") {
        return Ok(Arc::new(LocalStorage::new(path)));
    }
    if !is_remote(uri) {
        return Ok(Arc::new(LocalStorage::new(uri)));
    }
    Ok(Arc::new(ObjectStorage::open(uri, config)?))
}

impl ObjectStorage {
    /// Storage below `uri` (`s3://bucket/prefix`, `az://container/prefix`,
    /// `gs://bucket/prefix`, `https://host/prefix`), configured from the
    /// environment and then `config`. Makes no request: a wrong bucket or
    /// endpoint shows at the first one, as an error that names the URI.
    pub fn open(uri: &str, config: &Config) -> std::result::Result<Self, OpenError> {
        let r = config::resolve(uri, config)?;
        Ok(Self::counted(
            r.scheme,
            r.store,
            r.root,
            uri.trim_end_matches('/'),
            r.tuning,
        ))
    }

    /// Storage over any object store (object_store's own in-memory store,
    /// a wrapped one), below `root`; `base` names it in errors and URIs.
    pub fn new(
        scheme: Scheme,
        store: Arc<dyn ObjectStore>,
        root: &str,
        base: &str,
        tuning: Tuning,
    ) -> Result<Self> {
        let root = Path::parse(check_path(root)?).map_err(|e| StorageError::InvalidPath {
            path: root.to_owned(),
            reason: path_reason(e),
        })?;
        Ok(Self::counted(
            scheme,
            store,
            root,
            base.trim_end_matches('/'),
            tuning,
        ))
    }

    fn counted(
        scheme: Scheme,
        store: Arc<dyn ObjectStore>,
        root: Path,
        base: &str,
        tuning: Tuning,
    ) -> Self {
        let counters = Arc::new(stats::Counters::default());
        let store = Arc::new(stats::CountingStore {
            inner: store,
            counters: counters.clone(),
        });
        ObjectStorage {
            scheme,
            store,
            root,
            base: base.to_owned(),
            tuning,
            counters,
        }
    }

    /// The requests sent so far (by this storage and its clones).
    pub fn stats(&self) -> RequestStats {
        self.counters.take(false)
    }

    /// The requests sent so far, counting again from zero.
    pub fn take_stats(&self) -> RequestStats {
        self.counters.take(true)
    }

    /// Which kind of store this is.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// How reads and uploads are shaped.
    pub fn tuning(&self) -> Tuning {
        self.tuning
    }

    /// The same storage with other tuning.
    pub fn with_tuning(mut self, tuning: Tuning) -> Self {
        self.tuning = tuning;
        self
    }

    /// The object_store path of `key`.
    fn path(&self, key: &str) -> Result<Path> {
        let k = check_path(key)?;
        let mut parts: Vec<&str> = Vec::new();
        if !self.root.as_ref().is_empty() {
            parts.push(self.root.as_ref());
        }
        if !k.is_empty() {
            parts.push(k);
        }
        Path::parse(parts.join("/")).map_err(|e| StorageError::InvalidPath {
            path: key.to_owned(),
            reason: path_reason(e),
        })
    }

    /// The listing prefix of directory `dir`: `None` for the store's root.
    fn prefix(&self, dir: &str) -> Result<Option<Path>> {
        let path = self.path(dir)?;
        Ok((!path.as_ref().is_empty()).then_some(path))
    }

    /// The immediate children of `dir`, sorted.
    async fn listing(&self, dir: &str) -> Result<Listing> {
        let prefix = self.prefix(dir)?;
        let got = self
            .store
            .list_with_delimiter(prefix.as_ref())
            .await
            .map_err(|e| self.error(dir, e))?;
        let mut listing = Listing {
            files: got.objects.iter().map(|m| self.meta(m)).collect(),
            dirs: got.common_prefixes.iter().map(|p| self.key_of(p)).collect(),
        };
        listing.files.sort();
        listing.dirs.sort();
        Ok(listing)
    }

    /// The key of an object_store path below the root.
    fn key_of(&self, path: &Path) -> String {
        let full = path.as_ref();
        let root = self.root.as_ref();
        if root.is_empty() {
            return full.to_owned();
        }
        full.strip_prefix(root)
            .map(|rest| rest.trim_start_matches('/').to_owned())
            .unwrap_or_else(|| full.to_owned())
    }

    /// The URI of `key`.
    fn uri_of(&self, key: &str) -> String {
        match check_path(key) {
            Ok("") => self.base.clone(),
            Ok(k) => format!("{}/{k}", self.base),
            Err(_) => format!("{}/{key}", self.base),
        }
    }

    fn error(&self, key: &str, e: object_store::Error) -> StorageError {
        storage_error(self.scheme, &self.uri_of(key), key, e)
    }

    fn writable(&self, key: &str) -> Result<Path> {
        if self.scheme == Scheme::Http {
            return Err(StorageError::Backend {
                uri: self.uri_of(key),
                message: "http(s) storage is read-only".to_owned(),
                source: None,
            });
        }
        if check_path(key)?.is_empty() {
            return Err(StorageError::wrong_kind(key, "is the root"));
        }
        self.path(key)
    }

    fn put(&self, key: &str, data: Bytes, mode: PutMode) -> Result<()> {
        let path = self.writable(key)?;
        let opts = PutOptions {
            mode,
            ..PutOptions::default()
        };
        let store = &self.store;
        runtime::block_on(store.put_opts(&path, PutPayload::from(data), opts))?
            .map(|_| ())
            .map_err(|e| self.error(key, e))
    }
}

/// Why object_store refused a path (its errors carry text; ours a static
/// reason).
fn path_reason(_: object_store::path::Error) -> &'static str {
    "not a valid object store path"
}

impl ReadableStorage for ObjectStorage {
    fn read(&self, key: &str) -> Result<Option<Bytes>> {
        let path = self.path(key)?;
        let store = &self.store;
        let got = runtime::block_on(async {
            match store.get(&path).await {
                Ok(r) => r.bytes().await.map(Some),
                Err(e) if is_missing(&e) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        got.map_err(|e| self.error(key, e))
    }

    fn read_ranges(&self, requests: &[RangeRequest]) -> Result<Vec<Option<RangeRead>>> {
        fetch::read_ranges(self, requests)
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        let path = self.path(key)?;
        let store = &self.store;
        match runtime::block_on(store.head(&path))? {
            Ok(meta) => Ok(Some(meta.size)),
            Err(e) if is_missing(&e) => Ok(None),
            Err(e) => Err(self.error(key, e)),
        }
    }

    fn uri(&self, key: &str) -> Option<String> {
        check_path(key).ok().map(|_| self.uri_of(key))
    }

    fn remote(&self) -> bool {
        true
    }

    /// Starts the batch on the runtime at once (a read ahead progresses
    /// while the reader decodes); the future waits for its task from any
    /// executor, tokio's or none.
    fn read_ranges_async(&self, requests: Vec<RangeRequest>) -> tdb_storage::RangesFuture<'_> {
        let me = self.clone();
        Box::pin(runtime::started(async move {
            fetch::read_ranges_async(&me, &requests).await
        }))
    }
}

impl ListableStorage for ObjectStorage {
    fn list_dir(&self, dir: &str) -> Result<Listing> {
        runtime::block_on(self.listing(dir))?
    }

    /// Lists on the runtime, started at once (see
    /// [`ObjectStorage::read_ranges_async`](ReadableStorage::read_ranges_async)).
    fn list_dir_async(&self, dir: &str) -> tdb_storage::ListFuture<'_> {
        let (me, dir) = (self.clone(), dir.to_owned());
        Box::pin(runtime::started(async move { me.listing(&dir).await }))
    }

    fn list_prefix(&self, dir: &str) -> Result<Vec<ObjectMeta>> {
        let prefix = self.prefix(dir)?;
        let prefix = prefix.as_ref();
        let store = &self.store;
        let got: Vec<object_store::ObjectMeta> =
            runtime::block_on(store.list(prefix).try_collect())?.map_err(|e| self.error(dir, e))?;
        let mut out: Vec<ObjectMeta> = got.iter().map(|m| self.meta(m)).collect();
        out.sort();
        Ok(out)
    }
}

impl ObjectStorage {
    fn meta(&self, m: &object_store::ObjectMeta) -> ObjectMeta {
        ObjectMeta {
            key: self.key_of(&m.location),
            size: Some(m.size),
            e_tag: m.e_tag.clone(),
            version: m.version.clone(),
        }
    }
}

impl WritableStorage for ObjectStorage {
    fn write(&self, key: &str, data: Bytes) -> Result<()> {
        self.put(key, data, PutMode::Overwrite)
    }

    fn create(&self, key: &str, data: Bytes) -> Result<()> {
        self.put(key, data, PutMode::Create)
    }

    fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        let path = self.writable(key)?;
        Ok(Box::new(upload::PartUpload::new(self, key, path)))
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.writable(key)?;
        let store = &self.store;
        match runtime::block_on(store.delete(&path))? {
            Err(e) if !is_missing(&e) => Err(self.error(key, e)),
            _ => Ok(()),
        }
    }

    fn delete_prefix(&self, dir: &str) -> Result<()> {
        if self.scheme == Scheme::Http {
            return self.writable(dir).map(|_| ());
        }
        let prefix = self.prefix(dir)?;
        let prefix = prefix.as_ref();
        let store = self.store.clone();
        let listed = store.list(prefix).map_ok(|m| m.location).boxed();
        let deleted: std::result::Result<Vec<Path>, _> =
            runtime::block_on(store.delete_stream(listed).try_collect())?;
        match deleted {
            Err(e) if !is_missing(&e) => Err(self.error(dir, e)),
            _ => Ok(()),
        }
    }
}
