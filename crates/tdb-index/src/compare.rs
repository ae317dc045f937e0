//! Typed operations on range bounds, as TileDB's `Dimension` does them.
//!
//! A [`Range`] holds raw little-endian bounds; what "less than" means depends
//! on the dimension's datatype: signed or unsigned integers of 1–8 bytes
//! (DATETIME_* and TIME_* are `int64`), IEEE floats, or byte-lexicographic
//! strings (STRING_ASCII, compared like `std::string`). [`RangeOps::new`]
//! picks the implementation once per dimension (TileDB's `dispatch_`); every
//! operation after that is a call through a function pointer, with no
//! datatype switch at the call site.
//!
//! Tie-breaking and rounding follow TileDB exactly (`std::min`/`std::max`
//! argument order, its overlap-ratio arithmetic), because the R-tree's upper
//! levels are built with [`RangeOps::expand`] and must come out byte for byte
//! as TileDB stored them.

use crate::{IndexError, Result};
use std::cmp::Ordering;
use tdb_format::{with_native, Datatype, NativeType};
use tdb_schema::{Dimension, Domain, NDRange, Range};

/// The range operations of one dimension, chosen once from its datatype.
#[derive(Debug, Clone, Copy)]
pub struct RangeOps {
    datatype: Datatype,
    var: bool,
    size: usize,
    cmp: fn(&[u8], &[u8]) -> Ordering,
    overlaps: fn(&Range, &Range) -> bool,
    covered: fn(&Range, &Range) -> bool,
    expand: fn(&Range, &mut Range),
    ratio: fn(&Range, &Range) -> f64,
    /// Fixed-size dimensions: [`RangeOps::retain_within`] over a column.
    retain: Option<RetainFn>,
}

/// [`RangeOps::retain_within`] for one fixed-size datatype.
type RetainFn = fn(&[Range], &[u8], &mut [bool]);

impl RangeOps {
    /// The operations for dimension `index` of a domain. Fails for datatypes
    /// TileDB does not allow for dimensions (CHAR, BLOB, BOOL, UTF-8 and
    /// wider strings, geometries, ANY).
    pub fn new(dim: &Dimension, index: usize) -> Result<Self> {
        Self::of_datatype(dim.datatype).ok_or_else(|| IndexError::UnsupportedDatatype {
            dim: index,
            name: dim.name.clone(),
            datatype: dim.datatype,
        })
    }

    /// The operations for values of `datatype` (a dimension's or a
    /// dimension label's: the same datatypes); `None` for those TileDB does
    /// not allow.
    pub fn of_datatype(datatype: Datatype) -> Option<Self> {
        use Datatype::*;
        let ops = |size: usize, cmp, o, c, e, r, k| RangeOps {
            datatype,
            var: false,
            size,
            cmp,
            overlaps: o,
            covered: c,
            expand: e,
            ratio: r,
            retain: Some(k),
        };
        macro_rules! fixed {
            ($t:ty) => {
                ops(
                    std::mem::size_of::<$t>(),
                    cmp_fixed::<$t>,
                    overlaps_fixed::<$t>,
                    covered_fixed::<$t>,
                    expand_fixed::<$t>,
                    ratio_fixed::<$t>,
                    retain_fixed::<$t>,
                )
            };
        }
        Some(match datatype {
            // TileDB allows neither as a dimension.
            Char | Bool => return None,
            StringAscii => RangeOps {
                datatype: StringAscii,
                var: true,
                size: 0,
                cmp: |a: &[u8], b: &[u8]| a.cmp(b),
                overlaps: overlaps_str,
                covered: covered_str,
                expand: expand_str,
                ratio: ratio_str,
                retain: None,
            },
            datatype => match datatype.native() {
                Some(n) => with_native!(n, T => fixed!(T)),
                None => return None,
            },
        })
    }

    /// The dimension's datatype.
    pub fn datatype(&self) -> Datatype {
        self.datatype
    }

