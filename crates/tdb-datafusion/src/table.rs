//! A TileDB array as a DataFusion table, and the factory behind
//! `CREATE EXTERNAL TABLE ... STORED AS TILEDB`.

use crate::error::external;
use crate::insert::{InsertTotal, TileDbInsert};
use crate::pushdown::{describe, push, Pushed};
use crate::scan::{ScanPlan, TileDbScan};
use async_trait::async_trait;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider, TableProviderFactory};
use datafusion::common::stats::Precision;
use datafusion::common::{DataFusionError, Result, ScalarValue, Statistics};
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{CreateExternalTable, Expr, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;
use std::collections::HashMap;
use std::sync::Arc;
use tdb::{Array, OpenOptions, Range, ResultLayout, Subarray};
use tdb_arrow::ArrowArray;
use tdb_format::ArrayType;

/// How a table opens its array and reads it.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct TableOptions {
    /// Open the array as it was at this timestamp (ms since the epoch).
    pub timestamp: Option<u64>,
    /// With `timestamp`: open the window from this timestamp on (fragments
    /// written before it are not seen).
    pub timestamp_start: Option<u64>,
    /// The AES-256-GCM key of an encrypted array.
    pub key: Option<String>,
    /// The memory budget of each partition's read (bytes).
    pub budget: Option<u64>,
    /// The order sparse rows are read in: `unordered` (the default, the
    /// cheapest) or `row-major` (declared to DataFusion as sorted by the
    /// dimensions). Dense arrays are read row-major.
    pub layout: Option<ResultLayout>,
    /// Storage settings (`vfs.s3.endpoint_override`, ...).
    pub config: tdb::StorageConfig,
}

impl TableOptions {
    /// The options of a `CREATE EXTERNAL TABLE ... OPTIONS (...)`:
    /// `timestamp`, `timestamp_start`, `key`, `budget`, `layout`, and any storage setting by
    /// TileDB's or object_store's name. Keys may carry DataFusion's
    /// `format.` prefix.
    pub fn from_map(map: &HashMap<String, String>) -> Result<Self> {
        let mut o = TableOptions::default();
        for (k, v) in map {
            let key = k.strip_prefix("format.").unwrap_or(k);
            let number = |what: &str| {
                v.parse::<u64>().map_err(|_| {
                    DataFusionError::Configuration(format!("{what} {v:?} is not a number"))
                })
            };
            match key {
                "timestamp" => o.timestamp = Some(number("timestamp")?),
                "timestamp_start" => o.timestamp_start = Some(number("timestamp_start")?),
                "budget" => o.budget = Some(number("budget")?),
                "key" => o.key = Some(v.clone()),
                "layout" => {
                    o.layout = Some(ResultLayout::from_name(v).ok_or_else(|| {
                        DataFusionError::Configuration(format!(
                            "layout {v:?}: row-major or unordered"
                        ))
                    })?)
                }
                _ => o.config = std::mem::take(&mut o.config).set(key, v.clone()),
            }
        }
        if o.timestamp_start.is_some() && o.timestamp.is_none() {
            return Err(DataFusionError::Configuration(
                "timestamp_start needs a timestamp (the window's end)".into(),
            ));
        }
        Ok(o)
    }

    /// The map [`TableOptions::from_map`] reads back as these options.
    pub fn to_map(&self) -> HashMap<String, String> {
        let mut map: HashMap<String, String> = self.config.pairs().iter().cloned().collect();
        let mut put = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                map.insert(k.to_owned(), v);
            }
        };
        put("timestamp", self.timestamp.map(|t| t.to_string()));
        put(
            "timestamp_start",
            self.timestamp_start.map(|t| t.to_string()),
        );
        put("budget", self.budget.map(|b| b.to_string()));
        put("key", self.key.clone());
        put("layout", self.layout.map(|l| l.name().to_owned()));
        map
    }
}

/// An array opened for a table, shared with its scans.
#[derive(Debug)]
pub(crate) struct Opened {
    pub uri: String,
    pub array: Array,
    /// The options it was opened with, at the window it shows.
    pub options: TableOptions,
    pub budget: Option<u64>,
    /// The non-empty domain at the table's timestamp.
    pub ned: Option<Vec<Range>>,
    /// Each attribute's bounds from the fragments' summaries.
    pub attrs: Vec<tdb::AttributeBounds>,
}

/// A TileDB array as a table: its dimensions, then its attributes, as
/// columns (the Arrow types of [`tdb_arrow::mapping`]). A sparse array's
/// rows are its cells; a dense array's are the cells of its non-empty
/// domain (fill values where nothing was written inside it).
///
/// Opened by URI without a timestamp, a table follows the array: each
/// query opens it again and sees what was committed up to then (an
/// `INSERT`'s rows among them). Otherwise it shows one window.
#[derive(Debug, Clone)]
pub struct TileDbTable {
    opened: Arc<Opened>,
    schema: SchemaRef,
    layout: ResultLayout,
    /// The options to open the array again with, for each query: when it
    /// follows the array.
    follow: Option<Arc<TableOptions>>,
}

