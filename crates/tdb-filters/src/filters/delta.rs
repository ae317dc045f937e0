//! TileDB's DELTA codec: `u64 count`, the first value, then each value minus
//! the one before, every field as wide as one value, all little-endian.
//!
//! TileDB computes the differences in `int64_t` and stores their low bytes,
//! and decodes with the same truncation: arithmetic modulo the value width,
//! so signedness never matters and any integer sequence round-trips.

use crate::{FilterError, Result};
use tdb_format::{Datatype, Native};

const NAME: &str = tdb_format::FilterType::Delta.name();

/// The integer type TileDB's type switch in `Delta::compress` and
/// `DoubleDelta::compress` reads a datatype as: its [`Native`] type, and
/// every datatype without one (strings but CHAR, BLOB, geometries, ANY)
/// byte by byte as `uint8_t`, even UTF-16/32; floats are refused (a
/// reinterpret datatype is the way to delta-encode them).
pub(crate) fn int_kind(filter: &'static str, datatype: Datatype) -> Result<Native> {
    if datatype.is_float() {
        return Err(FilterError::bad_input(
            filter,
            format!(
                "TileDB does not encode {} values; set an integer reinterpret datatype",
                datatype.name()
            ),
        ));
    }
    Ok(datatype.native().unwrap_or(Native::U8))
}

/// Reads a little-endian value of `bytes.len()` (at most 8) bytes.
pub(crate) fn load(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    if let Some(low) = b.get_mut(..bytes.len()) {
        low.copy_from_slice(bytes);
    }
    u64::from_le_bytes(b)
}

/// Appends the low `width` bytes of `v`, little-endian.
pub(crate) fn store(v: u64, width: usize, out: &mut Vec<u8>) {
    let bytes = v.to_le_bytes();
    out.extend_from_slice(bytes.get(..width).unwrap_or(&bytes));
}

/// Checks that `input` is a non-empty run of whole values; TileDB asserts
/// this (and, in release builds, encodes garbage or drops the tail).
pub(crate) fn whole_values(filter: &'static str, input: &[u8], width: usize) -> Result<()> {
    if input.is_empty() {
        return Err(FilterError::bad_input(filter, "no values to encode"));
    }
    if input.len().checked_rem(width) != Some(0) {
        return Err(FilterError::bad_input(
            filter,
            format!(
                "{} bytes are not a whole number of {width}-byte values",
                input.len()
            ),
        ));
    }
    Ok(())
}

/// Appends the encoding of `input` (values of `datatype`) to `out`.
pub(crate) fn compress(datatype: Datatype, input: &[u8], out: &mut Vec<u8>) -> Result<()> {
    let width = int_kind(NAME, datatype)?.size();
    whole_values(NAME, input, width)?;
    out.reserve(input.len().saturating_add(8));
    let values = input.len().checked_div(width).unwrap_or(0);
    out.extend_from_slice(&(values as u64).to_le_bytes());
    let mut prev = 0u64;
    for (i, value) in input.chunks_exact(width).enumerate() {
        let v = load(value);
        store(if i == 0 { v } else { v.wrapping_sub(prev) }, width, out);
        prev = v;
    }
    Ok(())
}

/// Appends exactly `expected_len` decoded bytes to `out`, or errors.
pub(crate) fn decompress(
    datatype: Datatype,
    input: &[u8],
    out: &mut Vec<u8>,
    expected_len: usize,
) -> Result<()> {
    let width = int_kind(NAME, datatype)?.size();
    let Some((count, values)) = input.split_first_chunk::<8>() else {
        return Err(FilterError::corrupt(
            NAME,
            format!("{} bytes hold no value count", input.len()),
        ));
    };
    let count = u64::from_le_bytes(*count);
    // TileDB never writes a count of 0 (it would still decode one value).
    if count == 0 || count.checked_mul(width as u64) != Some(expected_len as u64) {
        return Err(FilterError::corrupt(
            NAME,
            format!("{count} values of {width} bytes, {expected_len} bytes expected"),
        ));
    }
    if values.len() != expected_len {
        return Err(FilterError::corrupt(
            NAME,
            format!(
                "{count} values need {expected_len} bytes, {} present",
                values.len()
            ),
        ));
    }
    out.reserve(expected_len);
    match width {
        1 => prefix_sums!(u8, values, out),
        2 => prefix_sums!(u16, values, out),
        4 => prefix_sums!(u32, values, out),
        _ => prefix_sums!(u64, values, out),
    }
    Ok(())
}

