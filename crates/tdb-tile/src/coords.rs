//! Coordinates of fragments before format v5, which keep every dimension
//! in one `__coords.tdb`: how an unfiltered tile of it holds them.

use tdb_filters::FilterPipeline;
use tdb_format::FormatVersion;

/// The layout of an unfiltered pre-v5 coordinates tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordsLayout {
    /// Each dimension's values in turn: TileDB splits the coordinates
    /// before filtering from format v2 on, and at v1 when the pipeline
    /// holds a compressor.
    Split,
    /// Cell by cell, every dimension's value of a cell together, as
    /// written: format v1 without a compressor (TileDB 2.30 zips only
    /// tiles of `version > 1 || using_compression`, in
    /// `ReaderBase::zip_tile_coordinates`).
    Zipped,
}

impl CoordsLayout {
    /// The layout of coordinate tiles of format `version` filtered by
    /// `pipeline` (the schema's coordinate filters).
    pub fn of(version: FormatVersion, pipeline: &FilterPipeline) -> Self {
        let compressed = pipeline.filters.iter().any(|f| f.is_compression());
        if version.get() > 1 || compressed {
            CoordsLayout::Split
        } else {
            CoordsLayout::Zipped
        }
    }

    /// Dimension `d`'s values (`size` bytes each) in a tile of `dims`
    /// dimensions; `None` when the tile is not whole values of every
    /// dimension.
    pub fn dimension(self, tile: &[u8], d: usize, dims: usize, size: usize) -> Option<Vec<u8>> {
        let cell = size.checked_mul(dims).filter(|&c| c > 0 && d < dims)?;
        if tile.len().checked_rem(cell)? != 0 {
            return None;
        }
        if tile.is_empty() {
            return Some(Vec::new());
        }
        Some(match self {
            // One run of values per dimension, each a `dims`-th of the tile.
            CoordsLayout::Split => tile
                .chunks_exact(tile.len().checked_div(dims)?)
                .nth(d)?
                .to_vec(),
            // `dims` values per cell, `size` bytes each.
            CoordsLayout::Zipped => tile
                .chunks_exact(cell)
                .filter_map(|c| c.chunks_exact(size).nth(d))
                .flatten()
                .copied()
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_filters::Filter;

    #[test]
    fn v1_without_a_compressor_keeps_cells_together() {
        let none = FilterPipeline::new([]);
        let zstd = FilterPipeline::new([Filter::Zstd { level: -1 }]);
        let v = |n| FormatVersion::new(n).unwrap();
        assert_eq!(CoordsLayout::of(v(1), &none), CoordsLayout::Zipped);
        assert_eq!(CoordsLayout::of(v(1), &zstd), CoordsLayout::Split);
        assert_eq!(CoordsLayout::of(v(2), &none), CoordsLayout::Split);
        // Cells (1, 10), (2, 10), (3, 10) of two u8 dimensions.
        let zipped = [1, 10, 2, 10, 3, 10];
        let split = [1, 2, 3, 10, 10, 10];
        for (layout, tile) in [(CoordsLayout::Zipped, zipped), (CoordsLayout::Split, split)] {
            assert_eq!(layout.dimension(&tile, 0, 2, 1).unwrap(), [1, 2, 3]);
            assert_eq!(layout.dimension(&tile, 1, 2, 1).unwrap(), [10, 10, 10]);
        }
        assert_eq!(CoordsLayout::Zipped.dimension(&[1, 2, 3], 0, 2, 1), None);
        assert_eq!(CoordsLayout::Split.dimension(&[1, 2], 2, 2, 1), None);
    }
}
