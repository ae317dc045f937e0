//! What a read asks for: fields, subarray, layout, condition, budget.

use crate::{QueryError, Result};
use std::cmp::Ordering;
use tdb_index::DomainOps;
use tdb_schema::{ArraySchema, Range};

/// The order result cells come in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResultLayout {
    /// Row-major order of coordinates (dense: over the subarray's ranges).
    RowMajor,
    /// Column-major order of coordinates.
    ColMajor,
    /// The array's global order: tiles in tile order, cells in cell order
    /// (Hilbert order for Hilbert arrays).
    GlobalOrder,
    /// Any order (sparse arrays only): the cheapest one.
    Unordered,
}

impl ResultLayout {
    /// The layout of a TileDB name: `row-major`, `col-major`,
    /// `global-order`, `unordered` (TileDB's enum names are accepted too).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name.to_ascii_lowercase().replace('_', "-").as_str() {
            "row-major" | "r" => ResultLayout::RowMajor,
            "col-major" | "c" => ResultLayout::ColMajor,
            "global-order" | "g" => ResultLayout::GlobalOrder,
            "unordered" | "u" => ResultLayout::Unordered,
            _ => return None,
        })
    }

    /// The name [`ResultLayout::from_name`] reads.
    pub fn name(self) -> &'static str {
        match self {
            ResultLayout::RowMajor => "row-major",
            ResultLayout::ColMajor => "col-major",
            ResultLayout::GlobalOrder => "global-order",
            ResultLayout::Unordered => "unordered",
        }
    }
}

/// Ranges per dimension; a dimension with none is read whole.
///
/// Ranges hold raw little-endian bounds in the dimension's datatype (string
/// dimensions: the bounds' bytes), as [`Range`] does everywhere else.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subarray {
    ranges: Vec<Vec<Range>>,
    /// Ranges of dimension labels' values, by label, in the order added:
    /// [`crate::label::resolve`] turns them into ranges of the labelled
    /// dimensions before a read.
    labels: Vec<(String, Vec<Range>)>,
    /// The highest dimension given a range past [`Subarray::MAX_DIMS`]:
    /// kept to be refused by the check, not made slots for.
    beyond: Option<usize>,
}

impl Subarray {
    /// A subarray over `dims` dimensions, each read whole.
    pub fn new(dims: usize) -> Self {
        Subarray {
            ranges: vec![Vec::new(); dims.min(Self::MAX_DIMS)],
            labels: Vec::new(),
            beyond: dims.checked_sub(1).filter(|&d| d >= Self::MAX_DIMS),
        }
    }

    /// Dimensions a subarray makes slots for; a range given past them is
    /// refused when the read checks the subarray, without allocating.
    pub const MAX_DIMS: usize = 4096;

    /// Adds a range to dimension `dim`. Row- and col-major reads follow a
    /// dimension's ranges in the order given; sparse global-order and
    /// unordered reads first sort and merge a string dimension's ranges
    /// as TileDB's readers for them do (overlapping ones joined, the join
    /// ending where the later range does: `[ab, mm]` and `[ba, bb]` read
    /// as `[ab, bb]`).
    pub fn add_range(&mut self, dim: usize, range: Range) -> &mut Self {
        if let Some(slot) = self.slot(dim) {
            slot.push(range);
        }
        self
    }

    /// Replaces the ranges of dimension `dim`.
    pub(crate) fn set_ranges(&mut self, dim: usize, ranges: Vec<Range>) -> &mut Self {
        if let Some(slot) = self.slot(dim) {
            *slot = ranges;
        }
        self
    }

    /// The ranges of every string dimension of `schema` sorted and merged
    /// as TileDB 2.30 does before its sparse global-order and unordered
    /// readers (`Subarray::sort_and_merge_ranges`, on by default: the
    /// config's `sm.merge_overlapping_ranges_experimental`): by start,
    /// then end; a range starting at or before the end of the one kept
    /// before it joins it, and the joined range ends where the joining one
    /// does, even where that is before the kept one's end (TileDB's string
    /// merge, unlike its numeric one, does not take the larger end:
    /// `[ab, mm]` and `[ba, bb]` read as `[ab, bb]`). Numeric ranges those
    /// readers merge into their union, which is what a read of the ranges
    /// as given returns already.
    pub(crate) fn merge_string_ranges_as_tiledb(&mut self, schema: &ArraySchema) {
        for (dim, ranges) in schema.domain.dimensions.iter().zip(&mut self.ranges) {
            if !dim.is_var() || ranges.len() < 2 {
                continue;
            }
            ranges.sort_by(|a, b| a.bounds().cmp(&b.bounds()));
            let mut merged: Vec<Range> = Vec::with_capacity(ranges.len());
            for r in ranges.drain(..) {
                match merged.last_mut() {
                    Some(head) if r.bounds().0 <= head.bounds().1 => {
                        *head = Range::from_bounds(head.bounds().0, r.bounds().1, true);
                    }
                    _ => merged.push(r),
                }
            }
            *ranges = merged;
        }
    }

