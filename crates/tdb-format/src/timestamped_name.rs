//! Timestamped names of all three eras: `__uuid_t1[_t2]` (format v1–2),
//! `__t1_t2_uuid` (v3–4, and schema, metadata and commit names ever since)
//! and `__t1_t2_uuid_v` (v5+ fragments).
//!
//! Timestamps are milliseconds since the Unix epoch. TileDB orders fragments
//! by timestamp range and then by name, which [`Ord`] reproduces.

use crate::{FormatError, FormatVersion, Result};
use std::cmp::Ordering;
use std::fmt;

/// Which of the three name layouts a name uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NameEra {
    /// `__uuid_t1[_t2]`, written by TileDB 1.4–1.5.
    UuidFirst,
    /// `__t1_t2_uuid`.
    TimesFirst,
    /// `__t1_t2_uuid_v`, with the writer's format version.
    Versioned,
}

/// A parsed timestamped name (without any file extension).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TimestampedName {
    /// Start of the timestamp range (ms since the epoch).
    pub t1: u64,
    /// End of the timestamp range (equal to `t1` for a single write).
    pub t2: u64,
    /// The unique part, as written (32 hex digits in every known writer).
    pub uuid: String,
    /// The format version carried by `Versioned` names.
    pub version: Option<u32>,
    /// The layout the name used.
    pub era: NameEra,
}

fn bad(name: &str, reason: &'static str) -> FormatError {
    FormatError::BadTimestampedName {
        name: name.to_owned(),
        reason,
    }
}

fn timestamp(name: &str, part: &str) -> Result<u64> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(name, "timestamp is not a decimal number"));
    }
    part.parse()
        .map_err(|_| bad(name, "timestamp does not fit 64 bits"))
}

fn is_uuid(part: &str) -> bool {
    let hex = part.bytes().filter(|b| b.is_ascii_hexdigit()).count();
    hex == 32 && part.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

impl TimestampedName {
    /// Parses a name, with or without a trailing `.ext` (`.ok`, `.wrt`, ...).
    pub fn parse(name: &str) -> Result<Self> {
        let stem = match name.rfind('.') {
            Some(i) => &name[..i],
            None => name,
        };
        let rest = stem
            .strip_prefix("__")
            .ok_or_else(|| bad(name, "does not start with __"))?;
        let parts: Vec<&str> = rest.split('_').collect();
        let (t1, t2, uuid, version, era) = match parts.as_slice() {
            [u, t] if is_uuid(u) => {
                let t = timestamp(name, t)?;
                (t, t, *u, None, NameEra::UuidFirst)
            }
            [u, a, b] if is_uuid(u) => (
                timestamp(name, a)?,
                timestamp(name, b)?,
                *u,
                None,
                NameEra::UuidFirst,
            ),
            [a, b, u] if is_uuid(u) => (
                timestamp(name, a)?,
                timestamp(name, b)?,
                *u,
                None,
                NameEra::TimesFirst,
            ),
            [a, b, u, v] if is_uuid(u) => {
                let v: u32 = v
                    .parse()
                    .ok()
                    .filter(|_| v.bytes().all(|c| c.is_ascii_digit()))
                    .ok_or_else(|| bad(name, "format version is not a decimal number"))?;
                (
                    timestamp(name, a)?,
                    timestamp(name, b)?,
                    *u,
                    Some(v),
                    NameEra::Versioned,
                )
            }
            _ => return Err(bad(name, "fields are not t1, t2 and a 32-hex-digit uuid")),
        };
        if t1 > t2 {
            return Err(bad(name, "start timestamp is after end timestamp"));
        }
        Ok(TimestampedName {
            t1,
            t2,
            uuid: uuid.to_owned(),
            version,
            era,
        })
    }

    /// A fresh name as TileDB 2.x writes it, with a random uuid.
    /// Pass `Some(version)` for fragments, `None` for schemas, metadata and
    /// commit-folder files.
    pub fn generate(t1: u64, t2: u64, version: Option<FormatVersion>) -> Result<Self> {
        if t1 > t2 {
            return Err(FormatError::Invalid {
                field: "timestamp range",
                reason: format!("start {t1} is after end {t2}"),
            });
        }
        let uuid = crate::names::random_label();
        let (version, era) = match version {
            Some(v) => (Some(v.get()), NameEra::Versioned),
            None => (None, NameEra::TimesFirst),
        };
        Ok(TimestampedName {
            t1,
            t2,
            uuid,
            version,
            era,
        })
    }

    /// The timestamp range `[t1, t2]`.
    pub fn timestamp_range(&self) -> (u64, u64) {
        (self.t1, self.t2)
    }

    /// The format version this name says its fragment was written with:
    /// the `_v` suffix, else what its era implies as TileDB infers it
    /// (2 for `__uuid_t`, 4 for `__t1_t2_uuid`; a v3 fragment's true
    /// version is in its metadata file).
    pub fn implied_format_version(&self) -> u32 {
        match self.era {
            NameEra::Versioned => self.version.unwrap_or(5),
            NameEra::TimesFirst => 4,
            NameEra::UuidFirst => 2,
        }
    }
}

impl fmt::Display for TimestampedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.era {
            NameEra::UuidFirst if self.t1 == self.t2 => write!(f, "__{}_{}", self.uuid, self.t1),
            NameEra::UuidFirst => write!(f, "__{}_{}_{}", self.uuid, self.t1, self.t2),
            NameEra::TimesFirst => write!(f, "__{}_{}_{}", self.t1, self.t2, self.uuid),
            NameEra::Versioned => match self.version {
                Some(v) => write!(f, "__{}_{}_{}_{}", self.t1, self.t2, self.uuid, v),
                None => write!(f, "__{}_{}_{}", self.t1, self.t2, self.uuid),
            },
        }
    }
}

