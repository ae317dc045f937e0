//! TileDB's R-tree over a fragment's tile MBRs.
//!
//! The tree is static and complete from the left: the leaf level holds one
//! MBR per data tile, in tile order, and each upper level groups `fanout`
//! consecutive MBRs of the level below into their bounding MBR. Because the
//! shape is fixed by the leaf count and the fanout, TileDB stores no child
//! pointers: the children of MBR `i` of a level are MBRs `i * fanout ..`
//! of the next level. Levels are stored root first.

use crate::compare::DomainOps;
use crate::{IndexError, Result};
use tdb_format::{le, FormatVersion};
use tdb_schema::{Domain, NDRange, Range};

/// TileDB's `constants::rtree_fanout`, the fanout of every tree it builds
/// (including the trees it builds at load from the MBR lists of v1–v2
/// fragment metadata).
pub const DEFAULT_FANOUT: u32 = 10;

/// A fragment's R-tree.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RTree {
    /// Children per node.
    pub fanout: u32,
    /// The levels, root first, leaves last; a level is its MBRs in order.
    /// Empty for an empty tree.
    pub levels: Vec<Vec<NDRange>>,
}

/// Which tiles a subarray touches (TileDB's `TileOverlap`).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct TileOverlap {
    /// Runs of tiles the subarray covers entirely, as inclusive
    /// `(first, last)` tile indices.
    pub tile_ranges: Vec<(u64, u64)>,
    /// Tiles the subarray covers in part, with the fraction covered as
    /// TileDB estimates it (strictly between 0 and 1).
    pub tiles: Vec<(u64, f64)>,
}

impl RTree {
    /// An empty tree (no tiles).
    pub fn empty(fanout: u32) -> Self {
        RTree {
            fanout,
            levels: Vec::new(),
        }
    }

    /// The leaf MBRs, one per data tile.
    pub fn leaves(&self) -> &[NDRange] {
        self.levels.last().map_or(&[], Vec::as_slice)
    }

    /// The number of levels.
    pub fn height(&self) -> usize {
        self.levels.len()
    }

    /// Leaves under one MBR of `level` in a full subtree: `fanout` to the
    /// power of the levels below it (saturating; 0 for a level that does not
    /// exist).
    pub fn subtree_leaf_num(&self, level: usize) -> u64 {
        let Some(below) = self
            .levels
            .len()
            .checked_sub(level)
            .and_then(|n| n.checked_sub(1))
        else {
            return 0;
        };
        (0..below).fold(1u64, |n, _| n.saturating_mul(u64::from(self.fanout)))
    }

    /// Parses the R-tree generic tile's unfiltered content of a fragment of
    /// format `version` over `domain`.
    ///
    /// v1–v4 start with the dimension count (`u32`), the fanout (`u32`) and
    /// the domain datatype (`u8`); the counts are ignored as TileDB does
    /// (the domain decides), and every range is two fixed-size values. From
    /// v5: the fanout, then ranges in the domain's layout (var-size ones
    /// with their lengths). Then the level count (`u32`) and, per level, an
    /// MBR count (`u64`) and the MBRs.
    ///
    /// The levels must have the shape TileDB builds (each holds
    /// `ceil(children / fanout)` MBRs), and no bytes may follow them.
    ///
    /// v1–v2 fragments have no R-tree tile: their metadata holds the leaf
    /// MBRs only, and TileDB builds the tree at load, as
    /// [`RTree::build`] with [`DEFAULT_FANOUT`] does.
    pub fn parse(bytes: &[u8], domain: &Domain, version: FormatVersion) -> Result<RTree> {
        let legacy = !version.has_heterogeneous_dimensions();
        let mut input = bytes;
        if legacy {
            field(&mut input, le::u32("dimension count"), || {
                "dimension count".into()
            })?;
        }
        let fanout = field(&mut input, le::u32("fanout"), || "fanout".into())?;
        if legacy {
            field(&mut input, le::u8("datatype"), || "datatype".into())?;
        }
        let level_num = field(&mut input, le::u32("level count"), || "level count".into())?;
        let min_size = min_mbr_size(domain, legacy);
        let mut levels = Vec::new();
        for level in 0..level_num as usize {
            let count = field(&mut input, le::u64("MBR count"), || {
                format!("level {level} MBR count")
            })?;
            let remaining = input.len() as u64;
            if count
                .checked_mul(min_size)
                .is_none_or(|need| need > remaining)
            {
                return Err(IndexError::TooManyMbrs {
                    level,
                    count,
                    min_size,
                    remaining,
                });
            }
            let mut mbrs = Vec::with_capacity(count as usize);
            for m in 0..count {
                let mbr = if legacy {
                    legacy_mbr(domain, &mut input, level, m)?
                } else {
                    domain
                        .read_nd_range(&mut input, "MBR")
                        .map_err(|e| IndexError::Mbr {
                            level,
                            mbr: m,
                            source: Box::new(e),
                        })?
                };
                mbrs.push(mbr);
            }
            levels.push(mbrs);
        }
        if !input.is_empty() {
            return Err(IndexError::TrailingBytes {
                count: input.len() as u64,
            });
        }
        let tree = RTree { fanout, levels };
        tree.check_shape()?;
        Ok(tree)
    }

