//! Write queries: one call writes one fragment that TileDB 2.30 reads.
//!
//! The cells are checked first ([`input`]); nothing is written when they
//! do not fit the schema. A dense write lays its subarray's cells into the
//! space tiles the subarray touches (fill where a tile reaches beyond it);
//! a sparse write sorts its cells into the global order and cuts tiles of
//! `capacity` cells. Each field's tiles are built, measured (TileDB's tile
//! metadata) and filtered on a bounded pool ([`tiles`]), then its files
//! are written whole. The fragment metadata follows, and the commit file
//! (`__commits/<fragment>.wrt`) last: until it exists no reader sees the
//! fragment, so a write that fails half way leaves nothing visible.

mod arrange;
mod delete;
mod input;
mod tiles;

use crate::{QueryError, Result, ResultLayout, Subarray};
use arrange::Arrangement;
use bytes::Bytes;
use tdb_format::{names, ArrayType, DataPart, FormatVersion, TimestampedName};
use tdb_fragment::fragment_metadata::{Footer, FragmentMetadata, Section, SectionData};
use tdb_fragment::tile_metadata::{self, TileMetadata};
use tdb_schema::SchemaEntry;
use tdb_storage::WritableStorage;
use tiles::field_tiles;

pub use crate::batch::FieldBuffer;
pub use delete::delete_cells;

/// A write: the cells of every attribute (and, for sparse arrays, every
/// dimension's coordinates) in `fields`, in `layout` order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WriteSpec {
    /// The order of the cells given: dense writes row-major, col-major or
    /// global order over the subarray; sparse writes unordered (sorted
    /// here) or global order. `None`: row-major for dense arrays,
    /// unordered for sparse ones.
    pub layout: Option<ResultLayout>,
    /// Dense writes: the rectangle written (one range per dimension;
    /// `None` is the whole domain). Sparse writes take none.
    pub subarray: Option<Subarray>,
    /// One buffer per field.
    pub fields: Vec<FieldBuffer>,
    /// The fragment's timestamp range; `None` is now (milliseconds since
    /// the epoch, as TileDB).
    pub timestamps: Option<(u64, u64)>,
}

impl WriteSpec {
    /// A write of `fields` (row-major for dense arrays, unordered for
    /// sparse ones unless changed).
    pub fn new(fields: Vec<FieldBuffer>) -> Self {
        WriteSpec {
            layout: None,
            subarray: None,
            fields,
            timestamps: None,
        }
    }

    /// The order of the cells given.
    pub fn with_layout(mut self, layout: ResultLayout) -> Self {
        self.layout = Some(layout);
        self
    }

    /// The rectangle a dense write covers.
    pub fn with_subarray(mut self, subarray: Subarray) -> Self {
        self.subarray = Some(subarray);
        self
    }

    /// The fragment's timestamp (both ends).
    pub fn at(mut self, t: u64) -> Self {
        self.timestamps = Some((t, t));
        self
    }

    /// The fragment's timestamp range (copies of consolidated fragments).
    pub fn between(mut self, t1: u64, t2: u64) -> Self {
        self.timestamps = Some((t1, t2));
        self
    }
}

/// What a write committed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Written {
    /// The new fragment.
    pub fragment: TimestampedName,
    /// Cells written (for dense writes, the subarray's).
    pub cells: u64,
    /// Tiles per field.
    pub tiles: u64,
}

