//! An array as a read sees it: opened at a window, with every visible
//! fragment's footer and the enumerations its schema refers to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tdb_fragment::{
    FragmentError, FragmentMetadata, LoadedFragment, OpenArray, OpenedArray, Opening, ReadStorage,
    Result, Section, SectionData, TimeWindow,
};
use tdb_index::{DomainOps, NDRange, RTree};
use tdb_schema::{ArraySchema, Enumeration, SchemaHistory};

/// An opened array: schemas, visible fragments with their footers, and
/// enumerations. Reads borrow it; it holds no cell data.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Snapshot {
    /// The directory, resolved at the window.
    pub open: OpenArray,
    /// Visible fragments in TileDB's order (oldest first).
    pub fragments: Vec<LoadedFragment>,
    /// The enumerations of the schema in force, by name.
    pub enumerations: HashMap<String, Enumeration>,
    /// Fragment metadata sections earlier reads loaded.
    sections: SectionCache,
}

/// Fragment metadata sections (tile offsets, R-trees, tile statistics)
/// that reads of a snapshot loaded, by fragment path: TileDB loads them
/// once per opened array, and many small reads of one array (slices,
/// boxes) should not each fetch and inflate them again. Sections depend on
/// the fragment's files and the array's key only, so clones of a snapshot
/// share it. It holds at most every section of the visible fragments: what
/// one read of the whole array loads. Views of some fragments (what copies
/// and merges read, one reader per input held at once) start their own,
/// which goes with them: sharing would hold every input's sections twice.
#[derive(Debug, Clone, Default)]
pub(crate) struct SectionCache(Arc<Mutex<Cached>>);

#[derive(Debug, Default)]
struct Cached {
    /// By fragment path.
    sections: HashMap<String, HashMap<Section, Arc<SectionData>>>,
    /// Each sparse fragment's R-tree, parsed from its section (or built
    /// from a v1–v2 fragment's MBRs) once: parsing every tile's MBR again
    /// made a box over a large array cost in proportion to its tiles.
    rtrees: HashMap<String, Arc<RTree>>,
}

impl SectionCache {
    fn lock(&self) -> MutexGuard<'_, Cached> {
        // A panic elsewhere cannot leave a half-inserted section behind.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Shares the sections cached for `fragment` with `meta`.
    pub(crate) fn restore(&self, fragment: &str, meta: &mut FragmentMetadata) {
        if let Some(cached) = self.lock().sections.get(fragment) {
            for (&section, data) in cached {
                if meta.section(section).is_none() {
                    meta.set_section(section, Arc::clone(data));
                }
            }
        }
    }

    /// Keeps a section `fragment`'s metadata just loaded.
    pub(crate) fn keep(&self, fragment: &str, section: Section, data: &Arc<SectionData>) {
        self.lock()
            .sections
            .entry(fragment.to_owned())
            .or_default()
            .entry(section)
            .or_insert_with(|| Arc::clone(data));
    }

    /// `fragment`'s R-tree: the one kept, else `parse`'s, kept where it
    /// gives one (`None`: its section not loaded, nothing to keep).
    pub(crate) fn rtree(
        &self,
        fragment: &str,
        parse: impl FnOnce() -> Result<Option<RTree>>,
    ) -> Result<Option<Arc<RTree>>> {
        if let Some(tree) = self.lock().rtrees.get(fragment) {
            return Ok(Some(Arc::clone(tree)));
        }
        // Parsed unlocked: another read may parse it too, the first kept.
        let Some(tree) = parse()? else {
            return Ok(None);
        };
        let mut cached = self.lock();
        let kept = cached
            .rtrees
            .entry(fragment.to_owned())
            .or_insert_with(|| Arc::new(tree));
        Ok(Some(Arc::clone(kept)))
    }
}

/// What an [`Opening`] gives, however it was driven.
impl From<OpenedArray> for Snapshot {
    fn from(opened: OpenedArray) -> Self {
        Snapshot {
            enumerations: opened
                .enumerations
                .into_iter()
                .map(|e| (e.name.clone(), e))
                .collect(),
            open: opened.open,
            fragments: opened.fragments,
            sections: SectionCache::default(),
        }
    }
}

impl Snapshot {
    /// Opens the array at `dir` of `storage` for `window` (`key` for
    /// encrypted arrays): listings, one batch of schemas and commits, one
    /// batch of footers, one of enumerations (an [`Opening`] driven over
    /// `storage`). Errors are the array directory's (nothing here is a
    /// query yet).
    pub fn load<S: ReadStorage + ?Sized>(
        storage: &S,
        dir: &str,
        window: TimeWindow,
        key: Option<&[u8; 32]>,
    ) -> Result<Self> {
        Ok(Snapshot::from(Opening::new(dir, window, key).run(storage)?))
    }

    /// The same array with every fragment committed and not yet vacuumed,
    /// those vacuum lists hide included
    /// ([`tdb_fragment::ArrayDirectory::committed_fragments`]): what a copy
    /// reads to keep the array's whole history. Their footers are read
    /// from `storage`.
    pub fn with_history<S: ReadStorage + ?Sized>(&self, storage: &S) -> Result<Snapshot> {
        let all = self.open.directory.committed_fragments();
        let opened = Opening::fragments_of(self.open.clone(), all)?.run(storage)?;
        Ok(Snapshot {
            open: self.open.clone(),
            fragments: opened.fragments,
            enumerations: self.enumerations.clone(),
            sections: SectionCache::default(),
        })
    }

