//! A dense read along its array's cell order, spilled in stretches. Row-
//! major results of row-major tiles (or col-major of col-major) go through
//! a row of tiles at a time; where the chunks one result line crosses pass
//! the tile budget, pieces hold a part of a line, and every chunk holding
//! several lines is fetched and decoded again for each of them (W2 4096²
//! under 1 MiB: 14 times the unbudgeted read's time). Spilled instead,
//! each chunk is read once: a piece's tiles are cut into stretches, the
//! cells of one tile line inside the subarray, whose places in the result
//! order and positions in the tile both go up one a cell
//! ([`DenseBox::tile_places`]), and each stretch is appended to a scratch
//! file with its first place and length, every requested field's values
//! after it, column by column. Results then come a window of places at a
//! time: each run hands out its stretches in the window, copied straight
//! to their places, and places no run holds get fill.
//!
//! The runs' records merge by copies a stretch, not a cell: the records of
//! [`super::spill`] cost about 75 ns a cell, five times the unbudgeted read
//! of W2. Only fixed-size fields (and their validity) go so, without a
//! condition: a var-size value's place in a batch is not known before the
//! batch, and a condition's rejected cells would hide older fragments'.

use super::dense_runs::DenseBox;
use super::fields::{FieldInfo, Kind};
use super::tiles::DecodedTile;
use crate::batch::Batch;
use crate::scratch::{self, At};
use crate::validity::{Bitmap, Validity};
use crate::{QueryError, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::Arc;

/// A stretch record's head: its first place (8 bytes) and cells (4),
/// little-endian.
const HEAD: u64 = 12;

/// Cells of fill written at a time.
const FILL_BLOCK: u64 = 4096;

/// A field the runs hold: its slot among the read's fields, bytes a cell,
/// and whether a byte of validity follows each value.
#[derive(Debug, Clone)]
struct Col {
    slot: usize,
    size: usize,
    nullable: bool,
}

/// A requested field in a batch: held by the runs (`Col`'s index), or a
/// dimension (and its slot), from the box.
#[derive(Debug, Clone, Copy)]
enum Out {
    Col(usize),
    Dim(usize, usize),
}

/// One piece's stretches, in place order: where they lie in the file.
#[derive(Debug)]
struct Run {
    frag: u32,
    /// The file bytes of its records.
    start: u64,
    end: u64,
    /// The first place of the stretch at `start`, and cells of it already
    /// handed out.
    place: u64,
    skip: u64,
}

/// One stretch of a piece: `len` cells from place `place`, at positions
/// from `pos` of the piece's tile `tile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Stretch {
    pub place: u64,
    pub len: u64,
    pub tile: u32,
    pub pos: u64,
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
    /// Bytes the writer buffers.
    buffer: usize,
}

impl Stretches {
    /// Whether a read of `requested` slots of `fields` can go in
    /// stretches: fixed-size values alone.
    pub fn fit(fields: &[FieldInfo], requested: &[usize]) -> bool {
        (requested.iter()).all(|&s| fields.get(s).is_some_and(|f| !f.is_var()))
    }

    /// Stretches of the `requested` slots of `fields` (dimensions come from
    /// the box), written through `buffer` bytes.
    pub fn new(fields: &[FieldInfo], requested: &[usize], buffer: usize) -> Result<Self> {
        let mut cols: Vec<Col> = Vec::new();
        let mut out = Vec::with_capacity(requested.len());
        for &slot in requested {
            let f = (fields.get(slot))
                .ok_or_else(|| QueryError::invalid(format!("no field in slot {slot}")))?;
            if f.is_var() {
                return Err(QueryError::invalid("a var-size field spilled in stretches"));
            }
            out.push(match f.kind {
                Kind::Dim(d) => Out::Dim(d, slot),
                _ => match cols.iter().position(|c| c.slot == slot) {
                    Some(k) => Out::Col(k),
                    None => {
                        cols.push(Col {
                            slot,
                            size: f.cell_size(),
                            nullable: f.nullable,
                        });
                        Out::Col(cols.len().saturating_sub(1))
                    }
                },
            });
        }
        Ok(Stretches {
            cols,
            out,
            file: None,
            writer: None,
            written: 0,
            runs: Vec::new(),
            buffer: buffer.clamp(4 << 10, 64 << 10),
        })
    }

