//! `verify`: a scrub no TileDB tool offers. It reads every file of an array,
//! unfilters every tile and checks what the directory, the fragment metadata
//! and the data say against each other. Corruption is reported as
//! [`Problem`]s, one at a time through a callback, and the scrub goes on:
//! memory stays bounded by one tile, whatever the array's size. Only a
//! storage failure (the bytes cannot be fetched at all) stops it.

use crate::directory::{ArrayDirectory, DirectoryListing, ListedFile};
use crate::fragment_metadata::Field;
use crate::open::{
    dir_label, object_files, object_kind, read_files, read_fragment_metadata, schema_history,
    ObjectKind, ReadStorage,
};
use crate::tile_metadata::{self, FieldStats};
use crate::{
    Footer, FragmentError, FragmentMetadata, Result, Section, SectionData, TimeWindow,
    TimestampedFile,
};
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::ops::Range;
use tdb_filters::Filter;
use tdb_format::names::FRAGMENT_METADATA_FILE;
use tdb_format::{
    classify, single_generic_tile, DataPart, EncryptionType, FormatVersion, ObjectFile,
};
use tdb_index::{DomainOps, NDRange, RangeOps};
use tdb_schema::{ArraySchema, Range as DimRange, SchemaHistory};
use tdb_storage::{join, ByteRange, RangeRead, RangeRequest};
use tdb_tile::{CoordsLayout, FieldTile, TileError, TileShape};

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

    fn at(mut self, tile: u64, offset: Option<u64>) -> Self {
        self.tile = Some(tile);
        self.offset = offset;
        self
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
/// `report` as it is found.
///
/// The directory: every file is one the format knows, schemas and commit
/// files parse (with `key` when encrypted), every fragment directory is
/// committed and every commit has its fragment. Then every committed
/// fragment, one at a time: its footer parses; each data file the footer
/// implies exists with the size it records; every section loads; every
/// tile of every field is read (batched by field, a few MiB at a time) and
/// unfiltered (checksum filters check themselves), and its size is checked
/// against the cells it must hold (var offsets ordered and inside their var
/// tile, var sizes as recorded, validity bytes 0 or 1). Sparse fragments:
/// each leaf MBR is exactly the bounds of its tile's coordinates and the
/// non-empty domain is the union of the leaves. v11+: tile null counts, and
/// mins, maxes and sums of fixed-size numeric attributes, against the data.
pub fn verify_array<S: ReadStorage + ?Sized>(
    storage: &S,
    dir: &str,
    key: Option<&[u8; 32]>,
    report: &mut dyn FnMut(Problem),
) -> Result<VerifyReport> {
    let mut sink = Sink {
        summary: VerifyReport::default(),
        report,
    };
    if object_kind(storage, dir)? != Some(ObjectKind::Array) {
        return Err(FragmentError::missing(
            dir_label(dir),
            "array schema: not a TileDB array",
        ));
    }
    let files = object_files(storage, dir)?.files;
    sink.summary.files = files.len();
    for f in &files {
        if classify(&f.path) == ObjectFile::Unknown {
            sink.push(Problem::new(
                ProblemKind::UnknownFile,
                &f.path,
                "no file of the format",
            ));
        }
    }
    let listing = DirectoryListing::new(&files);
    let schema_files = listing.schema_files();
    let mut wanted = listing.files_to_read();
    wanted.extend(schema_files.iter().map(String::as_str));
    let contents = read_files(storage, dir, &wanted)?;
    let read: u64 = contents.values().map(|b| b.len() as u64).sum();
    sink.summary.bytes_read = sink.summary.bytes_read.saturating_add(read);
    // An encrypted array scrubbed without its key is a usage error, not a
    // corrupt array: every tile would fail to decrypt.
    if key.is_none() {
        let encrypted = schema_files.iter().find(|f| {
            contents.get(f.as_str()).is_some_and(|b| {
                single_generic_tile(b)
                    .is_ok_and(|t| t.header.encryption != EncryptionType::NoEncryption)
            })
        });
        if let Some(file) = encrypted {
            return Err(FragmentError::missing(
                file,
                "the key: the array is encrypted",
            ));
        }
    }
    let resolved = listing.resolve(&contents, TimeWindow::ALL).and_then(|d| {
        let h = schema_history(dir, &schema_files, &contents, key)?;
        Ok((d, h))
    });
    let (directory, schemas) = match resolved {
        Ok(d) => d,
        Err(e) => {
            sink.push(Problem::new(
                ProblemKind::Directory,
                dir_label(dir),
                error_chain(&e),
            ));
            return Ok(sink.summary);
        }
    };

    // Fragment directories that hold files, against the committed ones.
    let (present, committed) = fragment_directories(&files, &directory);
    for d in present.difference(&committed) {
        sink.push(Problem::new(
            ProblemKind::UncommittedFragment,
            d.as_str(),
            "fragment directory without a commit: invisible to reads",
        ));
    }
    for d in committed.difference(&present) {
        sink.push(Problem::new(
            ProblemKind::OrphanedCommit,
            d.as_str(),
            "committed, but its directory holds no fragment files",
        ));
    }
    sink.summary.fragments = committed.intersection(&present).count();
    // `object_files` gives every size.
    let sizes: HashMap<&str, u64> = files
        .iter()
        .map(|f| (f.path.as_str(), f.size.unwrap_or_default()))
        .collect();
    let mut scrub = Scrub {
        storage,
        dir,
        key,
        schemas: &schemas,
        sizes: &sizes,
        sink,
        workspace: tdb_filters::Workspace::default(),
    };
    let mut seen = BTreeSet::new();
    for f in &directory.unfiltered_fragments {
        if committed.contains(&f.path) && present.contains(&f.path) && seen.insert(&f.path) {
            scrub.fragment(f)?;
        }
    }
    Ok(scrub.sink.summary)
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

/// Where problems go, and the running totals.
struct Sink<'r> {
    summary: VerifyReport,
    report: &'r mut dyn FnMut(Problem),
}

impl Sink<'_> {
    fn push(&mut self, p: Problem) {
        self.summary.problems = self.summary.problems.saturating_add(1);
        (self.report)(p);
    }
}

