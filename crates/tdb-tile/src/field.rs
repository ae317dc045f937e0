//! A field's tile whole: its parts (fixed cells or offsets, var data,
//! validity) checked against the cells the fragment metadata gives the
//! tile, before decoding (each part's chunks must promise what the tile
//! holds) and after (one offset per cell, rising, inside the var data;
//! fixed cells and validity bytes one per cell). Reads and `tdb verify`
//! decode through these checks, so both accept the same tiles.

use crate::{unfiltered_size, FilteredChunk, Result, TileData, TileError, TileFilters};
use tdb_filters::Workspace;
use tdb_format::DataPart;

/// What a field's tile holds, as its fragment metadata says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileShape {
    /// Cells in the tile.
    pub cells: u64,
    /// Bytes per cell of a fixed-size field; `None` for a var-size one.
    pub cell_size: Option<u64>,
    /// The var part's unfiltered size, where the metadata records it.
    pub var_size: Option<u64>,
    /// Pre-v5 zipped coordinates: the fixed part holds every dimension's
    /// values, sized by the dimensions, not by this shape.
    pub zipped: bool,
}

impl TileShape {
    /// The bytes part `kind` unfilters to, where the shape says
    /// (`offsets_inside`: the var part's filters keep the offsets, and the
    /// offsets part is empty).
    pub fn part_size(&self, kind: DataPart, offsets_inside: bool) -> Option<u64> {
        match kind {
            DataPart::Validity => Some(self.cells),
            DataPart::Fixed if self.zipped => None,
            DataPart::Fixed => match self.cell_size {
                Some(size) => self.cells.checked_mul(size),
                None if offsets_inside => Some(0),
                None => self.cells.checked_mul(8),
            },
            DataPart::Var => self.var_size,
        }
    }

    /// What `chunks` (of part `kind`) unfilter to, checked against what
    /// the tile holds before anything is decoded.
    pub fn check_chunks(
        &self,
        location: &str,
        kind: DataPart,
        offsets_inside: bool,
        chunks: &[FilteredChunk<'_>],
    ) -> Result<u64> {
        let size = unfiltered_size(chunks);
        match self.part_size(kind, offsets_inside) {
            Some(holds) if holds != size => Err(mismatch(
                location,
                format!("its chunks promise {size} bytes; the tile holds {holds}"),
            )),
            _ => Ok(size),
        }
    }
}

/// A field's tile, its parts unfiltered and checked against each other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldTile {
    /// Fixed-size cells (empty for var-size fields).
    pub fixed: Vec<u8>,
    /// One offset per cell into `var` (var-size fields).
    pub offsets: Vec<u64>,
    /// Var-size cells' bytes.
    pub var: Vec<u8>,
    /// One byte per cell of a nullable field.
    pub validity: Option<Vec<u8>>,
}

impl FieldTile {
    /// Puts a tile's unfiltered parts where readers look for them (the
    /// offsets out of the offsets part, or out of the var part where its
    /// filters keep them) and checks them against `shape`.
    pub fn assemble(
        location: &str,
        parts: impl IntoIterator<Item = (DataPart, TileData)>,
        offsets_inside: bool,
        shape: &TileShape,
    ) -> Result<Self> {
        let cells = shape.cells;
        let mut out = FieldTile::default();
        let mut has_var = false;
        for (kind, data) in parts {
            match kind {
                DataPart::Fixed => out.fixed = data.data,
                DataPart::Var => {
                    has_var = true;
                    out.offsets = data.offsets;
                    out.var = data.data;
                }
                DataPart::Validity => out.validity = Some(data.data),
            }
        }
        if has_var {
            if offsets_inside {
                if !out.fixed.is_empty() {
                    return Err(mismatch(
                        location,
                        "an offsets tile where the offsets live in the data tile".into(),
                    ));
                }
            } else {
                if out.fixed.len() % 8 != 0 {
                    let n = out.fixed.len();
                    return Err(mismatch(location, format!("{n} bytes of offsets")));
                }
                out.offsets = tdb_format::le::u64_values(&out.fixed).collect();
                out.fixed = Vec::new();
            }
            if out.offsets.len() as u64 != cells {
                let n = out.offsets.len();
                return Err(mismatch(location, format!("{n} offsets for {cells} cells")));
            }
            let mut prev = 0;
            for &o in &out.offsets {
                if o < prev || o > out.var.len() as u64 {
                    let n = out.var.len();
                    return Err(mismatch(
                        location,
                        format!("offset {o} out of order or past the {n}-byte var tile"),
                    ));
                }
                prev = o;
            }
        } else if let Some(size) = shape.cell_size.filter(|_| !shape.zipped) {
            let want = cells.saturating_mul(size);
            if out.fixed.len() as u64 != want {
                let n = out.fixed.len();
                return Err(mismatch(
                    location,
                    format!("{n} bytes unfiltered, {cells} cells of {size} bytes need {want}"),
                ));
            }
        }
        if let Some(v) = &out.validity {
            if v.len() as u64 != cells {
                let n = v.len();
                return Err(mismatch(
                    location,
                    format!("{n} validity bytes for {cells} cells"),
                ));
            }
        }
        Ok(out)
    }

