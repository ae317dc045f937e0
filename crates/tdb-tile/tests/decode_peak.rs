//! The memory a tile's decoding takes at its peak, counted by the
//! allocator: a decoded tile is built once, not copied. One test in this
//! binary, so no other test's allocations are counted.

use tdb_filters::{Filter, FilterPipeline, Workspace};
use tdb_format::{Datatype, FormatVersion};
use tdb_testdata::peak;
use tdb_tile::TileFilters;

#[global_allocator]
static ALLOC: peak::Counting = peak::Counting;

/// A string RLE or dictionary tile, which TileDB writes as one chunk with
/// its offsets inside, decodes into its strings and offsets with nothing
/// else of their size alive: the offsets the filter rebuilt become the
/// tile's (they were copied: 800 KB more at the peak for these 100,000
/// cells), RLE runs are not listed first (24 bytes a run: 2.4 MB more
/// where every cell is a run of its own), and the dictionary's words are
/// found through four bytes each (sixteen: 1.6 MB more where every cell
/// is a word of its own).
#[test]
fn a_string_tile_decodes_into_its_cells_once() {
    let cells = 100_000u64;
    for (filter, run) in [
        (Filter::Rle { level: -1 }, 50),
        (Filter::Rle { level: -1 }, 1),
        (Filter::Dictionary { level: -1 }, 50),
        (Filter::Dictionary { level: -1 }, 1),
    ] {
        let dictionary = matches!(filter, Filter::Dictionary { .. });
        let p = FilterPipeline::new(vec![filter]);
        let f = TileFilters::new(&p, Datatype::StringAscii, 0, FormatVersion::WRITTEN);
        assert!(f.offsets_inside());
        let mut data = Vec::new();
        let mut offsets = Vec::new();
        for c in 0..cells {
            offsets.push(data.len() as u64);
            data.extend_from_slice(format!("run-{:014}", c / run).as_bytes());
        }
        let mut filtered = Vec::new();
        f.filter(
            "t",
            &mut Workspace::default(),
            &data,
            Some(&offsets),
            &mut filtered,
        )
        .unwrap();
        let base = peak::start();
        let tile = f.unfilter_whole("t", &filtered, true).unwrap();
        let held = peak::since(base);
        assert_eq!((tile.data, tile.offsets), (data.clone(), offsets.clone()));
        let decoded = data.len() + offsets.len() * 8;
        // A dictionary's word table: four bytes a word.
        let words = if dictionary {
            (cells / run) as usize * 4
        } else {
            0
        };
        assert!(
            held <= decoded + words + (64 << 10),
            "peak {held} decoding a tile of {decoded} bytes in runs of {run} ({} filtered)",
            filtered.len()
        );
    }
}
