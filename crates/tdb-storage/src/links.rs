//! Symbolic links inside a [`crate::LocalStorage`] root may not lead out
//! of it: an array or group handed over by someone else must not make a
//! read, write or delete reach a file elsewhere (`__schema/x ->
//! /etc/shadow`, `__fragments -> /home/user`). The root itself may be a
//! link, and links that stay inside the root are followed.
//!
//! On Linux a file is opened in one system call that fails on any link
//! on its path (`openat2` with `RESOLVE_NO_SYMLINKS`): a path with no
//! link in it cannot lead out. Where that fails on a link (or the call is
//! not there) each directory is checked once and remembered: a directory
//! that is no link, in one already checked, by one `lstat` (by none when
//! a listing found it); a link by its real path against the root's. A
//! file is opened without following a link; only a link costs its real
//! path. A
//! link made after its directory was checked is caught at the file, not
//! in the directories above it: this guards against arrays as they are
//! handed over, not against a process changing them under a running
//! reader.

use crate::{Result, StorageError};
use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// The root's real path and the directories known to lie beneath it.
#[derive(Debug, Default)]
pub(crate) struct Confinement {
    real_root: OnceLock<PathBuf>,
    checked: Mutex<HashSet<PathBuf>>,
    /// A link was met on the way to a file (the root may be one, or lie
    /// under one): opening without any link would fail on every file.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    links_met: AtomicBool,
}

const OUT_OF_ROOT: &str = "a symbolic link leads out of the storage root";

