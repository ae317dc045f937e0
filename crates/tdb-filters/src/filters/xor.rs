//! XOR: every value XORed with the one before it, one data part at a time.
//!
//! TileDB reads the values as signed integers of the input datatype's size
//! (floats included, reinterpreted), keeps each part's first value and
//! replaces every later one by `value ^ previous`; as XOR works bit by bit,
//! that is the same as XORing each byte with the byte one element earlier.
//! Parts must hold whole values (TileDB asserts it). The framing is
//! [`framed`](super::framed)'s; the output datatype is the signed integer of
//! the same size ([`output_datatype`]).

use super::framed;
use crate::buffer::{Parts, Stage, Unfiltered};
use crate::{FilterError, Result};
use tdb_format::Datatype;

const NAME: &str = tdb_format::FilterType::Xor.name();

/// The datatype XOR hands to the next filter: TileDB's signed integer of the
/// input's size, whatever the input was.
pub(crate) fn output_datatype(input: Datatype) -> Datatype {
    match input.size() {
        1 => Datatype::Int8,
        2 => Datatype::Int16,
        4 => Datatype::Int32,
        _ => Datatype::Int64,
    }
}

/// Forward over one chunk.
pub(crate) fn forward(st: &Stage<'_>, metadata: Parts, data: Parts) -> Result<(Parts, Parts)> {
    let size = st.datatype_size();
    let parts: Vec<&[u8]> = data.iter().collect();
    framed::forward(NAME, metadata, &parts, |part, out| {
        whole_values(part, size, FilterError::bad_input)?;
        let (head, rest) = part.split_at(part.len().min(size));
        out.extend_from_slice(head);
        out.extend(rest.iter().zip(part).map(|(b, prev)| b ^ prev));
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
        whole_values(part, size, FilterError::corrupt)?;
        unxor(size, part, out);
        Ok(())
    })
}

