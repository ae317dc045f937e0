//! A tile filtered chunk by chunk as its cells come in: the tile a
//! global-order part leaves unfinished (and every tile of a merge whose
//! parts are smaller than its tiles), dense or sparse. Each part is cut
//! where TileDB cuts the whole tile (fixed-size values, offsets and
//! validity in chunks of a size their cells fix, var-size data cell by cell
//! by [`VarCuts`]), so each chunk is filtered as soon as its bytes are in;
//! the tile metadata is folded cell by cell ([`TileFold`]) and a sparse
//! tile's MBR part by part. Instead of the tile's cells until it is whole,
//! the writer holds a chunk of each part and the filtered chunks it cannot
//! hand on yet. A tile's chunk count comes first in its bytes: it is known
//! before the cells only for a dense tile's fixed-size parts, whose chunks
//! are uploaded as they are filtered; the other parts' filtered chunks wait
//! for the tile's end (a sparse fragment's last tile holds fewer cells
//! than the rest, and var-size data is cut where its cells' sizes say).
//! The bytes are those of a tile filtered whole (`write/tiles.rs`): the
//! parts tests write every cut both ways.

use super::arrange;
use super::files::{Built, FieldFiles};
use super::input::{InField, Input};
use crate::{QueryError, Result};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::ops::Range;
use tdb_filters::Workspace;
use tdb_format::{DataField, DataPart, FormatVersion};
use tdb_fragment::tile_metadata::{FieldStats, TileFold};
use tdb_index::DomainOps;
use tdb_schema::{ArraySchema, NDRange, PartFilters};
use tdb_tile::{VarCut, VarCuts};

/// How a part's bytes are cut into chunks.
enum Cut {
    /// Fixed-size values, offsets or validity: chunks of `size` bytes.
    Fixed { size: usize },
    /// Var-size data, a cell at a time. `alone`: the last cell has a chunk
    /// of its own, which ends once another cell follows.
    Var { cuts: VarCuts, alone: bool },
}

/// One part (fixed values or offsets, var data, validity) of a tile being
/// filtered.
struct PartChunks {
    kind: DataPart,
    filters: PartFilters,
    cut: Cut,
    /// The tile's chunk count where the cells do not decide it (a dense
    /// tile's fixed-size parts): the count goes first and each chunk can
    /// be handed on as it is filtered.
    count: Option<u64>,
    /// Chunks of the tile filtered so far.
    done: u64,
    /// The next chunk's bytes so far.
    pending: Vec<u8>,
    /// The filtered tile not yet handed on: its chunk count (a placeholder
    /// where not yet known), then the chunks filtered.
    out: Vec<u8>,
    /// Filtered chunks of a tile whose count is not yet known, past
    /// [`HELD`] bytes, written to a scratch file until the tile ends.
    spilled: Option<File>,
    spilled_len: u64,
}

/// The most filtered bytes a part holds in memory while its tile's chunk
/// count is not known (a chunk's worth): more wait in a scratch file, so a
/// sparse tile that hardly compresses costs no more memory than one that
/// does.
const HELD: usize = 64 << 10;

/// One field's tile being filtered.
struct FieldChunks {
    data_field: DataField,
    stats: FieldStats,
    fold: TileFold,
    /// Bytes per cell; `None` for var-size cells.
    cell_size: Option<usize>,
    nullable: bool,
    /// Var-size cells: the tile's var bytes so far (the next cell's
    /// offset).
    var_at: u64,
    parts: Vec<PartChunks>,
}

/// Every field's tile being filtered, and the cells fed so far.
pub(crate) struct ChunkedTile<'k> {
    fields: Vec<FieldChunks>,
    tile_cells: usize,
    fed: usize,
    /// Filtered bytes of the tile uploaded so far, every field's.
    uploaded: u64,
    /// Sparse tiles: the domain's rules, and the MBR of the cells fed.
    mbr: Option<(DomainOps, NDRange)>,
    key: Option<&'k [u8; 32]>,
    ws: Workspace,
    /// Scratch for one feed: validity bytes, var offsets in the tile (as
    /// bytes) and in the part.
    validity: Vec<u8>,
    offsets: Vec<u8>,
    relative: Vec<u64>,
}

/// A tile fed whole (or ended short).
pub(crate) struct Done {
    /// Its cells.
    pub cells: u64,
    /// A sparse tile's MBR.
    pub mbr: Option<NDRange>,
    pub tile: Placed,
}

