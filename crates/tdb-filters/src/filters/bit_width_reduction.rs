//! BIT_WIDTH_REDUCTION: each window of values is stored relative to its
//! minimum, in the narrowest of 8, 16, 32 or 64 bits that holds the range.
//!
//! Metadata (prepended to the input metadata parts): `u32` total input
//! bytes, `u32` window count, then per window the minimum (one value of the
//! input type), `u8` bit width and `u32` window bytes. Data: one part, the
//! windows of every input part in order. A window whose width is not below
//! the type's, or whose size is not whole values (the tail of a part), is
//! stored as is. Only 16-, 32- and 64-bit integers (datetimes and times from
//! v20) are reduced; every other type passes through untouched.

use super::windows::{int_kind, windows, WindowInt};
use crate::buffer::{tail, take_data, to_u32, MetaReader, Parts, Stage, Unfiltered};
use crate::{FilterError, Result};
use tdb_format::with_native;

const NAME: &str = tdb_format::FilterType::BitWidthReduction.name();

/// Forward over one chunk.
pub(crate) fn forward(
    st: &Stage<'_>,
    max_window: u32,
    metadata: Parts,
    data: Parts,
) -> Result<(Parts, Parts)> {
    if let Some(kind) = int_kind(st, false) {
        with_native!(kind, int T => return encode::<T>(max_window, metadata, data), float => ());
    }
    Ok((metadata, data))
}

/// Reverse over one chunk.
pub(crate) fn reverse(
    st: &Stage<'_>,
    metadata: &[u8],
    data: &[u8],
    out: &mut Unfiltered,
) -> Result<()> {
    if let Some(kind) = int_kind(st, false) {
        with_native!(kind, int T => return decode::<T>(metadata, data, out), float => ());
    }
    out.pass_through(metadata, data);
    Ok(())
}

/// The stored width of a window's values relative to its minimum, and that
/// minimum. TileDB leaves the minimum uninitialised when the window holds no
/// whole value or its range overflows the type; tdb writes zero there, which
/// no reader looks at since such a window is stored as is.
fn reduced_width<T: WindowInt>(values: &[u8]) -> (u8, T) {
    let mut it = values.chunks_exact(T::BYTES).map(T::load);
    let Some(first) = it.next() else {
        return (T::BITS, T::default());
    };
    let (min, max) = it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let Some(span) = max.checked_sub(min).and_then(T::checked_inc) else {
        return (T::BITS, T::default());
    };
    let bits = match span.bits_required() {
        0..=8 => 8,
        9..=16 => 16,
        17..=32 => 32,
        _ => 64,
    };
    (bits, min)
}

fn encode<T: WindowInt>(max_window: u32, metadata: Parts, data: Parts) -> Result<(Parts, Parts)> {
    let input_size = to_u32(NAME, data.byte_len(), "input size")?;
    let mut headers = Vec::new();
    let mut count = 0usize;
    let mut out = Vec::with_capacity(data.byte_len());
    for part in data.iter() {
        for window in windows(NAME, part, max_window, T::BYTES)? {
            count = count.saturating_add(1);
            // The window's whole values (a tail shorter than one is kept).
            let values = window.chunks_exact(T::BYTES);
            let whole = window.len().saturating_sub(values.remainder().len());
            let (bits, min) = reduced_width::<T>(window.get(..whole).unwrap_or_default());
            min.store(&mut headers);
            headers.push(bits);
            headers.extend_from_slice(&to_u32(NAME, window.len(), "window")?.to_le_bytes());
            if bits >= T::BITS || whole != window.len() {
                out.extend_from_slice(window);
            } else {
                for v in window.chunks_exact(T::BYTES).map(T::load) {
                    v.wrapping_sub(min)
                        .store_narrow(usize::from(bits / 8), &mut out);
                }
            }
        }
    }
    let mut own = Vec::with_capacity(headers.len().saturating_add(8));
    own.extend_from_slice(&input_size.to_le_bytes());
    own.extend_from_slice(&to_u32(NAME, count, "window count")?.to_le_bytes());
    own.extend_from_slice(&headers);
    let mut metadata = metadata;
    metadata.prepend(own);
    Ok((metadata, Parts::one(out)))
}

