//! Result buffers into Arrow arrays: the bytes move, they are not copied,
//! wherever the layouts agree (fixed-width values; var-length text and
//! bytes, whose start offsets gain their end; validity a read packed as
//! bits). Booleans and validity bytes become bitmaps; var-length numbers get offsets counted in values; UTF-16
//! and UTF-32 text is transcoded to UTF-8.

use crate::{Error, Result};
use arrow_array::{make_array, ArrayRef};
use arrow_buffer::{BooleanBuffer, Buffer};
use arrow_data::{ArrayData, ArrayDataBuilder};
use arrow_schema::DataType;
use tdb_format::Datatype;
use tdb_query::{FieldBuffer, Validity, VAR_NUM};
use tdb_schema::Enumeration;

/// One field's cells as the reader gives them.
pub(crate) struct Cells {
    /// Cells.
    pub len: usize,
    /// Fixed-size cells back to back, or var-size cells' bytes.
    pub data: Vec<u8>,
    /// Var-size cells: each one's start in `data`.
    pub offsets: Option<Vec<u64>>,
    /// Which cells are valid.
    pub validity: Option<Validity>,
}

impl Cells {
    pub(crate) fn from_buffer(buffer: FieldBuffer, len: usize) -> Self {
        Cells {
            len,
            data: buffer.data,
            offsets: buffer.offsets,
            validity: buffer.validity,
        }
    }
}

/// An enumeration's values as [`Cells`] (to read them into Arrow with the
/// reader's own conversion).
pub(crate) fn enumeration_cells(e: &Enumeration) -> Result<Cells> {
    let values = e
        .values()
        .map_err(|err| Error::field(&e.name, format!("enumeration values: {err}")))?;
    let mut data = Vec::with_capacity(e.data.len());
    let mut offsets = (e.cell_val_num == VAR_NUM).then(|| Vec::with_capacity(values.len()));
    for v in &values {
        if let Some(o) = &mut offsets {
            o.push(data.len() as u64);
        }
        data.extend_from_slice(v);
    }
    Ok(Cells {
        len: values.len(),
        data,
        offsets,
        validity: None,
    })
}

/// One cell of a field of `datatype` × `cell_val_num` as a one-row array
/// of its [`crate::mapping`] (a bound, a statistic, a literal).
pub fn cell_array(
    name: &str,
    datatype: Datatype,
    cell_val_num: u32,
    bytes: &[u8],
) -> Result<ArrayRef> {
    let cells = Cells {
        len: 1,
        data: bytes.to_vec(),
        offsets: (cell_val_num == VAR_NUM).then(|| vec![0]),
        validity: None,
    };
    let target = crate::mapping(datatype, cell_val_num).data_type;
    to_array(name, datatype, &target, cells, None)
}

/// The Arrow array of `cells` of a field `name` of `datatype` as
/// `target` (its [`crate::mapping`], or a dictionary whose values are
/// `dictionary`).
pub(crate) fn to_array(
    name: &str,
    datatype: Datatype,
    target: &DataType,
    cells: Cells,
    dictionary: Option<&ArrayData>,
) -> Result<ArrayRef> {
    Ok(make_array(to_data(
        name, datatype, target, cells, dictionary,
    )?))
}

