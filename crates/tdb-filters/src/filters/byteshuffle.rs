//! BYTESHUFFLE: Blosc's byte shuffle, one data part at a time.
//!
//! TileDB calls `blosc2_shuffle` on each part whole, with the element size of
//! the filter's input datatype: the `n` whole elements of a part are
//! transposed so that byte `j` of element `i` lands at `j * n + i`, and the
//! bytes after the last whole element are copied as they are. The framing is
//! [`framed`](super::framed)'s.

use super::{framed, Direction};
use crate::buffer::{Parts, Stage, Unfiltered};
use crate::simd::with_avx2;
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
    by_planes(size, src, out, Direction::Forward);
}

/// Appends the inverse of [`shuffle`] of `src` to `out`.
pub(super) fn unshuffle(size: usize, src: &[u8], out: &mut Vec<u8>) {
    by_planes(size, src, out, Direction::Reverse);
}

/// Appends `src`'s whole `size`-byte elements turned into byte planes
/// (forward) or back (reverse), then the bytes after them as they are.
fn by_planes(size: usize, src: &[u8], out: &mut Vec<u8>, direction: Direction) {
    let cells = src.chunks_exact(size.max(1));
    let (body, tail) = src.split_at(src.len().saturating_sub(cells.remainder().len()));
    if size <= 1 || body.len() <= size {
        out.extend_from_slice(src);
        return;
    }
    let n = cells.len();
    let base = out.len();
    out.resize(base.saturating_add(body.len()), 0);
    let dst = crate::buffer::tail(out, base);
    match size {
        2 => with_avx2(
            #[inline(always)]
            || planes::<2>(body, n, dst, direction),
        ),
        4 => with_avx2(
            #[inline(always)]
            || planes::<4>(body, n, dst, direction),
        ),
        8 => with_avx2(
            #[inline(always)]
            || planes::<8>(body, n, dst, direction),
        ),
        // Other sizes (none of TileDB's datatypes): byte by byte.
        _ => match direction {
            Direction::Forward => {
                for (i, cell) in body.chunks_exact(size).enumerate() {
                    for (plane, &b) in dst.chunks_exact_mut(n).zip(cell) {
                        if let Some(d) = plane.get_mut(i) {
                            *d = b;
                        }
                    }
                }
            }
            Direction::Reverse => {
                for (j, plane) in body.chunks_exact(n).enumerate() {
                    for (cell, &b) in dst.chunks_exact_mut(size).zip(plane) {
                        if let Some(d) = cell.get_mut(j) {
                            *d = b;
                        }
                    }
                }
            }
        },
    }
    out.extend_from_slice(tail);
}

#[inline(always)]
fn planes<const SIZE: usize>(src: &[u8], n: usize, dst: &mut [u8], direction: Direction) {
    match direction {
        Direction::Forward => split::<SIZE>(src, n, dst),
        Direction::Reverse => join::<SIZE>(src, n, dst),
    }
}

/// The `n` cells of `SIZE` bytes from their planes (plane `j`: byte `j` of
/// every cell). Written byte by byte, one cell per iteration, with every
/// plane a slice of exactly `n` bytes (no bounds checks left in the loop),
/// so the compiler vectorizes it as interleaving loads (with AVX2: 13 GiB/s
/// for 8-byte cells, 46 for 4-byte, against 4.8 for 64-bit word
/// transposes). Into a zeroed buffer: filling the buffer on the stack a
/// block at a time and appending measured slower (8.7 GiB/s against 10.9
/// through the whole filter).
#[inline(always)]
// Indices proven in bounds: every plane holds exactly `n` bytes and
// `cells` at least `n * SIZE` (both checked first, which is what leaves
// the loop free of bounds checks to vectorize).
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
fn join<const SIZE: usize>(planes: &[u8], n: usize, cells: &mut [u8]) {
    let mut rest = planes;
    let p: [&[u8]; SIZE] = std::array::from_fn(|_| {
        let (plane, next) = rest.split_at(n.min(rest.len()));
        rest = next;
        plane
    });
    if p.iter().any(|plane| plane.len() != n) || cells.len() < n * SIZE {
        return;
    }
    for (k, cell) in cells[..n * SIZE].chunks_exact_mut(SIZE).enumerate() {
        for j in 0..SIZE {
            cell[j] = p[j][k];
        }
    }
}

/// The inverse of [`join`]: the planes of `n` cells of `SIZE` bytes.
#[inline(always)]
// As in `join`: the checks first bound every index.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
fn split<const SIZE: usize>(cells: &[u8], n: usize, planes: &mut [u8]) {
    let mut rest = planes;
    let p: [&mut [u8]; SIZE] = std::array::from_fn(|_| {
        let at = n.min(rest.len());
        let (plane, next) = std::mem::take(&mut rest).split_at_mut(at);
        rest = next;
        plane
    });
    if p.iter().any(|plane| plane.len() != n) || cells.len() < n * SIZE {
        return;
    }
    for (k, cell) in cells[..n * SIZE].chunks_exact(SIZE).enumerate() {
        for j in 0..SIZE {
            p[j][k] = cell[j];
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

        /// The vectorized loops give what the definition gives, both ways,
        /// for every element size and length (the bytes after the last
        /// whole cell too), run with AVX2 where the CPU has it and as built
        /// for the baseline target.
        #[test]
        fn matches_the_definition(
            data in proptest::collection::vec(any::<u8>(), 0..700),
            size in proptest::sample::select(vec![1usize, 2, 3, 4, 8, 16]),
            reverse in any::<bool>(),
        ) {
            let direction = if reverse { Direction::Reverse } else { Direction::Forward };
            let n = data.len() / size;
            let mut expected = data.clone();
            for i in 0..n {
                for j in 0..size {
                    let (cell, plane) = (i * size + j, j * n + i);
                    match direction {
                        Direction::Forward => expected[plane] = data[cell],
                        Direction::Reverse => expected[cell] = data[plane],
                    }
                }
            }
            let mut got = vec![0xEE];
            match direction {
                Direction::Forward => shuffle(size, &data, &mut got),
                Direction::Reverse => unshuffle(size, &data, &mut got),
            }
            prop_assert_eq!(got[0], 0xEE);
            prop_assert_eq!(&got[1..], &expected[..]);
            let whole = n * size;
            let mut baseline = vec![0; whole];
            match size {
                2 => planes::<2>(&data[..whole], n, &mut baseline, direction),
                4 => planes::<4>(&data[..whole], n, &mut baseline, direction),
                8 => planes::<8>(&data[..whole], n, &mut baseline, direction),
                _ => baseline.copy_from_slice(&expected[..whole]),
            }
            prop_assert_eq!(&baseline[..], &expected[..whole]);
        }
    }
}
