//! Opening an array as a state machine: it says which directories to list
//! and which byte ranges to read, and parses what it is given; it does no
//! I/O. Listings first (the root, then the directories an open needs),
//! then one batch of the schema and commit files, one of consolidated
//! fragment metadata, one of footers (and one more for the rare footer
//! longer than the first guess), one of enumerations. Drivers:
//! [`OpenArray::open`] and [`OpenArray::load_fragments`] (synchronous), and
//! any other a caller writes (an async one, say).

use crate::directory::{DirectoryListing, ListedFile};
use crate::fragment_metadata::{
    ConsolidatedFragmentMeta, Footer, FooterRead, FragmentMetadata, LegacyMetadata,
};
use crate::open::{
    dir_label, file_bytes, fragment_schema, schema_history, ReadStorage, LISTED_DIRS,
};
use crate::schemas::{parse_enumeration, referenced_enumeration_files};
use crate::{FragmentError, LoadedFragment, OpenArray, Result, TimeWindow, TimestampedFile};
use std::collections::HashMap;
use tdb_format::names::{FRAGMENT_METADATA_FILE, LEGACY_COORDS_STEM, TDB_EXT};
use tdb_format::TimestampedName;
use tdb_schema::{Enumeration, SchemaHistory};
use tdb_storage::{join, last_component, Answers, ByteRange, Listing, RangeRead, RangeRequest};

/// What an [`Opening`] wants next.
#[derive(Debug)]
pub enum OpenStep {
    /// List these directories and give the listings, in this order, to
    /// [`Opening::push_listings`].
    List(Vec<String>),
    /// Fetch these ranges and give the answers to [`Opening::push`] (in
    /// any order, in one push or several).
    Need(Vec<RangeRequest>),
    /// The array, opened.
    Done(Box<OpenedArray>),
}

/// An opened array: the directory resolved at the window, and, unless
/// the opening stopped there ([`Opening::directory_only`]), the visible
/// fragments with their footers and the enumerations of the schema in
/// force.
#[derive(Debug)]
#[non_exhaustive]
pub struct OpenedArray {
    /// Schemas and the directory resolved at the window.
    pub open: OpenArray,
    /// The fragments a read sees, oldest first.
    pub fragments: Vec<LoadedFragment>,
    /// The enumerations the schema in force refers to, in
    /// `ArraySchema::referenced_enumerations` order.
    pub enumerations: Vec<Enumeration>,
}

/// An array being opened.
#[derive(Debug)]
pub struct Opening {
    dir: String,
    window: TimeWindow,
    key: Option<[u8; 32]>,
    /// Whether to stop once the directory is resolved.
    directory_only: bool,
    /// Whether to read the enumerations.
    enumerations: bool,
    stage: Stage,
}

#[derive(Debug)]
enum Stage {
    /// The root's listing, once asked for (`true`).
    Root(bool),
    /// The listing of the root, and the directories listed next.
    Subdirs {
        root: Listing,
        dirs: Vec<String>,
        asked: bool,
    },
    /// Schema and commit files, read whole.
    Files {
        listing: DirectoryListing,
        schema_files: Vec<String>,
        paths: Vec<String>,
        answers: Answers,
    },
    /// Consolidated fragment metadata files, read whole.
    Consolidated {
        open: OpenArray,
        fragments: Vec<TimestampedFile>,
        paths: Vec<String>,
        answers: Answers,
    },
    /// Footers of fragments no consolidated file holds.
    Footers {
        open: OpenArray,
        /// Per visible fragment: loaded, or waiting for its footer.
        loaded: Vec<Option<LoadedFragment>>,
        reads: FooterReads,
        answers: Answers,
    },
    Enumerations {
        open: OpenArray,
        fragments: Vec<LoadedFragment>,
        files: Vec<String>,
        answers: Answers,
    },
    Done(Option<Box<OpenedArray>>),
}

