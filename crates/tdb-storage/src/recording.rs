//! A wrapper that records every request a backend serves: the I/O trace a
//! test pins, so a change that adds requests or bytes shows up as a diff.

use crate::{
    ByteRange, ListableStorage, Listing, ObjectMeta, RangeRead, RangeRequest, ReadableStorage,
    Result, Upload, WritableStorage,
};
use bytes::Bytes;
use std::fmt;
use std::sync::Mutex;

/// One request, with what it moved.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Request {
    /// `list_dir`: how many files and subdirectories came back.
    List {
        /// The directory.
        dir: String,
        /// Files listed.
        files: usize,
        /// Subdirectories listed.
        dirs: usize,
    },
    /// `list_prefix`: how many files below the directory came back.
    ListPrefix {
        /// The directory.
        dir: String,
        /// Files listed.
        files: usize,
    },
    /// `read` of a whole file; `None` when it did not exist.
    Read {
        /// The file.
        key: String,
        /// Bytes returned.
        bytes: Option<u64>,
    },
    /// One `read_ranges` batch: each range and the bytes it returned.
    ReadRanges {
        /// `(file, range, bytes returned)` per request.
        ranges: Vec<(String, ByteRange, Option<u64>)>,
        /// Per request, whether its answer came arranged
        /// ([`crate::RangeRequest::front`]).
        arranged: Vec<bool>,
    },
    /// `size`.
    Size {
        /// The file.
        key: String,
    },
    /// `write`: bytes written.
    Write {
        /// The file.
        key: String,
        /// Bytes written.
        bytes: u64,
    },
    /// `create`: bytes written to a file that had to be new.
    Create {
        /// The file.
        key: String,
        /// Bytes written.
        bytes: u64,
    },
    /// One part put into an upload, when it is put (before the upload
    /// finishes and the file appears).
    Put {
        /// The file.
        key: String,
        /// Bytes in the part.
        bytes: u64,
    },
    /// A finished `upload` (or `write_stream`): bytes written, in how
    /// many parts.
    Upload {
        /// The file.
        key: String,
        /// Bytes written.
        bytes: u64,
        /// Parts put.
        parts: u64,
    },
    /// `delete`.
    Delete {
        /// The file.
        key: String,
    },
    /// `delete_prefix`.
    DeletePrefix {
        /// The directory.
        dir: String,
    },
}

impl Request {
    /// The ranges a `read_ranges` batch asked for, each with its file and
    /// the bytes it returned (none for any other request): what tests and
    /// benches tally.
    pub fn ranges(&self) -> &[(String, ByteRange, Option<u64>)] {
        match self {
            Request::ReadRanges { ranges, .. } => ranges,
            _ => &[],
        }
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |b: &Option<u64>| b.map_or("missing".to_owned(), |b| format!("{b} B"));
        match self {
            Request::List { dir, files, dirs } => {
                write!(f, "list {dir:?}: {files} files, {dirs} dirs")
            }
            Request::ListPrefix { dir, files } => write!(f, "list_prefix {dir:?}: {files} files"),
            Request::Read { key, bytes } => write!(f, "read {key}: {}", opt(bytes)),
            Request::ReadRanges { ranges, arranged } => {
                let total: u64 = ranges.iter().filter_map(|r| r.2).sum();
                write!(f, "read_ranges ({} ranges, {total} B)", ranges.len())?;
                for (i, (key, range, bytes)) in ranges.iter().enumerate() {
                    write!(f, "\n    {key} [{range}]: {}", opt(bytes))?;
                    if arranged.get(i).copied().unwrap_or(false) {
                        f.write_str(" arranged")?;
                    }
                }
                Ok(())
            }
            Request::Size { key } => write!(f, "size {key}"),
            Request::Write { key, bytes } => write!(f, "write {key}: {bytes} B"),
            Request::Create { key, bytes } => write!(f, "create {key}: {bytes} B"),
            Request::Put { key, bytes } => write!(f, "put {key}: {bytes} B"),
            Request::Upload { key, bytes, parts } => {
                write!(f, "upload {key}: {bytes} B in {parts} parts")
            }
            Request::Delete { key } => write!(f, "delete {key}"),
            Request::DeletePrefix { dir } => write!(f, "delete_prefix {dir}"),
        }
    }
}

/// Any backend, with every request it serves recorded in order.
#[derive(Debug)]
pub struct RecordingStorage<S> {
    inner: S,
    log: Mutex<Vec<Request>>,
    /// Says it is remote whatever `inner` says ([`RecordingStorage::as_remote`]).
    remote: bool,
}

