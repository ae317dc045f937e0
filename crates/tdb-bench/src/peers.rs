//! The formats users compare TileDB with, on the same data, read in the
//! same run: Zarr V3 through zarrs (dense arrays: one chunk per TileDB
//! tile, the attribute's filters as the nearest codec chain) and Parquet
//! through arrow-rs (sparse arrays: one row group per TileDB data tile,
//! rows in TileDB's global order, the same compressor, row group
//! statistics pruning boxes and conditions).
//!
//! - `tdb-bench zarr-copy ARRAY OUT` / `parquet-copy ARRAY OUT` write the
//!   copy (untimed; the harness caches it beside the array);
//! - a phase with `"peer": "zarr"` or `"parquet"` runs its queries on such
//!   a copy instead, reporting cells and check as tdb's reads do, so the
//!   harness holds them to the same answers.

use crate::{Error, Phase, Query};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array as _, BooleanArray, RecordBatch};
use std::fs::File;
use std::sync::Arc;
use tdb::{Array, Datatype, ReadSpec, ResultLayout};
use tdb_filters::Filter;

/// A dense array's attribute `a` as a Zarr V3 array at `out`: chunks of
/// the tile extents, written tile by tile from tdb's reads.
pub fn zarr_copy(a: &Array, out: &str) -> Result<serde_json::Value, Error> {
    use zarrs::array::codec::{ShuffleCodec, ZstdCodec};
    use zarrs::array::BytesToBytesCodecTraits;
    let schema = a.schema();
    let attr = schema.attribute("a").ok_or("no attribute a")?;
    let dims = &schema.domain.dimensions;
    let (mut shape, mut chunk) = (Vec::new(), Vec::new());
    for d in dims {
        let (lo, hi) = int_bounds(d.datatype, &d.domain)?;
        if lo != 0 {
            return Err(format!("dimension {} does not start at 0", d.name).into());
        }
        shape.push(u64::try_from(hi + 1)?);
        let extent = d
            .tile_extent
            .as_deref()
            .ok_or("a dimension without a tile extent")?;
        chunk.push(u64::try_from(int_value(d.datatype, extent)?)?);
    }
    let mut codecs: Vec<Arc<dyn BytesToBytesCodecTraits>> = Vec::new();
    for f in &attr.filters.filters {
        match f {
            Filter::Byteshuffle => codecs.push(Arc::new(ShuffleCodec::new(usize::try_from(
                attr.datatype.size(),
            )?))),
            Filter::Zstd { level } => codecs.push(Arc::new(ZstdCodec::new(*level, false))),
            other => return Err(format!("no Zarr codec for TileDB's {other:?}").into()),
        }
    }
    let (data_type, fill) = zarr_type(attr.datatype)?;
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(out)?);
    let mut builder =
        zarrs::array::ArrayBuilder::new(shape.clone(), chunk.clone(), data_type, fill);
    builder.bytes_to_bytes_codecs(codecs);
    let array = builder.build(store, "/")?;
    array.store_metadata()?;
    let grid: Vec<u64> = shape
        .iter()
        .zip(&chunk)
        .map(|(s, c)| s.div_ceil(*c))
        .collect();
    let mut index = vec![0u64; grid.len()];
    let mut bytes = 0u64;
    'chunks: loop {
        let ranges: Vec<(i128, i128)> = index
            .iter()
            .zip(&chunk)
            .zip(&shape)
            .map(|((i, c), s)| (i128::from(i * c), i128::from(((i + 1) * c).min(*s)) - 1))
            .collect();
        let spec = ReadSpec::new(["a"])
            .with_layout(ResultLayout::RowMajor)
            .with_subarray(crate::subarray(a, &ranges, &[])?);
        let cells = a.read_all(spec)?;
        let data = &cells.fields.first().ok_or("no field read")?.data;
        bytes += data.len() as u64;
        match attr.datatype {
            Datatype::Float64 => {
                let v: Vec<f64> = data
                    .chunks_exact(8)
                    .map(|b| f64::from_le_bytes(b.try_into().unwrap_or_default()))
                    .collect();
                array.store_chunk(&index, v.as_slice())?;
            }
            Datatype::Int32 => {
                let v: Vec<i32> = data
                    .chunks_exact(4)
                    .map(|b| i32::from_le_bytes(b.try_into().unwrap_or_default()))
                    .collect();
                array.store_chunk(&index, v.as_slice())?;
            }
            other => return Err(format!("no Zarr copy of {other:?} yet").into()),
        }
        // The next chunk, last dimension fastest.
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if index[d] < grid[d] {
                continue 'chunks;
            }
            index[d] = 0;
        }
        break;
    }
    Ok(serde_json::json!({"written": bytes}))
}

