//! TileDB's DOUBLE_DELTA codec.
//!
//! Layout: `u8 bitsize`, `u64 count` (little-endian), then either the input
//! unchanged (when `bitsize >= 8 * width - 1`: packing would not pay), or
//! the first value, the second value (each raw, when present) and, from the
//! third value on, each double delta `(v[i] - v[i-1]) - (v[i-1] - v[i-2])`
//! as a sign bit (1 = negative) and `bitsize` bits of its magnitude, packed
//! most significant bit first into `u64` words stored little-endian, the last
//! word zero-padded.
//!
//! `bitsize` is the bit length (at least 1) of the largest magnitude among
//! the double deltas *and the first delta* `v[1] - v[0]`, which TileDB
//! counts although it stores that delta raw; it is 0 for up to two values.
//! Deltas are exact integers in the value's own signedness, so the datatype
//! decides the size: `u8` 0 → 255 is +255 (raw), `i8` 0 → -1 is -1. A delta
//! or double delta outside `i64` makes TileDB refuse the tile. Decoding is
//! arithmetic modulo the value width.

use super::delta::{int_kind, load, whole_values};
use crate::{FilterError, Result};
use tdb_format::Datatype;
use tdb_format::Native;

const NAME: &str = tdb_format::FilterType::DoubleDelta.name();
/// The header: bitsize byte and value count.
const HEADER: usize = 9;

/// Appends the encoding of `input` (values of `datatype`) to `out`.
pub(crate) fn compress(datatype: Datatype, input: &[u8], out: &mut Vec<u8>) -> Result<()> {
    let kind = int_kind(NAME, datatype)?;
    whole_values(NAME, input, kind.size())?;
    let values: Vec<i128> = input
        .chunks_exact(kind.size())
        .map(|b| widen(kind, b))
        .collect();
    let bitsize = bitsize(&values)?;
    out.reserve(input.len().saturating_add(HEADER));
    out.push(bitsize);
    out.extend_from_slice(&(values.len() as u64).to_le_bytes());
    if is_raw(kind, bitsize) {
        out.extend_from_slice(input);
        return Ok(());
    }
    for v in input.chunks_exact(kind.size()).take(2) {
        out.extend_from_slice(v);
    }
    let mut bits = BitWriter::new(out);
    let n = u32::from(bitsize);
    for w in values.windows(3) {
        let &[a, b, c] = w else { continue };
        // Values of at most 64 bits: no i128 difference of theirs wraps.
        // `bitsize` checked every double delta; its magnitude fits.
        let dd = c.wrapping_sub(b).wrapping_sub(b.wrapping_sub(a));
        bits.put((u64::from(dd < 0) << n) | dd.unsigned_abs() as u64, n + 1);
    }
    bits.finish();
    Ok(())
}

/// Appends exactly `expected_len` decoded bytes to `out`, or errors.
pub(crate) fn decompress(
    datatype: Datatype,
    input: &[u8],
    out: &mut Vec<u8>,
    expected_len: usize,
) -> Result<()> {
    let kind = int_kind(NAME, datatype)?;
    let width = kind.size();
    let Some((&bitsize, rest)) = input.split_first() else {
        return Err(corrupt("no header"));
    };
    let Some((count, body)) = rest.split_first_chunk::<8>() else {
        return Err(corrupt("truncated header"));
    };
    let count = u64::from_le_bytes(*count);
    if is_raw(kind, bitsize) {
        // TileDB copies whatever follows; the count is the whole values in it
        // (a tail shorter than one value survives, as in TileDB).
        let whole = body.len().checked_div(width).unwrap_or(0);
        if body.len() != expected_len || count != whole as u64 {
            return Err(corrupt(format!(
                "{count} raw values in {} bytes, {expected_len} bytes expected",
                body.len()
            )));
        }
        out.extend_from_slice(body);
        return Ok(());
    }
    if count == 0 || count.checked_mul(width as u64) != Some(expected_len as u64) {
        return Err(corrupt(format!(
            "{count} values of {width} bytes, {expected_len} bytes expected"
        )));
    }
    let count = expected_len.checked_div(width).unwrap_or(0);
    let head = count.min(2).saturating_mul(width);
    let bits =
        (count.saturating_sub(2) as u64).saturating_mul(u64::from(bitsize).saturating_add(1));
    let need = (head as u64).saturating_add(bits.div_ceil(64).saturating_mul(8));
    if body.len() as u64 != need {
        return Err(corrupt(format!(
            "{count} values at {bitsize} bits need {need} bytes, {} present",
            body.len()
        )));
    }
    let (head, packed) = body.split_at(head);
    out.reserve(expected_len);
    out.extend_from_slice(head);
    let mut values = head.chunks_exact(width).map(load);
    let (Some(first), Some(second)) = (values.next(), values.next()) else {
        return Ok(());
    };
    let start = out.len();
    let rest = count.saturating_sub(2).saturating_mul(width);
    out.resize(start.saturating_add(rest), 0);
    let dst = crate::buffer::tail(out, start);
    let (n, first_delta) = (u32::from(bitsize), second.wrapping_sub(first));
    match width {
        1 => unpack::<1>(packed, n, second, first_delta, dst),
        2 => unpack::<2>(packed, n, second, first_delta, dst),
        4 => unpack::<4>(packed, n, second, first_delta, dst),
        _ => unpack::<8>(packed, n, second, first_delta, dst),
    }
    Ok(())
}

