//! The memory a tile's decoding takes at its peak, counted by the
//! allocator: a decoded tile is built once, not copied. One test in this
//! binary, so no other test's allocations are counted.

// The one `unsafe` here is the allocator shim, which the global-allocator
// API requires; it forwards to `System` unchanged.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use tdb_filters::{Filter, FilterPipeline, Workspace};
use tdb_format::{Datatype, FormatVersion};
use tdb_tile::TileFilters;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to `System` with the caller's own layout and
// pointer, unchanged; the counters are only bookkeeping beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` above, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

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
        let base = CURRENT.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let tile = f.unfilter_whole("t", &filtered, true).unwrap();
        let peak = PEAK.load(Ordering::Relaxed) - base;
        assert_eq!((tile.data, tile.offsets), (data.clone(), offsets.clone()));
        let decoded = data.len() + offsets.len() * 8;
        // A dictionary's word table: four bytes a word.
        let words = if dictionary {
            (cells / run) as usize * 4
        } else {
            0
        };
        assert!(
            peak <= decoded + words + (64 << 10),
            "peak {peak} decoding a tile of {decoded} bytes in runs of {run} ({} filtered)",
            filtered.len()
        );
    }
}
