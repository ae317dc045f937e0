//! Typed views of raw little-endian values: ordering for any dimension
//! datatype, and integer arithmetic for dense dimensions.

use std::cmp::Ordering;
use tdb_format::Datatype;

/// The ordering of single values of `datatype` (TileDB's `<` on the type;
/// strings byte-lexicographic; NaN compares equal to everything).
pub(crate) fn value_cmp(datatype: Datatype) -> fn(&[u8], &[u8]) -> Ordering {
    use Datatype::*;
    macro_rules! num {
        ($t:ty) => {
            |a: &[u8], b: &[u8]| {
                let x = a.try_into().map(<$t>::from_le_bytes);
                let y = b.try_into().map(<$t>::from_le_bytes);
                match (x, y) {
                    (Ok(x), Ok(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
                    _ => a.cmp(b),
                }
            }
        };
    }
    match datatype {
        Int8 => num!(i8),
        UInt8 | Bool => num!(u8),
        Int16 => num!(i16),
        UInt16 => num!(u16),
        Int32 => num!(i32),
        UInt32 => num!(u32),
        Int64 => num!(i64),
        UInt64 => num!(u64),
        Float32 => num!(f32),
        Float64 => num!(f64),
        dt if dt.is_datetime() || dt.is_time() => num!(i64),
        _ => |a: &[u8], b: &[u8]| a.cmp(b),
    }
}

/// An integer value (dense dimensions: integers, datetimes, times).
pub(crate) fn int_value(datatype: Datatype, b: &[u8]) -> Option<i128> {
    use Datatype::*;
    Some(match datatype {
        Int8 => i8::from_le_bytes(b.try_into().ok()?) as i128,
        UInt8 => u8::from_le_bytes(b.try_into().ok()?) as i128,
        Int16 => i16::from_le_bytes(b.try_into().ok()?) as i128,
        UInt16 => u16::from_le_bytes(b.try_into().ok()?) as i128,
        Int32 => i32::from_le_bytes(b.try_into().ok()?) as i128,
        UInt32 => u32::from_le_bytes(b.try_into().ok()?) as i128,
        UInt64 => u64::from_le_bytes(b.try_into().ok()?) as i128,
        Int64 => i64::from_le_bytes(b.try_into().ok()?) as i128,
        dt if dt.is_datetime() || dt.is_time() => i64::from_le_bytes(b.try_into().ok()?) as i128,
        _ => return None,
    })
}

/// The bytes of integer `v` in `datatype` (the inverse of [`int_value`]).
pub(crate) fn int_bytes(datatype: Datatype, v: i128, out: &mut Vec<u8>) {
    let size = datatype.size() as usize;
    out.extend_from_slice(&v.to_le_bytes()[..size]);
}

/// The number of `f64` tiles from `lo` a float value lies in.
pub(crate) fn float_value(datatype: Datatype, b: &[u8]) -> Option<f64> {
    match datatype {
        Datatype::Float32 => Some(f32::from_le_bytes(b.try_into().ok()?) as f64),
        Datatype::Float64 => Some(f64::from_le_bytes(b.try_into().ok()?)),
        _ => None,
    }
}
