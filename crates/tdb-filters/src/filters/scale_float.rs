//! SCALE_FLOAT: floats stored as signed integers of `byte_width` bytes,
//! `round((x - offset) / scale)`, read back as `scale * n + offset`.
//!
//! Metadata (prepended to the input metadata parts): `u32` part count, then
//! per data part its `u32` size after conversion. Data: the converted part.
//!
//! The input is read as `f32` or `f64` by its datatype's *size* (TileDB
//! dispatches on the size alone, so a 4- or 8-byte integer is taken for a
//! float). Forward works in the input's precision with `offset` and `scale`
//! cast to it; `round` halves away from zero; reverse works in `f64`. The
//! conversion is lossy: while `(x - offset) / scale` fits the integer,
//! `|x - reverse(forward(x))| <= scale / 2` plus a few ulps of rounding (for
//! `f32` input also the error of `scale` and `offset` cast to `f32`).
//!
//! Out of range values and NaN follow what TileDB's C++ cast compiles to on
//! x86-64 (`cvttsd2si`): the 64-bit conversion gives `i64::MIN`; narrower
//! widths convert to `i32` (`i32::MIN` when out of range) and keep the low
//! bytes. So a NaN fill value becomes `i32::MIN`'s low bytes, like TileDB's
//! x86-64 builds write it (ARM builds saturate instead).
//!
//! Only single-part data is taken: with several parts TileDB's forward writes
//! every value after a part's first into the previous part's buffer, and its
//! reverse reads every part from the same offset, so no multi-part tile of
//! TileDB's is readable.

use crate::buffer::{to_u32, MetaReader, Parts, Stage, Unfiltered};
use crate::{FilterError, Result};
use tdb_format::Datatype;

const NAME: &str = tdb_format::FilterType::ScaleFloat.name();

/// The float the input is read as, by its datatype's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Float {
    F32,
    F64,
}

impl Float {
    fn of(st: &Stage<'_>) -> Option<Float> {
        match st.datatype.size() {
            4 => Some(Float::F32),
            8 => Some(Float::F64),
            _ => None,
        }
    }

    fn bytes(self) -> usize {
        match self {
            Float::F32 => 4,
            Float::F64 => 8,
        }
    }
}

/// The options, checked.
#[derive(Debug, Clone, Copy)]
struct Scaling {
    float: Float,
    scale: f64,
    offset: f64,
    width: usize,
}

impl Scaling {
    fn new(st: &Stage<'_>, scale: f64, offset: f64, byte_width: u64) -> Result<Self> {
        let float = Float::of(st).ok_or_else(|| {
            FilterError::bad_input(
                NAME,
                format!(
                    "{} values are {} bytes, not a float's 4 or 8",
                    st.datatype.name(),
                    st.datatype.size()
                ),
            )
        })?;
        let width = match byte_width {
            1 | 2 | 4 | 8 => byte_width as usize,
            _ => {
                return Err(FilterError::bad_input(
                    NAME,
                    format!("byte width {byte_width} is not 1, 2, 4 or 8"),
                ))
            }
        };
        Ok(Scaling {
            float,
            scale,
            offset,
            width,
        })
    }

    /// One float to its stored integer's little-endian bytes.
    fn encode(&self, value: &[u8], out: &mut Vec<u8>) {
        let q = match self.float {
            Float::F32 => {
                let x = f32::from_le_bytes(value.try_into().unwrap_or_default());
                f64::from(((x - self.offset as f32) / self.scale as f32).round())
            }
            Float::F64 => {
                let x = f64::from_le_bytes(value.try_into().unwrap_or_default());
                ((x - self.offset) / self.scale).round()
            }
        };
        let n = x86_truncate(q, self.width);
        let bytes = n.to_le_bytes();
        out.extend_from_slice(bytes.get(..self.width).unwrap_or(&bytes));
    }

    /// One stored integer back to its float's little-endian bytes.
    fn decode(&self, stored: &[u8], out: &mut Vec<u8>) {
        let mut le = [0u8; 8];
        if let Some(low) = le.get_mut(..stored.len()) {
            low.copy_from_slice(stored);
        }
        let n = match self.width {
            1 => i64::from(i8::from_le_bytes([le[0]])),
            2 => i64::from(i16::from_le_bytes([le[0], le[1]])),
            4 => i64::from(i32::from_le_bytes([le[0], le[1], le[2], le[3]])),
            _ => i64::from_le_bytes(le),
        };
        match self.float {
            Float::F32 => {
                let x = f64::from(n as f32);
                out.extend_from_slice(&((self.scale * x + self.offset) as f32).to_le_bytes());
            }
            Float::F64 => {
                out.extend_from_slice(&(self.scale * n as f64 + self.offset).to_le_bytes());
            }
        }
    }
}

