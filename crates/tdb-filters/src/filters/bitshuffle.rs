//! BITSHUFFLE: the bitshuffle transpose (as Blosc 2 ships it), per part.
//!
//! TileDB first splits every data part whose size is not a multiple of 8
//! into the largest multiple of 8 and the rest (a part under 8 bytes becomes
//! an empty part and itself), frames the resulting parts with
//! [`framed`](super::framed), and copies verbatim any part that is not a
//! multiple of both 8 and the element size. Other parts are bit-shuffled in
//! blocks of 8192 bytes (bitshuffle's default block for TileDB's element
//! sizes), each by `blosc2_bitshuffle`: the block's elements, rounded down to
//! a multiple of 8, are transposed and the bytes after them copied.
//!
//! The transpose of `n` elements of `s` bytes writes `8 * s` rows of `n / 8`
//! bytes: row `8 * j + k` holds bit `k` of byte `j` of every element, element
//! `i` at bit `i % 8` of the row's byte `i / 8`.

use super::framed;
use super::windows::WindowInt;
use super::Direction;
use crate::buffer::{Parts, Stage, Unfiltered};
use crate::simd::with_avx2;
use crate::Result;

const NAME: &str = tdb_format::FilterType::Bitshuffle.name();

/// The block TileDB hands to Blosc at a time (bitshuffle's
/// `BSHUF_TARGET_BLOCK_SIZE_B`).
const BLOCK_BYTES: usize = 8192;

/// Forward over one chunk.
pub(crate) fn forward(st: &Stage<'_>, metadata: Parts, data: Parts) -> Result<(Parts, Parts)> {
    let size = st.datatype_size();
    let parts: Vec<&[u8]> = data
        .iter()
        .flat_map(|part| {
            let (head, rest) = part.split_at(part.len() & !7);
            std::iter::once(head).chain((!rest.is_empty()).then_some(rest))
        })
        .collect();
    framed::forward(NAME, metadata, &parts, |part, out| {
        by_blocks(size, part, out, Direction::Forward);
        Ok(())
    })
}

/// Reverse over one chunk.
pub(crate) fn reverse(
    st: &Stage<'_>,
    metadata: &[u8],
    data: &[u8],
    out: &mut Unfiltered,
) -> Result<()> {
    let size = st.datatype_size();
    framed::reverse(NAME, metadata, data, out, |part, out| {
        by_blocks(size, part, out, Direction::Reverse);
        Ok(())
    })
}

/// Transposes one part in `direction` the way TileDB and Blosc cut it,
/// appending the result (of the part's size) to `out`.
fn by_blocks(size: usize, part: &[u8], out: &mut Vec<u8>, direction: Direction) {
    if part.len().checked_rem(size) != Some(0) || part.len() & 7 != 0 {
        out.extend_from_slice(part);
        return;
    }
    let start = out.len();
    out.resize(start.saturating_add(part.len()), 0);
    let dst = crate::buffer::tail(out, start);
    for (src, dst) in part.chunks(BLOCK_BYTES).zip(dst.chunks_mut(BLOCK_BYTES)) {
        // Whole groups of 8 elements; `size` divides the part, so it is
        // not 0.
        let elements = src.len().checked_div(size).unwrap_or(0);
        let shuffled = (elements & !7).saturating_mul(size);
        let (src_head, src_tail) = src.split_at(shuffled);
        let (dst_head, dst_tail) = dst.split_at_mut(shuffled);
        if shuffled > 0 {
            transpose(size, src_head, dst_head, direction);
        }
        dst_tail.copy_from_slice(src_tail);
    }
}

/// Transposes the 8x8 bit matrix whose row `r` is byte `r` of `x`: bit `c`
/// of byte `r` goes to bit `r` of byte `c`.
fn transpose8(mut x: u64) -> u64 {
    let mut t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x ^= t ^ (t << 7);
    t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x ^= t ^ (t << 14);
    t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^ t ^ (t << 28)
}

/// One direction of the transpose: `n` elements of `size` bytes (forward:
/// `src`; reverse: `dst`) and their `8 * size` rows of `n / 8` bytes, `n`
/// a multiple of 8. Elements come in chunks of `8 * size`, one
/// element-sized word in each row: a chunk is a square bit matrix,
/// transposed whole ([`square`]); groups of 8 left over after the last
/// whole chunk go one at a time.
fn transpose(size: usize, src: &[u8], dst: &mut [u8], direction: Direction) {
    match size {
        1 => squares::<u8>(src, dst, direction),
        2 => squares::<u16>(src, dst, direction),
        4 => squares::<u32>(src, dst, direction),
        8 => squares::<u64>(src, dst, direction),
        _ => by_groups(size, 0, src, dst, direction),
    }
}