/// Where a tile's filtered bytes went.
pub(crate) enum Placed {
    /// Its fields built, for the writer to place.
    Built(Vec<Built>),
    /// Uploaded as it was filtered: its filtered bytes, every field's.
    Uploaded(u64),
}

impl<'k> ChunkedTile<'k> {
    /// The tile of `tile_cells` cells (a dense tile's, or a sparse tile's
    /// capacity: sparse tiles may end short, [`ChunkedTile::end`]) of
    /// `fields` (data field and footer index, in the fragment's order);
    /// `None` where a field's tile can only be filtered whole (a pipeline
    /// that takes the tile as one chunk, var data carrying its offsets).
    pub(crate) fn new(
        schema: &ArraySchema,
        fields: &[(DataField, usize)],
        tile_cells: usize,
        key: Option<&'k [u8; 32]>,
    ) -> Result<Option<Self>> {
        let dense = schema.array_type == tdb_format::ArrayType::Dense;
        let tile_cells = tile_cells.max(1);
        let part = |data_field: &DataField, kind: DataPart| {
            (schema.part_filters(data_field, kind, key.is_some()))
                .ok_or_else(|| QueryError::invalid(format!("{data_field:?}: no {kind:?} part")))
        };
        let mut out = Vec::with_capacity(fields.len());
        for (data_field, idx) in fields {
            let fixed = part(data_field, DataPart::Fixed)?;
            let Some(stats) = FieldStats::of_index(schema, *idx) else {
                return Ok(None);
            };
            let cell_size = fixed
                .field_cell_size
                .map(|s| usize::try_from(s).unwrap_or(usize::MAX));
            let nullable = fixed.nullable;
            let mut filters = vec![(DataPart::Fixed, fixed)];
            if cell_size.is_none() {
                filters.push((DataPart::Var, part(data_field, DataPart::Var)?));
            }
            if nullable {
                filters.push((DataPart::Validity, part(data_field, DataPart::Validity)?));
            }
            let mut parts = Vec::with_capacity(filters.len());
            for (kind, filters) in filters {
                let tile = filters.tile_filters(FormatVersion::WRITTEN, key);
                let (cut, count) = match kind {
                    DataPart::Var => match tile.streamed_chunk_size(true) {
                        Some(size) => (
                            Cut::Var {
                                cuts: VarCuts::new(size),
                                alone: false,
                            },
                            None,
                        ),
                        None => return Ok(None),
                    },
                    _ if dense => {
                        // A dense tile's length is known: so are its chunks.
                        let len = (tile_cells as u64).saturating_mul(filters.cell_size);
                        let cuts = tile
                            .fixed_chunks(&data_field.file_name(kind), len)
                            .map_err(|e| QueryError::invalid(e.to_string()))?;
                        let size = cuts.first().map_or(1, |c| c.end.saturating_sub(c.start));
                        let size = usize::try_from(size).unwrap_or(usize::MAX).max(1);
                        (Cut::Fixed { size }, Some(cuts.len() as u64))
                    }
                    _ => match tile.streamed_chunk_size(false) {
                        Some(size) => {
                            let size = usize::try_from(size).unwrap_or(usize::MAX).max(1);
                            (Cut::Fixed { size }, None)
                        }
                        None => return Ok(None),
                    },
                };
                let mut out = Vec::new();
                tdb_format::le::put_u64(&mut out, count.unwrap_or(0));
                parts.push(PartChunks {
                    kind,
                    filters,
                    cut,
                    count,
                    done: 0,
                    pending: Vec::new(),
                    out,
                    spilled: None,
                    spilled_len: 0,
                });
            }
            out.push(FieldChunks {
                data_field: data_field.clone(),
                fold: stats.fold(),
                stats,
                cell_size,
                nullable,
                var_at: 0,
                parts,
            });
        }
        let mbr = match dense {
            true => None,
            false => Some((DomainOps::new(&schema.domain)?, NDRange::new())),
        };
        Ok(Some(ChunkedTile {
            fields: out,
            tile_cells,
            fed: 0,
            uploaded: 0,
            mbr,
            key,
            ws: Workspace::default(),
            validity: Vec::new(),
            offsets: Vec::new(),
            relative: Vec::new(),
        }))
    }

    /// Cells fed to the tile not yet finished.
    pub(crate) fn fed(&self) -> usize {
        self.fed
    }

