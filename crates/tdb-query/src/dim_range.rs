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

/// Datetimes and times as TileDB stores them: a count of the datatype's
/// unit since 1970-01-01T00:00:00 (numpy's `datetime64` epoch, which
/// TileDB-Py writes through), or since midnight for `TIME_*`. A value
/// between two counts falls in the earlier one (floored, before the epoch
/// too), as numpy's `astype` does.
#[cfg(feature = "chrono")]
mod datetime {
    use super::DimValue;
    use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Timelike};
    use tdb_format::Datatype;

    /// Seconds and nanoseconds in a second, both floored.
    fn count(secs: i64, nanos: u32, datatype: Datatype, date: Option<(i32, u32)>) -> Option<i64> {
        let nanos = i64::from(nanos);
        let sub = |per_second: i64, divisor: i64| {
            secs.checked_mul(per_second)?
                .checked_add(nanos.checked_div(divisor)?)
        };
        let ns = || secs.checked_mul(1_000_000_000)?.checked_add(nanos);
        use Datatype::*;
        Some(match datatype {
            DatetimeYear => i64::from(date?.0).checked_sub(1970)?,
            DatetimeMonth => i64::from(date?.0)
                .checked_sub(1970)?
                .checked_mul(12)?
                .checked_add(i64::from(date?.1))?,
            DatetimeWeek => secs.div_euclid(86_400).div_euclid(7),
            DatetimeDay => secs.div_euclid(86_400),
            DatetimeHr | TimeHr => secs.div_euclid(3_600),
            DatetimeMin | TimeMin => secs.div_euclid(60),
            DatetimeSec | TimeSec => secs,
            DatetimeMs | TimeMs => sub(1_000, 1_000_000)?,
            DatetimeUs | TimeUs => sub(1_000_000, 1_000)?,
            DatetimeNs | TimeNs => ns()?,
            DatetimePs | TimePs => ns()?.checked_mul(1_000)?,
            DatetimeFs | TimeFs => ns()?.checked_mul(1_000_000)?,
            DatetimeAs | TimeAs => ns()?.checked_mul(1_000_000_000)?,
            _ => return None,
        })
    }

    impl DimValue for NaiveDateTime {
        fn encode_as(&self, datatype: Datatype, var: bool) -> Option<Vec<u8>> {
            if !datatype.is_datetime() {
                return None;
            }
            let utc = self.and_utc();
            let date = Some((self.year(), self.month0()));
            let n = count(
                utc.timestamp(),
                utc.timestamp_subsec_nanos(),
                datatype,
                date,
            )?;
            n.encode_as(datatype, var)
        }

        fn describe(&self) -> String {
            self.to_string()
        }
    }

    impl<Tz: TimeZone> DimValue for DateTime<Tz> {
        fn encode_as(&self, datatype: Datatype, var: bool) -> Option<Vec<u8>> {
            self.naive_utc().encode_as(datatype, var)
        }

        fn describe(&self) -> String {
            self.naive_utc().to_string()
        }
    }

    impl DimValue for NaiveDate {
        fn encode_as(&self, datatype: Datatype, var: bool) -> Option<Vec<u8>> {
            self.and_time(NaiveTime::MIN).encode_as(datatype, var)
        }

        fn describe(&self) -> String {
            self.to_string()
        }
    }

    impl DimValue for NaiveTime {
        fn encode_as(&self, datatype: Datatype, var: bool) -> Option<Vec<u8>> {
            if !datatype.is_time() {
                return None;
            }
            let secs = i64::from(self.num_seconds_from_midnight());
            // A leap second's nanoseconds run past 10⁹: it counts as the
            // second before.
            let nanos = self.nanosecond().min(999_999_999);
            count(secs, nanos, datatype, None)?.encode_as(datatype, var)
        }

        fn describe(&self) -> String {
            self.to_string()
        }
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

    /// numpy's counts (`np.datetime64(t).astype("datetime64[unit]")`), for
    /// a date after the epoch and one before it, where counts floor.
    #[cfg(feature = "chrono")]
    #[test]
    fn datetimes_count_their_unit_since_the_epoch() {
        use chrono::{NaiveDate, NaiveTime};
        let count = |t: &dyn DimValue, dt: Datatype| {
            let b = t.encode_as(dt, false).unwrap();
            i64::from_le_bytes(b.try_into().unwrap())
        };
        let t = NaiveDate::from_ymd_opt(2005, 3, 4)
            .unwrap()
            .and_hms_nano_opt(5, 6, 7, 891_234_567)
            .unwrap();
        let expect = [
            (Datatype::DatetimeYear, 35),
            (Datatype::DatetimeMonth, 422),
            (Datatype::DatetimeWeek, 1835),
            (Datatype::DatetimeDay, 12846),
            (Datatype::DatetimeHr, 308309),
            (Datatype::DatetimeMin, 18498546),
            (Datatype::DatetimeSec, 1109912767),
            (Datatype::DatetimeMs, 1109912767891),
            (Datatype::DatetimeUs, 1109912767891234),
            (Datatype::DatetimeNs, 1109912767891234567),
        ];
        for (dt, n) in expect {
            assert_eq!(count(&t, dt), n, "{dt:?}");
        }
        // 1969-12-31T23:59:59.5: every unit's count is -1.
        let before = NaiveDate::from_ymd_opt(1969, 12, 31)
            .unwrap()
            .and_hms_milli_opt(23, 59, 59, 500)
            .unwrap();
        for dt in [
            Datatype::DatetimeYear,
            Datatype::DatetimeMonth,
            Datatype::DatetimeWeek,
            Datatype::DatetimeDay,
            Datatype::DatetimeHr,
            Datatype::DatetimeMin,
            Datatype::DatetimeSec,
        ] {
            assert_eq!(count(&before, dt), -1, "{dt:?}");
        }
        assert_eq!(count(&before, Datatype::DatetimeMs), -500);
        // Beyond what an i64 of attoseconds holds (about 9.2 s).
        assert!(t.encode_as(Datatype::DatetimeAs, false).is_none());
        let noon = NaiveTime::from_hms_milli_opt(12, 0, 1, 250).unwrap();
        assert_eq!(count(&noon, Datatype::TimeMs), 43_201_250);
        assert_eq!(count(&noon, Datatype::TimeHr), 12);
        assert!(noon.encode_as(Datatype::DatetimeDay, false).is_none());
        assert!(t.encode_as(Datatype::Int64, false).is_none());
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