fn to_data(
    name: &str,
    datatype: Datatype,
    target: &DataType,
    cells: Cells,
    dictionary: Option<&ArrayData>,
) -> Result<ArrayData> {
    let Cells {
        len,
        data,
        offsets,
        validity,
    } = cells;
    let mut nulls = validity
        .map(|v| {
            if v.len() != len {
                return Err(Error::field(
                    name,
                    format!("validity of {} cells for {len} cells", v.len()),
                ));
            }
            // A read's bitmap becomes the buffer without a copy; bytes
            // are packed first.
            let (bits, len) = v.into_bits().into_parts();
            Ok(BooleanBuffer::new(Buffer::from_vec(bits), 0, len))
        })
        .transpose()?;
    let builder = ArrayDataBuilder::new(target.clone()).len(len);
    // Text whose UTF-8 and offsets `utf8_strings` checked.
    let mut checked_utf8 = false;
    let ends = |offsets: Option<Vec<u64>>, end: usize| -> Result<Vec<u64>> {
        let mut o =
            offsets.ok_or_else(|| Error::field(name, "var-length cells without offsets"))?;
        if o.len() != len {
            return Err(Error::field(
                name,
                format!("{} offsets for {len} cells", o.len()),
            ));
        }
        o.push(end as u64);
        Ok(o)
    };
    let builder = match target {
        DataType::Boolean => builder.add_buffer(
            BooleanBuffer::collect_bool(len, |i| data.get(i).is_some_and(|b| *b != 0)).into_inner(),
        ),
        DataType::LargeUtf8 | DataType::LargeBinary => {
            let (data, offsets) = match datatype {
                Datatype::StringUtf16 | Datatype::StringUcs2 => {
                    transcode(name, &data, ends(offsets, data.len())?, 2)?
                }
                Datatype::StringUtf32 | Datatype::StringUcs4 => {
                    transcode(name, &data, ends(offsets, data.len())?, 4)?
                }
                _ => {
                    let o = ends(offsets, data.len())?;
                    (data, o)
                }
            };
            checked_utf8 = *target == DataType::LargeUtf8 && utf8_strings(&data, &offsets);
            builder
                .add_buffer(Buffer::from_vec(offsets))
                .add_buffer(Buffer::from_vec(data))
        }
        DataType::FixedSizeList(item, n) => {
            let n = usize::try_from(*n).unwrap_or(0);
            let values = Cells {
                len: len
                    .checked_mul(n)
                    .ok_or_else(|| Error::field(name, "too many values"))?,
                data,
                offsets: None,
                validity: None,
            };
            builder.add_child_data(to_data(name, datatype, item.data_type(), values, None)?)
        }
        DataType::LargeList(item) => {
            let size = datatype.size();
            let mut o = ends(offsets, data.len())?;
            for x in &mut o {
                if *x % size != 0 {
                    return Err(Error::field(
                        name,
                        format!("a cell offset {x} is no multiple of {size}-byte values"),
                    ));
                }
                *x /= size;
            }
            let values = Cells {
                len: data.len() / size as usize,
                data,
                offsets: None,
                validity: None,
            };
            builder
                .add_buffer(Buffer::from_vec(o))
                .add_child_data(to_data(name, datatype, item.data_type(), values, None)?)
        }
        DataType::Dictionary(keys, _) => {
            let values = dictionary
                .ok_or_else(|| Error::field(name, "an enumerated field without its values"))?;
            // A key that names no value (a dense array's fill) is null.
            let valid = {
                let in_range = key_in_range(keys, &data, values.len());
                BooleanBuffer::collect_bool(len, |i| {
                    in_range(i) && nulls.as_ref().is_none_or(|n| n.value(i))
                })
            };
            nulls = Some(valid);
            builder
                .add_buffer(Buffer::from_vec(data))
                .add_child_data(values.clone())
        }
        _ => builder.add_buffer(Buffer::from_vec(data)),
    };
    let builder = builder.nulls(nulls.map(Into::into)).align_buffers(true);
    if checked_utf8 {
        // SAFETY: what Arrow's validation of a LargeUtf8 array checks
        // holds. Two buffers: `len + 1` offsets (`ends` checked `len`
        // offsets, then appended the data's length) and the data; the
        // offsets rise from inside the data to its end, each on a
        // character boundary of data that is valid UTF-8
        // (`utf8_strings`), so every string is valid UTF-8; the nulls,
        // when present, were built from `len` validity bytes (checked
        // above). `build_unchecked` skips only that validation: it still
        // aligns the buffers.
        #[allow(unsafe_code)]
        let data = unsafe { builder.build_unchecked() };
        return Ok(data);
    }
    builder.build().map_err(|e| Error::arrow(name, e))
}

/// Whether `offsets` (start offsets, then the end) cut `data` into UTF-8
/// strings: the whole buffer valid UTF-8 and every offset rising, inside
/// it and on a character boundary. The same as Arrow's own check of a
/// string array, several times faster (simdutf8; a W4 read as Arrow spent
/// 7% more than the plain read in the standard library's check).
fn utf8_strings(data: &[u8], offsets: &[u64]) -> bool {
    let boundary = |o: u64| {
        usize::try_from(o).is_ok_and(|o| match data.get(o) {
            // Not a continuation byte (0b10xx_xxxx).
            Some(&b) => (b as i8) >= -0x40,
            None => o == data.len(),
        })
    };
    simdutf8::basic::from_utf8(data).is_ok()
        && offsets.windows(2).all(|w| w.first() <= w.last())
        && offsets.last().is_some_and(|&e| e == data.len() as u64)
        && offsets.iter().all(|&o| boundary(o))
}

