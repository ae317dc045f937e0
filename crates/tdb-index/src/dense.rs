//! Dense tile arithmetic over a [`Domain`]: which tile a coordinate falls
//! in, how many tiles a rectangle touches, how many cells a tile holds.
//!
//! This follows TileDB's `Dimension::tile_idx` (integers: the difference
//! from the domain's low bound taken in the type's unsigned counterpart,
//! wrapping as C++ does; floats: `(v - lo) / extent` truncated), so tile
//! counts agree with TileDB's fragment info, which reports a dense
//! fragment's cells as whole tiles (a 7×5 write with 3×5 tiles counts 45).
//!
//! Cell arithmetic is in `i128` over values of at most 64 bits, checked:
//! a domain whose tiles or cells pass what the types hold gives `None`.

use tdb_format::{with_native, Datatype, NativeType};
use tdb_schema::{Dimension, Domain, NDRange, Range};

/// TileDB's `tile_idx` on one type.
trait TileIdx: NativeType {
    fn tile_idx(lo: Self, v: Self, extent: Self) -> Option<u64>;
}

macro_rules! int_tile_idx {
    ($($t:ty => $u:ty),*) => {$(
        impl TileIdx for $t {
            fn tile_idx(lo: Self, v: Self, extent: Self) -> Option<u64> {
                // The difference wraps into the unsigned counterpart, as
                // C++'s does; the extent is positive.
                let e = extent as $u;
                Some(u64::from((v.wrapping_sub(lo) as $u).checked_div(e)?))
            }
        }
    )*};
}
int_tile_idx!(i8 => u8, u8 => u8, i16 => u16, u16 => u16, i32 => u32, u32 => u32,
    i64 => u64, u64 => u64);

macro_rules! float_tile_idx {
    ($($t:ty),*) => {$(
        impl TileIdx for $t {
            // Float arithmetic does not panic; C++'s float-to-unsigned
            // conversion is undefined where `as` saturates.
            #[allow(clippy::arithmetic_side_effects)]
            fn tile_idx(lo: Self, v: Self, extent: Self) -> Option<u64> {
                Some(((v - lo) / extent) as u64)
            }
        }
    )*};
}
float_tile_idx!(f32, f64);

/// The value of `dim`'s `(lo, v, extent)` as TileDB's tile index. `None`
/// when the datatype is not a number or a value has the wrong size.
fn index_of(datatype: Datatype, lo: &[u8], v: &[u8], extent: &[u8]) -> Option<u64> {
    fn typed<T: TileIdx>(lo: &[u8], v: &[u8], extent: &[u8]) -> Option<u64> {
        if [lo, v, extent].iter().any(|b| b.len() != T::SIZE) {
            return None;
        }
        T::tile_idx(T::read_le(lo), T::read_le(v), T::read_le(extent))
    }
    with_native!(datatype.native()?, T => typed::<T>(lo, v, extent))
}

/// The index of the tile of `dim` that holds the value `v` (its
/// little-endian bytes), counted from the domain's low bound. `None` for
/// var-sized dimensions, dimensions without a tile extent, or bad sizes.
pub fn tile_index(dim: &Dimension, v: &[u8]) -> Option<u64> {
    let (lo, _) = dim.bounds()?;
    let extent = dim.tile_extent.as_deref()?;
    index_of(dim.datatype, lo, v, extent)
}

/// How many tiles of `dim` the range `r` touches: TileDB's
/// `Dimension::tile_num` (1 for a dimension without a tile extent). `None`
/// for var-sized dimensions or malformed ranges.
pub fn dim_tile_count(dim: &Dimension, r: &Range) -> Option<u64> {
    let Range::Fixed(_) = r else { return None };
    if dim.is_var() {
        return None;
    }
    if dim.tile_extent.is_none() {
        return Some(1);
    }
    let (lo, hi) = r.bounds();
    let first = tile_index(dim, lo)?;
    let last = tile_index(dim, hi)?;
    last.checked_sub(first)?.checked_add(1)
}

/// How many tiles the rectangle `nd` touches: the product over the
/// dimensions of [`dim_tile_count`] (TileDB's `Domain::tile_num`, which it
/// applies to a dense fragment's non-empty domain). `None` on overflow,
/// var-sized dimensions or a rectangle of the wrong rank.
pub fn tile_count(domain: &Domain, nd: &NDRange) -> Option<u64> {
    if nd.len() != domain.dimensions.len() {
        return None;
    }
    domain
        .dimensions
        .iter()
        .zip(nd)
        .try_fold(1u64, |acc, (dim, r)| {
            acc.checked_mul(dim_tile_count(dim, r)?)
        })
}

/// Cells in one dense tile: the product of the tile extents (TileDB's
/// `Domain::cell_num_per_tile`, defined for integer domains). `None` when a
/// dimension is not an integer or has no extent, or on overflow.
pub fn cell_num_per_tile(domain: &Domain) -> Option<u64> {
    domain.dimensions.iter().try_fold(1u64, |acc, dim| {
        if dim.is_var() {
            return None;
        }
        let extent = int_value(dim.datatype, dim.tile_extent.as_deref()?)?;
        acc.checked_mul(u64::try_from(extent).ok()?)
    })
}

/// The number of cells TileDB's fragment info reports for a dense fragment
/// whose non-empty domain is `nd`: whole tiles touched times cells per
/// tile as TileDB counts them ([`tiledb_cell_num_per_tile`]).
pub fn dense_cell_num(domain: &Domain, nd: &NDRange) -> Option<u64> {
    tile_count(domain, nd)?.checked_mul(tiledb_cell_num_per_tile(domain)?)
}

/// Cells in one dense tile as TileDB counts them for fragment info and
/// consolidation (`Domain::compute_cell_num_per_tile`): the running
/// product is passed back through the dimensions' type before each
/// multiplication (`Dimension::tile_extent_mult<T>` takes it as a `T`), so
/// it wraps at the type's width: INT8 extents 16, 28 and 7 make 1,344
/// cells, not 3,136 (TileDB 2.16 wrote tiles of 1,344 cells for such a
/// schema: random legacy case 634). The product itself is taken as C++
/// does: in `int` for types narrower than 32 bits, else in the unsigned
/// type. Equal to [`cell_num_per_tile`] wherever nothing wraps.
pub fn tiledb_cell_num_per_tile(domain: &Domain) -> Option<u64> {
    domain.dimensions.iter().try_fold(1u64, |acc, dim| {
        if dim.is_var() {
            return None;
        }
        let width = dim.datatype.size();
        let extent = int_value(dim.datatype, dim.tile_extent.as_deref()?)?;
        let bits = u32::try_from(width.checked_mul(8)?).ok()?;
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits).wrapping_sub(1)
        };
        let (a, e) = (acc & mask, (extent as u64) & mask);
        Some(match bits {
            // Promoted to int: a product past i32::MAX is C++'s overflow;
            // it wraps there and widens with its sign.
            8 | 16 => i64::from(a.wrapping_mul(e) as u32 as i32) as u64,
            32 => a.wrapping_mul(e) & mask,
            _ => a.wrapping_mul(e),
        })
    })
}

