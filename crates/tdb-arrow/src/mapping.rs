//! The type mapping: which Arrow type holds each TileDB field, whether it
//! says everything the TileDB type says, and the way back.
//!
//! A mapping keeps the bits wherever Arrow has a type of the same width and
//! meaning, so a read hands its buffers to Arrow without copying them. Where
//! Arrow has no such type (datetimes in years, months, weeks, days, hours,
//! minutes or below nanoseconds; times in hours, minutes or below
//! nanoseconds), the raw count stays an `Int64`: Arrow's 32-bit dates and
//! times cannot hold every 64-bit count, TileDB's fill value `INT64_MIN`
//! among them. Those mappings, and the ones that change a cell's meaning
//! (CHAR cells as bytes, since TileDB never checks they are text; UCS-2 and
//! UCS-4 transcoded; fixed-size strings as bytes; geometries; ANY), are
//! marked inexact; every field carries its TileDB type
//! in its metadata, so writing it back restores the type exactly.

use crate::{Error, Result};
use arrow_schema::{DataType, Field, TimeUnit};
use std::collections::HashMap;
use std::sync::Arc;
use tdb_format::Datatype;
use tdb_query::VAR_NUM;

/// Field metadata key: the TileDB datatype's name (`INT32`, `DATETIME_DAY`).
pub const DATATYPE_KEY: &str = "tiledb.datatype";
/// Field metadata key: values per cell, or `var`.
pub const CELL_VAL_NUM_KEY: &str = "tiledb.cell_val_num";
/// Field metadata key: the enumeration an attribute's keys index.
pub const ENUMERATION_KEY: &str = "tiledb.enumeration";
/// Field metadata key: `true` on dimensions.
pub const DIMENSION_KEY: &str = "tiledb.dimension";

/// The Arrow type of one TileDB field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// The Arrow type its cells take.
    pub data_type: DataType,
    /// Whether Arrow's type means what TileDB's does for every value; when
    /// false, only the field metadata tells the TileDB type.
    pub exact: bool,
}

/// What one value (or, for strings and bytes, one cell) of a datatype is in
/// Arrow.
enum Unit {
    /// A fixed-width value: a cell of several is a list of them.
    Value(DataType, bool),
    /// Text: a var-length cell is one string.
    Text(bool),
    /// Bytes: a var-length cell is one binary value.
    Bytes(bool),
}

fn unit(datatype: Datatype) -> Unit {
    use Datatype as D;
    let exact = |t| Unit::Value(t, true);
    let raw = Unit::Value(DataType::Int64, false);
    match datatype {
        D::Int8 => exact(DataType::Int8),
        D::UInt8 => exact(DataType::UInt8),
        D::Int16 => exact(DataType::Int16),
        D::UInt16 => exact(DataType::UInt16),
        D::Int32 => exact(DataType::Int32),
        D::UInt32 => exact(DataType::UInt32),
        D::Int64 => exact(DataType::Int64),
        D::UInt64 => exact(DataType::UInt64),
        D::Float32 => exact(DataType::Float32),
        D::Float64 => exact(DataType::Float64),
        D::Bool => exact(DataType::Boolean),
        D::DatetimeSec => exact(DataType::Timestamp(TimeUnit::Second, None)),
        D::DatetimeMs => exact(DataType::Timestamp(TimeUnit::Millisecond, None)),
        D::DatetimeUs => exact(DataType::Timestamp(TimeUnit::Microsecond, None)),
        D::DatetimeNs => exact(DataType::Timestamp(TimeUnit::Nanosecond, None)),
        D::TimeSec => exact(DataType::Duration(TimeUnit::Second)),
        D::TimeMs => exact(DataType::Duration(TimeUnit::Millisecond)),
        D::TimeUs => exact(DataType::Time64(TimeUnit::Microsecond)),
        D::TimeNs => exact(DataType::Time64(TimeUnit::Nanosecond)),
        D::DatetimeYear
        | D::DatetimeMonth
        | D::DatetimeWeek
        | D::DatetimeDay
        | D::DatetimeHr
        | D::DatetimeMin
        | D::DatetimePs
        | D::DatetimeFs
        | D::DatetimeAs
        | D::TimeHr
        | D::TimeMin
        | D::TimePs
        | D::TimeFs
        | D::TimeAs => raw,
        D::StringAscii | D::StringUtf8 | D::StringUtf16 | D::StringUtf32 => Unit::Text(true),
        D::StringUcs2 | D::StringUcs4 | D::GeomWkt => Unit::Text(false),
        D::Blob => Unit::Bytes(true),
        // TileDB calls CHAR text but checks nothing: its cells are bytes.
        D::Char | D::GeomWkb | D::Any => Unit::Bytes(false),
    }
}

