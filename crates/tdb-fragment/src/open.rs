//! Opening an array or group directory from storage: the thin I/O layer over
//! the pure directory logic. An open lists the object's directories (each
//! once), then fetches everything small it needs in one batch of ranges.

use crate::directory::{DirectoryListing, ListedFile};
use crate::fragment_metadata::{FragmentMetadata, Section, SectionData};
use crate::opening::{
    directory_listing, subdirs_to_list, whole_file_requests, whole_files, FooterAnswer,
    FooterReads, Opening,
};
use crate::{
    ArrayDirectory, ArrayMetadata, ConditionCommit, DeleteCommit, FragmentError, GroupDirectory,
    GroupMembers, Result, TimeWindow, TimestampedFile,
};
use std::collections::HashMap;
use tdb_format::names::{
    ARRAY_DIRS, COMMITS_DIR, FRAGMENT_METADATA_FILE, FRAGMENT_META_DIR, GROUP_DETAILS_DIR,
    GROUP_FILE, LEGACY_SCHEMA_FILE, METADATA_DIR, SCHEMA_DIR,
};
use tdb_format::TimestampedName;
use tdb_schema::{SchemaEntry, SchemaHistory};
use tdb_storage::{
    join, last_component, ByteRange, ListableStorage, RangeRequest, ReadableStorage,
};

/// Storage an open reads from: nothing that writes.
pub trait ReadStorage: ReadableStorage + ListableStorage {}

impl<T: ReadableStorage + ListableStorage + ?Sized> ReadStorage for T {}

/// What a directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectKind {
    /// A TileDB array.
    Array,
    /// A TileDB group.
    Group,
}

impl ObjectKind {
    /// `array` or `group`.
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Array => "array",
            ObjectKind::Group => "group",
        }
    }

    /// What a directory whose immediate entries are `files` and `dirs`
    /// (names) is: an array has a schema, a group a details directory or
    /// the marker file.
    fn of(files: &[&str], dirs: &[&str]) -> Option<Self> {
        if dirs.contains(&SCHEMA_DIR) || files.contains(&LEGACY_SCHEMA_FILE) {
            Some(ObjectKind::Array)
        } else if dirs.contains(&GROUP_DETAILS_DIR) || files.contains(&GROUP_FILE) {
            Some(ObjectKind::Group)
        } else {
            None
        }
    }
}

/// What the directory `dir` of `storage` is, if a TileDB object.
pub fn object_kind<S: ReadStorage + ?Sized>(storage: &S, dir: &str) -> Result<Option<ObjectKind>> {
    let listing = storage
        .list_dir(dir)
        .map_err(|e| FragmentError::storage(dir_label(dir), e))?;
    let files: Vec<&str> = listing.files.iter().map(|f| f.name()).collect();
    let dirs: Vec<&str> = listing.dirs.iter().map(|d| last_component(d)).collect();
    Ok(ObjectKind::of(&files, &dirs))
}

/// The files of an object, without those of the objects nested in it.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ObjectFiles {
    /// Every file, relative to the object, with its size (always given:
    /// asked of the storage where the listing had none), sorted.
    pub files: Vec<ListedFile>,
    /// TileDB objects stored inside it (group members kept in the group's
    /// directory): their path relative to it, and what they are.
    pub nested: Vec<(String, ObjectKind)>,
}