/// [`by_squares`] in 256-bit vectors where the CPU has them.
fn squares<W: Word>(src: &[u8], dst: &mut [u8], direction: Direction) {
    with_avx2(
        #[inline(always)]
        || by_squares::<W>(src, dst, direction),
    );
}

/// A word as wide as an element: `BITS` of them make a square bit matrix.
trait Word: WindowInt {
    /// Swaps bit `e + j` of `a` with bit `e` of `b` wherever `mask` (bits
    /// whose index has bit `j` clear) has bit `e`.
    fn swap(a: &mut Self, b: &mut Self, j: usize, mask: u64);
}

macro_rules! word {
    ($($t:ty),*) => {$(
        impl Word for $t {
            #[inline(always)]
            fn swap(a: &mut Self, b: &mut Self, j: usize, mask: u64) {
                let t = ((*a >> j) ^ *b) & mask as $t;
                *b ^= t;
                *a ^= t << j;
            }
        }
    )*};
}
word!(u8, u16, u32, u64);

/// Transposes the `W::BITS` square bit matrix in `w[..W::BITS]`: bit `e`
/// of word `r` goes to bit `r` of word `e`. Halves, then quarters, ... swap
/// their off-diagonal blocks; each stage is one loop of independent swaps,
/// which the compiler turns into vector code.
#[inline(always)]
// `W::BITS` is at most 64 (the array's length) and a power of two, so the
// levels' masks, blocks and halves stay in bounds.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
fn square<W: Word>(w: &mut [W; 64]) {
    /// Bits whose index has bit `level` clear.
    const MASKS: [u64; 6] = [
        0x5555_5555_5555_5555,
        0x3333_3333_3333_3333,
        0x0F0F_0F0F_0F0F_0F0F,
        0x00FF_00FF_00FF_00FF,
        0x0000_FFFF_0000_FFFF,
        0x0000_0000_FFFF_FFFF,
    ];
    let bits = usize::from(W::BITS);
    let w = &mut w[..bits];
    for level in (0..bits.trailing_zeros() as usize).rev() {
        let j = 1 << level;
        for block in w.chunks_exact_mut(2 * j) {
            let (lo, hi) = block.split_at_mut(j);
            for (a, b) in lo.iter_mut().zip(hi) {
                W::swap(a, b, j, MASKS[level]);
            }
        }
    }
}

/// One direction over whole chunks of `W::BITS` elements (each one word in
/// each of the `W::BITS` rows), then the groups after them.
#[inline(always)]
// `src` and `dst` are whole groups of 8 elements of `W::BYTES` (see
// `by_blocks`) and equally long: every chunk's elements and every row's
// word lie within `8 * row * size` bytes.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
fn by_squares<W: Word>(src: &[u8], dst: &mut [u8], direction: Direction) {
    let (bits, size) = (usize::from(W::BITS), W::BYTES);
    let row = src.len() / size / 8;
    let chunks = row / size;
    let mut w = [W::default(); 64];
    for c in 0..chunks {
        let elements = c * bits * size..(c + 1) * bits * size;
        let word = |r: usize| r * row + c * size..r * row + (c + 1) * size;
        match direction {
            Direction::Forward => {
                for (w, e) in w.iter_mut().zip(src[elements].chunks_exact(size)) {
                    *w = W::load(e);
                }
                square(&mut w);
                for (r, w) in w[..bits].iter().enumerate() {
                    w.write(&mut dst[word(r)]);
                }
            }
            Direction::Reverse => {
                for (r, w) in w[..bits].iter_mut().enumerate() {
                    *w = W::load(&src[word(r)]);
                }
                square(&mut w);
                for (w, e) in w.iter().zip(dst[elements].chunks_exact_mut(size)) {
                    w.write(e);
                }
            }
        }
    }
    by_groups(size, chunks * size, src, dst, direction);
}

