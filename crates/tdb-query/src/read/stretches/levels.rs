//! Runs of stretches merged into fewer, longer ones before the windows.
//!
//! A window reads each run it reaches at least once. Along the cell order
//! few runs meet at a place (a piece's stretches follow the last piece's),
//! but across it every piece of a tile holds some of every result line:
//! `dense_large_tiles` read col-major under 16 KiB spills 1,124 runs of a
//! third of a row each, all live in every window, and the windows' reads
//! of them took 1.0 s, 1.5 times the records' external merge. Where more
//! runs than a window
//! reads well meet at a place, a fragment's runs are merged, a group of
//! runs next to each other at a time, by their records' first places: a
//! record that starts where the last one ended joins it, so merging the
//! runs of `g` rows makes records of `g` cells, and the next round (or the
//! windows) copies `g` cells a record. A fragment's runs never share a
//! place, so a merge within one needs no newest-wins choice; fragments
//! stay apart, as the windows need. While pieces push, the runs held are
//! bounded the same way, a level at a time ([`Stretches::bound_runs`]).
//! Strided records ([`STRIDED`]) are read whole and handed to the merge a
//! cell at a time, as records of one cell were.

use super::{Col, Run, Stretches, HEAD, STRIDED, STRIDED_MOST};
use crate::scratch::{self, At};
use crate::{QueryError, Result};
use std::cmp::Reverse;
use std::collections::binary_heap::{BinaryHeap, PeekMut};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::sync::Arc;

/// Cells of a window each run it reads should hold at least: past a
/// window's cells over this many runs meeting at a place, they are merged
/// first. (`dense_large_tiles` col-major, windows of 2,520 cells under 64
/// KiB, 576 runs: 0.27 s read by the windows, 0.17 merged down to 16 or
/// 64; under 256 KiB, 10,082 cells and 136 runs: 0.060 s as they are,
/// 0.068 merged to 64; under 16 KiB, 630 cells and 1,124 runs: 1.0 s as
/// they are, 0.47–0.52 merged to 16–256.)
const WINDOW_CELLS_A_RUN: usize = 32;

/// The same where no run holds strided records: a window takes each
/// run's cells a record (a stretch of several) at a time, not a cell at a
/// time, so fewer of them repay a visit. (Blocks' runs, stretches of a
/// band's 8–64 cells, read as they are: `dense_large_tiles` col-major
/// under 64 KiB about 20% less task clock, W1 4096² and W7's `dense_rows`
/// col-major a few percent, the same under 16 KiB and for W2 4096².)
const WINDOW_CELLS_A_STRETCH_RUN: usize = 4;

/// Runs a window may read at once however small it is.
pub(super) const LIVE_LEAST: usize = 16;

/// Bytes of a live run's buffer for windows to read it well, and the
/// most runs left live for that alone: windows keep what they read of
/// each run (`StretchMerge::bufs`), so a live run costs memory more than
/// reads, and where the windows' memory gives each of many runs 4 KiB,
/// a merge round costs more than it saves (W1 4096² col-major under 16
/// KiB, 424 KiB of it: merged down to 28 runs, 0.445 s; to 61, 0.31 s).
const READ_WELL: usize = 4 << 10;
const LIVE_BY_MEMORY: usize = 64;

/// Bytes each run a merge reads is read through, at least.
pub(super) const READ_LEAST: usize = 512;

/// Runs merged at once, at most.
const GROUP_MOST: usize = 256;

/// Runs a read holds while its pieces push theirs, at most but for the
/// levels' few ([`Stretches::bound_runs`]).
pub(super) const HELD_MOST: usize = 4096;

/// Runs of a level merged into one of the level above while pieces push.
const GROUP: usize = 16;

/// One run being merged: its records in turn, a strided one's
/// ([`STRIDED`]) a cell at a time.
struct Cursor {
    reader: BufReader<At>,
    /// Bytes of the run past what `reader` handed out.
    left: u64,
    /// Its next record's first place, cells and body bytes (a strided
    /// record's next cell's).
    head: Option<(u64, u64, u64)>,
    /// The strided record being taken apart.
    strided: Option<Strided>,
}

