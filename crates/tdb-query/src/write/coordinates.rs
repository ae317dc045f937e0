//! Writes given by coordinates: what imports (CSV, JSON, Arrow) hand over,
//! every cell with its dimensions' values.

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
        // Per dimension: every cell's coordinate and their least and
        // greatest.
        let mut axes: Vec<(i128, i128, Vec<i128>)> = Vec::with_capacity(dims.len());
        for d in dims {
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
            let lo = values.iter().copied().min().unwrap_or(0);
            let hi = values.iter().copied().max().unwrap_or(0);
            axes.push((lo, hi, values));
        }
        // The box's extent along each dimension (coordinates are 64-bit, so
        // these fit), and the cells it holds.
        let extents: Vec<u128> = axes
            .iter()
            .map(|(lo, hi, _)| {
                hi.checked_sub(*lo)
                    .and_then(|x| u128::try_from(x).ok())
                    .map_or(u128::MAX, |x| x.saturating_add(1))
            })
            .collect();
        let volume = extents.iter().fold(1u128, |v, &e| v.saturating_mul(e));
        if rows == 0 || volume != rows as u128 {
            return Err(QueryError::Invalid(format!(
                "{rows} cells do not fill the box their coordinates span ({volume} cells): \
                 a dense write covers one whole box, each cell once"
            )));
        }
        // Row-major positions in the box: below `rows`, as the box holds
        // exactly that many cells.
        let position = |r: usize| -> Option<usize> {
            axes.iter()
                .zip(&extents)
                .try_fold(0usize, |at, ((lo, _, values), &e)| {
                    let offset = usize::try_from(values.get(r)?.checked_sub(*lo)?).ok()?;
                    at.checked_mul(usize::try_from(e).ok()?)?
                        .checked_add(offset)
                })
        };
        let mut slot = vec![usize::MAX; rows];
        for r in 0..rows {
            let taken = position(r).and_then(|at| slot.get_mut(at)).ok_or_else(|| {
                QueryError::invalid(format!("cell {r}: outside the box its coordinates span"))
            })?;
            if *taken != usize::MAX {
                let cell: Vec<String> = axes
                    .iter()
                    .filter_map(|(_, _, values)| values.get(r).map(i128::to_string))
                    .collect();
                return Err(QueryError::Invalid(format!(
                    "cell ({}) is given twice",
                    cell.join(", ")
                )));
            }
            *taken = r;
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
        for (i, (d, (lo, hi, _))) in dims.iter().zip(&axes).enumerate() {
            let size = d.datatype.size() as usize;
            let (lo, hi) = (lo.to_le_bytes(), hi.to_le_bytes());
            let (Some(l), Some(h)) = (lo.get(..size), hi.get(..size)) else {
                return Err(invalid(&d.name, "not an integer dimension".into()));
            };
            subarray.add_range(i, Range::from_bounds(l, h, false));
        }
        Ok(WriteSpec::new(arranged)
            .with_subarray(subarray)
            .with_layout(ResultLayout::RowMajor))
    }
}
