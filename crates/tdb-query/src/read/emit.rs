//! Batches out of a piece's results: each requested field's cells copied
//! from the decoded tiles (or fill) a slab at a time, dense conditions
//! applied as fill, under the part of the budget batches get.

use super::dense::Slab;
use super::fields::{FieldInfo, Kind};
use super::null_checks::{null_check_validity, NullChecked};
use super::{CellState, Reader};
use crate::batch::{Batch, FieldBuffer};
use crate::validity::{Bitmap, Validity};
use crate::{Column, QueryError, Result};
use tdb_format::ArrayType;
use tdb_index::dense::push_int;

impl Reader {
    /// Result cells per batch: the batch's part of the budget over a
    /// generous per-cell cost.
    pub(super) fn batch_cells(&self) -> usize {
        self.batch_share
            .checked_div(self.result_cell_bytes())
            .unwrap_or(0)
            .max(1) as usize
    }

    /// What one result cell costs a batch, generously: every requested
    /// field's value (a var cell: its offset and a guess of 32 bytes of
    /// data) and validity.
    pub(super) fn result_cell_bytes(&self) -> u64 {
        const VAR_CELL: u64 = 8 + 32;
        self.requested
            .iter()
            .filter_map(|&s| self.fields.get(s))
            .map(|f| {
                let data = if f.is_var() {
                    VAR_CELL
                } else {
                    f.cell_size() as u64
                };
                data.saturating_add(u64::from(f.nullable))
            })
            .fold(0u64, u64::saturating_add)
            .max(1)
    }

