//! The fragment metadata footer (format v3+): the fields a fragment is
//! opened with, and where every section of `__fragment_metadata.tdb` starts.
//!
//! Version history (TileDB's `load_footer` / `write_footer` and tags
//! 1.6–2.30):
//! - v3–v4: fields are the attributes plus `__coords` for fixed sizes and
//!   tile offsets, the attributes alone for var sizes / var offsets; the
//!   non-empty domain is `2 × dim_num × size(dim 0)` bytes.
//! - v5: attributes, `__coords` (kept as an empty slot), dimensions; the
//!   non-empty domain is an N-dimensional range (var-size dims allowed).
//! - v7: validity file sizes and validity tile offsets.
//! - v10: array schema name; the footer always ends with its own `u64`
//!   length (before, only when a dimension is var-size; otherwise the size
//!   follows from the schema).
//! - v11: per-field tile mins, maxes, sums, null counts.
//! - v12: fragment-level min/max/sum/null count offset (v11 has none).
//! - v14: has-timestamps flag (adds the `t` field); v15: has-delete-meta
//!   flag (adds `dt`, `dci`); v16: processed conditions offset.
//! - v23: optional sections (tile global order bounds; others skipped).

use super::sections::Section;
use super::{metadata_file, put_u64s, Reader};
use crate::{FragmentError, Result};
use std::ops::Range;
use tdb_format::{le, names, DataField, DataPart, FormatVersion};
use tdb_schema::{
    ArraySchema, Domain, NDRange, Range as DimRange, SchemaField, LEGACY_SCHEMA_NAME,
};

/// First version whose footer has optional sections.
const OPTIONAL_SECTIONS_VERSION: u32 = 23;
/// Optional section identifier of the tile global order bounds.
const TILE_GLOBAL_ORDER_ID: u64 = 0;

/// What a field index of the footer's per-field arrays stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// Attribute number `n` of the schema.
    Attribute(usize),
    /// The `__coords` slot (the only coordinates file before v5; an unused
    /// slot from v5).
    Coords,
    /// Dimension number `n` (v5+).
    Dimension(usize),
    /// Per-cell timestamps (`t`, v14+ when the fragment has them).
    Timestamps,
    /// Per-cell delete timestamps (`dt`, v15+).
    DeleteTimestamps,
    /// Per-cell delete condition index (`dci`, v15+).
    DeleteConditionIndex,
}

impl Field {
    /// The per-cell fields consolidated sparse fragments may keep, by the
    /// names TileDB queries give them: UINT64, one value per cell.
    pub const PER_CELL: [(&'static str, Field); 3] = [
        (names::TIMESTAMPS_FIELD, Field::Timestamps),
        (names::DELETE_TIMESTAMPS_FIELD, Field::DeleteTimestamps),
        (
            names::DELETE_CONDITION_INDEX_FIELD,
            Field::DeleteConditionIndex,
        ),
    ];

    /// The per-cell field called `name` (see [`Field::PER_CELL`]).
    pub fn per_cell(name: &str) -> Option<Field> {
        Self::PER_CELL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| *f)
    }
}

/// One optional section of a v23+ footer, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionalSection {
    /// Offsets of the per-dimension tile global order mins and maxes.
    TileGlobalOrder {
        /// One offset per dimension.
        mins: Vec<u64>,
        /// One offset per dimension.
        maxes: Vec<u64>,
    },
    /// A section this reader does not know, kept to be written back.
    Unknown {
        /// Its identifier.
        id: u64,
        /// Its data.
        data: Vec<u8>,
    },
}

/// Where each section starts in `__fragment_metadata.tdb`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SectionOffsets {
    /// The R-tree.
    pub rtree: u64,
    /// Tile offsets, per field.
    pub tile_offsets: Vec<u64>,
    /// Var tile offsets, per field.
    pub tile_var_offsets: Vec<u64>,
    /// Var tile sizes, per field.
    pub tile_var_sizes: Vec<u64>,
    /// Validity tile offsets, per field (v7+).
    pub tile_validity_offsets: Vec<u64>,
    /// Tile mins, per field (v11+).
    pub tile_mins: Vec<u64>,
    /// Tile maxes, per field (v11+).
    pub tile_maxes: Vec<u64>,
    /// Tile sums, per field (v11+).
    pub tile_sums: Vec<u64>,
    /// Tile null counts, per field (v11+).
    pub tile_null_counts: Vec<u64>,
    /// Fragment min/max/sum/null count (v12+).
    pub fragment_summary: Option<u64>,
    /// Processed conditions (v16+).
    pub processed_conditions: Option<u64>,
}