/// Decodes the packed double deltas (each a sign bit and `n` bits of
/// magnitude, most significant bit first in little-endian `u64` words) into
/// the values of `W` bytes after `prev`, whose delta from the value before
/// it is `delta`; `dst` has room for exactly those values, and `packed`
/// holds their codes (checked by the caller).
// `n` is below 63 (wider codes are stored raw, see `is_raw`) and `pos`
// stays within `packed`'s bits, which the caller sized for every code: no
// shift or sum here overflows, and `W` is at most 8.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
fn unpack<const W: usize>(packed: &[u8], n: u32, mut prev: u64, mut delta: u64, dst: &mut [u8]) {
    let word = |i: usize| {
        packed
            .get(8 * i..8 * i + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_le_bytes)
    };
    let (code_bits, magnitude) = (n + 1, (1u64 << n) - 1);
    let mut pos = 0usize;
    for value in dst.chunks_exact_mut(W) {
        // The code starts `pos % 64` bits into word `pos / 64` and may run
        // into the next: read both as one 128-bit window.
        let (i, skip) = (pos / 64, pos % 64);
        let window = (u128::from(word(i)) << 64 | u128::from(word(i + 1))) << skip;
        let code = (window >> (128 - code_bits)) as u64;
        pos += code_bits as usize;
        // Sign and magnitude to two's complement without a branch.
        let negative = code >> n;
        let dd = ((code & magnitude) ^ negative.wrapping_neg()).wrapping_add(negative);
        delta = delta.wrapping_add(dd);
        prev = prev.wrapping_add(delta);
        value.copy_from_slice(&prev.to_le_bytes()[..W]);
    }
}

fn corrupt(reason: impl Into<String>) -> FilterError {
    FilterError::corrupt(NAME, reason)
}

/// Whether TileDB stores the values unpacked.
fn is_raw(kind: Native, bitsize: u8) -> bool {
    usize::from(bitsize) >= kind.size().saturating_mul(8).saturating_sub(1)
}

/// The value as the exact integer TileDB's checked arithmetic sees.
fn widen(kind: Native, bytes: &[u8]) -> i128 {
    let v = load(bytes);
    if kind.is_signed_int() {
        // Sign-extend from `width` bytes (at most 8).
        let shift = 64u32.saturating_sub((kind.size() as u32).saturating_mul(8));
        let high = v.checked_shl(shift).unwrap_or(0) as i64;
        i128::from(high.checked_shr(shift).unwrap_or(0))
    } else {
        i128::from(v)
    }
}

/// TileDB's `compute_bitsize`, with its refusals.
fn bitsize(values: &[i128]) -> Result<u8> {
    if values.len() <= 2 {
        return Ok(0);
    }
    let mut max = 0u64;
    let mut prev_delta: Option<i64> = None;
    for w in values.windows(2) {
        let &[a, b] = w else { continue };
        // Values of at most 64 bits: their i128 difference does not wrap.
        let delta = i64::try_from(b.wrapping_sub(a))
            .map_err(|_| FilterError::bad_input(NAME, "a delta exceeds the range of int64"))?;
        let magnitude = match prev_delta {
            None => delta.unsigned_abs(),
            Some(p) => delta
                .checked_sub(p)
                .ok_or_else(|| {
                    FilterError::bad_input(NAME, "a double delta exceeds the range of int64")
                })?
                .unsigned_abs(),
        };
        max = max.max(magnitude);
        prev_delta = Some(delta);
    }
    Ok(64u32.saturating_sub(max.leading_zeros()).max(1) as u8)
}

/// Packs codes most significant bit first into little-endian `u64` words.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    word: u64,
    /// Bits still free in `word`, 1..=64.
    free: u32,
}

