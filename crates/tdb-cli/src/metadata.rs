//! `tdb metadata`: metadata values typed on the command line.

use crate::CliError;
use serde_json::Value;
use tdb_format::Datatype;
use tdb_fragment::MetadataValue;

/// A metadata value from `text` (JSON: a number, a list of numbers, a
/// string, `{"b64": ...}`; anything else is taken as a string) stored as
/// `datatype`, or, without one, as TileDB-Py stores Python values: INT64
/// for integers, FLOAT64 for other numbers, STRING_UTF8 for text.
pub fn parse_value(text: &str, datatype: Option<&str>) -> Result<MetadataValue, CliError> {
    let value: Value = serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into()));
    let datatype = match datatype {
        Some(name) => Datatype::from_name(&name.to_ascii_uppercase())
            .map_err(|_| CliError::Usage(format!("--type {name}: not a TileDB datatype")))?,
        None => infer(&value)?,
    };
    let bytes = crate::values::to_bytes(datatype, &value)
        .map_err(|e| CliError::Usage(format!("value {text}: {e}")))?;
    // Whole values of the datatype: `MetadataValue::new` refuses others.
    let n = u32::try_from(bytes.len() as u64 / datatype.size().max(1))
        .map_err(|_| CliError::Usage(format!("value {text}: too many values")))?;
    Ok(MetadataValue::new(datatype, n, bytes)?)
}

fn infer(value: &Value) -> Result<Datatype, CliError> {
    let numbers: Vec<&Value> = match value {
        Value::Array(v) => v.iter().collect(),
        Value::Number(_) => vec![value],
        Value::String(_) => return Ok(Datatype::StringUtf8),
        Value::Object(_) => return Ok(Datatype::Blob),
        other => {
            return Err(CliError::Usage(format!(
                "value {other}: give --type for it"
            )))
        }
    };
    if numbers.iter().all(|n| n.is_i64()) {
        Ok(Datatype::Int64)
    } else if numbers.iter().all(|n| n.is_number()) {
        Ok(Datatype::Float64)
    } else {
        Err(CliError::Usage(format!(
            "value {value}: a list of numbers, a number or a string"
        )))
    }
}

/// Metadata entries as rows (key, datatype, value count, value) for
/// `--format table` or `csv`: a string value as its text, any other as its
/// JSON.
pub fn rows(entries: &[crate::inspect::MetadataReport], format: crate::OutputFormat) -> String {
    let mut rows = vec![vec![
        "key".to_owned(),
        "datatype".to_owned(),
        "value_num".to_owned(),
        "value".to_owned(),
    ]];
    for e in entries {
        let value = match &e.value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        rows.push(vec![
            e.key.clone(),
            e.datatype.to_owned(),
            e.value_num.to_string(),
            value,
        ]);
    }
    format.rows(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_take_tiledb_pys_types_unless_told() {
        let v = parse_value("[1, -2]", None).unwrap();
        assert_eq!((v.datatype, v.value_num), (Datatype::Int64, 2));
        let v = parse_value("1.5", None).unwrap();
        assert_eq!(v.datatype, Datatype::Float64);
        let v = parse_value("hello world", None).unwrap();
        assert_eq!(
            (v.datatype, v.bytes.as_slice()),
            (Datatype::StringUtf8, &b"hello world"[..])
        );
        let v = parse_value("7", Some("uint8")).unwrap();
        assert_eq!(
            (v.datatype, v.bytes.as_slice()),
            (Datatype::UInt8, &[7u8][..])
        );
        assert!(parse_value("300", Some("uint8")).is_err());
        assert!(parse_value("1", Some("nope")).is_err());
        assert!(parse_value("true", None).is_err());
    }
}
