//! Scans a task can be given some partitions of.
//!
//! Ballista hands each task of a stage a slice of the stage's partitions,
//! and cuts the stage's plan down to them: it restricts the leaves it
//! knows (file scans, in-memory sources, shuffle readers) to the slice,
//! and the task runs every partition of what is left. A leaf of its own,
//! as tdb's scan is, it leaves whole, so every task would read every
//! partition. [`SpreadScans`] gives each scan a child Ballista knows how
//! to cut: an in-memory source whose partition `i` holds the number `i`.
//! [`PartScan`] runs, for each partition of that child, the scan's
//! partition it names.

use datafusion::arrow::array::{AsArray, RecordBatch, UInt32Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, UInt32Type};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode as _, TreeNodeRecursion};
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties as _, Partitioning,
    PlanProperties,
};
use futures::TryStreamExt as _;
use std::fmt;
use std::sync::Arc;
use tdb_datafusion::TileDbScan;

/// The in-memory source of a scan of `n` partitions: partition `i` holds
/// one row, `i`.
fn numbers(n: usize) -> Result<Arc<dyn ExecutionPlan>> {
    let schema = Arc::new(Schema::new(vec![Field::new(
        "partition",
        DataType::UInt32,
        false,
    )]));
    let mut partitions = Vec::with_capacity(n);
    for i in 0..n {
        let i = u32::try_from(i)
            .map_err(|_| DataFusionError::Plan(format!("a scan of {n} partitions")))?;
        let column = Arc::new(UInt32Array::from(vec![i]));
        partitions.push(vec![RecordBatch::try_new(
            Arc::clone(&schema),
            vec![column],
        )?]);
    }
    Ok(MemorySourceConfig::try_new_exec(&partitions, schema, None)?)
}

/// A tdb scan whose partitions are those its child names.
#[derive(Debug)]
pub struct PartScan {
    /// A [`TileDbScan`].
    scan: Arc<dyn ExecutionPlan>,
    numbers: Arc<dyn ExecutionPlan>,
    properties: Arc<PlanProperties>,
}

impl PartScan {
    /// `scan` (a [`TileDbScan`]), every partition of it.
    pub fn new(scan: Arc<dyn ExecutionPlan>) -> Result<Self> {
        let n = scan.output_partitioning().partition_count();
        Self::with_numbers(scan, numbers(n)?)
    }

    /// `scan`'s partitions that `numbers` (a source of one `UInt32` column)
    /// names, one a partition of it.
    pub fn with_numbers(
        scan: Arc<dyn ExecutionPlan>,
        numbers: Arc<dyn ExecutionPlan>,
    ) -> Result<Self> {
        if scan.downcast_ref::<TileDbScan>().is_none() {
            return Err(DataFusionError::Internal(format!(
                "partitions of a {}, not of a tdb scan",
                scan.name()
            )));
        }
        let properties = PlanProperties::new(
            scan.equivalence_properties().clone(),
            Partitioning::UnknownPartitioning(numbers.output_partitioning().partition_count()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(PartScan {
            scan,
            numbers,
            properties: Arc::new(properties),
        })
    }

    /// The scan.
    pub fn scan(&self) -> Option<&TileDbScan> {
        self.scan.downcast_ref::<TileDbScan>()
    }
}

impl DisplayAs for PartScan {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.scan.fmt_as(t, f)?;
        write!(
            f,
            " (running {} of them)",
            self.properties.output_partitioning().partition_count()
        )
    }
}

impl ExecutionPlan for PartScan {
    fn name(&self) -> &str {
        "PartScan"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.numbers]
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
        let [numbers] = <[_; 1]>::try_from(children).map_err(|c| {
            DataFusionError::Internal(format!("a scan's partitions from {} inputs", c.len()))
        })?;
        Ok(Arc::new(PartScan::with_numbers(
            Arc::clone(&self.scan),
            numbers,
        )?))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let numbers = self.numbers.execute(partition, Arc::clone(&context))?;
        let scan = Arc::clone(&self.scan);
        let stream = async move {
            let batches: Vec<RecordBatch> = numbers.try_collect().await?;
            let mut named = batches.iter().flat_map(|b| {
                b.column(0)
                    .as_primitive_opt::<UInt32Type>()
                    .map(|c| c.values().to_vec())
                    .unwrap_or_default()
            });
            match (named.next(), named.next()) {
                (Some(p), None) => scan.execute(p as usize, context),
                _ => Err(DataFusionError::Internal(format!(
                    "partition {partition} of a scan names no one partition of it"
                ))),
            }
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.scan.schema(),
            futures::stream::once(stream).try_flatten(),
        )))
    }
}

/// The scheduler's last physical rule: every tdb scan becomes a
/// [`PartScan`] of all its partitions.
#[derive(Debug, Default)]
pub struct SpreadScans;

impl PhysicalOptimizerRule for SpreadScans {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            if node.downcast_ref::<TileDbScan>().is_none() {
                return Ok(Transformed::no(node));
            }
            Ok(Transformed::yes(Arc::new(PartScan::new(node)?)))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "tdb_spread_scans"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
