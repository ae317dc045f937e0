//! The filtered tile's framing: `u64` chunk count, then per chunk `u32`
//! unfiltered size, `u32` filtered data size, `u32` filtered metadata size,
//! the metadata and the data. The same in every format version with chunks
//! (v2 onward); tiles are self-delimiting, so a data file can be walked
//! tile by tile without its fragment metadata.

use tdb_format::le::{self, PResult};
use tdb_format::FormatError;

/// One chunk of a filtered tile, borrowed from the file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilteredChunk<'a> {
    /// Size of the chunk once unfiltered.
    pub unfiltered_size: u32,
    /// The filters' metadata.
    pub metadata: &'a [u8],
    /// The filtered data.
    pub data: &'a [u8],
}

/// Bytes of a chunk's header.
pub const CHUNK_HEADER_SIZE: usize = 12;

/// Parses one filtered tile from the front of `input`.
pub fn filtered_chunks(input: &[u8]) -> PResult<'_, Vec<FilteredChunk<'_>>> {
    let (mut rest, count) = le::u64("chunk count")(input)?;
    // Every chunk takes at least its header: bound the count before
    // allocating for it.
    if count > (rest.len() / CHUNK_HEADER_SIZE) as u64 {
        return Err(FormatError::Invalid {
            field: "chunk count",
            reason: format!("{count} chunks cannot fit in {} bytes", rest.len()),
        });
    }
    let mut chunks = Vec::with_capacity(count as usize);
    for i in 0..count {
        let _chunk = tdb_format::span::scope(format_args!("chunks[{i}]"));
        let (r, chunk) = filtered_chunk(rest)?;
        chunks.push(chunk);
        rest = r;
    }
    Ok((rest, chunks))
}

/// A chunk's header: its unfiltered size, filtered data size and metadata
/// size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Size of the chunk once unfiltered.
    pub unfiltered_size: u32,
    /// Bytes of filtered data.
    pub data_size: u32,
    /// Bytes of filter metadata.
    pub metadata_size: u32,
}

impl ChunkHeader {
    /// Bytes the chunk spans: header, metadata and data.
    pub fn span(&self) -> u64 {
        (CHUNK_HEADER_SIZE as u64)
            .saturating_add(u64::from(self.metadata_size))
            .saturating_add(u64::from(self.data_size))
    }
}

/// Parses a chunk's header.
pub fn chunk_header(input: &[u8]) -> PResult<'_, ChunkHeader> {
    let (r, unfiltered_size) = le::u32("chunk unfiltered size")(input)?;
    let (r, data_size) = le::u32("chunk filtered size")(r)?;
    let (r, metadata_size) = le::u32("chunk metadata size")(r)?;
    Ok((
        r,
        ChunkHeader {
            unfiltered_size,
            data_size,
            metadata_size,
        },
    ))
}

/// Parses one chunk (header, metadata, data) from the front of `input`.
pub fn filtered_chunk(input: &[u8]) -> PResult<'_, FilteredChunk<'_>> {
    let (r, h) = chunk_header(input)?;
    let (r, metadata) = le::bytes("chunk metadata", u64::from(h.metadata_size))(r)?;
    let (r, data) = le::bytes("chunk data", u64::from(h.data_size))(r)?;
    Ok((
        r,
        FilteredChunk {
            unfiltered_size: h.unfiltered_size,
            metadata,
            data,
        },
    ))
}

/// Appends a filtered tile: the mirror of [`filtered_chunks`].
pub fn write_filtered_chunks<'a>(
    chunks: impl ExactSizeIterator<Item = FilteredChunk<'a>>,
    out: &mut Vec<u8>,
) -> Result<(), FormatError> {
    le::put_u64(out, chunks.len() as u64);
    chunks
        .into_iter()
        .try_for_each(|c| write_filtered_chunk(&c, out))
}

