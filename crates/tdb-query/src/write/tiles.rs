//! The tiles of a new fragment: each field's cells gathered from the input
//! in tile order (fill where a dense tile reaches beyond the write), tile
//! metadata computed over the written cells, every part filtered as
//! TileDB's writer filters it, tile by tile on one bounded pool, and handed
//! on in order as they are done.

use super::arrange::Arrangement;
use super::files::Built;
use super::input::InField;
use crate::{QueryError, Result};
use tdb_filters::Workspace;
use tdb_format::{DataField, DataPart, FormatVersion};
use tdb_fragment::tile_metadata::FieldStats;
use tdb_index::dense::FILL;
use tdb_schema::{ArraySchema, PartFilters};

/// How one field's tiles of a new fragment are built and filtered. Where a
/// dense tile reaches beyond the write, TileDB's writer leaves zeros: a
/// fixed cell of zero bytes, a var cell of one zero value, validity 0 (not
/// the fill value: readers never return those cells from this fragment).
pub(crate) struct FieldTiles<'f, 'a> {
    field: &'f InField<'a>,
    /// What its files are named after (errors).
    data_field: &'f DataField,
    fixed: PartFilters,
    var: Option<PartFilters>,
    validity: Option<PartFilters>,
    stats: FieldStats,
    fill: Vec<u8>,
    key: Option<&'f [u8; 32]>,
}

impl<'f, 'a> FieldTiles<'f, 'a> {
    /// The builder of `field`'s tiles, footer field `idx`.
    pub(crate) fn new(
        schema: &'f ArraySchema,
        field: &'f InField<'a>,
        data_field: &'f DataField,
        idx: usize,
        key: Option<&'f [u8; 32]>,
    ) -> Result<Self> {
        let part = |p: DataPart| {
            schema
                .part_filters(data_field, p, key.is_some())
                .ok_or_else(|| {
                    QueryError::invalid(format!("{}: no {p:?} part in the schema", field.buf.name))
                })
        };
        let stats = FieldStats::of_index(schema, idx).ok_or_else(|| {
            QueryError::invalid(format!("{}: no footer field {idx}", field.buf.name))
        })?;
        let fill = vec![
            0u8;
            field
                .cell_size()
                .unwrap_or(field.buf.datatype.size() as usize)
        ];
        Ok(FieldTiles {
            field,
            data_field,
            fixed: part(DataPart::Fixed)?,
            var: field
                .col
                .is_var()
                .then(|| part(DataPart::Var))
                .transpose()?,
            validity: (field.col.validity.is_some())
                .then(|| part(DataPart::Validity))
                .transpose()?,
            stats,
            fill,
            key,
        })
    }