/// Bytes of tiles fetched in one batch (at least one tile's worth), so
/// memory stays near a tile however large the file.
const BATCH_BYTES: u64 = 4 << 20;

/// The fragment-wide state of a scrub.
struct Scrub<'a, S: ?Sized> {
    storage: &'a S,
    dir: &'a str,
    key: Option<&'a [u8; 32]>,
    schemas: &'a SchemaHistory,
    sizes: &'a HashMap<&'a str, u64>,
    sink: Sink<'a>,
    /// The filters' workspace (codec contexts, stage buffers), kept from
    /// tile to tile.
    workspace: tdb_filters::Workspace,
}

/// One fragment being scrubbed.
struct Frag<'a> {
    path: &'a str,
    meta_file: String,
    schema: &'a ArraySchema,
    meta: FragmentMetadata,
    /// Leaf MBRs (sparse fragments), when the R-tree loaded.
    leaves: Option<Vec<NDRange>>,
    /// Data files present: (field index, part) to path and size.
    files: HashMap<(usize, DataPart), (String, u64)>,
    tile_num: u64,
}

impl Frag<'_> {
    /// Cells tile `t` must hold.
    fn cells(&self, t: u64) -> Option<u64> {
        let f = &self.meta.footer;
        if f.dense {
            tdb_index::dense::tiledb_cell_num_per_tile(&self.schema.domain)
        } else if t.checked_add(1) == Some(self.tile_num) {
            Some(f.last_tile_cell_num)
        } else {
            Some(self.schema.capacity)
        }
    }
}

