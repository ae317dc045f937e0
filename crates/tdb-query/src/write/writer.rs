//! One fragment written from one or more parts of cells.
//!
//! Row-major and column-major dense writes and unordered sparse writes
//! take their cells in one part: they are arranged (sorted) whole.
//! Global-order writes, dense or sparse, take any number of parts, each
//! continuing the global order of the one before (as TileDB's global-order
//! writer): whole tiles are built, filtered and uploaded as soon as their
//! cells are in, and fewer than a tile's cells wait for the next part. The
//! writer's memory is therefore a tile per field plus the tiles in flight,
//! whatever the write's size; the waiting tile is filtered chunk by chunk
//! as its cells come ([`ChunkedTile`]), so it holds a chunk of each part
//! instead (only pipelines that take a tile whole carry its cells).
//! Nothing is visible before [`FragmentWriter::finish`] writes the
//! fragment metadata and, last, the commit file; a writer dropped
//! unfinished, or one that failed, leaves no file behind.

use super::arrange::{self, Arrangement};
use super::chunked::{ChunkedTile, Done, Placed};
use super::dense_split::DenseSplit;
use super::files::{Built, FieldFiles};
use super::input::{self, Input};
use super::tiles::{build_tiles, FieldTiles};
use super::{now_ms, WriteSpec, Written};
use crate::{FieldBuffer, QueryError, Result, ResultLayout};
use tdb_format::{names, ArrayType, DataField, FormatVersion, TimestampedName};
use tdb_fragment::fragment_metadata::{Field, Footer, FragmentMetadata, WrittenShape};
use tdb_index::dense::InputOrder;
use tdb_index::order::{cmp_cells, cmp_coord_bytes, CellOrder};
use tdb_index::{DomainOps, RTree, DEFAULT_FANOUT};
use tdb_schema::{NDRange, SchemaEntry};
use tdb_storage::WritableStorage;

/// A fragment being written: [`FragmentWriter::submit`] each part of the
/// cells, then [`FragmentWriter::finish`] to commit it. With a
/// `max_fragment_size` a global-order write is several fragments, split
/// where the next tile would take one past it (see `Current`).
pub struct FragmentWriter<'a, S: WritableStorage + ?Sized> {
    entry: &'a SchemaEntry,
    key: Option<&'a [u8; 32]>,
    layout: ResultLayout,
    /// Where fragments go and what each records.
    target: Target<'a, S>,
    /// The fragment being filled.
    current: Current<'a>,
    /// Fragments filled before it (split writes): stored, not committed.
    stored: Vec<TimestampedName>,
    /// TileDB's `max_fragment_size`: the most bytes of filtered tiles, all
    /// fields', one fragment takes.
    max_fragment_size: Option<u64>,
    /// Dense writes with a `max_fragment_size`: where fragments end, and
    /// the tiles (with their cell counts) waiting for a rectangle's end.
    dense_split: Option<DenseSplit<(Vec<Built>, u64)>>,
    threads: usize,
    /// Dense writes: the rectangle, and for global order its cell count.
    subarray: Option<NDRange>,
    expected_cells: Option<u64>,
    /// Cells per tile: the capacity, or a dense tile's cells.
    tile_cells: usize,
    /// Global-order writes: fewer than a tile's cells, waiting for more
    /// (`carry_cells` counts them, whether carried or `chunked`).
    carry: Vec<FieldBuffer>,
    carry_cells: usize,
    /// Global-order writes: the tile a part leaves unfinished, filtered
    /// chunk by chunk as its cells come instead of carried (`None` where
    /// a field's pipeline takes its tile whole).
    chunked: Option<ChunkedTile<'a>>,
    /// Sparse global-order writes: the coordinates of the last cell given.
    last: Option<Vec<Vec<u8>>>,
    /// Tiles and cells written, every fragment's.
    tiles: u64,
    cells: u64,
    parts: u64,
    /// A dense write given in bands: its bands ([`dense_bands`]).
    bands: Option<Vec<NDRange>>,
    /// A part failed half way: the fragment cannot be finished.
    failed: bool,
}

/// What every fragment of one write shares: where it goes, its fields and
/// what its metadata records beyond its tiles.
struct Target<'a, S: WritableStorage + ?Sized> {
    storage: &'a S,
    dir: String,
    entry: &'a SchemaEntry,
    key: Option<&'a [u8; 32]>,
    /// Every fragment's timestamp range.
    timestamps: (u64, u64),
    /// Every fragment's footer as it starts.
    footer: Footer,
    /// The fields written, in [`input::check`]'s order (attributes, then
    /// dimensions): (field, var, nullable).
    fields: Vec<(Field, bool, bool)>,
    /// Dense writes: the non-empty domain recorded (the subarray, or what
    /// a dense consolidation records).
    domain: Option<NDRange>,
    /// Dense writes: a tile's cells (the footer's last tile count).
    dense_tile_cells: Option<u64>,
    /// Condition markers for the metadata (see `WriteSpec::processed_conditions`).
    processed_conditions: Vec<String>,
    /// See `WriteSpec::uncommitted`.
    uncommitted: bool,
}