/// A parsed footer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Footer {
    /// The fragment's format version.
    pub version: u32,
    /// The schema the fragment was written with (`__array_schema.tdb`
    /// before v10).
    pub array_schema_name: String,
    /// Whether the fragment is dense.
    pub dense: bool,
    /// The non-empty domain; `None` when the footer flags it null.
    pub non_empty_domain: Option<NDRange>,
    /// Number of sparse tiles (MBRs).
    pub sparse_tile_num: u64,
    /// Cells in the last tile.
    pub last_tile_cell_num: u64,
    /// Whether the fragment has per-cell timestamps (v14+).
    pub has_timestamps: bool,
    /// Whether the fragment has delete metadata (v15+).
    pub has_delete_meta: bool,
    /// Size of each field's fixed (or offsets) data file.
    pub file_sizes: Vec<u64>,
    /// Size of each field's var data file.
    pub file_var_sizes: Vec<u64>,
    /// Size of each field's validity file (v7+).
    pub file_validity_sizes: Vec<u64>,
    /// Where each section starts.
    pub offsets: SectionOffsets,
    /// Optional sections (v23+), in file order.
    pub optional_sections: Vec<OptionalSection>,
    /// Attributes in the schema the footer was read with.
    pub attribute_num: usize,
    /// Dimensions in the schema the footer was read with.
    pub dim_num: usize,
    /// Bytes of the footer's fields (without the trailing length).
    pub size: u64,
    /// Whether the footer is followed by its `u64` length in its file.
    pub has_length: bool,
    /// Where the footer starts in `__fragment_metadata.tdb`, when known
    /// (always for a footer read from that file; for one read from
    /// consolidated metadata once [`Footer::locate`] is called).
    pub offset: Option<u64>,
}

/// The outcome of [`Footer::parse`].
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum FooterRead {
    /// The footer.
    Done(Footer),
    /// The suffix was too short: read this many bytes from the file's end.
    NeedMore(u64),
}

/// How a footer's end is found in its file.
fn length_mode(schema: &ArraySchema, name_version: u32) -> bool {
    name_version >= 10 || schema.domain.dimensions.iter().any(|d| d.is_var())
}

fn coord_size_0(domain: &Domain) -> u64 {
    domain.dimensions.first().map_or(0, |d| d.datatype.size())
}

/// Bytes of a non-empty domain of the first dimension's type, which
/// pre-v5 footers always hold (and later ones hold zeroed when null).
fn flat_domain_size(domain: &Domain) -> u64 {
    (domain.dimensions.len() as u64)
        .saturating_mul(coord_size_0(domain))
        .saturating_mul(2)
}

/// Field counts: (fixed-size arrays, var arrays, validity arrays).
// `a` and `d` count a parsed schema's fields, each of which took bytes of
// its file: far below the sizes that could overflow.
#[allow(clippy::arithmetic_side_effects)]
fn counts(version: u32, a: usize, d: usize, ts: bool, dm: bool) -> (usize, usize, usize) {
    if version < 5 {
        (a + 1, a, 0)
    } else {
        let num = a + 1 + d + usize::from(ts) + 2 * usize::from(dm);
        (num, num, if version >= 7 { num } else { 0 })
    }
}

impl Footer {
    /// How many bytes to read from the end of `__fragment_metadata.tdb` to
    /// hold the whole footer: exact for v3–v9 fragments whose dimensions are
    /// all fixed-size (the footer has no length then, so its size comes from
    /// the schema as TileDB computes it); otherwise a generous guess, which
    /// [`Footer::parse`] corrects with [`FooterRead::NeedMore`]. `u64::MAX`
    /// for v1–v2, whose metadata is one tile to read whole.
    /// `name_version` is what the fragment's name implies
    /// (`TimestampedName::implied_format_version`), as TileDB decides.
    // As in `counts`: sizes from a parsed schema's field counts.
    #[allow(clippy::arithmetic_side_effects)]
    pub fn suffix_to_read(schema: &ArraySchema, name_version: u32) -> u64 {
        if name_version <= 2 {
            return u64::MAX;
        }
        let a = schema.attributes.len() as u64;
        let d = schema.domain.dimensions.len() as u64;
        if !length_mode(schema, name_version) {
            return Self::fixed_size(schema, name_version);
        }
        let domain: u64 = schema
            .domain
            .dimensions
            .iter()
            .map(|dim| {
                if dim.is_var() {
                    16 + 256
                } else {
                    2 * dim.datatype.size()
                }
            })
            .sum();
        let num = a + d + 4;
        4 + 8 + 64 + 2 + domain + 16 + 2 + num * 8 * 11 + 16 + 4 + 12 + 16 * d + 8
    }

