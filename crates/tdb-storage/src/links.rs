//! Symbolic links inside a [`crate::LocalStorage`] root may not lead out
//! of it: an array or group handed over by someone else must not make a
//! read, write or delete reach a file elsewhere (`__schema/x ->
//! /etc/shadow`, `__fragments -> /home/user`). The root itself may be a
//! link, and links that stay inside the root are followed.
//!
//! Each directory is resolved once (its real path checked against the
//! root's) and remembered; a file's last component costs one `lstat`, and
//! a real path only when it is a link. A link made after its directory was
//! checked is caught at the file, not in the directories above it: this
//! guards against arrays as they are handed over, not against a process
//! changing them under a running reader.

use crate::{Result, StorageError};
use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

/// The root's real path and the directories known to lie beneath it.
#[derive(Debug, Default)]
pub(crate) struct Confinement {
    real_root: OnceLock<PathBuf>,
    checked: Mutex<HashSet<PathBuf>>,
}

const OUT_OF_ROOT: &str = "a symbolic link leads out of the storage root";

impl Confinement {
    /// Refuses `path` (what `key` names under `root`) when it, or a
    /// directory on its way, is a link out of the root.
    pub(crate) fn file(&self, root: &Path, key: &str, path: &Path) -> Result<()> {
        if let Some(parent) = path.parent().filter(|p| p.starts_with(root)) {
            self.dir(root, key, parent)?;
        }
        match fs::symlink_metadata(path) {
            Ok(md) if md.file_type().is_symlink() => self.real(root, key, path),
            _ => Ok(()),
        }
    }

    /// Refuses the directory `dir` (under `root`) when its real path is
    /// not beneath the root's; a directory still to be made, when the
    /// nearest one above it that exists is not (what it would be made in).
    pub(crate) fn dir(&self, root: &Path, key: &str, dir: &Path) -> Result<()> {
        let mut d = dir;
        while d != root && !self.lock().contains(d) {
            match fs::symlink_metadata(d) {
                Ok(_) => {
                    self.real(root, key, d)?;
                    // Not a link to nothing, which could lead anywhere
                    // once its target is made.
                    if d.exists() {
                        self.lock().insert(d.to_path_buf());
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => match d.parent() {
                    Some(p) if p.starts_with(root) => d = p,
                    _ => return Ok(()),
                },
                Err(e) => return Err(crate::local::io_err(key, e)),
            }
        }
        Ok(())
    }

    /// Refuses `path` when its real path is not beneath the root's; a path
    /// that does not exist (or a link to nothing) leads nowhere.
    fn real(&self, root: &Path, key: &str, path: &Path) -> Result<()> {
        let real = match fs::canonicalize(path) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(crate::local::io_err(key, e)),
        };
        let real_root = match self.real_root.get() {
            Some(r) => r,
            None => match fs::canonicalize(root) {
                Ok(r) => self.real_root.get_or_init(|| r),
                // No root, so nothing beneath it: `path` exists outside.
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(out(key)),
                Err(e) => return Err(crate::local::io_err(key, e)),
            },
        };
        if real.starts_with(real_root) {
            Ok(())
        } else {
            Err(out(key))
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<PathBuf>> {
        self.checked.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn out(key: &str) -> StorageError {
    StorageError::InvalidPath {
        path: key.to_owned(),
        reason: OUT_OF_ROOT,
    }
}
