//! The synchronous driver: a reader's needs answered from a storage
//! backend, its decoding run on the calling thread (over the bounded pool),
//! its batches an iterator.

use super::{ReadStep, Reader};
use crate::{Batch, QueryError, ReadSpec, Result, Snapshot};
use std::sync::Arc;
use tdb_fragment::ReadStorage;
use tdb_storage::{ByteRange, RangeRead, RangeRequest, RangesFuture};

/// One batch of requests from `storage`.
///
/// Where the storage reads ranges on the CPU ([`ReadableStorage::parallel_ranges`]:
/// local files) a batch of many ranges and enough bytes is read in groups on
/// the pool, whose workers would otherwise wait for the decode (W3's 16
/// boxes, 9–12 tiles a piece: 57 → 51 ms). Few ranges (fewer than two a
/// group: a whole read's coalesced runs, or the four tiles of a small
/// dense slice, which took longer on the pool than on one thread: W2's 64
/// slices 16.7 → 19.4 ms) and few bytes (footers and metadata sections,
/// where two threads opening files contend) are read in one call.
///
/// [`ReadableStorage::parallel_ranges`]: tdb_storage::ReadableStorage::parallel_ranges
fn fetch<S: ReadStorage + ?Sized>(
    storage: &S,
    requests: &[RangeRequest],
) -> Result<Vec<Option<RangeRead>>> {
    let read = |group: &[RangeRequest]| {
        storage
            .read_ranges(group)
            .map_err(|source| storage_error(group, source))
    };
    let threads = crate::threads();
    let groups = threads.saturating_mul(2);
    if !storage.parallel_ranges() || threads < 2 || requests.len() < groups.saturating_mul(2) {
        return read(requests);
    }
    if total_bytes(requests) < crate::pool::SMALL_WORK as u64 {
        return read(requests);
    }
    let cuts = byte_groups(requests, groups);
    let got = crate::pool::map_all(&cuts, threads, || (), |_, group| read(group))?;
    Ok(got.into_iter().flatten().collect())
}

/// The bytes a request asks for (0 for a suffix or whole file: unknown).
fn request_bytes(r: &RangeRequest) -> u64 {
    match r.range {
        ByteRange::Bounded { len, .. } => len,
        ByteRange::Suffix(_) | ByteRange::Whole => 0,
    }
}

/// The bytes `requests` ask for, as far as they say.
fn total_bytes(requests: &[RangeRequest]) -> u64 {
    requests
        .iter()
        .map(request_bytes)
        .fold(0u64, u64::saturating_add)
}

