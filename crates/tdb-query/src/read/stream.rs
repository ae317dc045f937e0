//! The async driver: the same reader as a `Stream` of batches. Fetches are
//! the storage's futures ([`tdb_storage::ReadableStorage::read_ranges_async`]), decoding
//! runs on a thread of its own so the executor never waits on it, and on
//! remote storage the next piece is fetched while one is decoded and
//! handed out.

use super::drive::{storage_error, Ahead};
use super::{Decoded, ReadStep, Reader};
use crate::{Batch, QueryError, ReadSpec, Result, Snapshot};
use futures_channel::oneshot;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tdb_fragment::ReadStorage;
use tdb_storage::{RangeRequest, RangesFuture};

/// A read as a [`Stream`](futures_core::Stream) of batches; runs on any
/// executor.
pub struct ReadStream<'a, S: ?Sized> {
    storage: &'a S,
    reader: Reader,
    state: State<'a>,
    ahead: Ahead<'a>,
    finished: bool,
}

enum State<'a> {
    /// Nothing in flight: the reader says what comes next.
    Ready,
    Fetching(Vec<RangeRequest>, RangesFuture<'a>),
    Decoding(oneshot::Receiver<Result<Decoded>>),
}

impl<'a, S: ReadStorage + ?Sized> ReadStream<'a, S> {
    /// Starts `spec` over `snapshot`, fetching from `storage`.
    pub fn new(storage: &'a S, snapshot: Arc<Snapshot>, spec: ReadSpec) -> Result<Self> {
        let mut reader = Reader::new(snapshot, spec)?;
        reader.set_remote(storage.remote());
        Ok(ReadStream {
            storage,
            reader,
            state: State::Ready,
            ahead: Ahead::new(),
            finished: false,
        })
    }

    /// Fetches what the read needs of its fragments' metadata (into the
    /// snapshot's shared cache of sections) and stops before its tiles.
    /// Reads started side by side over one snapshot (a query engine's
    /// partitions) each fetch the sections they miss: one of these first
    /// lets them find the sections loaded.
    pub async fn load_metadata(mut self) -> Result<()> {
        loop {
            let ReadStep::Need(requests) = self.reader.step()? else {
                return Ok(());
            };
            if !self.reader.loading_metadata() {
                return Ok(());
            }
            let got = (self.storage.read_ranges_async(requests.clone()).await)
                .map_err(|source| storage_error(&requests, source))?;
            self.reader.push(requests.into_iter().zip(got))?;
        }
    }

    fn advance(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Batch>>> {
        loop {
            match &mut self.state {
                State::Fetching(requests, pending) => {
                    let got = ready!(pending.as_mut().poll(cx))
                        .map_err(|source| storage_error(requests, source))?;
                    let requests = std::mem::take(requests);
                    self.state = State::Ready;
                    self.reader.push(requests.into_iter().zip(got))?;
                    self.ahead.start(self.storage, &mut self.reader)?;
                }
                State::Decoding(done) => {
                    let decoded = ready!(Pin::new(done).poll(cx)).map_err(|_| {
                        QueryError::invalid("the decoding thread stopped without an answer")
                    })??;
                    self.state = State::Ready;
                    self.reader.push_decoded(decoded)?;
                }
                State::Ready => match self.reader.step()? {
                    ReadStep::Need(requests) => {
                        let pending = match self.ahead.take(&requests) {
                            Some(pending) => pending,
                            None => self.storage.read_ranges_async(requests.clone()),
                        };
                        self.state = State::Fetching(requests, pending);
                    }
                    ReadStep::Decode(work) => {
                        // (Where the piece's bytes were all read on before,
                        // no fetch started the next piece's.)
                        self.ahead.start(self.storage, &mut self.reader)?;
                        let (tx, rx) = oneshot::channel();
                        std::thread::Builder::new()
                            .name("tdb-decode".to_owned())
                            .spawn(move || {
                                // The stream may be gone: nobody to tell.
                                let _ = tx.send(work.run());
                            })
                            .map_err(|e| {
                                QueryError::invalid(format!("cannot start a decoding thread: {e}"))
                            })?;
                        self.state = State::Decoding(rx);
                    }
                    ReadStep::Batch(b) => return Poll::Ready(Ok(Some(b))),
                    ReadStep::Done => return Poll::Ready(Ok(None)),
                },
            }
        }
    }
}

impl<S: ReadStorage + ?Sized> futures_core::Stream for ReadStream<'_, S> {
    type Item = Result<Batch>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Batch>>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(None);
        }
        let r = ready!(this.advance(cx));
        if !matches!(r, Ok(Some(_))) {
            this.finished = true;
        }
        Poll::Ready(r.transpose())
    }
}
