//! Dimension labels (TileDB's ordered labels, format v18+).
//!
//! A label is an array of its own inside the labelled array
//! (`__labels/l<N>`): dense over one `index` dimension shaped like the
//! labelled dimension, with one attribute holding a strictly increasing or
//! strictly decreasing value per index. A read by label ranges first turns
//! each range into the indexes whose labels lie in it, as TileDB's
//! `OrderedDimLabelReader` does, then reads those indexes. The search
//! reads one tile of the label array at a time (a binary search over the
//! indexes, tiles cached), so it costs a few tiles however long the label.

use crate::read::SyncRead;
use crate::{FieldBuffer, QueryError, ReadSpec, Result, Snapshot, Subarray, WriteSpec};
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;
use tdb_format::{ArrayType, DataOrder};
use tdb_fragment::ReadStorage;
use tdb_index::dense::{int_range, int_range_of, origin_and_extent, tile_of};
use tdb_index::RangeOps;
use tdb_schema::{ArraySchema, Dimension, DimensionLabel, Range};
use tdb_storage::WritableStorage;

/// Label `name` of `schema`, or an error listing the labels it has.
pub fn find<'s>(schema: &'s ArraySchema, name: &str) -> Result<&'s DimensionLabel> {
    schema
        .dimension_labels
        .iter()
        .find(|l| l.name == name)
        .ok_or_else(|| {
            let known: Vec<&str> = schema
                .dimension_labels
                .iter()
                .map(|l| l.name.as_str())
                .collect();
            label_error(
                name,
                if known.is_empty() {
                    "the array has no dimension labels".to_owned()
                } else {
                    format!("no such label (labels: {})", known.join(", "))
                },
            )
        })
}

fn label_error(label: &str, reason: impl Into<String>) -> QueryError {
    QueryError::Label {
        label: label.to_owned(),
        reason: reason.into(),
    }
}

/// A dimension label's array, opened at its array's time window with its
/// key (as TileDB opens it).
#[derive(Debug, Clone)]
pub struct LabelArray {
    label: DimensionLabel,
    snapshot: Arc<Snapshot>,
    /// Comparison of label values.
    ops: RangeOps,
}

impl LabelArray {
    /// Opens label `name` of the array `parent` is a snapshot of, and
    /// checks that its array is what the label says (TileDB's
    /// `check_dimension_label_schema`).
    pub fn open<S: ReadStorage + ?Sized>(
        storage: &S,
        parent: &Snapshot,
        name: &str,
    ) -> Result<Self> {
        let schema = parent.schema();
        let label = find(schema, name)?.clone();
        if !label.relative_uri {
            return Err(QueryError::Unsupported(format!(
                "dimension label `{name}` lives outside its array, at {}",
                label.uri
            )));
        }
        let dir = tdb_storage::join(&parent.open.dir, &label.uri);
        let snapshot = Snapshot::load(
            storage,
            &dir,
            parent.open.directory.window,
            parent.open.key(),
        )?;
        let labelled = schema
            .domain
            .dimensions
            .get(label.dimension as usize)
            .ok_or_else(|| {
                label_error(
                    name,
                    format!(
                        "labels dimension {}, which the array lacks",
                        label.dimension
                    ),
                )
            })?;
        check_label_schema(&label, labelled, snapshot.schema())?;
        let ops = RangeOps::of_datatype(label.datatype).ok_or_else(|| {
            label_error(
                name,
                format!("labels of type {} cannot be ordered", label.datatype),
            )
        })?;
        Ok(LabelArray {
            label,
            snapshot: Arc::new(snapshot),
            ops,
        })
    }

    /// The label as the array's schema describes it.
    pub fn label(&self) -> &DimensionLabel {
        &self.label
    }