/// A sparse array's cells as one Parquet file at `out`: dimensions then
/// attributes, in TileDB's global order, a row group per data tile
/// (the schema's capacity), each column compressed as TileDB compresses
/// it (ZSTD at its level, at least 1: TileDB's coordinates use -1),
/// statistics per row group.
pub fn parquet_copy(a: &Array, out: &str) -> Result<serde_json::Value, Error> {
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::{EnabledStatistics, WriterProperties};
    use parquet::schema::types::ColumnPath;
    use tdb_arrow::ArrowArray;
    let schema = a.schema();
    let mut fields: Vec<String> = schema
        .domain
        .dimensions
        .iter()
        .map(|d| d.name.clone())
        .collect();
    fields.extend(schema.attributes.iter().map(|at| at.name.clone()));
    let mut props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(usize::try_from(schema.capacity)?))
        .set_statistics_enabled(EnabledStatistics::Chunk);
    for name in &fields {
        let dim = schema.domain.dimensions.iter().find(|d| &d.name == name);
        let pipeline = match (schema.attribute(name), dim) {
            (Some(at), _) => &at.filters,
            (None, Some(d)) if !d.filters.filters.is_empty() => &d.filters,
            _ => &schema.coords_filters,
        };
        let level = pipeline.filters.iter().find_map(|f| match f {
            Filter::Zstd { level } => Some(*level),
            _ => None,
        });
        let compression = match level {
            Some(l) => Compression::ZSTD(ZstdLevel::try_new(l.max(1))?),
            None => Compression::UNCOMPRESSED,
        };
        props = props.set_column_compression(ColumnPath::from(name.as_str()), compression);
    }
    let spec = ReadSpec::new(fields)
        .with_layout(ResultLayout::GlobalOrder)
        .with_budget(1 << 30);
    let mut writer = None;
    let mut rows = 0u64;
    for batch in a.read_arrow(spec)? {
        let batch = batch?;
        if writer.is_none() {
            writer = Some(parquet::arrow::ArrowWriter::try_new(
                File::create(out)?,
                batch.schema(),
                Some(props.clone().build()),
            )?);
        }
        if let Some(w) = &mut writer {
            w.write(&batch)?;
        }
        rows += batch.num_rows() as u64;
    }
    writer.ok_or("no cells to copy")?.close()?;
    Ok(serde_json::json!({"written": rows}))
}

/// The phase's queries on the Zarr copy at `path`: each query's box
/// retrieved (zarrs decodes its chunks in parallel), every value touched.
pub fn zarr_phase(phase: &Phase, path: &str) -> Result<(u64, f64), Error> {
    let store = Arc::new(zarrs::filesystem::FilesystemStore::new(path)?);
    let array = zarrs::array::Array::open(store, "/")?;
    let shape = array.shape().to_vec();
    let (mut cells, mut check) = (0u64, 0.0);
    for q in &phase.queries {
        let ranges: Vec<std::ops::Range<u64>> = match &q.ranges {
            Some(r) => r
                .iter()
                .map(|&(lo, hi)| Ok(u64::try_from(lo)?..u64::try_from(hi + 1)?))
                .collect::<Result<_, Error>>()?,
            None => shape.iter().map(|&s| 0..s).collect(),
        };
        let subset = zarrs::array::ArraySubset::new_with_ranges(&ranges);
        let dt = array.data_type();
        if *dt == zarrs::array::data_type::float64() {
            let v: Vec<f64> = array.retrieve_array_subset::<Vec<_>>(&subset)?;
            cells += v.len() as u64;
            check += sum(v.iter().copied());
        } else if *dt == zarrs::array::data_type::int32() {
            let v: Vec<i32> = array.retrieve_array_subset::<Vec<_>>(&subset)?;
            cells += v.len() as u64;
            check += sum(v.iter().map(|&x| f64::from(x)));
        } else {
            return Err("a Zarr copy of another data type".into());
        }
    }
    Ok((cells, check))
}

