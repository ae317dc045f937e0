//! Files TileDB wrote, with a length field overwritten by a huge value at
//! their head or tail (where headers and footers keep their sizes), opened
//! and read: every run ends in cells or a typed error, and no allocation
//! is sized by the bytes beyond what they can hold. The allocator of this
//! binary refuses any single request above `LIMIT`, which aborts the
//! process: a run that asks for that much fails this test. One test in
//! this binary, so its allocator sees nothing else.

// The one `unsafe` here is the allocator shim, which the global-allocator
// API requires; it forwards to `System` unchanged below the limit.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use tdb::{Array, MemoryStorage, OpenOptions, ReadSpec};
use tdb_storage::WritableStorage;

/// Far more than any read of these small arrays under the test's budget
/// takes; far less than what a lying 2^32 or 2^64 size would ask.
const LIMIT: usize = 256 << 20;

struct Refusing;

// SAFETY: below the limit every call forwards to `System` with the
// caller's own layout and pointer; above it `alloc` returns null, which
// the `GlobalAlloc` contract allows (an allocation failure).
unsafe impl GlobalAlloc for Refusing {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > LIMIT {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract for `alloc` is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > LIMIT {
            return std::ptr::null_mut();
        }
        // SAFETY: `ptr` and `layout` are the caller's, from `alloc` above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Refusing = Refusing;

/// Opens the array in `storage` and reads a few batches of every field
/// under a small budget; the outcome does not matter, only that there is
/// one.
fn run(storage: &MemoryStorage, key: Option<&[u8; 32]>) -> bool {
    let options = match key {
        Some(k) => OpenOptions::new().key(k).unwrap(),
        None => OpenOptions::new(),
    };
    let Ok(array) = Array::open_in(storage, "", options) else {
        return false;
    };
    let schema = array.schema();
    let fields: Vec<String> = schema.fields().map(str::to_owned).collect();
    let Ok(read) = array.read(ReadSpec::new(fields).with_budget(16 << 20)) else {
        return false;
    };
    // A mutated domain can make a dense read endless fill: a few batches
    // show whether reading works.
    let mut batches = read.take(3);
    batches.all(|b| b.is_ok())
}

#[test]
fn huge_sizes_in_tiledb_files_are_errors_not_allocations() {
    let mut runs = 0;
    let mut refused = 0;
    for case in tdb_testdata::SMALL_CASES {
        let o = tdb_testdata::objects()
            .into_iter()
            .find(|o| o.case == case && o.expected.is_some())
            .unwrap_or_else(|| panic!("no case {case}"));
        let files: Vec<(String, Vec<u8>)> =
            o.files.iter().map(|f| (f.clone(), o.read(f))).collect();
        let load = |skip: usize, bytes: &[u8]| {
            let s = MemoryStorage::new();
            for (k, (name, content)) in files.iter().enumerate() {
                let data = if k == skip { bytes } else { content };
                s.write(name, data.to_vec().into()).unwrap();
            }
            s
        };
        assert!(
            run(&load(usize::MAX, &[]), o.key.as_ref()),
            "{case} reads as it is"
        );
        for (k, (_, content)) in files.iter().enumerate() {
            let len = content.len();
            let heads = (0..32).step_by(8).filter(|&p| p + 8 <= len);
            let tails = (8..=32).step_by(8).filter(|&b| b <= len).map(|b| len - b);
            for at in heads.chain(tails) {
                for value in [u64::MAX - 15, u64::from(u32::MAX - 15)] {
                    let mut bad = content.clone();
                    bad[at..at + 8].copy_from_slice(&value.to_le_bytes());
                    runs += 1;
                    if !run(&load(k, &bad), o.key.as_ref()) {
                        refused += 1;
                    }
                }
            }
        }
    }
    // Most mutations are caught; some land in bytes that change nothing.
    assert!(
        runs > 1000 && refused > runs / 4,
        "{refused} of {runs} refused"
    );
}