/// The fragment a write is filling: its files, and what its metadata will
/// record of them.
struct Current<'a> {
    name: TimestampedName,
    frag_dir: String,
    /// One per written field, with the data file it fills.
    files: Vec<(Field, DataField, FieldFiles<'a>)>,
    tiles: u64,
    /// Sparse fragments: each tile's MBR.
    mbrs: Vec<NDRange>,
    last_tile_cells: u64,
    /// Its tiles' filtered bytes, every field's (TileDB's measure of a
    /// fragment's size for `max_fragment_size`).
    size: u64,
    /// Dense split writes: its own non-empty domain (else the write's).
    domain: Option<NDRange>,
}

impl<'a> Current<'a> {
    /// Its fields' files, in order.
    fn field_files(&mut self) -> Vec<&mut FieldFiles<'a>> {
        (self.files.iter_mut()).map(|(_, _, f)| f).collect()
    }
}

impl<'a, S: WritableStorage + ?Sized> Target<'a, S> {
    /// A new fragment, its files started.
    fn start(&self) -> Result<Current<'a>> {
        let (schema, footer) = (&self.entry.schema, &self.footer);
        let name = TimestampedName::generate(
            self.timestamps.0,
            self.timestamps.1,
            Some(FormatVersion::WRITTEN),
        )
        .map_err(|e| QueryError::invalid(e.to_string()))?;
        let frag_dir = tdb_storage::join(
            &tdb_storage::join(&self.dir, names::FRAGMENTS_DIR),
            &name.to_string(),
        );
        let mut files = Vec::with_capacity(self.fields.len());
        for &(field, var, nullable) in &self.fields {
            let (Some(idx), Some(data_field)) =
                (footer.field_index(field), footer.data_field(field, schema))
            else {
                return Err(QueryError::invalid(format!("{field:?}: not in the footer")));
            };
            let f = FieldFiles::open(self.storage, &frag_dir, idx, &data_field, var, nullable)?;
            files.push((field, data_field, f));
        }
        Ok(Current {
            name,
            frag_dir,
            files,
            tiles: 0,
            mbrs: Vec::new(),
            last_tile_cells: 0,
            size: 0,
            domain: None,
        })
    }

    /// Stores fragment `cur`'s files and metadata: complete, but not
    /// committed (no reader looks at it yet).
    fn store(&self, cur: Current<'a>) -> Result<TimestampedName> {
        let s = &self.entry.schema;
        let domain = match cur.domain.as_ref().or(self.domain.as_ref()) {
            Some(sub) => Some(sub.clone()),
            None if cur.mbrs.is_empty() => None,
            None => {
                let ops = DomainOps::new(&s.domain)?;
                let mut d = NDRange::new();
                for m in &cur.mbrs {
                    ops.expand(&mut d, m);
                }
                Some(d)
            }
        };
        let rtree = match self.dense_tile_cells {
            Some(_) => RTree::empty(DEFAULT_FANOUT),
            None => RTree::build(&s.domain, cur.mbrs, DEFAULT_FANOUT)?,
        };
        let shape = WrittenShape {
            non_empty_domain: domain,
            tile_num: cur.tiles,
            last_tile_cell_num: self.dense_tile_cells.unwrap_or(cur.last_tile_cells),
        };
        let fields = (cur.files.into_iter())
            .map(|(_, _, files)| files.finish())
            .collect::<Result<Vec<_>>>()?;
        let mut meta = FragmentMetadata::written(
            s,
            cur.name.clone(),
            self.footer.clone(),
            shape,
            &rtree,
            fields,
        );
        meta.set_processed_conditions(self.processed_conditions.clone());
        let bytes = meta.write_file(s, self.key)?;
        super::write(
            self.storage,
            &tdb_storage::join(&cur.frag_dir, names::FRAGMENT_METADATA_FILE),
            bytes,
        )?;
        Ok(cur.name)
    }

    /// Commits fragments `names`, all at once: from then on readers see
    /// them (unless the write is left for its caller to commit).
    fn commit(&self, names: &[TimestampedName]) -> Result<()> {
        if self.uncommitted {
            return Ok(());
        }
        tdb_fragment::write_fragment_commits(
            self.storage,
            &self.dir,
            names,
            FormatVersion::WRITTEN,
        )?;
        for name in names {
            tracing::info!(array = %self.dir, fragment = %name, "fragment committed");
        }
        Ok(())
    }
}

