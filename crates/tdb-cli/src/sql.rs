//! `tdb sql`: SQL over arrays through DataFusion (tdb-datafusion), with
//! the answer as a table, CSV, or one JSON array of row objects.

use crate::{CliError, OutputFormat};
use datafusion::arrow::record_batch::RecordBatch;
use std::io::Write;
use tdb_datafusion::{TableOptions, TileDbTable};

/// Runs `query` over `tables` (`(name, uri)`, each opened with `options`),
/// here or on the cluster whose scheduler is at `cluster`: the answer's
/// record batches ([`print`] shows them).
pub fn run(
    query: &str,
    tables: &[(String, String)],
    options: &TableOptions,
    cluster: Option<&str>,
) -> Result<Vec<RecordBatch>, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::Output(e.to_string()))?;
    runtime.block_on(async {
        let ctx = match cluster {
            #[cfg(feature = "cluster")]
            Some(scheduler) => tdb_cluster::connect(scheduler)
                .await
                .map_err(|e| CliError::Usage(e.to_string()))?,
            #[cfg(not(feature = "cluster"))]
            Some(_) => {
                return Err(CliError::Usage(
                    "--cluster: this tdb was built without the cluster feature".into(),
                ))
            }
            None => tdb_datafusion::session(),
        };
        for (name, uri) in tables {
            let table = TileDbTable::open(uri, options)
                .map_err(|e| CliError::Usage(format!("table {name} ({uri}): {e}")))?;
            ctx.register_table(name.as_str(), std::sync::Arc::new(table))
                .map_err(sql_error)?;
        }
        let df = ctx.sql(query).await.map_err(sql_error)?;
        df.collect().await.map_err(sql_error)
    })
}

fn sql_error(e: datafusion::common::DataFusionError) -> CliError {
    CliError::Usage(format!("SQL: {e}"))
}

/// Prints an answer to `out` in `format`.
pub fn print(
    batches: &[RecordBatch],
    format: OutputFormat,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let arrow = |e: datafusion::arrow::error::ArrowError| match e {
        datafusion::arrow::error::ArrowError::IoError(_, io) => CliError::output(io),
        e => CliError::Output(e.to_string()),
    };
    match format {
        OutputFormat::Table => {
            let table =
                datafusion::arrow::util::pretty::pretty_format_batches(batches).map_err(arrow)?;
            writeln!(out, "{table}").map_err(CliError::output)?;
        }
        OutputFormat::Csv => {
            let mut w = datafusion::arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut *out);
            for b in batches {
                w.write(b).map_err(arrow)?;
            }
        }
        OutputFormat::Json => {
            let mut w = datafusion::arrow::json::ArrayWriter::new(&mut *out);
            let refs: Vec<&RecordBatch> = batches.iter().collect();
            w.write_batches(&refs).map_err(arrow)?;
            w.finish().map_err(arrow)?;
            writeln!(out).map_err(CliError::output)?;
        }
    }
    out.flush().map_err(CliError::output)
}
