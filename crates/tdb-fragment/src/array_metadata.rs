//! Array (and group) metadata: the key → value map stored as timestamped
//! files under `__meta/`.
//!
//! Each file is one generic tile whose content is a run of entries, each
//! `u32` key length, key, `u8` deletion flag and, for insertions only, `u8`
//! datatype, `u32` value count and `count × datatype size` value bytes. The
//! layout has not changed since metadata appeared (TileDB 1.7, format v4),
//! so one parser reads every version. TileDB writes one entry per key of a
//! write batch, sorted by key bytes, deletions included; a consolidated file
//! is the same layout holding the merged map (no deletions) under a name
//! whose timestamp range spans the files it replaced.
//!
//! Reading replays files in timestamp order: every entry first drops its
//! key, then an insertion puts its value back, so later files win and
//! deletions remove. Which files a read at a timestamp sees (listing,
//! vacuum files, the open window) is the array directory's business; this
//! module gives those files' contents their meaning.
//!
//! Keys are TileDB `std::string`s, compared by bytes; they are read as
//! UTF-8 (every TileDB binding but raw C writes them so) and a key that is
//! not is reported as an invalid field rather than guessed at.

use crate::tile_file::{read_tile_file, write_tile_file};
use crate::{FragmentError, Result};
use std::collections::BTreeMap;
use tdb_format::le::{self, PResult};
use tdb_format::{Datatype, FormatError, FormatVersion, Scalar, TimestampedName};

/// One metadata value as TileDB stores it: its datatype, the number of
/// values and their raw little-endian bytes (`value_num × datatype size`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetadataValue {
    /// The values' datatype.
    pub datatype: Datatype,
    /// The number of values as stored; 0 for an empty value (TileDB reports
    /// that as one value and no bytes: see [`MetadataValue::reported_value_num`]).
    pub value_num: u32,
    /// The values' bytes, `value_num × datatype.size()` of them.
    pub bytes: Vec<u8>,
}

impl MetadataValue {
    /// A value from its parts; refuses bytes that are not `value_num`
    /// values of `datatype`, so a written file always reads back.
    pub fn new(datatype: Datatype, value_num: u32, bytes: Vec<u8>) -> Result<Self> {
        let expected = datatype.cell_size(value_num);
        if bytes.len() as u64 != expected {
            return Err(FragmentError::invalid(
                "metadata value",
                "bytes",
                format!(
                    "{} bytes are not {value_num} values of {datatype}",
                    bytes.len()
                ),
            ));
        }
        Ok(MetadataValue {
            datatype,
            value_num,
            bytes,
        })
    }

    /// The value count TileDB's `get_metadata` reports: an empty value
    /// (stored with count 0) is reported as 1 with no value.
    pub fn reported_value_num(&self) -> u32 {
        self.value_num.max(1)
    }

    /// The values decoded one by one, for numeric datatypes (integers,
    /// floats, BOOL, datetimes, times); `None` for strings, blobs,
    /// geometries and ANY, whose value is [`MetadataValue::bytes`] as a whole.
    pub fn scalars(&self) -> Option<Vec<Scalar>> {
        let size = usize::try_from(self.datatype.size()).ok()?;
        // Numeric datatypes are exactly those Scalar decodes.
        Scalar::decode(self.datatype, [0; 8].get(..size.min(8))?)?;
        self.bytes
            .chunks_exact(size)
            .map(|b| Scalar::decode(self.datatype, b))
            .collect()
    }

    /// The value as text, for CHAR, STRING_ASCII and STRING_UTF8 whose bytes
    /// are valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        matches!(
            self.datatype,
            Datatype::Char | Datatype::StringAscii | Datatype::StringUtf8
        )
        .then(|| std::str::from_utf8(&self.bytes).ok())
        .flatten()
    }
}

/// One entry of a metadata file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataEntry {
    /// Sets `key` to `value`.
    Put {
        /// The key.
        key: String,
        /// Its value.
        value: MetadataValue,
    },
    /// Removes `key`.
    Delete {
        /// The key.
        key: String,
    },
}

impl MetadataEntry {
    /// The entry's key.
    pub fn key(&self) -> &str {
        match self {
            MetadataEntry::Put { key, .. } | MetadataEntry::Delete { key } => key,
        }
    }
}

