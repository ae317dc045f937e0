//! The execution plan of a table scan: one partition per part of the
//! read's subarray, each read by tdb on a blocking thread as Arrow record
//! batches.

use crate::error::external;
use crate::table::Opened;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{
    EquivalenceProperties, LexOrdering, PhysicalExpr, PhysicalSortExpr,
};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchReceiverStreamBuilder;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::StreamExt as _;
use std::fmt;
use std::sync::Arc;
use tdb::{ReadSpec, ResultLayout, Subarray};
use tdb_arrow::ArrowConverter;

/// A TileDB read as a DataFusion plan.
#[derive(Debug)]
pub struct TileDbScan {
    opened: Arc<Opened>,
    /// The columns read (projected), as named in the array.
    fields: Vec<String>,
    schema: SchemaRef,
    /// One subarray per partition.
    parts: Vec<Subarray>,
    layout: ResultLayout,
    condition: Option<String>,
    limit: Option<usize>,
    /// What EXPLAIN shows of the pushed subarray.
    subarray_text: String,
    properties: Arc<PlanProperties>,
    /// The fragment metadata the partitions read, loaded once by the
    /// first to start, while the others wait: started at once on a cold
    /// snapshot, each fetched the same sections.
    metadata: Arc<tokio::sync::OnceCell<()>>,
}

impl TileDbScan {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        opened: Arc<Opened>,
        fields: Vec<String>,
        schema: SchemaRef,
        parts: Vec<Subarray>,
        layout: ResultLayout,
        condition: Option<String>,
        limit: Option<usize>,
        subarray_text: String,
    ) -> Self {
        let mut eq = EquivalenceProperties::new(Arc::clone(&schema));
        if layout == ResultLayout::RowMajor {
            if let Some(ordering) = row_major_ordering(&opened, &schema) {
                eq.add_orderings([ordering]);
            }
        }
        let properties = PlanProperties::new(
            eq,
            Partitioning::UnknownPartitioning(parts.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        TileDbScan {
            opened,
            fields,
            schema,
            parts,
            layout,
            condition,
            limit,
            subarray_text,
            properties: Arc::new(properties),
            metadata: Arc::new(tokio::sync::OnceCell::new()),
        }
    }

    /// The read of partition `part`'s cells.
    fn spec(&self, part: Subarray) -> ReadSpec {
        let mut spec = ReadSpec::new(self.fields.clone())
            .with_layout(self.layout)
            .with_subarray(part)
            .with_packed_validity();
        if let Some(c) = &self.condition {
            spec = spec.with_condition(c.clone());
        }
        if let Some(b) = self.opened.budget {
            spec = spec.with_budget(b);
        }
        spec
    }

    /// The read of every partition's cells, when there are several: the
    /// parts cut the first dimension, so its ranges joined and the others'
    /// as they are.
    fn whole_spec(&self) -> Option<ReadSpec> {
        let [first, _, ..] = self.parts.as_slice() else {
            return None;
        };
        let dims = self.opened.array.schema().domain.dimensions.len();
        let mut sub = Subarray::new(dims);
        for d in 0..dims {
            let parts = if d == 0 {
                &self.parts[..]
            } else {
                std::slice::from_ref(first)
            };
            for r in parts.iter().flat_map(|p| p.ranges(d)) {
                sub.add_range(d, r.clone());
            }
        }
        Some(self.spec(sub))
    }

    /// The condition pushed into the reads, if any.
    pub fn condition(&self) -> Option<&str> {
        self.condition.as_deref()
    }

    /// The subarray of each partition.
    pub fn parts(&self) -> &[Subarray] {
        &self.parts
    }

    /// The URI of the array read.
    pub fn uri(&self) -> &str {
        &self.opened.uri
    }

    /// Options that open the array as this scan reads it: its window
    /// pinned to the one the scan was planned at, so every process that
    /// runs a partition reads the same fragments.
    pub fn table_options(&self) -> &crate::TableOptions {
        &self.opened.options
    }

    /// What this scan reads, as plain values
    /// ([`TileDbTable::scan_from`](crate::TileDbTable::scan_from) makes
    /// the scan again from them).
    pub fn plan(&self) -> ScanPlan {
        ScanPlan {
            fields: self.fields.clone(),
            parts: self.parts.clone(),
            condition: self.condition.clone(),
            limit: self.limit,
            subarray_text: self.subarray_text.clone(),
        }
    }
}

/// What a scan of a table reads, as plain values: what a cluster ships,
/// beside the table's URI and pinned options, to the processes that run
/// the scan's partitions.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ScanPlan {
    /// The columns read, as named in the array.
    pub fields: Vec<String>,
    /// One subarray per partition.
    pub parts: Vec<Subarray>,
    /// The query condition pushed into every read.
    pub condition: Option<String>,
    /// At most this many rows a partition.
    pub limit: Option<usize>,
    /// What EXPLAIN shows of the pushed subarray.
    pub subarray_text: String,
}

