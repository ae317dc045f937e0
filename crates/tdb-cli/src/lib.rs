//! The library behind the `tdb` command, so its reports can be tested and
//! reused: `inspect` (what the layers below can see of an array or group
//! directory), `schema` (the array schema in force), `verify` (the
//! scrub's report), `export` (query results as JSON or CSV) and `plot` (a
//! picture of the fragments); `values` is
//! the conformance format's value encoding they all share.

#[cfg(feature = "sql")]
pub mod arrow_ipc;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod demo;
pub mod dissect;
pub mod export;
pub mod import;
pub mod inspect;
pub mod metadata;
#[cfg(feature = "sql")]
pub mod parquet_files;
pub mod plot;
pub mod schema;
#[cfg(feature = "sql")]
pub mod sql;
mod summary;
pub mod values;
pub mod verify;

use std::fmt::Write as _;
use thiserror::Error;

/// How a command prints, by the same names everywhere (`--format`); each
/// command takes the ones that fit what it prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// Readable text: a table, or a command's text report.
    Table,
    /// JSON.
    Json,
    /// A header row, then one row per record.
    Csv,
}

impl OutputFormat {
    /// `table` (also `text`), `json` or `csv`, among those `allowed`.
    pub fn parse(name: &str, allowed: &[OutputFormat]) -> Result<Self, CliError> {
        let format = match name {
            "table" | "text" => Some(OutputFormat::Table),
            "json" => Some(OutputFormat::Json),
            "csv" => Some(OutputFormat::Csv),
            _ => None,
        };
        match format {
            Some(f) if allowed.contains(&f) => Ok(f),
            _ => {
                let names: Vec<&str> = allowed.iter().map(|f| f.name()).collect();
                let list = match names.split_last() {
                    Some((last, [])) => (*last).to_owned(),
                    Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                    None => String::new(),
                };
                Err(CliError::Usage(format!(
                    "--format takes {list} here, not {name:?}"
                )))
            }
        }
    }

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Table => "table",
            OutputFormat::Json => "json",
            OutputFormat::Csv => "csv",
        }
    }

    /// `rows` (the first one the header) as CSV for `Csv`, else as
    /// columns aligned under the header (JSON has each command's own
    /// shape).
    pub fn rows(self, rows: &[Vec<String>]) -> String {
        if self == OutputFormat::Csv {
            let mut w = csv::Writer::from_writer(Vec::new());
            for r in rows {
                // Writing to memory does not fail.
                let _ = w.write_record(r);
            }
            let bytes = w.into_inner().unwrap_or_default();
            return String::from_utf8_lossy(&bytes).into_owned();
        }
        let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|i| {
                rows.iter()
                    .filter_map(|r| r.get(i))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for r in rows {
            let mut line = String::new();
            for (cell, w) in r.iter().zip(&widths) {
                let _ = write!(line, "{cell:w$}  ");
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// An error and its causes, one per line, each printed once:
/// `error: <message>` then `  caused by: <source>` down the chain. Error
/// messages in tdb name where and what; the cause is the `source`.
pub fn error_report(error: &dyn std::error::Error) -> String {
    let mut out = format!("error: {error}\n");
    let mut cause = error.source();
    while let Some(e) = cause {
        let _ = writeln!(out, "  caused by: {e}");
        cause = e.source();
    }
    out
}

/// Failures of a `tdb` command.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CliError {
    /// The storage layer failed.
    #[error(transparent)]
    Storage(#[from] tdb_storage::StorageError),
    /// A file could not be decoded.
    #[error("{path}: cannot decode")]
    Format {
        /// The file, relative to the object.
        path: String,
        /// What was wrong.
        #[source]
        source: tdb_format::FormatError,
    },
    /// The path is not a TileDB array or group.
    #[error("{0}: not a TileDB array or group (no schema, group or metadata files)")]
    NotAnObject(String),
    /// The array schema could not be read.
    #[error(transparent)]
    Schema(#[from] tdb_schema::SchemaError),
    /// The array directory could not be read.
    #[error(transparent)]
    Fragment(#[from] tdb_fragment::FragmentError),
    /// Opening or reading through the `tdb` facade failed.
    #[error(transparent)]
    Tdb(#[from] tdb::Error),
    /// Cells through Arrow (an Arrow file's batches, an array read as
    /// Arrow) that one side cannot hold. Boxed: Arrow's errors are large.
    #[cfg(feature = "sql")]
    #[error(transparent)]
    Arrow(Box<tdb_arrow::Error>),
    /// An input file (a schema, cells to import) is not what it must be.
    #[error("{file}: {reason}")]
    Input {
        /// The file.
        file: String,
        /// What is wrong, where.
        reason: String,
    },
    /// The command line asks for something impossible.
    #[error("{0}")]
    Usage(String),
    /// Output could not be produced.
    #[error("output: {0}")]
    Output(String),
    /// Whoever read the output stopped reading (`tdb export ... | head`):
    /// not a failure, the command stops quietly.
    #[error("output closed")]
    OutputClosed,
}

#[cfg(feature = "sql")]
impl From<tdb_arrow::Error> for CliError {
    fn from(e: tdb_arrow::Error) -> Self {
        CliError::Arrow(Box::new(e))
    }
}

impl CliError {
    /// A failed write of the output.
    pub fn output(e: std::io::Error) -> Self {
        // The CSV writer's errors come wrapped, their kind inside.
        let inner_kind = e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<csv::Error>())
            .and_then(|c| match c.kind() {
                csv::ErrorKind::Io(io) => Some(io.kind()),
                _ => None,
            });
        match inner_kind.unwrap_or(e.kind()) {
            std::io::ErrorKind::BrokenPipe => CliError::OutputClosed,
            _ => CliError::Output(e.to_string()),
        }
    }
}
