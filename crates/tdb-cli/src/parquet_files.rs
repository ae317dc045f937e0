//! Parquet files (`tdb export --format parquet`, `tdb import FILE.parquet`):
//! the record batches tdb-arrow reads and writes, through the `parquet`
//! crate's Arrow writer and reader. The Arrow schema travels in the file
//! (the writer stores it), so TileDB's types (field metadata) come back on
//! import; files from other writers import where their columns map onto
//! the array's fields as tdb-arrow's writes take them.

use crate::CliError;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use std::io::Write;
use tdb::{ReadSpec, Written};
use tdb_arrow::{ArrowArray, ArrowWrite};

fn parquet_error(e: ParquetError) -> CliError {
    CliError::Output(e.to_string())
}

/// ZSTD at its default level, as tdb's own tiles and pyarrow's choice for
/// size: a file of cells, not a scratch buffer.
fn properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build()
}

/// Reads `spec` as record batches into a Parquet file on `out` (one row
/// group per batch the writer's row-group size allows). Returns the rows
/// written.
pub fn export<S: tdb::Storage>(
    array: &tdb::Array<S>,
    spec: ReadSpec,
    out: &mut (dyn Write + Send),
    progress: &mut dyn FnMut(u64),
) -> Result<u64, CliError> {
    let reader = array.read_arrow(spec)?;
    let schema = reader.schema();
    let mut writer =
        ArrowWriter::try_new(out, schema, Some(properties())).map_err(parquet_error)?;
    let rows =
        crate::arrow_ipc::each_batch(reader, progress, |b| writer.write(b).map_err(parquet_error))?;
    writer.close().map_err(parquet_error)?;
    Ok(rows)
}

/// A Parquet file of no rows with `fields`' columns: what an export of
/// no cells writes.
pub fn export_nothing<S: tdb::Storage>(
    array: &tdb::Array<S>,
    fields: &[String],
    out: &mut (dyn Write + Send),
) -> Result<(), CliError> {
    let schema = array
        .arrow_schema(fields)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let writer =
        ArrowWriter::try_new(out, schema.into(), Some(properties())).map_err(parquet_error)?;
    writer.close().map_err(parquet_error)?;
    Ok(())
}

/// Writes the rows of the Parquet file `file` into `array` as one
/// fragment (a dense array takes coordinate columns that fill a box, each
/// cell once). `name` names the file in errors.
pub fn import<S: tdb::Storage>(
    array: &tdb::Array<S>,
    name: &str,
    file: std::fs::File,
) -> Result<Written, CliError> {
    let input = |reason: String| CliError::Input {
        file: name.to_owned(),
        reason,
    };
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| input(format!("not a Parquet file: {e}")))?;
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| input(e.to_string()))?;
    Ok(array.write_arrow(&batches, &ArrowWrite::new())?)
}
