//! Evaluation of a bound condition over columns: one comparison function per
//! leaf, chosen from the field's datatype and the op when the condition is
//! bound, so no cell pays for a datatype or op dispatch.

use crate::column::{Column, Columns};
use crate::validity::ValidityRef;
use crate::{QueryError, Result};
use std::collections::HashSet;
use tdb_format::{with_native, Datatype, Native, NativeType, QueryConditionOp as Op};

/// A bound tree: AND/OR of leaves (NOT already pushed into the leaves).
#[derive(Debug, Clone)]
pub(super) enum Node {
    Leaf(Leaf),
    And(Vec<Node>),
    Or(Vec<Node>),
}

/// One field test.
#[derive(Debug, Clone)]
pub(super) struct Leaf {
    pub field: String,
    /// The shape the column must have.
    pub datatype: Datatype,
    pub var: bool,
    pub nullable: bool,
    pub test: Test,
}

/// `fn(column, value, out)`: `out[i]` = cell `i` compared with `value`.
pub(super) type Kernel = fn(&Column<'_>, &[u8], &mut [bool]);

#[derive(Clone)]
pub(super) enum Test {
    /// `== None` (true) / `!= None` (false) on a nullable field.
    Null(bool),
    /// TileDB's ALWAYS_TRUE / ALWAYS_FALSE; null cells still fail.
    Const(bool),
    /// A comparison; null cells fail.
    Cmp {
        kernel: Kernel,
        op: Op,
        value: Vec<u8>,
    },
    /// IN (`inside`) / NOT_IN of the cell's bytes; null cells fail.
    Member { set: HashSet<Vec<u8>>, inside: bool },
}

impl std::fmt::Debug for Test {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Test::Null(eq) => write!(f, "Null({eq})"),
            Test::Const(b) => write!(f, "Const({b})"),
            Test::Cmp { value, .. } => write!(f, "Cmp({value:?})"),
            Test::Member { set, inside } => write!(f, "Member({inside}, {} members)", set.len()),
        }
    }
}

/// Sets `out[i]` to whether `node` holds for cell `i`.
///
/// As TileDB 2.30's sparse readers combine: a test on a field the cells do
/// not have (an attribute added after their fragment was written; `cols`
/// has no such column) clears the bitmap it is applied to, so it is false
/// under an AND, and under an OR it also clears what the alternatives
/// before it matched (`a == 1 or c == 5` keeps no cell of such a fragment,
/// `c == 5 or a == 1` keeps those with `a == 1`). An OR's result is ANDed
/// into its parent's bitmap whatever the parent (TileDB flattens nested
/// ORs, so only a stored tree could nest them).
pub(super) fn eval(node: &Node, cols: &dyn Columns, out: &mut [bool]) -> Result<()> {
    out.fill(true);
    apply(node, cols, false, out)
}

/// Whether a leaf of `node` is a null test.
pub(super) fn tests_nulls(node: &Node) -> bool {
    match node {
        Node::Leaf(l) => matches!(l.test, Test::Null(_)),
        Node::And(children) | Node::Or(children) => children.iter().any(tests_nulls),
    }
}

/// Applies `node` to `bits` under an AND (`or` false: `bits &= node`) or
/// an OR (`bits |= node`).
fn apply(node: &Node, cols: &dyn Columns, or: bool, bits: &mut [bool]) -> Result<()> {
    let combine = |bits: &mut [bool], with: &[bool], or: bool| {
        for (b, w) in bits.iter_mut().zip(with) {
            if or {
                *b |= *w;
            } else {
                *b &= *w;
            }
        }
    };
    match node {
        Node::Leaf(l) => {
            let col = match l.test {
                Test::Null(_) => cols.null_test_column(&l.field),
                _ => cols.column(&l.field),
            };
            let Some(col) = col else {
                bits.fill(false);
                return Ok(());
            };
            let mut hit = vec![false; bits.len()];
            leaf(l, &col, &mut hit)?;
            combine(bits, &hit, or);
        }
        Node::And(children) if !or => {
            for c in children {
                apply(c, cols, false, bits)?;
            }
        }
        Node::And(children) => {
            let mut all = vec![true; bits.len()];
            for c in children {
                apply(c, cols, false, &mut all)?;
            }
            combine(bits, &all, true);
        }
        Node::Or(children) => {
            let mut any = vec![false; bits.len()];
            for c in children {
                apply(c, cols, true, &mut any)?;
            }
            combine(bits, &any, false);
        }
    }
    Ok(())
}

