//! Every datatype of TileDB 2.30: code, name, size, class and default fill.

use crate::code_enum::code_enum;

code_enum! {
    /// A TileDB datatype, with TileDB's on-disk code.
    pub enum Datatype: "datatype" {
        /// 32-bit signed integer.
        Int32 = 0 => "INT32",
        /// 64-bit signed integer.
        Int64 = 1 => "INT64",
        /// 32-bit IEEE float.
        Float32 = 2 => "FLOAT32",
        /// 64-bit IEEE float.
        Float64 = 3 => "FLOAT64",
        /// A byte of character data.
        Char = 4 => "CHAR",
        /// 8-bit signed integer.
        Int8 = 5 => "INT8",
        /// 8-bit unsigned integer.
        UInt8 = 6 => "UINT8",
        /// 16-bit signed integer.
        Int16 = 7 => "INT16",
        /// 16-bit unsigned integer.
        UInt16 = 8 => "UINT16",
        /// 32-bit unsigned integer.
        UInt32 = 9 => "UINT32",
        /// 64-bit unsigned integer.
        UInt64 = 10 => "UINT64",
        /// ASCII string bytes.
        StringAscii = 11 => "STRING_ASCII",
        /// UTF-8 string bytes.
        StringUtf8 = 12 => "STRING_UTF8",
        /// UTF-16 code units.
        StringUtf16 = 13 => "STRING_UTF16",
        /// UTF-32 code units.
        StringUtf32 = 14 => "STRING_UTF32",
        /// UCS-2 code units.
        StringUcs2 = 15 => "STRING_UCS2",
        /// UCS-4 code units.
        StringUcs4 = 16 => "STRING_UCS4",
        /// Any datatype (legacy key-value stores).
        Any = 17 => "ANY",
        /// Datetime, years since the epoch.
        DatetimeYear = 18 => "DATETIME_YEAR",
        /// Datetime, months.
        DatetimeMonth = 19 => "DATETIME_MONTH",
        /// Datetime, weeks.
        DatetimeWeek = 20 => "DATETIME_WEEK",
        /// Datetime, days.
        DatetimeDay = 21 => "DATETIME_DAY",
        /// Datetime, hours.
        DatetimeHr = 22 => "DATETIME_HR",
        /// Datetime, minutes.
        DatetimeMin = 23 => "DATETIME_MIN",
        /// Datetime, seconds.
        DatetimeSec = 24 => "DATETIME_SEC",
        /// Datetime, milliseconds.
        DatetimeMs = 25 => "DATETIME_MS",
        /// Datetime, microseconds.
        DatetimeUs = 26 => "DATETIME_US",
        /// Datetime, nanoseconds.
        DatetimeNs = 27 => "DATETIME_NS",
        /// Datetime, picoseconds.
        DatetimePs = 28 => "DATETIME_PS",
        /// Datetime, femtoseconds.
        DatetimeFs = 29 => "DATETIME_FS",
        /// Datetime, attoseconds.
        DatetimeAs = 30 => "DATETIME_AS",
        /// Time of day, hours.
        TimeHr = 31 => "TIME_HR",
        /// Time of day, minutes.
        TimeMin = 32 => "TIME_MIN",
        /// Time of day, seconds.
        TimeSec = 33 => "TIME_SEC",
        /// Time of day, milliseconds.
        TimeMs = 34 => "TIME_MS",
        /// Time of day, microseconds.
        TimeUs = 35 => "TIME_US",
        /// Time of day, nanoseconds.
        TimeNs = 36 => "TIME_NS",
        /// Time of day, picoseconds.
        TimePs = 37 => "TIME_PS",
        /// Time of day, femtoseconds.
        TimeFs = 38 => "TIME_FS",
        /// Time of day, attoseconds.
        TimeAs = 39 => "TIME_AS",
        /// Opaque bytes.
        Blob = 40 => "BLOB",
        /// Boolean, one byte.
        Bool = 41 => "BOOL",
        /// Geometry, well-known binary.
        GeomWkb = 42 => "GEOM_WKB",
        /// Geometry, well-known text.
        GeomWkt = 43 => "GEOM_WKT",
    }
}

