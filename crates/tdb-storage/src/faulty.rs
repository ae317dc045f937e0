//! A backend wrapper that fails writes from a chosen one on, as if the
//! process stopped there: how tests prove that a crash at any write leaves
//! an array that opens, shows what committed, and loses nothing.

use crate::{
    ListableStorage, Listing, ObjectMeta, RangeRead, RangeRequest, ReadableStorage, Result,
    StorageError, Upload, WritableStorage,
};
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};

/// Passes everything through to `inner` until armed with [`FaultyStorage::fail_from`];
/// from then on the `n`-th mutation (write, streamed write, delete) and every
/// one after it fail with an I/O error and change nothing. Reads and
/// listings always pass, so the state a crash left can be inspected.
#[derive(Debug)]
pub struct FaultyStorage<S> {
    inner: S,
    /// Mutations since arming.
    count: AtomicU64,
    /// The first failing mutation (1-based); `u64::MAX`: never.
    fail_at: AtomicU64,
}

impl<S> FaultyStorage<S> {
    /// Wraps `inner`, not armed.
    pub fn new(inner: S) -> Self {
        FaultyStorage {
            inner,
            count: AtomicU64::new(0),
            fail_at: AtomicU64::new(u64::MAX),
        }
    }

    /// Arms the wrapper: counting restarts, and the `n`-th mutation from now
    /// (1-based) and all later ones fail. `u64::MAX` disarms it.
    pub fn fail_from(&self, n: u64) {
        self.count.store(0, Ordering::SeqCst);
        self.fail_at.store(n, Ordering::SeqCst);
    }

    /// Mutations since the wrapper was last armed (failed ones included).
    pub fn mutations(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn check(&self, key: &str) -> Result<()> {
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= self.fail_at.load(Ordering::SeqCst) {
            return Err(StorageError::Io {
                path: key.to_owned(),
                source: std::io::Error::other(format!("injected fault at mutation {n}")),
            });
        }
        Ok(())
    }
}

impl<S: ReadableStorage> ReadableStorage for FaultyStorage<S> {
    fn read(&self, key: &str) -> Result<Option<Bytes>> {
        self.inner.read(key)
    }

    fn read_ranges(&self, requests: &[RangeRequest]) -> Result<Vec<Option<RangeRead>>> {
        self.inner.read_ranges(requests)
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        self.inner.size(key)
    }

    fn uri(&self, key: &str) -> Option<String> {
        self.inner.uri(key)
    }

    fn remote(&self) -> bool {
        self.inner.remote()
    }

    fn read_ranges_async(&self, requests: Vec<RangeRequest>) -> crate::RangesFuture<'_> {
        self.inner.read_ranges_async(requests)
    }
}

impl<S: ListableStorage> ListableStorage for FaultyStorage<S> {
    fn list_dir(&self, dir: &str) -> Result<Listing> {
        self.inner.list_dir(dir)
    }

    fn list_prefix(&self, dir: &str) -> Result<Vec<ObjectMeta>> {
        self.inner.list_prefix(dir)
    }
}

impl<S: WritableStorage> WritableStorage for FaultyStorage<S> {
    fn write(&self, key: &str, data: Bytes) -> Result<()> {
        self.check(key)?;
        self.inner.write(key, data)
    }

    fn create(&self, key: &str, data: Bytes) -> Result<()> {
        self.check(key)?;
        self.inner.create(key, data)
    }

    /// An upload is one mutation, counted when it finishes: that is when
    /// the file would appear, so a fault there leaves none.
    fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        Ok(Box::new(FaultyUpload {
            storage: self,
            key: key.to_owned(),
            inner: self.inner.upload(key)?,
        }))
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.check(key)?;
        self.inner.delete(key)
    }

    fn delete_prefix(&self, dir: &str) -> Result<()> {
        self.check(dir)?;
        self.inner.delete_prefix(dir)
    }

    fn remove_abandoned_uploads(&self, dir: &str, before_ms: u64) -> Result<Vec<String>> {
        self.check(dir)?;
        self.inner.remove_abandoned_uploads(dir, before_ms)
    }
}

struct FaultyUpload<'a, S> {
    storage: &'a FaultyStorage<S>,
    key: String,
    inner: Box<dyn Upload + 'a>,
}

impl<S: Send + Sync> Upload for FaultyUpload<'_, S> {
    fn put(&mut self, part: Bytes) -> Result<()> {
        self.inner.put(part)
    }

    fn finish(self: Box<Self>) -> Result<()> {
        // A fault drops the inner upload unfinished: no file.
        self.storage.check(&self.key)?;
        self.inner.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStorage;

    #[test]
    fn fails_from_the_armed_mutation_on_and_changes_nothing() {
        let s = FaultyStorage::new(MemoryStorage::new());
        s.write("a", Bytes::from_static(b"1")).unwrap();
        s.fail_from(2);
        s.write("b", Bytes::from_static(b"2")).unwrap();
        assert!(s.write("c", Bytes::from_static(b"3")).is_err());
        assert!(s.delete("a").is_err());
        assert_eq!(s.mutations(), 3);
        assert_eq!(s.read("a").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(s.read("c").unwrap(), None);
        s.fail_from(u64::MAX);
        s.write("c", Bytes::from_static(b"3")).unwrap();
        assert_eq!(s.list_dir("").unwrap().files.len(), 3);
    }
}