/// The parts of `field` a fragment must have files for.
fn expected_parts(footer: &Footer, schema: &ArraySchema, field: Field) -> Vec<DataPart> {
    let mut parts = Vec::new();
    match field {
        Field::Attribute(i) => {
            let Some(a) = schema.attributes.get(i) else {
                return parts;
            };
            parts.push(DataPart::Fixed);
            if a.is_var() {
                parts.push(DataPart::Var);
            }
            if a.nullable && footer.version >= 7 {
                parts.push(DataPart::Validity);
            }
        }
        Field::Coords if footer.version < 5 && !footer.dense => parts.push(DataPart::Fixed),
        Field::Coords => {}
        Field::Dimension(i) if !footer.dense => {
            parts.push(DataPart::Fixed);
            if schema.domain.dimensions.get(i).is_some_and(|d| d.is_var()) {
                parts.push(DataPart::Var);
            }
        }
        Field::Dimension(_) => {}
        Field::Timestamps | Field::DeleteTimestamps | Field::DeleteConditionIndex => {
            parts.push(DataPart::Fixed)
        }
    }
    parts
}

impl<'a, S: ReadStorage + ?Sized> Scrub<'a, S> {
    fn read(&mut self, requests: &[RangeRequest]) -> Result<Vec<Option<RangeRead>>> {
        let got = self
            .storage
            .read_ranges(requests)
            .map_err(|e| FragmentError::storage(dir_label(self.dir), e))?;
        let read: u64 = got.iter().flatten().map(|r| r.bytes.len() as u64).sum();
        self.sink.summary.bytes_read = self.sink.summary.bytes_read.saturating_add(read);
        Ok(got)
    }

    fn request(&self, path: &str, range: Range<u64>) -> RangeRequest {
        RangeRequest::new(
            join(self.dir, path),
            ByteRange::new(range.start, range.end.saturating_sub(range.start)),
        )
    }

    fn fragment(&mut self, f: &'a TimestampedFile) -> Result<()> {
        let meta_file = format!("{}/{FRAGMENT_METADATA_FILE}", f.path);
        if !self.sizes.contains_key(meta_file.as_str()) {
            self.sink.push(Problem::new(
                ProblemKind::MissingFile,
                &meta_file,
                "the fragment has no metadata file",
            ));
            return Ok(());
        }
        let bad_meta =
            |detail: String| Problem::new(ProblemKind::FragmentMetadata, &meta_file, detail);
        let sizes = &self.sizes;
        let has_file = |p: &str| sizes.contains_key(p);
        let read = read_fragment_metadata(
            self.storage,
            self.dir,
            &[f],
            self.schemas,
            &has_file,
            self.key,
            &mut self.sink.summary.bytes_read,
        )?;
        let meta = match read.into_iter().next() {
            Some(Ok((meta, _))) => meta,
            Some(Err(e)) => {
                self.sink.push(bad_meta(error_chain(&e)));
                return Ok(());
            }
            None => return Ok(()),
        };
        let legacy_mbrs = meta.legacy_mbrs().map(<[NDRange]>::to_vec);
        let Some(schema) = self
            .schemas
            .by_name(&meta.footer.array_schema_name)
            .map(|e| &e.schema)
        else {
            self.sink.push(bad_meta(format!(
                "names schema {}, which the array does not have",
                meta.footer.array_schema_name
            )));
            return Ok(());
        };
        let mut frag = Frag {
            path: &f.path,
            meta_file,
            schema,
            meta,
            leaves: legacy_mbrs,
            files: HashMap::new(),
            tile_num: 0,
        };
        self.data_files(&mut frag);
        self.sections(&mut frag)?;
        let footer = &frag.meta.footer;
        let tile_num = if footer.dense {
            footer.tile_num(schema)
        } else {
            Some(footer.sparse_tile_num)
        };
        let Some(tile_num) = tile_num else {
            self.sink.push(Problem::new(
                ProblemKind::FragmentMetadata,
                &frag.meta_file,
                "the tile count does not follow from the footer",
            ));
            return Ok(());
        };
        frag.tile_num = tile_num;
        if !footer.dense {
            self.check_domain(&frag);
        }
        let fields = frag.meta.footer.fields();
        for (i, field) in fields.into_iter().enumerate() {
            self.field(&frag, i, field)?;
        }
        Ok(())
    }

