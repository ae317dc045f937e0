//! The read state machine and its synchronous driver.

use crate::{Batch, ReadSpec, Result, Snapshot};
use tdb_fragment::ReadStorage;
use tdb_storage::{RangeRead, RangeRequest};

/// What the reader wants next.
#[derive(Debug)]
pub enum ReadStep {
    /// Fetch these ranges and [`Reader::push`] the answers, in order.
    Need(Vec<RangeRequest>),
    /// The next batch of results.
    Batch(Batch),
    /// Every cell has been returned.
    Done,
}

/// A read in progress: a state machine that does no I/O. Drive it with
/// [`Reader::step`], answering each [`ReadStep::Need`] with
/// [`Reader::push`]; [`SyncRead`] does that over a storage backend.
pub struct Reader<'a> {
    snapshot: &'a Snapshot,
    spec: ReadSpec,
    pending: Option<Vec<RangeRequest>>,
    done: bool,
}

impl<'a> Reader<'a> {
    /// Plans `spec` over `snapshot`: checks fields, subarray and condition
    /// against the schema (typed errors that say what to change) and the
    /// budget against the largest tile the read may need.
    pub fn new(snapshot: &'a Snapshot, spec: ReadSpec) -> Result<Self> {
        Ok(Reader {
            snapshot,
            spec,
            pending: None,
            done: false,
        })
    }

    /// The next thing the reader needs or has.
    pub fn step(&mut self) -> Result<ReadStep> {
        let _ = (&self.snapshot, &self.spec, &self.pending);
        if self.done {
            return Ok(ReadStep::Done);
        }
        self.done = true;
        Err(crate::QueryError::invalid("reads are not implemented yet"))
    }

    /// The answers to the last [`ReadStep::Need`], in its order (`None`
    /// where a file was missing).
    pub fn push(&mut self, reads: Vec<Option<RangeRead>>) -> Result<()> {
        let _ = reads;
        Ok(())
    }
}

/// Drives a [`Reader`] over a storage backend: an iterator of batches.
pub struct SyncRead<'a, S: ?Sized> {
    storage: &'a S,
    reader: Reader<'a>,
    finished: bool,
}

impl<'a, S: ReadStorage + ?Sized> SyncRead<'a, S> {
    /// Starts `spec` over `snapshot`, fetching from `storage`.
    pub fn new(storage: &'a S, snapshot: &'a Snapshot, spec: ReadSpec) -> Result<Self> {
        Ok(SyncRead {
            storage,
            reader: Reader::new(snapshot, spec)?,
            finished: false,
        })
    }

    fn advance(&mut self) -> Result<Option<Batch>> {
        loop {
            match self.reader.step()? {
                ReadStep::Need(requests) => {
                    let got = self.storage.read_ranges(&requests).map_err(|source| {
                        crate::QueryError::Storage {
                            file: requests.first().map_or(String::new(), |r| r.key.clone()),
                            source,
                        }
                    })?;
                    self.reader.push(got)?;
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