    /// The label's own array, as opened.
    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.snapshot
    }

    /// The index ranges of the labelled dimension whose labels lie in
    /// `ranges` (raw bounds in the label's datatype), one per range, in
    /// order: for increasing labels the first index whose label is at least
    /// the low bound to the last whose label is at most the high bound. A
    /// range that holds no label is an error, as in TileDB ("Range
    /// contained no values").
    pub fn index_ranges<S: ReadStorage + ?Sized>(
        &self,
        storage: &S,
        ranges: &[Range],
        budget: u64,
    ) -> Result<Vec<Range>> {
        let mut search = Search::new(self, storage, budget)?;
        search.check_order()?;
        ranges.iter().map(|r| search.indexes(r)).collect()
    }

    /// The labels of the indexes `index_ranges` cover (the whole domain of
    /// the dimension when empty), in order: TileDB's label data buffer of
    /// a read. Indexes no write labelled hold the attribute's fill value.
    pub fn values<S: ReadStorage + ?Sized>(
        &self,
        storage: &S,
        index_ranges: &[Range],
        budget: u64,
    ) -> Result<FieldBuffer> {
        let mut sub = Subarray::new(1);
        for r in index_ranges {
            sub.add_range(0, r.clone());
        }
        let spec = ReadSpec::new([self.label.attribute.as_str()])
            .with_subarray(sub)
            .with_budget(budget);
        let mut out = FieldBuffer::new(
            &self.label.name,
            self.label.datatype,
            self.label.cell_val_num,
            false,
        );
        for batch in SyncRead::new(storage, Arc::clone(&self.snapshot), spec)? {
            for f in batch?.fields {
                out.extend_from(&f, 0..f.column().len());
            }
        }
        Ok(out)
    }
}

/// Checks a label's array against the label: dense, one dimension of the
/// labelled dimension's type, an ordered attribute of the label's type.
fn check_label_schema(
    label: &DimensionLabel,
    labelled: &Dimension,
    schema: &ArraySchema,
) -> Result<()> {
    let bad =
        |what: String| label_error(&label.name, format!("its array at {}: {what}", label.uri));
    if schema.array_type != ArrayType::Dense {
        return Err(bad("is not dense".into()));
    }
    match schema.domain.dimensions.as_slice() {
        [d] if d.datatype == labelled.datatype => {}
        dims => {
            return Err(bad(format!(
                "has {} dimensions; a label's array has one, of the labelled dimension's type {}",
                dims.len(),
                labelled.datatype
            )))
        }
    }
    let attr = schema
        .attribute(&label.attribute)
        .ok_or_else(|| bad(format!("has no attribute `{}`", label.attribute)))?;
    if attr.datatype != label.datatype || attr.cell_val_num != label.cell_val_num {
        return Err(bad(format!(
            "its attribute `{}` is {} ({} values per cell), the label {} ({})",
            attr.name, attr.datatype, attr.cell_val_num, label.datatype, label.cell_val_num
        )));
    }
    if label.order == DataOrder::Unordered || attr.order != label.order {
        return Err(bad(format!(
            "its attribute's order is {}, the label's {}; tdb reads ordered labels only",
            attr.order.name(),
            label.order.name()
        )));
    }
    Ok(())
}

/// Turns label ranges into index ranges of the dimensions they label:
/// the subarray with every label range replaced. A dimension takes the
/// ranges of one label only, and none of its own (TileDB's rules).
pub fn resolve<S: ReadStorage + ?Sized>(
    storage: &S,
    snapshot: &Snapshot,
    subarray: &Subarray,
    budget: u64,
) -> Result<Subarray> {
    let mut out = subarray.clone();
    let labels = out.take_label_ranges();
    if labels.is_empty() {
        return Ok(out);
    }
    let schema = snapshot.schema();
    let dims = schema.domain.dimensions.len();
    if out.dim_num() < dims {
        out = {
            let mut s = Subarray::new(dims);
            for d in 0..out.dim_num() {
                for r in out.ranges(d) {
                    s.add_range(d, r.clone());
                }
            }
            s
        };
    }
    let mut used: HashMap<u32, &str> = HashMap::new();
    for (name, ranges) in &labels {
        let l = find(schema, name)?;
        if let Some(other) = used.insert(l.dimension, name) {
            return Err(label_error(
                name,
                format!(
                    "dimension {} already has ranges of label `{other}`",
                    l.dimension
                ),
            ));
        }
        if !out.ranges(l.dimension as usize).is_empty() {
            return Err(label_error(
                name,
                format!(
                    "dimension {} has ranges of its own; a dimension takes ranges of \
                     its values or of one label, not both",
                    l.dimension
                ),
            ));
        }
        let array = LabelArray::open(storage, snapshot, name)?;
        for r in array.index_ranges(storage, ranges, budget)? {
            out.add_range(l.dimension as usize, r);
        }
    }
    Ok(out)
}

