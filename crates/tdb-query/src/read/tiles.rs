//! Fetching and unfiltering tiles: the byte ranges a set of tiles needs,
//! and the decoded tiles those bytes give.

use super::chunk_cache::ChunkCache;
use super::fields::FragField;
use crate::column::Column;
use crate::validity::ValidityRef;
use crate::{QueryError, Result};
use bytes::Bytes;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use tdb_filters::Workspace;
use tdb_format::{DataPart, Datatype, FormatVersion};
use tdb_fragment::FragmentMetadata;
use tdb_storage::Answers;
use tdb_storage::{ByteRange, RangeRead, RangeRequest};
use tdb_tile::{
    unfiltered_size, ChunkWalk, FieldTile, FilteredChunk, TileData, TileFilters, TileShape,
    WalkPoint, WalkedChunk,
};

/// A tile of one field of one fragment: (fragment, field slot, tile).
pub(crate) type TileKey = (usize, usize, u64);

/// The hasher of the reader's maps keyed by tiles and chunks, looked up
/// many times a piece: seeded per process, as the standard one, and
/// several times faster on small integer keys (SipHash took 5% of a read
/// of pieces of a few cells).
pub(crate) type FastHash = foldhash::fast::RandomState;

/// One field's unfiltered tile: its cells from `first` on (a sliced tile,
/// see [`TileFetch::slice`], holds the cells its piece uses; others hold all).
#[derive(Debug, Default)]
pub(crate) struct DecodedTile {
    pub fixed: Vec<u8>,
    pub offsets: Vec<u64>,
    pub var: Vec<u8>,
    pub validity: Option<Vec<u8>>,
    pub first: u64,
    /// Decoded only in the chunks holding cells of its piece's ranges
    /// ([`TileBound`]): no later piece may use it.
    pub partial: bool,
}

impl From<FieldTile> for DecodedTile {
    fn from(t: FieldTile) -> Self {
        DecodedTile {
            fixed: t.fixed,
            offsets: t.offsets,
            var: t.var,
            validity: t.validity,
            first: 0,
            partial: false,
        }
    }
}

impl DecodedTile {
    pub fn column(&self, datatype: Datatype, cell_val_num: u32) -> Column<'_> {
        Column {
            datatype,
            cell_val_num,
            fixed: &self.fixed,
            offsets: &self.offsets,
            var: &self.var,
            validity: self.validity.as_deref().map(ValidityRef::Bytes),
        }
    }
}

/// One tile to fetch: where each of its parts is, the cells the read uses
/// when known before decoding (dense tiles: sorted disjoint half-open
/// ranges in the tile's cell order), and whether it is *sliced*: only the
/// chunks holding those cells are fetched (found by a [`ChunkWalk`]) and
/// decoded, and the decoded tile holds the cells from the first used to
/// the last ([`TileFetch::slice`]), so a large tile costs the memory of the
/// cells a piece reads, not of the tile. A sliced var-size tile's data is
/// fetched once its offsets are: `var` is then the data's unfiltered bytes
/// those cells hold.
pub(crate) struct TileFetch {
    pub key: TileKey,
    pub parts: Vec<(DataPart, String, std::ops::Range<u64>)>,
    /// Cells in the tile.
    pub cells: u64,
    pub needed: Option<Vec<(u64, u64)>>,
    pub sliced: bool,
    pub var: Option<std::ops::Range<u64>>,
    /// A sliced tile that holds its `needed` runs of cells one after
    /// another (a block of it: `super::dense_blocks`), not every cell from
    /// the first used to the last: a cell's position in the decoded tile
    /// is its place in that packing (`DecodedTile::first` is 0).
    pub packed: bool,
}

impl TileFetch {
    /// Cells a sliced tile holds once decoded.
    pub fn held(&self) -> Option<u64> {
        let needed = self.needed.as_ref().filter(|_| self.sliced)?;
        match self.packed {
            true => {
                Some((needed.iter()).fold(0u64, |n, &(a, b)| n.saturating_add(b.saturating_sub(a))))
            }
            false => self.slice().map(|(lo, hi)| hi.saturating_sub(lo)),
        }
    }

    /// A sliced tile's cells once decoded: from the first used to the
    /// last (half-open).
    pub fn slice(&self) -> Option<(u64, u64)> {
        let needed = self.needed.as_ref().filter(|_| self.sliced)?;
        Some((needed.first()?.0, needed.last()?.1))
    }
}

/// The unfiltered bytes of a part of `cell_size` bytes a cell that hold
/// the cells `needed`.
fn needed_bytes(needed: &[(u64, u64)], cell_size: u64) -> Vec<std::ops::Range<u64>> {
    (needed.iter())
        .map(|&(a, b)| a.saturating_mul(cell_size)..b.saturating_mul(cell_size))
        .collect()
}

/// Whether tiles of `ff` (at format `version`) can be read in part: every
/// part maps cells to bytes (fixed-size values, offsets and validity), or
/// is var data whose offsets are in their own part (not pre-v5 zipped
/// coordinates, nor var data whose filters keep the offsets inside).
pub(crate) fn sliceable(ff: &FragField, version: FormatVersion) -> bool {
    ff.zipped.is_none()
        && ff.parts.iter().all(|(p, pf)| {
            pf.cell_size > 0
                && match p {
                    DataPart::Fixed | DataPart::Validity => true,
                    DataPart::Var => !pf.tile_filters(version, None).offsets_inside(),
                }
        })
}

/// Whether `fetch`'s part `p` is the offsets of var-size cells.
fn offsets_part(fetch: &TileFetch, p: usize) -> bool {
    matches!(fetch.parts.get(p), Some((DataPart::Fixed, _, _)))
        && fetch
            .parts
            .iter()
            .any(|(kind, _, _)| *kind == DataPart::Var)
}

/// The parts of tile `key` of `ff` (its files found, [`FragField::in_dir`])
/// and their byte ranges.
pub(crate) fn plan_tile(
    m: &FragmentMetadata,
    ff: &FragField,
    key: TileKey,
    cells: u64,
    needed: Option<Vec<(u64, u64)>>,
    slice: bool,
) -> Result<TileFetch> {
    let tile = key.2;
    let mut parts = Vec::new();
    for (k, (part, _)) in ff.parts.iter().enumerate() {
        let range = match part {
            DataPart::Fixed => m.tile_range(ff.index, tile)?,
            DataPart::Var => m.var_tile_range(ff.index, tile)?,
            DataPart::Validity => m.validity_tile_range(ff.index, tile)?,
        };
        let path = (ff.paths.get(k).cloned()).ok_or_else(|| {
            QueryError::invalid("a field's files not named for its fragment (a reader bug)")
        })?;
        parts.push((*part, path, range));
    }
    // The caller saw that the fragment's fields are `sliceable`.
    let sliced = slice && needed.as_ref().is_some_and(|n| !n.is_empty());
    Ok(TileFetch {
        key,
        parts,
        cells,
        needed,
        sliced,
        var: None,
        packed: false,
    })
}

