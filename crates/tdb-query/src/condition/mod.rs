//! Query conditions: TileDB-Py's expression syntax parsed into the condition
//! tree TileDB serializes ([`tdb_fragment::Condition`]), bound to a schema,
//! and evaluated over columns of cells.
//!
//! Semantics are TileDB 2.30's (`query_condition.cc`, `ast/query_ast.cc`):
//! - `not` is applied by rewriting the tree (`<` becomes `>=`, `==` `!=`,
//!   `in` `not in`, AND becomes OR: De Morgan), so `not (a < 3)` is
//!   `a >= 3` and, like it, false on a null cell.
//! - A comparison (any op, `!=` and `not in` included) is false on a null
//!   cell; only `== None` holds there. `!= None` holds on non-null cells.
//!   A null test on a non-nullable field is always false (`==`) or always
//!   true (`!=`).
//! - An enumerated attribute compared with a label compares the label's
//!   index; a label the enumeration lacks makes `!=` true on every non-null
//!   cell and any other op false; `in` drops missing labels. `<`..`>=` need
//!   an ordered enumeration.
//! - Strings compare byte-wise; floats as IEEE (`NaN` equals nothing, and
//!   `!=` everything); `in` compares a cell's bytes with each member's.

mod build;
mod eval;
mod parse;

pub use build::{field, quote, Cond, Field, Literal};

use crate::column::{Columns, VAR_NUM};
use crate::{QueryError, Result};
use eval::{Leaf, Node, Test};
use std::collections::{HashMap, HashSet};
use tdb_format::{QueryConditionCombinationOp as Comb, QueryConditionOp as Op};
use tdb_fragment::Condition;
use tdb_schema::{ArraySchema, Enumeration};

type QResult<T> = Result<T>;

/// Parses `expr` (TileDB-Py syntax) into a condition tree whose values are
/// encoded in their fields' datatypes under `schema`.
///
/// An enumerated attribute compared with a string keeps the label's bytes
/// (mapped to the index when bound); numeric labels need the enumeration's
/// datatype: use [`parse_with_enumerations`].
pub fn parse(expr: &str, schema: &ArraySchema) -> Result<Condition> {
    parse::parse(expr, schema, &HashMap::new())
}

/// [`parse()`], with the enumerations of `schema` (keyed by name) so that
/// labels of enumerated attributes are encoded in their enumeration's
/// datatype, as TileDB-Py does (`size == 20` on a `uint8` attribute with an
/// `int32` enumeration writes a 4-byte 20).
pub fn parse_with_enumerations(
    expr: &str,
    schema: &ArraySchema,
    enumerations: &HashMap<String, Enumeration>,
) -> Result<Condition> {
    parse::parse(expr, schema, enumerations)
}

/// `condition` negated as TileDB negates (`QueryCondition::negate`): ops
/// rewritten, AND and OR swapped, NOT nodes removed.
pub fn negate(condition: Condition) -> std::result::Result<Condition, String> {
    Ok(match condition {
        Condition::Compare { field, op, value } => Condition::Compare {
            field,
            op: negate_op(op)?,
            value,
        },
        Condition::Membership {
            field,
            op,
            data,
            offsets,
        } => Condition::Membership {
            field,
            op: negate_op(op)?,
            data,
            offsets,
        },
        Condition::Combination { op, children } => match op {
            Comb::Not => {
                let [child] = <[Condition; 1]>::try_from(children)
                    .map_err(|c| format!("NOT with {} children", c.len()))?;
                // not not x = x (with inner NOTs resolved).
                remove_not(child)?
            }
            Comb::And | Comb::Or => Condition::Combination {
                op: if op == Comb::And { Comb::Or } else { Comb::And },
                children: children
                    .into_iter()
                    .map(negate)
                    .collect::<std::result::Result<_, _>>()?,
            },
        },
        other => return Err(format!("unknown condition node {other:?}")),
    })
}

