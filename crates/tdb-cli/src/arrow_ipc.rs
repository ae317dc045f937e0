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
    let reader = array.read_arrow(spec).map_err(arrow_read)?;
    let schema = reader.schema();
    let mut writer = FileWriter::try_new(out, &schema).map_err(arrow_error)?;
    let mut rows = 0;
    for batch in reader {
        let batch = batch.map_err(|e| CliError::Output(e.to_string()))?;
        rows += batch.num_rows() as u64;
        progress(batch.num_rows() as u64);
        writer.write(&batch).map_err(arrow_error)?;
    }
    writer.finish().map_err(arrow_error)?;
    Ok(rows)
}

fn arrow_read(e: tdb_arrow::Error) -> CliError {
    match e {
        tdb_arrow::Error::Tdb(e) => CliError::Tdb(e),
        e => CliError::Usage(e.to_string()),
    }
}

/// Writes the record batches of the Arrow IPC file `file` into `array`
/// as one fragment (a dense array takes coordinate columns that fill a
/// box, each cell once).
pub fn import<S: tdb::Storage>(
    array: &tdb::Array<S>,
    file: std::fs::File,
) -> Result<Written, String> {
    let reader = FileReader::try_new(std::io::BufReader::new(file), None)
        .map_err(|e| format!("not an Arrow IPC file: {e}"))?;
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    array
        .write_arrow(&batches, &ArrowWrite::new())
        .map_err(|e| {
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                text.push_str(": ");
                text.push_str(&c.to_string());
                cause = c.source();
            }
            text
        })
}
