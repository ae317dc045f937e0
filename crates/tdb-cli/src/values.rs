//! The conformance format's value encoding (`/work/shared/conformance/FORMAT.md`,
//! "Value encoding") in both directions, in one place: cells to JSON for
//! schema fills, metadata, query results (`tdb schema --json`,
//! `tdb inspect --json`, `tdb export`, `cargo xtask conformance`), and JSON
//! back to raw little-endian bytes for subarray bounds.
//!
//! - integers, datetimes, times: JSON integers (full 64-bit range);
//! - BOOL: `true`/`false`;
//! - floats: shortest round-trip numbers (FLOAT32 widened exactly), `"NaN"`,
//!   `"Infinity"`, `"-Infinity"`, and `-0.0` kept;
//! - CHAR/STRING_ASCII/STRING_UTF8: one string per cell, `{"b64": ...}` when
//!   not UTF-8; BLOB, GEOM_*, ANY and UTF-16/32 strings always base64;
//! - a non-string cell is a scalar when `cell_val_num` is 1, else a list.

use serde_json::{json, Map, Value};
use tdb::{AggregateValue, Batch, FieldBuffer};
use tdb_format::{Datatype, Scalar};
use tdb_schema::Range;

/// One cell of `datatype` with `cell_val_num` values (or `u32::MAX`:
/// var-length).
pub fn cell(datatype: Datatype, cell_val_num: u32, bytes: &[u8]) -> Value {
    if is_text(datatype) {
        return match std::str::from_utf8(bytes) {
            Ok(s) => json!(s),
            Err(_) => b64(bytes),
        };
    }
    if !is_numeric(datatype) {
        return b64(bytes);
    }
    let size = datatype.size() as usize;
    let values: Vec<Value> = bytes.chunks(size).map(|c| scalar(datatype, c)).collect();
    if cell_val_num == 1 && values.len() == 1 {
        values.into_iter().next().unwrap_or(Value::Null)
    } else {
        Value::Array(values)
    }
}

/// A metadata value: numbers always as a list, strings as one string,
/// blobs (and non-UTF-8 strings) as base64.
pub fn metadata_value(v: &tdb_fragment::MetadataValue) -> Value {
    match v.scalars() {
        Some(values) => Value::Array(values.into_iter().map(scalar_json).collect()),
        None => cell(v.datatype, 1, &v.bytes),
    }
}

/// One aggregate answer of a field of `datatype` (`cell_val_num` values
/// per cell): counts and integer sums as integers, float sums and means as
/// floats, min/max as a cell; `null` where the answer is undefined.
pub fn aggregate(datatype: Datatype, cell_val_num: u32, value: Option<&AggregateValue>) -> Value {
    match value {
        None => Value::Null,
        Some(AggregateValue::Count(n)) | Some(AggregateValue::UInt(n)) => json!(n),
        Some(AggregateValue::Int(n)) => json!(n),
        Some(AggregateValue::Float(f)) => scalar_json(Scalar::Float(*f)),
        Some(AggregateValue::Cell(bytes)) => cell(datatype, cell_val_num, bytes),
    }
}

/// Datatypes whose cells are one JSON string.
fn is_text(datatype: Datatype) -> bool {
    matches!(
        datatype,
        Datatype::Char | Datatype::StringAscii | Datatype::StringUtf8
    )
}

/// Datatypes whose cells are lists of numbers (or booleans).
fn is_numeric(datatype: Datatype) -> bool {
    !(datatype.is_string() || datatype.is_blob() || datatype.is_geometry())
        && datatype != Datatype::Any
}

fn scalar(datatype: Datatype, b: &[u8]) -> Value {
    Scalar::decode(datatype, b).map_or_else(|| b64(b), scalar_json)
}

/// One decoded value.
pub fn scalar_json(s: Scalar) -> Value {
    match s {
        Scalar::Bool(v) => json!(v),
        Scalar::Int(v) => json!(v),
        Scalar::UInt(v) => json!(v),
        Scalar::Float(v) => float(v),
    }
}

fn float(f: f64) -> Value {
    if f.is_nan() {
        json!("NaN")
    } else if f.is_infinite() {
        json!(if f > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        json!(f)
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn b64(bytes: &[u8]) -> Value {
    let mut s = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(B64[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                s.push('=');
            }
        }
    }
    json!({ "b64": s })
}

fn b64_decode(s: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u32> = s
        .trim_end_matches('=')
        .bytes()
        .map(|c| {
            B64.iter()
                .position(|&a| a == c)
                .map(|p| p as u32)
                .ok_or_else(|| format!("{s:?} is not base64"))
        })
        .collect::<Result<_, _>>()?;
    if digits.len() % 4 == 1 {
        return Err(format!("{s:?} is not base64 (length)"));
    }
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for group in digits.chunks(4) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, d)| n | (d << (18 - 6 * i)));
        for i in 0..group.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    Ok(out)
}

