//! A dense tile filtered chunk by chunk as its cells come in: the tile a
//! global-order part leaves unfinished (and every tile of a merge, whose
//! batches are smaller than its tiles). Fixed-size values and validity are
//! cut into chunks at counts the tile's size fixes, so each chunk is
//! filtered as soon as its bytes are in, and the tile metadata is folded
//! cell by cell ([`tdb_fragment::tile_metadata::TileFold`]). Instead of
//! the tile's cells until it is whole, the writer holds a chunk of each
//! part, and either the filtered tile (where a maximum fragment size
//! places tiles by their filtered size) or nothing more: each chunk is
//! uploaded as it is filtered. The bytes are those of a tile filtered
//! whole (`write/tiles.rs`): the parts tests write every cut both ways.

use super::files::{Built, FieldFiles};
use super::input::Input;
use crate::{QueryError, Result};
use std::ops::Range;
use tdb_filters::Workspace;
use tdb_format::{DataField, DataPart, FormatVersion};
use tdb_fragment::tile_metadata::{FieldStats, TileFold};
use tdb_schema::{ArraySchema, PartFilters};

/// One part (fixed values or validity) of a tile being filtered.
struct PartChunks {
    kind: DataPart,
    filters: PartFilters,
    /// The tile's chunks (byte ranges), and the next to fill.
    cuts: Vec<Range<u64>>,
    next: usize,
    /// The next chunk's bytes so far.
    pending: Vec<u8>,
    /// The filtered tile so far: its chunk count, then the chunks done.
    out: Vec<u8>,
}

/// One field's tile being filtered.
struct FieldChunks {
    data_field: DataField,
    stats: FieldStats,
    fold: TileFold,
    cell_size: usize,
    nullable: bool,
    parts: Vec<PartChunks>,
}

/// Every field's tile being filtered, and the cells fed so far.
pub(crate) struct ChunkedTile<'k> {
    fields: Vec<FieldChunks>,
    tile_cells: usize,
    fed: usize,
    /// Filtered bytes of the tile uploaded so far, every field's.
    uploaded: u64,
    key: Option<&'k [u8; 32]>,
    ws: Workspace,
}

/// A tile fed whole.
pub(crate) enum Done {
    /// Its fields built, for the writer to place.
    Built(Vec<Built>),
    /// Uploaded as it was filtered: its filtered bytes, every field's.
    Uploaded(u64),
}

