//! Fragment metadata (`__fragment_metadata.tdb`) of every format version.
//!
//! - v3+: generic tiles (R-tree, tile offsets, ... ) followed by a footer
//!   ([`Footer`]) that says where each tile ("section") starts. The footer is
//!   read first; sections are read on demand ([`Section`], [`SectionData`]).
//! - v1–v2: the whole file is one generic tile ([`LegacyMetadata`]), parsed
//!   into the same [`Footer`] and section data so callers need not care.
//! - Consolidated fragment metadata (`.meta`) holds many footers
//!   ([`ConsolidatedFragmentMeta`]).
//!
//! Nothing here does I/O: functions say which byte ranges they need and
//! take the bytes.

mod consolidated;
mod footer;
mod legacy;
mod sections;
mod written;

pub use consolidated::{ConsolidatedEntry, ConsolidatedFragmentMeta};
pub use footer::{Field, Footer, FooterRead, OptionalSection, SectionOffsets};
pub use legacy::LegacyMetadata;
pub use sections::{FieldSummary, Section, SectionData, SumValue, TileBounds};
pub use written::{WrittenField, WrittenShape};

use crate::{FragmentError, Result};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use tdb_format::le::{self, PResult};
use tdb_format::names::FRAGMENT_METADATA_FILE;
use tdb_format::span::{self, SpanValue};
use tdb_format::{FormatVersion, TimestampedName};
use tdb_schema::{ArraySchema, NDRange};

/// A cursor over bytes that names the file and structure in every error and
/// checks every count against the bytes left before allocating.
pub(crate) struct Reader<'a> {
    pub(crate) input: &'a [u8],
    file: &'a str,
    what: &'a str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(input: &'a [u8], file: &'a str, what: &'a str) -> Self {
        Reader { input, file, what }
    }

    pub(crate) fn field(&self, field: &str) -> String {
        format!("{}: {field}", self.what)
    }

    fn run<T>(&mut self, field: &str, p: impl FnOnce(&'a [u8]) -> PResult<'a, T>) -> Result<T> {
        let (v, rest) = le::run(p, self.input)
            .map_err(|e| FragmentError::format(self.file, self.field(field), e))?;
        self.input = rest;
        Ok(v)
    }

    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32> {
        self.run(field, le::u32(field))
    }

    pub(crate) fn u64(&mut self, field: &'static str) -> Result<u64> {
        self.run(field, le::u64(field))
    }

    pub(crate) fn flag(&mut self, field: &'static str) -> Result<bool> {
        self.run(field, le::bool(field))
    }

    pub(crate) fn bytes(&mut self, n: u64, field: &'static str) -> Result<&'a [u8]> {
        self.run(field, le::bytes(field, n))
    }

    /// `n` little-endian `u64`s; `n` is checked against the input first.
    pub(crate) fn u64s(&mut self, n: u64, field: &'static str) -> Result<Vec<u64>> {
        let len = n.checked_mul(8).ok_or_else(|| {
            FragmentError::invalid(self.file, self.field(field), format!("count {n} overflows"))
        })?;
        let b = self.bytes(len, field)?;
        span::field(field, b, "u64s", || SpanValue::of_u64s(le::u64_values(b)));
        Ok(le::u64_values(b).collect())
    }

    /// A `u64` count followed by that many `u64`s.
    pub(crate) fn counted_u64s(&mut self, field: &'static str) -> Result<Vec<u64>> {
        let n = self.u64(field)?;
        self.u64s(n, field)
    }
}

pub(crate) fn put_u64s(out: &mut Vec<u8>, v: &[u64]) {
    for x in v {
        le::put_u64(out, *x);
    }
}

/// The file label used in errors for a fragment's metadata file.
pub(crate) fn metadata_file(fragment: &str) -> String {
    format!("{fragment}/{FRAGMENT_METADATA_FILE}")
}

/// One fragment's metadata: its name, its footer, and the sections loaded
/// so far (the caller fetches each section's byte range and hands it in).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FragmentMetadata {
    /// The fragment's timestamped name.
    pub name: TimestampedName,
    /// The footer (for v1–v2, what the single tile says).
    pub footer: Footer,
    /// Shared: a read's plan and the snapshot's cache of what reads loaded
    /// hold the same sections without copying them.
    /// (Ordered, not hashed: a read asks for a tile's range in a section
    /// several times a piece, and a few sections compare faster than one
    /// is hashed.)
    sections: BTreeMap<Section, Arc<SectionData>>,
    /// v1–v2 store the leaf MBRs instead of an R-tree.
    legacy_mbrs: Option<Vec<NDRange>>,
}

