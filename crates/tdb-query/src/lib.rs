//! Read queries over TileDB arrays.
//!
//! A read is planned (which fragments, tiles and byte ranges), fetched (one
//! `read_ranges` batch at a time, bytes in flight capped by the budget),
//! decoded (tiles unfiltered on a bounded pool) and copied into result
//! buffers, batch by batch. Parsing and decoding do no I/O: the reader is a
//! state machine that says which byte ranges it needs next
//! ([`ReadStep::Need`]) and hands out its decoding as work to run
//! ([`ReadStep::Decode`]), so one reader serves local files and object
//! stores, driven synchronously ([`SyncRead`]) or as a stream
//! ([`ReadStream`]).

#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::arithmetic_side_effects)
)]

pub mod aggregate;
mod batch;
mod column;
pub mod condition;
mod consolidate;
mod dim_range;
mod error;
pub mod label;
mod pool;
mod read;
mod scratch;
mod snapshot;
mod spec;
mod summary;
mod validity;
pub mod write;

pub use aggregate::{AggregateOp, AggregateResult, AggregateValue};
pub use batch::{Batch, FieldBuffer};
pub use column::{Column, Columns, VAR_NUM};
pub use consolidate::{
    consolidate_fragment_list, consolidate_fragments, dense_merge_specs, next_consolidation,
    FragmentConsolidation, FragmentSelection,
};
pub use dim_range::{DimRange, DimValue};
pub use error::{QueryError, Result};
pub use read::{
    aggregate, split_for_parallel, stored_out_of_order, AggregateStep, Aggregation, DecodeWork,
    Decoded, ReadStep, ReadStream, Reader, SyncRead,
};
pub use snapshot::Snapshot;
pub use spec::{ReadSpec, ResultLayout, Subarray, DEFAULT_BUDGET};
pub use summary::{attribute_bounds, AttributeBounds};
pub use validity::{Bitmap, Validity, ValidityRef};
pub use write::{delete_cells, write_fragment, WriteSpec, Written};

/// The compute threads TileDB would run on this machine (its
/// `sm.compute_concurrency_level` defaults to C++'s
/// `hardware_concurrency()`, on Linux the processors online, whatever the
/// process's CPU quota or affinity): where TileDB's answers depend on
/// them, tdb answers as TileDB does here. Elsewhere the cores the process
/// may use.
pub(crate) fn tiledb_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|list| cpus_in_list(&list))
            .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
            .unwrap_or(1)
    })
}

/// The CPUs a kernel CPU list names (`0-3,5,7-8`), `None` if malformed.
fn cpus_in_list(list: &str) -> Option<usize> {
    let mut n = 0usize;
    for part in list.trim().split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let (lo, hi): (usize, usize) = (lo.parse().ok()?, hi.parse().ok()?);
        n = n.checked_add(hi.checked_sub(lo)?.checked_add(1)?)?;
    }
    (n > 0).then_some(n)
}

/// Worker threads for decoding and filtering tiles: one per core, at most
/// 8. Asked once per process: the standard library reads the cgroup files
/// on every call.
pub(crate) fn threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_lists_count_their_cpus() {
        assert_eq!(super::cpus_in_list("0-1\n"), Some(2));
        assert_eq!(super::cpus_in_list("0-3,5,7-8"), Some(7));
        assert_eq!(super::cpus_in_list("0"), Some(1));
        assert_eq!(super::cpus_in_list("3-1"), None);
        assert_eq!(super::cpus_in_list(""), None);
    }
}