/// The entries of one metadata file, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetadataFile {
    /// The entries as stored.
    pub entries: Vec<MetadataEntry>,
}

fn utf8(field: &'static str, b: &[u8]) -> std::result::Result<String, FormatError> {
    String::from_utf8(b.to_vec()).map_err(|_| FormatError::Invalid {
        field,
        reason: "not UTF-8".to_owned(),
    })
}

fn entry(input: &[u8]) -> PResult<'_, MetadataEntry> {
    let (input, key) = le::bytes_u32("key")(input)?;
    let key = utf8("key", key)?;
    let (input, deleted) = le::bool("deletion flag")(input)?;
    if deleted {
        return Ok((input, MetadataEntry::Delete { key }));
    }
    let (input, code) = le::u8("value type")(input)?;
    let datatype = Datatype::from_code(code)?;
    let (input, value_num) = le::u32("number of values")(input)?;
    let (input, bytes) = le::bytes("value", datatype.cell_size(value_num))(input)?;
    let value = MetadataValue {
        datatype,
        value_num,
        bytes: bytes.to_vec(),
    };
    Ok((input, MetadataEntry::Put { key, value }))
}

impl MetadataFile {
    /// Entries for one write batch as TileDB stores them: one per key (the
    /// last change of a key wins), sorted by key bytes.
    pub fn from_changes(changes: impl IntoIterator<Item = MetadataEntry>) -> Self {
        let map: BTreeMap<String, MetadataEntry> = changes
            .into_iter()
            .map(|e| (e.key().to_owned(), e))
            .collect();
        MetadataFile {
            entries: map.into_values().collect(),
        }
    }

    /// Parses a whole metadata file (one generic tile) named `file` in
    /// errors (e.g. `__meta/__1_1_<uuid>`); `key` decrypts encrypted arrays.
    pub fn parse(file: &str, bytes: &[u8], key: Option<&[u8; 32]>) -> Result<Self> {
        let content = read_tile_file(file, "metadata tile", bytes, key)?;
        Self::parse_content(file, &content)
    }

    /// Parses the unfiltered content of a metadata file.
    pub fn parse_content(file: &str, mut content: &[u8]) -> Result<Self> {
        let mut entries = Vec::new();
        while !content.is_empty() {
            let (e, rest) = le::run(entry, content).map_err(|source| {
                FragmentError::format(file, format!("entry {}", entries.len()), source)
            })?;
            entries.push(e);
            content = rest;
        }
        Ok(MetadataFile { entries })
    }

    /// Writes the unfiltered content: the exact mirror of
    /// [`MetadataFile::parse_content`].
    pub fn write_content(&self, out: &mut Vec<u8>) -> Result<()> {
        for e in &self.entries {
            le::put_bytes_u32(out, "key", e.key().as_bytes())
                .map_err(|source| FragmentError::format("metadata", "key", source))?;
            match e {
                MetadataEntry::Delete { .. } => le::put_bool(out, true),
                MetadataEntry::Put { value, .. } => {
                    let expected = value.datatype.cell_size(value.value_num);
                    if value.bytes.len() as u64 != expected {
                        return Err(FragmentError::invalid(
                            "metadata",
                            format!("value of {}", e.key()),
                            format!(
                                "{} bytes are not {} values of {}",
                                value.bytes.len(),
                                value.value_num,
                                value.datatype
                            ),
                        ));
                    }
                    le::put_bool(out, false);
                    le::put_u8(out, value.datatype.code());
                    le::put_u32(out, value.value_num);
                    out.extend_from_slice(&value.bytes);
                }
            }
        }
        Ok(())
    }

    /// Writes the whole file as TileDB does at the current format version:
    /// the content in one generic tile (GZIP, plus AES-256-GCM with a key).
    /// TileDB writes no file at all for an empty batch; callers should too.
    pub fn write(&self, file: &str, key: Option<&[u8; 32]>) -> Result<Vec<u8>> {
        let mut content = Vec::new();
        self.write_content(&mut content)?;
        write_tile_file(file, "metadata tile", FormatVersion::WRITTEN, &content, key)
    }
}

/// The metadata an array (or group) shows: key → value, sorted by key bytes
/// as TileDB lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArrayMetadata {
    map: BTreeMap<String, MetadataValue>,
}

