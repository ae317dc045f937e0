//! Typed values for the builder, and the decoding of the raw little-endian
//! values a schema stores, so validation can compare bounds and extents
//! whatever the datatype.

use tdb_format::{Datatype, Scalar};

mod sealed {
    pub trait Sealed {}
}

/// A Rust number that can be a domain bound, tile extent or fill value.
///
/// Sealed: the datatypes it stands for are fixed by TileDB's format.
pub trait Value: Copy + sealed::Sealed {
    /// The datatype of the same name (`i64` also serves datetimes and times).
    const DATATYPE: Datatype;
    /// The little-endian bytes TileDB stores.
    fn to_le(self) -> Vec<u8>;
}

macro_rules! value {
    ($($t:ty => $dt:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Value for $t {
            const DATATYPE: Datatype = Datatype::$dt;
            fn to_le(self) -> Vec<u8> {
                self.to_le_bytes().to_vec()
            }
        }
    )*};
}

value!(i8 => Int8, u8 => UInt8, i16 => Int16, u16 => UInt16, i32 => Int32, u32 => UInt32,
    i64 => Int64, u64 => UInt64, f32 => Float32, f64 => Float64);

/// Whether values of Rust type `from` (by its datatype) may be stored as
/// `to`: the same size and family, `i64` for datetimes and times, and `u8`
/// for the byte-like types (chars, strings, blobs, BOOL).
pub(crate) fn compatible(from: Datatype, to: Datatype) -> bool {
    if from == to {
        return true;
    }
    match from {
        Datatype::Int64 => to.is_datetime() || to.is_time(),
        Datatype::UInt8 => to.size() == 1 && !to.is_integer(),
        _ => false,
    }
}

/// One decoded value: integers widened to `i128` (exact for every integer
/// type), floats to `f64`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub(crate) enum Num {
    Int(i128),
    Float(f64),
}

impl std::fmt::Display for Num {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Num::Int(i) => write!(f, "{i}"),
            Num::Float(x) => write!(f, "{x}"),
        }
    }
}

/// Decodes one value of a numeric datatype (integers, floats, datetimes,
/// times); `None` for other datatypes or a wrong byte count.
pub(crate) fn decode(dt: Datatype, b: &[u8]) -> Option<Num> {
    Some(match Scalar::decode(dt, b)? {
        Scalar::Int(i) => Num::Int(i.into()),
        Scalar::UInt(u) => Num::Int(u.into()),
        Scalar::Bool(v) => Num::Int(v.into()),
        Scalar::Float(f) => Num::Float(f),
    })
}

/// The smallest and largest value of an integer-like datatype
/// ([`Datatype::int_limits`]; `(0, 0)` for others, which callers never ask).
pub(crate) fn int_limits(dt: Datatype) -> (i128, i128) {
    dt.int_limits().unwrap_or((0, 0))
}
