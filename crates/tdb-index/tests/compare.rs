//! The typed range operations on every class of dimension datatype, with
//! TileDB's tie-breaking and overlap-ratio arithmetic pinned.

use tdb_format::Datatype;
use tdb_index::{IndexError, Range, RangeOps};
use tdb_schema::{Dimension, VAR_NUM};

fn dim(datatype: Datatype) -> Dimension {
    let cell_val_num = if datatype == Datatype::StringAscii {
        VAR_NUM
    } else {
        1
    };
    Dimension::new("d", datatype, cell_val_num, Vec::new(), None)
}

fn ops(datatype: Datatype) -> RangeOps {
    RangeOps::new(&dim(datatype), 0).unwrap()
}

macro_rules! r {
    ($t:ty: $lo:expr, $hi:expr) => {{
        let mut v = (($lo) as $t).to_le_bytes().to_vec();
        v.extend_from_slice(&(($hi) as $t).to_le_bytes());
        Range::Fixed(v)
    }};
}

fn s(lo: &str, hi: &str) -> Range {
    Range::from_bounds(lo.as_bytes(), hi.as_bytes(), true)
}

/// `std::nextafter(1.0, 0.0)`.
const BELOW_ONE: f64 = 1.0 - f64::EPSILON / 2.0;

macro_rules! signed_cases {
    ($($t:ty => $dt:expr),*) => {$(
        let o = ops($dt);
        assert!(o.overlaps(&r!($t: -5, -1), &r!($t: -1, 3)), "{:?}", $dt);
        assert!(!o.overlaps(&r!($t: -5, -2), &r!($t: -1, 3)));
        assert!(o.covers(&r!($t: -10, 10), &r!($t: -10, -3)));
        assert!(!o.covers(&r!($t: -10, 10), &r!($t: -11, -3)));
        let mut m = r!($t: -3, 2);
        o.expand(&mut m, &r!($t: -7, 1));
        assert_eq!(m, r!($t: -7, 2));
        assert_eq!(o.overlap_ratio(&r!($t: -10, -6), &r!($t: -9, 0)), 0.4);
        assert_eq!(o.overlap_ratio(&r!($t: -10, 10), &r!($t: -9, 0)), 1.0);
        assert_eq!(o.overlap_ratio(&r!($t: 1, 10), &r!($t: -9, 0)), 0.0);
    )*};
}

macro_rules! unsigned_cases {
    ($($t:ty => $dt:expr),*) => {$(
        let o = ops($dt);
        let big = <$t>::MAX - 5;
        // Values past the signed range order above small ones.
        assert!(o.covers(&r!($t: 1, big), &r!($t: 100, 120)), "{:?}", $dt);
        assert!(!o.overlaps(&r!($t: 0, 3), &r!($t: big, big)));
        let mut m = r!($t: 3, 4);
        o.expand(&mut m, &r!($t: 2, big));
        assert_eq!(m, r!($t: 2, big));
        assert_eq!(o.overlap_ratio(&r!($t: 0, 4), &r!($t: 0, 9)), 0.5);
    )*};
}

#[test]
fn integers_signed_and_unsigned() {
    signed_cases!(i8 => Datatype::Int8, i16 => Datatype::Int16, i32 => Datatype::Int32,
        i64 => Datatype::Int64);
    unsigned_cases!(u8 => Datatype::UInt8, u16 => Datatype::UInt16, u32 => Datatype::UInt32,
        u64 => Datatype::UInt64);
}

#[test]
fn datetimes_and_times_are_int64() {
    for dt in [
        Datatype::DatetimeYear,
        Datatype::DatetimeDay,
        Datatype::DatetimeNs,
        Datatype::DatetimeAs,
        Datatype::TimeHr,
        Datatype::TimeMs,
        Datatype::TimeAs,
    ] {
        let o = ops(dt);
        // Before the epoch is negative.
        let before = r!(i64: -1_000_000_000_000i64, -1);
        let after = r!(i64: 0, 1_000_000_000_000i64);
        assert!(!o.overlaps(&before, &after), "{dt:?}");
        let mut m = before.clone();
        o.expand(&mut m, &after);
        assert_eq!(m, r!(i64: -1_000_000_000_000i64, 1_000_000_000_000i64));
        assert!(o.covers(&m, &after));
        assert_eq!(o.overlap_ratio(&r!(i64: -1, 0), &r!(i64: -2, 1)), 0.5);
    }
}

