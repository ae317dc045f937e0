//! Filtering and unfiltering whole tiles: chunk by chunk through a pipeline.

use crate::chunking::chunk_ranges;
use crate::chunks::{filtered_chunks, unfiltered_size, write_filtered_chunk, FilteredChunk};
use crate::{Result, TileError};
use tdb_filters::{FilterPipeline, Stage, StringOffsets, Unfiltered, Workspace};
use tdb_format::{Datatype, FormatVersion};

/// How the tiles of one field are filtered.
///
/// `Debug` is written by hand so the key never reaches logs or panics.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct TileFilters<'a> {
    /// The field's pipeline; for encrypted arrays the caller appends the
    /// internal AES-256-GCM filter, as TileDB does at read and write time.
    pub pipeline: &'a FilterPipeline,
    /// The field's datatype (offsets tiles: UINT64; validity: UINT8).
    pub datatype: Datatype,
    /// The tile's cell size: the cell's bytes for fixed-size fields, the
    /// datatype's size for var-size data tiles.
    pub cell_size: u64,
    /// The format version TileDB's filters see: the array schema's for data
    /// tiles, the header's for generic tiles.
    pub version: FormatVersion,
    /// The encryption key, if the array is encrypted.
    pub key: Option<&'a [u8; 32]>,
}

impl std::fmt::Debug for TileFilters<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TileFilters")
            .field("pipeline", self.pipeline)
            .field("datatype", &self.datatype)
            .field("cell_size", &self.cell_size)
            .field("version", &self.version)
            .field("key", &self.key.map(|_| Redacted))
            .finish()
    }
}

fn format_error(location: &str, source: tdb_format::FormatError) -> TileError {
    TileError::Format {
        location: location.to_owned(),
        source,
    }
}

/// Stands for a secret in `Debug` output.
struct Redacted;

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// An unfiltered tile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TileData {
    /// The tile's bytes.
    pub data: Vec<u8>,
    /// Cell offsets rebuilt by string RLE or dictionary decoding (empty
    /// otherwise).
    pub offsets: Vec<u64>,
}

impl<'a> TileFilters<'a> {
    /// An unencrypted setup.
    pub fn new(
        pipeline: &'a FilterPipeline,
        datatype: Datatype,
        cell_size: u64,
        version: FormatVersion,
    ) -> Self {
        TileFilters {
            pipeline,
            datatype,
            cell_size,
            version,
            key: None,
        }
    }

    /// The same setup with the AES-256-GCM key (or none).
    pub fn with_key(self, key: Option<&'a [u8; 32]>) -> Self {
        TileFilters { key, ..self }
    }

