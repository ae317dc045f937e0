//! `tdb cluster scheduler` and `tdb cluster executor`: the processes of a
//! Ballista cluster with tdb's codecs (tdb-cluster), each on a runtime of
//! its own until it stops.

use crate::CliError;
use std::io::Write as _;

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Output(e.to_string()))
}

fn failed(e: tdb_cluster::Error) -> CliError {
    CliError::Usage(e.to_string())
}

/// Runs a scheduler; prints `listening on ADDR` once it listens (what a
/// script started with port 0 reads to learn its port).
pub fn scheduler(options: tdb_cluster::SchedulerOptions) -> Result<(), CliError> {
    runtime()?.block_on(async {
        tdb_cluster::run_scheduler(options, |addr| {
            let mut out = std::io::stdout().lock();
            // A closed stdout must not stop the scheduler.
            let _ = writeln!(out, "listening on {addr}");
            let _ = out.flush();
        })
        .await
        .map_err(failed)
    })
}

/// Runs an executor until the scheduler stops it or it is interrupted.
pub fn executor(options: tdb_cluster::ExecutorOptions) -> Result<(), CliError> {
    runtime()?.block_on(async { tdb_cluster::run_executor(options).await.map_err(failed) })
}
