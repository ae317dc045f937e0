//! Merge levels: how a consolidation of more fragments than its budget
//! can read at once stays within it. Each group of inputs is merged, as
//! the final merge would, into a run: the group's cells in the global
//! order, each with its timestamp and delete metadata, in a temporary
//! file; the runs are then merged in place of the fragments (again in
//! groups, where there are still too many).
//!
//! A run holds batches of whole cells, each at most the bytes its reader
//! is given, so the merge of runs holds one batch per run. Like a read's
//! spill files ([`crate::read`]'s sorted runs), runs are scratch memory:
//! unnamed temporary files, local whatever the array's backend.

use crate::validity::Validity;
use crate::{Batch, FieldBuffer, QueryError, Result};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};

/// The fewest budget bytes a merge gives each input it reads at once: a
/// fragment's read under a smaller share spends more on its own state
/// (plans, metadata, a batch's fixed cost) than on cells. A merge of more
/// inputs than the budget holds at this share goes in levels.
pub(super) const MIN_INPUT_SHARE: u64 = 512 << 10;

/// How many inputs a merge under `budget` reads at once (two at least).
pub(super) fn fan_in(budget: u64) -> usize {
    usize::try_from(budget / MIN_INPUT_SHARE)
        .unwrap_or(usize::MAX)
        .max(2)
}

/// A run being written: batches of at most `slice` bytes.
pub(super) struct RunSink {
    out: BufWriter<File>,
    slice: u64,
    batches: u64,
    largest: u64,
}

impl RunSink {
    /// A new run in a fresh temporary file, cut into batches of at most
    /// `slice` bytes (a cell larger than that is a batch of its own).
    pub fn new(slice: u64) -> Result<Self> {
        Ok(RunSink {
            out: crate::scratch::create(64 << 10)?,
            slice: slice.max(1),
            batches: 0,
            largest: 0,
        })
    }

    /// Appends a part of the merge (fields of one shape each run, the same
    /// number of cells in each).
    pub fn push(&mut self, part: &[FieldBuffer]) -> Result<()> {
        let cells = part.first().map_or(0, |f| f.column().len());
        let bytes: u64 = part.iter().map(FieldBuffer::byte_len).sum();
        // Cells per batch by the part's mean cell size.
        let per = self
            .slice
            .saturating_mul(cells as u64)
            .checked_div(bytes)
            .unwrap_or(u64::MAX)
            .max(1);
        let per = usize::try_from(per).unwrap_or(usize::MAX);
        let mut start = 0;
        while start < cells {
            let end = start.saturating_add(per).min(cells);
            self.write_batch(part, start..end)?;
            start = end;
        }
        Ok(())
    }

    /// One batch: its cell count, then per field its data, offsets and
    /// validity bytes, each after its length.
    fn write_batch(&mut self, part: &[FieldBuffer], cells: std::ops::Range<usize>) -> Result<()> {
        let w = &mut self.out;
        let n = cells.len() as u64;
        w.write_all(&n.to_le_bytes()).map_err(QueryError::Spill)?;
        let mut bytes = 0u64;
        for field in part {
            let slice = field.slice(cells.clone());
            let offsets: Vec<u8> = slice
                .offsets
                .iter()
                .flatten()
                .flat_map(|o| o.to_le_bytes())
                .collect();
            let col = slice.column();
            let validity: Vec<u8> = match slice.validity {
                Some(_) => (0..col.len()).map(|i| u8::from(!col.is_null(i))).collect(),
                None => Vec::new(),
            };
            for block in [&slice.data[..], &offsets, &validity] {
                let len = block.len() as u64;
                w.write_all(&len.to_le_bytes()).map_err(QueryError::Spill)?;
                w.write_all(block).map_err(QueryError::Spill)?;
                bytes = bytes.saturating_add(len);
            }
        }
        self.largest = self.largest.max(bytes);
        self.batches = self.batches.saturating_add(1);
        Ok(())
    }

    /// The run, written, ready to be read back.
    pub fn finish(self) -> Result<Run> {
        Ok(Run {
            file: crate::scratch::rewound(self.out)?,
            batches: self.batches,
            largest: self.largest,
        })
    }
}

/// A run written: its file at its start, how many batches it holds and
/// the bytes of the largest (no length read back may pass it).
pub(super) struct Run {
    file: File,
    batches: u64,
    largest: u64,
}

/// A run read back batch by batch, into buffers shaped as `shape`'s.
pub(super) struct RunReader {
    input: BufReader<File>,
    left: u64,
    largest: u64,
    shape: Vec<FieldBuffer>,
}

