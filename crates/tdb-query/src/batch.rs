//! Result buffers: one per field, in TileDB's layout (data, start offsets,
//! validity bytes; validity bits when a read asks for Arrow's).

use crate::column::{Column, Columns, VAR_NUM};
use crate::validity::Validity;
use tdb_format::Datatype;

/// One field's results.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FieldBuffer {
    /// The field's name.
    pub name: String,
    /// Its datatype.
    pub datatype: Datatype,
    /// Values per cell, or `u32::MAX` for var-length cells.
    pub cell_val_num: u32,
    /// Fixed-size cells back to back, or var-size cells' bytes.
    pub data: Vec<u8>,
    /// Var-size fields: each cell's start offset in `data`.
    pub offsets: Option<Vec<u64>>,
    /// Nullable fields: which cells are valid (one byte per cell, 0 =
    /// null, unless the read asked for bits).
    pub validity: Option<Validity>,
}

impl FieldBuffer {
    /// An empty buffer for a field of this shape.
    pub fn new(name: &str, datatype: Datatype, cell_val_num: u32, nullable: bool) -> Self {
        FieldBuffer {
            name: name.to_owned(),
            datatype,
            cell_val_num,
            data: Vec::new(),
            offsets: (cell_val_num == VAR_NUM).then(Vec::new),
            validity: nullable.then(|| Validity::Bytes(Vec::new())),
        }
    }

    /// Appends one cell: its bytes, and whether it is valid (ignored for
    /// fields that are not nullable).
    pub fn push(&mut self, cell: &[u8], valid: bool) {
        if let Some(o) = &mut self.offsets {
            o.push(self.data.len() as u64);
        }
        self.data.extend_from_slice(cell);
        if let Some(v) = &mut self.validity {
            v.push(valid);
        }
    }

    /// An empty buffer for the dimension or attribute `name` of `schema`.
    pub fn for_field(schema: &tdb_schema::ArraySchema, name: &str) -> crate::Result<Self> {
        Ok(crate::read::FieldInfo::resolve(schema, name)?.empty_buffer())
    }

    /// The buffer as a column view.
    pub fn column(&self) -> Column<'_> {
        let (fixed, var): (&[u8], &[u8]) = match self.offsets {
            Some(_) => (&[], &self.data),
            None => (&self.data, &[]),
        };
        Column {
            datatype: self.datatype,
            cell_val_num: self.cell_val_num,
            fixed,
            offsets: self.offsets.as_deref().unwrap_or(&[]),
            var,
            validity: self.validity.as_ref().map(Validity::view),
        }
    }

    /// A copy of cells `cells` (clamped to the buffer), offsets rebased:
    /// how a large write is cut into parts.
    pub fn slice(&self, cells: std::ops::Range<usize>) -> FieldBuffer {
        let mut out = FieldBuffer {
            data: Vec::new(),
            offsets: self.offsets.as_ref().map(|_| Vec::new()),
            validity: self.validity.as_ref().map(Validity::empty_like),
            ..FieldBuffer::new(&self.name, self.datatype, self.cell_val_num, false)
        };
        out.extend_from(self, cells);
        out
    }

    /// Appends cells `cells` of `other` (a buffer of the same shape;
    /// clamped to it).
    pub fn extend_from(&mut self, other: &FieldBuffer, cells: std::ops::Range<usize>) {
        let col = other.column();
        let end = cells.end.min(col.len());
        for i in cells.start.min(end)..end {
            self.push(col.cell(i), !col.is_null(i));
        }
    }

    /// Empties the buffer, keeping its allocations.
    pub fn clear(&mut self) {
        self.data.clear();
        if let Some(o) = &mut self.offsets {
            o.clear();
        }
        if let Some(v) = &mut self.validity {
            v.clear();
        }
    }

    /// Bytes held (data, offsets and validity).
    pub fn byte_len(&self) -> u64 {
        let offsets = self.offsets.as_ref().map_or(0, |o| o.len() as u64);
        (self.data.len() as u64)
            .saturating_add(offsets.saturating_mul(8))
            .saturating_add(self.validity.as_ref().map_or(0, Validity::byte_len) as u64)
    }
}

/// One batch of results: the same number of cells in every field.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Batch {
    /// Cells in this batch.
    pub num_cells: u64,
    /// One buffer per requested field, in the order requested.
    pub fields: Vec<FieldBuffer>,
}

impl Batch {
    /// The buffer of `name`.
    pub fn field(&self, name: &str) -> Option<&FieldBuffer> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Appends `other`'s cells (same fields, same order) to this batch.
    pub fn append(&mut self, other: &Batch) {
        if self.fields.is_empty() {
            *self = other.clone();
            return;
        }
        for (a, b) in self.fields.iter_mut().zip(&other.fields) {
            let base = a.data.len() as u64;
            a.data.extend_from_slice(&b.data);
            if let (Some(ao), Some(bo)) = (&mut a.offsets, &b.offsets) {
                ao.extend(bo.iter().map(|o| o.saturating_add(base)));
            }
            if let (Some(av), Some(bv)) = (&mut a.validity, &b.validity) {
                av.append(bv);
            }
        }
        self.num_cells = self.num_cells.saturating_add(other.num_cells);
    }
}

impl Columns for Batch {
    fn column(&self, field: &str) -> Option<Column<'_>> {
        self.field(field).map(FieldBuffer::column)
    }

    fn cell_num(&self) -> usize {
        self.num_cells as usize
    }
}
