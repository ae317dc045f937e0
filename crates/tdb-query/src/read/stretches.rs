//! A dense read spilled in stretches (`super::dense_runs` says when). Along
//! the array's cell order (row-major results of row-major tiles, or
//! col-major of col-major) a read goes through a row of tiles at a time;
//! where the chunks one result line crosses pass the tile budget, pieces
//! hold a part of a line, and every chunk holding several lines is fetched
//! and decoded again for each of them (W2 4096² under 1 MiB: 14 times the
//! unbudgeted read's time). Across it, a piece of a few result lines
//! reaches every chunk of the tiles it crosses. Spilled instead, each chunk
//! is read once: a piece's tiles are cut into stretches, cells inside the
//! subarray whose places in the result order go up one a cell and whose
//! positions in the tile go up by a step (one along the order, a tile
//! line's cells across it: [`DenseBox::tile_places`]), and each stretch is
//! appended to a scratch file as records of its first place, cells and
//! bytes, then every requested field's values, column by column (a
//! var-size field's lengths, then its bytes). Results then come a window
//! of places at a time: each run hands out its records in the window,
//! copied straight to their places (var-size values through an arena, put
//! in order at the end), and places no run holds get fill. Each run's
//! bytes are read once, into a buffer of its own that the next window
//! goes on from (the memory the tiles held, shared by the live runs).
//! Where too many runs meet at a place for a window to read them well
//! (across the order, a run a piece of a tile's lines), they are merged
//! down first ([`levels`]). A piece that holds part of a tile line across the order
//! (where its tile cannot go in blocks: `super::dense_blocks`)
//! holds one cell of each result line it crosses: those cells go in
//! strided records ([`STRIDED`], a head for up to 256 bytes of cells
//! whose places go up by the result line's length), not a record of 20
//! bytes of head a cell; the merge down takes them apart a cell at a
//! time, and windows put each cell in its place (`dense_large_tiles`
//! col-major under 16 KiB: 0.29 → 0.24 s).
//!
//! The runs' records merge by copies a stretch, not a cell: records of
//! cells, as [`super::spill`] merges a sparse read's, cost about 75 ns a
//! cell, five times the unbudgeted read of W2. A cell the condition
//! rejects is spilled as its field's fill: it hides older fragments'
//! values of its place, as it does in pieces.

mod levels;

use super::dense_runs::DenseBox;
use super::emit::zeroed;
use super::fields::{FieldInfo, Kind};
use super::tiles::DecodedTile;
use crate::batch::{Batch, FieldBuffer};
use crate::scratch::{self, At};
use crate::validity::Validity;
use crate::{QueryError, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::ops::Range;
use std::sync::Arc;

/// A record's head: its first place (8 bytes), cells (4) and body bytes
/// (8), little-endian ([`head`], [`parse_head`]). (Bodies in 4 bytes
/// measured no faster across the order under 16 KiB, where records were
/// a cell each before strided records.)
const HEAD: u64 = 20;

/// Set in a record's cells: a strided record, whose places go up by a
/// step (its body's first 8 bytes) instead of one a cell. Across the cell
/// order a piece of part of a tile line holds one cell of each result
/// line, a stretch of one cell each, whose places step by the result
/// line's length while their positions in the tile go up one: written as
/// one record of them, not a record (a head) a cell. Only pieces write
/// them: the merge down ([`levels`]) takes them apart a cell at a time,
/// and a window puts each of their cells in the window in its place, a
/// record across windows resumed at its next cell. (Merged down whether
/// or not runs met, as first tried, the runs of `dense_large_tiles`
/// col-major under 1 MiB, a piece's first part-line strided, were all
/// rewritten: 0.031 → 0.041 s.)
const STRIDED: u64 = 1 << 31;

/// Body bytes a strided record holds at most: a merge down holds each one
/// it reads whole, beside its run's read buffer. (1 KiB measured no
/// faster under 16 KiB, 128 bytes slower.)
const STRIDED_MOST: u64 = 256;

/// Cells of fill written at a time.
const FILL_BLOCK: u64 = 4096;

/// What a var-size cell is guessed to hold, for a window's reads.
const VAR_GUESS: u64 = 32;

/// A field the runs hold: its slot among the read's fields, bytes a cell
/// (`None`: var-size, a length of 8 bytes a cell then the bytes), and
/// whether a byte of validity a cell follows the values.
#[derive(Debug, Clone)]
struct Col {
    slot: usize,
    size: Option<usize>,
    nullable: bool,
}

/// A requested field in a batch: held by the runs (`Col`'s index), or a
/// dimension (and its slot), from the box.
#[derive(Debug, Clone, Copy)]
enum Out {
    Col(usize),
    Dim(usize, usize),
}

/// One piece's records, in place order: where they lie in the file.
#[derive(Debug)]
struct Run {
    frag: u32,
    /// The file bytes of its records not yet done with.
    start: u64,
    end: u64,
    /// The first place of the record at `start`, and cells of it already
    /// handed out.
    place: u64,
    skip: u64,
    /// One past its last place.
    past: u64,
    /// Merges that made it while pieces pushed (0: a piece's).
    level: u8,
    /// It holds strided records ([`STRIDED`]): a merge down holds one
    /// of them beside the run's read buffer.
    strided: bool,
}

/// One stretch of a piece: `len` cells from place `place`, at positions
/// from `pos` of the piece's tile `tile`, the read's step apart (one along
/// the tile's cell order, a line's cells across it). 24 bytes: across the
/// order a piece of part of a line is a stretch a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Stretch {
    pub place: u64,
    pub pos: u64,
    pub len: u32,
    pub tile: u32,
}

impl Stretch {
    /// The position of its cell `c`, cells `step` apart.
    pub fn at(&self, c: u64, step: u64) -> u64 {
        self.pos.saturating_add(c.saturating_mul(step))
    }
}

/// The stretches of a read's pieces, written to one scratch file.
pub(crate) struct Stretches {
    cols: Vec<Col>,
    out: Vec<Out>,
    file: Option<Arc<File>>,
    writer: Option<BufWriter<At>>,
    /// Bytes written (the file's end once the writer is out).
    written: u64,
    runs: Vec<Run>,
    /// Bytes the writer buffers, and the most a record's body holds but
    /// for one cell past it (what a window reads at once).
    buffer: usize,
    /// Runs held at most while pieces push ([`levels::HELD_MOST`]; fewer
    /// in tests).
    held_most: usize,
    /// Per held field, a cell of its fill and whether that is valid.
    fills: Vec<(Vec<u8>, u8)>,
    /// Rounds of the merge down so far (every run rewritten in each).
    rounds: u32,
    /// Bytes merges and windows read runs through at least
    /// ([`scratch::READING_LEAST`]; none in tests of narrow merges).
    reading_least: usize,
    /// The file the last round of a merge down read, which the next
    /// round writes over ([`Stretches::merge_down`]): its pages are taken
    /// again, not freed and then allocated anew (`dense_large_tiles`
    /// col-major under 16 KiB 0.243 → 0.222 s, W1 4096² 0.535 → 0.511; a
    /// twelfth of W1's time went to closing the files).
    spare: Option<Arc<File>>,
}

/// One held field's values over a window, a slot a cell: fixed-size ones
/// in place, var-size ones in an arena, each slot's bytes there.
enum Held {
    Fixed(Vec<u8>),
    Var(Vec<u8>, Vec<Option<Range<usize>>>),
}

impl Stretches {
    /// The most bytes the writer buffers.
    const MOST_BUFFER: usize = 64 << 10;

    /// Stretches of the `requested` slots of `fields` (dimensions come from
    /// the box), written through `buffer` bytes.
    pub fn new(fields: &[FieldInfo], requested: &[usize], buffer: usize) -> Result<Self> {
        let mut cols: Vec<Col> = Vec::new();
        let mut out = Vec::with_capacity(requested.len());
        for &slot in requested {
            let f = (fields.get(slot))
                .ok_or_else(|| QueryError::invalid(format!("no field in slot {slot}")))?;
            out.push(match f.kind {
                Kind::Dim(d) => Out::Dim(d, slot),
                _ => match cols.iter().position(|c| c.slot == slot) {
                    Some(k) => Out::Col(k),
                    None => {
                        cols.push(Col {
                            slot,
                            size: (!f.is_var()).then(|| f.cell_size()),
                            nullable: f.nullable,
                        });
                        Out::Col(cols.len().saturating_sub(1))
                    }
                },
            });
        }
        let fills = (cols.iter())
            .map(|c| {
                let (mut cell, valid) = (fields.get(c.slot))
                    .map_or((Vec::new(), 0), |f| (f.fill.clone(), f.fill_validity));
                if let Some(size) = c.size {
                    cell.resize(size, 0);
                }
                (cell, valid)
            })
            .collect();
        Ok(Stretches {
            fills,
            cols,
            out,
            file: None,
            writer: None,
            written: 0,
            runs: Vec::new(),
            buffer: buffer.clamp(4 << 10, Self::MOST_BUFFER),
            held_most: levels::HELD_MOST,
            reading_least: scratch::READING_LEAST,
            spare: None,
            rounds: 0,
        })
    }

    /// Runs held.
    #[cfg(test)]
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Holds at most `n` runs while pieces push theirs (fewer than
    /// [`levels::HELD_MOST`], so a test's read merges them as it goes).
    #[cfg(test)]
    pub fn hold_at_most(&mut self, n: usize) {
        self.held_most = n;
    }

    /// Bytes the writer buffers.
    pub fn buffer(&self) -> usize {
        self.buffer
    }

    /// The slots of the fields the runs hold.
    pub fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.cols.iter().map(|c| c.slot)
    }

