//! `dissect`: every byte of an array's (or group's) files, explained by the
//! parsers that read them.
//!
//! Each file is parsed by the same code a read uses, with
//! `tdb_format::span` recording: the fields land with their offsets, the
//! buffers generic tiles unfilter to become nested documents, and the bytes
//! no field claims are the unexplained ones. Nothing here knows a byte
//! layout; it only knows which parser reads which kind of file and what
//! context (schemas, a fragment's metadata) that parser needs.

use crate::directory::TimestampedFile;
use crate::open::ReadStorage;
use crate::schemas::load_schemas;
use crate::{
    ConsolidatedCommits, ConsolidatedFragmentMeta, DeleteCommit, FragmentError, FragmentMetadata,
    GroupDetails, IgnoreFile, MetadataFile, Result, UpdateCommit, VacuumFile,
};
use std::collections::HashMap;
use tdb_format::names::{
    COMMITS_DIR, FRAGMENTS_DIR, FRAGMENT_META_DIR, GROUP_DETAILS_DIR, LEGACY_COORDS_STEM,
    METADATA_DIR, SCHEMA_DIR, TDB_EXT,
};
use tdb_format::span::{self, Document};
use tdb_format::{classify, le, DataPart, FormatVersion, ObjectFile, TimestampedName};
use tdb_schema::{ArraySchema, Enumeration, SchemaHistory};
use tdb_storage::join;
use tdb_tile::filtered_chunks;

/// One file, explained.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Dissection {
    /// Its path relative to the object dissected.
    pub file: String,
    /// What kind of file it is (`ObjectFile::label`: `schema`, `data-var`...).
    pub kind: &'static str,
    /// Document 0 is the file; the others are what its generic tiles
    /// unfiltered to.
    pub documents: Vec<Document>,
    /// Why parsing stopped early, if it did (what was parsed before is
    /// still explained; the rest is unexplained).
    pub error: Option<String>,
}

impl Dissection {
    /// The file's own document.
    pub fn file_document(&self) -> Option<&Document> {
        self.documents.first()
    }
}

/// Dissects the files of the array or group at `dir` (its dimension-label
/// arrays included): every file, or only `only` (a path relative to
/// `dir`). Each file's dissection goes to `each` as soon as it is done, so
/// memory holds one file at a time. Encrypted arrays need their `key`.
pub fn dissect<S: ReadStorage + ?Sized>(
    storage: &S,
    dir: &str,
    key: Option<&[u8; 32]>,
    only: Option<&str>,
    each: &mut dyn FnMut(Dissection),
) -> Result<()> {
    let files: Vec<String> = match only {
        Some(f) => vec![f.trim_start_matches('/').to_owned()],
        None => {
            let prefix = join(dir, "");
            storage
                .list_prefix(dir)
                .map_err(|e| FragmentError::storage(dir, e))?
                .into_iter()
                .map(|m| {
                    m.key
                        .strip_prefix(prefix.as_str())
                        .unwrap_or(&m.key)
                        .trim_start_matches('/')
                        .to_owned()
                })
                .collect()
        }
    };
    let mut context = Context {
        storage,
        dir,
        key,
        schemas: HashMap::new(),
        fragment: None,
    };
    for file in files {
        let path = join(dir, &file);
        let bytes = storage
            .read(&path)
            .map_err(|e| FragmentError::storage(&path, e))?
            .ok_or_else(|| FragmentError::missing(&path, "the file"))?;
        let (outcome, documents) = span::record(&bytes, || context.explain(&file, &bytes));
        each(Dissection {
            kind: classify(owner(&file).1).label(),
            file,
            documents,
            error: outcome.err(),
        });
    }
    Ok(())
}

/// The object a file belongs to (the array or group at `dir`, a member
/// below it, a dimension-label array) and the file's path within it: the
/// object's directory is what precedes the last directory only objects
/// hold (`__schema`, `__fragments`, ...); a file outside those sits in its
/// object's root, or (before v12) in a fragment directory there.
fn owner(file: &str) -> (&str, &str) {
    let parts: Vec<&str> = file.split('/').collect();
    let marker = parts.iter().rposition(|p| {
        [
            SCHEMA_DIR,
            FRAGMENTS_DIR,
            COMMITS_DIR,
            METADATA_DIR,
            GROUP_DETAILS_DIR,
            FRAGMENT_META_DIR,
        ]
        .contains(p)
    });
    let depth = match marker {
        Some(k) => k,
        None => {
            let in_fragment = parts.len() >= 2
                && parts
                    .get(parts.len().saturating_sub(2))
                    .is_some_and(|d| TimestampedName::parse(d).is_ok());
            parts.len().saturating_sub(if in_fragment { 2 } else { 1 })
        }
    };
    let root_len = parts
        .iter()
        .take(depth)
        .map(|p| p.len().saturating_add(1))
        .sum::<usize>();
    let root = file.get(..root_len.saturating_sub(1)).unwrap_or_default();
    (root, file.get(root_len..).unwrap_or(file))
}