/// A strided record read whole: its cells' places go up by `step`, and
/// each field's values lie column by column in `body`, after the step
/// (as a record's do after its head).
pub(super) struct Strided {
    place: u64,
    step: u64,
    cells: u64,
    /// The cell handed out next (by a merge down).
    next: u64,
    body: Vec<u8>,
    /// Per held field, where its values (a var-size one's lengths) start
    /// in `body`, a var-size one's cells' bytes (`cells + 1` bounds), and
    /// where a nullable one's validity starts.
    cols: Vec<(usize, Option<Vec<usize>>, Option<usize>)>,
}

impl Strided {
    /// The strided record of `cells` cells from `place` whose body is
    /// `body` (its step first, kept there), its columns found.
    pub(super) fn new(cols: &[Col], place: u64, cells: u64, body: Vec<u8>) -> Result<Self> {
        let cut = || QueryError::invalid("a strided stretch cut short");
        let step = (body.get(..8))
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or_else(cut)?;
        let n = usize::try_from(cells).map_err(|_| cut())?;
        let mut at = 8usize;
        let mut layout = Vec::with_capacity(cols.len());
        for c in cols {
            match c.size {
                Some(size) => {
                    layout.push((at, None, None));
                    at = n
                        .checked_mul(size)
                        .and_then(|b| at.checked_add(b))
                        .ok_or_else(cut)?;
                }
                None => {
                    let lens = body.get(at..at.saturating_add(n.saturating_mul(8)));
                    let lens = lens
                        .filter(|l| l.len() == n.saturating_mul(8))
                        .ok_or_else(cut)?;
                    let mut bounds = Vec::with_capacity(n.saturating_add(1));
                    let mut from = at.saturating_add(lens.len());
                    bounds.push(from);
                    for l in lens.chunks_exact(8) {
                        let l = u64::from_le_bytes(l.try_into().map_err(|_| cut())?);
                        let l = usize::try_from(l).map_err(|_| cut())?;
                        from = from.checked_add(l).ok_or_else(cut)?;
                        bounds.push(from);
                    }
                    layout.push((at, Some(bounds), None));
                    at = from;
                }
            }
        }
        for (c, (_, _, valid)) in cols.iter().zip(&mut layout) {
            if c.nullable {
                *valid = Some(at);
                at = at.checked_add(n).ok_or_else(cut)?;
            }
        }
        if at != body.len() || step == 0 {
            return Err(cut());
        }
        Ok(Strided {
            place,
            step,
            cells,
            next: 0,
            body,
            cols: layout,
        })
    }

    /// Cells it holds.
    pub(super) fn cells(&self) -> u64 {
        self.cells
    }

    /// The place of its cell `k`.
    pub(super) fn place_of(&self, k: u64) -> u64 {
        self.place.saturating_add(k.saturating_mul(self.step))
    }

    /// Held field `c`'s value of cell `k` (a var-size one's bytes), and
    /// its validity byte where it is nullable.
    pub(super) fn value(&self, cols: &[Col], c: usize, k: u64) -> Result<(&[u8], Option<u8>)> {
        let cut = || QueryError::invalid("a strided stretch cut short");
        let k = usize::try_from(k).map_err(|_| cut())?;
        let ((at, bounds, valid), col) = self.cols.get(c).zip(cols.get(c)).ok_or_else(cut)?;
        let value = match (col.size, bounds) {
            (Some(size), _) => {
                let from = k.saturating_mul(size).saturating_add(*at);
                self.body.get(from..from.saturating_add(size))
            }
            (None, Some(b)) => (b.get(k).copied())
                .zip(b.get(k.saturating_add(1)).copied())
                .and_then(|(x, y)| self.body.get(x..y)),
            (None, None) => None,
        };
        let valid = match valid {
            Some(v) => Some(
                self.body
                    .get(v.saturating_add(k))
                    .copied()
                    .ok_or_else(cut)?,
            ),
            None => None,
        };
        Ok((value.ok_or_else(cut)?, valid))
    }

    /// The next cell's place, and its bytes in a record of it alone.
    fn head(&self, cols: &[Col]) -> (u64, u64, u64) {
        let mut bytes = 0u64;
        for (c, col) in cols.iter().enumerate() {
            let len = match col.size {
                Some(size) => size,
                None => (self.value(cols, c, self.next))
                    .map_or(8, |(v, _)| 8usize.saturating_add(v.len())),
            };
            bytes = bytes
                .saturating_add(len as u64)
                .saturating_add(u64::from(col.nullable));
        }
        (self.place_of(self.next), 1, bytes)
    }