    /// The order of two single values of the dimension (TileDB's `<` on its
    /// type; strings byte-lexicographic; NaN equal to everything).
    pub fn cmp_values(&self, a: &[u8], b: &[u8]) -> Ordering {
        (self.cmp)(a, b)
    }

    /// Whether `v` lies in `r` (bounds inclusive).
    pub fn contains(&self, r: &Range, v: &[u8]) -> bool {
        let (lo, hi) = r.bounds();
        self.cmp_values(lo, v) != Ordering::Greater && self.cmp_values(v, hi) != Ordering::Greater
    }

    /// Clears `mask[i]` where value `i` of `values`, a column of this
    /// dimension's fixed-size values, lies in none of `ranges`: what
    /// [`RangeOps::contains`] says cell by cell, with the bounds decoded
    /// once and the values compared as numbers (a sparse read checks every
    /// cell of the tiles a subarray holds in part). `false`, the mask
    /// untouched, for var-size dimensions or a column of the wrong length:
    /// check those cell by cell.
    pub fn retain_within(&self, ranges: &[Range], values: &[u8], mask: &mut [bool]) -> bool {
        match self.retain {
            Some(retain) if Some(values.len()) == mask.len().checked_mul(self.size) => {
                retain(ranges, values, mask);
                true
            }
            _ => false,
        }
    }

    /// Whether `a` and `b` share at least one point (bounds inclusive).
    pub fn overlaps(&self, a: &Range, b: &Range) -> bool {
        (self.overlaps)(a, b)
    }

    /// Whether `outer` contains all of `inner` (TileDB's `covered(inner,
    /// outer)`).
    pub fn covers(&self, outer: &Range, inner: &Range) -> bool {
        (self.covered)(inner, outer)
    }

    /// Grows `mbr` to include `range` (TileDB's `expand_range(range, mbr)`).
    pub fn expand(&self, mbr: &mut Range, range: &Range) {
        (self.expand)(range, mbr)
    }

    /// The fraction of `mbr` that `query` covers, as TileDB estimates it:
    /// 0 when disjoint, exactly 1 only when `query` covers `mbr`, otherwise
    /// strictly between (integers count cells, floats measure length,
    /// strings compare the first byte where `mbr`'s bounds differ).
    pub fn overlap_ratio(&self, query: &Range, mbr: &Range) -> f64 {
        (self.ratio)(query, mbr)
    }

    /// Checks that `range` has this dimension's shape (fixed `lo ‖ hi` of
    /// the datatype's size, or a var range for strings). `what` names it.
    pub fn check(&self, range: &Range, what: impl FnOnce() -> String) -> Result<()> {
        let reason = match range {
            Range::Fixed(_) if self.var => Some("a fixed-size range on a string dimension".into()),
            Range::Var { .. } if !self.var => Some(format!(
                "a var-size range on a {} dimension",
                self.datatype.name()
            )),
            Range::Fixed(d) if Some(d.len()) != self.size.checked_mul(2) => Some(format!(
                "{} bytes are not two {} values",
                d.len(),
                self.datatype.name()
            )),
            Range::Var { start_size, data } if *start_size > data.len() as u64 => Some(format!(
                "start size {start_size} beyond the range's {} bytes",
                data.len()
            )),
            _ => None,
        };
        match reason {
            Some(reason) => Err(IndexError::Range {
                what: what(),
                reason,
            }),
            None => Ok(()),
        }
    }
}

/// The range operations of every dimension of a domain.
#[derive(Debug, Clone)]
pub struct DomainOps {
    dims: Vec<RangeOps>,
}

impl DomainOps {
    /// One [`RangeOps`] per dimension of `domain`.
    pub fn new(domain: &Domain) -> Result<Self> {
        let dims = domain
            .dimensions
            .iter()
            .enumerate()
            .map(|(i, d)| RangeOps::new(d, i))
            .collect::<Result<_>>()?;
        Ok(DomainOps { dims })
    }

