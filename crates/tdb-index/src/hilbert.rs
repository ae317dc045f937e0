//! The Hilbert curve of TileDB's Hilbert cell order: each coordinate is
//! bucketed into `bits` bits (TileDB's `Dimension::map_to_uint64`), then
//! the buckets are mapped to a position on the curve (Skilling's transpose
//! algorithm, as TileDB's `Hilbert::coords_to_hilbert`).

use tdb_format::Scalar;
use tdb_schema::Dimension;

/// The most dimensions a Hilbert value has bits for: beyond, [`bits`] is 0.
pub const MAX_DIMS: usize = 63;

/// Bits per dimension for `dim_num` dimensions (63 bits shared).
pub fn bits(dim_num: usize) -> u32 {
    63usize.checked_div(dim_num.max(1)).unwrap_or(0) as u32
}

/// The bucket of `value` (one cell of `dim`) in `bits` bits: numbers are
/// placed by their fraction of the domain (in `f64`, truncated as TileDB
/// does); strings by their first 8 bytes.
pub fn bucket(dim: &Dimension, value: &[u8], bits: u32) -> u64 {
    // All ones in `bits` bits (every bit for 64 and more).
    let max_bucket = 1u64.checked_shl(bits).unwrap_or(0).wrapping_sub(1);
    if dim.is_var() || dim.datatype.is_string() {
        let mut ret = 0u64;
        for i in 0..8 {
            ret <<= 8;
            if let Some(&b) = value.get(i) {
                // TileDB ORs a (signed) char: bytes ≥ 0x80 sign-extend.
                ret |= (b as i8) as i64 as u64;
            }
        }
        // The top `bits` bits: none for 0 bits (more than 63 dimensions).
        return ret.checked_shr(64u32.saturating_sub(bits)).unwrap_or(0);
    }
    let Some((lo, hi)) = dim.bounds() else {
        return 0;
    };
    let as_f64 = |b: &[u8]| Scalar::decode(dim.datatype, b).map_or(0.0, Scalar::as_f64);
    let (lo, hi, v) = (as_f64(lo), as_f64(hi), as_f64(value));
    let range = hi - lo;
    ((v - lo) / range * max_bucket as f64) as u64
}

/// The Hilbert value of bucketed coordinates (`coords.len()` dimensions of
/// `bits` bits each).
// Past the first check `n` is 1 to 63 and `bits` at least 1: every index
// is below `n`, every shift below 64 for the `bits` TileDB uses (63
// shared by the dimensions), and `at` counts at most 63 bits.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
pub fn value(coords: &[u64], bits: u32) -> u64 {
    let n = coords.len();
    if n == 0 || n > MAX_DIMS || bits == 0 {
        return 0;
    }
    let mut x = [0u64; MAX_DIMS];
    let x = &mut x[..n];
    x.copy_from_slice(coords);
    // Axes to transpose: inverse undo. Without branches: the bits tested
    // are as good as random, and mispredictions cost more than the work.
    let set = |v: u64, q: u64| 0u64.wrapping_sub(u64::from(v & q != 0));
    let mut q = 1u64 << (bits - 1);
    while q > 1 {
        let p = q - 1;
        x[0] ^= p & set(x[0], q);
        for i in 1..n {
            // Bit q of x[i] set: invert x[0]'s low bits; else swap them.
            let invert = set(x[i], q);
            let t = (x[0] ^ x[i]) & p & !invert;
            x[0] ^= (p & invert) | t;
            x[i] ^= t;
        }
        q >>= 1;
    }
    // Gray encode.
    for i in 1..n {
        x[i] ^= x[i - 1];
    }
    let mut t = x[n - 1];
    let mut i = 1u32;
    while i < bits {
        x[n - 1] ^= x[n - 1] >> i;
        i <<= 1;
    }
    t ^= x[n - 1];
    for xi in x.iter_mut().take(n - 1) {
        *xi ^= t;
    }
    // Interleave the transpose, most significant bit first.
    let mut ret = 0u64;
    let mut at = 0u32;
    for j in 0..bits {
        for xi in x.iter().rev() {
            ret |= ((xi >> j) & 1) << at;
            at += 1;
        }
    }
    ret
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_bit_curve_matches_tiledbs_picture() {
        // TileDB's hilbert.h draws the 2-D curve of 4 bits: (0,0)=0,
        // (1,0)=1, (1,1)=2, (0,1)=3, (0,2)=4, (0,3)=5, (1,3)=6, (1,2)=7,
        // (2,2)=8, (2,3)=9.
        let want = [
            ((0, 0), 0),
            ((1, 0), 1),
            ((1, 1), 2),
            ((0, 1), 3),
            ((0, 2), 4),
            ((0, 3), 5),
            ((1, 3), 6),
            ((1, 2), 7),
            ((2, 2), 8),
            ((2, 3), 9),
            ((15, 0), 255),
        ];
        for ((a, b), h) in want {
            assert_eq!(value(&[a, b], 4), h, "({a}, {b})");
        }
    }
}
