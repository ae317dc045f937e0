//! Aggregates over a read: count, sum, min, max, mean and null count, as
//! TileDB computes them (its `count` counts the rows of the read; dense
//! reads aggregate only cells some fragment wrote, and a tile the subarray
//! covers whole and one fragment wrote is answered from the fragment's tile
//! metadata, as TileDB answers it; dense reads still fetch and fold such a
//! tile, then use the metadata's answer, while sparse reads skip fetching
//! tiles their metadata answers).

mod accumulate;

pub(crate) use accumulate::{compare, Accumulator, FieldKind};

use crate::{QueryError, Result};
use tdb_format::Datatype;

/// One aggregate operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggregateOp {
    /// Rows of the read: for sparse arrays the result cells, for dense
    /// arrays every cell of the subarray (TileDB's `count`).
    Count,
    /// Sum of the valid cells, in `int64`, `uint64` or `float64`; saturates
    /// on overflow as TileDB does (undefined for nullable fields).
    Sum,
    /// Smallest valid cell.
    Min,
    /// Largest valid cell.
    Max,
    /// Sum over the count of valid cells, as `float64`.
    Mean,
    /// Null cells (nullable fields only).
    NullCount,
}

impl AggregateOp {
    /// Every operation, in TileDB-Py's order.
    pub const ALL: [AggregateOp; 6] = [
        AggregateOp::Count,
        AggregateOp::Sum,
        AggregateOp::Min,
        AggregateOp::Max,
        AggregateOp::Mean,
        AggregateOp::NullCount,
    ];

    /// The operation TileDB-Py names `name` (`count`, `sum`, `min`, `max`,
    /// `mean`, `null_count`).
    pub fn from_name(name: &str) -> Option<Self> {
        AggregateOp::ALL.into_iter().find(|o| o.name() == name)
    }

    /// TileDB-Py's name of the operation.
    pub fn name(self) -> &'static str {
        match self {
            AggregateOp::Count => "count",
            AggregateOp::Sum => "sum",
            AggregateOp::Min => "min",
            AggregateOp::Max => "max",
            AggregateOp::Mean => "mean",
            AggregateOp::NullCount => "null_count",
        }
    }

    /// Checks that the operation applies to a field of this type (TileDB's
    /// rules: sum and mean need numbers, min and max numbers or strings,
    /// null_count a nullable field) and says how to fold it.
    pub(crate) fn check(
        self,
        field: &str,
        datatype: Datatype,
        cell_val_num: u32,
        nullable: bool,
    ) -> Result<FieldKind> {
        let numeric = cell_val_num == 1 && (datatype.is_integer() || datatype.is_float());
        let string = matches!(
            datatype,
            Datatype::Char | Datatype::StringAscii | Datatype::StringUtf8
        );
        let ok = match self {
            AggregateOp::Count => true,
            AggregateOp::Sum | AggregateOp::Mean => numeric,
            AggregateOp::Min | AggregateOp::Max => numeric || string,
            AggregateOp::NullCount => nullable,
        };
        if !ok {
            let needs = match self {
                AggregateOp::NullCount => "a nullable field",
                AggregateOp::Min | AggregateOp::Max => "a numeric or string field",
                _ => "a numeric field of one value per cell",
            };
            return Err(QueryError::invalid(format!(
                "aggregate {} of `{field}`: it needs {needs}, and `{field}` is {}{}{}",
                self.name(),
                datatype.name(),
                match cell_val_num {
                    1 => String::new(),
                    crate::VAR_NUM => " (var-sized)".to_owned(),
                    n => format!(" ({n} values per cell)"),
                },
                if nullable { ", nullable" } else { "" },
            )));
        }
        Ok(FieldKind {
            datatype,
            nullable,
            bytewise: string,
        })
    }
}

/// An aggregate's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum AggregateValue {
    /// `count` and `null_count`.
    Count(u64),
    /// A sum of signed integers.
    Int(i64),
    /// A sum of unsigned integers.
    UInt(u64),
    /// A float sum, or a mean.
    Float(f64),
    /// A min or max: one cell's bytes in the field's datatype.
    Cell(Vec<u8>),
}

/// One aggregate of a read and its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct AggregateResult {
    /// The field aggregated.
    pub field: String,
    /// The operation.
    pub op: AggregateOp,
    /// `None` where TileDB's answer is undefined (null): min/max over no
    /// valid cell; sum/mean of a nullable field over no valid cell.
    pub value: Option<AggregateValue>,
}
