//! A write's cells checked against the schema before anything is written:
//! every field present once with the schema's type, the same number of
//! cells in each, offsets increasing and inside the data, validity exactly
//! for nullable fields, coordinates inside the domain.

use crate::batch::FieldBuffer;
use crate::column::{cell_size, Column, VAR_NUM};
use crate::spec::show_value;
use crate::{QueryError, Result};
use tdb_format::{ArrayType, Datatype};
use tdb_fragment::fragment_metadata::Field;
use tdb_index::RangeOps;
use tdb_schema::ArraySchema;

/// One checked input field: its buffer, which footer field it fills
/// (an attribute or a dimension) and its cells as a column.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InField<'a> {
    pub buf: &'a FieldBuffer,
    pub field: Field,
    pub col: Column<'a>,
}

impl<'a> InField<'a> {
    /// Cell `i`'s bytes (the caller checked `i` against the cell count).
    pub fn cell(&self, i: usize) -> &'a [u8] {
        self.col.cell(i)
    }

    /// `n` fixed-size cells from cell `i` on, back to back (the caller
    /// checked them against the cell count).
    pub fn cells(&self, i: usize, n: usize) -> &'a [u8] {
        let size = self.col.cell_size();
        let (start, end) = (
            i.saturating_mul(size),
            i.saturating_add(n).saturating_mul(size),
        );
        self.col.fixed.get(start..end).unwrap_or_default()
    }

    /// Cell `i`'s validity byte (1 for non-nullable fields).
    pub fn valid(&self, i: usize) -> u8 {
        u8::from(!self.col.is_null(i))
    }

    /// Bytes per cell; `None` for var-size fields.
    pub fn cell_size(&self) -> Option<usize> {
        (!self.col.is_var()).then(|| self.col.cell_size())
    }
}

/// A write's fields in schema order (attributes, then dimensions for
/// sparse writes) and their common cell count.
#[derive(Debug)]
pub(crate) struct Input<'a> {
    pub fields: Vec<InField<'a>>,
    pub cells: usize,
}

impl<'a> Input<'a> {
    /// The buffer of dimension `d`.
    pub fn dim(&self, d: usize) -> Option<&InField<'a>> {
        self.fields.iter().find(|f| f.field == Field::Dimension(d))
    }

    /// Whether the cells carry their own timestamps.
    pub fn has_timestamps(&self) -> bool {
        self.fields.iter().any(|f| f.field == Field::Timestamps)
    }
}