/// The bands of whole space tiles a dense write of `sub` may be given in
/// ([`FragmentWriter::submit_band`]): `sub` cut at every space tile
/// boundary along the dimension the tile order varies slowest (the first
/// for row-major tiles, the last for col-major), in the tile order.
pub fn dense_bands(schema: &tdb_schema::ArraySchema, sub: &NDRange) -> Result<Vec<NDRange>> {
    use tdb_index::dense::{int_range, int_range_of, origin_and_extent, tile_of};
    let dims = &schema.domain.dimensions;
    let d = match schema.tile_order {
        tdb_format::Layout::ColMajor => dims.len().saturating_sub(1),
        _ => 0,
    };
    let not_banded = || QueryError::invalid("a dense subarray of integer dimensions with tiles");
    let (dim, r) = dims.get(d).zip(sub.get(d)).ok_or_else(not_banded)?;
    let ((lo, hi), (origin, extent)) = int_range(dim, r)
        .zip(origin_and_extent(dim))
        .ok_or_else(not_banded)?;
    let mut bands = Vec::new();
    let mut from = lo;
    while from <= hi {
        // The last value of `from`'s space tile.
        let end = tile_of(from, origin, extent)
            .and_then(|t| {
                t.checked_add(1)?
                    .checked_mul(extent)?
                    .checked_add(origin)?
                    .checked_sub(1)
            })
            .ok_or_else(not_banded)?
            .min(hi);
        let mut band = sub.clone();
        if let Some(slot) = band.get_mut(d) {
            *slot = int_range_of(dim, from, end).ok_or_else(not_banded)?;
        }
        bands.push(band);
        from = end.checked_add(1).ok_or_else(not_banded)?;
    }
    Ok(bands)
}