    /// The slots of the fields the runs hold.
    pub fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.cols.iter().map(|c| c.slot)
    }

    /// Bytes of a stretch's values (and validity) a cell.
    fn cell_bytes(&self) -> u64 {
        (self.cols.iter())
            .map(|c| (c.size as u64).saturating_add(u64::from(c.nullable)))
            .fold(0, u64::saturating_add)
    }

    /// Appends a run of fragment `frag`: `stretches` in place order, each
    /// of `tiles` (per tile, per held field, its decoded tile; `None`
    /// where the fragment lacks the field: its fill).
    pub fn push_run(
        &mut self,
        frag: u32,
        stretches: &[Stretch],
        tiles: &[Vec<Option<&DecodedTile>>],
        fields: &[FieldInfo],
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
                BufWriter::with_capacity(self.buffer, At::new(file, start, start))
            }
        };
        let mut fill: Vec<u8> = Vec::new();
        let mut wrote = 0u64;
        let mut put = |bytes: &[u8]| -> Result<()> {
            out.write_all(bytes).map_err(QueryError::Spill)?;
            wrote = wrote.saturating_add(bytes.len() as u64);
            Ok(())
        };
        for s in stretches {
            // A record holds at most 2^32 − 1 cells: longer stretches go
            // in several.
            let mut done = 0u64;
            while done < s.len {
                let n = s.len.saturating_sub(done).min(u64::from(u32::MAX));
                let (place, pos) = (s.place.saturating_add(done), s.pos.saturating_add(done));
                put(&place.to_le_bytes())?;
                put(&(n as u32).to_le_bytes())?;
                let row = tiles.get(s.tile as usize);
                let tile = |k: usize| row.and_then(|r| r.get(k).copied().flatten());
                for (k, c) in self.cols.iter().enumerate() {
                    match tile(k) {
                        Some(t) => put(values_of(&t.fixed, t.first, pos, n, c.size)?)?,
                        None => {
                            let mut cell =
                                fields.get(c.slot).map_or(Vec::new(), |f| f.fill.clone());
                            cell.resize(c.size, 0);
                            repeated(&mut put, &mut fill, &cell, n)?;
                        }
                    }
                }
                for (k, c) in self.cols.iter().enumerate().filter(|(_, c)| c.nullable) {
                    let t = tile(k);
                    match t.and_then(|t| t.validity.as_deref().map(|v| (t.first, v))) {
                        Some((first, v)) => put(values_of(v, first, pos, n, 1)?)?,
                        // (A tile of the field without validity: valid.)
                        None => {
                            let v = match t {
                                Some(_) => 1,
                                None => fields.get(c.slot).map_or(0, |f| f.fill_validity),
                            };
                            repeated(&mut put, &mut fill, &[v], n)?;
                        }
                    }
                }
                done = done.saturating_add(n);
            }
        }
        self.written = self.written.saturating_add(wrote);
        self.writer = Some(out);
        self.runs.push(Run {
            frag,
            start,
            end: self.written,
            place: first.place,
            skip: 0,
        });
        Ok(())
    }

    /// The runs handed out over `bx`'s places, `cells` a batch.
    pub fn merge(mut self, bx: DenseBox, cells: usize) -> Result<StretchMerge> {
        if let Some(w) = self.writer.take() {
            w.into_inner()
                .map_err(|e| QueryError::Spill(e.into_error()))?;
        }
        // Older fragments first: a newer one's stretch then overwrites
        // theirs (a fragment's own runs never share a place).
        self.runs.sort_by_key(|r| r.frag);
        Ok(StretchMerge {
            st: self,
            bx,
            cells: cells.max(1),
            buf: Vec::new(),
            buf_at: 0,
            read_most: StretchMerge::READ_MOST,
        })
    }
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

