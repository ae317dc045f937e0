//! Sorted runs: how a sparse read whose result order crosses its tiles
//! (row-major results of a Hilbert or col-major array, and the like)
//! reads each tile once under a budget too small to hold the tiles a
//! piece of the result crosses. Pieces are runs of one fragment's tiles
//! instead of parts of the subarray; each piece's candidate cells, sorted
//! in the result order, are written to a temporary file (a run), and the
//! runs are merged, as an external sort merges, into batches. Versions of
//! one coordinate meet in the merge, so deduplication, deletes and the
//! condition on the newest version are decided there. A sparse tile past
//! the budget spills in any order too: its runs are runs of its cells,
//! read by the chunks holding them (`Piece::cells`). (Dense reads spill
//! in stretches of tile lines instead, `super::stretches`. Until then
//! dense reads across their cell order spilled records here, and some of
//! the measures below, on `dense_large_tiles` col-major, were theirs: the
//! mechanisms they chose serve sparse reads as they stand.)
//!
//! Spill files are scratch memory, not storage: unnamed temporary files
//! (in `TMPDIR`), gone when closed, local whatever the array's backend.
//! A merge level's runs go one after another into one file, which starts
//! over once a merge has taken them; the final merge's own passes keep
//! what they read until the read ends (at most twice the runs' bytes).

use super::fields::{FieldInfo, Kind};
use super::pieces::Piece;
use super::plan::CellRef;
use super::sparse::{self, result_tie};
use super::whole_tiles::{MergeWatch, Settled};
use super::Reader;
use crate::batch::{Batch, FieldBuffer};
use crate::scratch::{self, At};
use crate::validity::{Bitmap, Validity};
use crate::{QueryError, Result, ResultLayout};
use std::cmp::Ordering;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::sync::Arc;
use tdb_format::{ArrayType, Layout};
use tdb_index::order::{cmp_cells, cmp_coord_bytes, CellKeys, CellOrder, MAX_KEY_WORDS};
use tdb_index::RangeOps;
use tdb_schema::Domain;

/// One field a run stores per cell.
#[derive(Debug, Clone)]
struct Stored {
    slot: usize,
    /// Bytes a cell (`None`: var-size, stored with its length).
    size: Option<usize>,
    nullable: bool,
}

/// What a run holds per cell: the dimensions (for the merge) and the
/// requested fields, each once.
#[derive(Debug, Clone)]
pub(crate) struct RunFormat {
    fields: Vec<Stored>,
    /// Per dimension, its index in `fields`.
    dims: Vec<usize>,
    /// Per requested field, its index in `fields`.
    out: Vec<usize>,
    /// Where every stored field has a fixed size: a record's bytes after
    /// its head, read in one call.
    fixed: Option<usize>,
    /// Per fragment, its cells' stamp, where records do not store their
    /// own ([`RunFormat::implied`]; `None`: each record stores its own).
    frag_stamps: Option<Arc<[u64]>>,
    /// Bytes of a record's tile index: 8, or 4 where no fragment has 2^32
    /// tiles.
    tile_bytes: usize,
}

impl RunFormat {
    /// The format of a read of `requested` slots of `fields`: the
    /// dimensions, then the requested fields, each once.
    pub fn new(fields: &[FieldInfo], requested: &[usize]) -> Result<Self> {
        let mut stored: Vec<Stored> = Vec::new();
        let mut index = |slot: usize| -> Result<usize> {
            if let Some(k) = stored.iter().position(|s| s.slot == slot) {
                return Ok(k);
            }
            let f = (fields.get(slot))
                .ok_or_else(|| QueryError::invalid(format!("no field in slot {slot}")))?;
            stored.push(Stored {
                slot,
                size: (!f.is_var()).then(|| f.cell_size()),
                nullable: f.nullable,
            });
            Ok(stored.len().saturating_sub(1))
        };
        let mut dims: Vec<(usize, usize)> = Vec::new();
        for (slot, f) in fields.iter().enumerate() {
            if let Kind::Dim(d) = f.kind {
                dims.push((d, index(slot)?));
            }
        }
        dims.sort_unstable();
        let out = (requested.iter())
            .map(|&s| index(s))
            .collect::<Result<_>>()?;
        let fixed = (stored.iter())
            .map(|s| s.size?.checked_add(usize::from(s.nullable)))
            .try_fold(0usize, |a, b| a.checked_add(b?));
        Ok(RunFormat {
            fields: stored,
            dims: dims.into_iter().map(|(_, k)| k).collect(),
            out,
            fixed,
            frag_stamps: None,
            tile_bytes: 8,
        })
    }

    /// The format whose records leave out what the read knows without
    /// them: their stamp where it is their fragment's (`frag_stamps`, per
    /// fragment; no fragment keeps its cells' timestamps), and the upper
    /// half of their tile index where no fragment has `most_tiles` of
    /// 2^32 or more. `sparse_bounded_tiles` spills 42 bytes of values a
    /// cell: a head of 29 bytes was 40% of its scratch file, one of 17 is
    /// 29%.
    pub fn implied(mut self, frag_stamps: Option<Vec<u64>>, most_tiles: u64) -> Self {
        self.frag_stamps = frag_stamps.map(Arc::from);
        self.tile_bytes = if most_tiles > u64::from(u32::MAX) {
            8
        } else {
            4
        };
        self
    }

    /// What a run being merged holds beside its buffer: its next record
    /// read back, a var-size value taken at 64 bytes.
    fn record_bytes(&self) -> usize {
        let values: usize = (self.fields.iter())
            .map(|s| s.size.unwrap_or(64).saturating_add(1))
            .sum();
        let spans = self
            .fields
            .len()
            .saturating_mul(std::mem::size_of::<(usize, usize, bool)>());
        (std::mem::size_of::<Record>())
            .saturating_add(self.head_len())
            .saturating_add(values)
            .saturating_add(spans)
    }

    /// Bytes of a record's head: its cell's fragment (4 bytes), tile
    /// ([`RunFormat::tile_bytes`]) and position (4), its stamp (8, where
    /// records store it), its flags (1), and where a field is var-size
    /// its body's length (4), so that a record is read in two calls
    /// whatever its fields.
    fn head_len(&self) -> usize {
        self.flags_at()
            .saturating_add(1)
            .saturating_add(if self.fixed.is_some() { 0 } else { 4 })
    }

    /// Where a record's flags are in its head.
    fn flags_at(&self) -> usize {
        let stamp = if self.frag_stamps.is_some() { 0 } else { 8 };
        8usize.saturating_add(self.tile_bytes).saturating_add(stamp)
    }

    /// The head of a record of the cell at `at`, `stamp`, `flags` into
    /// `rec` (cleared), its body's length (if any) left as zeros.
    fn put_head(&self, rec: &mut Vec<u8>, at: CellRef, stamp: u64, flags: u8) -> Result<()> {
        rec.clear();
        rec.extend_from_slice(&at.frag.to_le_bytes());
        match self.tile_bytes {
            8 => rec.extend_from_slice(&at.tile.to_le_bytes()),
            _ => {
                let tile = u32::try_from(at.tile).map_err(|_| {
                    QueryError::invalid(format!(
                        "tile {} past the 4-byte tile indices this spill chose from its \
                         fragments' tile counts (a reader bug)",
                        at.tile
                    ))
                })?;
                rec.extend_from_slice(&tile.to_le_bytes());
            }
        }
        rec.extend_from_slice(&at.cell.to_le_bytes());
        if self.frag_stamps.is_none() {
            rec.extend_from_slice(&stamp.to_le_bytes());
        }
        rec.push(flags);
        rec.resize(self.head_len(), 0);
        Ok(())
    }

    /// A record's head (`head`, from its first byte): where its cell is,
    /// its stamp and its flags.
    fn parse_head(&self, head: &[u8]) -> (CellRef, u64, u8) {
        let le32 = |at: usize| {
            (head.get(at..at.saturating_add(4)))
                .and_then(|b| b.try_into().ok())
                .map_or(0, u32::from_le_bytes)
        };
        let le64 = |at: usize| {
            (head.get(at..at.saturating_add(8)))
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_le_bytes)
        };
        let tile = match self.tile_bytes {
            8 => le64(4),
            _ => u64::from(le32(4)),
        };
        let cell_at = 4usize.saturating_add(self.tile_bytes);
        let at = CellRef {
            frag: le32(0),
            tile,
            cell: le32(cell_at),
        };
        let stamp = match &self.frag_stamps {
            Some(stamps) => usize::try_from(at.frag)
                .ok()
                .and_then(|f| stamps.get(f).copied())
                .unwrap_or(0),
            None => le64(cell_at.saturating_add(4)),
        };
        let flags = head.get(self.flags_at()).copied().unwrap_or(0);
        (at, stamp, flags)
    }

    /// A record's body length (var-size formats), from its head.
    fn body_len(&self, head: &[u8]) -> u32 {
        let at = self.flags_at().saturating_add(1);
        (head.get(at..at.saturating_add(4)))
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_le_bytes)
    }

    /// The spans of a record's stored fields (`rec.data` from `at` on):
    /// each one's validity (if nullable), length (if var-size, 4 bytes)
    /// and bytes. A span past the record is an error (our own file, but
    /// read as any other).
    fn parse_body(
        &self,
        data: &[u8],
        mut at: usize,
        spans: &mut Vec<(usize, usize, bool)>,
    ) -> Result<()> {
        let corrupt = || QueryError::invalid("a spill file's record is corrupt");
        spans.clear();
        for s in &self.fields {
            let mut valid = true;
            if s.nullable {
                valid = *data.get(at).ok_or_else(corrupt)? != 0;
                at = at.saturating_add(1);
            }
            let len = match s.size {
                Some(size) => size,
                None => {
                    let l = data.get(at..at.saturating_add(4)).ok_or_else(corrupt)?;
                    at = at.saturating_add(4);
                    u32::from_le_bytes(l.try_into().map_err(|_| corrupt())?) as usize
                }
            };
            let end = at
                .checked_add(len)
                .filter(|&e| e <= data.len())
                .ok_or_else(corrupt)?;
            spans.push((at, end, valid));
            at = end;
        }
        Ok(())
    }

    /// The slots a run stores, in its order.
    pub fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.fields.iter().map(|s| s.slot)
    }
}

/// One candidate cell read back from a run. Records are reused: the
/// merge hands each one back once its cell is out.
#[derive(Debug, Clone, Default)]
pub(crate) struct Record {
    /// Its coordinates' key in the merge's order, where the order has
    /// keys ([`RunOrder::keys`]).
    key: [u64; MAX_KEY_WORDS],
    at: CellRef,
    stamp: u64,
    /// A delete took it (decided after deduplication).
    gone: bool,
    /// The condition rejects it (decided on the newest version).
    rejected: bool,
    data: Vec<u8>,
    /// Per stored field: its bytes in `data` and whether it is valid.
    spans: Vec<(usize, usize, bool)>,
}

