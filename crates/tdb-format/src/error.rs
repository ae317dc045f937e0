//! The one error type of this crate.

use thiserror::Error;

/// Everything that can go wrong while decoding or encoding format primitives.
///
/// Parsers never panic on bad bytes: a short or corrupt input becomes one of
/// these, naming the field that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The input ended before a field was complete.
    #[error("truncated input: {field} needs {needed} bytes, {available} remain")]
    Truncated {
        /// Name of the field being read.
        field: &'static str,
        /// Bytes the field needs.
        needed: u64,
        /// Bytes that were left.
        available: u64,
    },
    /// A numeric code that is not one of the enum's known values.
    #[error("unknown {kind} code {code}")]
    UnknownCode {
        /// Which enum (e.g. "datatype", "filter type").
        kind: &'static str,
        /// The code found on disk.
        code: u64,
    },
    /// A name that is not one of the enum's known names.
    #[error("unknown {kind} name {name:?}")]
    UnknownName {
        /// Which enum.
        kind: &'static str,
        /// The name given.
        name: String,
    },
    /// A format version newer than any this crate knows: written by a
    /// newer TileDB (TileDB refuses such files too).
    #[error(
        "format version {version} is newer than the newest this library reads ({}): \
         written by a newer TileDB",
        crate::FormatVersion::MAX.get()
    )]
    NewerVersion {
        /// The version found.
        version: u32,
    },
    /// A file of TileDB before 1.4, from before format versions existed:
    /// its generic tile header has no version field. TileDB 2.30 cannot
    /// open such arrays either.
    #[error(
        "written by TileDB before 1.4 (a tile header without a format version), which \
         neither tdb nor TileDB 2.x reads; open it with TileDB 1.x and write a new array"
    )]
    BeforeVersion1,
    /// A field whose value is structurally impossible.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// Name of the field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A file or directory name that is not a timestamped name of any era.
    #[error("not a timestamped name: {name:?} ({reason})")]
    BadTimestampedName {
        /// The name given.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
}

/// Shorthand for this crate's results.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;