/// Every file of the object at `dir`, with its size, and the objects nested
/// in it, from one recursive listing (and a size request per file whose size
/// it lacks: what checks and reports of every file need).
pub fn object_files<S: ReadStorage + ?Sized>(storage: &S, dir: &str) -> Result<ObjectFiles> {
    let storage_err = |e| FragmentError::storage(dir_label(dir), e);
    let all = storage.list_prefix(dir).map_err(storage_err)?;
    let mut relative: Vec<ListedFile> = Vec::with_capacity(all.len());
    for f in &all {
        let size = match f.size {
            Some(n) => n,
            None => storage
                .size(&f.key)
                .map_err(storage_err)?
                .ok_or_else(|| FragmentError::missing(&f.key, "file (listed, then gone)"))?,
        };
        let rel = f.key.strip_prefix(dir).unwrap_or(&f.key);
        relative.push(ListedFile::new(rel.trim_start_matches('/'), size));
    }
    // Candidate children: top-level directories that are not the format's own.
    let mut children: HashMap<&str, (Vec<&str>, Vec<&str>)> = HashMap::new();
    for f in &relative {
        let Some((top, rest)) = f.path.split_once('/') else {
            continue;
        };
        let reserved = ARRAY_DIRS.contains(&top)
            || top == GROUP_DETAILS_DIR
            || TimestampedName::parse(top).is_ok();
        if reserved {
            continue;
        }
        let entry = children.entry(top).or_default();
        match rest.split_once('/') {
            Some((sub, _)) => entry.1.push(sub),
            None => entry.0.push(rest),
        }
    }
    let mut nested: Vec<(String, ObjectKind)> = children
        .into_iter()
        .filter_map(|(top, (files, dirs))| {
            ObjectKind::of(&files, &dirs).map(|k| (top.to_owned(), k))
        })
        .collect();
    nested.sort();
    let files = relative
        .into_iter()
        .filter(|f| {
            !nested.iter().any(|(n, _)| {
                f.path
                    .strip_prefix(n.as_str())
                    .is_some_and(|r| r.starts_with('/'))
            })
        })
        .collect();
    Ok(ObjectFiles { files, nested })
}

/// Subdirectories whose files an open needs listed. `__fragments/` is not
/// (commit files say which fragments exist, and footers are read from the
/// end of files whose names are known), nor are fragment directories,
/// except pre-v5 ones, which their metadata file commits.
pub(crate) const LISTED_DIRS: [&str; 5] = [
    SCHEMA_DIR,
    COMMITS_DIR,
    FRAGMENT_META_DIR,
    METADATA_DIR,
    GROUP_DETAILS_DIR,
];

/// Lists the object at `dir`: its root, the directories of `LISTED_DIRS`
/// it has, and pre-v5 fragment directories. Paths come back relative to `dir`.
pub fn list_object<S: ReadStorage + ?Sized>(storage: &S, dir: &str) -> Result<DirectoryListing> {
    let list = |d: &str| {
        storage
            .list_dir(d)
            .map_err(|e| FragmentError::storage(d, e))
    };
    let root = list(dir)?;
    let subdirs = subdirs_to_list(&root)
        .iter()
        .map(|d| list(d))
        .collect::<Result<Vec<_>>>()?;
    Ok(directory_listing(dir, &root, &subdirs))
}

/// Reads whole listed files (of `dir`) in one batch.
/// The bytes of `path` among files read whole ([`read_files`],
/// `whole_files`), which hold every path asked for.
pub(crate) fn file_bytes<'c>(
    contents: &'c HashMap<String, Vec<u8>>,
    path: &str,
) -> Result<&'c [u8]> {
    contents
        .get(path)
        .map(Vec::as_slice)
        .ok_or_else(|| FragmentError::missing(path, "the file"))
}

pub(crate) fn read_files<S: ReadStorage + ?Sized>(
    storage: &S,
    dir: &str,
    paths: &[&str],
) -> Result<HashMap<String, Vec<u8>>> {
    if paths.is_empty() {
        return Ok(HashMap::new());
    }
    let got = storage
        .read_ranges(&whole_file_requests(dir, paths))
        .map_err(|e| FragmentError::storage(dir, e))?;
    whole_files(paths, got)
}