    /// The next cell's values appended to `making`'s columns.
    fn take(&self, cols: &[Col], making: &mut [(Vec<u8>, Vec<u8>, Vec<u8>)]) -> Result<()> {
        for (c, (col, (vals, bytes, valid))) in cols.iter().zip(making).enumerate() {
            let (value, v) = self.value(cols, c, self.next)?;
            match col.size {
                Some(_) => vals.extend_from_slice(value),
                None => {
                    vals.extend_from_slice(&(value.len() as u64).to_le_bytes());
                    bytes.extend_from_slice(value);
                }
            }
            if let Some(v) = v {
                valid.push(v);
            }
        }
        Ok(())
    }
}

impl Cursor {
    fn new(cols: &[Col], file: &Arc<File>, run: &Run, buffer: usize) -> Result<Self> {
        let reader = scratch::run_reader(Arc::clone(file), run.start, run.end, buffer);
        let mut c = Cursor {
            reader,
            left: run.end.saturating_sub(run.start),
            head: None,
            strided: None,
        };
        c.advance(cols)?;
        Ok(c)
    }

    /// Reads the next record's head (none at the run's end); a strided
    /// record whole, its cells then handed out one by one.
    fn advance(&mut self, cols: &[Col]) -> Result<()> {
        self.head = None;
        if let Some(st) = &mut self.strided {
            st.next = st.next.saturating_add(1);
            if st.next < st.cells {
                self.head = Some(st.head(cols));
                return Ok(());
            }
            self.strided = None;
        }
        if self.left == 0 {
            return Ok(());
        }
        let mut head = [0u8; HEAD as usize];
        self.take(&mut head)?;
        let (place, cells, body, strided) = super::parse_head(&head)?;
        if !strided {
            self.head = Some((place, cells, body));
            return Ok(());
        }
        // (Its step, then at most [`STRIDED_MOST`] bytes.)
        if body < 8 || body > STRIDED_MOST.saturating_add(8) || cells == 0 {
            return Err(QueryError::invalid("a strided stretch's head is corrupt"));
        }
        let mut whole = Vec::new();
        self.append(&mut whole, body)?;
        let st = Strided::new(cols, place, cells, whole)?;
        self.head = Some(st.head(cols));
        self.strided = Some(st);
        Ok(())
    }

    /// The run's next bytes into `out`.
    fn take(&mut self, out: &mut [u8]) -> Result<()> {
        let n = out.len() as u64;
        if n > self.left {
            return Err(QueryError::invalid("a spilled stretch past its run"));
        }
        self.reader.read_exact(out).map_err(QueryError::Spill)?;
        self.left = self.left.saturating_sub(n);
        Ok(())
    }

    /// The run's next `n` bytes appended to `out`.
    fn append(&mut self, out: &mut Vec<u8>, n: u64) -> Result<()> {
        let n =
            usize::try_from(n).map_err(|_| QueryError::invalid("a spilled stretch too long"))?;
        let at = out.len();
        out.resize(at.saturating_add(n), 0);
        self.take(out.get_mut(at..).unwrap_or_default())
    }
}

/// A merged record being made: its first place, cells and body bytes, and
/// per held field its values (a var-size one's lengths), its bytes
/// (var-size) and its validity.
#[derive(Default)]
struct Making {
    place: u64,
    cells: u64,
    body: u64,
    cols: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
}

impl Making {
    /// Appends `cursor`'s record (its head taken) of `cells` cells and
    /// `body` bytes: each held field's values column by column (a
    /// strided record's next cell).
    fn take(&mut self, cols: &[Col], cursor: &mut Cursor, cells: u64, body: u64) -> Result<()> {
        let cut = || QueryError::invalid("a spilled stretch cut short");
        self.cols.resize_with(cols.len(), Default::default);
        if let Some(st) = &cursor.strided {
            st.take(cols, &mut self.cols)?;
            self.cells = self.cells.saturating_add(cells);
            self.body = self.body.saturating_add(body);
            return Ok(());
        }
        let mut read = 0u64;
        for (c, (vals, bytes, _)) in cols.iter().zip(&mut self.cols) {
            match c.size {
                Some(size) => {
                    let n = cells.checked_mul(size as u64).ok_or_else(cut)?;
                    cursor.append(vals, n)?;
                    read = read.saturating_add(n);
                }
                None => {
                    let at = vals.len();
                    let n = cells.checked_mul(8).ok_or_else(cut)?;
                    cursor.append(vals, n)?;
                    let lens = vals.get(at..).ok_or_else(cut)?;
                    let total = (lens.chunks_exact(8))
                        .map(|l| u64::from_le_bytes(l.try_into().unwrap_or_default()))
                        .try_fold(0u64, u64::checked_add)
                        .filter(|&t| t <= body)
                        .ok_or_else(cut)?;
                    cursor.append(bytes, total)?;
                    read = read.saturating_add(n).saturating_add(total);
                }
            }
        }
        for (_, (_, _, valid)) in (cols.iter().zip(&mut self.cols)).filter(|(c, _)| c.nullable) {
            cursor.append(valid, cells)?;
            read = read.saturating_add(cells);
        }
        if read != body {
            return Err(cut());
        }
        self.cells = self.cells.saturating_add(cells);
        self.body = self.body.saturating_add(body);
        Ok(())
    }