/// The phase's queries on the Parquet copy at `path`: row groups whose
/// statistics may hold a query's cells, read on every core (a reader per
/// thread over its share of them), rows kept by the query's box and
/// condition as a row filter, the phase's fields touched.
pub fn parquet_phase(phase: &Phase, path: &str) -> Result<(u64, f64), Error> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let meta = ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)?
        .metadata()
        .clone();
    let columns: Vec<String> = meta
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name().to_owned())
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (mut cells, mut check) = (0u64, 0.0);
    for q in &phase.queries {
        let test = Test::new(q, &columns)?;
        let groups: Vec<usize> = (0..meta.num_row_groups())
            .filter(|&g| test.may_match(meta.row_group(g)))
            .collect();
        let parts = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let mine: Vec<usize> =
                        groups.iter().copied().skip(t).step_by(threads).collect();
                    let (test, columns) = (&test, &columns);
                    s.spawn(move || {
                        read_groups(path, mine, test, &phase.fields, columns)
                            .map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .map_err(|_| Error::from("a reader thread panicked"))?
                        .map_err(Error::from)
                })
                .collect::<Result<Vec<(u64, f64)>, Error>>()
        })?;
        for (n, c) in parts {
            cells += n;
            check += c;
        }
    }
    Ok((cells, check))
}

/// What a query asks of a row: per column, an inclusive range (the box),
/// and one comparison of a column with a number (`a < 0.1`).
#[derive(Clone)]
struct Test {
    ranges: Vec<(usize, i64, i64)>,
    compare: Option<(usize, String, f64)>,
}

impl Test {
    fn new(q: &Query, columns: &[String]) -> Result<Test, Error> {
        let ranges = match &q.ranges {
            Some(r) => r
                .iter()
                .enumerate()
                .map(|(c, &(lo, hi))| Ok((c, i64::try_from(lo)?, i64::try_from(hi)?)))
                .collect::<Result<_, Error>>()?,
            None => Vec::new(),
        };
        let compare = match &q.condition {
            None => None,
            Some(text) => {
                let words: Vec<&str> = text.split_whitespace().collect();
                let [field, op, value] = words[..] else {
                    return Err(
                        format!("the Parquet peer takes `FIELD OP NUMBER`, not {text:?}").into(),
                    );
                };
                let c = columns
                    .iter()
                    .position(|n| n == field)
                    .ok_or("no such column")?;
                Some((c, op.to_owned(), value.parse()?))
            }
        };
        Ok(Test { ranges, compare })
    }

    /// Whether row group `rg`'s statistics allow a match.
    fn may_match(&self, rg: &parquet::file::metadata::RowGroupMetaData) -> bool {
        use parquet::file::statistics::Statistics;
        let ranges_meet = self
            .ranges
            .iter()
            .all(|&(c, lo, hi)| match rg.column(c).statistics() {
                Some(Statistics::Int64(s)) => match (s.min_opt(), s.max_opt()) {
                    (Some(&min), Some(&max)) => min <= hi && lo <= max,
                    _ => true,
                },
                _ => true,
            });
        let compare_meets = match &self.compare {
            None => true,
            Some((c, op, v)) => match rg.column(*c).statistics() {
                Some(Statistics::Double(s)) => match (s.min_opt(), s.max_opt()) {
                    (Some(&min), Some(&max)) => match op.as_str() {
                        "<" => min < *v,
                        "<=" => min <= *v,
                        ">" => max > *v,
                        ">=" => max >= *v,
                        _ => true,
                    },
                    _ => true,
                },
                _ => true,
            },
        };
        ranges_meet && compare_meets
    }

    /// The columns the filter reads.
    fn columns(&self) -> Vec<usize> {
        let mut c: Vec<usize> = self.ranges.iter().map(|r| r.0).collect();
        c.extend(self.compare.as_ref().map(|x| x.0));
        c.sort_unstable();
        c.dedup();
        c
    }

