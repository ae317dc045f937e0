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
/// `sm.compute_concurrency_level` defaults to the cores): where TileDB's
/// answers depend on them, tdb answers as TileDB does here.
pub(crate) fn tiledb_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
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
