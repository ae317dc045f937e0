//! Tile files read on past what a piece asks for, for the pieces after it.
//!
//! A read in pieces fetches each piece's tiles (or walks their chunk
//! headers) with requests of its own, a few a file a piece:
//! `sparse_bounded_tiles` read under 16 KiB to 1 MiB made 467 requests
//! where the whole read makes 42 to 128, and on an object store each is a
//! round trip. Its pieces mostly go along each file (a fragment's tiles in
//! order, a tile's chunks in order), so while pieces remain a request that
//! goes along its file (it begins inside, or within a page past, what the
//! file was asked for or read on before) is sent longer: never into the
//! next request to its file nor past the file's end (known from an earlier
//! answer), by twice its length until some bytes the file read on were
//! used, then by 8 times, and not at all once a request jumped past more
//! of them unused than were used (a band reading a chunk a tile). The
//! whole read is kept: a later request inside it is answered from it with
//! no request, one that begins inside it asks for the rest alone. The
//! batch [`super::Reader::plan_ahead`] hands the driver goes the same way;
//! narrow reads' probes are not read on.
//!
//! The bytes kept are memory outside the budget, as the reader's decoded
//! chunks ([`super::chunk_cache::ChunkCache`]) and carried chunks are: at
//! most [`Prefetch::LIMIT`], whatever the budget, counting each longer
//! read's whole buffer. Answers are copied out of them (a piece holding a
//! slice would hold the buffer past its own share: under 1 MiB,
//! `sparse_bounded_tiles` peaked at 4 MB so).

use super::tiles::FastHash;
use std::collections::HashMap;
use tdb_storage::{ByteRange, RangeRead, RangeRequest};

/// Bytes a request is read on at least, where the file and the limit
/// have them (a page: a tile of a few cells' validity is 200 bytes); and
/// the gap past what a file was asked for that a request going along it
/// may leave.
const LEAST: u64 = 4 << 10;

/// A request is read on at most this many times its own length: files
/// read by turns then share the limit by what their pieces ask of each
/// (with the limit's share alone, one file's whole read let go of the
/// others' before their pieces came, and `sparse_bounded_tiles` read
/// under 1 MiB fetched its bytes 5 times over).
const AHEAD_TIMES: u64 = 8;

/// A file whose bytes read on no request has used yet is read on by at
/// most this many times a request (a dense band reading a chunk a tile
/// read on into chunks it never wanted: a third more bytes at 8 times).
const FIRST_TIMES: u64 = 2;

/// Files known at most (sizes, spans), past those with bytes kept.
const FILES_KNOWN: usize = 4096;

/// Bytes read on, kept: where they start in their file, the bytes (the
/// whole buffer of their read, which is what they cost), when last given
/// or used (the prefetch's clock, a tick each: no two alike).
#[derive(Debug)]
struct Kept {
    at: u64,
    bytes: bytes::Bytes,
    when: u64,
    /// Where the bytes given from it so far end (the requests it answers
    /// when it came, then later ones), and whether the rest was counted
    /// as wasted ([`FileAhead::wasted`]).
    given: u64,
    counted: bool,
}

impl Kept {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn end(&self) -> u64 {
        self.at.saturating_add(self.len())
    }
}

/// Requests remembered a file: where reads that go along it (several
/// tiles of one file by turns) ask next.
const SPANS: usize = 8;

/// One file's bytes read on (several places: a read may go along several
/// tiles of one file by turns), its size once an answer told it, and
/// the spans its latest requests asked for.
#[derive(Debug, Default)]
struct FileAhead {
    size: Option<u64>,
    kept: Vec<Kept>,
    spans: std::collections::VecDeque<(u64, u64)>,
    /// Bytes read on that later requests used, and that a request
    /// jumping past them left unused: the file is read on while it uses
    /// what it wastes, by [`FIRST_TIMES`] a request until it used some.
    used: u64,
    wasted: u64,
}

impl FileAhead {
    /// Whether a request from `offset` goes along the file: from inside
    /// an earlier one or bytes kept (a walk's windows overlap), or at most
    /// a page past its end. Reads that jump over bytes they never want (a
    /// band across tiles' chunks) read on into bytes never used: a third
    /// more than the whole read.
    fn along(&self, offset: u64) -> bool {
        let within = |at: u64, end: u64| at <= offset && offset <= end.saturating_add(LEAST);
        self.spans.iter().any(|&(at, end)| within(at, end))
            || (self.kept.iter()).any(|k| within(k.at, k.end()))
    }

