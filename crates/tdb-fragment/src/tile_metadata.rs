//! Tile and fragment metadata (min, max, sum, null count) as TileDB 2.30
//! computes them (`TileMetadataGenerator`, `FragmentMetadata::
//! compute_fragment_min_max_sum_null_count`): writers store it, `verify`
//! checks stored values against it, and readers' aggregates depend on it,
//! so TileDB's quirks are kept:
//! - min/max never for dimensions; for var-size or multi-value cells only
//!   CHAR and STRING_ASCII; never for UTF-8 and wider strings, BLOB,
//!   geometries, ANY. Sums only for fixed single-value cells that are not
//!   strings or bytes (CHAR counts as a signed byte), dimensions included.
//! - numeric bounds start at the type's max and lowest (so floats at
//!   ±MAX, not ±inf) and a bound is replaced unless strictly better: a NaN
//!   replaces it, and the next value replaces the NaN;
//! - strings compare as C's `strncmp` (unsigned bytes, stopping at NUL),
//!   over the shorter length for var-size cells, where a tie makes the
//!   shorter the min and the longer the max;
//! - sums saturate at the type's limits and stop there;
//! - var-size nullable fields without min/max count no nulls;
//! - the `__coords` slot of a v5+ fragment stores zeroed bounds and sums.
//!
//! Field indices are the footer's: attributes, `__coords`, dimensions.

use crate::fragment_metadata::{FieldSummary, TileBounds};
use std::cmp::Ordering;
use tdb_format::{le, with_native, ArrayType, Datatype, NativeType};
use tdb_schema::{ArraySchema, SchemaField};

/// One tile's metadata: `min`/`max` empty when none was found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TileMetadata {
    /// Minimum (little-endian value, or the string's bytes).
    pub min: Vec<u8>,
    /// Maximum.
    pub max: Vec<u8>,
    /// Raw sum (`i64`, `u64` or `f64` bits by datatype).
    pub sum: u64,
    /// Null cells.
    pub null_count: u64,
    /// Cells in the tile (TileDB's `cell_num(tile)`: a dense tile's whole
    /// extent, a sparse tile's cells).
    pub cell_num: u64,
}

/// Whether TileDB keeps a min and max for a field of this shape.
pub fn has_min_max(datatype: Datatype, is_dim: bool, var: bool, cell_val_num: u32) -> bool {
    use Datatype::*;
    if is_dim {
        return false;
    }
    let chars = matches!(datatype, Char | StringAscii);
    if var || cell_val_num != 1 {
        return chars;
    }
    !(matches!(datatype, Any | Blob | GeomWkb | GeomWkt) || (datatype.is_string() && !chars))
}

/// Whether TileDB keeps a sum for a field of this shape.
pub fn has_sum(datatype: Datatype, var: bool, cell_val_num: u32) -> bool {
    use Datatype::*;
    !var && cell_val_num == 1
        && !matches!(datatype, Any | Blob | GeomWkb | GeomWkt)
        && (!datatype.is_string() || datatype == Char)
}

/// What TileDB sums a type into: `int64`, `uint64` or `double`, kept as
/// the raw `u64` the fragment metadata stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SumKind {
    Signed,
    Unsigned,
    Float,
}

/// A fixed-size numeric cell as the metadata rules use it (bounds start at
/// the type's max and lowest: [`NativeType::MAX`], [`NativeType::LOWEST`]).
trait Cell: NativeType {
    const SUM: SumKind;
    /// An integer of at most 4 bytes: fewer than 2^31 of them cannot
    /// overflow an `int64` sum, so such sums need no saturation checks.
    const SMALL: bool;
    /// The value in its sum's raw form.
    fn raw(self) -> u64;
}

macro_rules! cell {
    ($t:ty, $kind:ident, $small:expr, $raw:expr) => {
        impl Cell for $t {
            const SUM: SumKind = SumKind::$kind;
            const SMALL: bool = $small;
            fn raw(self) -> u64 {
                let f: fn($t) -> u64 = $raw;
                f(self)
            }
        }
    };
}

/// The value's little-endian bytes.
fn bytes_of<T: NativeType>(v: T) -> Vec<u8> {
    let mut out = Vec::with_capacity(T::SIZE);
    v.put_le(&mut out);
    out
}

cell!(i8, Signed, true, |v| i64::from(v) as u64);
cell!(i16, Signed, true, |v| i64::from(v) as u64);
cell!(i32, Signed, true, |v| i64::from(v) as u64);
cell!(i64, Signed, false, |v| v as u64);
cell!(u8, Unsigned, true, u64::from);
cell!(u16, Unsigned, true, u64::from);
cell!(u32, Unsigned, true, u64::from);
cell!(u64, Unsigned, false, |v| v);
cell!(f32, Float, false, |v| f64::from(v).to_bits());
cell!(f64, Float, false, f64::to_bits);