/// Checks `buffers` against `schema` for a write (sparse writes need every
/// dimension, dense ones take none).
pub(crate) fn check<'a>(schema: &ArraySchema, buffers: &'a [FieldBuffer]) -> Result<Input<'a>> {
    let dense = schema.array_type == ArrayType::Dense;
    let mut fields: Vec<InField<'a>> = Vec::new();
    for buf in buffers {
        let name = buf.name.as_str();
        let (field, datatype, cell_val_num, nullable) = if let Some((i, a)) = schema
            .attributes
            .iter()
            .enumerate()
            .find(|(_, a)| a.name == name)
        {
            (Field::Attribute(i), a.datatype, a.cell_val_num, a.nullable)
        } else if let Some((i, d)) =
            (schema.domain.dimensions.iter().enumerate()).find(|(_, d)| d.name == name)
        {
            if dense {
                return Err(QueryError::bad_input(
                    name,
                    "a dense write takes no coordinates: give the subarray instead",
                ));
            }
            (Field::Dimension(i), d.datatype, d.cell_val_num, false)
        } else if let Some(f) = Field::per_cell(name).filter(|_| !dense) {
            // Per-cell timestamps and delete metadata, as fragments
            // consolidated with timestamps and deletes keep them.
            (f, Datatype::UInt64, 1, false)
        } else {
            return Err(QueryError::UnknownField {
                name: name.to_owned(),
                known: schema.field_names(),
            });
        };
        if fields.iter().any(|f| f.field == field) {
            return Err(QueryError::bad_input(name, "given twice"));
        }
        if buf.datatype != datatype || buf.cell_val_num != cell_val_num {
            return Err(QueryError::bad_input(
                name,
                format!(
                    "cells of {} × {} given, the schema has {} × {}",
                    buf.datatype.name(),
                    shown(buf.cell_val_num),
                    datatype.name(),
                    shown(cell_val_num)
                ),
            ));
        }
        let cell_size = (cell_val_num != VAR_NUM).then(|| cell_size(datatype, cell_val_num));
        match (&buf.validity, nullable) {
            (Some(_), false) => {
                return Err(QueryError::bad_input(
                    name,
                    "validity given for a field that is not nullable (no cell may be null)",
                ))
            }
            (None, true) => {
                return Err(QueryError::bad_input(
                    name,
                    "the field is nullable: give one validity byte per cell",
                ))
            }
            _ => {}
        }
        let cells = match (cell_size, &buf.offsets) {
            (Some(0), _) => return Err(QueryError::bad_input(name, "cells of zero bytes")),
            (Some(n), None) => match buf.data.len().checked_rem(n) {
                Some(0) => buf.data.len().checked_div(n).unwrap_or(0),
                _ => {
                    return Err(QueryError::bad_input(
                        name,
                        format!(
                            "{} bytes is not a whole number of {n}-byte cells",
                            buf.data.len()
                        ),
                    ))
                }
            },
            (Some(_), Some(_)) => {
                return Err(QueryError::bad_input(
                    name,
                    "offsets given for fixed-size cells",
                ))
            }
            (None, None) => return Err(QueryError::bad_input(name, "var-size cells need offsets")),
            (None, Some(o)) => {
                check_offsets(name, o, buf.data.len() as u64, datatype.size())?;
                o.len()
            }
        };
        if let Some(v) = &buf.validity {
            if v.len() != cells {
                return Err(QueryError::bad_input(
                    name,
                    format!("{} validity bytes for {cells} cells", v.len()),
                ));
            }
        }
        fields.push(InField {
            buf,
            field,
            col: buf.column(),
        });
    }
    for (i, a) in schema.attributes.iter().enumerate() {
        if !fields.iter().any(|f| f.field == Field::Attribute(i)) {
            return Err(QueryError::bad_input(
                &a.name,
                "every attribute must be written",
            ));
        }
    }
    if !dense {
        for (i, d) in schema.domain.dimensions.iter().enumerate() {
            if !fields.iter().any(|f| f.field == Field::Dimension(i)) {
                return Err(QueryError::bad_input(
                    &d.name,
                    "a sparse write needs every dimension's coordinates",
                ));
            }
        }
    }
    fields.sort_by_key(|f| match f.field {
        Field::Attribute(i) => (0, i),
        Field::Dimension(i) => (1, i),
        _ => (2, 0),
    });
    let counts = |f: &InField<'_>| f.col.len();
    let cells = fields.first().map_or(0, counts);
    if let Some(f) = fields.iter().find(|f| counts(f) != cells) {
        return Err(QueryError::bad_input(
            &f.buf.name,
            format!(
                "{} cells, but `{}` has {cells}: every field needs the same number",
                counts(f),
                fields.first().map_or("", |f| f.buf.name.as_str())
            ),
        ));
    }
    let input = Input { fields, cells };
    if !dense {
        check_coordinates(schema, &input)?;
    }
    Ok(input)
}

fn shown(cell_val_num: u32) -> String {
    if cell_val_num == VAR_NUM {
        "var".into()
    } else {
        cell_val_num.to_string()
    }
}

/// TileDB's rule: offsets never decrease and stay inside the data; every
/// var cell is a whole number of values.
fn check_offsets(name: &str, offsets: &[u64], data_len: u64, value_size: u64) -> Result<()> {
    // Whether `bytes` (from `from` to `to`) are not whole values.
    let partial = |from: u64, to: u64| {
        value_size > 1 && to.saturating_sub(from).checked_rem(value_size) != Some(0)
    };
    let mut prev = 0u64;
    for (i, &o) in offsets.iter().enumerate() {
        let before = i.saturating_sub(1);
        if o < prev {
            return Err(QueryError::bad_input(
                name,
                format!(
                    "offset {i} ({o}) is below offset {before} ({prev}): offsets must not decrease"
                ),
            ));
        }
        if o > data_len {
            return Err(QueryError::bad_input(
                name,
                format!("offset {i} ({o}) is beyond the {data_len} data bytes"),
            ));
        }
        if i > 0 && partial(prev, o) {
            return Err(QueryError::bad_input(
                name,
                format!("cell {before} is not a whole number of {value_size}-byte values"),
            ));
        }
        prev = o;
    }
    if !offsets.is_empty() && partial(prev, data_len) {
        return Err(QueryError::bad_input(
            name,
            "the last cell is not a whole number of values",
        ));
    }
    Ok(())
}