    pub(super) fn next_batch(&mut self) -> Result<Option<Batch>> {
        // The batch's slabs, cut where the batch starts and ends, each with
        // its slab's index and first cell's offset in that slab.
        let mut want = self.batch_cells() as u64;
        let mut parts: Vec<(Slab, usize, u64)> = Vec::new();
        let (mut k, mut off) = self.next;
        while want > 0 {
            let Some(&slab) = self.results.slabs.get(k) else {
                break;
            };
            let take = slab.len.saturating_sub(off).min(want);
            if take > 0 {
                parts.push((slab.part(off, take), k, off));
            }
            want = want.saturating_sub(take);
            off = off.saturating_add(take);
            if off >= slab.len {
                (k, off) = (k.saturating_add(1), 0);
            }
        }
        self.next = (k, off);
        if parts.is_empty() {
            return Ok(None);
        }
        let num_cells = parts
            .iter()
            .map(|p| p.0.len)
            .fold(0u64, u64::saturating_add);
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
                    .map(|&s| {
                        let f = (self.fields.get(s))
                            .ok_or_else(|| QueryError::invalid(format!("no field in slot {s}")))?;
                        self.materialize(s, &parts, None, false, f.empty_buffer())
                    })
                    .collect::<Result<_>>()?;
                let batch = Batch { num_cells, fields };
                let validity = self.dense_null_checks(&slots, &parts)?;
                let mut mask = vec![true; num_cells as usize];
                cond.evaluate(
                    &NullChecked {
                        batch: &batch,
                        validity: &validity,
                    },
                    &mut mask,
                )?;
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
                    } else if keep.as_ref().is_some_and(|m| m.get(k) == Some(&false)) {
                        CellState::Rejected
                    } else {
                        CellState::Kept
                    });
                }
            }
            self.last_notes.states = Some(states);
        }
        if !self.md_pending.is_empty() {
            let mut at = 0usize;
            for (slab, _, _) in &parts {
                let (tile, len) = ((slab.frag as usize, slab.tile), slab.len as usize);
                if self.md_pending.get(&tile).is_some_and(|p| p.ok) {
                    match self.last_notes.pending.last_mut() {
                        Some((start, n, t)) if *t == tile && start.saturating_add(*n) == at => {
                            *n = n.saturating_add(len)
                        }
                        _ => self.last_notes.pending.push((at, len, tile)),
                    }
                }
                at = at.saturating_add(len);
            }
        }
        // The caller's buffers handed back (`Reader::recycle`), where they
        // are of the field asked for: written again, not allocated anew.
        let mut recycled = std::mem::take(&mut self.recycled).into_iter();
        let mut fields = Vec::with_capacity(self.requested.len());
        for &s in &self.requested {
            let f = (self.fields.get(s))
                .ok_or_else(|| QueryError::invalid(format!("no field in slot {s}")))?;
            let empty = f.empty_buffer();
            let packed = self.spec.packed_validity;
            let out = match recycled.next() {
                Some(mut b)
                    if b.name == empty.name
                        && b.datatype == empty.datatype
                        && b.cell_val_num == empty.cell_val_num
                        && b.offsets.is_some() == empty.offsets.is_some()
                        && match (&b.validity, &empty.validity) {
                            (None, None) | (Some(Validity::Bytes(_)), Some(_)) => true,
                            // Bits are made anew unless asked for.
                            (Some(Validity::Bits(_)), Some(_)) => packed,
                            _ => false,
                        } =>
                {
                    b.clear();
                    b
                }
                _ => empty,
            };
            fields.push(self.materialize(s, &parts, keep.as_deref(), packed, out)?);
        }
        Ok(Some(Batch { num_cells, fields }))
    }

    /// Calls `f` with each run of the batch's slabs `parts` for field
    /// `slot` (`info`), in order: its source column (`None`: fill, for
    /// unwritten cells and, with `keep`, cells the condition rejected) and
    /// its cells.
    pub(super) fn for_each_run<'t>(
        &'t self,
        slot: usize,
        info: &FieldInfo,
        parts: &[(Slab, usize, u64)],
        keep: Option<&[bool]>,
        mut f: impl FnMut(Option<Column<'t>>, Slab),
    ) {
        let mut at = 0usize;
        // Consecutive slabs mostly share a tile, or take turns among a few
        // (a sparse read's cells are each a slab; a sorted one takes them
        // from several fragments' tiles in turn): the tiles met last are
        // kept at hand, each looked up once per run of its slabs (a map
        // lookup a cell was 7% of a sorted read of three tiles).
        // A sliced tile holds its cells from `first` on: slabs count from
        // there (listed cells already do).
        let mut recent: [Option<((u32, u64), Held<'t>)>; RECENT_TILES] = [None; RECENT_TILES];
        for &(slab, _, _) in parts {
            let len = slab.len as usize;
            let key = (slab.frag, slab.tile);
            let at_hand = (key.1 as usize)
                .wrapping_add((key.0 as usize).wrapping_mul(31))
                .checked_rem(RECENT_TILES)
                .unwrap_or(0);
            let held = if slab.is_fill() {
                None
            } else {
                match recent.get(at_hand).copied().flatten() {
                    Some((k, col)) if k == key => col,
                    _ => {
                        let col = self
                            .tiles
                            .get(&(slab.frag as usize, slot, slab.tile))
                            .map(|t| (t.column(info.datatype, info.cell_val_num), t.first));
                        if let Some(r) = recent.get_mut(at_hand) {
                            *r = Some((key, col));
                        }
                        col
                    }
                }
            };
            let (tile, slab) = match held {
                Some((col, _)) if slab.is_listed() => (Some(col), slab),
                Some((col, first)) => (
                    Some(col),
                    Slab {
                        cell: slab.cell.saturating_sub(first),
                        ..slab
                    },
                ),
                None => (None, slab),
            };
            let end = at.saturating_add(len);
            let Some(keep) = keep else {
                f(tile, slab);
                at = end;
                continue;
            };
            // Runs of cells the condition keeps, and of those it rejects.
            let mut j = 0u64;
            for run in keep
                .get(at..end)
                .unwrap_or_default()
                .chunk_by(|a, b| a == b)
            {
                let kept = run.first().copied().unwrap_or(false);
                let n = run.len() as u64;
                f(tile.filter(|_| kept), slab.part(j, n));
                j = j.saturating_add(n);
            }
            at = end;
        }
    }

    /// The validity TileDB's dense reader tests `== None` and `!= None`
    /// against ([`Reader::null_shift`]), cell by cell of `parts`, for each
    /// nullable field of `slots` (the condition's); none where it is the
    /// cells' own.
    fn dense_null_checks(
        &self,
        slots: &[usize],
        parts: &[(Slab, usize, u64)],
    ) -> Result<Vec<(String, Vec<u8>)>> {
        let Some(shift) = self.null_shift() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for &slot in slots {
            let f = (self.fields.get(slot))
                .ok_or_else(|| QueryError::invalid(format!("no field in slot {slot}")))?;
            if !f.nullable {
                continue;
            }
            let mut v = Vec::new();
            for &(slab, k, off) in parts {
                let tile = (!slab.is_fill())
                    .then(|| self.tiles.get(&(slab.frag as usize, slot, slab.tile)))
                    .flatten();
                let Some(tile) = tile else {
                    // Fill cells, or a fragment without the field.
                    v.extend(std::iter::repeat_n(f.fill_validity, slab.len as usize));
                    continue;
                };
                let col = tile.column(f.datatype, f.cell_val_num);
                let dense =
                    (self.plans.get(slab.frag as usize)).is_some_and(|p| p.meta.footer.dense);
                let frag_lo = shift.frag_lo(self, slab.frag as usize);
                let first = self
                    .results
                    .first_coords(k)
                    .get(shift.step)
                    .copied()
                    .unwrap_or(0);
                let x0 = first.saturating_add(i128::from(off));
                for j in 0..slab.len {
                    let pos = slab.cell.saturating_add(j.saturating_mul(slab.stride));
                    let read = match dense && !slab.is_listed() {
                        true => shift.position(frag_lo, pos, x0.saturating_add(i128::from(j))),
                        false => pos,
                    };
                    v.push(null_check_validity(
                        &col,
                        tile.first,
                        read,
                        pos,
                        f.fill_validity,
                    ));
                }
            }
            out.push((f.name.clone(), v));
        }
        Ok(out)
    }

    /// Field `slot`'s cells of the batch's slabs `parts` (each with its
    /// slab's index and offset, for dense coordinates), a slab at a time;
    /// where `keep` is false (a dense cell failing the condition) the fill
    /// value. `packed`: validity as bits.
    pub(super) fn materialize(
        &self,
        slot: usize,
        parts: &[(Slab, usize, u64)],
        keep: Option<&[bool]>,
        packed: bool,
        mut out: FieldBuffer,
    ) -> Result<FieldBuffer> {
        let f = (self.fields.get(slot))
            .ok_or_else(|| QueryError::invalid(format!("no field in slot {slot}")))?;
        let cells = (parts.iter())
            .map(|p| p.0.len as usize)
            .fold(0usize, usize::saturating_add);
        if let (Some(v), true) = (&mut out.validity, packed) {
            *v = Validity::Bits(Bitmap::with_capacity(cells));
        }
        let dense_dim = match f.kind {
            Kind::Dim(d) if self.snapshot.schema().array_type == ArrayType::Dense => Some(d),
            _ => None,
        };
        if let Some(d) = dense_dim {
            // Dense coordinates come from the slabs, not from tiles.
            out.data.reserve_exact(cells.saturating_mul(f.cell_size()));
            for &(slab, k, off) in parts {
                let first = self.results.first_coords(k).get(d).copied().unwrap_or(0);
                let start = match self.results.step_dim == d {
                    true => first.saturating_add(i128::from(off)),
                    false => first,
                };
                let step = i128::from(self.results.step_dim == d);
                for j in 0..i128::from(slab.len) {
                    push_int(
                        f.datatype,
                        start.saturating_add(j.saturating_mul(step)),
                        &mut out.data,
                    );
                }
            }
            return Ok(out);
        }
        if f.is_var() {
            if let Some(o) = &mut out.offsets {
                // One more than the cells: Arrow's offsets end with the
                // data's length, so tdb-arrow appends it without a copy.
                o.reserve_exact(cells.saturating_add(1));
            }
            if let Some(v) = &mut out.validity {
                v.reserve(cells);
            }
            let picks = &self.results.picks;
            self.for_each_run(slot, f, parts, keep, |source, slab| match source {
                Some(col) => {
                    for i in slab.cells(picks) {
                        out.push(col.cell(i), !col.is_null(i));
                    }
                }
                None => {
                    for _ in 0..slab.len {
                        out.push(&f.fill, f.fill_validity != 0);
                    }
                }
            });
            return Ok(out);
        }
        // Fixed-size cells: every run's bytes have a known place, so the
        // buffer is sized once and each run is copied into its slice.
        let size = f.cell_size();
        let bytes = cells
            .checked_mul(size)
            .ok_or_else(|| QueryError::invalid(format!("{}: a batch past memory", f.name)))?;
        out.data = zeroed(std::mem::take(&mut out.data), bytes);
        let fill = Fill {
            bytes: &f.fill,
            valid: f.fill_validity,
            picks: &self.results.picks,
        };
        // Bytes of validity are cut like the data; bits are packed here,
        // run after run, as they do not split at cell boundaries.
        let (mut validity, mut bits) = match &mut out.validity {
            Some(Validity::Bytes(v)) => {
                *v = zeroed(std::mem::take(v), cells);
                (Some(v.as_mut_slice()), None)
            }
            Some(Validity::Bits(b)) => (None, Some(b)),
            None => (None, None),
        };
        let mut data = out.data.as_mut_slice();
        // Long runs (dense slabs) are gathered and copied on every core;
        // short ones (sparse cells) straight away.
        let per_run = bytes.checked_div(parts.len()).unwrap_or(bytes);
        let shared = bytes >= PARALLEL_COPY && per_run >= PARALLEL_RUN;
        let mut jobs: Vec<CopyJob<'_, '_>> = match shared {
            true => {
                let kept = self.copy_jobs.lock().map(|mut v| std::mem::take(&mut *v));
                let mut jobs = relend(kept.unwrap_or_default());
                jobs.reserve(parts.len());
                jobs
            }
            false => Vec::new(),
        };
        // The buffers are sized to the runs: none comes up short.
        let mut short = false;
        self.for_each_run(slot, f, parts, keep, |source, slab| {
            let n = slab.len as usize;
            let Some((d, rest)) =
                std::mem::take(&mut data).split_at_mut_checked(n.saturating_mul(size))
            else {
                short = true;
                return;
            };
            data = rest;
            if let Some(b) = &mut bits {
                pack_run(b, source, slab, fill);
            }
            let v = match validity.take().map(|v| v.split_at_mut_checked(n)) {
                Some(Some((a, b))) => {
                    validity = Some(b);
                    Some(a)
                }
                Some(None) => {
                    short = true;
                    return;
                }
                None => None,
            };
            if shared {
                jobs.push((d, v, source, slab));
            } else {
                copy_run((d, v, source, slab), size, fill);
            }
        });
        if short {
            return Err(QueryError::invalid(format!(
                "{}: a batch shorter than its cells",
                f.name
            )));
        }
        crate::pool::for_each_share(
            &mut jobs,
            crate::threads(),
            |job| job.0.len(),
            |job| copy_run(reborrow(job), size, fill),
        )?;
        if shared {
            if let Ok(mut kept) = self.copy_jobs.lock() {
                *kept = relend(jobs);
            }
        }
        Ok(out)
    }
}

/// A tile's column and the cell it starts at, if the tile is held.
type Held<'t> = Option<(Column<'t>, u64)>;