impl<'a, S: WritableStorage + ?Sized> FragmentWriter<'a, S> {
    /// Starts a fragment of the array at `dir` whose schema in force is
    /// `entry` (`key` for encrypted arrays), laid out as `spec` says; the
    /// spec's fields, when it has any, are the first part.
    pub fn new(
        storage: &'a S,
        dir: &str,
        entry: &'a SchemaEntry,
        key: Option<&'a [u8; 32]>,
        spec: &WriteSpec,
    ) -> Result<Self> {
        let s = &entry.schema;
        let dense = s.array_type == ArrayType::Dense;
        if let Some(l) = spec.labels.first() {
            return Err(QueryError::Label {
                label: l.name.clone(),
                reason: "label data goes with writes of one part (`write_fragment`, \
                         `Array::write`), not a fragment writer"
                    .into(),
            });
        }
        let (t1, t2) = spec.timestamps.unwrap_or_else(|| {
            let t = now_ms();
            (t, t)
        });
        if t1 > t2 {
            return Err(QueryError::invalid(format!(
                "timestamp range {t1}..{t2} is reversed"
            )));
        }
        let layout = spec.layout.unwrap_or(if dense {
            ResultLayout::RowMajor
        } else {
            ResultLayout::Unordered
        });
        let (subarray, expected_cells, tile_cells) = if dense {
            if layout == ResultLayout::Unordered {
                return Err(QueryError::invalid(
                    "a dense write takes row-major, col-major or global-order cells, not unordered ones",
                ));
            }
            // TileDB sizes a dense tile by a product of the extents that
            // wraps at the dimensions' width (`tiledb_cell_num_per_tile`)
            // and places cells by the true strides: past the wrapped size
            // it writes out of bounds. tdb reads such tiles, and does not
            // write them.
            let (ours, theirs) = (
                tdb_index::dense::cell_num_per_tile(&s.domain),
                tdb_index::dense::tiledb_cell_num_per_tile(&s.domain),
            );
            if ours != theirs {
                return Err(QueryError::Unsupported(format!(
                    "dense writes where TileDB counts {} cells a tile and the tile extents make {}: \
                     its product of the extents wraps at the dimensions' type",
                    theirs.unwrap_or(0),
                    ours.unwrap_or(0)
                )));
            }
            // A merge (recording its union) writes whole tiles.
            let merge = spec.non_empty_domain.is_some();
            let sub = arrange::dense_subarray(s, spec.subarray.as_ref(), merge)?;
            let grid = arrange::write_grid(s, &sub, InputOrder::RowMajor)?;
            if layout == ResultLayout::GlobalOrder && !grid.tile_aligned() {
                return Err(QueryError::invalid(
                    "a global-order dense write must cover whole space tiles: its subarray must start and end on tile bounds (as in TileDB)",
                ));
            }
            let expected = grid.input_cells().ok_or_else(|| {
                QueryError::invalid("the subarray holds more cells than can be counted")
            })?;
            if let Some(ned) = &spec.non_empty_domain {
                let ops = DomainOps::new(&s.domain)?;
                if layout != ResultLayout::GlobalOrder || !ops.covers(&sub, ned) {
                    return Err(QueryError::invalid(
                        "a recorded non-empty domain needs a global-order write covering it",
                    ));
                }
            }
            (Some(sub), Some(expected), grid.tile_cells())
        } else {
            if !matches!(layout, ResultLayout::Unordered | ResultLayout::GlobalOrder) {
                return Err(QueryError::invalid(format!(
                    "a sparse write takes unordered or global-order cells, not {}",
                    layout.name()
                )));
            }
            if spec.subarray.is_some() {
                return Err(QueryError::invalid(
                    "a sparse write takes coordinates, not a subarray",
                ));
            }
            let capacity = usize::try_from(s.capacity.max(1)).unwrap_or(usize::MAX);
            (None, None, capacity)
        };
        // Per-cell timestamps and delete metadata (a fragment as
        // consolidation writes it) come with the first part, sparse only.
        let given = |field: Field| {
            spec.fields
                .iter()
                .any(|f| Field::per_cell(&f.name) == Some(field))
        };
        let timestamps = !dense && (spec.cell_timestamps || given(Field::Timestamps));
        let delete_meta = !dense
            && (spec.delete_metadata
                || given(Field::DeleteTimestamps)
                || given(Field::DeleteConditionIndex));
        let footer = Footer::new_written(s, &entry.name, timestamps, delete_meta);
        let mut fields: Vec<(Field, bool, bool)> = s
            .attributes
            .iter()
            .enumerate()
            .map(|(i, a)| (Field::Attribute(i), a.is_var(), a.nullable))
            .collect();
        if !dense {
            fields.extend(
                s.domain
                    .dimensions
                    .iter()
                    .enumerate()
                    .map(|(d, dim)| (Field::Dimension(d), dim.is_var(), false)),
            );
        }
        if timestamps {
            fields.push((Field::Timestamps, false, false));
        }
        if delete_meta {
            fields.push((Field::DeleteTimestamps, false, false));
            fields.push((Field::DeleteConditionIndex, false, false));
        }
        if spec.max_fragment_size.is_some() && layout != ResultLayout::GlobalOrder {
            return Err(QueryError::invalid(format!(
                "a maximum fragment size applies to global-order writes, not {} ones (as in TileDB)",
                layout.name()
            )));
        }
        let dense_split = match (&subarray, spec.max_fragment_size) {
            (Some(sub), Some(max)) => {
                let recorded = spec.non_empty_domain.as_ref().unwrap_or(sub);
                Some(DenseSplit::new(s, sub, recorded, max)?)
            }
            _ => None,
        };
        let target = Target {
            storage,
            dir: dir.to_owned(),
            entry,
            key,
            timestamps: (t1, t2),
            footer,
            fields,
            domain: spec.non_empty_domain.clone().or_else(|| subarray.clone()),
            dense_tile_cells: dense.then_some(tile_cells.max(1) as u64),
            processed_conditions: spec.processed_conditions.clone(),
            uncommitted: spec.uncommitted,
        };
        let current = target.start()?;
        let chunked = match layout == ResultLayout::GlobalOrder {
            true => {
                let fields: Vec<(DataField, usize)> = (current.files.iter())
                    .map(|(_, data_field, files)| (data_field.clone(), files.idx))
                    .collect();
                ChunkedTile::new(s, &fields, tile_cells.max(1), key)?
            }
            false => None,
        };
        let mut w = FragmentWriter {
            entry,
            key,
            layout,
            target,
            current,
            stored: Vec::new(),
            max_fragment_size: spec.max_fragment_size,
            dense_split,
            threads: crate::threads(),
            subarray,
            expected_cells,
            tile_cells: tile_cells.max(1),
            carry: Vec::new(),
            carry_cells: 0,
            chunked,
            last: None,
            tiles: 0,
            cells: 0,
            parts: 0,
            bands: None,
            failed: false,
        };
        if !spec.fields.is_empty() {
            w.submit(&spec.fields)?;
        }
        Ok(w)
    }

    /// The fragment this writer makes (the first, where it makes several).
    pub fn fragment(&self) -> &TimestampedName {
        self.stored.first().unwrap_or(&self.current.name)
    }

