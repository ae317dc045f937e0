//! A directory on the local filesystem.

use crate::{check_path, join, Entry, Result, Storage, StorageError};
use bytes::Bytes;
use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Files under a root directory. Keys are paths relative to the root.
#[derive(Debug)]
pub struct LocalStorage {
    root: PathBuf,
    counter: AtomicU64,
}

impl LocalStorage {
    /// Storage rooted at `root` (which need not exist yet).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalStorage {
            root: root.into(),
            counter: AtomicU64::new(0),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn resolve(&self, path: &str) -> Result<PathBuf> {
        let p = check_path(path)?;
        Ok(if p.is_empty() {
            self.root.clone()
        } else {
            self.root.join(p)
        })
    }
}

fn io_err(path: &str, source: io::Error) -> StorageError {
    if source.kind() == io::ErrorKind::NotFound {
        StorageError::not_found(path)
    } else {
        StorageError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

impl Storage for LocalStorage {
    fn list(&self, dir: &str) -> Result<Vec<Entry>> {
        let full = self.resolve(dir)?;
        let key = check_path(dir)?;
        let mut out = Vec::new();
        for entry in fs::read_dir(&full).map_err(|e| io_err(dir, e))? {
            let entry = entry.map_err(|e| io_err(dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                return Err(StorageError::InvalidPath {
                    path: join(key, &name.to_string_lossy()),
                    reason: "file name is not UTF-8",
                });
            };
            let path = join(key, name);
            let is_dir = entry.file_type().map_err(|e| io_err(&path, e))?.is_dir();
            out.push(Entry { path, is_dir });
        }
        out.sort();
        Ok(out)
    }

    fn is_file(&self, path: &str) -> Result<bool> {
        Ok(self.resolve(path)?.is_file())
    }

    fn is_dir(&self, path: &str) -> Result<bool> {
        Ok(self.resolve(path)?.is_dir())
    }

    fn size(&self, path: &str) -> Result<u64> {
        let md = fs::metadata(self.resolve(path)?).map_err(|e| io_err(path, e))?;
        if md.is_dir() {
            return Err(StorageError::wrong_kind(path, "is a directory"));
        }
        Ok(md.len())
    }

    fn read(&self, path: &str) -> Result<Bytes> {
        let full = self.resolve(path)?;
        if full.is_dir() {
            return Err(StorageError::wrong_kind(path, "is a directory"));
        }
        fs::read(full).map(Bytes::from).map_err(|e| io_err(path, e))
    }

    fn read_range(&self, path: &str, offset: u64, len: u64) -> Result<Bytes> {
        let size = self.size(path)?;
        let end = offset.checked_add(len);
        if end.is_none_or(|e| e > size) {
            return Err(StorageError::RangeOutOfBounds {
                path: path.to_owned(),
                offset,
                len,
                size,
            });
        }
        let n = usize::try_from(len).map_err(|_| StorageError::RangeOutOfBounds {
            path: path.to_owned(),
            offset,
            len,
            size,
        })?;
        let mut f = fs::File::open(self.resolve(path)?).map_err(|e| io_err(path, e))?;
        f.seek(SeekFrom::Start(offset))
            .map_err(|e| io_err(path, e))?;
        let mut buf = vec![0u8; n];
        f.read_exact(&mut buf).map_err(|e| io_err(path, e))?;
        Ok(Bytes::from(buf))
    }

    fn write(&self, path: &str, data: &[u8]) -> Result<()> {
        let full = self.resolve(path)?;
        if check_path(path)?.is_empty() {
            return Err(StorageError::wrong_kind(path, "is the root"));
        }
        let parent = full.parent().unwrap_or(&self.root);
        fs::create_dir_all(parent).map_err(|e| io_err(path, e))?;
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let tmp = parent.join(format!(".tdb-tmp-{}-{n}", std::process::id()));
        let result = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(data)?;
            f.sync_all()?;
            fs::rename(&tmp, &full)
        })();
        if let Err(e) = result {
            let _ = fs::remove_file(&tmp);
            return Err(io_err(path, e));
        }
        Ok(())
    }

    fn create_dir(&self, path: &str) -> Result<()> {
        fs::create_dir_all(self.resolve(path)?).map_err(|e| io_err(path, e))
    }

    fn remove_file(&self, path: &str) -> Result<()> {
        let full = self.resolve(path)?;
        if full.is_dir() {
            return Err(StorageError::wrong_kind(path, "is a directory"));
        }
        fs::remove_file(full).map_err(|e| io_err(path, e))
    }

    fn remove_dir(&self, path: &str) -> Result<()> {
        let full = self.resolve(path)?;
        if full.is_file() {
            return Err(StorageError::wrong_kind(path, "is a file"));
        }
        fs::remove_dir_all(full).map_err(|e| io_err(path, e))
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (src, dst) = (self.resolve(from)?, self.resolve(to)?);
        if !src.exists() {
            return Err(StorageError::not_found(from));
        }
        if let Some(parent) = dst.parent() {
            fs::create_dir_all(parent).map_err(|e| io_err(to, e))?;
        }
        fs::rename(src, dst).map_err(|e| io_err(from, e))
    }
}
