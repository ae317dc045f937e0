//! Pieces: the subarray cut in result order until each piece's tiles fit
//! the tile budget (and, below it, the size reads aim at), and each piece
//! planned (its dense result cells, the tiles of every fragment it needs,
//! the fetches for them) without changing the reader, so the next can be
//! planned and fetched while one is read.

use super::dense::{self, DenseFrag, Results};
use super::dense_blocks::Block;
use super::fields::{FragField, Kind};
use super::null_checks::with_reach_back;
use super::plan::{self, FragPlan};
use super::tiles::{self, Coalesced, Fetching, TileFetch, TileKey};
use super::{aggregate, partition, sparse, Phase, Reader};
use crate::{QueryError, Result, ResultLayout, Subarray};
use tdb_format::{ArrayType, DataPart, Layout};
use tdb_index::dense::int_range;
use tdb_storage::RangeRequest;

/// A piece planned: everything [`Reader::plan_piece`] works out, which
/// [`Reader::install`] makes the reader's state.
pub(super) struct PlannedPiece {
    piece: Piece,
    /// Dense result cells.
    results: Results,
    /// Per fragment plan, the tiles the piece reads.
    tiles: Vec<Vec<u64>>,
    /// Tiles aggregates answer from metadata instead.
    md_answered: Vec<(usize, u64)>,
    fetches: Vec<TileFetch>,
    /// Decoded sparse tiles the reader held when the piece was planned and
    /// the piece reads too: kept from the piece before, not fetched again
    /// (a read under a small budget cuts the subarray into many pieces,
    /// which tiles spanning them would otherwise cost each time).
    carried: Vec<TileKey>,
}

/// A piece of a read: part of the subarray and, in a Hilbert global-order
/// read of one fragment, a run of that fragment's tiles (stored in that
/// order, so consecutive runs come out in it, which no subarray cut does).
/// Cut along the dimension of TileDB's string-parts rule, it owns a share
/// of that dimension's values (see [`sparse::Share`]). A read that spills
/// (see `spill`) reads runs of one fragment's tiles (`frag`) at a time, or
/// of one tile larger than the budget, a run of its `cells`.
#[derive(Debug, Clone, Default)]
pub(super) struct Piece {
    pub sub: Subarray,
    pub run: Option<std::ops::Range<u64>>,
    pub frag: Option<usize>,
    /// The fragments an unordered read of an array with duplicates reads
    /// here (their cells need not meet: [`Reader::run_cut`]).
    pub frags: Option<std::ops::Range<u32>>,
    pub cells: Option<std::ops::Range<u64>>,
    /// Of a dense tile read across its cell order, the box of it the
    /// piece holds (`cells` then spans it): see `super::dense_blocks`.
    pub block: Option<Box<Block>>,
    pub share: Option<sparse::Share>,
    /// One cell of a tile sorted along a dimension the subarray bounds
    /// ([`Reader::sorted_dim`]), of which only that dimension is read: its
    /// value there says which of the runs beside it (the next two pieces;
    /// the one above holds the cell) can hold results at all.
    pub probe: bool,
    /// Of a run of such a tile's cells: whether cells below, and above,
    /// the subarray's range on that dimension may lie in it (`None`: as
    /// the tile's MBR says).
    pub edges: Option<(bool, bool)>,
}

/// How [`Reader::cut`] cuts a piece. (A cut is made and taken apart at
/// once, never kept: a probe's third piece is not worth a box.)
#[allow(clippy::large_enum_variant)]
pub(super) enum Cut {
    /// In two halves.
    Halves(Piece, Piece),
    /// A run of a sorted tile's cells in two at its middle cell, whose
    /// value on the sorted dimension is read first (`probe`): it may show
    /// a half to hold no result (see [`Reader::after_probe`]).
    Probe {
        below: Piece,
        probe: Piece,
        above: Piece,
    },
}

impl Piece {
    /// The tiles of sparse fragment `plan` this piece reads: those it
    /// overlaps, or with a share of the parts dimension, those overlapping
    /// the query's ranges there (`query`) that hold values of its share.
    pub(super) fn tiles(
        &self,
        i: usize,
        plan: &FragPlan,
        ops: &[tdb_index::RangeOps],
        query: &Subarray,
    ) -> Vec<u64> {
        if self.frag.is_some_and(|f| f != i)
            || (self.frags.as_ref())
                .is_some_and(|r| !u32::try_from(i).is_ok_and(|i| r.contains(&i)))
        {
            return Vec::new();
        }
        let mut tiles = match &self.share {
            // (A read that spills dense tiles: those the piece touches.)
            None if plan.meta.footer.dense => match plan.dense_tiles(&self.sub) {
                Some(tiles) => tiles.collect(),
                None => (0..plan.tile_num()).collect(),
            },
            None => match &self.run {
                Some(run) => return plan.tiles_overlapping_in(ops, &self.sub, run),
                None => plan.tiles_overlapping(ops, &self.sub),
            },
            Some(share) => {
                let mut sub = self.sub.clone();
                sub.set_ranges(share.dim, query.ranges(share.dim).to_vec());
                let o = ops.get(share.dim);
                let mut tiles = plan.tiles_overlapping(ops, &sub);
                tiles.retain(|&t| {
                    let mbr = plan.leaves().get(t as usize);
                    match (o, mbr.and_then(|m| m.get(share.dim))) {
                        (Some(o), Some(r)) => {
                            let (lo, hi) = r.bounds();
                            share.meets(o, lo, hi)
                        }
                        _ => true,
                    }
                });
                tiles
            }
        };
        if let Some(run) = &self.run {
            tiles.retain(|t| run.contains(t));
        }
        tiles
    }
}

/// Cuts of a read that separate no tile, at most (see
/// [`Reader::next_piece`]).
pub(super) const MAX_FRUITLESS_CUTS: u32 = 256;

impl Reader {
    /// The layout pieces are cut in: the read's, but the global order for
    /// a sparse unordered aggregation over several fragments without
    /// duplicates answering the tiles it keeps whole from their metadata
    /// (`md_kept`): TileDB's reader for it merges the fragments in the
    /// global order, and a tile pieces cut is whole where that merge takes
    /// it whole, which pieces that are intervals of the merge can tell
    /// ([`whole_tiles`](super::whole_tiles)); pieces cut row-major are not
    /// (a piece of a few rows of several space tiles).
    pub(super) fn cut_layout(&self) -> ResultLayout {
        let schema = self.snapshot.schema();
        match self.spec.layout {
            ResultLayout::Unordered
                if self.md_kept
                    && !schema.allows_dups
                    && super::whole_tiles::merges_fragments(&self.plans) =>
            {
                ResultLayout::GlobalOrder
            }
            layout => layout,
        }
    }

    /// The part of the budget that holds tiles, the rest one batch of
    /// results: half, unless the least a piece can hold needs more (see
    /// [`Reader::start_partitions`]). A read that spills in stretches
    /// makes no batch while its pieces are read (its merge makes them
    /// after, holding no tile): its pieces take the batch's share too, less
    /// the stretches' writer buffer (W1 4096² under 1 MiB: pieces of whole
    /// tiles, not halves, each walked and fetched once).
    pub(super) fn tile_budget(&self) -> u64 {
        match &self.spill {
            Some(super::spilled::Spilled::Stretches(st)) => {
                (self.tile_share.saturating_add(self.batch_share))
                    .saturating_sub(st.buffer() as u64)
                    .max(self.tile_share)
            }
            // Half of what the batch's share leaves idle while pieces
            // write runs; the rest stays for what a read holds outside its
            // budget (decoded chunks kept, chunks carried between
            // pieces), which a read filling its budget would otherwise
            // take past 1 MiB over it: `sparse_bounded_tiles` global
            // order under 1 MiB peaked at 2.09 MB with it all, 1.95 so,
            // 1.84 without (`budget_peak`).
            Some(super::spilled::Spilled::Records(spill)) => {
                let idle = self.batch_share.saturating_sub(spill.writing());
                self.tile_share.saturating_add(idle / 2)
            }
            _ => self.tile_share,
        }
    }

    /// The piece size reads aim at even when the budget allows more: a
    /// finished piece's pages go to the next one (its tile buffers through
    /// [`tiles::Spare`], fetch and result buffers through the allocator)
    /// instead of fresh pages faulted in, so the smaller the first piece,
    /// the fewer faults, until per-piece costs win (measured on W2's dense
    /// reads, tdb seconds: 4096² 0.30 in one piece, 0.055 in 32 MiB
    /// pieces, 0.042 in 8 MiB, 0.050 in 4 MiB; 1024² 0.012 in one piece,
    /// 0.0065 in 8 MiB). Pieces only shrink to it at space tile
    /// boundaries. A dense read reads no tile twice for it; a sparse one
    /// reads a data tile that straddles a cut once per piece, and still
    /// gains where it reads much (W3, 4M cells: whole 0.084 -> 0.045 s,
    /// condition 0.116 -> 0.09) and loses a little where it reads little
    /// (W3's 1% boxes 0.078 -> 0.087, W4's 10% range 0.018 -> 0.019).
    /// Sparse aggregates answered from tile metadata are not cut for it: a
    /// tile across a cut would be read instead of answered (W3's sum and
    /// count 0.0013 -> 0.0086 s).
    pub(super) const PIECE_TARGET: u64 = 8 << 20;

    /// The piece size reads from remote storage aim at (the budget's half
    /// still bounds it): there each piece costs a round trip of requests
    /// (milliseconds each), which outweighs the page faults a larger piece
    /// takes. W3's 4M cells from S3 through 10 ms of latency: 44 GETs and
    /// 0.35 s in pieces aimed at 64 MiB, 17 GETs at 128 MiB, 12 GETs and
    /// 0.12 s at 256 MiB (TileDB: 15, 0.26 s); W2 4096² then holds 167 MiB
    /// at its peak (TileDB 186 MiB). See docs/performance.md.
    pub(super) const REMOTE_PIECE_TARGET: u64 = 256 << 20;

    /// Aims pieces at sizes that suit remote storage (`remote`), where
    /// each batch of requests costs milliseconds, or local storage.
    /// [`super::SyncRead`] sets it from its storage.
    pub fn set_remote(&mut self, remote: bool) {
        self.remote = remote;
        self.prefetch.set_remote(remote);
    }

    /// The piece size aimed at below the tile budget: on remote storage
    /// at most half of it too, so that the next piece can be fetched while
    /// one is read ([`Reader::plan_ahead`]). The spec's aim, when given,
    /// wherever the storage.
    pub(super) fn piece_aim(&self) -> u64 {
        match self.spec.piece_aim {
            Some(aim) => aim.max(1),
            None => self.storage_aim(),
        }
    }

