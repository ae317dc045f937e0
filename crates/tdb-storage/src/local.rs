//! A directory on the local filesystem.

use crate::links::Confinement;
use crate::{
    check_path, join, ByteRange, ListableStorage, Listing, ObjectMeta, RangeRead, RangeRequest,
    ReadableStorage, Result, StorageError, Upload, WritableStorage,
};
use bytes::Bytes;
use std::collections::HashMap;
use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// Files under a root directory. Keys are paths relative to the root.
#[derive(Debug)]
pub struct LocalStorage {
    root: PathBuf,
    /// Directories uploads of this storage made, which an abandoned upload
    /// removes again when it leaves them empty (a write refused halfway
    /// leaves no empty fragment directory behind, as TileDB's does not).
    made: Arc<Mutex<HashSet<PathBuf>>>,
    /// Symbolic links may not lead out of the root.
    links: Arc<Confinement>,
}

/// Files kept open, by path, with their sizes (the path's bytes: hashing
/// a `Path` parses its components).
type OpenFiles = HashMap<OsString, (Arc<fs::File>, u64)>;

/// Files kept open at most, for the whole process (then the lot is closed
/// and the count starts again: reads go to a few files at a time).
const KEPT_OPEN: usize = 128;

/// Files read lately, kept open with their sizes, for every `LocalStorage`
/// of the process (one bound on descriptors however many arrays are
/// open): a read under a small budget asks for the same files' ranges
/// batch after batch, and an open, a `stat` and a close for each cost more
/// than the read. Writes and deletes through a `LocalStorage` forget the
/// file; TileDB's files are never rewritten in place, so a handle reads
/// what its name held (a file another process deleted meanwhile, as it
/// was).
fn open_files() -> MutexGuard<'static, OpenFiles> {
    static OPEN: OnceLock<Mutex<OpenFiles>> = OnceLock::new();
    OPEN.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// How the names of files still being written begin (then the process id
/// and a number): no `_` and no second `.`, so TileDB takes none for an
/// object of its own (see [`temp_dir`]).
/// Exported for checks that look for files a killed writer left.
pub const TEMP_PREFIX: &str = ".tdb-tmp-";

/// Numbers the temporary files of this process: one counter for every
/// `LocalStorage`, so two handles on one directory (two writers, each with
/// its own array handle) never pick the same temporary name.
static TEMP_FILES: AtomicU64 = AtomicU64::new(0);

impl LocalStorage {
    /// Storage rooted at `root` (which need not exist yet; a relative root
    /// is taken from the current directory now).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        LocalStorage {
            // Absolute, so every storage names a file alike in the
            // process's kept-open files.
            root: std::path::absolute(&root).unwrap_or(root),
            made: Arc::default(),
            links: Arc::default(),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Refuses a key whose directory is, or lies under, a link out of the
    /// root (the key's own last part may be a link: it is what goes).
    fn confine_parent(&self, key: &str, full: &Path) -> Result<()> {
        match full.parent() {
            Some(parent) if full != self.root => self.links.dir(&self.root, key, parent),
            _ => Ok(()),
        }
    }

    fn resolve(&self, path: &str) -> Result<PathBuf> {
        let p = check_path(path)?;
        Ok(if p.is_empty() {
            self.root.clone()
        } else {
            self.root.join(p)
        })
    }

    /// Closes the kept file at `full`, or every kept file (of any storage:
    /// a prefix is gone).
    fn forget(&self, full: Option<&Path>) {
        let mut handles = open_files();
        match full {
            Some(f) => {
                handles.remove(f.as_os_str());
            }
            None => handles.clear(),
        }
    }

    /// A file open for reading, kept open for the next reads; `None` when
    /// there is none (not remembered: it may be made next).
    fn handle(&self, key: &str) -> Result<Option<(Arc<fs::File>, u64)>> {
        let full = self.resolve(key)?;
        let mut handles = open_files();
        if let Some(h) = handles.get(full.as_os_str()) {
            return Ok(Some(h.clone()));
        }
        let Some((file, size)) = self.open(key, &full)? else {
            return Ok(None);
        };
        if handles.len() >= KEPT_OPEN {
            handles.clear();
        }
        let h = (Arc::new(file), size);
        handles.insert(full.into_os_string(), h.clone());
        Ok(Some(h))
    }

    /// Opens the file `key` (at `full`) for reading; `None` when there is
    /// none.
    fn open(&self, key: &str, full: &Path) -> Result<Option<(fs::File, u64)>> {
        let Some(file) = self.links.open(&self.root, key, full)? else {
            return Ok(None);
        };
        let md = file.metadata().map_err(|e| io_err(key, e))?;
        if md.is_dir() {
            return Err(StorageError::wrong_kind(key, "is a directory"));
        }
        Ok(Some((file, md.len())))
    }

    /// A file written aside under a temporary name, renamed into place
    /// when finished, so readers never see a partial file. Nothing is
    /// made on disk (not even the parent directory) before the first
    /// part, so an upload abandoned before any leaves no trace.
    ///
    /// The temporary file goes in the nearest directory above the file
    /// whose name does not start with `__` (see [`temp_dir`]): a process
    /// killed mid-write leaves it where no reader looks.
    fn begin(&self, key: &str) -> Result<LocalUpload> {
        let full = self.resolve(key)?;
        if check_path(key)?.is_empty() {
            return Err(StorageError::wrong_kind(key, "is the root"));
        }
        Ok(LocalUpload {
            key: key.to_owned(),
            root: self.root.clone(),
            made: Arc::clone(&self.made),
            links: Arc::clone(&self.links),
            full,
            open: None,
            finished: false,
            create: false,
            unflushed: 0,
            flusher: None,
        })
    }
}