    /// Writes the record out (if it holds any cell) and starts anew.
    fn flush(&mut self, out: &mut impl Write) -> Result<u64> {
        if self.cells == 0 {
            return Ok(0);
        }
        let mut put = |b: &[u8]| out.write_all(b).map_err(QueryError::Spill);
        put(&super::head(self.place, self.cells, self.body)?)?;
        for (vals, bytes, _) in &self.cols {
            put(vals)?;
            put(bytes)?;
        }
        for (_, _, valid) in &self.cols {
            put(valid)?;
        }
        for (vals, bytes, valid) in &mut self.cols {
            vals.clear();
            bytes.clear();
            valid.clear();
        }
        let wrote = HEAD.saturating_add(self.body);
        (self.cells, self.body) = (0, 0);
        Ok(wrote)
    }
}

/// The most runs that meet at one place: a sweep over each run's places.
pub(super) fn most_live(runs: &[Run]) -> usize {
    let mut ends: Vec<(u64, bool)> = (runs.iter())
        .flat_map(|r| [(r.place, true), (r.past, false)])
        .collect();
    // An end before a start at the same place: the runs do not meet.
    ends.sort_unstable_by_key(|&(at, start)| (at, start));
    let (mut live, mut most) = (0usize, 0usize);
    for (_, start) in ends {
        match start {
            true => {
                live = live.saturating_add(1);
                most = most.max(live);
            }
            false => live = live.saturating_sub(1),
        }
    }
    most
}

impl Stretches {
    /// Merges runs until few enough meet at any place for windows of
    /// `window` cells ([`WINDOW_CELLS_A_RUN`], [`WINDOW_CELLS_A_STRETCH_RUN`]
    /// where no run is strided; or each fragment has one),
    /// through about `memory` bytes: the record being made and the writer
    /// a quarter each (at most the pieces' writer's buffer), and each run
    /// of a merge reads through a share of the rest, or of
    /// [`scratch::READING_LEAST`] where that is more, at least
    /// [`READ_LEAST`]. A wide merge beats a narrow one: each round rewrites
    /// every cell (`dense_large_tiles` under 16 KiB, 1,124 runs: six
    /// rounds of two at a time with 4 KiB for each, 0.50 s; two of eight,
    /// 0.34 s; one of 61 through the scratch reads' floor, 0.17 s). A round
    /// is as narrow as leaves `live` runs, every fragment's groups counted
    /// (a round that left one too many took a second over every cell).
    pub(super) fn merge_down(&mut self, window: usize, memory: usize) -> Result<()> {
        // The windows' memory beside their cells. Runs many enough that
        // the budget's part gives each [`READ_WELL`] stay live; never more
        // than the part read through (`reading_least` at least) gives
        // [`READ_LEAST`] each.
        let cells = (window as u64).saturating_mul(self.cell_guess());
        let windows = usize::try_from((memory as u64).saturating_sub(cells)).unwrap_or(0);
        let cells_a_run = match self.runs.iter().any(|r| r.strided) {
            true => WINDOW_CELLS_A_RUN,
            false => WINDOW_CELLS_A_STRETCH_RUN,
        };
        let live = (window.checked_div(cells_a_run).unwrap_or(window))
            .max(LIVE_LEAST)
            .max((windows / READ_WELL).min(LIVE_BY_MEMORY))
            .min((windows.max(self.reading_least) / READ_LEAST).max(2));
        let out = (memory / 4).min(self.buffer).max(1);
        let reading = (memory.saturating_sub(out.saturating_mul(2))).max(self.reading_least);
        loop {
            // (A strided run's merge holds the record it takes apart.)
            let strided = self.runs.iter().any(|r| r.strided);
            let per_run = READ_LEAST.saturating_add(match strided {
                true => STRIDED_MOST as usize,
                false => 0,
            });
            let widest = (reading.checked_div(per_run).unwrap_or(0)).clamp(2, GROUP_MOST);
            let most = most_live(&self.runs);
            if most <= live {
                return Ok(());
            }
            // Wide enough that each fragment's groups together leave
            // `live` (fragments' runs meet at a place side by side).
            let mut frags: Vec<u32> = self.runs.iter().map(|r| r.frag).collect();
            frags.sort_unstable();
            let per_frag: Vec<usize> = frags.chunk_by(|a, b| a == b).map(<[u32]>::len).collect();
            let after = |g: usize| -> usize { per_frag.iter().map(|n| n.div_ceil(g)).sum() };
            let mut g = most.div_ceil(live).clamp(2, widest);
            while g < widest && after(g) > live {
                g = g.saturating_add(1);
            }
            // Per fragment, its runs by first place, `g` at a time.
            let mut order: Vec<usize> = (0..self.runs.len()).collect();
            order.sort_by_key(|&r| self.runs.get(r).map(|r| (r.frag, r.place)));
            let mut groups: Vec<Vec<usize>> = Vec::new();
            for r in order {
                let frag = self.runs.get(r).map(|r| r.frag);
                match groups.last_mut() {
                    Some(gr)
                        if gr.len() < g
                            && gr.first().and_then(|&f| self.runs.get(f)).map(|f| f.frag)
                                == frag =>
                    {
                        gr.push(r)
                    }
                    _ => groups.push(vec![r]),
                }
            }
            if groups.len() == self.runs.len() {
                // Every fragment's runs are one: no merge makes fewer.
                return Ok(());
            }
            self.merge_groups(&groups, reading, out)?;
            self.rounds = self.rounds.saturating_add(1);
            tracing::debug!(
                runs = self.runs.len(),
                most,
                rounds = self.rounds,
                "stretch runs merged"
            );
        }
    }

