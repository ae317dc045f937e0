//! Batches out of a piece's results: each requested field's cells copied
//! from the decoded tiles (or fill) a slab at a time, dense conditions
//! applied as fill, under the half of the budget batches get.

// Not yet under the crate's no-panic lints (37 sites of cell, offset and
// buffer arithmetic): to rewrite as the condition parser and the rest were.
#![allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

use super::dense::Slab;
use super::fields::Kind;
use super::{CellState, Reader};
use crate::batch::{Batch, FieldBuffer};
use crate::{Column, Result};
use tdb_format::ArrayType;
use tdb_index::dense::push_int;

impl Reader {
    /// Result cells per batch: the budget over a generous per-cell cost.
    pub(super) fn batch_cells(&self) -> usize {
        let per_cell: u64 = self
            .requested
            .iter()
            .map(|&s| {
                let f = &self.fields[s];
                let data = if f.is_var() {
                    8 + 32
                } else {
                    f.cell_size() as u64
                };
                data + u64::from(f.nullable)
            })
            .sum::<u64>()
            .max(1);
        ((self.spec.budget - self.tile_budget()) / per_cell).max(1) as usize
    }

    pub(super) fn next_batch(&mut self) -> Result<Option<Batch>> {
        // The batch's slabs, cut where the batch starts and ends, each with
        // its slab's index and first cell's offset in that slab.
        let mut want = self.batch_cells() as u64;
        let mut parts: Vec<(Slab, usize, u64)> = Vec::new();
        let (mut k, mut off) = self.next;
        while want > 0 && k < self.results.slabs.len() {
            let slab = self.results.slabs[k];
            let take = (slab.len - off).min(want);
            if take > 0 {
                parts.push((slab.part(off, take), k, off));
            }
            want -= take;
            off += take;
            if off >= slab.len {
                (k, off) = (k + 1, 0);
            }
        }
        self.next = (k, off);
        if parts.is_empty() {
            return Ok(None);
        }
        let num_cells: u64 = parts.iter().map(|p| p.0.len).sum();
        let dense = self.snapshot.schema().array_type == ArrayType::Dense;
        let keep = match (&self.condition, dense) {
            (Some(cond), true) => {
                let slots: Vec<usize> = cond
                    .fields()
                    .iter()
                    .filter_map(|n| self.fields.iter().position(|f| &f.name == n))
                    .collect();
                let fields = slots
                    .iter()
                    .map(|&s| self.materialize(s, &parts, None))
                    .collect::<Result<_>>()?;
                let b = Batch { num_cells, fields };
                let mut mask = vec![true; num_cells as usize];
                cond.evaluate(&b, &mut mask)?;
                Some(mask)
            }
            _ => None,
        };
        if self.with_states {
            let mut states = Vec::with_capacity(num_cells as usize);
            for (slab, _, _) in &parts {
                for _ in 0..slab.len {
                    let k = states.len();
                    states.push(if slab.is_fill() {
                        CellState::Unwritten
                    } else if keep.as_ref().is_some_and(|m| !m[k]) {
                        CellState::Rejected
                    } else {
                        CellState::Kept
                    });
                }
            }
            self.last_states = Some(states);
        }
        let fields = self
            .requested
            .iter()
            .map(|&s| self.materialize(s, &parts, keep.as_deref()))
            .collect::<Result<_>>()?;
        Ok(Some(Batch { num_cells, fields }))
    }

    pub(super) fn empty_buffer(&self, slot: usize) -> FieldBuffer {
        self.fields[slot].empty_buffer()
    }