fn decode<T: WindowInt>(metadata: &[u8], data: &[u8], out: &mut Unfiltered) -> Result<()> {
    let mut meta = MetaReader::new(NAME, metadata);
    let original = meta.u32("original size")? as usize;
    let count = meta.u32("window count")?;
    let mut input = data;
    // A value shrinks at most 8-fold, so this bounds what a lying header
    // can make us reserve.
    out.data.reserve(original.min(data.len().saturating_mul(8)));
    let mut left = original;
    for i in 0..count {
        let min = T::load(meta.take(T::BYTES, "window minimum")?);
        let bits = meta.u8("window bit width")?;
        let size = meta.u32("window size")? as usize;
        left = left.checked_sub(size).ok_or_else(|| {
            FilterError::corrupt(
                NAME,
                format!("window {i} of {size} bytes overruns the original size {original}"),
            )
        })?;
        if bits >= T::BITS || size.checked_rem(T::BYTES) != Some(0) {
            out.data
                .extend_from_slice(take_data(NAME, &mut input, size, "stored window")?);
            continue;
        }
        if !matches!(bits, 8 | 16 | 32) {
            return Err(FilterError::corrupt(
                NAME,
                format!("window {i} has bit width {bits}"),
            ));
        }
        let width = usize::from(bits / 8);
        let packed_size = size
            .checked_div(T::BYTES)
            .unwrap_or(0)
            .saturating_mul(width);
        let packed = take_data(NAME, &mut input, packed_size, "reduced window")?;
        let start = out.data.len();
        out.data.resize(start.saturating_add(size), 0);
        let dst = tail(&mut out.data, start);
        match width {
            1 => widen::<T, 1>(packed, min, dst),
            2 => widen::<T, 2>(packed, min, dst),
            _ => widen::<T, 4>(packed, min, dst),
        }
    }
    if left != 0 || !input.is_empty() {
        return Err(FilterError::corrupt(
            NAME,
            format!(
                "windows cover {} of {original} bytes and leave {} input bytes",
                original.saturating_sub(left),
                input.len()
            ),
        ));
    }
    out.pass_on_metadata(meta.rest());
    Ok(())
}