    /// Bytes a record's body holds a cell besides var-size values: fixed
    /// values, var lengths, validity.
    fn fixed_bytes(&self) -> u64 {
        (self.cols.iter())
            .map(|c| (c.size.unwrap_or(8) as u64).saturating_add(u64::from(c.nullable)))
            .fold(0, u64::saturating_add)
    }

    /// Bytes a record holds a cell, as a window reads them: its fixed
    /// bytes, a var-size value guessed at [`VAR_GUESS`], and a byte for
    /// the records' heads (a few a line).
    pub(super) fn cell_guess(&self) -> u64 {
        let var = (self.cols.iter()).filter(|c| c.size.is_none()).count() as u64;
        (self.fixed_bytes())
            .saturating_add(VAR_GUESS.saturating_mul(var))
            .saturating_add(1)
    }

    /// Appends a run of fragment `frag`: `stretches` in place order (their
    /// cells `step` apart in their tiles), each
    /// of `tiles` (per tile, per held field, its decoded tile; `None`
    /// where the fragment lacks the field: its fill). `rejected` says, per
    /// cell of the stretches in turn, whether the condition rejects it
    /// (empty: none): its record holds fill, which hides older fragments'
    /// values of its place as the cell would. A stretch goes in records of
    /// at most the writer's buffer (a cell past it alone); stretches of one
    /// cell each, next to each other in their tile and a step apart in
    /// place, go in strided records ([`STRIDED`]).
    pub fn push_run(
        &mut self,
        frag: u32,
        stretches: &[Stretch],
        step: u64,
        tiles: &[Vec<Option<&DecodedTile>>],
        rejected: &[bool],
    ) -> Result<()> {
        let Some(first) = stretches.first() else {
            return Ok(());
        };
        let start = self.written;
        let mut out = match self.writer.take() {
            Some(w) => w,
            None => {
                let file = match &self.file {
                    Some(f) => Arc::clone(f),
                    None => {
                        let f = scratch::shared()?;
                        self.file = Some(Arc::clone(&f));
                        f
                    }
                };
                scratch::run_writer(file, start, self.buffer)
            }
        };
        let mut wrote = 0u64;
        let mut put = |bytes: &[u8]| -> Result<()> {
            out.write_all(bytes).map_err(QueryError::Spill)?;
            wrote = wrote.saturating_add(bytes.len() as u64);
            Ok(())
        };
        let fills = &self.fills;
        let mut scratch = Scratch::default();
        let mut row: Vec<Option<&DecodedTile>> = Vec::with_capacity(self.cols.len());
        let mut cell = 0usize;
        let mut i = 0usize;
        let mut strided_any = false;
        while let Some(s) = stretches.get(i) {
            let of_tile = tiles.get(s.tile as usize);
            row.clear();
            row.extend(
                (0..self.cols.len()).map(|k| of_tile.and_then(|r| r.get(k).copied().flatten())),
            );
            // Cells of one tile line, one a result line (no condition).
            let strided = (stretches.get(i..))
                .and_then(strided_cells)
                .filter(|_| rejected.is_empty());
            if let Some((cells, place_step)) = strided {
                let (n, body) =
                    self.record_cells(&row, fills, &[], s.pos, 1, cells, STRIDED_MOST)?;
                if n > 1 {
                    let whole = Stretch {
                        len: u32::try_from(n).unwrap_or(u32::MAX),
                        ..*s
                    };
                    let rec = (whole, 0, n, body);
                    let place_step = Some(place_step);
                    self.put_record(
                        &mut put,
                        (&row, fills, &[]),
                        rec,
                        1,
                        place_step,
                        &mut scratch,
                    )?;
                    strided_any = true;
                    let n = usize::try_from(n).unwrap_or(usize::MAX);
                    i = i.saturating_add(n);
                    cell = cell.saturating_add(n);
                    continue;
                }
            }
            let mut done = 0u64;
            let len = u64::from(s.len);
            while done < len {
                let left = len.saturating_sub(done);
                let rej = rejected.get(cell..).unwrap_or_default();
                let most = self.buffer as u64;
                let (n, body) =
                    self.record_cells(&row, fills, rej, s.at(done, step), step, left, most)?;
                let rej = rej.get(..n as usize).unwrap_or_default();
                let rec = (*s, done, n, body);
                self.put_record(&mut put, (&row, fills, rej), rec, step, None, &mut scratch)?;
                done = done.saturating_add(n);
                cell = cell.saturating_add(n as usize);
            }
            i = i.saturating_add(1);
        }
        self.written = self.written.saturating_add(wrote);
        self.writer = Some(out);
        let past = (stretches.iter())
            .map(|s| s.place.saturating_add(u64::from(s.len)))
            .max()
            .unwrap_or(first.place);
        // A run that follows the last one (the same fragment, places past
        // its last, bytes right after it) extends it: the next piece of
        // one tile's cells does, so runs are about one a tile, not one a
        // piece.
        match self.runs.last_mut() {
            Some(last) if last.frag == frag && last.end == start && last.past <= first.place => {
                last.end = self.written;
                last.past = past;
                last.strided |= strided_any;
            }
            _ => self.runs.push(Run {
                frag,
                start,
                end: self.written,
                place: first.place,
                past,
                skip: 0,
                level: 0,
                strided: strided_any,
            }),
        }
        self.bound_runs()?;
        Ok(())
    }

    /// Writes one record through `put`: `n` cells of stretch `s` from its
    /// cell `done` (`(s, done, n, body)`; positions `step` apart in its
    /// tile of `row`, `fills` where it has none), `body` bytes, `rejected`
    /// saying which hold fill. Their places go up one a cell, or by
    /// `place_step` (a strided record, [`STRIDED`]: its body starts with
    /// the step).
    fn put_record(
        &self,
        put: &mut impl FnMut(&[u8]) -> Result<()>,
        (row, fills, rejected): Cells<'_, '_>,
        (s, done, n, body): (Stretch, u64, u64, u64),
        step: u64,
        place_step: Option<u64>,
        scratch: &mut Scratch,
    ) -> Result<()> {
        let Scratch {
            segs,
            fill,
            gathered,
        } = scratch;
        // Runs of cells kept and of cells rejected.
        segs.clear();
        for (k, &r) in rejected.iter().enumerate() {
            match segs.last_mut() {
                Some((_, len, was)) if *was == r => *len = len.saturating_add(1),
                _ => segs.push((k as u64, 1, r)),
            }
        }
        if segs.is_empty() {
            segs.push((0, n, false));
        }
        let place = s.place.saturating_add(done);
        match place_step {
            Some(ps) => {
                put(&head(place, n | STRIDED, body.saturating_add(8))?)?;
                put(&ps.to_le_bytes())?;
            }
            None => put(&head(place, n, body)?)?,
        }
        for ((c, t), (cell, _)) in self.cols.iter().zip(row).zip(fills) {
            // A var-size field's lengths, then its bytes (a fixed-
            // size one's values in the first pass).
            let passes: &[bool] = match c.size {
                Some(_) => &[true],
                None => &[true, false],
            };
            for &lengths in passes {
                for &(from, len, rejected) in segs.iter() {
                    let at = s.at(done.saturating_add(from), step);
                    match (c.size, t.filter(|_| !rejected)) {
                        (Some(size), Some(t)) => put(values_of(
                            &t.fixed,
                            t.first,
                            (at, len, step),
                            size,
                            gathered,
                        )?)?,
                        (Some(_), None) => repeated(put, fill, cell, len)?,
                        (None, Some(t)) if step == 1 => {
                            let (offsets, data) = var_cells(t, at, len)?;
                            if !lengths {
                                put(data)?;
                                continue;
                            }
                            let base = offsets.first().copied().unwrap_or(0);
                            let ends = offsets.iter().skip(1).copied();
                            let ends = ends.chain([base.saturating_add(data.len() as u64)]);
                            for (&o, e) in offsets.iter().zip(ends) {
                                put(&e.saturating_sub(o).to_le_bytes())?;
                            }
                        }
                        (None, Some(t)) => {
                            // Across the cell order: a cell at a time.
                            for k in 0..len {
                                let at = at.saturating_add(k.saturating_mul(step));
                                let data = var_cells(t, at, 1)?.1;
                                match lengths {
                                    true => put(&(data.len() as u64).to_le_bytes())?,
                                    false => put(data)?,
                                }
                            }
                        }
                        (None, None) if lengths => {
                            let l = (cell.len() as u64).to_le_bytes();
                            repeated(put, fill, &l, len)?;
                        }
                        (None, None) => repeated(put, fill, cell, len)?,
                    }
                }
            }
        }
        for ((c, t), &(_, valid)) in self.cols.iter().zip(row).zip(fills) {
            if !c.nullable {
                continue;
            }
            for &(from, len, rejected) in segs.iter() {
                let at = s.at(done.saturating_add(from), step);
                let t = t.filter(|_| !rejected);
                match t.map(|t| (t.first, t.validity.as_deref())) {
                    Some((first, Some(v))) => {
                        put(values_of(v, first, (at, len, step), 1, gathered)?)?
                    }
                    // (A tile of the field without validity: valid.)
                    Some((_, None)) => repeated(put, fill, &[1], len)?,
                    None => repeated(put, fill, &[valid], len)?,
                }
            }
        }
        Ok(())
    }

