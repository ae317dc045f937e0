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
use tdb_format::{ArrayType, Datatype};
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

/// How values of a fixed-size, single-value field compare and sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F32,
    F64,
}

impl Num {
    fn of(datatype: Datatype) -> Option<Num> {
        use Datatype::*;
        Some(match datatype {
            Int8 | Char => Num::I8,
            Int16 => Num::I16,
            Int32 => Num::I32,
            Int64 => Num::I64,
            UInt8 | Bool => Num::U8,
            UInt16 => Num::U16,
            UInt32 => Num::U32,
            UInt64 => Num::U64,
            Float32 => Num::F32,
            Float64 => Num::F64,
            d if d.is_datetime() || d.is_time() => Num::I64,
            _ => return None,
        })
    }
}

/// A decoded numeric value.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
enum V {
    I(i64),
    U(u64),
    F(f64),
}

fn decode(num: Num, b: &[u8]) -> V {
    let mut a = [0u8; 8];
    a[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
    match num {
        Num::I8 => V::I(i64::from(a[0] as i8)),
        Num::I16 => V::I(i64::from(i16::from_le_bytes([a[0], a[1]]))),
        Num::I32 => V::I(i64::from(i32::from_le_bytes([a[0], a[1], a[2], a[3]]))),
        Num::I64 => V::I(i64::from_le_bytes(a)),
        Num::U8 => V::U(u64::from(a[0])),
        Num::U16 => V::U(u64::from(u16::from_le_bytes([a[0], a[1]]))),
        Num::U32 => V::U(u64::from(u32::from_le_bytes([a[0], a[1], a[2], a[3]]))),
        Num::U64 => V::U(u64::from_le_bytes(a)),
        Num::F32 => V::F(f64::from(f32::from_le_bytes([a[0], a[1], a[2], a[3]]))),
        Num::F64 => V::F(f64::from_le_bytes(a)),
    }
}

/// The type's (max, lowest) as little-endian bytes: the starting bounds.
fn sentinels(num: Num) -> (Vec<u8>, Vec<u8>) {
    match num {
        Num::I8 => (i8::MAX.to_le_bytes().into(), i8::MIN.to_le_bytes().into()),
        Num::I16 => (i16::MAX.to_le_bytes().into(), i16::MIN.to_le_bytes().into()),
        Num::I32 => (i32::MAX.to_le_bytes().into(), i32::MIN.to_le_bytes().into()),
        Num::I64 => (i64::MAX.to_le_bytes().into(), i64::MIN.to_le_bytes().into()),
        Num::U8 => (u8::MAX.to_le_bytes().into(), u8::MIN.to_le_bytes().into()),
        Num::U16 => (u16::MAX.to_le_bytes().into(), u16::MIN.to_le_bytes().into()),
        Num::U32 => (u32::MAX.to_le_bytes().into(), u32::MIN.to_le_bytes().into()),
        Num::U64 => (u64::MAX.to_le_bytes().into(), u64::MIN.to_le_bytes().into()),
        Num::F32 => (f32::MAX.to_le_bytes().into(), f32::MIN.to_le_bytes().into()),
        Num::F64 => (f64::MAX.to_le_bytes().into(), f64::MIN.to_le_bytes().into()),
    }
}

/// TileDB's `min = (min < v) ? min : v`: replaced unless strictly less.
fn keeps_min(cur: V, v: V) -> bool {
    cur.partial_cmp(&v) == Some(Ordering::Less)
}

fn keeps_max(cur: V, v: V) -> bool {
    cur.partial_cmp(&v) == Some(Ordering::Greater)
}

/// Adds `v` to the raw sum `sum` of kind `num`; `false` once saturated
/// (TileDB stops summing there).
fn add(num: Num, sum: &mut u64, v: V) -> bool {
    match (num, v) {
        (Num::F32 | Num::F64, V::F(v)) => {
            let s = f64::from_bits(*sum);
            if (s < 0.0) == (v < 0.0) && s.abs() > f64::MAX - v.abs() {
                *sum = if s < 0.0 { f64::MIN } else { f64::MAX }.to_bits();
                return false;
            }
            *sum = (s + v).to_bits();
            true
        }
        (_, V::I(v)) => {
            let s = *sum as i64;
            if s > 0 && v > 0 && s > i64::MAX - v {
                *sum = i64::MAX as u64;
                return false;
            }
            if s < 0 && v < 0 && s < i64::MIN - v {
                *sum = i64::MIN as u64;
                return false;
            }
            *sum = s.wrapping_add(v) as u64;
            true
        }
        (_, V::U(v)) => {
            if *sum > u64::MAX - v {
                *sum = u64::MAX;
                return false;
            }
            *sum += v;
            true
        }
        _ => true,
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
    /// The rules for `field` of `schema`.
    pub fn new(schema: &ArraySchema, field: SchemaField) -> FieldStats {
        let dense = schema.array_type == ArrayType::Dense;
        match field {
            SchemaField::Attribute(i) => {
                let a = &schema.attributes[i];
                FieldStats {
                    datatype: a.datatype,
                    is_dim: false,
                    coords: false,
                    var: a.is_var(),
                    cell_val_num: a.cell_val_num,
                    cell_size: (a.datatype.size() * u64::from(a.cell_val_num)) as usize,
                    nullable: a.nullable,
                    dense,
                }
            }
            SchemaField::Dimension(d) => {
                let dim = &schema.domain.dimensions[d];
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
        }
    }

    /// The rules for footer field `idx` (attributes, `__coords`,
    /// dimensions); `None` beyond them.
    pub fn of_index(schema: &ArraySchema, idx: usize) -> Option<FieldStats> {
        let a = schema.attributes.len();
        let dims = &schema.domain.dimensions;
        if idx < a {
            Some(Self::new(schema, SchemaField::Attribute(idx)))
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
                cell_size: (t.size() * dims.len() as u64) as usize,
                nullable: false,
                dense: schema.array_type == ArrayType::Dense,
            })
        } else if idx - a - 1 < dims.len() {
            Some(Self::new(schema, SchemaField::Dimension(idx - a - 1)))
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
        let cell = |i: usize| -> &[u8] {
            match offsets {
                Some(o) => {
                    let end = o.get(i + 1).map_or(data.len(), |&e| e as usize);
                    data.get(o[i] as usize..end).unwrap_or(&[])
                }
                None => data
                    .get(i * self.cell_size..(i + 1) * self.cell_size)
                    .unwrap_or(&[]),
            }
        };
        let null = |i: usize| validity.is_some_and(|v| v.get(i) == Some(&0));
        let all: Vec<usize>;
        let order = match order {
            Some(o) => o,
            None => {
                all = (0..cells).collect();
                &all
            }
        };
        let mut m = TileMetadata {
            cell_num: cells as u64,
            ..TileMetadata::default()
        };
        if self.is_dim && self.dense {
            return m;
        }
        let min_max = self.min_max();
        if self.nullable {
            m.null_count = if !min_max && self.var {
                0
            } else if !min_max {
                // TileDB counts the whole tile here, written or not.
                validity.map_or(0, |v| v.iter().filter(|&&b| b == 0).count() as u64)
            } else {
                order.iter().filter(|&&i| null(i)).count() as u64
            };
        }
        if min_max && self.chars() {
            let mut bounds: Option<(&[u8], &[u8])> = None;
            for &i in order {
                if null(i) {
                    continue;
                }
                let v = cell(i);
                bounds = Some(match bounds {
                    None => (v, v),
                    Some((lo, hi)) if self.var => (
                        if var_less(v, lo) { v } else { lo },
                        if var_less(hi, v) { v } else { hi },
                    ),
                    Some((lo, hi)) => (
                        if strncmp(lo, v, self.cell_size) == Ordering::Greater {
                            v
                        } else {
                            lo
                        },
                        if strncmp(hi, v, self.cell_size) == Ordering::Less {
                            v
                        } else {
                            hi
                        },
                    ),
                });
            }
            if let Some((lo, hi)) = bounds {
                m.min = lo.to_vec();
                m.max = hi.to_vec();
            }
        }
        let num = Num::of(self.datatype).filter(|_| !self.var && self.cell_val_num == 1);
        if let Some(num) = num {
            if min_max && !self.chars() {
                let (lo, hi) = sentinels(num);
                let (mut lov, mut hiv) = (decode(num, &lo), decode(num, &hi));
                // Where the extremes are; their bytes are copied once.
                let (mut lo_at, mut hi_at) = (None, None);
                for &i in order {
                    if null(i) {
                        continue;
                    }
                    let v = decode(num, cell(i));
                    if !keeps_min(lov, v) {
                        lov = v;
                        lo_at = Some(i);
                    }
                    if !keeps_max(hiv, v) {
                        hiv = v;
                        hi_at = Some(i);
                    }
                }
                m.min = lo_at.map_or(lo, |i| cell(i).to_vec());
                m.max = hi_at.map_or(hi, |i| cell(i).to_vec());
            }
            if self.sum() {
                for &i in order {
                    if !null(i) && !add(num, &mut m.sum, decode(num, cell(i))) {
                        break;
                    }
                }
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
                        b.fixed.resize(b.fixed.len() + f.cell_size, 0);
                    } else {
                        b.fixed.extend_from_slice(v);
                    }
                }
            }
            if tiles.is_empty() {
                mins.fixed = vec![0; tile_num * f.cell_size];
                maxes.fixed = vec![0; tile_num * f.cell_size];
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
        } else if f.var {
            if f.min_max() {
                let mut b: Option<(&[u8], &[u8])> = None;
                for t in kept() {
                    b = Some(match b {
                        None => (&t.min, &t.max),
                        Some((lo, hi)) => (
                            if var_less(&t.min, lo) { &t.min } else { lo },
                            if var_less(hi, &t.max) { &t.max } else { hi },
                        ),
                    });
                }
                if let Some((lo, hi)) = b {
                    s.min = lo.to_vec();
                    s.max = hi.to_vec();
                }
            }
        } else if f.chars() && f.min_max() {
            let n = f.cell_val_num as usize;
            let mut b: Option<(&[u8], &[u8])> = None;
            for t in kept() {
                b = Some(match b {
                    None => (&t.min, &t.max),
                    Some((lo, hi)) => (
                        if strncmp(lo, &t.min, n) == Ordering::Greater {
                            &t.min
                        } else {
                            lo
                        },
                        if strncmp(hi, &t.max, n) == Ordering::Less {
                            &t.max
                        } else {
                            hi
                        },
                    ),
                });
            }
            if let Some((lo, hi)) = b {
                s.min = lo.to_vec();
                s.max = hi.to_vec();
            }
        } else if !(f.dense && f.is_dim) {
            if let Some(num) = Num::of(f.datatype).filter(|_| f.cell_val_num == 1) {
                if f.min_max() {
                    let (mut lo, mut hi) = sentinels(num);
                    for t in kept() {
                        if !keeps_min(decode(num, &lo), decode(num, &t.min)) {
                            lo = t.min.clone();
                        }
                        if !keeps_max(decode(num, &hi), decode(num, &t.max)) {
                            hi = t.max.clone();
                        }
                    }
                    s.min = lo;
                    s.max = hi;
                }
                if f.sum() {
                    let kind = match num {
                        Num::F32 | Num::F64 => |x: u64| V::F(f64::from_bits(x)),
                        Num::U8 | Num::U16 | Num::U32 | Num::U64 => |x: u64| V::U(x),
                        _ => |x: u64| V::I(x as i64),
                    };
                    for t in kept() {
                        if !add(num, &mut s.sum, kind(t.sum)) {
                            break;
                        }
                    }
                }
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
}
