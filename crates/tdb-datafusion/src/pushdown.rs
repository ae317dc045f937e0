//! Which SQL filters a TileDB read can apply, and how.
//!
//! A filter on one dimension (comparisons with a literal, `BETWEEN`, `IN`,
//! and `OR`s of those) becomes that dimension's subarray ranges. Integer,
//! datetime and string dimensions select exactly the rows SQL keeps
//! (exact); float ranges are inclusive and TileDB's float order is not
//! Arrow's (`-0.0` equals `0.0` in TileDB, not in Arrow's total order), so
//! DataFusion filters their rows again (inexact).
//!
//! A filter on attributes becomes a query condition in TileDB-Py's syntax.
//! It is exact where TileDB's two-valued logic equals SQL's: attributes
//! that cannot be null, or `IS [NOT] NULL` alone. With nullable operands
//! it is inexact: TileDB never keeps fewer rows than SQL (a comparison with
//! a null is false in TileDB and unknown, so dropped, in SQL), and
//! DataFusion filters again. Float attributes are never pushed: Arrow
//! orders `NaN` above every number where TileDB's comparisons with `NaN`
//! are false, so TileDB would drop rows SQL keeps. Nor are booleans, bytes
//! and enumerated attributes.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use tdb::{ArraySchema, Datatype, Range};
use tdb_query::condition::{field, Cond, Literal};
use tdb_schema::Dimension;

/// A bound of a dimension range.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
enum Key {
    Int(i128),
    Float(f64),
    Bytes(Vec<u8>),
}

/// Inclusive intervals of one dimension; `None` bounds are open.
type Intervals = Vec<(Option<Key>, Option<Key>)>;

/// What a read does with one filter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Pushed {
    /// Ranges of dimension `dim` (sorted, disjoint, within its domain).
    Ranges {
        dim: usize,
        ranges: Vec<Range>,
        exact: bool,
    },
    /// A query condition.
    Condition { text: String, exact: bool },
    /// Left to DataFusion.
    No,
}

impl Pushed {
    pub(crate) fn exact(&self) -> bool {
        matches!(
            self,
            Pushed::Ranges { exact: true, .. } | Pushed::Condition { exact: true, .. }
        )
    }
}

/// How `filter` is pushed into reads of an array of `schema` whose cells
/// lie in `ned` (its non-empty domain, which closes open string bounds).
pub(crate) fn push(schema: &ArraySchema, ned: Option<&[Range]>, filter: &Expr) -> Pushed {
    if let Some((dim, intervals, exact)) = dimension_filter(schema, filter) {
        let d = &schema.domain.dimensions[dim];
        return match ranges(d, ned.and_then(|n| n.get(dim)), &intervals) {
            Some(ranges) => Pushed::Ranges { dim, ranges, exact },
            None => Pushed::No,
        };
    }
    match condition(schema, filter) {
        Some((cond, exact)) => Pushed::Condition {
            text: cond.into(),
            exact,
        },
        None => Pushed::No,
    }
}

/// The column an expression names, and the literal it is compared with,
/// with the operator as if the column came first.
fn column_op_literal(b: &BinaryExpr) -> Option<(&str, Operator, &ScalarValue)> {
    match (b.left.as_ref(), b.right.as_ref()) {
        (Expr::Column(c), Expr::Literal(v, _)) => Some((c.name.as_str(), b.op, v)),
        (Expr::Literal(v, _), Expr::Column(c)) => Some((c.name.as_str(), b.op.swap()?, v)),
        _ => None,
    }
}

fn dim_index(schema: &ArraySchema, name: &str) -> Option<usize> {
    schema.domain.dimensions.iter().position(|d| d.name == name)
}

