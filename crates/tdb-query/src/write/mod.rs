//! Write queries: each writes one fragment that TileDB 2.30 reads.
//!
//! The cells are checked first (`input.rs`); nothing is written when they
//! do not fit the schema. A dense write lays its subarray's cells into the
//! space tiles the subarray touches (fill where a tile reaches beyond it);
//! a sparse write sorts its cells into the global order and cuts tiles of
//! `capacity` cells; a global-order write, dense or sparse, may come in
//! parts and is cut into tiles as it comes ([`FragmentWriter`]). Each
//! field's tiles are built, measured (TileDB's tile metadata) and filtered
//! on a bounded pool (`tiles.rs`) and uploaded as they are done
//! (`files.rs`). The fragment metadata follows, and the commit file
//! (`__commits/<fragment>.wrt`) last: until it exists no reader sees the
//! fragment, so a write that fails half way leaves nothing visible.

mod arrange;
mod chunked;
mod coordinates;
mod delete;
mod dense_split;
mod files;
mod input;
mod tiles;
mod writer;

use crate::{QueryError, Result, ResultLayout, Subarray};
use bytes::Bytes;
use tdb_format::TimestampedName;
use tdb_fragment::ReadStorage;
use tdb_schema::{NDRange, SchemaEntry};
use tdb_storage::WritableStorage;

pub use crate::batch::FieldBuffer;
pub use delete::delete_cells;
pub use writer::{dense_bands, FragmentWriter};

/// A write: the cells of every attribute (and, for sparse arrays, every
/// dimension's coordinates) in `fields`, in `layout` order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WriteSpec {
    /// The order of the cells given: dense writes row-major, col-major or
    /// global order over the subarray; sparse writes unordered (sorted
    /// here) or global order. `None`: row-major for dense arrays,
    /// unordered for sparse ones.
    pub layout: Option<ResultLayout>,
    /// Dense writes: the rectangle written (one range per dimension;
    /// `None` is the whole domain). Sparse writes take none.
    pub subarray: Option<Subarray>,
    /// One buffer per field.
    pub fields: Vec<FieldBuffer>,
    /// The fragment's timestamp range; `None` is now (milliseconds since
    /// the epoch, as TileDB).
    pub timestamps: Option<(u64, u64)>,
    /// Sparse writes: every cell comes with its own timestamp (a
    /// `__timestamps` field), as in fragments consolidated with
    /// timestamps. Implied when the spec's fields hold one; set it for a
    /// writer whose parts come later.
    pub cell_timestamps: bool,
    /// Sparse writes: every cell comes with its delete metadata (the
    /// `__delete_timestamps` and `__delete_condition_index` fields), as in
    /// fragments consolidated over delete commits. Implied when the spec's
    /// fields hold them; set it for a writer whose parts come later.
    pub delete_metadata: bool,
    /// The delete and update commits the fragment has applied (TileDB's
    /// condition markers, e.g. `__commits/__2_2_<uuid>_22.del`): reads do
    /// not apply them to its cells again, and its delete condition indexes
    /// point into this list. Empty for plain writes.
    pub processed_conditions: Vec<String>,
    /// Dense global-order writes of whole tiles whose cells outside this
    /// rectangle are fill values: the fragment records it as its non-empty
    /// domain (what TileDB's dense consolidation writes).
    pub(crate) non_empty_domain: Option<NDRange>,
    /// TileDB's `max_fragment_size` (global-order writes): the write is
    /// split into fragments of at most this many bytes of filtered tiles
    /// (every field's), each starting where the next tile would take the
    /// one before past it; dense fragments are rectangles of tiles, so one
    /// may pass it as TileDB's do (`write/dense_split.rs`). `None`: one
    /// fragment however large.
    pub max_fragment_size: Option<u64>,
    /// Label data: one buffer per dimension label written (named by the
    /// label), holding the labels of the indexes the write covers on the
    /// label's dimension, in order (TileDB's label buffers). Written to
    /// the labels' arrays before the cells, stamped alike.
    pub labels: Vec<FieldBuffer>,
    /// Write the fragments' files but not their commit: no reader sees
    /// them until one commit names them all
    /// (`tdb_fragment::write_fragment_commits`), as a write of several
    /// processes is made visible at once. Never committed, they are what
    /// a vacuum of uncommitted fragments removes.
    pub uncommitted: bool,
}

