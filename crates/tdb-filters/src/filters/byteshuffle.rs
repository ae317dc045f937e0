//! BYTESHUFFLE: Blosc's byte shuffle, one data part at a time.
//!
//! TileDB calls `blosc2_shuffle` on each part whole, with the element size of
//! the filter's input datatype: the `n` whole elements of a part are
//! transposed so that byte `j` of element `i` lands at `j * n + i`, and the
//! bytes after the last whole element are copied as they are. The framing is
//! [`framed`](super::framed)'s.

use super::framed;
use crate::buffer::{Parts, Stage, Unfiltered};
use crate::Result;

const NAME: &str = tdb_format::FilterType::Byteshuffle.name();

/// Forward over one chunk.
pub(crate) fn forward(st: &Stage<'_>, metadata: Parts, data: Parts) -> Result<(Parts, Parts)> {
    let size = st.datatype_size();
    let parts: Vec<&[u8]> = data.iter().collect();
    framed::forward(NAME, metadata, &parts, |part, out| {
        shuffle(size, part, out);
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
        unshuffle(size, part, out);
        Ok(())
    })
}

/// Appends the byte shuffle of `src` with `size`-byte elements to `out`.
pub(super) fn shuffle(size: usize, src: &[u8], out: &mut Vec<u8>) {
    let whole = src.len() - src.len() % size.max(1);
    let (elements, tail) = src.split_at(whole);
    if size <= 1 || elements.len() <= size {
        out.extend_from_slice(src);
        return;
    }
    let n = elements.len() / size;
    let base = out.len();
    out.resize(base + whole, 0);
    let planes = &mut out[base..];
    let done = match size {
        8 => shuffle8(elements, n, planes),
        4 => shuffle4(elements, n, planes),
        _ => 0,
    };
    // Cells the word transposes did not take, one at a time.
    for i in done..n {
        for j in 0..size {
            planes[j * n + i] = elements[i * size + j];
        }
    }
    out.extend_from_slice(tail);
}

/// Appends the inverse of [`shuffle`] of `src` to `out`.
pub(super) fn unshuffle(size: usize, src: &[u8], out: &mut Vec<u8>) {
    let whole = src.len() - src.len() % size.max(1);
    let (planes, tail) = src.split_at(whole);
    if size <= 1 || planes.len() <= size {
        out.extend_from_slice(src);
        return;
    }
    let n = planes.len() / size;
    out.reserve(src.len());
    let done = match size {
        8 => unshuffle8(planes, n, out),
        4 => unshuffle4(planes, n, out),
        _ => 0,
    };
    // Cells the word transposes did not take, one at a time.
    for i in done..n {
        out.extend((0..size).map(|j| planes[j * n + i]));
    }
    out.extend_from_slice(tail);
}

