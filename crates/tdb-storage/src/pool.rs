//! Idle byte buffers the process's reads hand on to each other.
//!
//! A large buffer the allocator frees goes back to the kernel, and the
//! next one of its size costs a page fault per 4 KiB written (about 4 µs
//! each here): 64 reads of 256² cells out of 256 KiB tiles spent three
//! quarters of their time in faults, on fetch buffers, tile buffers and
//! results made anew for every read. Buffers kept here instead are written
//! again without faults. The pool is bounded ([`IDLE_LIMIT`]) and holds only
//! buffers no read is using: memory a read holds is its own budget's.

use bytes::Bytes;
use std::sync::Mutex;

/// Bytes of idle buffers kept at most, for the whole process.
pub const IDLE_LIMIT: usize = 32 << 20;

/// Buffers smaller than this are not kept: the allocator reuses them from
/// its heap already.
pub const POOLED_MIN: usize = 64 << 10;

/// Idle buffers, up to a limit of capacity.
#[derive(Debug)]
pub struct BufferPool {
    bufs: Mutex<Vec<Vec<u8>>>,
    limit: usize,
}

static IDLE: BufferPool = BufferPool::new(IDLE_LIMIT);

/// The process's pool of idle buffers.
pub fn idle_buffers() -> &'static BufferPool {
    &IDLE
}

impl BufferPool {
    /// An empty pool keeping at most `limit` bytes of capacity.
    pub const fn new(limit: usize) -> Self {
        BufferPool {
            bufs: Mutex::new(Vec::new()),
            limit,
        }
    }

    /// The smallest idle buffer of at least `size` bytes' capacity, and
    /// not four times that (a small need does not take a large buffer a
    /// large one then misses), if any: its length and contents as it was
    /// given back.
    pub fn take(&self, size: usize) -> Option<Vec<u8>> {
        let mut bufs = self.bufs.lock().ok()?;
        let most = size.saturating_mul(4).max(2 * POOLED_MIN);
        let best = bufs
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= size && b.capacity() <= most)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i)?;
        Some(bufs.swap_remove(best))
    }

    /// Keeps `buf` while the kept ones stay under the limit (and it is
    /// worth keeping); drops it otherwise.
    pub fn give(&self, buf: Vec<u8>) {
        if buf.capacity() < POOLED_MIN {
            return;
        }
        let Ok(mut bufs) = self.bufs.lock() else {
            return;
        };
        let held: usize = bufs.iter().map(Vec::capacity).sum();
        if held.saturating_add(buf.capacity()) <= self.limit {
            bufs.push(buf);
        }
    }

    /// Frees every idle buffer: memory the process gives back, at the
    /// price of fresh pages for the next reads (a caller done reading for
    /// a while; tests that measure a read's own allocations).
    pub fn release(&self) {
        if let Ok(mut bufs) = self.bufs.lock() {
            *bufs = Vec::new();
        }
    }

    /// Bytes of capacity held.
    pub fn held(&self) -> usize {
        self.bufs
            .lock()
            .map_or(0, |b| b.iter().map(Vec::capacity).sum())
    }

    /// A buffer of `len` bytes to fill: an idle one where there is one
    /// (its old contents left in place, to be overwritten: no pass of
    /// zeroes), else a new zeroed one (`vec!` of zeroes: the allocator
    /// maps zeroed pages, no pass of zeroes either).
    pub fn filled(&self, len: usize) -> Vec<u8> {
        if len < POOLED_MIN {
            return vec![0; len];
        }
        let Some(mut buf) = self.take(len) else {
            return vec![0; len];
        };
        if buf.len() >= len {
            buf.truncate(len);
        } else {
            buf.resize(len, 0);
        }
        buf
    }

    /// `buf` as [`Bytes`] that give it back to this pool when the last of
    /// them is dropped.
    pub fn bytes(&'static self, buf: Vec<u8>) -> Bytes {
        if buf.capacity() < POOLED_MIN {
            return Bytes::from(buf);
        }
        Bytes::from_owner(Pooled { buf, pool: self })
    }
}

/// A buffer lent out as [`Bytes`]: back to its pool when dropped.
struct Pooled {
    buf: Vec<u8>,
    pool: &'static BufferPool,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_and_the_pool_stays_under_its_limit() {
        static POOL: BufferPool = BufferPool::new(3 * POOLED_MIN);
        let a = POOL.filled(POOLED_MIN + 10);
        let at = a.as_ptr();
        let bytes = POOL.bytes(a);
        let part = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(POOL.held(), 0, "a slice still holds it");
        drop(part);
        assert_eq!(POOL.held(), POOLED_MIN + 10);
        // The same allocation again, its old length cut to the new one.
        let b = POOL.filled(POOLED_MIN);
        assert_eq!(b.as_ptr(), at);
        assert_eq!(b.len(), POOLED_MIN);
        drop(b);
        assert_eq!(POOL.held(), 0, "a plain Vec is not given back");
        // Past the limit: dropped, not kept.
        POOL.give(vec![0; 2 * POOLED_MIN]);
        POOL.give(vec![0; 2 * POOLED_MIN]);
        assert_eq!(POOL.held(), 2 * POOLED_MIN);
        // Small buffers are the allocator's.
        POOL.give(vec![0; 100]);
        assert_eq!(POOL.held(), 2 * POOLED_MIN);
        // Released: nothing held, nothing handed out.
        POOL.release();
        assert_eq!(POOL.held(), 0);
        assert!(POOL.take(POOLED_MIN).is_none());
    }
}