impl Record {
    fn value(&self, k: usize) -> (&[u8], bool) {
        match self.spans.get(k) {
            Some(&(a, b, valid)) => (self.data.get(a..b).unwrap_or_default(), valid),
            None => (&[], false),
        }
    }
}

const GONE: u8 = 1;
const REJECTED: u8 = 2;

/// A run being written: records in the result order, appended to its
/// merge level's scratch file ([`Spill::writer`]).
pub(crate) struct RunWriter {
    /// Where its records go, from the first record on: most pieces of a
    /// read of a few cells in a large tile hold none of them (`few_cells`
    /// of `sparse_large_tiles` under 16 KiB made 5,541 files for 18
    /// cells, a fifth of its time, when each run had a file of its own).
    out: Option<BufWriter<At>>,
    /// The level's file and where it ends (`None`: a fresh file, made at
    /// the first record).
    level: Option<(Arc<File>, u64)>,
    /// Where its first record went.
    start: u64,
    buffer: usize,
    records: u64,
    /// How its records stand in the merge's order, where it has keys: a
    /// piece's run (see [`Run::followed_by`]).
    order: Option<Standings>,
    /// Where its first and last records stand (the last's known once the
    /// run is done, [`RunWriter::finish`]).
    ends: Option<Box<(Standing, Standing)>>,
    /// The record being written, then the last one written.
    record: Vec<u8>,
}

/// Where a record stands in a merge whose order has keys: its key, then
/// its tie ([`Head`]).
type Standing = ([u64; MAX_KEY_WORDS], (u32, u64, u32));

/// What a writer needs to know where its records stand: the order's keys,
/// and whether ties go the newest fragment first (the global order).
#[derive(Clone)]
struct Standings {
    keys: Option<CellKeys>,
    global: bool,
}

impl Standings {
    /// The tie of a record at `at`: fragment (the newest first in the
    /// global order), tile, cell, as [`result_tie`] orders them.
    fn tie(global: bool, at: &CellRef) -> (u32, u64, u32) {
        let frag = if global { !at.frag } else { at.frag };
        (frag, at.tile, at.cell)
    }

    /// Where a record of coordinates `dim` at `at` stands (`None`: the
    /// order has no keys).
    fn of<'c>(&self, at: &CellRef, dim: impl Fn(usize) -> &'c [u8]) -> Option<Standing> {
        let keys = self.keys.as_ref()?;
        let mut key = [0u64; MAX_KEY_WORDS];
        keys.key(dim, &mut key);
        Some((key, Self::tie(self.global, at)))
    }
}

impl RunWriter {
    /// A new run, to be written to a fresh scratch file through `buffer`
    /// bytes.
    pub fn new(buffer: usize) -> Self {
        RunWriter {
            out: None,
            level: None,
            start: 0,
            buffer,
            records: 0,
            order: None,
            ends: None,
            record: Vec::new(),
        }
    }

    /// Where the run's records go, from the end of its level's file (made
    /// now if there is none).
    fn out(&mut self) -> Result<&mut BufWriter<At>> {
        if self.out.is_none() {
            let (file, end) = match self.level.take() {
                Some(level) => level,
                None => (crate::scratch::shared()?, 0),
            };
            self.start = end;
            let at = At::new(file, end, end);
            self.out = Some(BufWriter::with_capacity(self.buffer, at));
        }
        self.out
            .as_mut()
            .ok_or_else(|| QueryError::invalid("a run without its file"))
    }

    /// Appends one cell: where it is, its timestamp, its flags, and each
    /// stored field's bytes and validity (in the format's order), as one
    /// record written in one call ([`RunFormat::head_len`]).
    pub fn push(
        &mut self,
        fmt: &RunFormat,
        at: CellRef,
        stamp: u64,
        (gone, rejected): (bool, bool),
        values: &[(&[u8], bool)],
    ) -> Result<()> {
        let mut rec = std::mem::take(&mut self.record);
        let flags = if gone { GONE } else { 0 } | if rejected { REJECTED } else { 0 };
        if let Err(e) = fmt.put_head(&mut rec, at, stamp, flags) {
            self.record = rec;
            return Err(e);
        }
        let head = fmt.head_len();
        for (s, &(bytes, valid)) in fmt.fields.iter().zip(values) {
            if s.nullable {
                rec.push(u8::from(valid));
            }
            match s.size {
                Some(size) if size != bytes.len() => {
                    return Err(QueryError::invalid(format!(
                        "a cell of {} bytes where the field stores {size} (slot {})",
                        bytes.len(),
                        s.slot
                    )));
                }
                Some(_) => {}
                None => {
                    let len = u32::try_from(bytes.len()).map_err(|_| {
                        QueryError::invalid(format!(
                            "a cell of {} bytes (slot {}) is past the 4 GiB a spilled \
                             cell holds: read it without a budget",
                            bytes.len(),
                            s.slot
                        ))
                    })?;
                    rec.extend_from_slice(&len.to_le_bytes());
                }
            }
            rec.extend_from_slice(bytes);
        }
        if fmt.fixed.is_none() {
            let body = rec.len().saturating_sub(head);
            let body = u32::try_from(body)
                .map_err(|_| QueryError::invalid("a spilled record past 4 GiB"))?;
            if let Some(len) = rec.get_mut(head.saturating_sub(4)..head) {
                len.copy_from_slice(&body.to_le_bytes());
            }
        }
        let wrote = self
            .out()
            .and_then(|w| w.write_all(&rec).map_err(QueryError::Spill));
        self.record = rec;
        wrote?;
        self.records = self.records.saturating_add(1);
        // The first record's standing now, the last's when the run is done.
        if self.ends.is_none() {
            let dim = |d: usize| {
                (fmt.dims.get(d))
                    .and_then(|&k| values.get(k))
                    .map_or(&[][..], |v| v.0)
            };
            if let Some(first) = self.order.as_ref().and_then(|o| o.of(&at, dim)) {
                self.ends = Some(Box::new((first, first)));
            }
        }
        Ok(())
    }

    /// Appends a record read back from another run (a merge's output):
    /// its bytes as read, head first ([`RunReader::next`]).
    fn push_record(&mut self, rec: &Record) -> Result<()> {
        self.out()?
            .write_all(&rec.data)
            .map_err(QueryError::Spill)?;
        self.records = self.records.saturating_add(1);
        Ok(())
    }

    /// The run of records of `fmt`, written (its last bytes maybe still
    /// in the writer's buffer, which goes with it to its level,
    /// [`Run::open`]; with no record, its level's file as it was, to go
    /// back to the level).
    pub fn finish(mut self, fmt: &RunFormat) -> Result<Run> {
        if let (Some(order), Some(ends), true) = (&self.order, &mut self.ends, self.records > 1) {
            // The last record's standing, from its bytes.
            let (at, _, _) = fmt.parse_head(&self.record);
            let mut spans = Vec::new();
            fmt.parse_body(&self.record, fmt.head_len(), &mut spans)?;
            let dim = |d: usize| {
                (fmt.dims.get(d))
                    .and_then(|&k| spans.get(k))
                    .and_then(|&(a, b, _)| self.record.get(a..b))
                    .unwrap_or_default()
            };
            if let Some(last) = order.of(&at, dim) {
                ends.1 = last;
            }
        }
        let (file, open) = match self.out {
            Some(out) => {
                let end = written_end(&out);
                let file = Some((out.get_ref().file(), self.start..end));
                (file, Some(Box::new(out)))
            }
            None => (self.level.map(|(f, end)| (f, end..end)), None),
        };
        Ok(Run {
            file,
            records: self.records,
            ends: self.ends,
            open,
        })
    }
}

/// Where the bytes given to `out` end in its file: what it wrote, then
/// what its buffer holds.
fn written_end(out: &BufWriter<At>) -> u64 {
    (out.get_ref().pos()).saturating_add(out.buffer().len() as u64)
}

/// `out`'s buffer written out: its file and where it ends.
fn written_out(out: BufWriter<At>) -> Result<(Arc<File>, u64)> {
    let at = out
        .into_inner()
        .map_err(|e| QueryError::Spill(e.into_error()))?;
    Ok((at.file(), at.pos()))
}

/// A run written: its scratch file and the bytes it holds there (none for
/// no record), and how many records it holds.
pub(crate) struct Run {
    file: Option<(Arc<File>, std::ops::Range<u64>)>,
    records: u64,
    /// Where a piece's run's first and last records stand in the merge's
    /// order, where it has keys (none for a merge's run).
    ends: Option<Box<(Standing, Standing)>>,
    /// The writer it was written through, its buffer not yet written out,
    /// until its level keeps it ([`Level::open`]).
    open: Option<Box<BufWriter<At>>>,
}

impl Run {
    /// Records held.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Bytes held.
    fn bytes(&self) -> u64 {
        self.file
            .as_ref()
            .map_or(0, |(_, r)| r.end.saturating_sub(r.start))
    }

    /// Whether `next` was written right after this run in the same file
    /// and lies wholly after it in the order (its first record stands past
    /// this one's last): then [`Run::extend`] makes them one run, as if
    /// written at once.
    fn followed_by(&self, next: &Run) -> bool {
        let (Some(ends), Some(next_ends)) = (&self.ends, &next.ends) else {
            return false;
        };
        let (Some((file, bytes)), Some((next_file, next_bytes))) = (&self.file, &next.file) else {
            return false;
        };
        ends.1 < next_ends.0 && Arc::ptr_eq(file, next_file) && bytes.end == next_bytes.start
    }

    /// This run and `next`, which follows it ([`Run::followed_by`]), as one.
    fn extend(&mut self, next: Run) {
        if let (Some((_, bytes)), Some((_, next_bytes))) = (&mut self.file, &next.file) {
            bytes.end = next_bytes.end;
        }
        if let (Some(ends), Some(next_ends)) = (&mut self.ends, &next.ends) {
            ends.1 = next_ends.1;
        }
        self.records = self.records.saturating_add(next.records);
    }
}

/// A run read back, record by record.
struct RunReader {
    input: Option<BufReader<At>>,
    left: u64,
    /// Bytes of the run not yet read: no record claims more.
    bytes: u64,
}

impl RunReader {
    fn new(run: Run, buffer: usize) -> Result<Self> {
        let bytes = run.bytes();
        if let Some(out) = run.open {
            written_out(*out)?;
        }
        Ok(RunReader {
            input: (run.file).map(|(f, r)| scratch::run_reader(f, r.start, r.end, buffer)),
            left: run.records,
            bytes,
        })
    }

