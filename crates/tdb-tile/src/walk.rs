//! Finding the chunks of a filtered tile that hold some of its unfiltered
//! bytes, without reading the rest of the tile.
//!
//! A tile is a chunk count and then chunks, each a header (its unfiltered
//! and filtered sizes) followed by its bytes, so where chunk `k` starts is
//! known only once every header before it is read. [`ChunkWalk`] reads
//! them in windows it asks for, skips the bytes of chunks that hold
//! nothing wanted and names the file ranges of those that do. It does no
//! I/O: a caller reads what [`ChunkWalk::want`] asks and hands it to
//! [`ChunkWalk::give`]. Small windows suit local files (a read per header
//! costs microseconds), large ones object stores (each read a round trip).

use crate::chunks::{chunk_header, CHUNK_HEADER_SIZE};
use crate::{Result, TileError};
use std::ops::Range;
use tdb_format::le;

/// A chunk that holds wanted bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkedChunk {
    /// Its index in the tile.
    pub index: u64,
    /// The tile's unfiltered bytes it holds.
    pub unfiltered: Range<u64>,
    /// Where it lies in the file: header, metadata and data.
    pub range: Range<u64>,
}

/// A walk over one filtered tile's chunk headers. See the module docs.
#[derive(Debug, Clone)]
pub struct ChunkWalk {
    /// The filtered tile in its file.
    tile: Range<u64>,
    /// Unfiltered byte ranges wanted, sorted and disjoint.
    wanted: Vec<Range<u64>>,
    /// Bytes asked for at least, from the next header on.
    window: u64,
    /// The chunk count, once read.
    count: Option<u64>,
    /// The next chunk's index, header offset in the file and first
    /// unfiltered byte.
    index: u64,
    at: u64,
    unfiltered: u64,
    /// The end of a wanted chunk the last window cut short.
    until: u64,
    /// The last wanted chunk found: index, header offset, first
    /// unfiltered byte.
    last: Option<(u64, u64, u64)>,
    /// The last chunk header read: unfiltered bytes and span. The chunks
    /// after it are guessed as long (TileDB's writer cuts a tile's chunks
    /// to one size; compressed ones come out near it), so a run of wanted
    /// chunks is read at once ([`ChunkWalk::want`]).
    stride: Option<(u64, u64)>,
}

/// Where a walk stood: a chunk header it reached, so a later walk over
/// the same tile for bytes from there on starts at it instead of at the
/// tile's first chunk (a read in many pieces walks each tile once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkPoint {
    tile: (u64, u64),
    count: u64,
    index: u64,
    at: u64,
    unfiltered: u64,
    /// See [`ChunkWalk`]'s `stride`.
    stride: Option<(u64, u64)>,
}

impl WalkPoint {
    /// The point past `chunk`, when this point is at its header: where a
    /// later walk that has `chunk`'s bytes already goes on from.
    pub fn past(&self, chunk: &WalkedChunk) -> Option<WalkPoint> {
        let at_it = self.index == chunk.index
            && self.at == chunk.range.start
            && self.unfiltered == chunk.unfiltered.start
            && chunk.range.end <= self.tile.1
            && self.index < self.count;
        at_it.then(|| WalkPoint {
            index: self.index.saturating_add(1),
            at: chunk.range.end,
            unfiltered: chunk.unfiltered.end,
            stride: Some((
                chunk.unfiltered.end.saturating_sub(chunk.unfiltered.start),
                chunk.range.end.saturating_sub(chunk.range.start),
            )),
            ..*self
        })
    }
}

impl ChunkWalk {
    /// A walk over the tile at `tile` in its file, for the unfiltered
    /// bytes `wanted` (sorted, disjoint), reading at least `window` bytes
    /// at a time.
    pub fn new(tile: Range<u64>, wanted: Vec<Range<u64>>, window: u64) -> Self {
        let wanted: Vec<Range<u64>> = wanted.into_iter().filter(|r| r.start < r.end).collect();
        ChunkWalk {
            at: tile.start,
            tile,
            wanted,
            window: window.max(8u64.saturating_add(CHUNK_HEADER_SIZE as u64)),
            count: None,
            index: 0,
            unfiltered: 0,
            until: 0,
            last: None,
            stride: None,
        }
    }