    /// Feeds `cells` of `input` (no further than the tile's end): each
    /// chunk they complete is filtered, and with `files` (the fragment's
    /// files, one per field in order) uploaded at once where its tile's
    /// chunk count is known. The tile, once its last cell is in.
    /// `(tile, fragment)` name the tile in errors.
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
        if n == 0 {
            return Ok(None);
        }
        if let (0, Some(files)) = (self.fed, &mut files) {
            files.iter_mut().for_each(|f| f.begin_tile());
            self.uploaded = 0;
        }
        let (key, ws) = (self.key, &mut self.ws);
        let (validity, offsets, relative) =
            (&mut self.validity, &mut self.offsets, &mut self.relative);
        for (k, (f, fc)) in input.fields.iter().zip(&mut self.fields).enumerate() {
            let file = |kind: DataPart| format!("{fragment}/{}", fc.data_field.file_name(kind));
            validity.clear();
            if fc.nullable {
                validity.extend(cells.clone().map(|s| f.valid(s)));
            }
            let valid = fc.nullable.then_some(validity.as_slice());
            match fc.cell_size {
                Some(size) => {
                    let data = f.cells(cells.start, n);
                    if data.len() != n.saturating_mul(size) {
                        return Err(QueryError::invalid(format!(
                            "{}: {} bytes for {n} cells",
                            f.buf.name,
                            data.len()
                        )));
                    }
                    fc.fold.feed(data, valid);
                    if let Some(part) = fc.parts.first_mut() {
                        part.push(data, (&file(part.kind), tile), ws, key)?;
                    }
                }
                None => {
                    let (data, start) = var_cells(f, &cells);
                    relative.clear();
                    offsets.clear();
                    for i in cells.clone() {
                        let at = f.col.offsets.get(i).copied().unwrap_or(start);
                        relative.push(at.saturating_sub(start));
                        let offset = fc.var_at.saturating_add(at.saturating_sub(start));
                        offsets.extend_from_slice(&offset.to_le_bytes());
                    }
                    fc.fold.feed_var(data, relative, valid);
                    for part in &mut fc.parts {
                        let name = file(part.kind);
                        let location = (name.as_str(), tile);
                        match part.kind {
                            DataPart::Fixed => part.push(offsets, location, ws, key)?,
                            DataPart::Var => {
                                for i in cells.clone() {
                                    part.push_cell(f.cell(i), location, ws, key)?;
                                }
                            }
                            _ => {}
                        }
                    }
                    fc.var_at = fc.var_at.saturating_add(data.len() as u64);
                }
            }
            if let Some(part) = fc.parts.iter_mut().find(|p| p.kind == DataPart::Validity) {
                part.push(validity, (&file(part.kind), tile), ws, key)?;
            }
            if let Some(files) = files.as_mut().and_then(|fs| fs.get_mut(k)) {
                for part in &mut fc.parts {
                    if let Some(ready) = part.ready() {
                        self.uploaded = self.uploaded.saturating_add(ready.len() as u64);
                        files.append(part.kind, ready)?;
                    }
                }
            }
        }
        if let Some((ops, mbr)) = &mut self.mbr {
            ops.expand(mbr, &arrange::mbr(ops, input, cells.clone()));
        }
        self.fed = self.fed.saturating_add(n);
        if self.fed < self.tile_cells {
            return Ok(None);
        }
        self.end((tile, fragment), files).map(Some)
    }

    /// Ends the tile with the cells fed so far (a sparse fragment's last
    /// tile; a dense tile must be whole): its last chunks are filtered, and
    /// with `files` what was held is uploaded.
    pub(crate) fn end(
        &mut self,
        (tile, fragment): (u64, &str),
        mut files: Option<Vec<&mut FieldFiles<'_>>>,
    ) -> Result<Done> {
        if self.fed == 0 || (self.mbr.is_none() && self.fed != self.tile_cells) {
            return Err(QueryError::invalid("a tile ended before its cells"));
        }
        let cells = std::mem::take(&mut self.fed) as u64;
        let (key, ws) = (self.key, &mut self.ws);
        let mut built = Vec::with_capacity(self.fields.len());
        for (k, fc) in self.fields.iter_mut().enumerate() {
            let mut b = Built::default();
            let mut field_files = files.as_mut().and_then(|fs| fs.get_mut(k));
            for part in &mut fc.parts {
                let file = format!("{fragment}/{}", fc.data_field.file_name(part.kind));
                let kind = part.kind;
                let into = match kind {
                    DataPart::Validity => &mut b.validity,
                    DataPart::Var => &mut b.var,
                    _ => &mut b.fixed,
                };
                let uploaded = &mut self.uploaded;
                part.finish(
                    (&file, tile),
                    ws,
                    key,
                    &mut |bytes| match &mut field_files {
                        Some(files) => {
                            *uploaded = uploaded.saturating_add(bytes.len() as u64);
                            files.append(kind, bytes)
                        }
                        None if into.is_empty() => {
                            *into = bytes;
                            Ok(())
                        }
                        None => {
                            into.extend_from_slice(&bytes);
                            Ok(())
                        }
                    },
                )?;
            }
            b.var_size = std::mem::take(&mut fc.var_at);
            b.metadata = std::mem::replace(&mut fc.fold, fc.stats.fold()).finish();
            match field_files {
                Some(files) => files.end_tile(b.metadata, b.var_size),
                None => built.push(b),
            }
        }
        let mbr = self.mbr.as_mut().map(|(_, m)| std::mem::take(m));
        Ok(Done {
            cells,
            mbr,
            tile: match files {
                Some(_) => Placed::Uploaded(std::mem::take(&mut self.uploaded)),
                None => Placed::Built(built),
            },
        })
    }
}