/// Runs of cells `needed` (sorted, disjoint) each with the cell after it
/// (where its last cell's var data ends), up to `cells`, merged where
/// they meet.
fn with_ends(needed: &[(u64, u64)], cells: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(needed.len());
    for &(a, b) in needed {
        let b = b.saturating_add(1).min(cells);
        match out.last_mut() {
            Some(last) if last.1 >= a => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// The unfiltered bytes of a sliced var-size tile's data that its runs of
/// cells ([`TileFetch::needed`]) hold: from each run's first cell's
/// offset to the offset of the cell after it (the data's end, `var_size`,
/// after the tile's last cell), read out of its offsets' chunks `found`,
/// decoded with `filters`.
pub(crate) fn var_bytes(
    fetch: &TileFetch,
    found: &[(WalkedChunk, Bytes)],
    (filters, part): (&TileFilters<'_>, usize),
    var_size: u64,
    cache: &ChunkCache,
) -> Result<Vec<Range<u64>>> {
    let path = fetch.parts.first().map_or("", |p| p.1.as_str());
    let tile = fetch.key.2;
    let needed = (fetch.needed.as_deref())
        .filter(|_| fetch.sliced)
        .ok_or_else(|| QueryError::invalid("var data of a tile that is not sliced"))?;
    let mut ws = Workspace::default();
    // The last chunk decoded: its index and unfiltered bytes.
    let mut decoded: Option<(u64, Vec<u8>)> = None;
    let mut offset = |cell: u64| -> Result<u64> {
        if cell >= fetch.cells {
            return Ok(var_size);
        }
        let at = cell.saturating_mul(8);
        let (c, bytes) = (found.iter())
            .find(|(c, _)| c.unfiltered.start <= at && at.saturating_add(8) <= c.unfiltered.end)
            .ok_or_else(|| {
                QueryError::corrupt(
                    path,
                    tile,
                    format!("no chunk holds the offset of cell {cell}"),
                )
            })?;
        // No chunk reaches past the tile's offsets: a header's claim
        // sizes no allocation beyond them.
        if c.unfiltered.end > fetch.cells.saturating_mul(8) {
            return Err(QueryError::corrupt(
                path,
                tile,
                format!("chunk {} reaches past the tile's offsets", c.index),
            ));
        }
        if decoded.as_ref().is_none_or(|(k, _)| *k != c.index) {
            let data = match cache.take(fetch.key, part, c.index) {
                Some(kept) => kept,
                None => {
                    let (_, chunk) = tdb_tile::filtered_chunk(bytes)
                        .map_err(|e| QueryError::corrupt(path, tile, e.to_string()))?;
                    let mut out = TileData::default();
                    let location = format!("{path} tile {tile}");
                    let index = usize::try_from(c.index).unwrap_or(usize::MAX);
                    (filters.unfilter_into(&location, &mut ws, &[chunk], index, false, &mut out))
                        .map_err(|e| tile_error(path, tile, e))?;
                    out.data
                }
            };
            if let Some((k, old)) = decoded.replace((c.index, data)) {
                cache.give(fetch.key, part, k, old);
            }
        }
        let data = decoded.as_ref().map_or(&[][..], |(_, d)| d.as_slice());
        let i = usize::try_from(at.saturating_sub(c.unfiltered.start)).unwrap_or(usize::MAX);
        (data.get(i..i.saturating_add(8)))
            .and_then(|b| Some(u64::from_le_bytes(b.try_into().ok()?)))
            .ok_or_else(|| QueryError::corrupt(path, tile, "an offsets chunk shorter than told"))
    };
    let mut bytes: Vec<Range<u64>> = Vec::with_capacity(needed.len());
    for &(a, b) in needed {
        let (start, end) = (offset(a)?, offset(b)?);
        if start > end || end > var_size || bytes.last().is_some_and(|r| r.end > start) {
            return Err(QueryError::corrupt(
                path,
                tile,
                format!("cells {a}..{b} hold var bytes {start}..{end} of {var_size}"),
            ));
        }
        bytes.push(start..end);
    }
    // The last chunk decoded stays for the decoding of the tile.
    if let Some((k, data)) = decoded {
        cache.give(fetch.key, part, k, data);
    }
    Ok(bytes)
}

/// The requests for a set of byte ranges: a field's tiles (and a fragment's
/// metadata sections) sit next to each other in their file, so neighbouring
/// ranges are merged into one request.
pub(crate) struct Coalesced {
    pub requests: Vec<RangeRequest>,
    /// Per range, in the order given: its request, offset in it, length.
    parts: Vec<(usize, usize, usize)>,
}

impl Coalesced {
    /// The requests for `ranges` (file, byte range), neighbours merged
    /// into runs of any length.
    pub fn new<'p>(ranges: impl IntoIterator<Item = (&'p str, std::ops::Range<u64>)>) -> Self {
        Self::capped(ranges, u64::MAX)
    }

    /// The requests for `ranges`, neighbours merged until a run reaches
    /// `cap` bytes (a range is never cut: a run ends at the range that
    /// takes it to `cap` or past).
    pub fn capped<'p>(
        ranges: impl IntoIterator<Item = (&'p str, std::ops::Range<u64>)>,
        cap: u64,
    ) -> Self {
        let mut all: Vec<(&str, u64, u64, usize)> = ranges
            .into_iter()
            .enumerate()
            .map(|(k, (path, r))| (path, r.start, r.end, k))
            .collect();
        all.sort_unstable();
        let mut requests: Vec<RangeRequest> = Vec::new();
        let mut parts = vec![(0, 0, 0); all.len()];
        let mut open: Option<(&str, u64, u64)> = None;
        for (path, start, end, k) in all {
            let extends = matches!(open, Some((p, s, e)) if p == path && e == start
                && e.saturating_sub(s) < cap);
            if !extends {
                if let Some((p, s, e)) = open.take() {
                    requests.push(RangeRequest::new(p, ByteRange::new(s, e.saturating_sub(s))));
                }
                open = Some((path, start, start));
            }
            if let (Some((_, s, e)), Some(part)) = (&mut open, parts.get_mut(k)) {
                *e = end;
                *part = (
                    requests.len(),
                    start.saturating_sub(*s) as usize,
                    end.saturating_sub(start) as usize,
                );
            }
        }
        if let Some((p, s, e)) = open {
            requests.push(RangeRequest::new(p, ByteRange::new(s, e.saturating_sub(s))));
        }
        Coalesced { requests, parts }
    }

    /// The requests for every part of `fetches` read whole (not sliced)
    /// but those `apart` (fetch, part), in runs of at most about `cap`
    /// bytes.
    pub fn tiles(fetches: &[TileFetch], cap: u64, apart: &Apart) -> Self {
        Coalesced::capped(
            whole_parts(fetches, apart).map(|(_, _, path, r)| (path, r)),
            cap,
        )
    }

    /// Each range's bytes (in the order given) from the answers to
    /// `requests`; `None` where a file was missing or came back short.
    pub fn split(&self, reads: &[Option<RangeRead>]) -> Vec<Option<Bytes>> {
        self.parts
            .iter()
            .map(|&(r, off, len)| {
                let b = &reads.get(r)?.as_ref()?.bytes;
                let end = off.checked_add(len)?;
                (end <= b.len()).then(|| b.slice(off..end))
            })
            .collect()
    }
}

/// Parts of a piece's tiles fetched on their own: (fetch, part) of each
/// [`BareFetch`].
pub(crate) type Apart = std::collections::HashSet<(usize, usize), FastHash>;

/// The parts `bare` fetches on their own.
fn apart(bare: &[BareFetch]) -> Apart {
    bare.iter().map(|b| (b.fetch, b.part)).collect()
}

/// The parts of `fetches` read whole (not sliced) in one coalesced batch:
/// (fetch, part, file, byte range), all but those `apart`.
fn whole_parts<'f>(
    fetches: &'f [TileFetch],
    apart: &'f Apart,
) -> impl Iterator<Item = (usize, usize, &'f str, Range<u64>)> + 'f {
    (fetches.iter().enumerate())
        .filter(|(_, f)| !f.sliced)
        .flat_map(move |(i, f)| {
            (f.parts.iter().enumerate())
                .filter(move |(p, _)| !apart.contains(&(i, *p)))
                .map(move |(p, (_, path, r))| (i, p, path.as_str(), r.clone()))
        })
}

/// Parts stored without filters of at least this many bytes are fetched
/// on their own, their chunks' data apart from the headers
/// ([`BareFetch`]); smaller ones are copied out of their chunks as any
/// other (a copy costs less than a request of its own).
const BARE_MIN: u64 = 64 << 10;

/// Whether a whole tile's part of `kind` (`offsets`: a var field's fixed
/// part), `unfiltered` bytes, stored without filters, is fetched bare
/// ([`BareFetch`]): the values of a fixed-size field of [`BARE_MIN`] or
/// more. A part fetched bare is held once, its fetch buffer the tile.
pub(super) fn fetched_bare(kind: DataPart, offsets: bool, unfiltered: u64) -> bool {
    kind == DataPart::Fixed && !offsets && unfiltered >= BARE_MIN
}

/// A part of a tile stored without filters, fetched on its own with its
/// chunks' data (`data`, from the tile's first byte) asked for first
/// ([`RangeRequest::front`]): a local file answers it arranged, the data
/// contiguous, which is then the decoded part ([`PartBytes::Bare`]).
/// W2's dense reads of 256 KiB tiles copied every byte out of its chunks
/// into a fresh tile buffer.
struct BareFetch {
    fetch: usize,
    part: usize,
    data: Arc<[Range<u64>]>,
    got: Option<PartBytes>,
}

/// The part a bare fetch's answer gives: the data taken as the decoded
/// part when the answer is arranged and its headers say the chunks are
/// stored as they are; else the tile's bytes in file order, decoded as any
/// other (a backend that does not arrange, or a tile chunked otherwise).
fn bare_part(read: RangeRead, data: &[Range<u64>]) -> Result<PartBytes> {
    if !read.arranged {
        return Ok(PartBytes::Whole(read.bytes));
    }
    let kept = tdb_storage::front_len(data).and_then(|n| usize::try_from(n).ok());
    let kept = kept.unwrap_or(usize::MAX);
    let framing = read.bytes.get(kept..).unwrap_or_default();
    if tdb_tile::bare_framing_matches(framing, data) {
        let mut part = Vec::from(read.bytes);
        part.truncate(kept);
        return Ok(PartBytes::Bare(Mutex::new(part)));
    }
    let raw = tdb_storage::unarrange(&read.bytes, data)
        .ok_or_else(|| QueryError::invalid("an arranged answer does not fit its request"))?;
    Ok(PartBytes::Whole(Bytes::from(raw)))
}

/// A part's fetched bytes: the whole filtered tile, or (a sliced tile)
/// the chunks holding its needed cells, each with where it lies and its
/// bytes (header, metadata, data).
pub(crate) enum PartBytes {
    Whole(Bytes),
    Chunks(Vec<(WalkedChunk, Bytes)>),
    /// A part stored without filters, fetched with its chunks' data apart
    /// from their headers ([`tdb_tile::bare_chunk_data`]) and the headers
    /// checked: its unfiltered bytes as they are, which the decoding takes
    /// whole instead of copying them out of the chunks.
    Bare(Mutex<Vec<u8>>),
}

impl PartBytes {
    fn len(&self) -> usize {
        match self {
            PartBytes::Whole(b) => b.len(),
            PartBytes::Chunks(c) => c.iter().map(|(_, b)| b.len()).sum(),
            PartBytes::Bare(b) => b.lock().map_or(0, |b| b.len()),
        }
    }
}

/// Where the walks over each sliced tile's parts (tile, part) stood.
pub(crate) type WalkPoints = HashMap<(TileKey, usize), WalkStop, FastHash>;

/// Where a walk stood, and the last chunk it found: the next piece of the
/// same tile, which wants that chunk again (its first cells are in it),
/// takes its bytes instead of fetching them.
#[derive(Clone)]
pub(crate) struct WalkStop {
    point: WalkPoint,
    last: Option<(WalkedChunk, Bytes)>,
    /// The piece that walked (the reader's count of pieces started, see
    /// [`Fetching::finish`]).
    when: u64,
}

impl WalkStop {
    /// The tile's unfiltered bytes its last chunk holds, where its
    /// filtered bytes are kept for the next piece of the tile.
    pub fn carried(&self) -> Option<Range<u64>> {
        self.last.as_ref().map(|(c, _)| c.unfiltered.clone())
    }
}

/// Filtered bytes of last chunks kept for walks the latest piece did not
/// take (see [`Fetching::finish`]): memory outside the budget, as the
/// decoded chunks of [`ChunkCache`] are.
const CARRIED_LIMIT: usize = ChunkCache::LIMIT;

/// One sliced part's walk over its chunk headers, and the chunks found.
/// A var-size tile's data walk starts once its offsets are in (`walk` is
/// `None` until then; `from` is where an earlier walk stood).
struct PartWalk {
    fetch: usize,
    part: usize,
    walk: Option<ChunkWalk>,
    from: Option<WalkStop>,
    found: Vec<(WalkedChunk, Bytes)>,
}

/// A walk over `tile` for the unfiltered bytes `wanted`, from where an
/// earlier one stood (`from`); where that walk's last chunk holds the
/// first wanted bytes, its bytes go to `found` and the walk starts past it;
/// where they lie past that chunk, the walk starts past it too (its header
/// is not read again: a read cut inside a row of tiles walks each tile
/// once).
fn start_walk(
    tile: Range<u64>,
    mut wanted: Vec<Range<u64>>,
    window: u64,
    from: Option<&WalkStop>,
    found: &mut Vec<(WalkedChunk, Bytes)>,
) -> ChunkWalk {
    let first = wanted.iter().find(|r| r.start < r.end).map(|r| r.start);
    let carried = from.and_then(|stop| {
        let (chunk, bytes) = stop.last.as_ref()?;
        let first = first?;
        let past = stop.point.past(chunk)?;
        if first >= chunk.unfiltered.end {
            return Some((None, past));
        }
        (chunk.unfiltered.start <= first).then_some((Some((chunk, bytes)), past))
    });
    let Some((held, past)) = carried else {
        return ChunkWalk::resume(tile, wanted, window, from.map(|s| s.point));
    };
    let Some((chunk, bytes)) = held else {
        return ChunkWalk::resume(tile, wanted, window, Some(past));
    };
    found.push((chunk.clone(), bytes.clone()));
    let end = chunk.unfiltered.end;
    wanted.retain(|r| r.end > end);
    for r in &mut wanted {
        r.start = r.start.max(end);
    }
    ChunkWalk::resume(tile, wanted, window, Some(past))
}

/// Fetching a piece's tiles: whole tiles in one batch of requests, sliced
/// ones ([`TileFetch::sliced`]) by walking their chunk headers, one batch per step of
/// every walk (the first batch carries the whole tiles too).
pub(crate) struct Fetching {
    fetches: Vec<TileFetch>,
    window: u64,
    coalesced: Coalesced,
    /// Parts stored without filters, fetched on their own (first batch,
    /// after the coalesced requests).
    bare: Vec<BareFetch>,
    /// The whole tiles' parts, once in.
    whole: Option<Vec<Option<Bytes>>>,
    walks: Vec<PartWalk>,
    /// The batch asked for: the whole tiles' requests first (first batch
    /// only), then one per walk in `asked`.
    pub answers: Answers,
    asked: Vec<usize>,
}

impl Fetching {
    /// Fetches `fetches`; part `p` of a tile `key` holds
    /// `cell_size(key, p)` bytes a cell, and a sliced one's walk reads at
    /// least `window` bytes at a time, from where an earlier piece's walk
    /// over it stood (`points`) when that is not past what this one wants.
    /// Fixed-size values that `bare(key, p)` says are stored without
    /// filters are fetched on their own ([`BareFetch`]).
    pub fn new(
        fetches: Vec<TileFetch>,
        cell_size: impl Fn(TileKey, usize) -> u64,
        bare: impl Fn(TileKey, usize) -> bool,
        window: u64,
        points: &WalkPoints,
        cap: u64,
    ) -> Self {
        let mut bares = Vec::new();
        for (f, fetch) in fetches.iter().enumerate().filter(|(_, f)| !f.sliced) {
            for (p, (kind, _, range)) in fetch.parts.iter().enumerate() {
                let size = cell_size(fetch.key, p);
                let unfiltered = fetch.cells.saturating_mul(size);
                if !fetched_bare(*kind, offsets_part(fetch, p), unfiltered) || !bare(fetch.key, p) {
                    continue;
                }
                let persisted = range.end.saturating_sub(range.start);
                let Some(data) = tdb_tile::bare_chunk_data(persisted, unfiltered, size) else {
                    continue;
                };
                bares.push(BareFetch {
                    fetch: f,
                    part: p,
                    data: data.into(),
                    got: None,
                });
            }
        }
        let coalesced = Coalesced::tiles(&fetches, cap, &apart(&bares));
        let mut walks = Vec::new();
        for (f, fetch) in fetches.iter().enumerate() {
            let Some(needed) = fetch.needed.as_deref().filter(|_| fetch.sliced) else {
                continue;
            };
            for (p, (kind, _, range)) in fetch.parts.iter().enumerate() {
                let from = points.get(&(fetch.key, p)).cloned();
                let mut found = Vec::new();
                let walk = match kind {
                    DataPart::Var => None,
                    // Var cells' offsets: one more after each run of
                    // cells, where its last cell ends (none past the
                    // tile's last: it ends with the data).
                    _ if offsets_part(fetch, p) => {
                        let cells = with_ends(needed, fetch.cells);
                        let wanted = needed_bytes(&cells, cell_size(fetch.key, p));
                        let r = range.clone();
                        Some(start_walk(r, wanted, window, from.as_ref(), &mut found))
                    }
                    _ => {
                        let wanted = needed_bytes(needed, cell_size(fetch.key, p));
                        let r = range.clone();
                        Some(start_walk(r, wanted, window, from.as_ref(), &mut found))
                    }
                };
                walks.push(PartWalk {
                    fetch: f,
                    part: p,
                    walk,
                    from,
                    found,
                });
            }
        }
        let mut requests = coalesced.requests.clone();
        for b in &bares {
            let Some((_, path, range)) = (fetches.get(b.fetch)).and_then(|f| f.parts.get(b.part))
            else {
                continue;
            };
            let len = range.end.saturating_sub(range.start);
            requests.push(
                RangeRequest::new(path.as_str(), ByteRange::new(range.start, len))
                    .with_front(b.data.clone()),
            );
        }
        let asked = Self::round(&fetches, &walks, &mut requests);
        Fetching {
            fetches,
            window,
            coalesced,
            bare: bares,
            whole: None,
            walks,
            answers: Answers::new(requests),
            asked,
        }
    }

    /// How many parts are fetched bare ([`BareFetch`]).
    pub fn bare_parts(&self) -> usize {
        self.bare.len()
    }

    /// Each unfinished walk's next read, appended to `requests`; which
    /// walks asked.
    fn round(
        fetches: &[TileFetch],
        walks: &[PartWalk],
        requests: &mut Vec<RangeRequest>,
    ) -> Vec<usize> {
        let mut asked = Vec::new();
        for (w, pw) in walks.iter().enumerate() {
            let (Some(r), Some((_, path, _))) = (
                pw.walk.as_ref().and_then(ChunkWalk::want),
                fetches.get(pw.fetch).and_then(|f| f.parts.get(pw.part)),
            ) else {
                continue;
            };
            requests.push(RangeRequest::new(
                path.as_str(),
                ByteRange::new(r.start, r.end.saturating_sub(r.start)),
            ));
            asked.push(w);
        }
        asked
    }

    /// Takes the answers to the batch asked for: `true` once every tile
    /// is in, else the next batch waits in `answers`. `var_bytes` gives a
    /// sliced var-size tile's data bytes its cells hold, from the chunks
    /// of its offsets found (see [`var_bytes`]).
    pub fn absorb(
        &mut self,
        mut var_bytes: impl FnMut(&TileFetch, &[(WalkedChunk, Bytes)]) -> Result<Vec<Range<u64>>>,
    ) -> Result<bool> {
        let answers = std::mem::replace(&mut self.answers, Answers::new(Vec::new()));
        let mut reads = answers.into_reads();
        if self.whole.is_none() {
            let mut walked = reads.split_off(self.coalesced.requests.len().min(reads.len()));
            self.whole = Some(self.coalesced.split(&reads));
            reads = walked.split_off(self.bare.len().min(walked.len()));
            // Each bare part's answer moves into its part: the only
            // holder of its buffer, which then becomes the decoded tile's.
            for (b, read) in self.bare.iter_mut().zip(walked) {
                b.got = read.map(|r| bare_part(r, &b.data)).transpose()?;
            }
        }
        for (&w, read) in self.asked.iter().zip(reads) {
            let Some(pw) = self.walks.get_mut(w) else {
                continue;
            };
            let Some(walk) = pw.walk.as_mut() else {
                continue;
            };
            let (path, tile) = match self.fetches.get(pw.fetch) {
                Some(f) => (f.parts.get(pw.part).map_or("", |p| p.1.as_str()), f.key.2),
                None => ("", 0),
            };
            let read = read.ok_or_else(|| {
                QueryError::from(tdb_fragment::FragmentError::missing(path, "data file"))
            })?;
            let start = walk.want().map_or(0, |r| r.start);
            let location = format!("{path} tile {tile}");
            let found =
                (walk.give(&location, &read.bytes)).map_err(|e| tile_error(path, tile, e))?;
            // Chunks found in a large window (object stores) are copied
            // out, so the window is not held for them; a read that is
            // mostly chunks found (a run of them) is kept as it is.
            let used = (found.iter()).fold(0u64, |n, c| {
                n.saturating_add(c.range.end.saturating_sub(c.range.start))
            });
            let copy = read.bytes.len() as u64 > used.saturating_mul(2);
            for c in found {
                let from = usize::try_from(c.range.start.saturating_sub(start)).unwrap_or(0);
                let len = usize::try_from(c.range.end.saturating_sub(c.range.start)).unwrap_or(0);
                let to = from.saturating_add(len).min(read.bytes.len());
                let bytes = read.bytes.slice(from.min(to)..to);
                let bytes = match copy {
                    true => Bytes::copy_from_slice(&bytes),
                    false => bytes,
                };
                pw.found.push((c, bytes));
            }
        }
        // Var data whose offsets are in: its bytes are known, its walk
        // starts.
        let mut ready = Vec::new();
        for (w, pw) in self.walks.iter().enumerate() {
            let Some(fetch) = self.fetches.get(pw.fetch).filter(|_| pw.walk.is_none()) else {
                continue;
            };
            let offsets = (self.walks.iter())
                .find(|o| o.fetch == pw.fetch && offsets_part(fetch, o.part))
                .filter(|o| o.walk.as_ref().is_some_and(ChunkWalk::done));
            if let Some(o) = offsets {
                ready.push((w, var_bytes(fetch, &o.found)?));
            }
        }
        for (w, bytes) in ready {
            let Some(pw) = self.walks.get_mut(w) else {
                continue;
            };
            let Some(fetch) = self.fetches.get_mut(pw.fetch) else {
                continue;
            };
            let tile = fetch.parts.get(pw.part).map_or(0..0, |p| p.2.clone());
            // The tile holds the data from its first cell's to its last's
            // (zeros between runs of cells); only the runs' are fetched.
            let (first, last) = (bytes.first(), bytes.last());
            fetch.var = Some(first.map_or(0, |r| r.start)..last.map_or(0, |r| r.end));
            pw.walk = Some(start_walk(
                tile,
                bytes,
                self.window,
                pw.from.as_ref(),
                &mut pw.found,
            ));
        }
        let mut requests = Vec::new();
        self.asked = Self::round(&self.fetches, &self.walks, &mut requests);
        if requests.is_empty() {
            return Ok(true);
        }
        self.answers = Answers::new(requests);
        Ok(false)
    }

    /// The tiles fetched and, per tile and part, their bytes (`None` where
    /// a file was missing); where each walk of piece `now` stopped goes to
    /// `points`.
    pub fn finish(
        self,
        points: &mut WalkPoints,
        now: u64,
    ) -> (Vec<TileFetch>, Vec<Vec<Option<PartBytes>>>) {
        let mut bytes: Vec<Vec<Option<PartBytes>>> = (self.fetches.iter())
            .map(|f| f.parts.iter().map(|_| None).collect())
            .collect();
        let whole = self.whole.unwrap_or_default().into_iter();
        let apart = apart(&self.bare);
        for ((f, p, _, _), got) in whole_parts(&self.fetches, &apart).zip(whole) {
            if let Some(slot) = bytes.get_mut(f).and_then(|b| b.get_mut(p)) {
                *slot = got.map(PartBytes::Whole);
            }
        }
        for b in self.bare {
            if let Some(slot) = bytes.get_mut(b.fetch).and_then(|s| s.get_mut(b.part)) {
                *slot = b.got;
            }
        }
        for pw in self.walks {
            let Some(f) = self.fetches.get(pw.fetch) else {
                continue;
            };
            // A walk that found nothing past a carried chunk stands where
            // the one before it stood (at that chunk's header).
            let carried_only = pw.found.len() == 1
                && pw
                    .from
                    .as_ref()
                    .and_then(|s| s.last.as_ref())
                    .map(|(c, _)| c)
                    == pw.found.first().map(|(c, _)| c);
            let stop = match (carried_only, pw.walk.as_ref().and_then(ChunkWalk::point)) {
                (true, _) => pw.from.clone().map(|s| WalkStop { when: now, ..s }),
                (false, Some(point)) => Some(WalkStop {
                    point,
                    last: pw.found.last().cloned(),
                    when: now,
                }),
                (false, None) => None,
            };
            if let Some(stop) = stop {
                points.insert((f.key, pw.part), stop);
            }
            if let Some(slot) = bytes.get_mut(pw.fetch).and_then(|b| b.get_mut(pw.part)) {
                *slot = Some(PartBytes::Chunks(pw.found));
            }
        }
        keep_carried(points, now);
        (self.fetches, bytes)
    }
}

/// Walk points of earlier pieces kept at most (past twice as many, the
/// least recent go: a later piece over their tile walks its headers from
/// the start again). Else a read over many sliced tiles held a point for
/// every tile part it ever walked, and scanned them all at each piece.
const POINTS_KEPT: usize = 1024;

/// Lets go of the last chunks of walks piece `now` did not take beyond
/// [`CARRIED_LIMIT`] bytes, the least recent first, and of their points
/// beyond [`POINTS_KEPT`]. (A piece's own are charged by its estimate, at
/// most one a part of its tiles.) Pieces that take turns over tiles side
/// by side (a row of tiles over two fragments, cut at the tiles' edges)
/// found each tile's carried chunk let go by the piece between:
/// `dense_multi_chunk` a,s row-major under 64 KiB fetched every chunk
/// again for each row, 1,842 requests.
fn keep_carried(points: &mut WalkPoints, now: u64) {
    if points.len() > POINTS_KEPT.saturating_mul(2) {
        let mut whens: Vec<u64> = (points.values().map(|s| s.when))
            .filter(|&w| w != now)
            .collect();
        if whens.len() > POINTS_KEPT {
            let gone = whens.len().saturating_sub(POINTS_KEPT);
            let (_, &mut oldest_kept, _) = whens.select_nth_unstable(gone);
            points.retain(|_, s| s.when == now || s.when >= oldest_kept);
        }
    }
    // Mostly they fit: a pass, no sort (sorting them every piece was 3%
    // of `sparse_bounded_tiles` read under 16 KiB, 2,233 pieces).
    let carried = (points.values())
        .filter(|s| s.when != now)
        .filter_map(|s| Some(s.last.as_ref()?.1.len()))
        .fold(0usize, usize::saturating_add);
    if carried <= CARRIED_LIMIT {
        return;
    }
    let mut others: Vec<(u64, (TileKey, usize), usize)> = (points.iter())
        .filter(|(_, s)| s.when != now)
        .filter_map(|(k, s)| Some((s.when, *k, s.last.as_ref()?.1.len())))
        .collect();
    others.sort_unstable_by_key(|o| std::cmp::Reverse(o.0));
    let mut held = 0usize;
    for (_, key, len) in others {
        held = held.saturating_add(len);
        if held > CARRIED_LIMIT {
            if let Some(s) = points.get_mut(&key) {
                s.last = None;
            }
        }
    }
}

/// Emptied tile buffers a read keeps from one piece for the next. Memory a
/// process touched before costs nothing to write again, while fresh pages
/// cost the kernel a fault each (about 4 µs per 4 KiB on this project's
/// machine: a 64 MiB dense read spent a third of its time there), and the
/// allocator hands large freed buffers back to the kernel. Holds at most
/// `limit` bytes of capacity, and only between a piece's end and the next
/// piece's decoding, when the reader holds no decoded tile nor a batch (on
/// remote storage it may hold the next piece's fetched bytes, which
/// `Reader::plan_ahead` fitted into the tile budget).
#[derive(Debug)]
pub(crate) struct Spare {
    bufs: Mutex<Vec<Vec<u8>>>,
    limit: usize,
}

impl Spare {
    pub fn new(limit: u64) -> Self {
        Spare {
            bufs: Mutex::new(Vec::new()),
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
        }
    }

    /// An empty buffer, the smallest kept that holds `size` bytes (none
    /// that would have to grow: growing copies), else one of the process's
    /// idle buffers (`tdb_storage::idle_buffers`, what earlier reads left).
    fn take(&self, size: usize) -> Vec<u8> {
        let own = self.bufs.lock().ok().and_then(|mut bufs| {
            let best = bufs
                .iter()
                .enumerate()
                .filter(|(_, b)| b.capacity() >= size)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i)?;
            Some(bufs.swap_remove(best))
        });
        let mut buf = own
            .or_else(|| tdb_storage::idle_buffers().take(size))
            .unwrap_or_default();
        buf.clear();
        buf
    }

    /// Hands what is kept to the process's idle buffers, for the reads
    /// that come after this one (at its end).
    pub fn to_idle(&self) {
        let bufs = self.bufs.lock().map(|mut b| std::mem::take(&mut *b));
        for buf in bufs.into_iter().flatten() {
            tdb_storage::idle_buffers().give(buf);
        }
    }

    /// Keeps `buf`'s allocation, while the kept ones stay under the limit.
    /// Its length stays too (`take` empties it): given on to the idle pool
    /// (`to_idle`), it is a fetch buffer that need not be zeroed first
    /// ([`tdb_storage::BufferPool::filled`]; an emptied one was zeroed
    /// whole: a fifth of W2's four reads, once bare tiles' buffers went
    /// there after every piece).
    fn keep(&self, buf: Vec<u8>) {
        let Ok(mut bufs) = self.bufs.lock() else {
            return;
        };
        let held: usize = bufs.iter().map(Vec::capacity).sum();
        if buf.capacity() > 0 && held.saturating_add(buf.capacity()) <= self.limit {
            bufs.push(buf);
        }
    }

    /// Frees what no tile took: a piece's tiles, its batch and buffers
    /// kept from a larger piece would together pass the budget.
    pub fn release(&self) {
        if let Ok(mut bufs) = self.bufs.lock() {
            *bufs = Vec::new();
        }
    }

    /// Keeps the byte buffers of tiles a piece is done with.
    pub fn keep_tiles(&self, tiles: impl IntoIterator<Item = DecodedTile>) {
        for t in tiles {
            self.keep(t.fixed);
            self.keep(t.var);
            if let Some(v) = t.validity {
                self.keep(v);
            }
        }
    }
}

/// A piece's tiles to unfilter, with everything the work needs owned, so
/// a driver runs it where it likes ([`super::ReadStep::Decode`]): on the
/// calling thread, or off an async executor's. The work itself runs on the
/// reader's bounded pool.
pub struct DecodeWork {
    /// The piece it belongs to (see [`Decoded`]).
    pub(super) piece: u64,
    pub(super) fetches: Vec<TileFetch>,
    /// Per fetch, its parts' bytes.
    pub(super) bytes: Vec<Vec<PartBytes>>,
    /// Per fetch, what its tile is.
    pub(super) jobs: Vec<TileInfo>,
    pub(super) fields: Vec<FragField>,
    pub(super) key: Option<[u8; 32]>,
    pub(super) spare: Arc<Spare>,
    pub(super) chunks: Arc<ChunkCache>,
    /// Sparse tiles whose other fields decode only where their bounding
    /// dimensions keep cells (empty: every tile decoded whole).
    pub(super) bounds: Vec<TileBound>,
}

/// A sparse tile that a piece's ranges cut along some fixed-size
/// dimensions: those dimensions' tiles decode first, one after the other,
/// each only in the chunks holding cells the ones before kept; the tile's
/// other fields then only in the chunks holding cells all of them kept.
/// The read's check of each cell against the ranges drops every cell
/// whose chunks were skipped (their bytes are zeros): it is the same check.
/// (W3's 16 boxes: of the tiles they meet, only about 70% of the
/// attribute's cells lie in chunks with a result.)
pub(crate) struct TileBound {
    /// The tile: (fragment, tile).
    pub tile: (usize, u64),
    /// Per bounding dimension, in the order decoded: its fetch (an index
    /// into the work's), the dimension, how its values compare, and the
    /// piece's ranges along it.
    pub dims: Vec<BoundDim>,
    /// The fetches of the tile's other fields.
    pub rest: Vec<usize>,
}

/// A bounding dimension of a [`TileBound`]: its fetch (an index into the
/// work's), the dimension, how its values compare, and the piece's ranges
/// along it.
pub(crate) type BoundDim = (usize, usize, tdb_index::RangeOps, Vec<tdb_schema::Range>);

/// What one tile of a [`DecodeWork`] is: its field (an index into the
/// work's fields) and format version (its cells, and those used, are the
/// fetch's: [`TileFetch::needed`]).
pub(super) struct TileInfo {
    pub field: usize,
    pub version: FormatVersion,
    /// The var data's unfiltered size, as the fragment's metadata records
    /// it (var-size fields).
    pub var_size: Option<u64>,
}

/// Decoded tiles of one piece, for [`super::Reader::push_decoded`].
pub struct Decoded {
    pub(super) piece: u64,
    pub(super) tiles: Vec<(TileKey, DecodedTile)>,
    pub(super) checked: Checked,
}

/// Per bounded tile ([`TileBound`]), (fragment, tile): the dimensions its
/// decoding checked its cells along, and which cells lie within the
/// piece's ranges on all of them: the read's check starts from these.
pub(crate) type Checked = HashMap<(usize, u64), CheckedTile, FastHash>;

/// A bounded tile's dimensions checked, and its cells within them.
pub(crate) type CheckedTile = (Vec<usize>, Vec<bool>);

impl DecodeWork {
    /// Unfilters every tile (CPU-bound; it blocks until done).
    pub fn run(self) -> Result<Decoded> {
        let jobs: Vec<TileJob<'_>> = self
            .fetches
            .iter()
            .zip(&self.bytes)
            .zip(&self.jobs)
            .map(|((fetch, bytes), info)| {
                Ok(TileJob {
                    fetch,
                    bytes,
                    field: self
                        .fields
                        .get(info.field)
                        .ok_or_else(|| QueryError::invalid("a tile of no field"))?,
                    version: info.version,
                    cells: fetch.cells,
                    needed: fetch.needed.as_deref(),
                    var_size: info.var_size,
                })
            })
            .collect::<Result<_>>()?;
        let on = Decoding {
            key: self.key.as_ref(),
            threads: crate::threads(),
            spare: &self.spare,
            cache: &self.chunks,
        };
        let (decoded, checked) = match self.bounds.is_empty() {
            true => {
                let tiles = decode_tiles(&jobs, on.key, on.threads, on.spare, on.cache)?;
                (tiles, Checked::default())
            }
            false => decode_bounded(&jobs, &self.bounds, on)?,
        };
        self.spare.release();
        Ok(Decoded {
            piece: self.piece,
            tiles: self.fetches.iter().map(|f| f.key).zip(decoded).collect(),
            checked,
        })
    }

    /// How many tiles (of one field each) it decodes.
    pub fn tiles(&self) -> usize {
        self.fetches.len()
    }

    /// The filtered bytes it decodes.
    pub fn bytes(&self) -> u64 {
        self.bytes.iter().flatten().map(|b| b.len() as u64).sum()
    }
}

impl std::fmt::Debug for DecodeWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodeWork")
            .field("tiles", &self.tiles())
            .field("bytes", &self.bytes())
            .finish()
    }
}

