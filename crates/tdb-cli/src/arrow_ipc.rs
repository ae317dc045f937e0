//! Arrow IPC files (`tdb export --format arrow`, `tdb import FILE.arrow`):
//! the record batches tdb-arrow reads and writes, in Arrow's file format.

use crate::CliError;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::ipc::reader::FileReader;
use datafusion::arrow::ipc::writer::FileWriter;
use std::io::Write;
use tdb::{ReadSpec, Written};
use tdb_arrow::{ArrowArray, ArrowWrite};

fn arrow_error(e: ArrowError) -> CliError {
    match e {
        ArrowError::IoError(_, io) => CliError::output(io),
        e => CliError::Output(e.to_string()),
    }
}

/// Reads `spec` as record batches into an Arrow IPC file on `out`.
/// Returns the rows written.
pub fn export<S: tdb::Storage>(
    array: &tdb::Array<S>,
    spec: ReadSpec,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, CliError> {
    let reader = array.read_arrow(spec)?;
    let schema = reader.schema();
    let mut writer = FileWriter::try_new(out, &schema).map_err(arrow_error)?;
    let rows = each_batch(reader, progress, |b| writer.write(b).map_err(arrow_error))?;
    writer.finish().map_err(arrow_error)?;
    Ok(rows)
}

/// Hands every record batch of `reader` to `write`, counting rows (and
/// reporting them to `progress`): the loop of every record-batch file export.
pub(crate) fn each_batch<S: tdb::Storage>(
    reader: tdb_arrow::ArrowReader<'_, S>,
    progress: &mut dyn FnMut(u64),
    mut write: impl FnMut(&datafusion::arrow::record_batch::RecordBatch) -> Result<(), CliError>,
) -> Result<u64, CliError> {
    let mut rows = 0;
    for batch in reader {
        let batch = batch.map_err(|e| CliError::Output(e.to_string()))?;
        rows += batch.num_rows() as u64;
        progress(batch.num_rows() as u64);
        write(&batch)?;
    }
    Ok(rows)
}

/// Writes the record batches of the Arrow IPC file `file` into `array`
/// as one fragment (a dense array takes coordinate columns that fill a
/// box, each cell once). `name` names the file in errors.
pub fn import<S: tdb::Storage>(
    array: &tdb::Array<S>,
    name: &str,
    file: std::fs::File,
) -> Result<Written, CliError> {
    let input = |reason: String| CliError::Input {
        file: name.to_owned(),
        reason,
    };
    let reader = FileReader::try_new(std::io::BufReader::new(file), None)
        .map_err(|e| input(format!("not an Arrow IPC file: {e}")))?;
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| input(e.to_string()))?;
    Ok(array.write_arrow(&batches, &ArrowWrite::new())?)
}