/// Milliseconds since the epoch, TileDB's timestamps.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Writes one fragment of the array at `dir` whose schema in force is
/// `schema` (`key` for encrypted arrays), and commits it.
pub fn write_fragment<S: WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    schema: &SchemaEntry,
    key: Option<&[u8; 32]>,
    spec: &WriteSpec,
) -> Result<Written> {
    let s = &schema.schema;
    let input = input::check(s, &spec.fields)?;
    let (t1, t2) = spec.timestamps.unwrap_or_else(|| {
        let t = now_ms();
        (t, t)
    });
    if t1 > t2 {
        return Err(QueryError::invalid(format!(
            "timestamp range {t1}..{t2} is reversed"
        )));
    }
    let layout = match s.array_type {
        ArrayType::Dense => Arrangement::dense(s, &input, spec)?,
        ArrayType::Sparse => {
            Arrangement::sparse(s, &input, spec.layout.unwrap_or(ResultLayout::Unordered))?
        }
    };
    let name = TimestampedName::generate(t1, t2, Some(FormatVersion::WRITTEN))
        .map_err(|e| QueryError::invalid(e.to_string()))?;
    let frag_name = name.to_string();
    let frag_dir = tdb_storage::join(&tdb_storage::join(dir, names::FRAGMENTS_DIR), &frag_name);
    let tile_num = layout.tile_num();
    let dense = s.array_type == ArrayType::Dense;
    let footer = Footer::new_written(
        s,
        &schema.name,
        dense,
        layout.non_empty_domain(),
        if dense { 0 } else { tile_num },
        layout.last_tile_cell_num(),
    );
    let mut meta = FragmentMetadata::new(name.clone(), footer);
    let mut rtree = Vec::new();
    layout.rtree(s)?.write(&mut rtree);
    meta.set_section(Section::RTree, SectionData::RTree(rtree));
    // Every footer field gets every section: one entry per tile in the
    // offsets sections (zero where the field has no such file), TileDB's
    // statistics in the others (`tdb_fragment::tile_metadata::sections`).
    let field_num = meta.footer.fields().len();
    let mut stats: Vec<Vec<TileMetadata>> = vec![Vec::new(); field_num];
    let zeros = vec![0u64; tile_num as usize];
    for i in 0..field_num {
        for section in [
            Section::TileOffsets(i),
            Section::VarOffsets(i),
            Section::VarSizes(i),
            Section::ValidityOffsets(i),
        ] {
            meta.set_section(section, SectionData::U64s(zeros.clone()));
        }
    }
    let threads = crate::threads();
    for f in &input.fields {
        let i = meta
            .footer
            .field_index(f.field)
            .ok_or_else(|| QueryError::invalid(format!("{}: not in the footer", f.buf.name)))?;
        let data_field = meta
            .footer
            .data_field(f.field, s)
            .ok_or_else(|| QueryError::invalid(format!("{}: no data file", f.buf.name)))?;
        let tiles = field_tiles(s, f, i, &data_field, &layout, key, &frag_name, threads)?;
        let file = |part: DataPart| tdb_storage::join(&frag_dir, &data_field.file_name(part));
        meta.footer.file_sizes[i] = tiles.fixed.len() as u64;
        write(storage, &file(DataPart::Fixed), tiles.fixed)?;
        meta.set_section(
            Section::TileOffsets(i),
            SectionData::U64s(tiles.fixed_offsets),
        );
        if f.col.is_var() {
            meta.footer.file_var_sizes[i] = tiles.var.len() as u64;
            write(storage, &file(DataPart::Var), tiles.var)?;
            meta.set_section(Section::VarOffsets(i), SectionData::U64s(tiles.var_offsets));
            meta.set_section(Section::VarSizes(i), SectionData::U64s(tiles.var_sizes));
        }
        if f.col.validity.is_some() {
            meta.footer.file_validity_sizes[i] = tiles.validity.len() as u64;
            write(storage, &file(DataPart::Validity), tiles.validity)?;
            meta.set_section(
                Section::ValidityOffsets(i),
                SectionData::U64s(tiles.validity_offsets),
            );
        }
        stats[i] = tiles.metadata;
    }
    for (i, tiles) in stats.iter().enumerate() {
        let (mins, maxes, sums, nulls) = tile_metadata::sections(s, i, tile_num as usize, tiles);
        meta.set_section(Section::Mins(i), SectionData::Bounds(mins));
        meta.set_section(Section::Maxes(i), SectionData::Bounds(maxes));
        meta.set_section(Section::Sums(i), SectionData::Sums(sums));
        meta.set_section(Section::NullCounts(i), SectionData::U64s(nulls));
    }
    let per_field: Vec<&[TileMetadata]> = stats.iter().map(Vec::as_slice).collect();
    meta.set_section(
        Section::FragmentSummaries,
        SectionData::Summaries(tile_metadata::fragment_summaries(s, &per_field)),
    );
    meta.set_section(
        Section::ProcessedConditions,
        SectionData::Conditions(Vec::new()),
    );
    let bytes = meta.write_file(s, key)?;
    write(
        storage,
        &tdb_storage::join(&frag_dir, names::FRAGMENT_METADATA_FILE),
        bytes,
    )?;
    // The commit, last: the fragment exists for readers from here on.
    let commit = tdb_storage::join(
        &tdb_storage::join(dir, names::COMMITS_DIR),
        &format!("{frag_name}{}", names::WRT_EXT),
    );
    write(storage, &commit, Vec::new())?;
    Ok(Written {
        fragment: name,
        cells: input.cells as u64,
        tiles: tile_num,
    })
}

fn write<S: WritableStorage + ?Sized>(storage: &S, key: &str, bytes: Vec<u8>) -> Result<()> {
    storage
        .write(key, Bytes::from(bytes))
        .map_err(|source| QueryError::Storage {
            file: key.to_owned(),
            source,
        })
}