#[test]
fn integer_ratio_halves_near_the_limits_as_tiledb_does() {
    // The whole i64 line: TileDB halves everything before subtracting.
    let o = ops(Datatype::Int64);
    let all = r!(i64: i64::MIN, i64::MAX);
    assert_eq!(o.overlap_ratio(&r!(i64: 0, i64::MAX), &all), 0.5);
    // u8 [0, 255] is past the guard (126): halved, 65 of 128 rather
    // than 129 of 256.
    let o = ops(Datatype::UInt8);
    assert_eq!(
        o.overlap_ratio(&r!(u8: 0, 128), &r!(u8: 0, 255)),
        65.0 / 128.0
    );
    // Below the guard nothing is halved.
    assert_eq!(o.overlap_ratio(&r!(u8: 0, 59), &r!(u8: 0, 119)), 0.5);
    // A ratio that rounds to 1 is moved below it (the MBR is not covered).
    let o = ops(Datatype::UInt64);
    let ratio = o.overlap_ratio(&r!(u64: 1, u64::MAX), &r!(u64: 0, u64::MAX));
    assert_eq!(ratio, BELOW_ONE);
}

#[test]
fn floats() {
    let o = ops(Datatype::Float64);
    assert!(o.overlaps(&r!(f64: -2.0, -1.0), &r!(f64: -1.5, 0.0)));
    assert!(!o.overlaps(&r!(f64: -2.0, -1.0), &r!(f64: -0.5, 0.0)));
    assert!(o.covers(&r!(f64: -2.5, 2.5), &r!(f64: -2.0, 1.0)));
    assert_eq!(
        o.overlap_ratio(&r!(f64: 0.25, 10.0), &r!(f64: 0.0, 1.0)),
        0.75
    );
    // Floats measure length: a point query on a wide MBR is tiny, not 0.
    let tiny = o.overlap_ratio(&r!(f64: 0.5, 0.5), &r!(f64: 0.0, 1.0));
    assert_eq!(tiny, 5e-324);
    // FLOAT32 subtracts in f32, divides in f64.
    let o = ops(Datatype::Float32);
    let ratio = o.overlap_ratio(&r!(f32: 0.0, 0.05), &r!(f32: 0.0, 0.1));
    assert_eq!(ratio, f64::from(0.05f32) / f64::from(0.1f32));
    // std::min/std::max keep their first argument on ties: expanding by a
    // range starting at +0.0 over an MBR starting at -0.0 takes +0.0.
    let mut m = r!(f32: -0.0, 1.0);
    o.expand(&mut m, &r!(f32: 0.0, 2.0));
    assert_eq!(m, r!(f32: 0.0, 2.0));
}

#[test]
fn strings_are_byte_lexicographic() {
    let o = ops(Datatype::StringAscii);
    assert!(o.overlaps(&s("ab", "b"), &s("abc", "abd")));
    assert!(!o.overlaps(&s("a", "ab"), &s("abc", "b")));
    // A prefix orders first; longer strings are not "bigger".
    assert!(o.covers(&s("a", "b"), &s("ab", "azzzz")));
    assert!(!o.covers(&s("a", "b"), &s("ab", "ba")));
    // Bytes past ASCII order last (unsigned).
    assert!(!o.overlaps(&s("a", "z"), &Range::from_bounds(&[0x80], &[0xff], true)));
    let mut m = s("b", "c");
    o.expand(&mut m, &s("abc", "bb"));
    assert_eq!(m, s("abc", "c"));
    assert_eq!(
        m,
        Range::Var {
            start_size: 3,
            data: b"abcc".to_vec()
        }
    );
    // The ratio looks at the first byte where the MBR's bounds differ:
    // 'b'..='z' is 25 steps, 'b'..='m' 12.
    assert_eq!(o.overlap_ratio(&s("ab", "am"), &s("ab", "az")), 12.0 / 25.0);
    assert_eq!(o.overlap_ratio(&s("a", "z"), &s("abc", "abc")), 1.0);
    assert_eq!(o.overlap_ratio(&s("c", "d"), &s("a", "b")), 0.0);
    // Equal steps but not the same bounds: not covered.
    assert_eq!(o.overlap_ratio(&s("a0", "b"), &s("a", "b")), BELOW_ONE);
    assert_eq!(o.overlap_ratio(&s("", "zz"), &s("a", "b")), 1.0);
}

