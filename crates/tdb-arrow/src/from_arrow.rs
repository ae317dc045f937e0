//! Arrow arrays into a field's write buffer: the cells of one TileDB
//! dimension or attribute, whatever Arrow type holds them among the ones
//! that mean the same values.
//!
//! Accepted for a field, beside its own [`crate::mapping`]: the other
//! string, binary and list widths (`Utf8`, `Utf8View`, `Binary`, `List`,
//! ...); `Int64` for any 64-bit datetime or time (raw counts); `Date32`
//! for DATETIME_DAY, `Date64` for DATETIME_MS, `Time32` for TIME_SEC and
//! TIME_MS (widened); timestamps with a time zone (instants are UTC);
//! dictionaries, whose values replace their keys, or, for an enumerated
//! attribute, are looked up among the enumeration's values.

use crate::mapping::mapping;
use crate::{Error, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::{ArrowDictionaryKeyType, Int16Type, Int32Type, Int64Type, Int8Type};
use arrow_array::types::{UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{Array, ArrayRef};
use arrow_buffer::{ArrowNativeType, Buffer};
use arrow_schema::{DataType, TimeUnit};
use std::collections::HashMap;
use tdb_format::Datatype;
use tdb_query::{FieldBuffer, VAR_NUM};
use tdb_schema::Enumeration;

/// A TileDB field as a write sees it.
pub(crate) struct Target<'a> {
    pub name: &'a str,
    pub datatype: Datatype,
    pub cell_val_num: u32,
    pub nullable: bool,
    /// An enumerated attribute's values.
    pub enumeration: Option<&'a Enumeration>,
}

/// The write buffer of `target` holding `array`'s cells.
pub(crate) fn from_array(target: &Target<'_>, array: &dyn Array) -> Result<FieldBuffer> {
    let name = target.name;
    // (An enumerated field's nulls are checked with its keys: below.)
    let enumerated =
        target.enumeration.is_some() && matches!(array.data_type(), DataType::Dictionary(..));
    if !target.nullable && !enumerated {
        if let Some(i) = (0..array.len()).find(|i| array.is_null(*i)) {
            return Err(Error::field(
                name,
                format!("row {i} is null, and the field is not nullable"),
            ));
        }
    }
    let mut out = FieldBuffer::new(name, target.datatype, target.cell_val_num, target.nullable);
    if let DataType::Dictionary(..) = array.data_type() {
        return from_dictionary(target, array, out);
    }
    let cells = cells_of(name, target.datatype, target.cell_val_num, array)?;
    let n = array.len();
    for i in 0..n {
        let valid = !array.is_null(i);
        // A null cell still takes a value's room in fixed-size fields.
        let cell = cells.cell(i);
        out.push(cell, valid);
    }
    Ok(out)
}

/// A dictionary column: for an enumerated attribute, its keys become the
/// enumeration's indexes of the values they name; otherwise its values
/// replace its keys.
fn from_dictionary(
    target: &Target<'_>,
    array: &dyn Array,
    mut out: FieldBuffer,
) -> Result<FieldBuffer> {
    let name = target.name;
    let (keys, raw, values) = dictionary_parts(array).ok_or_else(|| {
        Error::field(name, format!("{} keys are not integers", array.data_type()))
    })?;
    let null_key = |i: usize| array.is_null(i);
    match target.enumeration {
        None => {
            let values = cells_of(name, target.datatype, target.cell_val_num, values.as_ref())?;
            for (i, k) in keys.iter().enumerate() {
                let cell = match (null_key(i), k) {
                    (true, _) => values.zero(),
                    (false, Some(k)) => values.get(*k).ok_or_else(|| bad_key(name, i))?,
                    (false, None) => return Err(bad_key(name, i)),
                };
                out.push(cell, !null_key(i));
            }
        }
        Some(e) => {
            let values = cells_of(name, e.datatype, e.cell_val_num, values.as_ref())?;
            let enumerated = enumeration_index(name, e)?;
            let width = target.datatype.size() as usize;
            for (i, (k, raw)) in keys.iter().zip(&raw).enumerate() {
                let index = if null_key(i) {
                    if target.nullable {
                        0
                    } else if k.is_none_or(|k| k >= values.len()) {
                        // A key that names no value, read as null (a dense
                        // array's fill): written back as it was.
                        *raw
                    } else {
                        return Err(Error::field(
                            name,
                            format!("row {i} is null, and the field is not nullable"),
                        ));
                    }
                } else {
                    let v = k
                        .and_then(|k| values.get(k))
                        .ok_or_else(|| bad_key(name, i))?;
                    *enumerated.get(v).ok_or_else(|| {
                        Error::field(
                            name,
                            format!(
                                "row {i}: {:?} is not a value of enumeration {:?} (extend it first)",
                                String::from_utf8_lossy(v),
                                e.name
                            ),
                        )
                    })? as u64
                };
                let le = index.to_le_bytes();
                out.push(&le[..width.min(8)], !null_key(i));
            }
        }
    }
    Ok(out)
}

fn bad_key(name: &str, i: usize) -> Error {
    Error::field(name, format!("row {i}: a dictionary key past its values"))
}

/// An enumeration's values and their indexes.
fn enumeration_index<'e>(name: &str, e: &'e Enumeration) -> Result<HashMap<&'e [u8], usize>> {
    let values = e
        .values()
        .map_err(|err| Error::field(name, format!("enumeration {:?}: {err}", e.name)))?;
    let mut index = HashMap::new();
    for (i, v) in values.into_iter().enumerate() {
        index.entry(v).or_insert(i);
    }
    Ok(index)
}