impl FragmentMetadata {
    /// Metadata whose sections are still to be loaded.
    pub fn new(name: TimestampedName, footer: Footer) -> Self {
        FragmentMetadata {
            name,
            footer,
            sections: BTreeMap::new(),
            legacy_mbrs: None,
        }
    }

    /// Metadata of a v1–v2 fragment: everything is already loaded.
    pub fn from_legacy(name: TimestampedName, legacy: LegacyMetadata) -> Self {
        let mut sections = BTreeMap::new();
        for (i, v) in legacy.tile_offsets.into_iter().enumerate() {
            sections.insert(Section::TileOffsets(i), Arc::new(SectionData::U64s(v)));
        }
        for (i, v) in legacy.tile_var_offsets.into_iter().enumerate() {
            sections.insert(Section::VarOffsets(i), Arc::new(SectionData::U64s(v)));
        }
        for (i, v) in legacy.tile_var_sizes.into_iter().enumerate() {
            sections.insert(Section::VarSizes(i), Arc::new(SectionData::U64s(v)));
        }
        FragmentMetadata {
            name,
            footer: legacy.footer,
            sections,
            legacy_mbrs: Some(legacy.mbrs),
        }
    }

    /// Parses the whole `__fragment_metadata.tdb` of fragment `f` (its
    /// footer, or the single tile of v1–v2) and loads every section, for
    /// callers that hold the whole file (`dissect`, fuzzing). `dense` is
    /// whether a v1–v2 fragment has no coordinates file.
    pub fn parse_file(
        f: &crate::TimestampedFile,
        bytes: &[u8],
        schemas: &tdb_schema::SchemaHistory,
        dense: bool,
        key: Option<&[u8; 32]>,
    ) -> Result<FragmentMetadata> {
        let schema = &crate::open::fragment_schema(schemas, f).schema;
        let version = f.format_version();
        if version <= 2 {
            let legacy = LegacyMetadata::parse(bytes, schema, dense, key, &f.path)?;
            return Ok(FragmentMetadata::from_legacy(f.name.clone(), legacy));
        }
        let lookup = |name: &str| schemas.by_name(name).map(|e| &e.schema);
        match Footer::parse(bytes, bytes.len() as u64, &lookup, version, &f.path)? {
            FooterRead::Done(footer) => {
                let schema = lookup(&footer.array_schema_name).unwrap_or(schema);
                let mut m = FragmentMetadata::new(f.name.clone(), footer);
                m.load_all_sections(bytes, key, schema)?;
                m.load_v15_conditions(bytes, key, schema)?;
                Ok(m)
            }
            FooterRead::NeedMore(n) => Err(FragmentError::invalid(
                &metadata_file(&f.path),
                "footer",
                format!("needs {n} bytes of a {}-byte file", bytes.len()),
            )),
        }
    }

    /// v15 writers put the processed-conditions tile after the last
    /// section without a footer field pointing at it (v16 added one): it
    /// is what follows the last section's tile, if anything does.
    fn load_v15_conditions(
        &mut self,
        file: &[u8],
        key: Option<&[u8; 32]>,
        schema: &ArraySchema,
    ) -> Result<()> {
        let Some(&last) = self.footer.sections().last() else {
            return Ok(());
        };
        if self.footer.version != 15 {
            return Ok(());
        }
        let range = self.section_bytes(last, file)?;
        let after = le::run(tdb_format::generic_tile, range)
            .map(|(_, rest)| rest)
            .unwrap_or_default();
        if !after.is_empty() {
            let _section = span::scope(Section::ProcessedConditions.label());
            self.load_section(Section::ProcessedConditions, after, key, schema)?;
        }
        Ok(())
    }