impl std::fmt::Debug for Decoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoded")
            .field("tiles", &self.tiles.len())
            .finish()
    }
}

/// One tile to decode: its fetch, its parts' bytes (in the fetch's
/// order), how it is stored, and how many cells it must hold.
#[derive(Clone, Copy)]
pub(crate) struct TileJob<'a> {
    pub fetch: &'a TileFetch,
    pub bytes: &'a [PartBytes],
    pub field: &'a FragField,
    pub version: FormatVersion,
    pub cells: u64,
    /// The cells the read uses, as sorted disjoint ranges, when it knows
    /// them before decoding (dense fragments): chunks of fixed-size parts
    /// holding none of them are not decoded; their bytes stay zero.
    pub needed: Option<&'a [(u64, u64)]>,
    /// See [`TileInfo::var_size`].
    pub var_size: Option<u64>,
}

/// What `job`'s tile holds, as the fragment's metadata and schema say:
/// fixed-size values and validity bytes per cell, offsets per cell of
/// var-size fields, var data as recorded. Each part's chunk headers are
/// checked against it before anything is decoded, so a header's claim
/// sizes no allocation beyond what the tile holds, which the read budget
/// bounded before any fetch.
fn shape(job: &TileJob<'_>) -> TileShape {
    let sliced = job.fetch.slice();
    TileShape {
        cells: job.fetch.held().unwrap_or(job.cells),
        cell_size: job
            .field
            .parts
            .first()
            .and_then(|(_, pf)| pf.field_cell_size),
        var_size: match (sliced, &job.fetch.var) {
            (Some(_), Some(v)) => Some(v.end.saturating_sub(v.start)),
            _ => job.var_size,
        },
        zipped: job.field.zipped.is_some(),
    }
}