/// `n` cells of `size` bytes from position `pos` of `bytes`, whose first
/// cell is the tile's `first`.
fn values_of(bytes: &[u8], first: u64, pos: u64, n: u64, size: usize) -> Result<&[u8]> {
    let at = pos
        .checked_sub(first)
        .and_then(|c| c.checked_mul(size as u64));
    let len = n.checked_mul(size as u64);
    at.zip(len)
        .and_then(|(a, l)| Some((usize::try_from(a).ok()?, usize::try_from(l).ok()?)))
        .and_then(|(a, l)| bytes.get(a..a.checked_add(l)?))
        .ok_or_else(|| QueryError::invalid("a spilled stretch past its decoded tile"))
}

/// The runs' stretches handed out a window of places at a time.
pub(crate) struct StretchMerge {
    st: Stretches,
    bx: DenseBox,
    cells: usize,
    /// Bytes read from the file, from `buf_at`.
    buf: Vec<u8>,
    buf_at: u64,
    /// [`StretchMerge::READ_MOST`] (less in tests).
    read_most: usize,
}

impl StretchMerge {
    /// Bytes a read of the file takes at most (a stretch's record past
    /// it is read straight to its places).
    const READ_MOST: usize = 1 << 20;

    /// The next window of the box's places as a batch of `fields`
    /// (validity as bits with `packed`), `None` once every cell is out.
    pub fn next_batch(&mut self, fields: &[FieldInfo], packed: bool) -> Result<Option<Batch>> {
        let Some(first) = self.bx.place() else {
            return Ok(None);
        };
        let w = usize::try_from(self.bx.left().min(self.cells as u64))
            .map_err(|_| QueryError::invalid("a window past memory"))?;
        let end = first.saturating_add(w as u64);
        let cols = &self.st.cols;
        let mut values: Vec<Vec<u8>> = cols
            .iter()
            .map(|c| vec![0u8; w.saturating_mul(c.size)])
            .collect();
        let mut valid: Vec<Vec<u8>> = (cols.iter())
            .map(|c| if c.nullable { vec![0u8; w] } else { Vec::new() })
            .collect();
        let mut covered = vec![false; w];
        let cell_bytes = self.st.cell_bytes();
        let active = (self.st.runs.iter())
            .filter(|r| r.start < r.end && r.place < end)
            .count();
        // Each run's share of the window, read at once (a stretch or two
        // more is read again in the next window).
        let share = (w as u64)
            .saturating_mul(cell_bytes.saturating_add(1))
            .checked_div(active.max(1) as u64)
            .unwrap_or(0)
            .saturating_add(4 << 10);
        let share = usize::try_from(share)
            .unwrap_or(usize::MAX)
            .min(self.read_most);
        let file = self.st.file.clone();
        for r in 0..self.st.runs.len() {
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
                first,
                end,
                share,
                &mut values,
                &mut valid,
                &mut covered,
            )?;
        }
        // Fill where no run wrote; a dimension's value from the box.
        let mut out = Vec::with_capacity(self.st.out.len());
        let mut coords = vec![0i128; self.bx.dims()];
        let mut bytes = Vec::with_capacity(8);
        for &o in &self.st.out {
            let slot = match o {
                Out::Col(k) => self.st.cols.get(k).map_or(usize::MAX, |c| c.slot),
                Out::Dim(_, slot) => slot,
            };
            let f = (fields.get(slot))
                .ok_or_else(|| QueryError::invalid(format!("no field in slot {slot}")))?;
            let mut b = f.empty_buffer();
            match o {
                Out::Dim(d, _) => {
                    b.data.reserve_exact(w.saturating_mul(f.cell_size()));
                    for c in 0..w as u64 {
                        (self.bx.coords(first.saturating_add(c), &mut coords))
                            .ok_or_else(|| QueryError::invalid("a cell outside the subarray"))?;
                        self.bx.coord_bytes(&coords, d, &mut bytes);
                        b.data.extend_from_slice(&bytes);
                    }
                }
                Out::Col(k) => {
                    let size = self.st.cols.get(k).map_or(0, |c| c.size);
                    // Several requests of one field share its column: the
                    // last takes it, earlier ones a copy.
                    let later = (self.st.out.iter())
                        .skip(out.len().saturating_add(1))
                        .any(|&x| matches!(x, Out::Col(j) if j == k));
                    let (mut data, mut v) = match later {
                        true => (
                            values.get(k).cloned().unwrap_or_default(),
                            valid.get(k).cloned().unwrap_or_default(),
                        ),
                        false => (
                            values.get_mut(k).map(std::mem::take).unwrap_or_default(),
                            valid.get_mut(k).map(std::mem::take).unwrap_or_default(),
                        ),
                    };
                    let fill = &f.fill;
                    for (c, _) in covered.iter().enumerate().filter(|(_, &c)| !c) {
                        if let Some(dst) = data.get_mut(
                            c.saturating_mul(size)..c.saturating_add(1).saturating_mul(size),
                        ) {
                            if fill.len() == size {
                                dst.copy_from_slice(fill);
                            }
                        }
                        if let Some(v) = v.get_mut(c) {
                            *v = f.fill_validity;
                        }
                    }
                    b.data = data;
                    if let Some(validity) = &mut b.validity {
                        *validity = if packed {
                            let mut bits = Bitmap::with_capacity(w);
                            bits.extend_from_bytes(&v);
                            Validity::Bits(bits)
                        } else {
                            Validity::Bytes(v)
                        };
                    }
                }
            }
            out.push(b);
        }
        self.bx.advance(w as u64);
        Ok((w > 0).then_some(Batch {
            num_cells: w as u64,
            fields: out,
        }))
    }

    /// Run `r`'s stretches in the window `first..end` copied to their
    /// places, each read through reads of about `share` bytes.
    #[allow(clippy::too_many_arguments)]
    fn take_run(
        &mut self,
        r: usize,
        file: &Arc<File>,
        first: u64,
        end: u64,
        share: usize,
        values: &mut [Vec<u8>],
        valid: &mut [Vec<u8>],
        covered: &mut [bool],
    ) -> Result<()> {
        let cell_bytes = self.st.cell_bytes();
        let Some(run) = self.st.runs.get_mut(r) else {
            return Ok(());
        };
        let (mut at, run_end, mut skip) = (run.start, run.end, run.skip);
        let mut next_place = run.place;
        while at < run_end {
            let head = read(
                &mut self.buf,
                &mut self.buf_at,
                file,
                at,
                HEAD,
                share,
                run_end,
            )?;
            let (place, len) = parse_head(head)?;
            next_place = place.saturating_add(skip);
            if next_place >= end {
                break;
            }
            let from = next_place
                .checked_sub(first)
                .ok_or_else(|| QueryError::invalid("a spilled stretch out of order"))?;
            let take = len.saturating_sub(skip).min(end.saturating_sub(next_place));
            let record = len.saturating_mul(cell_bytes);
            let body = at.saturating_add(HEAD);
            // Each held field's cells, then each nullable one's validity.
            let mut col_at = body;
            let mut parts: Vec<(u64, usize, bool, u64)> = Vec::new();
            for (k, c) in self.st.cols.iter().enumerate() {
                parts.push((col_at, k, false, c.size as u64));
                col_at = col_at.saturating_add(len.saturating_mul(c.size as u64));
            }
            for (k, _) in self.st.cols.iter().enumerate().filter(|(_, c)| c.nullable) {
                parts.push((col_at, k, true, 1));
                col_at = col_at.saturating_add(len);
            }
            let whole = record <= self.read_most as u64;
            for (part_at, k, validity, size) in parts {
                let src = part_at.saturating_add(skip.saturating_mul(size));
                let n = take.saturating_mul(size);
                let dst = if validity {
                    valid.get_mut(k)
                } else {
                    values.get_mut(k)
                };
                let to = usize::try_from(from.saturating_mul(size)).unwrap_or(usize::MAX);
                let dst = (dst.and_then(|d| d.get_mut(to..to.saturating_add(n as usize))))
                    .ok_or_else(|| QueryError::invalid("a spilled stretch past its window"))?;
                if whole {
                    // The record's bytes from here on, read with the share.
                    let need = body.saturating_add(record).saturating_sub(src);
                    let got = read(
                        &mut self.buf,
                        &mut self.buf_at,
                        file,
                        src,
                        need.max(n),
                        share,
                        run_end,
                    )?;
                    dst.copy_from_slice(got.get(..dst.len()).unwrap_or_default());
                } else {
                    read_exact_at(file, dst, src)?;
                }
            }
            if let Some(c) = covered.get_mut(from as usize..(from.saturating_add(take)) as usize) {
                c.fill(true);
            }
            if skip.saturating_add(take) < len {
                skip = skip.saturating_add(take);
                next_place = place.saturating_add(skip);
                break;
            }
            at = body.saturating_add(record);
            skip = 0;
            next_place = place.saturating_add(len);
        }
        run.start = at;
        run.skip = skip;
        run.place = next_place;
        Ok(())
    }
}