    /// Tile `t` of `sources`, built and filtered (`tile`: its number in
    /// fragment `fragment`, for errors).
    fn build(
        &self,
        sources: &Arrangement,
        t: u64,
        (tile, fragment): (u64, &str),
        (scratch, ws): &mut (Vec<usize>, Workspace),
    ) -> Result<Built> {
        let (field, data_field, key) = (self.field, self.data_field, self.key);
        let var = self.var.is_some();
        let nullable = self.validity.is_some();
        sources.sources(t, scratch)?;
        let mut b = Built::default();
        let cells = scratch.len();
        // A tile of consecutive input cells without fill (the whole tiles
        // of a global-order part, a sparse merge's carried tiles): its
        // fixed values are the input's bytes, measured and filtered where
        // they lie, not copied into a tile first (a merge held the carried
        // cells, this copy and the filtered tile).
        let inside = match (scratch.first(), var, field.cell_size()) {
            (Some(&first), false, Some(size)) if is_run(scratch) => {
                Some(field.cells(first, cells)).filter(|b| b.len() == cells.saturating_mul(size))
            }
            _ => None,
        };
        let room = match inside {
            Some(_) => 0,
            None => cells.saturating_mul(field.cell_size().unwrap_or(8)),
        };
        let mut fixed = Vec::with_capacity(room);
        let mut offsets: Vec<u64> = Vec::new();
        let mut var_data = Vec::new();
        let mut validity = Vec::new();
        if let (Some(&first), Some(_), true) = (scratch.first(), inside, nullable) {
            validity.extend((first..first.saturating_add(cells)).map(|s| field.valid(s)));
        }
        // Fixed cells of a non-nullable field: runs of consecutive input
        // cells are copied whole.
        let runs = inside.is_none() && !var && !nullable && field.cell_size().is_some();
        let mut rest = scratch.as_slice();
        while let Some((&s, tail)) = rest.split_first().filter(|_| runs) {
            if s == FILL {
                fixed.extend_from_slice(&self.fill);
                rest = tail;
                continue;
            }
            let next = tail
                .iter()
                .zip(1..)
                .take_while(|&(&x, i)| s.checked_add(i) == Some(x))
                .count();
            let len = next.saturating_add(1);
            push_cells(&mut fixed, field.cells(s, len));
            rest = rest.get(len..).unwrap_or_default();
        }
        for &s in scratch.iter().filter(|_| !runs && inside.is_none()) {
            let (cell, valid) = if s == FILL {
                (self.fill.as_slice(), 0)
            } else {
                (field.cell(s), field.valid(s))
            };
            if var {
                offsets.push(var_data.len() as u64);
                var_data.extend_from_slice(cell);
            } else {
                push_cells(&mut fixed, cell);
            }
            if nullable {
                validity.push(valid);
            }
        }
        let fixed = inside.unwrap_or(&fixed);
        let order = sources.stats_order(t)?;
        b.metadata = self.stats.tile(
            if var { &var_data } else { fixed },
            var.then_some(offsets.as_slice()),
            nullable.then_some(validity.as_slice()),
            order.as_deref(),
        );
        let location = |p: DataPart| format!("{fragment}/{}: tile {tile}", data_field.file_name(p));
        let tile_err = |p: DataPart, e: tdb_tile::TileError| QueryError::Tile {
            file: format!("{fragment}/{}", data_field.file_name(p)),
            tile,
            source: Box::new(e),
        };
        if let Some(vpf) = &self.var {
            let f = vpf.tile_filters(FormatVersion::WRITTEN, key);
            f.filter(
                &location(DataPart::Var),
                ws,
                &var_data,
                Some(&offsets),
                &mut b.var,
            )
            .map_err(|e| tile_err(DataPart::Var, e))?;
            b.var_size = var_data.len() as u64;
            let offsets_bytes: Vec<u8> = if f.offsets_inside() {
                Vec::new()
            } else {
                offsets.iter().flat_map(|o| o.to_le_bytes()).collect()
            };
            self.fixed
                .tile_filters(FormatVersion::WRITTEN, key)
                .filter(
                    &location(DataPart::Fixed),
                    ws,
                    &offsets_bytes,
                    None,
                    &mut b.fixed,
                )
                .map_err(|e| tile_err(DataPart::Fixed, e))?;
        } else {
            self.fixed
                .tile_filters(FormatVersion::WRITTEN, key)
                .filter(&location(DataPart::Fixed), ws, fixed, None, &mut b.fixed)
                .map_err(|e| tile_err(DataPart::Fixed, e))?;
        }
        if let Some(vpf) = &self.validity {
            vpf.tile_filters(FormatVersion::WRITTEN, key)
                .filter(
                    &location(DataPart::Validity),
                    ws,
                    &validity,
                    None,
                    &mut b.validity,
                )
                .map_err(|e| tile_err(DataPart::Validity, e))?;
        }
        Ok(b)
    }
}

/// Builds and filters every tile of `sources`, every field's (`fields`, in
/// the fragment's order) on one bounded pool, and hands each tile's fields
/// to `sink` in tile order on this thread, which uploads them while the
/// workers build the next, a few tiles per worker in flight.
/// `(first_tile, fragment)`: the fragment's number of the first tile and
/// its name, for errors.
pub(crate) fn build_tiles(
    fields: &[FieldTiles<'_, '_>],
    sources: &Arrangement,
    (first_tile, fragment): (u64, &str),
    threads: usize,
    sink: impl FnMut(u64, Vec<Built>) -> Result<()>,
) -> Result<()> {
    let mut sink = sink;
    let threads = threads.max(1);
    crate::pool::map_ordered(
        usize::try_from(sources.tile_num()).unwrap_or(usize::MAX),
        threads,
        threads.saturating_mul(2),
        Default::default,
        |state, t| {
            let tile = (first_tile.saturating_add(t as u64), fragment);
            (fields.iter())
                .map(|f| f.build(sources, t as u64, tile, state))
                .collect()
        },
        |t, built| sink(t as u64, built),
    )
}

/// Whether `sources` are consecutive input cells (no fill among them).
fn is_run(sources: &[usize]) -> bool {
    let first = sources.first().copied().unwrap_or(FILL);
    first != FILL
        && (sources.iter())
            .zip(first..)
            .all(|(&s, want)| s == want && s != FILL)
}

/// Appends `bytes` to `out`. Cells put one at a time (sorted sparse cells)
/// are mostly a few bytes: copies of a width the compiler knows, not a
/// `memcpy` call each.
#[inline]
fn push_cells(out: &mut Vec<u8>, bytes: &[u8]) {
    fn fixed<const N: usize>(out: &mut Vec<u8>, bytes: &[u8]) {
        match <[u8; N]>::try_from(bytes) {
            Ok(a) => out.extend_from_slice(&a),
            Err(_) => out.extend_from_slice(bytes),
        }
    }
    match bytes.len() {
        1 => fixed::<1>(out, bytes),
        2 => fixed::<2>(out, bytes),
        4 => fixed::<4>(out, bytes),
        8 => fixed::<8>(out, bytes),
        16 => fixed::<16>(out, bytes),
        _ => out.extend_from_slice(bytes),
    }
}
