//! The one error type of this crate.

use tdb_fragment::FragmentError;
use tdb_index::IndexError;
use tdb_storage::StorageError;
use tdb_tile::TileError;
use thiserror::Error;

/// Everything that can go wrong planning or running a query.
///
/// Misuse (an unknown field, a subarray outside the domain, a condition of
/// the wrong type, a budget too small) says what to change; corrupt data
/// names the file, the tile and, through its source, the chunk. Messages do
/// not repeat their `source`: print the chain to see each cause once.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The query names a field the array's schema does not have.
    #[error("no field named `{name}` in the array (fields: {known})")]
    UnknownField {
        /// The name asked for.
        name: String,
        /// The dimensions and attributes the schema has, comma separated.
        known: String,
    },
    /// A subarray range is malformed or outside the domain.
    #[error("subarray on dimension `{dim}`: {reason}")]
    Subarray {
        /// The dimension.
        dim: String,
        /// What is wrong and what to change.
        reason: String,
    },
    /// A dimension label that cannot be read or used as asked: unknown,
    /// empty, out of order, or a range that holds none of its values.
    #[error("dimension label `{label}`: {reason}")]
    Label {
        /// The label's name.
        label: String,
        /// What is wrong and what to change.
        reason: String,
    },
    /// A query condition that cannot be parsed or does not fit the schema.
    #[error("query condition `{condition}`: {reason}")]
    Condition {
        /// The condition (or the part of it at fault).
        condition: String,
        /// What is wrong and what to change.
        reason: String,
    },
    /// A query that cannot run as asked (layout, fields, state).
    #[error("{0}")]
    Invalid(String),
    /// Something TileDB does that tdb does not do yet.
    #[error("not supported yet: {0}")]
    Unsupported(String),
    /// The array directory or a fragment's metadata could not be read.
    #[error("array directory")]
    Fragment(#[from] FragmentError),
    /// A tile could not be unfiltered.
    #[error("{file}: tile {tile}")]
    Tile {
        /// The data file.
        file: String,
        /// The tile's index in its fragment.
        tile: u64,
        /// What went wrong (boxed: it is large).
        #[source]
        source: Box<TileError>,
    },
    /// A tile unfiltered to bytes that do not fit its cells.
    #[error("{file}: tile {tile}: {reason}")]
    Corrupt {
        /// The data file.
        file: String,
        /// The tile's index in its fragment.
        tile: u64,
        /// What does not fit.
        reason: String,
    },
    /// An R-tree or range operation failed.
    #[error("index")]
    Index(#[from] IndexError),
    /// A write's cells are not what the schema takes (nothing is written).
    #[error("write: field `{field}`: {reason}")]
    BadInput {
        /// The field at fault.
        field: String,
        /// What is wrong and what to change.
        reason: String,
    },
    /// A scratch file (a read's sorted runs, under a budget too small for
    /// the tiles its result order crosses; a merge's runs) could not be
    /// written or read back.
    #[error(
        "scratch file in the temporary directory (set TMPDIR to a local directory with room,          or give a larger budget)"
    )]
    Spill(#[source] std::io::Error),
    /// Storage failed while fetching tiles or writing a fragment.
    #[error("{file}: storage failed")]
    Storage {
        /// The file or directory.
        file: String,
        /// What went wrong.
        #[source]
        source: StorageError,
    },
}

/// This crate's result type.
pub type Result<T, E = QueryError> = std::result::Result<T, E>;

impl QueryError {
    pub(crate) fn invalid(msg: impl Into<String>) -> Self {
        QueryError::Invalid(msg.into())
    }

    pub(crate) fn bad_input(field: &str, reason: impl Into<String>) -> Self {
        QueryError::BadInput {
            field: field.to_owned(),
            reason: reason.into(),
        }
    }

    pub(crate) fn corrupt(file: &str, tile: u64, reason: impl Into<String>) -> Self {
        QueryError::Corrupt {
            file: file.to_owned(),
            tile,
            reason: reason.into(),
        }
    }

    pub(crate) fn condition(condition: impl Into<String>, reason: impl Into<String>) -> Self {
        QueryError::Condition {
            condition: condition.into(),
            reason: reason.into(),
        }
    }
}
