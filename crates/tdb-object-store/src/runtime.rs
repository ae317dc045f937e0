//! The one tokio runtime behind the synchronous storage traits.
//!
//! tdb's storage traits are synchronous; object_store is async. Each call
//! runs its future to completion on a runtime of this crate's, shared by
//! every [`crate::ObjectStorage`] of the process (HTTP connections are
//! pooled per client, and a client's background tasks must outlive any
//! one call).

use std::future::Future;
use std::sync::OnceLock;
use tdb_storage::{Result, StorageError};
use tokio::runtime::{Builder, Runtime};

/// Worker threads: the I/O of a batch is request-bound, not CPU-bound; two
/// workers keep connections served while the caller's thread drives the
/// batch.
const WORKERS: usize = 2;

fn runtime() -> Result<&'static Runtime> {
    static RUNTIME: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .thread_name("tdb-object-store")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| StorageError::Backend {
            uri: String::new(),
            message: format!("cannot start the I/O runtime: {e}"),
            source: None,
        })
}

/// Runs `future` to completion and returns its output, from any thread:
/// inside another tokio runtime (whose threads must not block on
/// ours) it is driven from a scoped thread of its own.
pub(crate) fn block_on<F>(future: F) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let rt = runtime()?;
    Ok(if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| {
            s.spawn(|| rt.block_on(future))
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    } else {
        rt.block_on(future)
    })
}

/// Starts `future` on the runtime without waiting for it.
pub(crate) fn spawn<F>(future: F) -> Result<tokio::task::JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(runtime()?.spawn(future))
}

/// Starts `future` on the runtime at once and gives a future of its
/// output that any executor (tokio's or none) can wait on: what the async
/// storage methods hand out, so their work goes on whether or not the
/// caller polls yet (a read ahead).
pub(crate) fn started<T: Send + 'static>(
    future: impl Future<Output = Result<T>> + Send + 'static,
) -> impl Future<Output = Result<T>> + Send + 'static {
    let task = spawn(future);
    async move {
        match task?.await {
            Ok(out) => out,
            Err(join) => Err(StorageError::Backend {
                uri: String::new(),
                message: "a task on the I/O runtime failed".to_owned(),
                source: Some(Box::new(join)),
            }),
        }
    }
}
