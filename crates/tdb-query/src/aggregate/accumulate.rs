//! One field's running aggregates, folded cell by cell or tile by tile from
//! fragment metadata, with TileDB's arithmetic: sums widened to
//! `int64`/`uint64`/`float64` that saturate on overflow, min/max compared
//! as numbers or as bytes (strings), nulls counted apart.

use super::{AggregateOp, AggregateValue};
use std::cmp::Ordering;
use tdb_format::{Datatype, Scalar};
use tdb_fragment::fragment_metadata::SumValue;

/// A running sum in TileDB's widened type.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sum {
    Int(i64),
    UInt(u64),
    Float(f64),
}

impl Sum {
    fn zero(datatype: Datatype) -> Sum {
        if datatype.is_float() {
            Sum::Float(0.0)
        } else if datatype.is_signed() {
            Sum::Int(0)
        } else {
            Sum::UInt(0)
        }
    }

    /// Adds `v`, `None` on overflow (TileDB's `SafeSum`).
    fn add(self, v: Sum) -> Option<Sum> {
        Some(match (self, v) {
            (Sum::Int(a), Sum::Int(b)) => Sum::Int(a.checked_add(b)?),
            (Sum::UInt(a), Sum::UInt(b)) => Sum::UInt(a.checked_add(b)?),
            (Sum::Float(a), Sum::Float(b)) => {
                if (a < 0.0) == (b < 0.0) && a.abs() > f64::MAX - b.abs() {
                    return None;
                }
                Sum::Float(a + b)
            }
            _ => return None,
        })
    }

    fn of(s: Scalar) -> Sum {
        match s {
            Scalar::Int(v) => Sum::Int(v),
            Scalar::UInt(v) => Sum::UInt(v),
            Scalar::Bool(b) => Sum::UInt(u64::from(b)),
            Scalar::Float(v) => Sum::Float(v),
        }
    }

    fn as_f64(self) -> f64 {
        match self {
            Sum::Int(v) => v as f64,
            Sum::UInt(v) => v as f64,
            Sum::Float(v) => v,
        }
    }

    fn saturated(datatype: Datatype) -> Sum {
        match Sum::zero(datatype) {
            Sum::Int(_) => Sum::Int(i64::MAX),
            Sum::UInt(_) => Sum::UInt(u64::MAX),
            Sum::Float(_) => Sum::Float(f64::MAX),
        }
    }
}

/// What one field's ops need, decided once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldKind {
    pub datatype: Datatype,
    pub nullable: bool,
    /// Min/max compare bytes (strings) rather than numbers.
    pub bytewise: bool,
}

/// One field's aggregates so far.
#[derive(Debug, Clone)]
pub(crate) struct Accumulator {
    kind: FieldKind,
    /// Non-null cells folded in (the mean's divisor).
    count: u64,
    nulls: u64,
    sum: Sum,
    overflowed: bool,
    min: Option<Vec<u8>>,
    max: Option<Vec<u8>>,
    /// Whether sums and min/max are wanted at all (decoding costs).
    want_sum: bool,
    want_min_max: bool,
}

impl Accumulator {
    pub fn new(kind: FieldKind, ops: &[AggregateOp]) -> Self {
        Accumulator {
            kind,
            count: 0,
            nulls: 0,
            sum: Sum::zero(kind.datatype),
            overflowed: false,
            min: None,
            max: None,
            want_sum: ops
                .iter()
                .any(|o| matches!(o, AggregateOp::Sum | AggregateOp::Mean)),
            want_min_max: ops
                .iter()
                .any(|o| matches!(o, AggregateOp::Min | AggregateOp::Max)),
        }
    }

    /// A fresh accumulator for the same field and ops.
    pub fn empty(&self) -> Accumulator {
        Accumulator {
            count: 0,
            nulls: 0,
            sum: Sum::zero(self.kind.datatype),
            overflowed: false,
            min: None,
            max: None,
            ..*self
        }
    }

    /// Folds in one cell (its bytes, and whether it is valid).
    pub fn add_cell(&mut self, bytes: &[u8], valid: bool) {
        if !valid {
            self.nulls = self.nulls.saturating_add(1);
            return;
        }
        self.count = self.count.saturating_add(1);
        if self.want_sum && !self.overflowed {
            if let Some(s) = Scalar::decode(self.kind.datatype, bytes) {
                self.add_sum(Sum::of(s));
            }
        }
        if self.want_min_max {
            self.min_max(bytes, bytes);
        }
    }