/// Parses the schema files (in TileDB's order) into a history.
pub(crate) fn schema_history(
    dir: &str,
    schema_files: &[String],
    contents: &HashMap<String, Vec<u8>>,
    key: Option<&[u8; 32]>,
) -> Result<SchemaHistory> {
    let entries = schema_files
        .iter()
        .map(|path| {
            let bytes = contents
                .get(path)
                .ok_or_else(|| FragmentError::missing(path, "schema file (not read)"))?;
            SchemaEntry::from_file(last_component(path), bytes, key)
                .map_err(|e| FragmentError::schema(path, e))
        })
        .collect::<Result<Vec<_>>>()?;
    if entries.is_empty() {
        return Err(FragmentError::missing(dir_label(dir), "array schema"));
    }
    SchemaHistory::new(entries).map_err(|e| FragmentError::schema(dir_label(dir), e))
}

/// How errors name an object's directory: its key, or `.` for the root.
pub(crate) fn dir_label(dir: &str) -> &str {
    if dir.is_empty() {
        "."
    } else {
        dir
    }
}

/// An array opened at a time window: its schemas and its directory resolved
/// by TileDB's rules. Costs the listings of [`list_object`] and one batched
/// read of the schema files and of the commit files that decide visibility.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenArray {
    /// The array's key in its storage.
    pub dir: String,
    /// The listing it was resolved from.
    pub listing: DirectoryListing,
    /// The directory resolved for the window.
    pub directory: ArrayDirectory,
    /// Every schema of the array.
    pub schemas: SchemaHistory,
    key: Option<[u8; 32]>,
}

impl OpenArray {
    /// Opens the array at `dir` for `window`; `key` for encrypted arrays.
    pub fn open<S: ReadStorage + ?Sized>(
        storage: &S,
        dir: &str,
        window: TimeWindow,
        key: Option<&[u8; 32]>,
    ) -> Result<Self> {
        let opening = Opening::new(dir, window, key).directory_only();
        Ok(opening.run(storage)?.open)
    }

    pub(crate) fn new(
        dir: &str,
        listing: DirectoryListing,
        directory: ArrayDirectory,
        schemas: SchemaHistory,
        key: Option<&[u8; 32]>,
    ) -> Self {
        OpenArray {
            dir: dir.to_owned(),
            listing,
            directory,
            schemas,
            key: key.copied(),
        }
    }

    /// The array as a read of fragments handed to it sees it, its window
    /// ending at `end`: the same key and schemas, but no listing, commits,
    /// deletes or metadata files, so it stays small (a merge holds one per
    /// input fragment).
    pub fn reading_view(&self, end: u64) -> OpenArray {
        let window = TimeWindow::new(self.directory.window.start, end);
        OpenArray {
            dir: self.dir.clone(),
            listing: DirectoryListing::new(&[]),
            directory: ArrayDirectory::bare(window, self.directory.schemas.clone()),
            schemas: self.schemas.clone(),
            key: self.key,
        }
    }

    /// The AES-256-GCM key the array was opened with.
    pub fn key(&self) -> Option<&[u8; 32]> {
        self.key.as_ref()
    }

    /// The schema a read at the window's end uses.
    pub fn schema(&self) -> &SchemaEntry {
        self.schemas.at(self.directory.window.end)
    }

    /// The fragments a read sees (TileDB's rule for the array's type).
    pub fn fragments(&self) -> Result<Vec<TimestampedFile>> {
        let dense = self.schema().schema.array_type == tdb_format::ArrayType::Dense;
        self.directory.visible_fragments(dense)
    }

    /// The array metadata at the window: one batched read of the visible
    /// metadata files.
    pub fn metadata<S: ReadStorage + ?Sized>(&self, storage: &S) -> Result<ArrayMetadata> {
        let files = self.metadata_files(storage)?;
        let named: Vec<(TimestampedName, &[u8])> = files
            .iter()
            .map(|(f, bytes)| (f.name.clone(), bytes.as_slice()))
            .collect();
        ArrayMetadata::from_files(&named, self.key.as_ref())
    }

