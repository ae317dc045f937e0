//! The small text files of the commits folder whose contents decide which
//! fragments a read sees: consolidated commits (`.con`), ignore files
//! (`.ign`) and vacuum lists (`.vac`, also in `__meta/` and, before v12, in
//! the array root).
//!
//! All three are lines ended by `\n`, read as TileDB reads them with
//! `std::getline`: a last line without `\n` still counts, an empty file has
//! no lines. A `.con` line naming a delete commit (`.del`) is followed by
//! the `u64` size and the bytes of that delete commit file. Writers emit
//! what TileDB's writers emit (every line ended by `\n`), so a parsed file
//! written back is the same bytes.

use crate::{FragmentError, Result};
use tdb_format::le;
use tdb_format::names::{DEL_EXT, FRAGMENTS_DIR, METADATA_DIR};
use tdb_format::span::{self, SpanValue};

/// Splits off one `getline` line, `field`: the text up to `\n` (not
/// included) and the rest after it. `None` at the end of the input.
fn getline<'a>(field: &str, bytes: &'a [u8]) -> Option<(&'a [u8], &'a [u8])> {
    if bytes.is_empty() {
        return None;
    }
    let mut parts = bytes.splitn(2, |&b| b == b'\n');
    let line = parts.next().unwrap_or_default();
    span::field(field, line, "text", || SpanValue::of_bytes(line));
    let newline = bytes.get(line.len()..line.len().saturating_add(1));
    span::field(
        "end of line",
        newline.unwrap_or_default(),
        "newline",
        || SpanValue::Null,
    );
    Some((line, parts.next().unwrap_or_default()))
}

fn text(file: &str, field: &str, line: &[u8]) -> Result<String> {
    String::from_utf8(line.to_vec())
        .map_err(|_| FragmentError::invalid(file, field, "line is not UTF-8"))
}

/// Every line of a text commit file.
fn lines(file: &str, field: &str, mut bytes: &[u8]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    while let Some((line, rest)) = getline(field, bytes) {
        out.push(text(file, field, line)?);
        bytes = rest;
    }
    Ok(out)
}

fn write_lines(lines: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in lines {
        out.extend_from_slice(l.as_bytes());
        out.push(b'\n');
    }
    out
}

/// An ignore file (`__commits/<name>.ign`): commit paths, relative to the
/// array directory (`__commits/<fragment>.wrt`), that a consolidated commits
/// file still lists but whose fragments are gone.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct IgnoreFile {
    /// The ignored commits, as written.
    pub commits: Vec<String>,
}

impl IgnoreFile {
    /// An ignore file listing `commits`.
    pub fn new(commits: Vec<String>) -> Self {
        IgnoreFile { commits }
    }

    /// Parses the bytes of `file`.
    pub fn parse(file: &str, bytes: &[u8]) -> Result<Self> {
        Ok(IgnoreFile {
            commits: lines(file, "ignored commit", bytes)?,
        })
    }

    /// The file's bytes.
    pub fn write(&self) -> Vec<u8> {
        write_lines(&self.commits)
    }
}

/// A vacuum list (`.vac`): the fragments (or metadata files) a consolidated
/// fragment (or metadata file) of the same name replaced.
///
/// Entries are kept as written: absolute URIs before format v19
/// (`file:///.../array/__1_2_<uuid>_5`), relative to the array URI from
/// v19 (`/__fragments/__1_2_<uuid>_22`, with the leading `/` TileDB writes
/// because it cuts the array URI without its trailing slash).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct VacuumFile {
    /// The entries, as written.
    pub entries: Vec<String>,
}

impl VacuumFile {
    /// A vacuum list of `entries` (write them as TileDB would: absolute
    /// before v19, `/`-prefixed relative from v19).
    pub fn new(entries: Vec<String>) -> Self {
        VacuumFile { entries }
    }

    /// Parses the bytes of `file`.
    pub fn parse(file: &str, bytes: &[u8]) -> Result<Self> {
        Ok(VacuumFile {
            entries: lines(file, "vacuum entry", bytes)?,
        })
    }

    /// The file's bytes.
    pub fn write(&self) -> Vec<u8> {
        write_lines(&self.entries)
    }

    /// The path relative to the array directory that `entry` names, by
    /// TileDB's rule for every era (`ArrayDirectory::get_full_vac_uri`):
    /// from the first `__fragments` on, else from the first `__meta` on,
    /// else the last path component (pre-v12 fragments in the array root).
    /// An entry without any `/` is an error, as in TileDB.
    pub fn array_relative_path(file: &str, entry: &str) -> Result<String> {
        if let Some(i) = entry.find(FRAGMENTS_DIR) {
            return Ok(entry[i..].to_owned());
        }
        if let Some(i) = entry.find(METADATA_DIR) {
            return Ok(entry[i..].to_owned());
        }
        match entry.rfind('/') {
            Some(i) => Ok(entry
                .get(i.saturating_add(1)..)
                .unwrap_or_default()
                .to_owned()),
            None => Err(FragmentError::invalid(
                file,
                "vacuum entry",
                format!("{entry:?} is not a URI"),
            )),
        }
    }
}

