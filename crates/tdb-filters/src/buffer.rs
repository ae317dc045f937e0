//! What flows between filters: TileDB's metadata and data streams.
//!
//! Forward, a stream is a list of [`Parts`] because TileDB's compressors
//! frame each part separately, so the count of parts reaches the bytes.
//! Reverse, every filter reads its metadata from the front of one contiguous
//! stream and hands the rest on, so plain slices and [`Unfiltered`] suffice.

use crate::{FilterError, Result};
use tdb_format::span::SpanValue;
use tdb_format::{Datatype, FormatVersion};

/// One forward stream: a list of byte parts (TileDB's `FilterBuffer`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parts(Vec<Vec<u8>>);

impl Parts {
    /// No parts at all (the first filter's metadata).
    pub fn new() -> Self {
        Parts(Vec::new())
    }

    /// A single part.
    pub fn one(bytes: Vec<u8>) -> Self {
        Parts(vec![bytes])
    }

    /// Appends a part.
    pub fn push(&mut self, bytes: Vec<u8>) {
        self.0.push(bytes);
    }

    /// Puts a part first.
    pub fn prepend(&mut self, bytes: Vec<u8>) {
        self.0.insert(0, bytes);
    }

    /// Appends all parts of `other`.
    pub fn extend(&mut self, other: Parts) {
        self.0.extend(other.0);
    }

    /// The number of parts.
    pub fn count(&self) -> usize {
        self.0.len()
    }

    /// The total number of bytes.
    pub fn byte_len(&self) -> usize {
        self.0.iter().map(Vec::len).sum()
    }

    /// The parts in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.0.iter().map(Vec::as_slice)
    }

    /// All bytes in one buffer (no copy when there is one part).
    pub fn concat(self) -> Vec<u8> {
        let mut parts = self.0;
        if parts.len() == 1 {
            return parts.pop().unwrap_or_default();
        }
        parts.concat()
    }
}

/// What a filter knows about the bytes of one chunk.
///
/// `Debug` is written by hand so the key never reaches logs or panics.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Stage<'a> {
    /// The datatype of this filter's input: the field's datatype, changed by
    /// earlier filters in the pipeline (float scaling, reinterpretation).
    pub datatype: Datatype,
    /// The tile's cell size in bytes (TileDB's numeric RLE runs over cells of
    /// this size, whatever the datatype says).
    pub cell_size: u64,
    /// The format version the tile was (or is to be) written with.
    pub version: FormatVersion,
    /// A var-length string tile whose offsets TileDB hands to RLE and
    /// dictionary encoding (see `FilterPipeline::skip_offsets_filtering`):
    /// forward, the cell offsets into the tile; reverse, reverse output fills
    /// [`Unfiltered::offsets`].
    pub string_offsets: StringOffsets<'a>,
    /// The AES-256-GCM key, for the internal encryption filter.
    pub key: Option<&'a [u8; 32]>,
}

impl std::fmt::Debug for Stage<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stage")
            .field("datatype", &self.datatype)
            .field("cell_size", &self.cell_size)
            .field("version", &self.version)
            .field("string_offsets", &self.string_offsets)
            .field("key", &self.key.map(|_| Redacted))
            .finish()
    }
}

/// Stands for a secret in `Debug` output.
struct Redacted;

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Whether TileDB passes the offsets tile to the filters of a data tile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StringOffsets<'a> {
    /// Not a var-length string tile with offsets inside (the usual case).
    #[default]
    None,
    /// Forward: the start offset of each cell in the (whole, unchunked) tile.
    Forward(&'a [u64]),
    /// Reverse: the filters rebuild the offsets into [`Unfiltered::offsets`].
    Reverse,
}

impl<'a> Stage<'a> {
    /// A stage for a plain tile of `datatype` at `version`.
    pub fn new(datatype: Datatype, version: FormatVersion) -> Self {
        Stage {
            datatype,
            cell_size: datatype.size().max(1),
            version,
            string_offsets: StringOffsets::None,
            key: None,
        }
    }

    /// The same stage for input of `datatype` (what an earlier filter hands
    /// on); the cell size stays.
    pub fn with_datatype(self, datatype: Datatype) -> Self {
        Stage { datatype, ..self }
    }

    /// The same stage with a cell size other than the datatype's.
    pub fn with_cell_size(self, cell_size: u64) -> Self {
        Stage { cell_size, ..self }
    }

    /// The same stage for a var-length string tile's offsets.
    pub fn with_string_offsets(self, string_offsets: StringOffsets<'a>) -> Self {
        Stage {
            string_offsets,
            ..self
        }
    }

    /// The same stage with the AES-256-GCM key (or none).
    pub fn with_key(self, key: Option<&'a [u8; 32]>) -> Self {
        Stage { key, ..self }
    }

    /// The byte size of one value of this stage's datatype (at least 1).
    pub fn datatype_size(&self) -> usize {
        usize::try_from(self.datatype.size()).unwrap_or(1).max(1)
    }
}

/// Reverse output of one filter: metadata for the filters before it, data,
/// and, for var-length string tiles, the rebuilt cell offsets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unfiltered {
    /// Metadata bytes for the earlier filters.
    pub metadata: Vec<u8>,
    /// The data bytes.
    pub data: Vec<u8>,
    /// Cell offsets rebuilt by string RLE or dictionary decoding.
    pub offsets: Vec<u64>,
}

impl Unfiltered {
    /// The output of a filter that leaves this chunk as it is.
    pub fn pass_through(&mut self, metadata: &[u8], data: &[u8]) {
        self.pass_on_metadata(metadata);
        self.data.extend_from_slice(data);
    }

