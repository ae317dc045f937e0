//! TileDB's filters and the serialized filter pipeline.
//!
//! Today: the pipeline as data ([`FilterPipeline`], [`Filter`]) with its
//! parser and mirror writer for every format version. The filters themselves
//! (forward and reverse over bytes) come next.

mod error;
mod pipeline;

pub use error::{FilterError, Result};
pub use pipeline::{filter_pipeline, Filter, FilterPipeline};