fn leaf(l: &Leaf, col: &Column<'_>, out: &mut [bool]) -> Result<()> {
    let shape_err = |what: String| {
        QueryError::condition(
            l.field.clone(),
            format!("the column does not match the schema: {what}"),
        )
    };
    if col.datatype != l.datatype && !(is_int64(col.datatype) && is_int64(l.datatype)) {
        return Err(shape_err(format!(
            "datatype {} where {} was bound",
            col.datatype.name(),
            l.datatype.name()
        )));
    }
    if col.is_var() != l.var {
        return Err(shape_err("var-size and fixed-size cells mixed up".into()));
    }
    if col.len() != out.len() || col.validity.is_some_and(|v| v.len() != out.len()) {
        return Err(shape_err(format!(
            "{} cells where {} were expected",
            col.len(),
            out.len()
        )));
    }
    match &l.test {
        Test::Null(eq) => {
            for (i, o) in out.iter_mut().enumerate() {
                *o = col.is_null(i) == *eq;
            }
            return Ok(());
        }
        Test::Const(b) => out.fill(*b),
        Test::Cmp { kernel, value, .. } => kernel(col, value, out),
        Test::Member { set, inside } => {
            for (i, o) in out.iter_mut().enumerate() {
                *o = set.contains(col.cell(i)) == *inside;
            }
        }
    }
    // A value test never holds on a null cell (TileDB's sparse and dense
    // readers AND the comparison with the validity).
    if l.nullable {
        match col.validity {
            Some(ValidityRef::Bytes(v)) => {
                for (o, &valid) in out.iter_mut().zip(v) {
                    *o &= valid != 0;
                }
            }
            Some(v) => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o &= v.is_valid(i);
                }
            }
            None => {}
        }
    }
    Ok(())
}

/// INT64, DATETIME_* and TIME_*: one type to TileDB's comparisons.
fn is_int64(d: Datatype) -> bool {
    d.native() == Some(Native::I64)
}

const LT: u8 = 0;
const LE: u8 = 1;
const GT: u8 = 2;
const GE: u8 = 3;
const EQ: u8 = 4;

#[inline(always)]
fn holds<const OP: u8, T: PartialOrd + ?Sized>(a: &T, b: &T) -> bool {
    match OP {
        LT => a < b,
        LE => a <= b,
        GT => a > b,
        GE => a >= b,
        EQ => a == b,
        _ => a != b,
    }
}

/// Fixed cells: the first value of each cell against `value`.
/// Short input (an empty CHAR value) reads as zeros, as TileDB reads the
/// NUL of its empty string.
fn prim_kernel<T: NativeType, const OP: u8>(col: &Column<'_>, value: &[u8], out: &mut [bool]) {
    let v = T::read_le(value);
    let size = col.cell_size().max(T::SIZE);
    for (o, cell) in out.iter_mut().zip(col.fixed.chunks_exact(size)) {
        *o = holds::<OP, T>(&T::read_le(cell), &v);
    }
}

/// String cells: byte-wise lexicographic order (TileDB's `string_view` and
/// `memcmp` comparisons agree: `char_traits<char>` compares as unsigned).
fn bytes_kernel<const OP: u8>(col: &Column<'_>, value: &[u8], out: &mut [bool]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = holds::<OP, [u8]>(col.cell(i), value);
    }
}

macro_rules! by_op {
    ($op:expr, $f:ident $(::<$t:ty>)?) => {
        match $op {
            Op::Lt => Some($f::<$($t,)? LT> as Kernel),
            Op::Le => Some($f::<$($t,)? LE> as Kernel),
            Op::Gt => Some($f::<$($t,)? GT> as Kernel),
            Op::Ge => Some($f::<$($t,)? GE> as Kernel),
            Op::Eq => Some($f::<$($t,)? EQ> as Kernel),
            Op::Ne => Some($f::<$($t,)? 5> as Kernel),
            _ => None,
        }
    };
}