    /// The operations of each dimension, in order.
    pub fn dims(&self) -> &[RangeOps] {
        &self.dims
    }

    /// Checks every range of `ranges` against its dimension; `what` names
    /// the N-dimensional range ("MBR 3").
    pub fn check(&self, ranges: &[Range], what: &str) -> Result<()> {
        if ranges.len() != self.dims.len() {
            return Err(IndexError::Range {
                what: what.to_owned(),
                reason: format!("{} ranges for {} dimensions", ranges.len(), self.dims.len()),
            });
        }
        for (d, (ops, r)) in self.dims.iter().zip(ranges).enumerate() {
            ops.check(r, || format!("{what} dimension {d}"))?;
        }
        Ok(())
    }

    /// Whether `a` and `b` overlap on every dimension.
    pub fn overlaps(&self, a: &[Range], b: &[Range]) -> bool {
        self.dims
            .iter()
            .zip(a.iter().zip(b))
            .all(|(o, (a, b))| o.overlaps(a, b))
    }

    /// Whether `outer` covers `inner` on every dimension.
    pub fn covers(&self, outer: &[Range], inner: &[Range]) -> bool {
        self.dims
            .iter()
            .zip(outer.iter().zip(inner))
            .all(|(o, (outer, inner))| o.covers(outer, inner))
    }

    /// Grows `mbr` to include `range` on every dimension; an empty `mbr`
    /// becomes a copy of `range` (TileDB's `Domain::expand_ndrange`).
    pub fn expand(&self, mbr: &mut NDRange, range: &[Range]) {
        if mbr.is_empty() {
            *mbr = range.to_vec();
            return;
        }
        for (o, (m, r)) in self.dims.iter().zip(mbr.iter_mut().zip(range)) {
            o.expand(m, r);
        }
    }

    /// The fraction of `mbr` that `query` covers, the product over the
    /// dimensions not marked in `is_default` (a default range is the whole
    /// domain and is skipped). 0 when disjoint; a product that underflows
    /// to 0 becomes the smallest positive double (TileDB's
    /// `Domain::overlap_ratio`).
    pub fn overlap_ratio(&self, query: &[Range], is_default: &[bool], mbr: &[Range]) -> f64 {
        let mut ratio = 1.0;
        for (d, (o, (q, m))) in self.dims.iter().zip(query.iter().zip(mbr)).enumerate() {
            if is_default.get(d).copied().unwrap_or(false) {
                continue;
            }
            if !o.overlaps(q, m) {
                return 0.0;
            }
            ratio *= o.overlap_ratio(q, m);
            if ratio == 0.0 {
                ratio = MIN_POSITIVE;
            }
        }
        ratio
    }
}

/// `std::nextafter(0.0, max)`: the smallest positive (subnormal) double.
const MIN_POSITIVE: f64 = 5e-324;
/// `std::nextafter(1.0, 0.0)`.
const BELOW_ONE: f64 = 1.0 - f64::EPSILON / 2.0;

/// `std::nextafter(x, 0.0)`.
fn toward_zero(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        x
    } else {
        // A nonzero value's bits are not 0.
        f64::from_bits(x.to_bits().wrapping_sub(1))
    }
}

/// A fixed-size coordinate type. Values of the wrong length (ruled out by
/// [`RangeOps::check`]) read as [`NativeType::read_le`] reads them rather
/// than panic.
trait Coord: NativeType {
    /// TileDB's ratio once the disjoint and subset cases are ruled out:
    /// `(r1 ∩ r2) / r2`, strictly between 0 and 1.
    fn partial_ratio(r1: (Self, Self), r2: (Self, Self)) -> f64;
}

/// `std::max(a, b)`: `b` only when `a < b`.
fn cmax<T: PartialOrd>(a: T, b: T) -> T {
    if a < b {
        b
    } else {
        a
    }
}

/// `std::min(a, b)`: `b` only when `b < a`.
fn cmin<T: PartialOrd>(a: T, b: T) -> T {
    if b < a {
        b
    } else {
        a
    }
}

