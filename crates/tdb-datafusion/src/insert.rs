//! `INSERT INTO t SELECT ...`: each partition of the rows inserted is
//! written as a fragment of its own (a sparse one as several where it
//! passes a quarter of the table's budget), in parallel, uncommitted;
//! [`InsertTotal`] then commits them all with one commit file (readers see
//! the whole insert or none of it: a failed insert leaves only fragments
//! no reader sees, which a vacuum of uncommitted fragments removes) and
//! adds up the rows written into the one-row `count` DataFusion answers.

use crate::error::external;
use crate::TileDbTable;
use datafusion::arrow::array::{ArrayRef, AsArray, RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt64Type};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, ExecutionPlanProperties as _,
    Partitioning, PlanProperties,
};
use futures::TryStreamExt as _;
use std::fmt;
use std::sync::Arc;
use tdb_arrow::{ArrowArray as _, ArrowWrite};

/// The schema of an insert's answer: the rows written.
fn count_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(
        "count",
        DataType::UInt64,
        false,
    )]))
}

fn count_batch(n: u64) -> Result<RecordBatch> {
    let column: ArrayRef = Arc::new(UInt64Array::from(vec![n]));
    Ok(RecordBatch::try_new(count_schema(), vec![column])?)
}

/// The schema of a partition's write: the rows written and the
/// fragments they went to (names, a line each), uncommitted.
fn written_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("count", DataType::UInt64, false),
        Field::new("fragments", DataType::Utf8, false),
    ]))
}

fn properties(schema: SchemaRef, partitions: usize) -> Arc<PlanProperties> {
    Arc::new(PlanProperties::new(
        EquivalenceProperties::new(schema),
        Partitioning::UnknownPartitioning(partitions),
        EmissionType::Final,
        Boundedness::Bounded,
    ))
}

/// Writes each partition of its input as a fragment of the table's array
/// (a sparse one as several where its rows pass [`held_rows_budget`]),
/// uncommitted, stamped `timestamp` (one for the whole insert: fixed when
/// planned); answers the rows written and the fragments, a row a
/// partition. A task run again writes other fragments: only those whose
/// row reaches [`InsertTotal`] are committed.
#[derive(Debug)]
pub struct TileDbInsert {
    table: TileDbTable,
    input: Arc<dyn ExecutionPlan>,
    timestamp: u64,
    properties: Arc<PlanProperties>,
}

impl TileDbInsert {
    /// An insert of `input`'s rows into `table`, stamped `timestamp`.
    pub fn new(table: TileDbTable, input: Arc<dyn ExecutionPlan>, timestamp: u64) -> Self {
        let properties = properties(
            written_schema(),
            input.output_partitioning().partition_count(),
        );
        TileDbInsert {
            table,
            input,
            timestamp,
            properties,
        }
    }

    /// The table written.
    pub fn table(&self) -> &TileDbTable {
        &self.table
    }

    /// The fragments' timestamp (ms since the epoch).
    pub fn timestamp(&self) -> u64 {
        self.timestamp
    }
}

impl DisplayAs for TileDbInsert {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TileDbInsert: array={}, timestamp={}",
            self.table.uri(),
            self.timestamp
        )
    }
}