/// A filter on one dimension: its index, intervals and exactness.
fn dimension_filter(schema: &ArraySchema, e: &Expr) -> Option<(usize, Intervals, bool)> {
    match e {
        Expr::BinaryExpr(b) if b.op == Operator::Or => {
            let (d1, mut i1, x1) = dimension_filter(schema, &b.left)?;
            let (d2, i2, x2) = dimension_filter(schema, &b.right)?;
            (d1 == d2).then(|| {
                i1.extend(i2);
                (d1, i1, x1 && x2)
            })
        }
        Expr::BinaryExpr(b) if b.op == Operator::And => {
            let (d1, i1, x1) = dimension_filter(schema, &b.left)?;
            let (d2, i2, x2) = dimension_filter(schema, &b.right)?;
            (d1 == d2).then(|| (d1, intersect(&i1, &i2), x1 && x2))
        }
        Expr::BinaryExpr(b) => {
            let (name, op, v) = column_op_literal(b)?;
            let dim = dim_index(schema, name)?;
            let d = &schema.domain.dimensions[dim];
            let k = key(d.datatype, v)?;
            let float = matches!(k, Key::Float(_));
            let (interval, exact) = match op {
                Operator::Eq => ((Some(k.clone()), Some(k)), true),
                Operator::LtEq => ((None, Some(k)), true),
                Operator::GtEq => ((Some(k), None), true),
                Operator::Lt => match k {
                    Key::Int(i) => ((None, Some(Key::Int(i - 1))), true),
                    k => ((None, Some(k)), false),
                },
                Operator::Gt => match k {
                    Key::Int(i) => ((Some(Key::Int(i + 1)), None), true),
                    k => ((Some(k), None), false),
                },
                _ => return None,
            };
            Some((dim, vec![interval], exact && !float))
        }
        Expr::Between(Between {
            expr,
            negated: false,
            low,
            high,
        }) => {
            let Expr::Column(c) = expr.as_ref() else {
                return None;
            };
            let dim = dim_index(schema, &c.name)?;
            let t = schema.domain.dimensions[dim].datatype;
            let (Expr::Literal(lo, _), Expr::Literal(hi, _)) = (low.as_ref(), high.as_ref()) else {
                return None;
            };
            let (lo, hi) = (key(t, lo)?, key(t, hi)?);
            let exact = !matches!(lo, Key::Float(_));
            Some((dim, vec![(Some(lo), Some(hi))], exact))
        }
        Expr::InList(l) if !l.negated => {
            let Expr::Column(c) = l.expr.as_ref() else {
                return None;
            };
            let dim = dim_index(schema, &c.name)?;
            let t = schema.domain.dimensions[dim].datatype;
            let mut out = Vec::new();
            let mut exact = true;
            for v in &l.list {
                let Expr::Literal(v, _) = v else {
                    return None;
                };
                let k = key(t, v)?;
                exact &= !matches!(k, Key::Float(_));
                out.push((Some(k.clone()), Some(k)));
            }
            Some((dim, out, exact))
        }
        _ => None,
    }
}

/// A literal as a bound of a dimension of `datatype`; `None` where the
/// literal is no value of it.
fn key(datatype: Datatype, v: &ScalarValue) -> Option<Key> {
    if datatype.is_float() {
        return match v {
            ScalarValue::Float32(Some(f)) => Some(Key::Float(f64::from(*f))),
            ScalarValue::Float64(Some(f)) => Some(Key::Float(*f)),
            _ => int_literal(datatype, v).map(|i| Key::Float(i as f64)),
        }
        .filter(|k| !matches!(k, Key::Float(f) if f.is_nan()));
    }
    if datatype.is_string() {
        return match v {
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)) => Some(Key::Bytes(s.as_bytes().to_vec())),
            _ => None,
        };
    }
    int_literal(datatype, v).map(Key::Int)
}

/// An integer literal for a column of integer-valued `datatype`:
/// integers, and timestamps, times and durations of the column's own unit.
fn int_literal(datatype: Datatype, v: &ScalarValue) -> Option<i128> {
    use ScalarValue as S;
    let unit_of = |t: DataType| tdb_arrow::mapping(datatype, 1).data_type == t;
    Some(match v {
        S::Int8(Some(i)) => i128::from(*i),
        S::Int16(Some(i)) => i128::from(*i),
        S::Int32(Some(i)) => i128::from(*i),
        S::Int64(Some(i)) => i128::from(*i),
        S::UInt8(Some(i)) => i128::from(*i),
        S::UInt16(Some(i)) => i128::from(*i),
        S::UInt32(Some(i)) => i128::from(*i),
        S::UInt64(Some(i)) => i128::from(*i),
        S::TimestampSecond(Some(i), _)
        | S::TimestampMillisecond(Some(i), _)
        | S::TimestampMicrosecond(Some(i), _)
        | S::TimestampNanosecond(Some(i), _)
        | S::DurationSecond(Some(i))
        | S::DurationMillisecond(Some(i))
        | S::Time64Microsecond(Some(i))
        | S::Time64Nanosecond(Some(i))
            if unit_of(v.data_type()) =>
        {
            i128::from(*i)
        }
        _ => return None,
    })
    .filter(|_| datatype.is_integer() || datatype.is_datetime() || datatype.is_time())
}