    /// [`ChunkWalk::new`], starting at `from` where an earlier walk over
    /// the same tile stood, if that is not past the first wanted byte.
    pub fn resume(
        tile: Range<u64>,
        wanted: Vec<Range<u64>>,
        window: u64,
        from: Option<WalkPoint>,
    ) -> Self {
        let mut walk = ChunkWalk::new(tile, wanted, window);
        let first = walk.wanted.first().map_or(0, |r| r.start);
        if let Some(p) = from.filter(|p| {
            p.tile == (walk.tile.start, walk.tile.end)
                && p.unfiltered <= first
                && p.index <= p.count
                && (walk.tile.start..=walk.tile.end).contains(&p.at)
        }) {
            walk.count = Some(p.count);
            walk.index = p.index;
            walk.at = p.at;
            walk.unfiltered = p.unfiltered;
            walk.stride = p.stride;
        }
        walk
    }

    /// Where a later walk may start: the last wanted chunk's header (a
    /// read in pieces wants the chunk a piece ended in again), else the
    /// next header; `None` before the chunk count is read.
    pub fn point(&self) -> Option<WalkPoint> {
        let (index, at, unfiltered) = self.last.unwrap_or((self.index, self.at, self.unfiltered));
        Some(WalkPoint {
            tile: (self.tile.start, self.tile.end),
            count: self.count?,
            index,
            at,
            unfiltered,
            stride: self.stride,
        })
    }

    /// The end of the last wanted byte.
    fn wanted_end(&self) -> u64 {
        self.wanted.last().map_or(0, |r| r.end)
    }

    /// Whether every wanted chunk has been found.
    pub fn done(&self) -> bool {
        self.unfiltered >= self.wanted_end()
    }

    /// The file range to read next, `None` once done: at least a window,
    /// the wanted chunk the last window cut short, and the wanted chunks
    /// from the next header on as far as they are guessed to reach.
    pub fn want(&self) -> Option<Range<u64>> {
        if self.done() {
            return None;
        }
        let end = (self.at.saturating_add(self.window))
            .max(self.until)
            .max(self.guessed_run())
            .min(self.tile.end);
        Some(self.at..end)
    }

    /// Where the wanted chunks from the next header on end, each guessed
    /// as long as the last header read (`stride`), and the header after
    /// them while wanted bytes lie beyond: a run of them takes one read,
    /// not two per chunk (its header, then its bytes). A wrong guess costs
    /// a read more (the chunks were longer) or bytes read and not used
    /// (shorter), never a wrong chunk: every header is still read where
    /// the one before ends. The next header's offset where there is no
    /// guess or the next chunk is not wanted.
    fn guessed_run(&self) -> u64 {
        let (Some((size, span)), Some(count)) = (self.stride, self.count) else {
            return self.at;
        };
        let size = size.max(1);
        let left = count.saturating_sub(self.index);
        let (mut more, mut from) = (0u64, self.unfiltered);
        while more < left && self.is_wanted(&(from..from.saturating_add(size))) {
            more = more.saturating_add(1);
            from = from.saturating_add(size);
        }
        if more == 0 {
            return self.at;
        }
        let header = match from < self.wanted_end() {
            true => CHUNK_HEADER_SIZE as u64,
            false => 0,
        };
        (self.at.saturating_add(more.saturating_mul(span))).saturating_add(header)
    }

    /// Whether the tile's unfiltered bytes `r` hold a wanted one.
    fn is_wanted(&self, r: &Range<u64>) -> bool {
        let k = self.wanted.partition_point(|w| w.end <= r.start);
        self.wanted.get(k).is_some_and(|w| w.start < r.end)
    }

