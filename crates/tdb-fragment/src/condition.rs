//! Delete (`.del`) and update (`.upd`) commits: one generic tile holding a
//! serialized condition tree (TileDB's
//! `deletes_and_updates::serialization`), followed for updates by the
//! values to set.
//!
//! Node layout: `u8` node type (0 expression, 1 value). A value node is
//! `u8` op, `u32` field name size, name, `u64` value size, value, and for
//! IN / NOT_IN `u64` offsets size and the `u64` offsets. An expression node
//! is `u8` combination op and `u64` child count, then the children.

use crate::tile_file::{read_tile_file, write_tile_file};
use crate::{FragmentError, Result};
use tdb_format::{le, FormatVersion, QueryConditionCombinationOp, QueryConditionOp};

const EXPRESSION: u8 = 0;
const VALUE: u8 = 1;

/// A condition tree, as TileDB serializes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Condition {
    /// `field <op> value` for LT..NE (and TileDB's internal ALWAYS_TRUE /
    /// ALWAYS_FALSE, which its reader accepts too). A null test (`field == None` /
    /// `!= None`) is written by TileDB as an EQ/NE node with an empty value
    /// (see [`Condition::is_null_test`]).
    Compare {
        /// The attribute or dimension.
        field: String,
        /// Any op but IN / NOT_IN.
        op: QueryConditionOp,
        /// The value's raw bytes.
        value: Vec<u8>,
    },
    /// `field IN (...)` / `NOT IN`: the members' bytes concatenated and the
    /// `u64` start offset of each member.
    Membership {
        /// The attribute or dimension.
        field: String,
        /// IN or NOT_IN.
        op: QueryConditionOp,
        /// All members' bytes.
        data: Vec<u8>,
        /// Each member's start in `data`.
        offsets: Vec<u64>,
    },
    /// AND / OR of the children, or NOT of its (one) child.
    Combination {
        /// AND, OR or NOT.
        op: QueryConditionCombinationOp,
        /// The operands.
        children: Vec<Condition>,
    },
}

impl Condition {
    /// Whether this is a null test: EQ/NE with an empty value, which is how
    /// TileDB's query condition stores `field == None` and writes it.
    pub fn is_null_test(&self) -> bool {
        matches!(self, Condition::Compare { op: QueryConditionOp::Eq | QueryConditionOp::Ne, value, .. } if value.is_empty())
    }

    /// Parses a serialized condition from the front of `bytes` (already
    /// unfiltered), returning it and the bytes after it.
    pub fn parse_prefix<'a>(file: &str, bytes: &'a [u8]) -> Result<(Condition, &'a [u8])> {
        // Depth-bounded so hostile input cannot overflow the stack.
        node(file, bytes, 0)
    }

    /// Parses a whole serialized condition (nothing may follow it).
    pub fn parse(file: &str, bytes: &[u8]) -> Result<Condition> {
        let (c, rest) = Condition::parse_prefix(file, bytes)?;
        if !rest.is_empty() {
            return Err(FragmentError::invalid(
                file,
                "condition",
                format!("{} bytes after the condition tree", rest.len()),
            ));
        }
        Ok(c)
    }

    /// Appends the serialized condition to `out` (the mirror of
    /// [`Condition::parse_prefix`]).
    pub fn write(&self, file: &str, out: &mut Vec<u8>) -> Result<()> {
        match self {
            Condition::Compare { field, op, value } => {
                le::put_u8(out, VALUE);
                le::put_u8(out, op.code());
                put_field(file, out, field)?;
                le::put_bytes_u64(out, value);
            }
            Condition::Membership {
                field,
                op,
                data,
                offsets,
            } => {
                le::put_u8(out, VALUE);
                le::put_u8(out, op.code());
                put_field(file, out, field)?;
                le::put_bytes_u64(out, data);
                le::put_u64(out, (offsets.len() as u64).saturating_mul(8));
                for o in offsets {
                    le::put_u64(out, *o);
                }
            }
            Condition::Combination { op, children } => {
                le::put_u8(out, EXPRESSION);
                le::put_u8(out, op.code());
                le::put_u64(out, children.len() as u64);
                for c in children {
                    c.write(file, out)?;
                }
            }
        }
        Ok(())
    }
}