    /// Size of a length-less footer (v3–v9, all dimensions fixed-size).
    // As in `counts`: sizes from a parsed schema's field counts.
    #[allow(clippy::arithmetic_side_effects)]
    fn fixed_size(schema: &ArraySchema, name_version: u32) -> u64 {
        let a = schema.attributes.len() as u64;
        let d = schema.domain.dimensions.len() as u64;
        if name_version < 5 {
            let domain = 2 * d * coord_size_0(&schema.domain);
            return 4 + 1 + 1 + domain + 8 + 8 + (a + 1) * 8 + a * 8 + 8 + (a + 1) * 8 + a * 16;
        }
        let domain: u64 = schema
            .domain
            .dimensions
            .iter()
            .map(|dim| 2 * dim.datatype.size())
            .sum();
        let num = a + d + 1;
        let arrays = if name_version < 7 { 5 } else { 7 };
        4 + 1 + 1 + domain + 8 + 8 + 8 + num * 8 * arrays
    }

    /// Parses the footer from the last `suffix.len()` bytes of a
    /// `__fragment_metadata.tdb` of `file_size` bytes. `schemas` finds a
    /// schema by the name the footer gives (`__array_schema.tdb` before
    /// v10; that schema also sizes length-less footers). `name_version` as
    /// for [`Footer::suffix_to_read`]; `fragment` names the fragment in
    /// errors.
    pub fn parse<'s>(
        suffix: &[u8],
        file_size: u64,
        schemas: &dyn Fn(&str) -> Option<&'s ArraySchema>,
        name_version: u32,
        fragment: &str,
    ) -> Result<FooterRead> {
        let file = metadata_file(fragment);
        let invalid = |reason: String| FragmentError::invalid(&file, "footer", reason);
        if suffix.len() as u64 > file_size {
            return Err(invalid(format!(
                "{} suffix bytes for a {file_size}-byte file",
                suffix.len()
            )));
        }
        let legacy = || {
            schemas(LEGACY_SCHEMA_NAME).ok_or_else(|| {
                FragmentError::missing(&file, format!("schema {LEGACY_SCHEMA_NAME}"))
            })
        };
        let with_length = name_version >= 10 || length_mode(legacy()?, name_version);
        let (start, end) = if with_length {
            if file_size < 8 {
                return Err(invalid(format!(
                    "a {file_size}-byte file has no footer length"
                )));
            }
            if suffix.len() < 8 {
                return Ok(FooterRead::NeedMore(8));
            }
            let tail = suffix
                .get(suffix.len().saturating_sub(8)..)
                .unwrap_or_default();
            let (_, len) = le::u64("footer length")(tail)
                .map_err(|e| FragmentError::format(&file, "footer length", e))?;
            let need = len
                .checked_add(8)
                .filter(|n| *n <= file_size)
                .ok_or_else(|| {
                    invalid(format!("length {len} exceeds the file's {file_size} bytes"))
                })?;
            if need > suffix.len() as u64 {
                return Ok(FooterRead::NeedMore(need));
            }
            // `need` (at least 8) is at most the suffix's length here.
            let end = suffix.len().saturating_sub(8);
            (suffix.len().saturating_sub(need as usize), end)
        } else {
            let need = Self::fixed_size(legacy()?, name_version);
            if need > file_size {
                return Err(invalid(format!(
                    "footer of {need} bytes (from the schema) exceeds the file's {file_size} bytes"
                )));
            }
            if need > suffix.len() as u64 {
                return Ok(FooterRead::NeedMore(need));
            }
            (suffix.len().saturating_sub(need as usize), suffix.len())
        };
        let body = suffix.get(start..end).unwrap_or_default();
        let _footer = tdb_format::span::scope("footer");
        let (mut footer, used) = Self::parse_fields(body, schemas, &file)?;
        if used != body.len() {
            return Err(invalid(format!(
                "the footer is {} bytes but its fields take {used}",
                body.len()
            )));
        }
        footer.has_length = with_length;
        let footer_bytes = suffix.len().saturating_sub(start) as u64;
        footer.offset = file_size.checked_sub(footer_bytes);
        Ok(FooterRead::Done(footer))
    }

    /// Parses a footer's fields from `input`, which holds that footer and
    /// nothing after it (its file's footer, or its stretch of consolidated
    /// fragment metadata), returning it and the bytes it took. `file` names
    /// the containing file in errors.
    pub fn parse_fields<'s>(
        input: &[u8],
        schemas: &dyn Fn(&str) -> Option<&'s ArraySchema>,
        file: &str,
    ) -> Result<(Footer, usize)> {
        let mut r = Reader::new(input, file, "footer");
        let version = r.u32("version")?;
        if !(3..=OPTIONAL_SECTIONS_VERSION).contains(&version) {
            return Err(FragmentError::invalid(
                file,
                "footer: version",
                format!("{version} is not a footer version (3 to {OPTIONAL_SECTIONS_VERSION})"),
            ));
        }
        let array_schema_name = if version >= 10 {
            let n = r.u64("array schema name size")?;
            if n == 0 {
                return Err(FragmentError::invalid(
                    file,
                    "footer: array schema name",
                    "empty",
                ));
            }
            let b = r.bytes(n, "array schema name")?;
            String::from_utf8(b.to_vec()).map_err(|_| {
                FragmentError::invalid(file, "footer: array schema name", "not UTF-8")
            })?
        } else {
            LEGACY_SCHEMA_NAME.to_owned()
        };
        let schema = schemas(&array_schema_name)
            .ok_or_else(|| FragmentError::missing(file, format!("schema {array_schema_name}")))?;
        let domain = &schema.domain;
        let dense = r.flag("dense")?;
        let null_domain = r.flag("null non-empty domain")?;
        let all_fixed = domain.dimensions.iter().all(|d| !d.is_var());
        let non_empty_domain = if version < 5 {
            // One datatype for all dimensions; dummy bytes when null.
            let b = r.bytes(flat_domain_size(domain), "non-empty domain")?;
            if null_domain {
                None
            } else {
                let mut ranges = Vec::with_capacity(domain.dimensions.len());
                let mut rest = b;
                for dim in &domain.dimensions {
                    let n = dim.datatype.cell_size(2) as usize;
                    if n > rest.len() {
                        return Err(FragmentError::invalid(
                            file,
                            "footer: non-empty domain",
                            "dimension sizes differ",
                        ));
                    }
                    let (piece, next) = rest.split_at(n);
                    ranges.push(DimRange::Fixed(piece.to_vec()));
                    rest = next;
                }
                Some(ranges)
            }
        } else if null_domain {
            // TileDB's writer fills a null domain with zeros (only possible
            // when every dimension is fixed-size).
            if all_fixed {
                r.bytes(flat_domain_size(domain), "non-empty domain")?;
            }
            None
        } else {
            Some(
                domain
                    .read_nd_range(&mut r.input, "footer: non-empty domain")
                    .map_err(|e| FragmentError::schema(file, e))?,
            )
        };
        let sparse_tile_num = r.u64("sparse tile num")?;
        let last_tile_cell_num = r.u64("last tile cell num")?;
        // Nothing authenticates the footer (an encrypted array's neither):
        // flags TileDB never writes so would make cells vanish quietly.
        if dense && schema.array_type == tdb_format::ArrayType::Sparse {
            return Err(FragmentError::invalid(
                file,
                "footer: dense",
                "a dense fragment in a sparse array",
            ));
        }
        if null_domain && (dense || sparse_tile_num > 0) {
            return Err(FragmentError::invalid(
                file,
                "footer: null non-empty domain",
                "a fragment with tiles has no non-empty domain",
            ));
        }
        let has_timestamps = version >= 14 && r.flag("has timestamps")?;
        let has_delete_meta = version >= 15 && r.flag("has delete meta")?;
        let (a, d) = (schema.attributes.len(), domain.dimensions.len());
        let (fixed_n, var_n, validity_n) = counts(version, a, d, has_timestamps, has_delete_meta);
        let file_sizes = r.u64s(fixed_n as u64, "file sizes")?;
        let file_var_sizes = r.u64s(var_n as u64, "file var sizes")?;
        let file_validity_sizes = r.u64s(validity_n as u64, "file validity sizes")?;
        let mut offsets = SectionOffsets {
            rtree: r.u64("R-tree offset")?,
            tile_offsets: r.u64s(fixed_n as u64, "tile offsets offsets")?,
            tile_var_offsets: r.u64s(var_n as u64, "tile var offsets offsets")?,
            tile_var_sizes: r.u64s(var_n as u64, "tile var sizes offsets")?,
            tile_validity_offsets: r.u64s(validity_n as u64, "tile validity offsets offsets")?,
            ..SectionOffsets::default()
        };
        if version >= 11 {
            offsets.tile_mins = r.u64s(fixed_n as u64, "tile mins offsets")?;
            offsets.tile_maxes = r.u64s(fixed_n as u64, "tile maxes offsets")?;
            offsets.tile_sums = r.u64s(fixed_n as u64, "tile sums offsets")?;
            offsets.tile_null_counts = r.u64s(fixed_n as u64, "tile null counts offsets")?;
        }
        // TileDB writes this offset from v11 on but reads it from v12: the
        // v11 footers recent TileDB writes (consolidating an old array) end
        // with it, the ones TileDB 2.x wrote at v11 do not; the footer's
        // length tells them apart.
        if version >= 12 || (version == 11 && r.input.len() == 8) {
            offsets.fragment_summary = Some(r.u64("fragment min max sum null count offset")?);
        }
        if version >= 16 {
            offsets.processed_conditions = Some(r.u64("processed conditions offset")?);
        }
        let mut optional_sections = Vec::new();
        if version >= OPTIONAL_SECTIONS_VERSION {
            let count = r.u32("optional section count")?;
            for _ in 0..count {
                let id = r.u64("optional section identifier")?;
                let size = r.u32("optional section size")?;
                let data = r.bytes(u64::from(size), "optional section data")?;
                if id == TILE_GLOBAL_ORDER_ID {
                    if u64::from(size) != (d as u64).saturating_mul(16) {
                        return Err(FragmentError::invalid(
                            file,
                            "footer: tile global order section",
                            format!("{size} bytes for {d} dimensions"),
                        ));
                    }
                    let mut s = Reader::new(data, file, "footer: tile global order section");
                    optional_sections.push(OptionalSection::TileGlobalOrder {
                        mins: s.u64s(d as u64, "mins offsets")?,
                        maxes: s.u64s(d as u64, "maxes offsets")?,
                    });
                } else {
                    optional_sections.push(OptionalSection::Unknown {
                        id,
                        data: data.to_vec(),
                    });
                }
            }
        }
        // The reader only moves forward through `input`.
        let used = input.len().saturating_sub(r.input.len());
        let footer = Footer {
            version,
            array_schema_name,
            dense,
            non_empty_domain,
            sparse_tile_num,
            last_tile_cell_num,
            has_timestamps,
            has_delete_meta,
            file_sizes,
            file_var_sizes,
            file_validity_sizes,
            offsets,
            optional_sections,
            attribute_num: a,
            dim_num: d,
            size: used as u64,
            has_length: version >= 10 || !all_fixed,
            offset: None,
        };
        Ok((footer, used))
    }

    /// The footer of a fragment about to be written at the written format
    /// version (v22) with `schema` (named `schema_name`): every per-field
    /// array sized for the schema's attributes, `__coords` and dimensions,
    /// and per-cell timestamps when `has_timestamps` (a fragment consolidated
    /// with timestamps) and delete metadata when `has_delete_meta` (one
    /// consolidated over delete commits); the non-empty domain, tile
    /// counts, sizes and offsets empty or zero until the writer fills them
    /// (it sets `last_tile_cell_num` as TileDB does: a dense tile's whole
    /// extent, the cells of a sparse fragment's last tile).
    pub fn new_written(
        schema: &ArraySchema,
        schema_name: &str,
        has_timestamps: bool,
        has_delete_meta: bool,
    ) -> Footer {
        let (a, d) = (schema.attributes.len(), schema.domain.dimensions.len());
        let version = FormatVersion::WRITTEN.get();
        let (num, _, _) = counts(version, a, d, has_timestamps, has_delete_meta);
        let zeros = || vec![0u64; num];
        Footer {
            version,
            array_schema_name: schema_name.to_owned(),
            dense: schema.array_type == tdb_format::ArrayType::Dense,
            non_empty_domain: None,
            sparse_tile_num: 0,
            last_tile_cell_num: 0,
            has_timestamps,
            has_delete_meta,
            file_sizes: zeros(),
            file_var_sizes: zeros(),
            file_validity_sizes: zeros(),
            offsets: SectionOffsets {
                rtree: 0,
                tile_offsets: zeros(),
                tile_var_offsets: zeros(),
                tile_var_sizes: zeros(),
                tile_validity_offsets: zeros(),
                tile_mins: zeros(),
                tile_maxes: zeros(),
                tile_sums: zeros(),
                tile_null_counts: zeros(),
                fragment_summary: Some(0),
                processed_conditions: Some(0),
            },
            optional_sections: Vec::new(),
            attribute_num: a,
            dim_num: d,
            size: 0,
            has_length: true,
            offset: None,
        }
    }

    /// Appends the footer's fields (no trailing length), the mirror of
    /// [`Footer::parse_fields`].
    pub fn write_fields(&self, schema: &ArraySchema, out: &mut Vec<u8>) {
        le::put_u32(out, self.version);
        if self.version >= 10 {
            le::put_bytes_u64(out, self.array_schema_name.as_bytes());
        }
        le::put_bool(out, self.dense);
        le::put_bool(out, self.non_empty_domain.is_none());
        match &self.non_empty_domain {
            Some(nd) => Domain::write_nd_range(nd, out),
            None if self.version < 5 || schema.domain.dimensions.iter().all(|d| !d.is_var()) => {
                let n = flat_domain_size(&schema.domain) as usize;
                out.resize(out.len().saturating_add(n), 0);
            }
            None => {}
        }
        le::put_u64(out, self.sparse_tile_num);
        le::put_u64(out, self.last_tile_cell_num);
        if self.version >= 14 {
            le::put_bool(out, self.has_timestamps);
        }
        if self.version >= 15 {
            le::put_bool(out, self.has_delete_meta);
        }
        put_u64s(out, &self.file_sizes);
        put_u64s(out, &self.file_var_sizes);
        put_u64s(out, &self.file_validity_sizes);
        let o = &self.offsets;
        le::put_u64(out, o.rtree);
        for v in [
            &o.tile_offsets,
            &o.tile_var_offsets,
            &o.tile_var_sizes,
            &o.tile_validity_offsets,
            &o.tile_mins,
            &o.tile_maxes,
            &o.tile_sums,
            &o.tile_null_counts,
        ] {
            put_u64s(out, v);
        }
        if let Some(v) = o.fragment_summary {
            le::put_u64(out, v);
        }
        if let Some(v) = o.processed_conditions {
            le::put_u64(out, v);
        }
        if self.version >= OPTIONAL_SECTIONS_VERSION {
            le::put_u32(out, self.optional_sections.len() as u32);
            for s in &self.optional_sections {
                match s {
                    OptionalSection::TileGlobalOrder { mins, maxes } => {
                        le::put_u64(out, TILE_GLOBAL_ORDER_ID);
                        let bytes = mins.len().saturating_add(maxes.len()).saturating_mul(8);
                        le::put_u32(out, bytes as u32);
                        put_u64s(out, mins);
                        put_u64s(out, maxes);
                    }
                    OptionalSection::Unknown { id, data } => {
                        le::put_u64(out, *id);
                        le::put_u32(out, data.len() as u32);
                        out.extend_from_slice(data);
                    }
                }
            }
        }
    }

    /// The footer as it ends `__fragment_metadata.tdb`: its fields, then
    /// its length when it has one (v10+, or a var-size dimension).
    pub fn write(&self, schema: &ArraySchema) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_fields(schema, &mut out);
        if self.has_length {
            let n = out.len() as u64;
            le::put_u64(&mut out, n);
        }
        out
    }

    /// Sets where the footer starts in a `__fragment_metadata.tdb` of
    /// `file_size` bytes (for footers read from consolidated metadata).
    pub fn locate(&mut self, file_size: u64) {
        let tail = self
            .size
            .saturating_add(if self.has_length { 8 } else { 0 });
        self.offset = file_size.checked_sub(tail);
    }

    /// Fields of the per-field arrays, by index.
    pub fn fields(&self) -> Vec<Field> {
        let mut f: Vec<Field> = (0..self.attribute_num).map(Field::Attribute).collect();
        f.push(Field::Coords);
        if self.version >= 5 {
            f.extend((0..self.dim_num).map(Field::Dimension));
            if self.has_timestamps {
                f.push(Field::Timestamps);
            }
            if self.has_delete_meta {
                f.push(Field::DeleteTimestamps);
                f.push(Field::DeleteConditionIndex);
            }
        }
        f
    }

    /// The index of `field` in the per-field arrays.
    pub fn field_index(&self, field: Field) -> Option<usize> {
        self.fields().iter().position(|f| *f == field)
    }

    /// The data file field of a footer field, as this fragment's version
    /// names its files (by index from v9, by name before, percent-encoded
    /// in v8): the inverse of [`Footer::data_field_index`].
    pub fn data_field(&self, field: Field, schema: &ArraySchema) -> Option<DataField> {
        let named =
            |name: &str| FormatVersion::new(self.version).map(|v| DataField::named(name, v));
        let by_index = self.version >= 9;
        Some(match field {
            Field::Attribute(i) if by_index => DataField::Attribute(i as u32),
            Field::Dimension(i) if by_index => DataField::Dimension(i as u32),
            Field::Attribute(i) => named(&schema.attributes.get(i)?.name).ok()?,
            Field::Dimension(i) => named(&schema.domain.dimensions.get(i)?.name).ok()?,
            Field::Coords => DataField::LegacyCoords,
            Field::Timestamps => DataField::Timestamps,
            Field::DeleteTimestamps => DataField::DeleteTimestamps,
            Field::DeleteConditionIndex => DataField::DeleteConditionIndex,
        })
    }

    /// The per-field index of a data file's field (as
    /// `tdb_format::classify` names it), resolving v5–v8 names through the
    /// schema (v8 percent-encodes some characters).
    pub fn data_field_index(&self, field: &DataField, schema: &ArraySchema) -> Option<usize> {
        let f = match field {
            DataField::Attribute(i) => Field::Attribute(*i as usize),
            DataField::Dimension(i) => Field::Dimension(*i as usize),
            DataField::LegacyCoords => Field::Coords,
            DataField::Timestamps => Field::Timestamps,
            DataField::DeleteTimestamps => Field::DeleteTimestamps,
            DataField::DeleteConditionIndex => Field::DeleteConditionIndex,
            DataField::Named(_) => match schema.field_of_file(field)? {
                SchemaField::Attribute(i) => Field::Attribute(i),
                SchemaField::Dimension(i) => Field::Dimension(i),
            },
        };
        self.field_index(f)
    }

    /// The size the footer records for field `index`'s `part` data file
    /// (`None` where it records none: a part the field has not, or a
    /// format before validity files).
    pub fn file_size(&self, index: usize, part: DataPart) -> Option<u64> {
        let sizes = match part {
            DataPart::Fixed => &self.file_sizes,
            DataPart::Var => &self.file_var_sizes,
            DataPart::Validity => &self.file_validity_sizes,
        };
        sizes.get(index).copied()
    }

    /// Tiles in the fragment: for dense fragments those the non-empty
    /// domain touches (TileDB's `Domain::tile_num` on it), else the sparse
    /// tile count.
    pub fn tile_num(&self, schema: &ArraySchema) -> Option<u64> {
        if self.dense {
            tdb_index::dense::tile_count(&schema.domain, self.non_empty_domain.as_ref()?)
        } else {
            Some(self.sparse_tile_num)
        }
    }

    /// Cells as TileDB's fragment info reports them: dense, whole tiles
    /// times cells per tile; sparse, `(tiles - 1) × capacity + last tile
    /// cell num`.
    pub fn cell_num(&self, schema: &ArraySchema) -> Option<u64> {
        if self.dense {
            tdb_index::dense::dense_cell_num(&schema.domain, self.non_empty_domain.as_ref()?)
        } else if self.sparse_tile_num == 0 {
            Some(0)
        } else {
            self.sparse_tile_num
                .saturating_sub(1)
                .checked_mul(schema.capacity)?
                .checked_add(self.last_tile_cell_num)
        }
    }

    /// Offsets of the tile global order bounds (v23 optional section).
    pub fn tile_global_order_offsets(&self) -> Option<(&[u64], &[u64])> {
        self.optional_sections.iter().find_map(|s| match s {
            OptionalSection::TileGlobalOrder { mins, maxes } => Some((&mins[..], &maxes[..])),
            OptionalSection::Unknown { .. } => None,
        })
    }

    /// Where `section` starts, if the footer has it.
    pub fn section_offset(&self, section: Section) -> Option<u64> {
        let o = &self.offsets;
        let at = |v: &Vec<u64>, i: usize| v.get(i).copied();
        match section {
            Section::RTree => (self.version >= 3).then_some(o.rtree),
            Section::TileOffsets(i) => at(&o.tile_offsets, i),
            Section::VarOffsets(i) => at(&o.tile_var_offsets, i),
            Section::VarSizes(i) => at(&o.tile_var_sizes, i),
            Section::ValidityOffsets(i) => at(&o.tile_validity_offsets, i),
            Section::Mins(i) => at(&o.tile_mins, i),
            Section::Maxes(i) => at(&o.tile_maxes, i),
            Section::Sums(i) => at(&o.tile_sums, i),
            Section::NullCounts(i) => at(&o.tile_null_counts, i),
            Section::FragmentSummaries => o.fragment_summary,
            Section::ProcessedConditions => o.processed_conditions,
            Section::GlobalOrderMins(i) => self
                .tile_global_order_offsets()
                .and_then(|(m, _)| m.get(i).copied()),
            Section::GlobalOrderMaxes(i) => self
                .tile_global_order_offsets()
                .and_then(|(_, m)| m.get(i).copied()),
        }
    }

    /// Points `section` at `offset` (the mirror of
    /// [`Footer::section_offset`]), for writers that lay sections out anew.
    pub fn set_section_offset(&mut self, section: Section, offset: u64) -> Result<()> {
        let o = &mut self.offsets;
        let slot = match section {
            Section::RTree => Some(&mut o.rtree),
            Section::TileOffsets(i) => o.tile_offsets.get_mut(i),
            Section::VarOffsets(i) => o.tile_var_offsets.get_mut(i),
            Section::VarSizes(i) => o.tile_var_sizes.get_mut(i),
            Section::ValidityOffsets(i) => o.tile_validity_offsets.get_mut(i),
            Section::Mins(i) => o.tile_mins.get_mut(i),
            Section::Maxes(i) => o.tile_maxes.get_mut(i),
            Section::Sums(i) => o.tile_sums.get_mut(i),
            Section::NullCounts(i) => o.tile_null_counts.get_mut(i),
            Section::FragmentSummaries => o.fragment_summary.as_mut(),
            Section::ProcessedConditions => o.processed_conditions.as_mut(),
            Section::GlobalOrderMins(i) | Section::GlobalOrderMaxes(i) => {
                let maxes = matches!(section, Section::GlobalOrderMaxes(_));
                self.optional_sections.iter_mut().find_map(|s| match s {
                    OptionalSection::TileGlobalOrder { mins, maxes: m } => {
                        if maxes {
                            m.get_mut(i)
                        } else {
                            mins.get_mut(i)
                        }
                    }
                    _ => None,
                })
            }
        };
        match slot {
            Some(slot) => {
                *slot = offset;
                Ok(())
            }
            None => Err(FragmentError::invalid(
                "",
                "footer",
                format!("has no {}", section.label()),
            )),
        }
    }

    /// Every section the footer points to, in footer order.
    pub fn sections(&self) -> Vec<Section> {
        let o = &self.offsets;
        let mut s = Vec::new();
        if self.version >= 3 {
            s.push(Section::RTree);
        }
        let per = |n: usize, f: fn(usize) -> Section, s: &mut Vec<Section>| s.extend((0..n).map(f));
        per(o.tile_offsets.len(), Section::TileOffsets, &mut s);
        per(o.tile_var_offsets.len(), Section::VarOffsets, &mut s);
        per(o.tile_var_sizes.len(), Section::VarSizes, &mut s);
        per(
            o.tile_validity_offsets.len(),
            Section::ValidityOffsets,
            &mut s,
        );
        per(o.tile_mins.len(), Section::Mins, &mut s);
        per(o.tile_maxes.len(), Section::Maxes, &mut s);
        per(o.tile_sums.len(), Section::Sums, &mut s);
        per(o.tile_null_counts.len(), Section::NullCounts, &mut s);
        if o.fragment_summary.is_some() {
            s.push(Section::FragmentSummaries);
        }
        if o.processed_conditions.is_some() {
            s.push(Section::ProcessedConditions);
        }
        if let Some((mins, maxes)) = self.tile_global_order_offsets() {
            per(mins.len(), Section::GlobalOrderMins, &mut s);
            per(maxes.len(), Section::GlobalOrderMaxes, &mut s);
        }
        s
    }

    /// The byte range of `section` in `__fragment_metadata.tdb`: from its
    /// offset to the next section's start (sections are written back to
    /// back) or, for the last, the footer's start.
    pub fn section_range(&self, section: Section, fragment: &str) -> Result<Range<u64>> {
        let file = metadata_file(fragment);
        let start = self
            .section_offset(section)
            .ok_or_else(|| FragmentError::missing(&file, section.label()))?;
        let next = self
            .sections()
            .into_iter()
            .filter_map(|s| self.section_offset(s))
            .filter(|o| *o > start)
            .min();
        let end = match (next, self.offset) {
            (Some(n), Some(f)) => n.min(f),
            (Some(n), None) => n,
            (None, Some(f)) => f,
            (None, None) => {
                return Err(FragmentError::invalid(
                    &file,
                    section.label(),
                    "its end is unknown until the footer is located in its file",
                ))
            }
        };
        if start >= end {
            return Err(FragmentError::invalid(
                &file,
                section.label(),
                format!("starts at {start}, at or after its end {end}"),
            ));
        }
        Ok(start..end)
    }
}
