//! An in-memory store, for tests and scratch arrays.

use crate::{
    check_path, ListableStorage, Listing, ObjectMeta, RangeRead, RangeRequest, ReadableStorage,
    Result, StorageError, Upload, WritableStorage,
};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::RwLock;

/// Files in a sorted map; a directory is any key prefix that has files
/// below it, as on object stores.
#[derive(Debug, Default)]
pub struct MemoryStorage {
    files: RwLock<BTreeMap<String, Bytes>>,
}

impl MemoryStorage {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn read_lock(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Bytes>> {
        // A poisoned lock only means a panic elsewhere mid-operation; every
        // operation leaves the map consistent, so the data is still sound.
        self.files.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_lock(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Bytes>> {
        self.files.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Stores a whole file, replacing an existing one only if `replace`.
    fn put(&self, key: &str, data: Bytes, replace: bool) -> Result<()> {
        let k = check_path(key)?;
        let mut files = self.write_lock();
        if k.is_empty() || has_below(&files, k) {
            return Err(StorageError::wrong_kind(key, "is a directory"));
        }
        if !replace && files.contains_key(k) {
            return Err(StorageError::AlreadyExists {
                path: key.to_owned(),
            });
        }
        files.insert(k.to_owned(), data);
        Ok(())
    }
}

fn dir_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("{key}/")
    }
}

fn has_below(files: &BTreeMap<String, Bytes>, key: &str) -> bool {
    let prefix = dir_prefix(key);
    files
        .range(prefix.clone()..)
        .next()
        .is_some_and(|(k, _)| k.starts_with(&prefix))
}

fn file<'a>(files: &'a BTreeMap<String, Bytes>, key: &str) -> Result<Option<&'a Bytes>> {
    match files.get(key) {
        Some(b) => Ok(Some(b)),
        None if !key.is_empty() && has_below(files, key) => {
            Err(StorageError::wrong_kind(key, "is a directory"))
        }
        None => Ok(None),
    }
}

impl ReadableStorage for MemoryStorage {
    fn read(&self, key: &str) -> Result<Option<Bytes>> {
        Ok(file(&self.read_lock(), check_path(key)?)?.cloned())
    }

    fn read_ranges(&self, requests: &[RangeRequest]) -> Result<Vec<Option<RangeRead>>> {
        let files = self.read_lock();
        requests
            .iter()
            .map(|r| {
                let Some(data) = file(&files, check_path(&r.key)?)? else {
                    return Ok(None);
                };
                let file_size = data.len() as u64;
                let (offset, len) = r.range.resolve(&r.key, file_size)?;
                // `resolve` keeps the range inside the data, whose length fits usize.
                let bytes = data.slice(offset as usize..(offset + len) as usize);
                Ok(Some(RangeRead {
                    bytes,
                    file_size,
                    arranged: false,
                }))
            })
            .collect()
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        Ok(file(&self.read_lock(), check_path(key)?)?.map(|b| b.len() as u64))
    }
}

impl ListableStorage for MemoryStorage {
    fn list_dir(&self, dir: &str) -> Result<Listing> {
        let prefix = dir_prefix(check_path(dir)?);
        let files = self.read_lock();
        let mut listing = Listing::default();
        for (k, v) in files.range(prefix.clone()..) {
            let Some(rest) = k.strip_prefix(&prefix) else {
                break;
            };
            match rest.split_once('/') {
                Some((child, _)) => {
                    let d = format!("{prefix}{child}");
                    if listing.dirs.last() != Some(&d) {
                        listing.dirs.push(d);
                    }
                }
                None => listing
                    .files
                    .push(ObjectMeta::new(k.clone(), Some(v.len() as u64))),
            }
        }
        // Keys sort with '/' among other bytes, so a directory's files can
        // interleave with a sibling's: sort and deduplicate once.
        listing.dirs.sort();
        listing.dirs.dedup();
        Ok(listing)
    }
}

impl WritableStorage for MemoryStorage {
    fn write(&self, key: &str, data: Bytes) -> Result<()> {
        self.put(key, data, true)
    }

    fn create(&self, key: &str, data: Bytes) -> Result<()> {
        self.put(key, data, false)
    }

    fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        check_path(key)?;
        Ok(Box::new(MemoryUpload {
            storage: self,
            key: key.to_owned(),
            data: Vec::new(),
        }))
    }

    fn delete(&self, key: &str) -> Result<()> {
        let k = check_path(key)?;
        let mut files = self.write_lock();
        if files.remove(k).is_none() && has_below(&files, k) {
            return Err(StorageError::wrong_kind(key, "is a directory"));
        }
        Ok(())
    }

    fn delete_prefix(&self, dir: &str) -> Result<()> {
        let k = check_path(dir)?;
        let mut files = self.write_lock();
        if files.contains_key(k) {
            return Err(StorageError::wrong_kind(dir, "is a file"));
        }
        let prefix = dir_prefix(k);
        files.retain(|key, _| !key.starts_with(&prefix));
        Ok(())
    }
}

/// Parts gathered until finished, then stored whole.
struct MemoryUpload<'a> {
    storage: &'a MemoryStorage,
    key: String,
    data: Vec<u8>,
}

impl Upload for MemoryUpload<'_> {
    fn put(&mut self, part: Bytes) -> Result<()> {
        self.data.extend_from_slice(&part);
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<()> {
        self.storage.write(&self.key, Bytes::from(self.data))
    }
}
