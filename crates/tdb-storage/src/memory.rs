//! An in-memory store, for tests and scratch arrays.

use crate::{check_path, Entry, Result, Storage, StorageError};
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::RwLock;

/// Files in a map; directories exist when created or when a file lies below
/// them, as on object stores.
#[derive(Debug, Default)]
pub struct MemoryStorage {
    inner: RwLock<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    files: BTreeMap<String, Bytes>,
    dirs: BTreeSet<String>,
}

impl Inner {
    fn is_dir(&self, key: &str) -> bool {
        if key.is_empty() || self.dirs.contains(key) {
            return true;
        }
        let prefix = format!("{key}/");
        self.files
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(&prefix))
            || self
                .dirs
                .range(prefix.clone()..)
                .next()
                .is_some_and(|k| k.starts_with(&prefix))
    }

    fn file(&self, key: &str) -> Result<&Bytes> {
        self.files.get(key).ok_or_else(|| {
            if self.is_dir(key) {
                StorageError::wrong_kind(key, "is a directory")
            } else {
                StorageError::not_found(key)
            }
        })
    }
}

impl MemoryStorage {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn read_lock(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        // A poisoned lock only means a panic elsewhere mid-operation; every
        // operation leaves the maps consistent, so the data is still sound.
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_lock(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }
}

fn prefixed<'a>(keys: impl Iterator<Item = &'a String>, prefix: &str) -> Vec<String> {
    keys.filter(|k| prefix.is_empty() || k.starts_with(prefix))
        .cloned()
        .collect()
}

impl Storage for MemoryStorage {
    fn list(&self, dir: &str) -> Result<Vec<Entry>> {
        let key = check_path(dir)?;
        let inner = self.read_lock();
        if !inner.is_dir(key) {
            return Err(StorageError::not_found(dir));
        }
        let prefix = if key.is_empty() {
            String::new()
        } else {
            format!("{key}/")
        };
        let mut out = BTreeMap::new();
        for k in inner.files.keys().chain(inner.dirs.iter()) {
            let Some(rest) = k.strip_prefix(&prefix) else {
                continue;
            };
            match rest.split_once('/') {
                Some((child, _)) => out.insert(format!("{prefix}{child}"), true),
                None if inner.files.contains_key(k) => out.insert(k.clone(), false),
                None => out.insert(k.clone(), true),
            };
        }
        Ok(out
            .into_iter()
            .map(|(path, is_dir)| Entry { path, is_dir })
            .collect())
    }

    fn is_file(&self, path: &str) -> Result<bool> {
        Ok(self.read_lock().files.contains_key(check_path(path)?))
    }

    fn is_dir(&self, path: &str) -> Result<bool> {
        Ok(self.read_lock().is_dir(check_path(path)?))
    }

    fn size(&self, path: &str) -> Result<u64> {
        Ok(self.read_lock().file(check_path(path)?)?.len() as u64)
    }

    fn read(&self, path: &str) -> Result<Bytes> {
        Ok(self.read_lock().file(check_path(path)?)?.clone())
    }

    fn read_range(&self, path: &str, offset: u64, len: u64) -> Result<Bytes> {
        let inner = self.read_lock();
        let data = inner.file(check_path(path)?)?;
        let size = data.len() as u64;
        match offset.checked_add(len) {
            Some(end) if end <= size => Ok(data.slice(offset as usize..end as usize)),
            _ => Err(StorageError::RangeOutOfBounds {
                path: path.to_owned(),
                offset,
                len,
                size,
            }),
        }
    }

    fn write(&self, path: &str, data: &[u8]) -> Result<()> {
        let key = check_path(path)?;
        let mut inner = self.write_lock();
        if key.is_empty() || inner.is_dir(key) {
            return Err(StorageError::wrong_kind(path, "is a directory"));
        }
        inner
            .files
            .insert(key.to_owned(), Bytes::copy_from_slice(data));
        Ok(())
    }

    fn create_dir(&self, path: &str) -> Result<()> {
        let key = check_path(path)?;
        let mut inner = self.write_lock();
        if inner.files.contains_key(key) {
            return Err(StorageError::wrong_kind(path, "is a file"));
        }
        if !key.is_empty() {
            inner.dirs.insert(key.to_owned());
        }
        Ok(())
    }

    fn remove_file(&self, path: &str) -> Result<()> {
        let key = check_path(path)?;
        let mut inner = self.write_lock();
        inner.file(key)?;
        inner.files.remove(key);
        Ok(())
    }

    fn remove_dir(&self, path: &str) -> Result<()> {
        let key = check_path(path)?;
        let mut inner = self.write_lock();
        if inner.files.contains_key(key) {
            return Err(StorageError::wrong_kind(path, "is a file"));
        }
        if !inner.is_dir(key) {
            return Err(StorageError::not_found(path));
        }
        let prefix = if key.is_empty() {
            String::new()
        } else {
            format!("{key}/")
        };
        for k in prefixed(inner.files.keys(), &prefix) {
            inner.files.remove(&k);
        }
        for k in prefixed(inner.dirs.iter(), &prefix) {
            inner.dirs.remove(&k);
        }
        inner.dirs.remove(key);
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let (src, dst) = (check_path(from)?, check_path(to)?);
        let mut inner = self.write_lock();
        if let Some(data) = inner.files.remove(src) {
            inner.files.insert(dst.to_owned(), data);
            return Ok(());
        }
        if src.is_empty() || !inner.is_dir(src) {
            return Err(StorageError::not_found(from));
        }
        let prefix = format!("{src}/");
        for k in prefixed(inner.files.keys(), &prefix) {
            if let Some(data) = inner.files.remove(&k) {
                inner
                    .files
                    .insert(format!("{dst}/{}", &k[prefix.len()..]), data);
            }
        }
        for k in prefixed(inner.dirs.iter(), &prefix) {
            inner.dirs.remove(&k);
            inner.dirs.insert(format!("{dst}/{}", &k[prefix.len()..]));
        }
        if inner.dirs.remove(src) {
            inner.dirs.insert(dst.to_owned());
        }
        Ok(())
    }
}