    /// Each of `groups` (runs, by first place, of one fragment) merged
    /// into one run of another file, which takes the old one's place: the
    /// one the last round read (`Stretches::spare`), written over, else a
    /// fresh one; the old one is kept for the next round.
    fn merge_groups(&mut self, groups: &[Vec<usize>], reading: usize, cap: usize) -> Result<()> {
        self.written_out()?;
        let old = (self.file.take())
            .ok_or_else(|| QueryError::invalid("spilled stretches without their file"))?;
        let file = match self.spare.take() {
            Some(f) => f,
            None => scratch::shared()?,
        };
        let mut out = scratch::run_writer(Arc::clone(&file), 0, cap);
        let mut written = 0u64;
        let mut runs = Vec::with_capacity(groups.len());
        for group in groups {
            let group: Vec<&Run> = group.iter().filter_map(|&r| self.runs.get(r)).collect();
            if let Some(run) = merge_group(
                &self.cols,
                &old,
                &group,
                (reading, cap),
                (&mut out, written),
            )? {
                written = run.end;
                runs.push(run);
            }
        }
        out.flush().map_err(QueryError::Spill)?;
        drop(out);
        self.runs = runs;
        self.file = Some(file);
        self.written = written;
        if Arc::strong_count(&old) == 1 {
            self.spare = Some(old);
        }
        Ok(())
    }

