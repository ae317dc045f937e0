//! POSITIVE_DELTA: each window of non-decreasing values is stored as its
//! first value plus the difference of each value to the one before it.
//!
//! Metadata (prepended to the input metadata parts): `u32` window count,
//! then per window its first value (one value of the input type) and `u32`
//! window bytes. Data: one part, the same size as the input: per window the
//! deltas, the first always zero. A window whose size is not whole values
//! (the tail of a part) is stored as is. Integers of every width, BOOL, BLOB
//! and GEOM_* (as `u8`), datetimes and times from v20 are encoded; other
//! types pass through untouched. Values must not decrease within a window;
//! forward refuses such input, as TileDB does.

use super::windows::{int_kind, windows, WindowInt};
use crate::buffer::{take_data, to_u32, MetaReader, Parts, Stage, Unfiltered};
use crate::{FilterError, Result};
use tdb_format::with_native;

const NAME: &str = tdb_format::FilterType::PositiveDelta.name();

/// Forward over one chunk.
pub(crate) fn forward(
    st: &Stage<'_>,
    max_window: u32,
    metadata: Parts,
    data: Parts,
) -> Result<(Parts, Parts)> {
    if let Some(kind) = int_kind(st, true) {
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
    if let Some(kind) = int_kind(st, true) {
        with_native!(kind, int T => return decode::<T>(metadata, data, out), float => ());
    }
    out.pass_through(metadata, data);
    Ok(())
}

fn encode<T: WindowInt>(max_window: u32, metadata: Parts, data: Parts) -> Result<(Parts, Parts)> {
    let mut headers = Vec::new();
    let mut count = 0usize;
    let mut out = Vec::with_capacity(data.byte_len());
    for part in data.iter() {
        for window in windows(NAME, part, max_window, T::BYTES)? {
            // TileDB reads the first value even from a tail shorter than
            // one, running past the part; tdb pads that tail with zeros.
            let mut head = [0u8; 8];
            for (h, w) in head.iter_mut().zip(window).take(T::BYTES) {
                *h = *w;
            }
            let first = T::load(head.get(..T::BYTES).unwrap_or(&head));
            first.store(&mut headers);
            headers.extend_from_slice(&to_u32(NAME, window.len(), "window")?.to_le_bytes());
            if window.len().checked_rem(T::BYTES) != Some(0) {
                out.extend_from_slice(window);
            } else {
                let mut prev = first;
                for (j, v) in window.chunks_exact(T::BYTES).map(T::load).enumerate() {
                    if v < prev {
                        return Err(FilterError::bad_input(
                            NAME,
                            format!(
                                "values decrease at value {j} of window {count}: \
                                 delta is not positive"
                            ),
                        ));
                    }
                    v.wrapping_sub(prev).store(&mut out);
                    prev = v;
                }
            }
            count = count.saturating_add(1);
        }
    }
    let mut own = Vec::with_capacity(headers.len().saturating_add(4));
    own.extend_from_slice(&to_u32(NAME, count, "window count")?.to_le_bytes());
    own.extend_from_slice(&headers);
    let mut metadata = metadata;
    metadata.prepend(own);
    Ok((metadata, Parts::one(out)))
}

fn decode<T: WindowInt>(metadata: &[u8], data: &[u8], out: &mut Unfiltered) -> Result<()> {
    let mut meta = MetaReader::new(NAME, metadata);
    let count = meta.u32("window count")?;
    let mut input = data;
    out.data.reserve(data.len());
    for _ in 0..count {
        let first = T::load(meta.take(T::BYTES, "window first value")?);
        let size = meta.u32("window size")? as usize;
        let window = take_data(NAME, &mut input, size, "window")?;
        if size.checked_rem(T::BYTES) != Some(0) {
            out.data.extend_from_slice(window);
            continue;
        }
        let mut value = first;
        for delta in window.chunks_exact(T::BYTES).map(T::load) {
            value = value.wrapping_add(delta);
            value.store(&mut out.data);
        }
    }
    if !input.is_empty() {
        return Err(FilterError::corrupt(
            NAME,
            format!("{} data bytes follow the last window", input.len()),
        ));
    }
    out.pass_on_metadata(meta.rest());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tdb_format::{Datatype, FormatVersion};

    fn stage(t: Datatype) -> Stage<'static> {
        Stage::new(t, FormatVersion::new(22).unwrap())
    }

    fn run(t: Datatype, window: u32, data: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
        forward(&stage(t), window, Parts::new(), Parts::one(data.to_vec()))
            .map(|(m, d)| (m.concat(), d.concat()))
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
    fn layout() {
        let data = le(&[10i32, 12, 12, 3, 20]);
        let (m, d) = run(Datatype::Int32, 12, &data).unwrap();
        let mut want = 2u32.to_le_bytes().to_vec();
        want.extend_from_slice(&10i32.to_le_bytes());
        want.extend_from_slice(&12u32.to_le_bytes());
        want.extend_from_slice(&3i32.to_le_bytes());
        want.extend_from_slice(&8u32.to_le_bytes());
        assert_eq!(m, want);
        // A decrease across windows is fine: each window starts afresh.
        assert_eq!(d, le(&[0i32, 2, 0, 0, 17]));
        assert_eq!(d.len(), data.len());
        let (m, d) = run(Datatype::Int32, 12, &data).unwrap();
        assert_eq!(back(Datatype::Int32, &m, &d).unwrap().data, data);
    }

    #[test]
    fn decreasing_input_is_refused() {
        let data = le(&[5u64, 4]);
        assert!(matches!(
            run(Datatype::UInt64, 64, &data),
            Err(FilterError::BadInput { .. })
        ));
        // Signed order, not byte order.
        assert!(run(Datatype::Int8, 64, &[0xff, 0x00]).is_ok());
        assert!(run(Datatype::Int8, 64, &[0x00, 0xff]).is_err());
        assert!(run(Datatype::UInt8, 64, &[0x00, 0xff]).is_ok());
    }

    #[test]
    fn trailing_bytes_are_stored_as_is() {
        // 9 bytes of u32, window 8: [two values] [one byte].
        let data = [1, 0, 0, 0, 3, 0, 0, 0, 0x77];
        let (m, d) = run(Datatype::UInt32, 8, &data).unwrap();
        assert_eq!(&m[12..20], &[0x77, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(d, [0, 0, 0, 0, 2, 0, 0, 0, 0x77]);
        assert_eq!(back(Datatype::UInt32, &m, &d).unwrap().data, data);
        // A tail with a whole value and more is not checked for order.
        let data = [
            1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0x77,
        ];
        let (_, d) = run(Datatype::UInt32, 12, &data).unwrap();
        assert_eq!(&d[12..], &data[12..]);
    }

    #[test]
    fn types() {
        let v19 = FormatVersion::new(19).unwrap();
        for t in [
            Datatype::Int8,
            Datatype::UInt8,
            Datatype::Bool,
            Datatype::Blob,
            Datatype::GeomWkb,
            Datatype::Int16,
            Datatype::UInt16,
            Datatype::Int32,
            Datatype::UInt32,
            Datatype::Int64,
            Datatype::UInt64,
            Datatype::DatetimeNs,
            Datatype::TimeMs,
        ] {
            let data: Vec<u8> = (0..64u8).map(|i| i / 8).collect();
            let (m, d) = run(t, 16, &data).unwrap();
            assert!(m.len() > 4, "{t:?}");
            assert_eq!(back(t, &m, &d).unwrap().data, data, "{t:?}");
        }
        for st in [
            stage(Datatype::Float64),
            stage(Datatype::Char),
            stage(Datatype::StringAscii),
            Stage::new(Datatype::DatetimeNs, v19),
        ] {
            let (m, d) = forward(&st, 16, Parts::one(vec![1]), Parts::one(vec![9, 8])).unwrap();
            assert_eq!((m, d), (Parts::one(vec![1]), Parts::one(vec![9, 8])));
        }
    }

    #[test]
    fn parts_and_empty_input() {
        let mut data = Parts::one(le(&[1i16, 2]));
        data.push(le(&[0i16]));
        let (m, d) = forward(&stage(Datatype::Int16), 64, Parts::one(vec![5]), data).unwrap();
        assert_eq!(m.count(), 2);
        assert_eq!(d.count(), 1);
        let out = back(Datatype::Int16, &m.concat(), &d.concat()).unwrap();
        assert_eq!(out.data, le(&[1i16, 2, 0]));
        assert_eq!(out.metadata, [5]);

        let (m, d) = run(Datatype::Int64, 64, &[]).unwrap();
        assert_eq!(m, [0; 4]);
        assert!(d.is_empty());
        assert!(run(Datatype::Int64, 64, &[1, 2]).is_err());
        assert!(run(Datatype::Int64, 7, &[0; 16]).is_err());
    }

    #[test]
    fn corrupt_input_is_an_error() {
        let data = le(&(0..30u32).map(|i| i * i).collect::<Vec<_>>());
        let (m, d) = run(Datatype::UInt32, 16, &data).unwrap();
        for n in 0..m.len() {
            assert!(back(Datatype::UInt32, &m[..n], &d).is_err(), "meta {n}");
        }
        for n in 0..d.len() {
            assert!(back(Datatype::UInt32, &m, &d[..n]).is_err(), "data {n}");
        }
        let mut bad = m;
        bad[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(back(Datatype::UInt32, &bad, &d).is_err());
    }

    proptest! {
        #[test]
        fn round_trips(mut values in proptest::collection::vec(any::<i64>(), 0..64),
                       window in 8u32..100, tail in proptest::collection::vec(any::<u8>(), 0..8)) {
            values.sort_unstable();
            let mut data = le(&values);
            if !values.is_empty() {
                data.extend(tail);
            }
            let (m, d) = run(Datatype::Int64, window, &data).unwrap();
            prop_assert_eq!(d.len(), data.len());
            prop_assert_eq!(back(Datatype::Int64, &m, &d).unwrap().data, data);
        }

        #[test]
        fn round_trips_u8(mut data in proptest::collection::vec(any::<u8>(), 1..200), window in 1u32..50) {
            data.sort_unstable();
            let (m, d) = run(Datatype::UInt8, window, &data).unwrap();
            prop_assert_eq!(back(Datatype::UInt8, &m, &d).unwrap().data, data);
        }
    }
}