    /// The same snapshot with only the fragments `chosen` (indexes into
    /// [`Snapshot::fragments`]), read at `open`'s window: what a merge of
    /// some fragments reads (an index past the end chooses nothing).
    pub(crate) fn with_fragments(&self, open: OpenArray, chosen: &[usize]) -> Snapshot {
        Snapshot {
            open,
            fragments: chosen
                .iter()
                .filter_map(|&i| self.fragments.get(i).cloned())
                .collect(),
            enumerations: self.enumerations.clone(),
            sections: SectionCache::default(),
        }
    }

    /// Sections earlier reads of this snapshot loaded.
    pub(crate) fn sections(&self) -> &SectionCache {
        &self.sections
    }

    /// The union of the visible fragments' non-empty domains (TileDB's
    /// `nonempty_domain`): the box every written cell lies in; `None` when
    /// nothing was written.
    pub fn non_empty_domain(&self) -> crate::Result<Option<NDRange>> {
        let all: Vec<usize> = (0..self.fragments.len()).collect();
        self.non_empty_domain_of(&all)
    }

    /// The union of the non-empty domains of fragments `chosen` (indexes
    /// into [`Snapshot::fragments`]).
    pub fn non_empty_domain_of(&self, chosen: &[usize]) -> crate::Result<Option<NDRange>> {
        let ops = DomainOps::new(&self.schema().domain)?;
        let mut union: Option<NDRange> = None;
        for &i in chosen {
            let Some(ned) = self
                .fragments
                .get(i)
                .and_then(|f| f.metadata.footer.non_empty_domain.as_ref())
            else {
                continue;
            };
            match &mut union {
                Some(u) => ops.expand(u, ned),
                None => union = Some(ned.clone()),
            }
        }
        Ok(union)
    }

    /// The schema reads use (the one in force at the window's end).
    pub fn schema(&self) -> &ArraySchema {
        &self.open.schema().schema
    }

    /// Sparse fragment `i` alone, as a read of every cell it stores: read
    /// under a sparse view of its schemas that allows duplicates, so a
    /// fragment consolidated with timestamps gives every version of a cell
    /// (in stored order) and a sparse fragment of a dense array its cells
    /// and coordinates rather than the dense array's every cell. What copy
    /// and consolidation read.
    pub fn sparse_fragment_alone(&self, i: usize) -> Result<Option<Snapshot>> {
        let Some(mut one) = self.fragment_alone(i) else {
            return Ok(None);
        };
        let entries = one.open.schemas.entries().iter().cloned().map(|mut e| {
            e.schema.array_type = tdb_format::ArrayType::Sparse;
            e.schema.allows_dups = true;
            e
        });
        one.open.schemas = SchemaHistory::new(entries.collect())
            .map_err(|e| FragmentError::schema(&one.open.dir, e))?;
        Ok(Some(one))
    }

    /// Fragment `i` (of [`Snapshot::fragments`]) as if it were the array's
    /// only one: no other fragment over it, no delete or update applied,
    /// the schema in force when it was written (at its end timestamp).
    /// Reads of a dense fragment return exactly the cells it holds (what a
    /// copy rewrites; sparse fragments: [`Snapshot::sparse_fragment_alone`]).
    /// A small view ([`OpenArray::reading_view`]): a merge holds one per
    /// fragment at once.
    pub fn fragment_alone(&self, i: usize) -> Option<Snapshot> {
        let f = self.fragments.get(i)?;
        Some(Snapshot {
            open: self.open.reading_view(f.file.name.timestamp_range().1),
            fragments: vec![f.clone()],
            enumerations: self.enumerations.clone(),
            sections: SectionCache::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn an_rtree_is_parsed_once_and_only_one_that_was_kept() {
        let cache = SectionCache::default();
        let parses = Cell::new(0);
        let parse = |tree: Option<RTree>| {
            || {
                parses.set(parses.get() + 1);
                Ok(tree)
            }
        };
        // A section not loaded gives no tree, and nothing is kept.
        assert!(cache.rtree("f", parse(None)).unwrap().is_none());
        let empty = || RTree::empty(tdb_index::DEFAULT_FANOUT);
        let first = cache.rtree("f", parse(Some(empty()))).unwrap().unwrap();
        let again = cache.rtree("f", parse(Some(empty()))).unwrap().unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(parses.get(), 2);
        // Clones of a snapshot share it; another fragment has its own.
        let shared = cache.clone();
        assert!(Arc::ptr_eq(
            &shared.rtree("f", parse(None)).unwrap().unwrap(),
            &first
        ));
        let other = cache.rtree("g", parse(Some(empty()))).unwrap().unwrap();
        assert!(!Arc::ptr_eq(&other, &first));
        assert_eq!(parses.get(), 3);
        // A parse error is the caller's, and keeps nothing.
        let bad = cache.rtree("h", || Err(FragmentError::missing("h", "R-tree")));
        assert!(bad.is_err());
        assert!(cache.rtree("h", parse(None)).unwrap().is_none());
    }
}