/// One commit in a consolidated commits file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsolidatedCommit {
    /// The commit's path relative to the array directory, as written
    /// (`__commits/<fragment>.wrt`, `__commits/<name>.del`, or a root
    /// `<fragment>.ok`).
    pub path: String,
    /// For a delete commit: the bytes of its `.del` file (a generic tile
    /// holding the serialized condition), embedded after the line.
    pub embedded: Option<Vec<u8>>,
    /// Where `embedded` starts in the `.con` file (0 when built in code;
    /// set by [`ConsolidatedCommits::parse`]).
    pub embedded_offset: u64,
}

impl ConsolidatedCommit {
    /// A fragment commit (`.wrt`/`.ok`) or an update commit entry.
    pub fn commit(path: impl Into<String>) -> Self {
        ConsolidatedCommit {
            path: path.into(),
            embedded: None,
            embedded_offset: 0,
        }
    }

    /// A delete commit entry carrying its `.del` file's bytes.
    pub fn delete(path: impl Into<String>, del_file: Vec<u8>) -> Self {
        ConsolidatedCommit {
            path: path.into(),
            embedded: Some(del_file),
            embedded_offset: 0,
        }
    }
}

/// A consolidated commits file (`__commits/<name>.con`).
///
/// TileDB's reader and writer embed contents for `.del` lines only (the
/// spec also describes `.upd` contents, but no TileDB release writes or
/// reads them), so this does the same.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ConsolidatedCommits {
    /// The commits, in file order.
    pub commits: Vec<ConsolidatedCommit>,
}

impl ConsolidatedCommits {
    /// A file holding `commits`.
    pub fn new(commits: Vec<ConsolidatedCommit>) -> Self {
        ConsolidatedCommits { commits }
    }

    /// Parses the bytes of `file`.
    pub fn parse(file: &str, bytes: &[u8]) -> Result<Self> {
        let mut commits = Vec::new();
        let mut rest = bytes;
        while let Some((line, after)) = getline("commit path", rest) {
            let path = text(file, "commit path", line)?;
            rest = after;
            let mut commit = ConsolidatedCommit::commit(path);
            if commit.path.ends_with(DEL_EXT) {
                let (tile, after) = le::run(le::bytes_u64("embedded delete commit"), rest)
                    .map_err(|e| FragmentError::format(file, commit.path.clone(), e))?;
                // `tile` and `after` are the tail of `bytes`.
                let tail = after.len().saturating_add(tile.len());
                commit.embedded_offset = bytes.len().saturating_sub(tail) as u64;
                commit.embedded = Some(tile.to_vec());
                rest = after;
            }
            commits.push(commit);
        }
        Ok(ConsolidatedCommits { commits })
    }

    /// The file's bytes (as TileDB's `write_consolidated_commits_file`).
    pub fn write(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for c in &self.commits {
            out.extend_from_slice(c.path.as_bytes());
            out.push(b'\n');
            if let Some(tile) = &c.embedded {
                le::put_bytes_u64(&mut out, tile);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getline_semantics() {
        assert!(IgnoreFile::parse("f", b"").unwrap().commits.is_empty());
        let f = IgnoreFile::parse("f", b"a\n\nb").unwrap();
        assert_eq!(f.commits, ["a", "", "b"]);
        assert_eq!(IgnoreFile::parse("f", b"a\n").unwrap().commits, ["a"]);
    }

    #[test]
    fn vacuum_entries_of_every_era() {
        let rel = |e| VacuumFile::array_relative_path("f", e).unwrap();
        assert_eq!(rel("/__fragments/__1_1_u_22"), "__fragments/__1_1_u_22");
        assert_eq!(
            rel("file:///tmp/a/__fragments/__1_1_u_15"),
            "__fragments/__1_1_u_15"
        );
        assert_eq!(rel("file:///tmp/a/__1_1_u_5"), "__1_1_u_5");
        assert_eq!(rel("/__meta/__1_1_u"), "__meta/__1_1_u");
        assert!(VacuumFile::array_relative_path("f", "nothing").is_err());
    }

    #[test]
    fn truncated_delete_entry_is_an_error() {
        let mut bytes = b"__commits/__1_1_u.del\n".to_vec();
        bytes.extend_from_slice(&100u64.to_le_bytes());
        bytes.extend_from_slice(b"short");
        assert!(ConsolidatedCommits::parse("f.con", &bytes).is_err());
        let ok = ConsolidatedCommits::new(vec![
            ConsolidatedCommit::commit("__commits/a.wrt"),
            ConsolidatedCommit::delete("__commits/__1_1_u.del", b"xyz".to_vec()),
            ConsolidatedCommit::commit("__commits/b.wrt"),
        ]);
        let bytes = ok.write();
        let back = ConsolidatedCommits::parse("f.con", &bytes).unwrap();
        assert_eq!(back.commits[1].embedded.as_deref(), Some(&b"xyz"[..]));
        assert_eq!(back.commits[1].embedded_offset, 16 + 22 + 8);
        assert_eq!(back.write(), bytes);
    }
}