/// The var bytes of `cells` of `f` (consecutive in its data: offsets never
/// decrease) and the offset of the first.
fn var_cells<'a>(f: &InField<'a>, cells: &Range<usize>) -> (&'a [u8], u64) {
    let col = &f.col;
    let start = col.offsets.get(cells.start).copied().unwrap_or(0);
    let end = (col.offsets.get(cells.end).copied()).unwrap_or(col.var.len() as u64);
    let data = usize::try_from(start)
        .ok()
        .zip(usize::try_from(end).ok())
        .and_then(|(s, e)| col.var.get(s..e))
        .unwrap_or(&[]);
    (data, start)
}

impl PartChunks {
    /// Appends fixed-size `bytes` to the tile, filtering each chunk they
    /// complete (straight from `bytes` where a whole chunk lies in them).
    fn push(
        &mut self,
        mut bytes: &[u8],
        at: (&str, u64),
        ws: &mut Workspace,
        key: Option<&[u8; 32]>,
    ) -> Result<()> {
        let Cut::Fixed { size } = self.cut else {
            return Err(QueryError::invalid(format!(
                "{}: tile {}: values given to var-size data",
                at.0, at.1
            )));
        };
        while !bytes.is_empty() {
            if self.pending.is_empty() && bytes.len() >= size {
                let (chunk, rest) = bytes.split_at(size);
                bytes = rest;
                self.filter(chunk, at, ws, key)?;
                continue;
            }
            let take = size.saturating_sub(self.pending.len()).min(bytes.len());
            let (more, rest) = bytes.split_at(take);
            self.pending.extend_from_slice(more);
            bytes = rest;
            if self.pending.len() < size {
                return Ok(());
            }
            self.emit(at, ws, key)?;
        }
        Ok(())
    }

    /// Appends one var-size cell to the tile, filtering the chunks it ends.
    fn push_cell(
        &mut self,
        cell: &[u8],
        at: (&str, u64),
        ws: &mut Workspace,
        key: Option<&[u8; 32]>,
    ) -> Result<()> {
        let bad = |e: tdb_tile::ChunkingError| {
            QueryError::invalid(format!("{}: tile {}: {}", at.0, at.1, e.0))
        };
        let (after_alone, cut) = match &mut self.cut {
            Cut::Var { cuts, alone, .. } => (
                std::mem::take(alone),
                cuts.cell(cell.len() as u64).map_err(bad)?,
            ),
            Cut::Fixed { .. } => {
                return Err(QueryError::invalid(format!(
                    "{}: tile {}: a var-size cell given to fixed-size values",
                    at.0, at.1
                )))
            }
        };
        if after_alone {
            self.emit(at, ws, key)?;
        }
        if matches!(cut, VarCut::CutThenJoin | VarCut::Alone) {
            self.emit(at, ws, key)?;
        }
        self.pending.extend_from_slice(cell);
        match (cut, &mut self.cut) {
            (VarCut::JoinThenCut, _) => self.emit(at, ws, key)?,
            (VarCut::Alone, Cut::Var { alone, .. }) => *alone = true,
            _ => {}
        }
        Ok(())
    }

