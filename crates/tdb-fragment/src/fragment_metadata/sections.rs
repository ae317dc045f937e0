//! The sections of `__fragment_metadata.tdb` before the footer: each one
//! generic tile, parsed only when a reader needs it.
//!
//! Layouts (TileDB's `write_tile_*` / `load_tile_*`; the spec's tables for
//! mins and maxes miss the var buffer size that precedes both buffers):
//! - offsets, var sizes, null counts, sums: `u64` count, then that many
//!   `u64`s (sums are raw 8-byte values: `i64`, `u64` or `f64` by datatype);
//! - mins, maxes, tile global order bounds: `u64` fixed size, `u64` var
//!   size, fixed bytes (values, or `u64` offsets into the var bytes for
//!   var-size fields), var bytes;
//! - fragment summaries: per field `u64` + min, `u64` + max, sum, null count;
//! - processed conditions: `u64` count, then `u64` + name each.

use super::footer::Footer;
use super::{metadata_file, put_u64s, Reader};
use crate::tile_file::write_tile_file;
use crate::{FragmentError, Result};
use tdb_format::{generic_tile, le, Datatype, FormatVersion};
use tdb_schema::ArraySchema;
use tdb_tile::read_generic_tile;

/// A section of `__fragment_metadata.tdb`. Field indices are the footer's
/// (see [`Footer::fields`]); global order bounds are per dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    /// The R-tree (parsed by `tdb-index`).
    RTree,
    /// A field's tile offsets in its data file.
    TileOffsets(usize),
    /// A var-size field's tile offsets in its `_var` file.
    VarOffsets(usize),
    /// A var-size field's unfiltered var tile sizes.
    VarSizes(usize),
    /// A nullable field's tile offsets in its `_validity` file.
    ValidityOffsets(usize),
    /// Per-tile minimums.
    Mins(usize),
    /// Per-tile maximums.
    Maxes(usize),
    /// Per-tile sums.
    Sums(usize),
    /// Per-tile null counts.
    NullCounts(usize),
    /// Fragment-level min, max, sum and null count of every field.
    FragmentSummaries,
    /// Delete/update conditions already applied.
    ProcessedConditions,
    /// A dimension's tile global order minimums (v23).
    GlobalOrderMins(usize),
    /// A dimension's tile global order maximums (v23).
    GlobalOrderMaxes(usize),
}

impl Section {
    /// How errors name the section.
    pub fn label(&self) -> String {
        match self {
            Section::RTree => "R-tree".into(),
            Section::TileOffsets(i) => format!("tile offsets of field {i}"),
            Section::VarOffsets(i) => format!("tile var offsets of field {i}"),
            Section::VarSizes(i) => format!("tile var sizes of field {i}"),
            Section::ValidityOffsets(i) => format!("tile validity offsets of field {i}"),
            Section::Mins(i) => format!("tile mins of field {i}"),
            Section::Maxes(i) => format!("tile maxes of field {i}"),
            Section::Sums(i) => format!("tile sums of field {i}"),
            Section::NullCounts(i) => format!("tile null counts of field {i}"),
            Section::FragmentSummaries => "fragment min max sum null count".into(),
            Section::ProcessedConditions => "processed conditions".into(),
            Section::GlobalOrderMins(i) => format!("tile global order mins of dimension {i}"),
            Section::GlobalOrderMaxes(i) => format!("tile global order maxes of dimension {i}"),
        }
    }
}

/// Per-tile bounds: fixed-size values back to back, or for var-size fields
/// `u64` offsets into `var`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TileBounds {
    /// Fixed values, or offsets into `var`.
    pub fixed: Vec<u8>,
    /// Var-size values.
    pub var: Vec<u8>,
}

impl TileBounds {
    /// Bounds from their two buffers.
    pub fn new(fixed: Vec<u8>, var: Vec<u8>) -> Self {
        TileBounds { fixed, var }
    }