/// Appends one chunk of a filtered tile, after its count and the chunks
/// before it ([`write_filtered_chunks`] in steps: a writer appends each
/// chunk as it is filtered instead of holding them all).
pub fn write_filtered_chunk(c: &FilteredChunk<'_>, out: &mut Vec<u8>) -> Result<(), FormatError> {
    let len = |field: &'static str, n: usize| {
        u32::try_from(n).map_err(|_| FormatError::Invalid {
            field,
            reason: format!("{n} bytes do not fit a u32"),
        })
    };
    le::put_u32(out, c.unfiltered_size);
    le::put_u32(out, len("chunk filtered size", c.data.len())?);
    le::put_u32(out, len("chunk metadata size", c.metadata.len())?);
    out.extend_from_slice(c.metadata);
    out.extend_from_slice(c.data);
    Ok(())
}

/// Whether `framing` (a tile's bytes outside its chunks' data, in order:
/// the chunk count, then each chunk's header) frames chunks of `data`'s
/// lengths stored as they are: no filter changed a byte, no metadata. See
/// [`crate::bare_chunk_data`].
pub fn bare_framing_matches(framing: &[u8], data: &[std::ops::Range<u64>]) -> bool {
    let Ok((mut rest, count)) = le::u64("chunk count")(framing) else {
        return false;
    };
    if count != data.len() as u64 {
        return false;
    }
    for d in data {
        let Ok((r, h)) = chunk_header(rest) else {
            return false;
        };
        let len = d.end.saturating_sub(d.start);
        if u64::from(h.unfiltered_size) != len
            || u64::from(h.data_size) != len
            || h.metadata_size != 0
        {
            return false;
        }
        rest = r;
    }
    rest.is_empty()
}

/// The unfiltered size of a tile: the sum of its chunks'.
pub fn unfiltered_size(chunks: &[FilteredChunk<'_>]) -> u64 {
    chunks.iter().map(|c| u64::from(c.unfiltered_size)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let chunks = [
            FilteredChunk {
                unfiltered_size: 5,
                metadata: b"mm",
                data: b"ddd",
            },
            FilteredChunk {
                unfiltered_size: 0,
                metadata: b"",
                data: b"",
            },
        ];
        let mut out = Vec::new();
        write_filtered_chunks(chunks.into_iter(), &mut out).unwrap();
        out
    }

    #[test]
    fn framing_round_trips_and_leaves_the_rest() {
        let mut bytes = sample();
        bytes.extend_from_slice(b"next");
        let (rest, chunks) = filtered_chunks(&bytes).unwrap();
        assert_eq!(rest, b"next");
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].metadata, b"mm");
        assert_eq!(chunks[0].data, b"ddd");
        assert_eq!(unfiltered_size(&chunks), 5);
    }

    #[test]
    fn bare_framing_is_checked_header_by_header() {
        let chunks = [
            FilteredChunk {
                unfiltered_size: 3,
                metadata: b"",
                data: b"abc",
            },
            FilteredChunk {
                unfiltered_size: 2,
                metadata: b"",
                data: b"de",
            },
        ];
        let mut tile = Vec::new();
        write_filtered_chunks(chunks.into_iter(), &mut tile).unwrap();
        let data = [20..23, 35..37];
        let framing: Vec<u8> = [&tile[..20], &tile[23..35]].concat();
        assert!(bare_framing_matches(&framing, &data));
        assert!(!bare_framing_matches(&framing, &data[..1]));
        assert!(!bare_framing_matches(&framing[..31], &data));
        assert!(!bare_framing_matches(
            &[framing.as_slice(), b"x"].concat(),
            &data
        ));
        // A chunk whose filtered size differs (a filter ran): not bare.
        let mut changed = framing.clone();
        changed[12] = 2;
        assert!(!bare_framing_matches(&changed, &data));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let bytes = sample();
        for n in 0..bytes.len() {
            assert!(filtered_chunks(&bytes[..n]).is_err(), "prefix of {n} bytes");
        }
    }

    #[test]
    fn a_huge_chunk_count_is_refused_before_allocating() {
        let mut bytes = u64::MAX.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0; 24]);
        assert!(filtered_chunks(&bytes).is_err());
    }
}