/// A file being written under its temporary name.
struct LocalUpload {
    key: String,
    /// The storage's root and the directories its uploads made.
    root: PathBuf,
    made: Arc<Mutex<HashSet<PathBuf>>>,
    links: Arc<Confinement>,
    full: PathBuf,
    /// The temporary file and its path, once the first part came.
    open: Option<(fs::File, PathBuf)>,
    finished: bool,
    /// Whether finishing must fail rather than replace an existing file.
    create: bool,
    /// Bytes put since the flusher was last asked to sync.
    unflushed: u64,
    flusher: Option<Flusher>,
}

/// Bytes an upload takes before it asks for them to go to disk.
const FLUSH_EVERY: u64 = 2 << 20;

/// Syncs an upload's file on a thread of its own while the writer goes
/// on, so that the `fsync` before the rename (which must find every byte
/// on disk) waits for the last few parts only, not for the whole file:
/// the disk works while the writer computes.
struct Flusher {
    wake: std::sync::mpsc::Sender<()>,
    done: std::thread::JoinHandle<io::Result<()>>,
}

impl Flusher {
    fn start(file: &fs::File) -> io::Result<Flusher> {
        let file = file.try_clone()?;
        let (wake, rx) = std::sync::mpsc::channel::<()>();
        let done = std::thread::Builder::new()
            .name("tdb-flush".into())
            .spawn(move || {
                while rx.recv().is_ok() {
                    // Asked several times while syncing: once is enough.
                    while rx.try_recv().is_ok() {}
                    file.sync_data()?;
                }
                Ok(())
            })?;
        Ok(Flusher { wake, done })
    }

    /// Stops the thread; its first error, if any.
    fn stop(self) -> io::Result<()> {
        drop(self.wake);
        self.done
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the flush thread panicked")))
    }
}

impl LocalUpload {
    /// Makes `dir` and its missing ancestors, noting which it made.
    fn make_dirs(&self, dir: &Path) -> Result<()> {
        let mut made = self.made.lock().unwrap_or_else(PoisonError::into_inner);
        let mut missing = Vec::new();
        let mut d = dir;
        while d != self.root && !d.exists() {
            missing.push(d.to_path_buf());
            match d.parent() {
                Some(p) => d = p,
                None => break,
            }
        }
        fs::create_dir_all(dir).map_err(|e| io_err(&self.key, e))?;
        made.extend(missing);
        Ok(())
    }

    /// After an abandoned upload: removes the directories uploads made
    /// above its file that are empty now, deepest first (a directory that
    /// holds anything stays; one another upload is about to finish into
    /// is made again by that upload, see [`LocalUpload::move_into_place`]).
    fn remove_made_dirs(&self) {
        let mut made = self.made.lock().unwrap_or_else(PoisonError::into_inner);
        let mut d = self.full.parent();
        while let Some(dir) = d.filter(|dir| *dir != self.root && made.contains(*dir)) {
            if fs::remove_dir(dir).is_err() {
                break;
            }
            made.remove(dir);
            d = dir.parent();
        }
    }

    /// Moves (or links) the finished temporary file to its name. Another
    /// upload abandoned meanwhile may have removed the (then empty)
    /// directory the file goes in: it is made again.
    fn move_into_place(
        &self,
        tmp: &Path,
        put: fn(&Path, &Path) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut tries = 0;
        loop {
            match put(tmp, &self.full) {
                Err(e) if e.kind() == io::ErrorKind::NotFound && tries < 3 => {
                    tries += 1;
                    if let Some(parent) = self.full.parent() {
                        self.make_dirs(parent).map_err(io::Error::other)?;
                    }
                }
                other => return other,
            }
        }
    }

    fn file(&mut self) -> Result<&mut fs::File> {
        if self.finished {
            return Err(StorageError::wrong_kind(
                &self.key,
                "upload already finished",
            ));
        }
        if self.open.is_none() {
            let parent = self
                .full
                .parent()
                .ok_or_else(|| StorageError::wrong_kind(&self.key, "has no parent directory"))?;
            let n = TEMP_FILES.fetch_add(1, Ordering::Relaxed);
            let tmp_dir = temp_dir(&self.root, parent);
            let tmp = tmp_dir.join(format!("{TEMP_PREFIX}{}-{n}", std::process::id()));
            // Another upload abandoned in these directories may remove
            // them between the two steps: then make them again.
            let mut tries = 0;
            // Checked before anything is made: nothing appears outside.
            self.links.dir(&self.root, &self.key, parent)?;
            self.links.dir(&self.root, &self.key, tmp_dir)?;
            let f = loop {
                self.make_dirs(parent)?;
                match fs::File::create(&tmp) {
                    Err(e) if e.kind() == io::ErrorKind::NotFound && tries < 3 => tries += 1,
                    other => break other.map_err(|e| io_err(&self.key, e))?,
                }
            };
            return Ok(&mut self.open.insert((f, tmp)).0);
        }
        match &mut self.open {
            Some((f, _)) => Ok(f),
            None => Err(StorageError::wrong_kind(
                &self.key,
                "upload already finished",
            )),
        }
    }
}