/// A stretch record's head: its first place and cells.
fn parse_head(head: &[u8]) -> Result<(u64, u64)> {
    let place = head.get(..8).and_then(|b| b.try_into().ok());
    let len = head.get(8..12).and_then(|b| b.try_into().ok());
    match (place, len) {
        (Some(p), Some(l)) => Ok((u64::from_le_bytes(p), u64::from(u32::from_le_bytes(l)))),
        _ => Err(QueryError::invalid("a spilled stretch's head cut short")),
    }
}

/// `n` bytes of `file` from `at`, from `buf` (holding the file's bytes from
/// `buf_at`) where it has them, else read into it with at least `share`
/// bytes (not past `limit`).
fn read<'b>(
    buf: &'b mut Vec<u8>,
    buf_at: &mut u64,
    file: &Arc<File>,
    at: u64,
    n: u64,
    share: usize,
    limit: u64,
) -> Result<&'b [u8]> {
    let have = at >= *buf_at && at.saturating_add(n) <= buf_at.saturating_add(buf.len() as u64);
    if !have {
        let want = (n as usize)
            .max(share)
            .min(usize::try_from(limit.saturating_sub(at)).unwrap_or(usize::MAX));
        if want < n as usize {
            return Err(QueryError::invalid("a spilled stretch past its run"));
        }
        buf.resize(want, 0);
        read_exact_at(file, buf, at)?;
        *buf_at = at;
    }
    let from = usize::try_from(at.saturating_sub(*buf_at)).unwrap_or(usize::MAX);
    buf.get(from..from.saturating_add(n as usize))
        .ok_or_else(|| QueryError::invalid("a spilled stretch past its read"))
}