impl TileDbTable {
    /// Opens the array at `uri` (a path or an object store URI).
    pub fn open(uri: &str, options: &TableOptions) -> Result<Self> {
        let mut open = OpenOptions::new().storage_config(options.config.clone());
        match (options.timestamp_start, options.timestamp) {
            (Some(start), Some(end)) => open = open.between(start, end),
            (None, Some(t)) => open = open.at(t),
            _ => {}
        }
        if let Some(k) = &options.key {
            open = open.key(k.as_bytes()).map_err(external)?;
        }
        let array = Array::open_with(uri, open).map_err(external)?;
        let mut table = Self::new(array, uri, options)?;
        if options.timestamp.is_none() {
            table.follow = Some(Arc::new(options.clone()));
        }
        Ok(table)
    }

    /// The table as a query plans over it: opened again when it follows
    /// the array (its columns must not have changed).
    fn latest(&self) -> Result<std::borrow::Cow<'_, TileDbTable>> {
        let Some(options) = &self.follow else {
            return Ok(std::borrow::Cow::Borrowed(self));
        };
        let now = TileDbTable::open(&self.opened.uri, options)?;
        if now.schema.fields() != self.schema.fields() {
            return Err(DataFusionError::Plan(format!(
                "{}: the array's columns changed since the table was made: make it again",
                self.opened.uri
            )));
        }
        Ok(std::borrow::Cow::Owned(now))
    }

    /// A table over an array already open (at the window it was opened
    /// at; `options`' timestamp, key and storage settings are not used),
    /// named `uri` in plans.
    pub fn new(array: Array, uri: &str, options: &TableOptions) -> Result<Self> {
        let ned = array.non_empty_domain().map_err(external)?;
        let names: Vec<&str> = array
            .schema()
            .attributes
            .iter()
            .map(|a| a.name.as_str())
            .collect();
        let attrs = array.attribute_bounds(&names).map_err(external)?;
        let fields: Vec<String> = array.schema().fields().map(str::to_owned).collect();
        let schema = Arc::new(array.arrow_schema(&fields).map_err(external)?);
        let layout = match array.schema().array_type {
            ArrayType::Dense => ResultLayout::RowMajor,
            ArrayType::Sparse => options.layout.unwrap_or(ResultLayout::Unordered),
        };
        let window = array.window();
        let pinned = TableOptions {
            timestamp: Some(window.end),
            timestamp_start: (window.start > 0).then_some(window.start),
            layout: Some(layout),
            ..options.clone()
        };
        Ok(TileDbTable {
            opened: Arc::new(Opened {
                uri: uri.to_owned(),
                array,
                options: pinned,
                budget: options.budget,
                ned,
                attrs,
            }),
            schema,
            layout,
            follow: None,
        })
    }

    /// The array read.
    pub fn array(&self) -> &Array {
        &self.opened.array
    }

    /// The array's URI.
    pub fn uri(&self) -> &str {
        &self.opened.uri
    }

    /// Options that open the array, anywhere, as this table reads it: as
    /// given, when it follows the array; else with the window pinned to
    /// what it was opened at (`timestamp`, `timestamp_start`) and the
    /// layout chosen. What a cluster ships to the processes that plan
    /// and write it (scans ship their own, always pinned:
    /// [`TileDbScan::table_options`]).
    pub fn options(&self) -> &TableOptions {
        self.follow.as_deref().unwrap_or(&self.opened.options)
    }

    /// The scan `plan` describes, over this table (another process's
    /// [`TileDbScan::plan`]): its columns must be the table's, its parts
    /// subarrays of the array's dimensions.
    pub fn scan_from(&self, plan: ScanPlan) -> Result<TileDbScan> {
        let mut indices = Vec::with_capacity(plan.fields.len());
        for f in &plan.fields {
            indices.push(self.schema.index_of(f).map_err(|_| {
                DataFusionError::Plan(format!("{}: no column {f:?}", self.opened.uri))
            })?);
        }
        let dims = self.opened.array.schema().domain.dimensions.len();
        let parts_fit = plan.parts.iter().all(|p| p.dim_num() == dims);
        if !parts_fit {
            return Err(DataFusionError::Plan(format!(
                "{}: a scan's subarray is not of the array's {dims} dimensions",
                self.opened.uri
            )));
        }
        let schema = Arc::new(self.schema.project(&indices)?);
        Ok(TileDbScan::new(
            Arc::clone(&self.opened),
            plan.fields,
            schema,
            plan.parts,
            self.layout,
            plan.condition,
            plan.limit,
            plan.subarray_text,
        ))
    }

    fn pushed(&self, filter: &Expr) -> Pushed {
        push(
            self.opened.array.schema(),
            self.opened.ned.as_deref(),
            filter,
        )
    }

    /// Cells in the table: exact for dense arrays (the non-empty domain's
    /// cells), an upper bound for sparse ones (cells overwritten or deleted
    /// in later fragments count in each).
    fn row_count(&self) -> Precision<usize> {
        let array = &self.opened.array;
        let schema = array.schema();
        match schema.array_type {
            ArrayType::Dense => match &self.opened.ned {
                None => Precision::Exact(0),
                Some(ned) => tdb_index::dense::cell_count(&schema.domain, ned)
                    .and_then(|n| usize::try_from(n).ok())
                    .map_or(Precision::Absent, Precision::Exact),
            },
            ArrayType::Sparse => {
                let cells: Option<u64> = array
                    .fragments()
                    .iter()
                    .map(|f| f.metadata.cell_num(schema))
                    .sum();
                cells
                    .and_then(|n| usize::try_from(n).ok())
                    .map_or(Precision::Absent, Precision::Inexact)
            }
        }
    }
}