fn negate_op(op: Op) -> std::result::Result<Op, String> {
    Ok(match op {
        Op::Lt => Op::Ge,
        Op::Ge => Op::Lt,
        Op::Gt => Op::Le,
        Op::Le => Op::Gt,
        Op::Eq => Op::Ne,
        Op::Ne => Op::Eq,
        Op::In => Op::NotIn,
        Op::NotIn => Op::In,
        // TileDB refuses too: these only come from its own rewriting.
        Op::AlwaysTrue | Op::AlwaysFalse => {
            return Err("ALWAYS_TRUE / ALWAYS_FALSE cannot be negated".into())
        }
    })
}

/// The tree with every NOT node pushed into its operand.
fn remove_not(c: Condition) -> std::result::Result<Condition, String> {
    Ok(match c {
        Condition::Combination {
            op: Comb::Not,
            children,
        } => {
            let [child] = <[Condition; 1]>::try_from(children)
                .map_err(|c| format!("NOT with {} children", c.len()))?;
            negate(remove_not(child)?)?
        }
        Condition::Combination { op, children } => Condition::Combination {
            op,
            children: children
                .into_iter()
                .map(remove_not)
                .collect::<std::result::Result<_, _>>()?,
        },
        leaf => leaf,
    })
}

/// A tile's min and max cell of a field (by name), `None` when unknown.
pub type FieldBounds<'a> = dyn Fn(&str) -> Option<(&'a [u8], &'a [u8])> + 'a;

/// A condition checked against a schema and ready to evaluate.
#[derive(Debug, Clone)]
pub struct BoundCondition {
    fields: Vec<String>,
    root: Node,
}

impl BoundCondition {
    /// Binds `condition` to `schema` (enumerated attributes compare labels
    /// through `enumerations`, keyed by enumeration name).
    pub fn new(
        condition: &Condition,
        schema: &ArraySchema,
        enumerations: &HashMap<String, Enumeration>,
    ) -> Result<Self> {
        let tree = remove_not(condition.clone()).map_err(|r| QueryError::condition("", r))?;
        let mut fields = Vec::new();
        let root = bind(&tree, schema, enumerations, &mut fields, 0)?;
        Ok(BoundCondition { fields, root })
    }

    /// Binds a condition read back from a delete commit as TileDB's reader
    /// applies it. TileDB deserializes every value node with a non-null
    /// pointer, so an empty value there is not a null test: on a string
    /// field `s != None` written by a delete reads back as `s != ''` (its
    /// cells with empty strings are deleted too, and null ones). Elsewhere
    /// TileDB would read past the empty value; the null test is kept.
    pub fn stored(
        condition: &Condition,
        schema: &ArraySchema,
        enumerations: &HashMap<String, Enumeration>,
    ) -> Result<Self> {
        Self::new(
            &empty_strings(condition.clone(), schema),
            schema,
            enumerations,
        )
    }

    /// The fields the condition reads.
    pub fn fields(&self) -> &[String] {
        &self.fields
    }

    /// Whether it tests some field `== None` or `!= None`.
    pub fn tests_nulls(&self) -> bool {
        eval::tests_nulls(&self.root)
    }

    /// Whether the condition may hold for some cell of a tile whose
    /// fields' values lie between the bounds `bounds(field)` gives (min and
    /// max cell, from the tile's metadata); `false` only when it cannot.
    pub fn may_match(&self, bounds: &FieldBounds<'_>) -> bool {
        eval::may_match(&self.root, bounds)
    }

    /// Clears `mask[i]` for every cell `i` where the condition does not
    /// hold; `mask.len()` is the number of cells.
    pub fn evaluate(&self, columns: &dyn Columns, mask: &mut [bool]) -> Result<()> {
        let mut hit = vec![false; mask.len()];
        eval::eval(&self.root, columns, &mut hit)?;
        for (m, h) in mask.iter_mut().zip(hit) {
            *m &= h;
        }
        Ok(())
    }
}

/// A delete commit as reads (and merges) apply it.
#[derive(Debug, Clone)]
pub(crate) struct BoundDelete {
    /// When the delete was made.
    pub timestamp: u64,
    /// TileDB's condition marker: the commit's path in the array.
    pub marker: String,
    /// The stored condition: the negation of the delete's.
    pub condition: BoundCondition,
}

