//! Blocks: a dense tile past the budget, read across its cell order in a
//! read that spills (`super::dense_runs`), in pieces that each hold a box
//! of it rather than a run of its cells.
//!
//! Across the order a result line takes one cell from each tile line, so
//! a piece of part of one tile line is a stretch a cell, and the merge
//! takes a million of them apart one by one (`dense_large_tiles`
//! col-major under 16 KiB: 4.3 times the unbudgeted read). A block is a
//! band of tile lines (as many as lie together in one chunk of every part
//! read: [`Reader::block_band`]) by a range of the other dimensions sized
//! by the budget, so each of its result lines is a stretch of the band's
//! cells, and the band's later blocks continue the same run of places. A
//! block's cells are fetched as runs, one a line ([`Block::runs`]), and
//! held one after another ([`super::tiles::TileFetch::packed`]): its
//! stretches' positions are places in that packing ([`Block::cells_in`]).
//! The band's chunks are decoded once and kept between its blocks
//! ([`super::chunk_cache`]).

use super::pieces::{Cut, Piece};
use super::Reader;
use std::ops::Range;
use tdb_index::dense::TileCells;

/// A box of one dense tile's cells: its corners, inclusive, in tile
/// coordinates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Block {
    pub lo: Vec<i128>,
    pub hi: Vec<i128>,
}

impl Block {
    /// Its cells.
    pub fn cells(&self) -> u64 {
        (self.lo.iter().zip(&self.hi))
            .map(|(l, h)| u64::try_from(h.saturating_sub(*l).saturating_add(1)).unwrap_or(0))
            .fold(1u64, u64::saturating_mul)
    }

    /// Positions in tile `tc` from its first cell to one past its last.
    pub fn span(&self, tc: &TileCells) -> Option<Range<u64>> {
        Some(tc.position(&self.lo)?..tc.position(&self.hi)?.checked_add(1)?)
    }

    /// Its runs of consecutive positions in tile `tc`, in order, as
    /// half-open `(start, end)` (what its piece fetches and holds).
    pub fn runs(&self, tc: &TileCells) -> Option<Vec<(u64, u64)>> {
        let (&fastest, slower) = tc.order().split_first()?;
        let len = (self.hi.get(fastest)?.checked_sub(*self.lo.get(fastest)?))
            .and_then(|d| u64::try_from(d.checked_add(1)?).ok())?;
        let mut at = self.lo.clone();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        loop {
            let start = tc.position(&at)?;
            let end = start.checked_add(len)?;
            match runs.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => runs.push((start, end)),
            }
            // The odometer over the slower dimensions.
            let mut stepped = false;
            for &d in slower {
                let v = at.get_mut(d)?;
                if *v < *self.hi.get(d)? {
                    *v = v.checked_add(1)?;
                    stepped = true;
                    break;
                }
                *v = *self.lo.get(d)?;
            }
            if !stepped {
                return Some(runs);
            }
        }
    }

    /// Its cells as a tile of their own (see [`TileCells::sub_box`]):
    /// positions there are places in the packing its piece holds.
    pub fn cells_in(&self, tc: &TileCells) -> Option<TileCells> {
        tc.sub_box(&self.lo, &self.hi)
    }

    /// In two along dimension `d` before value `at`.
    fn halves(&self, d: usize, at: i128) -> Option<(Block, Block)> {
        let (mut a, mut b) = (self.clone(), self.clone());
        *a.hi.get_mut(d)? = at.checked_sub(1)?;
        *b.lo.get_mut(d)? = at;
        Some((a, b))
    }
}

/// The greatest common divisor.
fn gcd(a: u64, b: u64) -> u64 {
    match a.checked_rem(b) {
        Some(r) => gcd(b, r),
        None => a,
    }
}

