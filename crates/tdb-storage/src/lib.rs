//! Where tdb's bytes live.
//!
//! Three small synchronous traits over `/`-separated keys relative to a
//! root, shaped after object stores rather than POSIX: [`ReadableStorage`]
//! (whole objects and batches of byte ranges, suffix ranges included, a
//! missing key as `None`), [`ListableStorage`] (listings that carry sizes
//! where the backend learns them free, as object stores do) and
//! [`WritableStorage`] (whole-object writes from bytes or uploaded part by
//! part, conditional creates that never replace a file, deletes). Nothing
//! here renames or needs empty directories: object stores implement the
//! same traits (`tdb-object-store`).
//! [`Storage`] is all three. Two backends ship: [`LocalStorage`] (a
//! directory) and [`MemoryStorage`]; [`RecordingStorage`] wraps any backend
//! and records every request, so tests can pin a read's I/O trace;
//! [`FaultyStorage`] fails writes from a chosen one on, so tests can crash
//! a write at every step;
//! [`conformance::run`] is the behaviour suite every backend must pass.

mod answers;
pub mod conformance;
mod error;
mod faulty;
mod links;
mod local;
mod memory;
mod path;
mod pool;
mod range;
mod recording;

pub use answers::{Answers, Unasked};
pub use error::{Result, StorageError};
pub use faulty::FaultyStorage;
pub use local::{LocalStorage, TEMP_PREFIX as LOCAL_TEMP_PREFIX};
pub use memory::MemoryStorage;
pub use path::check_path;
pub use pool::{idle_buffers, BufferPool, IDLE_LIMIT, POOLED_MIN};
pub use range::{arrange, arrangement, front_len, unarrange, ByteRange, RangeRead, RangeRequest};
pub use recording::{RecordingStorage, Request};

use bytes::Bytes;

/// A file (object) and its size, as a listing reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectMeta {
    /// Full key.
    pub key: String,
    /// Size in bytes, where the listing learns it free: object stores list
    /// sizes, while a local directory would need a `stat` per file (half
    /// the time of opening an array of 1,000 fragments), so it gives none.
    /// Ask [`ReadableStorage::size`], or read with [`ByteRange::Whole`].
    pub size: Option<u64>,
    /// The object's entity tag, where the backend has one (object stores).
    pub e_tag: Option<String>,
    /// The object's version, where the backend keeps versions.
    pub version: Option<String>,
}

impl ObjectMeta {
    /// A file known by its key (and its size, where known) alone.
    pub fn new(key: impl Into<String>, size: Option<u64>) -> Self {
        ObjectMeta {
            key: key.into(),
            size,
            e_tag: None,
            version: None,
        }
    }

    /// The last component of the key.
    pub fn name(&self) -> &str {
        last_component(&self.key)
    }
}

/// The immediate children of a directory (a common prefix, on object
/// stores), each list sorted by key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Files directly in the directory, with their sizes where known.
    pub files: Vec<ObjectMeta>,
    /// Full keys of the subdirectories that hold at least one file (local
    /// backends may also report empty ones; readers must not rely on that).
    pub dirs: Vec<String>,
}

/// Reads whole objects and byte ranges.
pub trait ReadableStorage: Send + Sync + std::fmt::Debug {
    /// A whole file, or `None` when there is none at `key`.
    fn read(&self, key: &str) -> Result<Option<Bytes>>;

    /// Many byte ranges of many files in one call, so a backend can batch,
    /// coalesce and parallelize them. One answer per request, in order,
    /// with the file's size: `None` where the file does not exist; a bounded
    /// range that does not lie inside its file is
    /// [`StorageError::RangeOutOfBounds`], never a short read.
    fn read_ranges(&self, requests: &[RangeRequest]) -> Result<Vec<Option<RangeRead>>>;

    /// Size in bytes of a file, or `None` when there is none.
    fn size(&self, key: &str) -> Result<Option<u64>>;

    /// One byte range of one file (a batch of one).
    fn read_range(&self, key: &str, range: ByteRange) -> Result<Option<RangeRead>> {
        let mut out = self.read_ranges(&[RangeRequest::new(key, range)])?;
        Ok(out.pop().flatten())
    }

    /// The URI TileDB would name `key` by (`file:///abs/path` for local
    /// files), where the backend knows one: TileDB writes some lists of
    /// files (group metadata vacuum lists) as absolute URIs.
    fn uri(&self, key: &str) -> Option<String> {
        let _ = key;
        None
    }