/// One reduced window back to full width: each `W`-byte value plus `min`.
fn widen<T: WindowInt, const W: usize>(packed: &[u8], min: T, dst: &mut [u8]) {
    for (value, narrow) in dst.chunks_exact_mut(T::BYTES).zip(packed.chunks_exact(W)) {
        T::load_narrow(narrow).wrapping_add(min).write(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tdb_format::{Datatype, FormatVersion};

    fn stage(t: Datatype) -> Stage<'static> {
        Stage::new(t, FormatVersion::new(22).unwrap())
    }

    fn run(t: Datatype, window: u32, data: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let (m, d) = forward(&stage(t), window, Parts::new(), Parts::one(data.to_vec())).unwrap();
        (m.concat(), d.concat())
    }

    fn back(t: Datatype, m: &[u8], d: &[u8]) -> Result<Unfiltered> {
        let mut out = Unfiltered::default();
        reverse(&stage(t), m, d, &mut out).map(|()| out)
    }

    fn le<T: WindowInt>(values: &[T]) -> Vec<u8> {
        let mut v = Vec::new();
        values.iter().for_each(|x| x.store(&mut v));
        v
    }

    #[test]
    fn layout_of_a_reduced_and_a_partial_window() {
        // Three i64 in a 16-byte window (two values) and an 8-byte one.
        let data = le(&[1000i64, 1100, -5]);
        let (m, d) = run(Datatype::Int64, 16, &data);
        let mut want = Vec::new();
        want.extend_from_slice(&24u32.to_le_bytes());
        want.extend_from_slice(&2u32.to_le_bytes());
        want.extend_from_slice(&1000i64.to_le_bytes());
        want.push(8);
        want.extend_from_slice(&16u32.to_le_bytes());
        want.extend_from_slice(&(-5i64).to_le_bytes());
        want.push(8);
        want.extend_from_slice(&8u32.to_le_bytes());
        assert_eq!(m, want);
        assert_eq!(d, [0, 100, 0]);
        assert_eq!(back(Datatype::Int64, &m, &d).unwrap().data, data);
    }

    #[test]
    fn signed_ranges_use_the_signed_bounds() {
        // Range 127 needs 128 > i8::MAX: 16 bits for a signed type...
        let (m, d) = run(Datatype::Int32, 64, &le(&[0i32, 127]));
        assert_eq!(m[8 + 4], 16);
        assert_eq!(d, [0, 0, 127, 0]);
        // ...while an unsigned one fits 255 in 8 bits.
        let (m, d) = run(Datatype::UInt32, 64, &le(&[0u32, 254]));
        assert_eq!(m[8 + 4], 8);
        assert_eq!(d, [0, 254]);
    }

    #[test]
    fn full_range_windows_are_stored_as_is() {
        let data = le(&[i64::MIN, i64::MAX]);
        let (m, d) = run(Datatype::Int64, 64, &data);
        assert_eq!(m[8 + 8], 64);
        assert_eq!(&m[8..16], &[0; 8]);
        assert_eq!(d, data);
        let data = le(&[0u16, 300]);
        let (m, d) = run(Datatype::UInt16, 64, &data);
        assert_eq!(m[8 + 2], 16);
        assert_eq!(d, data);
    }

    #[test]
    fn trailing_bytes_are_a_window_of_their_own() {
        // 10 bytes of i32 with window 8: [8 bytes] [2 bytes kept raw].
        let data = [1, 0, 0, 0, 2, 0, 0, 0, 0xaa, 0xbb];
        let (m, d) = run(Datatype::Int32, 8, &data);
        assert_eq!(u32::from_le_bytes(m[4..8].try_into().unwrap()), 2);
        // The tail window has no whole value: width 32, minimum zero.
        assert_eq!(&m[17..26], &[0, 0, 0, 0, 32, 2, 0, 0, 0]);
        assert_eq!(d, [0, 1, 0xaa, 0xbb]);
        assert_eq!(back(Datatype::Int32, &m, &d).unwrap().data, data);
        // A tail with whole values too: its header describes them.
        let data = [5, 0, 0, 0, 6, 0, 0, 0, 7, 0, 0, 0, 0xaa];
        let (m, d) = run(Datatype::Int32, 8, &data);
        assert_eq!(&m[17..26], &[7, 0, 0, 0, 8, 5, 0, 0, 0]);
        assert_eq!(d, [0, 1, 7, 0, 0, 0, 0xaa]);
        assert_eq!(back(Datatype::Int32, &m, &d).unwrap().data, data);
    }

    #[test]
    fn other_types_pass_through() {
        let v22 = FormatVersion::new(22).unwrap();
        let v19 = FormatVersion::new(19).unwrap();
        let data = vec![1u8, 2, 3, 4, 5, 6, 7, 8];
        let meta = Parts::one(vec![9, 9]);
        for (t, v) in [
            (Datatype::Int8, v22),
            (Datatype::UInt8, v22),
            (Datatype::Bool, v22),
            (Datatype::Blob, v22),
            (Datatype::Float64, v22),
            (Datatype::Float32, v22),
            (Datatype::StringUtf8, v22),
            (Datatype::DatetimeMs, v19),
            (Datatype::TimeNs, v19),
        ] {
            let st = Stage::new(t, v);
            let (m, d) = forward(&st, 8, meta.clone(), Parts::one(data.clone())).unwrap();
            assert_eq!((m, d), (meta.clone(), Parts::one(data.clone())), "{t:?}");
            let mut out = Unfiltered::default();
            reverse(&st, &[9, 9], &data, &mut out).unwrap();
            assert_eq!((out.metadata, out.data), (vec![9, 9], data.clone()));
        }
        // From v20 datetimes are int64.
        let st = Stage::new(Datatype::DatetimeMs, v22);
        let (m, _) = forward(&st, 8, Parts::new(), Parts::one(data.clone())).unwrap();
        assert_eq!(m.byte_len(), 8 + 13);
    }

    #[test]
    fn every_integer_type_round_trips() {
        for t in [
            Datatype::Int16,
            Datatype::UInt16,
            Datatype::Int32,
            Datatype::UInt32,
            Datatype::Int64,
            Datatype::UInt64,
            Datatype::DatetimeDay,
            Datatype::TimeSec,
        ] {
            let size = t.size() as u8;
            let data: Vec<u8> = (0..96u8)
                .map(|i| if i % size == 0 { i / size % 7 } else { 0 })
                .collect();
            let (m, d) = run(t, 24, &data);
            assert!(d.len() < data.len(), "{t:?}");
            assert_eq!(back(t, &m, &d).unwrap().data, data, "{t:?}");
        }
    }

    #[test]
    fn parts_metadata_and_empty_input() {
        let st = stage(Datatype::Int16);
        let meta = {
            let mut p = Parts::one(vec![1, 2]);
            p.push(vec![3]);
            p
        };
        let mut data = Parts::one(le(&[7i16, 8, 9]));
        data.push(le(&[100i16]));
        let (m, d) = forward(&st, 4, meta, data).unwrap();
        // Own metadata first, then the input metadata parts as they were.
        assert_eq!(m.count(), 3);
        assert_eq!(m.iter().nth(1), Some(&[1u8, 2][..]));
        assert_eq!(d.count(), 1);
        // Windows: [7, 8] [9] of the first part, [100] of the second.
        assert_eq!(d.concat(), [0, 1, 0, 0]);
        let m = m.concat();
        assert_eq!(&m[4..8], &3u32.to_le_bytes());
        let out = back(Datatype::Int16, &m, &[0, 1, 0, 0]).unwrap();
        assert_eq!(out.metadata, [1, 2, 3]);
        assert_eq!(out.data, [le(&[7i16, 8, 9]), le(&[100i16])].concat());

        let (m, d) = run(Datatype::Int64, 64, &[]);
        assert_eq!(m, [0; 8]);
        assert!(d.is_empty());
        assert!(back(Datatype::Int64, &m, &d).unwrap().data.is_empty());
    }

    #[test]
    fn windows_smaller_than_a_value_are_refused() {
        let st = stage(Datatype::Int64);
        let r = forward(&st, 4, Parts::new(), Parts::one(vec![0; 16]));
        assert!(matches!(r, Err(FilterError::BadInput { .. })));
        let r = forward(&st, 64, Parts::new(), Parts::one(vec![0; 4]));
        assert!(matches!(r, Err(FilterError::BadInput { .. })));
    }

    #[test]
    fn corrupt_input_is_an_error() {
        let data = le(&(0..40i32).map(|i| i * 3 - 50).collect::<Vec<_>>());
        let (m, d) = run(Datatype::Int32, 32, &data);
        for n in 0..m.len() {
            assert!(back(Datatype::Int32, &m[..n], &d).is_err(), "meta {n}");
        }
        for n in 0..d.len() {
            assert!(back(Datatype::Int32, &m, &d[..n]).is_err(), "data {n}");
        }
        let mut extra = d.clone();
        extra.push(0);
        assert!(back(Datatype::Int32, &m, &extra).is_err());
        // A bogus bit width, a window beyond the original size.
        let mut bad = m.clone();
        bad[8 + 4] = 12;
        assert!(back(Datatype::Int32, &bad, &d).is_err());
        let mut bad = m.clone();
        bad[..4].copy_from_slice(&8u32.to_le_bytes());
        assert!(back(Datatype::Int32, &bad, &d).is_err());
        // A huge claimed size with few windows allocates nothing big.
        let mut bad = m;
        bad[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(back(Datatype::Int32, &bad, &d).is_err());
    }

    proptest! {
        #[test]
        fn round_trips_i64(values in proptest::collection::vec(any::<i64>(), 0..64),
                           spread in 0u32..64, window in 8u32..200, tail in 0usize..8) {
            let values: Vec<i64> = values.iter().map(|v| v >> spread).collect();
            let mut data = le(&values);
            data.extend(std::iter::repeat_n(0xab, if values.is_empty() { 0 } else { tail }));
            let (m, d) = run(Datatype::Int64, window, &data);
            prop_assert!(d.len() <= data.len());
            prop_assert_eq!(back(Datatype::Int64, &m, &d).unwrap().data, data);
        }

        #[test]
        fn round_trips_u16(values in proptest::collection::vec(any::<u16>(), 1..64),
                           shift in 0u32..16, window in 2u32..100) {
            let values: Vec<u16> = values.iter().map(|v| v >> shift).collect();
            let data = le(&values);
            let (m, d) = run(Datatype::UInt16, window, &data);
            prop_assert_eq!(back(Datatype::UInt16, &m, &d).unwrap().data, data);
        }
    }
}