/// A dictionary's keys as indexes (`None` for negative ones) and as the
/// bits they hold (sign-extended), and its values.
type DictionaryParts = (Vec<Option<usize>>, Vec<u64>, ArrayRef);

fn dictionary_parts(array: &dyn Array) -> Option<DictionaryParts> {
    fn parts<K: ArrowDictionaryKeyType>(array: &dyn Array) -> Option<DictionaryParts> {
        let d = array.as_dictionary_opt::<K>()?;
        let keys = d.keys().values();
        let indexes = keys.iter().map(|k| k.to_usize()).collect();
        let raw = keys.iter().map(|k| k.as_usize() as u64).collect();
        Some((indexes, raw, d.values().clone()))
    }
    match array.data_type() {
        DataType::Dictionary(k, _) => match k.as_ref() {
            DataType::Int8 => parts::<Int8Type>(array),
            DataType::Int16 => parts::<Int16Type>(array),
            DataType::Int32 => parts::<Int32Type>(array),
            DataType::Int64 => parts::<Int64Type>(array),
            DataType::UInt8 => parts::<UInt8Type>(array),
            DataType::UInt16 => parts::<UInt16Type>(array),
            DataType::UInt32 => parts::<UInt32Type>(array),
            DataType::UInt64 => parts::<UInt64Type>(array),
            _ => None,
        },
        _ => None,
    }
}

/// One field's cells, read from an Arrow array without copying.
pub(crate) enum ArrowCells<'a> {
    /// `width` bytes per cell (Arrow's buffer, shared).
    Fixed { data: Buffer, width: usize },
    /// Cells of their own lengths.
    Var(Vec<&'a [u8]>),
    /// Cells re-encoded (booleans, transcoded text, widened numbers).
    Owned(Vec<u8>, Vec<usize>),
}