impl Opening {
    /// Opens the array at `dir` (a key prefix; `""`: the storage's root)
    /// for `window`; `key` for encrypted arrays.
    pub fn new(dir: &str, window: TimeWindow, key: Option<&[u8; 32]>) -> Self {
        Opening {
            dir: dir.to_owned(),
            window,
            key: key.copied(),
            directory_only: false,
            enumerations: true,
            stage: Stage::Root(false),
        }
    }

    /// Stops once schemas and the directory are resolved: no footer, no
    /// enumeration (what [`OpenArray::open`] reads).
    pub fn directory_only(mut self) -> Self {
        self.directory_only = true;
        self
    }

    /// Goes on from an array already open: its fragments' footers (and
    /// no enumeration).
    pub fn from_open(open: OpenArray) -> Result<Self> {
        let fragments = open.fragments()?;
        Opening::fragments_of(open, fragments)
    }

    /// Runs the opening over `storage`, one round of listings or one
    /// batch of ranges at a time (the listings of a round concurrently
    /// where the storage lists on its own I/O threads).
    pub fn run<S: ReadStorage + ?Sized>(self, storage: &S) -> Result<OpenedArray> {
        tdb_storage::wait(self.run_async(storage))
    }

    /// [`Opening::run`] for async code: each listing and batch awaited.
    pub async fn run_async<S: ReadStorage + ?Sized>(mut self, storage: &S) -> Result<OpenedArray> {
        loop {
            match self.step()? {
                OpenStep::List(dirs) => {
                    // Every listing of the round started before any is
                    // awaited.
                    let pending: Vec<_> = dirs.iter().map(|d| storage.list_dir_async(d)).collect();
                    let mut listings = Vec::with_capacity(dirs.len());
                    for (d, p) in dirs.iter().zip(pending) {
                        listings.push(p.await.map_err(|e| FragmentError::storage(d, e))?);
                    }
                    self.push_listings(listings)?;
                }
                OpenStep::Need(requests) => {
                    let got = storage
                        .read_ranges_async(requests.clone())
                        .await
                        .map_err(|e| FragmentError::storage(&self.dir, e))?;
                    self.push(requests.into_iter().zip(got))?;
                }
                OpenStep::Done(opened) => return Ok(*opened),
            }
        }
    }

    /// The footers of `fragments` of an array already open (which need
    /// not be the ones its window shows: a copy keeps fragments vacuum
    /// lists hide), and no enumeration.
    pub fn fragments_of(open: OpenArray, fragments: Vec<TimestampedFile>) -> Result<Self> {
        let mut o = Opening {
            dir: open.dir.clone(),
            window: open.directory.window,
            key: open.key().copied(),
            directory_only: false,
            enumerations: false,
            stage: Stage::Done(None),
        };
        o.stage = o.fragments_stage(open, fragments)?;
        Ok(o)
    }

    /// The next thing the opening needs, or the array.
    pub fn step(&mut self) -> Result<OpenStep> {
        let waiting = |what: &str| {
            Err(FragmentError::invalid(
                dir_label(&self.dir),
                "opening",
                format!("waiting for {what} it asked for"),
            ))
        };
        match &mut self.stage {
            Stage::Root(asked) => {
                if std::mem::replace(asked, true) {
                    return waiting("the listing");
                }
                Ok(OpenStep::List(vec![self.dir.clone()]))
            }
            Stage::Subdirs { dirs, asked, .. } => {
                if std::mem::replace(asked, true) {
                    return waiting("the listings");
                }
                Ok(OpenStep::List(dirs.clone()))
            }
            Stage::Files { answers, .. }
            | Stage::Consolidated { answers, .. }
            | Stage::Footers { answers, .. }
            | Stage::Enumerations { answers, .. } => match answers.ask() {
                Some(r) => Ok(OpenStep::Need(r)),
                None => waiting("the answers"),
            },
            Stage::Done(opened) => match opened.take() {
                Some(o) => Ok(OpenStep::Done(o)),
                None => Err(FragmentError::invalid(
                    dir_label(&self.dir),
                    "opening",
                    "the array was handed out already",
                )),
            },
        }
    }