    /// Filters the chunk pending.
    fn emit(&mut self, at: (&str, u64), ws: &mut Workspace, key: Option<&[u8; 32]>) -> Result<()> {
        let chunk = std::mem::take(&mut self.pending);
        let done = self.filter(&chunk, at, ws, key);
        self.pending = chunk;
        self.pending.clear();
        done
    }

    /// Filters `chunk`, the tile's next, into `out`.
    fn filter(
        &mut self,
        chunk: &[u8],
        (file, tile): (&str, u64),
        ws: &mut Workspace,
        key: Option<&[u8; 32]>,
    ) -> Result<()> {
        let location = format!("{file}: tile {tile}");
        if self.count.is_some_and(|c| self.done >= c) {
            return Err(QueryError::invalid(format!(
                "{location}: more bytes than the tile's chunks"
            )));
        }
        (self.filters.tile_filters(FormatVersion::WRITTEN, key))
            .filter_chunk(&location, ws, self.done, chunk, &mut self.out)
            .map_err(|e| QueryError::Tile {
                file: file.to_owned(),
                tile,
                source: Box::new(e),
            })?;
        self.done = self.done.saturating_add(1);
        let chunks = self.out.get(8..).unwrap_or_default();
        if self.count.is_none() && chunks.len() >= HELD {
            let file = match &mut self.spilled {
                Some(file) => file,
                None => self.spilled.insert(crate::scratch::unbuffered()?),
            };
            file.write_all(chunks).map_err(QueryError::Spill)?;
            self.spilled_len = self.spilled_len.saturating_add(chunks.len() as u64);
            self.out.truncate(8);
        }
        Ok(())
    }

    /// The filtered bytes that can go out before the tile ends: those of a
    /// tile whose chunk count went first.
    fn ready(&mut self) -> Option<Vec<u8>> {
        (self.count.is_some() && !self.out.is_empty()).then(|| std::mem::take(&mut self.out))
    }

    /// What is left of the filtered tile, every chunk in (the count first
    /// where it was not known before), handed to `sink` in pieces; the part
    /// starts its next tile.
    fn finish(
        &mut self,
        at: (&str, u64),
        ws: &mut Workspace,
        key: Option<&[u8; 32]>,
        sink: &mut dyn FnMut(Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        // The last chunk: fixed values' if any bytes are left; var data's
        // always (empty where the last cell ended a chunk, as TileDB's).
        match &mut self.cut {
            Cut::Fixed { .. } if self.pending.is_empty() => {}
            Cut::Fixed { .. } => self.emit(at, ws, key)?,
            Cut::Var { cuts, alone } => {
                cuts.restart();
                *alone = false;
                self.emit(at, ws, key)?;
            }
        }
        let done = std::mem::take(&mut self.done);
        match self.count {
            Some(count) if count != done => {
                return Err(QueryError::invalid(format!(
                    "{}: tile {}: the tile ended inside a chunk",
                    at.0, at.1
                )))
            }
            Some(_) => {}
            None => {
                if let Some(head) = self.out.get_mut(..8) {
                    head.copy_from_slice(&done.to_le_bytes());
                }
            }
        }
        let mut next = Vec::new();
        tdb_format::le::put_u64(&mut next, self.count.unwrap_or(0));
        let mut rest = std::mem::replace(&mut self.out, next);
        if let (Some(file), true) = (&mut self.spilled, self.spilled_len > 0) {
            // The count, the chunks written out, then those held.
            let held = rest.split_off(8.min(rest.len()));
            sink(rest)?;
            file.rewind().map_err(QueryError::Spill)?;
            let mut left = std::mem::take(&mut self.spilled_len);
            while left > 0 {
                let mut piece = vec![0; usize::try_from(left).unwrap_or(HELD).min(HELD)];
                file.read_exact(&mut piece).map_err(QueryError::Spill)?;
                left = left.saturating_sub(piece.len() as u64);
                sink(piece)?;
            }
            file.rewind().map_err(QueryError::Spill)?;
            file.set_len(0).map_err(QueryError::Spill)?;
            rest = held;
        }
        if !rest.is_empty() {
            sink(rest)?;
        }
        Ok(())
    }
}
