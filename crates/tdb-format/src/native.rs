//! The one map from datatypes to the Rust types their values are computed
//! in: the C++ type TileDB's own type switches pick (`int8_t` … `double`;
//! CHAR as `char`, signed on every platform TileDB ships for; BOOL as
//! `uint8_t`; every DATETIME_* and TIME_* as `int64_t`). Code generic over
//! [`NativeType`] runs on a datatype through [`with_native!`](crate::with_native),
//! so the datatype is matched once, outside the loops over values.
//!
//! A layer whose TileDB rule differs for some datatype (strings read byte by
//! byte by a filter, say) says so before it asks for the native type.

use crate::Datatype;

/// The Rust type of a fixed-size numeric datatype's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Native {
    /// `i8` (INT8, CHAR).
    I8,
    /// `u8` (UINT8, BOOL).
    U8,
    /// `i16`.
    I16,
    /// `u16`.
    U16,
    /// `i32`.
    I32,
    /// `u32`.
    U32,
    /// `i64` (INT64, DATETIME_*, TIME_*).
    I64,
    /// `u64`.
    U64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

impl Native {
    /// Bytes of one value.
    pub const fn size(self) -> usize {
        match self {
            Native::I8 | Native::U8 => 1,
            Native::I16 | Native::U16 => 2,
            Native::I32 | Native::U32 | Native::F32 => 4,
            Native::I64 | Native::U64 | Native::F64 => 8,
        }
    }

    /// Signed integers.
    pub const fn is_signed_int(self) -> bool {
        matches!(self, Native::I8 | Native::I16 | Native::I32 | Native::I64)
    }

    /// `f32` and `f64`.
    pub const fn is_float(self) -> bool {
        matches!(self, Native::F32 | Native::F64)
    }
}

impl Datatype {
    /// The Rust type this datatype's values are computed in; `None` for
    /// strings but CHAR, BLOB, geometries and ANY, which are bytes.
    pub const fn native(self) -> Option<Native> {
        use Datatype::*;
        Some(match self {
            Int8 | Char => Native::I8,
            UInt8 | Bool => Native::U8,
            Int16 => Native::I16,
            UInt16 => Native::U16,
            Int32 => Native::I32,
            UInt32 => Native::U32,
            Int64 => Native::I64,
            UInt64 => Native::U64,
            Float32 => Native::F32,
            Float64 => Native::F64,
            d if d.is_datetime() || d.is_time() => Native::I64,
            _ => return None,
        })
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type a [`Native`] names.
pub trait NativeType: Copy + PartialOrd + Default + Send + Sync + sealed::Sealed + 'static {
    /// Which one it is.
    const NATIVE: Native;
    /// Bytes of one value.
    const SIZE: usize;
    /// The smallest value (for floats the lowest finite one, C++'s
    /// `numeric_limits::lowest`).
    const LOWEST: Self;
    /// The largest (finite) value.
    const MAX: Self;
    /// Reads a value from the front of `bytes`; bytes short of
    /// [`Self::SIZE`] read as zeros (as TileDB reads the NUL of an empty
    /// string), bytes past it are ignored.
    fn read_le(bytes: &[u8]) -> Self;
    /// Appends the value's little-endian bytes.
    fn put_le(self, out: &mut Vec<u8>);
}

macro_rules! native_type {
    ($($t:ty => $n:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl NativeType for $t {
            const NATIVE: Native = Native::$n;
            const SIZE: usize = std::mem::size_of::<$t>();
            const LOWEST: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
            #[inline(always)]
            fn read_le(bytes: &[u8]) -> Self {
                // The common case, a whole value, is one load.
                if let Some(le) = bytes.first_chunk::<{ std::mem::size_of::<$t>() }>() {
                    return <$t>::from_le_bytes(*le);
                }
                let mut le = [0u8; std::mem::size_of::<$t>()];
                for (d, s) in le.iter_mut().zip(bytes) {
                    *d = *s;
                }
                <$t>::from_le_bytes(le)
            }
            #[inline(always)]
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
native_type!(i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32,
    i64 => I64, u64 => U64, f32 => F32, f64 => F64);

/// Evaluates `$body` with the type alias `$t` bound to the Rust type a
/// [`Native`] names: `with_native!(n, T => sum::<T>(values))`. The second
/// form binds integers only and evaluates `$float` for the two floats, for
/// code that has no float version.
#[macro_export]
macro_rules! with_native {
    ($native:expr, $t:ident => $body:expr) => {
        $crate::with_native!(@match $native, $t, $body,
            [I8 i8, U8 u8, I16 i16, U16 u16, I32 i32, U32 u32, I64 i64, U64 u64, F32 f32, F64 f64])
    };
    ($native:expr, int $t:ident => $body:expr, float => $float:expr) => {
        $crate::with_native!(@match $native, $t, $body,
            [I8 i8, U8 u8, I16 i16, U16 u16, I32 i32, U32 u32, I64 i64, U64 u64]
            $crate::Native::F32 | $crate::Native::F64 => $float,)
    };
    (@match $native:expr, $t:ident, $body:expr, [$($v:ident $ty:ty),*] $($rest:tt)*) => {
        match $native {
            $($crate::Native::$v => {
                type $t = $ty;
                $body
            })*
            $($rest)*
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scalar;

    fn size_of(n: Native) -> usize {
        with_native!(n, T => T::SIZE)
    }

    #[test]
    fn every_numeric_datatype_has_its_size_and_order() {
        for &d in Datatype::ALL {
            let Some(n) = d.native() else {
                assert!(
                    d.is_string() || d.is_blob() || d.is_geometry() || d == Datatype::Any,
                    "{d}"
                );
                continue;
            };
            assert_eq!(n.size() as u64, d.size(), "{d}");
            assert_eq!(size_of(n), n.size(), "{d}");
            // The decoder of single values agrees on signedness (CHAR, a
            // string type, has no Scalar).
            match Scalar::decode(d, &vec![0xff; n.size()]) {
                Some(Scalar::Int(v)) => assert!(n.is_signed_int() && v == -1, "{d}"),
                Some(Scalar::UInt(_) | Scalar::Bool(_)) => {
                    assert!(!n.is_signed_int() && !n.is_float(), "{d}")
                }
                Some(Scalar::Float(_)) => assert!(n.is_float(), "{d}"),
                None => assert_eq!(d, Datatype::Char),
            }
        }
        // TileDB's `char` is signed.
        assert_eq!(Datatype::Char.native(), Some(Native::I8));
        assert_eq!(Datatype::DatetimeNs.native(), Some(Native::I64));
        assert_eq!(Datatype::StringAscii.native(), None);
    }

    #[test]
    fn short_input_reads_as_zeros_and_values_write_back() {
        assert_eq!(i32::read_le(&[1]), 1);
        assert_eq!(i16::read_le(&[]), 0);
        assert_eq!(u16::read_le(&[1, 2, 3]), 0x0201);
        let mut out = Vec::new();
        (-2i64).put_le(&mut out);
        1.5f32.put_le(&mut out);
        assert_eq!(i64::read_le(&out), -2);
        assert_eq!(f32::read_le(out.get(8..).unwrap_or_default()), 1.5);
        assert_eq!(with_native!(Native::F64, int T => T::SIZE, float => 0), 0);
        assert_eq!(with_native!(Native::U32, int T => T::SIZE, float => 0), 4);
    }
}
