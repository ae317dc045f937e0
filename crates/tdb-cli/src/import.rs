//! `tdb import`: cells from a file, written into an array as one fragment.
//!
//! The inputs are what `tdb export` prints. CSV: a header row naming the
//! fields (dimensions and attributes, any order), then one row per cell, a
//! cell as [`values::text`] shows it; an empty field of a nullable
//! attribute is null. JSON: the conformance result shape,
//! `{"fields": {name: {"data": [cells], "validity": [0/1]}}}` (other keys
//! are ignored). A sparse array takes cells in any order. A dense array
//! takes cells whose coordinates cover a box, each cell once: they are
//! written as that box's subarray.

use crate::values;
use serde_json::Value;
use std::io::Read;
use tdb::{ArraySchema, FieldBuffer, WriteSpec, VAR_NUM};

/// An empty buffer for the dimension or attribute `name` of `schema`.
fn buffer(schema: &ArraySchema, name: &str) -> Result<FieldBuffer, String> {
    FieldBuffer::for_field(schema, name).map_err(|_| {
        format!(
            "{name:?} is no dimension or attribute (there are: {})",
            schema.field_names()
        )
    })
}

/// Appends one cell's bytes to `b`, checking a fixed cell's size.
fn push(b: &mut FieldBuffer, bytes: &[u8], valid: bool) -> Result<(), String> {
    if b.cell_val_num != VAR_NUM {
        let size = b.cell_val_num as usize * b.datatype.size() as usize;
        if bytes.len() != size {
            return Err(format!(
                "{}: {} bytes, but a cell of {} holds {} values ({size} bytes)",
                b.name,
                bytes.len(),
                b.datatype.name(),
                b.cell_val_num
            ));
        }
    }
    b.push(bytes, valid);
    Ok(())
}

/// The cells of a CSV file, in file order, one buffer per column.
pub fn read_csv(schema: &ArraySchema, input: impl Read) -> Result<Vec<FieldBuffer>, String> {
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_reader(input);
    let header = reader.headers().map_err(|e| e.to_string())?.clone();
    let mut fields = header
        .iter()
        .map(|name| buffer(schema, name))
        .collect::<Result<Vec<_>, _>>()?;
    let mut record = csv::StringRecord::new();
    let mut row = 0u64;
    while reader.read_record(&mut record).map_err(|e| e.to_string())? {
        row += 1;
        let at = |e: String| format!("row {row}: {e}");
        if record.len() != fields.len() {
            return Err(at(format!(
                "{} fields, the header names {}",
                record.len(),
                fields.len()
            )));
        }
        for (b, text) in fields.iter_mut().zip(record.iter()) {
            if text.is_empty() && b.validity.is_some() {
                let null = vec![
                    0;
                    if b.offsets.is_some() {
                        0
                    } else {
                        b.column().cell_size()
                    }
                ];
                push(b, &null, false).map_err(at)?;
                continue;
            }
            let bytes =
                values::from_text(b.datatype, text).map_err(|e| at(format!("{}: {e}", b.name)))?;
            push(b, &bytes, true).map_err(at)?;
        }
    }
    Ok(fields)
}

/// The cells of a JSON result, one buffer per field it holds.
pub fn read_json(schema: &ArraySchema, text: &str) -> Result<Vec<FieldBuffer>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let given = v
        .get("fields")
        .and_then(Value::as_object)
        .ok_or("no \"fields\" object")?;
    let mut fields = Vec::new();
    for (name, f) in given {
        let mut b = buffer(schema, name)?;
        let data = f
            .get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{name}: no \"data\" list"))?;
        let validity = match (f.get("validity"), &b.validity) {
            (Some(Value::Array(v)), Some(_)) if v.len() == data.len() => Some(v),
            (None, _) => None,
            (Some(_), None) => return Err(format!("{name} is not nullable; drop its validity")),
            (Some(_), Some(_)) => {
                return Err(format!("{name}: validity must be a list as long as data"))
            }
        };
        for (i, cell) in data.iter().enumerate() {
            let at = |e: String| format!("{name} cell {i}: {e}");
            let valid = validity.is_none_or(|v| v[i].as_u64() != Some(0));
            let bytes = values::to_bytes(b.datatype, cell).map_err(at)?;
            push(&mut b, &bytes, valid).map_err(|e| format!("cell {i}: {e}"))?;
        }
        fields.push(b);
    }
    Ok(fields)
}

/// The write of `fields`: sparse arrays take them as they are (unordered);
/// dense arrays take the attributes laid out row-major over the box the
/// coordinates cover, which they must cover exactly once.
pub fn write_spec(schema: &ArraySchema, fields: Vec<FieldBuffer>) -> Result<WriteSpec, String> {
    WriteSpec::from_coordinates(schema, fields).map_err(|e| e.to_string())
}