    /// How many of the `left` cells from position `pos` of `row`'s tiles,
    /// `step` apart (`fills` where a tile is missing or `rejected` says
    /// so), one record holds, and its body's bytes: as many as fit `most`
    /// bytes (the writer's buffer), at least one.
    #[allow(clippy::too_many_arguments)]
    fn record_cells(
        &self,
        row: &[Option<&DecodedTile>],
        fills: &[(Vec<u8>, u8)],
        rejected: &[bool],
        pos: u64,
        step: u64,
        left: u64,
        most: u64,
    ) -> Result<(u64, u64)> {
        let fixed = self.fixed_bytes().max(1);
        let cap = left.min(STRIDED.saturating_sub(1));
        if self.cols.iter().all(|c| c.size.is_some()) {
            let n = (most.checked_div(fixed).unwrap_or(1)).clamp(1, cap.max(1));
            return Ok((n, n.saturating_mul(fixed)));
        }
        let (mut n, mut body) = (0u64, 0u64);
        while n < cap {
            let gone = rejected.get(n as usize).copied().unwrap_or(false);
            let mut cell = fixed;
            for ((c, t), f) in self.cols.iter().zip(row).zip(fills) {
                let len = match (c.size, t.filter(|_| !gone)) {
                    (Some(_), _) => 0,
                    (None, Some(t)) => {
                        let at = pos.saturating_add(n.saturating_mul(step));
                        var_cells(t, at, 1)?.1.len() as u64
                    }
                    (None, None) => f.0.len() as u64,
                };
                cell = cell.saturating_add(len);
            }
            if n > 0 && body.saturating_add(cell) > most {
                break;
            }
            body = body.saturating_add(cell);
            n = n.saturating_add(1);
        }
        Ok((n, body))
    }

    /// The runs handed out over `bx`'s places, `cells` a batch; runs
    /// merged first through `memory` bytes where too many meet at a place
    /// ([`levels`]).
    pub fn merge(mut self, bx: DenseBox, cells: usize, memory: usize) -> Result<StretchMerge> {
        self.merge_down(cells, memory)?;
        self.written_out()?;
        // By their first places, as windows come to them.
        self.runs.sort_by_key(|r| r.place);
        let bufs = vec![(Vec::new(), 0); self.runs.len()];
        // A window's cells take the batch's share; the runs' reads the rest.
        let window = (cells as u64).saturating_mul(self.cell_guess());
        let reading = ((memory as u64).saturating_sub(window)).max(self.reading_least as u64);
        Ok(StretchMerge {
            st: self,
            bx,
            cells: cells.max(1),
            bufs,
            reading: usize::try_from(reading).unwrap_or(usize::MAX),
            read: 0,
            read_most: StretchMerge::READ_MOST,
            live: Vec::new(),
            reached: 0,
        })
    }
}

/// Where a record's cells come from: per held field its decoded tile (or
/// none), per held field a cell of its fill and whether it is valid, and
/// per cell whether the condition rejects it.
type Cells<'r, 't> = (
    &'r [Option<&'t DecodedTile>],
    &'r [(Vec<u8>, u8)],
    &'r [bool],
);

/// Buffers a run's records are written through: runs of cells kept and
/// rejected, fill, values gathered across the cell order.
#[derive(Default)]
struct Scratch {
    segs: Vec<(u64, u64, bool)>,
    fill: Vec<u8>,
    gathered: Vec<u8>,
}

/// Where `stretches` start with two or more of one cell each, next to each
/// other in one tile and a step of more than one apart in place (a piece's
/// part of a tile line read across the cell order): how many, and the
/// step.
fn strided_cells(stretches: &[Stretch]) -> Option<(u64, u64)> {
    let (a, b) = (stretches.first()?, stretches.get(1)?);
    let step = b.place.checked_sub(a.place).filter(|&s| s > 1)?;
    let mut n = 0u64;
    for s in stretches {
        let place = n.checked_mul(step).and_then(|d| a.place.checked_add(d));
        let pos = a.pos.checked_add(n);
        if s.len != 1 || s.tile != a.tile || Some(s.place) != place || Some(s.pos) != pos {
            break;
        }
        n = n.saturating_add(1);
    }
    (n > 1).then_some((n, step))
}

/// `cell` `n` times through `put`, a block of cells at a time in `fill`.
fn repeated(
    put: &mut impl FnMut(&[u8]) -> Result<()>,
    fill: &mut Vec<u8>,
    cell: &[u8],
    n: u64,
) -> Result<()> {
    let mut left = n;
    while left > 0 {
        let m = left.min(FILL_BLOCK);
        fill.clear();
        for _ in 0..m {
            fill.extend_from_slice(cell);
        }
        put(fill)?;
        left = left.saturating_sub(m);
    }
    Ok(())
}

/// `n` cells of `size` bytes from position `pos` of `bytes`, `step`
/// apart (`(pos, n, step)`), whose first cell is the tile's `first`: in
/// place where they lie back to back, else gathered into `gathered`.
fn values_of<'a>(
    bytes: &'a [u8],
    first: u64,
    (pos, n, step): (u64, u64, u64),
    size: usize,
    gathered: &'a mut Vec<u8>,
) -> Result<&'a [u8]> {
    let past = || QueryError::invalid("a spilled stretch past its decoded tile");
    let at = |pos: u64| {
        pos.checked_sub(first)
            .and_then(|c| c.checked_mul(size as u64))
            .and_then(|a| usize::try_from(a).ok())
            .ok_or_else(past)
    };
    let len = (n.checked_mul(size as u64))
        .and_then(|l| usize::try_from(l).ok())
        .ok_or_else(past)?;
    let a = at(pos)?;
    if step == 1 || n <= 1 {
        return bytes
            .get(a..a.checked_add(len).ok_or_else(past)?)
            .ok_or_else(past);
    }
    let stride = (step.checked_mul(size as u64))
        .and_then(|s| usize::try_from(s).ok())
        .ok_or_else(past)?;
    gathered.clear();
    gathered.reserve(len);
    // The last cell's end bounds every cell's.
    let last = (stride.checked_mul(usize::try_from(n.saturating_sub(1)).unwrap_or(usize::MAX)))
        .and_then(|o| a.checked_add(o)?.checked_add(size))
        .ok_or_else(past)?;
    let cells = bytes.get(a..last).ok_or_else(past)?;
    // Cells of a fixed width copied as values, not through `memcpy`
    // calls (a block's stretches gather a few cells a column apart).
    match size {
        1 => gathered.extend(cells.iter().step_by(stride)),
        4 => gather::<4>(cells, stride, gathered),
        8 => gather::<8>(cells, stride, gathered),
        _ => {
            for cell in cells.chunks(stride) {
                gathered.extend_from_slice(cell.get(..size).ok_or_else(past)?);
            }
        }
    }
    Ok(gathered)
}

/// Cells of `N` bytes `stride` apart from the start of `cells` (which ends
/// with the last), appended to `out`.
fn gather<const N: usize>(cells: &[u8], stride: usize, out: &mut Vec<u8>) {
    for cell in cells.chunks(stride) {
        if let Some(c) = cell.first_chunk::<N>() {
            out.extend_from_slice(c);
        }
    }
}

/// The offsets of var-size cells `pos..pos + n` of `t` and the bytes they
/// hold (back to back in the tile).
fn var_cells(t: &DecodedTile, pos: u64, n: u64) -> Result<(&[u64], &[u8])> {
    let past = || QueryError::invalid("a spilled stretch past its decoded tile");
    let a = usize::try_from(pos.checked_sub(t.first).ok_or_else(past)?).map_err(|_| past())?;
    let b = a
        .checked_add(usize::try_from(n).map_err(|_| past())?)
        .ok_or_else(past)?;
    let offsets = t.offsets.get(a..b).ok_or_else(past)?;
    let start = offsets.first().map_or(0, |&o| o as usize);
    let end = t.offsets.get(b).map_or(t.var.len(), |&o| o as usize);
    let data = t.var.get(start..end).ok_or_else(past)?;
    Ok((offsets, data))
}

/// The runs' records handed out a window of places at a time.
pub(crate) struct StretchMerge {
    st: Stretches,
    bx: DenseBox,
    cells: usize,
    /// Per run, bytes of the file read for it and where they start, kept
    /// from one window to the next: a window takes a few records of each
    /// live run, and reading each run's share afresh every window (a
    /// record or two more read again each time, and at least 4 KiB)
    /// read W2 4096² col-major's 64 MB 9.6 times over under 16 KiB.
    bufs: Vec<(Vec<u8>, u64)>,
    /// Bytes the runs' buffers hold together at most, beside a window.
    reading: usize,
    /// Bytes the windows read from the file so far (each run's once, but
    /// a record cut by its buffer's end: logged at the end).
    read: u64,
    /// [`StretchMerge::READ_MOST`] (less in tests).
    read_most: usize,
    /// The runs a window reached and that are not yet out, older fragments
    /// first: a newer one's record then overwrites theirs (a fragment's
    /// own runs never share a place). A window looks at these alone, not
    /// at every run (a read of many runs and windows would go quadratic).
    live: Vec<usize>,
    /// Runs (by first place) a window has reached.
    reached: usize,
}

