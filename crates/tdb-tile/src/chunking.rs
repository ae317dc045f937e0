//! Where TileDB cuts a tile into chunks before filtering
//! (`FilterPipeline::run_forward` and `get_var_chunk_sizes`).
//!
//! Fixed-size cells: chunks of at most 64 KiB holding whole cells, as
//! TileDB writes since v11 (a cell larger than 64 KiB gets a chunk of its
//! own); tdb writes only v22, and reading needs no cut rule. Var-size cells:
//! a cell that would overflow the chunk still joins it if the chunk is at
//! most half full or the result stays within 150%; otherwise it starts the
//! next chunk. Tiles that filters see whole (string RLE and dictionary,
//! WebP) are one chunk.

use std::ops::Range;

/// TileDB's `constants::max_tile_chunk_size`: the target chunk size. The
/// pipeline's own `max_chunk_size` field is stored but not used for this.
pub const MAX_TILE_CHUNK_SIZE: u64 = tdb_filters::DEFAULT_MAX_CHUNK_SIZE as u64;

/// Why a tile cannot be chunked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkingError(pub String);

/// The chunk size of fixed-size cells (`WriterTile::compute_chunk_size`).
pub fn fixed_chunk_size(tile_size: u64, cell_size: u64) -> Result<u64, ChunkingError> {
    let cell_size = cell_size.max(1);
    let whole_cells = MAX_TILE_CHUNK_SIZE
        .min(tile_size)
        .checked_div(cell_size)
        .unwrap_or(0);
    let size = whole_cells.saturating_mul(cell_size).max(cell_size);
    if size > u64::from(u32::MAX) {
        return Err(ChunkingError(format!("chunk size {size} exceeds u32")));
    }
    Ok(size)
}

/// The byte ranges of a tile's chunks, in order.
///
/// `var_offsets` are the cell start offsets of a var-size data tile (TileDB
/// passes the offsets tile for every var-size tile); `chunked` is false for
/// tiles filtered whole.
pub fn chunk_ranges(
    tile_size: u64,
    cell_size: u64,
    var_offsets: Option<&[u64]>,
    chunked: bool,
) -> Result<Vec<Range<u64>>, ChunkingError> {
    let chunk_size = if chunked {
        fixed_chunk_size(tile_size, cell_size)?
    } else if tile_size > u64::from(u32::MAX) {
        return Err(ChunkingError(format!(
            "tile of {tile_size} bytes exceeds u32"
        )));
    } else {
        tile_size
    };
    let starts = match var_offsets {
        Some(offsets) => var_chunk_starts(chunk_size, tile_size, offsets)?,
        None => Vec::new(),
    };
    Ok(if tile_size == chunk_size {
        // One chunk: the whole tile.
        std::iter::once(0..tile_size).collect()
    } else if !starts.is_empty() {
        // Each chunk runs to the next one's start, the last to the end.
        let ends = starts.iter().skip(1).chain([&tile_size]);
        starts.iter().zip(ends).map(|(&s, &e)| s..e).collect()
    } else {
        // `chunk_size` is at least one cell, so at least 1.
        let step = usize::try_from(chunk_size.max(1)).unwrap_or(usize::MAX);
        (0..tile_size)
            .step_by(step)
            .map(|s| s..s.saturating_add(chunk_size).min(tile_size))
            .collect()
    })
}

/// Where the chunks' data of a tile stored without filters lies in its
/// `persisted` bytes (from the tile's first byte), if those are as many
/// as TileDB writes for `unfiltered` bytes of `cell_size`-byte cells: a
/// chunk count, then each chunk's 12-byte header and its bytes as they
/// are. A reader that fetches them apart from the headers has the tile
/// contiguous without a copy; [`crate::bare_framing_matches`] then checks
/// the headers agree (an older release cuts chunks otherwise).
pub fn bare_chunk_data(persisted: u64, unfiltered: u64, cell_size: u64) -> Option<Vec<Range<u64>>> {
    let chunks = chunk_ranges(unfiltered, cell_size, None, true).ok()?;
    let header = crate::CHUNK_HEADER_SIZE as u64;
    let framing = (chunks.len() as u64).checked_mul(header)?.checked_add(8)?;
    if unfiltered == 0 || framing.checked_add(unfiltered)? != persisted {
        return None;
    }
    let mut at = 8u64;
    let mut data = Vec::with_capacity(chunks.len());
    for c in chunks {
        let start = at.checked_add(header)?;
        let end = start.checked_add(c.end.checked_sub(c.start)?)?;
        data.push(start..end);
        at = end;
    }
    Some(data)
}