    /// The piece size the storage suits (see [`Reader::piece_aim`]).
    fn storage_aim(&self) -> u64 {
        if self.remote {
            Self::REMOTE_PIECE_TARGET.min(self.tile_budget() / 2)
        } else {
            self.halved_aim.unwrap_or(Self::PIECE_TARGET)
        }
    }

    /// Local dense reads of one piece past this many bytes go in two
    /// ([`Reader::halved_aim`]).
    pub(super) const HALVED_MIN: u64 = 2 << 20;

    /// Bytes tile `t` of fragment `i` holds while read: every field part
    /// fetched (filtered) and unfiltered.
    pub(super) fn tile_bytes(&self, i: usize, t: u64) -> u64 {
        self.tile_cost(i, t, None)
    }

    /// Dense tiles at least this large are sliced ([`tiles::TileFetch::sliced`]) when
    /// a piece uses half their cells or fewer (and always when they pass
    /// the tile budget): walking their chunk headers costs little beside
    /// the memory saved. On local storage a tile of two chunks or more:
    /// a header read costs microseconds, and a slice of a 256 KiB tile
    /// reads about half the bytes (W2's slices: 67 → 47 MB, 0.039 →
    /// 0.030 s). On remote storage the walk's window is most of the tile
    /// anyway, so only large tiles are.
    fn slice_min(&self) -> u64 {
        if self.remote {
            1 << 20
        } else {
            2 * Self::CHUNK
        }
    }

    /// A chunk's unfiltered bytes as TileDB's writer cuts them: a sliced
    /// part is charged two more (its cells' first and last chunks reach
    /// past them).
    const CHUNK: u64 = 64 << 10;

    /// What a piece must hold whatever its cells (`runs`: the read goes in
    /// runs of tiles, spilled or unordered): the largest tile held whole
    /// (and its fragment), where the tile's fields cannot be sliced; and
    /// where they can (dense, or sparse in a read that goes in runs of
    /// tiles), the chunks a piece of a few cells reaches (two of each
    /// part: its cells' first and last), in every dense fragment at once
    /// (a cell lies in all of them where they overlap; a spilled piece is
    /// one fragment's run). Counting one fragment's, a dense read over two
    /// fragments of 4 MiB tiles under 512 KiB cut its pieces to two cells:
    /// a million pieces, 11.8 s against 0.1.
    pub(super) fn piece_least(&self, runs: bool) -> ((u64, usize), u64) {
        let (mut whole, mut chunks, mut dense_chunks) = ((0u64, 0usize), 0u64, 0u64);
        for (i, plan) in self.plans.iter().enumerate() {
            let sliced = (plan.meta.footer.dense || runs) && Self::sliceable(plan);
            let span = sliced.then_some(2);
            let most = (self.reached_tiles(i))
                .map(|t| self.tile_cost(i, t, span))
                .max()
                .unwrap_or(0);
            if sliced && plan.meta.footer.dense {
                dense_chunks = dense_chunks.saturating_add(most);
            } else if sliced {
                chunks = chunks.max(most);
            } else if most > whole.0 {
                whole = (most, i);
            }
        }
        (whole, chunks.max(dense_chunks))
    }

    /// The tile share grown to hold what a piece must hold anyway: the
    /// chunks a piece of a few cells reaches (`chunks`,
    /// [`Reader::piece_least`]) and a quarter of the budget beside them.
    pub(super) fn share_holding(&self, chunks: u64) -> u64 {
        self.tile_share
            .max(chunks.saturating_add(self.spec.budget / 4))
    }

    /// Bytes the read of tile `t` of fragment `i` holds: with `span`, the
    /// cells a sliced tile holds (the cells from the first its piece uses
    /// to the last), else the whole tile. A sliced part holds its span's
    /// cells unfiltered, and its used chunks filtered (their share of the
    /// tile's filtered bytes, plus a chunk each end).
    pub(super) fn tile_cost(&self, i: usize, t: u64, span: Option<u64>) -> u64 {
        self.tile_cost_at(i, t, span, None)
    }

    /// [`Reader::tile_cost`] of a span starting at cell `start` of the
    /// tile, where known: a fixed-size part then holds the chunks the span
    /// touches, not its share and a chunk at each end (a span inside one
    /// chunk holds that chunk, not three).
    pub(super) fn tile_cost_at(
        &self,
        i: usize,
        t: u64,
        span: Option<u64>,
        start: Option<u64>,
    ) -> u64 {
        self.tile_parts(i, t).cost(span, start)
    }

    /// What tile `t` of fragment `i` costs a piece, part by part, before
    /// its span is known: a cut that tries many spans of one tile
    /// ([`Reader::cells_fitting`]) looks its parts up once.
    pub(super) fn tile_parts(&self, i: usize, t: u64) -> TileParts {
        let Some(plan) = self.plans.get(i) else {
            return TileParts::default();
        };
        let cells = plan.cells(t, plan.tile_num());
        let meta = &plan.meta;
        let (remote, key) = (self.remote, self.key());
        let mut parts = Vec::new();
        for (slot, ff) in Self::frag_fields(plan) {
            // A var field's fixed part is its offsets, 8 bytes a cell.
            // Per-cell timestamps and delete times (no field of the read)
            // are their part's own values.
            let cell_size = match self.fields.get(slot) {
                Some(f) => (!f.is_var()).then(|| f.cell_size() as u64),
                None => ff.parts.first().and_then(|(_, pf)| pf.field_cell_size),
            };
            let var = cell_size.is_none();
            for (p, (part, _)) in ff.parts.iter().enumerate() {
                let (filtered, unfiltered) = match part {
                    DataPart::Fixed => {
                        let size = cell_size.unwrap_or(8);
                        (meta.tile_range(ff.index, t), cells.saturating_mul(size))
                    }
                    DataPart::Var => {
                        let var = meta.var_tile_size(ff.index, t).unwrap_or(0);
                        (meta.var_tile_range(ff.index, t), var)
                    }
                    DataPart::Validity => (meta.validity_tile_range(ff.index, t), cells),
                };
                let filtered = filtered.map_or(0, |r| r.end.saturating_sub(r.start));
                // Two chunks' filtered bytes (a chunk's share of the
                // part's, at least a header's worth); one for one cell,
                // which TileDB never cuts across chunks (its offsets part
                // reads the next cell's offset too: two).
                let chunk = (u128::from(filtered).saturating_mul(u128::from(Self::CHUNK)))
                    .checked_div(u128::from(unfiltered.max(1)))
                    .map_or(filtered, |c| u64::try_from(c).unwrap_or(u64::MAX));
                // Fixed-size values and validity: the chunks a span's cells
                // lie in, where its start is known and the fragment's
                // chunks are cut as TileDB cuts them since format v11.
                let size = match part {
                    _ if meta.footer.version < 11 => None,
                    DataPart::Validity => Some(1),
                    DataPart::Fixed => cell_size,
                    DataPart::Var => None,
                };
                let chunk_cells = size.and_then(|size| {
                    tdb_tile::fixed_chunk_size(unfiltered, size)
                        .ok()?
                        .checked_div(size)
                });
                let carried =
                    size.zip(self.walk_points.get(&((i, slot, t), p)))
                        .and_then(|(size, stop)| {
                            let bytes = stop.carried()?;
                            Some(bytes.start.div_ceil(size)..bytes.end.checked_div(size)?)
                        });
                parts.push(PartCost {
                    filtered,
                    unfiltered,
                    chunk: chunk.max(64),
                    offsets: var && *part == DataPart::Fixed,
                    chunk_cells,
                    // A part fetched bare is held once.
                    bare: tiles::fetched_bare(*part, var, unfiltered)
                        && stored_bare(remote, key, plan, ff, p),
                    carried,
                });
            }
        }
        TileParts {
            cells,
            sliceable: Self::sliceable(plan),
            parts,
        }
    }