/// `static_cast` of a rounded float to a signed integer of `width` bytes as
/// x86-64 compiles it: `cvttsd2si` to 64 bits for 8 bytes, else to 32 bits
/// and truncated; NaN and out of range give the "integer indefinite" value.
fn x86_truncate(q: f64, width: usize) -> i64 {
    // 2^63 and 2^31 are exact in f64; NaN is in neither range.
    const I64: std::ops::Range<f64> = -9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0;
    const I32: std::ops::Range<f64> = -2_147_483_648.0..2_147_483_648.0;
    if width == 8 {
        if I64.contains(&q) {
            q as i64
        } else {
            i64::MIN
        }
    } else if I32.contains(&q) {
        i64::from(q as i32)
    } else {
        i64::from(i32::MIN)
    }
}

/// Forward over one chunk.
pub(crate) fn forward(
    st: &Stage<'_>,
    scale: f64,
    offset: f64,
    byte_width: u64,
    metadata: Parts,
    data: Parts,
) -> Result<(Parts, Parts)> {
    let s = Scaling::new(st, scale, offset, byte_width)?;
    if data.count() > 1 {
        return Err(FilterError::bad_input(
            NAME,
            format!(
                "{} data parts: TileDB cannot read back float scaling of more than one",
                data.count()
            ),
        ));
    }
    let mut own = Vec::with_capacity(8);
    own.extend_from_slice(&(data.count() as u32).to_le_bytes());
    let mut out = Parts::new();
    for part in data.iter() {
        if part.len().checked_rem(s.float.bytes()) != Some(0) {
            return Err(FilterError::bad_input(
                NAME,
                format!(
                    "a part of {} bytes is not whole {}-byte floats",
                    part.len(),
                    s.float.bytes()
                ),
            ));
        }
        let floats = part.len().checked_div(s.float.bytes()).unwrap_or(0);
        let size = floats.saturating_mul(s.width);
        let size32 = to_u32(NAME, size, "a part")?;
        own.extend_from_slice(&size32.to_le_bytes());
        let mut converted = Vec::with_capacity(size);
        for value in part.chunks_exact(s.float.bytes()) {
            s.encode(value, &mut converted);
        }
        out.push(converted);
    }
    let mut metadata = metadata;
    metadata.prepend(own);
    Ok((metadata, out))
}

/// Reverse over one chunk.
pub(crate) fn reverse(
    st: &Stage<'_>,
    scale: f64,
    offset: f64,
    byte_width: u64,
    metadata: &[u8],
    data: &[u8],
    out: &mut Unfiltered,
) -> Result<()> {
    let s = Scaling::new(st, scale, offset, byte_width)
        .map_err(|e| FilterError::corrupt(NAME, e.to_string()))?;
    let mut meta = MetaReader::new(NAME, metadata);
    let parts = meta.u32("part count")?;
    if parts > 1 {
        return Err(FilterError::corrupt(
            NAME,
            format!("{parts} parts: TileDB writes no readable multi-part float scaling"),
        ));
    }
    let size = if parts == 1 {
        meta.u32("part size")? as usize
    } else {
        0
    };
    if size != data.len() || size.checked_rem(s.width) != Some(0) {
        return Err(FilterError::corrupt(
            NAME,
            format!(
                "a part of {size} bytes of {}-byte integers, {} data bytes",
                s.width,
                data.len()
            ),
        ));
    }
    let values = size.checked_div(s.width).unwrap_or(0);
    out.data.reserve(values.saturating_mul(s.float.bytes()));
    for stored in data.chunks_exact(s.width) {
        s.decode(stored, &mut out.data);
    }
    out.pass_on_metadata(meta.rest());
    Ok(())
}