    /// Which rows of `batch` (the filter's columns, in column order) pass.
    fn eval(&self, batch: &RecordBatch) -> Result<BooleanArray, arrow_schema::ArrowError> {
        let cols = self.columns();
        let at = |c: usize| {
            cols.iter()
                .position(|&x| x == c)
                .and_then(|i| batch.columns().get(i))
        };
        let mut keep = vec![true; batch.num_rows()];
        for &(c, lo, hi) in &self.ranges {
            if let Some(col) = at(c) {
                let v = col.as_primitive::<Int64Type>();
                for (k, x) in keep.iter_mut().zip(v.values()) {
                    *k &= lo <= *x && *x <= hi;
                }
            }
        }
        if let Some((c, op, value)) = &self.compare {
            if let Some(col) = at(*c) {
                let v = col.as_primitive::<Float64Type>();
                for (k, x) in keep.iter_mut().zip(v.values()) {
                    *k &= match op.as_str() {
                        "<" => x < value,
                        "<=" => x <= value,
                        ">" => x > value,
                        ">=" => x >= value,
                        "==" => x == value,
                        _ => true,
                    };
                }
            }
        }
        Ok(BooleanArray::from(keep))
    }
}

/// Reads row groups `groups` of the file at `path`: the rows `test` keeps,
/// `fields` touched: `(rows, check)`.
fn read_groups(
    path: &str,
    groups: Vec<usize>,
    test: &Test,
    fields: &[String],
    columns: &[String],
) -> Result<(u64, f64), Error> {
    use parquet::arrow::arrow_reader::{
        ArrowPredicateFn, ParquetRecordBatchReaderBuilder, RowFilter,
    };
    use parquet::arrow::ProjectionMask;
    if groups.is_empty() {
        return Ok((0, 0.0));
    }
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)?;
    let descr = builder.parquet_schema().clone();
    let wanted: Vec<usize> = fields
        .iter()
        .map(|f| columns.iter().position(|c| c == f).ok_or("no such column"))
        .collect::<Result<_, _>>()?;
    let mut builder = builder
        .with_row_groups(groups)
        .with_batch_size(64 << 10)
        .with_projection(ProjectionMask::leaves(&descr, wanted.iter().copied()));
    let filter_cols = test.columns();
    if !filter_cols.is_empty() {
        let predicate = ArrowPredicateFn::new(
            ProjectionMask::leaves(&descr, filter_cols.iter().copied()),
            {
                let test = test.clone();
                move |batch| test.eval(&batch)
            },
        );
        builder = builder.with_row_filter(RowFilter::new(vec![Box::new(predicate)]));
    }
    let (mut rows, mut check) = (0u64, 0.0);
    for batch in builder.build()? {
        let batch = batch?;
        rows += batch.num_rows() as u64;
        for col in batch.columns() {
            check += match col.data_type() {
                arrow_schema::DataType::Float64 => {
                    sum(col.as_primitive::<Float64Type>().values().iter().copied())
                }
                arrow_schema::DataType::Int64 => sum(col
                    .as_primitive::<Int64Type>()
                    .values()
                    .iter()
                    .map(|&x| x as f64)),
                arrow_schema::DataType::Int32 => sum(col
                    .as_primitive::<Int32Type>()
                    .values()
                    .iter()
                    .map(|&x| f64::from(x))),
                t => return Err(format!("a Parquet column of {t}").into()),
            };
        }
    }
    Ok((rows, check))
}

/// Sums values in eight running sums, as `touch` does tdb's.
fn sum(values: impl Iterator<Item = f64>) -> f64 {
    let mut acc = [0.0f64; 8];
    for (i, v) in values.enumerate() {
        acc[i % 8] += v;
    }
    acc.iter().sum()
}

fn zarr_type(t: Datatype) -> Result<(zarrs::array::DataType, zarrs::array::FillValue), Error> {
    Ok(match t {
        Datatype::Float64 => (zarrs::array::data_type::float64(), 0.0f64.into()),
        Datatype::Int32 => (zarrs::array::data_type::int32(), 0i32.into()),
        other => return Err(format!("no Zarr copy of {other:?} yet").into()),
    })
}

/// An integer dimension's domain (its two bounds' bytes).
fn int_bounds(t: Datatype, dom: &[u8]) -> Result<(i128, i128), Error> {
    let (lo, hi) = dom.split_at(dom.len() / 2);
    Ok((int_value(t, lo)?, int_value(t, hi)?))
}

fn int_value(t: Datatype, b: &[u8]) -> Result<i128, Error> {
    Ok(match t {
        Datatype::Int32 => i128::from(i32::from_le_bytes(b.try_into()?)),
        Datatype::Int64 => i128::from(i64::from_le_bytes(b.try_into()?)),
        other => return Err(format!("a dimension of {other:?}").into()),
    })
}