    /// Each data file the footer implies is there, with the size it records.
    fn data_files(&mut self, frag: &mut Frag<'_>) {
        let prefix = format!("{}/", frag.path);
        let footer = &frag.meta.footer;
        for (path, size) in self.sizes.iter() {
            let Some(_) = path.strip_prefix(&prefix) else {
                continue;
            };
            if let ObjectFile::Data { field, part, .. } = classify(path) {
                let (field, part) = frag.schema.data_file(field, part);
                if let Some(i) = footer.data_field_index(&field, frag.schema) {
                    frag.files.insert((i, part), ((*path).to_owned(), *size));
                }
            }
        }
        for (i, field) in footer.fields().into_iter().enumerate() {
            for part in expected_parts(footer, frag.schema, field) {
                let recorded = footer.file_size(i, part);
                match frag.files.get(&(i, part)) {
                    None => {
                        let name = footer
                            .data_field(field, frag.schema)
                            .map_or_else(|| format!("field {i}"), |f| f.file_name(part));
                        self.sink.push(Problem::new(
                            ProblemKind::MissingFile,
                            format!("{prefix}{name}"),
                            "the fragment metadata lists this data file",
                        ));
                    }
                    Some((path, size)) => match recorded {
                        Some(r) if r != *size => self.sink.push(Problem::new(
                            ProblemKind::FileSize,
                            path.as_str(),
                            format!("{size} bytes, the fragment metadata records {r}"),
                        )),
                        _ => {}
                    },
                }
            }
        }
    }

    /// Loads every section the footer has, in one batch.
    fn sections(&mut self, frag: &mut Frag<'_>) -> Result<()> {
        let name = frag.meta.name.to_string();
        if frag.meta.footer.version <= 2 {
            return Ok(());
        }
        let mut wanted = Vec::new();
        for section in frag.meta.footer.sections() {
            match frag.meta.footer.section_range(section, &name) {
                Ok(r) => wanted.push((section, r)),
                Err(e) => self.sink.push(Problem::new(
                    ProblemKind::FragmentMetadata,
                    &frag.meta_file,
                    error_chain(&e),
                )),
            }
        }
        let requests: Vec<RangeRequest> = wanted
            .iter()
            .map(|(_, r)| self.request(&frag.meta_file, r.clone()))
            .collect();
        let got = if requests.is_empty() {
            Vec::new()
        } else {
            self.read(&requests)?
        };
        for ((section, _), read) in wanted.into_iter().zip(got) {
            let Some(read) = read else {
                continue;
            };
            let loaded = frag
                .meta
                .load_section(section, &read.bytes, self.key, frag.schema)
                .map(|_| ())
                .and_then(|()| match section {
                    Section::RTree => Ok(frag
                        .meta
                        .rtree(&frag.schema.domain)?
                        .map(|tree| tree.leaves().to_vec())),
                    _ => Ok(None),
                });
            match loaded {
                Ok(Some(leaves)) => frag.leaves = Some(leaves),
                Ok(None) => {}
                Err(e) => self.sink.push(Problem::new(
                    ProblemKind::FragmentMetadata,
                    &frag.meta_file,
                    error_chain(&e),
                )),
            }
        }
        Ok(())
    }

    /// Sparse: the leaf count is the tile count, and the non-empty domain
    /// is the union of the leaf MBRs.
    fn check_domain(&mut self, frag: &Frag<'_>) {
        let Some(leaves) = &frag.leaves else {
            return;
        };
        if leaves.len() as u64 != frag.tile_num {
            self.sink.push(Problem::new(
                ProblemKind::Mismatch,
                &frag.meta_file,
                format!("{} leaf MBRs for {} tiles", leaves.len(), frag.tile_num),
            ));
            return;
        }
        let Ok(ops) = DomainOps::new(&frag.schema.domain) else {
            return;
        };
        let mut union = NDRange::new();
        for leaf in leaves {
            ops.expand(&mut union, leaf);
        }
        if let Some(ned) = &frag.meta.footer.non_empty_domain {
            if !leaves.is_empty() && &union != ned {
                self.sink.push(Problem::new(
                    ProblemKind::Mismatch,
                    &frag.meta_file,
                    "the non-empty domain is not the union of the leaf MBRs",
                ));
            }
        }
    }
}