    /// Calls `f` with each run of the batch's slabs `parts` for field
    /// `slot`, in order: its source column (`None`: fill, for unwritten
    /// cells and, with `keep`, cells the condition rejected) and its cells.
    pub(super) fn for_each_run<'t>(
        &'t self,
        slot: usize,
        parts: &[(Slab, usize, u64)],
        keep: Option<&[bool]>,
        mut f: impl FnMut(Option<Column<'t>>, Slab),
    ) {
        let info = &self.fields[slot];
        let mut at = 0usize;
        // Consecutive slabs mostly share a tile (a sparse read's cells are
        // each a slab): it is looked up once per run of them.
        let mut last: Option<((u32, u64), Option<Column<'t>>)> = None;
        for &(slab, _, _) in parts {
            let len = slab.len as usize;
            let tile = if slab.is_fill() {
                None
            } else {
                match last {
                    Some((key, col)) if key == (slab.frag, slab.tile) => col,
                    _ => {
                        let col = self
                            .tiles
                            .get(&(slab.frag as usize, slot, slab.tile))
                            .map(|t| t.column(info.datatype, info.cell_val_num));
                        last = Some(((slab.frag, slab.tile), col));
                        col
                    }
                }
            };
            let Some(keep) = keep else {
                f(tile, slab);
                at += len;
                continue;
            };
            let mut j = 0;
            while j < len {
                let kept = keep[at + j];
                let mut e = j + 1;
                while e < len && keep[at + e] == kept {
                    e += 1;
                }
                f(tile.filter(|_| kept), slab.part(j as u64, (e - j) as u64));
                j = e;
            }
            at += len;
        }
    }

    /// Field `slot`'s cells of the batch's slabs `parts` (each with its
    /// slab's index and offset, for dense coordinates), a slab at a time;
    /// where `keep` is false (a dense cell failing the condition) the fill
    /// value.
    pub(super) fn materialize(
        &self,
        slot: usize,
        parts: &[(Slab, usize, u64)],
        keep: Option<&[bool]>,
    ) -> Result<FieldBuffer> {
        let f = &self.fields[slot];
        let mut out = self.empty_buffer(slot);
        let cells: usize = parts.iter().map(|p| p.0.len as usize).sum();
        let dense_dim = match f.kind {
            Kind::Dim(d) if self.snapshot.schema().array_type == ArrayType::Dense => Some(d),
            _ => None,
        };
        if let Some(d) = dense_dim {
            // Dense coordinates come from the slabs, not from tiles.
            out.data.reserve_exact(cells * f.cell_size());
            for &(slab, k, off) in parts {
                let first = self.results.first_coords(k).get(d).copied().unwrap_or(0);
                let step = self.results.step_dim == d;
                for j in 0..i128::from(slab.len) {
                    let v = if step {
                        first + i128::from(off) + j
                    } else {
                        first
                    };
                    push_int(f.datatype, v, &mut out.data);
                }
            }
            return Ok(out);
        }
        if f.is_var() {
            if let Some(o) = &mut out.offsets {
                o.reserve_exact(cells);
            }
            if let Some(v) = &mut out.validity {
                v.reserve_exact(cells);
            }
            self.for_each_run(slot, parts, keep, |source, slab| match source {
                Some(col) => {
                    for j in 0..slab.len {
                        let i = (slab.cell + j * slab.stride) as usize;
                        push_cell(&mut out, col.cell(i), !col.is_null(i));
                    }
                }
                None => {
                    for _ in 0..slab.len {
                        push_cell(&mut out, &f.fill, f.fill_validity != 0);
                    }
                }
            });
            return Ok(out);
        }
        // Fixed-size cells: every run's bytes have a known place, so the
        // buffer is sized once and each run is copied into its slice.
        let size = f.cell_size();
        out.data = vec![0; cells * size];
        if let Some(v) = &mut out.validity {
            *v = vec![0; cells];
        }
        let fill = Fill {
            bytes: &f.fill,
            valid: f.fill_validity,
        };
        let (mut data, mut validity) = (&mut out.data[..], out.validity.as_deref_mut());
        // Long runs (dense slabs) are gathered and copied on every core;
        // short ones (sparse cells) straight away.
        let bytes = cells * size;
        let shared = bytes >= PARALLEL_COPY && bytes / parts.len().max(1) >= PARALLEL_RUN;
        let mut jobs: Vec<CopyJob<'_, '_>> = Vec::new();
        self.for_each_run(slot, parts, keep, |source, slab| {
            let n = slab.len as usize;
            let (d, rest) = std::mem::take(&mut data).split_at_mut(n * size);
            data = rest;
            let v = validity.take().map(|v| {
                let (a, b) = v.split_at_mut(n);
                validity = Some(b);
                a
            });
            if shared {
                jobs.push((d, v, source, slab));
            } else {
                copy_run((d, v, source, slab), size, fill);
            }
        });
        crate::pool::for_each_share(
            jobs,
            crate::threads(),
            |job| job.0.len(),
            |job| copy_run(job, size, fill),
        )?;
        Ok(out)
    }
}

/// A field's fill value and fill validity.
#[derive(Clone, Copy)]
struct Fill<'a> {
    bytes: &'a [u8],
    valid: u8,
}