impl StretchMerge {
    /// Bytes a read of the file takes at most, but for a record past it.
    const READ_MOST: usize = 1 << 20;

    /// The next window of the box's places as a batch of `fields`
    /// (validity as bits with `packed`), `None` once every cell is out.
    /// A fixed-size field's values go into the caller's `recycled` buffer
    /// of it (`Reader::recycle`), whose pages are the process's already.
    pub fn next_batch(
        &mut self,
        fields: &[FieldInfo],
        packed: bool,
        recycled: Vec<FieldBuffer>,
    ) -> Result<Option<Batch>> {
        let Some(first) = self.bx.place() else {
            tracing::debug!(bytes = self.read, "windows read the spilled stretches");
            return Ok(None);
        };
        let w = usize::try_from(self.bx.left().min(self.cells as u64))
            .map_err(|_| QueryError::invalid("a window past memory"))?;
        let end = first.saturating_add(w as u64);
        // Per held field, the recycled buffer of its first request.
        let mut spare: Vec<Vec<u8>> = vec![Vec::new(); self.st.cols.len()];
        for (b, &o) in recycled.into_iter().zip(&self.st.out) {
            let Out::Col(k) = o else { continue };
            let named = (self.st.cols.get(k))
                .and_then(|c| fields.get(c.slot))
                .is_some_and(|f| f.name == b.name && !f.is_var());
            if let (true, Some(s)) = (named, spare.get_mut(k)) {
                if s.capacity() == 0 {
                    *s = b.data;
                }
            }
        }
        let mut held: Vec<Held> = (self.st.cols.iter().zip(spare))
            .map(|(c, buf)| match c.size {
                Some(size) => Held::Fixed(zeroed(buf, w.saturating_mul(size))),
                None => Held::Var(Vec::new(), vec![None; w]),
            })
            .collect();
        let mut valid: Vec<Vec<u8>> = (self.st.cols.iter())
            .map(|c| if c.nullable { vec![0u8; w] } else { Vec::new() })
            .collect();
        // The slots runs wrote, a range a record.
        let mut covered: Vec<Range<usize>> = Vec::new();
        let runs = &self.st.runs;
        let before = self.reached;
        while (runs.get(self.reached)).is_some_and(|r| r.place < end) {
            self.live.push(self.reached);
            self.reached = self.reached.saturating_add(1);
        }
        if self.reached > before {
            self.live
                .sort_by_key(|&r| (runs.get(r).map_or(0, |r| r.frag), r));
        }
        let active = (self.live.iter())
            .filter(|&&r| {
                runs.get(r)
                    .is_some_and(|r| r.start < r.end && r.place < end)
            })
            .count();
        // Each run reads at once its share of the window or of the
        // reading memory, whichever is more (and a record whole).
        let take = (w as u64)
            .saturating_mul(self.st.cell_guess())
            .checked_div(active.max(1) as u64)
            .unwrap_or(0);
        let room = (self.reading.checked_div(self.live.len().max(1))).unwrap_or(0) as u64;
        let share = usize::try_from(take.max(room).max(levels::READ_LEAST as u64))
            .unwrap_or(usize::MAX)
            .min(self.read_most);
        let file = self.st.file.clone();
        for k in 0..self.live.len() {
            let Some(&r) = self.live.get(k) else {
                break;
            };
            let Some(run) = self.st.runs.get(r) else {
                break;
            };
            if run.start >= run.end || run.place >= end {
                continue;
            }
            let file = (file.as_ref())
                .ok_or_else(|| QueryError::invalid("spilled stretches without their file"))?;
            self.take_run(
                r,
                file,
                (first, end),
                share,
                &mut held,
                &mut valid,
                &mut covered,
            )?;
        }
        let (runs, bufs) = (&self.st.runs, &mut self.bufs);
        self.live.retain(|&r| {
            let on = runs.get(r).is_some_and(|r| r.start < r.end);
            if let (false, Some(b)) = (on, bufs.get_mut(r)) {
                *b = (Vec::new(), 0);
            }
            on
        });
        // Fill where no run wrote (mostly nowhere: the gaps between the
        // ranges written, not a flag a slot); a dimension's value from the
        // box.
        covered.sort_unstable_by_key(|r| r.start);
        let mut gaps: Vec<Range<usize>> = Vec::new();
        let mut next = 0usize;
        for r in covered.iter().chain([&(w..w)]) {
            if next < r.start {
                gaps.push(next..r.start);
            }
            next = next.max(r.end);
        }
        let mut out = Vec::with_capacity(self.st.out.len());
        let mut coords = vec![0i128; self.bx.dims()];
        let mut bytes = Vec::with_capacity(8);
        for (n, &o) in self.st.out.iter().enumerate() {
            let slot = match o {
                Out::Col(k) => self.st.cols.get(k).map_or(usize::MAX, |c| c.slot),
                Out::Dim(_, slot) => slot,
            };
            let f = (fields.get(slot))
                .ok_or_else(|| QueryError::invalid(format!("no field in slot {slot}")))?;
            let mut b = f.empty_buffer();
            let k = match o {
                Out::Dim(d, _) => {
                    b.data.reserve_exact(w.saturating_mul(f.cell_size()));
                    for c in 0..w as u64 {
                        (self.bx.coords(first.saturating_add(c), &mut coords))
                            .ok_or_else(|| QueryError::invalid("a cell outside the subarray"))?;
                        self.bx.coord_bytes(&coords, d, &mut bytes);
                        b.data.extend_from_slice(&bytes);
                    }
                    out.push(b);
                    continue;
                }
                Out::Col(k) => k,
            };
            // Several requests of one field share its values: the last
            // takes them, earlier ones a copy.
            let later = (self.st.out.iter().skip(n.saturating_add(1)))
                .any(|&x| matches!(x, Out::Col(j) if j == k));
            let (h, mut v) = match (later, held.get_mut(k), valid.get_mut(k)) {
                (_, None, _) | (_, _, None) => {
                    return Err(QueryError::invalid("a requested field not held"));
                }
                (true, Some(h), Some(v)) => (h.clone_held(), v.clone()),
                (false, Some(h), Some(v)) => (
                    std::mem::replace(h, Held::Fixed(Vec::new())),
                    std::mem::take(v),
                ),
            };
            for g in &gaps {
                if let Some(v) = v.get_mut(g.clone()) {
                    v.fill(f.fill_validity);
                }
            }
            match h {
                Held::Fixed(mut data) => {
                    let size = self.st.cols.get(k).and_then(|c| c.size).unwrap_or(0);
                    for c in gaps.iter().flat_map(Clone::clone) {
                        let at = c.saturating_mul(size);
                        let dst = data.get_mut(at..at.saturating_add(size));
                        if let Some(dst) = dst.filter(|d| d.len() == f.fill.len()) {
                            dst.copy_from_slice(&f.fill);
                        }
                    }
                    b.data = data;
                }
                Held::Var(arena, spans) => {
                    // (A slot no run wrote holds no span: fill.)
                    let total = (spans.iter())
                        .map(|s| s.as_ref().map_or(f.fill.len(), |s| s.len()))
                        .fold(0usize, usize::saturating_add);
                    b.data.reserve_exact(total);
                    let mut offsets = Vec::with_capacity(w);
                    for span in spans {
                        offsets.push(b.data.len() as u64);
                        match span.and_then(|s| arena.get(s)) {
                            Some(bytes) => b.data.extend_from_slice(bytes),
                            None => b.data.extend_from_slice(&f.fill),
                        }
                    }
                    b.offsets = Some(offsets);
                }
            }
            if let Some(validity) = &mut b.validity {
                *validity = Validity::of_bytes(std::mem::take(&mut v), packed);
            }
            out.push(b);
        }
        self.bx.advance(w as u64);
        Ok((w > 0).then_some(Batch {
            num_cells: w as u64,
            fields: out,
        }))
    }