/// Adds raw value `v` to the raw sum `sum`; `false` once saturated
/// (TileDB stops summing there).
fn add(kind: SumKind, sum: &mut u64, v: u64) -> bool {
    match kind {
        SumKind::Float => {
            let (s, v) = (f64::from_bits(*sum), f64::from_bits(v));
            if (s < 0.0) == (v < 0.0) && s.abs() > f64::MAX - v.abs() {
                *sum = if s < 0.0 { f64::MIN } else { f64::MAX }.to_bits();
                return false;
            }
            *sum = (s + v).to_bits();
            true
        }
        SumKind::Signed => match (*sum as i64).checked_add(v as i64) {
            Some(s) => {
                *sum = s as u64;
                true
            }
            None => {
                *sum = if (v as i64) < 0 { i64::MIN } else { i64::MAX } as u64;
                false
            }
        },
        SumKind::Unsigned => match sum.checked_add(v) {
            Some(s) => {
                *sum = s;
                true
            }
            None => {
                *sum = u64::MAX;
                false
            }
        },
    }
}

/// Running numeric bounds, TileDB's `min = (min < v) ? min : v`: a bound
/// is replaced unless strictly better, so a NaN replaces it and the next
/// value replaces the NaN.
struct NumBounds<T> {
    lo: T,
    hi: T,
}

impl<T: Cell> NumBounds<T> {
    fn new() -> Self {
        NumBounds {
            lo: T::MAX,
            hi: T::LOWEST,
        }
    }

    #[inline]
    fn min(&mut self, v: T) {
        self.lo = if self.lo < v { self.lo } else { v };
    }

    #[inline]
    fn max(&mut self, v: T) {
        self.hi = if self.hi > v { self.hi } else { v };
    }
}

/// Min/max (when `min_max`) and sum (when `sum`) of the non-null cells of
/// `data` at `order` (all, in order, when `None`), into `m`.
fn numeric<T: Cell>(
    data: &[u8],
    validity: Option<&[u8]>,
    order: Option<&[usize]>,
    (min_max, sum): (bool, bool),
    m: &mut TileMetadata,
) {
    let mut b = NumBounds::<T>::new();
    if let (None, None) = (order, validity) {
        // Every cell, in order: passes the compiler can vectorize.
        let cells = || data.chunks_exact(T::SIZE).map(T::read_le);
        if min_max {
            for v in cells() {
                b.min(v);
                b.max(v);
            }
            m.min = bytes_of(b.lo);
            m.max = bytes_of(b.hi);
        }
        if sum && T::SMALL && data.len().checked_div(T::SIZE).unwrap_or(0) < 1 << 31 {
            m.sum = cells().fold(0u64, |s, v| s.wrapping_add(v.raw()));
        } else if sum {
            for v in cells() {
                if !add(T::SUM, &mut m.sum, v.raw()) {
                    break;
                }
            }
        }
        return;
    }
    // Cells one at a time, as a fold fed the whole tile does.
    let mut fold = NumFold::<T>::new((min_max, sum));
    match order {
        None => fold.feed(data, validity),
        Some(o) => {
            let valid = |i: usize| validity.is_none_or(|v| v.get(i) != Some(&0));
            (o.iter().filter(|&&i| valid(i)))
                .filter_map(|&i| le::nth(data, i, T::SIZE).map(T::read_le))
                .for_each(|v| fold.visit(v));
        }
    }
    fold.finish(m);
}

/// One tile's metadata fed in pieces ([`FieldStats::fold`]).
pub struct TileFold {
    stats: FieldStats,
    cells: u64,
    nulls: u64,
    numeric: Option<Box<dyn Feed>>,
    /// String bounds (chars with a min and max).
    text: Option<StrBounds>,
}

impl std::fmt::Debug for TileFold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TileFold")
            .field("stats", &self.stats)
            .field("cells", &self.cells)
            .field("nulls", &self.nulls)
            .finish_non_exhaustive()
    }
}

impl TileFold {
    /// The next cells of the tile: `data` their fixed values, `validity`
    /// one byte a cell for nullable fields.
    pub fn feed(&mut self, data: &[u8], validity: Option<&[u8]>) {
        let cells = data.len().checked_div(self.stats.cell_size).unwrap_or(0);
        self.cells = self.cells.saturating_add(cells as u64);
        self.nulls = self
            .nulls
            .saturating_add(self.stats.null_count(validity, None));
        if let Some(n) = &mut self.numeric {
            n.feed(data, validity);
        }
        if let Some(b) = &mut self.text {
            let size = self.stats.cell_size.max(1);
            for (i, cell) in data.chunks_exact(size).enumerate() {
                if validity.is_none_or(|v| v.get(i) != Some(&0)) {
                    b.min(cell);
                    b.max(cell);
                }
            }
        }
    }

