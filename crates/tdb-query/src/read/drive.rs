//! The synchronous driver: a reader's needs answered from a storage
//! backend, its decoding run on the calling thread (over the bounded pool),
//! its batches an iterator.

use super::{ReadStep, Reader};
use crate::{Batch, QueryError, ReadSpec, Result, Snapshot};
use std::sync::Arc;
use tdb_fragment::ReadStorage;
use tdb_storage::{RangeRead, RangeRequest, RangesFuture};

/// One batch of requests from `storage`.
fn fetch<S: ReadStorage + ?Sized>(
    storage: &S,
    requests: &[RangeRequest],
) -> Result<Vec<Option<RangeRead>>> {
    storage
        .read_ranges(requests)
        .map_err(|source| storage_error(requests, source))
}

/// A failed batch, named by its first file.
pub(super) fn storage_error(
    requests: &[RangeRequest],
    source: tdb_storage::StorageError,
) -> QueryError {
    QueryError::Storage {
        file: requests.first().map_or(String::new(), |r| r.key.clone()),
        source,
    }
}

/// Drives a [`Reader`] over a storage backend: an iterator of batches.
/// Over remote storage it fetches the next piece's tiles while the
/// current piece is decoded and handed out ([`Reader::plan_ahead`],
/// [`ReadableStorage::read_ranges_async`](tdb_storage::ReadableStorage::read_ranges_async)).
pub struct SyncRead<'a, S: ?Sized> {
    fetcher: Fetcher<'a, S>,
    reader: Reader,
    finished: bool,
}

/// The next piece's batch, fetched ahead on remote storage while a piece
/// is decoded and handed out: what both drivers keep between needs.
pub(super) struct Ahead<'a> {
    pending: Option<(Vec<RangeRequest>, RangesFuture<'a>)>,
}

impl<'a> Ahead<'a> {
    pub(super) fn new() -> Self {
        Ahead { pending: None }
    }

    /// The answers to `requests`, if they are what was fetched ahead
    /// (by `plan_ahead`'s promise they are; otherwise those answers go
    /// unused).
    pub(super) fn take(&mut self, requests: &[RangeRequest]) -> Option<RangesFuture<'a>> {
        match self.pending.take() {
            Some((asked, pending)) if asked == requests => Some(pending),
            _ => None,
        }
    }

    /// On remote storage, after a piece's bytes are in: plans the reader's
    /// next piece and starts fetching it, so its I/O overlaps this
    /// piece's decoding.
    pub(super) fn start<S: ReadStorage + ?Sized>(
        &mut self,
        storage: &'a S,
        reader: &mut Reader,
    ) -> Result<()> {
        if !storage.remote() || self.pending.is_some() {
            return Ok(());
        }
        if let Some(next) = reader.plan_ahead()? {
            let pending = storage.read_ranges_async(next.clone());
            self.pending = Some((next, pending));
        }
        Ok(())
    }
}

/// How a synchronous driver answers a reader's needs: from storage, or
/// from the batch it started fetching ahead (remote storage).
pub(crate) struct Fetcher<'a, S: ?Sized> {
    storage: &'a S,
    ahead: Ahead<'a>,
}

impl<'a, S: ReadStorage + ?Sized> Fetcher<'a, S> {
    pub(crate) fn new(storage: &'a S) -> Self {
        Fetcher {
            storage,
            ahead: Ahead::new(),
        }
    }

    /// Fetches `requests` and pushes the answers into `reader`, then starts
    /// fetching the next piece ([`Ahead::start`]).
    pub(crate) fn serve(&mut self, reader: &mut Reader, requests: Vec<RangeRequest>) -> Result<()> {
        let got = match self.ahead.take(&requests) {
            Some(pending) => {
                tdb_storage::wait(pending).map_err(|source| storage_error(&requests, source))?
            }
            None => fetch(self.storage, &requests)?,
        };
        reader.push(requests.into_iter().zip(got))?;
        self.ahead.start(self.storage, reader)
    }
}

impl<'a, S: ReadStorage + ?Sized> SyncRead<'a, S> {
    /// Starts `spec` over `snapshot`, fetching from `storage`.
    /// Label ranges are turned into index ranges first (reads of the
    /// labels' arrays, see [`crate::label`]).
    pub fn new(storage: &'a S, snapshot: Arc<Snapshot>, spec: ReadSpec) -> Result<Self> {
        let spec = crate::label::resolve_spec(storage, &snapshot, spec)?;
        let mut reader = Reader::new(snapshot, spec)?;
        reader.set_remote(storage.remote());
        Ok(SyncRead {
            fetcher: Fetcher::new(storage),
            reader,
            finished: false,
        })
    }

    /// The next batch, written into `batch`'s buffers (a batch of this
    /// read or an earlier one, of the same fields): a scan over many
    /// batches, or many reads, writes memory it touched before instead of
    /// fresh pages. `Some(Ok(()))` with `batch` holding the next batch;
    /// `None` at the end, `batch` then emptied with its buffers kept for
    /// the next read.
    pub fn next_into(&mut self, batch: &mut Batch) -> Option<Result<()>> {
        self.recycle(std::mem::take(batch));
        let next = self.next();
        self.settle(batch, next)
    }

    /// Hands a batch the caller is done with to the read, whose next batch
    /// is written into its buffers ([`Reader::recycle`]).
    pub fn recycle(&mut self, batch: Batch) {
        self.reader.recycle(batch);
    }

    /// Puts `next` (what the read gave after [`SyncRead::recycle`]) into
    /// `batch`, or where there is no batch the recycled buffers back, as
    /// [`SyncRead::next_into`] does.
    pub fn settle<E>(
        &mut self,
        batch: &mut Batch,
        next: Option<std::result::Result<Batch, E>>,
    ) -> Option<std::result::Result<(), E>> {
        match next {
            Some(Ok(b)) => {
                *batch = b;
                Some(Ok(()))
            }
            other => {
                *batch = self.reader.take_recycled();
                other.map(|r| r.map(|_| ()))
            }
        }
    }

    fn advance(&mut self) -> Result<Option<Batch>> {
        loop {
            match self.reader.step()? {
                ReadStep::Need(requests) => self.fetcher.serve(&mut self.reader, requests)?,
                ReadStep::Decode(work) => self.reader.push_decoded(work.run()?)?,
                ReadStep::Batch(b) => return Ok(Some(b)),
                ReadStep::Done => return Ok(None),
            }
        }
    }
}

impl<S: ReadStorage + ?Sized> Iterator for SyncRead<'_, S> {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let r = self.advance();
        if !matches!(r, Ok(Some(_))) {
            self.finished = true;
        }
        r.transpose()
    }
}