    /// Hands `earlier`, the metadata of the filters before this one, on to
    /// them (`tdb dissect` sees it as the bytes it was copied from).
    pub fn pass_on_metadata(&mut self, earlier: &[u8]) {
        let start = self.metadata.len();
        self.metadata.extend_from_slice(earlier);
        tdb_format::span::mirror(earlier, self.metadata.get(start..).unwrap_or_default());
    }

    /// [`Unfiltered::pass_on_metadata`] after the earlier filters'
    /// metadata this filter decoded (decompressed) since `start` from
    /// `stored`: `tdb dissect` explains that as a nested document.
    pub fn pass_on_after_decoding(&mut self, start: usize, stored: &[u8], earlier: &[u8]) {
        let decoded_end = self.metadata.len();
        self.pass_on_metadata(earlier);
        if let (Some(decoded), false) = (self.metadata.get(start..decoded_end), stored.is_empty()) {
            tdb_format::span::decoded(stored, decoded, "decoded filter metadata");
        }
    }

    /// Empties all three, keeping their capacity.
    pub fn clear(&mut self) {
        self.metadata.clear();
        self.data.clear();
        self.offsets.clear();
    }

    /// Lets go of buffers holding more than `cap` bytes of capacity.
    pub(crate) fn trim(&mut self, cap: usize) {
        if self.metadata.capacity() > cap {
            self.metadata = Vec::new();
        }
        if self.data.capacity() > cap {
            self.data = Vec::new();
        }
        if self.offsets.capacity().saturating_mul(8) > cap {
            self.offsets = Vec::new();
        }
    }
}

/// Reads a filter's metadata fields from the front of the metadata stream,
/// with errors that name the filter and the field.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MetaReader<'a> {
    filter: &'static str,
    bytes: &'a [u8],
}

impl<'a> MetaReader<'a> {
    /// Starts reading `bytes` for `filter` (its TileDB name).
    pub fn new(filter: &'static str, bytes: &'a [u8]) -> Self {
        MetaReader { filter, bytes }
    }

    /// What is left: the metadata of the filters before this one.
    pub fn rest(&self) -> &'a [u8] {
        self.bytes
    }

    /// Takes `n` bytes.
    pub fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        let head = self.take_raw(n, field)?;
        self.record(field, head, "bytes", || SpanValue::of_bytes(head));
        Ok(head)
    }

    fn take_raw(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        if n > self.bytes.len() {
            return Err(FilterError::corrupt(
                self.filter,
                format!(
                    "metadata field {field} needs {n} bytes, {} left",
                    self.bytes.len()
                ),
            ));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    /// For `tdb dissect`: the field, named with its filter.
    fn record(&self, field: &str, b: &[u8], ty: &'static str, v: impl FnOnce() -> SpanValue) {
        let filter = self.filter;
        tdb_format::span::field(format_args!("{filter} {field}"), b, ty, v);
    }

    /// Takes a fixed-size array.
    pub fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    /// Takes a `u8`.
    pub fn u8(&mut self, field: &str) -> Result<u8> {
        let b = self.take_raw(1, field)?;
        let v = b.first().copied().unwrap_or_default();
        self.record(field, b, "u8", || SpanValue::U64(v.into()));
        Ok(v)
    }

    /// Takes a little-endian `u32`.
    pub fn u32(&mut self, field: &str) -> Result<u32> {
        let b = self.take_raw(4, field)?;
        let v = u32::from_le_bytes(b.try_into().unwrap_or_default());
        self.record(field, b, "u32", || SpanValue::U64(v.into()));
        Ok(v)
    }

    /// Takes a little-endian `u64`.
    pub fn u64(&mut self, field: &str) -> Result<u64> {
        let b = self.take_raw(8, field)?;
        let v = u64::from_le_bytes(b.try_into().unwrap_or_default());
        self.record(field, b, "u64", || SpanValue::U64(v));
        Ok(v)
    }
}

/// A size or count as the `u32` TileDB stores, or a [`FilterError::BadInput`]
/// naming `what`.
pub(crate) fn to_u32(filter: &'static str, n: usize, what: &str) -> Result<u32> {
    u32::try_from(n)
        .map_err(|_| FilterError::bad_input(filter, format!("{what} of {n} exceeds u32")))
}

/// Takes `n` bytes from the front of `data` for `filter`, or a corruption
/// error naming `what`.
pub(crate) fn take_data<'a>(
    filter: &'static str,
    data: &mut &'a [u8],
    n: usize,
    what: &str,
) -> Result<&'a [u8]> {
    if n > data.len() {
        return Err(FilterError::corrupt(
            filter,
            format!("{what} needs {n} bytes, {} left", data.len()),
        ));
    }
    let (head, tail) = data.split_at(n);
    *data = tail;
    Ok(head)
}

/// `out` from `start` on (empty when `start` is past its end): the room a
/// caller has just made after `start` for a codec to write into.
pub(crate) fn tail(out: &mut [u8], start: usize) -> &mut [u8] {
    out.get_mut(start..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key's bytes never reach `Debug` output.
    #[test]
    fn debug_redacts_the_key() {
        let key = [0xA7u8; 32];
        let mut stage = Stage::new(Datatype::UInt8, FormatVersion::WRITTEN);
        assert!(format!("{stage:?}").contains("key: None"));
        stage.key = Some(&key);
        assert!(format!("{stage:?}").contains("key: Some(<redacted>)"));
        for text in [format!("{stage:?}"), format!("{stage:#?}")] {
            assert!(text.contains("<redacted>"), "{text}");
            assert!(
                !text.contains("167") && !text.to_lowercase().contains("a7"),
                "{text}"
            );
        }
    }
}