/// The number of cells in the rectangle `nd` of an integer domain
/// (TileDB's `Domain::cell_num`), saturating at `u64::MAX` as TileDB's
/// does. `None` for non-integer dimensions or a rectangle of the wrong rank.
pub fn cell_count(domain: &Domain, nd: &NDRange) -> Option<u64> {
    if nd.len() != domain.dimensions.len() {
        return None;
    }
    domain
        .dimensions
        .iter()
        .zip(nd)
        .try_fold(1u64, |acc, (dim, r)| {
            let (lo, hi) = int_range(dim, r)?;
            let n = if hi < lo {
                0
            } else {
                count(lo, hi).unwrap_or(u64::MAX)
            };
            Some(acc.saturating_mul(n))
        })
}

/// `nd` grown to the bounds of the tiles it touches (TileDB's
/// `expand_to_tiles` without a current domain): what a dense fragment whose
/// non-empty domain is `nd` stores tiles for. `None` for non-integer
/// dimensions, a missing extent, or tiles past the datatype's range.
pub fn expand_to_tiles(domain: &Domain, nd: &NDRange) -> Option<NDRange> {
    if nd.len() != domain.dimensions.len() {
        return None;
    }
    domain
        .dimensions
        .iter()
        .zip(nd)
        .map(|(dim, r)| expand_range_to_tiles(dim, r))
        .collect()
}

/// `r` on `dim` widened to the whole tiles it touches; `None` where `dim`
/// has no integer tiles or they pass its datatype's range.
pub fn expand_range_to_tiles(dim: &Dimension, r: &Range) -> Option<Range> {
    let (origin, extent) = origin_and_extent(dim)?;
    let (lo, hi) = int_range(dim, r)?;
    let tile_start = |v: i128| {
        let k = tile_of(v, origin, extent)?;
        origin.checked_add(k.checked_mul(extent)?)
    };
    let high = tile_start(hi)?.checked_add(extent)?.checked_sub(1)?;
    int_range_of(dim, tile_start(lo)?, high)
}

/// Values in `[lo, hi]`: `hi - lo + 1` (`None` when it is not a positive
/// `u64`).
fn count(lo: i128, hi: i128) -> Option<u64> {
    u64::try_from(hi.checked_sub(lo)?.checked_add(1)?).ok()
}

/// One integer dimension's value as `i128` (every dense dimension type
/// fits), for cell arithmetic. `None` for non-integer types or bad sizes.
pub fn int_value(datatype: Datatype, bytes: &[u8]) -> Option<i128> {
    match tdb_format::Scalar::decode(datatype, bytes)? {
        tdb_format::Scalar::Int(v) => Some(i128::from(v)),
        tdb_format::Scalar::UInt(v) => Some(i128::from(v)),
        _ => None,
    }
}

/// Appends `v` as a little-endian value of integer `datatype` (the
/// inverse of [`int_value`] for values the datatype holds); `false`, with
/// nothing appended, for other datatypes.
pub fn push_int(datatype: Datatype, v: i128, out: &mut Vec<u8>) -> bool {
    let integer = datatype.is_integer() || datatype.is_datetime() || datatype.is_time();
    let bytes = v.to_le_bytes();
    match bytes.get(..datatype.size() as usize) {
        Some(b) if integer => {
            out.extend_from_slice(b);
            true
        }
        _ => false,
    }
}

/// The range `[lo, hi]` of an integer dimension (the inverse of
/// [`int_range`]); `None` for non-integer dimensions.
pub fn int_range_of(dim: &Dimension, lo: i128, hi: i128) -> Option<Range> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    (push_int(dim.datatype, lo, &mut a) && push_int(dim.datatype, hi, &mut b))
        .then(|| Range::from_bounds(&a, &b, false))
}

/// A range of an integer dimension as `i128` bounds. `None` for non-integer
/// types or bad sizes.
pub fn int_range(dim: &Dimension, r: &Range) -> Option<(i128, i128)> {
    let (lo, hi) = r.bounds();
    Some((int_value(dim.datatype, lo)?, int_value(dim.datatype, hi)?))
}

/// A dense dimension's domain low bound and tile extent as integers.
/// `None` for non-integer dimensions or a missing or non-positive extent.
pub fn origin_and_extent(dim: &Dimension) -> Option<(i128, i128)> {
    let lo = int_value(dim.datatype, dim.bounds()?.0)?;
    let extent = int_value(dim.datatype, dim.tile_extent.as_deref()?)?;
    (extent > 0).then_some((lo, extent))
}

/// Where a dense fragment whose non-empty domain is `ned` stores the cell
/// at `coords`: its tile (numbered in `tile_order` over the tiles `ned`
/// touches, as the fragment stores them) and its position in the tile's
/// `cell_order`. The inverse of [`written_cells`]. `None` outside `ned`,
/// or for domains that are not integer or lack tile extents. For many
/// cells of one fragment, build its [`FragmentGrid`] once.
pub fn cell_position(
    domain: &Domain,
    tile_order: tdb_format::Layout,
    cell_order: tdb_format::Layout,
    ned: &NDRange,
    coords: &[i128],
) -> Option<(u64, u64)> {
    FragmentGrid::new(domain, tile_order, cell_order, ned)?.position(coords)
}

/// Dimension indices, the fastest-varying first: the first dimension in
/// column-major order, the last in row-major.
fn fastest_first(n: usize, col: bool) -> Vec<usize> {
    if col {
        (0..n).collect()
    } else {
        (0..n).rev().collect()
    }
}

/// Steps the odometer `at` over the box `[from, to]` along the dimensions
/// `order` gives, the first turning fastest; `false` once every one has
/// turned over (or an index is out of range).
fn next_row(
    at: &mut [i128],
    from: &[i128],
    to: &[i128],
    order: impl IntoIterator<Item = usize>,
) -> bool {
    for d in order {
        let (Some(a), Some(&lo), Some(&hi)) = (at.get_mut(d), from.get(d), to.get(d)) else {
            return false;
        };
        if *a < hi {
            // Below `hi`, so one more fits.
            *a = a.saturating_add(1);
            return true;
        }
        *a = lo;
    }
    false
}

/// A dense fragment's tile grid, worked out once: per dimension the
/// domain's origin and tile extent and the fragment's non-empty domain, so
/// [`FragmentGrid::position`] is arithmetic alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FragmentGrid {
    /// Per dimension: origin, extent, non-empty low and high bounds, the
    /// first tile the fragment touches and how many it spans.
    dims: Vec<GridDim>,
    tile_col: bool,
    cell_col: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GridDim {
    origin: i128,
    extent: i128,
    lo: i128,
    hi: i128,
    first: i128,
    span: i128,
}

