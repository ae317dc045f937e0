//! A file written part by part: small files go up in one request when they
//! finish, larger ones as a multipart upload whose parts (all but the last
//! `Tuning::part_size` bytes, at least S3's 5 MiB) are sent while the
//! writer goes on, a few at a time. Nothing is visible before `finish`; an
//! upload dropped unfinished is aborted, so the store keeps no parts.

use crate::{runtime, ObjectStorage};
use bytes::Bytes;
use object_store::path::Path;
use object_store::{MultipartUpload, ObjectStoreExt, PutMode, PutPayload};
use std::collections::VecDeque;
use tdb_storage::{Result, StorageError, Upload};
use tokio::task::JoinHandle;

pub(crate) struct PartUpload<'a> {
    storage: &'a ObjectStorage,
    key: String,
    path: Path,
    /// Bytes put but not yet sent, less than a part in all.
    pending: VecDeque<Bytes>,
    pending_len: usize,
    /// The multipart upload, once the first whole part came.
    upload: Option<Box<dyn MultipartUpload>>,
    /// Parts being sent.
    in_flight: Vec<JoinHandle<object_store::Result<()>>>,
    finished: bool,
}

impl<'a> PartUpload<'a> {
    pub(crate) fn new(storage: &'a ObjectStorage, key: &str, path: Path) -> Self {
        PartUpload {
            storage,
            key: key.to_owned(),
            path,
            pending: VecDeque::new(),
            pending_len: 0,
            upload: None,
            in_flight: Vec::new(),
            finished: false,
        }
    }

    fn error(&self, e: object_store::Error) -> StorageError {
        self.storage.error(&self.key, e)
    }

    /// Takes exactly `n` pending bytes (without copying them).
    fn take(&mut self, n: usize) -> PutPayload {
        let mut parts = Vec::new();
        let mut left = n;
        while left > 0 {
            let Some(first) = self.pending.front_mut() else {
                break; // never: `n` is at most what is pending
            };
            if first.len() <= left {
                left -= first.len();
                parts.extend(self.pending.pop_front());
            } else {
                parts.push(first.split_to(left));
                left = 0;
            }
        }
        self.pending_len = self.pending_len.saturating_sub(n);
        parts.into_iter().collect()
    }

    /// Waits for the oldest part in flight.
    fn wait_one(&mut self) -> Result<()> {
        if self.in_flight.is_empty() {
            return Ok(());
        }
        let handle = self.in_flight.remove(0);
        match runtime::block_on(handle)? {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.error(e)),
            Err(join) => Err(StorageError::Backend {
                uri: self.storage.uri_of(&self.key),
                message: "an upload part's task failed".to_owned(),
                source: Some(Box::new(join)),
            }),
        }
    }

    /// Sends one part, starting the multipart upload at the first.
    fn send(&mut self, part: PutPayload) -> Result<()> {
        if self.upload.is_none() {
            let store = &self.storage.store;
            let started =
                runtime::block_on(store.put_multipart(&self.path))?.map_err(|e| self.error(e))?;
            self.upload = Some(started);
        }
        let Some(upload) = self.upload.as_mut() else {
            return Ok(());
        };
        let sending = upload.put_part(part);
        self.in_flight.push(runtime::spawn(sending)?);
        while self.in_flight.len() >= self.storage.tuning.concurrency.max(1) {
            self.wait_one()?;
        }
        Ok(())
    }

    fn finish_inner(&mut self) -> Result<()> {
        if self.upload.is_none() {
            let all = self.take(self.pending_len);
            let store = &self.storage.store;
            let opts = object_store::PutOptions {
                mode: PutMode::Overwrite,
                ..Default::default()
            };
            return runtime::block_on(store.put_opts(&self.path, all, opts))?
                .map(|_| ())
                .map_err(|e| self.error(e));
        }
        if self.pending_len > 0 {
            let rest = self.take(self.pending_len);
            self.send(rest)?;
        }
        while !self.in_flight.is_empty() {
            self.wait_one()?;
        }
        let Some(upload) = self.upload.as_mut() else {
            return Ok(());
        };
        runtime::block_on(upload.complete())?
            .map(|_| ())
            .map_err(|e| self.storage.error(&self.key, e))
    }

    /// Drops what was sent: parts in flight finish or fail, then the
    /// multipart upload is aborted (best effort: an abandoned upload is
    /// invisible to readers, and stores expire them).
    fn abort(&mut self) {
        for handle in std::mem::take(&mut self.in_flight) {
            let _ = runtime::block_on(handle);
        }
        if let Some(mut upload) = self.upload.take() {
            let _ = runtime::block_on(upload.abort());
        }
    }
}

impl Upload for PartUpload<'_> {
    fn put(&mut self, part: Bytes) -> Result<()> {
        if self.finished {
            return Err(StorageError::wrong_kind(
                &self.key,
                "upload already finished",
            ));
        }
        if part.is_empty() {
            return Ok(());
        }
        self.pending_len += part.len();
        self.pending.push_back(part);
        let size = self.storage.tuning.part_size.max(crate::MIN_PART_SIZE);
        while self.pending_len >= size {
            let p = self.take(size);
            if let Err(e) = self.send(p) {
                self.abort();
                self.finished = true;
                return Err(e);
            }
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        if self.finished {
            return Err(StorageError::wrong_kind(
                &self.key,
                "upload already finished",
            ));
        }
        self.finished = true;
        let done = self.finish_inner();
        if done.is_err() {
            self.abort();
        }
        done
    }
}

impl Drop for PartUpload<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.abort();
        }
    }
}