    /// Reads the next record into `rec` (its buffers reused), its key
    /// made by `keys`; `false` at the run's end. Two read calls at most:
    /// the head (with every field, where they all have a fixed size), then
    /// the body its head gives the length of.
    fn next(&mut self, fmt: &RunFormat, keys: Option<&CellKeys>, rec: &mut Record) -> Result<bool> {
        if self.left == 0 {
            return Ok(false);
        }
        self.left = self.left.saturating_sub(1);
        let r = (self.input.as_mut())
            .ok_or_else(|| QueryError::invalid("a spill file's records are missing"))?;
        let head = fmt.head_len();
        let first = head.saturating_add(fmt.fixed.unwrap_or(0));
        rec.data.resize(first, 0);
        r.read_exact(&mut rec.data).map_err(QueryError::Spill)?;
        let flags;
        (rec.at, rec.stamp, flags) = fmt.parse_head(&rec.data);
        let mut whole = first as u64;
        if fmt.fixed.is_none() {
            // Our own file, but its lengths are still checked before
            // anything is allocated for them.
            let body = fmt.body_len(&rec.data);
            whole = whole.saturating_add(u64::from(body));
            if whole > self.bytes {
                return Err(QueryError::invalid(
                    "a spill file's record length is corrupt",
                ));
            }
            rec.data.resize(head.saturating_add(body as usize), 0);
            let into = rec.data.get_mut(head..).unwrap_or_default();
            r.read_exact(into).map_err(QueryError::Spill)?;
        }
        self.bytes = self.bytes.saturating_sub(whole);
        fmt.parse_body(&rec.data, head, &mut rec.spans)?;
        rec.gone = flags & GONE != 0;
        rec.rejected = flags & REJECTED != 0;
        if let Some(keys) = keys {
            let dim = |d: usize| fmt.dims.get(d).map_or(&[][..], |&k| rec.value(k).0);
            let mut key = [0u64; MAX_KEY_WORDS];
            keys.key(dim, &mut key);
            rec.key = key;
        }
        Ok(true)
    }
}

/// How runs compare: the result order of their cells' coordinates, then
/// TileDB's order among equal values.
pub(crate) struct RunOrder {
    pub domain: Domain,
    pub ops: Vec<RangeOps>,
    pub kind: CellOrder,
    pub layout: ResultLayout,
    /// Keys of `kind` over `domain` where it has them: records then
    /// compare by key, not value by value through the datatypes.
    pub keys: Option<CellKeys>,
    /// Records compare by where they are stored (tile, cell): a global-order
    /// read of one fragment stored in another order than TileDB compares
    /// by, which TileDB returns as stored ([`sparse::stored_out_of_order`]).
    pub stored: bool,
}

impl RunOrder {
    /// The order `kind` of cells of `domain`, ties by `layout`.
    pub fn new(domain: Domain, ops: Vec<RangeOps>, kind: CellOrder, layout: ResultLayout) -> Self {
        let keys = CellKeys::new(&domain, kind);
        RunOrder {
            domain,
            ops,
            kind,
            layout,
            keys,
            stored: false,
        }
    }

    /// `a` and `b` by their coordinates' values only (by where they are
    /// stored, for a fragment read as stored: never equal there, and one
    /// fragment holds no two versions of a coordinate).
    fn values(&self, fmt: &RunFormat, a: &Record, b: &Record) -> Ordering {
        if self.stored {
            return (a.at.tile, a.at.cell).cmp(&(b.at.tile, b.at.cell));
        }
        if self.keyed() {
            return a.key.cmp(&b.key);
        }
        let coord = |i: usize, d: usize| {
            let r = if i == 0 { a } else { b };
            fmt.dims.get(d).map_or(&[][..], |&k| r.value(k).0)
        };
        cmp_cells(&self.domain, &self.ops, self.kind, &coord, 0, 1)
    }

    /// Whether records compare by their keys alone.
    fn keyed(&self) -> bool {
        self.keys.is_some() && !self.stored
    }

    fn cmp(&self, fmt: &RunFormat, a: &Record, b: &Record) -> Ordering {
        self.values(fmt, a, b)
            .then_with(|| result_tie(self.layout, &a.at, &b.at))
    }
}

/// A run's next record's key and tie-break in a merge (where the order
/// has keys: compared without going to the record).
#[derive(Debug, Clone, Copy)]
struct Head {
    key: [u64; MAX_KEY_WORDS],
    /// [`result_tie`] as a tuple that sorts the same way: fragment (in a
    /// global-order read, inverted: the newest first), tile, cell.
    tie: (u32, u64, u32),
}

/// Runs being merged: each one's next record, in a tree of losers (a
/// tournament: each inner node holds the run that lost the match between
/// the winners below it, the overall winner kept apart). Handing out a
/// record and reading its run's next replays the matches on that run's
/// path alone, one comparison a level (a binary heap's sift makes two:
/// `dense_large_tiles` col-major under 64 KiB, a merge of 125 runs, spent
/// a sixth of its time there).
struct Heads {
    readers: Vec<RunReader>,
    /// Per run, its next record (read into again once handed out).
    recs: Vec<Record>,
    /// Per run, where its next record stands (`None`: the run is done).
    heads: Vec<Option<Head>>,
    /// Inner nodes `1..n` of the tree over `n` runs, leaves at `n..2n`
    /// (run `r` at `n + r`; a node's parent is at half its place): the
    /// run that lost there. (Node 0 unused.)
    losers: Vec<usize>,
    /// The run whose record comes first (`None`: no run).
    winner: Option<usize>,
    /// Where the winner won its last match again: the best of the runs
    /// that lost to it on its path (the runner-up). While its next record
    /// still comes before that run's, it wins again without a match
    /// replayed: runs that interleave in stretches (row-major results of
    /// a row-major array's tile columns) cost a comparison a record, not
    /// one a level.
    second: Option<usize>,
    /// Records handed back, to read into again.
    free: Vec<Record>,
}

impl Heads {
    fn new(runs: Vec<Run>, buffer: usize, fmt: &RunFormat, order: &RunOrder) -> Result<Self> {
        let readers = (runs.into_iter())
            .map(|r| RunReader::new(r, buffer))
            .collect::<Result<Vec<_>>>()?;
        let n = readers.len();
        let mut h = Heads {
            recs: vec![Record::default(); n],
            heads: vec![None; n],
            losers: vec![0; n],
            winner: None,
            second: None,
            readers,
            free: Vec::new(),
        };
        for k in 0..n {
            let head = h.read(k, fmt, order)?;
            if let Some(slot) = h.heads.get_mut(k) {
                *slot = head;
            }
        }
        // Every match played bottom up: each node's winner, from the
        // leaves (runs) to the root.
        let mut winners = vec![0usize; n.saturating_mul(2)];
        for (k, w) in winners.iter_mut().enumerate().skip(n) {
            *w = k.saturating_sub(n);
        }
        for node in (1..n).rev() {
            let left = winners.get(node.saturating_mul(2)).copied().unwrap_or(0);
            let right = (winners.get(node.saturating_mul(2).saturating_add(1)))
                .copied()
                .unwrap_or(0);
            let (win, lose) = match h.before(right, left, fmt, order) {
                true => (right, left),
                false => (left, right),
            };
            if let (Some(w), Some(l)) = (winners.get_mut(node), h.losers.get_mut(node)) {
                (*w, *l) = (win, lose);
            }
        }
        h.winner = match n {
            0 => None,
            1 => Some(0),
            _ => winners.get(1).copied(),
        };
        Ok(h)
    }

    /// Reads run `k`'s next record into its slot: its head, `None` at
    /// the run's end.
    fn read(&mut self, k: usize, fmt: &RunFormat, order: &RunOrder) -> Result<Option<Head>> {
        let (Some(reader), Some(rec)) = (self.readers.get_mut(k), self.recs.get_mut(k)) else {
            return Ok(None);
        };
        if !reader.next(fmt, order.keys.as_ref(), rec)? {
            return Ok(None);
        }
        let global = order.layout == ResultLayout::GlobalOrder;
        Ok(Some(Head {
            key: rec.key,
            tie: Standings::tie(global, &rec.at),
        }))
    }

    /// Whether run `a`'s next record comes before run `b`'s (a run that
    /// is done comes after every other).
    fn before(&self, a: usize, b: usize, fmt: &RunFormat, order: &RunOrder) -> bool {
        let (Some(Some(x)), Some(y)) = (self.heads.get(a), self.heads.get(b)) else {
            return false;
        };
        let Some(y) = y else {
            return true;
        };
        if order.keyed() {
            return (x.key, x.tie) < (y.key, y.tie);
        }
        match (self.recs.get(a), self.recs.get(b)) {
            (Some(x), Some(y)) => order.cmp(fmt, x, y) == Ordering::Less,
            _ => false,
        }
    }

    /// Records not yet handed out.
    fn left(&self) -> u64 {
        let heads = self.heads.iter().filter(|h| h.is_some()).count() as u64;
        (self.readers.iter()).fold(heads, |n, r| n.saturating_add(r.left))
    }

    fn peek(&self) -> Option<&Record> {
        let w = self.winner?;
        self.heads.get(w)?.as_ref()?;
        self.recs.get(w)
    }

    fn pop(&mut self, fmt: &RunFormat, order: &RunOrder) -> Result<Option<Record>> {
        let Some(k) = self
            .winner
            .filter(|&w| matches!(self.heads.get(w), Some(Some(_))))
        else {
            return Ok(None);
        };
        let spare = self.free.pop().unwrap_or_default();
        let Some(slot) = self.recs.get_mut(k) else {
            return Ok(None);
        };
        let rec = std::mem::replace(slot, spare);
        let head = self.read(k, fmt, order)?;
        if let Some(slot) = self.heads.get_mut(k) {
            *slot = head;
        }
        if let Some(second) = self.second {
            if self.before(k, second, fmt, order) {
                return Ok(Some(rec));
            }
        }
        // Replay run `k`'s matches up to the root.
        let n = self.readers.len();
        let mut win = k;
        let mut node = n.saturating_add(k) / 2;
        while node > 0 {
            if let Some(&loser) = self.losers.get(node) {
                if self.before(loser, win, fmt, order) {
                    if let Some(l) = self.losers.get_mut(node) {
                        *l = win;
                    }
                    win = loser;
                }
            }
            node /= 2;
        }
        self.winner = Some(win);
        self.second = None;
        if win == k {
            // The best of the losers on its path.
            let mut node = n.saturating_add(k) / 2;
            while node > 0 {
                if let Some(&loser) = self.losers.get(node) {
                    let better = self
                        .second
                        .is_none_or(|s| self.before(loser, s, fmt, order));
                    if better {
                        self.second = Some(loser);
                    }
                }
                node /= 2;
            }
        }
        Ok(Some(rec))
    }

    /// Takes back a record popped, its buffers to be reused.
    fn recycle(&mut self, rec: Record) {
        // A few suffice: records out at once are a group's of one value.
        if self.free.len() < 8 {
            self.free.push(rec);
        }
    }
}

/// A merge level's scratch file. A file a run cost more than the run's
/// bytes where runs are small (creating and dropping a file on ext4), so a
/// level's runs go one after another into its file, `fan_in` to a file:
/// the runs a merge of the level takes at once (its oldest), so that the
/// merge leaves the file to no one and it goes (or, still the level's,
/// starts over): a read's scratch space stays about what its live runs
/// hold.
#[derive(Default)]
struct Level {
    /// The file and where it ends (`None` while a writer has it, before
    /// the level's first run, or while [`Level::open`] holds it).
    file: Option<(Arc<File>, u64)>,
    /// The file's writer, kept from one run to the next with what its
    /// buffer holds: a piece's run of a few cells is then no write call
    /// of its own (`sparse_unfiltered_tiles` under 16 KiB: 2,048 runs of
    /// 16 cells, a write each, 8% of the read). Written out before a merge
    /// reads the level ([`Spill::written_out`]).
    open: Option<BufWriter<At>>,
    /// Runs the file has taken.
    runs: usize,
}