/// The comparison for a field of `datatype` (fixed CHAR cells compare as
/// TileDB's `char`: the first byte, signed), and the value size it needs
/// (`None`: any size).
pub(super) fn kernel(datatype: Datatype, var: bool, op: Op) -> Option<(Kernel, Option<usize>)> {
    use Datatype as D;
    let k = match datatype.native() {
        Some(n) if !(datatype == D::Char && var) => {
            with_native!(n, T => by_op!(op, prim_kernel::<T>)?)
        }
        _ if datatype.is_string() => return Some((by_op!(op, bytes_kernel)?, None)),
        _ => return None,
    };
    let size = if datatype == D::Char {
        None
    } else {
        Some(datatype.size() as usize)
    };
    Some((k, size))
}

/// Whether `node` may hold for some cell of a tile whose values of each
/// field lie between the bounds `bounds` gives (its min and max cells;
/// `None` where the tile has none). `false` only when no cell can match;
/// nullable fields, NaN bounds and NOT IN always may.
pub(super) fn may_match(node: &Node, bounds: &super::FieldBounds<'_>) -> bool {
    match node {
        Node::And(children) => children.iter().all(|c| may_match(c, bounds)),
        Node::Or(children) => children.iter().any(|c| may_match(c, bounds)),
        Node::Leaf(l) => {
            if l.nullable {
                return true;
            }
            let test = |op: Op, x: &[u8], value: &[u8]| -> Option<bool> {
                let (kernel, _) = kernel(l.datatype, l.var, op)?;
                let size = l.datatype.size() as usize;
                let offsets = [0u64];
                let col = Column {
                    datatype: l.datatype,
                    cell_val_num: if l.var {
                        crate::VAR_NUM
                    } else {
                        u32::try_from(x.len().checked_div(size)?).ok()?
                    },
                    fixed: if l.var { &[] } else { x },
                    offsets: if l.var { &offsets } else { &[] },
                    var: if l.var { x } else { &[] },
                    validity: None,
                };
                if col.len() != 1 {
                    return None;
                }
                let mut out = [false];
                kernel(&col, value, &mut out);
                Some(out[0])
            };
            let Some((lo, hi)) = bounds(&l.field) else {
                return true;
            };
            let nan = |b: &[u8]| match tdb_format::Scalar::decode(l.datatype, b) {
                Some(tdb_format::Scalar::Float(f)) => f.is_nan(),
                _ => false,
            };
            if nan(lo) || nan(hi) {
                return true;
            }
            // String bounds are in `strncmp`'s order: unsigned bytes up to a
            // NUL. Fixed CHAR compares its first byte as signed `char`, so
            // they bound its values only where neither starts at 0x80 or
            // above; other strings compare as bytes past a NUL too, so
            // bounds holding one bound nothing.
            if l.datatype.is_string() {
                let unordered = if l.datatype == Datatype::Char && !l.var {
                    [lo, hi]
                        .iter()
                        .any(|b| b.first().is_some_and(|&c| c >= 0x80))
                } else {
                    [lo, hi].iter().any(|b| b.contains(&0))
                };
                if unordered {
                    return true;
                }
            }
            // Somewhere in [lo, hi] equals `v`.
            let within = |v: &[u8]| {
                test(Op::Le, lo, v).unwrap_or(true) && test(Op::Ge, hi, v).unwrap_or(true)
            };
            match &l.test {
                Test::Null(_) => true,
                Test::Const(b) => *b,
                Test::Cmp { op, value, .. } => match op {
                    Op::Lt | Op::Le => test(*op, lo, value).unwrap_or(true),
                    Op::Gt | Op::Ge => test(*op, hi, value).unwrap_or(true),
                    Op::Eq => within(value),
                    Op::Ne => {
                        !(test(Op::Eq, lo, value).unwrap_or(false)
                            && test(Op::Eq, hi, value).unwrap_or(false))
                    }
                    _ => true,
                },
                Test::Member { set, inside } => !*inside || set.iter().any(|v| within(v)),
            }
        }
    }
}