    /// Run `r`'s records in the window `first..end` copied to their
    /// places, read through reads of about `share` bytes.
    #[allow(clippy::too_many_arguments)]
    fn take_run(
        &mut self,
        r: usize,
        file: &Arc<File>,
        (first, end): (u64, u64),
        share: usize,
        held: &mut [Held],
        valid: &mut [Vec<u8>],
        covered: &mut Vec<Range<usize>>,
    ) -> Result<()> {
        let cols = &self.st.cols;
        let read_bytes = &mut self.read;
        let (Some(run), Some((buf, buf_at))) = (self.st.runs.get_mut(r), self.bufs.get_mut(r))
        else {
            return Ok(());
        };
        let (mut at, run_end, mut skip) = (run.start, run.end, run.skip);
        let mut next_place = run.place;
        let cut = || QueryError::invalid("a spilled stretch cut short");
        while at < run_end {
            let head = read(
                (buf, buf_at, &mut *read_bytes),
                file,
                at,
                HEAD,
                share,
                run_end,
            )?;
            let (place, len, body, strided) = parse_head(head)?;
            if !strided {
                next_place = place.saturating_add(skip);
                if next_place >= end {
                    break;
                }
            } else if body > STRIDED_MOST.saturating_add(8) {
                return Err(QueryError::invalid("a strided stretch's head is corrupt"));
            }
            let whole = HEAD.saturating_add(body);
            let rec = read(
                (buf, buf_at, &mut *read_bytes),
                file,
                at,
                whole,
                share,
                run_end,
            )?;
            let rec = rec.get(HEAD as usize..).ok_or_else(cut)?;
            if strided {
                // Its cells in the window, a slot each.
                let st = levels::Strided::new(cols, place, len, rec.to_vec())?;
                while skip < st.cells() && st.place_of(skip) < end {
                    let slot = (st.place_of(skip).checked_sub(first))
                        .and_then(|s| usize::try_from(s).ok())
                        .ok_or_else(|| QueryError::invalid("a spilled stretch out of order"))?;
                    for (k, (h, v)) in held.iter_mut().zip(valid.iter_mut()).enumerate() {
                        let (value, ok) = st.value(cols, k, skip)?;
                        match h {
                            Held::Fixed(data) => {
                                let to = slot.saturating_mul(value.len());
                                let dst = data.get_mut(to..to.saturating_add(value.len()));
                                dst.ok_or_else(cut)?.copy_from_slice(value);
                            }
                            Held::Var(arena, spans) => {
                                let span = spans.get_mut(slot).ok_or_else(cut)?;
                                *span = Some(arena.len()..arena.len().saturating_add(value.len()));
                                arena.extend_from_slice(value);
                            }
                        }
                        if let Some(ok) = ok {
                            *v.get_mut(slot).ok_or_else(cut)? = ok;
                        }
                    }
                    covered.push(slot..slot.saturating_add(1));
                    skip = skip.saturating_add(1);
                }
                next_place = st.place_of(skip);
                if skip < st.cells() {
                    break;
                }
                at = at.saturating_add(whole);
                skip = 0;
                continue;
            }
            let from = usize::try_from(
                next_place
                    .checked_sub(first)
                    .ok_or_else(|| QueryError::invalid("a spilled stretch out of order"))?,
            )
            .map_err(|_| cut())?;
            let take = len.saturating_sub(skip).min(end.saturating_sub(next_place));
            let (skip_n, take_n, len_n) = (
                usize::try_from(skip).map_err(|_| cut())?,
                usize::try_from(take).map_err(|_| cut())?,
                usize::try_from(len).map_err(|_| cut())?,
            );
            // Each held field's cells (a var-size one's lengths, then its
            // bytes), then each nullable one's validity.
            let mut off = 0usize;
            for (c, h) in cols.iter().zip(held.iter_mut()) {
                match (c.size, h) {
                    (Some(size), Held::Fixed(data)) => {
                        let src = off.saturating_add(skip_n.saturating_mul(size));
                        let n = take_n.saturating_mul(size);
                        let to = from.saturating_mul(size);
                        let dst = data.get_mut(to..to.saturating_add(n)).ok_or_else(cut)?;
                        dst.copy_from_slice(rec.get(src..src.saturating_add(n)).ok_or_else(cut)?);
                        off = off.saturating_add(len_n.saturating_mul(size));
                    }
                    (None, Held::Var(arena, spans)) => {
                        let lens = rec.get(off..off.saturating_add(len_n.saturating_mul(8)));
                        let lens = lens.ok_or_else(cut)?;
                        let mut data = off.saturating_add(lens.len());
                        for (i, l) in lens.chunks_exact(8).enumerate() {
                            let l = u64::from_le_bytes(l.try_into().map_err(|_| cut())?);
                            let l = usize::try_from(l).map_err(|_| cut())?;
                            if (skip_n..skip_n.saturating_add(take_n)).contains(&i) {
                                let bytes =
                                    rec.get(data..data.saturating_add(l)).ok_or_else(cut)?;
                                let slot = from.saturating_add(i.saturating_sub(skip_n));
                                let span = spans.get_mut(slot).ok_or_else(cut)?;
                                *span = Some(arena.len()..arena.len().saturating_add(l));
                                arena.extend_from_slice(bytes);
                            }
                            data = data.saturating_add(l);
                        }
                        off = data;
                    }
                    _ => return Err(QueryError::invalid("a held field of two shapes")),
                }
            }
            for (_, v) in cols
                .iter()
                .zip(valid.iter_mut())
                .filter(|(c, _)| c.nullable)
            {
                let src = off.saturating_add(skip_n);
                let dst = v
                    .get_mut(from..from.saturating_add(take_n))
                    .ok_or_else(cut)?;
                dst.copy_from_slice(rec.get(src..src.saturating_add(take_n)).ok_or_else(cut)?);
                off = off.saturating_add(len_n);
            }
            covered.push(from..from.saturating_add(take_n));
            if skip.saturating_add(take) < len {
                skip = skip.saturating_add(take);
                next_place = place.saturating_add(skip);
                break;
            }
            at = at.saturating_add(whole);
            skip = 0;
            next_place = place.saturating_add(len);
        }
        run.start = at;
        run.skip = skip;
        run.place = next_place;
        Ok(())
    }
}

impl Held {
    /// A copy, for a field asked for again.
    fn clone_held(&self) -> Held {
        match self {
            Held::Fixed(data) => Held::Fixed(data.clone()),
            Held::Var(arena, spans) => Held::Var(arena.clone(), spans.clone()),
        }
    }
}

/// A record's head: its first place, cells and body bytes, and whether it
/// is strided ([`STRIDED`]).
fn parse_head(head: &[u8]) -> Result<(u64, u64, u64, bool)> {
    let word = |r: Range<usize>| head.get(r).and_then(|b| b.try_into().ok());
    let cells = head.get(8..12).and_then(|b| b.try_into().ok());
    match (word(0..8), cells, word(12..20)) {
        (Some(p), Some(n), Some(b)) => {
            let n = u64::from(u32::from_le_bytes(n));
            Ok((
                u64::from_le_bytes(p),
                n & !STRIDED,
                u64::from_le_bytes(b),
                n & STRIDED != 0,
            ))
        }
        _ => Err(QueryError::invalid("a spilled stretch's head cut short")),
    }
}

/// The head of a record of `cells` cells (below 2^31: records are cut
/// there; [`STRIDED`] set for a strided one) from `place` whose body holds
/// `body` bytes.
fn head(place: u64, cells: u64, body: u64) -> Result<[u8; HEAD as usize]> {
    let cells = u32::try_from(cells)
        .map_err(|_| QueryError::invalid("a spilled stretch of over 2^32 cells"))?;
    let mut h = [0u8; HEAD as usize];
    h[..8].copy_from_slice(&place.to_le_bytes());
    h[8..12].copy_from_slice(&cells.to_le_bytes());
    h[12..].copy_from_slice(&body.to_le_bytes());
    Ok(h)
}

