//! How a write's cells are laid into tiles: a dense write's rectangle over
//! the space tiles it touches, a sparse write's cells sorted into the
//! global order and cut every `capacity` cells, or cells already in the
//! global order cut as they come.

use super::input::Input;
use crate::{QueryError, Result, ResultLayout, Subarray};
use tdb_format::{with_native, NativeType};
use tdb_index::dense::{InputOrder, WriteGrid};
use tdb_index::order::{cmp_coord_bytes, sort_cells, CellOrder};
use tdb_index::DomainOps;
use tdb_schema::{ArraySchema, NDRange, Range};

/// How a write's cells are laid into tiles.
pub(crate) enum Arrangement {
    /// A dense write: the subarray's tiles.
    Dense { grid: WriteGrid },
    /// A sparse write: cells in global order, `capacity` per tile.
    Sparse {
        order: Vec<usize>,
        capacity: usize,
        mbrs: Vec<NDRange>,
    },
    /// Cells already in the global order: input cells `start..end`,
    /// `tile_cells` per tile (global-order writes, dense or sparse).
    Run {
        start: usize,
        end: usize,
        tile_cells: usize,
    },
}

/// The rectangle a dense write covers: the spec's one range per
/// dimension, or the whole domain. `whole_tiles`: ranges may reach the
/// ends of the domain's edge tiles (a dense merge's).
pub(crate) fn dense_subarray(
    schema: &ArraySchema,
    given: Option<&Subarray>,
    whole_tiles: bool,
) -> Result<NDRange> {
    let ops = DomainOps::new(&schema.domain)?;
    if let Some(sub) = given {
        sub.check(schema, &ops, whole_tiles)?;
    }
    let dims = &schema.domain.dimensions;
    let mut subarray: NDRange = Vec::with_capacity(dims.len());
    for (d, dim) in dims.iter().enumerate() {
        let ranges = given.map(|s| s.ranges(d)).unwrap_or(&[]);
        let r = match ranges {
            [] => dim
                .bounds()
                .map(|(lo, hi)| Range::from_bounds(lo, hi, false)),
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
        subarray.push(r);
    }
    Ok(subarray)
}

/// Where a dense write of `subarray` in `order` puts its cells.
pub(crate) fn write_grid(
    schema: &ArraySchema,
    subarray: &NDRange,
    order: InputOrder,
) -> Result<WriteGrid> {
    WriteGrid::new(
        &schema.domain,
        schema.tile_order,
        schema.cell_order,
        subarray,
        order,
    )
    .ok_or_else(|| QueryError::invalid("dense writes need integer dimensions with tile extents"))
}

/// The minimum bounding rectangle of a sparse write's `cells`: per
/// dimension the cells with the lowest and highest value (the first of
/// equal ones), compared as numbers where the values are (through the
/// datatype cell by cell was an eighth of a 4M-cell write).
pub(crate) fn mbr(
    ops: &DomainOps,
    input: &Input<'_>,
    cells: impl IntoIterator<Item = usize> + Clone,
) -> NDRange {
    let dims = (0..ops.dims().len()).filter_map(|d| input.dim(d));
    dims.zip(ops.dims())
        .filter_map(|(f, o)| {
            let typed = (f.col.datatype.native()).filter(|n| f.cell_size() == Some(n.size()));
            let (lo, hi) = match typed {
                Some(n) => with_native!(n, T => extremes::<T>(f.col.fixed, cells.clone()))?,
                None => extremes_by(cells.clone(), |i| f.cell(i), |a, b| o.cmp_values(a, b))?,
            };
            Some(Range::from_bounds(f.cell(lo), f.cell(hi), f.col.is_var()))
        })
        .collect()
}

/// The cells of `cells` with the lowest and the highest value of a column
/// of `T`s (the first of equal ones); `None` for no cells.
fn extremes<T: NativeType>(
    fixed: &[u8],
    cells: impl IntoIterator<Item = usize>,
) -> Option<(usize, usize)> {
    let value = |i: usize| T::read_le(tdb_format::le::nth(fixed, i, T::SIZE).unwrap_or_default());
    extremes_by(cells, value, |a: T, b: T| {
        a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal)
    })
}

