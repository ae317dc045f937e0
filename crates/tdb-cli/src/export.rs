//! `tdb export`: run a read through the `tdb` facade and print its cells as
//! JSON (the conformance format's `result` shape) or CSV.
//!
//! Subarray syntax (`--subarray`): one entry per dimension in schema order,
//! separated by `;`; an entry is `*` or empty (the whole dimension) or
//! ranges separated by `,`, each `lo:hi` (inclusive) or a single value `v`
//! (`v:v`). Trailing dimensions left out are read whole. Numbers are
//! written as in Rust/JSON (`-3`, `0.5`, `1e3`; datetimes as raw counts);
//! string dimensions take the text as it is (so a bound cannot hold `:`,
//! `,` or `;`). Example: `--subarray "1:4,7;*;a:c"`.
//!
//! CSV: a header row of field names, then one row per cell. A cell holding
//! several values (fixed `cell_val_num` > 1 or var-length numbers) is its
//! values joined by single spaces; strings are their text, blobs (and
//! strings that are not UTF-8) base64; a null cell is an empty field.
//! Fields holding `,`, `"` or line breaks are quoted as RFC 4180 says.

use crate::{values, CliError};
use serde_json::{Map, Value};
use std::io::Write;
use tdb::{AggregateOp, AggregateResult, ArraySchema, Batch, Datatype, Range, ReadSpec, Subarray};

/// What `export` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON object, `{"num_cells", "fields": {name: {datatype,
    /// cell_val_num, data, validity?}}}`.
    Json,
    /// A header row and one row per cell.
    Csv,
    /// An Arrow IPC file of record batches (tdb-arrow's types; the `sql`
    /// feature).
    Arrow,
    /// A Parquet file of the same record batches (the `sql` feature).
    Parquet,
}

impl Format {
    /// `json`, `csv`, `arrow` (also `ipc` and `feather`, Arrow files' other
    /// names) or `parquet` (also `pq`).
    pub fn from_name(name: &str) -> Result<Self, CliError> {
        match name {
            "json" => Ok(Format::Json),
            "csv" => Ok(Format::Csv),
            "arrow" | "ipc" | "feather" => Ok(Format::Arrow),
            "parquet" | "pq" => Ok(Format::Parquet),
            other => Err(CliError::Usage(format!(
                "--format takes json, csv, arrow or parquet, not {other:?}"
            ))),
        }
    }

    /// Whether the format is a file of record batches (Arrow IPC or
    /// Parquet), which needs the `sql` feature.
    pub fn is_arrow(self) -> bool {
        matches!(self, Format::Arrow | Format::Parquet)
    }
}

/// The error of a format this build left out.
pub fn no_arrow() -> CliError {
    CliError::Usage(
        "Arrow and Parquet files need tdb built with its `sql` feature (the default)".into(),
    )
}

/// Every dimension, then every attribute: what `export` reads by default.
pub fn default_fields(schema: &ArraySchema) -> Vec<String> {
    let dims = schema.domain.dimensions.iter().map(|d| d.name.clone());
    dims.chain(schema.attributes.iter().map(|a| a.name.clone()))
        .collect()
}

/// `a,b,c`, each a dimension or attribute of `schema`.
pub fn parse_fields(schema: &ArraySchema, text: &str) -> Result<Vec<String>, CliError> {
    let known = default_fields(schema);
    let fields: Vec<String> = text.split(',').map(|f| f.trim().to_owned()).collect();
    for f in &fields {
        if !known.contains(f) {
            return Err(CliError::Usage(format!(
                "--fields: {f:?} is no dimension or attribute (there are: {})",
                known.join(", ")
            )));
        }
    }
    Ok(fields)
}

/// Parses `--agg` values, `FIELD:OP[,OP...]`, into `(field, op)` requests.
pub fn parse_aggregates(
    schema: &ArraySchema,
    specs: &[String],
) -> Result<Vec<(String, AggregateOp)>, CliError> {
    let mut requests = Vec::new();
    for spec in specs {
        let (field, ops) = spec.split_once(':').ok_or_else(|| {
            CliError::Usage(format!("--agg takes FIELD:OP[,OP...], not {spec:?}"))
        })?;
        let field = field.trim();
        if schema.field_type(field).is_none() {
            return Err(CliError::Usage(format!(
                "--agg: {field:?} is no dimension or attribute (there are: {})",
                schema.field_names()
            )));
        }
        for op in ops.split(',') {
            let op = AggregateOp::from_name(op.trim()).ok_or_else(|| {
                CliError::Usage(format!(
                    "--agg {spec}: {op:?} is no aggregate (count, sum, min, max, mean, null_count)"
                ))
            })?;
            requests.push((field.to_owned(), op));
        }
    }
    Ok(requests)
}