    /// Tile `i`'s value: `cell_size` bytes for fixed-size fields, or for
    /// var-size fields (`cell_size` `None`) the var bytes from its offset to
    /// the next one's.
    pub fn value(&self, i: usize, cell_size: Option<usize>) -> Option<&[u8]> {
        match cell_size {
            Some(n) => self
                .fixed
                .get(i.checked_mul(n)?..i.checked_add(1)?.checked_mul(n)?),
            None => {
                let off = |k: usize| usize::try_from(le::nth_u64(&self.fixed, k)?).ok();
                let start = off(i)?;
                // The next value's start, or the end for the last.
                let end = match i.checked_add(1) {
                    Some(next) if next.checked_mul(8).is_some_and(|p| p < self.fixed.len()) => {
                        off(next)?
                    }
                    _ => self.var.len(),
                };
                self.var.get(start..end)
            }
        }
    }
}

/// A tile or fragment sum decoded by its field's datatype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SumValue {
    /// Signed integers, datetimes, times.
    Int(i64),
    /// Unsigned integers.
    UInt(u64),
    /// Floats.
    Float(f64),
}

impl SumValue {
    /// Decodes a raw sum as TileDB stores it for a field of `datatype`.
    pub fn decode(raw: u64, datatype: Datatype) -> SumValue {
        if datatype.is_float() {
            SumValue::Float(f64::from_bits(raw))
        } else if datatype.is_signed() {
            SumValue::Int(raw as i64)
        } else {
            SumValue::UInt(raw)
        }
    }
}

/// One field's fragment-level min, max, sum and null count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FieldSummary {
    /// Minimum (empty when the field has none).
    pub min: Vec<u8>,
    /// Maximum (empty when the field has none).
    pub max: Vec<u8>,
    /// Raw sum (see [`SumValue::decode`]).
    pub sum: u64,
    /// Nulls in the fragment.
    pub null_count: u64,
}

/// A section's parsed content.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SectionData {
    /// The R-tree's unfiltered bytes, for `tdb-index` to parse.
    RTree(Vec<u8>),
    /// Tile offsets, var offsets, var sizes, validity offsets, null counts.
    U64s(Vec<u64>),
    /// Tile sums, raw (see [`SumValue::decode`]).
    Sums(Vec<u64>),
    /// Tile mins, maxes or global order bounds.
    Bounds(TileBounds),
    /// Fragment-level summaries, one per field.
    Summaries(Vec<FieldSummary>),
    /// Processed condition marker names.
    Conditions(Vec<String>),
}

impl SectionData {
    /// Parses a section's unfiltered content. `fields` is the footer's
    /// field count (fragment summaries have one entry per field).
    pub fn parse(
        section: Section,
        content: &[u8],
        fields: usize,
        file: &str,
    ) -> Result<SectionData> {
        Self::parse_fields(section, content, fields, file)
    }

    /// [`SectionData::parse`] of content the caller gives up: the R-tree
    /// keeps it as it is (its nodes are parsed when a read needs them).
    fn parse_owned(
        section: Section,
        content: Vec<u8>,
        fields: usize,
        file: &str,
    ) -> Result<SectionData> {
        match section {
            Section::RTree => Ok(SectionData::RTree(content)),
            _ => Self::parse_fields(section, &content, fields, file),
        }
    }