#[async_trait]
impl TableProvider for TileDbTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match self.pushed(f) {
                Pushed::No => TableProviderFilterPushDown::Unsupported,
                p if p.exact() => TableProviderFilterPushDown::Exact,
                _ => TableProviderFilterPushDown::Inexact,
            })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        let mut s = Statistics::new_unknown(&self.schema);
        s.num_rows = self.row_count();
        // Dimensions: never null, within the non-empty domain (the bounds
        // of what fragments wrote; cells deleted or replaced since may not
        // reach them, so inexact).
        let dims = &self.opened.array.schema().domain.dimensions;
        for (i, d) in dims.iter().enumerate() {
            let column = &mut s.column_statistics[i];
            column.null_count = Precision::Exact(0);
            let bounds = self.opened.ned.as_ref().and_then(|ned| ned.get(i));
            if let Some(r) = bounds {
                let (lo, hi) = r.bounds();
                let one = |b| scalar(&d.name, d.datatype, d.cell_val_num, b);
                if let (Some(lo), Some(hi)) = (one(lo), one(hi)) {
                    column.min_value = Precision::Inexact(lo);
                    column.max_value = Precision::Inexact(hi);
                }
            }
        }
        // Attributes: bounds from the fragments' summaries (loose where
        // cells were overwritten or deleted since, never wrong), the nulls
        // they wrote (an estimate). Enumerated attributes are dictionaries
        // of values; the summaries bound their keys.
        let attributes = &self.opened.array.schema().attributes;
        for (j, (a, b)) in attributes.iter().zip(&self.opened.attrs).enumerate() {
            let column = &mut s.column_statistics[dims.len() + j];
            column.null_count = match (a.nullable, b.null_count) {
                (false, _) => Precision::Exact(0),
                (true, Some(n)) => Precision::Inexact(n as usize),
                (true, None) => Precision::Absent,
            };
            if a.enumeration.is_some() {
                continue;
            }
            let one =
                |b: &Option<Vec<u8>>| scalar(&a.name, a.datatype, a.cell_val_num, b.as_ref()?);
            if let (Some(lo), Some(hi)) = (one(&b.min), one(&b.max)) {
                column.min_value = Precision::Inexact(lo);
                column.max_value = Precision::Inexact(hi);
            }
        }
        Some(s)
    }

    /// Each partition of the rows becomes a fragment, all stamped with the
    /// time the insert was planned and committed at once at its end.
    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if insert_op != InsertOp::Append {
            return Err(DataFusionError::NotImplemented(format!(
                "INSERT {insert_op} into {}: an array takes new fragments, over what it holds",
                self.opened.uri
            )));
        }
        let table = self.latest()?.into_owned();
        let write = TileDbInsert::new(table.clone(), input, tdb::now_ms());
        Ok(Arc::new(InsertTotal::new(table, Arc::new(write))))
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.latest()?.scan_now(state, projection, filters, limit)
    }
}