#[test]
fn non_dimension_datatypes_are_refused() {
    for dt in [
        Datatype::Char,
        Datatype::Blob,
        Datatype::Bool,
        Datatype::StringUtf8,
        Datatype::StringUtf16,
        Datatype::GeomWkb,
        Datatype::Any,
    ] {
        let e = RangeOps::new(&dim(dt), 3).unwrap_err();
        assert!(
            matches!(e, IndexError::UnsupportedDatatype { dim: 3, .. }),
            "{dt:?}"
        );
        assert!(e.to_string().contains(dt.name()), "{e}");
    }
}

#[test]
fn ranges_of_the_wrong_shape_are_refused() {
    let o = ops(Datatype::Int32);
    assert!(o.check(&r!(i32: 1, 2), || "x".into()).is_ok());
    for bad in [r!(i64: 1, 2), s("1", "2"), Range::Fixed(vec![1, 2, 3])] {
        let e = o.check(&bad, || "subarray dimension 0".into()).unwrap_err();
        assert!(e.to_string().starts_with("subarray dimension 0: "), "{e}");
    }
    let o = ops(Datatype::StringAscii);
    assert!(o.check(&r!(i32: 1, 2), || "x".into()).is_err());
    let bad = Range::Var {
        start_size: 9,
        data: b"ab".to_vec(),
    };
    assert!(o.check(&bad, || "x".into()).is_err());
}

/// A column checked at once gives what `contains` gives cell by cell:
/// one range and several, signed, unsigned, floats with NaN (inside, as
/// NaN compares equal to every bound); strings are left to the caller.
#[test]
fn retain_within_agrees_with_contains() {
    fn check(o: &RangeOps, ranges: &[Range], values: &[Vec<u8>]) {
        let column: Vec<u8> = values.concat();
        let mut mask: Vec<bool> = (0..values.len()).map(|i| i % 7 != 3).collect();
        let expected: Vec<bool> = values
            .iter()
            .zip(&mask)
            .map(|(v, &m)| m && ranges.iter().any(|r| o.contains(r, v)))
            .collect();
        assert!(o.retain_within(ranges, &column, &mut mask));
        assert_eq!(mask, expected, "{:?}", o.datatype());
        // A column of the wrong length is refused, the mask untouched.
        assert!(!o.retain_within(ranges, &column[1..], &mut mask));
        assert_eq!(mask, expected);
    }
    let ints: Vec<Vec<u8>> = (-40i64..40)
        .map(|v| (v * 3).to_le_bytes().to_vec())
        .collect();
    let o = ops(Datatype::Int64);
    check(&o, &[r!(i64: -10, 20)], &ints);
    check(
        &o,
        &[r!(i64: -100, -50), r!(i64: 0, 0), r!(i64: 30, 60)],
        &ints,
    );
    let o = ops(Datatype::UInt8);
    let bytes: Vec<Vec<u8>> = (0..=255u8).map(|v| vec![v]).collect();
    check(&o, &[r!(u8: 200, 250)], &bytes);
    let o = ops(Datatype::Float64);
    let floats: Vec<Vec<u8>> = [
        -2.5,
        -0.0,
        0.0,
        1.0,
        BELOW_ONE,
        f64::NAN,
        7.0,
        f64::INFINITY,
    ]
    .iter()
    .map(|v: &f64| v.to_le_bytes().to_vec())
    .collect();
    check(&o, &[r!(f64: -1.0, 1.0)], &floats);
    check(&o, &[r!(f64: -3.0, -2.0), r!(f64: 6.5, 8.0)], &floats);
    let mut mask = vec![true; 2];
    assert!(!ops(Datatype::StringAscii).retain_within(&[s("a", "c")], b"bz", &mut mask));
}
