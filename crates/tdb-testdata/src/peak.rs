//! A counting allocator for tests that bound memory: a test binary makes
//! [`Counting`] its global allocator, then measures the peak bytes live
//! above a starting point ([`start`], [`since`]). Keep one test in such a
//! binary, so no other test's allocations are counted.

// The one `unsafe` here is the allocator shim, which the global-allocator
// API requires; it forwards to `System` unchanged.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `System`'s allocator, counting the bytes live and their peak.
pub struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to `System` with the caller's own layout and
// pointer, unchanged; the counters are only bookkeeping beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT
            .fetch_add(layout.size(), Ordering::Relaxed)
            .saturating_add(layout.size());
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

/// Starts a measure: returns the bytes live now, from which [`since`]
/// counts the peak.
pub fn start() -> usize {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    base
}

/// The peak bytes live above `base` (what [`start`] returned) since then.
pub fn since(base: usize) -> usize {
    PEAK.load(Ordering::Relaxed).saturating_sub(base)
}