impl TileDbTable {
    /// [`TableProvider::scan`] of the array as this table opened it.
    fn scan_now(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let array_schema = self.opened.array.schema();
        let dims = array_schema.domain.dimensions.len();
        let (schema, fields): (SchemaRef, Vec<String>) = match projection {
            Some(p) => {
                let projected = Arc::new(self.schema.project(p)?);
                let names = projected
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect();
                (projected, names)
            }
            None => (
                Arc::clone(&self.schema),
                self.schema
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect(),
            ),
        };
        // Each dimension's ranges: the intersection of every filter's.
        let mut per_dim: Vec<Option<Vec<Range>>> = vec![None; dims];
        let mut conditions = Vec::new();
        for f in filters {
            match self.pushed(f) {
                Pushed::Ranges { dim, ranges, .. } => {
                    per_dim[dim] = Some(match per_dim[dim].take() {
                        None => ranges,
                        Some(had) => intersect(array_schema, dim, &had, &ranges),
                    });
                }
                Pushed::Condition { text, .. } => conditions.push(format!("({text})")),
                Pushed::No => {}
            }
        }
        let empty = |schema: SchemaRef| -> Arc<dyn ExecutionPlan> {
            Arc::new(TileDbScan::new(
                Arc::clone(&self.opened),
                fields.clone(),
                schema,
                Vec::new(),
                self.layout,
                None,
                limit,
                "nothing matches".into(),
            ))
        };
        let Some(ned) = self.opened.ned.as_deref() else {
            return Ok(empty(schema)); // nothing written
        };
        let dense = array_schema.array_type == ArrayType::Dense;
        let mut subarray = Subarray::new(dims);
        let mut text = Vec::new();
        for (d, ranges) in per_dim.into_iter().enumerate() {
            if let Some(r) = &ranges {
                text.push(describe(array_schema, d, r));
            }
            // Dense rows are the non-empty domain's cells.
            let ranges = match ranges {
                Some(r) if dense => intersect(array_schema, d, &r, &ned[d..=d]),
                Some(r) => r,
                None if dense => vec![ned[d].clone()],
                None => continue,
            };
            if ranges.is_empty() {
                return Ok(empty(schema));
            }
            for r in ranges {
                subarray.add_range(d, r);
            }
        }
        let partitions = state.config().target_partitions().clamp(1, 64);
        let parts = tdb::split_for_parallel(array_schema, &subarray, Some(ned), partitions);
        let condition = (!conditions.is_empty()).then(|| conditions.join(" and "));
        Ok(Arc::new(TileDbScan::new(
            Arc::clone(&self.opened),
            fields,
            schema,
            parts,
            self.layout,
            condition,
            limit,
            text.join(", "),
        )))
    }
}

/// One value (`bytes` of field `name`'s datatype) as a scalar of its
/// column's Arrow type (tdb-arrow's mapping).
fn scalar(
    name: &str,
    datatype: tdb::Datatype,
    cell_val_num: u32,
    bytes: &[u8],
) -> Option<ScalarValue> {
    let one = tdb_arrow::cell_array(name, datatype, cell_val_num, bytes).ok()?;
    ScalarValue::try_from_array(&one, 0).ok()
}

/// The parts of dimension `dim` both range lists select.
fn intersect(schema: &tdb::ArraySchema, dim: usize, a: &[Range], b: &[Range]) -> Vec<Range> {
    let d = &schema.domain.dimensions[dim];
    let Ok(ops) = tdb_index::RangeOps::new(d, dim) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let ((xl, xh), (yl, yh)) = (x.bounds(), y.bounds());
            let lo = if ops.cmp_values(xl, yl).is_ge() {
                xl
            } else {
                yl
            };
            let hi = if ops.cmp_values(xh, yh).is_le() {
                xh
            } else {
                yh
            };
            if ops.cmp_values(lo, hi).is_le() {
                out.push(Range::from_bounds(lo, hi, d.is_var()));
            }
        }
    }
    out
}

/// Builds tables for `CREATE EXTERNAL TABLE name STORED AS TILEDB
/// LOCATION 'uri' [OPTIONS (...)]` (options: [`TableOptions::from_map`]).
/// The columns come from the array: a column list in the statement is
/// refused unless it names the array's columns with their types.
#[derive(Debug, Default)]
pub struct TileDbTableFactory;

#[async_trait]
impl TableProviderFactory for TileDbTableFactory {
    async fn create(
        &self,
        _state: &dyn Session,
        cmd: &CreateExternalTable,
    ) -> Result<Arc<dyn TableProvider>> {
        let [location] = cmd.locations.as_slice() else {
            return Err(DataFusionError::Plan(format!(
                "a TileDB table is one array: one LOCATION, not {}",
                cmd.locations.len()
            )));
        };
        let options = TableOptions::from_map(&cmd.options)?;
        let table = TileDbTable::open(location, &options)?;
        let declared: Schema = cmd.schema.as_arrow().clone();
        if !declared.fields().is_empty() {
            let theirs: Vec<_> = declared
                .fields()
                .iter()
                .map(|f| (f.name().clone(), f.data_type().clone()))
                .collect();
            let ours: Vec<_> = table
                .schema
                .fields()
                .iter()
                .map(|f| (f.name().clone(), f.data_type().clone()))
                .collect();
            if theirs != ours {
                return Err(DataFusionError::Plan(format!(
                    "the columns declared are not the array's: leave them out, or declare {}",
                    ours.iter()
                        .map(|(n, t)| format!("{n} {t}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        Ok(Arc::new(table))
    }
}