fn var_chunk_starts(
    chunk_size: u64,
    tile_size: u64,
    offsets: &[u64],
) -> Result<Vec<u64>, ChunkingError> {
    let mut cuts = VarCuts::new(chunk_size);
    let mut starts = vec![0];
    for (c, &start) in offsets.iter().enumerate() {
        let last = c.saturating_add(1) == offsets.len();
        let end = offsets
            .get(c.saturating_add(1))
            .copied()
            .unwrap_or(tile_size);
        let cell = end
            .checked_sub(start)
            .filter(|_| end <= tile_size)
            .ok_or_else(|| {
                ChunkingError(format!(
                    "cell {c} spans {start}..{end} in a tile of {tile_size} bytes"
                ))
            })?;
        match cuts.cell(cell)? {
            VarCut::Join => {}
            VarCut::JoinThenCut => starts.push(end),
            VarCut::CutThenJoin => starts.push(start),
            VarCut::Alone => {
                starts.push(start);
                if !last {
                    starts.push(end);
                }
            }
        }
    }
    Ok(starts)
}

/// The chunk size of a tile of `cell_size`-byte values whose length is not
/// known until its last cell is in (a writer filtering chunk by chunk as
/// cells come): for any length, chunks of this size, the last shorter,
/// are the cuts [`chunk_ranges`] makes (a tile below the target is one
/// chunk, and is never longer than this). For var-size data the size
/// [`VarCuts`] takes.
pub fn streamed_chunk_size(cell_size: u64) -> Result<u64, ChunkingError> {
    fixed_chunk_size(u64::MAX, cell_size)
}

/// Where a var-size cell goes among a tile's chunks ([`VarCuts::cell`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarCut {
    /// Into the chunk being filled.
    Join,
    /// Into the chunk being filled, which it ends (the next cell, or an
    /// empty chunk at the tile's end, starts the next).
    JoinThenCut,
    /// Into a new chunk, the one being filled ending before it.
    CutThenJoin,
    /// Into a chunk of its own: larger than a chunk, it ends the chunk
    /// being filled and the next cell, if any, starts another.
    Alone,
}

/// TileDB's cut rule for var-size data, one cell at a time: a cell that
/// would overflow the chunk still joins it if the chunk is at most half
/// full or the result stays within 150%; otherwise it starts the next.
/// [`chunk_ranges`] runs it over a whole tile; a writer runs it as the
/// cells come.
#[derive(Debug, Clone)]
pub struct VarCuts {
    chunk_size: u64,
    /// Bytes in the chunk being filled.
    current: u64,
}

impl VarCuts {
    /// Cuts for chunks of `chunk_size` bytes ([`streamed_chunk_size`] of
    /// the datatype's size where the tile's length is not known).
    pub fn new(chunk_size: u64) -> Self {
        VarCuts {
            chunk_size,
            current: 0,
        }
    }

    /// Cuts for the next tile: its first cell starts a chunk.
    pub fn restart(&mut self) {
        self.current = 0;
    }