/// One data-file tile to fetch: its part, file and byte range.
struct Want {
    part: DataPart,
    path: String,
    range: Range<u64>,
}

impl<'a, S: ReadStorage + ?Sized> Scrub<'a, S> {
    /// Every tile of field `i`, fetched a batch at a time.
    fn field(&mut self, frag: &Frag<'_>, i: usize, field: Field) -> Result<()> {
        let parts: Vec<DataPart> = expected_parts(&frag.meta.footer, frag.schema, field)
            .into_iter()
            .filter(|p| frag.files.contains_key(&(i, *p)))
            .collect();
        if !parts.contains(&DataPart::Fixed) {
            return Ok(());
        }
        for (part, section) in [
            (DataPart::Fixed, Section::TileOffsets(i)),
            (DataPart::Var, Section::VarOffsets(i)),
            (DataPart::Validity, Section::ValidityOffsets(i)),
        ] {
            if !parts.contains(&part) {
                continue;
            }
            match frag.meta.section(section) {
                Some(SectionData::U64s(v)) if v.len() as u64 == frag.tile_num => {}
                Some(SectionData::U64s(v)) => {
                    self.sink.push(Problem::new(
                        ProblemKind::Mismatch,
                        &frag.meta_file,
                        format!(
                            "{}: {} offsets for {} tiles",
                            section.label(),
                            v.len(),
                            frag.tile_num
                        ),
                    ));
                    return Ok(());
                }
                // Not loaded: already reported.
                _ => return Ok(()),
            }
        }
        let mut batch: Vec<(u64, Vec<Want>)> = Vec::new();
        let mut batch_bytes = 0;
        for t in 0..frag.tile_num {
            let mut wants = Vec::new();
            for &part in &parts {
                let range = match part {
                    DataPart::Fixed => frag.meta.tile_range(i, t),
                    DataPart::Var => frag.meta.var_tile_range(i, t),
                    DataPart::Validity => frag.meta.validity_tile_range(i, t),
                };
                // Every field's files were listed for each of its parts.
                let Some((path, size)) = frag.files.get(&(i, part)).cloned() else {
                    continue;
                };
                match range {
                    Ok(range) if range.end > size => self.sink.push(
                        Problem::new(
                            ProblemKind::Tile,
                            path,
                            format!("spans {range:?}, beyond the file's {size} bytes"),
                        )
                        .at(t, Some(range.start)),
                    ),
                    Ok(range) => wants.push(Want { part, path, range }),
                    Err(e) => self
                        .sink
                        .push(Problem::new(ProblemKind::Tile, path, error_chain(&e)).at(t, None)),
                }
            }
            if wants.len() != parts.len() {
                continue;
            }
            let bytes: u64 = wants
                .iter()
                .map(|w| w.range.end.saturating_sub(w.range.start))
                .sum();
            batch_bytes = bytes.saturating_add(batch_bytes);
            batch.push((t, wants));
            if batch_bytes >= BATCH_BYTES {
                self.flush(frag, i, field, std::mem::take(&mut batch))?;
                batch_bytes = 0;
            }
        }
        self.flush(frag, i, field, batch)
    }

