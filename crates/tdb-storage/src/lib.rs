//! Where tdb's bytes live.
//!
//! One small synchronous trait, [`Storage`], over `/`-separated keys relative
//! to a root, shaped after object stores (whole-object writes, byte-range
//! reads, prefix listing) so that an S3-like backend can implement it later:
//! nothing above this crate may assume POSIX. Two backends ship:
//! [`LocalStorage`] (a directory) and [`MemoryStorage`] (tests, scratch).

mod error;
mod local;
mod memory;
mod path;

pub use error::{Result, StorageError};
pub use local::LocalStorage;
pub use memory::MemoryStorage;
pub use path::check_path;

use bytes::Bytes;

/// One child of a listed directory.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entry {
    /// Full key of the child (the listed directory, `/`, its name).
    pub path: String,
    /// Whether the child is a directory (a common prefix, on object stores).
    pub is_dir: bool,
}

impl Entry {
    /// The last component of the key.
    pub fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }
}

/// A synchronous store of whole objects under `/`-separated keys.
///
/// The empty key `""` is the root. Errors name the key involved.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// The immediate children of a directory, sorted by key. A missing
    /// directory is [`StorageError::NotFound`].
    fn list(&self, dir: &str) -> Result<Vec<Entry>>;

    /// Whether a key exists as a file.
    fn is_file(&self, path: &str) -> Result<bool>;

    /// Whether a key exists as a directory.
    fn is_dir(&self, path: &str) -> Result<bool>;

    /// Size in bytes of a file.
    fn size(&self, path: &str) -> Result<u64>;

    /// A whole file.
    fn read(&self, path: &str) -> Result<Bytes>;

    /// `len` bytes of a file from `offset`; a range beyond the end is
    /// [`StorageError::RangeOutOfBounds`], never a short read.
    fn read_range(&self, path: &str, offset: u64, len: u64) -> Result<Bytes>;

    /// Writes a whole file, replacing any old one. Readers see the old bytes
    /// or the new ones, never a mix (local files: written aside, then renamed).
    /// Parent directories are created as needed.
    fn write(&self, path: &str, data: &[u8]) -> Result<()>;

    /// Creates a directory and its parents; an existing one is fine.
    fn create_dir(&self, path: &str) -> Result<()>;

    /// Removes a file.
    fn remove_file(&self, path: &str) -> Result<()>;

    /// Removes a directory and everything below it.
    fn remove_dir(&self, path: &str) -> Result<()>;

    /// Moves a file or directory to a new key, replacing a file there.
    fn rename(&self, from: &str, to: &str) -> Result<()>;

    /// Every file below a directory, as keys, sorted.
    fn list_files_recursive(&self, dir: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_owned()];
        while let Some(d) = stack.pop() {
            for e in self.list(&d)? {
                if e.is_dir {
                    stack.push(e.path);
                } else {
                    out.push(e.path);
                }
            }
        }
        out.sort();
        Ok(out)
    }
}

/// Joins two keys with `/`, treating `""` as the root.
pub fn join(dir: &str, name: &str) -> String {
    match (dir.is_empty(), name.is_empty()) {
        (true, _) => name.to_owned(),
        (_, true) => dir.to_owned(),
        _ => format!("{}/{}", dir.trim_end_matches('/'), name),
    }
}

#[cfg(test)]
mod conformance;