/// A tile's parts disagreeing with its shape: corrupt, named by file and
/// tile; other tile errors as they are.
fn shape_error(path: &str, tile: u64, e: tdb_tile::TileError) -> QueryError {
    match e {
        tdb_tile::TileError::Shape { reason, .. } => QueryError::corrupt(path, tile, reason),
        e => tile_error(path, tile, e),
    }
}

/// One part of one tile, its chunk headers parsed: what decoding it needs.
struct PartJob<'a> {
    kind: DataPart,
    filters: TileFilters<'a>,
    path: &'a str,
    /// The file and tile, for errors.
    location: String,
    chunks: Vec<FilteredChunk<'a>>,
    /// What the chunks unfilter to, checked against the tile.
    size: u64,
    sliced: Option<SlicedPart>,
    /// The part's bytes already unfiltered ([`PartBytes::Bare`]): no chunk.
    bare: Option<&'a Mutex<Vec<u8>>>,
}

/// A sliced tile's part: the unfiltered bytes it holds (`window`), and
/// each chunk's index and first unfiltered byte. A packed tile's
/// ([`TileFetch::packed`]) holds the runs of bytes `packed` instead, each
/// from its offset in the part on.
struct SlicedPart {
    window: std::ops::Range<u64>,
    chunks: Vec<(usize, u64)>,
    packed: Vec<(std::ops::Range<u64>, u64)>,
}

/// A run of consecutive chunks of one part of one tile: the unit of work
/// on the pool.
struct Run<'b> {
    /// Tile job and part.
    job: usize,
    part: usize,
    /// The run's first chunk's index in the tile, and the chunks.
    first: usize,
    chunks: &'b [FilteredChunk<'b>],
    /// Chunks holding no cell the read uses: zeros, not decoded.
    skip: bool,
    /// On one thread, a part's chunks in one run: per chunk whether it
    /// holds a used cell, so is decoded (the others are zeros); empty: all.
    used: Vec<bool>,
    /// A sliced part's chunk: where its unfiltered bytes start.
    at: Option<u64>,
}

fn tile_error(path: &str, tile: u64, e: tdb_tile::TileError) -> QueryError {
    QueryError::Tile {
        file: path.to_owned(),
        tile,
        source: Box::new(e),
    }
}

/// Parses the chunk headers of every part of `job` (no decoding yet) and
/// checks what they promise against what the tile holds.
fn parse_parts<'a>(job: &TileJob<'a>, key: Option<&'a [u8; 32]>) -> Result<Vec<PartJob<'a>>> {
    let tile = job.fetch.key.2;
    let (n, fetched, bytes) = (
        job.field.parts.len(),
        job.fetch.parts.len(),
        job.bytes.len(),
    );
    if n != fetched || n != bytes {
        return Err(QueryError::invalid(format!(
            "tile {tile}: {n} parts, {fetched} planned, {bytes} fetched"
        )));
    }
    let filters = job
        .field
        .parts
        .iter()
        .map(|(kind, pf)| (*kind, pf.tile_filters(job.version, key)));
    let offsets_inside = filters
        .clone()
        .find(|(kind, _)| *kind == DataPart::Var)
        .is_some_and(|(_, f)| f.offsets_inside());
    let shape = shape(job);
    let mut parts = Vec::with_capacity(n);
    for (((kind, filters), (_, path, _)), b) in filters.zip(&job.fetch.parts).zip(job.bytes) {
        let location = format!("{path} tile {tile}");
        let (chunks, sliced, bare) = match b {
            PartBytes::Bare(bare) => (Vec::new(), None, Some(bare)),
            PartBytes::Whole(b) => {
                let chunks = filters
                    .chunks(&location, b)
                    .map_err(|e| tile_error(path, tile, e))?;
                (chunks, None, None)
            }
            PartBytes::Chunks(found) => {
                let size = shape.part_size(kind, offsets_inside).unwrap_or(0);
                let per_cell = size.checked_div(shape.cells).unwrap_or(0);
                // Where the part's bytes start, and what the whole tile's
                // part holds: no chunk reaches past it, so a header's
                // claim sizes no allocation beyond it.
                let (first, holds) = match kind {
                    DataPart::Var => {
                        let var = (job.fetch.var.as_ref()).ok_or_else(|| {
                            QueryError::invalid("var data fetched before its offsets")
                        })?;
                        (var.start, job.var_size.unwrap_or(0))
                    }
                    _ => (
                        (job.fetch.slice())
                            .and_then(|(lo, _)| per_cell.checked_mul(lo))
                            .unwrap_or(0),
                        per_cell.saturating_mul(job.cells),
                    ),
                };
                let mut chunks = Vec::with_capacity(found.len());
                let mut at = Vec::with_capacity(found.len());
                for (c, bytes) in found {
                    let (rest, chunk) = tdb_tile::filtered_chunk(bytes)
                        .map_err(|e| QueryError::corrupt(path, tile, e.to_string()))?;
                    if !rest.is_empty()
                        || u64::from(chunk.unfiltered_size)
                            != c.unfiltered.end.saturating_sub(c.unfiltered.start)
                        || c.unfiltered.end > holds
                    {
                        return Err(QueryError::corrupt(
                            path,
                            tile,
                            format!(
                                "chunk {} ({} unfiltered bytes from {}) does not fit the tile's \
                                 {holds}",
                                c.index, chunk.unfiltered_size, c.unfiltered.start
                            ),
                        ));
                    }
                    chunks.push(chunk);
                    at.push((
                        usize::try_from(c.index).unwrap_or(usize::MAX),
                        c.unfiltered.start,
                    ));
                }
                let window = first..first.saturating_add(size);
                let mut packed = Vec::new();
                if let Some(needed) = job.needed.filter(|_| job.fetch.packed) {
                    let mut off = 0u64;
                    for &(a, b) in needed {
                        let run = per_cell.saturating_mul(a)..per_cell.saturating_mul(b);
                        let len = run.end.saturating_sub(run.start);
                        packed.push((run, off));
                        off = off.saturating_add(len);
                    }
                }
                let sliced = SlicedPart {
                    window,
                    chunks: at,
                    packed,
                };
                (chunks, Some(sliced), None)
            }
        };
        let size = match (&sliced, bare) {
            (Some(p), _) => p.window.end.saturating_sub(p.window.start),
            // Bytes already unfiltered: as many as the tile holds.
            (None, Some(bare)) => {
                let holds = shape.part_size(kind, offsets_inside);
                let size = bare.lock().map_or(0, |b| b.len() as u64);
                if holds != Some(size) || kind != DataPart::Fixed {
                    return Err(QueryError::corrupt(
                        path,
                        tile,
                        format!(
                            "{size} bytes stored without filters where the tile holds {holds:?}"
                        ),
                    ));
                }
                size
            }
            (None, None) => (shape.check_chunks(&location, kind, offsets_inside, &chunks))
                .map_err(|e| shape_error(path, tile, e))?,
        };
        parts.push(PartJob {
            kind,
            filters,
            path,
            location,
            chunks,
            size,
            sliced,
            bare,
        });
    }
    Ok(parts)
}