    /// The tiles of fragment `i` a piece of this read may hold: of a sparse
    /// fragment those whose MBR overlaps the subarray (found through the
    /// R-tree), of a dense one those its ranges touch (by the tile grid;
    /// every tile where the grid cannot say). The budget is checked
    /// against these up front: a box over a large array reaches few of its
    /// tiles, and looking at every one cost W3's 16 boxes 1,200 tile sizes
    /// a box, and a few cells of a dense array every tile of it.
    pub(super) fn reached_tiles(&self, i: usize) -> Box<dyn Iterator<Item = u64> + '_> {
        match self.plans.get(i) {
            Some(plan) if !plan.meta.footer.dense => Box::new(
                plan.tiles_overlapping(self.ops.dims(), &self.spec.subarray)
                    .into_iter(),
            ),
            Some(plan) => match plan.dense_tiles(&self.spec.subarray) {
                Some(tiles) => Box::new(tiles),
                None => Box::new(0..plan.tile_num()),
            },
            None => Box::new(std::iter::empty()),
        }
    }

    /// What reading tile `t` of fragment `i` in a run of tiles holds: the
    /// tile (with `cells`, that run of its cells; a dense tile in a read
    /// that spills, its cells from the first inside the subarray to the
    /// last, [`Reader::dense_span`]) and per cell the plan's bookkeeping.
    /// A run of cells is charged the chunks it touches, as a dense piece's
    /// span is ([`Reader::tile_cost_at`]): charged a chunk at each end
    /// besides its share, a run of a few lines of W7's `dense_rows` in 64
    /// KiB chunks never fit a 16 KiB budget's quarter, and its pieces were
    /// one tile line each (4,096 pieces, 8.7 times the unbudgeted read).
    /// A block (`block`, its cells) holds only its cells, and the chunks
    /// its span touches.
    pub(super) fn run_held(
        &self,
        i: usize,
        t: u64,
        cells: Option<&std::ops::Range<u64>>,
        block: Option<u64>,
    ) -> u64 {
        // A run of one tile's cells (else the tile's cells in the read).
        let one_tile = cells.is_some();
        let span = cells.is_none().then(|| self.dense_span(i, t)).flatten();
        let (cells, bytes) = match cells.or(span.as_ref()) {
            Some(c) => {
                let start = c.start.saturating_sub(self.null_reach(i, t));
                let span = c.end.saturating_sub(start);
                let parts = self.tile_parts(i, t);
                let held = block.unwrap_or(span);
                (held, parts.cost_held(Some(span), Some(start), held))
            }
            None => {
                let cells = (self.plans.get(i)).map_or(0, |plan| plan.cells(t, plan.tile_num()));
                (cells, self.tile_bytes(i, t))
            }
        };
        bytes.saturating_add(self.bookkeeping(i, cells, one_tile))
    }

    /// Bytes a piece holds for `cells` cells of a tile of fragment `i`
    /// besides the tile. An unordered read of an array with duplicates
    /// puts each sparse tile's kept cells straight into slabs: the byte a
    /// bounded tile's check hands on (`tiles::Checked`), at most 4 bytes
    /// listing the cell and 4 more picking it, and its timestamp where the
    /// fragment keeps one (8). Any other sparse read keeps a record per
    /// cell and its coordinates to sort or deduplicate them (64). (At 64
    /// for every read, each of W3's 1% boxes was two pieces: 39.5 → 36.6
    /// ms as one.) A dense tile's cells in a read that spills go in
    /// stretches ([`Reader::stretch_bookkeeping`]).
    fn bookkeeping(&self, i: usize, cells: u64, one_tile: bool) -> u64 {
        if (self.plans.get(i)).is_some_and(|p| p.meta.footer.dense) {
            return match self.spill.is_some() {
                true => self.stretch_bookkeeping(cells, one_tile),
                false => 0,
            };
        }
        let schema = self.snapshot.schema();
        let per_cell = if !(schema.allows_dups && self.spec.layout == ResultLayout::Unordered) {
            64
        } else if (self.plans.get(i)).is_some_and(|p| p.timestamps.is_some()) {
            17
        } else {
            9
        };
        cells.saturating_mul(per_cell)
    }

    /// Whether the tiles of `plan` can be sliced: every field read can be.
    /// (Were one read whole, every piece inside a tile would read it again:
    /// a budget below it stays an error.) Dense tiles are sliced by the
    /// cells a piece uses, sparse ones by runs of cells of a read that
    /// spills.
    pub(super) fn sliceable(plan: &FragPlan) -> bool {
        Self::frag_fields(plan).all(|(_, ff)| tiles::sliceable(ff, plan.schema.version))
    }

    /// Whether tile `t` of fragment `i` is sliced when a piece uses `span`
    /// of its cells (see [`Reader::slice_min`]).
    pub(super) fn slices(&self, i: usize, t: u64, span: u64) -> bool {
        let Some(plan) = self.plans.get(i) else {
            return false;
        };
        Self::sliceable(plan) && self.slices_at(plan, t, self.tile_bytes(i, t), span)
    }

    /// [`Reader::slices`] of tile `t` of `plan`, whose fields can be sliced,
    /// `whole` bytes held whole.
    fn slices_at(&self, plan: &FragPlan, t: u64, whole: u64, span: u64) -> bool {
        let cells = plan.cells(t, plan.tile_num());
        whole > self.tile_budget() || (whole >= self.slice_min() && span.saturating_mul(2) <= cells)
    }

    /// Pieces over at most this many tiles of a fragment are estimated
    /// tile by tile (the cells they span in each); larger ones by whole
    /// tiles (they are cut anyway).
    const SPANNED_TILES: u64 = 64;

    /// Per tile of dense fragment `i` piece `p` reads, the first of its
    /// cells the piece spans there and how many (from the piece's low
    /// corner in the tile to its high one, in the tile's cell order).
    /// (`coords`: the piece's [`plan::dense_coords`].)
    fn dense_spans(&self, i: usize, coords: &[Vec<(i128, i128)>]) -> Option<Vec<(u64, u64, u64)>> {
        let plan = self.plans.get(i)?;
        let grid = plan.grid()?;
        // Per dimension: the piece's bounds inside the fragment, cut at
        // tile boundaries.
        let mut per_dim: Vec<Vec<(i128, i128)>> = Vec::new();
        for ((ranges, (nlo, nhi)), (origin, extent)) in
            coords.iter().zip(grid.bounds()).zip(grid.tiling())
        {
            let (lo, hi) = plan::int_span(ranges)?;
            let (lo, hi) = (lo.max(nlo), hi.min(nhi));
            let mut parts = Vec::new();
            let mut at = lo;
            while at <= hi {
                let k = tdb_index::dense::tile_of(at, origin, extent)?;
                let end = origin
                    .checked_add(k.checked_add(1)?.checked_mul(extent)?)?
                    .checked_sub(1)?
                    .min(hi);
                parts.push((at, end));
                at = end.checked_add(1)?;
            }
            per_dim.push(parts);
        }
        let count = per_dim
            .iter()
            .try_fold(1u64, |n, d| n.checked_mul(d.len() as u64))?;
        if count > Self::SPANNED_TILES {
            return None;
        }
        let mut spans = Vec::new();
        let mut index = vec![0usize; per_dim.len()];
        loop {
            let pick = |end: bool| -> Option<Vec<i128>> {
                (per_dim.iter().zip(&index))
                    .map(|(d, &k)| d.get(k).map(|&(a, b)| if end { b } else { a }))
                    .collect()
            };
            let (t, first) = grid.position(&pick(false)?)?;
            let (t_hi, last) = grid.position(&pick(true)?)?;
            if t != t_hi || last < first {
                return None;
            }
            spans.push((t, first, last.saturating_sub(first).saturating_add(1)));
            // The next combination, the last dimension fastest.
            let mut d = per_dim.len();
            loop {
                let Some(nd) = d.checked_sub(1) else {
                    return Some(spans);
                };
                d = nd;
                let (Some(k), Some(len)) = (index.get_mut(d), per_dim.get(d).map(Vec::len)) else {
                    return None;
                };
                *k = k.saturating_add(1);
                if *k < len {
                    break;
                }
                *k = 0;
            }
        }
    }

    /// What reading piece `p` holds at once: its tiles, and per candidate
    /// cell the plan's bookkeeping.
    pub(super) fn estimate(&self, piece: &Piece) -> u64 {
        let p = &piece.sub;
        let schema = self.snapshot.schema();
        let dims = schema.domain.dimensions.len() as u64;
        let mut total = 0u64;
        // A read that spills dense tiles reads runs of one fragment's tiles
        // (or of one tile's cells), as a sparse read that spills does.
        let runs = piece.frag.is_some();
        // The piece's ranges as integers, decoded once for the fragments
        // of each schema (they share it).
        let mut decoded: Vec<(&tdb_schema::ArraySchema, Option<plan::IntRanges>)> = Vec::new();
        for (i, plan) in self.plans.iter().enumerate() {
            if plan.meta.footer.dense && !runs {
                let at = match decoded
                    .iter()
                    .position(|(s, _)| std::ptr::eq(*s, &*plan.schema))
                {
                    Some(k) => k,
                    None => {
                        decoded.push((&plan.schema, plan::dense_coords(&plan.schema, p).ok()));
                        decoded.len().saturating_sub(1)
                    }
                };
                let coords = decoded.get(at).and_then(|(_, c)| c.as_deref());
                let tiles = coords
                    .and_then(|c| plan::dense_tiles_at(plan, c))
                    .unwrap_or(u64::MAX);
                // A piece over few tiles may read only its cells' chunks
                // of each.
                if let Some(spans) = (tiles <= Self::SPANNED_TILES && Self::sliceable(plan))
                    .then(|| self.dense_spans(i, coords?))
                    .flatten()
                {
                    for (t, first, span) in spans {
                        // (With the cells before that null tests read.)
                        let back = self.null_reach(i, t).min(first);
                        let (first, span) = (first.saturating_sub(back), span.saturating_add(back));
                        // The tile's parts looked up once for both costs.
                        let parts = self.tile_parts(i, t);
                        let whole = parts.cost(None, None);
                        let cost = match self.slices_at(plan, t, whole, span) {
                            true => parts.cost(Some(span), Some(first)),
                            false => whole,
                        };
                        total = total.saturating_add(cost);
                    }
                    continue;
                }
                let tile_max = self.tile_max.get(i).copied().unwrap_or(u64::MAX);
                total = total.saturating_add(tiles.saturating_mul(tile_max));
            } else {
                for t in piece.tiles(i, plan, self.ops.dims(), &self.spec.subarray) {
                    let block = piece.block.as_deref().map(Block::cells);
                    total = total.saturating_add(self.run_held(i, t, piece.cells.as_ref(), block));
                }
            }
        }
        if schema.array_type == ArrayType::Dense && !runs {
            // Per slab: where its cells come from and its first coordinates.
            let frags = self.plans.iter().filter(|p| p.meta.footer.dense).count() as u64;
            let shared = (decoded.iter()).find(|(s, _)| std::ptr::eq(*s, schema));
            let own = shared.is_none().then(|| plan::dense_coords(schema, p).ok());
            let slabs = (shared.and_then(|(_, c)| c.as_deref()))
                .or(own.as_ref().and_then(|c| c.as_deref()))
                .and_then(|r| dense::slab_bound(schema, r, self.spec.layout, frags))
                .unwrap_or(u64::MAX);
            let per_slab = dims.saturating_mul(16).saturating_add(40);
            total = total.saturating_add(slabs.saturating_mul(per_slab));
        }
        total
    }

    /// A dense piece no tile boundary cuts (one row of tiles, in row-major
    /// order) is cut inside its tiles once its estimate passes this many
    /// piece aims, so that what a read holds does not grow with the row's
    /// length (W1 at `--scale` 16×: rows of 61 MB of tiles, a peak 4× the
    /// 1× read's). Not at the aim itself: the halves read their tiles by
    /// the chunks of their cells, which costs more than whole tiles (W2
    /// 8192², rows of 16 MB, cut at the aim: 0.15 → 0.28 s).
    const ROW_AIMS: u64 = 4;

    /// A sparse unordered piece over one row of space tiles (the first
    /// dimension's span in one tile, where a row-major read cuts nothing)
    /// that several fragments of an array without duplicates reach (else
    /// it goes in runs of tiles, [`Reader::run_cut`]) is cut at the next
    /// dimension's tile boundaries once its estimate passes this many
    /// piece aims: W3 at `--scale` 4× and 16× (rows of 1.6M and 6.4M
    /// cells) peaked 57 → 33 and 97 → 46 MiB so, at the same time or less.
    /// At four aims W3's 1× rows are cut too, into pieces of a space tile
    /// or two, and its whole read took 8% longer.
    const UNORDERED_AIMS: u64 = 8;

    /// A sparse unordered piece that no tile boundary cuts goes in runs of
    /// its tiles ([`Reader::run_cut`]) once its estimate passes this many
    /// piece aims. At the aim itself W3's 16 boxes, whose pieces over one
    /// row of space tiles come to 8–10 MB, were cut into 43 pieces instead
    /// of 32; at two, what a read holds stays bounded all the same (W3
    /// whole peaks 14 / 17 MiB at `--scale` 1× / 16×).
    const RUN_AIMS: u64 = 2;

    /// Whether piece `p` (its `estimate` past the aim, no tile boundary
    /// to cut it at) is cut inside its tiles: far enough past the aim
    /// ([`Reader::ROW_AIMS`]), over dense fragments alone whose tiles are
    /// sliced, few enough to be estimated by their spans (else the halves'
    /// estimates would not shrink, and the cuts would go on to single
    /// rows).
    fn cuts_inside_tiles(&self, p: &Piece, estimate: u64) -> bool {
        let schema = self.snapshot.schema();
        estimate > self.piece_aim().saturating_mul(Self::ROW_AIMS)
            && schema.array_type == ArrayType::Dense
            && self.plans.iter().all(|plan| {
                plan.meta.footer.dense
                    && Self::sliceable(plan)
                    && plan::dense_tiles_touched(plan, &p.sub)
                        .is_some_and(|n| n <= Self::SPANNED_TILES)
            })
    }

    /// Whether piece `p` reads one tile of each fragment it reaches, all
    /// held whole (fields that cannot be sliced, [`Reader::sliceable`]):
    /// each part of it would fetch and decode those tiles again (string
    /// RLE tiles of 2 MB under 1 MiB: 7,863 requests and 130 times the
    /// unbudgeted read's time, cut into cells). Such a piece is read over
    /// the budget, as the budget check allows for them.
    fn within_tiles_held_whole(&self, p: &Piece) -> bool {
        let mut any = false;
        for (i, plan) in self.plans.iter().enumerate() {
            match p.tiles(i, plan, self.ops.dims(), &self.spec.subarray).len() {
                0 => {}
                1 if !Self::sliceable(plan) => any = true,
                _ => return false,
            }
        }
        any
    }

    /// `p` in two halves when its estimate passes the tile budget, or the
    /// piece size aimed at (at tile boundaries only, or inside tiles for a
    /// row of tiles far past the aim: [`Reader::cuts_inside_tiles`]).
    /// `estimate` is `p`'s ([`Reader::estimate`]).
    pub(super) fn cut(&self, p: &Piece, estimate: u64) -> Option<Cut> {
        let schema = self.snapshot.schema();
        let layout = self.cut_layout();
        let mut order = partition::split_order(schema, layout);
        // Under TileDB's string-parts rule a piece holding one value of the
        // rule's dimension still returns cells of other values (a part's
        // first cell decided for them), so the dimensions after it in the
        // result order do not vary within one value: never cut there
        // (`sparse_string_parts_one_tile` row-major under 2 KiB came out
        // in the order of the second dimension).
        if let Some(d) = sparse::parts_dim(schema, &self.spec.subarray)
            .filter(|_| self.spec.layout != ResultLayout::Unordered)
        {
            if let Some(at) = order
                .iter()
                .position(|&(k, g)| k == d && g != partition::Grain::Tile)
            {
                order.truncate(at.saturating_add(1));
            }
        }
        let bounds = |d: usize, piece: &Subarray| self.tile_bounds(d, piece);
        let tiles_only = if estimate > self.tile_budget() {
            // Parts of tiles held whole would each read them again.
            if self.within_tiles_held_whole(p) {
                return None;
            }
            false
        } else if estimate > self.cut_aim() {
            true
        } else if self.narrow && self.spill.is_some() {
            return self.narrow_cut(p, estimate);
        } else {
            return None;
        };
        // A run of one fragment's tiles of an unordered read that goes in
        // runs ([`Reader::reads_unordered_in_runs`]).
        let unordered_run = self.unordered_runs && p.frag.is_some() && p.run.is_some();
        if order.is_empty() || self.spill.is_some() || unordered_run {
            // The Hilbert global order: no subarray cut keeps it, but one
            // fragment's tiles are stored in it, so runs of them do. A read
            // that spills cuts runs of each fragment's tiles. Unspilled, a
            // fragment holding older versions of a coordinate (consolidated
            // with timestamps) is not cut: its versions may lie in two runs.
            if self.spill.is_none() && !unordered_run && self.versions_meet() {
                return None;
            }
            let i = p.frag.unwrap_or(0);
            let plan = match (self.plans.as_slice(), p.frag) {
                ([plan], _) => plan,
                (plans, Some(i)) => plans.get(i)?,
                _ => return None,
            };
            let run = p.run.clone().unwrap_or(0..plan.tile_num());
            let whole = Piece {
                run: Some(run.clone()),
                ..p.clone()
            };
            let tiles = whole.tiles(i, plan, self.ops.dims(), &self.spec.subarray);
            if let (true, [t]) = (self.spill.is_some() || unordered_run, tiles.as_slice()) {
                // One tile past the budget: runs of its cells, read by the
                // chunks holding them.
                return self.cell_cut(p, plan, *t, estimate, false);
            }
            return self.halve_run(p, i, &tiles, run);
        }
        // A run of tiles (below) is cut in runs.
        if p.run.is_some() {
            return self.run_cut(p);
        }
        let in_order = self.range_cuts(&p.sub)?;
        let split = |order: &[(usize, partition::Grain)], tiles_only| {
            partition::split(
                schema,
                self.ops.dims(),
                &p.sub,
                order,
                tiles_only,
                in_order,
                &bounds,
            )
        };
        let unordered = layout == ResultLayout::Unordered && schema.array_type == ArrayType::Sparse;
        let far = estimate > self.piece_aim().saturating_mul(Self::UNORDERED_AIMS);
        let runs_past = self.piece_aim().saturating_mul(Self::RUN_AIMS);
        let (a, b) = match split(&order, tiles_only) {
            None if tiles_only && self.cuts_inside_tiles(p, estimate) => split(&order, false)?,
            // A sparse unordered piece no tile boundary along the order
            // cuts (one row of space tiles) past two aims: runs of its data
            // tiles ([`Reader::run_cut`]), else, far past the aim, cut between
            // its space tiles along the next dimension
            // ([`Reader::UNORDERED_AIMS`]).
            None if tiles_only && unordered && estimate > runs_past => match self.run_cut(p) {
                Some(cut) => return Some(cut),
                None if far => split(&partition::any_order(&order), true)?,
                None => return None,
            },
            halves => halves?,
        };
        // Cut along the parts dimension: the pieces share out its values
        // after the left one's highest (the right one's ranges start past
        // it).
        let parts = sparse::parts_dim(schema, &self.spec.subarray);
        let (share_a, share_b) = match parts {
            Some(d) if a.ranges(d) != p.sub.ranges(d) => {
                let o = self.ops.dims().get(d)?;
                let top = (a.ranges(d).iter())
                    .map(|r| r.bounds().1)
                    .max_by(|x, y| o.cmp_values(x, y))?;
                let share = p.share.clone().unwrap_or_else(|| sparse::Share::whole(d));
                let (low, high) = share.cut_after(top);
                (Some(low), Some(high))
            }
            _ => (p.share.clone(), p.share.clone()),
        };
        let half = |sub, share| Piece {
            sub,
            share,
            ..p.clone()
        };
        Some(Cut::Halves(half(a, share_a), half(b, share_b)))
    }

    /// Piece `p` (a run of tile `t`'s cells of fragment `plan`, `estimate`
    /// bytes) in two runs of cells, read by the chunks holding
    /// them. A sorted tile the subarray bounds on its sorted dimension is
    /// probed: its middle cell first, to know which side can hold results
    /// (where the run is worth more than the chunk a probe reads).
    /// `probe_only`: no cut where no probe is.
    fn cell_cut(
        &self,
        p: &Piece,
        plan: &FragPlan,
        t: u64,
        estimate: u64,
        probe_only: bool,
    ) -> Option<Cut> {
        if !Self::sliceable(plan) {
            return None;
        }
        // A dense tile across its cell order: in blocks where it can be.
        if let Some(cut) = (p.frag.filter(|_| plan.meta.footer.dense && !probe_only))
            .and_then(|i| self.block_cut(p, i, t))
        {
            return cut;
        }
        let cells = (p.cells.clone())
            .or_else(|| self.dense_span(p.frag?, t))
            .unwrap_or(0..plan.cells(t, plan.tile_num()));
        let mid = (cells.start).saturating_add(cells.end.saturating_sub(cells.start) / 2);
        if mid == cells.start {
            return None;
        }
        let half = |cells| Piece {
            run: Some(t..t.saturating_add(1)),
            cells: Some(cells),
            ..p.clone()
        };
        let edges = (estimate >= Self::PROBE_MIN)
            .then(|| self.probe_edges(p, plan, t))
            .flatten();
        match edges {
            Some(edges @ ((true, _) | (_, true))) => {
                let part = |cells, probe, edges| Piece {
                    probe,
                    edges,
                    ..half(cells)
                };
                Some(Cut::Probe {
                    below: part(cells.start..mid, false, Some(edges)),
                    probe: part(mid..mid.saturating_add(1), true, None),
                    above: part(mid..cells.end, false, Some(edges)),
                })
            }
            _ if probe_only => None,
            _ => {
                // (A dense tile's halves: cut where its cells fill the aim,
                // `dense_unfiltered_tiles` col-major under 64 KiB went
                // 0.0067 → 0.0077 s, and cut at the end of the tile line
                // that cut fell in, 0.0065 → 0.0070.)
                let sparse = !plan.meta.footer.dense;
                let at = (p.frag.filter(|_| sparse))
                    .and_then(|i| self.cells_fitting(i, t, &cells))
                    .unwrap_or(mid);
                Some(Cut::Halves(half(cells.start..at), half(at..cells.end)))
            }
        }
    }

    /// Where to cut run `cells` of sparse tile `t` of fragment `i`: after the
    /// most of its cells that fit [`Reader::cut_aim`], as runs of tiles
    /// are cut ([`partition::split_run`]). `None` where no cell or every
    /// cell fits. Halved instead, runs of cells held between half the aim
    /// and all of it, and a read made a third more pieces than it needed
    /// (`sparse_bounded_tiles` under 64 KiB: pieces of 156 cells of tiles
    /// of 10,000, where 230 fit). What a run holds grows with its cells,
    /// about as a line (steps where it touches one chunk more): the line
    /// through one cell and the whole run guesses the count, which is then
    /// bracketed from there and bisected (a bisection from the whole run,
    /// 14 sizes a piece, was 9% of that read under 16 KiB).
    fn cells_fitting(&self, i: usize, t: u64, cells: &std::ops::Range<u64>) -> Option<u64> {
        let aim = self.cut_aim();
        // As `run_held` charges a run of `n` of its cells, the tile's
        // parts looked up once (a dozen spans are tried).
        let parts = self.tile_parts(i, t);
        let held = |n: u64| {
            (parts.cost(Some(n), Some(cells.start))).saturating_add(self.bookkeeping(i, n, true))
        };
        let len = cells.end.saturating_sub(cells.start);
        let (one, all) = (held(1), held(len));
        if len < 2 || one > aim || all <= aim {
            return None;
        }
        // `lo` cells fit, `hi` do not.
        let per_cell = (all.saturating_sub(one))
            .checked_div(len.saturating_sub(1))
            .unwrap_or(1)
            .max(1);
        let guess = (aim.saturating_sub(one).checked_div(per_cell))
            .unwrap_or(0)
            .saturating_add(1)
            .clamp(1, len.saturating_sub(1));
        let (mut lo, mut hi) = (1u64, len);
        let mut step = 1u64;
        if held(guess) <= aim {
            lo = guess;
            while lo.saturating_add(step) < hi {
                let next = lo.saturating_add(step);
                if held(next) > aim {
                    hi = next;
                    break;
                }
                lo = next;
                step = step.saturating_mul(2);
            }
        } else {
            hi = guess;
            while hi.saturating_sub(step) > lo {
                let next = hi.saturating_sub(step);
                if held(next) <= aim {
                    lo = next;
                    break;
                }
                hi = next;
                step = step.saturating_mul(2);
            }
        }
        while hi.saturating_sub(lo) > 1 {
            let m = lo.saturating_add(hi.saturating_sub(lo) / 2);
            match held(m) <= aim {
                true => lo = m,
                false => hi = m,
            }
        }
        Some(cells.start.saturating_add(lo))
    }

    /// Tiles a read reaches at most to count as narrow
    /// ([`Reader::narrow_read`]): each is a run the read spills.
    const NARROW_TILES: usize = 16;

    /// Whether this sparse read is a few cells of large sorted tiles: it
    /// reaches at most [`Reader::NARROW_TILES`] tiles, one of them of at
    /// least [`Reader::PROBE_MIN`] bytes whose sorted (numeric) dimension
    /// the subarray bounds to an eighth of its span or less. Such a read
    /// spills, each reached tile a run, and probes find the chunks holding
    /// its cells ([`Reader::narrow_cut`]) instead of reading the tiles
    /// whole: 18 cells of `sparse_large_tiles` (tiles of 100,000 cells),
    /// the first read of a process, held 5.0 MB and took 6.8 ms with whole
    /// tiles, 1.2 MB and 3.1 ms so (0.3–0.5 MB once the pool's threads
    /// have their workspaces). On local storage only: each probe waits for
    /// the last, a round trip of requests apiece on remote storage.
    pub(super) fn narrow_read(&self) -> bool {
        if self.remote || self.snapshot.schema().array_type != ArrayType::Sparse {
            return false;
        }
        let mut reached = 0usize;
        let mut narrow = false;
        for (i, plan) in self.plans.iter().enumerate() {
            for t in self.reached_tiles(i) {
                reached = reached.saturating_add(1);
                if reached > Self::NARROW_TILES {
                    return false;
                }
                narrow =
                    narrow || (self.tile_bytes(i, t) >= Self::PROBE_MIN && self.narrows(plan, t));
            }
        }
        narrow
    }

    /// Whether the subarray bounds tile `t` of `plan` on its sorted
    /// dimension (an integer or a float) to an eighth of the tile's span
    /// there or less.
    fn narrows(&self, plan: &FragPlan, t: u64) -> bool {
        let Some((s, range, mbr)) = self.sorted_ranges(plan, t) else {
            return false;
        };
        let Some(dim) = plan.schema.domain.dimensions.get(s) else {
            return false;
        };
        if let (Some((lo, hi)), Some((mlo, mhi))) = (int_range(dim, range), int_range(dim, mbr)) {
            let span = mhi.saturating_sub(mlo).saturating_add(1);
            let overlap = (hi.min(mhi).saturating_sub(lo.max(mlo)).saturating_add(1)).max(0);
            return overlap.saturating_mul(8) <= span;
        }
        let float = |b: &[u8]| match tdb_format::Scalar::decode(dim.datatype, b) {
            Some(tdb_format::Scalar::Float(v)) if v.is_finite() => Some(v),
            _ => None,
        };
        let ((lo, hi), (mlo, mhi)) = (range.bounds(), mbr.bounds());
        match (float(lo), float(hi), float(mlo), float(mhi)) {
            (Some(lo), Some(hi), Some(mlo), Some(mhi)) if mhi > mlo => {
                (hi.min(mhi) - lo.max(mlo)).max(0.0) * 8.0 <= mhi - mlo
            }
            _ => false,
        }
    }

    /// A piece of a narrow read ([`Reader::narrow_read`]) that fits the
    /// budget: a run of several reached tiles goes a tile at a time, a
    /// large sorted tile the subarray bounds is probed
    /// ([`Reader::cell_cut`]); anything else is read as it is.
    fn narrow_cut(&self, p: &Piece, estimate: u64) -> Option<Cut> {
        let i = p.frag?;
        let plan = self.plans.get(i)?;
        let run = p.run.clone()?;
        let tiles = p.tiles(i, plan, self.ops.dims(), &self.spec.subarray);
        match tiles.as_slice() {
            [t] => self.cell_cut(p, plan, *t, estimate, true),
            [_, ..] if p.cells.is_none() => {
                let (a, b) = partition::split_run(&tiles, run, 0, |_| 1)?;
                let half = |run| Piece {
                    run: Some(run),
                    ..p.clone()
                };
                Some(Cut::Halves(half(a), half(b)))
            }
            _ => None,
        }
    }

    /// What pieces are cut down to: the piece size aimed at, within the
    /// tile budget; the tile budget alone in reads answered from tile
    /// metadata. In reads that spill, the storage's aim on remote storage
    /// (the next run fetched while one is read), else the tile budget:
    /// each piece is a run written to a file and read back by the merge,
    /// and pieces below the budget only add files. (With pieces aimed at
    /// 1 KiB under a budget of 64 KiB, the fixtures' reads spilled 293,000
    /// runs and took 35 s instead of 2.)
    fn cut_aim(&self) -> u64 {
        let budget = self.tile_budget();
        if self.md_sparse || (self.spill.is_some() && !self.remote) {
            budget
        } else if self.spill.is_some() {
            self.storage_aim().min(budget)
        } else {
            self.piece_aim().min(budget)
        }
    }

    /// Run `run` of fragment `i`'s tiles (`tiles`: those of it piece `p`
    /// reads) in two, until they fit [`Reader::cut_aim`].
    fn halve_run(
        &self,
        p: &Piece,
        i: usize,
        tiles: &[u64],
        run: std::ops::Range<u64>,
    ) -> Option<Cut> {
        let (a, b) = partition::split_run(tiles, run, self.cut_aim(), |t| {
            self.run_held(i, t, None, None)
        })?;
        let half = |run| Piece {
            run: Some(run),
            frag: Some(i),
            ..p.clone()
        };
        Some(Cut::Halves(half(a), half(b)))
    }

    /// Whether this read goes in runs of each fragment's tiles from the
    /// start: a sparse unordered read past the tile budget whose versions
    /// of a coordinate need not meet ([`Reader::versions_meet`]) and whose
    /// pieces cut by the subarray would cross its tiles
    /// ([`Reader::unordered_crosses`]): each tile is then read once, not
    /// by every piece it crosses (W7's Hilbert array, duplicates allowed,
    /// under 16 KiB: 58,587 requests and 0.64 s, against 1.4 ms
    /// unbudgeted). Also where a tile passes the budget: a run of one
    /// tile is then cut into runs of its cells, read by the chunks holding
    /// them, as a read that spills reads them, but nothing is spilled or
    /// merged (`sparse_bounded_tiles` under 16 KiB: 0.42 s spilled,
    /// against 0.024 unbudgeted). Not under TileDB's string-parts rule,
    /// whose pieces share out a dimension's values.
    pub(super) fn reads_unordered_in_runs(&self) -> bool {
        let schema = self.snapshot.schema();
        let whole = Piece {
            sub: self.spec.subarray.clone(),
            ..Piece::default()
        };
        schema.array_type == ArrayType::Sparse
            && self.spec.layout == ResultLayout::Unordered
            && sparse::parts_dim(schema, &self.spec.subarray).is_none()
            && !self.versions_meet()
            && (self.unordered_crosses() || self.tile_past_budget(false))
            && self.estimate(&whole) > self.tile_budget()
    }

    /// A sparse unordered piece that no tile boundary along the order cuts
    /// (a row of space tiles past [`Reader::RUN_AIMS`]) in runs of its data tiles, each
    /// read by one piece, so that what a read holds does not grow with the
    /// row's length: W3 whole peaked at 21 / 33 / 46 MiB at `--scale` 1×
    /// / 4× / 16× (a space tile of 640,000 cells at 16×, which no tile
    /// boundary cuts), in runs 14 / 17 MiB at 1× / 16×. (Cut by value, a
    /// piece reads the tiles the cut crosses in both halves.) A piece that
    /// several fragments reach is first cut between them where the array
    /// allows duplicates (no version of a cell hides another); where it
    /// does not, the versions of a coordinate in several fragments (or in
    /// one consolidated with timestamps) must meet in one piece, and it is
    /// not cut so.
    fn run_cut(&self, p: &Piece) -> Option<Cut> {
        if p.share.is_some() || p.cells.is_some() {
            return None;
        }
        let (ops, query) = (self.ops.dims(), &self.spec.subarray);
        // The fragments reaching the piece, with the tiles it reads of each.
        let reach: Vec<(usize, Vec<u64>)> = (self.plans.iter().enumerate())
            .filter(|(_, plan)| !plan.meta.footer.dense)
            .map(|(i, plan)| (i, p.tiles(i, plan, ops, query)))
            .filter(|(_, tiles)| !tiles.is_empty())
            .collect();
        match reach.as_slice() {
            [(i, tiles)] => {
                let plan = self.plans.get(*i)?;
                // A fragment holding older versions of a coordinate
                // (consolidated with timestamps) may hold them in two
                // tiles: they must meet (`rand_21645` under a 1 KiB piece
                // aim: 8 cells for 7).
                if plan.timestamps.is_some() && !self.snapshot.schema().allows_dups {
                    return None;
                }
                let run = p.run.clone().unwrap_or(0..plan.tile_num());
                self.halve_run(p, *i, tiles, run)
            }
            [(first, _), .., (last, _)] if self.snapshot.schema().allows_dups => {
                let at = |i: usize| u32::try_from(i).ok();
                let mid = at(reach.get(reach.len() / 2)?.0)?;
                let half = |frags| Piece {
                    frags: Some(frags),
                    ..p.clone()
                };
                Some(Cut::Halves(
                    half(at(*first)?..mid),
                    half(mid..at(*last)?.saturating_add(1)),
                ))
            }
            _ => None,
        }
    }

    /// Runs of a sorted tile's cells at least this large are probed
    /// ([`Cut::Probe`]): a probe fetches a chunk of the sorted dimension
    /// (up to [`Reader::CHUNK`] unfiltered) and its chunk headers, which
    /// below this would cost as much as the run it may save.
    const PROBE_MIN: u64 = 8 * Self::CHUNK;

    /// The dimension tile `t` of sparse fragment `plan` has its cells
    /// sorted along: the first (row-major cells) or the last (col-major)
    /// where its MBR lies in one space tile, whose cells are sorted in the
    /// cell order (a data tile's cells are in the global order).
    pub(super) fn sorted_dim(plan: &FragPlan, t: u64) -> Option<usize> {
        let dims = &plan.schema.domain.dimensions;
        let s = match plan.schema.cell_order {
            Layout::RowMajor => 0,
            Layout::ColMajor => dims.len().checked_sub(1)?,
            _ => return None,
        };
        let mbr = plan.leaves().get(usize::try_from(t).ok()?)?;
        for (d, dim) in dims.iter().enumerate() {
            if dim.tile_extent.is_some() {
                let (lo, hi) = mbr.get(d)?.bounds();
                let tile = |v| tdb_index::dense::tile_index(dim, v);
                if tile(lo)? != tile(hi)? {
                    return None;
                }
            }
        }
        Some(s)
    }

    /// Tile `t` of `plan`'s sorted dimension ([`Reader::sorted_dim`]), the
    /// subarray's one range there and the tile's MBR there; `None` where
    /// the tile is not sorted or the subarray has several ranges there.
    fn sorted_ranges<'a>(
        &'a self,
        plan: &'a FragPlan,
        t: u64,
    ) -> Option<(usize, &'a tdb_schema::Range, &'a tdb_schema::Range)> {
        let s = Self::sorted_dim(plan, t)?;
        let [range] = self.spec.subarray.ranges(s) else {
            return None;
        };
        let mbr = plan.leaves().get(usize::try_from(t).ok()?)?.get(s)?;
        Some((s, range, mbr))
    }

    /// For a run of tile `t`'s cells (piece `p`, of fragment `plan`): whether
    /// cells below, and above, the subarray's range on the tile's sorted
    /// dimension may lie in it; `None` where the tile is not sorted or the
    /// subarray has several ranges there.
    fn probe_edges(&self, p: &Piece, plan: &FragPlan, t: u64) -> Option<(bool, bool)> {
        if p.edges.is_some() {
            return p.edges;
        }
        let (s, range, mbr) = self.sorted_ranges(plan, t)?;
        let ops = self.ops.dims().get(s)?;
        let ((lo, hi), (mlo, mhi)) = (range.bounds(), mbr.bounds());
        Some((
            ops.cmp_values(mlo, lo).is_lt(),
            ops.cmp_values(mhi, hi).is_gt(),
        ))
    }

    /// The probe just read ([`Cut::Probe`]): the runs beside it on the
    /// stack that its value shows to hold no cell of the subarray's range
    /// on the sorted dimension go (the tile's cells below it are no larger,
    /// those above no smaller), and the others learn which edges they may
    /// still hold. Nothing goes where the value is not found.
    pub(super) fn after_probe(&mut self) {
        let p = &self.current;
        let (Some(i), Some(run), Some(cells)) = (p.frag, p.run.clone(), p.cells.clone()) else {
            return;
        };
        let (t, m) = (run.start, cells.start);
        let Some(s) = self.plans.get(i).and_then(|plan| Self::sorted_dim(plan, t)) else {
            return;
        };
        let Some((slot, f)) = (self.fields.iter().enumerate())
            .find(|(_, f)| matches!(f.kind, Kind::Dim(d) if d == s))
        else {
            return;
        };
        let (Some(tile), Some(ops), [range]) = (
            self.tiles.get(&(i, slot, t)),
            self.ops.dims().get(s),
            self.spec.subarray.ranges(s),
        ) else {
            return;
        };
        let Some(at) = m
            .checked_sub(tile.first)
            .and_then(|k| usize::try_from(k).ok())
        else {
            return;
        };
        let col = tile.column(f.datatype, f.cell_val_num);
        if at >= col.len() {
            return;
        }
        let v = col.cell(at);
        let (lo, hi) = range.bounds();
        let (below, above) = (ops.cmp_values(v, lo).is_lt(), ops.cmp_values(v, hi).is_gt());
        let n = self.partitions.len();
        let mut gone = Vec::new();
        for k in (n.saturating_sub(2)..n).rev() {
            let Some(side) = self.partitions.get_mut(k) else {
                continue;
            };
            let Some(c) = side
                .cells
                .clone()
                .filter(|_| side.frag == Some(i) && side.run == Some(run.clone()))
            else {
                continue;
            };
            let (may_below, may_above) = side.edges.unwrap_or((true, true));
            if c.end == m {
                // Cells no larger than the probe's.
                if below {
                    gone.push(k);
                } else if !above {
                    side.edges = Some((may_below, false));
                }
            } else if c.start == m {
                // The probe's cell and those after it: no smaller.
                if above {
                    gone.push(k);
                } else if !below {
                    side.edges = Some((false, may_above));
                }
            }
        }
        for k in gone {
            self.partitions.remove(k);
        }
    }

    /// Whether piece `sub` is cut between ranges (`Some(true)`), anywhere
    /// (`Some(false)`) or not at all. Where results may follow the ranges
    /// as given (`partition::follows_ranges`), a sparse read of one
    /// dimension does so only if every cell it keeps comes from one
    /// fragment, known only at its end: with several ranges out of order
    /// (or overlapping) and several fragments in reach, no cut keeps the
    /// answer TileDB gives unpartitioned, and the piece is read whole.
    pub(super) fn range_cuts(&self, sub: &Subarray) -> Option<bool> {
        let schema = self.snapshot.schema();
        if !partition::follows_ranges(schema, self.spec.layout) {
            return Some(false);
        }
        if schema.array_type == ArrayType::Dense {
            return Some(true);
        }
        let Some(o) = self.ops.dims().first() else {
            return Some(true);
        };
        let ranges = sub.ranges(0);
        let in_order = ranges.windows(2).all(|w| match w {
            [a, b] => o.cmp_values(a.bounds().1, b.bounds().0).is_lt(),
            _ => true,
        });
        if in_order {
            // Range order is the coordinates' order.
            return Some(false);
        }
        let reach = self
            .plans
            .iter()
            .filter(|p| {
                p.meta
                    .footer
                    .non_empty_domain
                    .as_ref()
                    .is_none_or(|ned| plan::mbr_overlaps(self.ops.dims(), ned, sub))
            })
            .count();
        (reach <= 1).then_some(true)
    }

    /// The bounds along dimension `d` of the MBRs of every sparse tile
    /// `piece` overlaps (see `partition::TileBounds`).
    pub(super) fn tile_bounds(&self, d: usize, piece: &Subarray) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        for plan in self.plans.iter().filter(|p| !p.meta.footer.dense) {
            for t in plan.tiles_overlapping(self.ops.dims(), piece) {
                if let Some(r) = usize::try_from(t)
                    .ok()
                    .and_then(|t| plan.leaves().get(t))
                    .and_then(|mbr| mbr.get(d))
                {
                    let (lo, hi) = r.bounds();
                    out.push((lo.to_vec(), hi.to_vec()));
                }
            }
        }
        out
    }

    /// Takes pieces off the stack, cutting each in two while its estimate
    /// exceeds the tile budget, and plans the first that fits. A piece that
    /// cannot be cut (one cell; one tile, or tiles all spanning it, along a
    /// float or string dimension; the Hilbert global order over several
    /// fragments) is read as it is.
    pub(super) fn next_partition(&mut self) -> Result<()> {
        if let Some(planned) = self.ahead.take() {
            return self.install(planned);
        }
        match self.next_piece() {
            Some(p) => {
                self.current = p;
                self.plan_tiles()
            }
            None => {
                self.phase = Phase::Emit;
                Ok(())
            }
        }
    }

    /// The next piece that fits, cutting those that do not. A cut whose
    /// halves each still need every tile byte of the piece (tiles whose
    /// MBRs span it: sparse data of many dimensions) may pay off only after
    /// further cuts along later dimensions, and such cuts multiply: past
    /// [`MAX_FRUITLESS_CUTS`] of them in a read, a piece that only cuts so
    /// is read whole, over the budget, rather than cut without end.
    pub(super) fn next_piece(&mut self) -> Option<Piece> {
        let mut partitions = std::mem::take(&mut self.partitions);
        let mut fruitless = self.fruitless_cuts;
        let piece = self.first_fitting(&mut partitions, &mut fruitless);
        (self.partitions, self.fruitless_cuts) = (partitions, fruitless);
        piece
    }

    /// Pops `partitions` (the last first) until a piece fits, pushing the
    /// halves of those that do not ([`Reader::next_piece`]); `fruitless`
    /// counts the cuts that separated no tile.
    pub(super) fn first_fitting(
        &self,
        partitions: &mut Vec<Piece>,
        fruitless: &mut u32,
    ) -> Option<Piece> {
        // The estimate of the piece pushed last, where nothing was read
        // since (a cut's first half, popped next): an estimate looks at
        // every tile of a piece, and cutting pieces was 40% of a dense
        // read's time under 16 KiB, each piece estimated three times.
        // (Not the second half's: the walks the first half's pieces make
        // change what its tiles cost.)
        let mut known = None;
        while let Some(p) = partitions.pop() {
            let whole = known.take().unwrap_or_else(|| self.estimate(&p));
            match self.cut(&p, whole) {
                Some(Cut::Probe {
                    below,
                    probe,
                    above,
                }) => {
                    for side in [above, below] {
                        if side.cells.as_ref().is_some_and(|c| c.start < c.end) {
                            partitions.push(side);
                        }
                    }
                    return Some(probe);
                }
                Some(Cut::Halves(a, b)) => {
                    let first = self.estimate(&a);
                    if first >= whole && self.estimate(&b) >= whole {
                        if *fruitless >= MAX_FRUITLESS_CUTS {
                            return Some(p);
                        }
                        *fruitless = fruitless.saturating_add(1);
                    }
                    partitions.push(b);
                    partitions.push(a);
                    known = Some(first);
                }
                None => return Some(p),
            }
        }
        None
    }

    /// Plans the next piece while the current one is handed out, and
    /// returns the requests it will ask for, so that a driver can fetch
    /// them ahead (remote storage, where they cost milliseconds) and answer
    /// the reader's next [`super::ReadStep::Need`], which asks exactly for them,
    /// from that fetch. `None` when there is nothing to fetch ahead: no
    /// next piece, one that needs no tile or whose bytes were read on
    /// before, the current piece not yet
    /// fetched (from then on, while it is decoded too), or two pieces' tiles that would not fit the tile budget
    /// together (the next piece is then planned when its turn comes).
    pub fn plan_ahead(&mut self) -> Result<Option<Vec<RangeRequest>>> {
        // After a probe the next pieces wait for its value.
        if self.ahead.is_some()
            || self.current.probe
            || !matches!(self.phase, Phase::Decode(_) | Phase::Emit)
        {
            return Ok(None);
        }
        let Some(piece) = self.next_piece() else {
            return Ok(None);
        };
        let both = self
            .estimate(&self.current)
            .saturating_add(self.estimate(&piece));
        // (Runs spilled merge between pieces in the batch's share, beside
        // the next piece's bytes fetched ahead, `Spill::settle`.)
        let room = match &self.spill {
            Some(super::spilled::Spilled::Records(_)) => self.tile_share,
            _ => self.tile_budget(),
        };
        if both > room {
            self.partitions.push(piece);
            return Ok(None);
        }
        let planned = self.plan_piece(&piece)?;
        // Sliced tiles are found a step at a time: nothing to fetch ahead.
        // (Only remote storage fetches ahead, where no part is fetched
        // bare: `install` asks for these same requests.)
        let requests = (!planned.fetches.is_empty() && planned.fetches.iter().all(|f| !f.sliced))
            .then(|| {
                Coalesced::tiles(&planned.fetches, self.request_cap(), &Default::default()).requests
            });
        self.ahead = Some(planned);
        // Through the bytes read on, as the piece's own ask would go: what
        // they hold is not fetched again, and the rest reads on.
        let Some(asked) = requests else {
            self.asked_ahead = None;
            return Ok(None);
        };
        let more = self.more_pieces(false);
        let (out, answered) = self.prefetch.shape(asked.clone(), more);
        let fetch = (!out.is_empty()).then(|| out.clone());
        self.asked_ahead = Some(super::AskedAhead {
            asked,
            answered,
            out,
        });
        Ok(fetch)
    }

    /// Plans the current piece and makes it the one being read.
    pub(super) fn plan_tiles(&mut self) -> Result<()> {
        let planned = self.plan_piece(&self.current)?;
        self.install(planned)
    }

    /// What reading `piece` takes: its result cells (dense), the tiles of
    /// every fragment it needs, and the fetches for them. Changes nothing,
    /// so the next piece can be planned (and fetched) while one is read.
    pub(super) fn plan_piece(&self, piece: &Piece) -> Result<PlannedPiece> {
        let schema = self.snapshot.schema();
        // Dense arrays: each result cell from the newest dense fragment
        // whose non-empty domain holds it (sparse fragments overlay these
        // once their coordinates are read); only those tiles are fetched.
        // (A read that spills dense tiles makes its results in the merge.)
        let results = if schema.array_type == ArrayType::Dense && self.spill.is_none() {
            let ranges = plan::dense_coords(schema, &piece.sub)?;
            let frags: Vec<DenseFrag> = self
                .plans
                .iter()
                .enumerate()
                .filter(|(_, p)| p.meta.footer.dense)
                .filter_map(|(i, p)| {
                    let ned = p.meta.footer.non_empty_domain.as_ref()?;
                    DenseFrag::new(i as u32, schema, &p.schema.domain, ned)
                })
                .collect();
            dense::dense_results(schema, &frags, &ranges, self.spec.layout)?
        } else {
            Results::default()
        };
        let needed = results.needed_cells();
        // A block's runs of cells, in its one tile.
        let block_runs = match (&piece.block, piece.frag, &piece.run) {
            (Some(b), Some(i), Some(run)) => {
                let tc = (self.plans.get(i)).and_then(|plan| plan.grid()?.tile_cells(run.start));
                let runs = tc.and_then(|tc| b.runs(&tc));
                Some(runs.ok_or_else(|| QueryError::invalid("a block outside its tile"))?)
            }
            _ => None,
        };
        // Null tests that read cells before their own (`null_checks`).
        let null_shift = self.null_shift();
        let mut fetches = Vec::new();
        let mut carried = Vec::new();
        let mut md_answered = Vec::new();
        let mut tiles_of = Vec::with_capacity(self.plans.len());
        for (i, plan) in self.plans.iter().enumerate() {
            let meta = &plan.meta;
            let tiles: Vec<u64> = if meta.footer.dense && self.spill.is_some() {
                piece.tiles(i, plan, self.ops.dims(), &self.spec.subarray)
            } else if meta.footer.dense {
                let mut set: Vec<u64> = results
                    .slabs
                    .iter()
                    .filter(|r| r.frag as usize == i)
                    .map(|r| r.tile)
                    .collect();
                set.sort_unstable();
                set.dedup();
                set
            } else {
                let skip = self.condition.as_ref().filter(|_| self.minmax_skip);
                let fields = &self.fields;
                // Tiles aggregates answer from their metadata: held whole
                // by the read's subarray (as TileDB decides, whatever the
                // pieces: a tile they cut is answered once, by the first
                // piece to list it, and read by none), every cell in the
                // window and undeleted.
                let md = self.md_sparse
                    && meta.footer.version >= 11
                    && plan.timestamps.is_none()
                    && plan.delete_timestamps.is_none();
                let md_fields = &self.md_fields;
                // (Readers that merge the ranges count a cell once: a tile
                // within their union is whole.)
                let merges_ranges = matches!(
                    self.spec.layout,
                    ResultLayout::Unordered | ResultLayout::GlobalOrder
                );
                let within = |mbr: &[tdb_schema::Range]| match merges_ranges {
                    true => plan::mbr_within_union(self.ops.dims(), mbr, &self.spec.subarray),
                    false => plan::mbr_within(self.ops.dims(), mbr, &self.spec.subarray),
                };
                let mut from_md = |t: u64, mbr: &[tdb_schema::Range]| {
                    let answered = md
                        && within(mbr)
                        && aggregate::metadata_answers(plan, fields, md_fields, t);
                    if answered {
                        md_answered.push((i, t));
                    }
                    answered
                };
                piece
                    .tiles(i, plan, self.ops.dims(), &self.spec.subarray)
                    .into_iter()
                    .filter(|&t| match plan.leaves().get(t as usize) {
                        Some(mbr) => !from_md(t, mbr),
                        // No MBR to judge by: read the tile.
                        None => true,
                    })
                    .filter(|&t| {
                        skip.is_none_or(|c| {
                            c.may_match(&|f| {
                                let (slot, field) =
                                    fields.iter().enumerate().find(|(_, x)| x.name == f)?;
                                plan.tile_bounds(slot, field, t)
                            })
                        })
                    })
                    .collect()
            };
            // Unordered reads with duplicates need no coordinates of a
            // tile the piece holds whole (nothing to check or sort), nor
            // those along a dimension where the tile lies inside the piece
            // (`TileCheck::kept` skips it; not the string-parts rule's
            // dimension, tested against the query's ranges), unless asked
            // for or named by the condition.
            let parts = sparse::parts_dim(schema, &self.spec.subarray);
            let coordinates_optional = !meta.footer.dense
                && schema.allows_dups
                && self.spec.layout == ResultLayout::Unordered
                && self.deletes.is_empty();
            let probed = (piece.probe)
                .then(|| {
                    piece
                        .run
                        .as_ref()
                        .and_then(|r| Self::sorted_dim(plan, r.start))
                })
                .flatten();
            for (slot, ff) in Self::frag_fields(plan) {
                // A probe reads the sorted dimension alone.
                if piece.probe
                    && !(self.fields.get(slot))
                        .is_some_and(|f| matches!(f.kind, Kind::Dim(d) if Some(d) == probed))
                {
                    continue;
                }
                let optional = coordinates_optional
                    .then(|| self.fields.get(slot))
                    .flatten()
                    .and_then(|f| match f.kind {
                        Kind::Dim(d)
                            if !self.requested.contains(&slot)
                                && !(self.condition.iter())
                                    .any(|c| c.fields().iter().any(|n| n == &f.name)) =>
                        {
                            Some(d)
                        }
                        _ => None,
                    });
                for &t in &tiles {
                    let unneeded = |d: usize| {
                        let dims = self.ops.dims();
                        if parts == Some(d) {
                            (plan.leaves().get(t as usize))
                                .is_some_and(|mbr| plan::mbr_within(dims, mbr, &piece.sub))
                        } else {
                            plan.tile_within_dim(dims, &piece.sub, t, d)
                        }
                    };
                    if optional.is_some_and(unneeded) {
                        continue;
                    }
                    // Sparse tiles are decoded whole: one held now serves.
                    // (Dense ones only in the chunks their piece used; the
                    // pieces of a read that spills share no tile.)
                    // (Not one decoded in part for the piece before.)
                    if !meta.footer.dense
                        && self.spill.is_none()
                        && self.tiles.get(&(i, slot, t)).is_some_and(|d| !d.partial)
                    {
                        carried.push((i, slot, t));
                        continue;
                    }
                    // Dense tiles' cells are known before decoding: chunks
                    // without any are skipped, or only theirs fetched. A
                    // sparse piece of one tile's cells fetches their chunks.
                    // A dense tile in a read that spills: its cells in
                    // the piece's run, or those the subarray reaches.
                    let run = match &piece.cells {
                        Some(c) if meta.footer.dense && self.spill.is_some() => Some(c.clone()),
                        None if meta.footer.dense && self.spill.is_some() => self.dense_span(i, t),
                        _ => None,
                    };
                    if run.as_ref().is_some_and(|r| r.is_empty()) {
                        continue;
                    }
                    let (used, slice) = match (&piece.cells, run) {
                        _ if block_runs.is_some() => (block_runs.clone(), true),
                        (_, Some(c)) => {
                            let slice = piece.cells.is_some()
                                || self.slices(i, t, c.end.saturating_sub(c.start));
                            (Some(vec![(c.start, c.end)]), slice)
                        }
                        (Some(c), None) if !meta.footer.dense => {
                            (Some(vec![(c.start, c.end)]), true)
                        }
                        _ => {
                            let used = (needed.get(&(i, t)).cloned()).filter(|_| meta.footer.dense);
                            let slice = (used.as_ref())
                                .and_then(|u| Some(u.last()?.1.saturating_sub(u.first()?.0)))
                                .is_some_and(|span| self.slices(i, t, span));
                            (used, slice)
                        }
                    };
                    let reach = (null_shift.as_ref())
                        .filter(|_| meta.footer.dense)
                        .filter(|_| self.fields.get(slot).is_some_and(|f| f.nullable))
                        .map_or(0, |s| s.reach_back(self, i, t));
                    let used = match used {
                        Some(runs) if reach > 0 => Some(with_reach_back(&runs, reach)),
                        used => used,
                    };
                    let mut fetch = tiles::plan_tile(
                        meta,
                        ff,
                        (i, slot, t),
                        plan.cells(t, plan.tile_num()),
                        used,
                        slice,
                    )?;
                    fetch.packed = fetch.sliced && piece.block.is_some();
                    fetches.push(fetch);
                }
            }
            tiles_of.push(tiles);
        }
        Ok(PlannedPiece {
            piece: piece.clone(),
            results,
            tiles: tiles_of,
            md_answered,
            fetches,
            carried,
        })
    }

    /// Makes `planned` the piece being read: asks for its tiles, or
    /// computes it at once when it needs none.
    pub(super) fn install(&mut self, planned: PlannedPiece) -> Result<()> {
        let PlannedPiece {
            piece,
            results,
            tiles,
            md_answered,
            fetches,
            carried,
        } = planned;
        // The tiles of the piece before that this one reads stay; the rest
        // go back to the spare buffers.
        let mut kept = tiles::TileMap::with_capacity_and_hasher(carried.len(), Default::default());
        for key in carried {
            let tile = self.tiles.remove(&key).ok_or_else(|| {
                QueryError::invalid("a tile planned as held is not (a reader bug)")
            })?;
            kept.insert(key, tile);
        }
        self.spare
            .keep_tiles(std::mem::replace(&mut self.tiles, kept).into_values());
        self.current = piece;
        self.checked.clear();
        self.pieces_started = self.pieces_started.saturating_add(1);
        self.results = results;
        for tile in md_answered {
            if self.md_done.insert(tile) {
                self.md_answered.push(tile);
            }
        }
        for (plan, tiles) in self.plans.iter_mut().zip(tiles) {
            plan.tiles = tiles;
        }
        if fetches.is_empty() {
            self.compute()?;
            self.phase = Phase::Emit;
            return Ok(());
        }
        tracing::debug!(
            piece = self.pieces_started,
            tiles = fetches.len(),
            "read piece fetches its tiles"
        );
        let plans = &self.plans;
        // (Per-cell timestamps too: taken for bytes, a run of their cells
        // was read at an eighth of its offset, and a narrow read of a
        // consolidated fragment found every cell deleted.)
        let cell_size = |(i, slot, _): TileKey, p: usize| {
            (plans.get(i).and_then(|plan| plan.field(slot)))
                .and_then(|ff| ff.parts.get(p))
                .map_or(1, |(_, pf)| pf.cell_size)
        };
        // On local storage, parts stored without filters (nor encryption)
        // come arranged, their chunks' data a tile without a copy; remote
        // storage answers ranges as they are, one request a run of tiles.
        let (remote, key) = (self.remote, self.key());
        let bare = |(i, slot, _): TileKey, p: usize| {
            (plans.get(i))
                .and_then(|plan| Some((plan, plan.field(slot)?)))
                .is_some_and(|(plan, ff)| stored_bare(remote, key, plan, ff, p))
        };
        let fetching = Fetching::new(
            fetches,
            cell_size,
            bare,
            self.walk_window(),
            &self.walk_points,
            self.request_cap(),
        );
        if fetching.bare_parts() > 0 {
            // The buffers of the piece before go where the storage takes
            // its fetch buffers from: bare parts' fetch buffers become
            // their tiles, so this piece takes no tile buffer of its own.
            self.spare.to_idle();
        }
        self.fetched(Box::new(fetching))
    }

    /// On local storage a run of neighbouring tiles is one request up to
    /// this many bytes, so that a piece's fetch is several ranges the pool
    /// reads side by side (`drive::fetch`): by hand W2 8192² 209 → 179 ms,
    /// W1 whole 94 → 87 ms (a piece of one run of tiles was read by the
    /// calling thread alone). On remote storage each request is a round
    /// trip: runs go on ([`Reader::request_cap`]).
    const LOCAL_REQUEST: u64 = 512 << 10;

    /// The most bytes a run of neighbouring tiles is fetched in at once
    /// (see [`Reader::LOCAL_REQUEST`]).
    fn request_cap(&self) -> u64 {
        if self.remote {
            u64::MAX
        } else {
            Self::LOCAL_REQUEST
        }
    }

    /// Bytes a sliced tile's chunk walk reads at a time: on local storage
    /// a header and a little (a read costs microseconds), on remote
    /// storage a large window (each read a round trip) that the tile
    /// budget still bounds.
    fn walk_window(&self) -> u64 {
        if self.remote {
            (8u64 << 20).min(self.tile_budget() / 4).max(64 << 10)
        } else {
            4 << 10
        }
    }
}

