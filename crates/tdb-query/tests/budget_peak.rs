//! The budget bounds what a read holds: a counting allocator measures the
//! peak bytes allocated while a read runs, with a small budget and with
//! the default one. One test in this binary, so no other test's
//! allocations are counted.

// The one `unsafe` here is the allocator shim, which the global-allocator
// API requires; it forwards to `System` unchanged.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tdb_fragment::TimeWindow;
use tdb_query::{ReadSpec, Snapshot, SyncRead};
use tdb_storage::LocalStorage;

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

/// Peak bytes allocated beyond what was live when the read started.
fn peak_of_read(storage: &LocalStorage, snap: &Arc<Snapshot>, budget: u64) -> (usize, u64) {
    let spec = ReadSpec::new(["r", "c", "a", "s"]).with_budget(budget);
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let mut cells = 0;
    for batch in SyncRead::new(storage, snap.clone(), spec).unwrap() {
        cells += batch.unwrap().num_cells;
    }
    (PEAK.load(Ordering::Relaxed) - base, cells)
}

#[test]
fn a_read_stays_within_its_budget() {
    let dir = tdb_testdata::root().join("dense_multi_chunk").join("array");
    let storage = LocalStorage::new(&dir);
    let snap = Arc::new(Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap());
    let budget: u64 = 2 << 20;
    let (small, cells) = peak_of_read(&storage, &snap, budget);
    let (whole, all) = peak_of_read(&storage, &snap, tdb_query::DEFAULT_BUDGET);
    assert_eq!(cells, all);
    eprintln!("peak {small} bytes under a budget of {budget}; {whole} under the default");
    // The fixed overhead: the decode pool's threads, the filter contexts
    // (zstd's decompression context alone is ~100 kB) and bookkeeping.
    let overhead = 1 << 20;
    assert!(
        (small as u64) < budget + overhead,
        "peak {small} under a budget of {budget}"
    );
    // Unbounded, the same read holds far more: the budget is what bounds it.
    assert!(whole > 2 * small, "{whole} against {small}");
}
