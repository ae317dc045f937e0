//! Byte ranges as object stores take them.

use crate::{Result, StorageError};
use bytes::Bytes;
use std::ops::Range;
use std::sync::Arc;

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
    /// The bytes are in the order [`RangeRequest::front`] asked for (the
    /// front's first), not the file's.
    pub arranged: bool,
}

/// One range of one file, in a batch for [`crate::ReadableStorage::read_ranges`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RangeRequest {
    /// The file.
    pub key: String,
    /// The bytes wanted.
    pub range: ByteRange,
    /// Parts of a bounded range (relative to its start, sorted, disjoint)
    /// that a backend may answer first: their bytes in order, then the
    /// rest of the range's in order ([`arrange`]; it says so in
    /// [`RangeRead::arranged`]). A backend may ignore it. A reader asks
    /// for the bytes it keeps as they are, an unfiltered tile's chunk data
    /// between chunk headers: arranged, they are the tile, with no copy.
    pub front: Option<Arc<[Range<u64>]>>,
}

impl RangeRequest {
    /// A request for `range` of `key`.
    pub fn new(key: impl Into<String>, range: ByteRange) -> Self {
        RangeRequest {
            key: key.into(),
            range,
            front: None,
        }
    }

    /// The request with its bytes `front` asked for first.
    pub fn with_front(mut self, front: Arc<[Range<u64>]>) -> Self {
        self.front = Some(front);
        self
    }
}

/// Where each of a range's `len` bytes goes in its arranged answer: runs
/// of (offset in the range, offset in the answer, length), in the range's
/// order: `front`'s parts first in the answer, then the bytes between and
/// around them. `None` when `front` is not sorted, disjoint and inside
/// the range.
pub fn arrangement(front: &[Range<u64>], len: u64) -> Option<Vec<(u64, u64, u64)>> {
    let kept = front_len(front)?;
    let mut runs = Vec::with_capacity(front.len().saturating_mul(2).saturating_add(1));
    let (mut at, mut to_front, mut to_rest) = (0u64, 0u64, kept);
    for r in front {
        if r.start < at || r.end > len {
            return None;
        }
        if r.start > at {
            runs.push((at, to_rest, r.start - at));
            to_rest += r.start - at;
        }
        if r.end > r.start {
            runs.push((r.start, to_front, r.end - r.start));
            to_front += r.end - r.start;
        }
        at = r.end;
    }
    if len > at {
        runs.push((at, to_rest, len - at));
    }
    Some(runs)
}

/// How many bytes `front`'s parts hold: where the rest begins in an
/// arranged answer. `None` for a part that ends before it starts.
pub fn front_len(front: &[Range<u64>]) -> Option<u64> {
    front
        .iter()
        .try_fold(0u64, |n, r| n.checked_add(r.end.checked_sub(r.start)?))
}

/// `bytes` (a range's, in file order) arranged as `front` asks; `None`
/// where `front` does not fit them.
pub fn arrange(bytes: &[u8], front: &[Range<u64>]) -> Option<Vec<u8>> {
    permute(bytes, front, true)
}

/// An arranged answer's bytes back in file order; `None` where `front`
/// does not fit them.
pub fn unarrange(bytes: &[u8], front: &[Range<u64>]) -> Option<Vec<u8>> {
    permute(bytes, front, false)
}

/// `bytes` moved by [`arrangement`]: from file order to the answer's
/// (`forth`), or back.
fn permute(bytes: &[u8], front: &[Range<u64>], forth: bool) -> Option<Vec<u8>> {
    let mut out = vec![0; bytes.len()];
    for (at, to, len) in arrangement(front, bytes.len() as u64)? {
        let (from, to) = match forth {
            true => (at as usize, to as usize),
            false => (to as usize, at as usize),
        };
        let len = len as usize;
        out.get_mut(to..to + len)?
            .copy_from_slice(bytes.get(from..from + len)?);
    }
    Some(out)
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

    #[test]
    fn an_arranged_range_puts_its_front_first_and_comes_back() {
        let bytes: Vec<u8> = (0..20).collect();
        let front = [2..5, 5..6, 10..14];
        let arranged = arrange(&bytes, &front).unwrap();
        assert_eq!(
            arranged,
            [2, 3, 4, 5, 10, 11, 12, 13, 0, 1, 6, 7, 8, 9, 14, 15, 16, 17, 18, 19]
        );
        assert_eq!(unarrange(&arranged, &front).unwrap(), bytes);
        // Out of order, overlapping or past the end: no arrangement.
        assert!(arrangement(&[4..6, 2..3], 20).is_none());
        assert!(arrangement(&[2..6, 5..8], 20).is_none());
        let past = std::ops::Range { start: 18, end: 21 };
        assert!(arrangement(std::slice::from_ref(&past), 20).is_none());
        let backwards = std::ops::Range { start: 6, end: 2 };
        assert!(arrange(&bytes, std::slice::from_ref(&backwards)).is_none());
    }
}