/// Every coordinate inside its dimension's domain (and the current domain
/// where the schema has one). Fixed-size coordinates are checked a block
/// at a time as numbers (cell by cell through the datatype was a sixth of
/// a 4M-cell write).
fn check_coordinates(schema: &ArraySchema, input: &Input<'_>) -> Result<()> {
    /// Cells a block.
    const BLOCK: usize = 4096;
    /// Cells a job of the pool.
    const RUN: usize = 16 * BLOCK;
    let current = schema.current_domain.ranges.as_deref().unwrap_or(&[]);
    for (d, dim) in schema.domain.dimensions.iter().enumerate() {
        let Some(f) = input.dim(d) else { continue };
        let ops = RangeOps::new(dim, d)?;
        let mut ranges: Vec<(&str, tdb_schema::Range)> = Vec::new();
        if let Some((lo, hi)) = dim.bounds() {
            ranges.push(("domain", tdb_schema::Range::from_bounds(lo, hi, false)));
        }
        if let Some(r) = current.get(d) {
            ranges.push(("current domain", r.clone()));
        }
        let outside = |i: usize| {
            let v = f.cell(i);
            let (what, r) = ranges.iter().find(|(_, r)| !ops.contains(r, v))?;
            let (lo, hi) = r.bounds();
            Some(QueryError::bad_input(
                &dim.name,
                format!(
                    "cell {i}'s coordinate {} is outside the {what} [{}, {}]",
                    show_value(dim.datatype, v),
                    show_value(dim.datatype, lo),
                    show_value(dim.datatype, hi)
                ),
            ))
        };
        // Runs of blocks on the workers; the first cell outside is the
        // one in the earliest run that has one.
        let runs: Vec<usize> = (0..input.cells).step_by(RUN).collect();
        let check_run = |inside: &mut Vec<bool>, &run: &usize| {
            let end = run.saturating_add(RUN).min(input.cells);
            for start in (run..end).step_by(BLOCK) {
                let n = BLOCK.min(end.saturating_sub(start));
                inside.resize(BLOCK, true);
                let block = inside.get_mut(..n).unwrap_or_default();
                block.fill(true);
                let values = f.cells(start, n);
                let by_block = (ranges.iter())
                    .all(|(_, r)| ops.retain_within(std::slice::from_ref(r), values, block));
                // Where the block could not be checked as numbers
                // (var-size strings), every cell is a suspect.
                let suspect = |k: &usize| !by_block || block.get(*k) == Some(&false);
                let mut cells = (0..n).filter(suspect).map(|k| start.saturating_add(k));
                if let Some(e) = cells.find_map(outside) {
                    return Err(e);
                }
            }
            Ok(())
        };
        crate::pool::map_all(&runs, crate::threads(), Vec::new, check_run)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_offsets;

    fn refused(offsets: &[u64], data_len: u64, value_size: u64) -> String {
        check_offsets("v", offsets, data_len, value_size)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn offsets_must_rise_stay_inside_and_cut_whole_values() {
        assert!(check_offsets("v", &[], 0, 4).is_ok());
        assert!(check_offsets("v", &[0, 0, 8, 12], 16, 4).is_ok());
        assert!(check_offsets("v", &[0, 3, 3], 5, 1).is_ok());
        let e = refused(&[0, 8, 4], 16, 4);
        assert!(e.contains("offset 2 (4) is below offset 1 (8)"), "{e}");
        let e = refused(&[0, 20], 16, 4);
        assert!(
            e.contains("offset 1 (20) is beyond the 16 data bytes"),
            "{e}"
        );
        let e = refused(&[0, 6], 16, 4);
        assert!(
            e.contains("cell 0 is not a whole number of 4-byte values"),
            "{e}"
        );
        let e = refused(&[0, 8], 18, 4);
        assert!(e.contains("the last cell is not a whole number"), "{e}");
    }
}