impl<'a> BitWriter<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        BitWriter {
            out,
            word: 0,
            free: 64,
        }
    }

    /// Appends the low `n` bits of `code`, `n` in 1..=63.
    // `free` is in 1..=64 and `n` in 1..=63: each difference is taken the
    // way round that stays positive, and every shift is below 64.
    #[allow(clippy::arithmetic_side_effects)]
    fn put(&mut self, code: u64, n: u32) {
        if n < self.free {
            self.free -= n;
            self.word |= code << self.free;
        } else {
            let spill = n - self.free;
            self.word |= code >> spill;
            self.out.extend_from_slice(&self.word.to_le_bytes());
            self.free = 64 - spill;
            self.word = if spill == 0 { 0 } else { code << self.free };
        }
    }

    fn finish(self) {
        if self.free < 64 {
            self.out.extend_from_slice(&self.word.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes<T: Copy, const N: usize>(values: &[T], f: fn(T) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(|&v| f(v)).collect()
    }

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
    fn packs_sign_and_magnitude_msb_first() {
        // Deltas 1, 2, 4, 3: first delta 1, double deltas 1, 2, -1 -> bitsize 2.
        let input = bytes(&[10i64, 11, 13, 17, 20], i64::to_le_bytes);
        let out = enc(Datatype::Int64, &input).unwrap();
        assert_eq!(out[0], 2);
        assert_eq!(u64::from_le_bytes(out[1..9].try_into().unwrap()), 5);
        assert_eq!(out[9..17], 10i64.to_le_bytes());
        assert_eq!(out[17..25], 11i64.to_le_bytes());
        // Codes 0|01, 0|10, 1|01 -> 001 010 101, then zero padding.
        let word = 0b001_010_101u64 << (64 - 9);
        assert_eq!(out[25..], word.to_le_bytes());
        assert_eq!(dec(Datatype::Int64, &out, input.len()).unwrap(), input);
    }

    #[test]
    fn the_first_delta_counts_toward_the_bitsize() {
        // Constant stride 1000: double deltas are 0 yet bitsize covers 1000.
        let input = bytes(&[0i32, 1000, 2000, 3000], i32::to_le_bytes);
        let out = enc(Datatype::Int32, &input).unwrap();
        assert_eq!(out[0], 10);
        assert_eq!(out.len(), HEADER + 8 + 8);
        assert_eq!(dec(Datatype::Int32, &out, 16).unwrap(), input);
    }

    #[test]
    fn small_counts() {
        let one = enc(Datatype::UInt16, &[5, 0]).unwrap();
        assert_eq!(one, [0, 1, 0, 0, 0, 0, 0, 0, 0, 5, 0]);
        let two = enc(Datatype::UInt16, &[5, 0, 9, 0]).unwrap();
        assert_eq!(two, [0, 2, 0, 0, 0, 0, 0, 0, 0, 5, 0, 9, 0]);
        // All equal: bitsize 1, every code 0.
        let same = enc(Datatype::UInt8, &[4; 10]).unwrap();
        assert_eq!(same[0], 1);
        assert_eq!(same[HEADER + 2..], [0u8; 8]);
        for (out, len, t) in [(one, 2, Datatype::UInt16), (two, 4, Datatype::UInt16)] {
            assert_eq!(dec(t, &out, len).unwrap().len(), len);
        }
        assert_eq!(dec(Datatype::UInt8, &same, 10).unwrap(), [4; 10]);
    }

    #[test]
    fn signedness_decides_raw_storage() {
        // As u8, 0 -> 255 is a delta of 255: 8 bits, stored raw.
        let out = enc(Datatype::UInt8, &[0, 255, 0]).unwrap();
        assert_eq!(out[0], 9);
        assert_eq!(out[HEADER..], [0, 255, 0]);
        // As i8 the same bytes are 0, -1, 0: small deltas, packed.
        let out = enc(Datatype::Int8, &[0, 255, 0]).unwrap();
        assert_eq!(out[0], 2);
        assert_eq!(dec(Datatype::Int8, &out, 3).unwrap(), [0, 255, 0]);
        // CHAR is int8_t.
        assert_eq!(enc(Datatype::Char, &[0, 255, 0]).unwrap(), out);
    }

    #[test]
    fn out_of_range_deltas_are_refused() {
        let input = bytes(&[0u64, u64::MAX, 0], u64::to_le_bytes);
        assert!(matches!(
            enc(Datatype::UInt64, &input),
            Err(FilterError::BadInput { .. })
        ));
        let input = bytes(&[i64::MIN, i64::MAX, 0], i64::to_le_bytes);
        assert!(matches!(
            enc(Datatype::Int64, &input),
            Err(FilterError::BadInput { .. })
        ));
        // Deltas in range, double delta not.
        let input = bytes(&[0i64, i64::MAX, -1], i64::to_le_bytes);
        assert!(matches!(
            enc(Datatype::Int64, &input),
            Err(FilterError::BadInput { .. })
        ));
        // Two values are never checked.
        assert!(enc(
            Datatype::UInt64,
            &bytes(&[0u64, u64::MAX], u64::to_le_bytes)
        )
        .is_ok());
        // A delta and double delta of exactly i64::MIN are allowed; stored raw.
        let input = bytes(&[1u64 << 63, 1 << 63, 0], u64::to_le_bytes);
        let out = enc(Datatype::UInt64, &input).unwrap();
        assert_eq!(out[0], 64);
        assert_eq!(dec(Datatype::UInt64, &out, 24).unwrap(), input);
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(matches!(
            enc(Datatype::Float64, &[0; 8]),
            Err(FilterError::BadInput { .. })
        ));
        assert!(matches!(
            enc(Datatype::Int32, &[]),
            Err(FilterError::BadInput { .. })
        ));
        assert!(matches!(
            enc(Datatype::Int32, &[0; 6]),
            Err(FilterError::BadInput { .. })
        ));
    }

    #[test]
    fn raw_tiles_keep_a_partial_tail_on_read() {
        // What release TileDB writes for a part that is not whole values
        // when it stores it raw: count = whole values, bytes = all.
        let mut tile = vec![63u8];
        tile.extend_from_slice(&1u64.to_le_bytes());
        tile.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(dec(Datatype::Int64, &tile, 9).unwrap().len(), 9);
    }

    #[test]
    fn corrupt_input_is_an_error() {
        let values: Vec<i32> = (0..100).map(|i| i * i - 40 * i).collect();
        let input = bytes(&values, i32::to_le_bytes);
        let out = enc(Datatype::Int32, &input).unwrap();
        assert!(!is_raw(int_kind(NAME, Datatype::Int32).unwrap(), out[0]));
        for n in 0..out.len() {
            assert!(dec(Datatype::Int32, &out[..n], input.len()).is_err(), "{n}");
        }
        let mut longer = out.clone();
        longer.extend_from_slice(&[0; 8]);
        assert!(dec(Datatype::Int32, &longer, input.len()).is_err());
        assert!(dec(Datatype::Int32, &out, input.len() - 4).is_err());
        let mut huge = out.clone();
        huge[1..9].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(dec(Datatype::Int32, &huge, input.len()).is_err());
        let mut zero = out;
        zero[1..9].fill(0);
        assert!(dec(Datatype::Int32, &zero, 0).is_err());
        assert!(dec(Datatype::Float32, &[0; 13], 4).is_err());
    }

    const INTEGERS: [Datatype; 10] = [
        Datatype::Int8,
        Datatype::UInt8,
        Datatype::Char,
        Datatype::Int16,
        Datatype::UInt16,
        Datatype::Int32,
        Datatype::UInt32,
        Datatype::Int64,
        Datatype::UInt64,
        Datatype::DatetimeMs,
    ];

    proptest! {
        #[test]
        fn round_trips(
            t in proptest::sample::select(INTEGERS.to_vec()),
            start in any::<u64>(),
            steps in proptest::collection::vec(-300i64..300, 0..150),
        ) {
            // Smooth sequences (packed) in the value's own width.
            let width = t.size() as usize;
            let mut v = start;
            let mut input = Vec::new();
            for s in std::iter::once(0).chain(steps) {
                v = v.wrapping_add(s as u64);
                input.extend_from_slice(&v.to_le_bytes()[..width]);
            }
            match enc(t, &input) {
                Ok(out) => prop_assert_eq!(dec(t, &out, input.len()).unwrap(), input),
                // Wrapping 64-bit sequences may leave the int64 range.
                Err(FilterError::BadInput { .. }) => prop_assert_eq!(width, 8),
                Err(e) => return Err(TestCaseError::fail(e.to_string())),
            }
        }

        #[test]
        fn random_bytes_round_trip(
            t in proptest::sample::select(INTEGERS.to_vec()),
            bytes in proptest::collection::vec(any::<u8>(), 1..100),
        ) {
            let width = t.size() as usize;
            let n = bytes.len() / width * width;
            prop_assume!(n > 0);
            match enc(t, &bytes[..n]) {
                Ok(out) => prop_assert_eq!(dec(t, &out, n).unwrap(), &bytes[..n]),
                // Only 64-bit deltas can leave the int64 range TileDB uses.
                Err(FilterError::BadInput { .. }) => prop_assert_eq!(width, 8),
                Err(e) => prop_assert!(false, "{e}"),
            }
        }
    }
}