/// Aggregate answers as `{field: {op: value}}`, the conformance format's
/// shape (`null` where undefined).
pub fn aggregates_json(schema: &ArraySchema, results: &[AggregateResult]) -> Value {
    let mut out = Map::new();
    for r in results {
        let (datatype, cvn) = schema.field_type(&r.field).unwrap_or((Datatype::Any, 1));
        let v = values::aggregate(datatype, cvn, r.value.as_ref());
        if let Value::Object(m) = out
            .entry(r.field.clone())
            .or_insert_with(|| Value::Object(Map::new()))
        {
            m.insert(r.op.name().to_owned(), v);
        }
    }
    Value::Object(out)
}

/// [`aggregates_json`]'s answer as rows of field, op and value: aligned
/// columns under a header (`Table`) or CSV (`Csv`, a header row first).
pub fn aggregates_rows(answer: &Value, format: crate::OutputFormat) -> String {
    let mut rows = vec![vec![
        "field".to_owned(),
        "op".to_owned(),
        "value".to_owned(),
    ]];
    for (field, ops) in answer.as_object().into_iter().flatten() {
        for (op, v) in ops.as_object().into_iter().flatten() {
            let value = match v {
                Value::Null => String::new(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            rows.push(vec![field.clone(), op.clone(), value]);
        }
    }
    format.rows(&rows)
}

/// Parses `--subarray` (syntax in the module docs) against `schema`'s
/// dimensions.
pub fn parse_subarray(schema: &ArraySchema, text: &str) -> Result<Subarray, CliError> {
    let dims = &schema.domain.dimensions;
    let entries: Vec<&str> = text.split(';').collect();
    if entries.len() > dims.len() {
        return Err(CliError::Usage(format!(
            "--subarray {text:?}: {} entries for {} dimensions",
            entries.len(),
            dims.len()
        )));
    }
    let mut subarray = Subarray::new(dims.len());
    for (i, (entry, dim)) in entries.iter().zip(dims).enumerate() {
        let what = format!("--subarray: dimension {}", dim.name);
        for range in parse_ranges(dim.datatype, dim.is_var(), &what, entry)? {
            subarray.add_range(i, range);
        }
    }
    Ok(subarray)
}

/// `--label NAME=RANGES`: the label's name and its ranges (RANGES as one
/// `--subarray` entry: `lo:hi` or one value, separated by `,`).
pub fn parse_label(schema: &ArraySchema, text: &str) -> Result<(String, Vec<Range>), CliError> {
    let (name, entry) = text.split_once('=').ok_or_else(|| {
        CliError::Usage(format!(
            "--label {text:?}: give NAME=RANGES, e.g. time=0.5:2.5"
        ))
    })?;
    let label =
        tdb::label::find(schema, name).map_err(|e| CliError::Usage(format!("--label: {e}")))?;
    let var = label.cell_val_num == tdb_schema::VAR_NUM;
    let ranges = parse_ranges(label.datatype, var, &format!("--label {name}"), entry)?;
    if ranges.is_empty() {
        return Err(CliError::Usage(format!(
            "--label {name}: give at least one range"
        )));
    }
    Ok((name.to_owned(), ranges))
}

/// The ranges of one `--subarray` entry (empty for `*` or nothing) of a
/// field of `datatype`; `what` names it in errors.
fn parse_ranges(
    datatype: Datatype,
    var: bool,
    what: &str,
    entry: &str,
) -> Result<Vec<Range>, CliError> {
    let entry = entry.trim();
    if entry.is_empty() || entry == "*" {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for range in entry.split(',') {
        let (lo, hi) = range.split_once(':').unwrap_or((range, range));
        let bound = |s: &str| -> Result<Value, CliError> {
            let value = if datatype.is_string() {
                Value::String(s.to_owned())
            } else {
                number(s.trim())
            };
            values::to_bytes(datatype, &value)
                .map(|_| value)
                .map_err(|e| CliError::Usage(format!("{what}: {e}")))
        };
        out.push(
            values::range(datatype, var, &bound(lo)?, &bound(hi)?)
                .map_err(|e| CliError::Usage(format!("{what}: {e}")))?,
        );
    }
    Ok(out)
}

/// A number as JSON would read it (an integer when it is one), else the
/// text as a string, which the value decoder then refuses with its reason.
fn number(s: &str) -> Value {
    if let Ok(i) = s.parse::<i64>() {
        return Value::from(i);
    }
    if let Ok(u) = s.parse::<u64>() {
        return Value::from(u);
    }
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() => Value::from(f),
        _ => Value::String(s.to_owned()),
    }
}

/// Runs `spec` on `array` and prints the results to `out`: CSV batch by
/// batch as they come, JSON once the read is done. Returns the number of
/// cells.
pub fn export<S: tdb::Storage>(
    array: &tdb::Array<S>,
    spec: ReadSpec,
    format: Format,
    out: &mut (dyn Write + Send),
    progress: &mut dyn FnMut(u64),
) -> Result<u64, CliError> {
    let fields = spec.fields.clone();
    let io = CliError::output;
    match format {
        Format::Csv => {
            // The header goes out with the first batch, so a read that
            // fails at once prints nothing on stdout.
            let mut batches = array.read(spec)?;
            let first = batches.next().transpose()?;
            write_csv_header(&fields, out).map_err(io)?;
            let mut cells = 0;
            for batch in first.map(Ok).into_iter().chain(batches) {
                let batch = batch?;
                write_csv_rows(&batch, out).map_err(io)?;
                cells += batch.num_cells;
                progress(batch.num_cells);
            }
            out.flush().map_err(io)?;
            Ok(cells)
        }
        Format::Json => {
            let mut all = Batch::default();
            for batch in array.read(spec)? {
                let batch = batch?;
                progress(batch.num_cells);
                all.append(&batch);
            }
            write_json(&all, out).map_err(io)?;
            Ok(all.num_cells)
        }
        #[cfg(feature = "sql")]
        Format::Arrow => crate::arrow_ipc::export(array, spec, out, progress),
        #[cfg(feature = "sql")]
        Format::Parquet => crate::parquet_files::export(array, spec, out, progress),
        #[cfg(not(feature = "sql"))]
        Format::Arrow | Format::Parquet => Err(no_arrow()),
    }
}

/// What [`export`] prints for a read of no cell: `fields` (of `schema`)
/// with nothing in them.
pub fn export_nothing<S: tdb::Storage>(
    array: &tdb::Array<S>,
    fields: &[String],
    format: Format,
    out: &mut (dyn Write + Send),
) -> Result<(), CliError> {
    let io = CliError::output;
    let schema = array.schema();
    match format {
        Format::Csv => write_csv_header(fields, out).map_err(io)?,
        #[cfg(feature = "sql")]
        Format::Arrow => {
            use tdb_arrow::ArrowArray;
            let schema = array
                .arrow_schema(fields)
                .map_err(|e| CliError::Usage(e.to_string()))?;
            datafusion::arrow::ipc::writer::FileWriter::try_new(&mut *out, &schema)
                .and_then(|mut w| w.finish())
                .map_err(|e| CliError::Output(e.to_string()))?;
        }
        #[cfg(feature = "sql")]
        Format::Parquet => crate::parquet_files::export_nothing(array, fields, out)?,
        #[cfg(not(feature = "sql"))]
        Format::Arrow | Format::Parquet => return Err(no_arrow()),
        Format::Json => {
            let buffers = fields
                .iter()
                .map(|name| {
                    let (datatype, cell_val_num, nullable) = schema
                        .domain
                        .dimensions
                        .iter()
                        .find(|d| &d.name == name)
                        .map(|d| (d.datatype, d.cell_val_num, false))
                        .or_else(|| {
                            let a = schema.attributes.iter().find(|a| &a.name == name)?;
                            Some((a.datatype, a.cell_val_num, a.nullable))
                        })
                        .ok_or_else(|| CliError::Usage(format!("no field named {name:?}")))?;
                    Ok(tdb::FieldBuffer::new(
                        name,
                        datatype,
                        cell_val_num,
                        nullable,
                    ))
                })
                .collect::<Result<Vec<_>, CliError>>()?;
            let mut nothing = Batch::default();
            nothing.fields = buffers;
            write_json(&nothing, out).map_err(io)?;
        }
    }
    out.flush().map_err(io)
}

/// The JSON form of a result, on one line.
pub fn write_json(batch: &Batch, out: &mut dyn Write) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, &values::batch(batch))?;
    writeln!(out)
}