/// The broad family of a datatype, which decides what filters, dimensions and
/// conditions accept it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DatatypeClass {
    /// Signed integer.
    SignedInteger,
    /// Unsigned integer (BOOL included: TileDB treats it as a `uint8_t`).
    UnsignedInteger,
    /// IEEE float.
    Float,
    /// Character or string data.
    String,
    /// `DATETIME_*`: an `int64` count of units since the epoch.
    Datetime,
    /// `TIME_*`: an `int64` count of units since midnight.
    Time,
    /// Opaque bytes.
    Blob,
    /// Geometry bytes (WKB or WKT).
    Geometry,
    /// `ANY`.
    Any,
}

const I8_MIN: [u8; 1] = i8::MIN.to_le_bytes();
const U8_MAX: [u8; 1] = u8::MAX.to_le_bytes();
const I16_MIN: [u8; 2] = i16::MIN.to_le_bytes();
const U16_MAX: [u8; 2] = u16::MAX.to_le_bytes();
const I32_MIN: [u8; 4] = i32::MIN.to_le_bytes();
const U32_MAX: [u8; 4] = u32::MAX.to_le_bytes();
const I64_MIN: [u8; 8] = i64::MIN.to_le_bytes();
const U64_MAX: [u8; 8] = u64::MAX.to_le_bytes();
const F32_NAN: [u8; 4] = f32::NAN.to_le_bytes();
const F64_NAN: [u8; 8] = f64::NAN.to_le_bytes();
const ZERO1: [u8; 1] = [0];
const ZERO2: [u8; 2] = [0; 2];
const ZERO4: [u8; 4] = [0; 4];
/// `std::numeric_limits<char>::min()` on the platforms TileDB ships for.
const CHAR_MIN: [u8; 1] = [0x80];

impl Datatype {
    /// Bytes of one value.
    pub const fn size(self) -> u64 {
        use Datatype::*;
        match self {
            Char | Int8 | UInt8 | StringAscii | StringUtf8 | Any | Blob | Bool | GeomWkb
            | GeomWkt => 1,
            Int16 | UInt16 | StringUtf16 | StringUcs2 => 2,
            Int32 | UInt32 | Float32 | StringUtf32 | StringUcs4 => 4,
            _ => 8,
        }
    }

    /// Bytes of a fixed-size cell of `cell_val_num` values (saturating: a
    /// var-size field's `u32::MAX` has no fixed size, and callers ask only
    /// of fixed ones).
    pub const fn cell_size(self, cell_val_num: u32) -> u64 {
        self.size().saturating_mul(cell_val_num as u64)
    }

    /// The family the datatype belongs to.
    pub const fn class(self) -> DatatypeClass {
        use Datatype::*;
        match self {
            Int8 | Int16 | Int32 | Int64 => DatatypeClass::SignedInteger,
            UInt8 | UInt16 | UInt32 | UInt64 | Bool => DatatypeClass::UnsignedInteger,
            Float32 | Float64 => DatatypeClass::Float,
            Char | StringAscii | StringUtf8 | StringUtf16 | StringUtf32 | StringUcs2
            | StringUcs4 => DatatypeClass::String,
            DatetimeYear | DatetimeMonth | DatetimeWeek | DatetimeDay | DatetimeHr
            | DatetimeMin | DatetimeSec | DatetimeMs | DatetimeUs | DatetimeNs | DatetimePs
            | DatetimeFs | DatetimeAs => DatatypeClass::Datetime,
            TimeHr | TimeMin | TimeSec | TimeMs | TimeUs | TimeNs | TimePs | TimeFs | TimeAs => {
                DatatypeClass::Time
            }
            Blob => DatatypeClass::Blob,
            GeomWkb | GeomWkt => DatatypeClass::Geometry,
            Any => DatatypeClass::Any,
        }
    }

    /// Integer types, BOOL excluded (TileDB does not count it as one).
    pub const fn is_integer(self) -> bool {
        matches!(
            self.class(),
            DatatypeClass::SignedInteger | DatatypeClass::UnsignedInteger
        ) && !matches!(self, Datatype::Bool)
    }

    /// FLOAT32 and FLOAT64.
    pub const fn is_float(self) -> bool {
        matches!(self.class(), DatatypeClass::Float)
    }

    /// CHAR and every STRING_* type.
    pub const fn is_string(self) -> bool {
        matches!(self.class(), DatatypeClass::String)
    }

    /// Every DATETIME_* type.
    pub const fn is_datetime(self) -> bool {
        matches!(self.class(), DatatypeClass::Datetime)
    }

    /// Every TIME_* type.
    pub const fn is_time(self) -> bool {
        matches!(self.class(), DatatypeClass::Time)
    }

