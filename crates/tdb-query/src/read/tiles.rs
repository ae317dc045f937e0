//! Fetching and unfiltering tiles: the byte ranges a set of tiles needs,
//! and the decoded tiles those bytes give.

use super::fields::FragField;
use crate::column::Column;
use crate::{QueryError, Result};
use bytes::Bytes;
use std::collections::HashMap;
use tdb_format::{DataPart, Datatype, FormatVersion};
use tdb_fragment::FragmentMetadata;
use tdb_storage::{join, ByteRange, RangeRead, RangeRequest};
use tdb_tile::TileFilters;

/// A tile of one field of one fragment: (fragment, field slot, tile).
pub(crate) type TileKey = (usize, usize, u64);

/// One field's unfiltered tile.
#[derive(Debug, Default)]
pub(crate) struct DecodedTile {
    pub fixed: Vec<u8>,
    pub offsets: Vec<u64>,
    pub var: Vec<u8>,
    pub validity: Option<Vec<u8>>,
}

impl DecodedTile {
    pub fn column(&self, datatype: Datatype, cell_val_num: u32) -> Column<'_> {
        Column {
            datatype,
            cell_val_num,
            fixed: &self.fixed,
            offsets: &self.offsets,
            var: &self.var,
            validity: self.validity.as_deref(),
        }
    }
}

/// One tile to fetch: where each of its parts is.
pub(crate) struct TileFetch {
    pub key: TileKey,
    pub parts: Vec<(DataPart, String, std::ops::Range<u64>)>,
}

/// The parts of tile `tile` of `ff` in `frag` and their byte ranges.
pub(crate) fn plan_tile(
    dir: &str,
    frag_path: &str,
    m: &FragmentMetadata,
    ff: &FragField,
    key: TileKey,
) -> Result<TileFetch> {
    let tile = key.2;
    let mut parts = Vec::new();
    for (part, _) in &ff.parts {
        let range = match part {
            DataPart::Fixed => m.tile_range(ff.index, tile)?,
            DataPart::Var => m.var_tile_range(ff.index, tile)?,
            DataPart::Validity => m.validity_tile_range(ff.index, tile)?,
        };
        let path = join(&join(dir, frag_path), &ff.data_field.file_name(*part));
        parts.push((*part, path, range));
    }
    Ok(TileFetch { key, parts })
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
    /// The requests for `ranges` (file, byte range).
    pub fn new<'p>(ranges: impl IntoIterator<Item = (&'p str, std::ops::Range<u64>)>) -> Self {
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
            let extends = matches!(open, Some((p, _, e)) if p == path && e == start);
            if !extends {
                if let Some((p, s, e)) = open.take() {
                    requests.push(RangeRequest::new(p, ByteRange::new(s, e - s)));
                }
                open = Some((path, start, start));
            }
            if let Some((_, s, e)) = &mut open {
                *e = end;
                parts[k] = (
                    requests.len(),
                    (start - *s) as usize,
                    (end - start) as usize,
                );
            }
        }
        if let Some((p, s, e)) = open {
            requests.push(RangeRequest::new(p, ByteRange::new(s, e - s)));
        }
        Coalesced { requests, parts }
    }

    /// The requests for every part of `fetches`.
    pub fn tiles(fetches: &[TileFetch]) -> Self {
        Coalesced::new(fetches.iter().flat_map(|f| {
            f.parts
                .iter()
                .map(|(_, path, r)| (path.as_str(), r.clone()))
        }))
    }

    /// Each range's bytes (in the order given) from the answers to
    /// `requests`; `None` where a file was missing or came back short.
    pub fn split(&self, reads: &[Option<RangeRead>]) -> Vec<Option<Bytes>> {
        self.parts
            .iter()
            .map(|&(r, off, len)| {
                let b = &reads.get(r)?.as_ref()?.bytes;
                (off + len <= b.len()).then(|| b.slice(off..off + len))
            })
            .collect()
    }
}