/// The intervals common to both lists.
fn intersect(a: &Intervals, b: &Intervals) -> Intervals {
    let mut out = Vec::new();
    for (alo, ahi) in a {
        for (blo, bhi) in b {
            let lo = match (alo, blo) {
                (Some(x), Some(y)) => Some(if x >= y { x.clone() } else { y.clone() }),
                (x, y) => x.clone().or_else(|| y.clone()),
            };
            let hi = match (ahi, bhi) {
                (Some(x), Some(y)) => Some(if x <= y { x.clone() } else { y.clone() }),
                (x, y) => x.clone().or_else(|| y.clone()),
            };
            out.push((lo, hi));
        }
    }
    out
}

/// The intervals as ranges of dimension `d`: open bounds closed at the
/// domain's (string dimensions have none: at the non-empty domain's,
/// beyond which no cell lies), clipped to the domain, empty ones dropped,
/// sorted and merged. `None` where a bound cannot be closed.
fn ranges(d: &Dimension, ned: Option<&Range>, intervals: &Intervals) -> Option<Vec<Range>> {
    let key_of = |b: &[u8]| -> Option<Key> {
        match d.datatype {
            t if t.is_string() => Some(Key::Bytes(b.to_vec())),
            t if t.is_float() => match tdb_format::Scalar::decode(t, b)? {
                tdb_format::Scalar::Float(f) => Some(Key::Float(f)),
                _ => None,
            },
            t => tdb_index::dense::int_value(t, b).map(Key::Int),
        }
    };
    let domain = match d.bounds() {
        Some((lo, hi)) => Some((key_of(lo)?, key_of(hi)?)),
        None => None,
    };
    let outer = match (&domain, ned) {
        (Some(b), _) => Some(b.clone()),
        (None, Some(r)) => Some((key_of(r.bounds().0)?, key_of(r.bounds().1)?)),
        (None, None) => None,
    };
    let mut closed: Vec<(Key, Key)> = Vec::new();
    for (lo, hi) in intervals {
        let lo = match lo {
            Some(k) => k.clone(),
            None => outer.as_ref()?.0.clone(),
        };
        let hi = match hi {
            Some(k) => k.clone(),
            None => outer.as_ref()?.1.clone(),
        };
        let (lo, hi) = match &domain {
            Some((a, b)) => (
                if lo < *a { a.clone() } else { lo },
                if hi > *b { b.clone() } else { hi },
            ),
            None => (lo, hi),
        };
        if lo <= hi {
            closed.push((lo, hi));
        }
    }
    closed.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
    let mut merged: Vec<(Key, Key)> = Vec::new();
    for (lo, hi) in closed {
        match merged.last_mut() {
            Some((_, last)) if adjoins(last, &lo) => {
                if hi > *last {
                    *last = hi;
                }
            }
            _ => merged.push((lo, hi)),
        }
    }
    merged
        .into_iter()
        .map(|(lo, hi)| range_of(d, lo, hi))
        .collect()
}

/// Whether an interval ending at `end` and one starting at `start` touch.
fn adjoins(end: &Key, start: &Key) -> bool {
    match (end, start) {
        (Key::Int(e), Key::Int(s)) => *s <= e.saturating_add(1),
        (e, s) => s <= e,
    }
}

fn range_of(d: &Dimension, lo: Key, hi: Key) -> Option<Range> {
    match (lo, hi) {
        (Key::Int(lo), Key::Int(hi)) => tdb_index::dense::int_range_of(d, lo, hi),
        (Key::Float(lo), Key::Float(hi)) => Some(match d.datatype {
            Datatype::Float32 => Range::from_bounds(
                &(lo as f32).to_le_bytes(),
                &(hi as f32).to_le_bytes(),
                false,
            ),
            _ => Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false),
        }),
        (Key::Bytes(lo), Key::Bytes(hi)) => Some(Range::from_bounds(&lo, &hi, true)),
        _ => None,
    }
}