impl ArrowCells<'_> {
    fn len(&self) -> usize {
        match self {
            ArrowCells::Fixed { data, width } => data.len() / (*width).max(1),
            ArrowCells::Var(v) => v.len(),
            ArrowCells::Owned(_, ends) => ends.len(),
        }
    }

    fn get(&self, i: usize) -> Option<&[u8]> {
        match self {
            ArrowCells::Fixed { data, width } => data.as_slice().get(i * width..(i + 1) * width),
            ArrowCells::Var(v) => v.get(i).copied(),
            ArrowCells::Owned(data, ends) => {
                let start = if i == 0 { 0 } else { *ends.get(i - 1)? };
                data.get(start..*ends.get(i)?)
            }
        }
    }

    fn cell(&self, i: usize) -> &[u8] {
        self.get(i).unwrap_or(&[])
    }

    /// A cell of zeros, for a null fixed-size cell.
    fn zero(&self) -> &'static [u8] {
        const ZEROS: [u8; 64] = [0; 64];
        match self {
            ArrowCells::Fixed { width, .. } => ZEROS.get(..*width).unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// The cells of `array` for a field of `datatype` × `cell_val_num`.
pub(crate) fn cells_of<'a>(
    name: &str,
    datatype: Datatype,
    cell_val_num: u32,
    array: &'a dyn Array,
) -> Result<ArrowCells<'a>> {
    let expected = mapping(datatype, cell_val_num).data_type;
    let got = array.data_type();
    let refuse = || {
        Error::field(
            name,
            format!(
                "Arrow's {got} does not hold {} × {} cells (expected {expected})",
                datatype.name(),
                if cell_val_num == VAR_NUM {
                    "var".to_owned()
                } else {
                    cell_val_num.to_string()
                }
            ),
        )
    };
    let size = datatype.size() as usize;
    let var = cell_val_num == VAR_NUM;
    let cells = match got {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            if var && matches!(expected, DataType::LargeUtf8) =>
        {
            // A null cell keeps the bytes under it, as TileDB does.
            let text: Vec<&str> = match got {
                DataType::Utf8 => {
                    let a = array.as_string::<i32>();
                    (0..a.len()).map(|i| a.value(i)).collect()
                }
                DataType::LargeUtf8 => {
                    let a = array.as_string::<i64>();
                    (0..a.len()).map(|i| a.value(i)).collect()
                }
                _ => {
                    let a = array.as_string_view();
                    (0..a.len()).map(|i| a.value(i)).collect()
                }
            };
            match datatype {
                Datatype::StringUtf16 | Datatype::StringUcs2 => encode(
                    text.iter()
                        .map(|s| s.encode_utf16().flat_map(u16::to_le_bytes)),
                ),
                Datatype::StringUtf32 | Datatype::StringUcs4 => encode(
                    text.iter()
                        .map(|s| s.chars().flat_map(|c| u32::from(c).to_le_bytes())),
                ),
                _ => ArrowCells::Var(text.into_iter().map(str::as_bytes).collect()),
            }
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView
            if var && matches!(expected, DataType::LargeBinary | DataType::LargeUtf8) =>
        {
            let bytes: Vec<&[u8]> = match got {
                DataType::Binary => {
                    let a = array.as_binary::<i32>();
                    (0..a.len()).map(|i| a.value(i)).collect()
                }
                DataType::LargeBinary => {
                    let a = array.as_binary::<i64>();
                    (0..a.len()).map(|i| a.value(i)).collect()
                }
                _ => {
                    let a = array.as_binary_view();
                    (0..a.len()).map(|i| a.value(i)).collect()
                }
            };
            if matches!(
                datatype,
                Datatype::StringUtf16
                    | Datatype::StringUcs2
                    | Datatype::StringUtf32
                    | Datatype::StringUcs4
            ) {
                return Err(refuse());
            }
            ArrowCells::Var(bytes)
        }
        DataType::FixedSizeBinary(w) if Some(*w) == fixed_width(&expected) => ArrowCells::Fixed {
            data: fixed_bytes(array, *w as usize).ok_or_else(refuse)?,
            width: *w as usize,
        },
        DataType::Boolean if matches!(expected, DataType::Boolean) => {
            let a = array.as_boolean();
            let data: Vec<u8> = a.values().iter().map(u8::from).collect();
            let ends = (1..=data.len()).collect();
            ArrowCells::Owned(data, ends)
        }
        DataType::FixedSizeList(_, n) if matches!(&expected, DataType::FixedSizeList(_, m) if m == n) =>
        {
            let a = array.as_fixed_size_list();
            let values = a.values();
            if values.null_count() > 0 {
                return Err(Error::field(name, "a list holds a null value"));
            }
            let inner = cells_of(name, datatype, 1, values.as_ref())?;
            let n = *n as usize;
            let mut data = Vec::with_capacity(inner.len() * size);
            for i in 0..inner.len() {
                data.extend_from_slice(inner.cell(i));
            }
            let ends = (1..=a.len()).map(|i| i * n * size).collect();
            ArrowCells::Owned(data, ends)
        }
        DataType::List(_) | DataType::LargeList(_)
            if var && matches!(expected, DataType::LargeList(_)) =>
        {
            let (values, offsets): (ArrayRef, Vec<usize>) = match got {
                DataType::List(_) => {
                    let a = array.as_list::<i32>();
                    (
                        a.values().clone(),
                        a.value_offsets().iter().map(|o| *o as usize).collect(),
                    )
                }
                _ => {
                    let a = array.as_list::<i64>();
                    (
                        a.values().clone(),
                        a.value_offsets().iter().map(|o| *o as usize).collect(),
                    )
                }
            };
            let first = offsets.first().copied().unwrap_or(0);
            let last = offsets.last().copied().unwrap_or(0);
            let values = values.slice(first, last - first);
            if values.null_count() > 0 {
                return Err(Error::field(name, "a list holds a null value"));
            }
            let inner = cells_of(name, datatype, 1, values.as_ref())?;
            let mut data = Vec::with_capacity(inner.len() * size);
            for i in 0..inner.len() {
                data.extend_from_slice(inner.cell(i));
            }
            let ends = offsets.iter().skip(1).map(|o| (o - first) * size).collect();
            ArrowCells::Owned(data, ends)
        }
        _ if cell_val_num == 1 && same_values(datatype, &expected, got) => {
            let width = got.primitive_width().ok_or_else(refuse)?;
            let bytes = fixed_bytes(array, width).ok_or_else(refuse)?;
            if width == size {
                ArrowCells::Fixed { data: bytes, width }
            } else if width == 4 && size == 8 {
                // Date32 and Time32: widened to TileDB's 64-bit counts.
                let data: Vec<u8> = bytes
                    .chunks_exact(4)
                    .flat_map(|c| {
                        i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])).to_le_bytes()
                    })
                    .collect();
                let ends = (1..=array.len()).map(|i| i * 8).collect();
                ArrowCells::Owned(data, ends)
            } else {
                return Err(refuse());
            }
        }
        _ => return Err(refuse()),
    };
    if cells.len() != array.len() {
        return Err(Error::field(
            name,
            format!("{} cells in an array of {}", cells.len(), array.len()),
        ));
    }
    Ok(cells)
}