/// `requests` in at most `n` runs of adjacent requests (a file's ranges
/// stay together), cut where the running total of bytes passes each
/// `n`th of the whole: a few a worker, so that one slow run does not hold
/// up the rest.
fn byte_groups(requests: &[RangeRequest], n: usize) -> Vec<&[RangeRequest]> {
    let total = total_bytes(requests);
    let share = total.checked_div(n as u64).unwrap_or(total);
    let mut groups: Vec<&[RangeRequest]> = Vec::with_capacity(n);
    let (mut start, mut sum) = (0usize, 0u64);
    for (i, r) in requests.iter().enumerate() {
        sum = sum.saturating_add(request_bytes(r));
        let due = share.saturating_mul((groups.len() as u64).saturating_add(1));
        if sum >= due && groups.len().saturating_add(1) < n {
            groups.push(requests.get(start..=i).unwrap_or_default());
            start = i.saturating_add(1);
        }
    }
    if let Some(rest) = requests.get(start..).filter(|r| !r.is_empty()) {
        groups.push(rest);
    }
    groups
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

    /// Before a piece is decoded: starts fetching the next piece, where no
    /// fetch did (the piece's bytes were all read on before).
    pub(crate) fn decoding(&mut self, reader: &mut Reader) -> Result<()> {
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
                ReadStep::Decode(work) => {
                    self.fetcher.decoding(&mut self.reader)?;
                    self.reader.push_decoded(work.run()?)?;
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tdb_storage::{Listing, MemoryStorage, ReadableStorage, WritableStorage};

    /// Memory storage that says whether it reads ranges in parallel, and
    /// records each `read_ranges` call's request count.
    #[derive(Debug)]
    struct Counted {
        inner: MemoryStorage,
        parallel: bool,
        calls: Mutex<Vec<usize>>,
    }

    impl ReadableStorage for Counted {
        fn read(&self, key: &str) -> tdb_storage::Result<Option<bytes::Bytes>> {
            self.inner.read(key)
        }
        fn read_ranges(
            &self,
            requests: &[RangeRequest],
        ) -> tdb_storage::Result<Vec<Option<RangeRead>>> {
            self.calls.lock().unwrap().push(requests.len());
            self.inner.read_ranges(requests)
        }
        fn size(&self, key: &str) -> tdb_storage::Result<Option<u64>> {
            self.inner.size(key)
        }
        fn parallel_ranges(&self) -> bool {
            self.parallel
        }
    }

    impl tdb_storage::ListableStorage for Counted {
        fn list_dir(&self, dir: &str) -> tdb_storage::Result<Listing> {
            self.inner.list_dir(dir)
        }
    }

    fn storage(parallel: bool) -> Counted {
        let inner = MemoryStorage::new();
        let data: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
        inner.write("f", data.into()).unwrap();
        Counted {
            inner,
            parallel,
            calls: Mutex::new(Vec::new()),
        }
    }

    /// `n` requests of `len` bytes from spots scattered over the file's
    /// first half.
    fn requests(n: u64, len: u64) -> Vec<RangeRequest> {
        (0..n)
            .map(|i| RangeRequest::new("f", ByteRange::new((i * 7919) % (1 << 19), len)))
            .collect()
    }

    fn check(got: &[Option<RangeRead>], asked: &[RangeRequest]) {
        assert_eq!(got.len(), asked.len());
        for (g, r) in got.iter().zip(asked) {
            let ByteRange::Bounded { offset, len } = r.range else {
                unreachable!()
            };
            let want: Vec<u8> = (offset..offset + len).map(|i| (i % 251) as u8).collect();
            assert_eq!(g.as_ref().unwrap().bytes.as_ref(), &want[..], "{r:?}");
        }
    }

    #[test]
    fn large_batches_are_read_in_groups_where_ranges_cost_cpu() {
        let threads = crate::threads();
        let asked = requests(16, 64 << 10);
        // Ranges read on the CPU: in groups (with workers to share them),
        // answers in the order asked.
        let s = storage(true);
        check(&fetch(&s, &asked).unwrap(), &asked);
        let calls = s.calls.lock().unwrap().clone();
        assert_eq!(calls.iter().sum::<usize>(), 16);
        if threads > 1 {
            assert_eq!(calls.len(), 2 * threads, "{calls:?}");
        } else {
            assert_eq!(calls, [16]);
        }
        // A store that reads concurrently itself (or records its batches):
        // one call.
        let s = storage(false);
        check(&fetch(&s, &asked).unwrap(), &asked);
        assert_eq!(*s.calls.lock().unwrap(), [16]);
        // Few bytes, or few ranges: one call.
        for asked in [requests(16, 1 << 10), requests(3, 256 << 10)] {
            let s = storage(true);
            check(&fetch(&s, &asked).unwrap(), &asked);
            assert_eq!(*s.calls.lock().unwrap(), [asked.len()]);
        }
    }

    #[test]
    fn groups_are_adjacent_runs_of_about_equal_bytes() {
        let sized = |lens: &[u64]| -> Vec<RangeRequest> {
            lens.iter()
                .map(|&l| RangeRequest::new("f", ByteRange::new(0, l)))
                .collect()
        };
        let lens = |g: &[&[RangeRequest]]| -> Vec<Vec<u64>> {
            g.iter()
                .map(|g| g.iter().map(request_bytes).collect())
                .collect()
        };
        let r = sized(&[10; 8]);
        assert_eq!(lens(&byte_groups(&r, 4)), vec![vec![10, 10]; 4]);
        // Cuts fall where the running total passes each share (206 / 4:
        // 51, 102, 153).
        let r = sized(&[100, 1, 1, 1, 100, 1, 1, 1]);
        assert_eq!(
            lens(&byte_groups(&r, 4)),
            [vec![100], vec![1, 1], vec![1, 100], vec![1, 1, 1]]
        );
        // Never more groups than asked, nothing lost, order kept.
        for n in 1..6 {
            let r = sized(&[5, 0, 7, 300, 2, 2, 9, 0, 1]);
            let g = byte_groups(&r, n);
            assert!(g.len() <= n && !g.iter().any(|g| g.is_empty()));
            assert_eq!(g.concat(), r);
        }
        assert!(byte_groups(&[], 4).is_empty());
    }
}