    /// Dimension `dim`'s ranges, slots made up to it (none past
    /// [`Subarray::MAX_DIMS`]: `dim` is remembered for the check).
    fn slot(&mut self, dim: usize) -> Option<&mut Vec<Range>> {
        if dim >= Self::MAX_DIMS {
            self.beyond = self.beyond.max(Some(dim));
            return None;
        }
        if self.ranges.len() <= dim {
            self.ranges.resize(dim.saturating_add(1), Vec::new());
        }
        self.ranges.get_mut(dim)
    }

    /// Adds a range of values of dimension label `label` (TileDB's
    /// `add_label_range`): the read covers the indexes whose labels lie in
    /// it. Raw bounds in the label's datatype; [`Subarray::add_label`]
    /// takes typed ones.
    pub fn add_label_range(&mut self, label: &str, range: Range) -> &mut Self {
        match self.labels.iter_mut().find(|(l, _)| l == label) {
            Some((_, ranges)) => ranges.push(range),
            None => self.labels.push((label.to_owned(), vec![range])),
        }
        self
    }

    /// The label ranges not yet turned into ranges of dimensions, by
    /// label.
    pub fn label_ranges(&self) -> &[(String, Vec<Range>)] {
        &self.labels
    }

    /// The label ranges, taken out (the dimensions' ranges stay).
    pub(crate) fn take_label_ranges(&mut self) -> Vec<(String, Vec<Range>)> {
        std::mem::take(&mut self.labels)
    }

    /// The ranges of dimension `dim` (empty: the whole domain).
    pub fn ranges(&self, dim: usize) -> &[Range] {
        self.ranges.get(dim).map_or(&[], Vec::as_slice)
    }

    /// The number of dimensions with a slot (ranged or not), or that were
    /// given a range.
    pub fn dim_num(&self) -> usize {
        self.beyond
            .map_or(self.ranges.len(), |d| d.saturating_add(1))
    }

