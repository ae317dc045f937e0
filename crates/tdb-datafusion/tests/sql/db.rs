//! The SQL suite's engine for sqllogictest: a DataFusion session, cells
//! printed as xtask/fixtures/gen_sql.py prints TileDB's. Shared by the
//! suite's runs on one machine (tdb-datafusion) and through a cluster
//! (tdb-cli's `tdb cluster` test).

use async_trait::async_trait;
use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::DataFusionError;
use datafusion::prelude::SessionContext;
use sqllogictest::{AsyncDB, DBOutput, DefaultColumnType};

pub struct Db {
    pub ctx: SessionContext,
}

/// One cell as gen_sql.py prints it.
pub fn cell(array: &ArrayRef, i: usize) -> String {
    if array.is_null(i) {
        return "NULL".into();
    }
    let text = match array.data_type() {
        DataType::Float32 => format!("{:.6}", array.as_primitive::<Float32Type>().value(i)),
        DataType::Float64 => format!("{:.6}", array.as_primitive::<Float64Type>().value(i)),
        DataType::Dictionary(..) => {
            let d = array.as_any_dictionary();
            let key = d.normalized_keys()[i];
            return cell(d.values(), key);
        }
        _ => {
            let f = ArrayFormatter::try_new(array.as_ref(), &FormatOptions::default())
                .expect("a printable column");
            f.value(i).to_string()
        }
    };
    if text.is_empty() {
        "(empty)".into()
    } else {
        text
    }
}

fn column_type(t: &DataType) -> DefaultColumnType {
    if t.is_integer() {
        DefaultColumnType::Integer
    } else if t.is_floating() {
        DefaultColumnType::FloatingPoint
    } else {
        DefaultColumnType::Text
    }
}

#[async_trait]
impl AsyncDB for Db {
    type Error = DataFusionError;
    type ColumnType = DefaultColumnType;

    async fn run(&mut self, sql: &str) -> Result<DBOutput<Self::ColumnType>, Self::Error> {
        let df = self.ctx.sql(sql).await?;
        let schema = df.schema().as_arrow().clone();
        let batches = df.collect().await?;
        if schema.fields().is_empty() || sql.trim_start().to_uppercase().starts_with("CREATE") {
            return Ok(DBOutput::StatementComplete(0));
        }
        let types = schema
            .fields()
            .iter()
            .map(|f| column_type(f.data_type()))
            .collect();
        let mut rows = Vec::new();
        for b in &batches {
            for r in 0..b.num_rows() {
                rows.push(b.columns().iter().map(|c| cell(c, r)).collect());
            }
        }
        Ok(DBOutput::Rows { types, rows })
    }

    async fn shutdown(&mut self) {}

    fn engine_name(&self) -> &str {
        "tdb-datafusion"
    }
}
