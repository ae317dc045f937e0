//! Byte ranges as object stores take them.

use crate::{Result, StorageError};
use bytes::Bytes;

/// A byte range of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ByteRange {
    /// `len` bytes from `offset`; must lie inside the file.
    Bounded {
        /// First byte.
        offset: u64,
        /// Number of bytes.
        len: u64,
    },
    /// The last `n` bytes, or the whole file when it is shorter (HTTP's
    /// suffix range): how a footer is found without asking for the size.
    Suffix(u64),
    /// The whole file, whatever its size: how a listed file whose size the
    /// listing did not give is read in a batch.
    Whole,
}

impl ByteRange {
    /// `len` bytes from `offset`.
    pub fn new(offset: u64, len: u64) -> Self {
        ByteRange::Bounded { offset, len }
    }

    /// Where the range lies in a file of `size` bytes, as `(offset, len)`;
    /// a bounded range beyond the end is an error naming `key`.
    pub fn resolve(self, key: &str, size: u64) -> Result<(u64, u64)> {
        match self {
            ByteRange::Bounded { offset, len } => match offset.checked_add(len) {
                Some(end) if end <= size => Ok((offset, len)),
                _ => Err(StorageError::RangeOutOfBounds {
                    path: key.to_owned(),
                    offset,
                    len,
                    size,
                }),
            },
            ByteRange::Suffix(n) => {
                let len = n.min(size);
                Ok((size - len, len))
            }
            ByteRange::Whole => Ok((0, size)),
        }
    }
}

impl std::fmt::Display for ByteRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ByteRange::Bounded { offset, len } => write!(f, "{offset}+{len}"),
            ByteRange::Suffix(n) => write!(f, "last {n}"),
            ByteRange::Whole => f.write_str("whole"),
        }
    }
}

/// The bytes of one range, and the size of the whole file they came from
/// (object stores report it with every ranged read, so a suffix read also
/// tells where the suffix starts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeRead {
    /// The bytes of the range.
    pub bytes: Bytes,
    /// The size of the whole file.
    pub file_size: u64,
}

/// One range of one file, in a batch for [`crate::ReadableStorage::read_ranges`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RangeRequest {
    /// The file.
    pub key: String,
    /// The bytes wanted.
    pub range: ByteRange,
}

impl RangeRequest {
    /// A request for `range` of `key`.
    pub fn new(key: impl Into<String>, range: ByteRange) -> Self {
        RangeRequest {
            key: key.into(),
            range,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve() {
        assert_eq!(ByteRange::new(2, 3).resolve("k", 10).unwrap(), (2, 3));
        assert_eq!(ByteRange::new(10, 0).resolve("k", 10).unwrap(), (10, 0));
        assert!(ByteRange::new(8, 3).resolve("k", 10).is_err());
        assert!(ByteRange::new(u64::MAX, 2).resolve("k", 10).is_err());
        assert_eq!(ByteRange::Suffix(4).resolve("k", 10).unwrap(), (6, 4));
        assert_eq!(ByteRange::Suffix(40).resolve("k", 10).unwrap(), (0, 10));
    }
}