impl BoundDelete {
    /// Binds delete commit `marker`'s condition to `schema`.
    pub fn bind(
        marker: &str,
        timestamp: u64,
        commit: &tdb_fragment::DeleteCommit,
        schema: &ArraySchema,
        enumerations: &HashMap<String, Enumeration>,
    ) -> Result<Self> {
        Ok(BoundDelete {
            timestamp,
            marker: marker.to_owned(),
            condition: BoundCondition::stored(&commit.condition, schema, enumerations)?,
        })
    }

    /// Which of the cells in `columns` this delete removes: those its
    /// stored condition rejects, written (`cell_ts`) at or before it —
    /// TileDB applies a delete to cells as old as itself.
    pub fn removes(
        &self,
        columns: &dyn Columns,
        cell_ts: impl Fn(usize) -> u64,
    ) -> Result<Vec<bool>> {
        let mut keep = vec![true; columns.cell_num()];
        self.condition.evaluate(columns, &mut keep)?;
        Ok(keep
            .iter()
            .enumerate()
            .map(|(i, k)| !k && cell_ts(i) <= self.timestamp)
            .collect())
    }
}

/// `condition` with every EQ/NE against an empty value on a var-length
/// string field turned into the membership test the parser makes of
/// `s == ''` (see [`BoundCondition::stored`]).
fn empty_strings(c: Condition, schema: &ArraySchema) -> Condition {
    match c {
        Condition::Combination { op, children } => Condition::Combination {
            op,
            children: children
                .into_iter()
                .map(|ch| empty_strings(ch, schema))
                .collect(),
        },
        Condition::Compare { field, op, value }
            if value.is_empty()
                && matches!(op, Op::Eq | Op::Ne)
                && schema
                    .field_type(&field)
                    .is_some_and(|(t, n)| t.is_string() && n == VAR_NUM) =>
        {
            Condition::Membership {
                field,
                op: if op == Op::Eq { Op::In } else { Op::NotIn },
                data: Vec::new(),
                offsets: vec![0],
            }
        }
        other => other,
    }
}

const MAX_DEPTH: usize = 256;

