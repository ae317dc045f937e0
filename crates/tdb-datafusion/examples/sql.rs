//! SQL over a TileDB array: `cargo run -p tdb-datafusion --example sql
//! [ARRAY]` (default: a fixture written by TileDB).

use datafusion::arrow::util::pretty::pretty_format_batches;
use std::io::Write;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let array = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../testdata/arrays/sparse_2d_int/array"
        )
        .into()
    });
    let ctx = tdb_datafusion::session();
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS TILEDB LOCATION '{array}'"
    ))
    .await?;
    let sql = "SELECT x, count(*) AS cells, sum(a) AS total FROM t \
               WHERE x BETWEEN 10 AND 40 GROUP BY x ORDER BY x";
    let batches = ctx.sql(sql).await?.collect().await?;
    // A closed stdout (`| head`) ends the example quietly.
    let mut out = std::io::stdout().lock();
    writeln!(out, "{sql}\n{}", pretty_format_batches(&batches)?)?;
    let plan = ctx.sql(&format!("EXPLAIN {sql}")).await?.collect().await?;
    writeln!(out, "{}", pretty_format_batches(&plan)?)?;
    Ok(())
}
