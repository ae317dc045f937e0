//! One fragment written from one or more parts of cells.
//!
//! Row-major and column-major dense writes and unordered sparse writes
//! take their cells in one part: they are arranged (sorted) whole.
//! Global-order writes, dense or sparse, take any number of parts, each
//! continuing the global order of the one before (as TileDB's global-order
//! writer): whole tiles are built, filtered and uploaded as soon as their
//! cells are in, and fewer than a tile's cells wait for the next part. The
//! writer's memory is therefore a tile per field plus the tiles in flight,
//! whatever the write's size. Nothing is visible before [`FragmentWriter::finish`]
//! writes the fragment metadata and, last, the commit file; a writer
//! dropped unfinished, or one that failed, leaves no file behind.

use super::arrange::{self, Arrangement};
use super::files::FieldFiles;
use super::input::{self, Input};
use super::tiles::field_tiles;
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
/// cells, then [`FragmentWriter::finish`] to commit it.
pub struct FragmentWriter<'a, S: WritableStorage + ?Sized> {
    storage: &'a S,
    dir: String,
    entry: &'a SchemaEntry,
    key: Option<&'a [u8; 32]>,
    layout: ResultLayout,
    name: TimestampedName,
    frag_dir: String,
    footer: Footer,
    /// One per written field, in [`input::check`]'s order (attributes,
    /// then dimensions), with the data file it fills.
    files: Vec<(Field, DataField, FieldFiles<'a>)>,
    threads: usize,
    /// Dense writes: the rectangle, and for global order its cell count.
    subarray: Option<NDRange>,
    /// What the fragment records as its non-empty domain, when not the
    /// subarray (dense consolidation).
    recorded: Option<NDRange>,
    /// Condition markers for the metadata (see `WriteSpec::processed_conditions`).
    processed_conditions: Vec<String>,
    expected_cells: Option<u64>,
    /// Cells per tile: the capacity, or a dense tile's cells.
    tile_cells: usize,
    /// Global-order writes: fewer than a tile's cells, waiting for more.
    carry: Vec<FieldBuffer>,
    carry_cells: usize,
    /// Sparse global-order writes: the coordinates of the last cell given.
    last: Option<Vec<Vec<u8>>>,
    tiles: u64,
    cells: u64,
    mbrs: Vec<NDRange>,
    last_tile_cells: u64,
    parts: u64,
    /// A part failed half way: the fragment cannot be finished.
    failed: bool,
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
        let name = TimestampedName::generate(t1, t2, Some(FormatVersion::WRITTEN))
            .map_err(|e| QueryError::invalid(e.to_string()))?;
        let frag_name = name.to_string();
        let frag_dir = tdb_storage::join(&tdb_storage::join(dir, names::FRAGMENTS_DIR), &frag_name);
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
        let mut written: Vec<(Field, bool, bool)> = s
            .attributes
            .iter()
            .enumerate()
            .map(|(i, a)| (Field::Attribute(i), a.is_var(), a.nullable))
            .collect();
        if !dense {
            written.extend(
                s.domain
                    .dimensions
                    .iter()
                    .enumerate()
                    .map(|(d, dim)| (Field::Dimension(d), dim.is_var(), false)),
            );
        }
        if timestamps {
            written.push((Field::Timestamps, false, false));
        }
        if delete_meta {
            written.push((Field::DeleteTimestamps, false, false));
            written.push((Field::DeleteConditionIndex, false, false));
        }
        let mut files = Vec::with_capacity(written.len());
        for (field, var, nullable) in written {
            let (Some(idx), Some(data_field)) =
                (footer.field_index(field), footer.data_field(field, s))
            else {
                return Err(QueryError::invalid(format!("{field:?}: not in the footer")));
            };
            let f = FieldFiles::open(storage, &frag_dir, idx, &data_field, var, nullable)?;
            files.push((field, data_field, f));
        }
        let mut w = FragmentWriter {
            storage,
            dir: dir.to_owned(),
            entry,
            key,
            layout,
            name,
            frag_dir,
            footer,
            files,
            threads: crate::threads(),
            subarray,
            recorded: spec.non_empty_domain.clone(),
            processed_conditions: spec.processed_conditions.clone(),
            expected_cells,
            tile_cells: tile_cells.max(1),
            carry: Vec::new(),
            carry_cells: 0,
            last: None,
            tiles: 0,
            cells: 0,
            mbrs: Vec::new(),
            last_tile_cells: 0,
            parts: 0,
            failed: false,
        };
        if !spec.fields.is_empty() {
            w.submit(&spec.fields)?;
        }
        Ok(w)
    }

    /// The fragment this writer makes.
    pub fn fragment(&self) -> &TimestampedName {
        &self.name
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
        let input = input::check(s, fields)?;
        if input.fields.len() != self.files.len() {
            return Err(QueryError::invalid(format!(
                "{} fields given, the fragment has {} (per-cell timestamps and delete metadata come with every part or none)",
                input.fields.len(),
                self.files.len()
            )));
        }
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

    /// A part that is the whole write: arranged (sorted) whole.
    fn whole(&mut self, input: &Input<'_>) -> Result<()> {
        let s = &self.entry.schema;
        let arrangement = match &self.subarray {
            Some(sub) => Arrangement::dense(s, self.layout, sub)?,
            None => Arrangement::sparse(s, input)?,
        };
        self.push_tiles(input, &arrangement)?;
        if let Arrangement::Sparse { mbrs, .. } = arrangement {
            self.mbrs = mbrs;
        }
        self.cells = input.cells as u64;
        Ok(())
    }

    /// A global-order part: whole tiles now, the rest carried.
    fn stream(&mut self, input: &Input<'_>) -> Result<()> {
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
        let tiles = input
            .cells
            .saturating_sub(start)
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
        self.carry_more(input, end..input.cells);
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
        let s = &self.entry.schema;
        let frag_name = self.name.to_string();
        for (f, (field, data_field, files)) in input.fields.iter().zip(&mut self.files) {
            if f.field != *field {
                return Err(QueryError::invalid(format!(
                    "{}: fields out of step with the fragment's files",
                    f.buf.name
                )));
            }
            field_tiles(
                s,
                f,
                data_field,
                arrangement,
                self.key,
                &frag_name,
                self.tiles,
                self.threads,
                files,
            )?;
        }
        let n = arrangement.tile_num();
        if let Arrangement::Run {
            start,
            end,
            tile_cells,
        } = *arrangement
        {
            if s.array_type == ArrayType::Sparse {
                let ops = DomainOps::new(&s.domain)?;
                for a in (start..end).step_by(tile_cells.max(1)) {
                    let b = a.saturating_add(tile_cells).min(end);
                    self.mbrs.push(arrange::mbr(&ops, input, a..b));
                }
            }
        }
        self.tiles = self.tiles.saturating_add(n);
        self.last_tile_cells = arrangement.last_tile_cell_num();
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
        if self.carry_cells > 0 && !dense {
            let carry = std::mem::take(&mut self.carry);
            let carried = input::check(s, &carry)?;
            let n = self.carry_cells;
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
        let tile_num = self.tiles;
        let domain = match self.recorded.as_ref().or(self.subarray.as_ref()) {
            Some(sub) => Some(sub.clone()),
            None if self.mbrs.is_empty() => None,
            None => {
                let ops = DomainOps::new(&s.domain)?;
                let mut d = NDRange::new();
                for m in &self.mbrs {
                    ops.expand(&mut d, m);
                }
                Some(d)
            }
        };
        let rtree = if dense {
            RTree::empty(DEFAULT_FANOUT)
        } else {
            RTree::build(&s.domain, std::mem::take(&mut self.mbrs), DEFAULT_FANOUT)?
        };
        let shape = WrittenShape {
            non_empty_domain: domain,
            tile_num,
            last_tile_cell_num: if dense {
                self.tile_cells as u64
            } else {
                self.last_tile_cells
            },
        };
        let fields = self
            .files
            .into_iter()
            .map(|(_, _, files)| files.finish())
            .collect::<Result<Vec<_>>>()?;
        let mut meta =
            FragmentMetadata::written(s, self.name.clone(), self.footer, shape, &rtree, fields);
        meta.set_processed_conditions(self.processed_conditions);
        let bytes = meta.write_file(s, self.key)?;
        super::write(
            self.storage,
            &tdb_storage::join(&self.frag_dir, names::FRAGMENT_METADATA_FILE),
            bytes,
        )?;
        // The commit, last: the fragment exists for readers from here on.
        let commit = tdb_storage::join(
            &tdb_storage::join(&self.dir, names::COMMITS_DIR),
            &format!("{}{}", self.name, names::WRT_EXT),
        );
        super::write(self.storage, &commit, Vec::new())?;
        Ok(Written {
            fragment: self.name,
            cells: self.cells,
            tiles: tile_num,
        })
    }
}