/// One part of a tile as [`Reader::tile_parts`] finds it: its filtered
/// and unfiltered bytes, a chunk's share of the filtered ones (at least
/// 64), whether it is a var field's offsets, cells a chunk of it holds
/// (where TileDB's cut is known), whether it is fetched bare.
#[derive(Debug, Clone)]
struct PartCost {
    filtered: u64,
    unfiltered: u64,
    chunk: u64,
    offsets: bool,
    chunk_cells: Option<u64>,
    bare: bool,
    /// Cells (as a fixed-size part cuts them) of the chunk whose filtered
    /// bytes the last walk over this part kept (`WalkStop::carried`): a
    /// span starting in it fetches no new bytes for it.
    carried: Option<std::ops::Range<u64>>,
}

/// A tile's parts ([`Reader::tile_parts`]), its cells, and whether it
/// can be sliced.
#[derive(Debug, Clone, Default)]
pub(super) struct TileParts {
    cells: u64,
    sliceable: bool,
    parts: Vec<PartCost>,
}

impl TileParts {
    /// Bytes a piece holds of the tile ([`Reader::tile_cost_at`]): with
    /// `span`, the cells a sliced tile holds from `start` (where known),
    /// else the whole tile. A sliced part holds its span's cells
    /// unfiltered, and its used chunks filtered (their share of the
    /// tile's filtered bytes, plus a chunk each end).
    pub(super) fn cost(&self, span: Option<u64>, start: Option<u64>) -> u64 {
        self.cost_held(span, start, span.unwrap_or(self.cells))
    }

