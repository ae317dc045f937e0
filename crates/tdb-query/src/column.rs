//! A borrowed view of one field's cells: what a decoded tile holds and what
//! a result batch holds, so conditions and copies work on either.

use crate::validity::ValidityRef;
use tdb_format::Datatype;

pub use tdb_schema::VAR_NUM;

/// Bytes per fixed-size cell of a field of this shape (0 for var-size).
pub(crate) fn cell_size(datatype: Datatype, cell_val_num: u32) -> usize {
    if cell_val_num == VAR_NUM {
        0
    } else {
        datatype.cell_size(cell_val_num) as usize
    }
}

/// One field's cells, borrowed.
///
/// Fixed-size cells are `cell_size` bytes each, back to back in `fixed`.
/// Var-size cells are `var[offsets[i]..offsets[i + 1]]` (the last ends at
/// `var.len()`); `fixed` is then empty. `validity` says which cells of a
/// nullable field are valid (a tile's bytes, or a batch's bits when the
/// read asked for Arrow's layout).
#[derive(Debug, Clone, Copy)]
pub struct Column<'a> {
    /// The field's datatype.
    pub datatype: Datatype,
    /// Values per cell, or [`VAR_NUM`].
    pub cell_val_num: u32,
    /// Fixed-size cells.
    pub fixed: &'a [u8],
    /// Start offset of each var-size cell in `var`.
    pub offsets: &'a [u64],
    /// Var-size cells' bytes.
    pub var: &'a [u8],
    /// Nullable fields' validity.
    pub validity: Option<ValidityRef<'a>>,
}

impl<'a> Column<'a> {
    /// Whether cells are var-size.
    pub fn is_var(&self) -> bool {
        self.cell_val_num == VAR_NUM
    }

    /// Bytes per fixed-size cell (0 for var-size fields).
    pub fn cell_size(&self) -> usize {
        cell_size(self.datatype, self.cell_val_num)
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        if self.is_var() {
            self.offsets.len()
        } else {
            self.fixed.len().checked_div(self.cell_size()).unwrap_or(0)
        }
    }

    /// Whether there are no cells.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Cell `i`'s bytes. The view's invariants (checked when the tile was
    /// decoded) keep every cell inside its buffer; an index past the end
    /// gives an empty slice rather than a panic.
    pub fn cell(&self, i: usize) -> &'a [u8] {
        if self.is_var() {
            let start = self.offsets.get(i).copied().unwrap_or(0) as usize;
            let end = self
                .offsets
                .get(i.saturating_add(1))
                .map_or(self.var.len(), |&e| e as usize);
            self.var.get(start..end).unwrap_or(&[])
        } else {
            tdb_format::le::nth(self.fixed, i, self.cell_size()).unwrap_or(&[])
        }
    }

    /// Whether cell `i` is null (never for non-nullable fields).
    pub fn is_null(&self, i: usize) -> bool {
        self.validity.is_some_and(|v| i < v.len() && !v.is_valid(i))
    }
}

/// Columns by field name: a decoded tile's fields, or a batch's.
pub trait Columns {
    /// The column of `field`, if present.
    fn column(&self, field: &str) -> Option<Column<'_>>;
    /// The number of cells every column holds.
    fn cell_num(&self) -> usize;
    /// The column `== None` and `!= None` tests on `field` read: its own,
    /// but where a reader of TileDB's takes those tests' validity from
    /// other cells (see `read::emit`'s dense null checks).
    fn null_test_column(&self, field: &str) -> Option<Column<'_>> {
        self.column(field)
    }
}