    /// The next cells of a var-size field's tile: `data` their bytes,
    /// `offsets` where each starts in `data`.
    pub fn feed_var(&mut self, data: &[u8], offsets: &[u64], validity: Option<&[u8]>) {
        self.cells = self.cells.saturating_add(offsets.len() as u64);
        self.nulls = self
            .nulls
            .saturating_add(self.stats.null_count(validity, None));
        if let Some(b) = &mut self.text {
            let ends = offsets.iter().skip(1).copied().chain([data.len() as u64]);
            for (i, (&start, end)) in offsets.iter().zip(ends).enumerate() {
                let cell = usize::try_from(start)
                    .ok()
                    .zip(usize::try_from(end).ok())
                    .and_then(|(s, e)| data.get(s..e))
                    .unwrap_or(&[]);
                if validity.is_none_or(|v| v.get(i) != Some(&0)) {
                    b.min(cell);
                    b.max(cell);
                }
            }
        }
    }

    /// The tile's metadata.
    pub fn finish(self) -> TileMetadata {
        let mut m = TileMetadata {
            cell_num: self.cells,
            ..TileMetadata::default()
        };
        if self.stats.is_dim && self.stats.dense {
            return m;
        }
        m.null_count = self.nulls;
        if let Some(n) = &self.numeric {
            n.finish(&mut m);
        }
        if let Some(b) = &self.text {
            b.store(&mut m.min, &mut m.max);
        }
        m
    }
}

/// A numeric fold's running state, whatever its type.
trait Feed: Send {
    fn feed(&mut self, data: &[u8], validity: Option<&[u8]>);
    fn finish(&self, m: &mut TileMetadata);
}

/// [`numeric`] as a running fold: bounds and a sum that stops once
/// saturated, over the non-null cells fed.
struct NumFold<T> {
    bounds: NumBounds<T>,
    sum: u64,
    summing: bool,
    min_max: bool,
}

impl<T: Cell> NumFold<T> {
    fn new((min_max, sum): (bool, bool)) -> Self {
        NumFold {
            bounds: NumBounds::new(),
            sum: 0,
            summing: sum,
            min_max,
        }
    }

    /// One non-null cell's value, the next in the order.
    fn visit(&mut self, v: T) {
        if self.min_max {
            self.bounds.min(v);
            self.bounds.max(v);
        }
        if self.summing {
            self.summing = add(T::SUM, &mut self.sum, v.raw());
        }
    }
}

impl<T: Cell + Send> Feed for NumFold<T> {
    fn feed(&mut self, data: &[u8], validity: Option<&[u8]>) {
        for (i, c) in data.chunks_exact(T::SIZE).enumerate() {
            if validity.is_none_or(|v| v.get(i) != Some(&0)) {
                self.visit(T::read_le(c));
            }
        }
    }

    fn finish(&self, m: &mut TileMetadata) {
        if self.min_max {
            m.min = bytes_of(self.bounds.lo);
            m.max = bytes_of(self.bounds.hi);
        }
        m.sum = self.sum;
    }
}

/// C's `strncmp(a, b, n)`: unsigned bytes, stopping at the first NUL.
fn strncmp(a: &[u8], b: &[u8], n: usize) -> Ordering {
    for i in 0..n {
        let (x, y) = (
            a.get(i).copied().unwrap_or(0),
            b.get(i).copied().unwrap_or(0),
        );
        if x != y {
            return x.cmp(&y);
        }
        if x == 0 {
            break;
        }
    }
    Ordering::Equal
}

/// Var-size string bounds: `strncmp` over the shorter length, ties to the
/// shorter (min) or longer (max).
fn var_less(a: &[u8], b: &[u8]) -> bool {
    match strncmp(a, b, a.len().min(b.len())) {
        Ordering::Equal => a.len() < b.len(),
        o => o == Ordering::Less,
    }
}

/// Running string bounds: `strncmp` over `n` bytes for fixed-size cells;
/// [`var_less`] for var-size ones (`var`).
/// String bounds as TileDB keeps them, copies of the least and greatest
/// cells seen (a fold fed in pieces cannot borrow them).
#[derive(Debug, Clone)]
struct StrBounds {
    var: bool,
    n: usize,
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
}

impl StrBounds {
    fn new(var: bool, n: usize) -> Self {
        StrBounds {
            var,
            n,
            lo: None,
            hi: None,
        }
    }

    fn less(&self, a: &[u8], b: &[u8]) -> bool {
        if self.var {
            var_less(a, b)
        } else {
            strncmp(a, b, self.n) == Ordering::Less
        }
    }

    fn min(&mut self, v: &[u8]) {
        if self.lo.as_deref().is_none_or(|lo| self.less(v, lo)) {
            let lo = self.lo.get_or_insert_with(Vec::new);
            lo.clear();
            lo.extend_from_slice(v);
        }
    }