/// Appends the running (wrapping) sums of the little-endian `$t` values of
/// `$values` to `$out`: blocks of sums built in an array and appended
/// whole, so the loop has no per-value bookkeeping of the output vector.
macro_rules! prefix_sums {
    ($t:ty, $values:expr, $out:expr) => {{
        const W: usize = std::mem::size_of::<$t>();
        const BLOCK: usize = 64;
        let (values, out): (&[u8], &mut Vec<u8>) = ($values, $out);
        let value = |b: &[u8]| <$t>::from_le_bytes(b.try_into().unwrap_or_default());
        let mut prev: $t = 0;
        let mut blocks = values.chunks_exact(W * BLOCK);
        for block in &mut blocks {
            let mut sums = [0 as $t; BLOCK];
            for (sum, b) in sums.iter_mut().zip(block.chunks_exact(W)) {
                prev = prev.wrapping_add(value(b));
                *sum = prev;
            }
            out.extend_from_slice(sums.map(<$t>::to_le_bytes).as_flattened());
        }
        for b in blocks.remainder().chunks_exact(W) {
            prev = prev.wrapping_add(value(b));
            out.extend_from_slice(&prev.to_le_bytes());
        }
    }};
}
use prefix_sums;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const INTEGERS: [Datatype; 9] = [
        Datatype::Int8,
        Datatype::UInt8,
        Datatype::Int16,
        Datatype::UInt16,
        Datatype::Int32,
        Datatype::UInt32,
        Datatype::Int64,
        Datatype::UInt64,
        Datatype::DatetimeNs,
    ];

    fn enc(t: Datatype, input: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        compress(t, input, &mut out)?;
        Ok(out)
    }

    fn dec(t: Datatype, input: &[u8], len: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        decompress(t, input, &mut out, len)?;
        Ok(out)
    }

    #[test]
    fn layout() {
        let input: Vec<u8> = [10i32, 13, 9]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let out = enc(Datatype::Int32, &input).unwrap();
        let mut want = 3u64.to_le_bytes().to_vec();
        for v in [10i32, 3, -4] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(out, want);
        assert_eq!(dec(Datatype::Int32, &out, 12).unwrap(), input);
        // One value.
        assert_eq!(
            enc(Datatype::UInt8, &[7]).unwrap(),
            [1, 0, 0, 0, 0, 0, 0, 0, 7]
        );
    }

    #[test]
    fn differences_wrap_like_tiledb() {
        // u8 0 -> 255 stores 255 (the low byte of int64 255), i64 MIN -> MAX wraps.
        let out = enc(Datatype::UInt8, &[0, 255, 0]).unwrap();
        assert_eq!(&out[8..], [0, 255, 1]);
        let input: Vec<u8> = [i64::MIN, i64::MAX]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let out = enc(Datatype::Int64, &input).unwrap();
        assert_eq!(&out[16..], (-1i64).to_le_bytes());
        assert_eq!(dec(Datatype::Int64, &out, 16).unwrap(), input);
    }

    #[test]
    fn strings_and_any_are_bytes() {
        for t in [
            Datatype::StringUtf16,
            Datatype::StringUcs4,
            Datatype::Any,
            Datatype::Blob,
        ] {
            assert_eq!(int_kind(NAME, t).unwrap().size(), 1, "{t:?}");
        }
        assert_eq!(int_kind(NAME, Datatype::TimeAs).unwrap().size(), 8);
    }

    #[test]
    fn bad_input_is_refused() {
        for t in [Datatype::Float32, Datatype::Float64] {
            assert!(matches!(enc(t, &[0; 8]), Err(FilterError::BadInput { .. })));
            assert!(dec(t, &[0; 16], 8).is_err());
        }
        assert!(matches!(
            enc(Datatype::Int32, &[]),
            Err(FilterError::BadInput { .. })
        ));
        assert!(matches!(
            enc(Datatype::Int32, &[1, 2, 3, 4, 5]),
            Err(FilterError::BadInput { .. })
        ));
    }

    #[test]
    fn corrupt_input_is_an_error() {
        let input: Vec<u8> = (0u16..20).flat_map(|v| (v * 7).to_le_bytes()).collect();
        let out = enc(Datatype::UInt16, &input).unwrap();
        for n in 0..out.len() {
            assert!(
                dec(Datatype::UInt16, &out[..n], input.len()).is_err(),
                "{n}"
            );
        }
        let mut longer = out.clone();
        longer.push(0);
        assert!(dec(Datatype::UInt16, &longer, input.len()).is_err());
        assert!(dec(Datatype::UInt16, &out, input.len() - 2).is_err());
        let mut zero = out.clone();
        zero[..8].fill(0);
        assert!(dec(Datatype::UInt16, &zero, 0).is_err());
        let mut huge = out;
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(dec(Datatype::UInt16, &huge, input.len()).is_err());
    }

    proptest! {
        #[test]
        fn round_trips(t in proptest::sample::select(INTEGERS.to_vec()), bytes in proptest::collection::vec(any::<u8>(), 1..200)) {
            let width = t.size() as usize;
            let n = bytes.len() / width * width;
            prop_assume!(n > 0);
            let input = &bytes[..n];
            let out = enc(t, input).unwrap();
            prop_assert_eq!(out.len(), 8 + n);
            prop_assert_eq!(dec(t, &out, n).unwrap(), input);
        }
    }
}