impl FragmentGrid {
    /// The grid of a fragment with non-empty domain `ned`; `None` for
    /// domains that are not integer or lack tile extents.
    pub fn new(
        domain: &Domain,
        tile_order: tdb_format::Layout,
        cell_order: tdb_format::Layout,
        ned: &NDRange,
    ) -> Option<Self> {
        if ned.len() != domain.dimensions.len() {
            return None;
        }
        let dims = domain
            .dimensions
            .iter()
            .zip(ned)
            .map(|(dim, r)| {
                let (origin, extent) = origin_and_extent(dim)?;
                let (lo, hi) = int_range(dim, r)?;
                let first = tile_of(lo, origin, extent)?;
                Some(GridDim {
                    origin,
                    extent,
                    lo,
                    hi,
                    first,
                    span: tile_of(hi, origin, extent)?
                        .checked_sub(first)?
                        .checked_add(1)?,
                })
            })
            .collect::<Option<_>>()?;
        Some(FragmentGrid {
            dims,
            tile_col: tile_order == tdb_format::Layout::ColMajor,
            cell_col: cell_order == tdb_format::Layout::ColMajor,
        })
    }

    /// Tile `t`'s part of the rectangle (per dimension, inclusive) and the
    /// tile's low corner.
    fn tile_box(&self, t: u64) -> Option<(Vec<i128>, Vec<i128>, Vec<i128>)> {
        let dims = &self.dims;
        if dims.iter().any(|g| g.span <= 0 || g.hi < g.lo) {
            return None;
        }
        // `t` in the mixed radix of the spans, the fastest dimension first.
        let mut rest = i128::from(t);
        let mut corner = vec![0i128; dims.len()];
        for d in fastest_first(dims.len(), self.tile_col) {
            let g = dims.get(d)?;
            let k = g.first.checked_add(rest.checked_rem(g.span)?)?;
            *corner.get_mut(d)? = g.origin.checked_add(k.checked_mul(g.extent)?)?;
            rest = rest.checked_div(g.span)?;
        }
        if rest != 0 {
            return None;
        }
        let from = dims
            .iter()
            .zip(&corner)
            .map(|(g, &c)| g.lo.max(c))
            .collect();
        let to = dims
            .iter()
            .zip(&corner)
            .map(|(g, &c)| Some(g.hi.min(c.checked_add(g.extent)?.checked_sub(1)?)))
            .collect::<Option<_>>()?;
        Some((from, to, corner))
    }

    /// Tile `t`'s cells as coordinates: where it lies, how its cells are
    /// numbered, and its part inside the non-empty domain (the rest holds
    /// fill). For a read that finds where a run of a tile's cells goes in
    /// its result order.
    pub fn tile_cells(&self, t: u64) -> Option<TileCells> {
        let (from, to, corner) = self.tile_box(t)?;
        let last = (corner.iter().zip(&self.dims))
            .map(|(&c, g)| c.checked_add(g.extent)?.checked_sub(1))
            .collect::<Option<_>>()?;
        Some(TileCells {
            last,
            extent: self.dims.iter().map(|g| g.extent).collect(),
            order: fastest_first(self.dims.len(), self.cell_col),
            corner,
            from,
            to,
        })
    }

    /// Whether [`FragmentGrid::written_cells`] of tile `t` would be every
    /// position in order: the rectangle holds the whole tile and its cells
    /// are stored row-major (or it has one dimension). Spares building
    /// the list for the common case.
    pub fn writes_tile_in_order(&self, t: u64) -> bool {
        let Some((from, to, corner)) = self.tile_box(t) else {
            return false;
        };
        (!self.cell_col || self.dims.len() == 1)
            && self.dims.iter().zip(from.iter().zip(&to)).zip(&corner).all(
                |((g, (&lo, &hi)), &c)| lo == c && count(c, hi) == u64::try_from(g.extent).ok(),
            )
    }

    /// The cells of tile `t` inside the non-empty domain (the rest is
    /// fill), as positions in the tile's cell order, listed in row-major
    /// order of their coordinates: see [`written_cells`].
    pub fn written_cells(&self, t: u64, tile_cells: usize) -> Option<Vec<usize>> {
        let dims = &self.dims;
        let (from, to, corner) = self.tile_box(t)?;
        // Strides of a cell's offset from the tile's corner, by cell order.
        let mut stride = vec![0usize; dims.len()];
        let mut acc = 1usize;
        for d in fastest_first(dims.len(), self.cell_col) {
            *stride.get_mut(d)? = acc;
            acc = acc.checked_mul(usize::try_from(dims.get(d)?.extent).ok()?)?;
        }
        if acc != tile_cells {
            return None;
        }
        if from.iter().zip(&to).any(|(lo, hi)| lo > hi) {
            return Some(Vec::new());
        }
        // Row by row along the last dimension, the fastest of a row-major
        // walk; the other dimensions count like an odometer.
        let (&last_from, &last_to, &step) = (from.last()?, to.last()?, stride.last()?);
        let run = usize::try_from(count(last_from, last_to)?).ok()?;
        let others = dims.len().checked_sub(1)?;
        let mut out = Vec::new();
        let mut at = from.clone();
        loop {
            let pos =
                at.iter()
                    .zip(&corner)
                    .zip(&stride)
                    .try_fold(0usize, |p, ((&a, &c), &s)| {
                        let off = usize::try_from(a.checked_sub(c)?).ok()?;
                        p.checked_add(off.checked_mul(s)?)
                    })?;
            let end = pos.checked_add(run.checked_sub(1)?.checked_mul(step)?)?;
            out.extend((pos..=end).step_by(step.max(1)));
            if !next_row(&mut at, &from, &to, (0..others).rev()) {
                return Some(out);
            }
        }
    }

    /// The fragment's tiles that `ranges` (per dimension, inclusive
    /// integer ranges in any order, overlapping or not) touch, numbered as
    /// the fragment stores them, in that order. Costs what those tiles
    /// number, whatever the fragment's size: a read of a few cells of a
    /// large fragment need not go over all its tiles. `None` without one
    /// list of ranges per dimension, or for a grid too large to number.
    pub fn tiles_touched(&self, ranges: &[Vec<(i128, i128)>]) -> Option<TilesTouched> {
        if ranges.len() != self.dims.len() {
            return None;
        }
        // Per dimension, the tiles (counted from the fragment's first)
        // some range reaches within the fragment, sorted and each once.
        let touched = (self.dims.iter().zip(ranges))
            .map(|(g, rs)| {
                let mut ks: Vec<u64> = Vec::new();
                for &(lo, hi) in rs {
                    let (lo, hi) = (lo.max(g.lo), hi.min(g.hi));
                    if lo > hi {
                        continue;
                    }
                    let k = |v: i128| {
                        let tile = tile_of(v, g.origin, g.extent)?;
                        u64::try_from(tile.checked_sub(g.first)?).ok()
                    };
                    ks.extend(k(lo)?..=k(hi)?);
                }
                ks.sort_unstable();
                ks.dedup();
                Some(ks)
            })
            .collect::<Option<Vec<_>>>()?;
        let mut strides = vec![0u64; self.dims.len()];
        let mut acc = 1u64;
        for d in fastest_first(self.dims.len(), self.tile_col) {
            *strides.get_mut(d)? = acc;
            acc = acc.checked_mul(u64::try_from(self.dims.get(d)?.span).ok()?)?;
        }
        let done = touched.iter().any(Vec::is_empty);
        Some(TilesTouched {
            at: vec![0; touched.len()],
            order: fastest_first(touched.len(), self.tile_col),
            touched,
            strides,
            done,
        })
    }