impl ScanPlan {
    /// A plan of `fields` over `parts`, with no condition or limit.
    pub fn new(fields: Vec<String>, parts: Vec<Subarray>) -> Self {
        ScanPlan {
            fields,
            parts,
            condition: None,
            limit: None,
            subarray_text: String::new(),
        }
    }
}

/// Row-major results are ordered by the dimensions, in order, when every
/// dimension is read and orders as Arrow does (integers, datetimes,
/// strings: not floats, whose `-0.0` and `0.0` TileDB holds equal).
fn row_major_ordering(opened: &Opened, schema: &SchemaRef) -> Option<LexOrdering> {
    let dims = &opened.array.schema().domain.dimensions;
    let mut sort = Vec::with_capacity(dims.len());
    for d in dims {
        if d.datatype.is_float() {
            return None;
        }
        let column = datafusion::physical_expr::expressions::col(&d.name, schema).ok()?;
        sort.push(PhysicalSortExpr::new_default(column));
    }
    LexOrdering::new(sort)
}

impl DisplayAs for TileDbScan {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TileDbScan: array={}, fields=[{}], partitions={}",
            self.opened.uri,
            self.fields.join(", "),
            self.parts.len()
        )?;
        if !self.subarray_text.is_empty() {
            write!(f, ", subarray=[{}]", self.subarray_text)?;
        }
        if let Some(c) = &self.condition {
            write!(f, ", condition={c}")?;
        }
        if let Some(l) = self.limit {
            write!(f, ", limit={l}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for TileDbScan {
    fn name(&self) -> &str {
        "TileDbScan"
    }

    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let mut builder = RecordBatchReceiverStreamBuilder::new(Arc::clone(&self.schema), 2);
        let Some(part) = self.parts.get(partition) else {
            // No part: nothing can match (the pushed ranges are empty).
            return Ok(builder.build());
        };
        let spec = self.spec(part.clone());
        let (whole, metadata) = (self.whole_spec(), Arc::clone(&self.metadata));
        let opened = Arc::clone(&self.opened);
        let converter = ArrowConverter::new(&opened.array, &self.fields).map_err(external)?;
        let mut left = self.limit;
        let tx = builder.tx();
        // The read's own stream: fetches are the storage's futures (ahead of
        // decoding on object stores), tiles decode on a thread of its own;
        // this task only converts batches and hands them on, so a scan holds
        // no blocking thread while it waits.
        builder.spawn(async move {
            if let Some(whole) = whole {
                let load = || async {
                    let read = opened.array.read_stream(whole).map_err(external)?;
                    read.load_metadata().await.map_err(external)
                };
                metadata.get_or_try_init(load).await?;
            }
            let mut stream = opened.array.read_stream(spec).map_err(external)?;
            while let Some(batch) = stream.next().await {
                let batch = batch.map_err(external)?;
                let mut batch = converter.convert(batch).map_err(external)?;
                if let Some(n) = left.as_mut() {
                    if batch.num_rows() >= *n {
                        batch = batch.slice(0, *n);
                        *n = 0;
                    } else {
                        *n -= batch.num_rows();
                    }
                }
                if tx.send(Ok(batch)).await.is_err() {
                    // The query stopped listening.
                    return Ok(());
                }
                if left == Some(0) {
                    break;
                }
            }
            Ok(())
        });
        Ok(builder.build())
    }
}