impl<'k> ChunkedTile<'k> {
    /// The tile of `tile_cells` cells of `fields` (data field and footer
    /// index, in the fragment's order); `None` where a field's tile cannot
    /// be filtered chunk by chunk (var-size cells, strings, whose bounds
    /// need the tile). Cell sizes and validity are the schema's
    /// ([`ArraySchema::part_filters`]).
    pub(crate) fn new(
        schema: &ArraySchema,
        fields: &[(DataField, usize)],
        tile_cells: usize,
        key: Option<&'k [u8; 32]>,
    ) -> Result<Option<Self>> {
        let part = |data_field: &DataField, kind: DataPart| {
            (schema.part_filters(data_field, kind, key.is_some()))
                .ok_or_else(|| QueryError::invalid(format!("{data_field:?}: no {kind:?} part")))
        };
        let mut out = Vec::with_capacity(fields.len());
        for (data_field, idx) in fields {
            let fixed = part(data_field, DataPart::Fixed)?;
            let (Some(cell_size), Some(stats)) =
                (fixed.field_cell_size, FieldStats::of_index(schema, *idx))
            else {
                return Ok(None);
            };
            let Some(fold) = stats.fold() else {
                return Ok(None);
            };
            let nullable = fixed.nullable;
            let mut filters = vec![(DataPart::Fixed, fixed)];
            if nullable {
                filters.push((DataPart::Validity, part(data_field, DataPart::Validity)?));
            }
            let parts = filters
                .into_iter()
                .map(|(kind, filters)| {
                    let len = (tile_cells as u64).saturating_mul(filters.cell_size);
                    let cuts = (filters.tile_filters(FormatVersion::WRITTEN, key))
                        .fixed_chunks(&data_field.file_name(kind), len)
                        .map_err(|e| QueryError::invalid(e.to_string()))?;
                    let mut out = Vec::new();
                    tdb_format::le::put_u64(&mut out, cuts.len() as u64);
                    Ok(PartChunks {
                        kind,
                        filters,
                        cuts,
                        next: 0,
                        pending: Vec::new(),
                        out,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            out.push(FieldChunks {
                data_field: data_field.clone(),
                stats,
                fold,
                cell_size: usize::try_from(cell_size).unwrap_or(usize::MAX),
                nullable,
                parts,
            });
        }
        Ok(Some(ChunkedTile {
            fields: out,
            tile_cells: tile_cells.max(1),
            fed: 0,
            uploaded: 0,
            key,
            ws: Workspace::default(),
        }))
    }

    /// Cells fed to the tile not yet finished.
    pub(crate) fn fed(&self) -> usize {
        self.fed
    }

    /// Feeds `cells` of `input` (no further than the tile's end): each
    /// chunk they complete is filtered, and with `files` (the fragment's
    /// files, one per field in order) uploaded at once. The tile, once its
    /// last cell is in. `(tile, fragment)` name the tile in errors.
    pub(crate) fn feed(
        &mut self,
        input: &Input<'_>,
        cells: Range<usize>,
        (tile, fragment): (u64, &str),
        mut files: Option<Vec<&mut FieldFiles<'_>>>,
    ) -> Result<Option<Done>> {
        let n = cells.len();
        let files_out = files.as_ref().is_some_and(|f| f.len() != self.fields.len());
        if self.fed.saturating_add(n) > self.tile_cells
            || input.fields.len() != self.fields.len()
            || files_out
        {
            return Err(QueryError::invalid(
                "cells past a tile's end, or fields out of step with the fragment's",
            ));
        }
        if let (0, Some(files)) = (self.fed, &mut files) {
            files.iter_mut().for_each(|f| f.begin_tile());
            self.uploaded = 0;
        }
        let (key, ws) = (self.key, &mut self.ws);
        let mut validity = Vec::new();
        for (k, (f, fc)) in input.fields.iter().zip(&mut self.fields).enumerate() {
            let data = f.cells(cells.start, n);
            if data.len() != n.saturating_mul(fc.cell_size) {
                return Err(QueryError::invalid(format!(
                    "{}: {} bytes for {n} cells",
                    f.buf.name,
                    data.len()
                )));
            }
            validity.clear();
            if fc.nullable {
                validity.extend(cells.clone().map(|s| f.valid(s)));
            }
            fc.fold
                .feed(data, fc.nullable.then_some(validity.as_slice()));
            for part in &mut fc.parts {
                let bytes = match part.kind {
                    DataPart::Validity => validity.as_slice(),
                    _ => data,
                };
                let file = format!("{fragment}/{}", fc.data_field.file_name(part.kind));
                part.push(bytes, (&file, tile), ws, key)?;
                if let Some(files) = files.as_mut().and_then(|fs| fs.get_mut(k)) {
                    let out = std::mem::take(&mut part.out);
                    self.uploaded = self.uploaded.saturating_add(out.len() as u64);
                    if !out.is_empty() {
                        files.append(part.kind, out)?;
                    }
                }
            }
        }
        self.fed = self.fed.saturating_add(n);
        if self.fed < self.tile_cells {
            return Ok(None);
        }
        self.fed = 0;
        let mut built = Vec::with_capacity(self.fields.len());
        for (k, fc) in self.fields.iter_mut().enumerate() {
            let mut b = Built::default();
            for part in &mut fc.parts {
                let filtered = part.finish()?;
                match part.kind {
                    DataPart::Validity => b.validity = filtered,
                    _ => b.fixed = filtered,
                }
            }
            let fresh = fc
                .stats
                .fold()
                .ok_or_else(|| QueryError::invalid("a tile fold went away"))?;
            b.metadata = std::mem::replace(&mut fc.fold, fresh).finish();
            match files.as_mut().and_then(|fs| fs.get_mut(k)) {
                // Every chunk went out as it was filtered (what is left is
                // the next tile's chunk count, for its first upload).
                Some(files) => files.end_tile(b.metadata),
                None => built.push(b),
            }
        }
        Ok(Some(match files {
            Some(_) => Done::Uploaded(self.uploaded),
            None => Done::Built(built),
        }))
    }
}

impl PartChunks {
    /// Appends `bytes` to the tile, filtering each chunk they complete
    /// (straight from `bytes` where a whole chunk lies in them).
    fn push(
        &mut self,
        mut bytes: &[u8],
        (file, tile): (&str, u64),
        ws: &mut Workspace,
        key: Option<&[u8; 32]>,
    ) -> Result<()> {
        let filters = self.filters.tile_filters(FormatVersion::WRITTEN, key);
        let location = format!("{file}: tile {tile}");
        while !bytes.is_empty() {
            let Some(cut) = self.cuts.get(self.next) else {
                return Err(QueryError::invalid(format!(
                    "{location}: more bytes than the tile's chunks"
                )));
            };
            let len = usize::try_from(cut.end.saturating_sub(cut.start)).unwrap_or(usize::MAX);
            let chunk = if self.pending.is_empty() && bytes.len() >= len {
                let (chunk, rest) = bytes.split_at(len);
                bytes = rest;
                chunk
            } else {
                let take = len.saturating_sub(self.pending.len()).min(bytes.len());
                let (more, rest) = bytes.split_at(take);
                self.pending.extend_from_slice(more);
                bytes = rest;
                if self.pending.len() < len {
                    return Ok(());
                }
                &self.pending
            };
            let index = self.next as u64;
            filters
                .filter_chunk(&location, ws, index, chunk, &mut self.out)
                .map_err(|e| QueryError::Tile {
                    file: file.to_owned(),
                    tile,
                    source: Box::new(e),
                })?;
            self.pending.clear();
            self.next = self.next.saturating_add(1);
        }
        Ok(())
    }

    /// The filtered tile, every chunk in; the part starts its next tile.
    fn finish(&mut self) -> Result<Vec<u8>> {
        if self.next != self.cuts.len() || !self.pending.is_empty() {
            return Err(QueryError::invalid("a tile ended inside a chunk"));
        }
        let mut next = Vec::with_capacity(self.out.len());
        tdb_format::le::put_u64(&mut next, self.cuts.len() as u64);
        self.next = 0;
        Ok(std::mem::replace(&mut self.out, next))
    }
}