    /// The fragment's non-empty domain, per dimension, as integers.
    pub fn bounds(&self) -> impl Iterator<Item = (i128, i128)> + '_ {
        self.dims.iter().map(|d| (d.lo, d.hi))
    }

    /// Per dimension, the domain's tile origin and extent (what
    /// [`origin_and_extent`] decodes from the schema, kept).
    pub fn tiling(&self) -> impl Iterator<Item = (i128, i128)> + '_ {
        self.dims.iter().map(|d| (d.origin, d.extent))
    }

    /// See [`cell_position`]. (A dense read asks this for every slab it
    /// plans, one row of a tile: W2's 4096² read 65,536 times.)
    pub fn position(&self, coords: &[i128]) -> Option<(u64, u64)> {
        if coords.len() != self.dims.len() {
            return None;
        }
        // Per dimension: the tile's index in the grid and the cell's in
        // the tile.
        let mut at = [(0i128, 0i128); 4];
        let mut many = Vec::new();
        let parts: &mut [(i128, i128)] = match at.get_mut(..coords.len()) {
            Some(p) => p,
            None => {
                many.resize(coords.len(), (0, 0));
                &mut many
            }
        };
        for ((d, &c), part) in self.dims.iter().zip(coords).zip(parts.iter_mut()) {
            if c < d.lo || c > d.hi {
                return None;
            }
            let (k, r) = div_rem_euclid(c.checked_sub(d.origin)?, d.extent)?;
            *part = (k.checked_sub(d.first)?, r);
        }
        // A position in a grid: the fastest-varying dimension last
        // (row-major) or first (col-major).
        let linear = |col: bool, pick: fn(&GridDim, (i128, i128)) -> (i128, i128)| {
            let fold = |acc: i128, (d, &p): (&GridDim, &(i128, i128))| {
                let (pos, span) = pick(d, p);
                acc.checked_mul(span)?.checked_add(pos)
            };
            let idx = match col {
                true => self.dims.iter().zip(parts.iter()).rev().try_fold(0, fold),
                false => self.dims.iter().zip(parts.iter()).try_fold(0, fold),
            };
            u64::try_from(idx?).ok()
        };
        let tile = linear(self.tile_col, |d, (k, _)| (k, d.span))?;
        let cell = linear(self.cell_col, |d, (_, r)| (r, d.extent))?;
        Some((tile, cell))
    }
}

/// One dense tile's cells as coordinates ([`FragmentGrid::tile_cells`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TileCells {
    /// The tile's low corner.
    pub corner: Vec<i128>,
    /// Per dimension, the tile's extent.
    pub extent: Vec<i128>,
    /// The tile's high corner.
    pub last: Vec<i128>,
    /// The part of the tile inside the fragment's non-empty domain: its
    /// low corner and its high one.
    pub from: Vec<i128>,
    /// See `from`.
    pub to: Vec<i128>,
    /// Dimensions, the fastest-varying in the cell order first.
    order: Vec<usize>,
}

impl TileCells {
    /// The coordinates of the tile's cell at `pos` (in its cell order)
    /// into `at`; `None` past the tile.
    pub fn coords(&self, pos: u64, at: &mut [i128]) -> Option<()> {
        let mut rest = i128::from(pos);
        for &d in &self.order {
            let e = *self.extent.get(d)?;
            let (q, r) = div_rem_euclid(rest, e)?;
            *at.get_mut(d)? = self.corner.get(d)?.checked_add(r)?;
            rest = q;
        }
        (rest == 0).then_some(())
    }

    /// How far apart in the cell order two cells are that differ by one
    /// along dimension `d`: the extents of the dimensions faster than it.
    pub fn stride(&self, d: usize) -> Option<i128> {
        let mut stride = 1i128;
        for &e in &self.order {
            if e == d {
                return Some(stride);
            }
            stride = stride.checked_mul(*self.extent.get(e)?)?;
        }
        None
    }

    /// Dimensions, the fastest-varying in the cell order first.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// The position of the cell at `at` in the cell order; `None` outside
    /// the tile.
    pub fn position(&self, at: &[i128]) -> Option<u64> {
        let mut pos = 0i128;
        for &d in &self.order {
            let off = at.get(d)?.checked_sub(*self.corner.get(d)?)?;
            if off < 0 || off >= *self.extent.get(d)? {
                return None;
            }
            pos = pos.checked_add(off.checked_mul(self.stride(d)?)?)?;
        }
        u64::try_from(pos).ok()
    }

    /// The box from `lo` to `hi` (inclusive, inside the tile) as a tile of
    /// its own in the same cell order: a cell's position there is its
    /// place among the box's cells laid out one after another, as a read
    /// that holds only them keeps them. `None` where the box leaves the
    /// tile or is empty.
    pub fn sub_box(&self, lo: &[i128], hi: &[i128]) -> Option<TileCells> {
        let n = self.corner.len();
        if lo.len() != n || hi.len() != n {
            return None;
        }
        let mut extent = Vec::with_capacity(n);
        for d in 0..n {
            let (l, h) = (*lo.get(d)?, *hi.get(d)?);
            if l > h || l < *self.corner.get(d)? || h > *self.last.get(d)? {
                return None;
            }
            extent.push(h.checked_sub(l)?.checked_add(1)?);
        }
        let clip = |a: &[i128], b: &[i128], f: fn(i128, i128) -> i128| -> Vec<i128> {
            a.iter().zip(b).map(|(x, y)| f(*x, *y)).collect()
        };
        Some(TileCells {
            corner: lo.to_vec(),
            extent,
            last: hi.to_vec(),
            from: clip(&self.from, lo, i128::max),
            to: clip(&self.to, hi, i128::min),
            order: self.order.clone(),
        })
    }

    /// Whether `at` lies inside the fragment's non-empty domain.
    pub fn written(&self, at: &[i128]) -> bool {
        at.iter()
            .zip(self.from.iter().zip(&self.to))
            .all(|(v, (lo, hi))| lo <= v && v <= hi)
    }
}