impl Confinement {
    /// Opens the file `path` (what `key` names under `root`) for reading,
    /// refusing it when it, or a directory on its way, is a link out of
    /// the root; `None` when there is none.
    ///
    /// No `lstat` first: the file is opened without following a link
    /// (`O_NOFOLLOW`), and only a link, which then fails to open, costs
    /// its real path and a second open. On Linux, where no link was met
    /// yet, one system call opens it (opening an array of 1,000
    /// fragments made 1,000 `lstat`s of their directories).
    pub(crate) fn open(&self, root: &Path, key: &str, path: &Path) -> Result<Option<fs::File>> {
        #[cfg(target_os = "linux")]
        if !self.links_met.load(Ordering::Relaxed) {
            match linux::open_without_links(path) {
                Some(Err(e)) if is_link(&e) => self.links_met.store(true, Ordering::Relaxed),
                Some(Ok(f)) => return Ok(Some(f)),
                Some(Err(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Some(Err(e)) => return Err(crate::local::io_err(key, e)),
                None => {}
            }
        }
        if let Some(parent) = path.parent().filter(|p| p.starts_with(root)) {
            self.dir(root, key, parent)?;
        }
        let found = match open_no_follow(path) {
            Err(e) if is_link(&e) => {
                self.real(root, key, path)?;
                fs::File::open(path)
            }
            found => found,
        };
        match found {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(crate::local::io_err(key, e)),
        }
    }

    /// Directories a listing of the checked directory `dir` found, none a
    /// link (the listing's own entry types say so): beneath the root as
    /// `dir` is, with no `lstat` each.
    pub(crate) fn listed(&self, root: &Path, dir: &Path, dirs: impl IntoIterator<Item = PathBuf>) {
        let mut checked = self.lock();
        if dir == root || checked.contains(dir) {
            checked.extend(dirs);
        }
    }

    /// Refuses the directory `dir` (under `root`) when its real path is
    /// not beneath the root's; a directory still to be made, when the
    /// nearest one above it that exists is not (what it would be made in).
    ///
    /// A directory that is no link, in a directory already checked (or
    /// the root), lies beneath the root: one `lstat`. Only links cost a
    /// real path (a `readlink` per component: nine per fragment directory
    /// were half of opening an array of 1,000 fragments).
    pub(crate) fn dir(&self, root: &Path, key: &str, dir: &Path) -> Result<()> {
        if dir == root || self.lock().contains(dir) {
            return Ok(());
        }
        match fs::symlink_metadata(dir) {
            Ok(md) => {
                let parent = dir.parent().filter(|p| p.starts_with(root));
                if md.file_type().is_symlink() || parent.is_none() {
                    self.real(root, key, dir)?;
                    // Not a link to nothing, which could lead anywhere
                    // once its target is made.
                    if !dir.exists() {
                        return Ok(());
                    }
                } else if let Some(parent) = parent {
                    self.dir(root, key, parent)?;
                }
                self.lock().insert(dir.to_path_buf());
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => match dir.parent() {
                Some(p) if p.starts_with(root) => self.dir(root, key, p),
                _ => Ok(()),
            },
            Err(e) => Err(crate::local::io_err(key, e)),
        }
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

    /// Whether a file was refused the one-call open for a link on its way.
    #[cfg(test)]
    pub(crate) fn links_met(&self) -> bool {
        self.links_met.load(Ordering::Relaxed)
    }

    /// Whether files open in one call here (Linux with `openat2`).
    #[cfg(test)]
    pub(crate) fn opens_in_one_call() -> bool {
        #[cfg(target_os = "linux")]
        return !linux::MISSING.load(Ordering::Relaxed);
        #[cfg(not(target_os = "linux"))]
        return false;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<PathBuf>> {
        self.checked.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::CString;
    use std::fs;
    use std::io;
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// `openat2` is missing (before Linux 5.6) or refused (a seccomp
    /// filter that does not know it): asked once in the process.
    pub(super) static MISSING: AtomicBool = AtomicBool::new(false);

    /// The kernel's `struct open_how` (`linux/openat2.h`): three `u64`s,
    /// 24 bytes, no padding (`libc`'s cannot be built outside it).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }

    /// Opens `path` (absolute) for reading, failing with `ELOOP` when any
    /// part of it is a link; `None` when the system call is not there.
    pub(super) fn open_without_links(path: &Path) -> Option<io::Result<fs::File>> {
        if MISSING.load(Ordering::Relaxed) {
            return None;
        }
        let Ok(name) = CString::new(path.as_os_str().as_bytes()) else {
            return Some(Err(io::Error::from(io::ErrorKind::InvalidInput)));
        };
        let how = OpenHow {
            flags: (libc::O_RDONLY | libc::O_CLOEXEC) as u64,
            mode: 0,
            resolve: libc::RESOLVE_NO_SYMLINKS,
        };
        // SAFETY: `name` is a NUL-terminated string and `how` an
        // `OpenHow` (the kernel's `struct open_how`) that both live across
        // the call; the size passed is that of `how`, so the kernel reads
        // no byte beyond either. Every argument goes as a full register
        // (`syscall` reads each as a `long`).
        #[allow(unsafe_code)]
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                libc::c_long::from(libc::AT_FDCWD),
                name.as_ptr(),
                &how as *const OpenHow,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOSYS | libc::EPERM) => {
                    MISSING.store(true, Ordering::Relaxed);
                    None
                }
                _ => Some(Err(e)),
            };
        }
        let Ok(fd) = i32::try_from(fd) else {
            return Some(Err(io::Error::other("openat2 answered no descriptor")));
        };
        // SAFETY: `fd` is a descriptor the kernel just opened for this
        // call and nothing else holds: the file takes sole ownership.
        #[allow(unsafe_code)]
        Some(Ok(unsafe { fs::File::from_raw_fd(fd) }))
    }
}

/// Opens `path` for reading without following it if it is a link.
#[cfg(unix)]
fn open_no_follow(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Whether `e` is the refusal of [`open_no_follow`] to follow a link.
#[cfg(unix)]
fn is_link(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

/// Elsewhere every file is asked whether it is a link first.
#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> io::Result<fs::File> {
    match fs::symlink_metadata(path) {
        Ok(md) if md.file_type().is_symlink() => Err(io::Error::other("a link")),
        _ => fs::File::open(path),
    }
}

#[cfg(not(unix))]
fn is_link(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Other
}

fn out(key: &str) -> StorageError {
    StorageError::InvalidPath {
        path: key.to_owned(),
        reason: OUT_OF_ROOT,
    }
}
