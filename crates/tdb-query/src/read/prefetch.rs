//! Tile files read on past what a piece asks for, for the pieces after it.
//!
//! A read in pieces fetches each piece's tiles (or walks their chunk
//! headers) with requests of its own, a few a file a piece:
//! `sparse_bounded_tiles` read under 1 MiB made 467 requests where the
//! whole read makes 53 to 128, and on an object store each is a round
//! trip. Its pieces mostly go along each file (a fragment's tiles in
//! order, a tile's chunks in order), so while pieces remain each request
//! of a batch is sent longer (up to 8 times, never into the next request
//! to its file nor past the file's end, known from an earlier answer from
//! it), and the whole read is kept: a later request inside it is answered
//! from it, with no request. Requests fetched ahead by the driver
//! ([`super::Reader::plan_ahead`]) and narrow reads' probes are not read on.
//!
//! The bytes kept are memory outside the budget, as the reader's decoded
//! chunks ([`super::chunk_cache::ChunkCache`]) and carried chunks are: at
//! most [`Prefetch::limit`], a share of the budget, counting each longer
//! read's whole buffer. Answers are copied out of them (a piece holding a
//! slice would hold the buffer past its own share: under 1 MiB,
//! `sparse_bounded_tiles` peaked at 4 MB so).

use super::tiles::FastHash;
use std::collections::HashMap;
use tdb_storage::{ByteRange, RangeRead, RangeRequest};

/// Bytes a request is read on at least, where the file and the limit
/// have them (a page: a tile of a few cells' validity is 200 bytes).
const LEAST: u64 = 4 << 10;

/// A request is read on at most this many times its own length: files
/// read by turns then share the limit by what their pieces ask of each
/// (with the limit's share alone, one file's whole read let go of the
/// others' before their pieces came, and `sparse_bounded_tiles` read
/// under 1 MiB fetched its bytes 5 times over).
const AHEAD_TIMES: u64 = 8;

/// Files whose sizes are known at most, past those with bytes kept.
const FILES_KNOWN: usize = 4096;

/// Bytes read on, kept: where they start in their file, the bytes, what
/// they cost (the whole buffer they are part of), when last given or used
/// (the prefetch's clock, a tick each: no two alike).
#[derive(Debug)]
struct Kept {
    at: u64,
    bytes: bytes::Bytes,
    cost: u64,
    when: u64,
}

/// One file's bytes read on (several places: a read may go along several
/// tiles of one file by turns), and its size once an answer told it.
#[derive(Debug, Default)]
struct FileAhead {
    size: Option<u64>,
    kept: Vec<Kept>,
}

/// The bytes a read keeps past what its pieces asked for. See the module
/// docs.
#[derive(Debug, Default)]
pub(crate) struct Prefetch {
    files: HashMap<String, FileAhead, FastHash>,
    /// Requests sent longer than asked: each with those it answers.
    sent: HashMap<RangeRequest, Vec<RangeRequest>, FastHash>,
    /// Bytes kept at most (none: nothing is read on).
    limit: u64,
    /// Bytes kept now.
    held: u64,
    clock: u64,
}