    /// Bounds the runs held while pieces push theirs (each costs the read
    /// its place in the list, a few dozen bytes, whatever the budget: a
    /// read of 10^6 pieces would hold 48 MB of them): past
    /// [`HELD_MOST`] (`held_most`), the newest fragment's runs of its
    /// lowest level that has [`GROUP`] of them are merged, [`GROUP`] at a
    /// time oldest first, each into one of the level above appended to the
    /// file (their bytes left behind: scratch space, not memory), until
    /// half the bound is held, as a log-structured merge does: every cell
    /// is rewritten once a level, and a level holds [`GROUP`] times fewer
    /// runs. (A group at a time, each taking its runs out of the list,
    /// would be quadratic in the runs held.) The pieces' writer is written
    /// out first, so the merges take its share of the budget while the
    /// piece's tiles are held: half to read the group's runs (at least
    /// [`READ_LEAST`] each), a quarter each for the record being made and
    /// the merge's writer.
    pub(super) fn bound_runs(&mut self) -> Result<()> {
        if self.runs.len() <= self.held_most {
            return Ok(());
        }
        while self.runs.len() > self.held_most / 2 {
            let Some(frag) = self.runs.last().map(|r| r.frag) else {
                return Ok(());
            };
            let mut counts: Vec<usize> = Vec::new();
            for r in self.runs.iter().filter(|r| r.frag == frag) {
                let l = usize::from(r.level);
                if counts.len() <= l {
                    counts.resize(l.saturating_add(1), 0);
                }
                if let Some(c) = counts.get_mut(l) {
                    *c = c.saturating_add(1);
                }
            }
            let Some(level) = counts.iter().position(|&c| c >= GROUP) else {
                // Many fragments of a run or two each: nothing to merge.
                return Ok(());
            };
            let level = u8::try_from(level).unwrap_or(u8::MAX);
            let members: Vec<usize> = (0..self.runs.len())
                .filter(|&k| (self.runs.get(k)).is_some_and(|r| r.frag == frag && r.level == level))
                .collect();
            self.written_out()?;
            let file = (self.file.clone())
                .ok_or_else(|| QueryError::invalid("spilled stretches without their file"))?;
            let cap = (self.buffer / 4).max(1);
            let mut out = scratch::run_writer(Arc::clone(&file), self.written, cap);
            let mut merged = Vec::new();
            let mut gone = vec![false; self.runs.len()];
            for group in members.chunks_exact(GROUP) {
                let mut runs: Vec<&Run> = group.iter().filter_map(|&k| self.runs.get(k)).collect();
                runs.sort_by_key(|r| r.place);
                let reading = self.buffer / 2;
                let at = merged.last().map_or(self.written, |r: &Run| r.end);
                if let Some(mut run) =
                    merge_group(&self.cols, &file, &runs, (reading, cap), (&mut out, at))?
                {
                    run.level = level.saturating_add(1);
                    merged.push(run);
                }
                for &k in group {
                    if let Some(g) = gone.get_mut(k) {
                        *g = true;
                    }
                }
            }
            out.flush().map_err(QueryError::Spill)?;
            drop(out);
            let mut k = 0usize;
            self.runs.retain(|_| {
                k = k.saturating_add(1);
                !gone.get(k.saturating_sub(1)).copied().unwrap_or(false)
            });
            if let Some(last) = merged.last() {
                self.written = last.end;
            }
            self.runs.extend(merged);
            tracing::debug!(runs = self.runs.len(), level, "stretch runs held merged");
        }
        Ok(())
    }

    /// The pieces' writer's buffer written out, so the file holds every run.
    pub(super) fn written_out(&mut self) -> Result<()> {
        if let Some(w) = self.writer.take() {
            w.into_inner()
                .map_err(|e| QueryError::Spill(e.into_error()))?;
        }
        Ok(())
    }
}

/// The runs' next places, least first.
type Turns = VecDeque<(u64, usize)>;

/// `head` put in its place among `heads`: at the back where it passes them
/// all, else where a search finds.
fn put(heads: &mut Turns, head: (u64, usize)) {
    match heads.back() {
        Some(&last) if last > head => {
            let at = heads.partition_point(|&h| h < head);
            heads.insert(at, head);
        }
        _ => heads.push_back(head),
    }
}

/// The heads of a merge's runs, least first: a queue where runs take
/// turns a cell at a time (strided runs, each a piece of one tile line
/// across the cell order: every head taken from the front goes to the
/// back, where a binary heap sifted it from the top to the bottom,
/// `dense_large_tiles` col-major under 16 KiB, 61 runs a group: the merge
/// down 80 → 56 ms), else a heap: where heads land among the rest, a
/// queue moves up to half the group for each (a merge takes 256 runs at
/// most), a heap sifts it through the log of them.
enum Heads {
    Turns(Turns),
    Heap(BinaryHeap<Reverse<(u64, usize)>>),
}

impl Heads {
    fn new(mut heads: Vec<(u64, usize)>, turns: bool) -> Self {
        match turns {
            true => {
                heads.sort_unstable();
                Heads::Turns(heads.into())
            }
            false => Heads::Heap(heads.into_iter().map(Reverse).collect()),
        }
    }

    /// The least head.
    fn least(&self) -> Option<(u64, usize)> {
        match self {
            Heads::Turns(t) => t.front().copied(),
            Heads::Heap(h) => h.peek().map(|&Reverse(x)| x),
        }
    }