/// Moves a ratio off the endpoints 0 and 1, which mean "disjoint" and
/// "covered".
fn interior(ratio: f64) -> f64 {
    if ratio == 0.0 {
        MIN_POSITIVE
    } else if ratio == 1.0 {
        BELOW_ONE
    } else {
        ratio
    }
}

macro_rules! int_coord {
    ($($t:ty),*) => {$(
        impl Coord for $t {
            fn partial_ratio(r1: (Self, Self), r2: (Self, Self)) -> f64 {
                // TileDB's overflow guard: `nextafter(max / 2, 0)` computed
                // in double, converted back by truncation.
                let safe_upper = toward_zero((<$t>::MAX / 2) as f64) as $t;
                let safe_lower = toward_zero((<$t>::MIN / 2) as f64) as $t;
                #[allow(unused_comparisons)]
                let signed = <$t>::MIN < 0;
                let (mut lo2, mut hi2) = (r2.0 as i128, r2.1 as i128);
                let mut ilo = cmax(r1.0, r2.0) as i128;
                let mut ihi = cmin(r1.1, r2.1) as i128;
                if safe_upper < r2.1 || (signed && r2.0 < safe_lower) {
                    lo2 /= 2;
                    hi2 /= 2;
                    ilo /= 2;
                    ihi /= 2;
                }
                // Integers count cells (i128 from at most 64 bits: exact).
                let num = ihi.wrapping_sub(ilo).wrapping_add(1);
                let den = hi2.wrapping_sub(lo2).wrapping_add(1);
                interior(num as f64 / den as f64)
            }
        }
    )*};
}
int_coord!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! float_coord {
    ($($t:ty),*) => {$(
        impl Coord for $t {
            fn partial_ratio(r1: (Self, Self), r2: (Self, Self)) -> f64 {
                let safe_upper = toward_zero(f64::from(<$t>::MAX / 2.0)) as $t;
                let safe_lower = toward_zero(f64::from(<$t>::MIN / 2.0)) as $t;
                let (mut lo2, mut hi2) = r2;
                let mut ilo = cmax(r1.0, r2.0);
                let mut ihi = cmin(r1.1, r2.1);
                if safe_upper < hi2 || lo2 < safe_lower {
                    lo2 /= 2.0;
                    hi2 /= 2.0;
                    ilo /= 2.0;
                    ihi /= 2.0;
                }
                // Floats measure length, in the coordinate type.
                let num = ihi - ilo;
                let den = hi2 - lo2;
                if den == 0.0 {
                    // Rounding made distinct bounds equal: TileDB's fixed
                    // answer.
                    return 0.5;
                }
                interior(f64::from(num) / f64::from(den))
            }
        }
    )*};
}
float_coord!(f32, f64);

fn bounds<T: Coord>(r: &Range) -> (T, T) {
    let (lo, hi) = r.bounds();
    (T::read_le(lo), T::read_le(hi))
}

fn cmp_fixed<T: Coord>(a: &[u8], b: &[u8]) -> Ordering {
    T::read_le(a)
        .partial_cmp(&T::read_le(b))
        .unwrap_or(Ordering::Equal)
}

/// `contains` as numbers: out only where a bound compares greater, so NaN
/// is inside, as [`cmp_fixed`] has it equal to everything.
fn retain_fixed<T: Coord>(ranges: &[Range], values: &[u8], mask: &mut [bool]) {
    let values = values.chunks_exact(T::SIZE).map(T::read_le);
    if let [r] = ranges {
        let (lo, hi) = bounds::<T>(r);
        for (m, v) in mask.iter_mut().zip(values) {
            *m &= !(lo > v || v > hi);
        }
        return;
    }
    let bounds: Vec<(T, T)> = ranges.iter().map(bounds::<T>).collect();
    for (m, v) in mask.iter_mut().zip(values) {
        *m = *m && bounds.iter().any(|&(lo, hi)| !(lo > v || v > hi));
    }
}