/// Where one run of fixed-size cells goes (data and validity slices of the
/// batch), where it comes from (none: fill), and which cells.
type CopyJob<'o, 't> = (&'o mut [u8], Option<&'o mut [u8]>, Option<Column<'t>>, Slab);

/// Batches of at least this many bytes, in runs of this many on average,
/// are copied on every core: a large dense read's copy into its results
/// was a serial stage between the parallel decoding of one piece and the
/// next. Short runs are not worth gathering (a sparse read's cells, each
/// its own run: gathering them took more time and memory than the copy).
const PARALLEL_COPY: usize = 1 << 20;
const PARALLEL_RUN: usize = 512;

/// Copies one run: whole byte ranges where the cells are adjacent in their
/// tile, else cell by cell; fill where there is no source.
fn copy_run((data, validity, source, slab): CopyJob<'_, '_>, size: usize, fill: Fill<'_>) {
    let (first, len) = (slab.cell as usize, slab.len as usize);
    match source {
        Some(col) if slab.stride == 1 && (first + len) * size <= col.fixed.len() => {
            data.copy_from_slice(&col.fixed[first * size..(first + len) * size]);
            if let Some(v) = validity {
                match col.validity {
                    Some(valid) if first + len <= valid.len() => {
                        v.copy_from_slice(&valid[first..first + len]);
                    }
                    _ => v.fill(1),
                }
            }
        }
        Some(col) => {
            for (j, cell) in data.chunks_exact_mut(size).enumerate() {
                let i = first + j * slab.stride as usize;
                let bytes = col.cell(i);
                if bytes.len() == size {
                    cell.copy_from_slice(bytes);
                }
            }
            if let Some(v) = validity {
                for (j, b) in v.iter_mut().enumerate() {
                    *b = u8::from(!col.is_null(first + j * slab.stride as usize));
                }
            }
        }
        None => {
            if fill.bytes.len() == size {
                for cell in data.chunks_exact_mut(size) {
                    cell.copy_from_slice(fill.bytes);
                }
            }
            if let Some(v) = validity {
                v.fill(fill.valid);
            }
        }
    }
}

/// Appends one cell.
fn push_cell(out: &mut FieldBuffer, bytes: &[u8], valid: bool) {
    if let Some(o) = &mut out.offsets {
        o.push(out.data.len() as u64);
    }
    out.data.extend_from_slice(bytes);
    if let Some(v) = &mut out.validity {
        v.push(u8::from(valid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_format::Datatype;

    /// Runs of every kind (whole ranges, strided cells, fill), enough bytes
    /// to be shared among threads, land where the serial copy puts them.
    #[test]
    fn copies_shared_among_threads_match_the_serial_copy() {
        let cells = 1u64 << 20;
        let fixed: Vec<u8> = (0..cells as u32).flat_map(u32::to_le_bytes).collect();
        let validity: Vec<u8> = (0..cells).map(|i| u8::from(i % 5 != 0)).collect();
        let col = Column {
            datatype: Datatype::UInt32,
            cell_val_num: 1,
            fixed: &fixed,
            offsets: &[],
            var: &[],
            validity: Some(&validity),
        };
        let slab = |cell, stride, len| Slab {
            frag: 0,
            tile: 0,
            cell,
            stride,
            len,
        };
        let runs: Vec<(Option<Column<'_>>, Slab)> = (0..3000u64)
            .map(|k| match k % 3 {
                0 => (Some(col), slab(k * 97, 1, 300)),
                1 => (Some(col), slab(k * 13, 3, 100)),
                _ => (None, Slab::fill(50)),
            })
            .collect();
        let total: usize = runs.iter().map(|(_, s)| s.len as usize).sum();
        assert!(total * 4 >= PARALLEL_COPY);
        let fill = Fill {
            bytes: &[0xAB; 4],
            valid: 0,
        };
        let copy = |shared: bool| -> (Vec<u8>, Vec<u8>) {
            let (mut data, mut valid) = (vec![0u8; total * 4], vec![7u8; total]);
            let (mut d, mut v) = (&mut data[..], &mut valid[..]);
            let mut jobs = Vec::new();
            for &(source, s) in &runs {
                let n = s.len as usize;
                let (a, rest) = std::mem::take(&mut d).split_at_mut(n * 4);
                d = rest;
                let (b, rest) = std::mem::take(&mut v).split_at_mut(n);
                v = rest;
                jobs.push((a, Some(b), source, s));
            }
            if shared {
                // Two threads whatever the machine has.
                crate::pool::for_each_share(
                    jobs,
                    2,
                    |job| job.0.len(),
                    |job| copy_run(job, 4, fill),
                )
                .unwrap();
            } else {
                jobs.into_iter().for_each(|job| copy_run(job, 4, fill));
            }
            (data, valid)
        };
        let serial = copy(false);
        assert_eq!(serial.0[300 * 4..301 * 4], 13u32.to_le_bytes());
        assert_eq!(serial.0[400 * 4..401 * 4], [0xAB; 4]);
        assert_eq!(copy(true), serial);
    }
}