impl ExecutionPlan for TileDbInsert {
    fn name(&self) -> &str {
        "TileDbInsert"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    /// A partition is a fragment: rows dealt out again would make more,
    /// smaller ones, and a dense partition's rows must fill a box (a
    /// dense scan's part does).
    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [input] = <[_; 1]>::try_from(children)
            .map_err(|c| DataFusionError::Internal(format!("an insert of {} inputs", c.len())))?;
        Ok(Arc::new(TileDbInsert::new(
            self.table.clone(),
            input,
            self.timestamp,
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let mut input = self.input.execute(partition, context)?;
        let table = self.table.clone();
        let timestamp = self.timestamp;
        let written = async move {
            let dense = table.array().schema().array_type == tdb::ArrayType::Dense;
            let hold = held_rows_budget(table.options().budget);
            let (mut held, mut bytes, mut rows) = (Vec::new(), 0, 0);
            let mut names = Vec::new();
            while let Some(batch) = input.try_next().await? {
                rows += batch.num_rows();
                bytes += batch.get_array_memory_size() as u64;
                held.push(batch);
                // A dense fragment is one box: the partition's rows are
                // held whole (a dense scan's part is one).
                if !dense && bytes >= hold {
                    names.extend(write(&table, std::mem::take(&mut held), timestamp).await?);
                    bytes = 0;
                }
            }
            names.extend(write(&table, held, timestamp).await?);
            let count: ArrayRef = Arc::new(UInt64Array::from(vec![rows as u64]));
            let fragments: ArrayRef = Arc::new(StringArray::from(vec![names.join("\n")]));
            Ok(RecordBatch::try_new(
                written_schema(),
                vec![count, fragments],
            )?)
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            written_schema(),
            futures::stream::once(written),
        )))
    }
}

/// The bytes of rows an insert's partition holds before writing them as a
/// fragment: a quarter of the table's budget (its read budget, or tdb's
/// default), the rest for the write (rows converted, sorted, tiled and
/// filtered). A sparse partition larger than that is several fragments.
fn held_rows_budget(budget: Option<u64>) -> u64 {
    budget.unwrap_or(tdb::DEFAULT_BUDGET) / 4
}

/// Writes `batches` into `table` as fragments stamped `timestamp`,
/// uncommitted: their names (none for no rows).
async fn write(
    table: &TileDbTable,
    batches: Vec<RecordBatch>,
    timestamp: u64,
) -> Result<Vec<String>> {
    if batches.iter().all(|b| b.num_rows() == 0) {
        return Ok(Vec::new());
    }
    let table = table.clone();
    let written = tokio::task::spawn_blocking(move || {
        let write = ArrowWrite::new().at(timestamp).uncommitted();
        table.array().write_arrow(&batches, &write)
    })
    .await
    .map_err(external)?
    .map_err(external)?;
    Ok(written.fragments.iter().map(ToString::to_string).collect())
}

/// An insert's end: commits every fragment its partitions wrote, at once,
/// and answers the rows written in all, the one row DataFusion answers an
/// `INSERT`.
#[derive(Debug)]
pub struct InsertTotal {
    table: TileDbTable,
    input: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
}

impl InsertTotal {
    /// The commit and total of `input` (a [`TileDbInsert`] into `table`).
    pub fn new(table: TileDbTable, input: Arc<dyn ExecutionPlan>) -> Self {
        InsertTotal {
            table,
            input,
            properties: properties(count_schema(), 1),
        }
    }

    /// The table written.
    pub fn table(&self) -> &TileDbTable {
        &self.table
    }
}

impl DisplayAs for InsertTotal {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InsertTotal")
    }
}

impl ExecutionPlan for InsertTotal {
    fn name(&self) -> &str {
        "InsertTotal"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        vec![Distribution::SinglePartition]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [input] = <[_; 1]>::try_from(children).map_err(|c| {
            DataFusionError::Internal(format!("an insert total of {} inputs", c.len()))
        })?;
        Ok(Arc::new(InsertTotal::new(self.table.clone(), input)))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "an insert total has one partition, not {partition}"
            )));
        }
        let input = self.input.execute(0, context)?;
        let table = self.table.clone();
        let answer = async move {
            let batches: Vec<RecordBatch> = input.try_collect().await?;
            let (mut total, mut names) = (0u64, Vec::new());
            for b in &batches {
                let (Some(counts), Some(fragments)) = (
                    b.column_by_name("count")
                        .and_then(|c| c.as_primitive_opt::<UInt64Type>()),
                    b.column_by_name("fragments")
                        .and_then(|c| c.as_string_opt::<i32>()),
                ) else {
                    return Err(DataFusionError::Internal(
                        "an insert's partitions answered no counts and fragments".into(),
                    ));
                };
                total += counts.values().iter().sum::<u64>();
                for list in fragments.iter().flatten() {
                    for name in list.lines() {
                        let name = tdb_format::TimestampedName::parse(name).map_err(|e| {
                            DataFusionError::Internal(format!("fragment {name:?}: {e}"))
                        })?;
                        names.push(name);
                    }
                }
            }
            if !names.is_empty() {
                tokio::task::spawn_blocking(move || table.array().commit_fragments(&names))
                    .await
                    .map_err(external)?
                    .map_err(external)?;
            }
            count_batch(total)
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            count_schema(),
            futures::stream::once(answer),
        )))
    }
}
