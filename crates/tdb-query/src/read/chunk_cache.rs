//! Decoded chunks of sliced tiles kept from one piece to the next.
//!
//! A read under a budget that holds less than a decoded chunk of each
//! field goes a few cells a piece, and a chunk is decoded whole:
//! consecutive pieces mostly want the chunks the last one decoded
//! (`sparse_large_tiles` under 64 KiB decoded each 64 KiB chunk again for
//! every few cells, 270 times the unbudgeted read's time). Chunks stay up
//! to [`ChunkCache::LIMIT`] bytes: memory outside the budget, as the
//! decoder's own scratch is (a chunk is its unit).
//!
//! What goes to make room, in turn:
//! - a chunk its walk has passed (a later chunk of the same tile part was
//!   given since): a walk along a tile never wants it again;
//! - else the least recently given, unless the one coming in was let go
//!   before (it is wanted again: pieces take turns over more chunks than
//!   fit) and the least recent is not stale: then the one coming in goes.
//!   Least-recent-first evicts every chunk of such a cycle before its turn
//!   comes again (`dense_multi_chunk` row-major under 64 KiB: half rows
//!   over two tiles of two fragments want 768 KiB of chunks by turns, and
//!   decoded every one for every piece); keeping those held serves them
//!   while the rest come and go.

use super::tiles::{FastHash, TileKey};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// A chunk: its tile, its part's index in the tile's fetch, its index.
type ChunkKey = (TileKey, usize, u64);

#[derive(Debug, Default)]
pub(crate) struct ChunkCache {
    kept: Mutex<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    /// Each chunk, when it was last given, its bytes.
    chunks: HashMap<ChunkKey, (u64, Vec<u8>), FastHash>,
    /// Capacity held.
    bytes: usize,
    /// Gives so far.
    clock: u64,
    /// Chunks let go to make room (at most [`ChunkCache::GHOSTS`]): each
    /// with the number of its going, which `order` lists, the first gone
    /// first (an entry whose number is not the chunk's is stale).
    gone: HashMap<ChunkKey, u64, FastHash>,
    order: VecDeque<(ChunkKey, u64)>,
}

impl ChunkCache {
    /// Bytes of decoded chunks kept at most: eight of TileDB's 64 KiB.
    pub const LIMIT: usize = 512 << 10;

    /// Chunks let go remembered: enough for a cycle many times the chunks
    /// the limit holds.
    const GHOSTS: usize = 256;

    /// A chunk not given for this many gives per chunk held is stale: a
    /// cycle that long hits too rarely to be kept for.
    const STALE: u64 = 4;

    /// Chunk `index` of part `part` of tile `tile`, decoded, if kept: taken
    /// out (give it back with [`ChunkCache::give`]).
    pub fn take(&self, tile: TileKey, part: usize, index: u64) -> Option<Vec<u8>> {
        let mut inner = self.kept.lock().ok()?;
        let (_, data) = inner.chunks.remove(&(tile, part, index))?;
        inner.bytes = inner.bytes.saturating_sub(data.capacity());
        Some(data)
    }

    /// Keeps decoded chunk `index` of part `part` of tile `tile`, making
    /// room as the module tells; returns the buffers let go (the chunk
    /// itself when larger than the limit, or when it is not kept).
    pub fn give(&self, tile: TileKey, part: usize, index: u64, data: Vec<u8>) -> Vec<Vec<u8>> {
        let Ok(mut inner) = self.kept.lock() else {
            return vec![data];
        };
        inner.clock = inner.clock.saturating_add(1);
        let key = (tile, part, index);
        if data.capacity() > Self::LIMIT {
            return vec![data];
        }
        let mut freed = Vec::new();
        if let Some((_, old)) = inner.chunks.remove(&key) {
            inner.bytes = inner.bytes.saturating_sub(old.capacity());
            freed.push(old);
        }
        let full = |inner: &CacheInner| inner.bytes.saturating_add(data.capacity()) > Self::LIMIT;
        if full(&inner) && inner.refuses(key) {
            freed.push(data);
            return freed;
        }
        while full(&inner) {
            let Some(victim) = inner.victim(key) else {
                break;
            };
            if let Some((_, old)) = inner.chunks.remove(&victim) {
                inner.bytes = inner.bytes.saturating_sub(old.capacity());
                freed.push(old);
            }
            inner.let_go(victim);
        }
        inner.gone.remove(&key);
        inner.bytes = inner.bytes.saturating_add(data.capacity());
        let when = inner.clock;
        inner.chunks.insert(key, (when, data));
        freed
    }
}

