//! Scratch files: where a spilled read's sorted runs, a consolidation's
//! merge levels and a writer's filtered chunks waiting for their tile's
//! end go. Unnamed temporary files (in `TMPDIR`), gone when
//! closed, local whatever the array's backend: scratch memory, not storage.
//! A consolidation's run has a file of its own; a spilled read's runs share
//! one file a merge level ([`At`]).

use crate::{QueryError, Result};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::sync::Arc;

/// Bytes a spilled read's merges read their runs through at least,
/// whatever the budget. A merge's reads are calls on a local file whose
/// cost is the call more than the bytes: under a small budget the
/// budget's share gave each run 512 bytes, and more passes for fewer runs
/// at once (`dense_large_tiles` col-major under 16 KiB: 68,000 reads of
/// 0.5–1.2 KB in three passes over 13 MB, 0.22 s against the unbudgeted
/// read's 0.031). Outside the budget, as the chunks kept and the bytes
/// read on are: a fixed amount, not one that grows with the data.
pub(crate) const READING_LEAST: usize = 256 << 10;

/// Bytes a spilled read's runs are written through at least, whatever the
/// budget: each write is a call on a local file whose cost is the call
/// more than the bytes (`sparse_bounded_tiles` in global order under 16
/// KiB wrote its runs in 4,383 `pwrite`s of about 2 KB; 273 through 64
/// KiB, a tenth less time). Outside the budget, as [`READING_LEAST`] is;
/// what a record holds at most stays the budget's.
pub(crate) const WRITING_LEAST: usize = 64 << 10;

/// A spilled run's bytes `start..end` of `file`, read through `buffer`
/// bytes but no more than they hold: a buffer of [`READING_LEAST`]'s share
/// for a run of a few KiB costs fresh pages at every merge, not fewer
/// reads (W7's small reads under 16 KiB: 10% slower).
pub(crate) fn run_reader(file: Arc<File>, start: u64, end: u64, buffer: usize) -> BufReader<At> {
    let len = usize::try_from(end.saturating_sub(start)).unwrap_or(usize::MAX);
    BufReader::with_capacity(buffer.min(len).max(1), At::new(file, start, end))
}

/// What a spilled run is written through: the budget's `buffer` or
/// [`WRITING_LEAST`], whichever is more.
pub(crate) fn write_buffer(buffer: usize) -> usize {
    buffer.max(WRITING_LEAST)
}

/// A spilled run's writer at `pos` of `file` ([`write_buffer`]).
pub(crate) fn run_writer(file: Arc<File>, pos: u64, buffer: usize) -> BufWriter<At> {
    BufWriter::with_capacity(write_buffer(buffer), At::new(file, pos, pos))
}

/// A fresh scratch file, written through `buffer` bytes.
pub(crate) fn create(buffer: usize) -> Result<BufWriter<File>> {
    Ok(BufWriter::with_capacity(buffer, unbuffered()?))
}

/// A fresh scratch file, written without a buffer (blocks of whole chunks;
/// one shared by position, [`shared`]).
pub(crate) fn unbuffered() -> Result<File> {
    tempfile::tempfile().map_err(QueryError::Spill)
}

/// The file `out` wrote, flushed and back at its start, to be read.
pub(crate) fn rewound(out: BufWriter<File>) -> Result<File> {
    let mut file = out
        .into_inner()
        .map_err(|e| QueryError::Spill(e.into_error()))?;
    file.rewind().map_err(QueryError::Spill)?;
    Ok(file)
}

/// A stretch of a shared scratch file from `pos` to `end`, written and read
/// by position, not through the file's cursor: a spilled read keeps its
/// runs of one merge level in one file, and a merge reads several of them
/// side by side while it appends its output to the next level's file.
/// (With a file a run, W7's 2-D reads under 16 KiB made about 50 files of
/// a few KiB; on ext4, creating and dropping them took a fifth of the
/// read: 4.3 → 3.5 ms.)
pub(crate) struct At {
    file: Arc<File>,
    pos: u64,
    end: u64,
}

impl At {
    /// `file` from `pos` up to `end` (writes are not bounded by it).
    pub fn new(file: Arc<File>, pos: u64, end: u64) -> Self {
        At { file, pos, end }
    }

    /// Where the next byte goes (or comes from).
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// The file.
    pub fn file(&self) -> Arc<File> {
        Arc::clone(&self.file)
    }
}

impl Write for At {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = write_at(&self.file, buf, self.pos)?;
        self.pos = self.pos.saturating_add(n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for At {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = usize::try_from(self.end.saturating_sub(self.pos)).unwrap_or(usize::MAX);
        let Some(buf) = buf.get_mut(..left.min(buf.len())).filter(|b| !b.is_empty()) else {
            return Ok(0);
        };
        let n = read_at(&self.file, buf, self.pos)?;
        self.pos = self.pos.saturating_add(n as u64);
        Ok(n)
    }
}

/// A fresh scratch file to share ([`At`]).
pub(crate) fn shared() -> Result<Arc<File>> {
    Ok(Arc::new(unbuffered()?))
}

#[cfg(unix)]
fn write_at(file: &File, buf: &[u8], pos: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::write_at(file, buf, pos)
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, pos)
}

// Elsewhere through the cursor: a spilled read's merge runs on one thread,
// and each call seeks before it moves.
#[cfg(not(unix))]
fn write_at(mut file: &File, buf: &[u8], pos: u64) -> io::Result<usize> {
    file.seek(io::SeekFrom::Start(pos))?;
    file.write(buf)
}

#[cfg(not(unix))]
fn read_at(mut file: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    file.seek(io::SeekFrom::Start(pos))?;
    file.read(buf)
}