/// The space tile holding integer coordinate `v` along a dimension whose
/// tiles start at `origin` and span `extent` ([`origin_and_extent`]),
/// counted from the tile at `origin` (negative below it). `None` on
/// overflow or a zero extent. The one place the tile arithmetic divides,
/// in 64 bits where it can ([`div_rem_euclid`]).
pub fn tile_of(v: i128, origin: i128, extent: i128) -> Option<i128> {
    div_rem_euclid(v.checked_sub(origin)?, extent).map(|(k, _)| k)
}

/// `a.div_euclid(b)` and `a.rem_euclid(b)`, in 64-bit arithmetic where
/// both fit (as domains and extents do but for the widest types): 128-bit
/// division is a library call, several times slower. `None` where `b` is 0.
pub fn div_rem_euclid(a: i128, b: i128) -> Option<(i128, i128)> {
    if let (Ok(a), Ok(b)) = (i64::try_from(a), i64::try_from(b)) {
        if let (Some(q), Some(r)) = (a.checked_div_euclid(b), a.checked_rem_euclid(b)) {
            return Some((i128::from(q), i128::from(r)));
        }
    }
    Some((a.checked_div_euclid(b)?, a.checked_rem_euclid(b)?))
}

/// The tiles of a fragment some ranges touch: see
/// [`FragmentGrid::tiles_touched`].
#[derive(Debug, Clone)]
pub struct TilesTouched {
    /// Per dimension, the tiles touched along it.
    touched: Vec<Vec<u64>>,
    /// Per dimension, how far apart its neighbouring tiles are numbered.
    strides: Vec<u64>,
    /// Dimensions, the fastest-varying in the tile order first.
    order: Vec<usize>,
    /// Per dimension, the index into `touched` of the next tile.
    at: Vec<usize>,
    done: bool,
}

impl Iterator for TilesTouched {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.done {
            return None;
        }
        // The strides number every tile of the grid within u64, so no
        // sum of a touched tile's terms overflows.
        let t = (self.touched.iter().zip(&self.at).zip(&self.strides))
            .map(|((ks, &i), &s)| ks.get(i).copied().unwrap_or(0).saturating_mul(s))
            .fold(0u64, u64::saturating_add);
        self.done = true;
        for &d in &self.order {
            let (Some(i), Some(ks)) = (self.at.get_mut(d), self.touched.get(d)) else {
                break;
            };
            *i = i.saturating_add(1);
            if *i < ks.len() {
                self.done = false;
                break;
            }
            *i = 0;
        }
        Some(t)
    }
}

/// The cells of tile `tile` of a dense fragment whose non-empty domain is
/// `ned` that lie inside it (the cells the write gave; the others hold
/// fill values), as positions in the tile's `cell_order`, listed in
/// row-major order of their coordinates: the order TileDB's dense writer
/// visits them when it computes tile metadata. Tiles are numbered in
/// `tile_order` over the tiles `ned` touches, as the fragment stores them.
/// `tile_cells` is the number of cells the tile holds (its data's size over
/// the cell size): it must equal the tile extents' product, which bounds
/// what this allocates. `None` for domains that are not integer or have no
/// tile extents, a tile beyond the fragment's, or a wrong `tile_cells`.
pub fn written_cells(
    domain: &Domain,
    tile_order: tdb_format::Layout,
    cell_order: tdb_format::Layout,
    ned: &NDRange,
    tile: u64,
    tile_cells: usize,
) -> Option<Vec<usize>> {
    FragmentGrid::new(domain, tile_order, cell_order, ned)?.written_cells(tile, tile_cells)
}

/// The order of a dense write's input cells over its subarray.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputOrder {
    /// Row-major over the subarray.
    RowMajor,
    /// Column-major over the subarray.
    ColMajor,
}

/// Where a dense write of one rectangle puts its input cells: the tiles
/// the rectangle touches (numbered in the tile order, as the fragment
/// stores them) and, for each cell position of a tile in the cell order,
/// the input cell it holds or none (fill: the tile reaches beyond the
/// rectangle).
#[derive(Debug, Clone)]
pub struct WriteGrid {
    grid: FragmentGrid,
    input: InputOrder,
    tile_cells: usize,
}

/// A tile position that holds no input cell.
pub const FILL: usize = usize::MAX;

impl WriteGrid {
    /// The grid of a write of `subarray` whose input is in `input` order.
    /// `None` for domains that are not integer or lack tile extents, or
    /// tiles too large to address.
    pub fn new(
        domain: &Domain,
        tile_order: tdb_format::Layout,
        cell_order: tdb_format::Layout,
        subarray: &NDRange,
        input: InputOrder,
    ) -> Option<Self> {
        let grid = FragmentGrid::new(domain, tile_order, cell_order, subarray)?;
        let tile_cells = grid.dims.iter().try_fold(1usize, |acc, d| {
            acc.checked_mul(usize::try_from(d.extent).ok()?)
        })?;
        Some(WriteGrid {
            grid,
            input,
            tile_cells,
        })
    }

    /// Tile `t`'s written cells in TileDB's metadata order: see
    /// [`FragmentGrid::written_cells`].
    pub fn written_cells(&self, t: u64) -> Option<Vec<usize>> {
        self.grid.written_cells(t, self.tile_cells)
    }

    /// See [`FragmentGrid::writes_tile_in_order`].
    pub fn writes_tile_in_order(&self, t: u64) -> bool {
        self.grid.writes_tile_in_order(t)
    }

    /// Whether the rectangle covers whole space tiles only (each range
    /// starts and ends on tile bounds), as TileDB's global-order dense
    /// writes require.
    pub fn tile_aligned(&self) -> bool {
        let on_bound = |v: Option<i128>, d: &GridDim| {
            v.and_then(|v| v.checked_sub(d.origin)?.checked_rem_euclid(d.extent)) == Some(0)
        };
        self.grid
            .dims
            .iter()
            .all(|d| on_bound(Some(d.lo), d) && on_bound(d.hi.checked_add(1), d))
    }