impl Ord for TimestampedName {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.t1, self.t2)
            .cmp(&(other.t1, other.t2))
            .then_with(|| self.to_string().cmp(&other.to_string()))
    }
}

impl PartialOrd for TimestampedName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn three_eras() {
        let a = TimestampedName::parse(&format!("__{U}_17")).unwrap();
        assert_eq!((a.t1, a.t2, a.era), (17, 17, NameEra::UuidFirst));
        let b = TimestampedName::parse(&format!("__{U}_1_2")).unwrap();
        assert_eq!((b.t1, b.t2, b.era), (1, 2, NameEra::UuidFirst));
        let c = TimestampedName::parse(&format!("__3_4_{U}.ok")).unwrap();
        assert_eq!(
            (c.t1, c.t2, c.era, c.version),
            (3, 4, NameEra::TimesFirst, None)
        );
        let d = TimestampedName::parse(&format!("__5_5_{U}_22.wrt")).unwrap();
        assert_eq!((d.t1, d.version, d.era), (5, Some(22), NameEra::Versioned));
    }

    #[test]
    fn display_round_trips() {
        for n in [
            format!("__{U}_17"),
            format!("__{U}_1_2"),
            format!("__3_4_{U}"),
            format!("__5_6_{U}_22"),
        ] {
            assert_eq!(TimestampedName::parse(&n).unwrap().to_string(), n);
        }
    }

    #[test]
    fn malformed_names_are_rejected() {
        for n in [
            "",
            "__",
            "___",
            "____",
            "_____",
            "__1_2",
            "a0.tdb",
            "__fragment_metadata.tdb",
            &format!("__2_1_{U}"),
            &format!("__1_x_{U}"),
            &format!("__1_2_{U}_"),
            &format!("__1_2_5_{U}"),
            &format!("_{U}__1"),
            &format!("__1_2_{U}_5_6"),
            "__1_2_0123456789ABCDEF0123456789ABCDE",
        ] {
            assert!(TimestampedName::parse(n).is_err(), "{n:?}");
        }
    }

    #[test]
    fn generated_names_parse_back() {
        let n = TimestampedName::generate(10, 20, Some(FormatVersion::WRITTEN)).unwrap();
        let s = n.to_string();
        assert_eq!(TimestampedName::parse(&s).unwrap(), n);
        assert_eq!(n.uuid.len(), 32);
        assert!(TimestampedName::generate(2, 1, None).is_err());
    }

    #[test]
    fn order_is_by_range_then_name() {
        let mut v = [
            TimestampedName::parse(&format!("__2_2_{U}_22")).unwrap(),
            TimestampedName::parse(&format!("__1_3_{U}_22")).unwrap(),
            TimestampedName::parse(&format!("__1_2_{U}_22")).unwrap(),
        ];
        v.sort();
        let r: Vec<_> = v.iter().map(|n| n.timestamp_range()).collect();
        assert_eq!(r, vec![(1, 2), (1, 3), (2, 2)]);
    }
}
