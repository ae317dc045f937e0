//! What bit-width reduction and positive delta share: the integer type a
//! stage is read as, and TileDB's split of each data part into windows.
//! (BITSHUFFLE's kernel reads and writes its words through [`WindowInt`].)

use crate::buffer::{to_u32, Stage};
use crate::{FilterError, Result};
use tdb_format::{Datatype, Native};

/// An integer the windowed filters read values as (little-endian).
pub(crate) trait WindowInt: Copy + Ord + Default {
    /// Bytes of one value.
    const BYTES: usize;
    /// Bits of one value.
    const BITS: u8;
    /// Reads one value from exactly [`Self::BYTES`] bytes.
    fn load(bytes: &[u8]) -> Self;
    /// Reads a narrower value (1 to [`Self::BYTES`] bytes), sign-extended
    /// for signed types and zero-extended otherwise, as C++'s integer
    /// conversions widen it.
    fn load_narrow(bytes: &[u8]) -> Self;
    /// Appends the low `n` bytes of the value.
    fn store_narrow(self, n: usize, out: &mut Vec<u8>);
    /// Writes the value into exactly [`Self::BYTES`] bytes.
    fn write(self, out: &mut [u8]);
    /// Appends the value.
    fn store(self, out: &mut Vec<u8>) {
        self.store_narrow(Self::BYTES, out);
    }
    /// `self - other`, two's complement.
    fn wrapping_sub(self, other: Self) -> Self;
    /// `self + other`, two's complement.
    fn wrapping_add(self, other: Self) -> Self;
    /// `self - other` when it fits.
    fn checked_sub(self, other: Self) -> Option<Self>;
    /// `self + 1` when it fits.
    fn checked_inc(self) -> Option<Self>;
    /// Bits TileDB's `bits_required` gives a positive value: for signed
    /// types the narrowest C integer holding it (8, 16, 32, 64), for
    /// unsigned ones its bit length (rounded up by the caller).
    fn bits_required(self) -> u8;
}

macro_rules! window_int {
    ($($t:ty: $signed:expr),*) => {$(
        impl WindowInt for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            const BITS: u8 = <$t>::BITS as u8;
            #[inline(always)]
            fn load(bytes: &[u8]) -> Self {
                let mut le = [0u8; std::mem::size_of::<$t>()];
                le.copy_from_slice(bytes);
                <$t>::from_le_bytes(le)
            }
            fn load_narrow(bytes: &[u8]) -> Self {
                let negative = $signed && bytes.last().is_some_and(|b| b & 0x80 != 0);
                let mut le = [if negative { 0xff } else { 0 }; std::mem::size_of::<$t>()];
                if let Some(low) = le.get_mut(..bytes.len()) {
                    low.copy_from_slice(bytes);
                }
                <$t>::from_le_bytes(le)
            }
            #[inline(always)]
            fn write(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            fn store_narrow(self, n: usize, out: &mut Vec<u8>) {
                let bytes = self.to_le_bytes();
                out.extend_from_slice(bytes.get(..n).unwrap_or(&bytes));
            }
            fn wrapping_sub(self, other: Self) -> Self {
                <$t>::wrapping_sub(self, other)
            }
            fn wrapping_add(self, other: Self) -> Self {
                <$t>::wrapping_add(self, other)
            }
            fn checked_sub(self, other: Self) -> Option<Self> {
                <$t>::checked_sub(self, other)
            }
            fn checked_inc(self) -> Option<Self> {
                <$t>::checked_add(self, 1)
            }
            fn bits_required(self) -> u8 {
                if $signed {
                    // A positive value, so only the upper bounds matter.
                    let v = self as i128;
                    if v <= i8::MAX as i128 {
                        8
                    } else if v <= i16::MAX as i128 {
                        16
                    } else if v <= i32::MAX as i128 {
                        32
                    } else {
                        64
                    }
                } else {
                    <$t>::BITS.saturating_sub(self.leading_zeros()) as u8
                }
            }
        }
    )*};
}

window_int!(i8: true, u8: false, i16: true, u16: false, i32: true, u32: false, i64: true, u64: false);

/// The integer type TileDB's windowed filters switch on, or `None` where
/// they pass the bytes through untouched: BLOB and geometries as `uint8_t`,
/// no strings or floats, datetimes and times (`int64`) from format v20 on;
/// one-byte types only when `one_byte` (positive delta takes them,
/// bit-width reduction does not).
pub(crate) fn int_kind(st: &Stage<'_>, one_byte: bool) -> Option<Native> {
    use Datatype::*;
    let native = match st.datatype {
        Blob | GeomWkb | GeomWkt => Native::U8,
        t if t.is_string() || t.is_float() => return None,
        t if (t.is_datetime() || t.is_time()) && !st.version.windowed_filters_take_datetimes() => {
            return None
        }
        t => t.native()?,
    };
    (one_byte || native.size() > 1).then_some(native)
}

/// Splits one data part into TileDB's windows: the part or `max_window`
/// bytes, whichever is smaller, rounded down to whole values; the last
/// window takes what is left, which may end in (or be only) a partial value.
///
/// TileDB divides by that window size, so a non-empty part smaller than one
/// value, or a window option below the value size, crashes it; here that is
/// an error. An empty part has no windows (TileDB would divide zero by zero).
pub(crate) fn windows<'a>(
    filter: &'static str,
    part: &'a [u8],
    max_window: u32,
    value_bytes: usize,
) -> Result<std::slice::Chunks<'a, u8>> {
    if part.is_empty() {
        return Ok(part.chunks(1));
    }
    let len = to_u32(filter, part.len(), "a part")?;
    let window = (len.min(max_window) as usize)
        .checked_div(value_bytes)
        .unwrap_or(0)
        .saturating_mul(value_bytes);
    if window == 0 {
        return Err(FilterError::bad_input(
            filter,
            format!(
                "a window of min({len}, {max_window}) bytes holds no whole \
                 {value_bytes}-byte value (TileDB divides by zero here)"
            ),
        ));
    }
    Ok(part.chunks(window))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_loads_extend_like_cpp() {
        assert_eq!(i64::load_narrow(&[0xff]), -1);
        assert_eq!(u64::load_narrow(&[0xff]), 255);
        assert_eq!(i32::load_narrow(&[0x00, 0x80]), -32768);
        assert_eq!(u16::load_narrow(&[0x34, 0x12]), 0x1234);
    }

    #[test]
    fn bits_required_matches_tiledb() {
        assert_eq!(127i64.bits_required(), 8);
        assert_eq!(128i64.bits_required(), 16);
        assert_eq!(32768i32.bits_required(), 32);
        assert_eq!(255u16.bits_required(), 8);
        assert_eq!(256u16.bits_required(), 9);
        assert_eq!(1u64.bits_required(), 1);
    }

    #[test]
    fn windows_follow_tiledb() {
        let part = [0u8; 20];
        let sizes: Vec<_> = windows("T", &part, 64, 8)
            .unwrap()
            .map(<[u8]>::len)
            .collect();
        assert_eq!(sizes, [16, 4]);
        let sizes: Vec<_> = windows("T", &part, 12, 4)
            .unwrap()
            .map(<[u8]>::len)
            .collect();
        assert_eq!(sizes, [12, 8]);
        assert_eq!(windows("T", &[], 64, 8).unwrap().count(), 0);
        assert!(windows("T", &part[..4], 64, 8).is_err());
        assert!(windows("T", &part, 4, 8).is_err());
    }
}