fn put_field(file: &str, out: &mut Vec<u8>, field: &str) -> Result<()> {
    le::put_bytes_u32(out, "field name", field.as_bytes())
        .map_err(|e| FragmentError::format(file, "condition field name", e))
}

/// Deeper trees than this are refused (TileDB builds them from user
/// expressions; nothing real comes near).
const MAX_DEPTH: usize = 256;

fn fmt<'a>(file: &'a str, what: &str) -> impl Fn(tdb_format::FormatError) -> FragmentError + 'a {
    let what = what.to_owned();
    move |e| FragmentError::format(file, what.clone(), e)
}

fn node<'a>(file: &str, input: &'a [u8], depth: usize) -> Result<(Condition, &'a [u8])> {
    if depth > MAX_DEPTH {
        return Err(FragmentError::invalid(
            file,
            "condition",
            format!("tree deeper than {MAX_DEPTH}"),
        ));
    }
    let (kind, rest) =
        le::run(le::u8("condition node type"), input).map_err(fmt(file, "condition"))?;
    match kind {
        VALUE => {
            let (code, rest) =
                le::run(le::u8("condition op"), rest).map_err(fmt(file, "condition"))?;
            let op = QueryConditionOp::from_code(code).map_err(fmt(file, "condition op"))?;
            let (name, rest) = le::run(le::bytes_u32("condition field name"), rest)
                .map_err(fmt(file, "condition"))?;
            let field = String::from_utf8(name.to_vec())
                .map_err(|_| FragmentError::invalid(file, "condition field name", "not UTF-8"))?;
            let (value, rest) =
                le::run(le::bytes_u64("condition value"), rest).map_err(fmt(file, "condition"))?;
            if !matches!(op, QueryConditionOp::In | QueryConditionOp::NotIn) {
                let value = value.to_vec();
                return Ok((Condition::Compare { field, op, value }, rest));
            }
            let (raw, rest) = le::run(le::bytes_u64("condition offsets"), rest)
                .map_err(fmt(file, "condition"))?;
            if raw.len() % 8 != 0 {
                return Err(FragmentError::invalid(
                    file,
                    "condition offsets",
                    format!("{} bytes is not a multiple of 8", raw.len()),
                ));
            }
            let offsets = le::u64_values(raw).collect();
            let data = value.to_vec();
            Ok((
                Condition::Membership {
                    field,
                    op,
                    data,
                    offsets,
                },
                rest,
            ))
        }
        EXPRESSION => {
            let (code, rest) = le::run(le::u8("condition combination op"), rest)
                .map_err(fmt(file, "condition"))?;
            let op = QueryConditionCombinationOp::from_code(code)
                .map_err(fmt(file, "condition combination op"))?;
            let (n, mut rest) =
                le::run(le::u64("condition child count"), rest).map_err(fmt(file, "condition"))?;
            // Each child takes at least one byte: refuse counts the input
            // cannot hold before allocating.
            if n > rest.len() as u64 {
                return Err(FragmentError::invalid(
                    file,
                    "condition child count",
                    format!("{n} children in {} bytes", rest.len()),
                ));
            }
            let mut children = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let (c, r) = node(file, rest, depth.saturating_add(1))?;
                children.push(c);
                rest = r;
            }
            Ok((Condition::Combination { op, children }, rest))
        }
        other => Err(FragmentError::invalid(
            file,
            "condition node type",
            format!("unknown node type {other}"),
        )),
    }
}

/// One value an update commit sets.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UpdateValue {
    /// The attribute.
    pub field: String,
    /// The new value's raw bytes.
    pub value: Vec<u8>,
}