/// [`extremes`] for values `value` gives and `cmp` orders: a value below
/// the lowest so far is the new lowest, else one above the highest the new
/// highest (TileDB's MBR update).
fn extremes_by<V: Copy>(
    cells: impl IntoIterator<Item = usize>,
    value: impl Fn(usize) -> V,
    cmp: impl Fn(V, V) -> std::cmp::Ordering,
) -> Option<(usize, usize)> {
    let mut cells = cells.into_iter();
    let first = cells.next()?;
    let (mut lo, mut hi) = ((first, value(first)), (first, value(first)));
    for i in cells {
        let v = value(i);
        if cmp(v, lo.1).is_lt() {
            lo = (i, v);
        } else if cmp(v, hi.1).is_gt() {
            hi = (i, v);
        }
    }
    Some((lo.0, hi.0))
}

impl Arrangement {
    /// A dense write in row- or column-major order (global-order writes
    /// stream through [`Arrangement::Run`]).
    pub(crate) fn dense(
        schema: &ArraySchema,
        layout: ResultLayout,
        subarray: &NDRange,
    ) -> Result<Self> {
        let order = match layout {
            ResultLayout::RowMajor => InputOrder::RowMajor,
            ResultLayout::ColMajor => InputOrder::ColMajor,
            _ => {
                return Err(QueryError::invalid(format!(
                    "a dense write takes row-major, col-major or global-order cells, not {}",
                    layout.name()
                )))
            }
        };
        let grid = write_grid(schema, subarray, order)?;
        Ok(Arrangement::Dense { grid })
    }