    /// Folds in a whole tile from its fragment metadata: `cells` in the
    /// tile, `nulls` of them null, the raw sum and the min and max (absent
    /// when the field has none).
    pub fn add_tile(
        &mut self,
        cells: u64,
        nulls: u64,
        sum: Option<u64>,
        min_max: Option<(&[u8], &[u8])>,
    ) {
        let valid = cells.saturating_sub(nulls);
        self.count = self.count.saturating_add(valid);
        self.nulls = self.nulls.saturating_add(nulls);
        if valid == 0 {
            return;
        }
        if let (true, false, Some(raw)) = (self.want_sum, self.overflowed, sum) {
            let s = match SumValue::decode(raw, self.kind.datatype) {
                SumValue::Int(v) => Sum::Int(v),
                SumValue::UInt(v) => Sum::UInt(v),
                SumValue::Float(v) => Sum::Float(v),
            };
            self.add_sum(s);
        }
        if let (true, Some((lo, hi))) = (self.want_min_max, min_max) {
            self.min_max(lo, hi);
        }
    }

    /// Folds in another accumulator of the same field.
    pub fn merge(&mut self, other: &Accumulator) {
        self.count = self.count.saturating_add(other.count);
        self.nulls = self.nulls.saturating_add(other.nulls);
        if other.overflowed {
            self.overflowed = true;
        } else if self.want_sum && !self.overflowed && other.count > 0 {
            self.add_sum(other.sum);
        }
        if let (Some(lo), Some(hi)) = (&other.min, &other.max) {
            self.min_max(lo, hi);
        }
    }

    fn add_sum(&mut self, v: Sum) {
        match self.sum.add(v) {
            Some(s) => self.sum = s,
            None => self.overflowed = true,
        }
    }

    fn min_max(&mut self, lo: &[u8], hi: &[u8]) {
        let kind = self.kind;
        // Replaced when the new value is strictly smaller (larger): a NaN
        // never replaces, as with TileDB's `std::less`.
        if self
            .min
            .as_deref()
            .is_none_or(|m| compare(kind, lo, m) == Some(Ordering::Less))
        {
            self.min = Some(lo.to_vec());
        }
        if self
            .max
            .as_deref()
            .is_none_or(|m| compare(kind, hi, m) == Some(Ordering::Greater))
        {
            self.max = Some(hi.to_vec());
        }
    }

    /// The answer to `op` (`None` where TileDB's is undefined: no valid
    /// cell for min/max, or for a nullable field's sum and mean; a sum
    /// that overflowed on a nullable field). `rows` answers `count`.
    pub fn finish(&self, op: AggregateOp, rows: u64) -> Option<AggregateValue> {
        let nullable = self.kind.nullable;
        match op {
            AggregateOp::Count => Some(AggregateValue::Count(rows)),
            AggregateOp::NullCount => Some(AggregateValue::Count(self.nulls)),
            AggregateOp::Sum => {
                if nullable && (self.count == 0 || self.overflowed) {
                    return None;
                }
                let s = if self.overflowed {
                    Sum::saturated(self.kind.datatype)
                } else {
                    self.sum
                };
                Some(match s {
                    Sum::Int(v) => AggregateValue::Int(v),
                    Sum::UInt(v) => AggregateValue::UInt(v),
                    Sum::Float(v) => AggregateValue::Float(v),
                })
            }
            AggregateOp::Mean => {
                if nullable && (self.count == 0 || self.overflowed) {
                    return None;
                }
                Some(AggregateValue::Float(if self.overflowed {
                    f64::MAX
                } else {
                    self.sum.as_f64() / self.count as f64
                }))
            }
            AggregateOp::Min => self.min_max_or_zero(&self.min, rows),
            AggregateOp::Max => self.min_max_or_zero(&self.max, rows),
        }
    }

    /// A min or max: where no cell gave one though rows were counted (a
    /// dense read over cells no fragment wrote, or that its condition
    /// rejected), TileDB answers its result buffer as it was set, zero (an
    /// empty string) — valid for a field that is not nullable, as the row
    /// count says.
    fn min_max_or_zero(&self, value: &Option<Vec<u8>>, rows: u64) -> Option<AggregateValue> {
        match value {
            Some(v) => Some(AggregateValue::Cell(v.clone())),
            None if rows > 0 && !self.kind.nullable => {
                Some(AggregateValue::Cell(if self.kind.bytewise {
                    Vec::new()
                } else {
                    vec![0; self.kind.datatype.size() as usize]
                }))
            }
            None => None,
        }
    }
}