    /// The delete commits the window holds, in time order, each parsed
    /// (and decrypted): one batched read. Update commits are left out.
    pub fn delete_commits<S: ReadStorage + ?Sized>(
        &self,
        storage: &S,
    ) -> Result<Vec<(&ConditionCommit, DeleteCommit)>> {
        let deletes: Vec<&ConditionCommit> = self
            .directory
            .conditions
            .iter()
            .filter(|c| !c.is_update)
            .collect();
        if deletes.is_empty() {
            return Ok(Vec::new());
        }
        let requests: Vec<RangeRequest> = deletes
            .iter()
            .map(|c| {
                let (path, range) = c.location.range();
                RangeRequest::new(join(&self.dir, path), range)
            })
            .collect();
        let reads = storage
            .read_ranges(&requests)
            .map_err(|e| FragmentError::storage(dir_label(&self.dir), e))?;
        deletes
            .into_iter()
            .zip(reads)
            .map(|(c, read)| {
                let (path, _) = c.location.range();
                let read = read.ok_or_else(|| FragmentError::missing(path, "delete commit"))?;
                Ok((c, DeleteCommit::parse(&c.marker, &read.bytes, self.key())?))
            })
            .collect()
    }

    /// The visible array metadata files with their bytes (still encrypted
    /// where the array is), in the directory's order: one batched read.
    pub fn metadata_files<S: ReadStorage + ?Sized>(
        &self,
        storage: &S,
    ) -> Result<Vec<(&TimestampedFile, Vec<u8>)>> {
        self.read_metadata_files(storage, self.directory.array_metadata.iter().collect())
    }

    /// Every array metadata file the window holds, those a consolidation
    /// superseded but no vacuum removed among them (opens at earlier times
    /// still read them), by start timestamp: what a copy must keep.
    pub fn all_metadata_files<S: ReadStorage + ?Sized>(
        &self,
        storage: &S,
    ) -> Result<Vec<(&TimestampedFile, Vec<u8>)>> {
        let d = &self.directory;
        let mut files: Vec<&TimestampedFile> = (d.array_metadata.iter())
            .chain(&d.array_metadata_replaced)
            .collect();
        files.sort_by_key(|f| f.name.t1);
        self.read_metadata_files(storage, files)
    }

    fn read_metadata_files<'a, S: ReadStorage + ?Sized>(
        &self,
        storage: &S,
        files: Vec<&'a TimestampedFile>,
    ) -> Result<Vec<(&'a TimestampedFile, Vec<u8>)>> {
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        let mut contents = read_files(storage, &self.dir, &paths)?;
        Ok(files
            .into_iter()
            .map(|f| (f, contents.remove(f.path.as_str()).unwrap_or_default()))
            .collect())
    }
}

/// A fragment a read sees, with its metadata's footer (sections load on
/// demand).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoadedFragment {
    /// Its directory and name.
    pub file: TimestampedFile,
    /// Its metadata: the footer, and for v1–v2 every section.
    pub metadata: FragmentMetadata,
    /// Whether the footer came from a consolidated fragment metadata file.
    pub from_consolidated: bool,
    /// The size of its `__fragment_metadata.tdb`, when its footer was read
    /// from there (a read learns the size for free).
    pub(crate) metadata_file_size: Option<u64>,
}

impl OpenArray {
    /// The fragments a read sees, with their footers: footers that
    /// consolidated fragment metadata files hold come from those (one batch
    /// reads them all), every other one from a suffix read of its own
    /// metadata file, all in one more batch (and one more for the rare
    /// footer longer than the first guess). v1–v2 metadata files are read
    /// whole, being one tile.
    pub fn load_fragments<S: ReadStorage + ?Sized>(
        &self,
        storage: &S,
    ) -> Result<Vec<LoadedFragment>> {
        Ok(Opening::from_open(self.clone())?.run(storage)?.fragments)
    }
}