impl Upload for LocalUpload {
    fn put(&mut self, part: Bytes) -> Result<()> {
        let key = self.key.clone();
        self.file()?.write_all(&part).map_err(|e| io_err(&key, e))?;
        self.unflushed += part.len() as u64;
        if self.unflushed >= FLUSH_EVERY {
            self.unflushed = 0;
            if let (None, Some((f, _))) = (&self.flusher, &self.open) {
                self.flusher = Some(Flusher::start(f).map_err(|e| io_err(&key, e))?);
            }
            if let Some(fl) = &self.flusher {
                // A flusher that stopped has an error for `finish`.
                let _ = fl.wake.send(());
            }
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        self.file()?;
        self.finished = true;

        let Some((f, tmp)) = self.open.take() else {
            return Err(StorageError::wrong_kind(
                &self.key,
                "upload already finished",
            ));
        };
        let flushed = self.flusher.take().map_or(Ok(()), Flusher::stop);
        let synced = flushed.and_then(|()| f.sync_all());
        // A file opened under this name before is not the one this makes.
        let forget = |full: &Path| {
            open_files().remove(full.as_os_str());
        };
        if self.create {
            let linked =
                synced.and_then(|()| self.move_into_place(&tmp, |a, b| fs::hard_link(a, b)));
            forget(&self.full);
            // Best effort: the temporary file is invisible to readers anyway.
            let _ = fs::remove_file(&tmp);
            return linked.map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => StorageError::AlreadyExists {
                    path: self.key.clone(),
                },
                _ => io_err(&self.key, e),
            });
        }
        let done = synced
            .and_then(|()| self.move_into_place(&tmp, |a, b| fs::rename(a, b)))
            .map_err(|e| io_err(&self.key, e));
        forget(&self.full);
        if done.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        done
    }
}

impl Drop for LocalUpload {
    fn drop(&mut self) {
        if let Some(fl) = self.flusher.take() {
            let _ = fl.stop();
        }
        if let Some((file, tmp)) = self.open.take() {
            // Abandoned unfinished: best effort, as above.
            drop(file);
            let _ = fs::remove_file(&tmp);
            self.remove_made_dirs();
        }
    }
}

/// Where a file in `dir` is written before it is renamed into place: the
/// nearest of `dir` and its ancestors up to `root` whose name does not
/// start with `__`. TileDB names its own directories so (`__meta`,
/// `__schema`, `__fragments/<fragment>`, `__group`, ...) and reads every
/// file some of them hold as its kind (a schema, a metadata file whose
/// name must parse); in the array's or group's own directory it skips a
/// name with neither `_` nor a second `.`, as `.tdb-tmp-<pid>-<n>` is. A
/// process killed mid-write thus leaves nothing TileDB (or tdb, which
/// skips these names) fails on. The rename stays within one filesystem
/// unless a mount point sits inside an array.
fn temp_dir<'p>(root: &Path, dir: &'p Path) -> &'p Path {
    let mut d = dir;
    while d != root
        && d.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("__"))
    {
        match d.parent() {
            Some(p) => d = p,
            None => break,
        }
    }
    d
}