    /// Tiles the rectangle touches.
    pub fn tile_num(&self) -> Option<u64> {
        self.grid
            .dims
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(u64::try_from(d.span).ok()?))
    }

    /// Cells per tile.
    pub fn tile_cells(&self) -> usize {
        self.tile_cells
    }

    /// Input cells: the rectangle's.
    pub fn input_cells(&self) -> Option<u64> {
        self.grid
            .dims
            .iter()
            .try_fold(1u64, |acc, d| acc.checked_mul(count(d.lo, d.hi)?))
    }

    /// Fills `out` with tile `t`'s cells in the cell order: the input cell
    /// each holds, or [`FILL`]. `None` for a tile beyond the grid.
    pub fn sources(&self, t: u64, out: &mut Vec<usize>) -> Option<()> {
        let (from, to, corner) = self.grid.tile_box(t)?;
        let dims = &self.grid.dims;
        let n = dims.len();
        out.clear();
        out.resize(self.tile_cells, FILL);
        // Cell order's and input order's strides, fastest dimension first.
        let strides = |col: bool, width: &dyn Fn(&GridDim) -> Option<i128>| {
            let mut stride = vec![0i128; n];
            let mut acc = 1i128;
            for d in fastest_first(n, col) {
                *stride.get_mut(d)? = acc;
                acc = acc.checked_mul(width(dims.get(d)?)?)?;
            }
            Some(stride)
        };
        let cell_dims = fastest_first(n, self.grid.cell_col);
        let cell_stride = strides(self.grid.cell_col, &|d| Some(d.extent))?;
        let in_stride = strides(self.input == InputOrder::ColMajor, &|d| {
            d.hi.checked_sub(d.lo)?.checked_add(1)
        })?;
        // Walk the box in the cell order, a run along the fastest
        // dimension at a time.
        let usize_of = |v: i128| usize::try_from(v).ok();
        let fast = *cell_dims.first()?;
        let run = usize::try_from(count(*from.get(fast)?, *to.get(fast)?)?).ok()?;
        let pos_step = usize_of(*cell_stride.get(fast)?)?.max(1);
        let src_step = usize_of(*in_stride.get(fast)?)?.max(1);
        let last = run.checked_sub(1)?;
        let mut at = from.clone();
        loop {
            let offset = |base: &dyn Fn(usize) -> Option<i128>, stride: &[i128]| {
                at.iter()
                    .zip(stride)
                    .enumerate()
                    .try_fold(0i128, |acc, (d, (&a, &s))| {
                        acc.checked_add(a.checked_sub(base(d)?)?.checked_mul(s)?)
                    })
                    .and_then(usize_of)
            };
            let pos = offset(&|d| corner.get(d).copied(), &cell_stride)?;
            let src = offset(&|d| dims.get(d).map(|g| g.lo), &in_stride)?;
            // The run's last cell is checked; the steps are positive, so
            // every cell before it is in range too.
            let last_pos = pos.checked_add(last.checked_mul(pos_step)?)?;
            let last_src = src.checked_add(last.checked_mul(src_step)?)?;
            let cells = out.get_mut(pos..=last_pos)?.iter_mut().step_by(pos_step);
            for (o, s) in cells.zip((src..=last_src).step_by(src_step)) {
                *o = s;
            }
            if !next_row(&mut at, &from, &to, cell_dims.iter().skip(1).copied()) {
                return Some(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 64-bit path and the 128-bit one agree, at the edges of both.
    #[test]
    fn division_is_euclids_in_either_width() {
        let big = i128::from(u64::MAX) * 3;
        let values = [
            0,
            1,
            -1,
            7,
            -7,
            255,
            -256,
            i64::MAX.into(),
            i64::MIN.into(),
            big,
            -big,
        ];
        for a in values {
            for b in [1, 2, 7, -7, 256, -1, i64::MAX.into(), big] {
                let want = Some((a.div_euclid(b), a.rem_euclid(b)));
                assert_eq!(div_rem_euclid(a, b), want, "{a} / {b}");
            }
            assert_eq!(div_rem_euclid(a, 0), None);
        }
    }

    #[test]
    fn tiles_count_from_the_origin_and_round_down() {
        // Tiles of 10 from -5: [-5, 4] is tile 0, [5, 14] tile 1, and
        // values below the origin fall in negative tiles, not tile 0.
        assert_eq!(tile_of(-5, -5, 10), Some(0));
        assert_eq!(tile_of(4, -5, 10), Some(0));
        assert_eq!(tile_of(5, -5, 10), Some(1));
        assert_eq!(tile_of(-6, -5, 10), Some(-1));
        assert_eq!(tile_of(-15, -5, 10), Some(-1));
        assert_eq!(tile_of(-16, -5, 10), Some(-2));
        // The widest domains (uint64 from 0, int64 from its least) need
        // no 128-bit division yet answer the same.
        let (max, min) = (i128::from(u64::MAX), i128::from(i64::MIN));
        assert_eq!(tile_of(max, 0, 1 << 20), Some(max >> 20));
        assert_eq!(tile_of(i128::from(i64::MAX), min, 1), Some(max));
        assert_eq!(tile_of(3, 0, 0), None);
        assert_eq!(tile_of(i128::MIN, 1, 10), None);
    }

    #[test]
    fn ints_go_back_to_the_bytes_they_came_from() {
        for (dt, bytes) in [
            (Datatype::Int8, vec![0x80]),
            (Datatype::UInt16, vec![0xff, 0xff]),
            (Datatype::Int64, (-7i64).to_le_bytes().to_vec()),
            (Datatype::UInt64, u64::MAX.to_le_bytes().to_vec()),
            (Datatype::DatetimeMs, 12i64.to_le_bytes().to_vec()),
        ] {
            let v = int_value(dt, &bytes).unwrap();
            let mut out = vec![9];
            assert!(push_int(dt, v, &mut out), "{dt:?}");
            assert_eq!(&out[1..], &bytes[..], "{dt:?}");
        }
        let mut out = Vec::new();
        assert!(!push_int(Datatype::Float64, 1, &mut out));
        assert!(!push_int(Datatype::StringAscii, 1, &mut out));
        assert!(out.is_empty());
    }
    use tdb_format::{ArrayType, Layout};
    use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};

    fn domain(dims: &[(i32, i32, i32)]) -> Domain {
        let mut b = ArraySchema::builder(ArrayType::Dense);
        for (i, &(lo, hi, e)) in dims.iter().enumerate() {
            b = b.dimension(DimensionBuilder::range(format!("d{i}"), lo..=hi).tile_extent(e));
        }
        b.attribute(AttributeBuilder::new("a", Datatype::Int32))
            .build()
            .unwrap()
            .domain
    }

    fn range(lo: i32, hi: i32) -> Range {
        Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false)
    }

    #[test]
    fn tiledb_counts_a_tiles_cells_wrapping_at_the_dimensions_width() {
        // INT8 extents 16, 28, 7 (random legacy case 634, TileDB 2.16.3):
        // 16 * 28 = 448 passes back through int8 as 192; 192 * 7 = 1,344.
        let int8 = ArraySchema::builder(ArrayType::Dense)
            .dimension(DimensionBuilder::range("a", 53i8..=72).tile_extent(16i8))
            .dimension(DimensionBuilder::range("b", 0i8..=34).tile_extent(28i8))
            .dimension(DimensionBuilder::range("c", 98i8..=107).tile_extent(7i8))
            .attribute(AttributeBuilder::new("x", Datatype::Int32))
            .build()
            .unwrap()
            .domain;
        assert_eq!(cell_num_per_tile(&int8), Some(3136));
        assert_eq!(tiledb_cell_num_per_tile(&int8), Some(1344));
        let nd = vec![
            Range::from_bounds(&[59u8], &[72u8], false),
            Range::from_bounds(&[34u8], &[34u8], false),
            Range::from_bounds(&[107u8], &[107u8], false),
        ];
        assert_eq!(dense_cell_num(&int8, &nd), Some(2688));
        // Nothing wraps: the plain product.
        let int32 = domain(&[(0, 99, 10), (0, 99, 30), (0, 9, 7)]);
        assert_eq!(tiledb_cell_num_per_tile(&int32), cell_num_per_tile(&int32));
    }

    #[test]
    fn seven_by_five_in_three_by_five_tiles_is_45_cells() {
        let domain = domain(&[(1, 9, 3), (1, 5, 5)]);
        let nd = vec![range(1, 7), range(1, 5)];
        assert_eq!(tile_count(&domain, &nd), Some(3));
        assert_eq!(cell_num_per_tile(&domain), Some(15));
        assert_eq!(dense_cell_num(&domain, &nd), Some(45));
        assert_eq!(cell_count(&domain, &nd), Some(35));
        let tiles = expand_to_tiles(&domain, &vec![range(2, 7), range(3, 3)]).unwrap();
        assert_eq!(tiles, vec![range(1, 9), range(1, 5)]);
        assert_eq!(cell_count(&domain, &tiles), dense_cell_num(&domain, &nd));
        assert_eq!(cell_count(&domain, &vec![range(1, 7)]), None);
    }

    /// A cell's position is what `coords` inverts; a box inside the tile
    /// numbers its cells one after another in the same cell order, its
    /// written part clipped to it; a box leaving the tile is none.
    #[test]
    fn a_box_of_a_tile_numbers_its_cells_in_the_tiles_order() {
        let domain = domain(&[(0, 7, 4), (0, 9, 5)]);
        let ned = vec![range(1, 7), range(0, 9)];
        for order in [Layout::RowMajor, Layout::ColMajor] {
            let grid = FragmentGrid::new(&domain, Layout::RowMajor, order, &ned).unwrap();
            assert_eq!(grid.tiling().collect::<Vec<_>>(), vec![(0, 4), (0, 5)]);
            assert_eq!(grid.bounds().collect::<Vec<_>>(), vec![(1, 7), (0, 9)]);
            let tc = grid.tile_cells(0).unwrap();
            let mut at = [0i128; 2];
            for pos in 0..20 {
                tc.coords(pos, &mut at).unwrap();
                assert_eq!(tc.position(&at), Some(pos));
            }
            assert_eq!(tc.position(&[4, 0]), None);
            let bx = tc.sub_box(&[0, 1], &[2, 3]).unwrap();
            assert_eq!((bx.from.clone(), bx.to.clone()), (vec![1, 1], vec![2, 3]));
            let mut inside = Vec::new();
            for pos in 0..20 {
                tc.coords(pos, &mut at).unwrap();
                if (0..=2).contains(&at[0]) && (1..=3).contains(&at[1]) {
                    inside.push(at);
                }
            }
            for (k, cell) in inside.iter().enumerate() {
                assert_eq!(bx.position(cell), Some(k as u64), "{order:?}");
            }
            assert!(tc.sub_box(&[0, 1], &[4, 3]).is_none());
            assert!(tc.sub_box(&[2, 1], &[1, 3]).is_none());
        }
    }

    #[test]
    fn negative_domains() {
        let domain = domain(&[(-10, 10, 4)]);
        let d = &domain.dimensions[0];
        assert_eq!(tile_index(d, &(-10i32).to_le_bytes()), Some(0));
        assert_eq!(tile_index(d, &(-7i32).to_le_bytes()), Some(0));
        assert_eq!(tile_index(d, &(-6i32).to_le_bytes()), Some(1));
        assert_eq!(dim_tile_count(d, &range(-3, 3)), Some(3));
        assert_eq!(tile_count(&domain, &vec![]), None);
    }

    #[test]
    fn written_cells_in_coordinate_order_at_cell_order_positions() {
        use tdb_format::Layout::{ColMajor, RowMajor};
        let d = domain(&[(1, 7, 3), (1, 5, 2)]);
        let ned = vec![range(2, 3), range(2, 4)];
        // Tiles touched: one along d0, two along d1 (row-major tile order).
        assert_eq!(
            written_cells(&d, RowMajor, ColMajor, &ned, 0, 6),
            Some(vec![4, 5])
        );
        assert_eq!(
            written_cells(&d, RowMajor, ColMajor, &ned, 1, 6),
            Some(vec![1, 4, 2, 5])
        );
        assert_eq!(
            written_cells(&d, RowMajor, RowMajor, &ned, 1, 6),
            Some(vec![2, 3, 4, 5])
        );
        assert_eq!(
            written_cells(&d, RowMajor, ColMajor, &ned, 2, 6),
            None,
            "no third tile"
        );
        assert_eq!(
            written_cells(&d, RowMajor, ColMajor, &ned, 0, 7),
            None,
            "wrong cell count"
        );
    }

    /// Every position of a tile has its own cell inside the tile by
    /// `coords`, whose offsets by the strides and `position` (the grid's
    /// inverse) take it back to its tile and position; `written` is the
    /// non-empty domain.
    #[test]
    fn tile_cells_walk_the_positions_position_gives() {
        use tdb_format::Layout::{ColMajor, RowMajor};
        let d = domain(&[(-2, 7, 3), (1, 5, 2), (0, 3, 4)]);
        let ned = vec![range(0, 6), range(2, 5), range(1, 3)];
        for (tile_order, cell_order) in [
            (RowMajor, RowMajor),
            (ColMajor, ColMajor),
            (RowMajor, ColMajor),
        ] {
            let g = FragmentGrid::new(&d, tile_order, cell_order, &ned).unwrap();
            for t in 0..tile_count(&d, &ned).unwrap() {
                let cells = g.tile_cells(t).unwrap();
                let n: u64 = cells.extent.iter().map(|&e| e as u64).product();
                assert_eq!(n, 24);
                let mut seen = std::collections::HashSet::new();
                for pos in 0..n {
                    let mut at = vec![0i128; 3];
                    cells.coords(pos, &mut at).unwrap();
                    assert!(seen.insert(at.clone()), "tile {t} cell {pos} twice");
                    assert!((0..3).all(|k| (cells.corner[k]..=cells.last[k]).contains(&at[k])));
                    let inside = (0..3).all(|k| {
                        let (lo, hi) = int_range(&d.dimensions[k], &ned[k]).unwrap();
                        (lo..=hi).contains(&at[k])
                    });
                    assert_eq!(cells.written(&at), inside);
                    if inside {
                        assert_eq!(g.position(&at), Some((t, pos)));
                    }
                    // A cell's position: its offsets from the corner
                    // by the strides.
                    let by_strides: i128 = (0..3)
                        .map(|k| (at[k] - cells.corner[k]) * cells.stride(k).unwrap())
                        .sum();
                    assert_eq!(by_strides, pos as i128);
                }
                assert_eq!(cells.coords(n, &mut [0; 3]), None, "past the tile");
            }
        }
    }

    #[test]
    fn tiles_written_in_order_are_exactly_those_listing_every_position() {
        use tdb_format::Layout::{ColMajor, RowMajor};
        for dims in [vec![(1, 7, 3), (1, 5, 2)], vec![(1, 9, 3)]] {
            let d = domain(&dims);
            let cells: usize = dims.iter().map(|&(_, _, e)| e as usize).product();
            let neds: Vec<NDRange> = if dims.len() == 2 {
                vec![
                    vec![range(1, 6), range(1, 4)],
                    vec![range(2, 6), range(1, 5)],
                ]
            } else {
                vec![vec![range(1, 9)], vec![range(2, 7)]]
            };
            for ned in &neds {
                for (tile_order, cell_order) in [
                    (RowMajor, RowMajor),
                    (RowMajor, ColMajor),
                    (ColMajor, ColMajor),
                ] {
                    let g = FragmentGrid::new(&d, tile_order, cell_order, ned).unwrap();
                    let mut whole = 0;
                    for t in 0..tile_count(&d, ned).unwrap() {
                        let listed = g.written_cells(t, cells).unwrap();
                        let identity = listed == (0..cells).collect::<Vec<_>>();
                        assert_eq!(g.writes_tile_in_order(t), identity, "{ned:?} tile {t}");
                        whole += usize::from(identity);
                    }
                    assert!(whole > 0 || (cell_order == ColMajor && dims.len() == 2));
                }
            }
        }
    }

    #[test]
    fn cell_position_inverts_written_cells() {
        use tdb_format::Layout::{ColMajor, RowMajor};
        let d = domain(&[(1, 7, 3), (1, 5, 2)]);
        let ned = vec![range(2, 6), range(2, 5)];
        for tile_order in [RowMajor, ColMajor] {
            for cell_order in [RowMajor, ColMajor] {
                let mut seen = 0;
                for r in 2..=6 {
                    for c in 2..=5 {
                        let (t, pos) =
                            cell_position(&d, tile_order, cell_order, &ned, &[r, c]).unwrap();
                        let written =
                            written_cells(&d, tile_order, cell_order, &ned, t, 6).unwrap();
                        assert!(written.contains(&(pos as usize)), "({r}, {c})");
                        seen += 1;
                    }
                }
                assert_eq!(seen, 20);
                assert_eq!(
                    cell_position(&d, tile_order, cell_order, &ned, &[1, 2]),
                    None
                );
            }
        }
    }
    /// The tiles some ranges touch are those whose box meets a range on
    /// every dimension, in the order the fragment stores them, each once:
    /// overlapping ranges, ranges out of order, ranges partly or wholly
    /// outside the fragment, a fragment not on tile bounds.
    #[test]
    fn tiles_touched_are_the_tiles_whose_box_meets_the_ranges() {
        use tdb_format::Layout::{ColMajor, RowMajor};
        let d = domain(&[(-3, 20, 3), (1, 30, 4)]);
        let ned = vec![range(-1, 13), range(3, 26)];
        let cases: [[Vec<(i128, i128)>; 2]; 5] = [
            [vec![(-3, 20)], vec![(1, 30)]],
            [vec![(4, 4)], vec![(9, 9)]],
            [vec![(10, 12), (-2, 0), (0, 5)], vec![(20, 29), (3, 3)]],
            [vec![(14, 20)], vec![(3, 26)]],
            [vec![(5, 7), (6, 6)], vec![(1, 2), (27, 30)]],
        ];
        for tile_order in [RowMajor, ColMajor] {
            let grid = FragmentGrid::new(&d, tile_order, RowMajor, &ned).unwrap();
            let n = tile_count(&d, &ned).unwrap();
            for ranges in &cases {
                let got: Vec<u64> = grid.tiles_touched(ranges).unwrap().collect();
                let want: Vec<u64> = (0..n)
                    .filter(|&t| {
                        let (from, to, _) = grid.tile_box(t).unwrap();
                        (ranges.iter().enumerate())
                            .all(|(d, rs)| rs.iter().any(|&(lo, hi)| lo <= to[d] && hi >= from[d]))
                    })
                    .collect();
                assert_eq!(got, want, "{tile_order:?} {ranges:?}");
            }
        }
        let grid = FragmentGrid::new(&d, RowMajor, RowMajor, &ned).unwrap();
        assert_eq!(grid.tiles_touched(&[vec![(0, 1)]]).map(|_| ()), None);
    }

    /// Every input cell lands where `FragmentGrid::position` says a reader
    /// finds it, in every tile/cell/input order; the other positions are
    /// fill.
    #[test]
    fn write_grid_puts_each_input_cell_where_readers_look() {
        use tdb_format::Layout::{ColMajor, RowMajor};
        let d = domain(&[(-3, 9, 3), (1, 8, 2), (0, 4, 5)]);
        let sub = vec![range(-2, 5), range(2, 7), range(1, 3)];
        let (lo, hi) = ([-2i128, 2, 1], [5i128, 7, 3]);
        for (to, co) in [
            (RowMajor, RowMajor),
            (RowMajor, ColMajor),
            (ColMajor, RowMajor),
        ] {
            let grid = FragmentGrid::new(&d, to, co, &sub).unwrap();
            for input in [InputOrder::RowMajor, InputOrder::ColMajor] {
                let w = WriteGrid::new(&d, to, co, &sub, input).unwrap();
                assert_eq!(w.input_cells(), Some(8 * 6 * 3));
                let tiles: Vec<Vec<usize>> = (0..w.tile_num().unwrap())
                    .map(|t| {
                        let mut v = Vec::new();
                        w.sources(t, &mut v).unwrap();
                        v
                    })
                    .collect();
                let mut seen = 0;
                for c0 in lo[0]..=hi[0] {
                    for c1 in lo[1]..=hi[1] {
                        for c2 in lo[2]..=hi[2] {
                            let (t, c) = grid.position(&[c0, c1, c2]).unwrap();
                            let (i0, i1, i2) = (
                                (c0 - lo[0]) as usize,
                                (c1 - lo[1]) as usize,
                                (c2 - lo[2]) as usize,
                            );
                            let want = match input {
                                InputOrder::RowMajor => (i0 * 6 + i1) * 3 + i2,
                                InputOrder::ColMajor => (i2 * 6 + i1) * 8 + i0,
                            };
                            assert_eq!(
                                tiles[t as usize][c as usize], want,
                                "{to:?} {co:?} {input:?}"
                            );
                            seen += 1;
                        }
                    }
                }
                let held: Vec<usize> = tiles
                    .iter()
                    .flatten()
                    .copied()
                    .filter(|&s| s != FILL)
                    .collect();
                assert_eq!(seen, 8 * 6 * 3);
                assert_eq!(held.len(), seen);
            }
        }
    }
}