    fn flush(
        &mut self,
        frag: &Frag<'_>,
        i: usize,
        field: Field,
        batch: Vec<(u64, Vec<Want>)>,
    ) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let requests: Vec<RangeRequest> = batch
            .iter()
            .flat_map(|(_, w)| w.iter().map(|w| self.request(&w.path, w.range.clone())))
            .collect();
        let mut got = self.read(&requests)?.into_iter();
        for (t, wants) in batch {
            let mut bytes = Vec::with_capacity(wants.len());
            for w in &wants {
                match got.next().flatten() {
                    Some(r) => bytes.push(r.bytes),
                    None => {
                        self.sink.push(Problem::new(
                            ProblemKind::MissingFile,
                            w.path.as_str(),
                            "listed, then gone",
                        ));
                        return Ok(());
                    }
                }
            }
            self.tile(frag, i, field, t, &wants, &bytes);
        }
        Ok(())
    }

    /// Unfilters tile `t` of field `i` (each of its parts) and checks it.
    fn tile(
        &mut self,
        frag: &Frag<'_>,
        i: usize,
        field: Field,
        t: u64,
        wants: &[Want],
        bytes: &[impl AsRef<[u8]>],
    ) {
        let schema = frag.schema;
        let Some(df) = frag.meta.footer.data_field(field, schema) else {
            return;
        };
        let encrypted = self.key.is_some();
        let Some(cells) = frag.cells(t) else {
            return;
        };
        let Some(fixed_want) = wants.first() else {
            return;
        };
        let problem = |kind, detail: String| {
            Problem::new(kind, fixed_want.path.as_str(), detail).at(t, Some(fixed_want.range.start))
        };
        // The tile's shape, as the fragment metadata gives it.
        let var_size = match wants.iter().any(|w| w.part == DataPart::Var) {
            true => match frag.meta.var_tile_size(i, t) {
                Ok(n) => Some(n),
                Err(e) => {
                    self.sink
                        .push(problem(ProblemKind::FragmentMetadata, error_chain(&e)));
                    return;
                }
            },
            false => None,
        };
        let Some(filters) = (wants.iter())
            .map(|w| schema.part_filters(&df, w.part, encrypted))
            .collect::<Option<Vec<_>>>()
        else {
            return;
        };
        let cell_size = filters.first().and_then(|pf| pf.field_cell_size);
        let locations: Vec<String> = wants
            .iter()
            .map(|w| format!("{} tile {t}", w.path))
            .collect();
        let parts: Vec<_> = (wants.iter().zip(&filters).zip(bytes).zip(&locations))
            .map(|(((w, pf), b), location)| {
                let f = pf.tile_filters(schema.version, self.key);
                (w.part, f, location.as_str(), b.as_ref())
            })
            .collect();
        let shape = TileShape {
            cells,
            cell_size,
            var_size,
            zipped: field == Field::Coords,
        };
        // The read path's decoding and checks.
        let tile = match FieldTile::decode(&parts, &shape, &mut self.workspace) {
            Ok(tile) => tile,
            Err(e) => {
                let kind = match e {
                    TileError::Shape { .. } => ProblemKind::Mismatch,
                    _ => ProblemKind::Tile,
                };
                self.sink.push(problem(kind, error_chain(&e)));
                return;
            }
        };
        self.sink.summary.tiles = self.sink.summary.tiles.saturating_add(wants.len() as u64);
        if let Some((c, b)) = (tile.validity.iter().flatten())
            .enumerate()
            .find(|(_, &b)| b > 1)
        {
            self.sink.push(problem(
                ProblemKind::Mismatch,
                format!("validity byte of cell {c} is {b}"),
            ));
            return;
        }
        let mismatch = |path: &str, detail: String| {
            Problem::new(ProblemKind::Mismatch, path, detail).at(t, Some(fixed_want.range.start))
        };
        let is_var = wants.iter().any(|w| w.part == DataPart::Var);
        let offsets = is_var.then_some(&tile.offsets);
        let (fixed, validity) = (&tile.fixed, tile.validity.as_deref());
        let values = |k: usize| -> &[u8] {
            match offsets {
                Some(o) => {
                    let end = o
                        .get(k.saturating_add(1))
                        .map_or(tile.var.len(), |&e| e as usize);
                    let start = o.get(k).map_or(end, |&s| s as usize);
                    tile.var.get(start..end).unwrap_or_default()
                }
                None => &[],
            }
        };
        // Sparse coordinates against their leaf MBR.
        if let Some(leaves) = &frag.leaves {
            let leaf = usize::try_from(t).ok().and_then(|t| leaves.get(t));
            let dims = &schema.domain.dimensions;
            // Pre-v5 coordinates, one buffer per dimension.
            let unzipped: Vec<Vec<u8>>;
            let coords: Vec<(usize, Vec<&[u8]>)> = match field {
                Field::Dimension(d) if !frag.meta.footer.dense => match dims.get(d) {
                    Some(dim) => {
                        let n = cells as usize;
                        let vals = match dim.is_var() {
                            true => (0..n).map(values).collect(),
                            false => fixed.chunks_exact(dim.datatype.size() as usize).collect(),
                        };
                        vec![(d, vals)]
                    }
                    None => Vec::new(),
                },
                // Pre-v5 `__coords.tdb`: every dimension in one tile, in
                // the layout its version and filters say.
                Field::Coords if !frag.meta.footer.dense => {
                    let size = dims.first().map_or(0, |d| d.datatype.size() as usize);
                    let layout = FormatVersion::new(frag.meta.footer.version)
                        .map_or(CoordsLayout::Split, |v| {
                            CoordsLayout::of(v, &schema.coords_filters)
                        });
                    unzipped = (0..dims.len())
                        .map(|d| layout.dimension(fixed, d, dims.len(), size))
                        .collect::<Option<Vec<_>>>()
                        .unwrap_or_default();
                    unzipped
                        .iter()
                        .enumerate()
                        .map(|(d, bytes)| (d, bytes.chunks_exact(size.max(1)).collect()))
                        .collect()
                }
                _ => Vec::new(),
            };
            for (d, vals) in coords {
                let Some(dim) = dims.get(d) else { continue };
                let (Some(leaf), Ok(ops)) = (leaf, RangeOps::new(dim, d)) else {
                    continue;
                };
                let var_dim = dim.is_var();
                let mut it = vals.iter();
                let Some(first) = it.next() else { continue };
                let mut mbr = DimRange::from_bounds(first, first, var_dim);
                for v in it {
                    ops.expand(&mut mbr, &DimRange::from_bounds(v, v, var_dim));
                }
                if leaf.get(d) != Some(&mbr) {
                    let detail = if leaf.get(d).is_some_and(|l| ops.covers(l, &mbr)) {
                        format!("leaf MBR of dimension {d} is not tight around its coordinates")
                    } else {
                        format!("coordinates of dimension {d} lie outside the tile's leaf MBR")
                    };
                    self.sink.push(mismatch(&fixed_want.path, detail));
                }
            }
        }
        let footer = &frag.meta.footer;
        if let (true, Field::Attribute(a)) = (footer.version >= 11, field) {
            let tile = (t, fixed.as_slice(), validity);
            // A dense fragment spanning several times is a merge: TileDB's
            // merge writes whole tiles in the global order (fill values
            // included, past the domain too), and their metadata covers
            // every cell as stored.
            let merged = frag.meta.name.t1 < frag.meta.name.t2;
            let dense_stats = footer.version >= DENSE_TILE_METADATA_VERSION;
            if !footer.dense || (merged && dense_stats) {
                self.tile_metadata(frag, i, a, tile, None, fixed_want);
            } else if dense_stats {
                // A dense tile's metadata covers the cells the write gave,
                // visited in row-major order of their coordinates, not the
                // fill values around them.
                if let Some(order) = written_cells(frag, t, fixed, validity) {
                    self.tile_metadata(frag, i, a, tile, Some(&order), fixed_want);
                }
            }
        }
    }

    /// Tile null count, min, max and sum against the data, where TileDB
    /// computes them (`TileMetadataGenerator`, replicated by
    /// [`FieldStats`] and stored as [`tile_metadata::sections`] stores
    /// them): null counts of nullable attributes; min, max and sum of
    /// fixed-size attributes with one value per cell (nulls skipped). The
    /// tile is `(index, fixed data, validity)`; `order` the positions the
    /// write gave, in TileDB's visiting order (`None`: all).
    fn tile_metadata(
        &mut self,
        frag: &Frag<'_>,
        i: usize,
        a: usize,
        (t, data, validity): (u64, &[u8], Option<&[u8]>),
        order: Option<&[usize]>,
        want: &Want,
    ) {
        let (Some(attr), Some(fs)) = (
            frag.schema.attributes.get(a),
            FieldStats::of_index(frag.schema, i),
        ) else {
            return;
        };
        let tile_num = frag.tile_num as usize;
        let ti = t as usize;
        let mut problem = |what: &str, stored: String, computed: String| {
            self.sink.push(
                Problem::new(
                    ProblemKind::Mismatch,
                    frag.meta_file.as_str(),
                    format!("tile {what} of field {i} is {stored}, the data gives {computed}"),
                )
                .at(t, Some(want.range.start)),
            );
        };
        let stored_nulls = match frag.meta.section(Section::NullCounts(i)) {
            Some(SectionData::U64s(counts)) if counts.len() == tile_num => counts.get(ti).copied(),
            _ => None,
        };
        if attr.is_var() {
            // Var-size values are not at hand here: only the null count,
            // which TileDB takes over the written cells where the field has
            // a min and max, and leaves 0 otherwise.
            if let (Some(_), Some(stored)) = (validity, stored_nulls) {
                let nulls = fs.null_count(validity, order);
                if stored != nulls {
                    problem("null count", stored.to_string(), nulls.to_string());
                }
            }
            return;
        }
        let stats = fs.tile(data, None, validity, order);
        let (mins, maxes, sums, nulls) = tile_metadata::sections(frag.schema, i, 1, &[stats]);
        if let (Some(stored), Some(&computed)) = (stored_nulls, nulls.first()) {
            if stored != computed {
                problem("null count", stored.to_string(), computed.to_string());
            }
        }
        // Lossy filters: the data read back is not what the writer saw.
        let lossy = attr
            .filters
            .filters
            .iter()
            .any(|f| matches!(f, Filter::ScaleFloat { .. } | Filter::Webp { .. }));
        if attr.cell_val_num != 1 || lossy {
            return;
        }
        let size = attr.datatype.size() as usize;
        for (what, section, computed) in [
            ("min", Section::Mins(i), &mins),
            ("max", Section::Maxes(i), &maxes),
        ] {
            if let (Some(SectionData::Bounds(b)), Some(computed)) =
                (frag.meta.section(section), computed.value(0, Some(size)))
            {
                if Some(b.fixed.len()) == tile_num.checked_mul(size) {
                    if let Some(stored) = b.value(ti, Some(size)) {
                        if stored != computed {
                            problem(what, format!("{stored:?}"), format!("{computed:?}"));
                        }
                    }
                }
            }
        }
        if let (Some(SectionData::Sums(stored)), Some(computed)) =
            (frag.meta.section(Section::Sums(i)), sums.first())
        {
            if let Some(s) = stored.get(ti).filter(|_| stored.len() == tile_num) {
                if s != computed {
                    problem("sum", s.to_string(), computed.to_string());
                }
            }
        }
    }
}