impl Reader {
    /// Tile lines a block of tile `t` of fragment `i` spans at most: the
    /// lines that lie together in one chunk of every part read (the
    /// greatest common divisor of each part's lines a chunk), where pieces
    /// of it go in blocks. A line is the cells of one value of the
    /// slowest dimension of the cell order, which is the fastest of the
    /// result's across it. `None` where they do not: a read along the cell
    /// order, or one that does not spill, or one whose null tests move; a
    /// var-size field (its data has no fixed chunks), chunks not holding
    /// whole lines, or of one line (a block of one line is a stretch a
    /// cell all the same).
    pub(super) fn block_band(&self, i: usize, t: u64) -> Option<u64> {
        let schema = self.snapshot.schema();
        let plan = self.plans.get(i)?;
        let across = match self.spec.layout {
            crate::ResultLayout::RowMajor => schema.cell_order == tdb_format::Layout::ColMajor,
            crate::ResultLayout::ColMajor => schema.cell_order == tdb_format::Layout::RowMajor,
            _ => false,
        };
        if self.spill.is_none() || !across || !plan.meta.footer.dense {
            return None;
        }
        // Null tests that read other cells of the tile than their own
        // (`super::null_checks`) need the tile's positions, which a
        // block's packing does not keep.
        if self.null_shift().is_some() {
            return None;
        }
        let tc = plan.grid()?.tile_cells(t)?;
        let slowest = *tc.order().last()?;
        let line = u64::try_from(tc.stride(slowest)?).ok()?;
        let parts = self.tile_parts(i, t);
        let mut band = 0u64;
        for chunk in parts.chunk_cells() {
            let chunk = chunk?;
            if chunk.checked_rem(line)? != 0 {
                return None;
            }
            band = gcd(band, chunk.checked_div(line)?);
        }
        (band > 1).then_some(band)
    }