    /// Where the next cell, of `len` bytes, goes.
    pub fn cell(&mut self, len: u64) -> Result<VarCut, ChunkingError> {
        let (chunk_size, current) = (self.chunk_size, self.current);
        let grown = current.saturating_add(len);
        let too_large = |n: u64| {
            (n > u64::from(u32::MAX))
                .then(|| ChunkingError("chunk size exceeds u32".into()))
                .map_or(Ok(()), Err)
        };
        if grown <= chunk_size {
            self.current = grown;
            Ok(VarCut::Join)
        } else if current <= chunk_size / 2 || grown <= chunk_size.saturating_add(chunk_size / 2) {
            too_large(grown)?;
            self.current = 0;
            Ok(VarCut::JoinThenCut)
        } else if len > chunk_size {
            too_large(len)?;
            self.current = 0;
            Ok(VarCut::Alone)
        } else {
            self.current = len;
            Ok(VarCut::CutThenJoin)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    #[test]
    fn fixed_cells_fill_64k_chunks_without_splitting_cells() {
        assert_eq!(fixed_chunk_size(1 << 20, 8).unwrap(), 64 * K);
        assert_eq!(fixed_chunk_size(1 << 20, 24).unwrap(), 64 * K / 24 * 24);
        assert_eq!(fixed_chunk_size(100, 8).unwrap(), 96);
        assert_eq!(fixed_chunk_size(200 * K, 100 * K).unwrap(), 100 * K);
        let r = chunk_ranges(150 * K, 8, None, true).unwrap();
        assert_eq!(r, vec![0..64 * K, 64 * K..128 * K, 128 * K..150 * K]);
        assert_eq!(chunk_ranges(128 * K, 8, None, true).unwrap().len(), 2);
    }

    #[test]
    fn small_and_empty_tiles() {
        assert_eq!(chunk_ranges(40, 8, None, true).unwrap(), vec![0..40]);
        assert_eq!(chunk_ranges(0, 8, None, true).unwrap(), vec![]);
        assert_eq!(chunk_ranges(0, 1, Some(&[0, 0]), true).unwrap(), vec![0..0]);
        assert_eq!(chunk_ranges(0, 1, None, false).unwrap(), vec![0..0]);
    }

    #[test]
    fn var_cells_follow_the_half_and_one_and_a_half_rule() {
        // 40 KiB cells: the second overflows a chunk more than half full,
        // but 80 KiB stays within 96 KiB, so it joins. A cell that closes a
        // chunk at the tile's end leaves TileDB an empty last chunk.
        let offsets: Vec<u64> = (0..4).map(|i| i * 40 * K).collect();
        let r = chunk_ranges(160 * K, 1, Some(&offsets), true).unwrap();
        assert_eq!(r, vec![0..80 * K, 80 * K..160 * K, 160 * K..160 * K]);
        // 60 KiB cells: 120 > 96 and 60 > 32: a new chunk each time.
        let offsets: Vec<u64> = (0..3).map(|i| i * 60 * K).collect();
        let r = chunk_ranges(180 * K, 1, Some(&offsets), true).unwrap();
        assert_eq!(r, vec![0..60 * K, 60 * K..120 * K, 120 * K..180 * K]);
        // A huge cell after a big chunk gets a chunk of its own.
        let offsets = [0, 50 * K, 250 * K];
        let r = chunk_ranges(260 * K, 1, Some(&offsets), true).unwrap();
        assert_eq!(r, vec![0..50 * K, 50 * K..250 * K, 250 * K..260 * K]);
    }

    /// The cuts a writer makes as cells come (chunks of
    /// [`streamed_chunk_size`], var cells by [`VarCuts`], the tile's length
    /// unknown until the end) are those of the whole tile, whatever the
    /// cells: small, empty, around the half and one-and-a-half marks,
    /// larger than a chunk, at the tile's end.
    #[test]
    fn cuts_made_as_cells_come_are_the_whole_tiles() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for case in 0..3_000 {
            let cells = 1 + next(40) as usize;
            let scale = [10, 1_000, 20 * K, 70 * K][case % 4];
            let lens: Vec<u64> = (0..cells)
                .map(|_| match next(10) {
                    0 => 0,
                    1 => 33 * K,
                    2 => 97 * K,
                    _ => next(scale),
                })
                .collect();
            let tile_size: u64 = lens.iter().sum();
            let offsets: Vec<u64> = lens
                .iter()
                .scan(0, |at, l| {
                    let o = *at;
                    *at += l;
                    Some(o)
                })
                .collect();
            let whole = chunk_ranges(tile_size, 1, Some(&offsets), true).unwrap();
            // As a writer streams: a chunk ends where a cut says, a cell
            // alone waits to see whether another follows, the chunk being
            // filled ends the tile (empty or not).
            let mut cuts = VarCuts::new(streamed_chunk_size(1).unwrap());
            let (mut streamed, mut start, mut at, mut alone) = (Vec::new(), 0, 0, false);
            for &len in &lens {
                if std::mem::take(&mut alone) {
                    streamed.push(start..at);
                    start = at;
                }
                let cut = cuts.cell(len).unwrap();
                if matches!(cut, VarCut::CutThenJoin | VarCut::Alone) {
                    streamed.push(start..at);
                    start = at;
                }
                at += len;
                match cut {
                    VarCut::JoinThenCut => {
                        streamed.push(start..at);
                        start = at;
                    }
                    VarCut::Alone => alone = true,
                    _ => {}
                }
            }
            streamed.push(start..at);
            assert_eq!(streamed, whole, "cells {lens:?}");
        }
        // Fixed cells: chunks of the streamed size, the last shorter.
        for (len, cell) in [
            (0, 8),
            (40, 8),
            (64 * K, 8),
            (150 * K, 24),
            (300 * K, 100 * K),
        ] {
            let size = streamed_chunk_size(cell).unwrap();
            let streamed: Vec<_> = (0..len)
                .step_by(size as usize)
                .map(|s| s..(s + size).min(len))
                .collect();
            assert_eq!(
                streamed,
                chunk_ranges(len, cell, None, true).unwrap(),
                "{len} {cell}"
            );
        }
    }

    #[test]
    fn bare_tiles_have_their_data_between_headers() {
        // 150 KiB of 8-byte cells: chunks of 64, 64 and 22 KiB.
        let persisted = 8 + 3 * 12 + 150 * K;
        let data = bare_chunk_data(persisted, 150 * K, 8).unwrap();
        assert_eq!(
            data,
            vec![
                20..20 + 64 * K,
                32 + 64 * K..32 + 128 * K,
                44 + 128 * K..44 + 150 * K
            ]
        );
        // Any other size: not framed as TileDB frames bare chunks.
        assert_eq!(bare_chunk_data(persisted + 1, 150 * K, 8), None);
        assert_eq!(bare_chunk_data(persisted, 150 * K, 100 * K), None);
        assert_eq!(bare_chunk_data(8, 0, 8), None);
    }

    #[test]
    fn unchunked_tiles_are_one_chunk() {
        let r = chunk_ranges(300 * K, 1, Some(&[0, 100 * K, 200 * K]), false).unwrap();
        assert_eq!(r, vec![0..300 * K]);
    }

    #[test]
    fn bad_offsets_are_refused() {
        assert!(chunk_ranges(100, 1, Some(&[0, 50, 40]), true).is_err());
        assert!(chunk_ranges(100, 1, Some(&[0, 150]), true).is_err());
    }
}