    /// BLOB.
    pub const fn is_blob(self) -> bool {
        matches!(self.class(), DatatypeClass::Blob)
    }

    /// GEOM_WKB and GEOM_WKT.
    pub const fn is_geometry(self) -> bool {
        matches!(self.class(), DatatypeClass::Geometry)
    }

    /// BOOL.
    pub const fn is_bool(self) -> bool {
        matches!(self, Datatype::Bool)
    }

    /// Signed integers, datetimes and times: values TileDB orders as `int64`-like
    /// signed numbers.
    pub const fn is_signed(self) -> bool {
        matches!(
            self.class(),
            DatatypeClass::SignedInteger | DatatypeClass::Datetime | DatatypeClass::Time
        )
    }

    /// The smallest and largest value of an integer-valued datatype
    /// (integers, datetimes, times); `None` for the others.
    // `bits` is 8 to 64 past the guard, so no shift or subtraction below
    // leaves i128's range.
    #[allow(clippy::arithmetic_side_effects)]
    pub const fn int_limits(self) -> Option<(i128, i128)> {
        let bits = 8 * self.size() as u32;
        let integer = self.is_integer() || self.is_datetime() || self.is_time();
        if !integer || bits == 0 || bits > 64 {
            return None;
        }
        Some(if self.is_signed() {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        })
    }

    /// The little-endian bytes of one default fill value, as TileDB writes for
    /// unwritten dense cells: a signed type's minimum, an unsigned type's
    /// maximum, NaN for floats, 0x80 for CHAR, zero for strings, blobs and BOOL.
    pub const fn default_fill(self) -> &'static [u8] {
        use Datatype::*;
        match self {
            Int8 => &I8_MIN,
            UInt8 => &U8_MAX,
            Int16 => &I16_MIN,
            UInt16 => &U16_MAX,
            Int32 => &I32_MIN,
            UInt32 => &U32_MAX,
            Int64 => &I64_MIN,
            UInt64 => &U64_MAX,
            Float32 => &F32_NAN,
            Float64 => &F64_NAN,
            Char => &CHAR_MIN,
            StringAscii | StringUtf8 | Any | Blob | Bool | GeomWkb | GeomWkt => &ZERO1,
            StringUtf16 | StringUcs2 => &ZERO2,
            StringUtf32 | StringUcs4 => &ZERO4,
            _ => &I64_MIN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_44_types_have_distinct_codes_in_order() {
        assert_eq!(Datatype::ALL.len(), 44);
        for (i, d) in Datatype::ALL.iter().enumerate() {
            assert_eq!(usize::from(d.code()), i);
            assert_eq!(Datatype::from_code(d.code()), Ok(*d));
            assert_eq!(Datatype::from_name(d.name()), Ok(*d));
        }
        assert!(Datatype::from_code(44).is_err());
    }

    #[test]
    fn sizes_and_fills_agree() {
        for &d in Datatype::ALL {
            assert_eq!(d.default_fill().len() as u64, d.size(), "{d}");
        }
    }

    #[test]
    fn tiledb_fill_values() {
        assert_eq!(Datatype::Int32.default_fill(), &i32::MIN.to_le_bytes());
        assert_eq!(Datatype::UInt16.default_fill(), &[0xff, 0xff]);
        assert_eq!(Datatype::Char.default_fill(), &[0x80]);
        assert_eq!(Datatype::StringUtf8.default_fill(), &[0]);
        assert_eq!(Datatype::DatetimeNs.default_fill(), &i64::MIN.to_le_bytes());
        assert!(f64::from_le_bytes(Datatype::Float64.default_fill().try_into().unwrap()).is_nan());
        assert_eq!(Datatype::Float32.default_fill(), &[0, 0, 0xc0, 0x7f]);
    }

    #[test]
    fn classes() {
        assert!(Datatype::Int8.is_integer());
        assert!(!Datatype::Bool.is_integer());
        assert!(Datatype::Bool.is_bool());
        assert!(Datatype::StringUcs4.is_string());
        assert!(Datatype::TimeAs.is_time() && !Datatype::TimeAs.is_datetime());
        assert!(Datatype::DatetimeYear.is_datetime() && Datatype::DatetimeYear.is_signed());
        assert!(Datatype::GeomWkt.is_geometry());
        assert!(Datatype::Blob.is_blob());
        assert_eq!(Datatype::Any.class(), DatatypeClass::Any);
    }
}
