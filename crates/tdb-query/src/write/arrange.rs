//! How a write's cells are laid into tiles: a dense write's rectangle over
//! the space tiles it touches, a sparse write's cells sorted into the
//! global order and cut every `capacity` cells.

use super::input::Input;
use super::WriteSpec;
use crate::{QueryError, Result, ResultLayout};
use tdb_index::dense::{InputOrder, WriteGrid};
use tdb_index::order::{cmp_coords, sort_cells, CellOrder};
use tdb_index::{DomainOps, RTree, DEFAULT_FANOUT};
use tdb_schema::{ArraySchema, NDRange, Range};

/// How a write's cells are laid into tiles.
pub(crate) enum Arrangement<'s> {
    /// A dense write: the subarray's tiles.
    Dense {
        grid: WriteGrid,
        subarray: NDRange,
        schema: &'s ArraySchema,
    },
    /// A sparse write: cells in global order, `capacity` per tile.
    Sparse {
        order: Vec<usize>,
        capacity: usize,
        mbrs: Vec<NDRange>,
        domain: NDRange,
    },
}

impl<'s> Arrangement<'s> {
    pub(crate) fn dense(
        schema: &'s ArraySchema,
        input: &Input<'_>,
        spec: &WriteSpec,
    ) -> Result<Self> {
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
        let ops = DomainOps::new(&schema.domain)?;
        if let Some(sub) = &spec.subarray {
            sub.check(schema, &ops)?;
        }
        let dims = &schema.domain.dimensions;
        let mut subarray: NDRange = Vec::with_capacity(dims.len());
        for (d, dim) in dims.iter().enumerate() {
            let given = spec.subarray.as_ref().map(|s| s.ranges(d)).unwrap_or(&[]);
            let r = match given {
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
            schema,
        })
    }

    pub(crate) fn sparse(
        schema: &ArraySchema,
        input: &Input<'_>,
        layout: ResultLayout,
    ) -> Result<Self> {
        let domain_ops = DomainOps::new(&schema.domain)?;
        let ops = domain_ops.dims();
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
        if !matches!(layout, ResultLayout::Unordered | ResultLayout::GlobalOrder) {
            return Err(QueryError::invalid(format!(
                "a sparse write takes unordered or global-order cells, not {}",
                layout.name()
            )));
        }
        let mut order: Vec<usize> = (0..input.cells).collect();
        sort_cells(
            &mut order,
            input.cells,
            &schema.domain,
            ops,
            kind,
            coord,
            |a, b| a.cmp(&b),
        );
        if layout == ResultLayout::GlobalOrder {
            // Cells said to be in the global order must already be sorted.
            if let Some(i) = order.iter().enumerate().position(|(k, &c)| k != c) {
                return Err(QueryError::bad_input(
                    &dims[0].buf.name,
                    format!("cell {i} is out of the global order the write says it keeps"),
                ));
            }
        }
        if !schema.allows_dups {
            if let Some(w) = order
                .windows(2)
                .find(|w| cmp_coords(ops, &coord, w[0], w[1], false).is_eq())
            {
                let at: Vec<String> = (0..n)
                    .map(|d| {
                        crate::spec::show_value(
                            schema.domain.dimensions[d].datatype,
                            coord(w[1], d),
                        )
                    })
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
        let cell = |i: usize| -> NDRange {
            (0..n)
                .map(|d| {
                    let v = coord(i, d);
                    Range::from_bounds(v, v, dims[d].col.is_var())
                })
                .collect()
        };
        let mbrs: Vec<NDRange> = order
            .chunks(capacity)
            .map(|tile| {
                let mut mbr = NDRange::new();
                for &i in tile {
                    domain_ops.expand(&mut mbr, &cell(i));
                }
                mbr
            })
            .collect();
        let mut domain = NDRange::new();
        for m in &mbrs {
            domain_ops.expand(&mut domain, m);
        }
        Ok(Arrangement::Sparse {
            order,
            capacity,
            mbrs,
            domain,
        })
    }

    /// The fragment's non-empty domain.
    pub(crate) fn non_empty_domain(&self) -> Option<NDRange> {
        match self {
            Arrangement::Dense { subarray, .. } => Some(subarray.clone()),
            Arrangement::Sparse { domain, order, .. } => {
                (!order.is_empty()).then(|| domain.clone())
            }
        }
    }

    /// Tiles in the fragment.
    pub(crate) fn tile_num(&self) -> u64 {
        match self {
            Arrangement::Dense { grid, .. } => grid.tile_num().unwrap_or(0),
            Arrangement::Sparse { mbrs, .. } => mbrs.len() as u64,
        }
    }

    /// Tile `t`'s cells in the cell order: input cell indices, or
    /// [`tdb_index::dense::FILL`].
    pub(crate) fn sources(&self, t: u64, out: &mut Vec<usize>) -> Result<()> {
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

    /// The positions in tile `t` whose cells the write gave, in the order
    /// TileDB's writer visits them for tile metadata; `None`: every
    /// position, in order.
    pub(crate) fn stats_order(&self, t: u64, tile_cells: usize) -> Result<Option<Vec<usize>>> {
        match self {
            Arrangement::Dense {
                subarray, schema, ..
            } => tdb_index::dense::written_cells(
                &schema.domain,
                schema.tile_order,
                schema.cell_order,
                subarray,
                t,
                tile_cells,
            )
            .map(Some)
            .ok_or_else(|| QueryError::invalid(format!("no tile {t} in the write"))),
            Arrangement::Sparse { .. } => Ok(None),
        }
    }

    /// Cells in the last tile as TileDB's footer stores them: a dense
    /// tile's whole extent, a sparse fragment's last tile's cells.
    pub(crate) fn last_tile_cell_num(&self) -> u64 {
        match self {
            Arrangement::Dense { grid, .. } => grid.tile_cells() as u64,
            Arrangement::Sparse {
                order, capacity, ..
            } => match order.len() % capacity {
                0 if order.is_empty() => 0,
                0 => *capacity as u64,
                r => r as u64,
            },
        }
    }

    /// The fragment's R-tree: the sparse tiles' MBRs, or none for dense.
    pub(crate) fn rtree(&self, schema: &ArraySchema) -> Result<RTree> {
        Ok(match self {
            Arrangement::Sparse { mbrs, .. } => {
                RTree::build(&schema.domain, mbrs.clone(), DEFAULT_FANOUT)?
            }
            Arrangement::Dense { .. } => RTree::empty(DEFAULT_FANOUT),
        })
    }
}
