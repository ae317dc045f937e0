//! Writes given by coordinates: what imports (CSV, JSON, Arrow) hand over,
//! every cell with its dimensions' values.

// Not yet under the crate's no-panic lints (19 sites of cell, offset and
// buffer arithmetic): to rewrite as the condition parser and the rest were.
#![allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

use super::WriteSpec;
use crate::{FieldBuffer, QueryError, Result, ResultLayout, Subarray};
use tdb_format::{ArrayType, Scalar};
use tdb_schema::{ArraySchema, Range};

impl WriteSpec {
    /// The write of cells given with their coordinates (`fields` holds
    /// every dimension and every attribute). A sparse array takes them as
    /// they are, in any order. A dense array takes cells whose coordinates
    /// cover a box, each cell exactly once, in any order: the attributes are
    /// laid out row-major over that box, which becomes the subarray.
    pub fn from_coordinates(schema: &ArraySchema, fields: Vec<FieldBuffer>) -> Result<WriteSpec> {
        if schema.array_type == ArrayType::Sparse {
            return Ok(WriteSpec::new(fields));
        }
        let invalid = |field: &str, reason: String| QueryError::BadInput {
            field: field.to_owned(),
            reason,
        };
        let dims = &schema.domain.dimensions;
        let (coords, attrs): (Vec<_>, Vec<_>) = fields
            .into_iter()
            .partition(|f| schema.dimension(&f.name).is_some());
        let rows = coords.first().map_or(0, |c| c.column().len());
        let mut lo = vec![i128::MAX; dims.len()];
        let mut hi = vec![i128::MIN; dims.len()];
        let mut points = Vec::with_capacity(dims.len());
        for (i, d) in dims.iter().enumerate() {
            let c = coords.iter().find(|c| c.name == d.name).ok_or_else(|| {
                invalid(
                    &d.name,
                    "no values: a dense write by coordinates needs every dimension's".into(),
                )
            })?;
            let column = c.column();
            if column.len() != rows {
                return Err(invalid(
                    &d.name,
                    format!("{} cells, not {rows}", column.len()),
                ));
            }
            let values: Vec<i128> = (0..rows)
                .map(|r| match Scalar::decode(d.datatype, column.cell(r)) {
                    Some(Scalar::Int(v)) => Ok(i128::from(v)),
                    Some(Scalar::UInt(v)) => Ok(i128::from(v)),
                    _ => Err(invalid(
                        &d.name,
                        format!("cell {r}: not an integer coordinate"),
                    )),
                })
                .collect::<Result<_>>()?;
            for &v in &values {
                lo[i] = lo[i].min(v);
                hi[i] = hi[i].max(v);
            }
            points.push(values);
        }
        // Row-major positions in the box; the box must hold exactly the cells.
        let mut volume: u128 = 1;
        for i in 0..dims.len() {
            volume = volume.saturating_mul((hi[i] - lo[i] + 1).max(0) as u128);
        }
        if rows == 0 || volume != rows as u128 {
            return Err(QueryError::Invalid(format!(
                "{rows} cells do not fill the box their coordinates span ({volume} cells): \
                 a dense write covers one whole box, each cell once"
            )));
        }
        let mut slot = vec![usize::MAX; rows];
        for r in 0..rows {
            let mut at = 0usize;
            for i in 0..dims.len() {
                at = at * (hi[i] - lo[i] + 1) as usize + (points[i][r] - lo[i]) as usize;
            }
            if slot[at] != usize::MAX {
                let cell: Vec<String> = points.iter().map(|p| p[r].to_string()).collect();
                return Err(QueryError::Invalid(format!(
                    "cell ({}) is given twice",
                    cell.join(", ")
                )));
            }
            slot[at] = r;
        }
        let arranged = attrs
            .iter()
            .map(|a| {
                let column = a.column();
                if column.len() != rows {
                    return Err(invalid(
                        &a.name,
                        format!("{} cells, not {rows}", column.len()),
                    ));
                }
                let mut b =
                    FieldBuffer::new(&a.name, a.datatype, a.cell_val_num, a.validity.is_some());
                for &r in &slot {
                    b.push(column.cell(r), !column.is_null(r));
                }
                Ok(b)
            })
            .collect::<Result<Vec<_>>>()?;
        let mut subarray = Subarray::new(dims.len());
        for (i, d) in dims.iter().enumerate() {
            let size = d.datatype.size() as usize;
            let (l, h) = (&lo[i].to_le_bytes()[..size], &hi[i].to_le_bytes()[..size]);
            subarray.add_range(i, Range::from_bounds(l, h, false));
        }
        Ok(WriteSpec::new(arranged)
            .with_subarray(subarray)
            .with_layout(ResultLayout::RowMajor))
    }
}