    /// The bytes of the range [`ChunkWalk::want`] gave (`location` names
    /// the tile in errors): the wanted chunks they hold whole.
    pub fn give(&mut self, location: &str, bytes: &[u8]) -> Result<Vec<WalkedChunk>> {
        let corrupt = |reason: String| TileError::Corrupt {
            location: location.to_owned(),
            reason,
        };
        let base = self.at;
        let end = base.saturating_add(bytes.len() as u64);
        let at = |pos: u64| {
            usize::try_from(pos.saturating_sub(base))
                .ok()
                .and_then(|i| bytes.get(i..))
                .unwrap_or_default()
        };
        let mut found = Vec::new();
        loop {
            if self.done() {
                return Ok(found);
            }
            let count = match self.count {
                Some(n) => n,
                None => {
                    let Ok((_, n)) = le::u64("chunk count")(at(self.at)) else {
                        break;
                    };
                    let room = self.tile.end.saturating_sub(self.at).saturating_sub(8);
                    if n > room.checked_div(CHUNK_HEADER_SIZE as u64).unwrap_or(0) {
                        return Err(corrupt(format!("{n} chunks cannot fit in {room} bytes")));
                    }
                    self.count = Some(n);
                    self.at = self.at.saturating_add(8);
                    continue;
                }
            };
            if self.index >= count {
                break;
            }
            let Ok((_, h)) = chunk_header(at(self.at)) else {
                break;
            };
            let chunk_end = self.at.saturating_add(h.span());
            self.stride = Some((u64::from(h.unfiltered_size), h.span()));
            if chunk_end > self.tile.end {
                return Err(corrupt(format!(
                    "chunk {} ends at byte {chunk_end}, past the tile's end at {}",
                    self.index, self.tile.end
                )));
            }
            let unfiltered =
                self.unfiltered..self.unfiltered.saturating_add(u64::from(h.unfiltered_size));
            if self.is_wanted(&unfiltered) {
                if chunk_end > end {
                    // Read it whole next time (with the wanted chunks
                    // after it, as far as they are guessed to reach).
                    self.until = chunk_end;
                    break;
                }
                self.last = Some((self.index, self.at, self.unfiltered));
                found.push(WalkedChunk {
                    index: self.index,
                    unfiltered: unfiltered.clone(),
                    range: self.at..chunk_end,
                });
            }
            self.index = self.index.saturating_add(1);
            self.unfiltered = unfiltered.end;
            self.at = chunk_end;
        }
        if !self.done() && (self.at >= self.tile.end || self.count == Some(self.index)) {
            return Err(corrupt(format!(
                "its chunks end after {} unfiltered bytes, before the {} wanted",
                self.unfiltered,
                self.wanted_end()
            )));
        }
        Ok(found)
    }
}