/// One field's results in the shape of a query `result`'s field:
/// `{datatype, cell_val_num, data: [cells], validity?: [0/1]}`.
pub fn field(buf: &FieldBuffer) -> Value {
    let column = buf.column();
    let data: Vec<Value> = (0..column.len())
        .map(|i| cell(buf.datatype, buf.cell_val_num, column.cell(i)))
        .collect();
    let mut o = Map::new();
    o.insert("datatype".into(), json!(buf.datatype.name()));
    o.insert("cell_val_num".into(), json!(buf.cell_val_num));
    o.insert("data".into(), Value::Array(data));
    if let Some(v) = &buf.validity {
        o.insert(
            "validity".into(),
            json!(v.iter().map(u8::from).collect::<Vec<_>>()),
        );
    }
    Value::Object(o)
}

/// A query result: `{"num_cells": N, "fields": {name: field}}`.
pub fn batch(batch: &Batch) -> Value {
    let fields: Map<String, Value> = batch
        .fields
        .iter()
        .map(|f| (f.name.clone(), field(f)))
        .collect();
    json!({"num_cells": batch.num_cells, "fields": fields})
}

/// The raw little-endian bytes of one cell of `datatype` given in the value
/// encoding: a scalar or a list of scalars for numbers, a string (its bytes)
/// or `{"b64": ...}` for strings and blobs. The inverse of [`cell`].
pub fn to_bytes(datatype: Datatype, value: &Value) -> Result<Vec<u8>, String> {
    if let Some(b) = value.get("b64") {
        let s = b.as_str().ok_or("b64 must be a string")?;
        return b64_decode(s);
    }
    if is_text(datatype) || !is_numeric(datatype) {
        return match value {
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            other => Err(format!(
                "{} takes a string or {{\"b64\": ...}}, not {other}",
                datatype.name()
            )),
        };
    }
    match value {
        Value::Array(values) => {
            let mut out = Vec::new();
            for v in values {
                out.extend(number_bytes(datatype, v)?);
            }
            Ok(out)
        }
        v => number_bytes(datatype, v),
    }
}

/// A cell as one line of text, as CSV shows it: strings as they are,
/// blobs (and strings that are not UTF-8) base64, the values of numeric
/// cells joined by single spaces.
pub fn text(datatype: Datatype, cell_val_num: u32, bytes: &[u8]) -> String {
    fn flat(v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Array(items) => items.iter().map(flat).collect::<Vec<_>>().join(" "),
            Value::Object(o) => o.get("b64").map(flat).unwrap_or_default(),
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }
    flat(&cell(datatype, cell_val_num, bytes))
}

/// The bytes of one cell given as [`text`] shows it (strings are taken as
/// they are, never as base64).
pub fn from_text(datatype: Datatype, text: &str) -> Result<Vec<u8>, String> {
    if is_text(datatype) {
        return Ok(text.as_bytes().to_vec());
    }
    if !is_numeric(datatype) {
        return to_bytes(datatype, &json!({ "b64": text }));
    }
    let values = text
        .split_whitespace()
        .map(|t| serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_owned())))
        .collect();
    to_bytes(datatype, &Value::Array(values))
}

/// One number of a numeric datatype, checked against its range (integers
/// must fit exactly; FLOAT32 values are narrowed as TileDB-Py's numpy does).
fn number_bytes(datatype: Datatype, v: &Value) -> Result<Vec<u8>, String> {
    let size = datatype.size() as usize;
    let bad = || format!("{v} is not a {} value", datatype.name());
    if datatype.is_bool() {
        return Ok(vec![u8::from(v.as_bool().ok_or_else(bad)?)]);
    }
    if datatype.is_float() {
        let f = match v {
            Value::String(s) => match s.as_str() {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                _ => return Err(bad()),
            },
            _ => v.as_f64().ok_or_else(bad)?,
        };
        return Ok(if size == 4 {
            (f as f32).to_le_bytes().to_vec()
        } else {
            f.to_le_bytes().to_vec()
        });
    }
    let bits = if datatype.is_signed() {
        let i = v.as_i64().ok_or_else(bad)?;
        let shift = 64 - 8 * size as u32;
        if size < 8 && (i << shift) >> shift != i {
            return Err(format!("{i} is out of range for {}", datatype.name()));
        }
        i as u64
    } else {
        let u = v.as_u64().ok_or_else(bad)?;
        if size < 8 && u >> (8 * size) != 0 {
            return Err(format!("{u} is out of range for {}", datatype.name()));
        }
        u
    };
    Ok(bits.to_le_bytes()[..size].to_vec())
}