/// How many bytes of chunks unfiltered by a copy weigh as one byte decoded.
const COPY_WEIGHT: usize = 8;

/// Unfilters `jobs` on one pool of up to `threads` workers. Each tile part
/// is cut into runs of chunks, so a read of a few large tiles still keeps
/// every worker busy, while a read of many tiles decodes each part in one
/// run, straight into its buffer (one of `spare`'s when it has one); each
/// worker keeps one filter workspace (codec contexts, stage buffers) for
/// all its runs.
pub(crate) fn decode_tiles<'a>(
    jobs: &[TileJob<'a>],
    key: Option<&'a [u8; 32]>,
    threads: usize,
    spare: &Spare,
    cache: &ChunkCache,
) -> Result<Vec<DecodedTile>> {
    let parsed: Vec<Vec<PartJob<'a>>> = jobs
        .iter()
        .map(|job| parse_parts(job, key))
        .collect::<Result<_>>()?;
    // A small piece decodes on the calling thread: handing its tiles to
    // the pool costs more than decoding them (a read under a small budget
    // is thousands of such pieces). Chunks that unfilter by a copy weigh
    // an eighth of their bytes: a copy of 256 KiB is done sooner than the
    // pool's workers wake (W2's 64 slices: 0.030 → 0.023 s).
    let work = (parsed.iter().flatten()).fold(0usize, |n, part| {
        let bytes = (part.chunks.iter()).fold(0usize, |b, c| b.saturating_add(c.data.len()));
        n.saturating_add(match part.filters.copies_only() {
            true => bytes / COPY_WEIGHT,
            false => bytes,
        })
    });
    let threads = if work < crate::pool::SMALL_WORK {
        1
    } else {
        threads
    };
    // Runs: whole parts when there are enough of them for the pool,
    // otherwise cut so the pool gets about four runs per worker.
    let target = threads.max(1).saturating_mul(4);
    let part_count: usize = parsed.iter().map(Vec::len).sum();
    let chunk_count: usize = parsed.iter().flatten().map(|p| p.chunks.len()).sum();
    let run_len = if part_count >= target || threads < 2 {
        usize::MAX
    } else {
        chunk_count.div_ceil(target).max(1)
    };
    let mut runs = Vec::new();
    for ((j, parts), job) in parsed.iter().enumerate().zip(jobs) {
        for (p, part) in parts.iter().enumerate() {
            if part.bare.is_some() {
                continue;
            }
            if let Some(SlicedPart { chunks: at, .. }) = &part.sliced {
                // A sliced part's chunks, each its own run: each lands
                // where its bytes go in the part.
                for (k, &(index, start)) in at.iter().enumerate() {
                    runs.push(Run {
                        job: j,
                        part: p,
                        first: index,
                        chunks: part.chunks.get(k..=k).unwrap_or_default(),
                        skip: false,
                        used: Vec::new(),
                        at: Some(start),
                    });
                }
                continue;
            }
            let used = used_chunks(job, p, &part.chunks);
            let is_used = |c: usize| used.get(c).copied().unwrap_or(true);
            let n = part.chunks.len();
            if threads < 2 && used.contains(&true) && used.contains(&false) {
                // One thread: the part in one run, straight into its
                // buffer, chunks without a used cell zeroed in place.
                runs.push(Run {
                    job: j,
                    part: p,
                    first: 0,
                    chunks: &part.chunks,
                    skip: false,
                    used,
                    at: None,
                });
                continue;
            }
            let mut first = 0;
            loop {
                // Up to `run_len` chunks, all used or all not.
                let skip = !is_used(first);
                let alike = (first.saturating_add(1)..n)
                    .take(run_len.saturating_sub(1))
                    .take_while(|&c| is_used(c) != skip)
                    .count();
                let end = first.saturating_add(alike).saturating_add(1).min(n);
                runs.push(Run {
                    job: j,
                    part: p,
                    first,
                    chunks: part.chunks.get(first..end).unwrap_or_default(),
                    skip,
                    used: Vec::new(),
                    at: None,
                });
                first = end;
                if first >= n {
                    break;
                }
            }
        }
    }
    let decoded = crate::pool::map_all(&runs, threads, Workspace::default, |ws, run| {
        let part = parsed
            .get(run.job)
            .and_then(|parts| parts.get(run.part))
            .ok_or_else(|| QueryError::invalid("a run of no tile part"))?;
        let size = usize::try_from(unfiltered_size(run.chunks)).unwrap_or(0);
        // A part's first run's buffer becomes the part's: room for all of
        // it. (A kept buffer or none: `take` allocates nothing, whatever a
        // header claims.)
        let part_size = match (run.first, run.at) {
            (0, None) => usize::try_from(part.size).unwrap_or(0),
            _ => size,
        };
        let mut out = TileData {
            data: spare.take(part_size),
            ..TileData::default()
        };
        if run.skip {
            out.data.resize(size, 0);
            return Ok(out);
        }
        let key = jobs.get(run.job).map_or((0, 0, 0), |j| j.fetch.key);
        // A sliced part's chunk: decoded whole (or kept from the piece
        // before); the join copies its bytes inside the part's window and
        // gives it to the cache.
        let chunk = u64::try_from(run.first).unwrap_or(u64::MAX);
        let kept =
            (run.at.zip(part.sliced.as_ref())).and_then(|_| cache.take(key, run.part, chunk));
        if let Some(decoded) = kept {
            spare.keep(std::mem::replace(&mut out.data, decoded));
            return Ok(out);
        }
        // Stretches of chunks alike: decoded, or zeros.
        let mut c = 0;
        while c < run.chunks.len() {
            let used = run.used.get(c).copied().unwrap_or(true);
            let alike = (run.used.get(c..).unwrap_or_default().iter())
                .take_while(|&&u| u == used)
                .count()
                .max(1);
            let end = match run.used.is_empty() {
                true => run.chunks.len(),
                false => c.saturating_add(alike).min(run.chunks.len()),
            };
            let chunks = run.chunks.get(c..end).unwrap_or_default();
            if used {
                part.filters
                    .unfilter_into(
                        &part.location,
                        ws,
                        chunks,
                        run.first.saturating_add(c),
                        part.kind == DataPart::Var,
                        &mut out,
                    )
                    .map_err(|e| tile_error(part.path, key.2, e))?;
            } else {
                let zeros = usize::try_from(unfiltered_size(chunks)).unwrap_or(0);
                out.data.resize(out.data.len().saturating_add(zeros), 0);
            }
            c = end;
        }
        Ok(out)
    })?;
    // Join each part's runs in order (the first run's buffer becomes the
    // part's), then check each tile whole.
    let mut joined: Vec<Vec<Option<TileData>>> = parsed
        .iter()
        .map(|parts| parts.iter().map(|_| None).collect())
        .collect();
    for (run, data) in runs.iter().zip(decoded) {
        let Some(slot) = joined.get_mut(run.job).and_then(|p| p.get_mut(run.part)) else {
            continue;
        };
        let sliced =
            (parsed.get(run.job).and_then(|p| p.get(run.part))).and_then(|p| p.sliced.as_ref());
        if let (Some(at), Some(SlicedPart { window, packed, .. })) = (run.at, sliced) {
            // Cells between the used chunks stay zero: no cell is read
            // there.
            let into = slot.get_or_insert_with(|| {
                let len = usize::try_from(window.end.saturating_sub(window.start)).unwrap_or(0);
                let mut data = spare.take(len);
                data.resize(len, 0);
                TileData {
                    data,
                    ..TileData::default()
                }
            });
            // The chunk's bytes inside the window (or each packed run),
            // where they go in it.
            let decoded = data.data;
            let whole = [(window.clone(), 0)];
            let runs = match packed.is_empty() {
                true => &whole[..],
                false => packed.as_slice(),
            };
            let end = at.saturating_add(decoded.len() as u64);
            let first = runs.partition_point(|(r, _)| r.end <= at);
            for (r, off) in runs.get(first..).unwrap_or_default() {
                if r.start >= end {
                    break;
                }
                let (from, to) = (r.start.max(at), r.end.min(end));
                let src = (usize::try_from(from.saturating_sub(at)).ok())
                    .zip(usize::try_from(to.saturating_sub(at)).ok())
                    .and_then(|(a, b)| decoded.get(a..b.max(a)))
                    .unwrap_or_default();
                let into_at = usize::try_from(off.saturating_add(from.saturating_sub(r.start)))
                    .unwrap_or(usize::MAX);
                if let Some(dst) = (into.data).get_mut(into_at..into_at.saturating_add(src.len())) {
                    dst.copy_from_slice(src);
                }
            }
            let key = jobs.get(run.job).map_or((0, 0, 0), |j| j.fetch.key);
            let chunk = u64::try_from(run.first).unwrap_or(u64::MAX);
            for buf in cache.give(key, run.part, chunk, decoded) {
                spare.keep(buf);
            }
            continue;
        }
        match slot {
            None => *slot = Some(data),
            Some(into) => {
                let base = into.data.len() as u64;
                into.data.extend_from_slice(&data.data);
                into.offsets
                    .extend(data.offsets.iter().map(|o| o.saturating_add(base)));
                spare.keep(data.data);
            }
        }
    }
    // Parts stored without filters: their bytes, taken as they are.
    for (slots, parts) in joined.iter_mut().zip(&parsed) {
        for (slot, part) in slots.iter_mut().zip(parts) {
            if let Some(bare) = part.bare {
                let data = bare.lock().map(|mut b| std::mem::take(&mut *b));
                *slot = Some(TileData {
                    data: data.map_err(|_| QueryError::invalid("a tile's bytes poisoned"))?,
                    ..TileData::default()
                });
            }
        }
    }
    jobs.iter()
        .zip(joined)
        .zip(&parsed)
        .map(|((job, parts), parsed)| {
            let offsets_inside = parsed
                .iter()
                .find(|p| p.kind == DataPart::Var)
                .is_some_and(|p| p.filters.offsets_inside());
            // A sliced part of no chunk (its runs' var cells all empty)
            // holds its window's bytes as zeros: the cells between its
            // runs, read by no one (rand_15833: two empty cells four bytes
            // apart, their offsets past a part left empty).
            let parts = parts.into_iter().zip(parsed).map(|(data, part)| {
                data.unwrap_or_else(|| {
                    let window = part.sliced.as_ref().map_or(0..0, |p| p.window.clone());
                    let len = usize::try_from(window.end.saturating_sub(window.start));
                    let mut data = spare.take(len.unwrap_or(0));
                    data.resize(len.unwrap_or(0), 0);
                    TileData {
                        data,
                        ..TileData::default()
                    }
                })
            });
            let mut tile = finish_tile(job, parts, offsets_inside)?;
            tile.first = (job.fetch.slice())
                .filter(|_| !job.fetch.packed)
                .map_or(0, |(lo, _)| lo);
            // A slice holds some of the tile's cells: no later piece may
            // take it for the tile.
            tile.partial = job.fetch.slice().is_some();
            Ok(tile)
        })
        .collect()
}

/// What the decoding of one bounded tile has found so far: the cells
/// within the piece's ranges along the dimensions decoded (`None`: no
/// dimension yet, every cell), and which dimensions those were.
#[derive(Default)]
struct Narrowing {
    mask: Option<Vec<bool>>,
    dims: Vec<usize>,
}

impl Narrowing {
    /// The cells the tile's next field decodes ([`TileJob::needed`]).
    fn needed(&self) -> Option<Vec<(u64, u64)>> {
        self.mask.as_deref().map(kept_runs)
    }

    /// Narrows the cells to those within the ranges of `dim`, whose
    /// `cells`-cell tile is `tile`. (A column it cannot compare leaves the
    /// cells as they were: those the dimensions before kept.)
    fn narrow(&mut self, cells: u64, dim: &BoundDim, tile: &DecodedTile) {
        let (_, d, ops, ranges) = dim;
        let all = || vec![true; usize::try_from(cells).unwrap_or(0)];
        if ops.retain_within(ranges, &tile.fixed, self.mask.get_or_insert_with(all)) {
            self.dims.push(*d);
        }
    }

