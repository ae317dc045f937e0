//! The one error type of this crate.

use thiserror::Error;

/// A storage failure, always naming the key involved.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StorageError {
    /// No file or directory at the key.
    #[error("{path}: not found")]
    NotFound {
        /// The key.
        path: String,
    },
    /// A key that is absolute, escapes the root or has empty parts.
    #[error("{path:?}: invalid path ({reason})")]
    InvalidPath {
        /// The key.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A byte range that does not lie inside the file.
    #[error("{path}: range {offset}+{len} is beyond its {size} bytes")]
    RangeOutOfBounds {
        /// The key.
        path: String,
        /// Start of the range.
        offset: u64,
        /// Length of the range.
        len: u64,
        /// Size of the file.
        size: u64,
    },
    /// A file where a directory was expected, or the reverse.
    #[error("{path}: {reason}")]
    WrongKind {
        /// The key.
        path: String,
        /// What was expected.
        reason: &'static str,
    },
    /// A file that must be new exists already: a conditional create
    /// ([`crate::WritableStorage::create`]) lost to another writer.
    #[error("{path}: already exists")]
    AlreadyExists {
        /// The key.
        path: String,
    },
    /// A remote backend's failure that is none of the above (credentials,
    /// a missing bucket, an endpoint that does not answer, retries spent):
    /// names the URI and says what to check or set.
    #[error("{uri}: {message}")]
    Backend {
        /// The URI (or key) the request was for.
        uri: String,
        /// What failed and what to check or set.
        message: String,
        /// The backend's own error.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// An operating-system error.
    #[error("{path}: I/O failed")]
    Io {
        /// The key.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl StorageError {
    /// No file or directory at `path`.
    pub fn not_found(path: &str) -> Self {
        StorageError::NotFound {
            path: path.to_owned(),
        }
    }

    /// `path` is a file where a directory was expected, or the reverse.
    pub fn wrong_kind(path: &str, reason: &'static str) -> Self {
        StorageError::WrongKind {
            path: path.to_owned(),
            reason,
        }
    }

    /// Whether a conditional create found the file there already.
    pub fn is_already_exists(&self) -> bool {
        matches!(self, StorageError::AlreadyExists { .. })
    }

    /// Whether the error means the key does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, StorageError::NotFound { .. })
    }
}

/// Shorthand for this crate's results.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;