    /// The listings of the last [`OpenStep::List`], in its order.
    pub fn push_listings(&mut self, listings: Vec<Listing>) -> Result<()> {
        let stage = std::mem::replace(&mut self.stage, Stage::Done(None));
        self.stage = match (stage, listings.len()) {
            (Stage::Root(true), 1) => {
                let root = listings.into_iter().next().unwrap_or_default();
                let dirs = subdirs_to_list(&root);
                if dirs.is_empty() {
                    self.files_stage(root, Vec::new())?
                } else {
                    Stage::Subdirs {
                        root,
                        dirs,
                        asked: false,
                    }
                }
            }
            (
                Stage::Subdirs {
                    root,
                    dirs,
                    asked: true,
                },
                n,
            ) if n == dirs.len() => self.files_stage(root, listings)?,
            (stage, _) => {
                self.stage = stage;
                return Err(FragmentError::invalid(
                    dir_label(&self.dir),
                    "opening",
                    "listings it did not ask for",
                ));
            }
        };
        Ok(())
    }

    /// Answers to the ranges of the last [`OpenStep::Need`]: any of them,
    /// in any order (`None` where a file is missing).
    pub fn push(
        &mut self,
        answers: impl IntoIterator<Item = (RangeRequest, Option<RangeRead>)>,
    ) -> Result<()> {
        let pending = match &mut self.stage {
            Stage::Files { answers, .. }
            | Stage::Consolidated { answers, .. }
            | Stage::Footers { answers, .. }
            | Stage::Enumerations { answers, .. } => answers,
            _ => {
                return Err(FragmentError::invalid(
                    dir_label(&self.dir),
                    "opening",
                    "answers to ranges it did not ask for",
                ))
            }
        };
        for (request, read) in answers {
            pending.take(&request, read).map_err(|e| {
                FragmentError::invalid(dir_label(&self.dir), "opening", e.to_string())
            })?;
        }
        if !pending.complete() {
            return Ok(());
        }
        let key = self.key;
        let key = key.as_ref();
        self.stage = match std::mem::replace(&mut self.stage, Stage::Done(None)) {
            Stage::Files {
                listing,
                schema_files,
                paths,
                answers,
            } => {
                let contents = whole_files(&paths, answers.into_reads())?;
                let directory = listing.resolve(&contents, self.window)?;
                let schemas = schema_history(&self.dir, &schema_files, &contents, key)?;
                let open = OpenArray::new(&self.dir, listing, directory, schemas, key);
                if self.directory_only {
                    Stage::Done(Some(Box::new(OpenedArray {
                        open,
                        fragments: Vec::new(),
                        enumerations: Vec::new(),
                    })))
                } else {
                    self.after_open(open)?
                }
            }
            Stage::Consolidated {
                open,
                fragments,
                paths,
                answers,
            } => {
                let contents = whole_files(&paths, answers.into_reads())?;
                let schemas = |name: &str| open.schemas.by_name(name).map(|e| &e.schema);
                let mut footers: HashMap<String, Footer> = HashMap::new();
                for path in &paths {
                    let meta = ConsolidatedFragmentMeta::parse(
                        file_bytes(&contents, path)?,
                        key,
                        &schemas,
                        path,
                    )?;
                    footers.reserve(meta.entries.len());
                    for e in meta.entries {
                        footers.insert(e.fragment_name().to_owned(), e.footer);
                    }
                }
                self.footers_stage(open, fragments, footers)?
            }
            Stage::Footers {
                open,
                mut loaded,
                mut reads,
                answers,
            } => {
                let has_file = |p: &str| open.listing.has(p);
                reads.take(answers.into_reads(), &open.schemas, &has_file, key);
                if reads.pending.is_empty() {
                    for (i, file, result) in reads.finish() {
                        let (metadata, size) = result?;
                        let Some(slot) = loaded.get_mut(i) else {
                            continue;
                        };
                        *slot = Some(LoadedFragment {
                            file,
                            metadata,
                            from_consolidated: false,
                            metadata_file_size: Some(size),
                        });
                    }
                    let fragments = loaded.into_iter().flatten().collect();
                    self.enumerations_stage(open, fragments)?
                } else {
                    let answers = Answers::new(reads.requests());
                    Stage::Footers {
                        open,
                        loaded,
                        reads,
                        answers,
                    }
                }
            }
            Stage::Enumerations {
                open,
                fragments,
                files,
                answers,
            } => {
                let enumerations = files
                    .iter()
                    .zip(answers.into_reads())
                    .map(|(f, read)| parse_enumeration(f, read.as_ref().map(|r| &r.bytes[..]), key))
                    .collect::<Result<Vec<_>>>()?;
                Stage::Done(Some(Box::new(OpenedArray {
                    open,
                    fragments,
                    enumerations,
                })))
            }
            _ => unreachable!("answers are taken only in stages that asked for them"),
        };
        Ok(())
    }