impl<S> RecordingStorage<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        RecordingStorage {
            inner,
            log: Mutex::new(Vec::new()),
            remote: false,
        }
    }

    /// Wraps `inner`, saying it is remote: readers then take their
    /// object-store ways (large windows, the next batch fetched ahead)
    /// over a local backend, and a test counts the requests they make.
    pub fn as_remote(inner: S) -> Self {
        RecordingStorage {
            remote: true,
            ..RecordingStorage::new(inner)
        }
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    fn push(&self, r: Request) {
        // A poisoned log only lost the entry being pushed by a panicking thread.
        self.log.lock().unwrap_or_else(|p| p.into_inner()).push(r);
    }

    /// Takes the requests recorded so far, leaving the log empty.
    pub fn take(&self) -> Vec<Request> {
        std::mem::take(&mut *self.log.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The requests recorded so far as text, one per line, with totals at
    /// the end (requests, bytes read): the form I/O-trace snapshots pin.
    pub fn trace(&self) -> String {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        let mut bytes = 0;
        for r in log.iter() {
            out.push_str(&r.to_string());
            out.push('\n');
            bytes += match r {
                Request::Read { bytes, .. } => bytes.unwrap_or(0),
                Request::ReadRanges { ranges, .. } => ranges.iter().filter_map(|r| r.2).sum(),
                _ => 0,
            };
        }
        out.push_str(&format!("total: {} requests, {bytes} B read\n", log.len()));
        out
    }
}

impl<S: ReadableStorage> ReadableStorage for RecordingStorage<S> {
    fn read(&self, key: &str) -> Result<Option<Bytes>> {
        let out = self.inner.read(key)?;
        self.push(Request::Read {
            key: key.to_owned(),
            bytes: out.as_ref().map(|b| b.len() as u64),
        });
        Ok(out)
    }

    fn read_ranges(&self, requests: &[RangeRequest]) -> Result<Vec<Option<RangeRead>>> {
        let out = self.inner.read_ranges(requests)?;
        let ranges = requests
            .iter()
            .zip(&out)
            .map(|(r, b)| {
                let bytes = b.as_ref().map(|b| b.bytes.len() as u64);
                (r.key.clone(), r.range, bytes)
            })
            .collect();
        let arranged = out
            .iter()
            .map(|b| b.as_ref().is_some_and(|b| b.arranged))
            .collect();
        self.push(Request::ReadRanges { ranges, arranged });
        Ok(out)
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        self.push(Request::Size {
            key: key.to_owned(),
        });
        self.inner.size(key)
    }

    fn uri(&self, key: &str) -> Option<String> {
        self.inner.uri(key)
    }

    /// Says what the inner backend says (or that it is remote, made
    /// [`RecordingStorage::as_remote`]), so traces show a remote backend's
    /// piece sizes. Async batches (reads ahead among them) go through the
    /// default [`ReadableStorage::read_ranges_async`], a recorded
    /// `read_ranges` at the moment they are asked for.
    fn remote(&self) -> bool {
        self.remote || self.inner.remote()
    }
}

impl<S: ListableStorage> ListableStorage for RecordingStorage<S> {
    fn list_dir(&self, dir: &str) -> Result<Listing> {
        let out = self.inner.list_dir(dir)?;
        self.push(Request::List {
            dir: dir.to_owned(),
            files: out.files.len(),
            dirs: out.dirs.len(),
        });
        Ok(out)
    }

    fn list_prefix(&self, dir: &str) -> Result<Vec<ObjectMeta>> {
        // The backend's own (an object store lists a prefix in one go).
        let out = self.inner.list_prefix(dir)?;
        self.push(Request::ListPrefix {
            dir: dir.to_owned(),
            files: out.len(),
        });
        Ok(out)
    }
}

impl<S: WritableStorage> WritableStorage for RecordingStorage<S> {
    fn write(&self, key: &str, data: Bytes) -> Result<()> {
        let bytes = data.len() as u64;
        self.inner.write(key, data)?;
        self.push(Request::Write {
            key: key.to_owned(),
            bytes,
        });
        Ok(())
    }

    fn create(&self, key: &str, data: Bytes) -> Result<()> {
        let bytes = data.len() as u64;
        self.inner.create(key, data)?;
        self.push(Request::Create {
            key: key.to_owned(),
            bytes,
        });
        Ok(())
    }

    fn upload<'a>(&'a self, key: &str) -> Result<Box<dyn Upload + 'a>> {
        Ok(Box::new(RecordedUpload {
            storage: self,
            key: key.to_owned(),
            bytes: 0,
            parts: 0,
            inner: self.inner.upload(key)?,
        }))
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.inner.delete(key)?;
        self.push(Request::Delete {
            key: key.to_owned(),
        });
        Ok(())
    }

    fn delete_prefix(&self, dir: &str) -> Result<()> {
        self.inner.delete_prefix(dir)?;
        self.push(Request::DeletePrefix {
            dir: dir.to_owned(),
        });
        Ok(())
    }

    /// Recorded as one delete per file removed.
    fn remove_abandoned_uploads(&self, dir: &str, before_ms: u64) -> Result<Vec<String>> {
        let removed = self.inner.remove_abandoned_uploads(dir, before_ms)?;
        for key in &removed {
            self.push(Request::Delete { key: key.clone() });
        }
        Ok(removed)
    }
}

struct RecordedUpload<'a, S> {
    storage: &'a RecordingStorage<S>,
    key: String,
    bytes: u64,
    parts: u64,
    inner: Box<dyn Upload + 'a>,
}

impl<S: Send + Sync> Upload for RecordedUpload<'_, S> {
    fn put(&mut self, part: Bytes) -> Result<()> {
        let bytes = part.len() as u64;
        self.inner.put(part)?;
        self.bytes += bytes;
        self.parts += 1;
        self.storage.push(Request::Put {
            key: self.key.clone(),
            bytes,
        });
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<()> {
        let RecordedUpload {
            storage,
            key,
            bytes,
            parts,
            inner,
        } = *self;
        inner.finish()?;
        storage.push(Request::Upload { key, bytes, parts });
        Ok(())
    }
}