    /// Writes the current (v5+, and v22) layout: the mirror of
    /// [`RTree::parse`].
    pub fn write(&self, out: &mut Vec<u8>) {
        le::put_u32(out, self.fanout);
        le::put_u32(out, self.levels.len() as u32);
        for level in &self.levels {
            le::put_u64(out, level.len() as u64);
            for mbr in level {
                Domain::write_nd_range(mbr, out);
            }
        }
    }

    /// Builds the tree over `leaf_mbrs` (one per data tile, in tile order)
    /// the way TileDB does: bottom up, each new level bounding `fanout`
    /// consecutive MBRs of the one below, for `ceil(log_fanout(leaves))`
    /// levels above the leaves (computed in floating point as TileDB does,
    /// so a leaf count that is an exact power of the fanout can get one
    /// extra single-MBR level, as in TileDB). No leaves: an empty tree; one
    /// leaf: the leaf level alone.
    pub fn build(domain: &Domain, leaf_mbrs: Vec<NDRange>, fanout: u32) -> Result<RTree> {
        let ops = DomainOps::new(domain)?;
        for (i, mbr) in leaf_mbrs.iter().enumerate() {
            ops.check(mbr, &format!("MBR {i}"))?;
        }
        let leaf_num = leaf_mbrs.len();
        if leaf_num == 0 {
            return Ok(RTree::empty(fanout));
        }
        let mut levels = vec![leaf_mbrs];
        if leaf_num > 1 {
            if fanout < 2 {
                return Err(IndexError::Fanout {
                    fanout,
                    leaves: leaf_num,
                });
            }
            let height = (leaf_num as f64).ln() / f64::from(fanout).ln();
            let upper = height.ceil() as usize;
            for _ in 0..upper {
                let below = levels.last().map_or(&[][..], Vec::as_slice);
                let level = below
                    .chunks(fanout as usize)
                    .map(|children| {
                        let mut mbr = NDRange::new();
                        for child in children {
                            ops.expand(&mut mbr, child);
                        }
                        mbr
                    })
                    .collect();
                levels.push(level);
            }
            levels.reverse();
        }
        Ok(RTree { fanout, levels })
    }

    /// Checks that every level holds `ceil(children / fanout)` MBRs, so
    /// traversals cannot index outside the tree.
    fn check_shape(&self) -> Result<()> {
        if self.levels.len() > 1 && self.fanout < 2 {
            return Err(IndexError::Shape {
                level: 0,
                reason: format!("{} levels with fanout {}", self.levels.len(), self.fanout),
            });
        }
        let children = self.levels.iter().skip(1);
        for (l, (parents, children)) in self.levels.iter().zip(children).enumerate() {
            let want = children.len().div_ceil((self.fanout as usize).max(1));
            if parents.len() != want {
                return Err(IndexError::Shape {
                    level: l,
                    reason: format!(
                        "{} MBRs over {} children of fanout {}, expected {want}",
                        parents.len(),
                        children.len(),
                        self.fanout
                    ),
                });
            }
        }
        Ok(())
    }

    /// The tiles `subarray` (one range per dimension) touches, found by
    /// descending the tree as TileDB does: a node the subarray covers adds
    /// its whole run of leaves to [`TileOverlap::tile_ranges`], a partly
    /// covered leaf goes to [`TileOverlap::tiles`] with its coverage
    /// ratio, a partly covered inner node is opened; children are visited
    /// left to right, depth first, so both lists come out in TileDB's order.
    pub fn tile_overlap(&self, domain: &Domain, subarray: &[Range]) -> Result<TileOverlap> {
        self.tile_overlap_with_defaults(domain, subarray, &[])
    }