/// The runs of a read and what merging them takes.
pub(crate) struct Spill {
    pub fmt: RunFormat,
    /// How runs compare: the read's result order.
    order: RunOrder,
    /// Each run and how many merges made it (0: a piece's).
    runs: Vec<(Run, u32)>,
    /// Per level (merges that made its runs), the scratch file its runs
    /// are appended to ([`Level`]).
    levels: Vec<Level>,
    /// Bytes the runs a merge reads share.
    reading: usize,
    /// Bytes a run is written through.
    out_buffer: usize,
    /// Runs merged at once.
    fan_in: usize,
}

impl Spill {
    /// The most runs merged at once.
    const MAX_FAN_IN: usize = 1024;

    /// Runs of `fmt` in `order`, merged through at most `memory` bytes of
    /// buffers: a quarter (up to 64 KiB) for the run being written, the
    /// rest shared by the `fan_in` runs a merge reads, each with its next
    /// record ([`RunFormat::record_bytes`]; from two 512-byte buffers and
    /// records on, below which two are merged all the same). A wide merge
    /// with small buffers beats a narrow one with large buffers: each pass
    /// rereads and rewrites every cell, a smaller buffer only costs more
    /// read calls. Buffers of 1 KiB, not 4 KiB, under 8 KiB (a 16 KiB
    /// budget) merge 7 runs at a time, not 2: W7's reads under 16 KiB went
    /// from 3.6–4.0× to about 2.3× the unbudgeted read's time
    /// (docs/performance.md); 512 bytes with the record charged keep 7
    /// (its 2-D reads 10% faster than 1 KiB and the record, 4 runs). The writer's own buffer is larger: each of
    /// its calls is a buffered write of the scratch file, whose cost on
    /// ext4 is the call more than the bytes (col-major results of
    /// `dense_large_tiles` under 256 KiB: 0.79 → 0.65 s with 16 KiB
    /// instead of 1 KiB). A piece's run is written while its tiles are
    /// held, but no batch is: the batch's share of the budget holds it.
    #[cfg(test)]
    pub fn new(fmt: RunFormat, order: RunOrder, memory: u64) -> Self {
        Self::within(fmt, order, memory, usize::MAX)
    }

    /// [`Spill::new`], its writer's buffer at most `writer` bytes: the
    /// batch's share holds it while pieces write runs, and pieces take
    /// what it leaves (`Reader::tile_budget`). (A tile share swollen by
    /// the chunks a piece reaches, 39 KiB of `sparse_bounded_tiles` under
    /// 16 KiB, made a 10 KiB buffer, more than the batch's 8.)
    pub fn within(fmt: RunFormat, order: RunOrder, memory: u64, writer: usize) -> Self {
        let memory = usize::try_from(memory).unwrap_or(usize::MAX);
        let out_buffer = (memory / 4).min(writer).clamp(512, 64 << 10);
        let rest = memory.saturating_sub(out_buffer);
        let per_run = fmt.record_bytes().saturating_add(512);
        let fan_in = (rest.checked_div(per_run).unwrap_or(0)).clamp(2, Self::MAX_FAN_IN);
        Spill {
            fmt,
            order,
            runs: Vec::new(),
            levels: Vec::new(),
            reading: rest,
            out_buffer,
            fan_in,
        }
    }

    /// Bytes each of `runs` runs merged at once is read through: their
    /// share of the memory, from 512 bytes to 64 KiB. Fewer runs than the
    /// fan-in read through larger buffers, in fewer calls (a dense read's
    /// final merge of a few dozen runs under 1 MiB: 1 KiB a call before).
    /// The final merge (`last`) writes no run: its runs share the
    /// writer's part too.
    fn buffer(&self, runs: usize, last: bool) -> usize {
        let reading = match last {
            true => self.reading.saturating_add(self.out_buffer),
            false => self.reading,
        };
        let reading = reading.max(scratch::READING_LEAST);
        (reading.checked_div(runs.max(1)).unwrap_or(0))
            .saturating_sub(self.fmt.record_bytes())
            .clamp(512, 64 << 10)
    }

    /// A writer for a new run of `level` (0: a piece's), appended to the
    /// level's file. The writer takes the file until its run lands
    /// ([`Spill::push`]), so no two runs are ever written at one place; a
    /// run abandoned halfway leaves the level a fresh file.
    pub fn writer(&mut self, level: u32) -> Result<RunWriter> {
        let mut w = RunWriter::new(scratch::write_buffer(self.out_buffer));
        let fan_in = self.fan_in;
        if let Some(lv) = self.level(level) {
            if lv.runs >= fan_in {
                // A full file: the next run starts a fresh one (its runs'
                // bytes written out first).
                if let Some(out) = lv.open.take() {
                    written_out(out)?;
                }
                *lv = Level::default();
            }
            match lv.open.take() {
                Some(out) => {
                    w.start = written_end(&out);
                    w.out = Some(out);
                }
                None => w.level = lv.file.take(),
            }
        }
        // A piece's run knows where its ends stand, to extend the last.
        if level == 0 && self.order.keyed() {
            w.order = Some(Standings {
                keys: self.order.keys.clone(),
                global: self.order.layout == ResultLayout::GlobalOrder,
            });
        }
        Ok(w)
    }

    /// Level `level`, made if new.
    fn level(&mut self, level: u32) -> Option<&mut Level> {
        let k = level as usize;
        if self.levels.len() <= k {
            self.levels.resize_with(k.saturating_add(1), Level::default);
        }
        self.levels.get_mut(k)
    }

    /// Run `run` of `level` is written: its file's end moves past it, and
    /// (`new`: not one that extends the last) the file holds one run more.
    /// Pieces' runs (level 0) leave their writer open to the level
    /// ([`Level::open`]); a merge's run is written out (one writer's buffer
    /// is held between pieces, in the batch's share as the writer's was).
    fn landed(&mut self, level: u32, run: &mut Run, new: bool) -> Result<()> {
        let open = match run.open.take() {
            Some(out) if level > 0 => {
                written_out(*out)?;
                None
            }
            open => open,
        };
        let Some((file, bytes)) = &run.file else {
            return Ok(());
        };
        if let Some(lv) = self.level(level) {
            match open {
                Some(out) => lv.open = Some(*out),
                None => lv.file = Some((Arc::clone(file), bytes.end)),
            }
            lv.runs = lv.runs.saturating_add(usize::from(new && run.records > 0));
        }
        Ok(())
    }

    /// Every level's writer's buffer written out, before a merge reads
    /// runs.
    fn written_out(&mut self) -> Result<()> {
        for lv in &mut self.levels {
            if let Some(out) = lv.open.take() {
                lv.file = Some(written_out(out)?);
            }
        }
        Ok(())
    }

    /// A merge took runs of `level`: where no run is left in its file, the
    /// file starts over (emptied, so a read's scratch space stays about
    /// what its live runs hold).
    fn emptied(&mut self, level: u32) -> Result<()> {
        let Some(lv) = self.levels.get_mut(level as usize) else {
            return Ok(());
        };
        match lv.file.take() {
            // Nothing but the level holds the file (no reader, no run).
            Some((file, _)) if Arc::strong_count(&file) == 1 => {
                file.set_len(0).map_err(QueryError::Spill)?;
                *lv = Level {
                    file: Some((file, 0)),
                    open: None,
                    runs: 0,
                };
            }
            other => lv.file = other,
        }
        Ok(())
    }

    /// Adds a piece's run. A run that follows the last one, in its file
    /// and in the order, extends it ([`Run::followed_by`]): pieces of a few cells
    /// along one result line make one run of the line, not one each
    /// (`dense_large_tiles` col-major under 16 KiB: runs of a row's 1,024
    /// cells instead of 128, a merge pass fewer), and a global-order read's
    /// runs one a fragment (`sparse_bounded_tiles` under 256 KiB: 0.22 →
    /// 0.13 s). Past
    /// [`Spill::held_most`] runs, `fan_in` runs merged as often are merged
    /// into one (and so on up), as a counter carries: a read of many small
    /// pieces keeps a few runs per level, never one per piece. Runs compare
    /// by their cells alone, so which runs merge first changes nothing.
    pub fn push(&mut self, mut run: Run) -> Result<()> {
        let follows = matches!(self.runs.last(), Some((last, 0)) if last.followed_by(&run));
        self.landed(0, &mut run, !follows)?;
        if run.records == 0 {
            return Ok(());
        }
        if let Some((last, _)) = self.runs.last_mut() {
            if follows {
                last.extend(run);
                return Ok(());
            }
            // Only the newest run's ends are looked at.
            last.ends = None;
        }
        self.runs.push((run, 0));
        Ok(())
    }

    /// Whether [`Spill::settle`] has runs to merge.
    pub fn unsettled(&self) -> bool {
        self.runs.len() > self.held_most()
    }

    /// Merges held runs, a level's `fan_in` at a time, while more than
    /// [`Spill::held_most`] are held. Called between pieces, when no tile
    /// is held: a merge's buffers then take the tiles' memory, not the
    /// batch's share, which pieces use too ([`Spill::writing`]).
    pub fn settle(&mut self) -> Result<()> {
        while self.runs.len() > self.held_most() {
            // The lowest level with `fan_in` runs: its oldest `fan_in` (a
            // file's, [`Level`]).
            let mut count: Vec<usize> = Vec::new();
            for &(_, level) in &self.runs {
                let l = level as usize;
                if count.len() <= l {
                    count.resize(l.saturating_add(1), 0);
                }
                if let Some(c) = count.get_mut(l) {
                    *c = c.saturating_add(1);
                }
            }
            // None: fewer than `fan_in` on every level, as a counter's
            // carries leave them (so held runs grow with the log of the
            // cells, as before; merging the smallest there instead, a read
            // of 8,192 runs at a fan-in of 8 held to 8 runs took 62 s).
            let Some(level) = (count.iter()).position(|&c| c >= self.fan_in) else {
                break;
            };
            let level = u32::try_from(level).unwrap_or(u32::MAX);
            let mut group = Vec::with_capacity(self.fan_in);
            for (run, l) in std::mem::take(&mut self.runs) {
                if l == level && group.len() < self.fan_in {
                    group.push(run);
                } else {
                    self.runs.push((run, l));
                }
            }
            let up = level.saturating_add(1);
            let merged = self.merge_runs(group, up)?;
            self.emptied(level)?;
            if let Some((last, _)) = self.runs.last_mut() {
                last.ends = None;
            }
            self.runs.push((merged, up));
        }
        Ok(())
    }