/// Eight consecutive bytes of `p` from `at` as a little-endian word.
fn word(p: &[u8], at: usize) -> u64 {
    p.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// Transposes the 8×8 byte matrix whose row `k` is word `k` (byte `j` of
/// word `k` goes to byte `k` of word `j`) by swapping 4-, 2- and 1-byte
/// blocks between words. A transpose undoes itself, so shuffling and
/// unshuffling both use it.
fn transpose8(r: &mut [u64; 8]) {
    for j in 0..4 {
        let t = ((r[j] >> 32) ^ r[j + 4]) & 0x0000_0000_FFFF_FFFF;
        r[j] ^= t << 32;
        r[j + 4] ^= t;
    }
    for j in [0, 1, 4, 5] {
        let t = ((r[j] >> 16) ^ r[j + 2]) & 0x0000_FFFF_0000_FFFF;
        r[j] ^= t << 16;
        r[j + 2] ^= t;
    }
    for j in [0, 2, 4, 6] {
        let t = ((r[j] >> 8) ^ r[j + 1]) & 0x00FF_00FF_00FF_00FF;
        r[j] ^= t << 8;
        r[j + 1] ^= t;
    }
}

/// Transposes two 4×4 byte matrices at once: the low and the high halves
/// of the four words, as [`transpose8`] does.
fn transpose4(r: &mut [u64; 4]) {
    for j in [0, 1] {
        let t = ((r[j] >> 16) ^ r[j + 2]) & 0x0000_FFFF_0000_FFFF;
        r[j] ^= t << 16;
        r[j + 2] ^= t;
    }
    for j in [0, 2] {
        let t = ((r[j] >> 8) ^ r[j + 1]) & 0x00FF_00FF_00FF_00FF;
        r[j] ^= t << 8;
        r[j + 1] ^= t;
    }
}

/// 8-byte elements, eight cells at a time: the cells as eight words,
/// transposed, are the eight planes' bytes for those cells. Returns the
/// cells done.
fn shuffle8(cells: &[u8], n: usize, planes: &mut [u8]) -> usize {
    let mut i = 0;
    while i + 8 <= n {
        let mut r: [u64; 8] = std::array::from_fn(|k| word(cells, (i + k) * 8));
        transpose8(&mut r);
        for (j, w) in r.iter().enumerate() {
            planes[j * n + i..j * n + i + 8].copy_from_slice(&w.to_le_bytes());
        }
        i += 8;
    }
    i
}

/// 8-byte elements, eight cells at a time: eight words (byte `k` of word
/// `j` = byte `j` of cell `k`), transposed, are the eight cells.
fn unshuffle8(planes: &[u8], n: usize, out: &mut Vec<u8>) -> usize {
    let mut i = 0;
    while i + 8 <= n {
        let mut r: [u64; 8] = std::array::from_fn(|j| word(planes, j * n + i));
        transpose8(&mut r);
        out.extend_from_slice(r.map(u64::to_le_bytes).as_flattened());
        i += 8;
    }
    i
}

/// 4-byte elements, eight cells at a time: word `j` holds cell `j` (low
/// half) and cell `j + 4` (high half); transposed, word `j` is plane `j`'s
/// bytes for the eight cells.
fn shuffle4(cells: &[u8], n: usize, planes: &mut [u8]) -> usize {
    let cell = |k: usize| {
        let at = k * 4;
        u64::from(u32::from_le_bytes([
            cells[at],
            cells[at + 1],
            cells[at + 2],
            cells[at + 3],
        ]))
    };
    let mut i = 0;
    while i + 8 <= n {
        let mut r: [u64; 4] = std::array::from_fn(|j| cell(i + j) | cell(i + j + 4) << 32);
        transpose4(&mut r);
        for (j, w) in r.iter().enumerate() {
            planes[j * n + i..j * n + i + 8].copy_from_slice(&w.to_le_bytes());
        }
        i += 8;
    }
    i
}

/// 4-byte elements, eight cells at a time: per plane a word of eight
/// bytes; its two halves are the two 4×4 byte matrices of cells `i..i+4`
/// and `i+4..i+8`.
fn unshuffle4(planes: &[u8], n: usize, out: &mut Vec<u8>) -> usize {
    let mut i = 0;
    while i + 8 <= n {
        let mut r: [u64; 4] = std::array::from_fn(|j| word(planes, j * n + i));
        transpose4(&mut r);
        // Word j now holds cell j (low half) and cell j + 4 (high half).
        let low = r.map(|w| (w as u32).to_le_bytes());
        let high = r.map(|w| ((w >> 32) as u32).to_le_bytes());
        out.extend_from_slice(low.as_flattened());
        out.extend_from_slice(high.as_flattened());
        i += 8;
    }
    i
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

    #[test]
    fn transposes_bytes_and_keeps_the_tail() {
        let data = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14];
        let (meta, out) = run(Datatype::Int32, &data);
        assert_eq!(meta, [1, 0, 0, 0, 14, 0, 0, 0]);
        assert_eq!(out, [1, 5, 9, 2, 6, 10, 3, 7, 11, 4, 8, 12, 13, 14]);
        let back = back(Datatype::Int32, &meta, &out).unwrap();
        assert_eq!(back.data, data);
        assert!(back.metadata.is_empty());
    }

    #[test]
    fn one_byte_types_and_short_parts_are_copied() {
        let data = [9u8, 8, 7];
        assert_eq!(run(Datatype::UInt8, &data).1, data);
        assert_eq!(run(Datatype::Float64, &data).1, data);
        let one = 7u64.to_le_bytes();
        assert_eq!(run(Datatype::UInt64, &one).1, one);
    }

    #[test]
    fn empty_input_is_one_empty_part() {
        let (meta, out) = run(Datatype::Int64, &[]);
        assert_eq!(meta, [1, 0, 0, 0, 0, 0, 0, 0]);
        assert!(out.is_empty());
        assert!(back(Datatype::Int64, &meta, &out).unwrap().data.is_empty());
    }

    #[test]
    fn every_part_is_shuffled_alone_and_earlier_metadata_follows() {
        let mut parts = Parts::one(vec![1, 2, 3, 4]);
        parts.push(vec![5, 6, 7, 8, 9, 10]);
        let (m, d) = forward(&stage(Datatype::Int16), Parts::one(vec![0xAA]), parts).unwrap();
        assert_eq!(m.count(), 2);
        assert_eq!(d.count(), 1);
        let meta = m.concat();
        assert_eq!(meta, [2, 0, 0, 0, 4, 0, 0, 0, 6, 0, 0, 0, 0xAA]);
        let out = d.concat();
        assert_eq!(out, [1, 3, 2, 4, 5, 7, 9, 6, 8, 10]);
        let back = back(Datatype::Int16, &meta, &out).unwrap();
        assert_eq!(back.data, (1..=10).collect::<Vec<u8>>());
        assert_eq!(back.metadata, [0xAA]);
    }

    #[test]
    fn truncations_are_errors() {
        let data: Vec<u8> = (0..=255).collect();
        let (meta, out) = run(Datatype::Float32, &data);
        for n in 0..meta.len() {
            assert!(matches!(
                back(Datatype::Float32, &meta[..n], &out),
                Err(FilterError::Corrupt { .. })
            ));
        }
        for n in 0..out.len() {
            assert!(back(Datatype::Float32, &meta, &out[..n]).is_err());
        }
        let mut longer = out.clone();
        longer.push(0);
        assert!(back(Datatype::Float32, &meta, &longer).is_err());
        // A part count that promises more than there is.
        let mut lying = meta.clone();
        lying[0] = 0xFF;
        assert!(back(Datatype::Float32, &lying, &out).is_err());
    }

    proptest! {
        #[test]
        fn round_trips(
            data in proptest::collection::vec(any::<u8>(), 0..600),
            t in proptest::sample::select(Datatype::ALL.to_vec()),
        ) {
            let (meta, out) = run(t, &data);
            prop_assert_eq!(out.len(), data.len());
            prop_assert_eq!(back(t, &meta, &out).unwrap().data, data);
        }

        /// The word transposes give what the definition gives, for every
        /// length (whole groups of eight cells, the cells after them, the
        /// bytes after the last whole cell).
        #[test]
        fn unshuffle_matches_the_definition(
            data in proptest::collection::vec(any::<u8>(), 0..700),
            size in proptest::sample::select(vec![1usize, 2, 3, 4, 8, 16]),
        ) {
            let n = data.len() / size;
            let mut expected = data.clone();
            for i in 0..n {
                for j in 0..size {
                    expected[i * size + j] = data[j * n + i];
                }
            }
            let mut got = vec![0xEE];
            unshuffle(size, &data, &mut got);
            prop_assert_eq!(got[0], 0xEE);
            prop_assert_eq!(&got[1..], &expected[..]);
        }

        #[test]
        fn matches_the_definition(
            data in proptest::collection::vec(any::<u8>(), 0..700),
            size in proptest::sample::select(vec![1usize, 2, 3, 4, 8, 16]),
        ) {
            let n = data.len() / size;
            let mut expected = data.clone();
            for i in 0..n {
                for j in 0..size {
                    expected[j * n + i] = data[i * size + j];
                }
            }
            let mut got = vec![0xEE];
            shuffle(size, &data, &mut got);
            prop_assert_eq!(got[0], 0xEE);
            prop_assert_eq!(&got[1..], &expected[..]);
        }
    }
}