    /// Whether each request costs milliseconds (an object store) rather
    /// than microseconds (a local disk): readers then fetch in fewer,
    /// larger batches, and the next while they decode one.
    fn remote(&self) -> bool {
        false
    }

    /// Whether a large batch reads faster as several `read_ranges` calls
    /// at once, one a worker: a local disk's ranges are copies out of the
    /// page cache, CPU work idle workers can share. Object stores run a
    /// batch's requests concurrently themselves; wrappers that record or
    /// fail batches keep each batch one call (their traces stay in order).
    fn parallel_ranges(&self) -> bool {
        false
    }

    /// [`ReadableStorage::read_ranges`] as a future, for async drivers and
    /// for batches fetched ahead while a reader decodes. Backends that do
    /// I/O of their own (object stores) start the batch when called, so
    /// it progresses whether or not the future is polled yet. The default
    /// reads at once, on the caller's thread: right for local disks, where
    /// a batch takes microseconds from the page cache.
    fn read_ranges_async(&self, requests: Vec<RangeRequest>) -> RangesFuture<'_> {
        Box::pin(std::future::ready(self.read_ranges(&requests)))
    }
}

/// The answers to a batch of range requests, to come
/// ([`ReadableStorage::read_ranges_async`]); dropping it abandons them.
pub type RangesFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Vec<Option<RangeRead>>>> + Send + 'a>,
>;

/// A directory's listing, to come ([`ListableStorage::list_dir_async`]).
pub type ListFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Listing>> + Send + 'a>>;

/// Waits on `future` from synchronous code: the calling thread sleeps
/// until the future's waker wakes it. For futures whose work runs
/// elsewhere (an I/O runtime's threads), as [`ReadableStorage::read_ranges_async`]'s do.
pub fn wait<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        // A wake between the poll and the park leaves the token set: the
        // park returns at once (parks may also return spuriously; the
        // loop polls again either way).
        std::thread::park();
    }
}

/// Lists directories (key prefixes).
pub trait ListableStorage: Send + Sync + std::fmt::Debug {
    /// The immediate children of `dir`. A directory that does not exist
    /// lists as empty, as a prefix with no objects does on object stores.
    fn list_dir(&self, dir: &str) -> Result<Listing>;

    /// [`ListableStorage::list_dir`] as a future, for async drivers (of an
    /// opening, say). As with [`ReadableStorage::read_ranges_async`], the
    /// default lists at once, on the caller's thread.
    fn list_dir_async(&self, dir: &str) -> ListFuture<'_> {
        Box::pin(std::future::ready(self.list_dir(dir)))
    }

    /// Every file below `dir`, at any depth, sorted by key.
    fn list_prefix(&self, dir: &str) -> Result<Vec<ObjectMeta>> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_owned()];
        while let Some(d) = stack.pop() {
            let listing = self.list_dir(&d)?;
            out.extend(listing.files);
            stack.extend(listing.dirs);
        }
        out.sort();
        Ok(out)
    }
}

/// Writes and deletes whole objects.
pub trait WritableStorage: Send + Sync + std::fmt::Debug {
    /// Writes a whole file, replacing any old one. Readers see the old
    /// bytes or the new ones, never a mix, and never a half-written file.
    fn write(&self, key: &str, data: Bytes) -> Result<()>;

    /// Writes a whole file that must not exist yet:
    /// [`StorageError::AlreadyExists`] when it does, and then nothing is
    /// written. Of two writers creating one key exactly one wins (an object
    /// store's conditional put), so names that can collide (array and
    /// group creation, schemas, commits) never replace another's file.
    fn create(&self, key: &str, data: Bytes) -> Result<()>;

    /// Starts writing a whole file from consecutive parts (an object
    /// store's multipart upload), so a large data file need not sit whole
    /// in memory and several files can fill side by side. Nothing is
    /// visible until [`Upload::finish`]; an upload dropped unfinished
    /// leaves no file and the old one, if any, untouched.
    fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>>;

    /// Writes a whole file from the parts an iterator yields, through
    /// [`WritableStorage::upload`]; an error from `parts` aborts the write
    /// and leaves no file.
    fn write_stream(
        &self,
        key: &str,
        parts: &mut dyn Iterator<Item = Result<Bytes>>,
    ) -> Result<()> {
        let mut upload = self.upload(key)?;
        for part in parts {
            upload.put(part?)?;
        }
        upload.finish()
    }

    /// Deletes a file; a missing one is not an error (as on object stores).
    fn delete(&self, key: &str) -> Result<()>;