impl RunReader {
    pub fn new(run: Run, shape: Vec<FieldBuffer>) -> Self {
        RunReader {
            input: BufReader::with_capacity(64 << 10, run.file),
            left: run.batches,
            largest: run.largest,
            shape,
        }
    }

    /// The next batch, `None` at the run's end.
    pub fn next_batch(&mut self) -> Option<Result<Batch>> {
        if self.left == 0 {
            return None;
        }
        self.left = self.left.saturating_sub(1);
        Some(self.read_batch())
    }

    fn read_batch(&mut self) -> Result<Batch> {
        let corrupt = || QueryError::invalid("a consolidation run file is corrupt");
        let RunReader {
            input,
            largest,
            shape,
            ..
        } = self;
        let num_cells = read_u64(input)?;
        let mut fields = Vec::with_capacity(shape.len());
        let mut left = *largest;
        let mut block = |input: &mut BufReader<File>| -> Result<Vec<u8>> {
            // Our own file, but its lengths are checked before anything is
            // allocated for them.
            let len = read_u64(input)?;
            left = left.checked_sub(len).ok_or_else(corrupt)?;
            let mut buf = vec![0u8; usize::try_from(len).map_err(|_| corrupt())?];
            input.read_exact(&mut buf).map_err(QueryError::Spill)?;
            Ok(buf)
        };
        for shape in shape.iter() {
            let data = block(input)?;
            let offsets = block(input)?;
            let validity = block(input)?;
            let mut field = FieldBuffer {
                data,
                offsets: None,
                validity: None,
                ..FieldBuffer::new(&shape.name, shape.datatype, shape.cell_val_num, false)
            };
            if shape.offsets.is_some() {
                field.offsets = Some(tdb_format::le::u64_values(&offsets).collect());
            }
            if shape.validity.is_some() {
                field.validity = Some(Validity::Bytes(validity));
            }
            if field.column().len() as u64 != num_cells {
                return Err(corrupt());
            }
            fields.push(field);
        }
        Ok(Batch { num_cells, fields })
    }
}

fn read_u64(input: &mut BufReader<File>) -> Result<u64> {
    let mut b = [0u8; 8];
    input.read_exact(&mut b).map_err(QueryError::Spill)?;
    Ok(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Seek;
    use tdb_format::Datatype;

    fn part() -> Vec<FieldBuffer> {
        let mut ints = FieldBuffer::new("d", Datatype::Int32, 1, false);
        let mut strings = FieldBuffer::new("s", Datatype::StringAscii, u32::MAX, true);
        for i in 0..100i32 {
            ints.push(&i.to_le_bytes(), true);
            strings.push(format!("cell{i}").as_bytes(), i % 3 != 0);
        }
        vec![ints, strings]
    }

    fn shape() -> Vec<FieldBuffer> {
        part().iter().map(|f| f.slice(0..0)).collect()
    }

    #[test]
    fn runs_read_back_in_batches_within_their_slice() {
        let mut sink = RunSink::new(200).unwrap();
        let written = part();
        sink.push(&written).unwrap();
        sink.push(&written).unwrap();
        let mut reader = RunReader::new(sink.finish().unwrap(), shape());
        let mut read = Vec::new();
        while let Some(b) = reader.next_batch() {
            let b = b.unwrap();
            assert!(b.fields.iter().map(FieldBuffer::byte_len).sum::<u64>() <= 200);
            read.push(b);
        }
        assert!(read.len() >= 10, "{} batches", read.len());
        let mut all = Batch::default();
        for b in &read {
            all.append(b);
        }
        assert_eq!(all.num_cells, 200);
        for (got, want) in all.fields.iter().zip(&written) {
            let (got, want) = (got.column(), want.column());
            for i in 0..200 {
                assert_eq!(got.cell(i), want.cell(i % 100));
                assert_eq!(got.is_null(i), want.is_null(i % 100));
            }
        }
    }

    #[test]
    fn a_corrupt_run_is_an_error_not_an_allocation() {
        let mut sink = RunSink::new(1 << 20).unwrap();
        sink.push(&part()).unwrap();
        let mut run = sink.finish().unwrap();
        // The first field's data length, past the largest batch written.
        run.file.seek(std::io::SeekFrom::Start(8)).unwrap();
        run.file.write_all(&u64::MAX.to_le_bytes()).unwrap();
        run.file.rewind().unwrap();
        let mut reader = RunReader::new(run, shape());
        assert!(matches!(reader.next_batch(), Some(Err(_))));
        // A run cut short.
        let mut sink = RunSink::new(1 << 20).unwrap();
        sink.push(&part()).unwrap();
        let run = sink.finish().unwrap();
        run.file.set_len(40).unwrap();
        let mut reader = RunReader::new(run, shape());
        assert!(matches!(reader.next_batch(), Some(Err(_))));
    }
}
