//! Query results read as Arrow record batches, in the conformance format's
//! shape (`{"num_cells", "fields": {name: {datatype, cell_val_num, data,
//! validity?}}}`), for `cargo xtask conformance --arrow`.
//!
//! Each cell is read through Arrow's typed accessors (a `Date32` as days,
//! a string as `&str`) and turned back into the bytes TileDB stores, so a
//! mapping that changed a value's meaning shows as a difference; only the
//! last step, bytes to JSON, is the shared value codec.

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use serde_json::{json, Map, Value};
use tdb::Datatype;
use tdb_cli::values;

/// A whole read (its record batches, in order) as a query result. Validity
/// is shown for the fields `schema` makes nullable (an enumerated
/// attribute's Arrow field is nullable whatever TileDB's is).
pub fn result(
    batches: &[RecordBatch],
    names: &[String],
    schema: &tdb::ArraySchema,
) -> Result<Value, String> {
    let mut fields = Map::new();
    let mut num_cells = 0usize;
    for b in batches {
        num_cells += b.num_rows();
    }
    for (i, name) in names.iter().enumerate() {
        let mut data = Vec::with_capacity(num_cells);
        let mut validity = Vec::new();
        let mut shape = None;
        for b in batches {
            let field = b.schema().field(i).clone();
            if field.name() != name {
                return Err(format!("column {i} is {:?}, not {name:?}", field.name()));
            }
            let (datatype, cvn) = tdb_arrow::tiledb_type(&field).map_err(|e| e.to_string())?;
            let column = b.column(i);
            let nullable = schema.attribute(name).is_some_and(|a| a.nullable);
            for row in 0..column.len() {
                let bytes = cell_bytes(column.as_ref(), row, datatype)
                    .map_err(|e| format!("{name} row {row}: {e}"))?;
                data.push(values::cell(datatype, cvn, &bytes));
                if nullable {
                    validity.push(u8::from(column.is_valid(row)));
                }
            }
            shape = Some((datatype, cvn, nullable));
        }
        let mut o = Map::new();
        if let Some((datatype, cvn, nullable)) = shape {
            o.insert("datatype".into(), json!(datatype.name()));
            o.insert("cell_val_num".into(), json!(cvn));
            if nullable {
                o.insert("validity".into(), json!(validity));
            }
        }
        o.insert("data".into(), Value::Array(data));
        fields.insert(name.clone(), Value::Object(o));
    }
    Ok(json!({"num_cells": num_cells, "fields": fields}))
}

/// The bytes TileDB stores for cell `row` of `array`, a field of
/// `datatype`.
fn cell_bytes(array: &dyn Array, row: usize, datatype: Datatype) -> Result<Vec<u8>, String> {
    macro_rules! prim {
        ($t:ty) => {
            array.as_primitive::<$t>().value(row).to_le_bytes().to_vec()
        };
    }
    Ok(match array.data_type() {
        DataType::Int8 => prim!(Int8Type),
        DataType::UInt8 => prim!(UInt8Type),
        DataType::Int16 => prim!(Int16Type),
        DataType::UInt16 => prim!(UInt16Type),
        DataType::Int32 => prim!(Int32Type),
        DataType::UInt32 => prim!(UInt32Type),
        DataType::Int64 => prim!(Int64Type),
        DataType::UInt64 => prim!(UInt64Type),
        DataType::Float32 => prim!(Float32Type),
        DataType::Float64 => prim!(Float64Type),
        DataType::Boolean => vec![u8::from(array.as_boolean().value(row))],
        DataType::Timestamp(TimeUnit::Second, _) => prim!(TimestampSecondType),
        DataType::Timestamp(TimeUnit::Millisecond, _) => prim!(TimestampMillisecondType),
        DataType::Timestamp(TimeUnit::Microsecond, _) => prim!(TimestampMicrosecondType),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => prim!(TimestampNanosecondType),
        DataType::Duration(TimeUnit::Second) => prim!(DurationSecondType),
        DataType::Duration(TimeUnit::Millisecond) => prim!(DurationMillisecondType),
        DataType::Time64(TimeUnit::Microsecond) => prim!(Time64MicrosecondType),
        DataType::Time64(TimeUnit::Nanosecond) => prim!(Time64NanosecondType),
        DataType::LargeUtf8 => {
            let s = array.as_string::<i64>().value(row);
            match datatype {
                Datatype::StringUtf16 | Datatype::StringUcs2 => {
                    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
                }
                Datatype::StringUtf32 | Datatype::StringUcs4 => {
                    s.chars().flat_map(|c| u32::from(c).to_le_bytes()).collect()
                }
                _ => s.as_bytes().to_vec(),
            }
        }
        DataType::LargeBinary => array.as_binary::<i64>().value(row).to_vec(),
        DataType::FixedSizeBinary(_) => array.as_fixed_size_binary().value(row).to_vec(),
        DataType::FixedSizeList(..) => {
            list_bytes(array.as_fixed_size_list().value(row).as_ref(), datatype)?
        }
        DataType::LargeList(_) => list_bytes(array.as_list::<i64>().value(row).as_ref(), datatype)?,
        DataType::Dictionary(..) => {
            let keys = array
                .as_any_dictionary_opt()
                .ok_or("a dictionary without keys")?
                .keys();
            cell_bytes(keys, row, datatype)?
        }
        t => return Err(format!("no TileDB cell is read as Arrow's {t}")),
    })
}

fn list_bytes(values: &dyn Array, datatype: Datatype) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for i in 0..values.len() {
        out.extend(cell_bytes(values, i, datatype)?);
    }
    Ok(out)
}