    /// What the spill holds while pieces write runs: the writer's buffer
    /// and the held runs, with the next piece's (they are settled to at
    /// most [`Spill::held_most`] between pieces, [`Spill::settle`]). No
    /// batch is made while runs are written, so pieces take some of the
    /// rest (`Reader::tile_budget`).
    pub fn writing(&self) -> u64 {
        let runs = self.runs.len().saturating_add(1);
        let held = runs.saturating_mul(std::mem::size_of::<(Run, u32)>());
        (self.out_buffer.saturating_add(held)) as u64
    }

    /// Runs held before any is merged: four times the fan-in (the newest
    /// alone keeps where its ends stand, [`Run::followed_by`]). Merges wait
    /// until then, so that the last ones can take just the runs it takes
    /// ([`Spill::merge`]): `dense_large_tiles` col-major under 256 KiB, 288
    /// runs under a fan-in of 139, rewrote 97% of its cells merging them
    /// as they came, 46% now (0.25 → 0.20 s). (A held
    /// run is 64 bytes: four times the fan-in is under half the memory its
    /// merge buffers take, held in the batch's share with the writer's
    /// buffer, as no batch is made while runs are written.)
    fn held_most(&self) -> usize {
        self.fan_in.saturating_mul(4)
    }

    /// The `k` held runs with the fewest bytes merged into one.
    fn merge_smallest(&mut self, k: usize) -> Result<()> {
        self.runs.sort_by_key(|r| std::cmp::Reverse(r.0.bytes()));
        let group = self.runs.split_off(self.runs.len().saturating_sub(k));
        let up = (group.iter().map(|r| r.1).max())
            .unwrap_or(0)
            .saturating_add(1);
        let merged = self.merge_runs(group.into_iter().map(|r| r.0).collect(), up)?;
        self.runs.push((merged, up));
        Ok(())
    }

    /// How many runs are held.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// `runs` merged into one run of `level`.
    fn merge_runs(&mut self, runs: Vec<Run>, level: u32) -> Result<Run> {
        self.written_out()?;
        let buffer = self.buffer(runs.len(), false);
        let mut heads = Heads::new(runs, buffer, &self.fmt, &self.order)?;
        let mut out = self.writer(level)?;
        while let Some(rec) = heads.pop(&self.fmt, &self.order)? {
            out.push_record(&rec)?;
            heads.recycle(rec);
        }
        let mut run = out.finish(&self.fmt)?;
        self.landed(level, &mut run, true)?;
        Ok(run)
    }

    /// The merge of every run: runs beyond the fan-in are first merged
    /// into longer ones, the smallest first (as a Huffman code joins the
    /// rarest symbols), the first merge just large enough that each later
    /// one takes `fan_in` and the last leaves `fan_in`: the fewest bytes
    /// rewritten. (Merging the oldest `fan_in` first, as before, rewrote
    /// nearly all of a read's cells to take in a few hundred late ones.)
    pub fn merge(mut self, dedup: bool, cells: usize) -> Result<Merge> {
        if self.runs.len() > self.fan_in {
            // Merging k runs leaves k − 1 fewer: what is left over a
            // multiple of `fan_in − 1`.
            let step = self.fan_in.saturating_sub(1);
            let left = (self.runs.len().saturating_sub(2)).checked_rem(step);
            let first = left.unwrap_or(0).saturating_add(2);
            self.merge_smallest(first)?;
        }
        while self.runs.len() > self.fan_in {
            self.merge_smallest(self.fan_in)?;
        }
        self.written_out()?;
        let runs: Vec<(Run, u32)> = std::mem::take(&mut self.runs);
        let buffer = self.buffer(runs.len(), true);
        let runs: Vec<Run> = runs.into_iter().map(|r| r.0).collect();
        let heads = Heads::new(runs, buffer, &self.fmt, &self.order)?;
        Ok(Merge {
            fmt: self.fmt,
            heads,
            order: self.order,
            dedup,
            ready: VecDeque::new(),
            cells: cells.max(1),
            watch: None,
        })
    }
}

/// The final merge, handing out result batches.
pub(crate) struct Merge {
    fmt: RunFormat,
    heads: Heads,
    order: RunOrder,
    /// Duplicates not allowed: the newest version of each coordinate
    /// stands, then its delete and the condition decide.
    dedup: bool,
    /// Result cells merged, not yet handed out.
    ready: VecDeque<Record>,
    /// Cells a batch.
    cells: usize,
    /// For an aggregation answering whole tiles from their metadata (the
    /// runs in the global order, deduplicated): which tiles TileDB's merge
    /// takes whole.
    watch: Option<Box<MergeWatch>>,
}

impl Merge {
    /// This merge, following which tiles TileDB's merge takes whole.
    pub fn with_watch(self, watch: MergeWatch) -> Self {
        Merge {
            watch: Some(Box::new(watch)),
            ..self
        }
    }

    /// The last batch's runs of cells of tiles that may yet answer from
    /// their metadata: first cell, cells, (plan, tile).
    pub fn take_pending(&mut self) -> Vec<(usize, usize, (usize, u64))> {
        (self.watch.as_mut()).map_or_else(Vec::new, |w| std::mem::take(w.pending()))
    }

    /// The tiles settled since the last call (`last`: all).
    pub fn settled(&mut self, last: bool) -> Settled {
        (self.watch.as_mut()).map_or_else(Settled::default, |w| w.flush(last))
    }

    /// The next result cell.
    fn next_cell(&mut self) -> Result<Option<Record>> {
        loop {
            if let Some(r) = self.ready.pop_front() {
                return Ok(Some(r));
            }
            let (fmt, order) = (&self.fmt, &self.order);
            let Some(first) = self.heads.pop(fmt, order)? else {
                return Ok(None);
            };
            if !self.dedup {
                return Ok(Some(first));
            }
            // Mostly a coordinate has one version: no group.
            if (self.heads.peek()).is_none_or(|next| order.values(fmt, &first, next).is_ne()) {
                if let Some(w) = &mut self.watch {
                    let tile = (first.at.frag as usize, first.at.tile);
                    w.coordinate(&[(tile, !first.gone && !first.rejected)]);
                }
                if first.gone || first.rejected {
                    self.heads.recycle(first);
                    continue;
                }
                return Ok(Some(first));
            }
            // Every version of the coordinates' values (and, -0.0 beside
            // 0.0, of equal values) comes next.
            let mut group = vec![first];
            while let Some(next) = self.heads.peek() {
                match group.first() {
                    Some(f) if order.values(fmt, f, next).is_eq() => {}
                    _ => break,
                }
                if let Some(r) = self.heads.pop(fmt, order)? {
                    group.push(r);
                }
            }
            by_version(fmt, &mut group);
            if let Some(w) = &mut self.watch {
                watch_versions(w, fmt, &group);
            }
            self.ready = survivors(fmt, order, group).into();
        }
    }

    /// The next batch of `fields` (validity as bits with `packed`), or
    /// `None` once every cell is out.
    pub fn next_batch(&mut self, fields: &[FieldInfo], packed: bool) -> Result<Option<Batch>> {
        // The batch's cells at most: its buffers made that large at once
        // (grown cell by cell, their reallocations were a twelfth of a
        // spilled read's merge).
        let most = (self.heads.left())
            .saturating_add(self.ready.len() as u64)
            .min(self.cells as u64) as usize;
        let mut out: Vec<FieldBuffer> = Vec::with_capacity(self.fmt.out.len());
        for &k in &self.fmt.out {
            let stored = self.fmt.fields.get(k);
            let slot = stored.map_or(usize::MAX, |s| s.slot);
            let f = (fields.get(slot))
                .ok_or_else(|| QueryError::invalid(format!("no field in slot {slot}")))?;
            let mut b = f.empty_buffer();
            match stored.and_then(|s| s.size) {
                Some(size) => b.data.reserve(most.saturating_mul(size)),
                None => {
                    if let Some(o) = &mut b.offsets {
                        o.reserve(most);
                    }
                }
            }
            match (&mut b.validity, packed) {
                (Some(v), true) => *v = Validity::Bits(Bitmap::default()),
                (Some(Validity::Bytes(v)), false) => v.reserve(most),
                _ => {}
            }
            out.push(b);
        }
        let mut n = 0usize;
        while n < self.cells {
            let Some(rec) = self.next_cell()? else {
                break;
            };
            for (buf, &k) in out.iter_mut().zip(&self.fmt.out) {
                let (bytes, valid) = rec.value(k);
                buf.push(bytes, valid);
            }
            let tile = (rec.at.frag as usize, rec.at.tile);
            if let Some(w) = self.watch.as_mut().filter(|w| w.folds_apart(tile)) {
                let pending = w.pending();
                match pending.last_mut() {
                    Some((at, len, t)) if *t == tile && at.saturating_add(*len) == n => {
                        *len = len.saturating_add(1)
                    }
                    _ => pending.push((n, 1, tile)),
                }
            }
            self.heads.recycle(rec);
            n = n.saturating_add(1);
        }
        Ok((n > 0).then_some(Batch {
            num_cells: n as u64,
            fields: out,
        }))
    }
}

/// `a` and `b`'s coordinates by their bytes, as TileDB deduplicates.
fn cmp_bytes(fmt: &RunFormat, a: &Record, b: &Record) -> Ordering {
    let coord = |i: usize, d: usize| {
        let r = if i == 0 { a } else { b };
        fmt.dims.get(d).map_or(&[][..], |&k| r.value(k).0)
    };
    cmp_coord_bytes(fmt.dims.len(), &coord, 0, 1)
}

/// A group of equal values by coordinate (its bytes), newest first.
fn by_version(fmt: &RunFormat, group: &mut [Record]) {
    group.sort_by(|a, b| {
        cmp_bytes(fmt, a, b)
            .then_with(|| b.stamp.cmp(&a.stamp))
            .then_with(|| b.at.frag.cmp(&a.at.frag))
    });
}

/// A group's coordinates ([`by_version`]) to `watch`, each with its
/// versions: the newest is kept unless deleted or rejected.
fn watch_versions(watch: &mut MergeWatch, fmt: &RunFormat, group: &[Record]) {
    for versions in group.chunk_by(|a, b| cmp_bytes(fmt, a, b).is_eq()) {
        let seen: Vec<((usize, u64), bool)> = (versions.iter().enumerate())
            .map(|(k, r)| {
                (
                    (r.at.frag as usize, r.at.tile),
                    k == 0 && !r.gone && !r.rejected,
                )
            })
            .collect();
        watch.coordinate(&seen);
    }
}

/// The cells of one group of equal values ([`by_version`]) that are
/// results: per coordinate the newest version, unless deleted or rejected
/// by the condition; in the result order.
fn survivors(fmt: &RunFormat, order: &RunOrder, mut group: Vec<Record>) -> Vec<Record> {
    group.dedup_by(|b, a| cmp_bytes(fmt, a, b).is_eq());
    group.retain(|r| !r.gone && !r.rejected);
    group.sort_by(|a, b| result_tie(order.layout, &a.at, &b.at));
    group
}