/// A filter on attributes as a condition, and whether it is exact.
fn condition(schema: &ArraySchema, e: &Expr) -> Option<(Cond, bool)> {
    let attribute = |name: &str| {
        schema
            .attribute(name)
            .filter(|a| pushable(a.datatype, a.cell_val_num, a.enumeration.is_some()))
    };
    match e {
        Expr::BinaryExpr(b) if matches!(b.op, Operator::And | Operator::Or) => {
            let (l, lx) = condition(schema, &b.left)?;
            let (r, rx) = condition(schema, &b.right)?;
            let c = if b.op == Operator::And {
                l.and(r)
            } else {
                l.or(r)
            };
            Some((c, lx && rx))
        }
        Expr::Not(inner) => {
            let (c, x) = condition(schema, inner)?;
            Some((c.not(), x))
        }
        Expr::IsNull(inner) | Expr::IsNotNull(inner) => {
            let Expr::Column(c) = inner.as_ref() else {
                return None;
            };
            attribute(&c.name).filter(|a| a.nullable)?;
            let f = field(&c.name);
            let cond = if matches!(e, Expr::IsNull(_)) {
                f.is_null()
            } else {
                f.is_not_null()
            };
            Some((cond, true))
        }
        Expr::BinaryExpr(b) => {
            let (name, op, v) = column_op_literal(b)?;
            let a = attribute(name)?;
            let v = literal(a.datatype, v)?;
            let f = field(name);
            let cond = match op {
                Operator::Eq => f.eq(v),
                Operator::NotEq => f.ne(v),
                Operator::Lt => f.lt(v),
                Operator::LtEq => f.le(v),
                Operator::Gt => f.gt(v),
                Operator::GtEq => f.ge(v),
                _ => return None,
            };
            Some((cond, !a.nullable))
        }
        Expr::InList(l) => {
            let Expr::Column(c) = l.expr.as_ref() else {
                return None;
            };
            let a = attribute(&c.name)?;
            let values = l
                .list
                .iter()
                .map(|v| match v {
                    Expr::Literal(v, _) => literal(a.datatype, v),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            let f = field(&c.name);
            let cond = if l.negated {
                f.not_in(values)
            } else {
                f.is_in(values)
            };
            Some((cond, !a.nullable))
        }
        _ => None,
    }
}

/// Attributes whose TileDB comparisons are SQL's: one integer, datetime,
/// time or string value per cell (var strings), not enumerated.
fn pushable(datatype: Datatype, cell_val_num: u32, enumerated: bool) -> bool {
    let integer = datatype.is_integer() || datatype.is_datetime() || datatype.is_time();
    let text = matches!(datatype, Datatype::StringAscii | Datatype::StringUtf8);
    !enumerated && ((integer && cell_val_num == 1) || (text && cell_val_num == tdb::VAR_NUM))
}

/// A literal compared with an attribute of `datatype`.
fn literal(datatype: Datatype, v: &ScalarValue) -> Option<Literal> {
    if datatype.is_string() {
        return match v {
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)) => Some(Literal::Str(s.clone())),
            _ => None,
        };
    }
    int_literal(datatype, v).map(Literal::Int)
}

/// The subarray text EXPLAIN shows: `d: [lo, hi], ...` per dimension cut.
pub(crate) fn describe(schema: &ArraySchema, dim: usize, ranges: &[Range]) -> String {
    let d = &schema.domain.dimensions[dim];
    let show = |b: &[u8]| match tdb_format::Scalar::decode(d.datatype, b) {
        Some(s) => s.to_string(),
        None => format!("{:?}", String::from_utf8_lossy(b)),
    };
    let parts: Vec<String> = ranges
        .iter()
        .map(|r| {
            let (lo, hi) = r.bounds();
            format!("[{}, {}]", show(lo), show(hi))
        })
        .collect();
    format!("{}: {}", d.name, parts.join(" "))
}
