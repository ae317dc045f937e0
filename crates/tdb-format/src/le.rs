//! Little-endian primitive fields: parsers over `&[u8]` and their mirror
//! writers into a `Vec<u8>`.
//!
//! A parser takes the input and returns the rest and the value
//! ([`PResult`]), so parsers compose with `?` in any function whose error
//! type converts from [`FormatError`]; no parser library shows in the API.
//!
//! Every parser names the field it reads, so a short input becomes
//! [`FormatError::Truncated`] saying which field and how many bytes were
//! missing. Parsers never allocate; callers that allocate from a length check
//! it with [`bytes`] first, which refuses lengths beyond the remaining input.

use crate::span::{self, SpanValue};
use crate::{FormatError, Result};

/// What a parser returns: the bytes it left and the value, or the error
/// (by default a [`FormatError`]).
pub type PResult<'a, T, E = FormatError> = std::result::Result<(&'a [u8], T), E>;

fn truncated(field: &'static str, needed: u64, input: &[u8]) -> FormatError {
    FormatError::Truncated {
        field,
        needed,
        available: input.len() as u64,
    }
}

/// Splits `n` bytes off the front, unrecorded (the public parsers record
/// what they make of them).
fn take<'a>(field: &'static str, n: u64, input: &'a [u8]) -> PResult<'a, &'a [u8]> {
    let split = usize::try_from(n)
        .ok()
        .and_then(|k| input.split_at_checked(k));
    match split {
        Some((taken, rest)) => Ok((rest, taken)),
        None => Err(truncated(field, n, input)),
    }
}

fn take_array<'a, const N: usize>(
    field: &'static str,
    input: &'a [u8],
) -> PResult<'a, ([u8; N], &'a [u8])> {
    let (rest, b) = take(field, N as u64, input)?;
    let mut out = [0u8; N];
    out.copy_from_slice(b);
    Ok((rest, (out, b)))
}

/// Takes exactly `n` bytes, failing before any allocation when fewer remain.
pub fn bytes<'a>(field: &'static str, n: u64) -> impl Fn(&'a [u8]) -> PResult<'a, &'a [u8]> {
    move |input: &'a [u8]| {
        let (rest, b) = take(field, n, input)?;
        span::field(field, b, "bytes", || SpanValue::of_bytes(b));
        Ok((rest, b))
    }
}

/// Takes a fixed-size array.
pub fn array<'a, const N: usize>(field: &'static str) -> impl Fn(&'a [u8]) -> PResult<'a, [u8; N]> {
    move |input: &'a [u8]| {
        let (rest, (out, b)) = take_array::<N>(field, input)?;
        span::field(field, b, "bytes", || SpanValue::of_bytes(b));
        Ok((rest, out))
    }
}

macro_rules! le_num {
    ($parse:ident, $put:ident, $t:ty, $value:ident, $wide:ty) => {
        #[doc = concat!("Parses a little-endian `", stringify!($t), "` named `field`.")]
        pub fn $parse<'a>(field: &'static str) -> impl Fn(&'a [u8]) -> PResult<'a, $t> {
            move |input: &'a [u8]| {
                let (rest, (b, taken)) = take_array::<{ std::mem::size_of::<$t>() }>(field, input)?;
                let v = <$t>::from_le_bytes(b);
                span::field(field, taken, stringify!($t), || SpanValue::$value(<$wide>::from(v)));
                Ok((rest, v))
            }
        }

        #[doc = concat!("Writes a little-endian `", stringify!($t), "`: the mirror of [`", stringify!($parse), "`](fn@", stringify!($parse), ").")]
        pub fn $put(out: &mut Vec<u8>, v: $t) {
            out.extend_from_slice(&v.to_le_bytes());
        }
    };
}

le_num!(u8, put_u8, u8, U64, std::primitive::u64);
le_num!(i8, put_i8, i8, I64, std::primitive::i64);
le_num!(u16, put_u16, u16, U64, std::primitive::u64);
le_num!(i16, put_i16, i16, I64, std::primitive::i64);
le_num!(u32, put_u32, u32, U64, std::primitive::u64);
le_num!(i32, put_i32, i32, I64, std::primitive::i64);
le_num!(u64, put_u64, u64, U64, std::primitive::u64);
le_num!(i64, put_i64, i64, I64, std::primitive::i64);
le_num!(f32, put_f32, f32, F64, std::primitive::f64);
le_num!(f64, put_f64, f64, F64, std::primitive::f64);

/// Parses a `u8` enum code with `decode`, recording the value by name.
pub fn code<'a, T: std::fmt::Debug>(
    field: &'static str,
    decode: impl Fn(std::primitive::u8) -> Result<T>,
) -> impl Fn(&'a [u8]) -> PResult<'a, T> {
    move |input: &'a [u8]| {
        let (rest, ([c], taken)) = take_array::<1>(field, input)?;
        let v = decode(c)?;
        span::field(field, taken, "u8 code", || {
            SpanValue::Text(format!("{v:?}"))
        });
        Ok((rest, v))
    }
}

/// Parses a `u8` flag that must be 0 or 1.
pub fn bool<'a>(field: &'static str) -> impl Fn(&'a [u8]) -> PResult<'a, bool> {
    move |input: &'a [u8]| {
        let (rest, ([v], taken)) = take_array::<1>(field, input)?;
        span::field(field, taken, "bool", || SpanValue::Bool(v == 1));
        match v {
            0 => Ok((rest, false)),
            1 => Ok((rest, true)),
            other => Err(FormatError::Invalid {
                field,
                reason: format!("flag byte {other} is neither 0 nor 1"),
            }),
        }
    }
}