impl CacheInner {
    /// Remembers `key` as let go, forgetting the first gone past
    /// [`ChunkCache::GHOSTS`].
    fn let_go(&mut self, key: ChunkKey) {
        while self.gone.len() >= ChunkCache::GHOSTS {
            let Some((old, n)) = self.order.pop_front() else {
                break;
            };
            if self.gone.get(&old) == Some(&n) {
                self.gone.remove(&old);
            }
        }
        let n = self.clock;
        self.gone.insert(key, n);
        self.order.push_back((key, n));
        // Stale entries go too once they outnumber the live ones.
        if self.order.len() > ChunkCache::GHOSTS.saturating_mul(2) {
            let gone = &self.gone;
            self.order.retain(|(k, n)| gone.get(k) == Some(n));
        }
    }

    /// Whether `incoming` is let go rather than make room: it went before
    /// to make room (so pieces take turns over more chunks than fit), no
    /// held chunk is passed, and the least recent is not stale.
    fn refuses(&self, incoming: ChunkKey) -> bool {
        if !self.gone.contains_key(&incoming) || self.passed(incoming).is_some() {
            return false;
        }
        let stale = ChunkCache::STALE.saturating_mul(self.chunks.len() as u64);
        self.least_recent()
            .is_some_and(|(_, when)| self.clock.saturating_sub(when) <= stale)
    }

    /// The chunk to let go for `incoming`: the least recently given of
    /// those passed, else the least recently given.
    fn victim(&self, incoming: ChunkKey) -> Option<ChunkKey> {
        self.passed(incoming)
            .or_else(|| self.least_recent().map(|(k, _)| k))
    }

    fn least_recent(&self) -> Option<(ChunkKey, u64)> {
        (self.chunks.iter())
            .min_by_key(|(_, (when, _))| *when)
            .map(|(k, (when, _))| (*k, *when))
    }