/// Tiles [`Reader::for_each_run`] keeps at hand (by fragment and tile, a
/// slot each by their numbers): as many as a row of tiles a dense read
/// crosses line after line (W2 4096²: 16; with 8 slots, tiles 8 apart
/// took turns in one and every slab of a line looked its tile up in the
/// map).
const RECENT_TILES: usize = 64;

/// A field's fill value and fill validity, and the cells listed slabs
/// take (what a run's copy needs besides its slices).
#[derive(Clone, Copy)]
struct Fill<'a> {
    bytes: &'a [u8],
    valid: u8,
    picks: &'a [u32],
}

/// Where one run of fixed-size cells goes (data and validity slices of the
/// batch), where it comes from (none: fill), and which cells.
pub(super) type CopyJob<'o, 't> = (&'o mut [u8], Option<&'o mut [u8]>, Option<Column<'t>>, Slab);

/// `jobs`' allocation, emptied, for jobs of other lifetimes: the standard
/// library collects a vector's own iterator in place where the element
/// layouts agree, as they do here (`copy_jobs_keep_their_allocation`; were
/// it not to, a new allocation is all it costs).
pub(super) fn relend<'a, 'b, 'c, 'd>(jobs: Vec<CopyJob<'a, 'b>>) -> Vec<CopyJob<'c, 'd>> {
    jobs.into_iter().map_while(|_| None).collect()
}

/// A job's slices lent for one copy (shares hand out their jobs by
/// reference).
fn reborrow<'a>(job: &'a mut CopyJob<'_, '_>) -> CopyJob<'a, 'a> {
    (&mut *job.0, job.1.as_deref_mut(), job.2, job.3)
}

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
    let end = first.saturating_add(len);
    // Adjacent cells: their bytes in the tile, whole.
    let whole = source.filter(|_| slab.stride == 1).and_then(|col| {
        let src = col
            .fixed
            .get(first.checked_mul(size)?..end.checked_mul(size)?)?;
        (src.len() == data.len()).then_some((col, src))
    });
    match (source, whole) {
        (Some(col), None) if slab.is_listed() && col.validity.is_none() => {
            gather(data, col.fixed, slab.listed(fill.picks), size);
            if let Some(v) = validity {
                v.fill(1);
            }
        }
        (_, Some((col, src))) => {
            data.copy_from_slice(src);
            if let Some(v) = validity {
                match (col.validity.and_then(|valid| valid.as_bytes()))
                    .and_then(|valid| valid.get(first..end))
                {
                    Some(valid) if valid.len() == v.len() => v.copy_from_slice(valid),
                    _ => v.fill(1),
                }
            }
        }
        (Some(col), None) => {
            for (cell, i) in data.chunks_exact_mut(size).zip(slab.cells(fill.picks)) {
                let bytes = col.cell(i);
                if bytes.len() == size {
                    cell.copy_from_slice(bytes);
                }
            }
            if let Some(v) = validity {
                for (b, i) in v.iter_mut().zip(slab.cells(fill.picks)) {
                    *b = u8::from(!col.is_null(i));
                }
            }
        }
        (None, None) => {
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

/// Copies the `size`-byte cells `picks` of `fixed` into `data`. The
/// common sizes are passed as constants, so each cell is one fixed-size
/// copy (a call to `memcpy` each cost more than the copy).
fn gather(data: &mut [u8], fixed: &[u8], picks: &[u32], size: usize) {
    #[inline(always)]
    fn cells(data: &mut [u8], fixed: &[u8], picks: &[u32], size: usize) {
        for (out, &i) in data.chunks_exact_mut(size.max(1)).zip(picks) {
            let at = (i as usize).saturating_mul(size);
            if let Some(cell) = fixed.get(at..at.saturating_add(size)) {
                out.copy_from_slice(cell);
            }
        }
    }
    match size {
        1 => cells(data, fixed, picks, 1),
        2 => cells(data, fixed, picks, 2),
        4 => cells(data, fixed, picks, 4),
        8 => cells(data, fixed, picks, 8),
        16 => cells(data, fixed, picks, 16),
        _ => cells(data, fixed, picks, size),
    }
}

/// Appends one run's validity as bits: whole byte ranges where the cells
/// are adjacent in their tile, else cell by cell; fill where there is no
/// source.
fn pack_run(bits: &mut Bitmap, source: Option<Column<'_>>, slab: Slab, fill: Fill<'_>) {
    let (first, len) = (slab.cell as usize, slab.len as usize);
    let Some(col) = source else {
        bits.push_n(fill.valid != 0, len);
        return;
    };
    let adjacent = (col.validity.and_then(|v| v.as_bytes()))
        .filter(|_| slab.stride == 1)
        .and_then(|v| v.get(first..first.checked_add(len)?));
    match (col.validity, adjacent) {
        (_, Some(valid)) => bits.extend_from_bytes(valid),
        (None, _) => bits.push_n(true, len),
        (Some(_), None) => {
            for i in slab.cells(fill.picks) {
                bits.push(!col.is_null(i));
            }
        }
    }
}

/// `len` zero bytes in `buf`'s allocation where it holds them (a recycled
/// buffer: its pages are the process's already), else a new zeroed
/// allocation (`vec!`: zeroed pages straight from the kernel, no pass of
/// zeroes over them, which growing an empty buffer would make).
pub(super) fn zeroed(mut buf: Vec<u8>, len: usize) -> Vec<u8> {
    if buf.capacity() < len {
        return vec![0; len];
    }
    buf.clear();
    buf.resize(len, 0);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ValidityRef;
    use tdb_format::Datatype;

    /// A batch's copy jobs go to the next batch in the same allocation
    /// (`relend`), whatever buffer they borrowed.
    #[test]
    fn copy_jobs_keep_their_allocation() {
        let mut first = [0u8; 64];
        let mut jobs: Vec<CopyJob<'_, '_>> = Vec::with_capacity(1000);
        jobs.extend(first.chunks_mut(8).map(|d| (d, None, None, Slab::fill(2))));
        let at = jobs.as_ptr() as usize;
        let kept: Vec<CopyJob<'static, 'static>> = relend(jobs);
        assert!(kept.is_empty());
        assert_eq!((kept.as_ptr() as usize, kept.capacity()), (at, 1000));
        let mut second = [0u8; 16];
        let mut jobs: Vec<CopyJob<'_, '_>> = relend(kept);
        jobs.push((&mut second, None, None, Slab::fill(4)));
        assert_eq!((jobs.as_ptr() as usize, jobs.len()), (at, 1));
    }

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
            validity: Some(ValidityRef::Bytes(&validity)),
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
            picks: &[],
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
                    &mut jobs,
                    2,
                    |job| job.0.len(),
                    |job| copy_run(reborrow(job), 4, fill),
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
        // Packed as bits, run by run, the validity is the same.
        let mut bits = Bitmap::default();
        for &(source, s) in &runs {
            pack_run(&mut bits, source, s, fill);
        }
        assert_eq!(Validity::Bits(bits), Validity::Bytes(serial.1));
    }
}
