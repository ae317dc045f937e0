//! TileDB arrays as DataFusion tables: SQL over arrays.
//!
//! [`TileDbTable`] is a [`TableProvider`](datafusion::catalog::TableProvider)
//! whose columns are the array's dimensions, then its attributes (Arrow
//! types from [`tdb_arrow::mapping`]). Scans read only the columns a query
//! uses; filters on dimensions become subarray ranges and filters on
//! attributes query conditions wherever TileDB keeps the rows SQL keeps
//! (see `pushdown.rs` for which are exact); limits stop the read early;
//! each part of the subarray is a partition DataFusion reads in parallel.
//! [`TileDbTableFactory`] serves `CREATE EXTERNAL TABLE t STORED AS TILEDB
//! LOCATION 'uri' OPTIONS ('timestamp' '...', 'key' '...', 'budget' '...')`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> datafusion::common::Result<()> {
//! use datafusion::arrow::{array::AsArray, datatypes::Int64Type};
//! let ctx = tdb_datafusion::session();
//! let uri = "../../testdata/arrays/sparse_2d_int/array";
//! ctx.sql(&format!("CREATE EXTERNAL TABLE t STORED AS TILEDB LOCATION '{uri}'")).await?;
//! let batches = ctx.sql("SELECT count(*) FROM t WHERE x BETWEEN 1 AND 4").await?.collect().await?;
//! let count = batches[0].column(0).as_primitive::<Int64Type>().value(0);
//! assert_eq!(count, 1); // TileDB has one cell there too (expected.json)
//! # Ok(())
//! # }
//! ```

mod error;
mod insert;
mod pushdown;
mod scan;
mod table;

pub use error::{external, Reported};
pub use insert::{InsertTotal, TileDbInsert};
pub use scan::{ScanPlan, TileDbScan};
pub use table::{TableOptions, TileDbTable, TileDbTableFactory};

use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use std::sync::Arc;

/// The name `STORED AS` takes.
pub const FORMAT: &str = "TILEDB";

/// A DataFusion session that knows `STORED AS TILEDB`.
pub fn session() -> SessionContext {
    session_with(SessionConfig::new())
}

/// [`session`] with a configuration of one's own.
pub fn session_with(config: SessionConfig) -> SessionContext {
    let mut state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .build();
    state
        .table_factories_mut()
        .insert(FORMAT.to_owned(), Arc::new(TileDbTableFactory));
    SessionContext::new_with_state(state)
}