/// A subarray range `[lo, hi]` of a dimension of `datatype` (var-size when
/// `var`), bounds in the value encoding.
pub fn range(datatype: Datatype, var: bool, lo: &Value, hi: &Value) -> Result<Range, String> {
    Ok(Range::from_bounds(
        &to_bytes(datatype, lo)?,
        &to_bytes(datatype, hi)?,
        var,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb::VAR_NUM;

    #[test]
    fn cells_round_trip_through_json() {
        let cases: &[(Datatype, u32, Vec<u8>)] = &[
            (Datatype::Int8, 1, vec![0xff]),
            (Datatype::UInt64, 1, u64::MAX.to_le_bytes().to_vec()),
            (
                Datatype::Int64,
                2,
                [i64::MIN.to_le_bytes(), 7i64.to_le_bytes()].concat(),
            ),
            (Datatype::Float64, 1, (-0.0f64).to_le_bytes().to_vec()),
            (Datatype::Float32, 1, 0.1f32.to_le_bytes().to_vec()),
            (
                Datatype::Float64,
                1,
                f64::NEG_INFINITY.to_le_bytes().to_vec(),
            ),
            (Datatype::Bool, 1, vec![1]),
            (Datatype::DatetimeMs, 1, (-3i64).to_le_bytes().to_vec()),
            (Datatype::StringUtf8, VAR_NUM, "héllo".as_bytes().to_vec()),
            (Datatype::StringAscii, VAR_NUM, vec![0xff, 0x00]),
            (Datatype::Blob, VAR_NUM, vec![1, 2, 3, 4]),
            (Datatype::Int32, VAR_NUM, vec![]),
        ];
        for (dt, cvn, bytes) in cases {
            let v = cell(*dt, *cvn, bytes);
            assert_eq!(&to_bytes(*dt, &v).unwrap(), bytes, "{dt:?} {v}");
        }
        assert_eq!(
            cell(Datatype::Float64, 1, &(-0.0f64).to_le_bytes()).to_string(),
            "-0.0"
        );
        assert_eq!(
            cell(Datatype::Float32, 1, &f32::NAN.to_le_bytes()),
            json!("NaN")
        );
        assert_eq!(cell(Datatype::Blob, VAR_NUM, b"ab"), json!({"b64": "YWI="}));
        assert_eq!(cell(Datatype::Int32, VAR_NUM, &[]), json!([]));
        // A NaN's payload is not kept by the encoding; its class is.
        let nan = to_bytes(Datatype::Float64, &json!("NaN")).unwrap();
        assert!(f64::from_le_bytes(nan.try_into().unwrap()).is_nan());
    }

    #[test]
    fn cells_round_trip_through_text() {
        let cases: &[(Datatype, u32, Vec<u8>)] = &[
            (Datatype::Int16, 1, (-7i16).to_le_bytes().to_vec()),
            (
                Datatype::Float64,
                3,
                [0.5f64, f64::INFINITY, -0.0]
                    .iter()
                    .flat_map(|f| f.to_le_bytes())
                    .collect(),
            ),
            (Datatype::Bool, 2, vec![1, 0]),
            (Datatype::UInt8, VAR_NUM, vec![]),
            (
                Datatype::StringUtf8,
                VAR_NUM,
                "a b,\"c\"".as_bytes().to_vec(),
            ),
            (Datatype::Blob, VAR_NUM, vec![0, 255, 7]),
        ];
        for (dt, cvn, bytes) in cases {
            let t = text(*dt, *cvn, bytes);
            assert_eq!(&from_text(*dt, &t).unwrap(), bytes, "{dt:?} {t:?}");
        }
        assert_eq!(text(Datatype::Int32, 2, &[1, 0, 0, 0, 2, 0, 0, 0]), "1 2");
        assert!(from_text(Datatype::Int8, "1 x").is_err());
        assert!(from_text(Datatype::UInt8, "256").is_err());
    }

    #[test]
    fn bounds_are_checked_against_the_datatype() {
        assert_eq!(
            to_bytes(Datatype::Int16, &json!(-2)).unwrap(),
            vec![0xfe, 0xff]
        );
        assert!(to_bytes(Datatype::Int8, &json!(200)).is_err());
        assert!(to_bytes(Datatype::UInt8, &json!(-1)).is_err());
        assert!(to_bytes(Datatype::Int32, &json!(1.5)).is_err());
        assert!(to_bytes(Datatype::StringAscii, &json!(3)).is_err());
        assert!(to_bytes(Datatype::Blob, &json!({"b64": "!!"})).is_err());
        let r = range(Datatype::StringAscii, true, &json!("a"), &json!("bc")).unwrap();
        assert_eq!(r.bounds(), (&b"a"[..], &b"bc"[..]));
    }
}