/// The name of a metadata file relative to its array or group, for errors.
pub(crate) fn meta_file_label(name: &TimestampedName) -> String {
    format!("__meta/{name}")
}

/// Orders files as TileDB does before replaying them: by start timestamp
/// only (TileDB's `TimestampedURI::operator<`). Ties keep the caller's
/// order, where TileDB's unstable sort leaves them unspecified.
pub(crate) fn in_tiledb_order<'a, 'b>(
    files: &'a [(TimestampedName, &'b [u8])],
) -> Vec<&'a (TimestampedName, &'b [u8])> {
    let mut sorted: Vec<_> = files.iter().collect();
    sorted.sort_by_key(|(name, _)| name.t1);
    sorted
}

impl ArrayMetadata {
    /// Resolves the metadata files a read sees (already chosen by the array
    /// directory: vacuumed files dropped, the open window applied), each the
    /// whole file as stored. Files are replayed by start timestamp; `key`
    /// decrypts encrypted arrays.
    pub fn from_files(files: &[(TimestampedName, &[u8])], key: Option<&[u8; 32]>) -> Result<Self> {
        let mut md = ArrayMetadata::default();
        for (name, bytes) in in_tiledb_order(files) {
            md.apply(&MetadataFile::parse(&meta_file_label(name), bytes, key)?);
        }
        Ok(md)
    }

    /// Replays one file's entries on top of this map.
    pub fn apply(&mut self, file: &MetadataFile) {
        for e in &file.entries {
            match e {
                MetadataEntry::Put { key, value } => {
                    self.map.insert(key.clone(), value.clone());
                }
                MetadataEntry::Delete { key } => {
                    self.map.remove(key);
                }
            }
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&MetadataValue> {
        self.map.get(key)
    }

    /// Every key and value, sorted by key bytes.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &MetadataValue)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The file array-metadata consolidation writes for this map: every key
    /// as an insertion, sorted (it is named with the replaced files' first
    /// start and last end timestamps).
    pub fn to_file(&self) -> MetadataFile {
        MetadataFile {
            entries: self
                .map
                .iter()
                .map(|(key, value)| MetadataEntry::Put {
                    key: key.clone(),
                    value: value.clone(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, v: i64) -> MetadataEntry {
        MetadataEntry::Put {
            key: key.to_owned(),
            value: MetadataValue::new(Datatype::Int64, 1, v.to_le_bytes().to_vec()).unwrap(),
        }
    }

    #[test]
    fn later_files_win_and_deletions_remove() {
        let mut md = ArrayMetadata::default();
        md.apply(&MetadataFile::from_changes([put("b", 1), put("a", 2)]));
        md.apply(&MetadataFile::from_changes([
            MetadataEntry::Delete { key: "a".into() },
            put("b", 3),
        ]));
        let keys: Vec<_> = md.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["b"]);
        assert_eq!(md.get("b").unwrap().scalars(), Some(vec![Scalar::Int(3)]));
    }

    #[test]
    fn empty_values_round_trip_and_report_one() {
        let v = MetadataValue::new(Datatype::Int32, 0, Vec::new()).unwrap();
        assert_eq!(v.reported_value_num(), 1);
        assert_eq!(v.scalars(), Some(vec![]));
        let file = MetadataFile {
            entries: vec![MetadataEntry::Put {
                key: "e".into(),
                value: v,
            }],
        };
        let mut out = Vec::new();
        file.write_content(&mut out).unwrap();
        // INT32 is datatype code 0.
        assert_eq!(out, [1, 0, 0, 0, b'e', 0, 0, 0, 0, 0, 0]);
        assert_eq!(MetadataFile::parse_content("t", &out).unwrap(), file);
    }

    #[test]
    fn bad_bytes_are_typed_errors() {
        // Unknown datatype code.
        let bad = [1, 0, 0, 0, b'k', 0, 250, 1, 0, 0, 0, 0];
        let err = MetadataFile::parse_content("t", &bad).unwrap_err();
        assert!(err.to_string().contains("entry 0"), "{err}");
        // A count beyond the bytes present.
        let bad = [1, 0, 0, 0, b'k', 0, 4, 255, 255, 255, 255];
        assert!(MetadataFile::parse_content("t", &bad).is_err());
        assert!(MetadataValue::new(Datatype::Int32, 2, vec![0; 4]).is_err());
    }
}