    /// A request from `offset` that does not go along the file: the bytes
    /// kept before it that no request used are wasted.
    fn jumped(&mut self, offset: u64) {
        for k in &mut self.kept {
            if !k.counted && k.end() < offset {
                k.counted = true;
                self.wasted = (self.wasted).saturating_add(k.end().saturating_sub(k.given));
            }
        }
    }

    /// How many times its own length a request may be read on (`remote`:
    /// see [`Prefetch::remote`]).
    fn times(&self, remote: bool) -> u64 {
        match (self.wasted > self.used, self.used > 0 || remote) {
            (true, _) => 0,
            (false, true) => AHEAD_TIMES,
            (false, false) => FIRST_TIMES,
        }
    }

    fn asked(&mut self, span: (u64, u64)) {
        if !self.spans.contains(&span) {
            if self.spans.len() >= SPANS {
                self.spans.pop_front();
            }
            self.spans.push_back(span);
        }
    }
}

/// A request asked for that a request sent answers: from the sent
/// one's offset, after `head` (bytes kept that begin it).
#[derive(Debug)]
struct Asked {
    request: RangeRequest,
    head: bytes::Bytes,
}

/// The bytes a read keeps past what its pieces asked for. See the module
/// docs.
#[derive(Debug, Default)]
pub(crate) struct Prefetch {
    files: HashMap<String, FileAhead, FastHash>,
    /// Requests sent other than asked (longer, or the rest past bytes
    /// kept): each with those it answers.
    sent: HashMap<RangeRequest, Vec<Asked>, FastHash>,
    /// Bytes kept at most (none: nothing is read on).
    limit: u64,
    /// Bytes kept now.
    held: u64,
    clock: u64,
    /// Whether requests cost a round trip (remote storage): files are
    /// read on by [`AHEAD_TIMES`] from the first, not [`FIRST_TIMES`]
    /// (a file's first read on, shorter, cost a request more a file where
    /// requests cost more than bytes: 64 ranges against 54 for
    /// `sparse_bounded_tiles`), and from their first request (40).
    remote: bool,
}

impl Prefetch {
    /// The bytes a read keeps at most, under any budget: a fixed cost, as
    /// the chunk caches are. A share of the budget starved the small ones:
    /// under 64 KiB, 16 KiB of pages a file went before their pieces came
    /// (`sparse_bounded_tiles` fetched twice its bytes), so reads under
    /// 256 KiB went unread-on and made a request a chunk (467 against the
    /// whole read's 42 to 115; 65 with this).
    pub const LIMIT: u64 = 256 << 10;