    fn stage(&self, string_offsets: StringOffsets<'a>) -> Stage<'a> {
        Stage::new(self.datatype, self.version)
            .with_cell_size(self.cell_size)
            .with_string_offsets(string_offsets)
            .with_key(self.key)
    }

    /// Whether unfiltering is a copy of the chunks' bytes (no filter, no
    /// key): work a caller may weigh far lighter than decoding.
    pub fn copies_only(&self) -> bool {
        self.pipeline.filters.is_empty() && self.key.is_none()
    }

    /// Whether this var-size data tile carries its offsets inside
    /// (TileDB's `skip_offsets_filtering`).
    pub fn offsets_inside(&self) -> bool {
        self.pipeline
            .skip_offsets_filtering(self.datatype, self.version)
    }

    /// Parses one filtered tile at the front of `bytes` and unfilters it.
    /// Returns the tile and the number of bytes it spans. `location` names
    /// the tile in errors (file and tile index). `var_data` marks a
    /// var-size data tile, whose offsets string RLE and dictionary rebuild.
    pub fn unfilter(
        &self,
        location: &str,
        bytes: &[u8],
        var_data: bool,
    ) -> Result<(TileData, usize)> {
        let (chunks, rest) = tdb_format::le::run(filtered_chunks, bytes)
            .map_err(|source| format_error(location, source))?;
        let mut tile = TileData::default();
        self.unfilter_into(
            location,
            &mut Workspace::default(),
            &chunks,
            0,
            var_data,
            &mut tile,
        )?;
        // `rest` is a tail of `bytes`.
        Ok((tile, bytes.len().saturating_sub(rest.len())))
    }

    /// Unfilters a tile that must span exactly `bytes` (a reader knows each
    /// tile's filtered size from the fragment metadata): trailing bytes are
    /// corruption, not the next tile.
    pub fn unfilter_whole(&self, location: &str, bytes: &[u8], var_data: bool) -> Result<TileData> {
        let chunks = self.chunks(location, bytes)?;
        let mut tile = TileData::default();
        let mut ws = Workspace::default();
        self.unfilter_into(location, &mut ws, &chunks, 0, var_data, &mut tile)?;
        Ok(tile)
    }

    /// The chunks of a tile that must span exactly `bytes`, parsed but not
    /// unfiltered: a reader schedules them, alone or in runs, on its pool.
    pub fn chunks<'b>(&self, location: &str, bytes: &'b [u8]) -> Result<Vec<FilteredChunk<'b>>> {
        let (chunks, rest) = tdb_format::le::run(filtered_chunks, bytes)
            .map_err(|source| format_error(location, source))?;
        if !rest.is_empty() {
            return Err(TileError::Corrupt {
                location: location.to_owned(),
                reason: format!(
                    "the tile ends after {} of its {} bytes",
                    bytes.len().saturating_sub(rest.len()),
                    bytes.len()
                ),
            });
        }
        Ok(chunks)
    }

    /// Unfilters a run of a tile's chunks, the first being chunk `first` of
    /// the tile (for errors), appending their cells to `out.data` (and any
    /// rebuilt offsets, counted from the start of `out.data`, to
    /// `out.offsets`): decoded straight into the tile, no copy. `ws` is the
    /// calling thread's workspace, kept across chunks and tiles.
    pub fn unfilter_into(
        &self,
        location: &str,
        ws: &mut Workspace,
        chunks: &[FilteredChunk<'_>],
        first: usize,
        var_data: bool,
        out: &mut TileData,
    ) -> Result<()> {
        let string_offsets = if var_data && self.offsets_inside() {
            StringOffsets::Reverse
        } else {
            StringOffsets::None
        };
        let stage = self.stage(string_offsets);
        // The chunk headers promise `total` bytes; each chunk's output is
        // checked against its promise, so a lying header costs at most what
        // the filters really produced plus this reservation, capped by what
        // the bytes can plausibly expand to.
        let total = usize::try_from(unfiltered_size(chunks)).unwrap_or(0);
        out.data.reserve(total.min(1 << 26));
        let mut chunk_out = Unfiltered {
            data: std::mem::take(&mut out.data),
            ..Unfiltered::default()
        };
        let result = chunks.iter().enumerate().try_for_each(|(i, chunk)| {
            let start = chunk_out.data.len();
            chunk_out.metadata.clear();
            chunk_out.offsets.clear();
            let index = first.saturating_add(i) as u64;
            let _chunk = tdb_format::span::scope(format_args!("chunks[{index}]"));
            self.pipeline
                .reverse_chunk(&stage, ws, chunk.metadata, chunk.data, &mut chunk_out)
                .map_err(|source| TileError::Filter {
                    location: location.to_owned(),
                    chunk: index,
                    source,
                })?;
            // Filters only append to `data`.
            let got = chunk_out.data.len().saturating_sub(start);
            if got as u64 != u64::from(chunk.unfiltered_size) {
                return Err(TileError::Corrupt {
                    location: location.to_owned(),
                    reason: format!(
                        "chunk {index} unfilters to {got} bytes, its header says {}",
                        chunk.unfiltered_size
                    ),
                });
            }
            if start == 0 && out.offsets.is_empty() {
                // A string RLE or dictionary tile is one chunk: its
                // offsets are the tile's, moved rather than copied (the
                // copy doubled them at the peak: 800 KB a 100,000-cell tile).
                std::mem::swap(&mut out.offsets, &mut chunk_out.offsets);
            } else {
                out.offsets.extend(
                    chunk_out
                        .offsets
                        .iter()
                        .map(|o| o.saturating_add(start as u64)),
                );
            }
            Ok(())
        });
        out.data = chunk_out.data;
        result
    }

    /// Filters a whole tile the way TileDB's writer does and appends the
    /// filtered tile to `out`. `var_offsets` are the cell offsets of a
    /// var-size data tile. `ws` is the calling thread's workspace, kept
    /// across chunks and tiles.
    pub fn filter(
        &self,
        location: &str,
        ws: &mut Workspace,
        tile: &[u8],
        var_offsets: Option<&[u64]>,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let bad = |reason: String| TileError::BadInput {
            location: location.to_owned(),
            reason,
        };
        let chunked =
            self.pipeline
                .use_tile_chunking(var_offsets.is_some(), self.version, self.datatype);
        let ranges = chunk_ranges(tile.len() as u64, self.cell_size, var_offsets, chunked)
            .map_err(|e| bad(e.0))?;
        let string_offsets = match var_offsets {
            Some(o) if self.offsets_inside() => StringOffsets::Forward(o),
            _ => StringOffsets::None,
        };
        let stage = self.stage(string_offsets);
        // Each chunk goes into `out` as it is filtered (the count first),
        // so a tile is never held filtered twice; on an error `out` is
        // left as it was.
        let at = out.len();
        tdb_format::le::put_u64(out, ranges.len() as u64);
        let result = ranges.iter().enumerate().try_for_each(|(i, r)| {
            let chunk = usize::try_from(r.start)
                .ok()
                .zip(usize::try_from(r.end).ok())
                .and_then(|(start, end)| tile.get(start..end))
                .ok_or_else(|| bad(format!("chunk {i} at {r:?} is outside the tile")))?;
            self.filter_chunk_at(&stage, location, ws, i as u64, chunk, out)
        });
        if result.is_err() {
            out.truncate(at);
        }
        result
    }

    /// Where TileDB cuts a tile of `len` bytes of fixed-size values (or
    /// validity bytes) into chunks: a writer that filters the tile chunk by
    /// chunk as its cells come ([`TileFilters::filter_chunk`]) writes the
    /// count of these first.
    pub fn fixed_chunks(&self, location: &str, len: u64) -> Result<Vec<std::ops::Range<u64>>> {
        let chunked = self
            .pipeline
            .use_tile_chunking(false, self.version, self.datatype);
        chunk_ranges(len, self.cell_size, None, chunked).map_err(|e| TileError::BadInput {
            location: location.to_owned(),
            reason: e.0,
        })
    }

    /// The chunk size of a tile cut as its cells come, its length not yet
    /// known ([`crate::streamed_chunk_size`]; var-size data, `var`, by
    /// [`crate::VarCuts`] over chunks of this size): `None` where the tile
    /// is one chunk whatever its size (WebP, string RLE or dictionary) or
    /// var data carries its offsets inside, so only the whole tile tells
    /// its chunks.
    pub fn streamed_chunk_size(&self, var: bool) -> Option<u64> {
        let chunked = self
            .pipeline
            .use_tile_chunking(var, self.version, self.datatype);
        if !chunked || (var && self.offsets_inside()) {
            return None;
        }
        crate::streamed_chunk_size(self.cell_size).ok()
    }

    /// Filters chunk `index` of a tile of fixed-size values (one of
    /// [`TileFilters::fixed_chunks`]), or of var-size data whose offsets
    /// stay apart (cut by [`crate::VarCuts`]), and appends it to `out`:
    /// after the tile's chunk count and the chunks before it, it makes the
    /// bytes [`TileFilters::filter`] makes of the whole tile.
    pub fn filter_chunk(
        &self,
        location: &str,
        ws: &mut Workspace,
        index: u64,
        chunk: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let stage = self.stage(StringOffsets::None);
        self.filter_chunk_at(&stage, location, ws, index, chunk, out)
    }

    fn filter_chunk_at(
        &self,
        stage: &Stage<'_>,
        location: &str,
        ws: &mut Workspace,
        index: u64,
        chunk: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let bad = |reason: String| TileError::BadInput {
            location: location.to_owned(),
            reason,
        };
        let (metadata, data) = self
            .pipeline
            .forward_chunk(stage, ws, chunk.to_vec())
            .map_err(|source| TileError::Filter {
                location: location.to_owned(),
                chunk: index,
                source,
            })?;
        let unfiltered_size = u32::try_from(chunk.len())
            .map_err(|_| bad(format!("chunk {index} is larger than u32")))?;
        let chunk = FilteredChunk {
            unfiltered_size,
            metadata: &metadata,
            data: &data,
        };
        write_filtered_chunk(&chunk, out).map_err(|e| bad(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_filters::Filter;

    fn pipeline(filters: Vec<Filter>) -> FilterPipeline {
        FilterPipeline::new(filters)
    }

    /// DELTA then ZSTD at `level`: a typical integer pipeline.
    fn delta_zstd(level: i32) -> FilterPipeline {
        pipeline(vec![
            Filter::Delta {
                level: -1,
                reinterpret: None,
            },
            Filter::Zstd { level },
        ])
    }

    /// A tile of fixed-size values filtered chunk by chunk (its count, then
    /// each of `fixed_chunks` through `filter_chunk`) is the tile `filter`
    /// makes whole: cells of 8 and 3 bytes (TileDB's chunks end on a whole
    /// cell), a tile of one chunk, of none, and a validity tile.
    #[test]
    fn a_tile_filtered_chunk_by_chunk_is_the_tile_filtered_whole() {
        let p = delta_zstd(3);
        let cases = [
            (Datatype::Int64, 8u64, 300_000usize),
            (Datatype::Char, 3, 200_001),
            (Datatype::Int64, 8, 1_000),
            (Datatype::Int64, 8, 0),
            (Datatype::UInt8, 1, 150_000),
        ];
        for (dt, cell, len) in cases {
            let f = TileFilters::new(&p, dt, cell, FormatVersion::WRITTEN);
            let tile: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let mut whole = Vec::new();
            f.filter("t", &mut Workspace::default(), &tile, None, &mut whole)
                .unwrap();
            let cuts = f.fixed_chunks("t", len as u64).unwrap();
            let mut by_chunk = Vec::new();
            tdb_format::le::put_u64(&mut by_chunk, cuts.len() as u64);
            let mut ws = Workspace::default();
            for (i, r) in cuts.iter().enumerate() {
                let chunk = &tile[r.start as usize..r.end as usize];
                f.filter_chunk("t", &mut ws, i as u64, chunk, &mut by_chunk)
                    .unwrap();
            }
            assert_eq!(by_chunk, whole, "{dt:?}, {len} bytes");
            assert_eq!(f.unfilter_whole("t", &by_chunk, false).unwrap().data, tile);
        }
    }

    /// A tile is appended chunk by chunk as each is filtered; where a chunk
    /// fails (POSITIVE_DELTA refuses decreasing values, here in the second
    /// chunk) the error names it and `out` is left as it was.
    #[test]
    fn a_tile_that_fails_to_filter_leaves_the_output_as_it_was() {
        let p = pipeline(vec![Filter::PositiveDelta { max_window: 256 }]);
        let f = TileFilters::new(&p, Datatype::UInt64, 8, FormatVersion::WRITTEN);
        let rising: Vec<u8> = (0..(1u64 << 14)).flat_map(|i| i.to_le_bytes()).collect();
        let mut out = b"kept".to_vec();
        f.filter("t", &mut Workspace::default(), &rising, None, &mut out)
            .unwrap();
        assert_eq!(&out[..4], b"kept");
        let tile = f.unfilter_whole("t", &out[4..], false).unwrap();
        assert_eq!(tile.data, rising);
        let falling: Vec<u8> = (0..(1u64 << 14))
            .map(|i| if i < 1 << 13 { i } else { (1 << 14) - i })
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut out = b"kept".to_vec();
        let err = f
            .filter("t", &mut Workspace::default(), &falling, None, &mut out)
            .unwrap_err();
        assert!(matches!(err, TileError::Filter { chunk: 1, .. }), "{err}");
        assert_eq!(out, b"kept");
    }

    /// A 1 MiB tile is 16 chunks; unfiltered whole, or in runs of chunks
    /// (as a reader's pool takes them) put end to end, it is the same tile,
    /// and a bad chunk is named by its index in the tile whichever run
    /// meets it.
    #[test]
    fn runs_of_chunks_give_the_same_tile() {
        let p = delta_zstd(1);
        let tile: Vec<u8> = (0..(1u64 << 17))
            .flat_map(|i| (i * 3 + i % 7).to_le_bytes())
            .collect();
        let f = TileFilters::new(&p, Datatype::UInt64, 8, FormatVersion::WRITTEN);
        let mut filtered = Vec::new();
        f.filter("t", &mut Workspace::default(), &tile, None, &mut filtered)
            .unwrap();
        let chunks = f.chunks("t", &filtered).unwrap();
        assert_eq!(chunks.len(), 16);
        assert_eq!(f.unfilter_whole("t", &filtered, false).unwrap().data, tile);
        let mut ws = Workspace::default();
        for cuts in [vec![0, 16], vec![0, 5, 11, 16], (0..=16).collect()] {
            let mut joined = Vec::new();
            for w in cuts.windows(2) {
                let mut run = TileData::default();
                f.unfilter_into("t", &mut ws, &chunks[w[0]..w[1]], w[0], false, &mut run)
                    .unwrap();
                joined.extend_from_slice(&run.data);
            }
            assert_eq!(joined, tile, "{cuts:?}");
        }
        // Corrupt chunk 11's data: the error names it, in any run.
        let mut bad = chunks.clone();
        let broken = vec![0u8; bad[11].data.len()];
        bad[11].data = &broken;
        for first in [0, 8, 11] {
            let err = f
                .unfilter_into(
                    "t",
                    &mut ws,
                    &bad[first..],
                    first,
                    false,
                    &mut TileData::default(),
                )
                .unwrap_err();
            assert!(
                matches!(err, TileError::Filter { chunk: 11, .. }),
                "{first}: {err}"
            );
        }
        // The workspace still decodes after the failure.
        let mut again = TileData::default();
        f.unfilter_into("t", &mut ws, &chunks, 0, false, &mut again)
            .unwrap();
        assert_eq!(again.data, tile);
        // A tile must span its bytes exactly.
        filtered.push(0);
        assert!(matches!(
            f.chunks("t", &filtered),
            Err(TileError::Corrupt { .. })
        ));
    }

    /// The key's bytes never reach `Debug` output.
    #[test]
    fn debug_redacts_the_key() {
        let p = pipeline(vec![]);
        let key = [0xA7u8; 32];
        let mut f = TileFilters::new(&p, Datatype::UInt8, 1, FormatVersion::WRITTEN);
        assert!(format!("{f:?}").contains("key: None"));
        f.key = Some(&key);
        let text = format!("{f:?}");
        assert!(text.contains("key: Some(<redacted>)"), "{text}");
        assert!(
            !text.contains("167") && !text.to_lowercase().contains("a7"),
            "{text}"
        );
        let pretty = format!("{f:#?}");
        assert!(!pretty.contains("167"), "{pretty}");
    }

    #[test]
    fn trailing_bytes_are_corruption_for_whole_tiles() {
        let p = pipeline(vec![]);
        let f = TileFilters::new(&p, Datatype::UInt8, 1, FormatVersion::WRITTEN);
        let mut filtered = Vec::new();
        f.filter("t", &mut Workspace::default(), b"abc", None, &mut filtered)
            .unwrap();
        assert_eq!(
            f.unfilter_whole("t", &filtered, false).unwrap().data,
            b"abc"
        );
        filtered.push(0);
        assert!(matches!(
            f.unfilter_whole("t", &filtered, false),
            Err(TileError::Corrupt { .. })
        ));
    }
}