/// `n` bytes of `file` from `at`, from `buf` (holding the file's bytes from
/// `buf_at`) where it has them, else read into it with at least `share`
/// bytes (not past `limit`), counted in `read`.
fn read<'b>(
    (buf, buf_at, read): (&'b mut Vec<u8>, &mut u64, &mut u64),
    file: &Arc<File>,
    at: u64,
    n: u64,
    share: usize,
    limit: u64,
) -> Result<&'b [u8]> {
    let have = at >= *buf_at && at.saturating_add(n) <= buf_at.saturating_add(buf.len() as u64);
    if !have {
        let left = usize::try_from(limit.saturating_sub(at)).unwrap_or(usize::MAX);
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        if n > left {
            return Err(QueryError::invalid("a spilled stretch past its run"));
        }
        let want = n.max(share).min(left);
        // (A run's buffer follows its share down as more runs go live.)
        if buf.capacity() > want.saturating_mul(2) {
            *buf = Vec::new();
        }
        buf.resize(want, 0);
        let mut reader = At::new(Arc::clone(file), at, limit);
        std::io::Read::read_exact(&mut reader, buf).map_err(QueryError::Spill)?;
        *buf_at = at;
        *read = read.saturating_add(buf.len() as u64);
    }
    let from = usize::try_from(at.saturating_sub(*buf_at)).unwrap_or(usize::MAX);
    buf.get(from..from.saturating_add(n as usize))
        .ok_or_else(|| QueryError::invalid("a spilled stretch past its read"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_format::{ArrayType, Datatype};
    use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};

    /// Slots: x (a dimension), a (int32, fill 7), n (a nullable pair of
    /// int16s, fill (-3, 4) and null), s (a nullable string, fill "zz").
    fn fields() -> Vec<FieldInfo> {
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dimension(DimensionBuilder::range("x", 0i32..=99).tile_extent(100i32))
            .attribute(AttributeBuilder::new("a", Datatype::Int32).fill(7i32))
            .attribute(
                AttributeBuilder::new("n", Datatype::Int16)
                    .cell_val_num(2)
                    .nullable(true)
                    .fill_bytes([(-3i16).to_le_bytes(), 4i16.to_le_bytes()].concat()),
            )
            .attribute(
                AttributeBuilder::new("s", Datatype::StringUtf8)
                    .var()
                    .nullable(true)
                    .fill_bytes(b"zz".to_vec()),
            )
            .build()
            .unwrap();
        ["x", "a", "n", "s"]
            .iter()
            .map(|n| FieldInfo::resolve(&schema, n).unwrap())
            .collect()
    }

    /// A decoded tile of `cells` cells of `size` bytes from position
    /// `first`, cell `p` holding `tag + p` in each of its bytes' pairs;
    /// validity alternating.
    fn tile(first: u64, cells: u64, size: usize, tag: u16, nullable: bool) -> DecodedTile {
        let mut fixed = Vec::new();
        for p in first..first + cells {
            let v = (tag + p as u16).to_le_bytes();
            for _ in 0..size / 2 {
                fixed.extend_from_slice(&v);
            }
        }
        DecodedTile {
            fixed,
            validity: nullable.then(|| (first..first + cells).map(|p| (p % 2) as u8).collect()),
            first,
            ..DecodedTile::default()
        }
    }

    /// The string of cell `p` of a tile tagged `tag` (empty for every
    /// fourth).
    fn text(tag: u16, p: u64) -> String {
        format!("{tag}:{p}").repeat((p % 4) as usize)
    }

    /// A decoded var-size tile of `cells` cells from position `first`:
    /// cell `p` holds [`text`], valid unless `p` is a multiple of 3.
    fn var_tile(first: u64, cells: u64, tag: u16) -> DecodedTile {
        let (mut offsets, mut var) = (Vec::new(), Vec::new());
        for p in first..first + cells {
            offsets.push(var.len() as u64);
            var.extend_from_slice(text(tag, p).as_bytes());
        }
        DecodedTile {
            offsets,
            var,
            validity: Some(
                (first..first + cells)
                    .map(|p| u8::from(p % 3 != 0))
                    .collect(),
            ),
            first,
            ..DecodedTile::default()
        }
    }

    /// One place's newest cell: a, n, n's validity, s, s's validity.
    type Want = Option<(u16, u16, u8, String, u8)>;

    /// A merge down of many rounds (two runs at a time, runs far larger
    /// than the reads through them) writes each round over the file the
    /// round before read, and hands every cell out in its place.
    #[test]
    fn rounds_of_a_merge_down_write_over_the_file_the_last_one_read() {
        let fields = fields();
        let requested = [1, 0, 2, 3];
        let (rows, cols) = (24u64, 400u64);
        let mut st = rows_pushed(&fields, &requested, (rows, cols));
        assert_eq!(st.runs.len(), rows as usize);
        st.written_out().unwrap();
        let pieces_file = std::os::fd::AsRawFd::as_raw_fd(&**st.file.as_ref().unwrap());
        let bx = col_major_box(rows, cols);
        // 24 runs, 8 meeting at most for the windows (4 KiB, 512 bytes
        // a run), merged two at a time: into 12, then 6, the second round
        // written over the pieces' file.
        st.reading_least = 0;
        let mut merge = st.merge(bx, 1, 4 << 10).unwrap();
        assert_eq!(merge.st.runs.len(), 6);
        let file = std::os::fd::AsRawFd::as_raw_fd(&**merge.st.file.as_ref().unwrap());
        assert_eq!(file, pieces_file);
        let got = drained(&mut merge, &fields);
        assert_eq!(got.num_cells, rows * cols);
        let (a, s) = (&got.fields[0], &got.fields[3]);
        let offsets = s.offsets.clone().unwrap();
        for p in 0..(rows * cols) as usize {
            let (c, r) = (p as u64 / rows, p as u64 % rows);
            let q = r * cols + c;
            let want = [(100 + q as u16).to_le_bytes(); 2].concat();
            assert_eq!(&a.data[p * 4..p * 4 + 4], &want[..], "place {p}");
            let end = offsets.get(p + 1).map_or(s.data.len(), |&e| e as usize);
            let got = String::from_utf8(s.data[offsets[p] as usize..end].to_vec()).unwrap();
            assert_eq!(got, text(800, q), "place {p}");
        }
    }

    /// Under a small memory pieces write their runs through
    /// [`scratch::WRITING_LEAST`] and a merge down reads them through
    /// [`scratch::READING_LEAST`] (both outside the budget), so it merges
    /// them in one wide round where the memory's own share, 512 bytes a
    /// run, took several narrow ones; the cells come out the same.
    #[test]
    fn a_merge_down_under_a_small_memory_takes_one_wide_round() {
        let fields = fields();
        let requested = [1, 0, 2, 3];
        let (rows, cols) = (300u64, 16u64);
        let mut outs = Vec::new();
        for least in [0, scratch::READING_LEAST] {
            let mut st = rows_pushed(&fields, &requested, (rows, cols));
            // Written through the scratch writes' floor, not the 4 KiB given.
            let writer = st.writer.as_ref().map(BufWriter::capacity);
            assert_eq!(writer, Some(scratch::WRITING_LEAST));
            st.reading_least = least;
            let mut merge = st.merge(col_major_box(rows, cols), 64, 4 << 10).unwrap();
            match least {
                0 => assert!(merge.st.rounds >= 3, "{} rounds", merge.st.rounds),
                _ => assert_eq!(merge.st.rounds, 1),
            }
            assert!(merge.st.runs.len() <= levels::LIVE_LEAST);
            let got = drained(&mut merge, &fields);
            assert_eq!(got.num_cells, rows * cols);
            outs.push(got);
        }
        assert_eq!(outs[0], outs[1]);
        // Two fragments' runs side by side, windows of 19 runs' worth: the
        // round is wide enough that both fragments' groups fit them
        // (groups of 32, `runs / live` rounded up, left 20: a second round
        // of every cell).
        let decoded = one_tile(rows * cols);
        let by_tile = vec![decoded.iter().map(Some).collect::<Vec<_>>()];
        let mut st = Stretches::new(&fields, &requested, 4 << 10).unwrap();
        for frag in [0, 1] {
            for r in 0..rows {
                let stretches = row_across(r, 0..cols, (rows, cols));
                st.push_run(frag, &stretches, cols, &by_tile, &[]).unwrap();
            }
        }
        let window = 19 * 32;
        let mut merge = st
            .merge(col_major_box(rows, cols), window, 4 << 10)
            .unwrap();
        assert_eq!(merge.st.rounds, 1);
        assert!(merge.st.runs.len() <= 19, "{} runs", merge.st.runs.len());
        let got = drained(&mut merge, &fields);
        assert_eq!(got, outs[0]);
    }

    /// Runs of stretches of several cells (bands of 8 rows across the
    /// order, as blocks make them) are read by windows of 200 cells as they
    /// are where 40 meet at a place (5 cells a run a window); runs of a
    /// row, whose strided records windows take apart a cell at a time, are
    /// merged down first. The cells are the same.
    #[test]
    fn runs_of_stretches_meet_in_windows_unmerged() {
        let fields = fields();
        let requested = [1, 0, 2, 3];
        let (rows, cols, band) = (320u64, 16u64, 8u64);
        let decoded = one_tile(rows * cols);
        let by_tile = vec![decoded.iter().map(Some).collect::<Vec<_>>()];
        let mut st = Stretches::new(&fields, &requested, 4 << 10).unwrap();
        for b in 0..rows / band {
            let stretches: Vec<Stretch> = (0..cols)
                .map(|c| Stretch {
                    place: c * rows + b * band,
                    pos: b * band * cols + c,
                    len: band as u32,
                    tile: 0,
                })
                .collect();
            st.push_run(0, &stretches, cols, &by_tile, &[]).unwrap();
        }
        let mut outs = Vec::new();
        for st in [st, rows_pushed(&fields, &requested, (rows, cols))] {
            let strided = st.runs.iter().any(|r| r.strided);
            let mut merge = st.merge(col_major_box(rows, cols), 200, 4 << 10).unwrap();
            match strided {
                false => assert_eq!(merge.st.rounds, 0),
                true => assert!(merge.st.rounds >= 1),
            }
            let got = drained(&mut merge, &fields);
            assert_eq!(got.num_cells, rows * cols);
            outs.push(got);
        }
        assert_eq!(outs[0], outs[1]);
    }

    /// Every batch `merge` hands out, joined.
    fn drained(merge: &mut StretchMerge, fields: &[FieldInfo]) -> crate::Batch {
        let mut got = crate::Batch::default();
        while let Some(b) = merge.next_batch(fields, false, Vec::new()).unwrap() {
            got.append(&b);
        }
        got
    }

    /// One fragment's tile of `rows` × `cols` cells ([`one_tile`]) pushed
    /// a row at a time across the order ([`row_across`]): a run a row.
    fn rows_pushed(
        fields: &[FieldInfo],
        requested: &[usize],
        (rows, cols): (u64, u64),
    ) -> Stretches {
        let decoded = one_tile(rows * cols);
        let by_tile = vec![decoded.iter().map(Some).collect::<Vec<_>>()];
        let mut st = Stretches::new(fields, requested, 4 << 10).unwrap();
        for r in 0..rows {
            let stretches = row_across(r, 0..cols, (rows, cols));
            st.push_run(0, &stretches, cols, &by_tile, &[]).unwrap();
        }
        st
    }

    /// One fragment's tile of `cells` cells for [`fields`]' held fields:
    /// a (tag 100), n (600), s (800).
    fn one_tile(cells: u64) -> [DecodedTile; 3] {
        [
            tile(0, cells, 4, 100, false),
            tile(0, cells, 4, 600, true),
            var_tile(0, cells, 800),
        ]
    }

    /// The box of `rows` × `cols` places, read col-major.
    fn col_major_box(rows: u64, cols: u64) -> DenseBox {
        DenseBox::new(
            &[vec![(0, rows as i128 - 1)], vec![(0, cols as i128 - 1)]],
            true,
            vec![Datatype::Int32; 2],
        )
        .unwrap()
    }

    /// The cells `cs` of row `row` of a row-major tile of `(rows, cols)`
    /// read col-major: a stretch of one cell each, a column apart.
    fn row_across(row: u64, cs: Range<u64>, (rows, cols): (u64, u64)) -> Vec<Stretch> {
        cs.map(|c| Stretch {
            place: c * rows + row,
            pos: row * cols + c,
            len: 1,
            tile: 0,
        })
        .collect()
    }

    /// A run of strided records that nothing else meets is read by the
    /// windows as it is, its records' cells each to its place, a record
    /// across windows resumed where the last one stopped; one whose body
    /// does not hold its cells is an error.
    #[test]
    fn windows_read_strided_runs_a_cell_a_place() {
        let fields = fields();
        let requested = [1, 0, 2, 3];
        let (rows, cols) = (5u64, 6u64);
        let decoded = one_tile(rows * cols);
        let by_tile = vec![decoded.iter().map(Some).collect::<Vec<_>>()];
        // Row 2's cells, one a column of the col-major result.
        let row = 2u64;
        let stretches = row_across(row, 0..cols, (rows, cols));
        let push = || {
            let mut st = Stretches::new(&fields, &requested, 4 << 10).unwrap();
            st.push_run(0, &stretches, cols, &by_tile, &[]).unwrap();
            assert!(st.runs.len() == 1 && st.runs[0].strided);
            st
        };
        let bx = || col_major_box(rows, cols);
        for window in [1000, 4, 1] {
            let mut merge = push().merge(bx(), window, 1 << 20).unwrap();
            assert!(merge.st.runs[0].strided, "windows of {window}: merged down");
            let got = drained(&mut merge, &fields);
            assert_eq!(got.num_cells, rows * cols);
            let [a, _, n, s] = &got.fields[..] else {
                panic!("{} fields", got.fields.len());
            };
            let offsets = s.offsets.clone().unwrap();
            for c in 0..cols {
                for r in 0..rows {
                    let p = (c * rows + r) as usize;
                    let end = offsets.get(p + 1).map_or(s.data.len(), |&e| e as usize);
                    let got = (
                        a.data[p * 4..p * 4 + 4].to_vec(),
                        n.data[p * 4..p * 4 + 4].to_vec(),
                        String::from_utf8(s.data[offsets[p] as usize..end].to_vec()).unwrap(),
                    );
                    let q = row * cols + c;
                    let want = match r == row {
                        true => (
                            [(100 + q as u16).to_le_bytes(); 2].concat(),
                            [(600 + q as u16).to_le_bytes(); 2].concat(),
                            text(800, q),
                        ),
                        false => (
                            7i32.to_le_bytes().to_vec(),
                            [(-3i16).to_le_bytes(), 4i16.to_le_bytes()].concat(),
                            "zz".to_string(),
                        ),
                    };
                    assert_eq!(got, want, "windows of {window}, column {c}, row {r}");
                }
            }
        }
        // Its cells count one more than its body holds.
        let mut st = push();
        st.written_out().unwrap();
        let file = st.file.clone().unwrap();
        let mut head = [0u8; HEAD as usize];
        std::io::Read::read_exact(&mut scratch::At::new(file.clone(), 0, HEAD), &mut head).unwrap();
        let (place, cells, body, _) = parse_head(&head).unwrap();
        let lie = super::head(place, (cells + 1) | STRIDED, body).unwrap();
        std::os::unix::fs::FileExt::write_at(&*file, &lie, 0).unwrap();
        let mut merge = st.merge(bx(), 1000, 1 << 20).unwrap();
        assert!(merge.next_batch(&fields, false, Vec::new()).is_err());
    }

    /// Windows keep what they read of each run for the next: a run's
    /// bytes are read once where the memory holds every run's share, and
    /// a record at most again a read where it does not. (Each window read
    /// its runs afresh, at least 4 KiB a run: W2 4096² col-major under 16
    /// KiB read its 64 MB 9.6 times over.)
    #[test]
    fn windows_read_each_runs_bytes_once() {
        let fields = fields();
        let requested = [1, 0, 2, 3];
        let (rows, cols) = (40u64, 6u64);
        for (memory, most) in [(1usize << 20, 1.0), (6 << 10, 1.5)] {
            let st = rows_pushed(&fields, &requested, (rows, cols));
            let mut merge = st.merge(col_major_box(rows, cols), 7, memory).unwrap();
            let bytes: u64 = (merge.st.runs.iter()).map(|r| r.end - r.start).sum();
            let mut cells = 0;
            while let Some(b) = merge.next_batch(&fields, false, Vec::new()).unwrap() {
                cells += b.num_cells;
            }
            assert_eq!(cells, rows * cols);
            assert!(
                merge.read as f64 <= bytes as f64 * most,
                "memory {memory}: {} bytes read of {bytes}",
                merge.read
            );
        }
    }

    /// Runs of two fragments over places 0..100 of a 1-D box (fragment 1,
    /// newer, over part of fragment 0's, one of whose runs starts under
    /// it; places 80..90 and 95.. written by none) handed out in windows
    /// that cut records anywhere (each looking at the runs it reached and
    /// not yet out, older fragments first), records
    /// read through large and small buffers, written with many cells and
    /// with a few: each place's newest value, fill where none wrote, `a`
    /// asked for twice, var-size strings.
    #[test]
    fn windows_take_the_newest_stretch_of_each_place_and_fill_the_rest() {
        let fields = fields();
        let requested = [1, 0, 2, 1, 3];
        // (fragment, stretches (place, len, tile, pos)), tiles per run:
        // (first, cells, tag) for a, n (tag + 500) and s (tag + 700).
        type Run<'a> = (u32, &'a [(u64, u64, u32, u64)], &'a [(u64, u64, u16)]);
        // (Fragment 0's third run starts after fragment 1's, under it: the
        // older is still written first.)
        let runs: [Run<'_>; 4] = [
            (0, &[(0, 40, 0, 10)], &[(10, 40, 1000)]),
            (1, &[(20, 5, 0, 3), (40, 25, 0, 8)], &[(3, 30, 3000)]),
            (
                0,
                &[(40, 10, 0, 50), (50, 30, 1, 0)],
                &[(50, 10, 1500), (0, 30, 2000)],
            ),
            (0, &[(90, 5, 0, 0)], &[(0, 5, 4000)]),
        ];
        // Brute force: per place, its newest cell or None (fill).
        let mut want: Vec<Want> = vec![None; 100];
        for frag in [0u32, 1] {
            for (f, stretches, tiles) in &runs {
                if *f != frag {
                    continue;
                }
                for &(place, len, t, pos) in stretches.iter() {
                    let (_, _, tag) = tiles[t as usize];
                    for c in 0..len {
                        let p = pos + c;
                        want[(place + c) as usize] = Some((
                            tag + p as u16,
                            tag + 500 + p as u16,
                            (p % 2) as u8,
                            text(tag + 700, p),
                            u8::from(p % 3 != 0),
                        ));
                    }
                }
            }
        }
        for (read_most, record) in [(StretchMerge::READ_MOST, 64 << 10), (16, 40)] {
            for cells in [1usize, 3, 7, 64, 100] {
                let mut st = Stretches::new(&fields, &requested, 64 << 10).unwrap();
                // Records of at most `record` bytes (a cell past it alone).
                st.buffer = record;
                for (frag, stretches, tiles) in &runs {
                    let decoded: Vec<[DecodedTile; 3]> = (tiles.iter())
                        .map(|&(first, n, tag)| {
                            [
                                tile(first, n, 4, tag, false),
                                tile(first, n, 4, tag + 500, true),
                                var_tile(first, n, tag + 700),
                            ]
                        })
                        .collect();
                    let by_tile: Vec<Vec<Option<&DecodedTile>>> = (decoded.iter())
                        .map(|t| t.iter().map(Some).collect())
                        .collect();
                    let stretches: Vec<Stretch> = (stretches.iter())
                        .map(|&(place, len, tile, pos)| Stretch {
                            place,
                            pos,
                            len: len as u32,
                            tile,
                        })
                        .collect();
                    st.push_run(*frag, &stretches, 1, &by_tile, &[]).unwrap();
                }
                // Fragment 0's last run follows its third (places past it,
                // bytes right after it): one run.
                assert_eq!(st.runs.len(), 3);
                let bx = DenseBox::new(&[vec![(0, 99)]], false, vec![Datatype::Int32]).unwrap();
                let mut merge = st.merge(bx, cells, 1 << 20).unwrap();
                merge.read_most = read_most;
                let mut got = crate::Batch::default();
                // Each batch handed back (`Reader::recycle`): the next one's
                // `n` (asked once) is written in its allocation.
                let (mut back, mut reused, mut windows) = (Vec::new(), 0, 0);
                loop {
                    let was = back.get(2).map(|b: &FieldBuffer| b.data.as_ptr());
                    let recycled = std::mem::take(&mut back);
                    let Some(b) = merge.next_batch(&fields, false, recycled).unwrap() else {
                        break;
                    };
                    assert!(b.num_cells as usize <= cells);
                    reused += usize::from(was == Some(b.fields[2].data.as_ptr()));
                    windows += 1;
                    got.append(&b);
                    back = b.fields;
                }
                // (All but the first window, and the last where it is larger.)
                assert!(
                    reused + 2 >= windows,
                    "{reused} of {windows} windows reused"
                );
                let what = format!("windows of {cells}, reads of {read_most}, records {record}");
                assert_eq!(got.num_cells, 100, "{what}");
                let [a, x, n, a2, s] = &got.fields[..] else {
                    panic!("{what}: {} fields", got.fields.len());
                };
                assert_eq!(a.data, a2.data, "{what}");
                let bytes = |v: &Option<Validity>| match v {
                    Some(Validity::Bytes(v)) => v.clone(),
                    other => panic!("{what}: {other:?}"),
                };
                let (valid, s_valid) = (bytes(&n.validity), bytes(&s.validity));
                let offsets = s.offsets.clone().unwrap();
                let s_cell = |p: usize| {
                    let end = offsets.get(p + 1).map_or(s.data.len(), |&e| e as usize);
                    String::from_utf8(s.data[offsets[p] as usize..end].to_vec()).unwrap()
                };
                for (p, w) in want.iter().enumerate() {
                    let av = &a.data[p * 4..p * 4 + 4];
                    let nv = &n.data[p * 4..p * 4 + 4];
                    let xv = &x.data[p * 4..p * 4 + 4];
                    assert_eq!(xv, &(p as i32).to_le_bytes(), "{what}");
                    match w {
                        Some((av_want, nv_want, ok, text, s_ok)) => {
                            assert_eq!(av, [av_want.to_le_bytes(); 2].concat(), "{what}, {p}");
                            assert_eq!(nv, [nv_want.to_le_bytes(); 2].concat(), "{what}, {p}");
                            assert_eq!(valid[p], *ok, "{what}, {p}");
                            assert_eq!((&s_cell(p), s_valid[p]), (text, *s_ok), "{what}, {p}");
                        }
                        None => {
                            assert_eq!(av, 7i32.to_le_bytes(), "{what}, {p}");
                            assert_eq!(nv, [(-3i16).to_le_bytes(), 4i16.to_le_bytes()].concat());
                            assert_eq!(valid[p], 0, "{what}, {p}");
                            assert_eq!((s_cell(p).as_str(), s_valid[p]), ("zz", 0), "{what}, {p}");
                        }
                    }
                }
            }
        }
    }

    /// Across the cell order: col-major results of a 40 × 6 box over
    /// row-major tiles, a run a row (stretches of one cell, a row's
    /// cells apart), fragment 1 (newer) over rows 20..40 and columns 2..5.
    /// Merged down (runs of a fragment merged, a record that starts where
    /// the last ended joining it), by groups as wide as the memory allows
    /// and two at a time, until few meet at a place: records of many
    /// cells, fragments apart, and windows that give each place its newest
    /// value, fill where none wrote.
    #[test]
    fn runs_across_the_order_merge_down_into_long_records() {
        let fields = fields();
        let requested = [1, 0, 2, 3];
        let (rows, cols) = (40u64, 6u64);
        // (fragment, rows, columns, tag); each fragment a tile over the
        // whole box, row-major.
        let frags = [(0u32, 0..rows, 0..cols, 1000u16), (1, 20..40, 2..5, 3000)];
        let mut want: Vec<Want> = vec![None; (rows * cols) as usize];
        for (_, rs, cs, tag) in &frags {
            for r in rs.clone() {
                for c in cs.clone() {
                    let p = r * cols + c;
                    want[(c * rows + r) as usize] = Some((
                        tag + p as u16,
                        tag + 500 + p as u16,
                        (p % 2) as u8,
                        text(tag + 700, p),
                        u8::from(p % 3 != 0),
                    ));
                }
            }
        }
        let decoded: Vec<[DecodedTile; 3]> = (frags.iter())
            .map(|&(_, _, _, tag)| {
                [
                    tile(0, rows * cols, 4, tag, false),
                    tile(0, rows * cols, 4, tag + 500, true),
                    var_tile(0, rows * cols, tag + 700),
                ]
            })
            .collect();
        let cases = [
            (1 << 20, 1usize, usize::MAX),
            (1 << 20, 600, usize::MAX),
            (2 * (4 << 10) + 2 * (1 << 10), 1, usize::MAX),
            (2 * (4 << 10) + 2 * (1 << 10), 600, usize::MAX),
            // Two runs at a time: two rounds, the second written over the
            // file the first read.
            (4 << 10, 1, usize::MAX),
            // Runs held while pieces push bounded: 16 of a level merged
            // into one of the level above past 8.
            (1 << 20, 600, 8),
        ];
        for (memory, window, held_most) in cases {
            {
                let mut st = Stretches::new(&fields, &requested, 4 << 10).unwrap();
                st.held_most = held_most;
                for (k, (frag, rs, cs, _)) in frags.iter().enumerate() {
                    let by_tile = vec![decoded[k].iter().map(Some).collect::<Vec<_>>()];
                    for r in rs.clone() {
                        let stretches = row_across(r, cs.clone(), (rows, cols));
                        st.push_run(*frag, &stretches, cols, &by_tile, &[]).unwrap();
                        // (Past the bound, each fragment holds fewer than 16 of a level.)
                        assert!(st.runs.len() <= held_most.max(2 * 15).saturating_add(3));
                    }
                }
                let what = format!("memory {memory}, windows of {window}, {held_most} held");
                if held_most == usize::MAX {
                    assert_eq!(st.runs.len(), 60);
                    assert_eq!(levels::most_live(&st.runs), 60);
                    // A row's cells, a result line each: one strided
                    // record a run.
                    st.written_out().unwrap();
                    let file = st.file.clone().unwrap();
                    for run in &st.runs {
                        let mut head = [0u8; HEAD as usize];
                        let mut at = scratch::At::new(file.clone(), run.start, run.end);
                        std::io::Read::read_exact(&mut at, &mut head).unwrap();
                        let (_, cells, body, strided) = parse_head(&head).unwrap();
                        assert!(run.strided && strided, "{what}");
                        assert_eq!(run.end - run.start, HEAD + body, "{what}");
                        assert_eq!(cells, if run.frag == 0 { cols } else { 3 }, "{what}");
                    }
                } else {
                    // Fragment 0's 40 runs: two merged, eight left; 1's 20:
                    // one merged, four left.
                    let levels: Vec<(u32, u8)> =
                        st.runs.iter().map(|r| (r.frag, r.level)).collect();
                    assert_eq!(
                        levels.iter().filter(|l| l.1 == 1).count(),
                        3,
                        "{what}: {levels:?}"
                    );
                    assert_eq!(st.runs.len(), 3 + 8 + 4, "{what}: {levels:?}");
                }
                st.merge_down(window, memory).unwrap();
                // Windows of 1 MiB give each of 64 runs 4 KiB: the 60 stay
                // as they are. Else windows of 600 cells read 18 runs at
                // once well, of one cell 16 (8 in 4 KiB, 512 bytes each):
                // groups of four runs (or two, twice), 15 left.
                let live = levels::most_live(&st.runs);
                let most = match (memory, window) {
                    (1048576, _) => 64,
                    (_, 600) => 18,
                    _ => 16,
                };
                assert!(live <= most, "{what}: {live} runs meet");
                assert!(st.runs.len() >= 2, "{what}");
                // Every record of a merged run holds a column of its rows.
                st.written_out().unwrap();
                let file = st.file.clone().unwrap();
                let least = if held_most == usize::MAX { 2 } else { 1 };
                let mut records = 0u64;
                for run in &st.runs {
                    let mut at = run.start;
                    while at < run.end {
                        let mut head = [0u8; HEAD as usize];
                        std::io::Read::read_exact(
                            &mut scratch::At::new(file.clone(), at, run.end),
                            &mut head,
                        )
                        .unwrap();
                        let (_, cells, body, _) = parse_head(&head).unwrap();
                        assert!(cells >= least, "{what}: a record of {cells} cells");
                        records += 1;
                        at += HEAD + body;
                    }
                }
                assert!(
                    records <= 6 * st.runs.len() as u64,
                    "{what}: {records} records"
                );
                let mut merge = st.merge(col_major_box(rows, cols), 7, memory).unwrap();
                let got = drained(&mut merge, &fields);
                assert_eq!(got.num_cells, rows * cols, "{what}");
                let [a, x, n, s] = &got.fields[..] else {
                    panic!("{what}: {} fields", got.fields.len());
                };
                let bytes = |v: &Option<Validity>| match v {
                    Some(Validity::Bytes(v)) => v.clone(),
                    other => panic!("{what}: {other:?}"),
                };
                let (valid, s_valid) = (bytes(&n.validity), bytes(&s.validity));
                let offsets = s.offsets.clone().unwrap();
                for (p, w) in want.iter().enumerate() {
                    let end = offsets.get(p + 1).map_or(s.data.len(), |&e| e as usize);
                    let text =
                        String::from_utf8(s.data[offsets[p] as usize..end].to_vec()).unwrap();
                    assert_eq!(
                        &x.data[p * 4..p * 4 + 4],
                        &((p as u64 % rows) as i32).to_le_bytes()
                    );
                    let got = (
                        a.data[p * 4..p * 4 + 4].to_vec(),
                        n.data[p * 4..p * 4 + 4].to_vec(),
                        valid[p],
                        text,
                        s_valid[p],
                    );
                    let want = match w {
                        Some((av, nv, ok, text, s_ok)) => (
                            [av.to_le_bytes(); 2].concat(),
                            [nv.to_le_bytes(); 2].concat(),
                            *ok,
                            text.clone(),
                            *s_ok,
                        ),
                        None => (
                            7i32.to_le_bytes().to_vec(),
                            [(-3i16).to_le_bytes(), 4i16.to_le_bytes()].concat(),
                            0,
                            "zz".to_string(),
                            0,
                        ),
                    };
                    assert_eq!(got, want, "{what}, place {p}");
                }
            }
        }
    }
}
