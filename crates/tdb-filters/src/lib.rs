//! TileDB's filters and the serialized filter pipeline.
//!
//! [`FilterPipeline`] is the pipeline as data (parse and byte-exact write for
//! every format version) and runs over one chunk at a time:
//! [`FilterPipeline::reverse_chunk`] turns a chunk's stored metadata and data
//! back into its cells, [`FilterPipeline::forward_chunk`] does what TileDB's
//! writer does. Splitting tiles into chunks is `tdb-tile`'s job.

mod buffer;
mod error;
mod filters;
mod pipeline;
mod run;

pub use run::DEFAULT_MAX_CHUNK_SIZE;

pub use buffer::{MetaReader, Parts, Stage, StringOffsets, Unfiltered};
pub use error::{FilterError, Result};
pub use pipeline::{filter_pipeline, Filter, FilterPipeline};