impl WriteSpec {
    /// A write of `fields` (row-major for dense arrays, unordered for
    /// sparse ones unless changed).
    pub fn new(fields: Vec<FieldBuffer>) -> Self {
        WriteSpec {
            layout: None,
            subarray: None,
            fields,
            timestamps: None,
            cell_timestamps: false,
            delete_metadata: false,
            processed_conditions: Vec::new(),
            non_empty_domain: None,
            max_fragment_size: None,
            labels: Vec::new(),
            uncommitted: false,
        }
    }

    /// Also writes `labels` (named by the label) for the indexes the write
    /// covers on the label's dimension: see [`WriteSpec::labels`].
    pub fn with_label(mut self, labels: FieldBuffer) -> Self {
        self.labels.push(labels);
        self
    }

    /// The order of the cells given.
    pub fn with_layout(mut self, layout: ResultLayout) -> Self {
        self.layout = Some(layout);
        self
    }

    /// The rectangle a dense write covers.
    pub fn with_subarray(mut self, subarray: Subarray) -> Self {
        self.subarray = Some(subarray);
        self
    }

    /// The fragment's timestamp (both ends).
    pub fn at(mut self, t: u64) -> Self {
        self.timestamps = Some((t, t));
        self
    }

    /// The fragment's timestamp range (copies of consolidated fragments).
    pub fn between(mut self, t1: u64, t2: u64) -> Self {
        self.timestamps = Some((t1, t2));
        self
    }

    /// Every cell comes with its own timestamp (a `__timestamps` field in
    /// every part).
    pub fn with_cell_timestamps(mut self) -> Self {
        self.cell_timestamps = true;
        self
    }

    /// Every cell comes with its delete metadata (both fields in every
    /// part).
    pub fn with_delete_metadata(mut self) -> Self {
        self.delete_metadata = true;
        self
    }

    /// See [`WriteSpec::processed_conditions`].
    pub fn with_processed_conditions(mut self, markers: Vec<String>) -> Self {
        self.processed_conditions = markers;
        self
    }

    /// See [`WriteSpec::uncommitted`].
    pub fn uncommitted(mut self) -> Self {
        self.uncommitted = true;
        self
    }

    /// See [`WriteSpec::max_fragment_size`].
    pub fn with_max_fragment_size(mut self, bytes: u64) -> Self {
        self.max_fragment_size = Some(bytes);
        self
    }

    /// See [`WriteSpec::non_empty_domain`].
    pub(crate) fn recording(mut self, non_empty_domain: NDRange) -> Self {
        self.non_empty_domain = Some(non_empty_domain);
        self
    }
}

/// What a write committed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Written {
    /// The new fragment (the first, where the write made several).
    pub fragment: TimestampedName,
    /// Cells written (for dense writes, the subarray's).
    pub cells: u64,
    /// Tiles per field, every fragment's.
    pub tiles: u64,
    /// Every fragment written, in the global order: one, unless a
    /// [`WriteSpec::max_fragment_size`] split the write.
    pub fragments: Vec<TimestampedName>,
}

/// Milliseconds since the epoch, TileDB's timestamps.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Writes one fragment of the array at `dir` whose schema in force is
/// `schema` (`key` for encrypted arrays) from the spec's cells, and
/// commits it: a [`FragmentWriter`] of one part.
///
/// Label data ([`WriteSpec::labels`]) is checked whole, then written to
/// the labels' arrays, then the cells (TileDB's order; each fragment
/// commits on its own, so a failure between them leaves labels without
/// the cells they describe, as in TileDB).
pub fn write_fragment<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    schema: &SchemaEntry,
    key: Option<&[u8; 32]>,
    spec: &WriteSpec,
) -> Result<Written> {
    let stamped;
    let spec = if spec.labels.is_empty() {
        spec
    } else {
        // One stamp for the labels and the cells.
        let t = now_ms();
        let mut cells = WriteSpec {
            timestamps: Some(spec.timestamps.unwrap_or((t, t))),
            ..spec.clone()
        };
        crate::label::write_labels(storage, dir, &schema.schema, key, &cells)?;
        cells.labels.clear();
        stamped = cells;
        &stamped
    };
    let mut writer = FragmentWriter::new(storage, dir, schema, key, spec)?;
    if spec.fields.is_empty() {
        // The writer takes an empty spec as "parts to come"; one write of
        // nothing is refused as the cells' check refuses it.
        writer.submit(&[])?;
    }
    writer.finish()
}

/// Writes a file that must be new (a commit): never replaces another's.
fn write<S: WritableStorage + ?Sized>(storage: &S, key: &str, bytes: Vec<u8>) -> Result<()> {
    storage
        .create(key, Bytes::from(bytes))
        .map_err(|source| QueryError::Storage {
            file: key.to_owned(),
            source,
        })
}