/// The list items of multi-value cells: never null (TileDB has no null
/// values inside a cell).
pub(crate) fn item_field(data_type: DataType) -> Arc<Field> {
    Arc::new(Field::new("item", data_type, false))
}

/// The Arrow type of a field of `datatype` with `cell_val_num` values per
/// cell ([`VAR_NUM`] for var-length cells).
pub fn mapping(datatype: Datatype, cell_val_num: u32) -> Mapping {
    let var = cell_val_num == VAR_NUM;
    let (data_type, exact) = match unit(datatype) {
        Unit::Value(t, exact) => match cell_val_num {
            1 => (t, exact),
            VAR_NUM => (DataType::LargeList(item_field(t)), exact),
            n => (
                DataType::FixedSizeList(item_field(t), fixed_width(n)),
                exact,
            ),
        },
        Unit::Text(exact) if var => (DataType::LargeUtf8, exact),
        Unit::Bytes(exact) if var => (DataType::LargeBinary, exact),
        // A fixed-size string is so many bytes, padding and all.
        Unit::Text(_) => (fixed_bytes(datatype, cell_val_num), false),
        Unit::Bytes(exact) => (fixed_bytes(datatype, cell_val_num), exact),
    };
    Mapping { data_type, exact }
}

fn fixed_width(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn fixed_bytes(datatype: Datatype, cell_val_num: u32) -> DataType {
    let bytes = u64::from(cell_val_num).saturating_mul(datatype.size());
    DataType::FixedSizeBinary(i32::try_from(bytes).unwrap_or(i32::MAX))
}

/// The Arrow field of an array's dimension or attribute: its mapping, its
/// nullability (dimensions never; enumerated attributes always, since a key
/// that names no value reads as null) and its TileDB type in metadata.
///
/// `enumeration` gives an enumerated attribute's values (their datatype
/// and cell_val_num): its cells become dictionary keys into them.
pub(crate) fn field(
    name: &str,
    datatype: Datatype,
    cell_val_num: u32,
    nullable: bool,
    dimension: bool,
    enumeration: Option<(&str, Datatype, u32)>,
) -> Result<Field> {
    let mut metadata = HashMap::from([
        (DATATYPE_KEY.to_owned(), datatype.name().to_owned()),
        (CELL_VAL_NUM_KEY.to_owned(), cell_val_num_text(cell_val_num)),
    ]);
    if dimension {
        metadata.insert(DIMENSION_KEY.to_owned(), "true".to_owned());
    }
    let (data_type, nullable) = match enumeration {
        Some((enum_name, values_type, values_cvn)) => {
            metadata.insert(ENUMERATION_KEY.to_owned(), enum_name.to_owned());
            let keys = mapping(datatype, cell_val_num).data_type;
            if !keys.is_dictionary_key_type() {
                return Err(Error::field(
                    name,
                    format!(
                        "an enumeration's keys must be one integer per cell, not {} × {}",
                        datatype.name(),
                        cell_val_num_text(cell_val_num)
                    ),
                ));
            }
            let values = mapping(values_type, values_cvn).data_type;
            (DataType::Dictionary(Box::new(keys), Box::new(values)), true)
        }
        None => (mapping(datatype, cell_val_num).data_type, nullable),
    };
    Ok(Field::new(name, data_type, nullable).with_metadata(metadata))
}

fn cell_val_num_text(cell_val_num: u32) -> String {
    if cell_val_num == VAR_NUM {
        "var".to_owned()
    } else {
        cell_val_num.to_string()
    }
}

/// The TileDB datatype and cell_val_num an Arrow field is stored as: its
/// metadata's when it has them (a field tdb made), else the type whose
/// mapping its Arrow type is (dictionaries: their keys'). Arrow types no
/// TileDB type holds are refused.
pub fn tiledb_type(field: &Field) -> Result<(Datatype, u32)> {
    let meta = field.metadata();
    if let Some(name) = meta.get(DATATYPE_KEY) {
        let datatype = Datatype::from_name(name)
            .map_err(|_| Error::field(field.name(), format!("unknown TileDB datatype {name:?}")))?;
        let cvn = match meta.get(CELL_VAL_NUM_KEY).map(String::as_str) {
            None => 1,
            Some("var") => VAR_NUM,
            Some(n) => n.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                Error::field(field.name(), format!("cell_val_num {n:?} is not a count"))
            })?,
        };
        return Ok((datatype, cvn));
    }
    let unsupported = || {
        Error::field(
            field.name(),
            format!("no TileDB type holds Arrow's {}", field.data_type()),
        )
    };
    let value =
        |t: &DataType| -> Result<Datatype> {
            Ok(match t {
                DataType::Int8 => Datatype::Int8,
                DataType::UInt8 => Datatype::UInt8,
                DataType::Int16 => Datatype::Int16,
                DataType::UInt16 => Datatype::UInt16,
                DataType::Int32 => Datatype::Int32,
                DataType::UInt32 => Datatype::UInt32,
                DataType::Int64 => Datatype::Int64,
                DataType::UInt64 => Datatype::UInt64,
                DataType::Float32 => Datatype::Float32,
                DataType::Float64 => Datatype::Float64,
                DataType::Boolean => Datatype::Bool,
                DataType::Timestamp(unit, _) => match unit {
                    TimeUnit::Second => Datatype::DatetimeSec,
                    TimeUnit::Millisecond => Datatype::DatetimeMs,
                    TimeUnit::Microsecond => Datatype::DatetimeUs,
                    TimeUnit::Nanosecond => Datatype::DatetimeNs,
                },
                DataType::Date32 => Datatype::DatetimeDay,
                DataType::Date64 => Datatype::DatetimeMs,
                DataType::Time32(TimeUnit::Second) | DataType::Duration(TimeUnit::Second) => {
                    Datatype::TimeSec
                }
                DataType::Time32(TimeUnit::Millisecond)
                | DataType::Duration(TimeUnit::Millisecond) => Datatype::TimeMs,
                DataType::Time64(TimeUnit::Microsecond)
                | DataType::Duration(TimeUnit::Microsecond) => Datatype::TimeUs,
                DataType::Time64(TimeUnit::Nanosecond)
                | DataType::Duration(TimeUnit::Nanosecond) => Datatype::TimeNs,
                _ => return Err(unsupported()),
            })
        };
    Ok(match field.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            (Datatype::StringUtf8, VAR_NUM)
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            (Datatype::Blob, VAR_NUM)
        }
        DataType::FixedSizeBinary(n) => (
            Datatype::Blob,
            u32::try_from(*n)
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(unsupported)?,
        ),
        DataType::FixedSizeList(item, n) => (
            value(item.data_type())?,
            u32::try_from(*n)
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(unsupported)?,
        ),
        DataType::List(item) | DataType::LargeList(item) => (value(item.data_type())?, VAR_NUM),
        DataType::Dictionary(keys, _) => (value(keys)?, 1),
        t => (value(t)?, 1),
    })
}