/// The first format version whose dense tiles carry metadata computed over
/// the written cells: TileDB 2.12 ("Tile metadata: fixing for ordered
/// writes"); before, dense tiles' mins and maxes are zeros and null counts
/// include the fill.
const DENSE_TILE_METADATA_VERSION: u32 = 16;

/// The positions in dense tile `t` the write gave, in the order TileDB's
/// writer visits them; `None` when the domain's arithmetic does not apply
/// or the sizes disagree (the size checks report those).
fn written_cells(
    frag: &Frag<'_>,
    t: u64,
    data: &[u8],
    validity: Option<&[u8]>,
) -> Option<Vec<usize>> {
    let schema = frag.schema;
    let cells = usize::try_from(frag.cells(t)?).ok()?;
    if data.len().checked_rem(cells) != Some(0) || validity.is_some_and(|v| v.len() != cells) {
        return None;
    }
    tdb_index::dense::written_cells(
        &schema.domain,
        schema.tile_order,
        schema.cell_order,
        frag.meta.footer.non_empty_domain.as_ref()?,
        t,
        cells,
    )
}

/// The fragment directories that hold fragment files among `files` (an
/// object's listing), and those `directory` commits.
pub(crate) fn fragment_directories(
    files: &[ListedFile],
    directory: &ArrayDirectory,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let present = files
        .iter()
        .filter_map(|f| match classify(&f.path) {
            ObjectFile::FragmentMetadata { .. } | ObjectFile::Data { .. } => {
                f.path.rsplit_once('/').map(|(d, _)| d.to_owned())
            }
            _ => None,
        })
        .collect();
    let committed = directory
        .committed_fragments()
        .into_iter()
        .map(|f| f.path)
        .collect();
    (present, committed)
}