impl Prefetch {
    /// A prefetch keeping at most `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Prefetch {
            limit,
            ..Prefetch::default()
        }
    }

    /// The bytes kept at most for a read under `budget`: a quarter of it,
    /// at most 256 KiB; none under 256 KiB, where a few pages a file are
    /// let go before their pieces come (`sparse_bounded_tiles` under 64
    /// KiB fetched twice its bytes).
    pub fn limit(budget: u64) -> u64 {
        match budget < 256 << 10 {
            true => 0,
            false => (budget / 4).min(256 << 10),
        }
    }

    /// A batch of requests as it goes out: those the bytes kept answer
    /// (returned with their answers), and the rest, each to a file whose
    /// size is known made longer where pieces come after this one
    /// (`more`), its read at most its share of the limit and never into
    /// the next request's bytes.
    pub fn shape(
        &mut self,
        requests: Vec<RangeRequest>,
        more: bool,
    ) -> (Vec<RangeRequest>, Vec<(RangeRequest, RangeRead)>) {
        let mut answered = Vec::new();
        let mut out = Vec::with_capacity(requests.len());
        for r in requests {
            match self.answer(&r) {
                Some(read) => answered.push((r, read)),
                None => out.push(r),
            }
        }
        if self.limit == 0 || !more {
            return (out, answered);
        }
        // The requests that may go longer, by file and offset.
        let mut along: Vec<(&str, u64, u64, usize)> = (out.iter().enumerate())
            .filter_map(|(i, r)| match (&r.range, &r.front) {
                (ByteRange::Bounded { offset, len }, None) => {
                    Some((r.key.as_str(), *offset, *len, i))
                }
                _ => None,
            })
            .collect();
        along.sort_unstable();
        let share = self.limit.checked_div(along.len() as u64).unwrap_or(0);
        let mut longer: Vec<(usize, u64)> = Vec::new();
        for (k, &(key, offset, len, i)) in along.iter().enumerate() {
            let Some(size) = self.files.get(key).and_then(|f| f.size) else {
                continue;
            };
            let end = offset.saturating_add(len);
            let next = match along.get(k.saturating_add(1)) {
                Some(&(next_key, next_offset, _, _)) if next_key == key => next_offset,
                _ => size,
            };
            let more = (next.min(size).saturating_sub(end))
                .min(share.saturating_sub(len))
                .min(len.saturating_mul(AHEAD_TIMES).max(LEAST));
            if more > 0 {
                longer.push((i, more));
            }
        }
        for (i, more) in longer {
            let Some(r) = out.get_mut(i) else { continue };
            let ByteRange::Bounded { offset, len } = r.range else {
                continue;
            };
            let asked = r.clone();
            r.range = ByteRange::new(offset, len.saturating_add(more));
            self.sent.entry(r.clone()).or_default().push(asked);
        }
        (out, answered)
    }

    /// The answer to `r` from the bytes kept, if they hold it.
    fn answer(&mut self, r: &RangeRequest) -> Option<RangeRead> {
        let ByteRange::Bounded { offset, len } = r.range else {
            return None;
        };
        if r.front.is_some() {
            return None;
        }
        self.clock = self.clock.saturating_add(1);
        let clock = self.clock;
        let file = self.files.get_mut(&r.key)?;
        let size = file.size?;
        let kept = (file.kept.iter_mut()).find(|k| {
            offset >= k.at
                && offset.saturating_add(len) <= k.at.saturating_add(k.bytes.len() as u64)
        })?;
        let from = usize::try_from(offset.saturating_sub(kept.at)).ok()?;
        let part = kept
            .bytes
            .get(from..from.checked_add(usize::try_from(len).ok()?)?)?;
        kept.when = clock;
        Some(RangeRead {
            bytes: bytes::Bytes::copy_from_slice(part),
            file_size: size,
            arranged: false,
        })
    }

    /// The answer to a request sent: the answers to the requests it
    /// stands for (itself, unless [`Prefetch::shape`] made it longer: then
    /// its bytes are kept). Every answer tells its file's size.
    pub fn take(
        &mut self,
        sent: RangeRequest,
        read: Option<RangeRead>,
    ) -> Vec<(RangeRequest, Option<RangeRead>)> {
        if let Some(read) = &read {
            if self.files.len() >= FILES_KNOWN && !self.files.contains_key(&sent.key) {
                // Files with nothing kept forget their sizes (a read over
                // many fragments would know every file's otherwise).
                self.files.retain(|_, f| !f.kept.is_empty());
            }
            self.files.entry(sent.key.clone()).or_default().size = Some(read.file_size);
        }
        let Some(asked) = self.sent.remove(&sent) else {
            return vec![(sent, read)];
        };
        let Some(read) = read else {
            return asked.into_iter().map(|a| (a, None)).collect();
        };
        let mut out = Vec::with_capacity(asked.len());
        for a in asked {
            let len = match a.range {
                ByteRange::Bounded { len, .. } => len,
                _ => 0,
            };
            let len = usize::try_from(len)
                .unwrap_or(usize::MAX)
                .min(read.bytes.len());
            let part = RangeRead {
                bytes: bytes::Bytes::copy_from_slice(read.bytes.get(..len).unwrap_or_default()),
                ..read.clone()
            };
            out.push((a, Some(part)));
        }
        // The whole read is kept, what was asked too: a walk asks again
        // for a chunk its window cut short, from inside that window.
        if let (ByteRange::Bounded { offset, .. }, true) =
            (sent.range, read.bytes.len() as u64 <= self.limit)
        {
            let kept = Kept {
                at: offset,
                cost: read.bytes.len() as u64,
                bytes: read.bytes,
                when: {
                    self.clock = self.clock.saturating_add(1);
                    self.clock
                },
            };
            self.keep(&sent.key, kept);
        }
        out
    }

    /// Keeps `new` bytes of file `key` in place of those kept there that
    /// it overlaps, letting go of the least recently used bytes past the
    /// limit.
    fn keep(&mut self, key: &str, new: Kept) {
        let file = self.files.entry(key.to_owned()).or_default();
        let new_end = new.at.saturating_add(new.bytes.len() as u64);
        let mut freed = 0u64;
        file.kept.retain(|k| {
            let overlaps = k.at < new_end && new.at < k.at.saturating_add(k.bytes.len() as u64);
            if overlaps {
                freed = freed.saturating_add(k.cost);
            }
            !overlaps
        });
        self.held = self.held.saturating_sub(freed).saturating_add(new.cost);
        file.kept.push(new);
        let mut newest = file.kept.len().saturating_sub(1);
        while self.held > self.limit {
            // (The bytes just kept stay: within the limit by themselves.)
            let oldest = (self.files.iter())
                .flat_map(|(k, f)| f.kept.iter().enumerate().map(move |(i, x)| (x.when, k, i)))
                .filter(|(_, k, i)| !(k.as_str() == key && *i == newest))
                // (No two alike: the map's order decides nothing, the same
                // read makes the same requests.)
                .min_by_key(|(w, _, _)| *w)
                .map(|(_, k, i)| (k.clone(), i));
            let Some((k, i)) = oldest else {
                break;
            };
            if let Some(f) = self.files.get_mut(&k) {
                if i < f.kept.len() {
                    // `remove`, not `swap_remove`: the newest's place moves
                    // by one at most.
                    let gone = f.kept.remove(i);
                    self.held = self.held.saturating_sub(gone.cost);
                    if k == key && i < newest {
                        newest = newest.saturating_sub(1);
                    }
                }
            }
        }
    }

    /// Bytes kept now.
    #[cfg(test)]
    pub fn held(&self) -> u64 {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn file(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8).collect()
    }

    /// Answers `requests` from `data` (one file), as a backend would.
    fn serve(data: &[u8], requests: &[RangeRequest]) -> Vec<(RangeRequest, Option<RangeRead>)> {
        requests
            .iter()
            .map(|r| {
                let (o, l) = r.range.resolve(&r.key, data.len() as u64).unwrap();
                let read = RangeRead {
                    bytes: Bytes::copy_from_slice(&data[o as usize..(o + l) as usize]),
                    file_size: data.len() as u64,
                    arranged: false,
                };
                (r.clone(), Some(read))
            })
            .collect()
    }

    /// Requests along a file, a piece at a time: once its size is known,
    /// the last request of a batch is sent longer, later requests inside
    /// what it read are answered without a request, and every answer holds
    /// the bytes asked for.
    #[test]
    fn requests_along_a_file_are_answered_from_what_was_read_on() {
        let data = file(200_000);
        let mut p = Prefetch::new(64 << 10);
        let mut sent = 0;
        for piece in 0..40u64 {
            let asked = vec![
                RangeRequest::new("f", ByteRange::new(piece * 5000, 1000)),
                RangeRequest::new("f", ByteRange::new(piece * 5000 + 1000, 3000)),
            ];
            let (out, answered) = p.shape(asked.clone(), true);
            sent += out.len();
            let mut got = answered
                .into_iter()
                .map(|(r, a)| (r, Some(a)))
                .collect::<Vec<_>>();
            for (r, read) in serve(&data, &out) {
                got.extend(p.take(r, read));
            }
            assert_eq!(got.len(), asked.len(), "piece {piece}");
            for (r, read) in got {
                let (o, l) = r.range.resolve("f", data.len() as u64).unwrap();
                assert!(asked.contains(&r));
                let read = read.unwrap();
                assert_eq!(&read.bytes[..], &data[o as usize..(o + l) as usize]);
                assert_eq!(read.file_size, data.len() as u64);
            }
            assert!(p.held() <= 64 << 10);
        }
        // 80 requests asked: the first two pieces' four (the file's size
        // unknown, then nothing kept), then about one a read on of 8 times
        // the 3,000 bytes asked (its own and 27,000 more).
        let reads_on = 200_000u64.div_ceil(27_000) as usize;
        assert!(sent <= 4 + reads_on, "{sent} requests sent");
    }

    /// Without a limit nothing is read on; a request past the bytes kept
    /// goes out as asked; a request with a front is never made longer;
    /// the files' bytes kept stay within the limit, the least recently
    /// used going first.
    #[test]
    fn what_is_kept_stays_within_the_limit() {
        let data = file(100_000);
        let r = |k: &str, o: u64, l: u64| RangeRequest::new(k, ByteRange::new(o, l));
        let mut none = Prefetch::new(0);
        for (rq, read) in serve(&data, &[r("f", 0, 10)]) {
            none.take(rq, read);
        }
        let (out, answered) = none.shape(vec![r("f", 10, 10)], true);
        assert_eq!((out, answered.len()), (vec![r("f", 10, 10)], 0));

        let mut p = Prefetch::new(32 << 10);
        for k in ["a", "b", "c"] {
            for (rq, read) in serve(&data, &[r(k, 0, 10)]) {
                p.take(rq, read);
            }
        }
        let fronted = r("a", 10, 10).with_front(std::iter::once(0..4).collect());
        let (out, _) = p.shape(vec![fronted.clone()], true);
        assert_eq!(out, vec![fronted]);
        // Requests of 10 bytes are read on by a page; of 4,000, up to
        // their share of the limit (32 KiB over three files).
        let (out, _) = p.shape(vec![r("a", 10, 10)], true);
        assert_eq!(out, vec![r("a", 10, 10 + LEAST)]);
        p.sent.clear();
        let (out, _) = p.shape(
            vec![r("a", 10, 4000), r("b", 10, 4000), r("c", 10, 4000)],
            true,
        );
        let share = (32 << 10) / 3;
        assert!(out
            .iter()
            .all(|o| matches!(o.range, ByteRange::Bounded { len, .. } if len == share)));
        for (rq, read) in serve(&data, &out) {
            p.take(rq, read);
        }
        assert_eq!(p.held(), 3 * share);
        // One file alone then takes the whole limit: the others go, the
        // least recently used first, its own older bytes too.
        let (out, answered) = p.shape(vec![r("a", 20, 10), r("a", 40_000, 4000)], true);
        assert_eq!(answered.len(), 1);
        for (rq, read) in serve(&data, &out) {
            p.take(rq, read);
        }
        assert_eq!(p.held(), 32 << 10);
        let (_, answered) = p.shape(vec![r("b", 30, 10), r("a", 20, 10)], true);
        assert!(answered.is_empty());
        let (_, answered) = p.shape(vec![r("a", 60_000, 10)], true);
        assert_eq!(answered.len(), 1);
        // However many files answer, the sizes known stay bounded.
        for k in 0..2 * FILES_KNOWN {
            for (rq, read) in serve(&data, &[r(&format!("n{k}"), 0, 10)]) {
                p.take(rq, read);
            }
        }
        assert!(p.files.len() <= FILES_KNOWN + 4, "{}", p.files.len());
        // No more pieces: nothing is read on.
        let (out, _) = p.shape(vec![r("c", 20_000, 10)], false);
        assert_eq!(out, vec![r("c", 20_000, 10)]);
        // Past the file's end nothing is asked for.
        let (out, _) = p.shape(vec![r("a", 99_990, 10)], true);
        assert_eq!(out, vec![r("a", 99_990, 10)]);
    }
}