    /// Piece `p` of tile `t` of fragment `i` in two blocks, where its
    /// pieces go in blocks ([`Reader::block_band`]); `Some(None)` where it
    /// is one cell. A box across a band's edge is cut at the band edge
    /// nearest its middle; one inside a band at the middle of the first
    /// dimension along which it holds more than one value, in the order
    /// the result goes through them from its slowest (so one band's
    /// blocks come out one after another in places), the band's lines
    /// last.
    pub(super) fn block_cut(&self, p: &Piece, i: usize, t: u64) -> Option<Option<Cut>> {
        let band = i128::from(self.block_band(i, t)?);
        let plan = self.plans.get(i)?;
        let tc = plan.grid()?.tile_cells(t)?;
        let block = match (p.block.as_deref(), &p.cells) {
            (Some(b), _) => b.clone(),
            // A run of cells cut otherwise: no box.
            (None, Some(_)) => return None,
            // The tile's cells in the subarray: a box, its corners the
            // span's ends.
            (None, None) => {
                let span = self.dense_span(i, t)?;
                if span.is_empty() {
                    return Some(None);
                }
                let n = tc.corner.len();
                let (mut lo, mut hi) = (vec![0i128; n], vec![0i128; n]);
                tc.coords(span.start, &mut lo)?;
                tc.coords(span.end.checked_sub(1)?, &mut hi)?;
                Block { lo, hi }
            }
        };
        let (&slowest, faster) = tc.order().split_last()?;
        let (lo, hi) = (*block.lo.get(slowest)?, *block.hi.get(slowest)?);
        let corner = *tc.corner.get(slowest)?;
        // The band edge at or below line `v` (lines past the corner).
        let edge = |v: i128| -> Option<i128> {
            let k = v.checked_sub(corner)?.checked_div(band)?;
            corner.checked_add(k.checked_mul(band)?)
        };
        // Band edges inside the box: the first past its low line, the
        // last at or below its high one.
        let first = edge(lo)?.checked_add(band)?;
        let last = edge(hi)?;
        let middle = |l: i128, h: i128| l.checked_add(h.checked_sub(l)?.checked_add(1)? / 2);
        let halves = if first <= last {
            let near = edge(middle(lo, hi)?.checked_add(band / 2)?)?;
            block.halves(slowest, near.clamp(first, last))?
        } else {
            let wide =
                (faster.iter().chain([&slowest])).find(|&&d| block.hi.get(d) > block.lo.get(d));
            let Some(&d) = wide else {
                return Some(None);
            };
            let (l, h) = (*block.lo.get(d)?, *block.hi.get(d)?);
            block.halves(d, middle(l, h)?)?
        };
        let piece = |b: Block| -> Option<Piece> {
            Some(Piece {
                run: Some(t..t.saturating_add(1)),
                cells: Some(b.span(&tc)?),
                block: Some(Box::new(b)),
                ..p.clone()
            })
        };
        Some(Some(Cut::Halves(piece(halves.0)?, piece(halves.1)?)))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::Block;
    use crate::read::spilled::Spilled;
    use crate::{Batch, ReadSpec, ReadStep, Reader, ResultLayout, Snapshot};
    use std::sync::Arc;
    use tdb_fragment::TimeWindow;
    use tdb_storage::ReadableStorage;

    /// What a read gives and how it went: each field's values and
    /// validity (batches joined), the pieces that held a block, the most
    /// runs the stretches held before their merge, whether it spilled.
    pub(in crate::read) struct Read {
        pub cells: Vec<Vec<u8>>,
        pub blocks: usize,
        pub runs: usize,
        pub spilled: bool,
    }

    /// A read of `spec`, stepped by hand.
    pub(in crate::read) fn read<S: ReadableStorage + ?Sized>(
        storage: &S,
        snap: &Arc<Snapshot>,
        spec: ReadSpec,
    ) -> Read {
        read_holding(storage, snap, spec, None)
    }

    /// [`read`], the stretches holding at most `held` runs as pieces push
    /// theirs.
    fn read_holding<S: ReadableStorage + ?Sized>(
        storage: &S,
        snap: &Arc<Snapshot>,
        spec: ReadSpec,
        held: Option<usize>,
    ) -> Read {
        let mut reader = Reader::new(Arc::clone(snap), spec).unwrap();
        let (mut out, mut blocks, mut runs) = (Vec::<Vec<u8>>::new(), 0, 0);
        let mut spilled = false;
        let mut last = u64::MAX;
        loop {
            if reader.pieces_started != last {
                last = reader.pieces_started;
                blocks += usize::from(reader.current.block.is_some());
            }
            spilled |= reader.spill.is_some();
            if let Some(Spilled::Stretches(st)) = &mut reader.spill {
                runs = runs.max(st.runs());
                if let Some(n) = held {
                    st.hold_at_most(n);
                }
            }
            match reader.step().unwrap() {
                ReadStep::Need(r) => {
                    let got = storage.read_ranges(&r).unwrap();
                    reader.push(r.into_iter().zip(got)).unwrap();
                }
                ReadStep::Decode(work) => reader.push_decoded(work.run().unwrap()).unwrap(),
                ReadStep::Batch(Batch { fields, .. }) => {
                    // Per field its values, then its validity.
                    out.resize(fields.len() * 2, Vec::new());
                    for (o, f) in out.chunks_mut(2).zip(fields) {
                        o[0].extend_from_slice(&f.data);
                        if let Some(v) = &f.validity {
                            o[1].extend(v.iter().map(u8::from));
                        }
                    }
                }
                ReadStep::Done => {
                    return Read {
                        cells: out,
                        blocks,
                        runs,
                        spilled,
                    }
                }
            }
        }
    }

    /// TileDB's `dense_large_tiles` (two 512 × 1024 tiles, row-major
    /// cells; `a`'s chunks hold 16 lines, `f`'s 8, its validity's 64) read
    /// col-major under 16 and 64 KiB: its pieces hold blocks of bands of 8
    /// lines, each band one run (141 runs, of both fragments, where pieces
    /// of part of a line made 1,124), and the cells are the unbudgeted
    /// read's. Row-major, its
    /// pieces go along the order and hold no block.
    #[test]
    fn a_large_tile_read_across_its_order_goes_in_blocks_of_a_band() {
        let dir = tdb_testdata::root().join("dense_large_tiles").join("array");
        let storage = tdb_storage::LocalStorage::new(&dir);
        let snap = Arc::new(Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap());
        let spec = ReadSpec::new(["a", "f"]).with_layout(ResultLayout::ColMajor);
        let Read {
            cells: want,
            blocks,
            ..
        } = read(&storage, &snap, spec.clone());
        assert_eq!(blocks, 0);
        assert_eq!(want.first().map(Vec::len), Some(4 << 20));
        for budget in [16 << 10, 64 << 10] {
            let Read {
                cells: got,
                blocks,
                runs,
                ..
            } = read(&storage, &snap, spec.clone().with_budget(budget));
            assert!(got == want, "cells under {budget}");
            assert!(blocks >= 128, "{blocks} blocks under {budget}");
            // 128 bands of the first fragment, 13 of the second's lines
            // 700-799 (bands start every 8 lines from its tile's 512).
            assert!((128..=141).contains(&runs), "{runs} runs under {budget}");
        }
        let row = (spec.clone())
            .with_layout(ResultLayout::RowMajor)
            .with_budget(16 << 10);
        assert_eq!(read(&storage, &snap, row).blocks, 0);

        // Runs held at most 16 as the pieces push theirs: the bands' runs
        // are merged as they come, level by level, and give the same cells.
        let Read {
            cells: got, runs, ..
        } = read_holding(&storage, &snap, spec.with_budget(16 << 10), Some(16));
        assert!(got == want, "cells with 16 runs held");
        // (A level merges once it has 16 runs: two levels of 15 stay.)
        assert!(runs <= 2 * 15 + 3, "{runs} runs held");
    }

    /// TileDB's `dense_large_tiles_3d` (64 × 32 × 128 tiles in col-major
    /// cells over a domain whose second x tile is partly outside it: lines
    /// of 64 x cells; `a`'s chunks hold 256 lines, 8 planes of z, `f`'s
    /// 128) read row-major, across its order, under 16 and 64 KiB: pieces
    /// hold blocks, and the cells are the unbudgeted read's, over the
    /// whole domain and over a box across the second fragment and a y
    /// tile edge. Col-major, along the order, no piece holds a block.
    #[test]
    fn a_three_dimensional_tiledb_tile_read_across_its_order_goes_in_blocks() {
        use crate::Subarray;
        use tdb_schema::Range;
        let dir = tdb_testdata::root()
            .join("dense_large_tiles_3d")
            .join("array");
        let storage = tdb_storage::LocalStorage::new(&dir);
        let snap = Arc::new(Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap());
        let range =
            |lo: i64, hi: i64| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
        let mut across = Subarray::new(3);
        across
            .add_range(0, range(5, 70))
            .add_range(1, range(15, 45))
            .add_range(2, range(50, 90));
        let whole = ReadSpec::new(["a", "f"]).with_layout(ResultLayout::RowMajor);
        let part = ReadSpec::new(["a", "f", "y"])
            .with_subarray(across)
            .with_layout(ResultLayout::RowMajor);
        for (spec, cells) in [(whole, 100 * 64 * 128), (part, 66 * 31 * 41)] {
            let Read {
                cells: want,
                blocks,
                ..
            } = read(&storage, &snap, spec.clone());
            assert_eq!(blocks, 0);
            assert_eq!(want.first().map(Vec::len), Some(cells * 4));
            for budget in [16 << 10, 64 << 10] {
                let Read {
                    cells: got, blocks, ..
                } = read(&storage, &snap, spec.clone().with_budget(budget));
                assert!(got == want, "{cells} cells under {budget}");
                assert!(blocks > 0, "no block for {cells} cells under {budget}");
            }
        }
        let along = ReadSpec::new(["a", "f"])
            .with_layout(ResultLayout::ColMajor)
            .with_budget(16 << 10);
        assert_eq!(read(&storage, &snap, along).blocks, 0);
    }

    use tdb_format::{ArrayType, Datatype, Layout};
    use tdb_index::dense::FragmentGrid;
    use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder, Range};