fn bind(
    c: &Condition,
    schema: &ArraySchema,
    enums: &HashMap<String, Enumeration>,
    fields: &mut Vec<String>,
    depth: usize,
) -> Result<Node> {
    if depth > MAX_DEPTH {
        return Err(QueryError::condition("", "condition tree too deep"));
    }
    let (field, op) = match c {
        Condition::Combination { op, children } => {
            if children.is_empty() {
                return Err(QueryError::condition(
                    "",
                    format!("{} with no operands", op.name()),
                ));
            }
            let nodes = children
                .iter()
                .map(|ch| bind(ch, schema, enums, fields, depth.saturating_add(1)))
                .collect::<Result<Vec<_>>>()?;
            return Ok(match op {
                Comb::Or => Node::Or(nodes),
                _ => Node::And(nodes),
            });
        }
        Condition::Compare { field, op, .. } | Condition::Membership { field, op, .. } => {
            (field, *op)
        }
        other => {
            return Err(QueryError::condition(
                describe(other),
                "unknown condition node",
            ))
        }
    };
    let show = || describe(c);
    let err = |reason: String| QueryError::condition(show(), reason);
    // The field.
    let (datatype, cvn, nullable, enumeration) = if let Some(a) = schema.attribute(field) {
        (
            a.datatype,
            a.cell_val_num,
            a.nullable,
            a.enumeration.as_deref(),
        )
    } else if let Some(d) = schema.dimension(field) {
        (d.datatype, d.cell_val_num, false, None)
    } else {
        return Err(err(format!(
            "no field named `{field}` in the array (fields: {})",
            schema.field_names()
        )));
    };
    if !fields.contains(field) {
        fields.push(field.clone());
    }
    let var = cvn == VAR_NUM;
    let leaf = |test| {
        Ok(Node::Leaf(Leaf {
            field: field.clone(),
            datatype,
            var,
            nullable,
            test,
        }))
    };
    // Null tests (TileDB's `rewrite_for_schema`: on a non-nullable field
    // `== None` is ALWAYS_FALSE and `!= None` ALWAYS_TRUE).
    if c.is_null_test() {
        return leaf(if nullable {
            Test::Null(op == Op::Eq)
        } else {
            Test::Const(op == Op::Ne)
        });
    }
    match op {
        Op::AlwaysTrue => return leaf(Test::Const(true)),
        Op::AlwaysFalse => return leaf(Test::Const(false)),
        _ => {}
    }
    if !parse::supported(datatype) {
        return Err(err(format!(
            "`{field}` is {}: conditions compare numbers, dates and strings only",
            datatype.name()
        )));
    }
    if !datatype.is_string() && cvn != 1 {
        return Err(err(format!(
            "`{field}` does not hold one {} per cell: TileDB compares only single-value \
             numeric cells",
            datatype.name()
        )));
    }
    // Enumerated attributes: labels become index values
    // (`ASTNodeVal::rewrite_for_schema`).
    let enumeration = match enumeration {
        Some(name) => Some(enums.get(name).ok_or_else(|| {
            err(format!(
                "`{field}` is enumerated by `{name}`, which was not loaded: pass it in \
                 `enumerations`"
            ))
        })?),
        None => None,
    };
    let index_of = |e: &Enumeration, label: &[u8]| -> Result<Option<Vec<u8>>> {
        let values = e
            .values()
            .map_err(|x| err(format!("enumeration `{}`: {x}", e.name)))?;
        match values.iter().position(|v| *v == label) {
            None => Ok(None),
            Some(i) => parse::int_bytes(datatype, i as i128)
                .map(Some)
                .map_err(|r| {
                    err(format!(
                        "the index of the label in `{}` does not fit `{field}` ({}{r})",
                        e.name,
                        datatype.name()
                    ))
                }),
        }
    };
    match c {
        Condition::Compare { value, .. } => {
            let mut value = value.clone();
            if let Some(e) = enumeration {
                if !e.ordered && matches!(op, Op::Lt | Op::Le | Op::Gt | Op::Ge) {
                    return Err(err(format!(
                        "`{field}`'s enumeration `{}` is not ordered: only `==`, `!=` and `in` \
                         apply to its labels",
                        e.name
                    )));
                }
                match index_of(e, &value)? {
                    Some(idx) => value = idx,
                    None => return leaf(Test::Const(op == Op::Ne)),
                }
            }
            let Some((kernel, size)) = eval::kernel(datatype, var, op) else {
                return Err(err(format!(
                    "`{}` cannot compare {} cells",
                    op.name(),
                    datatype.name()
                )));
            };
            if size.is_some_and(|s| s != value.len()) {
                return Err(err(format!(
                    "the value has {} bytes; `{field}` ({}) needs {}",
                    value.len(),
                    datatype.name(),
                    size.unwrap_or(0)
                )));
            }
            leaf(Test::Cmp { kernel, op, value })
        }
        Condition::Membership { data, offsets, .. } => {
            let mut set = HashSet::new();
            for (i, &start) in offsets.iter().enumerate() {
                let end = offsets
                    .get(i.saturating_add(1))
                    .copied()
                    .unwrap_or(data.len() as u64);
                let member = usize::try_from(start)
                    .ok()
                    .zip(usize::try_from(end).ok())
                    .and_then(|(s, e)| data.get(s..e))
                    .ok_or_else(|| err(format!("member offset {start}..{end} outside the data")))?;
                let member = match enumeration {
                    Some(e) => match index_of(e, member)? {
                        Some(idx) => idx,
                        None => continue,
                    },
                    None => member.to_vec(),
                };
                set.insert(member);
            }
            leaf(Test::Member {
                set,
                inside: op == Op::In,
            })
        }
        other => Err(err(format!("unknown condition node {other:?}"))),
    }
}

/// A leaf in a short readable form for error messages.
fn describe(c: &Condition) -> String {
    match c {
        Condition::Compare { field, op, value } => {
            format!("{field} {} <{} bytes>", op.name(), value.len())
        }
        Condition::Membership {
            field, op, offsets, ..
        } => format!("{field} {} <{} members>", op.name(), offsets.len()),
        Condition::Combination { op, children } => {
            format!("{} of {} conditions", op.name(), children.len())
        }
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests;