    /// A prefetch keeping at most `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Prefetch {
            limit,
            ..Prefetch::default()
        }
    }

    /// Says whether requests cost a round trip (remote storage).
    pub fn set_remote(&mut self, remote: bool) {
        self.remote = remote;
    }

    /// A batch of requests as it goes out: those the bytes kept answer
    /// (returned with their answers), and the rest, each that begins
    /// inside bytes kept asking for what follows them alone, and each that
    /// goes along its file made longer where pieces come after this one
    /// (`more`): see the module docs.
    pub fn shape(
        &mut self,
        requests: Vec<RangeRequest>,
        more: bool,
    ) -> (Vec<RangeRequest>, Vec<(RangeRequest, RangeRead)>) {
        let mut answered = Vec::new();
        let mut out = Vec::with_capacity(requests.len());
        // For each request sent: the one asked for, the bytes kept that
        // begin it (the request then asks for the rest), and whether it
        // goes along its file (before this batch).
        let mut asked = Vec::with_capacity(requests.len());
        let mut spans = Vec::with_capacity(requests.len());
        for r in requests {
            let along = self.along(&r);
            if let (ByteRange::Bounded { offset, len }, None) = (r.range, &r.front) {
                spans.push((r.key.clone(), (offset, offset.saturating_add(len))));
                if let (false, Some(f)) = (along, self.files.get_mut(&r.key)) {
                    f.jumped(offset);
                }
            }
            let kept = self.kept_part(&r);
            let size = self.files.get(&r.key).and_then(|f| f.size);
            let (send, head) = match (kept, r.range, size) {
                (Some((bytes, at)), ByteRange::Bounded { offset, len }, Some(size)) => {
                    let end = offset.saturating_add(len);
                    if at >= end {
                        let read = RangeRead {
                            bytes: bytes.into(),
                            file_size: size,
                            arranged: false,
                        };
                        answered.push((r, read));
                        continue;
                    }
                    let rest = ByteRange::new(at, end.saturating_sub(at));
                    (RangeRequest::new(&r.key, rest), bytes::Bytes::from(bytes))
                }
                _ => (r.clone(), bytes::Bytes::new()),
            };
            out.push(send);
            asked.push((r, head, along));
        }
        for (key, span) in spans {
            self.file(&key).asked(span);
        }
        if self.limit > 0 && more {
            self.read_on(&mut out, &asked);
        }
        // A request sent for others answers them all: sent once (two asked
        // for may begin inside the same bytes kept and end alike).
        let mut sent = Vec::with_capacity(out.len());
        let mut mapped: std::collections::HashSet<RangeRequest, FastHash> = Default::default();
        for (r, (a, head, _)) in out.into_iter().zip(asked) {
            if r == a {
                sent.push(r);
                continue;
            }
            let entry = self.sent.entry(r.clone()).or_default();
            entry.push(Asked { request: a, head });
            if mapped.insert(r.clone()) {
                sent.push(r);
            }
        }
        (sent, answered)
    }

    /// Makes longer the requests of `out` (`asked`: what each stands for)
    /// that go along their files, each within its share of the limit and
    /// never into the next request to its file.
    fn read_on(&self, out: &mut [RangeRequest], asked: &[(RangeRequest, bytes::Bytes, bool)]) {
        // The requests that may go longer, by file and offset (those that
        // do not go along their files still bound those before them).
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
            let Some(file) = self.files.get(key) else {
                continue;
            };
            let (Some(size), times) = (file.size, file.times(self.remote)) else {
                continue;
            };
            if times == 0 || !asked.get(i).is_some_and(|a| a.2) {
                continue;
            }
            let end = offset.saturating_add(len);
            let next = match along.get(k.saturating_add(1)) {
                Some(&(next_key, next_offset, _, _)) if next_key == key => next_offset,
                _ => size,
            };
            // (By what was asked: the rest past bytes kept may be a few.)
            let asked_len = asked.get(i).map_or(len, |a| match a.0.range {
                ByteRange::Bounded { len, .. } => len,
                _ => 0,
            });
            let more = (next.min(size).saturating_sub(end))
                .min(share.saturating_sub(len))
                .min(asked_len.saturating_mul(times).max(LEAST));
            if more > 0 {
                longer.push((i, more));
            }
        }
        for (i, more) in longer {
            if let Some(r) = out.get_mut(i) {
                if let ByteRange::Bounded { offset, len } = r.range {
                    r.range = ByteRange::new(offset, len.saturating_add(more));
                }
            }
        }
    }

    /// File `key`'s size as its fragment's metadata records it, until an
    /// answer tells it. (TileDB derives a data file's last tile from it,
    /// so it is the file's; where it is not, a request read on past the
    /// end fails as the read of that last tile would.)
    pub fn recorded_size(&mut self, key: &str, size: u64) {
        self.file(key).size.get_or_insert(size);
    }

    /// Requests `shape` sent that will not be answered (a batch planned
    /// ahead that was not asked for): what they stood for is dropped.
    pub fn forget(&mut self, sent: &[RangeRequest]) {
        for r in sent {
            self.sent.remove(r);
        }
    }

    /// What is known of file `key`, made known. Past [`FILES_KNOWN`]
    /// files those with nothing kept are forgotten (a read over many
    /// fragments would know every file's size and spans otherwise).
    fn file(&mut self, key: &str) -> &mut FileAhead {
        if self.files.len() >= FILES_KNOWN && !self.files.contains_key(key) {
            self.files.retain(|_, f| !f.kept.is_empty());
        }
        self.files.entry(key.to_owned()).or_default()
    }

    /// Whether `r` goes along its file ([`FileAhead::along`]).
    /// On remote storage a file's first request counts as going along it
    /// too: a request there costs more than the bytes read on past it.
    fn along(&self, r: &RangeRequest) -> bool {
        match (r.range, self.files.get(&r.key)) {
            (ByteRange::Bounded { offset, .. }, Some(f)) => {
                f.along(offset) || (self.remote && f.spans.is_empty() && f.kept.is_empty())
            }
            _ => false,
        }
    }

    /// What the bytes kept hold of `r`, from its start: each place kept
    /// that goes on from where the last ended, joined (a window of the
    /// limit cuts the last chunk it reached short: asked for whole again
    /// it cost a quarter more bytes). `None` where they hold none of it;
    /// else its bytes from the start and where they stop.
    fn kept_part(&mut self, r: &RangeRequest) -> Option<(Vec<u8>, u64)> {
        let (ByteRange::Bounded { offset, len }, None) = (r.range, &r.front) else {
            return None;
        };
        let end = offset.saturating_add(len);
        self.clock = self.clock.saturating_add(1);
        let clock = self.clock;
        let file = self.files.get_mut(&r.key)?;
        let mut at = offset;
        let mut got = Vec::new();
        while at < end {
            let Some(kept) = (file.kept.iter_mut()).find(|k| k.at <= at && at < k.end()) else {
                break;
            };
            let upto = kept.end().min(end);
            let from = usize::try_from(at.saturating_sub(kept.at)).ok()?;
            let to = usize::try_from(upto.saturating_sub(kept.at)).ok()?;
            if got.is_empty() {
                got.reserve_exact(usize::try_from(len).ok()?);
            }
            got.extend_from_slice(kept.bytes.get(from..to)?);
            kept.when = clock;
            if upto > kept.given {
                let new = upto.saturating_sub(at.max(kept.given));
                kept.given = upto;
                file.used = file.used.saturating_add(new);
            }
            at = upto;
        }
        (at > offset).then_some((got, at))
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
            self.file(&sent.key).size = Some(read.file_size);
        }
        let Some(asked) = self.sent.remove(&sent) else {
            return vec![(sent, read)];
        };
        let Some(read) = read else {
            return asked.into_iter().map(|a| (a.request, None)).collect();
        };
        let mut out = Vec::with_capacity(asked.len());
        let mut given = 0u64;
        for Asked { request, head } in asked {
            let len = match request.range {
                ByteRange::Bounded { offset, len } => {
                    given = given.max(offset.saturating_add(len));
                    len
                }
                _ => 0,
            };
            let rest = usize::try_from(len)
                .unwrap_or(usize::MAX)
                .saturating_sub(head.len())
                .min(read.bytes.len());
            let rest = read.bytes.get(..rest).unwrap_or_default();
            let mut bytes = Vec::with_capacity(head.len().saturating_add(rest.len()));
            bytes.extend_from_slice(&head);
            bytes.extend_from_slice(rest);
            let part = RangeRead {
                bytes: bytes.into(),
                ..read.clone()
            };
            out.push((request, Some(part)));
        }
        // The whole read is kept, what was asked too: a walk asks again
        // for a chunk its window cut short, from inside that window.
        if let (ByteRange::Bounded { offset, .. }, true) =
            (sent.range, read.bytes.len() as u64 <= self.limit)
        {
            let kept = Kept {
                at: offset,
                bytes: read.bytes,
                when: {
                    self.clock = self.clock.saturating_add(1);
                    self.clock
                },
                given,
                counted: false,
            };
            self.keep(&sent.key, kept);
        }
        out
    }

    /// Keeps `new` bytes of file `key` in place of those kept there that
    /// it overlaps, letting go of the least recently used bytes past the
    /// limit.
    fn keep(&mut self, key: &str, new: Kept) {
        let file = self.file(key);
        let mut freed = 0u64;
        file.kept.retain(|k| {
            let overlaps = k.at < new.end() && new.at < k.end();
            if overlaps {
                freed = freed.saturating_add(k.len());
            }
            !overlaps
        });
        let added = new.len();
        file.kept.push(new);
        let mut newest = file.kept.len().saturating_sub(1);
        self.held = self.held.saturating_sub(freed).saturating_add(added);
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
                    self.held = self.held.saturating_sub(gone.len());
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
        // unknown, then nothing kept), a first read on of twice the 3,000
        // bytes asked (nothing read on used yet), then about one a read on
        // of 8 times (its own and 27,000 more).
        let reads_on = 200_000u64.div_ceil(27_000) as usize;
        assert!(sent <= 5 + reads_on, "{sent} requests sent");
    }

    /// A file is read on by what its reads used of what was read on
    /// before: twice a request at first, 8 times once some was used, and
    /// not at all once a read jumped past more bytes read on than it used
    /// (a band reading a chunk a tile). A request that begins inside bytes
    /// kept and goes past them asks for the rest alone, its answer joined
    /// from both.
    #[test]
    fn reads_on_go_by_what_the_file_used() {
        let data = file(1 << 20);
        let r = |o: u64, l: u64| RangeRequest::new("f", ByteRange::new(o, l));
        let mut p = Prefetch::new(256 << 10);
        let fetch = |p: &mut Prefetch, asked: Vec<RangeRequest>| {
            let (out, answered) = p.shape(asked.clone(), true);
            let mut got: Vec<_> = answered.into_iter().map(|(r, a)| (r, Some(a))).collect();
            for (rq, read) in serve(&data, &out) {
                got.extend(p.take(rq, read));
            }
            for (rq, read) in &got {
                let (o, l) = rq.range.resolve("f", data.len() as u64).unwrap();
                let read = read.as_ref().unwrap();
                assert_eq!(
                    &read.bytes[..],
                    &data[o as usize..(o + l) as usize],
                    "{rq:?}"
                );
            }
            assert_eq!(got.len(), asked.len());
            out
        };
        // Size unknown: as asked; then along, by twice.
        assert_eq!(fetch(&mut p, vec![r(0, 10_000)]), vec![r(0, 10_000)]);
        assert_eq!(
            fetch(&mut p, vec![r(10_000, 10_000)]),
            vec![r(10_000, 30_000)]
        );
        // Inside and past what was kept: the rest alone, read on by 8
        // times what was asked (5,000 bytes read on used).
        let rest = 5_000 + 80_000;
        assert_eq!(
            fetch(&mut p, vec![r(35_000, 10_000)]),
            vec![r(40_000, rest)]
        );
        // A jump past unused bytes read on (80,000 against 5,000 used):
        // as asked, and the file is no longer read on.
        assert_eq!(
            fetch(&mut p, vec![r(500_000, 10_000)]),
            vec![r(500_000, 10_000)]
        );
        assert_eq!(
            fetch(&mut p, vec![r(510_000, 10_000)]),
            vec![r(510_000, 10_000)]
        );
    }

    /// Requests of one batch that begin inside the same bytes kept and end
    /// alike ask for the same rest: it goes out once and answers both.
    #[test]
    fn requests_for_the_same_rest_go_out_once() {
        let data = file(100_000);
        let r = |o: u64, l: u64| RangeRequest::new("f", ByteRange::new(o, l));
        let mut p = Prefetch::new(256 << 10);
        for asked in [r(0, 1000), r(1000, 1000)] {
            let (out, _) = p.shape(vec![asked], true);
            for (rq, read) in serve(&data, &out) {
                p.take(rq, read);
            }
        }
        // Kept: 1,000 to 6,096 (read on by a page). Both ask for 6,096 on.
        let asked = vec![r(5000, 3000), r(5500, 2500)];
        let (out, answered) = p.shape(asked.clone(), false);
        assert!(answered.is_empty());
        assert_eq!(out, vec![r(6096, 1904)]);
        let got: Vec<_> = (serve(&data, &out).into_iter())
            .flat_map(|(rq, read)| p.take(rq, read))
            .collect();
        assert_eq!(got.len(), 2);
        for (rq, read) in got {
            assert!(asked.contains(&rq));
            let (o, l) = rq.range.resolve("f", data.len() as u64).unwrap();
            assert_eq!(
                &read.unwrap().bytes[..],
                &data[o as usize..(o + l) as usize]
            );
        }
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
            // (The first request to a file goes out as asked: its size
            // is not known.)
            let (out, _) = p.shape(vec![r(k, 0, 10)], true);
            assert_eq!(out, vec![r(k, 0, 10)]);
            for (rq, read) in serve(&data, &out) {
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
        // One file alone going on from its bytes kept then takes the whole
        // limit: the others go, the least recently used first, its own
        // older bytes too.
        // (Some of its bytes read on used: 8 times what is asked.)
        let (out, answered) = p.shape(vec![r("a", 5000, 10), r("a", 10 + share, 4000)], true);
        assert_eq!(answered.len(), 1);
        assert_eq!(out, vec![r("a", 10 + share, 32 << 10)]);
        for (rq, read) in serve(&data, &out) {
            p.take(rq, read);
        }
        assert_eq!(p.held(), 32 << 10);
        let (_, answered) = p.shape(vec![r("b", 30, 10), r("a", 20, 10)], true);
        assert!(answered.is_empty());
        let (_, answered) = p.shape(vec![r("a", 40_000, 10)], true);
        assert_eq!(answered.len(), 1);
        // A request that jumps past what its file was asked for (more than
        // a page) goes out as asked: the bytes between are not wanted.
        let (out, _) = p.shape(vec![r("a", 50_000, 4000)], true);
        assert_eq!(out, vec![r("a", 50_000, 4000)]);
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
