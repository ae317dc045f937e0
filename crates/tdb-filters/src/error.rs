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
    /// Filtered bytes that this filter cannot have written: truncated,
    /// altered, or inconsistent with their metadata.
    #[error("filter {filter}: corrupt input: {reason}")]
    Corrupt {
        /// The filter's type name.
        filter: &'static str,
        /// What does not add up.
        reason: String,
    },
    /// A stored checksum differs from the checksum of the bytes.
    #[error("filter {filter}: checksum mismatch (stored {stored}, computed {computed})")]
    ChecksumMismatch {
        /// The filter's type name.
        filter: &'static str,
        /// The stored digest, hex.
        stored: String,
        /// The digest of the bytes read, hex.
        computed: String,
    },
    /// The encrypted bytes do not authenticate: the key is wrong or the
    /// bytes were altered.
    #[error("AES-256-GCM: authentication failed (wrong key or altered bytes)")]
    Authentication,
    /// Encrypted bytes met without a key.
    #[error("AES-256-GCM: the tile is encrypted and no key was given")]
    MissingKey,
    /// Input this filter does not take (forward), e.g. a datatype TileDB
    /// rejects for it.
    #[error("filter {filter}: {reason}")]
    BadInput {
        /// The filter's type name.
        filter: &'static str,
        /// What is wrong with the input.
        reason: String,
    },
    /// A filter tdb does not implement in this direction.
    #[error("filter {filter} is not supported: {reason}")]
    Unsupported {
        /// The filter's type name.
        filter: &'static str,
        /// Why, and what to do.
        reason: String,
    },
}

impl FilterError {
    /// A [`FilterError::Corrupt`].
    pub fn corrupt(filter: &'static str, reason: impl Into<String>) -> Self {
        FilterError::Corrupt {
            filter,
            reason: reason.into(),
        }
    }

    /// A [`FilterError::BadInput`].
    pub fn bad_input(filter: &'static str, reason: impl Into<String>) -> Self {
        FilterError::BadInput {
            filter,
            reason: reason.into(),
        }
    }

    /// A [`FilterError::Unsupported`].
    pub fn unsupported(filter: &'static str, reason: impl Into<String>) -> Self {
        FilterError::Unsupported {
            filter,
            reason: reason.into(),
        }
    }
}

/// Shorthand for this crate's results.
pub type Result<T, E = FilterError> = std::result::Result<T, E>;
