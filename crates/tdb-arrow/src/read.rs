//! Reads as Arrow record batches.

use crate::mapping::field;
use crate::to_arrow::{enumeration_cells, to_array, Cells};
use crate::{Error, Result};
use arrow_array::{RecordBatch, RecordBatchOptions, RecordBatchReader};
use arrow_data::ArrayData;
use arrow_schema::{ArrowError, DataType, Schema, SchemaRef};
use std::sync::Arc;
use tdb::{Array, Batch, FieldBuffer, Query, ReadSpec};
use tdb_format::Datatype;

/// How one requested field becomes a column.
struct Column {
    name: String,
    datatype: Datatype,
    data_type: DataType,
    /// An enumerated attribute's values, shared by every batch.
    dictionary: Option<ArrayData>,
}

/// The Arrow schema of a read of `fields` of `array`, and each column's
/// conversion.
fn columns<S: tdb::Storage>(array: &Array<S>, fields: &[String]) -> Result<(Schema, Vec<Column>)> {
    let schema = array.schema();
    let mut arrow_fields = Vec::with_capacity(fields.len());
    let mut columns = Vec::with_capacity(fields.len());
    for name in fields {
        let shape = FieldBuffer::for_field(schema, name).map_err(tdb::Error::from)?;
        let nullable = shape.validity.is_some();
        let enumeration =
            match schema
                .attribute(name)
                .and_then(|a| a.enumeration.as_deref())
            {
                Some(e) => Some(array.snapshot().enumerations.get(e).ok_or_else(|| {
                    Error::field(name, format!("enumeration {e:?} was not loaded"))
                })?),
                None => None,
            };
        let f = field(
            name,
            shape.datatype,
            shape.cell_val_num,
            nullable,
            schema.dimension(name).is_some(),
            enumeration.map(|e| (e.name.as_str(), e.datatype, e.cell_val_num)),
        )?;
        let dictionary = match (enumeration, f.data_type()) {
            (Some(e), DataType::Dictionary(_, values)) => {
                Some(to_array(name, e.datatype, values, enumeration_cells(e)?, None)?.to_data())
            }
            _ => None,
        };
        columns.push(Column {
            name: name.clone(),
            datatype: shape.datatype,
            data_type: f.data_type().clone(),
            dictionary,
        });
        arrow_fields.push(f);
    }
    Ok((Schema::new(arrow_fields), columns))
}

pub(crate) fn arrow_schema<S: tdb::Storage>(array: &Array<S>, fields: &[String]) -> Result<Schema> {
    Ok(columns(array, fields)?.0)
}

/// A read in progress as Arrow record batches (an iterator of them, and
/// arrow's [`RecordBatchReader`]).
pub struct ArrowReader<'a, S> {
    query: Query<'a, S>,
    converter: ArrowConverter,
}

impl<'a, S: tdb::Storage> ArrowReader<'a, S> {
    pub(crate) fn new(array: &'a Array<S>, spec: ReadSpec) -> Result<Self> {
        Ok(ArrowReader {
            converter: ArrowConverter::new(array, &spec.fields)?,
            // Validity as Arrow holds it: the bitmaps move into the columns.
            query: array.read(spec.with_packed_validity())?,
        })
    }
}

impl<S> ArrowReader<'_, S> {
    /// The columns of every batch.
    pub fn schema(&self) -> SchemaRef {
        self.converter.schema()
    }
}

/// How a read's batches of `fields` become record batches, for callers
/// that drive the read themselves ([`tdb::Array::read_stream`] in async
/// code): [`ArrowReader`] is this over [`tdb::Array::read`]. A read
/// asked for with [`ReadSpec::with_packed_validity`] hands its validity
/// over without a copy; validity bytes are packed here.
pub struct ArrowConverter {
    schema: SchemaRef,
    columns: Vec<Column>,
}

impl ArrowConverter {
    /// The conversion of reads of `fields` of `array`.
    pub fn new<S: tdb::Storage>(array: &Array<S>, fields: &[String]) -> Result<Self> {
        let (schema, columns) = columns(array, fields)?;
        Ok(ArrowConverter {
            schema: Arc::new(schema),
            columns,
        })
    }

    /// The columns of every batch.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// One batch of the plain read as a record batch: its buffers move into
    /// the columns.
    pub fn convert(&self, batch: Batch) -> Result<RecordBatch> {
        let rows = usize::try_from(batch.num_cells)
            .map_err(|_| Error::Write(format!("{} cells in one batch", batch.num_cells)))?;
        let mut arrays = Vec::with_capacity(self.columns.len());
        for (c, buffer) in self.columns.iter().zip(batch.fields) {
            arrays.push(to_array(
                &c.name,
                c.datatype,
                &c.data_type,
                Cells::from_buffer(buffer, rows),
                c.dictionary.as_ref(),
            )?);
        }
        RecordBatch::try_new_with_options(
            self.schema(),
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .map_err(|e| Error::arrow("*", e))
    }
}

impl<S: tdb::Storage> ArrowReader<'_, S> {
    /// The next batch, with this crate's error.
    pub fn next_batch(&mut self) -> Option<Result<RecordBatch>> {
        let batch = self.query.next()?;
        Some(
            batch
                .map_err(Error::from)
                .and_then(|b| self.converter.convert(b)),
        )
    }
}

impl<S: tdb::Storage> Iterator for ArrowReader<'_, S> {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch()
            .map(|r| r.map_err(|e| ArrowError::ExternalError(Box::new(e))))
    }
}

impl<S: tdb::Storage> RecordBatchReader for ArrowReader<'_, S> {
    fn schema(&self) -> SchemaRef {
        ArrowReader::schema(self)
    }
}