    fn max(&mut self, v: &[u8]) {
        if self.hi.as_deref().is_none_or(|hi| self.less(hi, v)) {
            let hi = self.hi.get_or_insert_with(Vec::new);
            hi.clear();
            hi.extend_from_slice(v);
        }
    }

    /// Into `m`'s min and max, where a value was seen.
    fn store(&self, min: &mut Vec<u8>, max: &mut Vec<u8>) {
        if let (Some(lo), Some(hi)) = (&self.lo, &self.hi) {
            min.clone_from(lo);
            max.clone_from(hi);
        }
    }
}

/// The shape of one footer field, as the metadata rules see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldStats {
    datatype: Datatype,
    is_dim: bool,
    /// The `__coords` slot.
    coords: bool,
    var: bool,
    cell_val_num: u32,
    /// Bytes per cell (fixed-size fields).
    cell_size: usize,
    nullable: bool,
    dense: bool,
}

impl FieldStats {
    /// The rules for `field` of `schema`; `None` for a field it does not
    /// have.
    pub fn new(schema: &ArraySchema, field: SchemaField) -> Option<FieldStats> {
        let dense = schema.array_type == ArrayType::Dense;
        Some(match field {
            SchemaField::Attribute(i) => {
                let a = schema.attributes.get(i)?;
                FieldStats {
                    datatype: a.datatype,
                    is_dim: false,
                    coords: false,
                    var: a.is_var(),
                    cell_val_num: a.cell_val_num,
                    cell_size: a.datatype.cell_size(a.cell_val_num) as usize,
                    nullable: a.nullable,
                    dense,
                }
            }
            SchemaField::Dimension(d) => {
                let dim = schema.domain.dimensions.get(d)?;
                FieldStats {
                    datatype: dim.datatype,
                    is_dim: true,
                    coords: false,
                    var: dim.is_var(),
                    cell_val_num: dim.cell_val_num,
                    cell_size: dim.datatype.size() as usize,
                    nullable: false,
                    dense,
                }
            }
        })
    }

    /// The rules for footer field `idx` (attributes, `__coords`,
    /// dimensions, then timestamps and delete metadata where the footer
    /// has them); `None` beyond them.
    pub fn of_index(schema: &ArraySchema, idx: usize) -> Option<FieldStats> {
        let a = schema.attributes.len();
        let dims = &schema.domain.dimensions;
        if idx < a {
            Self::new(schema, SchemaField::Attribute(idx))
        } else if idx == a {
            // TileDB treats `__coords` as a field of dimension 0's type,
            // one value per cell of all the coordinates, not a dimension.
            let t = dims.first()?.datatype;
            Some(FieldStats {
                datatype: t,
                is_dim: false,
                coords: true,
                var: false,
                cell_val_num: 1,
                cell_size: t.cell_size(dims.len() as u32) as usize,
                nullable: false,
                dense: schema.array_type == ArrayType::Dense,
            })
        } else if let Some(d) = idx
            .checked_sub(a)
            .and_then(|i| i.checked_sub(1))
            .filter(|&d| d < dims.len())
        {
            Self::new(schema, SchemaField::Dimension(d))
        } else if idx
            .saturating_sub(a)
            .saturating_sub(1)
            .saturating_sub(dims.len())
            < 3
        {
            // Timestamps, delete timestamps, delete condition indexes:
            // TileDB treats each as a UINT64 attribute.
            Some(FieldStats {
                datatype: Datatype::UInt64,
                is_dim: false,
                coords: false,
                var: false,
                cell_val_num: 1,
                cell_size: 8,
                nullable: false,
                dense: schema.array_type == ArrayType::Dense,
            })
        } else {
            None
        }
    }

    fn min_max(&self) -> bool {
        has_min_max(self.datatype, self.is_dim, self.var, self.cell_val_num)
    }

    fn sum(&self) -> bool {
        has_sum(self.datatype, self.var, self.cell_val_num)
    }

    fn chars(&self) -> bool {
        matches!(self.datatype, Datatype::Char | Datatype::StringAscii)
    }

    /// A tile's null count by TileDB's rules: 0 for fields that are not
    /// nullable and for var-size ones without a min and max; over the whole
    /// tile (written or not) for other fields without them; else over the
    /// cells `order` lists (`None`: all). `validity` and `order` as for
    /// [`FieldStats::tile`].
    pub fn null_count(&self, validity: Option<&[u8]>, order: Option<&[usize]>) -> u64 {
        let (Some(v), true) = (validity, self.nullable) else {
            return 0;
        };
        let min_max = self.min_max();
        if !min_max && self.var {
            return 0;
        }
        match order {
            Some(o) if min_max => o.iter().filter(|&&i| v.get(i) == Some(&0)).count() as u64,
            _ => v.iter().filter(|&&b| b == 0).count() as u64,
        }
    }