impl OpenArray {
    /// The processed conditions (delete and update commits already applied
    /// to their cells, by TileDB's condition markers) of fragments `frags`,
    /// read in one batch; fragments whose footer has no such section
    /// (before v16) have none.
    pub fn processed_conditions<S: ReadStorage + ?Sized>(
        &self,
        storage: &S,
        frags: &[&LoadedFragment],
    ) -> Result<Vec<Vec<String>>> {
        let mut requests = Vec::new();
        let mut asked = Vec::new();
        for (i, f) in frags.iter().enumerate() {
            if f.metadata.footer.offsets.processed_conditions.is_none() {
                continue;
            }
            // The last section ends where the footer starts: found from
            // the file's size when the footer came from elsewhere.
            let mut footer = std::borrow::Cow::Borrowed(&f.metadata.footer);
            if footer.offset.is_none() {
                footer.to_mut().locate(self.metadata_file_size(storage, f)?);
            }
            let name = f.file.file_name();
            let r = footer.section_range(Section::ProcessedConditions, name)?;
            let file = join(&join(&self.dir, &f.file.path), FRAGMENT_METADATA_FILE);
            requests.push(RangeRequest::new(
                file,
                ByteRange::new(r.start, r.end.saturating_sub(r.start)),
            ));
            asked.push(i);
        }
        let reads = storage
            .read_ranges(&requests)
            .map_err(|e| FragmentError::storage(dir_label(&self.dir), e))?;
        let mut out = vec![Vec::new(); frags.len()];
        for (i, read) in asked.into_iter().zip(reads) {
            let Some(f) = frags.get(i) else { continue };
            let read = read.ok_or_else(|| {
                FragmentError::missing(
                    &format!("{}/{FRAGMENT_METADATA_FILE}", f.file.path),
                    "the file",
                )
            })?;
            let schema = self
                .schemas
                .by_name(&f.metadata.footer.array_schema_name)
                .unwrap_or_else(|| self.schemas.latest());
            if let SectionData::Conditions(c) = f.metadata.footer.read_section(
                Section::ProcessedConditions,
                &read.bytes,
                self.key(),
                &schema.schema,
                f.file.file_name(),
            )? {
                if let Some(o) = out.get_mut(i) {
                    *o = c;
                }
            }
        }
        Ok(out)
    }

    /// A fragment's size as TileDB's fragment info reports it (and its
    /// consolidation weighs fragments by): the data file sizes its footer
    /// records plus its metadata file's size (asked of `storage` when its
    /// footer came from consolidated fragment metadata, as TileDB asks).
    pub fn fragment_size<S: ReadStorage + ?Sized>(
        &self,
        storage: &S,
        f: &LoadedFragment,
    ) -> Result<u64> {
        let footer = &f.metadata.footer;
        let data: u64 = footer
            .file_sizes
            .iter()
            .chain(&footer.file_var_sizes)
            .chain(&footer.file_validity_sizes)
            .fold(0u64, |a, b| a.saturating_add(*b));
        Ok(data.saturating_add(self.metadata_file_size(storage, f)?))
    }

    /// The size of a fragment's `__fragment_metadata.tdb`: known from the
    /// footer's suffix read, else asked of `storage` (footers read from
    /// consolidated fragment metadata).
    fn metadata_file_size<S: ReadStorage + ?Sized>(
        &self,
        storage: &S,
        f: &LoadedFragment,
    ) -> Result<u64> {
        if let Some(n) = f.metadata_file_size {
            return Ok(n);
        }
        let file = join(&join(&self.dir, &f.file.path), FRAGMENT_METADATA_FILE);
        storage
            .size(&file)
            .map_err(|e| FragmentError::storage(dir_label(&self.dir), e))?
            .ok_or_else(|| {
                FragmentError::missing(
                    &format!("{}/{FRAGMENT_METADATA_FILE}", f.file.path),
                    "the file",
                )
            })
    }
}

/// The schema a fragment was written with: `__array_schema.tdb` when its
/// name's version is before v10 and the array has that file, else the one
/// in force at its end timestamp (TileDB's rule).
pub(crate) fn fragment_schema<'a>(
    schemas: &'a SchemaHistory,
    f: &TimestampedFile,
) -> &'a SchemaEntry {
    let legacy = if f.format_version() < 10 {
        schemas.by_name(LEGACY_SCHEMA_FILE)
    } else {
        None
    };
    legacy.unwrap_or_else(|| schemas.at(f.name.t2))
}

