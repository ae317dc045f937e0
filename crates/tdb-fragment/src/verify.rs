//! `verify`: a scrub no TileDB tool offers. It reads every file of an array,
//! unfilters every tile and checks what the directory, the fragment metadata
//! and the data say against each other. Corruption is reported as
//! [`Problem`]s, one at a time through a callback, and the scrub goes on:
//! memory stays bounded by one tile, whatever the array's size. Only a
//! storage failure (the bytes cannot be fetched at all) stops it.

use crate::directory::DirectoryListing;
use crate::open::{
    dir_label, object_files, object_kind, read_files, schema_history, ObjectKind, ReadStorage,
};
use crate::{FragmentError, Result, TimeWindow};
use std::collections::BTreeSet;
use std::fmt;
use tdb_format::names::VAC_EXT;
use tdb_format::{classify, ObjectFile};

/// What kind of problem a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ProblemKind {
    /// A fragment directory no commit makes visible (a write that never
    /// finished, or one whose commit was lost).
    UncommittedFragment,
    /// A commit whose fragment directory is missing or empty.
    OrphanedCommit,
    /// A file of no pattern the format knows (TileDB ignores it).
    UnknownFile,
    /// The directory's own files (commits, vacuum lists, schemas) could
    /// not be resolved.
    Directory,
    /// A file the fragment metadata says exists is not there.
    MissingFile,
    /// A file whose size disagrees with the fragment metadata.
    FileSize,
    /// Fragment metadata that cannot be read.
    FragmentMetadata,
    /// A tile that cannot be read or unfiltered (corrupt bytes, a checksum
    /// that does not match, a wrong offset).
    Tile,
    /// Data that disagrees with the metadata describing it (cell counts,
    /// MBRs, non-empty domain, tile min/max/sum/null count).
    Mismatch,
}

/// One problem found, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Problem {
    /// What kind of problem.
    pub kind: ProblemKind,
    /// The file, relative to the array.
    pub file: String,
    /// The tile, when the problem is in one.
    pub tile: Option<u64>,
    /// The byte offset in the file, when known.
    pub offset: Option<u64>,
    /// What is wrong, for people.
    pub detail: String,
}

impl Problem {
    fn new(kind: ProblemKind, file: impl Into<String>, detail: impl Into<String>) -> Self {
        Problem {
            kind,
            file: file.into(),
            tile: None,
            offset: None,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(t) = self.tile {
            write!(f, " tile {t}")?;
        }
        if let Some(o) = self.offset {
            write!(f, " @{o}")?;
        }
        write!(f, ": {:?}: {}", self.kind, self.detail)
    }
}

/// What a scrub covered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyReport {
    /// Files listed.
    pub files: usize,
    /// Fragments checked.
    pub fragments: usize,
    /// Tiles unfiltered and checked.
    pub tiles: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Problems reported.
    pub problems: usize,
}

/// Scrubs the array at `dir` of `storage`, reporting each problem to
/// `report` as it is found. Today it checks the directory: every file is
/// one the format knows, schemas and commit files parse (with `key` when
/// encrypted), every fragment directory is committed and every commit has
/// its fragment.
pub fn verify_array<S: ReadStorage + ?Sized>(
    storage: &S,
    dir: &str,
    key: Option<&[u8; 32]>,
    report: &mut dyn FnMut(Problem),
) -> Result<VerifyReport> {
    let mut summary = VerifyReport::default();
    let mut problem = |p: Problem, summary: &mut VerifyReport| {
        summary.problems += 1;
        report(p);
    };
    if object_kind(storage, dir)? != Some(ObjectKind::Array) {
        return Err(FragmentError::missing(
            dir_label(dir),
            "array schema: not a TileDB array",
        ));
    }
    let files = object_files(storage, dir)?.files;
    summary.files = files.len();
    for f in &files {
        if classify(&f.path) == ObjectFile::Unknown {
            problem(
                Problem::new(ProblemKind::UnknownFile, &f.path, "no file of the format"),
                &mut summary,
            );
        }
    }
    let listing = DirectoryListing::new(&files);
    let schema_files = listing.schema_files();
    let mut wanted = listing.files_to_read();
    wanted.extend(schema_files.iter().map(String::as_str));
    let contents = read_files(storage, dir, &listing, &wanted)?;
    summary.bytes_read += contents.values().map(|b| b.len() as u64).sum::<u64>();
    let resolved = listing.resolve(&contents, TimeWindow::ALL).and_then(|d| {
        schema_history(dir, &schema_files, &contents, key)?;
        Ok(d)
    });
    let directory = match resolved {
        Ok(d) => d,
        Err(e) => {
            problem(
                Problem::new(ProblemKind::Directory, dir_label(dir), error_chain(&e)),
                &mut summary,
            );
            return Ok(summary);
        }
    };

    // Fragment directories that hold files, against the committed ones.
    let present: BTreeSet<String> = files
        .iter()
        .filter_map(|f| match classify(&f.path) {
            ObjectFile::FragmentMetadata { .. } | ObjectFile::Data { .. } => {
                f.path.rsplit_once('/').map(|(d, _)| d.to_owned())
            }
            _ => None,
        })
        .collect();
    let committed: BTreeSet<String> = directory
        .unfiltered_fragments
        .iter()
        .filter(|f| !f.path.ends_with(VAC_EXT))
        .map(|f| f.path.clone())
        .collect();
    for d in present.difference(&committed) {
        problem(
            Problem::new(
                ProblemKind::UncommittedFragment,
                d.as_str(),
                "fragment directory without a commit: invisible to reads",
            ),
            &mut summary,
        );
    }
    for d in committed.difference(&present) {
        problem(
            Problem::new(
                ProblemKind::OrphanedCommit,
                d.as_str(),
                "committed, but its directory holds no fragment files",
            ),
            &mut summary,
        );
    }
    summary.fragments = committed.intersection(&present).count();
    Ok(summary)
}

/// An error and its causes, each once, joined by `: `.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}