/// `buf.len()` bytes of `file` from `at`.
fn read_exact_at(file: &Arc<File>, buf: &mut [u8], at: u64) -> Result<()> {
    let mut reader = At::new(Arc::clone(file), at, u64::MAX);
    std::io::Read::read_exact(&mut reader, buf).map_err(QueryError::Spill)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_format::{ArrayType, Datatype};
    use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};

    /// Slots: x (a dimension), a (int32, fill 7), n (a nullable pair of
    /// int16s, fill (-3, 4) and null).
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
            .build()
            .unwrap();
        ["x", "a", "n"]
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

    /// Runs of two fragments over places 0..100 of a 1-D box (fragment 1,
    /// newer, over part of fragment 0's; places 80..90 and 95.. written
    /// by none) handed out in windows that cut stretches anywhere, with
    /// records read whole or straight to their places: each place's
    /// newest value, fill where none wrote, `a` asked for twice.
    #[test]
    fn windows_take_the_newest_stretch_of_each_place_and_fill_the_rest() {
        let fields = fields();
        let requested = [1, 0, 2, 1];
        // (fragment, stretches (place, len, tile, pos)), tiles per run:
        // (first, cells, tag) for a and n.
        type Run<'a> = (u32, &'a [(u64, u64, u32, u64)], &'a [(u64, u64, u16)]);
        let runs: [Run<'_>; 3] = [
            (
                0,
                &[(0, 50, 0, 10), (50, 30, 1, 0)],
                &[(10, 50, 1000), (0, 30, 2000)],
            ),
            (1, &[(20, 5, 0, 3), (40, 25, 0, 8)], &[(3, 30, 3000)]),
            (0, &[(90, 5, 0, 0)], &[(0, 5, 4000)]),
        ];
        // Brute force: per place, (a, n, n valid) or None (fill).
        let mut want: Vec<Option<(u16, u16, u8)>> = vec![None; 100];
        for frag in [0u32, 1] {
            for (f, stretches, tiles) in &runs {
                if *f != frag {
                    continue;
                }
                for &(place, len, t, pos) in stretches.iter() {
                    let (_, _, tag) = tiles[t as usize];
                    for c in 0..len {
                        let p = pos + c;
                        want[(place + c) as usize] =
                            Some((tag + p as u16, tag + 500 + p as u16, (p % 2) as u8));
                    }
                }
            }
        }
        for read_most in [StretchMerge::READ_MOST, 16] {
            for cells in [1usize, 3, 7, 64, 100] {
                let mut st = Stretches::new(&fields, &requested, 64).unwrap();
                for (frag, stretches, tiles) in &runs {
                    let decoded: Vec<(DecodedTile, DecodedTile)> = (tiles.iter())
                        .map(|&(first, n, tag)| {
                            (
                                tile(first, n, 4, tag, false),
                                tile(first, n, 4, tag + 500, true),
                            )
                        })
                        .collect();
                    let by_tile: Vec<Vec<Option<&DecodedTile>>> = (decoded.iter())
                        .map(|(a, n)| vec![Some(a), Some(n)])
                        .collect();
                    let stretches: Vec<Stretch> = (stretches.iter())
                        .map(|&(place, len, tile, pos)| Stretch {
                            place,
                            len,
                            tile,
                            pos,
                        })
                        .collect();
                    st.push_run(*frag, &stretches, &by_tile, &fields).unwrap();
                }
                let bx = DenseBox::new(&[vec![(0, 99)]], false, vec![Datatype::Int32]).unwrap();
                let mut merge = st.merge(bx, cells).unwrap();
                merge.read_most = read_most;
                let mut got = crate::Batch::default();
                while let Some(b) = merge.next_batch(&fields, false).unwrap() {
                    assert!(b.num_cells as usize <= cells);
                    got.append(&b);
                }
                let what = format!("windows of {cells}, reads of {read_most}");
                assert_eq!(got.num_cells, 100, "{what}");
                let [a, x, n, a2] = &got.fields[..] else {
                    panic!("{what}: {} fields", got.fields.len());
                };
                assert_eq!(a.data, a2.data, "{what}");
                let valid = match &n.validity {
                    Some(Validity::Bytes(v)) => v.clone(),
                    other => panic!("{what}: {other:?}"),
                };
                for (p, w) in want.iter().enumerate() {
                    let av = &a.data[p * 4..p * 4 + 4];
                    let nv = &n.data[p * 4..p * 4 + 4];
                    assert_eq!(
                        &x.data[p * 4..p * 4 + 4],
                        &(p as i32).to_le_bytes(),
                        "{what}"
                    );
                    match *w {
                        Some((av_want, nv_want, ok)) => {
                            assert_eq!(av, [av_want.to_le_bytes(); 2].concat(), "{what}, {p}");
                            assert_eq!(nv, [nv_want.to_le_bytes(); 2].concat(), "{what}, {p}");
                            assert_eq!(valid[p], ok, "{what}, {p}");
                        }
                        None => {
                            assert_eq!(av, 7i32.to_le_bytes(), "{what}, {p}");
                            assert_eq!(nv, [(-3i16).to_le_bytes(), 4i16.to_le_bytes()].concat());
                            assert_eq!(valid[p], 0, "{what}, {p}");
                        }
                    }
                }
            }
        }
    }
}