/// A CSV writer over `out`: fields quoted only where RFC 4180 needs it
/// (`,`, `"`, line breaks; a lone empty field, so its row is not blank),
/// rows ended by `\n`. The same crate reads what `tdb import` takes.
fn csv_writer(out: &mut dyn Write) -> csv::Writer<&mut dyn Write> {
    csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(out)
}

/// The CSV header row.
pub fn write_csv_header(fields: &[String], out: &mut dyn Write) -> std::io::Result<()> {
    let mut w = csv_writer(out);
    w.write_record(fields)?;
    w.flush()
}

/// One CSV row per cell of `batch`.
pub fn write_csv_rows(batch: &Batch, out: &mut dyn Write) -> std::io::Result<()> {
    let columns: Vec<_> = batch.fields.iter().map(|f| f.column()).collect();
    let mut w = csv_writer(out);
    let mut row = Vec::with_capacity(columns.len());
    for i in 0..batch.num_cells as usize {
        row.clear();
        for c in &columns {
            row.push(if c.is_null(i) {
                String::new()
            } else {
                values::text(c.datatype, c.cell_val_num, c.cell(i))
            });
        }
        w.write_record(&row)?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb::{Datatype, FieldBuffer, VAR_NUM};

    fn batch() -> Batch {
        let mut d = FieldBuffer::new("d", Datatype::Int32, 1, false);
        d.data = [1i32, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut s = FieldBuffer::new("s", Datatype::StringUtf8, VAR_NUM, true);
        s.data = b"ab,\"c\"".to_vec();
        s.offsets = Some(vec![0, 2, 6]);
        s.validity = Some(vec![1, 1, 0].into());
        let mut v = FieldBuffer::new("v", Datatype::Float64, 2, false);
        v.data = [0.5f64, -0.0, f64::NAN, 1.0, 2.0, 3.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut b = Batch::default();
        b.num_cells = 3;
        b.fields = vec![d, s, v];
        b
    }

    #[test]
    fn csv_rows_join_values_quote_text_and_leave_nulls_empty() {
        let mut out = Vec::new();
        let fields: Vec<String> = ["d", "s", "v"].map(String::from).to_vec();
        write_csv_header(&fields, &mut out).unwrap();
        write_csv_rows(&batch(), &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "d,s,v\n1,ab,0.5 -0.0\n2,\",\"\"c\"\"\",NaN 1.0\n3,,2.0 3.0\n"
        );
    }

    #[test]
    fn a_row_of_one_null_field_is_not_blank() {
        let mut s = FieldBuffer::new("s", Datatype::StringUtf8, VAR_NUM, true);
        s.push(b"x", true);
        s.push(b"", false);
        let mut b = Batch::default();
        b.num_cells = 2;
        b.fields = vec![s];
        let mut out = Vec::new();
        write_csv_rows(&b, &mut out).unwrap();
        // A blank line would be skipped by CSV readers, losing the cell.
        assert_eq!(String::from_utf8(out).unwrap(), "x\n\"\"\n");
    }

    #[test]
    fn json_is_the_conformance_result_shape() {
        let mut out = Vec::new();
        write_json(&batch(), &mut out).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["num_cells"], 3);
        assert_eq!(
            v["fields"]["s"]["data"],
            serde_json::json!(["ab", ",\"c\"", ""])
        );
        assert_eq!(v["fields"]["s"]["validity"], serde_json::json!([1, 1, 0]));
        assert_eq!(v["fields"]["s"]["cell_val_num"], 4294967295u64);
        assert_eq!(v["fields"]["v"]["data"][1], serde_json::json!(["NaN", 1.0]));
        assert!(v["fields"]["d"].get("validity").is_none());
    }

    #[test]
    fn formats_are_named() {
        assert_eq!(Format::from_name("csv").unwrap(), Format::Csv);
        assert!(Format::from_name("xml").is_err());
    }
}