    /// [`RTree::tile_overlap`] where `is_default[d]` marks dimensions whose
    /// range is the whole domain (TileDB's `is_default`): they are skipped
    /// and their range is not looked at (a string dimension's default range
    /// is empty). Missing entries count as not default.
    pub fn tile_overlap_with_defaults(
        &self,
        domain: &Domain,
        subarray: &[Range],
        is_default: &[bool],
    ) -> Result<TileOverlap> {
        let ops = DomainOps::new(domain)?;
        check_query(&ops, subarray, is_default)?;
        let mut overlap = TileOverlap::default();
        let Some(leaf_num) = self.levels.last().map(|l| l.len() as u64) else {
            return Ok(overlap);
        };
        let leaf_level = self.levels.len().saturating_sub(1);
        // (level, MBR index); popped from the end, so children are pushed
        // right to left.
        let roots = self.levels.first().map_or(0, Vec::len) as u64;
        let mut stack: Vec<(usize, u64)> = (0..roots).rev().map(|i| (0, i)).collect();
        while let Some((level, idx)) = stack.pop() {
            let Some(mbr) = self.mbr(level, idx) else {
                continue;
            };
            let ratio = ops.overlap_ratio(subarray, is_default, mbr);
            if ratio == 0.0 {
                continue;
            }
            if ratio == 1.0 {
                let per = self.subtree_leaf_num(level);
                let start = idx.saturating_mul(per);
                if let Some(left) = leaf_num.checked_sub(start).filter(|&n| n > 0) {
                    // The last leaf of the subtree (or of the tree).
                    let end = start.saturating_add(per.min(left)).saturating_sub(1);
                    overlap.tile_ranges.push((start, end));
                }
            } else if level == leaf_level {
                overlap.tiles.push((idx, ratio));
            } else {
                self.push_children(&mut stack, level, idx);
            }
        }
        Ok(overlap)
    }

    /// The leaves (tile indices, in order) whose MBR passes `overlaps`,
    /// descending only into nodes that pass it too: since a node bounds its
    /// children, a test that passes a child passes its parent, and a query
    /// costs the nodes on the way to its tiles instead of one test per tile.
    pub fn leaves_where(&self, mut overlaps: impl FnMut(&[Range]) -> bool) -> Vec<u64> {
        let mut found = Vec::new();
        let Some(root) = self.levels.first() else {
            return found;
        };
        let leaf_level = self.levels.len().saturating_sub(1);
        let mut stack: Vec<(usize, u64)> = (0..root.len() as u64).rev().map(|i| (0, i)).collect();
        while let Some((level, idx)) = stack.pop() {
            let Some(mbr) = self.mbr(level, idx) else {
                continue;
            };
            if !overlaps(mbr) {
                continue;
            }
            if level == leaf_level {
                found.push(idx);
            } else {
                self.push_children(&mut stack, level, idx);
            }
        }
        found
    }

    /// Pushes the children of MBR `idx` of `level` so the leftmost pops
    /// first.
    fn push_children(&self, stack: &mut Vec<(usize, u64)>, level: usize, idx: u64) {
        let child = level.saturating_add(1);
        let next = self.levels.get(child).map_or(0, Vec::len) as u64;
        let start = idx.saturating_mul(u64::from(self.fanout));
        let end = start.saturating_add(u64::from(self.fanout)).min(next);
        stack.extend((start..end).rev().map(|i| (child, i)));
    }

    /// MBR `idx` of `level`, if there is one.
    fn mbr(&self, level: usize, idx: u64) -> Option<&NDRange> {
        self.levels.get(level)?.get(usize::try_from(idx).ok()?)
    }

