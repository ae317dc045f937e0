//! The one error type of this crate.

use tdb_filters::FilterError;
use tdb_format::FormatError;
use tdb_tile::TileError;
use thiserror::Error;

use crate::ValidationError;

/// Everything that can go wrong reading or writing an array schema.
///
/// Every variant names the file (as the caller labelled it) and, for the
/// schema's own bytes, the field, e.g. `attribute 2 (a) filters`; the
/// underlying error is the [`source`](std::error::Error::source), not
/// repeated in the message. Parsers
/// build errors with an empty file; [`SchemaError::in_file`] fills it in at
/// the entry points.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// A primitive field could not be read (short input, unknown code, ...).
    #[error("{file}: {field}")]
    Format {
        /// The schema file.
        file: String,
        /// Which field of the schema.
        field: String,
        /// What went wrong.
        #[source]
        source: FormatError,
    },
    /// A filter pipeline of the schema could not be read.
    #[error("{file}: {field}")]
    Filters {
        /// The schema file.
        file: String,
        /// Whose pipeline.
        field: String,
        /// What went wrong (boxed: keeps the error small).
        #[source]
        source: Box<FilterError>,
    },
    /// The generic tile holding the schema could not be unfiltered or written.
    #[error("{file}: generic tile")]
    Tile {
        /// The schema file.
        file: String,
        /// What went wrong (boxed: keeps the error small).
        #[source]
        source: Box<TileError>,
    },
    /// A field whose value is structurally impossible.
    #[error("{file}: invalid {field}: {reason}")]
    Invalid {
        /// The schema file.
        file: String,
        /// Which field.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The schema breaks one of TileDB's rules (boxed: keeps the error
    /// small).
    #[error("invalid schema: {0}")]
    Validation(Box<ValidationError>),
}

impl SchemaError {
    /// Names the file the error was found in.
    pub fn in_file(mut self, name: &str) -> Self {
        if let SchemaError::Format { file, .. }
        | SchemaError::Filters { file, .. }
        | SchemaError::Tile { file, .. }
        | SchemaError::Invalid { file, .. } = &mut self
        {
            name.clone_into(file);
        }
        self
    }

    /// A tile-layer failure on `file`.
    pub(crate) fn tile(file: &str, source: TileError) -> Self {
        SchemaError::Tile {
            file: file.to_owned(),
            source: Box::new(source),
        }
    }

    /// An invalid field, file not yet known.
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        SchemaError::Invalid {
            file: String::new(),
            field: field.into(),
            reason: reason.into(),
        }
    }
}

impl From<ValidationError> for SchemaError {
    fn from(e: ValidationError) -> Self {
        SchemaError::Validation(Box::new(e))
    }
}

/// Shorthand for this crate's results.
pub type Result<T, E = SchemaError> = std::result::Result<T, E>;
