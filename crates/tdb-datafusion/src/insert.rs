//! `INSERT INTO t SELECT ...`: each partition of the rows inserted is
//! written as a fragment of its own, in parallel, and commits on its own
//! (fragments are independent, as in TileDB); [`InsertTotal`] then adds
//! up the rows written into the one-row `count` DataFusion answers.

use crate::scan::external;
use crate::TileDbTable;
use datafusion::arrow::array::{ArrayRef, AsArray, RecordBatch, UInt64Array};
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

fn properties(partitions: usize) -> Arc<PlanProperties> {
    Arc::new(PlanProperties::new(
        EquivalenceProperties::new(count_schema()),
        Partitioning::UnknownPartitioning(partitions),
        EmissionType::Final,
        Boundedness::Bounded,
    ))
}

/// Writes each partition of its input as one fragment of the table's
/// array, stamped `timestamp` (one for the whole insert: fixed when
/// planned, so a task run again writes what it wrote before); answers the
/// rows written, a row a partition.
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
        let properties = properties(input.output_partitioning().partition_count());
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
        let input = self.input.execute(partition, context)?;
        let table = self.table.clone();
        let timestamp = self.timestamp;
        let written = async move {
            // A fragment's cells are sorted as a whole: the partition's
            // rows are held until it is written.
            let batches: Vec<RecordBatch> = input.try_collect().await?;
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            if rows > 0 {
                tokio::task::spawn_blocking(move || {
                    table
                        .array()
                        .write_arrow(&batches, &ArrowWrite::new().at(timestamp))
                })
                .await
                .map_err(|e| DataFusionError::External(Box::new(e)))?
                .map_err(external)?;
            }
            count_batch(rows as u64)
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            count_schema(),
            futures::stream::once(written),
        )))
    }
}

/// The rows an insert wrote in all: the sum of its partitions' counts, as
/// the one row DataFusion answers an `INSERT`.
#[derive(Debug)]
pub struct InsertTotal {
    input: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
}

impl InsertTotal {
    /// The total of `input`'s counts (a [`TileDbInsert`]'s).
    pub fn new(input: Arc<dyn ExecutionPlan>) -> Self {
        InsertTotal {
            input,
            properties: properties(1),
        }
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
        Ok(Arc::new(InsertTotal::new(input)))
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
        let total = input.try_fold(0u64, |sum, batch| async move {
            let counts = batch
                .column_by_name("count")
                .and_then(|c| c.as_primitive_opt::<UInt64Type>())
                .ok_or_else(|| {
                    DataFusionError::Internal("an insert's counts are not UInt64".into())
                })?;
            Ok::<_, DataFusionError>(sum + counts.values().iter().sum::<u64>())
        });
        let answer = async move { count_batch(total.await?) };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            count_schema(),
            futures::stream::once(answer),
        )))
    }
}