    /// The least head replaced by its run's next (none at the run's end):
    /// in a heap one sift, not a pop and a push.
    fn replace_least(&mut self, next: Option<(u64, usize)>) {
        match self {
            Heads::Turns(t) => {
                t.pop_front();
                if let Some(next) = next {
                    put(t, next);
                }
            }
            Heads::Heap(h) => {
                if let Some(mut top) = h.peek_mut() {
                    match next {
                        Some(next) => *top = Reverse(next),
                        None => drop(PeekMut::pop(top)),
                    }
                }
            }
        }
    }
}

/// `group` (runs of `file`, by first place, of one fragment) merged into
/// one run written through `out`, which stands at `at` of its file: their
/// records by first place, a record that starts where the last ended
/// joining it up to `cap` bytes; each run read through a share of
/// `reading`. `None` for no run.
fn merge_group(
    cols: &[Col],
    file: &Arc<File>,
    group: &[&Run],
    (reading, cap): (usize, usize),
    (out, at): (&mut BufWriter<At>, u64),
) -> Result<Option<Run>> {
    let (Some(first), Some(frag)) = (group.first(), group.first().map(|r| r.frag)) else {
        return Ok(None);
    };
    let past = group.iter().map(|r| r.past).max().unwrap_or(first.past);
    let place = group.iter().map(|r| r.place).min().unwrap_or(first.place);
    let level = group.iter().map(|r| r.level).max().unwrap_or(0);
    // (A strided run's share holds the record it takes apart too.)
    let share = reading.checked_div(group.len()).unwrap_or(0);
    let mut cursors = (group.iter())
        .map(|r| {
            let held = if r.strided { STRIDED_MOST as usize } else { 0 };
            Cursor::new(cols, file, r, share.saturating_sub(held).max(READ_LEAST))
        })
        .collect::<Result<Vec<_>>>()?;
    let heads: Vec<(u64, usize)> = (cursors.iter().enumerate())
        .filter_map(|(k, c)| c.head.map(|(p, _, _)| (p, k)))
        .collect();
    let mut queue = Heads::new(heads, group.iter().all(|r| r.strided));
    let mut making = Making::default();
    let mut written = at;
    while let Some((p, k)) = queue.least() {
        let cursor = cursors
            .get_mut(k)
            .ok_or_else(|| QueryError::invalid("no run"))?;
        let (_, cells, body) = cursor.head.ok_or_else(|| QueryError::invalid("no head"))?;
        let follows = making.place.saturating_add(making.cells) == p;
        // (Cells bounded too: a read of dimensions alone holds no bytes a
        // cell.)
        let fits = making.body.saturating_add(body) <= cap as u64
            && making.cells.saturating_add(cells) < STRIDED;
        if making.cells > 0 && !(follows && fits) {
            written = written.saturating_add(making.flush(out)?);
        }
        if making.cells == 0 {
            making.place = p;
        }
        making.take(cols, cursor, cells, body)?;
        cursor.advance(cols)?;
        queue.replace_least(cursor.head.map(|(next, _, _)| (next, k)));
    }
    written = written.saturating_add(making.flush(out)?);
    Ok(Some(Run {
        frag,
        start: at,
        end: written,
        place,
        skip: 0,
        past,
        level,
        strided: false,
    }))
}

#[cfg(test)]
mod tests {
    use super::{put, Turns};

    /// Heads stay least first whether they pass the rest (runs taking
    /// turns) or land among them, and the front is always the least.
    #[test]
    fn heads_put_back_stay_least_first() {
        let mut heads = Turns::new();
        let mut all = Vec::new();
        let mut x = 7u64;
        for k in 0..500usize {
            // Mostly past the rest, now and then among them.
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let place = match x >> 61 {
                0 => (x >> 20) % 1000,
                _ => 1000 + k as u64 * 3,
            };
            put(&mut heads, (place, k));
            all.push((place, k));
        }
        all.sort_unstable();
        assert_eq!(heads.iter().copied().collect::<Vec<_>>(), all);
        // Taken from the front and put back past the rest: a rotation.
        let (p, k) = heads.pop_front().unwrap();
        put(&mut heads, (p + 10_000, k));
        assert_eq!(heads.back(), Some(&(p + 10_000, k)));
        assert!(heads.iter().zip(heads.iter().skip(1)).all(|(a, b)| a <= b));
    }
}