    /// A fold of one tile's metadata fed in pieces, in cell order: what
    /// [`FieldStats::tile`] gives for the whole tile (every cell written),
    /// without holding it, so a writer can filter a large tile chunk by
    /// chunk. The bounds run over the pieces as one pass does (TileDB's
    /// NaN rule makes them depend on the order), sums saturate and stop
    /// across pieces, string bounds are copies of the cells. Var-size
    /// fields are fed by [`TileFold::feed_var`].
    pub fn fold(&self) -> TileFold {
        let numeric = match self.datatype.native() {
            Some(num) if !self.var && self.cell_val_num == 1 && !(self.is_dim && self.dense) => {
                let what = (self.min_max() && !self.chars(), self.sum());
                (what.0 || what.1).then(
                    || with_native!(num, T => Box::new(NumFold::<T>::new(what)) as Box<dyn Feed>),
                )
            }
            _ => None,
        };
        let text =
            (self.min_max() && self.chars()).then(|| StrBounds::new(self.var, self.cell_size));
        TileFold {
            stats: *self,
            cells: 0,
            nulls: 0,
            numeric,
            text,
        }
    }

    /// Metadata of one tile: `data` is its fixed cells, or for var-size
    /// fields its var bytes with `offsets` (one start per cell, from 0);
    /// `validity` one byte per cell for nullable fields. `order` lists the
    /// positions the write gave, in the order TileDB visits them (dense
    /// tiles reaching beyond the write); `None` is every cell in order.
    pub fn tile(
        &self,
        data: &[u8],
        offsets: Option<&[u64]>,
        validity: Option<&[u8]>,
        order: Option<&[usize]>,
    ) -> TileMetadata {
        let cells = match offsets {
            Some(o) => o.len(),
            None => data.len().checked_div(self.cell_size).unwrap_or(0),
        };
        let mut m = TileMetadata {
            cell_num: cells as u64,
            ..TileMetadata::default()
        };
        if self.is_dim && self.dense {
            return m;
        }
        let null = |i: usize| validity.is_some_and(|v| v.get(i) == Some(&0));
        let min_max = self.min_max();
        m.null_count = self.null_count(validity, order);
        if min_max && self.chars() {
            let cell = |i: usize| -> &[u8] {
                match offsets {
                    Some(o) => {
                        let end = o
                            .get(i.saturating_add(1))
                            .map_or(data.len(), |&e| e as usize);
                        let start = o.get(i).map_or(end, |&s| s as usize);
                        data.get(start..end).unwrap_or(&[])
                    }
                    None => le::nth(data, i, self.cell_size).unwrap_or(&[]),
                }
            };
            let mut b = StrBounds::new(self.var, self.cell_size);
            let mut visit = |i: usize| {
                if !null(i) {
                    b.min(cell(i));
                    b.max(cell(i));
                }
            };
            match order {
                Some(o) => o.iter().copied().for_each(&mut visit),
                None => (0..cells).for_each(&mut visit),
            }
            b.store(&mut m.min, &mut m.max);
        }
        if let Some(num) = self
            .datatype
            .native()
            .filter(|_| !self.var && self.cell_val_num == 1)
        {
            let what = (min_max && !self.chars(), self.sum());
            if what.0 || what.1 {
                with_native!(num, T => numeric::<T>(data, validity, order, what, &mut m));
            }
        }
        m
    }
}

/// The mins, maxes, sums and null counts sections of footer field `idx`
/// for these tiles (`tile_num` of them; `tiles` is empty for fields the
/// write gave no data, such as `__coords` and a dense array's dimensions).
pub fn sections(
    schema: &ArraySchema,
    idx: usize,
    tile_num: usize,
    tiles: &[TileMetadata],
) -> (TileBounds, TileBounds, Vec<u64>, Vec<u64>) {
    let (mut mins, mut maxes, mut sums, mut nulls) = (
        TileBounds::default(),
        TileBounds::default(),
        Vec::new(),
        Vec::new(),
    );
    let Some(f) = FieldStats::of_index(schema, idx) else {
        return (mins, maxes, sums, nulls);
    };
    if f.dense && f.is_dim {
        return (mins, maxes, sums, nulls);
    }
    let all_null = |t: &TileMetadata| f.nullable && t.null_count == t.cell_num;
    if f.min_max() {
        if f.var {
            for t in tiles {
                for (b, v) in [(&mut mins, &t.min), (&mut maxes, &t.max)] {
                    b.fixed
                        .extend_from_slice(&(b.var.len() as u64).to_le_bytes());
                    if !all_null(t) {
                        b.var.extend_from_slice(v);
                    }
                }
            }
        } else {
            for t in tiles {
                for (b, v) in [(&mut mins, &t.min), (&mut maxes, &t.max)] {
                    if all_null(t) || v.len() != f.cell_size {
                        b.fixed.resize(b.fixed.len().saturating_add(f.cell_size), 0);
                    } else {
                        b.fixed.extend_from_slice(v);
                    }
                }
            }
            if tiles.is_empty() {
                // One zeroed bound per tile the writer made.
                let zeros = tile_num.saturating_mul(f.cell_size);
                mins.fixed = vec![0; zeros];
                maxes.fixed = vec![0; zeros];
            }
        }
    }
    if f.sum() {
        sums = if tiles.is_empty() {
            vec![0; tile_num]
        } else {
            tiles.iter().map(|t| t.sum).collect()
        };
    }
    if f.nullable {
        nulls = tiles.iter().map(|t| t.null_count).collect();
    }
    (mins, maxes, sums, nulls)
}