    /// Decodes a field's tile whole, on the calling thread: each part's
    /// chunks checked against `shape`, unfiltered, and the parts
    /// assembled. `parts`: each part's kind, filters, name for errors and
    /// filtered bytes, in the fragment's part order. (A read runs the same
    /// steps with its parts' chunks in runs on its pool.)
    pub fn decode(
        parts: &[(DataPart, TileFilters<'_>, &str, &[u8])],
        shape: &TileShape,
        ws: &mut Workspace,
    ) -> Result<Self> {
        let offsets_inside = parts
            .iter()
            .find(|p| p.0 == DataPart::Var)
            .is_some_and(|p| p.1.offsets_inside());
        let mut decoded = Vec::with_capacity(parts.len());
        for (kind, filters, location, bytes) in parts {
            let chunks = filters.chunks(location, bytes)?;
            shape.check_chunks(location, *kind, offsets_inside, &chunks)?;
            let mut data = TileData::default();
            filters.unfilter_into(location, ws, &chunks, 0, *kind == DataPart::Var, &mut data)?;
            decoded.push((*kind, data));
        }
        let location = parts.first().map_or("", |p| p.2);
        FieldTile::assemble(location, decoded, offsets_inside, shape)
    }
}

/// The error for a tile whose parts disagree with its shape.
fn mismatch(location: &str, reason: String) -> TileError {
    TileError::Shape {
        location: location.to_owned(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(bytes: &[u8]) -> TileData {
        TileData {
            data: bytes.to_vec(),
            offsets: Vec::new(),
        }
    }

    fn offsets(o: &[u64]) -> TileData {
        data(&o.iter().flat_map(|o| o.to_le_bytes()).collect::<Vec<u8>>())
    }

    fn shape(cells: u64, cell_size: Option<u64>) -> TileShape {
        TileShape {
            cells,
            cell_size,
            var_size: None,
            zipped: false,
        }
    }

    fn refused(parts: Vec<(DataPart, TileData)>, inside: bool, s: TileShape) -> String {
        match FieldTile::assemble("f tile 0", parts, inside, &s) {
            Err(TileError::Shape { reason, .. }) => reason,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parts_are_put_in_place_and_checked_against_the_cells() {
        let var = vec![
            (DataPart::Fixed, offsets(&[0, 2])),
            (DataPart::Var, data(b"abc")),
        ];
        let t = FieldTile::assemble("f tile 0", var, false, &shape(2, None)).unwrap();
        assert_eq!(
            (t.offsets, t.var, t.fixed),
            (vec![0, 2], b"abc".to_vec(), vec![])
        );
        let fixed = vec![
            (DataPart::Fixed, data(&[1, 2, 3, 4])),
            (DataPart::Validity, data(&[1, 0])),
        ];
        let t = FieldTile::assemble("f tile 0", fixed, false, &shape(2, Some(2))).unwrap();
        assert_eq!(t.validity, Some(vec![1, 0]));

        let var = |o: TileData, v: &[u8]| vec![(DataPart::Fixed, o), (DataPart::Var, data(v))];
        let cases = [
            (
                vec![(DataPart::Fixed, data(&[1, 2, 3]))],
                false,
                shape(2, Some(2)),
                "3 bytes unfiltered, 2 cells of 2 bytes need 4",
            ),
            (
                var(offsets(&[0]), b"ab"),
                false,
                shape(2, None),
                "1 offsets for 2 cells",
            ),
            (
                var(offsets(&[2, 1]), b"ab"),
                false,
                shape(2, None),
                "offset 1 out of order or past the 2-byte var tile",
            ),
            (
                var(offsets(&[0, 9]), b"ab"),
                false,
                shape(2, None),
                "offset 9 out of order or past the 2-byte var tile",
            ),
            (
                var(data(&[0; 5]), b"ab"),
                false,
                shape(2, None),
                "5 bytes of offsets",
            ),
            (
                var(data(&[0; 8]), b"ab"),
                true,
                shape(1, None),
                "an offsets tile where the offsets live in the data tile",
            ),
            (
                vec![
                    (DataPart::Fixed, data(&[1, 2])),
                    (DataPart::Validity, data(&[1])),
                ],
                false,
                shape(2, Some(1)),
                "1 validity bytes for 2 cells",
            ),
        ];
        for (parts, inside, s, want) in cases {
            assert_eq!(refused(parts, inside, s), want);
        }
    }

    #[test]
    fn what_a_part_holds_follows_its_kind() {
        let s = TileShape {
            var_size: Some(7),
            ..shape(3, None)
        };
        assert_eq!(s.part_size(DataPart::Fixed, false), Some(24));
        assert_eq!(s.part_size(DataPart::Fixed, true), Some(0));
        assert_eq!(s.part_size(DataPart::Var, false), Some(7));
        assert_eq!(s.part_size(DataPart::Validity, false), Some(3));
        assert_eq!(
            shape(3, Some(4)).part_size(DataPart::Fixed, false),
            Some(12)
        );
        let zipped = TileShape {
            zipped: true,
            ..shape(3, Some(4))
        };
        assert_eq!(zipped.part_size(DataPart::Fixed, false), None);
    }
}