/// The values of a fixed-width array (`width` bytes each), its slice of
/// Arrow's buffer: shared, not copied.
fn fixed_bytes(array: &dyn Array, width: usize) -> Option<Buffer> {
    let data = array.to_data();
    let start = data.offset().checked_mul(width)?;
    let len = data.len().checked_mul(width)?;
    let buffer = data.buffers().first()?;
    (start.checked_add(len)? <= buffer.len()).then(|| buffer.slice_with_length(start, len))
}

fn fixed_width(t: &DataType) -> Option<i32> {
    match t {
        DataType::FixedSizeBinary(w) => Some(*w),
        _ => None,
    }
}

fn encode<I: Iterator<Item = u8>>(cells: impl Iterator<Item = I>) -> ArrowCells<'static> {
    let mut data = Vec::new();
    let mut ends = Vec::new();
    for c in cells {
        data.extend(c);
        ends.push(data.len());
    }
    ArrowCells::Owned(data, ends)
}

/// Whether a one-value cell of `got` holds the value a field of `datatype`
/// (mapped to `expected`) stores.
fn same_values(datatype: Datatype, expected: &DataType, got: &DataType) -> bool {
    if got == expected {
        return true;
    }
    let is_64 = datatype.size() == 8 && (datatype.is_datetime() || datatype.is_time());
    match (datatype, got) {
        (_, DataType::Int64) if is_64 => true,
        (Datatype::DatetimeDay, DataType::Date32) | (Datatype::DatetimeMs, DataType::Date64) => {
            true
        }
        (Datatype::TimeSec, DataType::Time32(TimeUnit::Second))
        | (Datatype::TimeMs, DataType::Time32(TimeUnit::Millisecond)) => true,
        (_, DataType::Timestamp(unit, Some(_))) => {
            matches!(expected, DataType::Timestamp(u, None) if u == unit)
        }
        _ => false,
    }
}
