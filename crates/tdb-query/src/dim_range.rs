//! Typed subarray ranges: `1..=4` on an integer dimension, `"a"..="k"` on a
//! string one, checked against the dimension's datatype when added, so a
//! user never encodes little-endian bounds by hand.

use crate::{QueryError, ReadSpec, Result, Subarray};
use std::ops::RangeInclusive;
use tdb_format::Datatype;
use tdb_schema::{ArraySchema, Dimension, Range};

/// A value of a dimension or a dimension label: integers (also datetimes
/// and times, as raw counts), floats, strings.
pub trait DimValue {
    /// The value as a field of `datatype` stores it (`var`: a var-size
    /// field); `None` where that datatype cannot hold it.
    fn encode_as(&self, datatype: Datatype, var: bool) -> Option<Vec<u8>>;

    /// A description of the value for messages.
    fn describe(&self) -> String;

    /// The value as `dim` stores it; an error where the dimension's
    /// datatype cannot hold it.
    fn encode(&self, dim: &Dimension) -> Result<Vec<u8>> {
        self.encode_as(dim.datatype, dim.is_var())
            .ok_or_else(|| mismatch(dim, self.describe()))
    }
}

fn mismatch(dim: &Dimension, what: impl std::fmt::Display) -> QueryError {
    QueryError::Subarray {
        dim: dim.name.clone(),
        reason: format!("{what} is no value of a {} dimension", dim.datatype),
    }
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl DimValue for $t {
            fn encode_as(&self, datatype: Datatype, _var: bool) -> Option<Vec<u8>> {
                let v = i128::from(*self);
                let (lo, hi) = datatype.int_limits()?;
                if v < lo || v > hi {
                    return None;
                }
                Some(v.to_le_bytes().get(..datatype.size() as usize)?.to_vec())
            }

            fn describe(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
int_value!(i8, i16, i32, i64, u8, u16, u32, u64);

impl DimValue for f64 {
    fn encode_as(&self, datatype: Datatype, _var: bool) -> Option<Vec<u8>> {
        match datatype {
            Datatype::Float64 => Some(self.to_le_bytes().to_vec()),
            Datatype::Float32 if !self.is_finite() || self.abs() <= f64::from(f32::MAX) => {
                Some((*self as f32).to_le_bytes().to_vec())
            }
            _ => None,
        }
    }

    fn describe(&self) -> String {
        self.to_string()
    }
}

impl DimValue for f32 {
    fn encode_as(&self, datatype: Datatype, var: bool) -> Option<Vec<u8>> {
        f64::from(*self).encode_as(datatype, var)
    }

    fn describe(&self) -> String {
        self.to_string()
    }
}

impl DimValue for &str {
    fn encode_as(&self, datatype: Datatype, var: bool) -> Option<Vec<u8>> {
        (datatype.is_string() && var).then(|| self.as_bytes().to_vec())
    }

    fn describe(&self) -> String {
        format!("{self:?}")
    }
}

impl DimValue for String {
    fn encode_as(&self, datatype: Datatype, var: bool) -> Option<Vec<u8>> {
        self.as_str().encode_as(datatype, var)
    }

    fn describe(&self) -> String {
        self.as_str().describe()
    }
}

/// What a range of one dimension (or dimension label) is given as:
/// `lo..=hi`, or one value.
pub trait DimRange {
    /// The bounds as a field of `datatype` stores them (`var`: a var-size
    /// field); `Err` with the value that does not fit.
    fn range_as(&self, datatype: Datatype, var: bool) -> std::result::Result<Range, String>;

    /// The range as `dim` stores its bounds.
    fn range(&self, dim: &Dimension) -> Result<Range> {
        self.range_as(dim.datatype, dim.is_var())
            .map_err(|what| mismatch(dim, what))
    }
}

fn encoded<T: DimValue>(
    v: &T,
    datatype: Datatype,
    var: bool,
) -> std::result::Result<Vec<u8>, String> {
    v.encode_as(datatype, var).ok_or_else(|| v.describe())
}

impl<T: DimValue> DimRange for RangeInclusive<T> {
    fn range_as(&self, datatype: Datatype, var: bool) -> std::result::Result<Range, String> {
        Ok(Range::from_bounds(
            &encoded(self.start(), datatype, var)?,
            &encoded(self.end(), datatype, var)?,
            var,
        ))
    }
}

impl<T: DimValue> DimRange for T {
    fn range_as(&self, datatype: Datatype, var: bool) -> std::result::Result<Range, String> {
        let v = encoded(self, datatype, var)?;
        Ok(Range::from_bounds(&v, &v, var))
    }
}

impl Subarray {
    /// Adds `range` to dimension `dim` (by name) of `schema`, typed:
    /// `sub.add(schema, "x", 1..=4)?`, `sub.add(schema, "s", "a"..="k")?`.
    pub fn add(
        &mut self,
        schema: &ArraySchema,
        dim: &str,
        range: impl DimRange,
    ) -> Result<&mut Self> {
        let dims = &schema.domain.dimensions;
        let (i, d) = dims
            .iter()
            .enumerate()
            .find(|(_, d)| d.name == dim)
            .ok_or_else(|| QueryError::Subarray {
                dim: dim.to_owned(),
                reason: format!(
                    "no such dimension (there are: {})",
                    dims.iter()
                        .map(|d| d.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })?;
        if self.dim_num() == 0 {
            *self = Subarray::new(dims.len());
        }
        let r = range.range(d)?;
        Ok(self.add_range(i, r))
    }
}

impl Subarray {
    /// Adds `range` of values of dimension label `label` of `schema`,
    /// typed: `sub.add_label(schema, "time", 0.5..=2.0)?`.
    pub fn add_label(
        &mut self,
        schema: &ArraySchema,
        label: &str,
        range: impl DimRange,
    ) -> Result<&mut Self> {
        let l = crate::label::find(schema, label)?;
        let var = l.cell_val_num == tdb_schema::VAR_NUM;
        let r = range
            .range_as(l.datatype, var)
            .map_err(|what| QueryError::Label {
                label: label.to_owned(),
                reason: format!("{what} is no value of a {} label", l.datatype),
            })?;
        Ok(self.add_label_range(label, r))
    }
}

impl ReadSpec {
    /// The same read with `range` added to dimension `dim` of `schema`
    /// (typed; see [`Subarray::add`]).
    pub fn range(mut self, schema: &ArraySchema, dim: &str, range: impl DimRange) -> Result<Self> {
        self.subarray.add(schema, dim, range)?;
        Ok(self)
    }

    /// The same read with `range` of values of dimension label `label`
    /// (typed; see [`Subarray::add_label`]).
    pub fn label_range(
        mut self,
        schema: &ArraySchema,
        label: &str,
        range: impl DimRange,
    ) -> Result<Self> {
        self.subarray.add_label(schema, label, range)?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_format::ArrayType;
    use tdb_schema::{AttributeBuilder, DimensionBuilder};

    fn schema() -> ArraySchema {
        ArraySchema::builder(ArrayType::Sparse)
            .dimension(DimensionBuilder::range("x", 0i16..=99).tile_extent(10i16))
            .dimension(DimensionBuilder::string("s"))
            .dimension(DimensionBuilder::range("f", 0.0f32..=1.0).tile_extent(0.5f32))
            .attribute(AttributeBuilder::new("a", Datatype::Int32))
            .build()
            .unwrap()
    }

    #[test]
    fn typed_ranges_are_the_dimensions_bytes() {
        let s = schema();
        let spec = ReadSpec::new(["a"])
            .range(&s, "x", 3..=7)
            .unwrap()
            .range(&s, "x", 9u8)
            .unwrap()
            .range(&s, "s", "apple"..="kiwi")
            .unwrap()
            .range(&s, "f", 0.25..=0.5)
            .unwrap();
        let x = spec.subarray.ranges(0);
        assert_eq!(x.len(), 2);
        assert_eq!(
            x[0].bounds(),
            (&3i16.to_le_bytes()[..], &7i16.to_le_bytes()[..])
        );
        assert_eq!(
            x[1].bounds(),
            (&9i16.to_le_bytes()[..], &9i16.to_le_bytes()[..])
        );
        assert_eq!(
            spec.subarray.ranges(1)[0].bounds(),
            (&b"apple"[..], &b"kiwi"[..])
        );
        assert_eq!(
            spec.subarray.ranges(2)[0].bounds(),
            (&0.25f32.to_le_bytes()[..], &0.5f32.to_le_bytes()[..])
        );
    }

    #[test]
    fn values_a_dimension_cannot_hold_are_errors_that_say_so() {
        let s = schema();
        let e = |r: std::result::Result<ReadSpec, QueryError>| r.unwrap_err().to_string();
        assert!(e(ReadSpec::new(["a"]).range(&s, "x", 40_000..=40_001))
            .contains("40000 is no value of a INT16"));
        assert!(
            e(ReadSpec::new(["a"]).range(&s, "x", "a"..="b")).contains("is no value of a INT16")
        );
        assert!(e(ReadSpec::new(["a"]).range(&s, "s", 1..=2)).contains("STRING_ASCII"));
        assert!(e(ReadSpec::new(["a"]).range(&s, "nope", 1)).contains("there are: x, s, f"));
    }
}
