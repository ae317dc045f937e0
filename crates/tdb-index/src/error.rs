//! The one error type of this crate.

use tdb_format::{Datatype, FormatError};
use tdb_schema::SchemaError;
use thiserror::Error;

/// Everything that can go wrong parsing, building or querying an R-tree.
///
/// Each variant names the field, level or MBR that was bad. Messages do not
/// repeat their `source`: print the chain (`std::error::Error::source`) to
/// see each cause once.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum IndexError {
    /// A header field (fanout, level count, an MBR count) could not be read.
    #[error("R-tree: cannot read {field}")]
    Field {
        /// Which field, e.g. `level 2 MBR count`.
        field: String,
        /// What went wrong.
        #[source]
        source: FormatError,
    },
    /// An MBR could not be read.
    #[error("R-tree: cannot read level {level} MBR {mbr}")]
    Mbr {
        /// The level, 0 being the root.
        level: usize,
        /// The MBR's index in its level.
        mbr: u64,
        /// What went wrong (boxed: it is large).
        #[source]
        source: Box<SchemaError>,
    },
    /// A level claims more MBRs than the remaining bytes can hold.
    #[error("R-tree: level {level} claims {count} MBRs of at least {min_size} bytes, {remaining} bytes remain")]
    TooManyMbrs {
        /// The level, 0 being the root.
        level: usize,
        /// The stored count.
        count: u64,
        /// The smallest possible serialized MBR.
        min_size: u64,
        /// Bytes left in the tile.
        remaining: u64,
    },
    /// Bytes after the last level.
    #[error("R-tree: {count} bytes after the last level")]
    TrailingBytes {
        /// How many.
        count: u64,
    },
    /// The levels do not form the complete tree TileDB builds: a level must
    /// hold `ceil(children / fanout)` MBRs.
    #[error("R-tree: invalid level {level}: {reason}")]
    Shape {
        /// The level, 0 being the root.
        level: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A fanout that cannot build a tree over more than one leaf.
    #[error("R-tree: fanout {fanout} cannot index {leaves} leaves")]
    Fanout {
        /// The fanout.
        fanout: u32,
        /// The number of leaves.
        leaves: usize,
    },
    /// A dimension whose datatype TileDB does not allow for dimensions.
    #[error("dimension {dim} ({name}): {} is not a dimension datatype", datatype.name())]
    UnsupportedDatatype {
        /// The dimension's index.
        dim: usize,
        /// Its name.
        name: String,
        /// Its datatype.
        datatype: Datatype,
    },
    /// A range (of an MBR given to [`crate::RTree::build`] or of a
    /// subarray) that does not fit the domain.
    #[error("{what}: {reason}")]
    Range {
        /// Whose range, e.g. `subarray dimension 1 (y)`.
        what: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// This crate's results.
pub type Result<T, E = IndexError> = std::result::Result<T, E>;