    /// Checks every range against `schema` (whose dimensions `ops`
    /// compares): no more dimensions than the array's, each range well
    /// formed, not reversed, inside the domain (string dimensions have
    /// none). With `whole_tiles` ranges may reach the ends of the domain's
    /// edge tiles: dense consolidation reads and writes whole tiles, which
    /// pass a domain that is no multiple of its tile extent, as TileDB's
    /// own do (it sets those subarrays unchecked).
    pub(crate) fn check(
        &self,
        schema: &ArraySchema,
        ops: &DomainOps,
        whole_tiles: bool,
    ) -> Result<()> {
        let dims = schema.domain.dimensions.len();
        let last = self.beyond.or(self.ranges.len().checked_sub(1));
        if let Some(last) = last.filter(|&d| d >= dims) {
            return Err(QueryError::Subarray {
                dim: format!("#{last}"),
                reason: format!("the array has {dims} dimensions"),
            });
        }
        for (d, (o, dim)) in ops.dims().iter().zip(&schema.domain.dimensions).enumerate() {
            let bad = |reason: String| QueryError::Subarray {
                dim: dim.name.clone(),
                reason,
            };
            let show = |b: &[u8]| show_value(dim.datatype, b);
            for (k, r) in self.ranges(d).iter().enumerate() {
                o.check(r, || format!("range {k}"))
                    .map_err(|e| bad(e.to_string()))?;
                let (lo, hi) = r.bounds();
                if o.cmp_values(lo, hi) == Ordering::Greater {
                    return Err(bad(format!(
                        "range [{}, {}] is reversed",
                        show(lo),
                        show(hi)
                    )));
                }
                let tiled = whole_tiles
                    .then(|| {
                        let (lo, hi) = dim.bounds()?;
                        let domain = Range::from_bounds(lo, hi, false);
                        tdb_index::dense::expand_range_to_tiles(dim, &domain)
                    })
                    .flatten();
                let bounds = match &tiled {
                    Some(r) => Some(r.bounds()),
                    None => dim.bounds(),
                };
                if let Some((dlo, dhi)) = bounds {
                    if o.cmp_values(lo, dlo) == Ordering::Less
                        || o.cmp_values(hi, dhi) == Ordering::Greater
                    {
                        return Err(bad(format!(
                            "range [{}, {}] is outside the domain [{}, {}]",
                            show(lo),
                            show(hi),
                            show(dlo),
                            show(dhi)
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}

/// A value of `datatype` for messages: the number, or the bytes as text.
pub(crate) fn show_value(datatype: tdb_format::Datatype, b: &[u8]) -> String {
    match tdb_format::Scalar::decode(datatype, b) {
        Some(v) => v.to_string(),
        None => format!("{:?}", String::from_utf8_lossy(b)),
    }
}

/// A read query: the fields to return (in this order), the cells to read,
/// their order, an optional condition and the memory budget.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ReadSpec {
    /// Dimension and attribute names, in the order results carry them.
    pub fields: Vec<String>,
    /// The cells to read.
    pub subarray: Subarray,
    /// The order of results.
    pub layout: ResultLayout,
    /// A condition in TileDB-Py's QueryCondition syntax.
    pub condition: Option<String>,
    /// Bytes the query may hold at once: half for the tiles of the piece
    /// of the subarray being read (fetched and unfiltered), half for one
    /// batch of results. Tiles read by their chunks (dense ones, sparse
    /// ones in a read that spills) go over a budget below a piece's chunks
    /// by those chunks; a budget too small for a tile that must be held
    /// whole (string RLE and dictionary tiles, one chunk each) is passed
    /// by that tile, which is never cut. No budget is refused.
    pub budget: u64,
    /// The size pieces of the read aim at below the budget's tile share,
    /// where no budget forces a cut (by default 8 MiB on local storage,
    /// 256 MiB on remote): what a read holds at its peak beside how much
    /// work each batch of requests does. A small aim makes a small array
    /// go through the cuts only large reads take (conformance runs under
    /// one: `cargo xtask conformance --piece-aim`).
    pub piece_aim: Option<u64>,
    /// Nullable fields' validity comes as bits (Arrow's layout), not
    /// bytes: see [`crate::Validity`].
    pub packed_validity: bool,
    /// Ranges may reach the ends of the domain's edge tiles (dense
    /// consolidation's reads: see `Subarray::check`).
    pub(crate) whole_tiles: bool,
}

/// The default memory budget (TileDB's default `sm.mem.total_budget` is
/// 10 GiB; ours is smaller, as results come in batches).
pub const DEFAULT_BUDGET: u64 = 1 << 30;

impl ReadSpec {
    /// Reads `fields` over the whole domain, row-major, with the default
    /// budget.
    pub fn new(fields: impl IntoIterator<Item = impl Into<String>>) -> Self {
        ReadSpec {
            fields: fields.into_iter().map(Into::into).collect(),
            subarray: Subarray::default(),
            layout: ResultLayout::RowMajor,
            condition: None,
            budget: DEFAULT_BUDGET,
            piece_aim: None,
            packed_validity: false,
            whole_tiles: false,
        }
    }

    /// The same read with ranges allowed up to the ends of the domain's
    /// edge tiles.
    pub(crate) fn over_whole_tiles(mut self) -> Self {
        self.whole_tiles = true;
        self
    }

    /// The same read over `subarray`.
    pub fn with_subarray(mut self, subarray: Subarray) -> Self {
        self.subarray = subarray;
        self
    }

    /// The same read in `layout`.
    pub fn with_layout(mut self, layout: ResultLayout) -> Self {
        self.layout = layout;
        self
    }

    /// The same read keeping only cells where `condition` holds (dense
    /// reads return fill values for the others, as TileDB does).
    pub fn with_condition(mut self, condition: impl Into<String>) -> Self {
        self.condition = Some(condition.into());
        self
    }

    /// The same read under a memory budget of `bytes`: its pieces, the
    /// tiles and chunks they hold and its batches stay within it (a
    /// smaller budget means more pieces, not more memory). Besides it a
    /// read holds a fixed amount whatever the budget: decoded chunks kept
    /// between pieces and chunks carried from one piece's walk to the
    /// next (512 KiB each at most), file bytes read on past what pieces
    /// ask (256 KiB at most), the buffers a spilled read's merges read
    /// their scratch runs through (256 KiB at least, the budget's share
    /// where it is more) and its runs are written through (64 KiB at
    /// least), and the decoders' contexts.
    pub fn with_budget(mut self, bytes: u64) -> Self {
        self.budget = bytes;
        self
    }

    /// The same read with pieces aimed at `bytes` (see
    /// [`ReadSpec::piece_aim`]).
    pub fn with_piece_aim(mut self, bytes: u64) -> Self {
        self.piece_aim = Some(bytes);
        self
    }

    /// The same read giving validity as bits, one per cell, the way Arrow
    /// holds it (tdb-arrow's reads): packed as the cells are copied out of
    /// their tiles, so no byte per cell is held or converted.
    pub fn with_packed_validity(mut self) -> Self {
        self.packed_validity = true;
        self
    }
}