    /// Per part, the cells a chunk holds as TileDB's writer cuts them
    /// (`None` where that is unknown: var-size data, formats before v11).
    pub(super) fn chunk_cells(&self) -> impl Iterator<Item = Option<u64>> + '_ {
        self.parts.iter().map(|p| p.chunk_cells)
    }

    /// [`TileParts::cost`] of a span of which a sliced tile holds `held`
    /// cells (a block's: `super::dense_blocks`), its chunks the span's.
    pub(super) fn cost_held(&self, span: Option<u64>, start: Option<u64>, held: u64) -> u64 {
        let cells = self.cells;
        let span = span.filter(|_| self.sliceable).map(|s| s.min(cells));
        let held = span.map(|s| held.min(s));
        let mut total = 0u64;
        for p in &self.parts {
            let (filtered, unfiltered) = match span {
                Some(span) => {
                    let share = |bytes: u64, span: u64| {
                        let part = (u128::from(bytes).saturating_mul(u128::from(span)))
                            .checked_div(u128::from(cells.max(1)))
                            .unwrap_or(0);
                        u64::try_from(part).unwrap_or(u64::MAX)
                    };
                    let touched = start.zip(p.chunk_cells).and_then(|(first, chunk_cells)| {
                        let last = first.checked_add(span.checked_sub(1)?)?;
                        let n = (last.checked_div(chunk_cells)?)
                            .checked_sub(first.checked_div(chunk_cells)?)?;
                        // (The first chunk's bytes kept from the last walk
                        // are not fetched again: `sparse_bounded_tiles`
                        // row-major under 16 KiB, pieces of a few hundred
                        // cells in chunks of thousands, were charged a
                        // chunk of each part they did not fetch.)
                        let kept = p.carried.as_ref().is_some_and(|c| c.contains(&first));
                        Some((n.saturating_add(u64::from(!kept)), n, chunk_cells))
                    });
                    match touched {
                        Some((n, past_first, chunk_cells)) => {
                            let mut unfiltered = share(p.unfiltered, held.unwrap_or(span));
                            // A block decodes every chunk its span touches
                            // whole, beside the cells it keeps: past the
                            // first (which any piece decodes), charged.
                            if held.is_some_and(|h| h < span) {
                                let chunks = chunk_cells.saturating_mul(past_first);
                                unfiltered = unfiltered.saturating_add(share(p.unfiltered, chunks));
                            }
                            (p.chunk.saturating_mul(n).min(p.filtered), unfiltered)
                        }
                        None => {
                            let count = if span <= 1 && !p.offsets { 1 } else { 2 };
                            let ends = p.chunk.saturating_mul(count).min(p.filtered);
                            let filtered = share(p.filtered, span).saturating_add(ends);
                            (filtered, share(p.unfiltered, held.unwrap_or(span)))
                        }
                    }
                }
                None if p.bare => (0, p.filtered.max(p.unfiltered)),
                None => (p.filtered, p.unfiltered),
            };
            total = total.saturating_add(filtered).saturating_add(unfiltered);
        }
        total
    }
}

/// Whether part `p` of field `ff` of fragment `plan` is stored as it is,
/// so a whole tile's part large enough is fetched bare
/// ([`tiles::fetched_bare`]): on local storage, its filters only copies (no
/// encryption) and not in a zipped file. Remote storage answers ranges as
/// they are, one request a run of tiles.
fn stored_bare(
    remote: bool,
    key: Option<&[u8; 32]>,
    plan: &FragPlan,
    ff: &FragField,
    p: usize,
) -> bool {
    !remote
        && ff.zipped.is_none()
        && (ff.parts.get(p))
            .is_some_and(|(_, pf)| pf.tile_filters(plan.schema.version, key).copies_only())
}