/// The integer type float scaling writes (TileDB's `output_datatype`): the
/// signed integer of `byte_width` bytes. TileDB throws on any other width;
/// here the input type is kept and forward and reverse refuse the width.
pub(crate) fn output_datatype(input: Datatype, byte_width: u64) -> Datatype {
    match byte_width {
        1 => Datatype::Int8,
        2 => Datatype::Int16,
        4 => Datatype::Int32,
        8 => Datatype::Int64,
        _ => input,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tdb_format::FormatVersion;

    fn stage(t: Datatype) -> Stage<'static> {
        Stage::new(t, FormatVersion::new(22).unwrap())
    }

    fn fwd(
        t: Datatype,
        scale: f64,
        offset: f64,
        w: u64,
        data: &[u8],
    ) -> Result<(Vec<u8>, Vec<u8>)> {
        forward(
            &stage(t),
            scale,
            offset,
            w,
            Parts::new(),
            Parts::one(data.to_vec()),
        )
        .map(|(m, d)| (m.concat(), d.concat()))
    }

    fn back(t: Datatype, scale: f64, offset: f64, w: u64, m: &[u8], d: &[u8]) -> Result<Vec<u8>> {
        let mut out = Unfiltered::default();
        reverse(&stage(t), scale, offset, w, m, d, &mut out).map(|()| out.data)
    }

    fn f64s(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn layout_and_rounding() {
        let data = f64s(&[0.36, -0.83, 2.5, -2.5, 0.005]);
        let (m, d) = fwd(Datatype::Float64, 0.01, 0.0, 4, &data).unwrap();
        assert_eq!(m, [1, 0, 0, 0, 20, 0, 0, 0]);
        let ints: Vec<i32> = d
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        // Half away from zero, after the division's own rounding.
        assert_eq!(ints, [36, -83, 250, -250, 1]);
        let back = back(Datatype::Float64, 0.01, 0.0, 4, &m, &d).unwrap();
        // -83 * 0.01 is not the double nearest -0.83 (TileDB reads the same).
        assert_eq!(back, f64s(&[0.36, -0.8300000000000001, 2.5, -2.5, 0.01]));
    }

    #[test]
    fn every_width_and_float() {
        for w in [1u64, 2, 4, 8] {
            let (m, d) = fwd(Datatype::Float32, 0.5, 10.0, w, &f32s(&[10.0, 12.5, -20.0])).unwrap();
            assert_eq!(d.len(), 3 * w as usize);
            assert_eq!(&m[4..], &(3 * w as u32).to_le_bytes());
            let x = back(Datatype::Float32, 0.5, 10.0, w, &m, &d).unwrap();
            assert_eq!(x, f32s(&[10.0, 12.5, -20.0]), "width {w}");
            let (m, d) = fwd(Datatype::Float64, 0.5, 10.0, w, &f64s(&[10.0, 12.5, -20.0])).unwrap();
            let x = back(Datatype::Float64, 0.5, 10.0, w, &m, &d).unwrap();
            assert_eq!(x, f64s(&[10.0, 12.5, -20.0]), "width {w}");
        }
    }

    #[test]
    fn out_of_range_and_nan_follow_x86() {
        let data = f64s(&[f64::NAN, 1e300, -1e300, 300.0, 40000.0, 3e9]);
        let (_, d) = fwd(Datatype::Float64, 1.0, 0.0, 8, &data).unwrap();
        let v: Vec<i64> = d
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(v, [i64::MIN, i64::MIN, i64::MIN, 300, 40000, 3_000_000_000]);
        let (_, d) = fwd(Datatype::Float64, 1.0, 0.0, 4, &data).unwrap();
        let v: Vec<i32> = d
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(v, [i32::MIN, i32::MIN, i32::MIN, 300, 40000, i32::MIN]);
        let (_, d) = fwd(Datatype::Float64, 1.0, 0.0, 1, &data).unwrap();
        assert_eq!(d, [0, 0, 0, 44, 0x40, 0]);
        let (_, d) = fwd(Datatype::Float64, 1.0, 0.0, 2, &data).unwrap();
        assert_eq!(&d[6..], &[44, 1, 0x40, 0x9c, 0, 0]);
    }

    #[test]
    fn size_decides_the_float_type() {
        // An INT64 input is read as f64 bits, as TileDB does.
        let (_, d) = fwd(Datatype::Int64, 1.0, 0.0, 8, &f64s(&[7.0])).unwrap();
        assert_eq!(d, 7i64.to_le_bytes());
        for t in [Datatype::Int8, Datatype::UInt16, Datatype::Char] {
            assert!(matches!(
                fwd(t, 1.0, 0.0, 8, &[0; 8]),
                Err(FilterError::BadInput { .. })
            ));
        }
        assert!(fwd(Datatype::Float64, 1.0, 0.0, 3, &[0; 8]).is_err());
        assert!(fwd(Datatype::Float64, 1.0, 0.0, 8, &[0; 7]).is_err());
    }

    #[test]
    fn output_datatype_is_the_signed_width() {
        assert_eq!(output_datatype(Datatype::Float64, 1), Datatype::Int8);
        assert_eq!(output_datatype(Datatype::Float64, 2), Datatype::Int16);
        assert_eq!(output_datatype(Datatype::Float32, 4), Datatype::Int32);
        assert_eq!(output_datatype(Datatype::Float32, 8), Datatype::Int64);
        assert_eq!(output_datatype(Datatype::Float32, 3), Datatype::Float32);
    }

    #[test]
    fn parts() {
        let st = stage(Datatype::Float64);
        let (m, d) = forward(
            &st,
            1.0,
            0.0,
            2,
            Parts::one(vec![7]),
            Parts::one(f64s(&[3.0])),
        )
        .unwrap();
        assert_eq!(m.count(), 2);
        assert_eq!(m.concat(), [1, 0, 0, 0, 2, 0, 0, 0, 7]);
        assert_eq!(d, Parts::one(vec![3, 0]));
        let mut out = Unfiltered::default();
        reverse(
            &st,
            1.0,
            0.0,
            2,
            &[1, 0, 0, 0, 2, 0, 0, 0, 7],
            &[3, 0],
            &mut out,
        )
        .unwrap();
        assert_eq!((out.metadata, out.data), (vec![7], f64s(&[3.0])));

        let mut two = Parts::one(f64s(&[1.0]));
        two.push(f64s(&[2.0]));
        assert!(forward(&st, 1.0, 0.0, 2, Parts::new(), two).is_err());
        // No parts at all, and an empty part.
        let (m, d) = forward(&st, 1.0, 0.0, 2, Parts::new(), Parts::new()).unwrap();
        assert_eq!((m.concat(), d.count()), (vec![0, 0, 0, 0], 0));
        assert!(back(Datatype::Float64, 1.0, 0.0, 2, &[0; 4], &[])
            .unwrap()
            .is_empty());
        let (m, d) = fwd(Datatype::Float64, 1.0, 0.0, 2, &[]).unwrap();
        assert_eq!((m, d), (vec![1, 0, 0, 0, 0, 0, 0, 0], vec![]));
    }

    #[test]
    fn corrupt_input_is_an_error() {
        let (m, d) = fwd(Datatype::Float32, 0.1, 0.0, 2, &f32s(&[1.0, 2.0, 3.0])).unwrap();
        for n in 0..m.len() {
            assert!(
                back(Datatype::Float32, 0.1, 0.0, 2, &m[..n], &d).is_err(),
                "meta {n}"
            );
        }
        for n in 0..d.len() {
            assert!(
                back(Datatype::Float32, 0.1, 0.0, 2, &m, &d[..n]).is_err(),
                "data {n}"
            );
        }
        let mut two = m.clone();
        two[0] = 2;
        assert!(back(Datatype::Float32, 0.1, 0.0, 2, &two, &d).is_err());
        assert!(back(Datatype::Float32, 0.1, 0.0, 5, &m, &d).is_err());
        assert!(back(Datatype::Int8, 0.1, 0.0, 2, &m, &d).is_err());
    }

    proptest! {
        #[test]
        fn lossy_bound_f64(x in -1e6f64..1e6, scale in 1e-3f64..1e3, offset in -1e3f64..1e3,
                           w in prop_oneof![Just(4u64), Just(8u64)]) {
            prop_assume!(w == 8 || ((x - offset) / scale).abs() < 2e9);
            let (m, d) = fwd(Datatype::Float64, scale, offset, w, &x.to_le_bytes()).unwrap();
            let r = f64::from_le_bytes(back(Datatype::Float64, scale, offset, w, &m, &d)
                .unwrap().try_into().unwrap());
            let slop = 1e-14 * (x.abs() + offset.abs() + scale);
            prop_assert!((x - r).abs() <= scale / 2.0 + slop, "{x} -> {r}");
        }

        #[test]
        fn lossy_bound_f32(x in -1e4f32..1e4, scale in 1e-2f64..1e2, offset in -1e2f64..1e2) {
            let (m, d) = fwd(Datatype::Float32, scale, offset, 4, &x.to_le_bytes()).unwrap();
            let r = f32::from_le_bytes(back(Datatype::Float32, scale, offset, 4, &m, &d)
                .unwrap().try_into().unwrap());
            let slop = 1e-6 * (f64::from(x.abs()) + offset.abs() + scale);
            prop_assert!(f64::from((x - r).abs()) <= scale / 2.0 + slop, "{x} -> {r}");
        }

        #[test]
        fn integers_round_trip_exactly(n in any::<i16>(), scale in 1e-3f64..1e3, offset in -1e3f64..1e3) {
            // What reverse writes, forward reads back to the same integer.
            let stored = n.to_le_bytes();
            let m = [1, 0, 0, 0, 2, 0, 0, 0];
            let x = back(Datatype::Float64, scale, offset, 2, &m, &stored).unwrap();
            let (_, d) = fwd(Datatype::Float64, scale, offset, 2, &x).unwrap();
            prop_assert_eq!(d, stored.to_vec());
        }
    }
}