fn overlaps_fixed<T: Coord>(a: &Range, b: &Range) -> bool {
    let (a, b) = (bounds::<T>(a), bounds::<T>(b));
    !(a.0 > b.1 || a.1 < b.0)
}

fn covered_fixed<T: Coord>(inner: &Range, outer: &Range) -> bool {
    let (i, o) = (bounds::<T>(inner), bounds::<T>(outer));
    i.0 >= o.0 && i.1 <= o.1
}

fn expand_fixed<T: Coord>(range: &Range, mbr: &mut Range) {
    let (r, m) = (bounds::<T>(range), bounds::<T>(mbr));
    let mut out = Vec::with_capacity(T::SIZE.saturating_mul(2));
    cmin(r.0, m.0).put_le(&mut out);
    cmax(r.1, m.1).put_le(&mut out);
    *mbr = Range::Fixed(out);
}

fn ratio_fixed<T: Coord>(r1: &Range, r2: &Range) -> f64 {
    let (a, b) = (bounds::<T>(r1), bounds::<T>(r2));
    if a.0 > b.1 || a.1 < b.0 {
        0.0
    } else if a.0 <= b.0 && b.1 <= a.1 {
        1.0
    } else {
        T::partial_ratio(a, b)
    }
}

fn overlaps_str(a: &Range, b: &Range) -> bool {
    let (a, b) = (a.bounds(), b.bounds());
    !(a.0 > b.1 || b.0 > a.1)
}

fn covered_str(inner: &Range, outer: &Range) -> bool {
    let (i, o) = (inner.bounds(), outer.bounds());
    i.0 >= o.0 && i.1 <= o.1
}

fn expand_str(range: &Range, mbr: &mut Range) {
    let (r, m) = (range.bounds(), mbr.bounds());
    let lo = if r.0 < m.0 { r.0 } else { m.0 };
    let hi = if r.1 < m.1 { m.1 } else { r.1 };
    *mbr = Range::from_bounds(lo, hi, true);
}

/// A byte as C++ `char` (signed on the platforms TileDB ships for) widened.
fn c_char(s: &[u8], i: usize) -> i64 {
    s.get(i).map_or(0, |&b| i64::from(b as i8))
}

/// TileDB's string ratio: only the first byte where `r2`'s bounds differ
/// counts, so `["ab", "az"]` spans 25 steps and `["abc", "abd"]` two.
fn ratio_str(r1: &Range, r2: &Range) -> f64 {
    if !overlaps_str(r1, r2) {
        return 0.0;
    }
    let (s1, e1) = r1.bounds();
    let (s2, e2) = r2.bounds();
    let unary = match r2 {
        Range::Var { start_size, data } => {
            !data.is_empty() && start_size.checked_mul(2) == Some(data.len() as u64) && s2 == e2
        }
        Range::Fixed(d) => !d.is_empty() && s2 == e2,
    };
    let mut pref = 0;
    let r2_range = if unary {
        1
    } else {
        pref = s2.iter().zip(e2).take_while(|(a, b)| a == b).count();
        let start_c = if s2.len() == pref {
            0
        } else {
            c_char(s2, pref)
        };
        // TileDB's int arithmetic on chars, cast as it casts.
        c_char(e2, pref).wrapping_sub(start_c).wrapping_add(1) as u64
    };
    let o_start = if s1 > s2 { s1 } else { s2 };
    let o_end = if e1 < e2 { e1 } else { e2 };
    let o_range = if o_start == o_end {
        1
    } else {
        let start_c = if o_start.len() == pref {
            0
        } else {
            c_char(o_start, pref)
        };
        c_char(o_end, pref).wrapping_sub(start_c).wrapping_add(1) as u64
    };
    let ratio = o_range as f64 / r2_range as f64;
    if ratio == 1.0 && (o_start != s2 || o_end != e2) {
        BELOW_ONE
    } else {
        ratio
    }
}
