//! The one error type of this crate.

use tdb_format::FormatError;
use tdb_schema::SchemaError;
use tdb_storage::StorageError;
use tdb_tile::TileError;
use thiserror::Error;

/// Everything that can go wrong reading or writing an array directory.
///
/// Every variant names the file (relative to the array or group directory)
/// and, for a file's own bytes, the field or section, e.g. `footer: tile
/// offsets of a1`. Messages do not repeat their `source`: print the chain
/// (`std::error::Error::source`) to see each cause once.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FragmentError {
    /// A file or directory could not be listed, read or written.
    #[error("{file}: storage failed")]
    Storage {
        /// The file or directory.
        file: String,
        /// What went wrong.
        #[source]
        source: StorageError,
    },
    /// A primitive field could not be read (short input, unknown code, ...).
    #[error("{file}: cannot read {field}")]
    Format {
        /// The file.
        file: String,
        /// Which field or section.
        field: String,
        /// What went wrong.
        #[source]
        source: FormatError,
    },
    /// A generic tile could not be unfiltered or written.
    #[error("{file}: {what}: bad generic tile")]
    Tile {
        /// The file.
        file: String,
        /// Which tile of it (a section's name, or the whole file).
        what: String,
        /// What went wrong (boxed: it is large).
        #[source]
        source: Box<TileError>,
    },
    /// A schema (or a structure laid out by one) could not be read.
    #[error("{file}: schema problem")]
    Schema {
        /// The file.
        file: String,
        /// What went wrong (boxed: it is large).
        #[source]
        source: Box<SchemaError>,
    },
    /// A structure whose content is impossible: lengths that disagree,
    /// counts beyond the bytes present, values out of range.
    #[error("{file}: invalid {field}: {reason}")]
    Invalid {
        /// The file.
        file: String,
        /// Which field or section.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Something a valid array must have is not there (a fragment's
    /// metadata, the schema a fragment names).
    #[error("{file}: missing {what}")]
    Missing {
        /// The file or directory that should hold it.
        file: String,
        /// What is missing.
        what: String,
    },
}

/// A result whose error is [`FragmentError`].
pub type Result<T, E = FragmentError> = std::result::Result<T, E>;

impl FragmentError {
    /// A storage failure on `file`.
    pub fn storage(file: &str, source: StorageError) -> Self {
        FragmentError::Storage {
            // The root directory is "" to storage; "." to a reader.
            file: crate::open::dir_label(file).to_owned(),
            source,
        }
    }

    /// A field of `file` that cannot be read.
    pub fn format(file: &str, field: impl Into<String>, source: FormatError) -> Self {
        FragmentError::Format {
            file: file.to_owned(),
            field: field.into(),
            source,
        }
    }

    /// A generic tile of `file` that cannot be unfiltered or written.
    pub fn tile(file: &str, what: impl Into<String>, source: TileError) -> Self {
        FragmentError::Tile {
            file: file.to_owned(),
            what: what.into(),
            source: Box::new(source),
        }
    }

    /// A schema problem found while reading `file`.
    pub fn schema(file: &str, source: SchemaError) -> Self {
        FragmentError::Schema {
            file: file.to_owned(),
            source: Box::new(source),
        }
    }

    /// A field of `file` whose value is impossible.
    pub fn invalid(file: &str, field: impl Into<String>, reason: impl Into<String>) -> Self {
        FragmentError::Invalid {
            file: file.to_owned(),
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Something `file` should hold and does not.
    pub fn missing(file: &str, what: impl Into<String>) -> Self {
        FragmentError::Missing {
            file: file.to_owned(),
            what: what.into(),
        }
    }
}