    /// The least recently given chunk whose walk has passed it: a chunk of
    /// the same tile part with a higher index was given since (`incoming`
    /// counts as given now).
    fn passed(&self, incoming: ChunkKey) -> Option<ChunkKey> {
        // Per tile part, the index of its latest given chunk.
        let mut latest: HashMap<(TileKey, usize), (u64, u64), FastHash> = HashMap::default();
        let all = (self.chunks.iter().map(|(k, (when, _))| (*k, *when)))
            .chain(std::iter::once((incoming, u64::MAX)));
        for ((tile, part, index), when) in all {
            let at = latest.entry((tile, part)).or_insert((when, index));
            if when > at.0 {
                *at = (when, index);
            }
        }
        (self.chunks.iter())
            .filter(|((tile, part, index), _)| {
                latest.get(&(*tile, *part)).is_some_and(|l| l.1 > *index)
            })
            .min_by_key(|(_, (when, _))| *when)
            .map(|(k, _)| *k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(k: u8) -> Vec<u8> {
        vec![k; 64 << 10]
    }

    /// The chunk cache keeps the most recently given chunks within its
    /// limit, lets the oldest go first, and keeps no chunk larger than it.
    #[test]
    fn the_chunk_cache_keeps_the_newest_chunks_within_its_limit() {
        let cache = ChunkCache::default();
        let tile = (0, 1, 2);
        for k in 0..10u8 {
            assert!(cache.give(tile, 0, u64::from(k), chunk(k)).len() <= 1);
        }
        // Eight of 64 KiB fit: the first two went.
        assert!(cache.take(tile, 0, 0).is_none() && cache.take(tile, 0, 1).is_none());
        assert_eq!(cache.take(tile, 0, 2), Some(chunk(2)));
        assert!(cache.take(tile, 0, 2).is_none(), "taken out");
        assert!(cache.take(tile, 1, 9).is_none() && cache.take((0, 1, 3), 0, 9).is_none());
        assert_eq!(cache.take(tile, 0, 9), Some(chunk(9)));
        let huge = vec![0u8; ChunkCache::LIMIT + 1];
        assert_eq!(cache.give(tile, 0, 11, huge).len(), 1);
        assert!(cache.take(tile, 0, 11).is_none());
        let held = cache.kept.lock().unwrap().bytes;
        assert!(held <= ChunkCache::LIMIT, "{held}");
        // Chunks let go are remembered up to a bound, however many go.
        for k in 0..2_000u64 {
            cache.give((1, 0, k), 0, 0, vec![0; 64 << 10]);
        }
        let inner = cache.kept.lock().unwrap();
        assert_eq!(inner.gone.len(), ChunkCache::GHOSTS);
        assert!(inner.order.len() <= 2 * ChunkCache::GHOSTS);
    }

    /// Pieces taking turns over twelve chunks (one a tile part) where
    /// eight fit: the chunks held stay and serve eight of each twelve
    /// (least-recent-first served none); a chunk its walk passed goes
    /// first; chunks no longer wanted go once stale, and new ones are kept
    /// again.
    #[test]
    fn pieces_taking_turns_over_more_chunks_than_fit_are_served_what_fits() {
        let cache = ChunkCache::default();
        let parts: Vec<ChunkKey> = (0..12).map(|t| ((0, t, 0), 0, 0)).collect();
        let mut hits = 0;
        for round in 0..10 {
            for &(tile, part, index) in &parts {
                let data = cache.take(tile, part, index);
                hits += usize::from(round > 0 && data.is_some());
                cache.give(tile, part, index, data.unwrap_or_else(|| chunk(0)));
            }
        }
        assert_eq!(hits, 9 * 8, "held chunks serve each round");
        // A tile part's walk moves on to its next chunk: the one it passed
        // makes room, the others held stay.
        let holds = |k: &ChunkKey| cache.kept.lock().unwrap().chunks.contains_key(k);
        let held: Vec<ChunkKey> = parts.iter().copied().filter(|k| holds(k)).collect();
        assert_eq!(held, parts[4..], "the first held stay");
        // The latest given: least-recent-first would let the first go.
        let (tile, part, _) = parts[11];
        cache.give(tile, part, 1, chunk(1));
        assert!(!holds(&parts[11]), "passed, let go");
        assert!(held[..7].iter().all(&holds));
        // The read moves to other tiles: new chunks come in (none was let
        // go before), the old ones make room.
        let new: Vec<ChunkKey> = (100..120).map(|t| ((0, t, 0), 0, 0)).collect();
        for &(tile, part, index) in &new {
            cache.give(tile, part, index, chunk(2));
        }
        assert!(new[12..].iter().all(&holds));
        // A chunk let go before and wanted again is let go while what is
        // held is recent, kept once that is stale.
        let (tile, part, index) = parts[0];
        cache.give(tile, part, index, chunk(3));
        assert!(!holds(&parts[0]), "refused");
        for _ in 0..ChunkCache::STALE * 8 {
            let data = cache.take(tile, part, index).unwrap_or_else(|| chunk(3));
            cache.give(tile, part, index, data);
        }
        assert!(holds(&parts[0]) && !holds(&new[12]));
    }
}