    /// A sparse write of unordered cells, sorted here into the global
    /// order.
    pub(crate) fn sparse(schema: &ArraySchema, input: &Input<'_>) -> Result<Self> {
        let domain_ops = DomainOps::new(&schema.domain)?;
        let ops = domain_ops.dims();
        let n = ops.len();
        let dims: Vec<_> = (0..n)
            .map(|d| input.dim(d).copied())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| QueryError::invalid("a sparse write without coordinates"))?;
        // Fixed-size coordinates sliced from their buffers by a size
        // known once (the column's cell by cell was a quarter of a 4M-cell
        // sort).
        let sized: Vec<Option<(&[u8], usize)>> = (dims.iter())
            .map(|f| f.cell_size().map(|size| (f.col.fixed, size)))
            .collect();
        let coord = |i: usize, d: usize| match sized.get(d) {
            Some(Some((fixed, size))) => tdb_format::le::nth(fixed, i, *size).unwrap_or_default(),
            _ => dims.get(d).map_or(&[][..], |f| f.cell(i)),
        };
        let kind = CellOrder::Global {
            tile_order: schema.tile_order,
            cell_order: schema.cell_order,
        };
        // A coordinate is its bytes, as TileDB checks duplicates: ties
        // between equal values go by bytes, so equal coordinates end up
        // side by side, then as given.
        let bytes = |a: usize, b: usize| cmp_coord_bytes(n, &coord, a, b);
        let mut order: Vec<usize> = (0..input.cells).collect();
        sort_cells(
            &mut order,
            &schema.domain,
            ops,
            kind,
            coord,
            |a, b| bytes(a, b).then(a.cmp(&b)),
            crate::threads(),
        );
        // Cells with their own timestamps may share coordinates (a
        // coordinate's versions, as consolidation with timestamps keeps
        // them), in the order given.
        if !schema.allows_dups && !input.has_timestamps() {
            let mut pairs = order.iter().zip(order.iter().skip(1));
            if let Some((&a, &b)) = pairs.find(|&(&a, &b)| bytes(a, b).is_eq()) {
                return Err(duplicate(schema, input, a, b));
            }
        }
        let capacity = usize::try_from(schema.capacity.max(1)).unwrap_or(usize::MAX);
        // The tiles' MBRs side by side on the workers.
        let tiles: Vec<&[usize]> = order.chunks(capacity).collect();
        let mbrs = crate::pool::map_all(
            &tiles,
            crate::threads(),
            || (),
            |_, tile| Ok(mbr(&domain_ops, input, tile.iter().copied())),
        )?;
        Ok(Arrangement::Sparse {
            order,
            capacity,
            mbrs,
        })
    }

    /// Tiles in the arrangement.
    pub(crate) fn tile_num(&self) -> u64 {
        match self {
            Arrangement::Dense { grid } => grid.tile_num().unwrap_or(0),
            Arrangement::Sparse { mbrs, .. } => mbrs.len() as u64,
            Arrangement::Run {
                start,
                end,
                tile_cells,
            } => {
                let cells = end.saturating_sub(*start);
                let whole = cells.checked_div(*tile_cells).unwrap_or(0);
                let part = cells.checked_rem(*tile_cells).is_some_and(|r| r != 0);
                whole.saturating_add(usize::from(part)) as u64
            }
        }
    }

    /// Tile `t`'s cells in the cell order: input cell indices, or
    /// [`tdb_index::dense::FILL`].
    pub(crate) fn sources(&self, t: u64, out: &mut Vec<usize>) -> Result<()> {
        let mut take = |cells: &mut dyn Iterator<Item = usize>| {
            out.clear();
            out.extend(cells);
        };
        match self {
            Arrangement::Dense { grid } => {
                return grid
                    .sources(t, out)
                    .ok_or_else(|| QueryError::invalid(format!("no tile {t} in the write")))
            }
            Arrangement::Sparse {
                order, capacity, ..
            } => {
                let a = (t as usize).saturating_mul(*capacity).min(order.len());
                let b = a.saturating_add(*capacity).min(order.len());
                take(&mut order.get(a..b).unwrap_or_default().iter().copied());
            }
            Arrangement::Run {
                start,
                end,
                tile_cells,
            } => {
                let a = start.saturating_add((t as usize).saturating_mul(*tile_cells));
                let a = a.min(*end);
                take(&mut (a..a.saturating_add(*tile_cells).min(*end)));
            }
        }
        Ok(())
    }

    /// The positions in tile `t` whose cells the write gave, in the order
    /// TileDB's writer visits them for tile metadata; `None`: every
    /// position, in order.
    pub(crate) fn stats_order(&self, t: u64) -> Result<Option<Vec<usize>>> {
        match self {
            Arrangement::Dense { grid } if grid.writes_tile_in_order(t) => Ok(None),
            Arrangement::Dense { grid } => grid
                .written_cells(t)
                .map(Some)
                .ok_or_else(|| QueryError::invalid(format!("no tile {t} in the write"))),
            Arrangement::Sparse { .. } | Arrangement::Run { .. } => Ok(None),
        }
    }

    /// Cells in tile `t` as TileDB's footer counts a last tile's: a dense
    /// tile's whole extent, a sparse tile's cells.
    pub(crate) fn tile_cell_num(&self, t: u64) -> u64 {
        let in_tile = |cells: usize, per: usize| {
            let first = (t as usize).saturating_mul(per);
            cells.saturating_sub(first).min(per) as u64
        };
        match self {
            Arrangement::Dense { grid } => grid.tile_cells() as u64,
            Arrangement::Sparse {
                order, capacity, ..
            } => in_tile(order.len(), *capacity),
            Arrangement::Run {
                start,
                end,
                tile_cells,
            } => in_tile(end.saturating_sub(*start), *tile_cells),
        }
    }
}

/// The error for two cells with the same coordinates where the array
/// allows no duplicates.
pub(crate) fn duplicate(schema: &ArraySchema, input: &Input<'_>, a: usize, b: usize) -> QueryError {
    let dims = &schema.domain.dimensions;
    let at: Vec<String> = dims
        .iter()
        .enumerate()
        .filter_map(|(d, dim)| {
            let v = input.dim(d)?.cell(b);
            Some(crate::spec::show_value(dim.datatype, v))
        })
        .collect();
    QueryError::bad_input(
        input.dim(0).map_or("", |f| f.buf.name.as_str()),
        format!(
            "cells {a} and {b} both have coordinates ({}) and the array does not allow duplicates",
            at.join(", ")
        ),
    )
}