/// Orders two cells of one field: numbers by value, strings by bytes.
/// `None` when a float is NaN.
pub(crate) fn compare(kind: FieldKind, a: &[u8], b: &[u8]) -> Option<Ordering> {
    if kind.bytewise {
        return Some(a.cmp(b));
    }
    match (
        Scalar::decode(kind.datatype, a)?,
        Scalar::decode(kind.datatype, b)?,
    ) {
        (Scalar::Int(x), Scalar::Int(y)) => Some(x.cmp(&y)),
        (Scalar::UInt(x), Scalar::UInt(y)) => Some(x.cmp(&y)),
        (Scalar::Bool(x), Scalar::Bool(y)) => Some(x.cmp(&y)),
        (Scalar::Float(x), Scalar::Float(y)) => x.partial_cmp(&y),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(datatype: Datatype, nullable: bool) -> Accumulator {
        let kind = FieldKind {
            datatype,
            nullable,
            bytewise: datatype.is_string(),
        };
        Accumulator::new(kind, &AggregateOp::ALL)
    }

    #[test]
    fn integer_sums_saturate_on_overflow_as_tiledb_does() {
        let mut a = acc(Datatype::Int64, false);
        a.add_cell(&i64::MAX.to_le_bytes(), true);
        a.add_cell(&1i64.to_le_bytes(), true);
        assert_eq!(
            a.finish(AggregateOp::Sum, 2),
            Some(AggregateValue::Int(i64::MAX))
        );
        // A nullable field's overflowed sum is undefined instead.
        let mut n = acc(Datatype::UInt8, true);
        n.sum = Sum::UInt(u64::MAX);
        n.count = 1;
        n.add_cell(&[1], true);
        assert_eq!(n.finish(AggregateOp::Sum, 2), None);
    }

    #[test]
    fn nulls_are_counted_apart_and_left_out_of_the_mean() {
        let mut a = acc(Datatype::Int32, true);
        for (v, valid) in [(4i32, true), (0, false), (8, true)] {
            a.add_cell(&v.to_le_bytes(), valid);
        }
        assert_eq!(
            a.finish(AggregateOp::NullCount, 3),
            Some(AggregateValue::Count(1))
        );
        assert_eq!(
            a.finish(AggregateOp::Mean, 3),
            Some(AggregateValue::Float(6.0))
        );
        assert_eq!(
            a.finish(AggregateOp::Min, 3),
            Some(AggregateValue::Cell(4i32.to_le_bytes().to_vec()))
        );
    }

    #[test]
    fn empty_sets_follow_tiledb() {
        let a = acc(Datatype::Float64, false);
        assert_eq!(
            a.finish(AggregateOp::Sum, 0),
            Some(AggregateValue::Float(0.0))
        );
        match a.finish(AggregateOp::Mean, 0) {
            Some(AggregateValue::Float(m)) => assert!(m.is_nan()),
            other => panic!("mean {other:?}"),
        }
        assert_eq!(a.finish(AggregateOp::Max, 0), None);
        let n = acc(Datatype::Int64, true);
        assert_eq!(n.finish(AggregateOp::Sum, 0), None);
        assert_eq!(n.finish(AggregateOp::Mean, 0), None);
    }

    #[test]
    fn strings_compare_by_bytes_and_tiles_fold_from_metadata() {
        let mut a = acc(Datatype::StringAscii, false);
        a.add_cell(b"b", true);
        a.add_tile(3, 0, None, Some((b"ab", b"c")));
        assert_eq!(
            a.finish(AggregateOp::Min, 4),
            Some(AggregateValue::Cell(b"ab".to_vec()))
        );
        assert_eq!(
            a.finish(AggregateOp::Max, 4),
            Some(AggregateValue::Cell(b"c".to_vec()))
        );
        let mut i = acc(Datatype::Int16, false);
        i.add_cell(&(-3i16).to_le_bytes(), true);
        i.add_tile(
            4,
            0,
            Some(10i64 as u64),
            Some((&(-1i16).to_le_bytes(), &(9i16).to_le_bytes())),
        );
        assert_eq!(i.finish(AggregateOp::Sum, 5), Some(AggregateValue::Int(7)));
        assert_eq!(
            i.finish(AggregateOp::Mean, 5),
            Some(AggregateValue::Float(7.0 / 5.0))
        );
        assert_eq!(
            i.finish(AggregateOp::Min, 5),
            Some(AggregateValue::Cell((-3i16).to_le_bytes().to_vec()))
        );
    }
}