impl Reader {
    /// Whether this read's pieces are runs of tiles, spilled sorted and
    /// merged: a sparse read in an order its tiles do not follow (cells
    /// row-major of a Hilbert or col-major array, and the like; the
    /// Hilbert order over several fragments; the global order where
    /// pieces cut by the subarray would hold their tiles' bytes more than
    /// 2.5 times over, [`Reader::cut_pieces_read_again`]) whose tiles pass
    /// the tile budget. Cut by the subarray, its pieces would each read
    /// every tile they cross again, without bound; as runs, each tile is
    /// read once.
    /// Also any sparse read with a tile past the tile budget: a run of its
    /// cells is read by the chunks holding them (unordered reads merge
    /// their runs row-major; those without versions of a coordinate to
    /// meet go in runs unspilled, [`Reader::reads_unordered_in_runs`]).
    /// And a read of a few cells of large sorted tiles
    /// ([`Reader::narrow_read`]), whose probes find the chunks holding them.
    /// Not for several ranges on a dimension, or TileDB's string-parts
    /// rule (results that depend on how a tile is cut).
    pub(super) fn spills(&self) -> bool {
        let schema = self.snapshot.schema();
        if schema.array_type == ArrayType::Dense {
            return self.dense_spills();
        }
        let sub = &self.spec.subarray;
        let dims = schema.domain.dimensions.len();
        // Results row- (col-) major go along an array whose tiles and
        // cells go that way, unless pieces cut along the slowest dimension
        // would read its tiles again and again.
        let along = |order: Layout, slowest: usize| {
            schema.cell_order == order
                && schema.tile_order == order
                && !self.pieces_read_again(slowest)
        };
        let whole = Piece {
            sub: sub.clone(),
            ..Piece::default()
        };
        let against = || match self.cut_layout() {
            // Unordered reads whose versions of a coordinate must meet
            // ([`Reader::versions_meet`]) are cut by the subarray, row-major,
            // and read again every tile their pieces cross (W7's Hilbert
            // array without duplicates under 16 KiB); without, they go in
            // runs of tiles ([`Reader::reads_unordered_in_runs`]).
            ResultLayout::Unordered => self.versions_meet() && self.unordered_crosses(),
            // One fragment's tiles are stored in the global order: only
            // Hilbert's over several fragments has no cut, nor over one
            // that keeps older versions of a coordinate (a consolidation
            // with timestamps), which may lie in other tiles: its runs
            // must meet to deduplicate (`rand_21219` under 2 KiB: 34
            // cells for 32). Other orders
            // are cut at space tiles, which data tiles whose MBRs span
            // several (cells scattered over them, by fragments in
            // different places) make pieces read again and again
            // (`sparse_dups_scattered` under 64 KiB: 273 pieces of 700
            // cells, 7 times the time spilled).
            ResultLayout::GlobalOrder => {
                (schema.cell_order == Layout::Hilbert
                    && (self.plans.len() > 1 || self.versions_meet()))
                    || self.cut_pieces_read_again(&whole)
            }
            _ if dims == 1 => schema.cell_order == Layout::Hilbert,
            ResultLayout::RowMajor => !along(Layout::RowMajor, 0),
            ResultLayout::ColMajor => !along(Layout::ColMajor, dims.saturating_sub(1)),
        };
        // A sparse tile past the budget is read in runs of its cells.
        // (Unless unordered without versions to meet: then runs of its
        // cells need no merge, `Reader::reads_unordered_in_runs`.)
        let huge = || {
            (self.spec.layout != ResultLayout::Unordered || self.versions_meet())
                && self.tile_past_budget(false)
        };
        schema.array_type == ArrayType::Sparse
            && !self.with_states
            && (0..dims).all(|d| sub.ranges(d).len() <= 1)
            && sparse::parts_dim(schema, sub).is_none()
            && (self.narrow
                || (self.estimate(&whole) > self.tile_budget() && (huge() || against())))
    }

    /// Whether a tile of the read's sparse (`dense`: dense) fragments that
    /// the read reaches passes the tile budget.
    pub(super) fn tile_past_budget(&self, dense: bool) -> bool {
        let budget = self.tile_budget();
        (self.plans.iter().enumerate()).any(|(i, plan)| {
            plan.meta.footer.dense == dense
                && (self.reached_tiles(i)).any(|t| self.tile_bytes(i, t) > budget)
        })
    }

    /// Whether an unordered read's pieces, cut by the subarray row-major,
    /// would cross its tiles: cells or tiles not row-major, or pieces that
    /// would read the tiles again ([`Reader::pieces_read_again`]).
    pub(super) fn unordered_crosses(&self) -> bool {
        let schema = self.snapshot.schema();
        !(schema.cell_order == Layout::RowMajor
            && schema.tile_order == Layout::RowMajor
            && !self.pieces_read_again(0))
    }

    /// Whether versions of one coordinate may lie in several tiles and
    /// must meet to be deduplicated: no duplicates allowed, and several
    /// fragments reached, or one that keeps its cells' timestamps (a
    /// consolidated fragment, holding older versions next to newer ones).
    pub(super) fn versions_meet(&self) -> bool {
        if self.snapshot.schema().allows_dups {
            return false;
        }
        let reaching: Vec<usize> = (0..self.plans.len())
            .filter(|&i| self.reached_tiles(i).next().is_some())
            .collect();
        reaching.len() > 1
            || reaching
                .iter()
                .any(|&i| self.plans.get(i).is_some_and(|p| p.timestamps.is_some()))
    }

    /// Whether pieces of a read along the cell order, cut along dimension
    /// `slowest` (see `partition`), would cost more than spilling. A data
    /// tile whose cells lie in several space tiles side by side along a
    /// faster dimension spans their whole extent on `slowest`, and every
    /// piece that crosses it reads it again. As if the read's bytes lay
    /// evenly along `slowest`, a piece (cut in halves until it fits: half
    /// the tile budget, about) holds `span · budget / 2 / bytes` values of
    /// it, and a tile `h` values high is read by `1 + h / that` pieces.
    /// Spilled, every cell is written, read back and merged: about 2.5
    /// reads' time (W3's 4M cells: 1.6 s spilled, 0.64 s in one piece).
    /// So: spill where pieces would read the bytes more than 2.5 times
    /// over, `1 + 2 · Σ bytes · h / (span · budget) > 2.5`. W3 row-major
    /// under 64 MiB comes to 2.0 (0.75 s in pieces), W7's row_2d under
    /// 64 KiB to 3.0 (5.4× the time of one piece, 1.9× spilled). An
    /// integer dimension only (others are cut at tile bounds).
    fn pieces_read_again(&self, slowest: usize) -> bool {
        let schema = self.snapshot.schema();
        let Some(dim) = schema.domain.dimensions.get(slowest) else {
            return false;
        };
        let sub = &self.spec.subarray;
        let Some(&[(lo, hi)]) = super::plan::int_ranges(schema, sub, slowest).as_deref() else {
            return false;
        };
        let (mut bytes, mut weighted) = (0u128, 0u128);
        let (mut first, mut last) = (hi, lo);
        for (i, plan) in self.plans.iter().enumerate() {
            if plan.meta.footer.dense {
                continue;
            }
            for t in plan.tiles_overlapping(self.ops.dims(), sub) {
                let mbr = usize::try_from(t).ok().and_then(|t| plan.leaves().get(t));
                let Some((a, b)) = mbr
                    .and_then(|m| m.get(slowest))
                    .and_then(|r| tdb_index::dense::int_range(dim, r))
                else {
                    return false;
                };
                let (a, b) = (a.max(lo), b.min(hi));
                let held = self.run_held(i, t, None, None);
                let height = u128::try_from(b.saturating_sub(a).saturating_add(1)).unwrap_or(1);
                bytes = bytes.saturating_add(u128::from(held));
                weighted = weighted.saturating_add(u128::from(held).saturating_mul(height));
                (first, last) = (first.min(a), last.max(b));
            }
        }
        let span = u128::try_from(last.saturating_sub(first).saturating_add(1)).unwrap_or(0);
        let budget = u128::from(self.tile_budget());
        bytes > budget && weighted.saturating_mul(4) > span.saturating_mul(budget).saturating_mul(3)
    }

    /// Pieces of the subarray [`Reader::cut_pieces_read_again`] looks at,
    /// at most.
    const SIMULATED_PIECES: usize = 1024;

    /// Whether the pieces of the subarray, cut as [`Reader::next_piece`]
    /// cuts them (run ahead on the fragments' metadata, the first
    /// [`Reader::SIMULATED_PIECES`]), would hold their tiles' bytes more
    /// than 2.5 times over (the cost of spilling, see
    /// [`Reader::pieces_read_again`]): what they hold against the tiles
    /// they reach, each once. It stops once they pass 2.5 times what the
    /// whole subarray reaches (`whole`): run to the end, such cuts cost
    /// about what the read saves (`sparse_dups_scattered`: 3 ms).
    fn cut_pieces_read_again(&self, whole: &Piece) -> bool {
        let most = u128::from(self.estimate(whole)).saturating_mul(5) / 2;
        let mut partitions = vec![whole.clone()];
        let mut fruitless = 0;
        let (mut held, mut once) = (0u128, 0u128);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..Self::SIMULATED_PIECES {
            let Some(p) = self.first_fitting(&mut partitions, &mut fruitless) else {
                break;
            };
            held = held.saturating_add(u128::from(self.estimate(&p)));
            for (i, plan) in self.plans.iter().enumerate() {
                for t in p.tiles(i, plan, self.ops.dims(), &self.spec.subarray) {
                    if seen.insert((i, t)) {
                        once = once.saturating_add(u128::from(self.run_held(i, t, None, None)));
                    }
                }
            }
            if held > most {
                return true;
            }
        }
        held.saturating_mul(2) > once.saturating_mul(5)
    }

