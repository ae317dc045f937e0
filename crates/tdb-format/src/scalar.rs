//! One value of a fixed-size datatype, decoded from its little-endian bytes,
//! so dumps and summaries print domains, extents and fill values the same way.

use crate::Datatype;
use std::fmt;

/// A decoded value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// BOOL.
    Bool(bool),
    /// Signed integers, datetimes, times.
    Int(i64),
    /// Unsigned integers.
    UInt(u64),
    /// FLOAT32 (widened) and FLOAT64.
    Float(f64),
}

impl Scalar {
    /// Decodes one value of `datatype` from `bytes` (its size, 1 to 8 bytes).
    /// `None` for datatypes without a numeric value (strings, blobs, ANY)
    /// or a byte count that is not the datatype's size.
    pub fn decode(datatype: Datatype, bytes: &[u8]) -> Option<Scalar> {
        let size = datatype.size() as usize;
        if bytes.len() != size || size > 8 || !Self::is_numeric(datatype) {
            return None;
        }
        let mut le = [0u8; 8];
        le.get_mut(..size)?.copy_from_slice(bytes);
        let raw = u64::from_le_bytes(le);
        // `size` is 1 to 8: the shift is 0 to 56.
        let shift = 64u32.saturating_sub((size as u32).saturating_mul(8));
        Some(if datatype.is_bool() {
            Scalar::Bool(raw != 0)
        } else if datatype.is_float() && size == 4 {
            Scalar::Float(f64::from(f32::from_bits(raw as u32)))
        } else if datatype.is_float() {
            Scalar::Float(f64::from_bits(raw))
        } else if datatype.is_signed() {
            Scalar::Int(((raw << shift) as i64) >> shift)
        } else {
            Scalar::UInt(raw)
        })
    }

    /// The value as `f64`, as C++'s `(double)` cast of it (integers past
    /// 2^53 rounded).
    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Int(v) => v as f64,
            Scalar::UInt(v) => v as f64,
            Scalar::Float(v) => v,
            Scalar::Bool(v) => f64::from(u8::from(v)),
        }
    }

    fn is_numeric(datatype: Datatype) -> bool {
        !(datatype.is_string() || datatype.is_blob() || datatype.is_geometry())
            && datatype != Datatype::Any
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(v) => write!(f, "{v}"),
            Scalar::UInt(v) => write!(f, "{v}"),
            Scalar::Float(v) => write!(f, "{v:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_by_class_and_width() {
        assert_eq!(
            Scalar::decode(Datatype::Int8, &[0xff]),
            Some(Scalar::Int(-1))
        );
        assert_eq!(
            Scalar::decode(Datatype::UInt16, &[0xff, 0xff]),
            Some(Scalar::UInt(65535))
        );
        assert_eq!(
            Scalar::decode(Datatype::Float32, &1.5f32.to_le_bytes()),
            Some(Scalar::Float(1.5))
        );
        assert_eq!(
            Scalar::decode(Datatype::Bool, &[1]),
            Some(Scalar::Bool(true))
        );
        assert_eq!(
            Scalar::decode(Datatype::DatetimeMs, &(-3i64).to_le_bytes()),
            Some(Scalar::Int(-3))
        );
        assert_eq!(Scalar::decode(Datatype::StringAscii, b"a"), None);
        assert_eq!(Scalar::decode(Datatype::Int32, &[1, 2]), None);
        assert_eq!(Scalar::Float(2.0).to_string(), "2.0");
    }
}