    /// Boxes that start and end inside bands and lines: a domain that is
    /// no multiple of its tiles (edge tiles past it), fragments over parts
    /// of it, subarrays off every edge, a single line and a single column,
    /// read col-major under 4 and 16 KiB: the unbudgeted read's cells.
    #[test]
    fn blocks_off_every_edge_give_the_unbudgeted_cells() {
        use crate::{FieldBuffer, Subarray, WriteSpec};
        use tdb_format::{ArrayType, Datatype};
        use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder, Range};
        // Tiles of 64 lines of 512 cells; `a`'s chunks 32 lines, `b`'s 16.
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dimension(DimensionBuilder::range("r", 3i64..=150).tile_extent(64i64))
            .dimension(DimensionBuilder::range("c", -5i64..=1000).tile_extent(512i64))
            .attribute(AttributeBuilder::new("a", Datatype::Int32))
            .attribute(AttributeBuilder::new("b", Datatype::Float64).nullable(true))
            .build()
            .unwrap();
        let storage = tdb_storage::MemoryStorage::new();
        let entry = tdb_fragment::create_array(&storage, "arr", &schema, &[], None, 1).unwrap();
        let range =
            |lo: i64, hi: i64| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
        let box_of = |r: (i64, i64), c: (i64, i64)| {
            let mut s = Subarray::new(2);
            s.add_range(0, range(r.0, r.1))
                .add_range(1, range(c.0, c.1));
            s
        };
        for (t, (r, c)) in [((3, 150), (-5, 1000)), ((40, 99), (100, 700))]
            .into_iter()
            .enumerate()
        {
            let cells = ((r.1 - r.0 + 1) * (c.1 - c.0 + 1)) as u64;
            let mut a = FieldBuffer::new("a", Datatype::Int32, 1, false);
            let mut b = FieldBuffer::new("b", Datatype::Float64, 1, true);
            for k in 0..cells {
                let v = k.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(t as u64);
                a.push(&(v as i32).to_le_bytes(), true);
                b.push(&((v >> 11) as f64).to_le_bytes(), v % 5 != 0);
            }
            let spec = WriteSpec::new(vec![a, b])
                .with_subarray(box_of(r, c))
                .at(t as u64 + 2);
            crate::write_fragment(&storage, "arr", &entry, None, &spec).unwrap();
        }
        let snap = Arc::new(Snapshot::load(&storage, "arr", TimeWindow::ALL, None).unwrap());
        let mut used = 0;
        for (r, c) in [
            ((3, 150), (-5, 1000)),
            ((10, 140), (3, 990)),
            ((70, 70), (-5, 1000)),
            ((3, 150), (600, 600)),
            ((60, 69), (505, 520)),
        ] {
            let spec = ReadSpec::new(["a", "b", "r"])
                .with_subarray(box_of(r, c))
                .with_layout(ResultLayout::ColMajor);
            let want = read(&storage, &snap, spec.clone()).cells;
            for budget in [4 << 10, 16 << 10] {
                let Read {
                    cells: got, blocks, ..
                } = read(&storage, &snap, spec.clone().with_budget(budget));
                assert!(got == want, "cells of {r:?} x {c:?} under {budget}");
                used += blocks;
            }
        }
        assert!(used > 0, "no block");
    }

    /// Over three dimensions in col-major cells (lines of 128 cells: x by
    /// y; chunks of 64, 128 and 256 of them), two fragments, ranges with
    /// gaps and a condition, row-major reads (across the order) under 4,
    /// 16 and 64 KiB go in blocks and give the unbudgeted read's cells.
    #[test]
    fn blocks_over_three_dimensions_give_the_unbudgeted_cells() {
        use crate::{FieldBuffer, Subarray, WriteSpec};
        use tdb_format::{ArrayType, Datatype, Layout};
        use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder, Range};
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dimension(DimensionBuilder::range("x", 0i32..=15).tile_extent(8))
            .dimension(DimensionBuilder::range("y", 0i32..=15).tile_extent(16))
            .dimension(DimensionBuilder::range("z", 0i32..=255).tile_extent(256))
            .cell_order(Layout::ColMajor)
            .attribute(AttributeBuilder::new("a", Datatype::Int32).nullable(true))
            .attribute(AttributeBuilder::new("b", Datatype::Int64))
            .build()
            .unwrap();
        let storage = tdb_storage::MemoryStorage::new();
        let entry = tdb_fragment::create_array(&storage, "arr", &schema, &[], None, 1).unwrap();
        let range =
            |lo: i32, hi: i32| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
        let write = |sub: [(i32, i32); 3], seed: u32, t: u64| {
            let cells: u32 = sub.iter().map(|(l, h)| (h - l + 1) as u32).product();
            let mut a = FieldBuffer::new("a", Datatype::Int32, 1, true);
            let mut b = FieldBuffer::new("b", Datatype::Int64, 1, false);
            for c in 0..cells {
                let v = c.wrapping_mul(2_654_435_761).wrapping_add(seed);
                a.push(&(v as i32).to_le_bytes(), v % 7 != 0);
                b.push(&i64::from(v >> 3).to_le_bytes(), true);
            }
            let mut s = Subarray::new(3);
            for (d, (l, h)) in sub.into_iter().enumerate() {
                s.add_range(d, range(l, h));
            }
            let spec = WriteSpec::new(vec![a, b]).with_subarray(s).at(t);
            crate::write_fragment(&storage, "arr", &entry, None, &spec).unwrap();
        };
        write([(0, 15), (0, 15), (0, 255)], 1, 2);
        write([(3, 12), (2, 9), (100, 180)], 99, 3);
        let snap = Arc::new(Snapshot::load(&storage, "arr", TimeWindow::ALL, None).unwrap());
        let mut sub = Subarray::new(3);
        sub.add_range(0, range(1, 6)).add_range(0, range(9, 14));
        sub.add_range(1, range(0, 15));
        sub.add_range(2, range(5, 200))
            .add_range(2, range(220, 250));
        for condition in [None, Some("a > 0 and b < 200000000")] {
            let mut spec = ReadSpec::new(["a", "b", "z"])
                .with_subarray(sub.clone())
                .with_layout(ResultLayout::RowMajor);
            if let Some(c) = condition {
                spec = spec.with_condition(c);
            }
            let want = read(&storage, &snap, spec.clone()).cells;
            assert_eq!(want.first().map(Vec::len), Some(4 * 12 * 16 * 227));
            for budget in [4 << 10, 16 << 10, 64 << 10] {
                let Read {
                    cells: got, blocks, ..
                } = read(&storage, &snap, spec.clone().with_budget(budget));
                assert!(got == want, "cells under {budget}, {condition:?}");
                assert!(blocks > 0, "no block under {budget}, {condition:?}");
            }
        }
    }

    /// A block's runs are its cells' positions in the tile, run by run,
    /// and its own tile's positions number them one after another in the
    /// same order: in both cell orders, over three dimensions.
    #[test]
    fn a_blocks_runs_and_packing_follow_the_tiles_cell_order() {
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dimension(DimensionBuilder::range("x", 0i32..=7).tile_extent(4))
            .dimension(DimensionBuilder::range("y", 0i32..=5).tile_extent(6))
            .dimension(DimensionBuilder::range("z", 0i32..=9).tile_extent(5))
            .attribute(AttributeBuilder::new("a", Datatype::Int32))
            .build()
            .unwrap();
        let range =
            |lo: i32, hi: i32| Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false);
        let ned = vec![range(0, 7), range(0, 5), range(0, 9)];
        for order in [Layout::RowMajor, Layout::ColMajor] {
            let grid = FragmentGrid::new(&schema.domain, Layout::RowMajor, order, &ned).unwrap();
            // Tile 3: x 4..=7, y 0..=5, z 5..=9.
            let tc = grid.tile_cells(3).unwrap();
            for (lo, hi) in [
                ([5, 1, 6], [6, 4, 8]),
                ([4, 0, 5], [7, 5, 9]),
                ([4, 2, 5], [7, 2, 9]),
                ([7, 5, 9], [7, 5, 9]),
            ] {
                let block = Block {
                    lo: lo.to_vec(),
                    hi: hi.to_vec(),
                };
                let mut want = Vec::new();
                let mut at = [0i128; 3];
                for pos in 0..120u64 {
                    tc.coords(pos, &mut at).unwrap();
                    if (0..3).all(|d| lo[d] <= at[d] && at[d] <= hi[d]) {
                        want.push(pos);
                    }
                }
                let got: Vec<u64> = (block.runs(&tc).unwrap().into_iter())
                    .flat_map(|(a, b)| a..b)
                    .collect();
                let what = format!("{order:?} {lo:?}..={hi:?}");
                assert_eq!(got, want, "{what}");
                assert_eq!(block.cells(), want.len() as u64, "{what}");
                let span = block.span(&tc).unwrap();
                assert_eq!((span.start, span.end - 1), (want[0], *want.last().unwrap()));
                let packed = block.cells_in(&tc).unwrap();
                for (k, &pos) in want.iter().enumerate() {
                    tc.coords(pos, &mut at).unwrap();
                    assert_eq!(packed.position(&at), Some(k as u64), "{what}");
                }
            }
        }
    }
}