/// The fragment-level min, max, sum and null count of every footer field,
/// from its tiles' metadata (`per_field[idx]`, empty where the write gave
/// none).
pub fn fragment_summaries(
    schema: &ArraySchema,
    per_field: &[&[TileMetadata]],
) -> Vec<FieldSummary> {
    let mut out = Vec::with_capacity(per_field.len());
    for (idx, tiles) in per_field.iter().enumerate() {
        let mut s = FieldSummary::default();
        let Some(f) = FieldStats::of_index(schema, idx) else {
            out.push(s);
            continue;
        };
        s.null_count = tiles.iter().map(|t| t.null_count).sum();
        let kept = || {
            tiles
                .iter()
                .filter(|t| !(f.nullable && t.null_count == t.cell_num))
        };
        if f.coords {
            // Read back from the zeroed `__coords` buffers.
            if f.min_max() {
                let n = if f.chars() {
                    1
                } else {
                    f.datatype.size() as usize
                };
                s.min = vec![0; n];
                s.max = vec![0; n];
            }
        } else if f.min_max() && f.var {
            let mut b = StrBounds::new(true, 0);
            for t in kept() {
                b.min(&t.min);
                b.max(&t.max);
            }
            b.store(&mut s.min, &mut s.max);
        } else if f.min_max() && f.chars() {
            // TileDB steps through the stored bounds only for the tiles it
            // keeps, so the k-th kept tile is compared by tile k's bounds
            // (zeros for an all-null tile).
            let n = f.cell_val_num as usize;
            let zeros = vec![0u8; n];
            fn stored<'v>(v: &'v [u8], null: bool, zeros: &'v [u8]) -> &'v [u8] {
                if null || v.len() != zeros.len() {
                    zeros
                } else {
                    v
                }
            }
            let mut b = StrBounds::new(false, n);
            for (t, _) in tiles.iter().zip(kept()) {
                let null = f.nullable && t.null_count == t.cell_num;
                b.min(stored(&t.min, null, &zeros));
                b.max(stored(&t.max, null, &zeros));
            }
            b.store(&mut s.min, &mut s.max);
        } else if !(f.var || f.dense && f.is_dim) {
            if let Some(num) = f.datatype.native().filter(|_| f.cell_val_num == 1) {
                with_native!(num, T => {
                    if f.min_max() {
                        let mut b = NumBounds::<T>::new();
                        for t in kept().filter(|t| t.min.len() == T::SIZE && t.max.len() == T::SIZE) {
                            b.min(T::read_le(&t.min));
                            b.max(T::read_le(&t.max));
                        }
                        s.min = bytes_of(b.lo);
                        s.max = bytes_of(b.hi);
                    }
                    if f.sum() {
                        for t in kept() {
                            if !add(T::SUM, &mut s.sum, t.sum) {
                                break;
                            }
                        }
                    }
                });
            }
        }
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_fields_have_which_statistics() {
        use Datatype::*;
        assert!(has_min_max(Int32, false, false, 1));
        assert!(!has_min_max(Int32, true, false, 1));
        assert!(!has_min_max(Int32, false, false, 2));
        assert!(has_min_max(StringAscii, false, true, u32::MAX));
        assert!(has_min_max(Char, false, false, 3));
        assert!(!has_min_max(StringUtf8, false, true, u32::MAX));
        assert!(!has_min_max(Blob, false, false, 1));
        assert!(has_sum(Char, false, 1));
        assert!(!has_sum(StringAscii, false, 1));
        assert!(!has_sum(Float64, false, 2));
        assert!(has_sum(DatetimeMs, false, 1));
    }

    #[test]
    fn nan_replaces_a_bound_and_the_next_value_replaces_the_nan() {
        let f = FieldStats {
            datatype: Datatype::Float64,
            is_dim: false,
            coords: false,
            var: false,
            cell_val_num: 1,
            cell_size: 8,
            nullable: false,
            dense: false,
        };
        let data: Vec<u8> = [3.0f64, f64::NAN, 5.0, 4.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let m = f.tile(&data, None, None, None);
        assert_eq!(m.min, 4.0f64.to_le_bytes());
        assert_eq!(m.max, 5.0f64.to_le_bytes());
        assert!(f64::from_bits(m.sum).is_nan());
        // Sums saturate and stop.
        let big: Vec<u8> = [f64::MAX, f64::MAX, -1.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(f.tile(&big, None, None, None).sum, f64::MAX.to_bits());
    }

    #[test]
    fn var_strings_tie_to_the_shorter_min_and_the_longer_max() {
        let f = FieldStats {
            datatype: Datatype::StringAscii,
            is_dim: false,
            coords: false,
            var: true,
            cell_val_num: u32::MAX,
            cell_size: 1,
            nullable: false,
            dense: false,
        };
        let m = f.tile(b"abcabzab", Some(&[0, 3, 6]), None, None);
        assert_eq!(m.min, b"ab");
        assert_eq!(m.max, b"abz");
        assert_eq!(strncmp(b"a\0x", b"a\0y", 3), Ordering::Equal);
    }

    fn fixed(datatype: Datatype, cell_val_num: u32, nullable: bool) -> FieldStats {
        FieldStats {
            datatype,
            is_dim: false,
            coords: false,
            var: false,
            cell_val_num,
            cell_size: datatype.cell_size(cell_val_num) as usize,
            nullable,
            dense: false,
        }
    }

    /// A tile fed to a fold in pieces gives what the whole tile gives:
    /// every numeric type, nullable or not, with NaNs (whose effect on the
    /// bounds depends on the order) and sums that saturate and stop, cut
    /// anywhere, even inside no cell at all; strings too, fixed chars and
    /// var-size cells (prefixes of one another, empty, null).
    #[test]
    fn a_tile_fed_in_pieces_folds_to_the_whole_tiles_metadata() {
        use Datatype::*;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let types = [
            Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float32, Float64, DatetimeMs,
            Bool,
        ];
        for round in 0..400 {
            let dt = types[round % types.len()];
            let nullable = round % 3 == 0;
            let f = fixed(dt, 1, nullable);
            let size = f.cell_size;
            let cells = (next() % 300) as usize;
            let mut data = Vec::with_capacity(cells * size);
            for _ in 0..cells {
                let v = next();
                let bytes = match (dt, v % 17) {
                    // Values near the limits, for saturated sums.
                    (Int64, 0..=5) => (i64::MAX - (v % 3) as i64).to_le_bytes().to_vec(),
                    (Int64, 6..=9) => (i64::MIN + (v % 3) as i64).to_le_bytes().to_vec(),
                    (UInt64, 0..=8) => (u64::MAX - v % 5).to_le_bytes().to_vec(),
                    (Float64, 0) => f64::NAN.to_le_bytes().to_vec(),
                    (Float64, 1..=3) => f64::MAX.to_le_bytes().to_vec(),
                    (Float64, _) => ((v % 1000) as f64 - 500.0).to_le_bytes().to_vec(),
                    (Float32, 0) => f32::NAN.to_le_bytes().to_vec(),
                    (Float32, _) => ((v % 1000) as f32 / 7.0).to_le_bytes().to_vec(),
                    _ => v.to_le_bytes()[..size].to_vec(),
                };
                data.extend_from_slice(&bytes);
            }
            let validity: Option<Vec<u8>> =
                nullable.then(|| (0..cells).map(|_| u8::from(next() % 4 != 0)).collect());
            let whole = f.tile(&data, None, validity.as_deref(), None);
            let mut fold = f.fold();
            let mut at = 0;
            while at < cells {
                let n = ((next() % 40) as usize).min(cells - at);
                let d = &data[at * size..(at + n) * size];
                fold.feed(d, validity.as_deref().map(|v| &v[at..at + n]));
                at += n;
            }
            assert_eq!(
                fold.finish(),
                whole,
                "{dt:?} nullable {nullable}, {cells} cells"
            );
        }
        let words: [&[u8]; 7] = [b"", b"a", b"ab", b"abz", b"b\0", b"zz", b"\xffa"];
        for round in 0..300 {
            let nullable = round % 2 == 0;
            let cells = (next() % 60) as usize;
            let validity: Option<Vec<u8>> =
                nullable.then(|| (0..cells).map(|_| u8::from(next() % 4 != 0)).collect());
            let valid = validity.as_deref();
            // Var-size strings.
            let mut var = fixed(StringAscii, u32::MAX, nullable);
            var.var = true;
            let (mut data, mut offsets) = (Vec::new(), Vec::new());
            for _ in 0..cells {
                offsets.push(data.len() as u64);
                data.extend_from_slice(words[(next() % 7) as usize]);
            }
            let whole = var.tile(&data, Some(&offsets), valid, None);
            let mut fold = var.fold();
            let mut at = 0;
            while at < cells {
                let n = ((next() % 9) as usize).min(cells - at);
                let start = offsets[at] as usize;
                let end = offsets.get(at + n).map_or(data.len(), |&e| e as usize);
                let rel: Vec<u64> = offsets[at..at + n]
                    .iter()
                    .map(|o| o - start as u64)
                    .collect();
                fold.feed_var(&data[start..end], &rel, valid.map(|v| &v[at..at + n]));
                at += n;
            }
            assert_eq!(fold.finish(), whole, "var strings, {cells} cells");
            // Chars of 3 bytes.
            let chars = fixed(Char, 3, nullable);
            let data: Vec<u8> = (0..cells)
                .flat_map(|_| {
                    let w = words[(next() % 7) as usize];
                    let mut c = w.to_vec();
                    c.resize(3, 0);
                    c
                })
                .collect();
            let whole = chars.tile(&data, None, valid, None);
            let mut fold = chars.fold();
            let mut at = 0;
            while at < cells {
                let n = ((next() % 9) as usize).min(cells - at);
                fold.feed(&data[at * 3..(at + n) * 3], valid.map(|v| &v[at..at + n]));
                at += n;
            }
            assert_eq!(fold.finish(), whole, "chars, {cells} cells");
        }
    }

    #[test]
    fn numeric_statistics_skip_nulls_and_follow_the_order_given() {
        let f = fixed(Datatype::Int32, 1, true);
        let data: Vec<u8> = [5i32, -7, 9, 2]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let m = f.tile(&data, None, Some(&[1, 0, 1, 1]), None);
        assert_eq!(
            (m.min, m.max, m.sum as i64, m.null_count),
            (
                2i32.to_le_bytes().to_vec(),
                9i32.to_le_bytes().to_vec(),
                16,
                1
            )
        );
        // Only positions 3 and 2 were written.
        let m = f.tile(&data, None, Some(&[1, 1, 1, 1]), Some(&[3, 2]));
        assert_eq!(
            (m.min, m.max, m.sum as i64),
            (2i32.to_le_bytes().to_vec(), 9i32.to_le_bytes().to_vec(), 11)
        );
        // All null: the starting bounds stay.
        let m = f.tile(&data, None, Some(&[0; 4]), None);
        assert_eq!(
            (m.min, m.max),
            (
                i32::MAX.to_le_bytes().to_vec(),
                i32::MIN.to_le_bytes().to_vec()
            )
        );
        // Integer sums saturate either way and stop.
        let f = fixed(Datatype::Int64, 1, false);
        let low: Vec<u8> = [i64::MIN + 1, -2, 5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(f.tile(&low, None, None, None).sum, i64::MIN as u64);
        let f = fixed(Datatype::UInt64, 1, false);
        let high: Vec<u8> = [u64::MAX - 1, 2, 0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(f.tile(&high, None, None, None).sum, u64::MAX);
    }

    #[test]
    fn whole_tile_passes_agree_with_the_cell_by_cell_walk() {
        use Datatype::*;
        // Bytes that make negatives, extremes and (for floats) NaNs.
        let data: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for t in [
            Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float32, Float64,
        ] {
            let f = fixed(t, 1, true);
            let cells = data.len() / t.size() as usize;
            let fast = f.tile(&data, None, None, None);
            let walked = f.tile(&data, None, Some(&vec![1; cells]), None);
            assert_eq!(fast, walked, "{t:?}");
            let ordered: Vec<usize> = (0..cells).collect();
            assert_eq!(fast, f.tile(&data, None, None, Some(&ordered)), "{t:?}");
        }
    }

    #[test]
    fn fixed_char_fragment_bounds_step_through_kept_tiles_only() {
        let schema = tdb_schema::ArraySchema::builder(ArrayType::Sparse)
            .dimension(
                tdb_schema::DimensionBuilder::new("d", Datatype::Int32)
                    .domain(0i32, 99)
                    .tile_extent(10i32),
            )
            .attribute(
                tdb_schema::AttributeBuilder::new("c", Datatype::Char)
                    .cell_val_num(2)
                    .nullable(true),
            )
            .build()
            .unwrap();
        let tile = |min: &[u8], max: &[u8], nulls: u64| TileMetadata {
            min: min.to_vec(),
            max: max.to_vec(),
            null_count: nulls,
            cell_num: 2,
            ..TileMetadata::default()
        };
        // Tile 1 is all null: the second kept tile (2) is compared by
        // tile 1's stored bounds, zeros, so "zz" is never seen and the
        // zeros win the min.
        let tiles = [
            tile(b"mm", b"nn", 0),
            tile(b"", b"", 2),
            tile(b"aa", b"zz", 0),
        ];
        let s = &fragment_summaries(&schema, &[&tiles])[0];
        assert_eq!(
            (s.min.as_slice(), s.max.as_slice()),
            (&b"\0\0"[..], &b"nn"[..])
        );
        assert_eq!(s.null_count, 2);
    }
}