    /// Adds the next part of the cells. Only global-order writes take more
    /// than one; each must continue the global order where the last ended.
    /// A part that is refused (bad input) changes nothing; one that fails
    /// while writing leaves a writer that can only be dropped.
    pub fn submit(&mut self, fields: &[FieldBuffer]) -> Result<()> {
        if self.failed {
            return Err(QueryError::invalid(
                "an earlier part of this write failed: start the write again",
            ));
        }
        if self.parts > 0 && self.layout != ResultLayout::GlobalOrder {
            return Err(QueryError::invalid(format!(
                "only global-order writes take several parts; this one is {}",
                self.layout.name()
            )));
        }
        let s = &self.entry.schema;
        let input = self.part_input(fields)?;
        if self.layout == ResultLayout::GlobalOrder && s.array_type == ArrayType::Sparse {
            self.check_order(&input)?;
        }
        if let Some(want) = self.expected_cells {
            let total = (self.cells)
                .saturating_add(self.carry_cells as u64)
                .saturating_add(input.cells as u64);
            if total > want || (self.layout != ResultLayout::GlobalOrder && total != want) {
                return Err(QueryError::bad_input(
                    input.fields.first().map_or("", |f| f.buf.name.as_str()),
                    format!("{total} cells given, the subarray holds {want}"),
                ));
            }
        }
        self.parts = self.parts.saturating_add(1);
        let done = if self.layout == ResultLayout::GlobalOrder {
            self.stream(&input)
        } else {
            self.whole(&input)
        };
        if done.is_err() {
            self.failed = true;
        }
        done
    }