    /// Every listing is in: the files of the schema and commits to read.
    fn files_stage(&self, root: Listing, subdirs: Vec<Listing>) -> Result<Stage> {
        let listing = directory_listing(&self.dir, &root, &subdirs);
        let schema_files = listing.schema_files();
        let mut paths: Vec<String> = listing
            .files_to_read()
            .into_iter()
            .map(str::to_owned)
            .collect();
        paths.extend(schema_files.iter().cloned());
        let answers = Answers::new(whole_file_requests(&self.dir, &paths));
        Ok(Stage::Files {
            listing,
            schema_files,
            paths,
            answers,
        })
    }

    /// The array is open: its consolidated fragment metadata next, or its
    /// footers.
    fn after_open(&self, open: OpenArray) -> Result<Stage> {
        let fragments = open.fragments()?;
        self.fragments_stage(open, fragments)
    }

    /// The footers of `fragments`.
    fn fragments_stage(&self, open: OpenArray, fragments: Vec<TimestampedFile>) -> Result<Stage> {
        let paths: Vec<String> = if fragments.is_empty() {
            Vec::new()
        } else {
            open.directory.fragment_metadata.clone()
        };
        if paths.is_empty() {
            return self.footers_stage(open, fragments, HashMap::new());
        }
        let answers = Answers::new(whole_file_requests(&self.dir, &paths));
        Ok(Stage::Consolidated {
            open,
            fragments,
            paths,
            answers,
        })
    }

    /// Footers consolidated files hold are in: the rest from their own
    /// files.
    fn footers_stage(
        &self,
        open: OpenArray,
        fragments: Vec<TimestampedFile>,
        mut footers: HashMap<String, Footer>,
    ) -> Result<Stage> {
        // Every footer at hand (consolidated): the fragments are built in
        // place, each ~600-byte footer moved once more, not three times.
        if fragments
            .iter()
            .all(|f| footers.contains_key(f.file_name()))
        {
            let mut loaded = Vec::with_capacity(fragments.len());
            for f in fragments {
                // (Taken by an earlier fragment of the same name: the
                // directory resolves each once, so never; loud if so.)
                let footer = footers
                    .remove(f.file_name())
                    .ok_or_else(|| FragmentError::invalid(&f.path, "fragment", "listed twice"))?;
                loaded.push(LoadedFragment {
                    metadata: FragmentMetadata::new(f.name.clone(), footer),
                    file: f,
                    from_consolidated: true,
                    metadata_file_size: None,
                });
            }
            return self.enumerations_stage(open, loaded);
        }
        let mut loaded = Vec::with_capacity(fragments.len());
        let mut own = Vec::new();
        for f in fragments {
            match footers.remove(f.file_name()) {
                Some(footer) => loaded.push(Some(LoadedFragment {
                    metadata: FragmentMetadata::new(f.name.clone(), footer),
                    file: f,
                    from_consolidated: true,
                    metadata_file_size: None,
                })),
                None => {
                    own.push((loaded.len(), f));
                    loaded.push(None);
                }
            }
        }
        let reads = FooterReads::new(&self.dir, own, &open.schemas);
        let answers = Answers::new(reads.requests());
        Ok(Stage::Footers {
            open,
            loaded,
            reads,
            answers,
        })
    }