pub(crate) fn io_err(path: &str, source: io::Error) -> StorageError {
    if source.kind() == io::ErrorKind::NotFound {
        StorageError::not_found(path)
    } else {
        StorageError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// `len` as a buffer's length (a range past memory is out of bounds).
fn buffer_len(key: &str, offset: u64, len: u64, size: u64) -> Result<usize> {
    usize::try_from(len).map_err(|_| StorageError::RangeOutOfBounds {
        path: key.to_owned(),
        offset,
        len,
        size,
    })
}

fn read_at(file: &fs::File, key: &str, offset: u64, len: u64, size: u64) -> Result<Bytes> {
    let n = buffer_len(key, offset, len, size)?;
    // An idle buffer where there is one: a fresh one costs a page fault
    // per 4 KiB (see `pool`).
    let pool = crate::pool::idle_buffers();
    let mut buf = pool.filled(n);
    positioned_read(file, offset, &mut buf).map_err(|e| io_err(key, e))?;
    Ok(pool.bytes(buf))
}

/// Fills `buf` from `offset`: one `pread` per call on Unix (opening an
/// array of many fragments reads a footer from each: a seek for every one
/// was a quarter of the system calls).
#[cfg(unix)]
fn positioned_read(file: &fs::File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(not(unix))]
fn positioned_read(mut file: &fs::File, offset: u64, buf: &mut [u8]) -> io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}

/// `len` bytes from `offset`, arranged as `front` asks
/// ([`crate::arrange`]), in one vectored read: the kernel's one copy puts
/// each byte where the arrangement wants it. The buffer is handed out as
/// plain [`Bytes`] (not back to the idle pool when dropped), so the reader
/// that keeps the front as a tile takes the allocation over. `None` where
/// `front` does not fit the range.
#[cfg(target_os = "linux")]
fn read_arranged_at(
    file: &fs::File,
    key: &str,
    offset: u64,
    len: u64,
    size: u64,
    front: &[std::ops::Range<u64>],
) -> Result<Option<Bytes>> {
    use std::io::IoSliceMut;
    let (Some(runs), Some(kept)) = (crate::arrangement(front, len), crate::front_len(front)) else {
        return Ok(None);
    };
    let n = buffer_len(key, offset, len, size)?;
    let mut buf = crate::pool::idle_buffers().filled(n);
    {
        // The answer's front and rest, each filled from its start in file
        // order: disjoint slices, carved one after the other.
        let (mut to_front, mut to_rest) = buf.split_at_mut(kept as usize);
        let mut slices = Vec::with_capacity(runs.len());
        for (_, to, run) in runs {
            let half = match to < kept {
                true => &mut to_front,
                false => &mut to_rest,
            };
            let (slice, rest) = std::mem::take(half).split_at_mut(run as usize);
            *half = rest;
            slices.push(IoSliceMut::new(slice));
        }
        vectored_read(file, offset, &mut slices).map_err(|e| io_err(key, e))?;
    }
    Ok(Some(Bytes::from(buf)))
}

/// Fills `slices` from `offset` on, in order (`preadv`, again after a
/// short read or an interruption).
#[cfg(target_os = "linux")]
fn vectored_read(
    file: &fs::File,
    mut offset: u64,
    mut slices: &mut [std::io::IoSliceMut<'_>],
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // The kernel takes at most this many slices a call (`IOV_MAX`).
    const MOST: usize = 1024;
    while !slices.is_empty() {
        let count = slices.len().min(MOST);
        let at = libc::off_t::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: `IoSliceMut` is ABI-compatible with `iovec` on Unix (the
        // standard library guarantees it); the first `count` of `slices`
        // each describe a live, exclusively borrowed buffer that outlives
        // the call, and the kernel writes at most each one's length into
        // it. `count` is within `slices` and at most `IOV_MAX`.
        #[allow(unsafe_code)]
        let got = unsafe {
            libc::preadv(
                file.as_raw_fd(),
                slices.as_ptr().cast::<libc::iovec>(),
                count as libc::c_int,
                at,
            )
        };
        if got < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let got = usize::try_from(got).unwrap_or(0);
        if got == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        offset = offset.saturating_add(got as u64);
        std::io::IoSliceMut::advance_slices(&mut slices, got);
    }
    Ok(())
}

impl ReadableStorage for LocalStorage {
    fn read(&self, key: &str) -> Result<Option<Bytes>> {
        let Some((file, size)) = self.handle(key)? else {
            return Ok(None);
        };
        read_at(&file, key, 0, size, size).map(Some)
    }

    fn read_ranges(&self, requests: &[RangeRequest]) -> Result<Vec<Option<RangeRead>>> {
        // On one thread: spreading many small files over threads measured
        // slower here (1,000 fragment footers: 14 ms on one thread, 40 ms
        // on two). Each file is opened once however many of its ranges
        // are asked for, and stays open for the next batches.
        let mut open: HashMap<&str, Option<(Arc<fs::File>, u64)>> = HashMap::new();
        tracing::trace!(ranges = requests.len(), "local read");
        let mut out = Vec::with_capacity(requests.len());
        for r in requests {
            if !open.contains_key(r.key.as_str()) {
                open.insert(&r.key, self.handle(&r.key)?);
            }
            let answer = match open.get(r.key.as_str()) {
                Some(Some((file, size))) => {
                    let size = *size;
                    let (offset, len) = r.range.resolve(&r.key, size)?;
                    #[cfg(target_os = "linux")]
                    let arranged = match &r.front {
                        Some(front) => read_arranged_at(file, &r.key, offset, len, size, front)?,
                        None => None,
                    };
                    #[cfg(not(target_os = "linux"))]
                    let arranged: Option<Bytes> = None;
                    let (bytes, arranged) = match arranged {
                        Some(bytes) => (bytes, true),
                        None => (read_at(file, &r.key, offset, len, size)?, false),
                    };
                    Some(RangeRead {
                        bytes,
                        file_size: size,
                        arranged,
                    })
                }
                _ => None,
            };
            out.push(answer);
        }
        Ok(out)
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        Ok(self.handle(key)?.map(|(_, size)| size))
    }

    /// The kernel's copies out of the page cache: CPU work (W3's boxes: a
    /// fifth of the read's time, the workers idle meanwhile).
    fn parallel_ranges(&self) -> bool {
        true
    }

    /// `file://` and the absolute path, made absolute without resolving
    /// links and with `.` and `..` taken out by the letter, as TileDB makes
    /// local paths absolute (a `..` above the root names nothing).
    fn uri(&self, key: &str) -> Option<String> {
        let path = std::path::absolute(self.resolve(key).ok()?).ok()?;
        let mut parts: Vec<&str> = Vec::new();
        for part in path.components() {
            match part {
                Component::Normal(p) => parts.push(p.to_str()?),
                Component::ParentDir => {
                    parts.pop()?;
                }
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
        Some(format!("file:///{}", parts.join("/")))
    }

    fn read_range(&self, key: &str, range: ByteRange) -> Result<Option<RangeRead>> {
        let Some((file, size)) = self.handle(key)? else {
            return Ok(None);
        };
        let (offset, len) = range.resolve(key, size)?;
        let bytes = read_at(&file, key, offset, len, size)?;
        Ok(Some(RangeRead {
            bytes,
            file_size: size,
            arranged: false,
        }))
    }
}

impl ListableStorage for LocalStorage {
    fn list_dir(&self, dir: &str) -> Result<Listing> {
        let full = self.resolve(dir)?;
        self.links.dir(&self.root, dir, &full)?;
        let key = check_path(dir)?;
        let entries = match fs::read_dir(&full) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Listing::default()),
            Err(e) => return Err(io_err(dir, e)),
        };
        let mut listing = Listing::default();
        let mut plain_dirs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_err(dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                return Err(StorageError::InvalidPath {
                    path: join(key, &name.to_string_lossy()),
                    reason: "file name is not UTF-8",
                });
            };
            if name.starts_with(TEMP_PREFIX) {
                continue; // a write in progress: not an object yet
            }
            let path = join(key, name);
            // The entry's type comes with the listing; its size would take
            // a `stat` per file, which only the few files read whole need
            // (they are read with `ByteRange::Whole`). An array of 1,000
            // fragments lists 1,000 commit files.
            let kind = entry.file_type().map_err(|e| io_err(&path, e))?;
            if kind.is_dir() {
                listing.dirs.push(path);
                plain_dirs.push(entry.path());
            } else {
                listing.files.push(ObjectMeta::new(path, None));
            }
        }
        // Files in the directories a listing finds are often read next
        // (pre-v5 fragment directories, a copy's or a vacuum's walk): the
        // listing vouches for them. (An open does not list `__fragments/`:
        // each fragment directory there still costs one `lstat`.)
        self.links.listed(&self.root, &full, plain_dirs);
        listing.files.sort();
        listing.dirs.sort();
        Ok(listing)
    }
}

impl WritableStorage for LocalStorage {
    fn write(&self, key: &str, data: Bytes) -> Result<()> {
        let mut upload = Box::new(self.begin(key)?);
        upload.put(data)?;
        upload.finish()
    }

    /// Written aside like any file, then linked into place: a hard link
    /// fails when the name exists, atomically, where a rename would
    /// replace it.
    fn create(&self, key: &str, data: Bytes) -> Result<()> {
        let mut upload = Box::new(self.begin(key)?);
        upload.create = true;
        upload.put(data)?;
        upload.finish()
    }

    fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        Ok(Box::new(self.begin(key)?))
    }

    fn delete(&self, key: &str) -> Result<()> {
        let full = self.resolve(key)?;
        self.confine_parent(key, &full)?;
        self.forget(Some(&full));
        if full.is_dir() {
            return Err(StorageError::wrong_kind(key, "is a directory"));
        }
        match fs::remove_file(full) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err(key, e)),
            _ => Ok(()),
        }
    }

    fn delete_prefix(&self, dir: &str) -> Result<()> {
        let full = self.resolve(dir)?;
        // A link here goes, not what it leads to (`remove_dir_all` does
        // not follow it); the directories above must be the root's.
        self.confine_parent(dir, &full)?;
        self.forget(None);
        if full.is_file() {
            return Err(StorageError::wrong_kind(dir, "is a file"));
        }
        match fs::remove_dir_all(full) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err(dir, e)),
            _ => Ok(()),
        }
    }

    /// The temporary files of uploads a stopped process left (see
    /// [`temp_dir`]: in an array's or group's own directory), by their
    /// modification time.
    fn remove_abandoned_uploads(&self, dir: &str, before_ms: u64) -> Result<Vec<String>> {
        let full = self.resolve(dir)?;
        self.links.dir(&self.root, dir, &full)?;
        let before = std::time::UNIX_EPOCH + std::time::Duration::from_millis(before_ms);
        let entries = match fs::read_dir(&full) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(dir, e)),
        };
        let mut removed = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_err(dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str().filter(|n| n.starts_with(TEMP_PREFIX)) else {
                continue;
            };
            let key = join(check_path(dir)?, name);
            match entry.metadata().and_then(|m| m.modified()) {
                Ok(changed) if changed < before => {}
                Ok(_) => continue,
                // Gone meanwhile: finished, or removed by another vacuum.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err(&key, e)),
            }
            match fs::remove_file(entry.path()) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err(&key, e)),
                _ => removed.push(key),
            }
        }
        removed.sort();
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ListableStorage, WritableStorage};

    /// Files stay open between reads; one written or deleted through the
    /// storage reads as it is now, not as it was when it was opened.
    #[test]
    fn kept_open_files_read_what_their_name_holds_now() {
        let tmp = tempfile::tempdir().unwrap();
        let s = LocalStorage::new(tmp.path());
        s.write("f", Bytes::from_static(b"one")).unwrap();
        let range = |s: &LocalStorage| {
            s.read_range("f", ByteRange::new(0, 3))
                .unwrap()
                .map(|r| r.bytes)
        };
        assert_eq!(range(&s).as_deref(), Some(&b"one"[..]));
        s.write("f", Bytes::from_static(b"two")).unwrap();
        assert_eq!(range(&s).as_deref(), Some(&b"two"[..]));
        assert_eq!(s.size("f").unwrap(), Some(3));
        s.delete("f").unwrap();
        assert_eq!(range(&s), None);
        assert_eq!(s.read("f").unwrap(), None);
        // More files than are kept open: every one still reads.
        for i in 0..KEPT_OPEN + 10 {
            s.write(&format!("d/{i}"), Bytes::from(i.to_string()))
                .unwrap();
        }
        for i in 0..KEPT_OPEN + 10 {
            assert_eq!(s.read(&format!("d/{i}")).unwrap().unwrap(), i.to_string());
        }
        s.delete_prefix("d").unwrap();
        assert_eq!(s.read("d/3").unwrap(), None);
    }

    /// A range asked for with a front comes back arranged, in one read of
    /// many slices (more than the kernel takes in one call); a front that
    /// does not fit the range is ignored, the bytes in file order.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_range_with_a_front_comes_back_arranged() {
        let tmp = tempfile::tempdir().unwrap();
        let s = LocalStorage::new(tmp.path());
        let file: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        s.write("f", Bytes::from(file.clone())).unwrap();
        // 3,000 kept parts of 20 bytes, 12 between them: 6,001 slices.
        let front: Arc<[std::ops::Range<u64>]> =
            (0..3000u64).map(|i| 8 + i * 32..8 + i * 32 + 20).collect();
        let (offset, len) = (1000u64, 96_100u64);
        let ask = |front: Arc<[std::ops::Range<u64>]>| {
            let r = RangeRequest::new("f", ByteRange::new(offset, len)).with_front(front);
            s.read_ranges(&[r]).unwrap().remove(0).unwrap()
        };
        let raw = &file[offset as usize..(offset + len) as usize];
        let got = ask(front.clone());
        assert!(got.arranged);
        assert_eq!(got.bytes.as_ref(), crate::arrange(raw, &front).unwrap());
        assert_eq!(crate::unarrange(&got.bytes, &front).unwrap(), raw);
        // The arranged answer's allocation is the caller's to take over.
        let at = got.bytes.as_ptr();
        let taken = Vec::from(got.bytes);
        assert_eq!(taken.as_ptr(), at);
        let past: Arc<[std::ops::Range<u64>]> = std::iter::once(10..len + 1).collect();
        let got = ask(past);
        assert!(!got.arranged);
        assert_eq!(got.bytes.as_ref(), raw);
    }
    /// A write refused halfway (its uploads dropped unfinished) leaves no
    /// directory it made; directories that were there, or that hold
    /// anything, stay.
    #[test]
    fn abandoned_uploads_leave_no_directory_they_made() {
        let tmp = tempfile::tempdir().unwrap();
        let s = LocalStorage::new(tmp.path());
        fs::create_dir(tmp.path().join("user")).unwrap();
        let part = || Bytes::from_static(b"part");
        // Two files of one new fragment directory, both abandoned, the one
        // that made the directory first.
        let mut a = s.upload("user/arr/__fragments/f/a.tdb").unwrap();
        a.put(part()).unwrap();
        let mut b = s.upload("user/arr/__fragments/f/b.tdb").unwrap();
        b.put(part()).unwrap();
        drop(a);
        assert!(
            tmp.path().join("user/arr/__fragments/f").exists(),
            "b is in it"
        );
        drop(b);
        assert!(!tmp.path().join("user/arr").exists());
        assert!(tmp.path().join("user").is_dir(), "it was there before");
        // A finished file keeps its directory.
        let mut c = s.upload("user/g/c.tdb").unwrap();
        c.put(part()).unwrap();
        let mut d = s.upload("user/g/d.tdb").unwrap();
        d.put(part()).unwrap();
        c.finish().unwrap();
        drop(d);
        assert_eq!(
            s.list_dir("user/g").unwrap().files,
            [ObjectMeta::new("user/g/c.tdb", None)]
        );
        // And a directory removed under a new upload is made again.
        let mut e = s.upload("user/h/e.tdb").unwrap();
        let mut f = s.upload("user/h/f.tdb").unwrap();
        e.put(part()).unwrap();
        drop(e);
        f.put(part()).unwrap();
        f.finish().unwrap();
        assert_eq!(
            s.read("user/h/f.tdb").unwrap().as_deref(),
            Some(&b"part"[..])
        );
    }

    /// A file in progress sits in the nearest directory not named like
    /// TileDB's own (`__...`), where a process killed mid-write leaves it
    /// for no reader to trip on; finished, it is in place and nothing is
    /// left beside it.
    #[test]
    fn files_in_progress_stay_out_of_tiledbs_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let s = LocalStorage::new(tmp.path());
        let names = |dir: &str| -> Vec<String> {
            let mut v: Vec<String> = fs::read_dir(tmp.path().join(dir))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        let part = || Bytes::from_static(b"part");
        let mut meta = s.upload("arr/__meta/__1_1_u_22").unwrap();
        meta.put(part()).unwrap();
        let mut schema = s.upload("arr/__schema/__enumerations/e").unwrap();
        schema.put(part()).unwrap();
        let mut tile = s.upload("arr/__fragments/__1_1_u_22/a0.tdb").unwrap();
        tile.put(part()).unwrap();
        let mut other = s.upload("arr/__fragments/__1_1_u_22/a1.tdb").unwrap();
        other.put(part()).unwrap();
        let in_progress = names("arr");
        assert_eq!(in_progress.len(), 7, "{in_progress:?}");
        assert!(in_progress[..4]
            .iter()
            .all(|n| n.starts_with(".tdb-tmp-") && !n[1..].contains(['_', '.'])));
        assert!(names("arr/__meta").is_empty());
        assert!(names("arr/__fragments/__1_1_u_22").is_empty());
        // One abandoned empties (and so removes) the fragment's directory
        // the other finishes into: that is made again.
        drop(other);
        assert!(!tmp.path().join("arr/__fragments").exists());
        for u in [meta, schema, tile] {
            u.finish().unwrap();
        }
        assert_eq!(names("arr"), ["__fragments", "__meta", "__schema"]);
        assert_eq!(
            s.read("arr/__fragments/__1_1_u_22/a0.tdb").unwrap(),
            Some(part())
        );
        // The root is as far as it goes, whatever its name.
        let s = LocalStorage::new(tmp.path().join("__g"));
        let mut u = s.upload("__meta/m").unwrap();
        u.put(part()).unwrap();
        assert_eq!(names("__g").len(), 2);
        u.finish().unwrap();
        assert_eq!(names("__g"), ["__meta"]);
    }

    /// What a process stopped mid-upload left is removed once older than
    /// the caller's bound; younger files, and uploads going on, stay.
    #[test]
    fn abandoned_uploads_are_removed_when_old_enough() {
        let tmp = tempfile::tempdir().unwrap();
        let s = LocalStorage::new(tmp.path());
        let now_ms = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64
        };
        fs::create_dir_all(tmp.path().join("arr/__meta")).unwrap();
        let left = |name: &str, age_s: u64| {
            let f = fs::File::create(tmp.path().join("arr").join(name)).unwrap();
            let t = std::time::SystemTime::now() - std::time::Duration::from_secs(age_s);
            f.set_modified(t).unwrap();
        };
        left(".tdb-tmp-1-1", 3_600);
        left(".tdb-tmp-1-2", 60);
        left("user-file", 3_600);
        let mut going = s.upload("arr/__meta/m").unwrap();
        going.put(Bytes::from_static(b"part")).unwrap();
        let ten_minutes_ago = now_ms() - 600_000;
        assert_eq!(
            s.remove_abandoned_uploads("arr", ten_minutes_ago).unwrap(),
            ["arr/.tdb-tmp-1-1"]
        );
        assert!(tmp.path().join("arr/.tdb-tmp-1-2").exists());
        assert!(tmp.path().join("arr/user-file").exists());
        going.finish().unwrap();
        assert_eq!(
            s.remove_abandoned_uploads("arr", now_ms() + 1_000).unwrap(),
            ["arr/.tdb-tmp-1-2"]
        );
        assert_eq!(
            s.remove_abandoned_uploads("none", now_ms()).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            s.read("arr/__meta/m").unwrap().as_deref(),
            Some(&b"part"[..])
        );
    }

    /// Links out of the root are refused for reading, listing, writing and
    /// deleting through them, and nothing outside changes; links inside
    /// the root, and a root that is itself a link, are followed.
    #[test]
    fn symbolic_links_do_not_lead_out_of_the_root() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        fs::create_dir_all(outside.join("dir")).unwrap();
        fs::write(outside.join("secret"), b"secret").unwrap();
        fs::write(outside.join("dir/f"), b"f").unwrap();
        fs::create_dir_all(outside.join("dir/sub")).unwrap();
        fs::write(outside.join("dir/sub/f"), b"f").unwrap();
        let real = tmp.path().join("real");
        fs::create_dir_all(real.join("arr/__schema")).unwrap();
        fs::write(real.join("arr/__schema/s"), b"schema").unwrap();
        symlink(outside.join("secret"), real.join("arr/__schema/out")).unwrap();
        symlink(real.join("arr/__schema/s"), real.join("arr/__schema/in")).unwrap();
        symlink(outside.join("dir"), real.join("arr/__fragments")).unwrap();
        symlink(real.join("arr/__schema"), real.join("arr/inner")).unwrap();
        symlink(&real, tmp.path().join("root")).unwrap();
        let refused = |r: Result<()>| {
            assert!(
                matches!(&r, Err(StorageError::InvalidPath { reason, .. }) if reason.contains("symbolic link")),
                "{r:?}"
            )
        };
        // Rooted where no link is on the way, files open in one call
        // until a link is met (Linux: `openat2`), then as elsewhere.
        let plain = LocalStorage::new(&real);
        assert_eq!(
            plain.read("arr/__schema/s").unwrap().as_deref(),
            Some(&b"schema"[..])
        );
        assert_eq!(plain.read("arr/__schema/none").unwrap(), None);
        assert!(!plain.links.links_met());
        refused(plain.read("arr/__fragments/sub/f").map(drop));
        // (Where `openat2` is missing, or a seccomp filter refuses it, no
        // link is ever met: every file goes the checked way.)
        assert_eq!(plain.links.links_met(), Confinement::opens_in_one_call());
        refused(plain.read("arr/__schema/out").map(drop));
        assert_eq!(
            plain.read("arr/inner/s").unwrap().as_deref(),
            Some(&b"schema"[..])
        );

        let s = LocalStorage::new(tmp.path().join("root"));
        // A listing remembers the plain directories it finds, not links.
        assert_eq!(s.list_dir("arr").unwrap().dirs, ["arr/__schema"]);
        refused(s.read("arr/__schema/out").map(drop));
        refused(s.size("arr/__schema/out").map(drop));
        refused(s.read("arr/__fragments/f").map(drop));
        // A plain directory beneath a link out is out too.
        refused(s.read("arr/__fragments/sub/f").map(drop));
        refused(s.list_dir("arr/__fragments/sub").map(drop));
        refused(s.list_dir("arr/__fragments").map(drop));
        refused(s.write("arr/__fragments/new/a.tdb", Bytes::from_static(b"x")));
        refused(s.write("arr/__fragments/g", Bytes::from_static(b"x")));
        refused(s.delete("arr/__fragments/f"));
        refused(s.delete_prefix("arr/__fragments/dir"));
        assert_eq!(fs::read(outside.join("dir/f")).unwrap(), b"f");
        assert!(!outside.join("dir/new").exists() && !outside.join("dir/g").exists());
        // Inside the root, and through the root's own link, all is well.
        assert_eq!(
            s.read("arr/__schema/in").unwrap().as_deref(),
            Some(&b"schema"[..])
        );
        assert_eq!(s.list_dir("arr/__schema").unwrap().files.len(), 3);
        assert_eq!(
            s.read("arr/inner/s").unwrap().as_deref(),
            Some(&b"schema"[..])
        );
        s.write("arr/__meta/m", Bytes::from_static(b"m")).unwrap();
        assert_eq!(fs::read(real.join("arr/__meta/m")).unwrap(), b"m");
        // A link itself can go; what it leads to stays.
        s.delete("arr/__schema/out").unwrap();
        s.delete_prefix("arr/__fragments").unwrap();
        assert_eq!(fs::read(outside.join("secret")).unwrap(), b"secret");
        assert_eq!(fs::read(outside.join("dir/f")).unwrap(), b"f");
    }

    #[test]
    fn uris_are_absolute_file_uris_as_tiledbs() {
        let s = LocalStorage::new("/data/g");
        assert_eq!(s.uri("").as_deref(), Some("file:///data/g"));
        assert_eq!(
            s.uri("__meta/x").as_deref(),
            Some("file:///data/g/__meta/x")
        );
        let cwd = std::env::current_dir().unwrap();
        let rel = LocalStorage::new("g").uri("").unwrap();
        assert_eq!(rel, format!("file://{}/g", cwd.display()));
        assert_eq!(s.uri("../x"), None, "keys leaving the root are refused");
        // Roots are taken by the letter, as TileDB's `Posix::abs_path`.
        let dotted = LocalStorage::new("/data/./x/../g/");
        assert_eq!(dotted.uri("a").as_deref(), Some("file:///data/g/a"));
        assert_eq!(LocalStorage::new("/").uri("").as_deref(), Some("file:///"));
        assert_eq!(LocalStorage::new("/data/../..").uri(""), None);
    }

    #[test]
    fn handles_on_one_directory_write_side_by_side() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (LocalStorage::new(tmp.path()), LocalStorage::new(tmp.path()));
        // `b` writes into the same directory while `a`'s temporary file is
        // open: with one temporary name per handle they would collide.
        let mut step = 0;
        let mut parts = std::iter::from_fn(|| {
            step += 1;
            match step {
                1 => Some(Ok(Bytes::from_static(b"x1"))),
                2 => {
                    b.write("d/y", Bytes::from_static(b"y")).unwrap();
                    Some(Ok(Bytes::from_static(b"x2")))
                }
                _ => None,
            }
        });
        a.write_stream("d/x", &mut parts).unwrap();
        assert_eq!(a.read("d/x").unwrap().unwrap(), Bytes::from_static(b"x1x2"));
        assert_eq!(a.read("d/y").unwrap().unwrap(), Bytes::from_static(b"y"));
        assert_eq!(a.list_dir("d").unwrap().files.len(), 2);
    }

    /// Uploads large enough to be synced on the side while they go on end
    /// with every byte in order, and one abandoned after such a sync
    /// leaves nothing behind.
    #[test]
    fn uploads_synced_on_the_side_keep_every_byte_or_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let s = LocalStorage::new(tmp.path());
        let part = |i: u64| Bytes::from(vec![i as u8; (FLUSH_EVERY / 3 + i) as usize]);
        let mut u = s.upload("d/big").unwrap();
        let mut want = Vec::new();
        for i in 0..10 {
            want.extend_from_slice(&part(i));
            u.put(part(i)).unwrap();
        }
        u.finish().unwrap();
        assert!(want.len() as u64 > 3 * FLUSH_EVERY);
        assert_eq!(s.read("d/big").unwrap().unwrap(), Bytes::from(want));
        let mut u = s.upload("d/dropped").unwrap();
        for i in 0..10 {
            u.put(part(i)).unwrap();
        }
        drop(u);
        assert_eq!(s.read("d/dropped").unwrap(), None);
        // Listings hide temporary files: look at the directory itself.
        let names: Vec<_> = fs::read_dir(tmp.path().join("d"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["big"], "no temporary file left");
    }
}