    /// `fields` checked against the schema and the fragment's files.
    fn part_input<'f>(&self, fields: &'f [FieldBuffer]) -> Result<Input<'f>> {
        let input = input::check(&self.entry.schema, fields)?;
        if input.fields.len() != self.current.files.len() {
            return Err(QueryError::invalid(format!(
                "{} fields given, the fragment has {} (per-cell timestamps and delete metadata come with every part or none)",
                input.fields.len(),
                self.current.files.len()
            )));
        }
        Ok(input)
    }

    /// Adds the next band of a dense row- or col-major write given in
    /// parts ([`dense_bands`] of its subarray, in order), its cells in the
    /// write's layout over `band`. A band is whole space tiles along the
    /// dimension the tile order varies slowest, so its tiles are the next
    /// in the fragment and hold what one write of the whole subarray puts
    /// there (zeros with validity 0 past the subarray, tile metadata of
    /// the cells given): a copy of a large dense fragment holds one band.
    pub fn submit_band(&mut self, band: &NDRange, fields: &[FieldBuffer]) -> Result<()> {
        if self.failed {
            return Err(QueryError::invalid(
                "an earlier part of this write failed: start the write again",
            ));
        }
        let s = &self.entry.schema;
        let (Some(sub), true, None) = (
            self.subarray.as_ref(),
            matches!(self.layout, ResultLayout::RowMajor | ResultLayout::ColMajor),
            self.dense_split.as_ref(),
        ) else {
            return Err(QueryError::invalid(
                "bands are parts of a dense row- or col-major write without a maximum fragment size",
            ));
        };
        if self.bands.is_none() {
            if self.parts > 0 {
                return Err(QueryError::invalid("a write given whole takes no bands"));
            }
            self.bands = Some(dense_bands(s, sub)?);
        }
        let at = usize::try_from(self.parts).unwrap_or(usize::MAX);
        if self.bands.as_ref().and_then(|b| b.get(at)) != Some(band) {
            return Err(QueryError::invalid(format!(
                "band {at} of the write is not {band:?}: bands come whole and in order"
            )));
        }
        let input = self.part_input(fields)?;
        let arrangement = Arrangement::dense(s, self.layout, band)?;
        self.parts = self.parts.saturating_add(1);
        let done = self.push_tiles(&input, &arrangement);
        if done.is_err() {
            self.failed = true;
        }
        done?;
        self.cells = self.cells.saturating_add(input.cells as u64);
        Ok(())
    }

    /// A part that is the whole write: arranged (sorted) whole.
    fn whole(&mut self, input: &Input<'_>) -> Result<()> {
        let s = &self.entry.schema;
        let arrangement = match &self.subarray {
            Some(sub) => Arrangement::dense(s, self.layout, sub)?,
            None => Arrangement::sparse(s, input)?,
        };
        self.push_tiles(input, &arrangement)?;
        self.cells = input.cells as u64;
        Ok(())
    }

    /// A global-order part: whole tiles now, the rest carried.
    fn stream(&mut self, input: &Input<'_>) -> Result<()> {
        if self.chunked.is_some() {
            return self.stream_chunked(input);
        }
        let tc = self.tile_cells;
        let mut start = 0;
        if self.carry_cells > 0 {
            start = tc.saturating_sub(self.carry_cells).min(input.cells);
            self.carry_more(input, 0..start);
            if self.carry_cells == tc {
                let carry = std::mem::take(&mut self.carry);
                let carried = input::check(&self.entry.schema, &carry)?;
                self.push_tiles(
                    &carried,
                    &Arrangement::Run {
                        start: 0,
                        end: tc,
                        tile_cells: tc,
                    },
                )?;
                self.cells = self.cells.saturating_add(tc as u64);
                self.carry = carry;
                self.carry.iter_mut().for_each(FieldBuffer::clear);
                self.carry_cells = 0;
            }
        }
        let end = self.push_whole_tiles(input, start)?;
        self.carry_more(input, end..input.cells);
        Ok(())
    }

    /// The whole tiles of `input` from cell `start` on, built on the pool;
    /// where they end.
    fn push_whole_tiles(&mut self, input: &Input<'_>, start: usize) -> Result<usize> {
        let tc = self.tile_cells;
        let tiles = (input.cells.saturating_sub(start))
            .checked_div(tc)
            .unwrap_or(0);
        let end = start.saturating_add(tiles.saturating_mul(tc));
        if end > start {
            self.push_tiles(
                input,
                &Arrangement::Run {
                    start,
                    end,
                    tile_cells: tc,
                },
            )?;
            self.cells = self.cells.saturating_add(end.saturating_sub(start) as u64);
        }
        Ok(end)
    }

    /// A global-order part whose unfinished tiles are filtered chunk by
    /// chunk: the cells finishing the tile an earlier part began, whole
    /// tiles on the pool, and the rest begun.
    fn stream_chunked(&mut self, input: &Input<'_>) -> Result<()> {
        let tc = self.tile_cells;
        let mut start = 0;
        if self.carry_cells > 0 {
            start = tc.saturating_sub(self.carry_cells).min(input.cells);
            self.feed_chunked(input, 0..start)?;
        }
        let end = self.push_whole_tiles(input, start)?;
        self.feed_chunked(input, end..input.cells)
    }

    /// Feeds `cells` of `input` to the unfinished tile; places it once
    /// whole.
    fn feed_chunked(&mut self, input: &Input<'_>, cells: std::ops::Range<usize>) -> Result<()> {
        if cells.is_empty() {
            return Ok(());
        }
        let fragment = self.current.name.to_string();
        let files = (self.direct()).then(|| self.current.field_files());
        let Some(chunked) = &mut self.chunked else {
            return Err(QueryError::invalid("no tile to feed"));
        };
        let done = chunked.feed(input, cells, (self.tiles, &fragment), files)?;
        self.carry_cells = chunked.fed();
        match done {
            None => Ok(()),
            Some(done) => self.place_chunked(done),
        }
    }

    /// Without a maximum fragment size every tile goes to the fragment
    /// being filled: its chunks are uploaded as they are filtered.
    fn direct(&self) -> bool {
        self.dense_split.is_none() && self.max_fragment_size.is_none()
    }

    /// Places a tile filtered chunk by chunk.
    fn place_chunked(&mut self, done: Done) -> Result<()> {
        match done.tile {
            Placed::Built(built) => self.place(built, done.mbr, done.cells)?,
            Placed::Uploaded(size) => {
                let cur = &mut self.current;
                cur.mbrs.extend(done.mbr);
                cur.tiles = cur.tiles.saturating_add(1);
                cur.size = cur.size.saturating_add(size);
                cur.last_tile_cells = done.cells;
                self.tiles = self.tiles.saturating_add(1);
            }
        }
        self.cells = self.cells.saturating_add(done.cells);
        Ok(())
    }

    /// Copies `cells` of `input` to the carry.
    fn carry_more(&mut self, input: &Input<'_>, cells: std::ops::Range<usize>) {
        if cells.is_empty() {
            return;
        }
        if self.carry.is_empty() {
            self.carry = input.fields.iter().map(|f| f.buf.slice(0..0)).collect();
        }
        for (c, f) in self.carry.iter_mut().zip(&input.fields) {
            c.extend_from(f.buf, cells.clone());
        }
        self.carry_cells = self.carry_cells.saturating_add(cells.len());
    }

    /// Builds, filters and uploads `arrangement`'s tiles of every field.
    fn push_tiles(&mut self, input: &Input<'_>, arrangement: &Arrangement) -> Result<()> {
        let entry = self.entry;
        let s = &entry.schema;
        let files: Vec<(DataField, usize)> = (self.current.files.iter())
            .map(|(_, d, f)| (d.clone(), f.idx))
            .collect();
        if input.fields.len() != files.len() {
            return Err(QueryError::invalid(
                "fields out of step with the fragment's files",
            ));
        }
        let mut builders = Vec::with_capacity(files.len());
        for ((f, (field, _, _)), (data_field, idx)) in
            input.fields.iter().zip(&self.current.files).zip(&files)
        {
            if f.field != *field {
                return Err(QueryError::invalid(format!(
                    "{}: fields out of step with the fragment's files",
                    f.buf.name
                )));
            }
            builders.push(FieldTiles::new(s, f, data_field, *idx, self.key)?);
        }
        let mbrs = match arrangement {
            Arrangement::Sparse { mbrs, .. } => mbrs.clone(),
            Arrangement::Run {
                start,
                end,
                tile_cells,
            } if s.array_type == ArrayType::Sparse => {
                let ops = DomainOps::new(&s.domain)?;
                (*start..*end)
                    .step_by((*tile_cells).max(1))
                    .map(|a| arrange::mbr(&ops, input, a..a.saturating_add(*tile_cells).min(*end)))
                    .collect()
            }
            _ => Vec::new(),
        };
        let fragment = self.current.name.to_string();
        let threads = self.threads;
        build_tiles(
            &builders,
            arrangement,
            (self.tiles, &fragment),
            threads,
            |t, built| {
                let mbr = mbrs.get(t as usize).cloned();
                self.place(built, mbr, arrangement.tile_cell_num(t))
            },
        )
    }

    /// Appends one tile (every field's) to the fragment being filled, or
    /// where it would take that one past the maximum fragment size, stores
    /// that one and starts the next with it, as TileDB's global-order writer
    /// does (`identify_fragment_tile_boundaries`).
    fn place(&mut self, built: Vec<Built>, mbr: Option<NDRange>, cells: u64) -> Result<()> {
        let size = built.iter().fold(0u64, |acc, b| {
            (acc.saturating_add(b.fixed.len() as u64))
                .saturating_add(b.var.len() as u64)
                .saturating_add(b.validity.len() as u64)
        });
        if let Some(split) = &mut self.dense_split {
            // Dense: fragments are rectangles of tiles (`dense_split`).
            if split.before(size)?.close {
                let end = split.end.unwrap_or(split.start);
                let domain = split.domain(&self.entry.schema, split.start, end)?;
                split.closed();
                let next = self.target.start()?;
                let mut full = std::mem::replace(&mut self.current, next);
                full.domain = Some(domain);
                self.stored.push(self.target.store(full)?);
            }
            let ready = split.push((built, cells), size);
            for ((built, cells), size) in ready {
                self.append(built, None, cells, size)?;
            }
            self.tiles = self.tiles.saturating_add(1);
            return Ok(());
        }
        if let Some(max) = self.max_fragment_size {
            if size > max {
                return Err(QueryError::invalid(format!(
                    "the maximum fragment size ({max} bytes) is too small to write a single tile \
                     ({size} bytes filtered, every field's): give at least {size}"
                )));
            }
            if self.current.tiles > 0 && self.current.size.saturating_add(size) > max {
                let next = self.target.start()?;
                let full = std::mem::replace(&mut self.current, next);
                self.stored.push(self.target.store(full)?);
            }
        }
        self.append(built, mbr, cells, size)?;
        self.tiles = self.tiles.saturating_add(1);
        Ok(())
    }

    /// Writes one tile (every field's) to the fragment being filled.
    fn append(
        &mut self,
        built: Vec<Built>,
        mbr: Option<NDRange>,
        cells: u64,
        size: u64,
    ) -> Result<()> {
        let cur = &mut self.current;
        for ((_, _, files), b) in cur.files.iter_mut().zip(built) {
            files.push(b)?;
        }
        cur.mbrs.extend(mbr);
        cur.tiles = cur.tiles.saturating_add(1);
        cur.size = cur.size.saturating_add(size);
        cur.last_tile_cells = cells;
        Ok(())
    }

    /// Sparse global order: every cell after the one before it (after the
    /// previous part's last), strictly where duplicates are not allowed.
    fn check_order(&mut self, input: &Input<'_>) -> Result<()> {
        const PREVIOUS: usize = usize::MAX;
        let s = &self.entry.schema;
        let ops = DomainOps::new(&s.domain)?;
        let n = ops.dims().len();
        let dims: Vec<_> = (0..n).filter_map(|d| input.dim(d)).collect();
        if dims.len() != n || input.cells == 0 {
            return Ok(());
        }
        let last = self.last.take();
        let coord = |i: usize, d: usize| -> &[u8] {
            match (&last, i) {
                (Some(l), PREVIOUS) => l.get(d).map_or(&[], Vec::as_slice),
                _ => dims.get(d).map_or(&[], |f| f.cell(i)),
            }
        };
        let name = dims.first().map_or("", |f| f.buf.name.as_str());
        let kind = CellOrder::Global {
            tile_order: s.tile_order,
            cell_order: s.cell_order,
        };
        let first = last.as_ref().map(|_| (PREVIOUS, 0));
        let bad = first
            .into_iter()
            .chain((0..input.cells).zip(1..input.cells))
            .map(|(a, b)| (a, b, cmp_cells(&s.domain, ops.dims(), kind, &coord, a, b)))
            .find(|&(a, b, o)| {
                // Duplicates are equal bytes (TileDB's `memcmp`), not
                // values: -0.0 follows 0.0.
                let same = || cmp_coord_bytes(n, &coord, a, b).is_eq();
                o.is_gt() || (o.is_eq() && !s.allows_dups && !input.has_timestamps() && same())
            });
        if let Some((a, b, o)) = bad {
            let which = |i: usize| match i {
                PREVIOUS => "the previous part's last cell".to_owned(),
                i => format!("cell {i}"),
            };
            let err = if o.is_gt() {
                QueryError::bad_input(
                    name,
                    format!(
                        "{} comes before {} in the global order the write says it keeps",
                        which(b),
                        which(a)
                    ),
                )
            } else if a == PREVIOUS {
                QueryError::bad_input(
                    name,
                    "cell 0 has the coordinates of the previous part's last cell and the array does not allow duplicates",
                )
            } else {
                arrange::duplicate(s, input, a, b)
            };
            self.last = last;
            return Err(err);
        }
        self.last = Some(
            dims.iter()
                .map(|f| f.cell(input.cells.saturating_sub(1)).to_vec())
                .collect(),
        );
        Ok(())
    }

    /// Writes the last tile, the fragment metadata and, last, the commit:
    /// from then on readers see the fragment.
    pub fn finish(mut self) -> Result<Written> {
        if self.failed {
            return Err(QueryError::invalid(
                "an earlier part of this write failed: start the write again",
            ));
        }
        let s = &self.entry.schema;
        let dense = s.array_type == ArrayType::Dense;
        if self.carry_cells > 0 && !dense && self.chunked.is_some() {
            // The tile was begun for the files or for `place` (with a
            // maximum fragment size): it ends the same way. TileDB's
            // global-order writer puts the last, partial tile in the
            // fragment being filled whatever its size.
            let fragment = self.current.name.to_string();
            let files = (self.direct()).then(|| self.current.field_files());
            let done = match &mut self.chunked {
                Some(chunked) => chunked.end((self.tiles, &fragment), files)?,
                None => return Err(QueryError::invalid("no tile to end")),
            };
            self.max_fragment_size = None;
            self.carry_cells = 0;
            self.place_chunked(done)?;
        }
        if self.carry_cells > 0 && !dense {
            let carry = std::mem::take(&mut self.carry);
            let carried = input::check(s, &carry)?;
            let n = self.carry_cells;
            // TileDB's global-order writer puts the last, partial tile in
            // the fragment being filled whatever its size.
            self.max_fragment_size = None;
            self.push_tiles(
                &carried,
                &Arrangement::Run {
                    start: 0,
                    end: n,
                    tile_cells: self.tile_cells,
                },
            )?;
            self.cells = self.cells.saturating_add(n as u64);
            self.carry_cells = 0;
        }
        if let Some(want) = self.expected_cells {
            let given = self.cells.saturating_add(self.carry_cells as u64);
            if given != want {
                return Err(QueryError::invalid(format!(
                    "{given} cells written, the subarray holds {want}: a dense write fills its whole subarray"
                )));
            }
        }
        if let Some(split) = &self.dense_split {
            // The last tile always ends a rectangle.
            if !split.pending.is_empty() || split.end != Some(split.next) {
                return Err(QueryError::invalid(
                    "a dense split write ended inside a rectangle of tiles",
                ));
            }
            self.current.domain = Some(split.domain(s, split.start, split.next)?);
        }
        let mut fragments = self.stored;
        fragments.push(self.target.store(self.current)?);
        // The commits, last: the fragments exist for readers from here on.
        self.target.commit(&fragments)?;
        let first = fragments.first().cloned();
        Ok(Written {
            fragment: first.ok_or_else(|| QueryError::invalid("no fragment written"))?,
            cells: self.cells,
            tiles: self.tiles,
            fragments,
        })
    }
}