    /// Every footer is in: the enumerations of the schema in force.
    fn enumerations_stage(&self, open: OpenArray, fragments: Vec<LoadedFragment>) -> Result<Stage> {
        let files = match self.enumerations {
            true => referenced_enumeration_files(&self.dir, open.schema())?,
            false => Vec::new(),
        };
        if files.is_empty() {
            return Ok(Stage::Done(Some(Box::new(OpenedArray {
                open,
                fragments,
                enumerations: Vec::new(),
            }))));
        }
        let requests = files
            .iter()
            .map(|f| RangeRequest::new(f.as_str(), ByteRange::Whole))
            .collect();
        Ok(Stage::Enumerations {
            open,
            fragments,
            files,
            answers: Answers::new(requests),
        })
    }
}

/// The directories of an object (the root's listing) an open lists:
/// [`LISTED_DIRS`] and pre-v5 fragment directories. `__fragments/` is not
/// listed (commit files say which fragments exist, and footers are read
/// from the end of files whose names are known), nor are other fragment
/// directories.
pub(crate) fn subdirs_to_list(root: &Listing) -> Vec<String> {
    root.dirs
        .iter()
        .filter(|d| {
            let name = last_component(d);
            let pre_v5_fragment =
                TimestampedName::parse(name).is_ok_and(|n| n.implied_format_version() < 5);
            LISTED_DIRS.contains(&name) || pre_v5_fragment
        })
        .cloned()
        .collect()
}

/// The object at `dir` from its root's listing and those of
/// [`subdirs_to_list`], paths relative to `dir`.
pub(crate) fn directory_listing(
    dir: &str,
    root: &Listing,
    subdirs: &[Listing],
) -> DirectoryListing {
    let relative = |key: &str| {
        key.strip_prefix(dir)
            .map(|k| k.trim_start_matches('/').to_owned())
            .unwrap_or_else(|| key.to_owned())
    };
    let mut files: Vec<ListedFile> = Vec::new();
    for listing in subdirs.iter().chain([root]) {
        for f in &listing.files {
            files.push(ListedFile::new(relative(&f.key), f.size));
        }
    }
    let dirs = root.dirs.iter().map(|d| last_component(d));
    DirectoryListing::new(&files).with_root_dirs(dirs)
}

/// Requests for whole files (paths relative to `dir`).
pub(crate) fn whole_file_requests(dir: &str, paths: &[impl AsRef<str>]) -> Vec<RangeRequest> {
    paths
        .iter()
        .map(|p| RangeRequest::new(join(dir, p.as_ref()), ByteRange::Whole))
        .collect()
}

/// The answers to [`whole_file_requests`] of `paths`, by path.
pub(crate) fn whole_files(
    paths: &[impl AsRef<str>],
    reads: Vec<Option<RangeRead>>,
) -> Result<HashMap<String, Vec<u8>>> {
    paths
        .iter()
        .zip(reads)
        .map(|(p, read)| {
            let p = p.as_ref();
            let read = read.ok_or_else(|| FragmentError::missing(p, "file (listed, then gone)"))?;
            Ok((p.to_owned(), read.bytes.to_vec()))
        })
        .collect()
}

/// A fragment's metadata read from its own file, and the file's size.
pub(crate) type FooterAnswer = (FragmentMetadata, u64);

/// Fragments' footers read from their own metadata files: a suffix read
/// each (v1–v2 files whole, being one tile), then one more for the rare
/// footer longer than the first guess.
#[derive(Debug)]
pub(crate) struct FooterReads {
    dir: String,
    /// The fragments, each with its caller's index.
    fragments: Vec<(usize, TimestampedFile)>,
    /// Per fragment, its metadata and the file's size, once read.
    out: Vec<Option<Result<FooterAnswer>>>,
    /// Fragments still to read (index into `fragments`), and how many
    /// bytes from the end.
    pending: Vec<(usize, u64)>,
    /// Bytes fetched so far.
    pub bytes_read: u64,
}