/// Writes the label data of `spec` (a write of the array at `dir` whose
/// schema is `schema`, stamped) to the labels' arrays, one dense fragment
/// each over the indexes the write covers on the label's dimension: a
/// dense write's one range there (its whole domain without one), a sparse
/// write's coordinates there when they run one by one (TileDB's rules).
/// Every label is checked (datatype, count, strict order) before any is
/// written.
pub(crate) fn write_labels<S: ReadStorage + WritableStorage + ?Sized>(
    storage: &S,
    dir: &str,
    schema: &ArraySchema,
    key: Option<&[u8; 32]>,
    spec: &WriteSpec,
) -> Result<()> {
    let mut planned = Vec::new();
    let mut seen = Vec::new();
    for buf in &spec.labels {
        let name = buf.name.as_str();
        if seen.contains(&name) {
            return Err(label_error(name, "label data given twice"));
        }
        seen.push(name);
        let l = find(schema, name)?;
        if l.is_external || !l.relative_uri {
            return Err(QueryError::Unsupported(format!(
                "writing dimension label `{name}`, which lives outside its array"
            )));
        }
        if buf.datatype != l.datatype || buf.cell_val_num != l.cell_val_num {
            return Err(label_error(
                name,
                format!(
                    "data of {} ({} values per cell) given for labels of {} ({})",
                    buf.datatype, buf.cell_val_num, l.datatype, l.cell_val_num
                ),
            ));
        }
        if buf.validity.is_some() {
            return Err(label_error(
                name,
                "labels cannot be null; give a non-nullable buffer",
            ));
        }
        let dim = schema
            .domain
            .dimensions
            .get(l.dimension as usize)
            .ok_or_else(|| label_error(name, "its dimension is missing"))?;
        let (lo, hi) = written_indexes(schema, spec, l, dim)?;
        let column = buf.column();
        let count = u64::try_from(hi.saturating_sub(lo).saturating_add(1)).unwrap_or(u64::MAX);
        if column.len() as u64 != count {
            return Err(label_error(
                name,
                format!(
                    "{} labels given for the {count} indexes [{lo}, {hi}] the write covers",
                    column.len()
                ),
            ));
        }
        check_strict_order(l, &column)?;
        let range = int_range_of(dim, lo, hi)
            .ok_or_else(|| label_error(name, format!("indexes [{lo}, {hi}] do not fit")))?;
        planned.push((l, range));
    }
    for ((l, range), buf) in planned.into_iter().zip(&spec.labels) {
        let label_dir = tdb_storage::join(dir, &l.uri);
        let history = tdb_fragment::load_schemas(storage, &label_dir, key)?;
        let mut sub = Subarray::new(1);
        sub.add_range(0, range);
        let mut data = buf.clone();
        data.name.clone_from(&l.attribute);
        let mut label_spec = WriteSpec::new(vec![data]).with_subarray(sub);
        label_spec.timestamps = spec.timestamps;
        crate::write_fragment(storage, &label_dir, history.latest(), key, &label_spec)?;
    }
    Ok(())
}

/// The indexes `[lo, hi]` a write covers on label `l`'s dimension `dim`.
fn written_indexes(
    schema: &ArraySchema,
    spec: &WriteSpec,
    l: &DimensionLabel,
    dim: &Dimension,
) -> Result<(i128, i128)> {
    let name = &l.name;
    let d = l.dimension as usize;
    if schema.array_type == ArrayType::Dense {
        let ranges = spec.subarray.as_ref().map_or(&[][..], |s| s.ranges(d));
        let range = match ranges {
            [] => Range::from_bounds(
                dim.bounds().map_or(&[][..], |b| b.0),
                dim.bounds().map_or(&[][..], |b| b.1),
                false,
            ),
            [r] => r.clone(),
            _ => {
                return Err(label_error(
                    name,
                    "label data goes with writes of one range on its dimension",
                ))
            }
        };
        return int_range(dim, &range)
            .ok_or_else(|| label_error(name, "its dimension's range is not an integer one"));
    }
    // Sparse: the coordinates, run by run, must make one range.
    let coords = spec
        .fields
        .iter()
        .find(|f| f.name == dim.name)
        .ok_or_else(|| {
            label_error(
                name,
                format!("the write has no coordinates of {}", dim.name),
            )
        })?;
    let column = coords.column();
    let mut run: Option<(i128, i128)> = None;
    for k in 0..column.len() {
        let v = tdb_index::dense::int_value(dim.datatype, column.cell(k))
            .ok_or_else(|| label_error(name, "a coordinate of its dimension is malformed"))?;
        run = match run {
            None => Some((v, v)),
            Some((a, b)) if v == b.saturating_add(1) => Some((a, v)),
            Some(_) => {
                return Err(label_error(
                    name,
                    format!(
                        "the coordinates of {} must run one by one (each the one before plus 1) \
                         when labels are written (TileDB: \"The dimension data must contain \
                         consecutive points\")",
                        dim.name
                    ),
                ))
            }
        };
    }
    run.ok_or_else(|| label_error(name, "no cells to label"))
}

