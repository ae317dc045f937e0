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

mod input;
mod tiles;

use crate::{QueryError, Result, ResultLayout, Subarray};
use bytes::Bytes;
use input::{Input, Slot};
use std::cmp::Ordering;
use tdb_format::{names, ArrayType, DataField, DataPart, FormatVersion, TimestampedName};
use tdb_fragment::fragment_metadata::{Footer, FragmentMetadata, Section, SectionData};
use tdb_fragment::tile_metadata::{fragment_summaries, TileMetadata};
use tdb_index::dense::{InputOrder, WriteGrid};
use tdb_index::order::{same_coords, sort_cells, CellOrder};
use tdb_index::{DomainOps, RTree, RangeOps, DEFAULT_FANOUT};
use tdb_schema::{ArraySchema, NDRange, Range, SchemaEntry};
use tdb_storage::WritableStorage;
use tiles::{field_tiles, FieldTiles, TileSources};

pub use crate::batch::FieldBuffer;

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
    let threads = crate::threads();
    let mut per_field: Vec<(Slot, FieldTiles)> = Vec::with_capacity(input.fields.len());
    for f in &input.fields {
        let tiles = field_tiles(s, f, &layout, key, &frag_name, threads)?;
        let data_field = match f.slot {
            Slot::Attribute(i) => DataField::Attribute(i as u32),
            Slot::Dimension(i) => DataField::Dimension(i as u32),
        };
        put(
            storage,
            &frag_dir,
            &data_field,
            DataPart::Fixed,
            &tiles.fixed,
        )?;
        if f.cell_size.is_none() {
            put(storage, &frag_dir, &data_field, DataPart::Var, &tiles.var)?;
        }
        if f.buf.validity.is_some() {
            put(
                storage,
                &frag_dir,
                &data_field,
                DataPart::Validity,
                &tiles.validity,
            )?;
        }
        per_field.push((f.slot, tiles));
    }
    let meta = fragment_metadata(s, &schema.name, name.clone(), &layout, &per_field)?;
    let bytes = meta.write_file(s, key)?;
    let meta_key = tdb_storage::join(&frag_dir, names::FRAGMENT_METADATA_FILE);
    write(storage, &meta_key, bytes)?;
    // The commit, last: the fragment exists for readers from here on.
    let commit = tdb_storage::join(
        &tdb_storage::join(dir, names::COMMITS_DIR),
        &format!("{frag_name}{}", names::WRT_EXT),
    );
    write(storage, &commit, Vec::new())?;
    Ok(Written {
        fragment: name,
        cells: input.cells as u64,
        tiles: layout.tile_num(),
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

fn put<S: WritableStorage + ?Sized>(
    storage: &S,
    frag_dir: &str,
    field: &DataField,
    part: DataPart,
    bytes: &[u8],
) -> Result<()> {
    let key = tdb_storage::join(frag_dir, &field.file_name(part));
    write(storage, &key, bytes.to_vec())
}

/// How a write's cells are laid into tiles.
enum Arrangement {
    /// A dense write: the subarray's tiles.
    Dense {
        grid: WriteGrid,
        subarray: NDRange,
        schema_domain: tdb_schema::Domain,
        tile_order: tdb_format::Layout,
        cell_order: tdb_format::Layout,
    },
    /// A sparse write: cells in global order, `capacity` per tile.
    Sparse {
        order: Vec<usize>,
        capacity: usize,
        mbrs: Vec<NDRange>,
        domain: NDRange,
    },
}

impl Arrangement {
    fn dense(schema: &ArraySchema, input: &Input<'_>, spec: &WriteSpec) -> Result<Self> {
        let order = match spec.layout.unwrap_or(ResultLayout::RowMajor) {
            ResultLayout::RowMajor => InputOrder::RowMajor,
            ResultLayout::ColMajor => InputOrder::ColMajor,
            ResultLayout::GlobalOrder => InputOrder::Global,
            ResultLayout::Unordered => {
                return Err(QueryError::invalid(
                    "a dense write takes row-major, col-major or global-order cells, not unordered ones",
                ))
            }
        };
        let dims = &schema.domain.dimensions;
        let mut subarray: NDRange = Vec::with_capacity(dims.len());
        for (d, dim) in dims.iter().enumerate() {
            let whole = || {
                dim.bounds()
                    .map(|(lo, hi)| Range::from_bounds(lo, hi, false))
            };
            let given = spec.subarray.as_ref().map(|s| s.ranges(d)).unwrap_or(&[]);
            let r = match given {
                [] => whole(),
                [r] => Some(r.clone()),
                _ => {
                    return Err(QueryError::Subarray {
                        dim: dim.name.clone(),
                        reason: "a dense write covers one range per dimension".into(),
                    })
                }
            }
            .ok_or_else(|| QueryError::Subarray {
                dim: dim.name.clone(),
                reason: "no domain to write".into(),
            })?;
            let ops = RangeOps::new(dim, d)?;
            let (lo, hi) = r.bounds();
            let (dlo, dhi) = dim.bounds().unwrap_or((lo, hi));
            if ops.cmp_values(lo, hi) == Ordering::Greater
                || ops.cmp_values(lo, dlo) == Ordering::Less
                || ops.cmp_values(hi, dhi) == Ordering::Greater
            {
                return Err(QueryError::Subarray {
                    dim: dim.name.clone(),
                    reason: format!(
                        "range [{}, {}] is reversed or outside the domain [{}, {}]",
                        input::show(dim.datatype, lo),
                        input::show(dim.datatype, hi),
                        input::show(dim.datatype, dlo),
                        input::show(dim.datatype, dhi)
                    ),
                });
            }
            subarray.push(r);
        }
        let grid = WriteGrid::new(
            &schema.domain,
            schema.tile_order,
            schema.cell_order,
            &subarray,
            order,
        )
        .ok_or_else(|| {
            QueryError::invalid("dense writes need integer dimensions with tile extents")
        })?;
        let want = grid.input_cells().unwrap_or(u64::MAX);
        if input.cells as u64 != want {
            return Err(QueryError::bad_input(
                &input
                    .fields
                    .first()
                    .map_or(String::new(), |f| f.buf.name.clone()),
                format!("{} cells given, the subarray holds {want}", input.cells),
            ));
        }
        Ok(Arrangement::Dense {
            grid,
            subarray,
            schema_domain: schema.domain.clone(),
            tile_order: schema.tile_order,
            cell_order: schema.cell_order,
        })
    }

    fn sparse(schema: &ArraySchema, input: &Input<'_>, layout: ResultLayout) -> Result<Self> {
        let ops = DomainOps::new(&schema.domain)?;
        let ops = ops.dims();
        let n = ops.len();
        let dims: Vec<_> = (0..n)
            .map(|d| input.dim(d).copied())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| QueryError::invalid("a sparse write without coordinates"))?;
        let coord = |i: usize, d: usize| dims[d].cell(i);
        let kind = CellOrder::Global {
            tile_order: schema.tile_order,
            cell_order: schema.cell_order,
        };
        let mut order: Vec<usize> = (0..input.cells).collect();
        match layout {
            ResultLayout::Unordered => {
                sort_cells(
                    &mut order,
                    input.cells,
                    &schema.domain,
                    ops,
                    kind,
                    coord,
                    |a, b| a.cmp(&b),
                );
            }
            ResultLayout::GlobalOrder => {
                let mut sorted = order.clone();
                sort_cells(
                    &mut sorted,
                    input.cells,
                    &schema.domain,
                    ops,
                    kind,
                    coord,
                    |a, b| a.cmp(&b),
                );
                if let Some(i) = sorted.iter().zip(&order).position(|(a, b)| a != b) {
                    return Err(QueryError::bad_input(
                        &dims[0].buf.name,
                        format!("cell {i} is out of the global order the write says it keeps"),
                    ));
                }
            }
            other => {
                return Err(QueryError::invalid(format!(
                    "a sparse write takes unordered or global-order cells, not {}",
                    other.name()
                )))
            }
        }
        if !schema.allows_dups {
            if let Some(w) = order
                .windows(2)
                .find(|w| same_coords(ops, coord, w[0], w[1]))
            {
                let at: Vec<String> = (0..n)
                    .map(|d| input::show(schema.domain.dimensions[d].datatype, coord(w[1], d)))
                    .collect();
                return Err(QueryError::bad_input(
                    &dims[0].buf.name,
                    format!(
                        "cells {} and {} both have coordinates ({}) and the array does not allow duplicates",
                        w[0],
                        w[1],
                        at.join(", ")
                    ),
                ));
            }
        }
        let capacity = usize::try_from(schema.capacity.max(1)).unwrap_or(usize::MAX);
        let mbrs: Vec<NDRange> = order
            .chunks(capacity)
            .map(|tile| {
                let mut mbr: NDRange = (0..n)
                    .map(|d| {
                        let v = coord(tile[0], d);
                        Range::from_bounds(v, v, dims[d].cell_size.is_none())
                    })
                    .collect();
                for &i in &tile[1..] {
                    for (d, o) in ops.iter().enumerate() {
                        let v = coord(i, d);
                        o.expand(
                            &mut mbr[d],
                            &Range::from_bounds(v, v, dims[d].cell_size.is_none()),
                        );
                    }
                }
                mbr
            })
            .collect();
        let mut domain = mbrs.first().cloned().unwrap_or_default();
        for m in mbrs.iter().skip(1) {
            for (d, o) in ops.iter().enumerate() {
                o.expand(&mut domain[d], &m[d]);
            }
        }
        Ok(Arrangement::Sparse {
            order,
            capacity,
            mbrs,
            domain,
        })
    }

    fn non_empty_domain(&self) -> Option<NDRange> {
        match self {
            Arrangement::Dense { subarray, .. } => Some(subarray.clone()),
            Arrangement::Sparse { domain, order, .. } => {
                (!order.is_empty()).then(|| domain.clone())
            }
        }
    }
}

impl TileSources for Arrangement {
    fn tile_num(&self) -> u64 {
        match self {
            Arrangement::Dense { grid, .. } => grid.tile_num().unwrap_or(0),
            Arrangement::Sparse { mbrs, .. } => mbrs.len() as u64,
        }
    }

    fn sources(&self, t: u64, out: &mut Vec<usize>) -> Result<()> {
        match self {
            Arrangement::Dense { grid, .. } => grid
                .sources(t, out)
                .ok_or_else(|| QueryError::invalid(format!("no tile {t} in the write"))),
            Arrangement::Sparse {
                order, capacity, ..
            } => {
                let a = (t as usize).saturating_mul(*capacity).min(order.len());
                let b = a.saturating_add(*capacity).min(order.len());
                out.clear();
                out.extend_from_slice(&order[a..b]);
                Ok(())
            }
        }
    }

    fn stats_order(&self, t: u64, tile_cells: usize) -> Result<Option<Vec<usize>>> {
        match self {
            Arrangement::Dense {
                subarray,
                schema_domain,
                tile_order,
                cell_order,
                ..
            } => tdb_index::dense::written_cells(
                schema_domain,
                *tile_order,
                *cell_order,
                subarray,
                t,
                tile_cells,
            )
            .map(Some)
            .ok_or_else(|| QueryError::invalid(format!("no tile {t} in the write"))),
            Arrangement::Sparse { .. } => Ok(None),
        }
    }
}

/// The new fragment's metadata: footer and every section.
fn fragment_metadata(
    schema: &ArraySchema,
    schema_name: &str,
    name: TimestampedName,
    layout: &Arrangement,
    fields: &[(Slot, FieldTiles)],
) -> Result<FragmentMetadata> {
    let dense = matches!(layout, Arrangement::Dense { .. });
    let tile_num = layout.tile_num();
    let last_tile_cells = match layout {
        Arrangement::Dense { grid, .. } => grid.tile_cells() as u64,
        Arrangement::Sparse {
            order, capacity, ..
        } => match order.len() % capacity {
            0 if order.is_empty() => 0,
            0 => *capacity as u64,
            r => r as u64,
        },
    };
    let mut footer = Footer::new_written(
        schema,
        schema_name,
        dense,
        layout.non_empty_domain(),
        if dense { 0 } else { tile_num },
        last_tile_cells,
    );
    let field_index = |slot: Slot| match slot {
        Slot::Attribute(i) => i,
        Slot::Dimension(d) => schema.attributes.len() + 1 + d,
    };
    for (slot, t) in fields {
        let i = field_index(*slot);
        footer.file_sizes[i] = t.fixed.len() as u64;
        footer.file_var_sizes[i] = t.var.len() as u64;
        footer.file_validity_sizes[i] = t.validity.len() as u64;
    }
    let rtree = match layout {
        Arrangement::Sparse { mbrs, .. } => {
            RTree::build(&schema.domain, mbrs.clone(), DEFAULT_FANOUT)?
        }
        Arrangement::Dense { .. } => RTree::empty(DEFAULT_FANOUT),
    };
    let mut rtree_bytes = Vec::new();
    rtree.write(&mut rtree_bytes);
    let mut meta = FragmentMetadata::new(name, footer);
    meta.set_section(Section::RTree, SectionData::RTree(rtree_bytes));
    let empty: Vec<TileMetadata> = Vec::new();
    let field_num = schema.attributes.len() + 1 + schema.domain.dimensions.len();
    let mut per_field: Vec<&[TileMetadata]> = vec![&empty; field_num];
    // Every field's offsets sections hold one entry per tile, zero where
    // the field has no such file (TileDB sizes them all).
    let zeros = vec![0u64; tile_num as usize];
    for (i, tiles) in per_field.iter_mut().enumerate() {
        let t = fields
            .iter()
            .find(|(s, _)| field_index(*s) == i)
            .map(|(_, t)| t);
        let u = |v: Option<&Vec<u64>>| {
            SectionData::U64s(match v {
                Some(v) if !v.is_empty() => v.clone(),
                _ => zeros.clone(),
            })
        };
        meta.set_section(Section::TileOffsets(i), u(t.map(|t| &t.fixed_offsets)));
        meta.set_section(Section::VarOffsets(i), u(t.map(|t| &t.var_offsets)));
        meta.set_section(Section::VarSizes(i), u(t.map(|t| &t.var_sizes)));
        meta.set_section(
            Section::ValidityOffsets(i),
            u(t.map(|t| &t.validity_offsets)),
        );
        if let Some(t) = t {
            *tiles = &t.metadata;
        }
        let (mins, maxes, sums, nulls) =
            tdb_fragment::tile_metadata::sections(schema, i, tile_num as usize, tiles);
        meta.set_section(Section::Mins(i), SectionData::Bounds(mins));
        meta.set_section(Section::Maxes(i), SectionData::Bounds(maxes));
        meta.set_section(Section::Sums(i), SectionData::Sums(sums));
        meta.set_section(Section::NullCounts(i), SectionData::U64s(nulls));
    }
    meta.set_section(
        Section::FragmentSummaries,
        SectionData::Summaries(fragment_summaries(schema, &per_field)),
    );
    meta.set_section(
        Section::ProcessedConditions,
        SectionData::Conditions(Vec::new()),
    );
    Ok(meta)
}