    fn parse_fields(
        section: Section,
        content: &[u8],
        fields: usize,
        file: &str,
    ) -> Result<SectionData> {
        let label = section.label();
        let mut r = Reader::new(content, file, &label);
        let data = match section {
            Section::RTree => {
                r.input = &[];
                SectionData::RTree(content.to_vec())
            }
            Section::TileOffsets(_)
            | Section::VarOffsets(_)
            | Section::VarSizes(_)
            | Section::ValidityOffsets(_)
            | Section::NullCounts(_) => SectionData::U64s(r.counted_u64s("values")?),
            Section::Sums(_) => SectionData::Sums(r.counted_u64s("values")?),
            Section::Mins(_)
            | Section::Maxes(_)
            | Section::GlobalOrderMins(_)
            | Section::GlobalOrderMaxes(_) => {
                let fixed_size = r.u64("buffer size")?;
                let var_size = r.u64("var buffer size")?;
                let fixed = r.bytes(fixed_size, "buffer")?.to_vec();
                let var = r.bytes(var_size, "var buffer")?.to_vec();
                SectionData::Bounds(TileBounds { fixed, var })
            }
            Section::FragmentSummaries => {
                let mut v = Vec::new();
                for _ in 0..fields {
                    let min = r.bytes_u64("min")?;
                    let max = r.bytes_u64("max")?;
                    v.push(FieldSummary {
                        min,
                        max,
                        sum: r.u64("sum")?,
                        null_count: r.u64("null count")?,
                    });
                }
                SectionData::Summaries(v)
            }
            Section::ProcessedConditions => {
                let n = r.u64("count")?;
                let mut v = Vec::new();
                for _ in 0..n {
                    let b = r.bytes_u64("condition")?;
                    v.push(String::from_utf8(b).map_err(|_| {
                        FragmentError::invalid(file, r.field("condition"), "not UTF-8")
                    })?);
                }
                SectionData::Conditions(v)
            }
        };
        if !r.input.is_empty() {
            return Err(FragmentError::invalid(
                file,
                label.clone(),
                format!("{} bytes after the content", r.input.len()),
            ));
        }
        Ok(data)
    }

    /// The unfiltered content, the mirror of [`SectionData::parse`].
    pub fn write_content(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            SectionData::RTree(b) => out.extend_from_slice(b),
            SectionData::U64s(v) | SectionData::Sums(v) => {
                le::put_u64(&mut out, v.len() as u64);
                put_u64s(&mut out, v);
            }
            SectionData::Bounds(b) => {
                le::put_u64(&mut out, b.fixed.len() as u64);
                le::put_u64(&mut out, b.var.len() as u64);
                out.extend_from_slice(&b.fixed);
                out.extend_from_slice(&b.var);
            }
            SectionData::Summaries(v) => {
                for s in v {
                    le::put_bytes_u64(&mut out, &s.min);
                    le::put_bytes_u64(&mut out, &s.max);
                    le::put_u64(&mut out, s.sum);
                    le::put_u64(&mut out, s.null_count);
                }
            }
            SectionData::Conditions(v) => {
                le::put_u64(&mut out, v.len() as u64);
                for c in v {
                    le::put_bytes_u64(&mut out, c.as_bytes());
                }
            }
        }
        out
    }

    /// The section as a generic tile of format `version` (encrypted when a
    /// key is given), as TileDB writes it into `__fragment_metadata.tdb`.
    pub fn write(
        &self,
        version: FormatVersion,
        key: Option<&[u8; 32]>,
        fragment: &str,
    ) -> Result<Vec<u8>> {
        let file = metadata_file(fragment);
        write_tile_file(&file, "section", version, &self.write_content(), key)
    }
}

impl Footer {
    /// Parses `section` from its bytes in `__fragment_metadata.tdb` (see
    /// [`Footer::section_range`]): the generic tile they start with,
    /// unfiltered with `key` when encrypted.
    pub fn read_section(
        &self,
        section: Section,
        bytes: &[u8],
        key: Option<&[u8; 32]>,
        _schema: &ArraySchema,
        fragment: &str,
    ) -> Result<SectionData> {
        let file = metadata_file(fragment);
        let label = section.label();
        // TileDB reads the generic tile at the section's offset and nothing
        // more: bytes after it are not the section's (v15 writers put an
        // unreferenced processed-conditions tile after the last section).
        let (tile, _) = le::run(generic_tile, bytes)
            .map_err(|e| FragmentError::format(&file, label.clone(), e))?;
        let content = read_generic_tile(&format!("{file}: {label}"), &tile, key)
            .map_err(|e| FragmentError::tile(&file, label.clone(), e))?;
        SectionData::parse_owned(section, content, self.fields().len(), &file)
    }
}

impl Reader<'_> {
    /// A `u64` length and that many bytes, copied.
    pub(crate) fn bytes_u64(&mut self, field: &'static str) -> Result<Vec<u8>> {
        let n = self.u64(field)?;
        Ok(self.bytes(n, field)?.to_vec())
    }
}
