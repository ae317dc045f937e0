//! The one error type of this crate.

use thiserror::Error;

/// A filter or pipeline failure.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum FilterError {
    /// A primitive field could not be read or written.
    #[error(transparent)]
    Format(#[from] tdb_format::FormatError),
    /// A filter's serialized options do not fit its type.
    #[error("filter {filter} (#{index} in its pipeline): {reason}")]
    BadOptions {
        /// The filter's type name.
        filter: &'static str,
        /// Its position in the pipeline.
        index: usize,
        /// What is wrong.
        reason: String,
    },
}

/// Shorthand for this crate's results.
pub type Result<T, E = FilterError> = std::result::Result<T, E>;