    /// What the check takes of tile `tile`'s narrowing, if a dimension was
    /// checked.
    fn into_checked(self, tile: (usize, u64)) -> Option<((usize, u64), CheckedTile)> {
        let mask = self.mask.filter(|_| !self.dims.is_empty())?;
        Some((tile, (self.dims, mask)))
    }
}

/// Where a piece's bounded tiles decode: with the array's key, on up to
/// `threads` workers, buffers from `spare`, chunks kept in `cache` (what
/// [`decode_tiles`] takes besides its jobs).
#[derive(Clone, Copy)]
struct Decoding<'r, 'a> {
    key: Option<&'a [u8; 32]>,
    threads: usize,
    spare: &'r Spare,
    cache: &'r ChunkCache,
}

/// Unfilters `jobs` as [`decode_tiles`] does, every tile of `bounds`
/// narrowed by its bounding dimensions ([`TileBound`]); with what the
/// bounded tiles' decoding checked. With at least two bounded tiles a
/// worker, each is one job on the pool ([`decode_tile_by_tile`]); with
/// fewer (a few large tiles) they go in rounds ([`decode_in_rounds`]).
fn decode_bounded<'a>(
    jobs: &[TileJob<'a>],
    bounds: &[TileBound],
    on: Decoding<'_, 'a>,
) -> Result<(Vec<DecodedTile>, Checked)> {
    let decode = match bounds.len() >= on.threads.saturating_mul(2) {
        true => decode_tile_by_tile,
        false => decode_in_rounds,
    };
    decode(jobs, bounds, on)
}

/// [`decode_bounded`], each bounded tile one job on the pool (its fields
/// one after the other) and every other tile one.
fn decode_tile_by_tile<'a>(
    jobs: &[TileJob<'a>],
    bounds: &[TileBound],
    on: Decoding<'_, 'a>,
) -> Result<(Vec<DecodedTile>, Checked)> {
    enum Unit<'b> {
        Bound(&'b TileBound),
        One(usize),
    }
    let grouped = grouped_jobs(jobs.len(), bounds);
    // The bounded tiles, the larger units, first.
    let units: Vec<Unit<'_>> = (bounds.iter().map(Unit::Bound))
        .chain(
            (0..jobs.len())
                .filter(|&j| !grouped.get(j).copied().unwrap_or(true))
                .map(Unit::One),
        )
        .collect();
    let one = |j: usize, needed: Option<&[(u64, u64)]>| -> Result<(usize, DecodedTile)> {
        let job = jobs
            .get(j)
            .ok_or_else(|| QueryError::invalid("a bounded tile of no job"))?;
        let job = TileJob { needed, ..*job };
        let mut tile = decode_tiles(&[job], on.key, 1, on.spare, on.cache)?
            .pop()
            .ok_or_else(|| QueryError::invalid("a tile left undecoded"))?;
        tile.partial = needed.is_some();
        Ok((j, tile))
    };
    let decoded = crate::pool::map_all(
        &units,
        on.threads,
        || (),
        |_, unit| match unit {
            Unit::One(j) => Ok((vec![one(*j, None)?], None)),
            Unit::Bound(b) => {
                let mut out = Vec::with_capacity(b.dims.len().saturating_add(b.rest.len()));
                let mut narrowing = Narrowing::default();
                for dim in &b.dims {
                    let (j, tile) = one(dim.0, narrowing.needed().as_deref())?;
                    narrowing.narrow((jobs.get(j)).map_or(0, |job| job.cells), dim, &tile);
                    out.push((j, tile));
                }
                let needed = narrowing.needed();
                for &j in &b.rest {
                    out.push(one(j, needed.as_deref())?);
                }
                Ok((out, narrowing.into_checked(b.tile)))
            }
        },
    )?;
    let mut checked = Checked::default();
    let mut placed = Vec::with_capacity(jobs.len());
    for (decoded, c) in decoded {
        placed.extend(decoded);
        checked.extend(c);
    }
    Ok((in_job_order(jobs.len(), placed)?, checked))
}

/// [`decode_bounded`] for a piece of too few bounded tiles to keep the
/// pool busy a tile a job (a few large tiles): in rounds over all of them,
/// each round on the whole pool, chunks of a part spread over the workers
/// as [`decode_tiles`] spreads them: every tile's first bounding dimension
/// (and every other tile), then its second, and so on, then its other
/// fields.
fn decode_in_rounds<'a>(
    jobs: &[TileJob<'a>],
    bounds: &[TileBound],
    on: Decoding<'_, 'a>,
) -> Result<(Vec<DecodedTile>, Checked)> {
    let grouped = grouped_jobs(jobs.len(), bounds);
    let mut placed = Vec::with_capacity(jobs.len());
    let mut narrowings: Vec<Narrowing> = bounds.iter().map(|_| Narrowing::default()).collect();
    let levels = bounds.iter().map(|b| b.dims.len()).max().unwrap_or(0);
    for level in 0..=levels {
        let mut picked: Vec<Picked> = Vec::new();
        if level == 0 {
            let plain = (0..jobs.len()).filter(|&j| !grouped.get(j).copied().unwrap_or(true));
            picked.extend(plain.map(|j| (j, None, None)));
        }
        for ((bi, b), n) in bounds.iter().enumerate().zip(&narrowings) {
            match b.dims.get(level) {
                Some(&(j, ..)) => picked.push((j, Some(bi), n.needed())),
                None if level == b.dims.len() => {
                    let needed = n.needed();
                    picked.extend(b.rest.iter().map(|&j| (j, None, needed.clone())));
                }
                None => {}
            }
        }
        let round: Vec<TileJob<'_>> = (picked.iter())
            .map(|(j, _, needed)| {
                let job = jobs
                    .get(*j)
                    .ok_or_else(|| QueryError::invalid("a bounded tile of no job"))?;
                Ok(TileJob {
                    needed: needed.as_deref(),
                    ..*job
                })
            })
            .collect::<Result<_>>()?;
        let decoded = decode_tiles(&round, on.key, on.threads, on.spare, on.cache)?;
        for ((j, bound, needed), mut tile) in picked.into_iter().zip(decoded) {
            tile.partial = needed.is_some();
            let dim = bound.and_then(|bi| Some((bi, bounds.get(bi)?.dims.get(level)?)));
            if let Some((n, dim)) = dim.and_then(|(bi, dim)| Some((narrowings.get_mut(bi)?, dim))) {
                n.narrow((jobs.get(j)).map_or(0, |job| job.cells), dim, &tile);
            }
            placed.push((j, tile));
        }
    }
    let checked = (bounds.iter().zip(narrowings))
        .filter_map(|(b, n)| n.into_checked(b.tile))
        .collect();
    Ok((in_job_order(jobs.len(), placed)?, checked))
}

/// A round's job in [`decode_in_rounds`]: the job, the bound whose
/// dimension it is (`None`: another field), the cells it decodes.
type Picked = (usize, Option<usize>, Option<Vec<(u64, u64)>>);

/// `n` jobs' tiles, `placed` as (job, tile) in any order, in job order.
fn in_job_order(n: usize, placed: Vec<(usize, DecodedTile)>) -> Result<Vec<DecodedTile>> {
    let mut tiles: Vec<Option<DecodedTile>> = (0..n).map(|_| None).collect();
    for (j, tile) in placed {
        if let Some(slot) = tiles.get_mut(j) {
            *slot = Some(tile);
        }
    }
    (tiles.into_iter())
        .map(|t| t.ok_or_else(|| QueryError::invalid("a tile left undecoded")))
        .collect()
}

/// Per job, whether it belongs to a tile of `bounds`.
fn grouped_jobs(n: usize, bounds: &[TileBound]) -> Vec<bool> {
    let mut grouped = vec![false; n];
    for b in bounds {
        for j in b.dims.iter().map(|d| d.0).chain(b.rest.iter().copied()) {
            if let Some(g) = grouped.get_mut(j) {
                *g = true;
            }
        }
    }
    grouped
}

/// Cells a bounded tile's next fields decode ([`TileJob::needed`]): the
/// blocks of [`NEEDED_BLOCK`] cells holding one `mask` keeps, as sorted
/// disjoint half-open ranges. (Cell by cell, a scattered mask gave runs by
/// the thousand a tile, to find chunks of thousands of cells.)
fn kept_runs(mask: &[bool]) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (b, block) in mask.chunks(NEEDED_BLOCK).enumerate() {
        if !block.iter().any(|&m| m) {
            continue;
        }
        let from = b.saturating_mul(NEEDED_BLOCK) as u64;
        let to = from.saturating_add(block.len() as u64);
        match runs.last_mut() {
            Some((_, end)) if *end == from => *end = to,
            _ => runs.push((from, to)),
        }
    }
    runs
}

/// See [`kept_runs`]: far fewer cells than a chunk holds of all but the
/// widest cells (64 KiB of 8-byte values is 8,192).
const NEEDED_BLOCK: usize = 64;

/// Per chunk of part `part` of `job`, whether it holds a cell the read
/// uses; empty when every chunk is to be decoded. Only fixed-size fields'
/// fixed and validity parts map chunks to cells (TileDB cuts them at whole
/// cells); var-size data and pre-v5 zipped coordinates do not.
fn used_chunks(job: &TileJob<'_>, part: usize, chunks: &[FilteredChunk<'_>]) -> Vec<bool> {
    let (Some((_, pf)), Some(needed)) = (job.field.parts.get(part), job.needed) else {
        return Vec::new();
    };
    if pf.field_cell_size.is_none() || job.field.zipped.is_some() || pf.cell_size == 0 {
        return Vec::new();
    }
    let mut cell = 0u64;
    let mut used = Vec::with_capacity(chunks.len());
    for c in chunks {
        let size = u64::from(c.unfiltered_size);
        // `cell_size` is not 0 (checked above).
        let (Some(0), Some(n)) = (
            size.checked_rem(pf.cell_size),
            size.checked_div(pf.cell_size),
        ) else {
            // Not cut at a cell: cells cannot be mapped; decode it all.
            return Vec::new();
        };
        let end = cell.saturating_add(n);
        let k = needed.partition_point(|&(_, e)| e <= cell);
        used.push(needed.get(k).is_some_and(|&(s, _)| s < end));
        cell = end;
    }
    used
}

/// Checks a tile's unfiltered parts against each other and the cell count,
/// and puts them where a reader looks for them.
fn finish_tile(
    job: &TileJob<'_>,
    parts: impl Iterator<Item = TileData>,
    offsets_inside: bool,
) -> Result<DecodedTile> {
    let (ff, fetch, cells) = (job.field, job.fetch, job.cells);
    let tile = fetch.key.2;
    let file = fetch.parts.first().map_or("", |p| p.1.as_str());
    let kinds = fetch.parts.iter().map(|(kind, _, _)| *kind);
    let mut parts: Vec<(DataPart, TileData)> = kinds.zip(parts).collect();
    if let (Some(var), Some((lo, _)), Some(needed)) = (&fetch.var, fetch.slice(), job.needed) {
        // A sliced var tile's offsets count from the tile's first byte:
        // they are made to count from its data's window. Cells between
        // runs of cells read (past the one after each run, whose offset
        // ends the run) may not have been fetched: they are made empty.
        let kept = with_ends(needed, fetch.cells);
        for (_, data) in parts
            .iter_mut()
            .filter(|(kind, _)| *kind == DataPart::Fixed)
        {
            let mut last = 0;
            for (cell, o) in (lo..).zip(data.data.chunks_exact_mut(8)) {
                let k = kept.partition_point(|&(_, e)| e <= cell);
                if kept.get(k).is_some_and(|&(s, _)| s <= cell) {
                    let at = (&*o).try_into().map_or(0, u64::from_le_bytes);
                    last = at.checked_sub(var.start).ok_or_else(|| {
                        QueryError::corrupt(file, tile, format!("offset {at} before {}", var.start))
                    })?;
                }
                o.copy_from_slice(&last.to_le_bytes());
            }
        }
    }
    let mut out = FieldTile::assemble(file, parts, offsets_inside, &shape(job))
        .map_err(|e| shape_error(file, tile, e))?;
    if let Some((d, dims, layout)) = ff.zipped {
        // Pre-v5 coordinates: this dimension's values of every cell.
        let size = usize::try_from(cells)
            .ok()
            .and_then(|c| out.fixed.len().checked_div(c.checked_mul(dims)?))
            .unwrap_or(0);
        out.fixed = layout
            .dimension(&out.fixed, d, dims, size)
            .ok_or_else(|| QueryError::corrupt(file, tile, "short coordinates tile"))?;
    }
    Ok(out.into())
}