/// Whether key `i` of `keys` (little-endian integers of type `keys`)
/// indexes one of `n` values.
fn key_in_range<'a>(keys: &DataType, data: &'a [u8], n: usize) -> impl Fn(usize) -> bool + 'a {
    let width = keys.primitive_width().unwrap_or(1);
    let signed = matches!(
        keys,
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64
    );
    move |i| {
        let Some(b) = data.get(i * width..(i + 1) * width) else {
            return false;
        };
        let mut le = [0u8; 16];
        le[..width].copy_from_slice(b);
        if signed && b[width - 1] & 0x80 != 0 {
            return false;
        }
        u128::from_le_bytes(le) < n as u128
    }
}

/// UTF-16 or UTF-32 cells (code units of `unit` bytes, little-endian) as
/// UTF-8 cells with their offsets.
fn transcode(
    name: &str,
    data: &[u8],
    offsets: Vec<u64>,
    unit: usize,
) -> Result<(Vec<u8>, Vec<u64>)> {
    let mut out = Vec::with_capacity(data.len());
    let mut out_offsets = Vec::with_capacity(offsets.len());
    out_offsets.push(0);
    for (i, w) in offsets.windows(2).enumerate() {
        let cell = data
            .get(w[0] as usize..w[1] as usize)
            .filter(|c| c.len() % unit == 0)
            .ok_or_else(|| Error::field(name, format!("cell {i}: bad offsets")))?;
        let bad = || Error::field(name, format!("cell {i}: not valid UTF-{}", unit * 8));
        let text: String = if unit == 2 {
            char::decode_utf16(
                cell.chunks_exact(2)
                    .map(|c| u16::from_le_bytes([c[0], c[1]])),
            )
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| bad())?
        } else {
            cell.chunks_exact(4)
                .map(|c| char::from_u32(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect::<Option<_>>()
                .ok_or_else(bad)?
        };
        out.extend_from_slice(text.as_bytes());
        out_offsets.push(out.len() as u64);
    }
    Ok((out, out_offsets))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, LargeStringArray};

    /// Text Arrow then takes unchecked is checked here: bad bytes and
    /// offsets inside a character, falling or short of the end are
    /// refused, and through the conversion they are errors, as Arrow's own
    /// check made them.
    #[test]
    fn text_is_checked_before_arrow_takes_it_unchecked() {
        // a (1 byte), é (2), € (3), 😀 (4), z (1).
        let ok = "aé€😀z".as_bytes();
        assert!(utf8_strings(ok, &[0, 1, 3, 6, 10, 11]));
        assert!(utf8_strings(b"", &[0, 0]));
        assert!(!utf8_strings(ok, &[0, 2, 11]), "inside é");
        assert!(!utf8_strings(ok, &[0, 3, 1, 11]), "falling");
        assert!(!utf8_strings(ok, &[0, 3]), "short of the end");
        assert!(!utf8_strings(ok, &[0, 12]), "past the end");
        assert!(!utf8_strings(&[b'a', 0xff], &[0, 2]), "not UTF-8");
        let cells = |data: &[u8], starts: Vec<u64>, validity: Option<Vec<u8>>| Cells {
            len: starts.len(),
            data: data.to_vec(),
            offsets: Some(starts),
            validity: validity.map(Validity::Bytes),
        };
        let text = |c| to_array("s", Datatype::StringUtf8, &DataType::LargeUtf8, c, None);
        let a = text(cells(ok, vec![0, 1, 3, 6, 10], None)).unwrap();
        let s = a.as_any().downcast_ref::<LargeStringArray>().unwrap();
        assert_eq!((s.len(), s.value(1), s.value(3)), (5, "é", "😀"));
        assert!(text(cells(ok, vec![0, 2], None)).is_err());
        assert!(text(cells(&[b'a', 0xff], vec![0], None)).is_err());
        // Nulls as before.
        let a = text(cells(b"xy", vec![0, 1], Some(vec![1, 0]))).unwrap();
        assert_eq!((a.null_count(), a.is_null(1)), (1, true));
    }
}