impl UpdateValue {
    /// `field = value`.
    pub fn new(field: impl Into<String>, value: Vec<u8>) -> Self {
        UpdateValue {
            field: field.into(),
            value,
        }
    }
}

/// A delete commit. TileDB stores the *negation* of the delete's
/// condition (`deletes_and_updates.cc` serializes `negated_condition()`):
/// cells written before the commit's timestamp survive only where
/// `condition` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeleteCommit {
    /// The stored condition: the cells that are kept.
    pub condition: Condition,
}

impl DeleteCommit {
    /// A commit storing `condition` (the negation of what it deletes).
    pub fn new(condition: Condition) -> Self {
        DeleteCommit { condition }
    }

    /// Parses a `.del` file's bytes (or the bytes a `.con` file embeds);
    /// `key` for encrypted arrays.
    pub fn parse(file: &str, bytes: &[u8], key: Option<&[u8; 32]>) -> Result<Self> {
        let data = read_tile_file(file, "delete condition", bytes, key)?;
        DeleteCommit::deserialize(file, &data)
    }

    /// Parses the generic tile's contents (the mirror of
    /// [`DeleteCommit::serialize`]).
    pub fn deserialize(file: &str, data: &[u8]) -> Result<Self> {
        Ok(DeleteCommit {
            condition: Condition::parse(file, data)?,
        })
    }

    /// The generic tile's contents (before GZIP/encryption): the
    /// serialized condition.
    pub fn serialize(&self, file: &str) -> Result<Vec<u8>> {
        let mut data = Vec::new();
        self.condition.write(file, &mut data)?;
        Ok(data)
    }

    /// The `.del` file's bytes, as TileDB writes them in `version` (GZIP
    /// level 1, then AES-256-GCM with a key).
    pub fn write(
        &self,
        file: &str,
        version: FormatVersion,
        key: Option<&[u8; 32]>,
    ) -> Result<Vec<u8>> {
        write_tile_file(
            file,
            "delete condition",
            version,
            &self.serialize(file)?,
            key,
        )
    }
}

/// An update commit. As for deletes, TileDB stores the negation of the
/// update's condition: cells written before the commit where `condition`
/// does *not* hold get `values`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UpdateCommit {
    /// The stored (negated) condition.
    pub condition: Condition,
    /// What they are set to.
    pub values: Vec<UpdateValue>,
}

impl UpdateCommit {
    /// An update of the cells matching `condition`.
    pub fn new(condition: Condition, values: Vec<UpdateValue>) -> Self {
        UpdateCommit { condition, values }
    }

    /// Parses an `.upd` file's bytes; `key` for encrypted arrays.
    pub fn parse(file: &str, bytes: &[u8], key: Option<&[u8; 32]>) -> Result<Self> {
        let data = read_tile_file(file, "update condition", bytes, key)?;
        UpdateCommit::deserialize(file, &data)
    }