/// Reads the metadata of `fragments` from their own files: one batch of
/// suffix reads (v1–v2 files whole, being one tile), then one more for the
/// rare footer longer than the first guess. `has_file` answers from the
/// listing whether a path exists (a v1–v2 fragment with a coordinates file
/// is sparse: the metadata does not say). Adds the bytes fetched to
/// `bytes_read`. The outer error is a storage failure; each fragment's own
/// answer says whether its metadata is there and readable, and with it the
/// file's size.
pub(crate) fn read_fragment_metadata<S: ReadStorage + ?Sized>(
    storage: &S,
    dir: &str,
    fragments: &[&TimestampedFile],
    schemas: &SchemaHistory,
    has_file: &dyn Fn(&str) -> bool,
    key: Option<&[u8; 32]>,
    bytes_read: &mut u64,
) -> Result<Vec<Result<FooterAnswer>>> {
    let own = fragments
        .iter()
        .map(|f| (**f).clone())
        .enumerate()
        .collect();
    let mut reads = FooterReads::new(dir, own, schemas);
    while !reads.done() {
        let requests = reads.requests();
        let got = storage
            .read_ranges(&requests)
            .map_err(|e| FragmentError::storage(dir_label(dir), e))?;
        reads.take(got, schemas, has_file, key);
    }
    *bytes_read = bytes_read.saturating_add(reads.bytes_read);
    Ok(reads.finish().into_iter().map(|(_, _, r)| r).collect())
}

/// A group opened at a time window: its members and metadata.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenGroup {
    /// The URI its vacuum lists name files under (see [`OpenGroup::open`]).
    pub uri: String,
    /// The directory resolved for the window.
    pub directory: GroupDirectory,
    /// The members in force.
    pub members: GroupMembers,
    /// The group's metadata.
    pub metadata: ArrayMetadata,
    /// The metadata files it was replayed from, with their bytes (still
    /// encrypted where the group is).
    pub metadata_files: Vec<(TimestampedFile, Vec<u8>)>,
}

impl OpenGroup {
    /// Opens the group at `dir` for `window`. Its vacuum lists name files
    /// by absolute URI (TileDB writes them so): the group's URI is what
    /// `storage` says `dir` is (`ReadableStorage::uri`), else `dir` itself.
    pub fn open<S: ReadStorage + ?Sized>(
        storage: &S,
        dir: &str,
        window: TimeWindow,
        key: Option<&[u8; 32]>,
    ) -> Result<Self> {
        let group_uri = storage.uri(dir).unwrap_or_else(|| dir.to_owned());
        let group_uri = group_uri.as_str();
        let listing = list_object(storage, dir)?;
        // Vacuum lists first would cost a second round trip; group files
        // are small, so every details, metadata and vacuum file comes in one.
        let mut wanted: Vec<&str> = listing.files_to_read();
        let group_files = listing.group_files();
        wanted.extend(group_files.iter().map(String::as_str));
        wanted.sort_unstable();
        wanted.dedup();
        let contents = read_files(storage, dir, &wanted)?;
        let directory = listing.resolve_group(&contents, window, group_uri)?;
        let named = |files: &[TimestampedFile]| -> Result<Vec<(TimestampedName, &[u8])>> {
            files
                .iter()
                .map(|f| Ok((f.name.clone(), file_bytes(&contents, &f.path)?)))
                .collect()
        };
        let members = GroupMembers::resolve(&named(&directory.details)?, key)?;
        let metadata = ArrayMetadata::from_files(&named(&directory.metadata)?, key)?;
        let metadata_files = directory
            .metadata
            .iter()
            .map(|f| Ok((f.clone(), file_bytes(&contents, &f.path)?.to_vec())))
            .collect::<Result<_>>()?;
        Ok(OpenGroup {
            uri: group_uri.to_owned(),
            directory,
            members,
            metadata,
            metadata_files,
        })
    }
}