    /// How this read's runs compare: its result order.
    pub(super) fn run_order(&self) -> RunOrder {
        let schema = self.snapshot.schema();
        let mut order = RunOrder::new(
            schema.domain.clone(),
            self.ops.dims().to_vec(),
            sparse::spill_order(schema, self.cut_layout()),
            self.cut_layout(),
        );
        // (Over several such fragments TileDB's own order is not followed:
        // see `sparse::merge_as_stored`.)
        order.stored = self.cut_layout() == ResultLayout::GlobalOrder
            && matches!(self.plans.as_slice(), [p]
                if sparse::stored_out_of_order(schema, p.file.format_version()));
        order
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_format::Datatype;
    use tdb_schema::{ArraySchema, Attribute, DimensionBuilder};

    fn schema() -> ArraySchema {
        ArraySchema::builder(ArrayType::Sparse)
            .dimension(DimensionBuilder::range("x", 0i32..=99).tile_extent(10i32))
            .dimension(DimensionBuilder::range("y", 0i32..=99).tile_extent(10i32))
            .attribute(
                Attribute::builder("s", Datatype::StringUtf8)
                    .var()
                    .nullable(true),
            )
            .build()
            .unwrap()
    }

    /// Slots: x, y, s; the read asks for s and x.
    fn format(schema: &ArraySchema) -> (Vec<FieldInfo>, RunFormat) {
        let fields: Vec<FieldInfo> = ["x", "y", "s"]
            .iter()
            .map(|n| FieldInfo::resolve(schema, n).unwrap())
            .collect();
        let fmt = RunFormat::new(&fields, &[2, 0]).unwrap();
        (fields, fmt)
    }

    /// A cell: (x, y), fragment, stamp, gone, rejected, s (None: null).
    type Cell = ((i32, i32), u32, u64, bool, bool, Option<&'static str>);

    /// `cells` written as a run in the order given; tile 0, cell `k`.
    fn run(fmt: &RunFormat, cells: &[Cell]) -> Run {
        run_by(RunWriter::new(512), fmt, cells)
    }

    /// `cells` written as a run by `w`.
    fn run_by(mut w: RunWriter, fmt: &RunFormat, cells: &[Cell]) -> Run {
        for (k, &((x, y), frag, stamp, gone, rejected, s)) in cells.iter().enumerate() {
            let (xb, yb) = (x.to_le_bytes(), y.to_le_bytes());
            // In the format's order: x, y, s.
            let values = [
                (&xb[..], true),
                (&yb[..], true),
                (s.unwrap_or("").as_bytes(), s.is_some()),
            ];
            let at = CellRef {
                frag,
                tile: 0,
                cell: k as u32,
            };
            w.push(fmt, at, stamp, (gone, rejected), &values).unwrap();
        }
        w.finish(fmt).unwrap()
    }

    fn order(schema: &ArraySchema, keyed: bool) -> RunOrder {
        let mut order = RunOrder::new(
            schema.domain.clone(),
            tdb_index::DomainOps::new(&schema.domain)
                .unwrap()
                .dims()
                .to_vec(),
            CellOrder::RowMajor,
            ResultLayout::RowMajor,
        );
        assert!(order.keys.is_some());
        if !keyed {
            order.keys = None;
        }
        order
    }

    /// Every batch's (s, x) cells, joined.
    fn drain(mut m: Merge, fields: &[FieldInfo]) -> Vec<(Option<String>, i32)> {
        let mut out = Vec::new();
        while let Some(b) = m.next_batch(fields, false).unwrap() {
            let (s, x) = (b.fields[0].column(), b.fields[1].column());
            for i in 0..b.num_cells as usize {
                let text = String::from_utf8(s.cell(i).to_vec()).unwrap();
                let xv = i32::from_le_bytes(x.cell(i).try_into().unwrap());
                out.push(((!s.is_null(i)).then_some(text), xv));
            }
        }
        out
    }

    #[test]
    fn runs_read_back_the_cells_written() {
        let schema = schema();
        let (_, fmt) = format(&schema);
        let cells: Vec<Cell> = vec![
            ((1, 2), 0, 5, false, true, Some("one")),
            ((3, 4), 2, 9, true, false, None),
            ((5, 6), 1, 7, false, false, Some("")),
        ];
        let mut r = RunReader::new(run(&fmt, &cells), 512).unwrap();
        let mut rec = Record::default();
        for &((x, y), frag, stamp, gone, rejected, s) in &cells {
            assert!(r.next(&fmt, None, &mut rec).unwrap());
            assert_eq!((rec.at.frag, rec.stamp), (frag, stamp));
            assert_eq!((rec.gone, rec.rejected), (gone, rejected));
            assert_eq!(rec.value(0), (&x.to_le_bytes()[..], true));
            assert_eq!(rec.value(1), (&y.to_le_bytes()[..], true));
            assert_eq!(rec.value(2), (s.unwrap_or("").as_bytes(), s.is_some()));
        }
        assert!(!r.next(&fmt, None, &mut rec).unwrap());
    }

    /// A format that leaves out stamps and the tile index's upper half
    /// writes 12 bytes less a record and reads back the same cells, each
    /// stamped as its fragment; a tile index past 4 bytes is an error, not
    /// a record of another tile.
    #[test]
    fn records_leave_out_what_the_read_knows() {
        let schema = schema();
        let (fields, full) = format(&schema);
        let lean = RunFormat::new(&fields, &[2, 0])
            .unwrap()
            .implied(Some(vec![30, 10, 20]), 7);
        assert_eq!(full.head_len() - lean.head_len(), 12);
        let cells: Vec<Cell> = vec![
            ((1, 2), 0, 0, false, true, Some("one")),
            ((3, 4), 2, 0, true, false, None),
            ((5, 6), 1, 0, false, false, Some("")),
        ];
        let run = run(&lean, &cells);
        let written: usize = cells
            .iter()
            .map(|c| lean.head_len() + 8 + 1 + 4 + c.5.map_or(0, str::len))
            .sum();
        assert_eq!(run.bytes(), written as u64);
        let mut r = RunReader::new(run, 512).unwrap();
        let mut rec = Record::default();
        for (k, &((x, _), frag, _, gone, rejected, s)) in cells.iter().enumerate() {
            assert!(r.next(&lean, None, &mut rec).unwrap());
            let stamp = [30, 10, 20][frag as usize];
            assert_eq!(
                (rec.at.frag, rec.at.cell, rec.stamp),
                (frag, k as u32, stamp)
            );
            assert_eq!((rec.gone, rec.rejected), (gone, rejected));
            assert_eq!(rec.value(0), (&x.to_le_bytes()[..], true));
            assert_eq!(rec.value(2), (s.unwrap_or("").as_bytes(), s.is_some()));
        }
        assert!(!r.next(&lean, None, &mut rec).unwrap());
        let mut w = RunWriter::new(64);
        let at = CellRef {
            frag: 0,
            tile: 1 << 32,
            cell: 0,
        };
        let (x, s) = (1i32.to_le_bytes(), b"s");
        let values = [(&x[..], true), (&x[..], true), (&s[..], true)];
        let got = w.push(&lean, at, 0, (false, false), &values);
        assert!(matches!(got, Err(QueryError::Invalid(_))), "{got:?}");
        assert!(w.push(&full, at, 0, (false, false), &values).is_ok());
    }

    /// The tree of losers hands out the records of any number of runs
    /// (one, a power of two or not; some empty, some done early) in the
    /// order, by keys and by comparing records alike.
    #[test]
    fn heads_hand_out_the_records_of_any_number_of_runs_in_order() {
        let schema = schema();
        let (_, fmt) = format(&schema);
        for keyed in [true, false] {
            let order = order(&schema, keyed);
            for n in [1usize, 2, 3, 5, 8, 13] {
                // Run r holds x = r, r + n, r + 2n, ... below 40 (run 1
                // none).
                let runs: Vec<Run> = (0..n)
                    .map(|r| {
                        let xs: Vec<Cell> = (r..40)
                            .step_by(n)
                            .filter(|_| r != 1)
                            .map(|x| ((x as i32, 0), 0, 1, false, false, Some("s")))
                            .collect();
                        run(&fmt, &xs)
                    })
                    .collect();
                let mut heads = Heads::new(runs, 512, &fmt, &order).unwrap();
                let mut got = Vec::new();
                while let Some(rec) = heads.pop(&fmt, &order).unwrap() {
                    got.push(i32::from_le_bytes(rec.value(0).0.try_into().unwrap()));
                    heads.recycle(rec);
                }
                let want: Vec<i32> = (0..40).filter(|x| n == 1 || x % n as i32 != 1).collect();
                assert_eq!(got, want, "{n} runs, keyed {keyed}");
                assert!(heads.peek().is_none());
            }
        }
    }

    /// Runs merge in the result order, beyond the fan-in too (merged into
    /// longer runs as they come); per coordinate the newest version stands, then
    /// its delete or the condition's rejection removes it (an older
    /// version does not come back); batches hold at most their cells.
    #[test]
    fn merges_keep_the_order_and_the_newest_version_of_each_coordinate() {
        let schema = schema();
        let (fields, fmt) = format(&schema);
        let runs = [
            // Fragment 0: cells (1, y) for y = 0..4, and (9, 9).
            vec![
                ((1, 0), 0, 1, false, false, Some("a0")),
                ((1, 1), 0, 1, false, false, Some("a1")),
                ((1, 2), 0, 1, false, false, Some("a2")),
                ((1, 3), 0, 1, false, false, None),
                ((9, 9), 0, 1, false, false, Some("a9")),
            ],
            // Fragment 1 rewrites (1, 1), deletes (1, 2)'s newest version,
            // and its (1, 3) fails the condition.
            vec![
                ((1, 1), 1, 2, false, false, Some("b1")),
                ((1, 2), 1, 2, true, false, Some("b2")),
                ((1, 3), 1, 2, false, true, Some("b3")),
                ((4, 0), 1, 2, false, false, Some("b4")),
            ],
            // Fragment 2, older by its cells' timestamps, rewrites (4, 0):
            // fragment 1's version stands.
            vec![((4, 0), 2, 1, false, false, Some("c4"))],
            vec![((0, 5), 3, 3, false, false, Some("d0"))],
            vec![((2, 5), 4, 3, false, false, Some("e2"))],
        ];
        // By keys, and value by value (orders without keys).
        for keyed in [true, false] {
            let mut spill = Spill::new(fmt.clone(), order(&schema, keyed), 0);
            assert_eq!(spill.fan_in, 2);
            for r in &runs {
                let w = spill.writer(0).unwrap();
                spill.push(run_by(w, &fmt, r)).unwrap();
                // Held: the merge takes them two at a time, the smallest
                // first.
                assert!(
                    spill.len() <= spill.held_most(),
                    "{} runs held",
                    spill.len()
                );
            }
            let got = drain(spill.merge(true, 2).unwrap(), &fields);
            let want: Vec<(Option<String>, i32)> = [
                (Some("d0"), 0),
                (Some("a0"), 1),
                (Some("b1"), 1),
                (Some("e2"), 2),
                (Some("b4"), 4),
                (Some("a9"), 9),
            ]
            .into_iter()
            .map(|(s, x)| (s.map(str::to_owned), x))
            .collect();
            assert_eq!(got, want);
            // With duplicates every version comes out, oldest fragment first
            // among equal coordinates (flags are not looked at: the runs'
            // writer applied deletes and the condition).
            let mut spill = Spill::new(fmt.clone(), order(&schema, keyed), 1 << 20);
            for r in &runs {
                spill.push(run(&fmt, r)).unwrap();
            }
            assert_eq!(spill.len(), runs.len());
            let got = drain(spill.merge(false, 3).unwrap(), &fields);
            let texts: Vec<Option<&str>> = got.iter().map(|(s, _)| s.as_deref()).collect();
            assert_eq!(
                texts,
                [
                    Some("d0"),
                    Some("a0"),
                    Some("a1"),
                    Some("b1"),
                    Some("a2"),
                    Some("b2"),
                    None,
                    Some("b3"),
                    Some("e2"),
                    Some("b4"),
                    Some("c4"),
                    Some("a9")
                ]
            );
        }
    }

    #[test]
    fn runs_that_follow_one_another_are_one() {
        let schema = schema();
        let (fields, sparse) = format(&schema);
        for keyed in [true, false] {
            let mut spill = Spill::new(sparse.clone(), order(&schema, keyed), 1 << 20);
            let cell = |x: i32, y: i32| ((x, y), 0, 1, false, false, Some("s"));
            for r in [&[cell(1, 5), cell(2, 0)][..], &[cell(2, 1)], &[cell(0, 9)]] {
                let w = spill.writer(0).unwrap();
                spill.push(run_by(w, &sparse, r)).unwrap();
            }
            // Keyed: the second extends the first. Without keys: none.
            assert_eq!(spill.len(), if keyed { 2 } else { 3 });
            let got = drain(spill.merge(true, 2).unwrap(), &fields);
            let xs: Vec<i32> = got.iter().map(|c| c.1).collect();
            assert_eq!(xs, [0, 1, 2, 2]);
        }
    }

    /// Every buffer a merge holds (its runs' and their records, and, into
    /// a longer run, its output's) fits the memory given, from three
    /// floor-sized buffers and two records on, but for the runs' reads,
    /// which take [`scratch::READING_LEAST`] at least (outside the budget);
    /// the output takes a quarter (the final merge's runs share it), and
    /// the merge widens with the rest up to [`Spill::MAX_FAN_IN`] runs.
    #[test]
    fn a_merge_and_its_output_fit_the_memory() {
        let schema = schema();
        let (_, fmt) = format(&schema);
        for memory in (0..70).map(|k| k * 1000).chain([8 << 10, 1 << 20, 1 << 40]) {
            let mut s = Spill::new(fmt.clone(), order(&schema, true), memory);
            assert!(s.fan_in >= 2);
            assert!(s.out_buffer >= 512);
            // Runs are written through the scratch writes' floor at least
            // (outside the budget).
            let w = s.writer(0).unwrap();
            assert_eq!(w.buffer, s.out_buffer.max(scratch::WRITING_LEAST));
            for runs in [1, 2, 3, s.fan_in / 2, s.fan_in]
                .into_iter()
                .filter(|&r| r <= s.fan_in)
            {
                // Into a longer run, and the final merge (no output).
                for last in [false, true] {
                    let buffer = s.buffer(runs, last);
                    let out = if last { 0 } else { s.out_buffer as u64 };
                    let held = runs as u64 * (buffer + fmt.record_bytes()) as u64 + out;
                    assert!(buffer >= 512);
                    if memory >= 1536 + 2 * fmt.record_bytes() as u64 {
                        let most = memory.max(scratch::READING_LEAST as u64 + out);
                        assert!(held <= most, "{memory}: {runs} × {buffer} + {out}");
                    }
                    if memory >= 4 * scratch::READING_LEAST as u64 {
                        assert!(held <= memory, "{memory}: {runs} × {buffer} + {out}");
                    }
                }
            }
        }
        let width = |m| Spill::new(fmt.clone(), order(&schema, true), m).fan_in;
        // A run costs 512 bytes and its record (296 bytes here).
        assert_eq!(fmt.record_bytes(), 296);
        assert_eq!(width(8 << 10), 7);
        assert_eq!(width(32 << 10), 30);
        assert_eq!(width(1 << 20), Spill::MAX_FAN_IN);
        assert_eq!(width(1 << 40), Spill::MAX_FAN_IN);
    }

    /// A level's runs go one after another into a scratch file, `fan_in`
    /// to a file, and a merge of the level takes a file's runs: the file
    /// goes (or, still the level's, starts over), so a read's scratch
    /// space stays about what its live runs hold. Runs wait to be merged
    /// until four times the fan-in are held.
    #[test]
    fn runs_of_a_level_share_a_file_that_goes_once_merged() {
        let schema = schema();
        let (fields, fmt) = format(&schema);
        let mut spill = Spill::new(fmt.clone(), order(&schema, true), 3 << 10);
        assert_eq!(spill.fan_in, 2);
        assert_eq!(spill.held_most(), 8);
        // What `Spill::held_most` counts a held run.
        assert!(std::mem::size_of::<(Run, u32)>() <= 64);
        let cell = |x: i32| ((x, 0), 0, 1, false, false, Some("s"));
        // Each run's file (by address: the test holds no handle, so the
        // spill alone decides when a file goes) and bytes.
        let file = |r: &Run| {
            let (f, bytes) = r.file.clone().unwrap();
            (Arc::as_ptr(&f) as usize, bytes)
        };
        let a = run_by(spill.writer(0).unwrap(), &fmt, &[cell(60), cell(61)]);
        let (fa, ra) = file(&a);
        assert_eq!(ra.start, 0);
        let gone_a = Arc::downgrade(&a.file.as_ref().unwrap().0);
        spill.push(a).unwrap();
        let b = run_by(spill.writer(0).unwrap(), &fmt, &[cell(58), cell(59)]);
        let (fb, rb) = file(&b);
        // After the first run, in the same file.
        assert_eq!(fa, fb);
        assert_eq!(rb.start, ra.end);
        spill.push(b).unwrap();
        // Both still in the level's writer: no write call a run.
        let len = |f: &std::sync::Weak<File>| f.upgrade().unwrap().metadata().unwrap().len();
        assert_eq!(len(&gone_a), 0);
        // The file has its two: the next run starts a fresh one, the
        // first file's bytes written out.
        let c = run_by(spill.writer(0).unwrap(), &fmt, &[cell(56), cell(57)]);
        assert_eq!(len(&gone_a), rb.end);
        let (fc, rc) = file(&c);
        assert_ne!(fa, fc);
        assert_eq!(rc.start, 0);
        spill.push(c).unwrap();
        // A piece without a cell gives the level its file back as it was.
        let empty = spill.writer(0).unwrap().finish(&fmt).unwrap();
        spill.push(empty).unwrap();
        let d = run_by(spill.writer(0).unwrap(), &fmt, &[cell(54)]);
        assert_eq!(file(&d).0, fc);
        assert_eq!(file(&d).1.start, rc.end);
        spill.push(d).unwrap();
        assert_eq!(spill.len(), 4);
        // Pieces as far as a ninth run: then the first file's two runs merge
        // into one of level 1, and nothing holds that file any more.
        let mut files = vec![gone_a];
        let mut x = 54;
        while spill.len() < 8 {
            x -= 2;
            let r = run_by(spill.writer(0).unwrap(), &fmt, &[cell(x), cell(x + 1)]);
            files.push(Arc::downgrade(&r.file.as_ref().unwrap().0));
            spill.push(r).unwrap();
            spill.settle().unwrap();
        }
        assert!(files[0].upgrade().is_some());
        x -= 2;
        let r = run_by(spill.writer(0).unwrap(), &fmt, &[cell(x), cell(x + 1)]);
        spill.push(r).unwrap();
        spill.settle().unwrap();
        assert_eq!(spill.len(), 8);
        assert!(files[0].upgrade().is_none(), "a merged file goes");
        assert_eq!(spill.runs.iter().filter(|r| r.1 == 1).count(), 1);
        // Many more: never over eight runs held, and the files alive no
        // more than the runs' (two runs to a file) and a level's own.
        while x > 0 {
            x -= 2;
            let r = run_by(spill.writer(0).unwrap(), &fmt, &[cell(x), cell(x + 1)]);
            files.push(Arc::downgrade(&r.file.as_ref().unwrap().0));
            spill.push(r).unwrap();
            spill.settle().unwrap();
            assert!(spill.len() <= 8);
            let mut alive: Vec<*const File> = (files.iter())
                .filter(|f| f.upgrade().is_some())
                .map(std::sync::Weak::as_ptr)
                .collect();
            alive.dedup();
            assert!(
                alive.len() <= spill.len(),
                "{alive:?} level-0 files for {} runs",
                spill.len()
            );
        }
        assert!(spill.runs.iter().any(|r| r.1 >= 2), "merged twice");
        let got = drain(spill.merge(true, 2).unwrap(), &fields);
        let xs: Vec<i32> = got.iter().map(|c| c.1).collect();
        let mut want: Vec<i32> = (0..62).filter(|&v| v != 55).collect();
        want.sort();
        assert_eq!(xs, want);
    }

    /// A run of no cell makes no scratch file and is not held.
    #[test]
    fn an_empty_run_makes_no_file() {
        let schema = schema();
        let (_, fmt) = format(&schema);
        let empty = RunWriter::new(512).finish(&fmt).unwrap();
        assert!(empty.file.is_none());
        let mut spill = Spill::new(fmt.clone(), order(&schema, true), 1 << 20);
        spill.push(empty).unwrap();
        assert_eq!(spill.len(), 0);
        let one = run(&fmt, &[((1, 2), 0, 5, false, false, Some("one"))]);
        assert!(one.file.is_some());
        spill.push(one).unwrap();
        assert_eq!(spill.len(), 1);
    }

    /// A record whose body is longer than its run, or whose var-size
    /// value runs past its body, is an error, and nothing that large is
    /// allocated; a run cut short is an I/O error.
    #[test]
    fn a_corrupt_run_is_an_error() {
        let schema = schema();
        let (_, fmt) = format(&schema);
        let reader = |bytes: &[u8], run_bytes: u64| {
            let mut file = tempfile::tempfile().unwrap();
            file.write_all(bytes).unwrap();
            let run = Run {
                file: Some((Arc::new(file), 0..run_bytes)),
                records: 1,
                ends: None,
                open: None,
            };
            RunReader::new(run, 64).unwrap()
        };
        // The record as written: x, y, then s valid, 1 byte long.
        let head = fmt.head_len() - 4;
        let mut good = vec![0u8; head];
        good.extend_from_slice(&14u32.to_le_bytes());
        good.extend_from_slice(&[0; 8]);
        good.push(1);
        good.extend_from_slice(&1u32.to_le_bytes());
        good.push(b'a');
        let mut rec = Record::default();
        assert!(reader(&good, good.len() as u64)
            .next(&fmt, None, &mut rec)
            .unwrap());
        assert_eq!(rec.value(2), (&b"a"[..], true));
        // Its body's length past the run's bytes (here, u32::MAX).
        let mut long = good.clone();
        long[head..head + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let got = reader(&long, long.len() as u64).next(&fmt, None, &mut rec);
        assert!(matches!(got, Err(QueryError::Invalid(_))), "{got:?}");
        // s's length past the body.
        let mut past = good.clone();
        let at = head + 4 + 8 + 1;
        past[at..at + 4].copy_from_slice(&2u32.to_le_bytes());
        let got = reader(&past, past.len() as u64).next(&fmt, None, &mut rec);
        assert!(matches!(got, Err(QueryError::Invalid(_))), "{got:?}");
        // A run cut short: ten bytes of it are the run, the rest the next's.
        let got = reader(&[0u8; 40], 10).next(&fmt, None, &mut rec);
        assert!(matches!(got, Err(QueryError::Spill(_))), "{got:?}");
    }
}