/// One direction over the groups of 8 elements from group `first` on: per
/// element byte `j`, gather byte `j` of the 8 elements (forward) or a byte
/// from each of the 8 rows of byte `j` (reverse) into a word, transpose its
/// bits, scatter the word's bytes.
// As in `by_squares`: group `g < row` spans `8 * size` bytes from
// `8 * size * g`, and row byte `(8j + k) * row + g` is below `8 * size * row`.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
fn by_groups(size: usize, first: usize, src: &[u8], dst: &mut [u8], direction: Direction) {
    let row = src.len() / size / 8;
    for g in first..row {
        let group = 8 * size * g..8 * size * (g + 1);
        for j in 0..size {
            let mut x = 0u64;
            match direction {
                Direction::Forward => {
                    for (m, element) in src[group.clone()].chunks_exact(size).enumerate() {
                        x |= u64::from(element[j]) << (8 * m);
                    }
                    for (k, b) in transpose8(x).to_le_bytes().into_iter().enumerate() {
                        dst[(8 * j + k) * row + g] = b;
                    }
                }
                Direction::Reverse => {
                    for k in 0..8 {
                        x |= u64::from(src[(8 * j + k) * row + g]) << (8 * k);
                    }
                    let t = transpose8(x).to_le_bytes();
                    for (element, b) in dst[group.clone()].chunks_exact_mut(size).zip(t) {
                        element[j] = b;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FilterError;
    use proptest::prelude::*;
    use tdb_format::{Datatype, FormatVersion};

    fn stage(t: Datatype) -> Stage<'static> {
        Stage::new(t, FormatVersion::WRITTEN)
    }

    fn run(t: Datatype, data: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let (m, d) = forward(&stage(t), Parts::new(), Parts::one(data.to_vec())).unwrap();
        (m.concat(), d.concat())
    }

    fn back(t: Datatype, meta: &[u8], data: &[u8]) -> Result<Unfiltered> {
        let mut out = Unfiltered::default();
        reverse(&stage(t), meta, data, &mut out)?;
        Ok(out)
    }

    /// The transpose bit by bit, from its definition.
    fn reference(size: usize, src: &[u8]) -> Vec<u8> {
        let n = src.len() / size;
        let mut dst = vec![0u8; src.len()];
        for i in 0..n {
            for j in 0..size {
                for k in 0..8 {
                    let bit = (src[i * size + j] >> k) & 1;
                    dst[(8 * j + k) * (n / 8) + i / 8] |= bit << (i % 8);
                }
            }
        }
        dst
    }

    fn le<T: Copy, const N: usize>(values: &[T], f: fn(T) -> [u8; N]) -> Vec<u8> {
        values.iter().flat_map(|&v| f(v)).collect()
    }

    #[test]
    fn eight_bytes_transpose() {
        // Eight one-byte elements: the rows are the bit planes.
        let data = [0b1000_0001u8, 0, 0, 0, 0, 0, 0, 0b0000_0010];
        let (meta, out) = run(Datatype::UInt8, &data);
        assert_eq!(meta, [1, 0, 0, 0, 8, 0, 0, 0]);
        assert_eq!(out, [0b0000_0001, 0b1000_0000, 0, 0, 0, 0, 0, 0b0000_0001]);
        assert_eq!(back(Datatype::UInt8, &meta, &out).unwrap().data, data);
    }

    #[test]
    fn kernel_matches_the_definition_for_every_size() {
        for size in [1usize, 2, 4, 8] {
            let src: Vec<u8> = (0..size * 64).map(|i| (i * 131 + 7) as u8).collect();
            let mut dst = vec![0; src.len()];
            transpose(size, &src, &mut dst, Direction::Forward);
            assert_eq!(dst, reference(size, &src), "size {size}");
            let mut again = vec![0; src.len()];
            transpose(size, &dst, &mut again, Direction::Reverse);
            assert_eq!(again, src);
        }
    }

    #[test]
    fn parts_split_at_multiples_of_eight() {
        // 12 bytes of int32: an 8-byte part (2 elements: too few to shuffle)
        // and a 4-byte part.
        let data = le(&[1i32, 2, 3], i32::to_le_bytes);
        let (meta, out) = run(Datatype::Int32, &data);
        assert_eq!(meta, [2, 0, 0, 0, 8, 0, 0, 0, 4, 0, 0, 0]);
        assert_eq!(out, data);
        // Under 8 bytes: an empty part, then the bytes.
        let (meta, out) = run(Datatype::Int16, &[1, 2, 3, 4, 5, 6]);
        assert_eq!(meta, [2, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0]);
        assert_eq!(out, [1, 2, 3, 4, 5, 6]);
        assert_eq!(back(Datatype::Int16, &meta, &out).unwrap().data, out);
    }

    #[test]
    fn empty_input_is_one_empty_part() {
        let (meta, out) = run(Datatype::Float32, &[]);
        assert_eq!(meta, [1, 0, 0, 0, 0, 0, 0, 0]);
        assert!(out.is_empty());
        assert!(back(Datatype::Float32, &meta, &out)
            .unwrap()
            .data
            .is_empty());
    }

    #[test]
    fn blocks_of_8192_bytes_and_leftover_elements() {
        // 8192 + 200 bytes of int32: a full block, then 50 elements of which
        // 48 are shuffled and the last 2 copied.
        let values: Vec<i32> = (0..2098).map(|i| i * 7919 - 3).collect();
        let data = le(&values, i32::to_le_bytes);
        let (meta, out) = run(Datatype::Int32, &data);
        assert_eq!(meta, [1, 0, 0, 0, 0xC8, 0x20, 0, 0]);
        assert_eq!(&out[..8192], &reference(4, &data[..8192])[..]);
        assert_eq!(&out[8192..8384], &reference(4, &data[8192..8384])[..]);
        assert_eq!(&out[8384..], &data[8384..]);
        assert_eq!(back(Datatype::Int32, &meta, &out).unwrap().data, data);
    }

    #[test]
    fn earlier_metadata_follows_and_every_part_is_split() {
        let mut parts = Parts::one((0..20).collect());
        parts.push((20..36).collect());
        let (m, d) = forward(&stage(Datatype::Int8), Parts::one(vec![0xEE]), parts).unwrap();
        assert_eq!(m.count(), 2);
        assert_eq!(d.count(), 1);
        let meta = m.concat();
        assert_eq!(
            meta,
            [3, 0, 0, 0, 16, 0, 0, 0, 4, 0, 0, 0, 16, 0, 0, 0, 0xEE]
        );
        let out = d.concat();
        let back = back(Datatype::Int8, &meta, &out).unwrap();
        assert_eq!(back.data, (0..36).collect::<Vec<u8>>());
        assert_eq!(back.metadata, [0xEE]);
    }

    #[test]
    fn truncations_are_errors() {
        let data = le(&(0..100i64).collect::<Vec<_>>(), i64::to_le_bytes);
        let (meta, out) = run(Datatype::Int64, &data);
        for n in 0..meta.len() {
            assert!(matches!(
                back(Datatype::Int64, &meta[..n], &out),
                Err(FilterError::Corrupt { .. })
            ));
        }
        for n in 0..out.len() {
            assert!(back(Datatype::Int64, &meta, &out[..n]).is_err());
        }
        let mut lying = meta.clone();
        lying[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(back(Datatype::Int64, &lying, &out).is_err());
    }

    proptest! {
        #[test]
        fn round_trips(
            data in proptest::collection::vec(any::<u8>(), 0..2000),
            t in proptest::sample::select(Datatype::ALL.to_vec()),
        ) {
            let (meta, out) = run(t, &data);
            prop_assert_eq!(out.len(), data.len());
            prop_assert_eq!(back(t, &meta, &out).unwrap().data, data);
        }

        #[test]
        fn whole_groups_match_the_definition(
            groups in 1usize..40,
            seed in any::<u64>(),
            size in proptest::sample::select(vec![1usize, 2, 4, 8]),
        ) {
            let src: Vec<u8> = (0..groups * 8 * size)
                .map(|i| (seed.rotate_left(i as u32 % 64) ^ i as u64) as u8)
                .collect();
            let mut dst = vec![0; src.len()];
            transpose(size, &src, &mut dst, Direction::Forward);
            prop_assert_eq!(&dst, &reference(size, &src));
            // The square kernel and the group-at-a-time one agree both ways.
            let mut groups = vec![0; src.len()];
            by_groups(size, 0, &src, &mut groups, Direction::Forward);
            prop_assert_eq!(&dst, &groups);
            let mut squares = vec![0; src.len()];
            transpose(size, &src, &mut squares, Direction::Reverse);
            by_groups(size, 0, &src, &mut groups, Direction::Reverse);
            prop_assert_eq!(&squares, &groups);
            let mut back = vec![0; src.len()];
            transpose(size, &dst, &mut back, Direction::Reverse);
            prop_assert_eq!(&back, &src);
            // The square kernel as built for the baseline target too (the
            // calls above run it with AVX2 where this CPU has it).
            for (direction, input, want) in
                [(Direction::Forward, &src, &dst), (Direction::Reverse, &dst, &src)]
            {
                let mut out = vec![0; src.len()];
                match size {
                    1 => by_squares::<u8>(input, &mut out, direction),
                    2 => by_squares::<u16>(input, &mut out, direction),
                    4 => by_squares::<u32>(input, &mut out, direction),
                    _ => by_squares::<u64>(input, &mut out, direction),
                }
                prop_assert_eq!(&out, want);
            }
        }
    }
}
