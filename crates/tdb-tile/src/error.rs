//! The one error type of this crate.

use thiserror::Error;

/// A tile could not be read or written.
///
/// Messages say which tile and which step; the underlying error is the
/// [`source`](std::error::Error::source), printed once by whoever prints the
/// chain.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum TileError {
    /// A header or length field could not be read.
    #[error("{location}: tile framing")]
    Format {
        /// Which tile (as the caller named it).
        location: String,
        /// The field-level error.
        source: tdb_format::FormatError,
    },
    /// A tile's serialized filter pipeline is invalid.
    #[error("{location}: filter pipeline")]
    Pipeline {
        /// Which tile (as the caller named it).
        location: String,
        /// What the pipeline parser reported.
        source: tdb_filters::FilterError,
    },
    /// A filter failed on one chunk.
    #[error("{location}, chunk {chunk}: filter")]
    Filter {
        /// Which tile (as the caller named it).
        location: String,
        /// The chunk's index in the tile.
        chunk: u64,
        /// What the filter reported.
        source: tdb_filters::FilterError,
    },
    /// The tile's parts disagree with the cells its fragment metadata
    /// gives it, or with each other.
    #[error("{location}: {reason}")]
    Shape {
        /// Which tile (as the caller named it).
        location: String,
        /// What does not add up.
        reason: String,
    },
    /// The tile's framing does not add up.
    #[error("{location}: {reason}")]
    Corrupt {
        /// Which tile (as the caller named it).
        location: String,
        /// What does not add up.
        reason: String,
    },
    /// A tile too large for TileDB's u32 chunk fields, or other misuse.
    #[error("{location}: {reason}")]
    BadInput {
        /// Which tile (as the caller named it).
        location: String,
        /// What is wrong.
        reason: String,
    },
}

/// Shorthand for this crate's results.
pub type Result<T, E = TileError> = std::result::Result<T, E>;