    /// Deletes every file below `dir`.
    fn delete_prefix(&self, dir: &str) -> Result<()>;

    /// Removes what uploads left in `dir` (not below) when the process
    /// writing them stopped before finishing: bytes under no object's name,
    /// which no listing shows and so nothing else can remove, last changed
    /// before `before_ms` (ms since the Unix epoch; later ones may be
    /// uploads still going on). Returns their keys. Backends whose
    /// unfinished uploads leave nothing in `dir` (memory; object stores,
    /// whose unfinished multipart uploads a bucket's lifecycle rule aborts)
    /// remove nothing.
    fn remove_abandoned_uploads(&self, dir: &str, before_ms: u64) -> Result<Vec<String>> {
        let _ = (dir, before_ms);
        Ok(Vec::new())
    }
}

/// One file being written part by part ([`WritableStorage::upload`]).
pub trait Upload: Send {
    /// Appends the next part.
    fn put(&mut self, part: Bytes) -> Result<()>;

    /// Makes the file visible, whole, with every part put.
    fn finish(self: Box<Self>) -> Result<()>;
}

// A borrowed or shared backend is a backend: one storage serves many arrays
// and groups (a group's members) without being cloned, and an
// `Arc<dyn Storage>` chosen at run time (by URI) serves like any other.
macro_rules! forward_storage {
    ($t:ty) => {
        impl<T: ReadableStorage + ?Sized> ReadableStorage for $t {
            fn read(&self, key: &str) -> Result<Option<Bytes>> {
                (**self).read(key)
            }

            fn read_ranges(&self, requests: &[RangeRequest]) -> Result<Vec<Option<RangeRead>>> {
                (**self).read_ranges(requests)
            }

            fn size(&self, key: &str) -> Result<Option<u64>> {
                (**self).size(key)
            }

            fn read_range(&self, key: &str, range: ByteRange) -> Result<Option<RangeRead>> {
                (**self).read_range(key, range)
            }

            fn uri(&self, key: &str) -> Option<String> {
                (**self).uri(key)
            }

            fn remote(&self) -> bool {
                (**self).remote()
            }

            fn parallel_ranges(&self) -> bool {
                (**self).parallel_ranges()
            }

            fn read_ranges_async(&self, requests: Vec<RangeRequest>) -> RangesFuture<'_> {
                (**self).read_ranges_async(requests)
            }
        }

        impl<T: ListableStorage + ?Sized> ListableStorage for $t {
            fn list_dir(&self, dir: &str) -> Result<Listing> {
                (**self).list_dir(dir)
            }

            fn list_dir_async(&self, dir: &str) -> ListFuture<'_> {
                (**self).list_dir_async(dir)
            }

            fn list_prefix(&self, dir: &str) -> Result<Vec<ObjectMeta>> {
                (**self).list_prefix(dir)
            }
        }

        impl<T: WritableStorage + ?Sized> WritableStorage for $t {
            fn write(&self, key: &str, data: Bytes) -> Result<()> {
                (**self).write(key, data)
            }

            fn create(&self, key: &str, data: Bytes) -> Result<()> {
                (**self).create(key, data)
            }

            fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
                (**self).upload(key)
            }

            fn write_stream(
                &self,
                key: &str,
                parts: &mut dyn Iterator<Item = Result<Bytes>>,
            ) -> Result<()> {
                (**self).write_stream(key, parts)
            }

            fn delete(&self, key: &str) -> Result<()> {
                (**self).delete(key)
            }

            fn delete_prefix(&self, dir: &str) -> Result<()> {
                (**self).delete_prefix(dir)
            }

            fn remove_abandoned_uploads(&self, dir: &str, before_ms: u64) -> Result<Vec<String>> {
                (**self).remove_abandoned_uploads(dir, before_ms)
            }
        }
    };
}

forward_storage!(&T);
forward_storage!(std::sync::Arc<T>);
forward_storage!(Box<T>);

/// A backend that reads, lists and writes.
pub trait Storage: ReadableStorage + ListableStorage + WritableStorage {}

impl<T: ReadableStorage + ListableStorage + WritableStorage + ?Sized> Storage for T {}

/// Joins two keys with `/`, treating `""` as the root.
pub fn join(dir: &str, name: &str) -> String {
    match (dir.is_empty(), name.is_empty()) {
        (true, _) => name.to_owned(),
        (_, true) => dir.to_owned(),
        _ => format!("{}/{}", dir.trim_end_matches('/'), name),
    }
}

/// The last component of a key.
pub fn last_component(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}