impl FooterReads {
    pub fn new(
        dir: &str,
        fragments: Vec<(usize, TimestampedFile)>,
        schemas: &SchemaHistory,
    ) -> Self {
        let pending = fragments
            .iter()
            .enumerate()
            .map(|(k, (_, f))| {
                let schema = &fragment_schema(schemas, f).schema;
                (k, Footer::suffix_to_read(schema, f.format_version()))
            })
            .collect();
        FooterReads {
            dir: dir.to_owned(),
            out: fragments.iter().map(|_| None).collect(),
            fragments,
            pending,
            bytes_read: 0,
        }
    }

    /// Whether every footer is read.
    pub fn done(&self) -> bool {
        self.pending.is_empty()
    }

    /// The reads still to do.
    pub fn requests(&self) -> Vec<RangeRequest> {
        self.pending
            .iter()
            .filter_map(|&(k, n)| {
                let f = &self.fragments.get(k)?.1;
                let file = join(&join(&self.dir, &f.path), FRAGMENT_METADATA_FILE);
                Some(RangeRequest::new(file, ByteRange::Suffix(n)))
            })
            .collect()
    }

    /// The answers to [`FooterReads::requests`], in order. `has_file` says
    /// from the listing whether a path exists (a v1–v2 fragment with a
    /// coordinates file is sparse: the metadata does not say).
    pub fn take(
        &mut self,
        got: Vec<Option<RangeRead>>,
        schemas: &SchemaHistory,
        has_file: &dyn Fn(&str) -> bool,
        key: Option<&[u8; 32]>,
    ) {
        let lookup = |name: &str| schemas.by_name(name).map(|e| &e.schema);
        let read: u64 = got.iter().flatten().map(|r| r.bytes.len() as u64).sum();
        self.bytes_read = self.bytes_read.saturating_add(read);
        let mut again = Vec::new();
        for (&(k, _), read) in self.pending.iter().zip(got) {
            let (Some((_, f)), Some(out)) = (self.fragments.get(k), self.out.get_mut(k)) else {
                continue;
            };
            let file = format!("{}/{FRAGMENT_METADATA_FILE}", f.path);
            let Some(read) = read else {
                *out = Some(Err(FragmentError::missing(&file, "the file")));
                continue;
            };
            let version = f.format_version();
            let parsed = if version <= 2 {
                let schema = &fragment_schema(schemas, f).schema;
                let dense = !has_file(&format!("{}/{LEGACY_COORDS_STEM}{TDB_EXT}", f.path));
                LegacyMetadata::parse(&read.bytes, schema, dense, key, &f.path)
                    .map(|l| FragmentMetadata::from_legacy(f.name.clone(), l))
            } else {
                match Footer::parse(&read.bytes, read.file_size, &lookup, version, &f.path) {
                    Ok(FooterRead::Done(footer)) => {
                        Ok(FragmentMetadata::new(f.name.clone(), footer))
                    }
                    Ok(FooterRead::NeedMore(n)) if n > read.bytes.len() as u64 => {
                        again.push((k, n));
                        continue;
                    }
                    Ok(FooterRead::NeedMore(n)) => Err(FragmentError::invalid(
                        &file,
                        "footer",
                        format!("asks for {n} bytes after {} were read", read.bytes.len()),
                    )),
                    Err(e) => Err(e),
                }
            };
            *out = Some(parsed.map(|m| (m, read.file_size)));
        }
        self.pending = again;
    }

    /// Each fragment with its caller's index and its answer: its metadata
    /// and the file's size, or why there is none.
    pub fn finish(self) -> Vec<(usize, TimestampedFile, Result<FooterAnswer>)> {
        self.fragments
            .into_iter()
            .zip(self.out)
            .filter_map(|((i, f), out)| Some((i, f, out?)))
            .collect()
    }
}