/// Writes a 0/1 flag byte: the mirror of [`bool`](fn@bool).
pub fn put_bool(out: &mut Vec<u8>, v: bool) {
    out.push(u8::from(v));
}

/// Parses a `u32` length followed by that many bytes.
pub fn bytes_u32<'a>(field: &'static str) -> impl Fn(&'a [u8]) -> PResult<'a, &'a [u8]> {
    move |input: &'a [u8]| {
        let (rest, (b, taken)) = take_array::<4>(field, input)?;
        let n = std::primitive::u32::from_le_bytes(b);
        span::field(field, taken, "u32 length", || SpanValue::U64(n.into()));
        bytes(field, u64::from(n))(rest)
    }
}

/// Parses a `u64` length followed by that many bytes.
pub fn bytes_u64<'a>(field: &'static str) -> impl Fn(&'a [u8]) -> PResult<'a, &'a [u8]> {
    move |input: &'a [u8]| {
        let (rest, (b, taken)) = take_array::<8>(field, input)?;
        let n = std::primitive::u64::from_le_bytes(b);
        span::field(field, taken, "u64 length", || SpanValue::U64(n));
        bytes(field, n)(rest)
    }
}

/// Writes a `u32` length and the bytes: the mirror of [`bytes_u32`].
pub fn put_bytes_u32(out: &mut Vec<u8>, field: &'static str, b: &[u8]) -> Result<()> {
    let n = std::primitive::u32::try_from(b.len()).map_err(|_| FormatError::Invalid {
        field,
        reason: format!("{} bytes do not fit a u32 length", b.len()),
    })?;
    put_u32(out, n);
    out.extend_from_slice(b);
    Ok(())
}

/// Writes a `u64` length and the bytes: the mirror of [`bytes_u64`].
pub fn put_bytes_u64(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// The little-endian `u64`s packed in `bytes` (offsets, counts), ignoring
/// a trailing partial value: callers that must refuse one check
/// `bytes.len() % 8` first.
pub fn u64_values(bytes: &[u8]) -> impl ExactSizeIterator<Item = std::primitive::u64> + '_ {
    bytes.chunks_exact(8).map(|c| {
        let mut b = [0u8; 8];
        b.copy_from_slice(c);
        std::primitive::u64::from_le_bytes(b)
    })
}

/// Value `i` of a run of `size`-byte values packed in `bytes`; `None` past
/// the end (or where the position overflows).
pub fn nth(bytes: &[u8], i: usize, size: usize) -> Option<&[u8]> {
    let start = i.checked_mul(size)?;
    bytes.get(start..start.checked_add(size)?)
}

/// The little-endian `u64` at value `i` of `bytes`, as [`nth`] finds it.
pub fn nth_u64(bytes: &[u8], i: usize) -> Option<std::primitive::u64> {
    let b: [u8; 8] = nth(bytes, i, 8)?.try_into().ok()?;
    Some(std::primitive::u64::from_le_bytes(b))
}

/// Runs a parser over `input`, returning the value and the bytes it left
/// (the order public entry points use).
pub fn run<'a, T, E>(
    parser: impl FnOnce(&'a [u8]) -> PResult<'a, T, E>,
    input: &'a [u8],
) -> std::result::Result<(T, &'a [u8]), E> {
    parser(input).map(|(rest, v)| (v, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip() {
        let mut out = Vec::new();
        put_u32(&mut out, 0xdead_beef);
        put_i64(&mut out, -5);
        put_f64(&mut out, 1.5);
        let (rest, a) = u32("a")(&out).unwrap();
        let (rest, b) = i64("b")(rest).unwrap();
        let (rest, c) = f64("c")(rest).unwrap();
        assert_eq!((a, b, c), (0xdead_beef, -5, 1.5));
        assert!(rest.is_empty());
    }

    #[test]
    fn short_input_names_the_field() {
        let err = run(u64("tile size"), &[1, 2, 3]).unwrap_err();
        assert_eq!(
            err,
            FormatError::Truncated {
                field: "tile size",
                needed: 8,
                available: 3
            }
        );
    }

    #[test]
    fn huge_lengths_are_refused_without_allocating() {
        let mut buf = Vec::new();
        put_u64(&mut buf, u64::MAX);
        buf.extend_from_slice(b"abc");
        let err = run(bytes_u64("key"), &buf).unwrap_err();
        assert!(matches!(
            err,
            FormatError::Truncated {
                field: "key",
                needed: u64::MAX,
                ..
            }
        ));
    }

    #[test]
    fn flags_reject_other_bytes() {
        assert!(run(bool("nullable"), &[1]).unwrap().0);
        assert!(run(bool("nullable"), &[2]).is_err());
    }

    #[test]
    fn length_prefixed_round_trip() {
        let mut out = Vec::new();
        put_bytes_u32(&mut out, "k", b"hello").unwrap();
        put_bytes_u64(&mut out, b"world");
        let (rest, a) = bytes_u32("k")(&out).unwrap();
        let (_, b) = bytes_u64("v")(rest).unwrap();
        assert_eq!((a, b), (&b"hello"[..], &b"world"[..]));
    }
}