fn whole_values(
    part: &[u8],
    size: usize,
    error: fn(&'static str, String) -> FilterError,
) -> Result<()> {
    if part.len().checked_rem(size) != Some(0) {
        return Err(error(
            NAME,
            format!(
                "a part of {} bytes is not whole {size}-byte values",
                part.len()
            ),
        ));
    }
    Ok(())
}

/// Appends the running XOR of `src`'s `size`-byte values.
/// Eight bytes at a time: a prefix XOR inside the word by doubling shifts,
/// then the last value decoded so far XORed into every value of the word.
fn unxor(size: usize, src: &[u8], out: &mut Vec<u8>) {
    let bits = (size as u32).saturating_mul(8);
    // One value's bit pattern copied into every value slot of a word.
    let spread = match size {
        1 => 0x0101_0101_0101_0101,
        2 => 0x0001_0001_0001_0001,
        4 => 0x0000_0001_0000_0001,
        _ => 1u64,
    };
    let start = out.len();
    let mut carry = 0u64;
    // Sizes that do not divide a word (none of TileDB's) go byte by byte.
    let word_bytes = if 8usize.checked_rem(size) == Some(0) {
        src.len() & !7
    } else {
        0
    };
    let (words, tail) = src.split_at(word_bytes);
    for word in words.chunks_exact(8) {
        let mut x = u64::from_le_bytes(word.try_into().unwrap_or_default());
        let mut shift = bits;
        while shift < 64 {
            x ^= x.checked_shl(shift).unwrap_or(0);
            shift = shift.saturating_mul(2);
        }
        x ^= carry;
        out.extend_from_slice(&x.to_le_bytes());
        let last = x.checked_shr(64u32.saturating_sub(bits)).unwrap_or(0);
        carry = last.wrapping_mul(spread);
    }
    // Fewer than eight bytes left: byte by byte from what is already decoded.
    for (k, &b) in (word_bytes..).zip(tail) {
        let prev = match k.checked_sub(size) {
            Some(i) => out.get(start.saturating_add(i)).copied().unwrap_or(0),
            None => 0,
        };
        out.push(b ^ prev);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tdb_format::FormatVersion;

    fn stage(t: Datatype) -> Stage<'static> {
        Stage::new(t, FormatVersion::WRITTEN)
    }

    fn run(t: Datatype, data: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
        let (m, d) = forward(&stage(t), Parts::new(), Parts::one(data.to_vec()))?;
        Ok((m.concat(), d.concat()))
    }

    fn back(t: Datatype, meta: &[u8], data: &[u8]) -> Result<Unfiltered> {
        let mut out = Unfiltered::default();
        reverse(&stage(t), meta, data, &mut out)?;
        Ok(out)
    }

    fn reference(size: usize, data: &[u8]) -> Vec<u8> {
        let values: Vec<u64> = data
            .chunks(size)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..size].copy_from_slice(c);
                u64::from_le_bytes(b)
            })
            .collect();
        let mut out = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let x = if i == 0 { *v } else { v ^ values[i - 1] };
            out.extend_from_slice(&x.to_le_bytes()[..size]);
        }
        out
    }

    #[test]
    fn xors_each_value_with_the_previous_one() {
        let values = [5i32, -1, 7, 7];
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let (meta, out) = run(Datatype::Int32, &data).unwrap();
        assert_eq!(meta, [1, 0, 0, 0, 16, 0, 0, 0]);
        let expected: Vec<u8> = [5i32, 5 ^ -1, -1 ^ 7, 0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(out, expected);
        assert_eq!(back(Datatype::Int32, &meta, &out).unwrap().data, data);
    }

    #[test]
    fn floats_are_their_bits() {
        let data: Vec<u8> = [1.5f64, -2.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let (_, out) = run(Datatype::Float64, &data).unwrap();
        assert_eq!(out, reference(8, &data));
        assert_eq!(output_datatype(Datatype::Float64), Datatype::Int64);
        assert_eq!(output_datatype(Datatype::Float32), Datatype::Int32);
        assert_eq!(output_datatype(Datatype::StringAscii), Datatype::Int8);
        assert_eq!(output_datatype(Datatype::UInt16), Datatype::Int16);
    }

    #[test]
    fn empty_and_single_values() {
        let (meta, out) = run(Datatype::Int64, &[]).unwrap();
        assert_eq!(meta, [1, 0, 0, 0, 0, 0, 0, 0]);
        assert!(out.is_empty());
        assert!(back(Datatype::Int64, &meta, &out).unwrap().data.is_empty());
        let one = (-3i16).to_le_bytes();
        let (meta, out) = run(Datatype::Int16, &one).unwrap();
        assert_eq!(out, one);
        assert_eq!(back(Datatype::Int16, &meta, &out).unwrap().data, one);
    }

    #[test]
    fn partial_values_are_refused() {
        assert!(matches!(
            run(Datatype::Int32, &[1, 2, 3, 4, 5]),
            Err(FilterError::BadInput { .. })
        ));
        let meta = [1, 0, 0, 0, 5, 0, 0, 0];
        assert!(matches!(
            back(Datatype::Int32, &meta, &[1, 2, 3, 4, 5]),
            Err(FilterError::Corrupt { .. })
        ));
    }

    #[test]
    fn parts_restart_and_earlier_metadata_follows() {
        let mut parts = Parts::one(vec![1, 2]);
        parts.push(vec![3, 4, 5]);
        let (m, d) = forward(&stage(Datatype::UInt8), Parts::one(vec![9]), parts).unwrap();
        let (meta, out) = (m.concat(), d.concat());
        assert_eq!(meta, [2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 9]);
        assert_eq!(out, [1, 3, 3, 7, 1]);
        let back = back(Datatype::UInt8, &meta, &out).unwrap();
        assert_eq!(back.data, [1, 2, 3, 4, 5]);
        assert_eq!(back.metadata, [9]);
    }

    #[test]
    fn truncations_are_errors() {
        let data: Vec<u8> = (0..64).map(|i| (i * 37) as u8).collect();
        let (meta, out) = run(Datatype::Int64, &data).unwrap();
        for n in 0..meta.len() {
            assert!(back(Datatype::Int64, &meta[..n], &out).is_err());
        }
        for n in 0..out.len() {
            assert!(back(Datatype::Int64, &meta, &out[..n]).is_err());
        }
    }

    proptest! {
        #[test]
        fn matches_the_definition_and_round_trips(
            values in proptest::collection::vec(any::<u8>(), 0..300),
            t in proptest::sample::select(Datatype::ALL.to_vec()),
        ) {
            let size = t.size() as usize;
            let data = &values[..values.len() / size * size];
            let (meta, out) = run(t, data).unwrap();
            prop_assert_eq!(&out, &reference(size, data));
            prop_assert_eq!(back(t, &meta, &out).unwrap().data, data);
        }
    }
}
