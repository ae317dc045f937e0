//! TileDB arrays as Apache Arrow record batches.
//!
//! [`mapping`] says which Arrow type holds each TileDB datatype, whether it
//! means exactly the same values, and (from field metadata) the way back.
//! [`ArrowArray::read_arrow`] reads an array as a
//! [`RecordBatchReader`](arrow_array::RecordBatchReader), dimensions as
//! columns, handing the reader's buffers to Arrow without copying them
//! wherever the layouts agree. [`ArrowArray::write_arrow`] writes
//! [`RecordBatch`](arrow_array::RecordBatch)es as one fragment: sparse
//! cells in any order, dense cells over a box, or with coordinate columns
//! that fill one.
//!
//! ```
//! use arrow_array::{cast::AsArray, types::Int32Type};
//! use tdb::{Array, ReadSpec};
//! use tdb_arrow::ArrowArray;
//! let array = Array::open("../../testdata/arrays/sparse_2d_int/array")?;
//! let mut rows = 0;
//! for batch in array.read_arrow(ReadSpec::new(["x", "a"]))? {
//!     let batch = batch?;
//!     // Dimensions and attributes are columns of their Arrow types.
//!     let _x = batch.column(0).as_primitive::<Int32Type>();
//!     rows += batch.num_rows();
//! }
//! assert_eq!(rows, 60);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod from_arrow;
pub mod mapping;
mod read;
mod to_arrow;
mod write;

pub use mapping::{mapping, tiledb_type, Mapping};
pub use read::{ArrowConverter, ArrowReader};
pub use to_arrow::cell_array;
pub use write::ArrowWrite;

use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, Schema};
use tdb::{Array, ReadSpec, Written};

/// What went wrong between an array and Arrow.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Opening, reading or writing the array.
    #[error(transparent)]
    Tdb(#[from] tdb::Error),
    /// A field's cells or type that the other side cannot hold: which
    /// field, and why.
    #[error("field {field:?}: {message}")]
    Field {
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// Arrow refused a field's buffers (invalid UTF-8 in a string field,
    /// for one).
    #[error("field {field:?}")]
    Arrow {
        /// The field.
        field: String,
        /// Arrow's reason.
        #[source]
        source: ArrowError,
    },
    /// A write that does not fit the array: what to change.
    #[error("{0}")]
    Write(String),
}

impl Error {
    pub(crate) fn field(field: &str, message: impl Into<String>) -> Self {
        Error::Field {
            field: field.to_owned(),
            message: message.into(),
        }
    }

    pub(crate) fn arrow(field: &str, source: ArrowError) -> Self {
        Error::Arrow {
            field: field.to_owned(),
            source,
        }
    }
}

/// This crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Arrow reads and writes of a [`tdb::Array`].
pub trait ArrowArray {
    /// The storage the array lives in.
    type Storage;

    /// The Arrow schema of a read of `fields` (dimensions and attributes
    /// by name, in that order).
    fn arrow_schema(&self, fields: &[String]) -> Result<Schema>;

    /// Reads `spec` as record batches: one per batch of the plain read, so
    /// the spec's budget bounds them as it bounds those.
    fn read_arrow(&self, spec: ReadSpec) -> Result<ArrowReader<'_, Self::Storage>>;

    /// Writes `batches` (one schema) as one fragment: see [`ArrowWrite`].
    fn write_arrow(&self, batches: &[RecordBatch], options: &ArrowWrite) -> Result<Written>;
}

impl<S: tdb::Storage> ArrowArray for Array<S> {
    type Storage = S;

    fn arrow_schema(&self, fields: &[String]) -> Result<Schema> {
        read::arrow_schema(self, fields)
    }

    fn read_arrow(&self, spec: ReadSpec) -> Result<ArrowReader<'_, S>> {
        ArrowReader::new(self, spec)
    }

    fn write_arrow(&self, batches: &[RecordBatch], options: &ArrowWrite) -> Result<Written> {
        write::write(self, batches, options)
    }
}