    /// Marks in `bitmap` (one entry per tile) the tiles whose MBR overlaps
    /// `range` on dimension `dim` alone (TileDB's `compute_tile_bitmap`,
    /// which its sparse readers call once per range per dimension when a
    /// subarray has several ranges on a dimension). Entries already set
    /// stay set; entries beyond `bitmap` are ignored.
    pub fn tile_bitmap(
        &self,
        domain: &Domain,
        dim: usize,
        range: &Range,
        bitmap: &mut [bool],
    ) -> Result<()> {
        let ops = DomainOps::new(domain)?;
        let Some(op) = ops.dims().get(dim) else {
            return Err(IndexError::Range {
                what: format!("dimension {dim}"),
                reason: format!("the domain has {} dimensions", ops.dims().len()),
            });
        };
        op.check(range, || format!("range of dimension {dim}"))?;
        let Some(leaf_num) = self.levels.last().map(|l| l.len() as u64) else {
            return Ok(());
        };
        let leaf_level = self.levels.len().saturating_sub(1);
        let roots = self.levels.first().map_or(0, Vec::len) as u64;
        let mut stack: Vec<(usize, u64)> = (0..roots).rev().map(|i| (0, i)).collect();
        let mut set = |i: u64| {
            if let Some(b) = bitmap.get_mut(i as usize) {
                *b = true;
            }
        };
        while let Some((level, idx)) = stack.pop() {
            let Some(mbr) = self.mbr(level, idx) else {
                continue;
            };
            let Some(r) = mbr.get(dim) else { continue };
            if !op.overlaps(range, r) {
                continue;
            }
            if op.covers(range, r) {
                let per = self.subtree_leaf_num(level);
                let start = idx.saturating_mul(per);
                let end = start.saturating_add(per).min(leaf_num);
                (start..end).for_each(&mut set);
            } else if level == leaf_level {
                set(idx);
            } else {
                self.push_children(&mut stack, level, idx);
            }
        }
        Ok(())
    }

    /// The runs of tiles a multi-range subarray may touch: `ranges[d]` are
    /// the ranges of dimension `d` (empty: the whole domain). A tile is in
    /// when, on every dimension with ranges, its MBR overlaps one of them
    /// (TileDB's per-dimension tile bitmaps, combined). Runs are inclusive
    /// `(first, last)`, ascending (TileDB collects the same runs from the
    /// last tile down).
    pub fn tile_ranges_multi(
        &self,
        domain: &Domain,
        ranges: &[Vec<Range>],
    ) -> Result<Vec<(u64, u64)>> {
        let n = self.leaves().len();
        let mut keep = vec![true; n];
        let mut bitmap = vec![false; n];
        for (d, rs) in ranges.iter().enumerate() {
            if rs.is_empty() {
                continue;
            }
            bitmap.iter_mut().for_each(|b| *b = false);
            for r in rs {
                self.tile_bitmap(domain, d, r, &mut bitmap)?;
            }
            keep.iter_mut().zip(&bitmap).for_each(|(k, b)| *k &= *b);
        }
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for (t, _) in keep.iter().enumerate().filter(|(_, k)| **k) {
            let t = t as u64;
            match runs.last_mut() {
                Some((_, last)) if last.checked_add(1) == Some(t) => *last = t,
                _ => runs.push((t, t)),
            }
        }
        Ok(runs)
    }
}

/// Reads one header field, naming it in the error.
fn field<'a, T>(
    input: &mut &'a [u8],
    parser: impl FnOnce(&'a [u8]) -> le::PResult<'a, T>,
    name: impl FnOnce() -> String,
) -> Result<T> {
    let (v, rest) = le::run(parser, input).map_err(|source| IndexError::Field {
        field: name(),
        source,
    })?;
    *input = rest;
    Ok(v)
}

/// The fewest bytes one serialized MBR can take (at least 1, so a count
/// is always bounded by the remaining bytes).
fn min_mbr_size(domain: &Domain, legacy: bool) -> u64 {
    let size: u64 = domain
        .dimensions
        .iter()
        .map(|d| {
            if d.is_var() && !legacy {
                16
            } else {
                d.datatype.cell_size(2)
            }
        })
        .fold(0, u64::saturating_add);
    size.max(1)
}

/// A v1–v4 MBR: two fixed-size values per dimension.
fn legacy_mbr(domain: &Domain, input: &mut &[u8], level: usize, m: u64) -> Result<NDRange> {
    let mut mbr = NDRange::with_capacity(domain.dimensions.len());
    for (d, dim) in domain.dimensions.iter().enumerate() {
        let range = field(input, le::bytes("range", dim.datatype.cell_size(2)), || {
            format!("level {level} MBR {m} range {d} ({})", dim.name)
        })?;
        mbr.push(Range::Fixed(range.to_vec()));
    }
    Ok(mbr)
}

/// Checks a query's shape against the domain.
fn check_query(ops: &DomainOps, subarray: &[Range], is_default: &[bool]) -> Result<()> {
    if subarray.len() != ops.dims().len() {
        return Err(IndexError::Range {
            what: "subarray".into(),
            reason: format!(
                "{} ranges for {} dimensions",
                subarray.len(),
                ops.dims().len()
            ),
        });
    }
    for (d, (op, r)) in ops.dims().iter().zip(subarray).enumerate() {
        if !is_default.get(d).copied().unwrap_or(false) {
            op.check(r, || format!("subarray dimension {d}"))?;
        }
    }
    Ok(())
}