struct Context<'a, S: ?Sized> {
    storage: &'a S,
    dir: &'a str,
    key: Option<&'a [u8; 32]>,
    /// Schemas per object (by its path within `dir`), loaded once.
    schemas: HashMap<String, std::result::Result<SchemaHistory, String>>,
    /// The metadata of the fragment whose files come now (files are listed
    /// in order, so a fragment's files come together).
    fragment: Option<(String, std::result::Result<FragmentMetadata, String>)>,
}

type Explained = std::result::Result<(), String>;

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl<S: ReadStorage + ?Sized> Context<'_, S> {
    fn schemas(&mut self, root: &str) -> std::result::Result<&SchemaHistory, String> {
        let (storage, key) = (self.storage, self.key);
        let dir = join(self.dir, root);
        self.schemas
            .entry(root.to_owned())
            .or_insert_with(|| span::paused(|| load_schemas(storage, &dir, key)).map_err(text))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Parses `file` (a path within `dir`) with the parser its kind has,
    /// while the caller records.
    fn explain(&mut self, file: &str, bytes: &[u8]) -> Explained {
        let (root, rel) = owner(file);
        let kind = classify(rel);
        let key = self.key;
        match kind {
            ObjectFile::LegacySchema | ObjectFile::Schema(_) => {
                ArraySchema::from_file(file, bytes, key).map_err(text)?;
            }
            ObjectFile::Enumeration(_) => {
                Enumeration::from_file(file, bytes, key).map_err(text)?;
            }
            ObjectFile::FragmentMetadata { fragment, .. } => {
                let dir = fragment_dir(rel);
                // Parsed afresh (not from the cache) so its fields record.
                let meta = self.fragment_metadata(root, dir, &fragment, bytes)?;
                let schemas = self.schemas(root)?;
                let schema = schema_of(schemas, &meta);
                meta.rtree(&schema.domain).map_err(text)?;
                self.fragment = Some((join(root, dir), Ok(meta)));
            }
            ObjectFile::Data {
                fragment,
                field,
                part,
                ..
            } => {
                let dir = fragment_dir(rel);
                let meta = self.cached_fragment(root, dir, &fragment)?;
                let schemas = self.schemas(root)?;
                let schema = schema_of(schemas, &meta);
                let (field, part) = schema.data_file(field, part);
                let i = meta
                    .footer
                    .data_field_index(&field, schema)
                    .ok_or_else(|| format!("the fragment metadata has no field {field:?}"))?;
                let filters = schema.part_filters(&field, part, key.is_some());
                let version = FormatVersion::new(meta.footer.version).map_err(text)?;
                for t in 0..meta.recorded_tiles(i).map_err(text)? {
                    let range = match part {
                        DataPart::Fixed => meta.tile_range(i, t),
                        DataPart::Var => meta.var_tile_range(i, t),
                        DataPart::Validity => meta.validity_tile_range(i, t),
                    }
                    .map_err(text)?;
                    let tile = usize::try_from(range.start)
                        .ok()
                        .zip(usize::try_from(range.end).ok())
                        .and_then(|(a, b)| bytes.get(a..b))
                        .ok_or_else(|| format!("tile {t} at {range:?} is beyond the file"))?;
                    let _tile = span::scope(format_args!("tile[{t}]"));
                    // Unfiltered, the filters explain their metadata too; a
                    // tile that cannot be unfiltered alone (or at all) is
                    // still walked chunk by chunk.
                    let unfiltered = filters.as_ref().map(|pf| {
                        span::attempt(|| {
                            pf.tile_filters(version, key).unfilter_whole(
                                file,
                                tile,
                                part == DataPart::Var,
                            )
                        })
                    });
                    if !matches!(unfiltered, Some(Ok(_))) {
                        let (_, rest) =
                            le::run(filtered_chunks, tile).map_err(|e| format!("tile {t}: {e}"))?;
                        if !rest.is_empty() {
                            return Err(format!("tile {t} ends {} bytes early", rest.len()));
                        }
                    }
                }
            }
            ObjectFile::OkCommit(_)
            | ObjectFile::WriteCommit(_)
            | ObjectFile::GroupMarker
            | ObjectFile::Lock => {
                if !bytes.is_empty() {
                    return Err("this kind of file is empty in TileDB".into());
                }
            }
            ObjectFile::DeleteCommit(_) => {
                DeleteCommit::parse(file, bytes, key).map_err(text)?;
            }
            ObjectFile::UpdateCommit(_) => {
                UpdateCommit::parse(file, bytes, key).map_err(text)?;
            }
            ObjectFile::ConsolidatedCommits(_) => {
                let commits = ConsolidatedCommits::parse(file, bytes).map_err(text)?;
                for (i, c) in commits.commits.iter().enumerate() {
                    let Some(embedded) = &c.embedded else {
                        continue;
                    };
                    let start = usize::try_from(c.embedded_offset).unwrap_or(usize::MAX);
                    let end = start.saturating_add(embedded.len());
                    let Some(stored) = bytes.get(start..end) else {
                        continue;
                    };
                    let _c = span::scope(format_args!("commits[{i}]"));
                    DeleteCommit::parse(&c.path, stored, key).map_err(text)?;
                }
            }
            ObjectFile::Ignore(_) => {
                IgnoreFile::parse(file, bytes).map_err(text)?;
            }
            ObjectFile::Vacuum(_) => {
                VacuumFile::parse(file, bytes).map_err(text)?;
            }
            ObjectFile::ConsolidatedFragmentMetadata(_) => {
                let schemas = self.schemas(root)?;
                let lookup = |name: &str| schemas.by_name(name).map(|e| &e.schema);
                ConsolidatedFragmentMeta::parse(bytes, key, &lookup, file).map_err(text)?;
            }
            ObjectFile::Metadata(_) => {
                MetadataFile::parse(file, bytes, key).map_err(text)?;
            }
            ObjectFile::GroupDetails(_) => {
                GroupDetails::parse(file, bytes, key).map_err(text)?;
            }
            ObjectFile::DimensionLabel(_) | ObjectFile::Unknown => {
                return Err("no TileDB file has this name".into());
            }
            other => return Err(format!("{other:?} files are not dissected yet")),
        }
        Ok(())
    }

    /// Parses a fragment's `__fragment_metadata.tdb` from `bytes`.
    fn fragment_metadata(
        &mut self,
        root: &str,
        dir: &str,
        name: &TimestampedName,
        bytes: &[u8],
    ) -> std::result::Result<FragmentMetadata, String> {
        let (storage, key) = (self.storage, self.key);
        let coords = join(
            self.dir,
            &join(root, &format!("{dir}/{LEGACY_COORDS_STEM}{TDB_EXT}")),
        );
        let f = TimestampedFile::new(dir.to_owned(), name.clone());
        let dense = f.format_version() > 2 || storage.size(&coords).map_err(text)?.is_none();
        let schemas = self.schemas(root)?;
        FragmentMetadata::parse_file(&f, bytes, schemas, dense, key).map_err(text)
    }

    /// The metadata of the fragment at `dir`, read unrecorded when it is
    /// not the one parsed last.
    fn cached_fragment(
        &mut self,
        root: &str,
        dir: &str,
        name: &TimestampedName,
    ) -> std::result::Result<FragmentMetadata, String> {
        let at = join(root, dir);
        if let Some((cached, meta)) = &self.fragment {
            if *cached == at {
                return meta.clone();
            }
        }
        let path = join(
            self.dir,
            &join(&at, tdb_format::names::FRAGMENT_METADATA_FILE),
        );
        let bytes = self
            .storage
            .read(&path)
            .map_err(text)?
            .ok_or_else(|| format!("{path} is missing"))?;
        // Parsed outside the caller's recording: its fields are not this
        // file's.
        let meta = span::paused(|| self.fragment_metadata(root, dir, name, &bytes));
        self.fragment = Some((at, meta.clone()));
        meta
    }
}

/// The fragment directory of a fragment file (its path's parent).
fn fragment_dir(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(d, _)| d)
}

fn schema_of<'s>(schemas: &'s SchemaHistory, meta: &FragmentMetadata) -> &'s ArraySchema {
    &schemas
        .by_name(&meta.footer.array_schema_name)
        .unwrap_or_else(|| schemas.latest())
        .schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_files_belong_to_their_label_array() {
        assert_eq!(owner("__schema/x"), ("", "__schema/x"));
        assert_eq!(owner("__array_schema.tdb"), ("", "__array_schema.tdb"));
        assert_eq!(
            owner("__1_2_0123456789abcdef0123456789abcdef_5/a0.tdb"),
            ("", "__1_2_0123456789abcdef0123456789abcdef_5/a0.tdb")
        );
        assert_eq!(owner("m/__tiledb_group.tdb"), ("m", "__tiledb_group.tdb"));
        assert_eq!(
            owner("m/n/__schema/__enumerations/e"),
            ("m/n", "__schema/__enumerations/e")
        );
        assert_eq!(
            owner("__labels/l0/__fragments/f/a0.tdb"),
            ("__labels/l0", "__fragments/f/a0.tdb")
        );
    }
}
