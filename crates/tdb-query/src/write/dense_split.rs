//! Where a dense global-order write with a `max_fragment_size` starts a
//! new fragment, as TileDB 2.30's `GlobalOrderWriter` decides
//! (`identify_fragment_tile_boundaries`; docs/research/dense_max_fragment_size.md):
//! each fragment is a rectangle of tiles of the written rectangle, either a
//! run of tiles inside one tile-row (the tile order's innermost run) or
//! whole tile-rows from a row boundary (nested likewise in more
//! dimensions), closed where the next tile would take the bytes since its
//! start past the size. Tiles after the last rectangle end wait, unwritten,
//! and open the next fragment. Each fragment records its tile rectangle
//! clipped to the write's recorded non-empty domain.

use crate::{QueryError, Result};
use tdb_format::Layout;
use tdb_index::dense::{int_range, int_range_of, origin_and_extent};
use tdb_schema::{ArraySchema, NDRange};

/// Whether tiles `[start, start + k)` of the grid make a rectangle
/// (TileDB's `is_rectangular_domain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rect {
    /// They do.
    Yes,
    /// Not yet: more tiles may make one.
    No,
    /// Never, however many more.
    Never,
}

/// `counts`: tiles per dimension in the tile order, outermost first.
pub(super) fn rect(counts: &[u64], start: u64, k: u64) -> Rect {
    for i in 0..counts.len() {
        let inner: u64 = counts
            .iter()
            .skip(i.saturating_add(1))
            .fold(1u64, |a, &c| a.saturating_mul(c));
        let off = start.checked_rem(inner).unwrap_or(0);
        if off.saturating_add(k) > inner {
            if off != 0 {
                return Rect::Never;
            }
            if k.checked_rem(inner).unwrap_or(0) != 0 {
                return Rect::No;
            }
        }
    }
    Rect::Yes
}

/// What a split needs of the written rectangle, and its state.
pub(super) struct DenseSplit<T> {
    pub(super) max: u64,
    /// Tiles per dimension, in tile order (outermost first), with each
    /// one's dimension index.
    grid: Vec<(usize, u64)>,
    /// Per dimension (schema order): the first cell of the written
    /// rectangle and the tile extent.
    lows: Vec<(i128, i128)>,
    /// The non-empty domain the write records; fragments clip to it.
    recorded: NDRange,
    /// First tile of the fragment being filled.
    pub(super) start: u64,
    /// End of its last rectangle of tiles (tiles before it are written).
    pub(super) end: Option<u64>,
    /// Bytes of tiles `[start, end)`.
    fsize: u64,
    /// Bytes of tiles `[start, next)`.
    run: u64,
    /// The next tile's number.
    pub(super) next: u64,
    /// Tiles from `end` on, waiting: (tile, its bytes).
    pub(super) pending: Vec<(T, u64)>,
}

/// What to do with a tile before it joins.
pub(super) struct Step {
    /// Store the fragment being filled (tiles `[start, end)`) first.
    pub(super) close: bool,
}

impl<T> DenseSplit<T> {
    /// A split of a write of the tile-aligned rectangle `written`
    /// recording `recorded`, at most `max` bytes a fragment.
    pub(super) fn new(
        schema: &ArraySchema,
        written: &NDRange,
        recorded: &NDRange,
        max: u64,
    ) -> Result<Self> {
        let dims = &schema.domain.dimensions;
        let bad = || QueryError::invalid("a dense write's rectangle is not one of integer tiles");
        let mut lows = Vec::with_capacity(dims.len());
        let mut counts = Vec::with_capacity(dims.len());
        for (d, r) in dims.iter().zip(written) {
            let (lo, hi) = int_range(d, r).ok_or_else(bad)?;
            let (_, extent) = origin_and_extent(d).ok_or_else(bad)?;
            let extent = extent.max(1);
            let tiles = hi
                .saturating_sub(lo)
                .saturating_add(1)
                .checked_div(extent)
                .ok_or_else(bad)?;
            lows.push((lo, extent));
            counts.push(u64::try_from(tiles).map_err(|_| bad())?);
        }
        let mut grid: Vec<(usize, u64)> = counts.into_iter().enumerate().collect();
        if schema.tile_order == Layout::ColMajor {
            grid.reverse();
        }
        Ok(DenseSplit {
            max,
            grid,
            lows,
            recorded: recorded.clone(),
            start: 0,
            end: None,
            fsize: 0,
            run: 0,
            next: 0,
            pending: Vec::new(),
        })
    }

    fn counts(&self) -> Vec<u64> {
        self.grid.iter().map(|&(_, c)| c).collect()
    }