/// TileDB's check of an ordered attribute's data (`is_sorted_buffer`):
/// each label strictly after the one before in the label's order.
fn check_strict_order(l: &DimensionLabel, column: &crate::Column<'_>) -> Result<()> {
    let ops = RangeOps::of_datatype(l.datatype).ok_or_else(|| {
        label_error(
            &l.name,
            format!("labels of type {} cannot be ordered", l.datatype),
        )
    })?;
    let want = match l.order {
        DataOrder::Increasing => Ordering::Greater,
        DataOrder::Decreasing => Ordering::Less,
        DataOrder::Unordered => {
            return Err(label_error(&l.name, "unordered labels are not supported"))
        }
    };
    for k in 1..column.len() {
        let (prev, next) = (column.cell(k.saturating_sub(1)), column.cell(k));
        if ops.cmp_values(next, prev) != want {
            return Err(label_error(
                &l.name,
                format!(
                    "labels must be strictly {}: label {k} ({}) does not follow label {} ({}) \
                     (TileDB: \"not in the expected order\")",
                    l.order.name(),
                    crate::spec::show_value(l.datatype, next),
                    k.saturating_sub(1),
                    crate::spec::show_value(l.datatype, prev)
                ),
            ));
        }
    }
    Ok(())
}

/// `spec` with its label ranges turned into index ranges ([`resolve`]),
/// under its budget: what the sync drivers do before reading.
pub(crate) fn resolve_spec<S: ReadStorage + ?Sized>(
    storage: &S,
    snapshot: &Snapshot,
    mut spec: ReadSpec,
) -> Result<ReadSpec> {
    if !spec.subarray.label_ranges().is_empty() {
        spec.subarray = resolve(storage, snapshot, &spec.subarray, spec.budget)?;
    }
    Ok(spec)
}

/// A binary search over a label array's values, reading one tile of it at
/// a time.
struct Search<'a, S: ?Sized> {
    array: &'a LabelArray,
    storage: &'a S,
    budget: u64,
    /// The index dimension of the label's array.
    dim: &'a Dimension,
    origin: i128,
    extent: i128,
    /// The indexes labelled: the union of the fragments' non-empty domains.
    first: i128,
    last: i128,
    /// Tiles read, by tile number: each index's label, from the tile's
    /// first labelled index.
    tiles: HashMap<i128, (i128, Vec<Vec<u8>>)>,
}

/// Tiles a search keeps (a binary search needs about two per range bound
/// at once; the rest are read again if needed).
const CACHED_TILES: usize = 64;