#[cfg(test)]
// A list of one wanted byte range is what these tests mean.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use crate::{write_filtered_chunks, FilteredChunk};

    /// A tile of `n` chunks of 100 unfiltered bytes each, chunk `k`'s data
    /// `k + 1` bytes of value `k`, at offset 7 of its file.
    fn file(n: u8) -> (Vec<u8>, Range<u64>) {
        sized(&(1..=usize::from(n)).collect::<Vec<_>>())
    }

    /// A tile of chunks of 100 unfiltered bytes each, chunk `k`'s data
    /// `sizes[k]` bytes of value `k`, at offset 7 of its file.
    fn sized(sizes: &[usize]) -> (Vec<u8>, Range<u64>) {
        let data: Vec<Vec<u8>> = (sizes.iter().enumerate())
            .map(|(k, &n)| vec![k as u8; n])
            .collect();
        let chunks = data.iter().map(|d| FilteredChunk {
            unfiltered_size: 100,
            metadata: b"m",
            data: d,
        });
        let mut out = vec![0xEE; 7];
        write_filtered_chunks(chunks, &mut out).unwrap();
        let end = out.len() as u64;
        out.extend_from_slice(b"next tile");
        (out, 7..end)
    }

    /// A walk resumed past a chunk an earlier walk found reads on from the
    /// next header; a point elsewhere has no `past` for that chunk.
    #[test]
    fn a_walk_resumed_past_a_found_chunk_starts_at_the_next() {
        let (bytes, tile) = file(6);
        let mut w = ChunkWalk::new(tile.clone(), vec![150..250], 64);
        let mut found = Vec::new();
        while let Some(r) = w.want() {
            let (a, b) = (r.start as usize, r.end as usize);
            found.extend(w.give("t", &bytes[a..b]).unwrap());
        }
        let last = found.last().unwrap().clone();
        assert_eq!(last.index, 2);
        let point = w.point().unwrap();
        let past = point.past(&last).unwrap();
        assert!(point.past(&found[0]).is_none());
        let mut next = ChunkWalk::resume(tile, vec![300..350], 64, Some(past));
        let r = next.want().unwrap();
        assert_eq!(r.start, last.range.end);
        let got = next
            .give("t", &bytes[r.start as usize..r.end as usize])
            .unwrap();
        assert_eq!(got.first().map(|c| c.index), Some(3));
    }

    /// Runs a walk to its end; the chunks found and the reads made.
    fn walk(
        bytes: &[u8],
        tile: Range<u64>,
        wanted: Vec<Range<u64>>,
        window: u64,
    ) -> Result<(Vec<WalkedChunk>, Vec<Range<u64>>)> {
        let mut w = ChunkWalk::new(tile, wanted, window);
        let (mut found, mut reads) = (Vec::new(), Vec::new());
        while let Some(r) = w.want() {
            assert!(reads.len() < 1000, "no end");
            reads.push(r.clone());
            found.extend(w.give("t", &bytes[r.start as usize..r.end as usize])?);
        }
        Ok((found, reads))
    }

    #[test]
    fn finds_the_chunks_holding_wanted_bytes_in_any_window() {
        let (bytes, tile) = file(10);
        for window in [1, 20, 33, 64, 1 << 20] {
            let (found, reads) = walk(&bytes, tile.clone(), vec![150..250, 720..721], window)
                .unwrap_or_else(|e| panic!("{window}: {e}"));
            let indices: Vec<u64> = found.iter().map(|c| c.index).collect();
            assert_eq!(indices, [1, 2, 7], "window {window}");
            for c in &found {
                assert_eq!(c.unfiltered, c.index * 100..c.index * 100 + 100);
                // Header, one metadata byte, k + 1 data bytes of value k.
                let b = &bytes[c.range.start as usize..c.range.end as usize];
                assert_eq!(b.len() as u64, 12 + 1 + c.index + 1);
                assert!(b[13..].iter().all(|&x| u64::from(x) == c.index));
            }
            // Never past the tile, and no further than the last wanted chunk.
            assert!(reads.iter().all(|r| r.end <= tile.end));
            if window < 64 {
                assert!(reads.last().unwrap().end < tile.end, "{reads:?}");
            }
        }
    }

    #[test]
    fn a_walk_resumes_where_an_earlier_one_stood() {
        let (bytes, tile) = file(10);
        let mut first = ChunkWalk::new(tile.clone(), vec![150..250], 16);
        while let Some(r) = first.want() {
            first
                .give("t", &bytes[r.start as usize..r.end as usize])
                .unwrap();
        }
        let point = first.point();
        // The last chunk found (2, bytes 200..300) is where a later walk
        // may start: it may want that chunk again.
        assert_eq!(point.unwrap().unfiltered, 200);
        let mut again = ChunkWalk::resume(tile.clone(), vec![299..300], 16, point);
        let r = again.want().unwrap();
        let found = again
            .give("t", &bytes[r.start as usize..r.end as usize])
            .unwrap();
        assert_eq!(found[0].index, 2);
        // Later bytes: from chunk 2's header on, the same chunks found.
        let mut later = ChunkWalk::resume(tile.clone(), vec![720..721], 16, point);
        let start = later.want().unwrap().start;
        assert_eq!(start, point.unwrap().at);
        assert!(start > tile.start + 8);
        let mut found = Vec::new();
        while let Some(r) = later.want() {
            found.extend(
                later
                    .give("t", &bytes[r.start as usize..r.end as usize])
                    .unwrap(),
            );
        }
        let (fresh, _) = walk(&bytes, tile.clone(), vec![720..721], 16).unwrap();
        assert_eq!(found, fresh);
        // Earlier bytes: the walk starts over.
        let again = ChunkWalk::resume(tile.clone(), vec![0..10], 16, point);
        assert_eq!(again.want().unwrap().start, tile.start);
        // Another tile's point is not taken.
        let other = ChunkWalk::resume(tile.start + 1..tile.end, vec![720..721], 16, point);
        assert_eq!(other.want().unwrap().start, tile.start + 1);
    }

    /// Wanted chunks are read together, guessed as long as the last
    /// header read: one read for a run of six chunks of one size, and one
    /// for a walk resumed past them; chunks of other sizes (longer, then
    /// shorter) are still each found whole.
    #[test]
    fn a_run_of_wanted_chunks_takes_one_read() {
        let (bytes, tile) = sized(&[50; 10]);
        let (found, reads) = walk(&bytes, tile.clone(), vec![150..650], 16).unwrap();
        let indices: Vec<u64> = found.iter().map(|c| c.index).collect();
        assert_eq!(indices, [1, 2, 3, 4, 5, 6]);
        // Chunk 0's header, then chunks 1 to 6, guessed from chunk 0's
        // size (and the next header: none is needed, the run ends where
        // the wanted bytes do).
        assert_eq!(reads.len(), 2, "{reads:?}");
        assert_eq!(reads[1].start, found[0].range.start);
        assert_eq!(reads[1].end, found[5].range.end);
        // A walk resumed past chunk 6 reads chunks 7 and 8 in one read.
        let mut first = ChunkWalk::new(tile.clone(), vec![150..650], 16);
        while let Some(r) = first.want() {
            first
                .give("t", &bytes[r.start as usize..r.end as usize])
                .unwrap();
        }
        let past = first.point().unwrap().past(&found[5]).unwrap();
        let mut next = ChunkWalk::resume(tile.clone(), vec![700..900], 16, Some(past));
        let r = next.want().unwrap();
        let got = next
            .give("t", &bytes[r.start as usize..r.end as usize])
            .unwrap();
        assert_eq!(got.iter().map(|c| c.index).collect::<Vec<_>>(), [7, 8]);
        assert!(next.want().is_none());
        for sizes in [
            [50, 50, 80, 80, 80, 80, 80, 9, 9, 9],
            [50, 50, 9, 9, 9, 9, 9, 9, 9, 9],
        ] {
            let (bytes, tile) = sized(&sizes);
            let (found, reads) = walk(&bytes, tile.clone(), vec![150..650], 16).unwrap();
            let indices: Vec<u64> = found.iter().map(|c| c.index).collect();
            assert_eq!(indices, [1, 2, 3, 4, 5, 6], "{sizes:?}");
            for c in &found {
                let b = &bytes[c.range.start as usize..c.range.end as usize];
                assert_eq!(b.len(), 12 + 1 + sizes[c.index as usize], "{sizes:?}");
                assert!(b[13..].iter().all(|&x| u64::from(x) == c.index));
            }
            assert!(reads.iter().all(|r| r.end <= tile.end));
        }
    }

    #[test]
    fn nothing_wanted_reads_nothing() {
        let (bytes, tile) = file(3);
        let (found, reads) = walk(&bytes, tile, vec![], 64).unwrap();
        assert!(found.is_empty() && reads.is_empty());
    }

    #[test]
    fn bytes_past_the_last_chunk_are_corruption() {
        let (bytes, tile) = file(3);
        let e = walk(&bytes, tile, vec![250..301], 16).unwrap_err();
        assert!(e.to_string().contains("before the 301 wanted"), "{e}");
    }

    #[test]
    fn a_chunk_past_the_tile_or_a_huge_count_is_corruption() {
        let (mut bytes, tile) = file(3);
        // Chunk 0's data size: past the tile's end.
        bytes[7 + 8 + 4..7 + 8 + 8].copy_from_slice(&1000u32.to_le_bytes());
        let e = walk(&bytes, tile.clone(), vec![0..10], 16).unwrap_err();
        assert!(e.to_string().contains("past the tile's end"), "{e}");
        bytes[7..15].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = walk(&bytes, tile, vec![0..10], 16).unwrap_err();
        assert!(e.to_string().contains("cannot fit"), "{e}");
    }
}