/// Unfilters one tile from its parts' bytes. `cells` is the number of
/// cells it must hold.
pub(crate) fn decode_tile(
    ff: &FragField,
    version: FormatVersion,
    key: Option<&[u8; 32]>,
    fetch: &TileFetch,
    bytes: &[&[u8]],
    cells: u64,
) -> Result<DecodedTile> {
    let tile = fetch.key.2;
    let mut out = DecodedTile::default();
    let mut offsets_inside = false;
    for (((part, path, _), b), (_, pf)) in fetch.parts.iter().zip(bytes).zip(&ff.parts) {
        let filters =
            TileFilters::new(&pf.pipeline, pf.datatype, pf.cell_size, version).with_key(key);
        let loc = format!("{path} tile {tile}");
        let var = *part == DataPart::Var;
        let data = filters
            .unfilter_whole(&loc, b, var)
            .map_err(|e| QueryError::Tile {
                file: path.clone(),
                tile,
                source: Box::new(e),
            })?;
        match part {
            DataPart::Fixed => out.fixed = data.data,
            DataPart::Var => {
                offsets_inside = filters.offsets_inside();
                if offsets_inside {
                    out.offsets = data.offsets;
                }
                out.var = data.data;
            }
            DataPart::Validity => out.validity = Some(data.data),
        }
    }
    let file = fetch.parts.first().map_or("", |p| p.1.as_str());
    let has_var = ff.parts.iter().any(|(p, _)| *p == DataPart::Var);
    if has_var && !offsets_inside {
        if out.fixed.len() % 8 != 0 {
            return Err(QueryError::corrupt(
                file,
                tile,
                format!("{} bytes of offsets", out.fixed.len()),
            ));
        }
        out.offsets = tdb_format::le::u64_values(&out.fixed).collect();
        out.fixed = Vec::new();
    }
    if has_var {
        if out.offsets.len() as u64 != cells {
            return Err(QueryError::corrupt(
                file,
                tile,
                format!("{} offsets for {cells} cells", out.offsets.len()),
            ));
        }
        let mut prev = 0;
        for &o in &out.offsets {
            if o < prev || o > out.var.len() as u64 {
                return Err(QueryError::corrupt(
                    file,
                    tile,
                    format!(
                        "offset {o} out of order or past the {}-byte var tile",
                        out.var.len()
                    ),
                ));
            }
            prev = o;
        }
    } else if let Some(size) = ff
        .parts
        .first()
        .and_then(|(_, pf)| pf.field_cell_size)
        .filter(|_| ff.zipped.is_none())
    {
        let want = cells.saturating_mul(size);
        if out.fixed.len() as u64 != want {
            return Err(QueryError::corrupt(
                file,
                tile,
                format!(
                    "{} bytes unfiltered, {cells} cells of {size} bytes need {want}",
                    out.fixed.len()
                ),
            ));
        }
    }
    if let Some(v) = &out.validity {
        if v.len() as u64 != cells {
            return Err(QueryError::corrupt(
                file,
                tile,
                format!("{} validity bytes for {cells} cells", v.len()),
            ));
        }
    }
    if let Some((d, dims)) = ff.zipped {
        // Pre-v5 coordinates: each dimension's values in turn.
        let size = out.fixed.len() / dims.max(1);
        out.fixed = out
            .fixed
            .get(d * size..(d + 1) * size)
            .ok_or_else(|| QueryError::corrupt(file, tile, "short coordinates tile"))?
            .to_vec();
    }
    Ok(out)
}

/// Decodes `jobs` on up to `threads` workers (one bounded pool per call).
pub(crate) fn decode_all<J: Sync, T: Send>(
    jobs: &[J],
    threads: usize,
    f: impl Fn(&J) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let n = jobs.len();
    let threads = threads.clamp(1, n.max(1));
    if threads == 1 {
        return jobs.iter().map(&f).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<Result<T>>> = (0..n).map(|_| None).collect();
    let chunks: Vec<Vec<(usize, Result<T>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        done.push((i, f(&jobs[i])));
                    }
                    done
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    for (i, r) in chunks.into_iter().flatten() {
        results[i] = Some(r);
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(QueryError::invalid("a decode worker panicked"))))
        .collect()
}

/// Decoded tiles by key.
pub(crate) type TileMap = HashMap<TileKey, DecodedTile>;