    /// Parses the generic tile's contents (the mirror of
    /// [`UpdateCommit::serialize`]).
    pub fn deserialize(file: &str, data: &[u8]) -> Result<Self> {
        let (condition, rest) = Condition::parse_prefix(file, data)?;
        let (n, mut rest) =
            le::run(le::u64("update value count"), rest).map_err(fmt(file, "update values"))?;
        // Each value takes at least 16 bytes (two sizes).
        if n > rest.len() as u64 / 16 {
            return Err(FragmentError::invalid(
                file,
                "update value count",
                format!("{n} values in {} bytes", rest.len()),
            ));
        }
        let mut values = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let (name, r) = le::run(le::bytes_u64("update field name"), rest)
                .map_err(fmt(file, "update values"))?;
            let (value, r) =
                le::run(le::bytes_u64("update value"), r).map_err(fmt(file, "update values"))?;
            let field = String::from_utf8(name.to_vec())
                .map_err(|_| FragmentError::invalid(file, "update field name", "not UTF-8"))?;
            values.push(UpdateValue::new(field, value.to_vec()));
            rest = r;
        }
        if !rest.is_empty() {
            return Err(FragmentError::invalid(
                file,
                "update values",
                format!("{} bytes after the last value", rest.len()),
            ));
        }
        Ok(UpdateCommit { condition, values })
    }

    /// The generic tile's contents: the serialized condition, then the
    /// values.
    pub fn serialize(&self, file: &str) -> Result<Vec<u8>> {
        let mut data = Vec::new();
        self.condition.write(file, &mut data)?;
        le::put_u64(&mut data, self.values.len() as u64);
        for v in &self.values {
            le::put_bytes_u64(&mut data, v.field.as_bytes());
            le::put_bytes_u64(&mut data, &v.value);
        }
        Ok(data)
    }

    /// The `.upd` file's bytes, as TileDB writes them in `version`.
    pub fn write(
        &self,
        file: &str,
        version: FormatVersion,
        key: Option<&[u8; 32]>,
    ) -> Result<Vec<u8>> {
        write_tile_file(
            file,
            "update condition",
            version,
            &self.serialize(file)?,
            key,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Condition {
        Condition::Combination {
            op: QueryConditionCombinationOp::And,
            children: vec![
                Condition::Compare {
                    field: "a".into(),
                    op: QueryConditionOp::Gt,
                    value: 5i32.to_le_bytes().to_vec(),
                },
                Condition::Combination {
                    op: QueryConditionCombinationOp::Not,
                    children: vec![Condition::Membership {
                        field: "s".into(),
                        op: QueryConditionOp::In,
                        data: b"redblue".to_vec(),
                        offsets: vec![0, 3],
                    }],
                },
                Condition::Compare {
                    field: "n".into(),
                    op: QueryConditionOp::Eq,
                    value: vec![],
                },
            ],
        }
    }

    #[test]
    fn every_node_kind_round_trips() {
        let mut bytes = Vec::new();
        sample().write("t", &mut bytes).unwrap();
        let back = Condition::parse("t", &bytes).unwrap();
        assert_eq!(back, sample());
        let Condition::Combination { children, .. } = &back else {
            panic!()
        };
        assert!(children[2].is_null_test());
        assert!(!children[0].is_null_test());
    }

    #[test]
    fn cut_or_hostile_bytes_are_errors() {
        let mut bytes = Vec::new();
        sample().write("t", &mut bytes).unwrap();
        for n in 0..bytes.len() {
            assert!(Condition::parse("t", &bytes[..n]).is_err(), "cut at {n}");
        }
        // A child count far beyond the input.
        let mut b = vec![EXPRESSION, 0];
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(Condition::parse("t", &b).is_err());
        // Unknown node type and op.
        assert!(Condition::parse("t", &[7]).is_err());
        assert!(Condition::parse("t", &[VALUE, 9]).is_err());
        // Deep nesting is refused, not a stack overflow.
        let mut deep = Vec::new();
        for _ in 0..10_000 {
            deep.extend_from_slice(&[EXPRESSION, 2]);
            deep.extend_from_slice(&1u64.to_le_bytes());
        }
        assert!(Condition::parse("t", &deep).is_err());
    }

    #[test]
    fn update_commit_round_trips() {
        let u = UpdateCommit::new(sample(), vec![UpdateValue::new("a", vec![1, 0, 0, 0])]);
        let bytes = u.write("x.upd", FormatVersion::WRITTEN, None).unwrap();
        assert_eq!(UpdateCommit::parse("x.upd", &bytes, None).unwrap(), u);
        let key = [7u8; 32];
        let enc = u
            .write("x.upd", FormatVersion::WRITTEN, Some(&key))
            .unwrap();
        assert_eq!(UpdateCommit::parse("x.upd", &enc, Some(&key)).unwrap(), u);
    }
}