/// Decoded tiles by key.
pub(crate) type TileMap = HashMap<TileKey, DecodedTile, FastHash>;

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_filters::Filter;
    use tdb_format::{ArrayType, DataField};
    use tdb_schema::{ArraySchema, Attribute, Dimension};

    #[test]
    fn neighbouring_ranges_merge_into_runs_up_to_the_cap() {
        // Given out of order, over two files, one gap.
        let ranges = [
            ("f", 300..350),
            ("f", 0..100),
            ("g", 0..10),
            ("f", 100..300),
            ("f", 350..1000),
            ("f", 1200..1300),
        ];
        let asked = |c: &Coalesced| -> Vec<(String, ByteRange)> {
            (c.requests.iter())
                .map(|r| (r.key.clone(), r.range))
                .collect()
        };
        let run = |k: &str, o, n| (k.to_owned(), ByteRange::new(o, n));
        let whole = Coalesced::new(ranges.iter().cloned());
        assert_eq!(
            asked(&whole),
            [run("f", 0, 1000), run("f", 1200, 100), run("g", 0, 10)]
        );
        // A run ends at the range that takes it to the cap or past; no
        // range is cut.
        let capped = Coalesced::capped(ranges.iter().cloned(), 250);
        assert_eq!(
            asked(&capped),
            [
                run("f", 0, 300),
                run("f", 300, 700),
                run("f", 1200, 100),
                run("g", 0, 10)
            ]
        );
        // Each range's bytes come back from its run, in the order given.
        let file = |n: u64| Bytes::from((0..n).map(|i| (i % 251) as u8).collect::<Vec<_>>());
        for c in [&whole, &capped] {
            let reads: Vec<Option<RangeRead>> = (c.requests.iter())
                .map(|r| {
                    let ByteRange::Bounded { offset, len } = r.range else {
                        unreachable!()
                    };
                    let f = file(2000);
                    Some(RangeRead {
                        bytes: f.slice(offset as usize..(offset + len) as usize),
                        file_size: 2000,
                        arranged: false,
                    })
                })
                .collect();
            let got = c.split(&reads);
            for ((_, r), g) in ranges.iter().zip(got) {
                let want = file(2000).slice(r.start as usize..r.end as usize);
                assert_eq!(g.unwrap(), want, "{r:?}");
            }
        }
    }

    fn schema() -> ArraySchema {
        ArraySchema::builder(ArrayType::Sparse)
            .dimension(Dimension::builder("d", Datatype::Int64).domain(0i64, 1 << 20))
            .attribute(Attribute::builder("a", Datatype::Int64).filters([
                Filter::Delta {
                    level: -1,
                    reinterpret: None,
                },
                Filter::Zstd { level: 1 },
            ]))
            .attribute(Attribute::builder("v", Datatype::Int32).var())
            .attribute(Attribute::builder("u", Datatype::Int64))
            .build()
            .unwrap()
    }

    fn field(s: &ArraySchema, a: u32, parts: &[DataPart]) -> FragField {
        let data_field = DataField::Attribute(a);
        FragField {
            index: a as usize,
            parts: parts
                .iter()
                .map(|&p| (p, s.part_filters(&data_field, p, false).unwrap()))
                .collect(),
            data_field,
            zipped: None,
            paths: Vec::new(),
        }
    }

    /// A bare fetch's answer: arranged with its headers as predicted, the
    /// data is the part (the answer's own allocation); arranged but framed
    /// otherwise (a release that cuts chunks elsewhere, same total), the
    /// tile's bytes back in file order; not arranged, as they came.
    #[test]
    fn a_bare_answer_is_the_tile_only_when_its_headers_agree() {
        let k = 1024u64;
        let tile = |cuts: &[u64]| {
            let data: Vec<u8> = (0..128 * k).map(|i| (i % 253) as u8).collect();
            let mut at = 0usize;
            let chunks = cuts.iter().map(|&n| {
                let c = tdb_tile::FilteredChunk {
                    unfiltered_size: n as u32,
                    metadata: &[],
                    data: &data[at..at + n as usize],
                };
                at += n as usize;
                c
            });
            let mut out = Vec::new();
            tdb_tile::write_filtered_chunks(chunks.collect::<Vec<_>>().into_iter(), &mut out)
                .unwrap();
            (out, data)
        };
        let data = tdb_tile::bare_chunk_data(8 + 2 * 12 + 128 * k, 128 * k, 4).unwrap();
        let answer = |bytes: Vec<u8>, arranged: bool| RangeRead {
            bytes: Bytes::from(bytes),
            file_size: 0,
            arranged,
        };
        // As TileDB chunks 4-byte cells: two chunks of 64 KiB.
        let (raw, cells) = tile(&[64 * k, 64 * k]);
        let arranged = tdb_storage::arrange(&raw, &data).unwrap();
        let at = arranged.as_ptr();
        match bare_part(answer(arranged, true), &data).unwrap() {
            PartBytes::Bare(part) => {
                let part = part.into_inner().unwrap();
                assert_eq!(part, cells);
                assert_eq!(part.as_ptr(), at, "the answer's allocation");
            }
            _ => panic!("not taken as the tile"),
        }
        // The same size in chunks of 48 and 80 KiB: decoded as any tile.
        let (raw, _) = tile(&[48 * k, 80 * k]);
        let arranged = tdb_storage::arrange(&raw, &data).unwrap();
        for (bytes, arranged) in [(arranged, true), (raw.clone(), false)] {
            match bare_part(answer(bytes, arranged), &data).unwrap() {
                PartBytes::Whole(b) => assert_eq!(b.as_ref(), raw.as_slice()),
                _ => panic!("taken as the tile"),
            }
        }
    }

    /// A job decoding all of `fetch`'s tile from `bytes`.
    fn whole<'a>(
        fetch: &'a TileFetch,
        bytes: &'a [PartBytes],
        field: &'a FragField,
    ) -> TileJob<'a> {
        TileJob {
            fetch,
            bytes,
            field,
            version: FormatVersion::WRITTEN,
            cells: fetch.cells,
            needed: None,
            var_size: None,
        }
    }

    fn filtered(ff: &FragField, part: usize, tile: &[u8], offsets: Option<&[u64]>) -> Bytes {
        let f = ff.parts[part].1.tile_filters(FormatVersion::WRITTEN, None);
        let mut out = Vec::new();
        f.filter(
            "t",
            &mut tdb_filters::Workspace::default(),
            tile,
            offsets,
            &mut out,
        )
        .unwrap();
        Bytes::from(out)
    }

    /// A sliced var-size tile fetches its offsets' chunks, then the data's
    /// chunks its cells' offsets point at, and holds those cells alone,
    /// offsets counted from their first byte: the tile's first cells, a
    /// few in the middle, an empty one, the last (whose data ends with the
    /// tile's), runs apart (chunks between them are not fetched: the
    /// cells there are held empty) and strided.
    #[test]
    fn a_sliced_var_tile_fetches_and_holds_only_its_cells_bytes() {
        let s = schema();
        let cells = 160_000u64;
        let (mut offsets, mut var) = (Vec::new(), Vec::new());
        for i in 0..cells as i32 {
            offsets.push(var.len() as u64);
            for k in 0..i % 4 {
                var.extend_from_slice(&(i + k).to_le_bytes());
            }
        }
        let offsets_tile: Vec<u8> = offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
        let fv = field(&s, 1, &[DataPart::Fixed, DataPart::Var]);
        // Each tile after 100 bytes of something else in its file.
        let pad = |b: Bytes| Bytes::from([vec![7u8; 100], b.to_vec()].concat());
        let files: HashMap<&str, Bytes> = HashMap::from([
            ("off", pad(filtered(&fv, 0, &offsets_tile, None))),
            ("var", pad(filtered(&fv, 1, &var, Some(&offsets)))),
        ]);
        let whole: u64 = files.values().map(|b| b.len() as u64 - 100).sum();
        let filters = fv.parts[0].1.tile_filters(FormatVersion::WRITTEN, None);
        let var_size = var.len() as u64;
        for needed in [
            vec![(0, 3)],
            // An empty cell: no var byte, no var chunk.
            vec![(4, 5)],
            vec![(80_000, 80_010)],
            vec![(159_990, 160_000)],
            vec![(100, 110), (3_000, 3_005)],
            // Far apart: the chunks between are not fetched.
            vec![(100, 110), (120_000, 120_005)],
            (100..400).map(|k| (k * 150 + 101, k * 150 + 102)).collect(),
        ] {
            let fetch = TileFetch {
                key: (0, 1, 0),
                parts: [(DataPart::Fixed, "off"), (DataPart::Var, "var")]
                    .into_iter()
                    .map(|(p, f)| (p, f.to_owned(), 100..files[f].len() as u64))
                    .collect(),
                cells,
                needed: Some(needed.clone()),
                sliced: true,
                var: None,
                packed: false,
            };
            let size = |_: TileKey, p: usize| fv.parts[p].1.cell_size;
            let mut fetching = Fetching::new(
                vec![fetch],
                size,
                |_, _| false,
                4096,
                &WalkPoints::default(),
                u64::MAX,
            );
            let cache = ChunkCache::default();
            let mut read = 0u64;
            loop {
                for r in fetching.answers.ask().unwrap() {
                    let file = &files[r.key.as_str()];
                    let (at, len) = r.range.resolve(&r.key, file.len() as u64).unwrap();
                    read += len;
                    let bytes = file.slice(at as usize..(at + len) as usize);
                    let answer = RangeRead {
                        bytes,
                        file_size: file.len() as u64,
                        arranged: false,
                    };
                    fetching.answers.take(&r, Some(answer)).unwrap();
                }
                let mut window = |f: &TileFetch, found: &[(WalkedChunk, Bytes)]| {
                    var_bytes(f, found, (&filters, 0), var_size, &cache)
                };
                if fetching.absorb(&mut window).unwrap() {
                    break;
                }
            }
            if needed.len() <= 2 {
                assert!(read * 4 < whole, "{needed:?}: {read} of {whole} bytes read");
            }
            let (fetches, parts) = fetching.finish(&mut WalkPoints::default(), 1);
            let bytes: Vec<PartBytes> = parts.into_iter().flatten().flatten().collect();
            let fetch = &fetches[0];
            let job = TileJob {
                fetch,
                bytes: &bytes,
                field: &fv,
                version: FormatVersion::WRITTEN,
                cells,
                needed: fetch.needed.as_deref(),
                var_size: Some(var_size),
            };
            let tile = decode_tiles(&[job], None, 1, &Spare::new(0), &cache)
                .unwrap()
                .remove(0);
            // Decoded again, as the next piece over the same chunks is,
            // the chunks kept are not: their filtered bytes, spoiled, are
            // never looked at (without the cache they are an error).
            if needed.len() <= 2 {
                let spoiled: Vec<PartBytes> = (bytes.iter())
                    .map(|b| match b {
                        PartBytes::Chunks(found) => PartBytes::Chunks(
                            (found.iter())
                                .map(|(c, b)| {
                                    let mut b = b.to_vec();
                                    b.iter_mut().skip(12).for_each(|x| *x = 0);
                                    (c.clone(), Bytes::from(b))
                                })
                                .collect(),
                        ),
                        PartBytes::Whole(b) => PartBytes::Whole(b.clone()),
                        PartBytes::Bare(_) => unreachable!("no bare part here"),
                    })
                    .collect();
                let again = TileJob {
                    bytes: &spoiled,
                    ..job
                };
                let kept = decode_tiles(&[again], None, 1, &Spare::new(0), &cache).unwrap();
                assert_eq!(
                    (&kept[0].offsets, &kept[0].var),
                    (&tile.offsets, &tile.var),
                    "{needed:?}"
                );
                let cold = ChunkCache::default();
                let again = TileJob {
                    bytes: &spoiled,
                    ..job
                };
                assert!(decode_tiles(&[again], None, 1, &Spare::new(0), &cold).is_err());
            }
            let (lo, hi) = (needed[0].0, needed.last().unwrap().1);
            assert_eq!(tile.first, lo, "{needed:?}");
            assert_eq!(tile.offsets.len() as u64, hi - lo, "{needed:?}");
            let col = tile.column(Datatype::Int32, crate::VAR_NUM);
            for i in needed.iter().flat_map(|&(a, b)| a..b) {
                let start = offsets[i as usize] as usize;
                let end = offsets
                    .get(i as usize + 1)
                    .map_or(var.len(), |&e| e as usize);
                assert_eq!(col.cell((i - lo) as usize), &var[start..end], "cell {i}");
            }
            let held = (offsets[lo as usize] as usize)
                ..offsets.get(hi as usize).map_or(var.len(), |&e| e as usize);
            assert_eq!(tile.var.len(), held.len(), "{needed:?}: the data held");
        }
    }

    /// However many tile parts a read walks, the points of earlier pieces
    /// are kept up to a bound, the most recent; the latest piece's stay.
    #[test]
    fn walk_points_of_earlier_pieces_stay_bounded() {
        // A tile of one chunk: its count, its header, 4 bytes of data.
        let mut tile = 1u64.to_le_bytes().to_vec();
        for v in [4u32, 4, 0] {
            tile.extend(v.to_le_bytes());
        }
        tile.extend([1, 2, 3, 4]);
        let mut walk = ChunkWalk::new(0..tile.len() as u64, std::iter::once(0..4).collect(), 4096);
        let r = walk.want().unwrap();
        walk.give("t", &tile[r.start as usize..r.end as usize])
            .unwrap();
        let point = walk.point().unwrap();
        let key = |k: u64| ((0, 0, k), 0);
        let mut points = WalkPoints::default();
        for k in 0..5_000u64 {
            let stop = |when| WalkStop {
                point,
                last: None,
                when,
            };
            // Two tile parts a piece, none walked again.
            points.insert(key(2 * k), stop(k));
            points.insert(key(2 * k + 1), stop(k));
            keep_carried(&mut points, k);
            assert!(points.len() <= 2 * POINTS_KEPT + 2, "{}", points.len());
        }
        assert!(points.contains_key(&key(9_999)) && points.contains_key(&key(9_000)));
        assert!(!points.contains_key(&key(0)));
    }

    /// Tiles of several chunks come out the same whether the pool decodes
    /// each part whole (one worker) or cut into runs of chunks (four
    /// workers: three parts, so runs), and a bad chunk is named by its
    /// index in its tile.
    #[test]
    fn runs_of_chunks_over_the_pool_give_the_same_tiles() {
        let s = schema();
        let cells = 40_000u64;
        let a: Vec<u8> = (0..cells as i64)
            .flat_map(|i| (i * i % 1000).to_le_bytes())
            .collect();
        let mut offsets = Vec::new();
        let mut var = Vec::new();
        for i in 0..cells as i32 {
            offsets.push(var.len() as u64);
            for k in 0..i % 4 {
                var.extend_from_slice(&(i + k).to_le_bytes());
            }
        }
        let offsets_tile: Vec<u8> = offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
        let fa = field(&s, 0, &[DataPart::Fixed]);
        let fv = field(&s, 1, &[DataPart::Fixed, DataPart::Var]);
        let a_tile = filtered(&fa, 0, &a, None);
        let ba = [PartBytes::Whole(a_tile.clone())];
        let bv = [
            PartBytes::Whole(filtered(&fv, 0, &offsets_tile, None)),
            PartBytes::Whole(filtered(&fv, 1, &var, Some(&offsets))),
        ];
        let fetch = |slot: usize, ff: &FragField, bytes: &[PartBytes]| TileFetch {
            key: (0, slot, 0),
            parts: ff
                .parts
                .iter()
                .zip(bytes)
                .map(|((p, _), b)| (*p, format!("f{slot}_{p:?}"), 0..b.len() as u64))
                .collect(),
            cells,
            needed: None,
            sliced: false,
            var: None,
            packed: false,
        };
        let (fetch_a, fetch_v) = (fetch(0, &fa, &ba), fetch(1, &fv, &bv));
        let job = whole;
        let jobs = [job(&fetch_a, &ba[..], &fa), job(&fetch_v, &bv[..], &fv)];
        // Buffers go back to one spare after each decode and serve the
        // next: what they held must not show through.
        let spare = Spare::new(1 << 30);
        for threads in [1, 4, 1, 4] {
            let tiles = decode_tiles(&jobs, None, threads, &spare, &ChunkCache::default()).unwrap();
            assert_eq!(tiles[0].fixed, a, "{threads}");
            assert_eq!(
                (&tiles[1].offsets, &tiles[1].var),
                (&offsets, &var),
                "{threads}"
            );
            spare.keep_tiles(tiles);
        }
        assert!(spare.bufs.lock().unwrap().len() >= 2);
        // What no tile took is freed once a piece is decoded.
        let held = Spare::new(1 << 30);
        held.keep(vec![1; 100]);
        assert_eq!(held.take(1000).capacity(), 0, "none fits: a fresh buffer");
        held.release();
        assert!(held.bufs.lock().unwrap().is_empty());
        // Break chunk 3 of `a`'s tile (its zstd frame's magic number).
        let f = fa.parts[0].1.tile_filters(FormatVersion::WRITTEN, None);
        let chunks = f.chunks("t", &a_tile).unwrap();
        assert!(chunks.len() > 4, "{}", chunks.len());
        let at = chunks[3].data.as_ptr() as usize - a_tile.as_ptr() as usize;
        let mut bad = a_tile.to_vec();
        bad[at] ^= 0xFF;
        let bad = [PartBytes::Whole(Bytes::from(bad))];
        for threads in [1, 4] {
            let Err(err) = decode_tiles(
                &[job(&fetch_a, &bad[..], &fa)],
                None,
                threads,
                &spare,
                &ChunkCache::default(),
            ) else {
                panic!("{threads}: a broken chunk decoded")
            };
            let QueryError::Tile { source, .. } = &err else {
                panic!("{err}")
            };
            assert!(
                matches!(**source, tdb_tile::TileError::Filter { chunk: 3, .. })
                    || matches!(**source, tdb_tile::TileError::Corrupt { ref reason, .. } if reason.contains("chunk 3")),
                "{threads}: {err}"
            );
        }
        // Only the chunk holding cells 10000..10002 (8192 int64 cells a
        // chunk: chunk 1) is decoded; the others, the broken one among
        // them, stay zero.
        let needed = [(10_000u64, 10_002u64)];
        for threads in [1, 4] {
            let tiles = decode_tiles(
                &[TileJob {
                    needed: Some(&needed),
                    ..job(&fetch_a, &bad[..], &fa)
                }],
                None,
                threads,
                &spare,
                &ChunkCache::default(),
            )
            .unwrap_or_else(|e| panic!("{threads}: {e}"));
            let got = &tiles[0].fixed;
            assert_eq!(got.len(), a.len());
            assert_eq!(got[8192 * 8..16384 * 8], a[8192 * 8..16384 * 8]);
            assert!(got[..8192 * 8]
                .iter()
                .chain(&got[16384 * 8..])
                .all(|&b| b == 0));
            spare.keep_tiles(tiles);
        }
    }

    /// A bounded tile decodes its dimensions one after the other, each in
    /// the chunks holding cells the ones before kept, then its other
    /// fields in the chunks holding cells all of them kept (8,192 int64
    /// cells a chunk); the cells kept are handed on, and the tiles decoded
    /// in part are marked so no later piece takes them for whole. The
    /// same a tile a job and in rounds over the tiles, on one thread and
    /// on four.
    #[test]
    fn a_bounded_tile_decodes_only_the_chunks_holding_cells_within_its_ranges() {
        let s = schema();
        let cells = 40_000u64;
        let col = |f: fn(i64) -> i64| -> Vec<u8> {
            (0..cells as i64).flat_map(|i| f(i).to_le_bytes()).collect()
        };
        let (d, u) = (col(|i| i), col(|i| i * 3 - 7));
        let fd = FragField {
            index: 0,
            parts: vec![(
                DataPart::Fixed,
                s.part_filters(&DataField::Dimension(0), DataPart::Fixed, false)
                    .unwrap(),
            )],
            data_field: DataField::Dimension(0),
            zipped: None,
            paths: Vec::new(),
        };
        let fu = field(&s, 2, &[DataPart::Fixed]);
        let bd = [PartBytes::Whole(filtered(&fd, 0, &d, None))];
        let bu = [PartBytes::Whole(filtered(&fu, 0, &u, None))];
        // The dimension's tile twice (slots 0 and 1): two bounding
        // dimensions, the second decoded only where the first kept cells.
        let fetch = |slot: usize, tile: u64, bytes: &[PartBytes]| TileFetch {
            key: (0, slot, tile),
            parts: vec![(
                DataPart::Fixed,
                format!("f{slot}"),
                0..bytes[0].len() as u64,
            )],
            cells,
            needed: None,
            sliced: false,
            var: None,
            packed: false,
        };
        let fetches = [
            fetch(0, 0, &bd),
            fetch(1, 0, &bd),
            fetch(2, 0, &bu),
            fetch(0, 1, &bd),
            fetch(2, 1, &bu),
        ];
        let parts: [(&[PartBytes], &FragField); 5] =
            [(&bd, &fd), (&bd, &fd), (&bu, &fu), (&bd, &fd), (&bu, &fu)];
        let jobs: Vec<TileJob<'_>> = (fetches.iter().zip(parts))
            .map(|(fetch, (bytes, field))| whole(fetch, bytes, field))
            .collect();
        let ops = tdb_index::RangeOps::new(&s.domain.dimensions[0], 0).unwrap();
        let range = |lo: i64, hi: i64| {
            vec![tdb_schema::Range::from_bounds(
                &lo.to_le_bytes(),
                &hi.to_le_bytes(),
                false,
            )]
        };
        let bounds = [
            // Tile 0: cells 15,000-30,000 (chunks 1-3), then 20,000-20,100
            // (chunk 2).
            TileBound {
                tile: (0, 0),
                dims: vec![
                    (0, 0, ops, range(15_000, 30_000)),
                    (1, 1, ops, range(20_000, 20_100)),
                ],
                rest: vec![2],
            },
            // Tile 1: no cell within.
            TileBound {
                tile: (0, 1),
                dims: vec![(3, 0, ops, range(50_000, 60_000))],
                rest: vec![4],
            },
        ];
        let chunk = |c: usize| c * 8192 * 8..((c + 1) * 8192 * 8).min(d.len());
        let zero = |b: &[u8]| b.iter().all(|&x| x == 0);
        type Decode = for<'r, 'j> fn(
            &[TileJob<'j>],
            &[TileBound],
            Decoding<'r, 'j>,
        ) -> Result<(Vec<DecodedTile>, Checked)>;
        // A tile a job, and in rounds over all tiles.
        let ways: [(Decode, usize); 4] = [
            (decode_tile_by_tile, 1),
            (decode_tile_by_tile, 4),
            (decode_in_rounds, 1),
            (decode_in_rounds, 4),
        ];
        for (decode, threads) in ways {
            let (spare, cache) = (Spare::new(1 << 30), ChunkCache::default());
            let on = Decoding {
                key: None,
                threads,
                spare: &spare,
                cache: &cache,
            };
            let (tiles, checked) = decode(&jobs, &bounds, on).unwrap();
            // The first dimension whole, the second in chunks 1-3.
            assert_eq!(tiles[0].fixed, d);
            assert!(!tiles[0].partial && tiles[1].partial && tiles[2].partial);
            for c in 0..5 {
                let (got, want) = (&tiles[1].fixed[chunk(c)], &d[chunk(c)]);
                assert!(
                    if (1..=3).contains(&c) {
                        got == want
                    } else {
                        zero(got)
                    },
                    "{c}"
                );
                let got = &tiles[2].fixed[chunk(c)];
                assert!(
                    if c == 2 {
                        got == &u[chunk(c)]
                    } else {
                        zero(got)
                    },
                    "{c}"
                );
            }
            let (dims, mask) = &checked[&(0, 0)];
            assert_eq!(dims, &[0, 1]);
            let kept: Vec<usize> = (0..mask.len()).filter(|&i| mask[i]).collect();
            assert_eq!(kept, (20_000..=20_100).collect::<Vec<_>>());
            // Tile 1: nothing but its dimension decoded.
            assert_eq!(tiles[3].fixed, d);
            assert!(tiles[4].partial && zero(&tiles[4].fixed));
            assert_eq!(tiles[4].fixed.len(), u.len());
            assert!(checked[&(0, 1)].1.iter().all(|&m| !m));
        }
    }

    /// A piece of 1 MiB of tiles decodes on the pool when its chunks go
    /// through zstd, and on the calling thread when unfiltering them is a
    /// copy (waking the workers cost more than the copy: W2's slices).
    #[test]
    fn tiles_that_unfilter_by_a_copy_decode_on_the_calling_thread() {
        let s = schema();
        let cells = 1u64 << 17;
        // Values neither delta nor zstd shrink (pseudo-random): the work
        // is about the tile's bytes.
        let mut rng = tdb_testdata::XorShift::new(7);
        let values: Vec<u8> = (0..cells)
            .flat_map(|_| rng.next_u64().to_le_bytes())
            .collect();
        for (attribute, pooled) in [(0u32, true), (2, false)] {
            let ff = field(&s, attribute, &[DataPart::Fixed]);
            let bytes = [PartBytes::Whole(filtered(&ff, 0, &values, None))];
            let fetch = TileFetch {
                key: (0, 0, 0),
                parts: vec![(DataPart::Fixed, "f".into(), 0..bytes[0].len() as u64)],
                cells,
                needed: None,
                sliced: false,
                var: None,
                packed: false,
            };
            let job = whole(&fetch, &bytes, &ff);
            let before = crate::pool::HANDED.with(|h| h.get());
            let tiles =
                decode_tiles(&[job], None, 2, &Spare::new(0), &ChunkCache::default()).unwrap();
            assert_eq!(tiles[0].fixed, values, "attribute {attribute}");
            let handed = crate::pool::HANDED.with(|h| h.get()) > before;
            assert_eq!(handed, pooled, "attribute {attribute}");
        }
    }
}
