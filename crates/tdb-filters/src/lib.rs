//! TileDB's filters and the serialized filter pipeline.
//!
//! [`FilterPipeline`] is the pipeline as data (parse and byte-exact write for
//! every format version) and runs over one chunk at a time:
//! [`FilterPipeline::reverse_chunk`] turns a chunk's stored metadata and data
//! back into its cells, [`FilterPipeline::forward_chunk`] does what TileDB's
//! writer does. Splitting tiles into chunks is `tdb-tile`'s job.
//!
//! Decoding one stored chunk with this crate alone:
//!
//! ```
//! use tdb_filters::{Filter, FilterPipeline, Stage, Unfiltered, Workspace};
//! use tdb_format::{Datatype, FormatVersion};
//!
//! let pipeline = FilterPipeline::new([
//!     Filter::DoubleDelta { level: -1, reinterpret: None },
//!     Filter::Zstd { level: 3 },
//! ]);
//! let stage = Stage::new(Datatype::Int64, FormatVersion::WRITTEN);
//! let cells: Vec<u8> = (0..1000i64).flat_map(|i| (i * i).to_le_bytes()).collect();
//! // One workspace per thread, for every chunk it filters either way.
//! let (mut ws, mut out) = (Workspace::default(), Unfiltered::default());
//! // What TileDB stores for the chunk: its filters' metadata and data.
//! let (metadata, data) = pipeline.forward_chunk(&stage, &mut ws, cells.clone())?;
//! pipeline.reverse_chunk(&stage, &mut ws, &metadata, &data, &mut out)?;
//! assert_eq!(out.data, cells);
//! # Ok::<(), tdb_filters::FilterError>(())
//! ```

// Bytes from files reach every decoder here: no index, slice or arithmetic
// that could panic or wrap on them (tests index freely). The few kernels
// whose guards bound every index, kept free of checks so they vectorize,
// say why where they allow it.
#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::arithmetic_side_effects)
)]

mod buffer;
mod display;
mod error;
mod filters;
mod pipeline;
mod run;
mod simd;
mod workspace;

pub use buffer::{Parts, Stage, StringOffsets, Unfiltered};
pub use error::{FilterError, Result};
pub use pipeline::{filter_pipeline, Filter, FilterPipeline, DEFAULT_MAX_CHUNK_SIZE};
pub use workspace::{Codecs, Workspace};