    /// Whether the fragment being filled must be stored before the next
    /// tile, of `size` bytes, joins; then the caller [`DenseSplit::closed`]
    /// it, and [`DenseSplit::push`]es the tile.
    pub(super) fn before(&self, size: u64) -> Result<Step> {
        if size > self.max {
            return Err(QueryError::invalid(format!(
                "the maximum fragment size ({} bytes) is too small to write a single tile \
                 ({size} bytes filtered, every field's): give at least {size}",
                self.max
            )));
        }
        let k = self.next.saturating_sub(self.start).saturating_add(1);
        let close = self.run.saturating_add(size) > self.max
            || rect(&self.counts(), self.start, k) == Rect::Never;
        if close && self.end.is_none() {
            return Err(QueryError::invalid(format!(
                "the maximum fragment size ({} bytes) is too small to subdivide the dense \
                 subarray into fragments of whole tiles (TileDB's \"Fragment size is too \
                 small to subdivide dense subarray into multiple fragments\")",
                self.max
            )));
        }
        Ok(Step { close })
    }

    /// The fragment being filled was stored: the next starts at its end.
    pub(super) fn closed(&mut self) {
        self.start = self.end.unwrap_or(self.start);
        self.end = None;
        self.run = self.run.saturating_sub(self.fsize);
        self.fsize = 0;
    }

    /// Adds the next tile; returns the tiles to write now (those up to the
    /// end of a rectangle), in order.
    pub(super) fn push(&mut self, tile: T, size: u64) -> Vec<(T, u64)> {
        let t = self.next;
        let k = t.saturating_sub(self.start).saturating_add(1);
        self.pending.push((tile, size));
        let out = if rect(&self.counts(), self.start, k) == Rect::Yes {
            self.end = Some(t.saturating_add(1));
            self.fsize = self.run.saturating_add(size);
            std::mem::take(&mut self.pending)
        } else {
            Vec::new()
        };
        self.run = self.run.saturating_add(size);
        self.next = t.saturating_add(1);
        out
    }

    /// The non-empty domain of tiles `[a, b)` (a rectangle): its cells,
    /// clipped to the recorded domain.
    pub(super) fn domain(&self, schema: &ArraySchema, a: u64, b: u64) -> Result<NDRange> {
        let dims = &schema.domain.dimensions;
        let coords = |t: u64| -> Vec<u64> {
            // Tile coordinates per dimension (schema order) of tile `t`.
            let mut c = vec![0u64; dims.len()];
            let mut rest = t;
            for &(d, count) in self.grid.iter().rev() {
                if let Some(slot) = c.get_mut(d) {
                    *slot = rest.checked_rem(count).unwrap_or(0);
                }
                rest = rest.checked_div(count).unwrap_or(0);
            }
            c
        };
        let (first, last) = (coords(a), coords(b.saturating_sub(1)));
        let mut out = NDRange::new();
        for (d, dim) in dims.iter().enumerate() {
            let bad = || QueryError::invalid("a fragment's tiles do not fit its dimension");
            let (&(lo, extent), (Some(&f), Some(&l))) = (
                self.lows.get(d).ok_or_else(bad)?,
                (first.get(d), last.get(d)),
            ) else {
                return Err(bad());
            };
            let (tf, tl) = (i128::from(f.min(l)), i128::from(f.max(l)));
            let cell_lo = lo.saturating_add(tf.saturating_mul(extent));
            let cell_hi = lo
                .saturating_add(tl.saturating_add(1).saturating_mul(extent))
                .saturating_sub(1);
            let (rlo, rhi) = self
                .recorded
                .get(d)
                .and_then(|r| int_range(dim, r))
                .ok_or_else(bad)?;
            out.push(int_range_of(dim, cell_lo.max(rlo), cell_hi.min(rhi)).ok_or_else(bad)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::{rect, Rect};

    #[test]
    fn rectangles_of_tiles_are_runs_in_a_row_or_whole_rows() {
        // A grid of 4 tile-rows of 3 tiles.
        let g = [4, 3];
        assert_eq!(rect(&g, 0, 1), Rect::Yes);
        assert_eq!(rect(&g, 1, 2), Rect::Yes);
        assert_eq!(rect(&g, 1, 3), Rect::Never);
        assert_eq!(rect(&g, 0, 5), Rect::No);
        assert_eq!(rect(&g, 0, 6), Rect::Yes);
        assert_eq!(rect(&g, 3, 9), Rect::Yes);
        // Planes of 2 × 2 tiles.
        let g = [2, 2, 2];
        assert_eq!(rect(&g, 0, 2), Rect::Yes);
        assert_eq!(rect(&g, 0, 3), Rect::No);
        assert_eq!(rect(&g, 2, 3), Rect::Never);
        assert_eq!(rect(&g, 4, 4), Rect::Yes);
        assert_eq!(rect(&g, 0, 8), Rect::Yes);
    }
}
