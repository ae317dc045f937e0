//! Counts of the requests an [`crate::ObjectStorage`] sends, the number an
//! object store bills and whose latency a read pays. Counted where tdb
//! asks object_store for them: a retry, or a listing that takes several
//! pages, counts once.

use async_trait::async_trait;
use futures_util::stream::{BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, UploadPart,
};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Requests sent so far, by kind, and the bytes they moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestStats {
    /// GETs (whole objects and ranges).
    pub gets: u64,
    /// HEADs (sizes).
    pub heads: u64,
    /// Listings.
    pub lists: u64,
    /// PUTs: whole objects, and a multipart upload's start and completion.
    pub puts: u64,
    /// Parts of multipart uploads.
    pub parts: u64,
    /// Deletes (one per object, or one per batch of a prefix).
    pub deletes: u64,
    /// Bytes the GETs returned.
    pub bytes_read: u64,
    /// Bytes the PUTs and parts sent.
    pub bytes_written: u64,
}

impl RequestStats {
    /// Every request, whatever its kind.
    pub fn requests(&self) -> u64 {
        self.gets + self.heads + self.lists + self.puts + self.parts + self.deletes
    }
}

impl fmt::Display for RequestStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} GET ({} B), {} HEAD, {} LIST, {} PUT, {} part ({} B), {} DELETE",
            self.gets,
            self.bytes_read,
            self.heads,
            self.lists,
            self.puts,
            self.parts,
            self.bytes_written,
            self.deletes
        )
    }
}

/// The live counters, shared by clones of one storage.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    gets: AtomicU64,
    heads: AtomicU64,
    lists: AtomicU64,
    puts: AtomicU64,
    parts: AtomicU64,
    deletes: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

/// What one request was.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sent {
    Get(u64),
    Head,
    List,
    Put(u64),
    Part(u64),
    Delete,
}

impl Counters {
    pub(crate) fn count(&self, sent: Sent) {
        let add = |c: &AtomicU64, n: u64| {
            c.fetch_add(n, Ordering::Relaxed);
        };
        match sent {
            Sent::Get(bytes) => {
                add(&self.gets, 1);
                add(&self.bytes_read, bytes);
            }
            Sent::Head => add(&self.heads, 1),
            Sent::List => add(&self.lists, 1),
            Sent::Put(bytes) => {
                add(&self.puts, 1);
                add(&self.bytes_written, bytes);
            }
            Sent::Part(bytes) => {
                add(&self.parts, 1);
                add(&self.bytes_written, bytes);
            }
            Sent::Delete => add(&self.deletes, 1),
        }
    }

    /// The counts so far; `reset` starts them again from zero.
    pub(crate) fn take(&self, reset: bool) -> RequestStats {
        let get = |c: &AtomicU64| {
            if reset {
                c.swap(0, Ordering::Relaxed)
            } else {
                c.load(Ordering::Relaxed)
            }
        };
        RequestStats {
            gets: get(&self.gets),
            heads: get(&self.heads),
            lists: get(&self.lists),
            puts: get(&self.puts),
            parts: get(&self.parts),
            deletes: get(&self.deletes),
            bytes_read: get(&self.bytes_read),
            bytes_written: get(&self.bytes_written),
        }
    }
}

/// An object store whose requests are counted.
#[derive(Debug)]
pub(crate) struct CountingStore {
    pub(crate) inner: Arc<dyn ObjectStore>,
    pub(crate) counters: Arc<Counters>,
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.counters
            .count(Sent::Put(payload.content_length() as u64));
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.counters.count(Sent::Put(0));
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(CountingUpload {
            inner,
            counters: self.counters.clone(),
        }))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let head = options.head;
        let got = self.inner.get_opts(location, options).await;
        self.counters.count(match (&got, head) {
            (_, true) => Sent::Head,
            (Ok(r), false) => Sent::Get(r.range.end - r.range.start),
            (Err(_), false) => Sent::Get(0),
        });
        got
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let counters = self.counters.clone();
        self.inner
            .delete_stream(locations)
            .inspect(move |_| counters.count(Sent::Delete))
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.counters.count(Sent::List);
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.counters.count(Sent::List);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.counters.count(Sent::Put(0));
        self.inner.copy_opts(from, to, options).await
    }
}

/// A multipart upload whose parts are counted.
#[derive(Debug)]
struct CountingUpload {
    inner: Box<dyn MultipartUpload>,
    counters: Arc<Counters>,
}

#[async_trait]
impl MultipartUpload for CountingUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.counters
            .count(Sent::Part(data.content_length() as u64));
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        self.counters.count(Sent::Put(0));
        self.inner.complete().await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.counters.count(Sent::Delete);
        self.inner.abort().await
    }
}