    /// The bytes of `section` in the whole `__fragment_metadata.tdb`.
    fn section_bytes<'f>(&self, section: Section, file: &'f [u8]) -> Result<&'f [u8]> {
        let fragment = self.name.to_string();
        let r = self.footer.section_range(section, &fragment)?;
        usize::try_from(r.start)
            .ok()
            .zip(usize::try_from(r.end).ok())
            .and_then(|(a, b)| file.get(a..b))
            .ok_or_else(|| {
                FragmentError::invalid(
                    &metadata_file(&fragment),
                    section.label(),
                    format!(
                        "{}..{} is beyond the file's {} bytes",
                        r.start,
                        r.end,
                        file.len()
                    ),
                )
            })
    }

    /// Loads every section the footer names from the whole
    /// `__fragment_metadata.tdb` (`file`), for callers that hold it anyway
    /// (a rewrite, a copy); readers fetch only the ranges they need.
    pub fn load_all_sections(
        &mut self,
        file: &[u8],
        key: Option<&[u8; 32]>,
        schema: &ArraySchema,
    ) -> Result<()> {
        for section in self.footer.sections() {
            let bytes = self.section_bytes(section, file)?;
            let _section = span::scope(section.label());
            self.load_section(section, bytes, key, schema)?;
        }
        Ok(())
    }

    /// The whole `__fragment_metadata.tdb` as TileDB lays it out: every
    /// section the footer names, in footer order, each one generic tile of
    /// the footer's format version (encrypted with `key`), then the footer
    /// pointing at where each landed. Every section must be loaded (a
    /// rewrite) or set (a new fragment); v1–v2 metadata is not written.
    pub fn write_file(&self, schema: &ArraySchema, key: Option<&[u8; 32]>) -> Result<Vec<u8>> {
        let fragment = self.name.to_string();
        let file = metadata_file(&fragment);
        let version = FormatVersion::new(self.footer.version)
            .map_err(|e| FragmentError::format(&file, "footer version", e))?;
        if !version.has_fragment_metadata_footer() {
            return Err(FragmentError::invalid(
                &file,
                "footer version",
                format!(
                    "v{version} metadata is one tile, not written here",
                    version = version.get()
                ),
            ));
        }
        let mut footer = self.footer.clone();
        let mut out = Vec::new();
        for section in self.footer.sections() {
            let data = self.sections.get(&section).ok_or_else(|| {
                FragmentError::missing(&file, format!("{} (not loaded)", section.label()))
            })?;
            footer
                .set_section_offset(section, out.len() as u64)
                .map_err(|_| FragmentError::invalid(&file, "footer", section.label()))?;
            out.extend_from_slice(&data.write(version, key, &fragment)?);
        }
        out.extend_from_slice(&footer.write(schema));
        Ok(out)
    }

    /// The leaf MBRs a v1–v2 fragment stores instead of an R-tree (TileDB
    /// builds the tree from them at load); `None` from v3.
    pub fn legacy_mbrs(&self) -> Option<&[NDRange]> {
        self.legacy_mbrs.as_deref()
    }

    /// The fragment's R-tree: built from a v1–v2 fragment's leaf MBRs, or
    /// parsed from its R-tree section once loaded; `None` before that.
    pub fn rtree(&self, domain: &tdb_schema::Domain) -> Result<Option<tdb_index::RTree>> {
        let bad = |e: &dyn std::error::Error| {
            FragmentError::invalid(&self.file(), "R-tree", crate::verify::error_chain(e))
        };
        if let Some(mbrs) = self.legacy_mbrs() {
            return tdb_index::RTree::build(domain, mbrs.to_vec(), tdb_index::DEFAULT_FANOUT)
                .map(Some)
                .map_err(|e| bad(&e));
        }
        let Some(SectionData::RTree(bytes)) = self.section(Section::RTree) else {
            return Ok(None);
        };
        let version = FormatVersion::new(self.footer.version)
            .map_err(|e| FragmentError::format(&self.file(), "version", e))?;
        tdb_index::RTree::parse(bytes, domain, version)
            .map(Some)
            .map_err(|e| bad(&e))
    }

    fn file(&self) -> String {
        metadata_file(&self.name.to_string())
    }

    /// Parses a section from exactly its bytes (see
    /// [`Footer::section_range`]) and keeps it.
    pub fn load_section(
        &mut self,
        section: Section,
        bytes: &[u8],
        key: Option<&[u8; 32]>,
        schema: &ArraySchema,
    ) -> Result<&SectionData> {
        let data = self
            .footer
            .read_section(section, bytes, key, schema, &self.name.to_string())?;
        Ok(self
            .sections
            .entry(section)
            .or_insert_with(|| Arc::new(data)))
    }

    /// Sets a section's content: `written` building a new fragment, or a
    /// reader restoring one it loaded before.
    pub fn set_section(&mut self, section: Section, data: impl Into<Arc<SectionData>>) {
        self.sections.insert(section, data.into());
    }

    /// A section loaded earlier.
    pub fn section(&self, section: Section) -> Option<&SectionData> {
        self.sections.get(&section).map(|d| &**d)
    }

    /// A section loaded earlier, to share (a cache of loaded sections).
    pub fn shared_section(&self, section: Section) -> Option<&Arc<SectionData>> {
        self.sections.get(&section)
    }

    /// Tiles in the fragment (dense: tiles its non-empty domain touches).
    pub fn tile_num(&self, schema: &ArraySchema) -> Option<u64> {
        self.footer.tile_num(schema)
    }

    /// Cells in the fragment as TileDB's fragment info reports them.
    pub fn cell_num(&self, schema: &ArraySchema) -> Option<u64> {
        self.footer.cell_num(schema)
    }

    fn u64s(&self, section: Section) -> Result<&[u64]> {
        match self.section(section) {
            Some(SectionData::U64s(v)) => Ok(v),
            _ => Err(FragmentError::missing(
                &self.file(),
                format!("{} (not loaded)", section.label()),
            )),
        }
    }

    /// Tile `tile`'s range by the offsets of `section`. Its label is made
    /// only for an error: reads ask for ranges once a tile and field, and
    /// a label is a `format!`.
    fn range_in(
        &self,
        offsets: &[u64],
        tile: u64,
        file_size: u64,
        section: Section,
    ) -> Result<Range<u64>> {
        let bad = |reason: String| FragmentError::invalid(&self.file(), section.label(), reason);
        let t = usize::try_from(tile).map_err(|_| bad(format!("tile {tile} out of range")))?;
        let start = *offsets
            .get(t)
            .ok_or_else(|| bad(format!("tile {tile} of {}", offsets.len())))?;
        let end = offsets
            .get(t.saturating_add(1))
            .copied()
            .unwrap_or(file_size);
        if start > end || end > file_size {
            return Err(bad(format!(
                "tile {tile} spans {start}..{end}, beyond the data file's {file_size} bytes"
            )));
        }
        Ok(start..end)
    }

    fn size_of(&self, sizes: &[u64], field: usize, what: &str) -> Result<u64> {
        sizes.get(field).copied().ok_or_else(|| {
            FragmentError::invalid(&self.file(), what.to_owned(), format!("no field {field}"))
        })
    }

    /// How many tiles field `field`'s tile offsets (a loaded section)
    /// record: what the section's bytes hold, where the footer's count or
    /// non-empty domain is a number nothing checks.
    pub fn recorded_tiles(&self, field: usize) -> Result<u64> {
        Ok(self.u64s(Section::TileOffsets(field))?.len() as u64)
    }

    /// Byte range of tile `tile` of field `field` in its data file: its
    /// offset up to the next tile's offset, or the file's size for the last.
    pub fn tile_range(&self, field: usize, tile: u64) -> Result<Range<u64>> {
        let s = Section::TileOffsets(field);
        let size = self.size_of(&self.footer.file_sizes, field, "file sizes")?;
        self.range_in(self.u64s(s)?, tile, size, s)
    }

    /// Byte range of a var-size field's tile `tile` in its `_var` file.
    pub fn var_tile_range(&self, field: usize, tile: u64) -> Result<Range<u64>> {
        let s = Section::VarOffsets(field);
        let size = self.size_of(&self.footer.file_var_sizes, field, "file var sizes")?;
        self.range_in(self.u64s(s)?, tile, size, s)
    }

    /// Byte range of a nullable field's tile `tile` in its `_validity` file.
    pub fn validity_tile_range(&self, field: usize, tile: u64) -> Result<Range<u64>> {
        let s = Section::ValidityOffsets(field);
        let size = self.size_of(
            &self.footer.file_validity_sizes,
            field,
            "file validity sizes",
        )?;
        self.range_in(self.u64s(s)?, tile, size, s)
    }

    /// Unfiltered size of a var-size field's tile `tile` (var sizes section).
    pub fn var_tile_size(&self, field: usize, tile: u64) -> Result<u64> {
        let s = Section::VarSizes(field);
        let v = self.u64s(s)?;
        usize::try_from(tile)
            .ok()
            .and_then(|t| v.get(t).copied())
            .ok_or_else(|| {
                FragmentError::invalid(&self.file(), s.label(), format!("no tile {tile}"))
            })
    }
}