impl<'a, S: ReadStorage + ?Sized> Search<'a, S> {
    fn new(array: &'a LabelArray, storage: &'a S, budget: u64) -> Result<Self> {
        let name = &array.label.name;
        let schema = array.snapshot.schema();
        let dim = schema
            .domain
            .dimensions
            .first()
            .ok_or_else(|| label_error(name, "its array has no dimension"))?;
        let (origin, extent) = origin_and_extent(dim)
            .ok_or_else(|| label_error(name, "its index dimension is not an integer one"))?;
        let spans = array
            .snapshot
            .fragments
            .iter()
            .map(|f| {
                f.metadata
                    .footer
                    .non_empty_domain
                    .as_ref()
                    .and_then(|nd| nd.first())
                    .and_then(|r| int_range(dim, r))
                    .ok_or_else(|| {
                        label_error(name, format!("fragment {} has no index range", f.file.name))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        let (first, last) = covered(&spans).map_err(|reason| label_error(name, reason))?;
        Ok(Search {
            array,
            storage,
            budget,
            dim,
            origin,
            extent: extent.max(1),
            first,
            last,
            tiles: HashMap::new(),
        })
    }

    /// The label at index `i` (in `[first, last]`).
    fn value(&mut self, i: i128) -> Result<&[u8]> {
        // Index values are 64-bit at most: i128 arithmetic on them cannot
        // overflow (saturating only to satisfy the no-panic lints).
        let tile = tile_of(i, self.origin, self.extent).unwrap_or(0);
        if !self.tiles.contains_key(&tile) {
            if self.tiles.len() >= CACHED_TILES {
                self.tiles.clear();
            }
            let start = self.origin.saturating_add(tile.saturating_mul(self.extent));
            let lo = start.max(self.first);
            let hi = start
                .saturating_add(self.extent.saturating_sub(1))
                .min(self.last);
            let values = self.read(lo, hi)?;
            self.tiles.insert(tile, (lo, values));
        }
        let name = &self.array.label.name;
        let (lo, values) = self
            .tiles
            .get(&tile)
            .ok_or_else(|| label_error(name, "a tile read went missing"))?;
        usize::try_from(i.saturating_sub(*lo))
            .ok()
            .and_then(|k| values.get(k))
            .map(Vec::as_slice)
            .ok_or_else(|| label_error(name, format!("no label read for index {i}")))
    }

    /// The labels of indexes `lo..=hi`, one per index.
    fn read(&self, lo: i128, hi: i128) -> Result<Vec<Vec<u8>>> {
        let name = &self.array.label.name;
        let range = int_range_of(self.dim, lo, hi)
            .ok_or_else(|| label_error(name, format!("indexes [{lo}, {hi}] do not fit")))?;
        let f = self.array.values(self.storage, &[range], self.budget)?;
        let column = f.column();
        let n = usize::try_from(hi.saturating_sub(lo).saturating_add(1)).unwrap_or(0);
        let values: Vec<Vec<u8>> = (0..column.len()).map(|k| column.cell(k).to_vec()).collect();
        if values.len() != n {
            return Err(label_error(
                name,
                format!("read {} labels for indexes [{lo}, {hi}]", values.len()),
            ));
        }
        Ok(values)
    }

    /// The first index in `[first, last]` whose label satisfies `pred`
    /// (false for a prefix of the indexes, true after), if any.
    fn first_where(
        &mut self,
        pred: impl Fn(Ordering) -> bool,
        bound: &[u8],
    ) -> Result<Option<i128>> {
        let (mut lo, mut hi) = (self.first, self.last.saturating_add(1));
        while lo < hi {
            let mid = lo.saturating_add(hi.saturating_sub(lo) / 2);
            let ops = self.array.ops;
            let v = self.value(mid)?;
            if pred(ops.cmp_values(v, bound)) {
                hi = mid;
            } else {
                lo = mid.saturating_add(1);
            }
        }
        Ok((lo <= self.last).then_some(lo))
    }

    /// The index range of label range `r`.
    fn indexes(&mut self, r: &Range) -> Result<Range> {
        let name = &self.array.label.name;
        let (lo, hi) = r.bounds();
        let show = |b: &[u8]| crate::spec::show_value(self.array.label.datatype, b);
        if self.array.ops.cmp_values(lo, hi) == Ordering::Greater {
            return Err(label_error(
                name,
                format!("range [{}, {}] is reversed", show(lo), show(hi)),
            ));
        }
        // Increasing labels: from the first label >= lo to before the first
        // label > hi; decreasing: from the first <= hi to before the first < lo.
        let (start, end) = if self.array.label.order == DataOrder::Increasing {
            (
                self.first_where(|o| o != Ordering::Less, lo)?,
                self.first_where(|o| o == Ordering::Greater, hi)?,
            )
        } else {
            (
                self.first_where(|o| o != Ordering::Greater, hi)?,
                self.first_where(|o| o == Ordering::Less, lo)?,
            )
        };
        let end = end.map_or(self.last, |e| e.saturating_sub(1));
        match start {
            Some(s) if s <= end => int_range_of(self.dim, s, end)
                .ok_or_else(|| label_error(name, format!("indexes [{s}, {end}] do not fit"))),
            _ => Err(label_error(
                name,
                format!(
                    "range [{}, {}] holds no label (TileDB: \"Range contained no values\")",
                    show(lo),
                    show(hi)
                ),
            )),
        }
    }

    /// Checks the labels are strictly in order where one fragment's
    /// indexes meet another's (each write was checked on its own): TileDB
    /// refuses such a label for reads by range too.
    fn check_order(&self) -> Result<()> {
        if self.array.snapshot.fragments.len() < 2 {
            return Ok(());
        }
        let mut seams = Vec::new();
        for f in &self.array.snapshot.fragments {
            if let Some((a, b)) = f
                .metadata
                .footer
                .non_empty_domain
                .as_ref()
                .and_then(|nd| nd.first())
                .and_then(|r| int_range(self.dim, r))
            {
                seams.push(a.saturating_sub(1));
                seams.push(b);
            }
        }
        seams.sort_unstable();
        seams.dedup();
        seams.retain(|&i| i >= self.first && i < self.last);
        // Every seam's two labels in one read (runs of indexes, merged where
        // they touch): one batch of requests, not a tile read per seam.
        let mut runs: Vec<(i128, i128)> = Vec::new();
        for &i in &seams {
            let next = i.saturating_add(1);
            match runs.last_mut() {
                Some(run) if i <= run.1.saturating_add(1) => run.1 = run.1.max(next),
                _ => runs.push((i, next)),
            }
        }
        let name = &self.array.label.name;
        let ranges = runs
            .iter()
            .map(|&(a, b)| {
                int_range_of(self.dim, a, b)
                    .ok_or_else(|| label_error(name, format!("indexes [{a}, {b}] do not fit")))
            })
            .collect::<Result<Vec<_>>>()?;
        let read = self.array.values(self.storage, &ranges, self.budget)?;
        let column = read.column();
        // The label at index `i`: its place among the runs read.
        let at = |i: i128| -> Option<&[u8]> {
            let mut k = 0i128;
            for &(a, b) in &runs {
                if (a..=b).contains(&i) {
                    let pos = usize::try_from(k.saturating_add(i.saturating_sub(a))).ok()?;
                    return (pos < column.len()).then(|| column.cell(pos));
                }
                k = k.saturating_add(b.saturating_sub(a).saturating_add(1));
            }
            None
        };
        let increasing = self.array.label.order == DataOrder::Increasing;
        let ops = self.array.ops;
        for i in seams {
            let next = i.saturating_add(1);
            let (Some(a), Some(b)) = (at(i), at(next)) else {
                return Err(label_error(name, format!("no label read for index {i}")));
            };
            let ok = match ops.cmp_values(a, b) {
                Ordering::Less => increasing,
                Ordering::Greater => !increasing,
                Ordering::Equal => false,
            };
            if !ok {
                return Err(label_error(
                    name,
                    format!(
                        "labels at indexes {i} and {next} are not strictly {}",
                        self.array.label.order.name()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The indexes `spans` (each fragment's `[lo, hi]`) cover, when they cover
/// one run without gaps: TileDB refuses a label with holes ("Discontinuity
/// found in array domain") or without any write ("Dimension label is
/// empty").
fn covered(spans: &[(i128, i128)]) -> std::result::Result<(i128, i128), String> {
    let mut sorted = spans.to_vec();
    sorted.sort_unstable();
    let mut it = sorted.into_iter();
    let (first, mut last) = it
        .next()
        .ok_or("no label was written (TileDB: \"Dimension label is empty\")")?;
    for (a, b) in it {
        if a > last.saturating_add(1) {
            return Err(format!(
                "no label was written at indexes [{}, {}] (TileDB: \"Discontinuity found in \
                 array domain\")",
                last.saturating_add(1),
                a.saturating_sub(1)
            ));
        }
        last = last.max(b);
    }
    Ok((first, last))
}

#[cfg(test)]
mod tests {
    use super::covered;

    #[test]
    fn labelled_indexes_must_be_one_run() {
        assert_eq!(covered(&[(5, 9), (0, 4)]), Ok((0, 9)));
        assert_eq!(covered(&[(0, 9), (2, 3)]), Ok((0, 9)));
        assert!(covered(&[]).unwrap_err().contains("empty"));
        let gap = covered(&[(0, 3), (6, 9)]).unwrap_err();
        assert!(gap.contains("[4, 5]"), "{gap}");
    }
}
