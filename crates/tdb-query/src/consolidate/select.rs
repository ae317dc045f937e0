//! Which fragments a consolidation step merges: TileDB 2.30's rule
//! (`FragmentConsolidator::compute_next_to_consolidate`), so tdb and
//! TileDB given the same settings pick the same fragments.
//!
//! Among runs of adjacent fragments (in time order) whose neighbours'
//! sizes are within `size_ratio` of each other, and for dense arrays whose
//! merge would neither cover an older fragment nor write more than
//! `amplification` times the cells its inputs hold, the longest run of at
//! most `max_frags` fragments wins; of equally long runs the smallest, an
//! earlier one kept unless a later one is over 25% smaller. No run of at
//! least `min_frags` fragments: nothing to do.

use crate::{QueryError, Result};
use tdb_index::{DomainOps, NDRange};
use tdb_schema::Domain;

/// TileDB's `sm.consolidation.*` settings that choose fragments; the
/// defaults are TileDB's (merge every fragment of the window at once).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FragmentSelection {
    /// Consolidation steps at most (`sm.consolidation.steps`): each step
    /// merges one run; the next sees its result.
    pub steps: u32,
    /// Fewest fragments a step merges (`step_min_frags`).
    pub min_frags: u32,
    /// Most fragments a step merges (`step_max_frags`).
    pub max_frags: u32,
    /// Smallest size ratio of adjacent fragments in a run, in [0, 1]
    /// (`step_size_ratio`).
    pub size_ratio: f32,
    /// Largest ratio of cells a dense merge writes to the cells its inputs
    /// hold (`amplification`); dense arrays only.
    pub amplification: f32,
    /// Not a choice but what the merge does with cells delete commits
    /// removed (`purge_deleted_cells`): drop them, instead of keeping them
    /// with when they were deleted so earlier reads still see them.
    pub purge_deleted_cells: bool,
    /// Not a choice either but how the merge writes
    /// (`sm.consolidation.max_fragment_size`): as several fragments, each
    /// of at most this many bytes of filtered tiles, as TileDB's
    /// global-order writer splits them. `None`: one fragment.
    pub max_fragment_size: Option<u64>,
}

impl Default for FragmentSelection {
    fn default() -> Self {
        FragmentSelection {
            steps: u32::MAX,
            min_frags: u32::MAX,
            max_frags: u32::MAX,
            size_ratio: 0.0,
            amplification: 1.0,
            purge_deleted_cells: false,
            max_fragment_size: None,
        }
    }
}

impl FragmentSelection {
    /// Refuses settings TileDB refuses.
    pub fn validate(&self) -> Result<()> {
        if self.min_frags > self.max_frags {
            return Err(QueryError::invalid(format!(
                "consolidation: step_min_frags {} is larger than step_max_frags {}",
                self.min_frags, self.max_frags
            )));
        }
        if !(0.0..=1.0).contains(&self.size_ratio) {
            return Err(QueryError::invalid(format!(
                "consolidation: step_size_ratio {} is not in [0, 1]",
                self.size_ratio
            )));
        }
        if self.amplification.is_nan() || self.amplification < 0.0 {
            return Err(QueryError::invalid(format!(
                "consolidation: amplification {} is not a non-negative number",
                self.amplification
            )));
        }
        Ok(())
    }
}

/// A fragment that may be merged: its size, non-empty domain and, for
/// dense arrays, the cells it holds as TileDB counts them (a dense
/// fragment's whole tiles, a sparse one's rectangle).
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub size: u64,
    pub non_empty: NDRange,
    pub cells: u64,
}

/// What dense merges must not overwrite: the union of the non-empty
/// domains of the fragments older than the window.
pub(crate) struct DenseRules<'a> {
    pub domain: &'a Domain,
    pub anterior: Option<NDRange>,
}

impl DenseRules<'_> {
    /// Whether merging candidates `start..=end` (whose union is `union`)
    /// covers no older fragment's cells (they would be overwritten by fill
    /// values) and writes at most `amplification` times the cells the
    /// inputs hold, counted in whole tiles (TileDB's `are_consolidatable`).
    fn allows(
        &self,
        ops: &DomainOps,
        all: &[Candidate],
        (start, end): (usize, usize),
        union: &NDRange,
        amplification: f32,
    ) -> bool {
        if self
            .anterior
            .as_ref()
            .is_some_and(|a| ops.overlaps(union, a))
        {
            return false;
        }
        let (earlier, run) = (all.get(..start), all.get(start..=end));
        if earlier
            .unwrap_or_default()
            .iter()
            .any(|c| ops.overlaps(union, &c.non_empty))
        {
            return false;
        }
        let union_cells = tdb_index::dense::cell_count(self.domain, union).unwrap_or(u64::MAX);
        let held = run
            .unwrap_or_default()
            .iter()
            .fold(0u64, |acc, c| acc.saturating_add(c.cells));
        union_cells as f64 / held as f64 <= f64::from(amplification)
    }
}

/// The run of `candidates` the next step merges; `None` when there is
/// none of at least two.
pub(crate) fn choose(
    selection: &FragmentSelection,
    candidates: &[Candidate],
    dense: Option<&DenseRules<'_>>,
    ops: &DomainOps,
) -> Option<std::ops::Range<usize>> {
    let n = candidates.len();
    let max = (selection.max_frags as usize).min(n);
    let min = (selection.min_frags as usize).min(n);
    // Row i: per j the size of the run j..=j+i, `None` where it may not be
    // merged; each row comes from the one before (a run is allowed only
    // if the run one shorter is), so only that one is kept, with the best
    // run of the longest length so far: memory linear in the fragments,
    // not quadratic (10,000 fragments once took 1.6 GB here). Dense rules
    // need each run's union: kept for the current row only.
    let mut shorter: Option<Vec<Option<u64>>> = None;
    let mut unions: Vec<NDRange> = Vec::new();
    let mut chosen: Option<(usize, usize)> = None;
    for i in 0..max {
        let row: Vec<Option<u64>> = (0..n)
            .map(|j| {
                // The run's last candidate, and the one before it.
                let last = j.checked_add(i)?;
                let this = candidates.get(last)?;
                let Some(shorter) = &shorter else {
                    return Some(this.size);
                };
                let before = candidates.get(last.checked_sub(1)?)?;
                let mut ratio = before.size as f32 / this.size as f32;
                if ratio > 1.0 {
                    ratio = 1.0 / ratio;
                }
                let size = (*shorter.get(j)?).filter(|_| ratio >= selection.size_ratio)?;
                if let Some(rules) = dense {
                    let union = unions.get_mut(j)?;
                    ops.expand(union, &this.non_empty);
                    if !rules.allows(ops, candidates, (j, last), union, selection.amplification) {
                        return None;
                    }
                }
                Some(size.saturating_add(this.size))
            })
            .collect();
        if i == 0 && dense.is_some() {
            unions = candidates.iter().map(|c| c.non_empty.clone()).collect();
        }
        if row.iter().all(Option::is_none) {
            // No longer run is allowed either.
            break;
        }
        // The smallest run of this length (a later one only when over
        // 25% smaller: TileDB prefers earlier runs); the longest length
        // allowed wins.
        if i.saturating_add(1) >= min {
            let mut best: Option<(u64, usize)> = None;
            for (j, size) in row.iter().enumerate() {
                let Some(size) = *size else { continue };
                if best.is_none_or(|(b, _)| (size as f64) < b as f64 / 1.25) {
                    best = Some((size, j));
                }
            }
            if let Some((_, j)) = best {
                chosen = Some((i, j));
            }
        }
        shorter = Some(row);
    }
    match chosen {
        Some((i, j)) if i > 0 => Some(j..j.saturating_add(i).saturating_add(1)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tdb_format::{ArrayType, Datatype};
    use tdb_index::Range;
    use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder};

    fn domain() -> Domain {
        ArraySchema::builder(ArrayType::Dense)
            .dimension(DimensionBuilder::range("d", 1i32..=100).tile_extent(10i32))
            .attribute(AttributeBuilder::new("a", Datatype::Int32))
            .build()
            .unwrap()
            .domain
    }

    fn r(lo: i32, hi: i32) -> NDRange {
        vec![Range::from_bounds(
            &lo.to_le_bytes(),
            &hi.to_le_bytes(),
            false,
        )]
    }

    fn sized(sizes: &[u64]) -> Vec<Candidate> {
        sizes
            .iter()
            .map(|&size| Candidate {
                size,
                non_empty: r(1, 10),
                cells: 10,
            })
            .collect()
    }

    fn run(s: &FragmentSelection, c: &[Candidate]) -> Option<std::ops::Range<usize>> {
        let ops = DomainOps::new(&domain()).unwrap();
        choose(s, c, None, &ops)
    }

    fn with(min: u32, max: u32, ratio: f32) -> FragmentSelection {
        FragmentSelection {
            min_frags: min,
            max_frags: max,
            size_ratio: ratio,
            ..FragmentSelection::default()
        }
    }

    #[test]
    fn defaults_merge_every_fragment() {
        let s = FragmentSelection::default();
        assert_eq!(run(&s, &sized(&[5, 1000, 7, 3])), Some(0..4));
        assert_eq!(run(&s, &sized(&[5])), None);
        assert_eq!(run(&s, &[]), None);
    }

    #[test]
    fn runs_break_where_neighbours_differ_in_size() {
        // 100 and 10 differ by more than the ratio: the longest run of
        // similar sizes is the last three.
        let s = with(2, 4, 0.5);
        assert_eq!(run(&s, &sized(&[100, 10, 12, 11])), Some(1..4));
        // No two neighbours alike: nothing.
        assert_eq!(run(&s, &sized(&[100, 10, 1000])), None);
    }

    #[test]
    fn of_equally_long_runs_a_later_one_must_be_over_a_quarter_smaller() {
        let s = with(2, 2, 0.0);
        // Pairs: 20, 19, 17 — not 25% below 20, so the first is kept.
        assert_eq!(run(&s, &sized(&[10, 10, 9, 8])), Some(0..2));
        // Pairs: 20, 12, 4 — 12 < 16 takes over, 4 < 9.6 then.
        assert_eq!(run(&s, &sized(&[10, 10, 2, 2])), Some(2..4));
    }

    #[test]
    fn fewer_than_min_frags_is_nothing() {
        let s = with(3, 3, 0.5);
        assert_eq!(run(&s, &sized(&[10, 10, 1000, 1000])), None);
        let s = with(2, 3, 0.5);
        assert_eq!(run(&s, &sized(&[10, 10, 1000, 1000])), Some(0..2));
    }

    #[test]
    fn settings_tiledb_refuses_are_refused() {
        assert!(with(3, 2, 0.0).validate().is_err());
        assert!(with(2, 3, 1.5).validate().is_err());
        let s = FragmentSelection {
            amplification: -1.0,
            ..FragmentSelection::default()
        };
        assert!(s.validate().is_err());
        assert!(FragmentSelection::default().validate().is_ok());
    }

    #[test]
    fn dense_merges_neither_cover_older_cells_nor_amplify() {
        let d = domain();
        let ops = DomainOps::new(&d).unwrap();
        let at = |ranges: &[(i32, i32)]| -> Vec<Candidate> {
            ranges
                .iter()
                .map(|&(lo, hi)| {
                    let non_empty = r(lo, hi);
                    Candidate {
                        size: 10,
                        cells: tdb_index::dense::dense_cell_num(&d, &non_empty).unwrap(),
                        non_empty,
                    }
                })
                .collect()
        };
        let rules = |anterior: Option<NDRange>| DenseRules {
            domain: &d,
            anterior,
        };
        let s = FragmentSelection::default();
        // Adjacent whole tiles: the union is what they hold.
        let c = at(&[(1, 10), (11, 20)]);
        assert_eq!(choose(&s, &c, Some(&rules(None)), &ops), Some(0..2));
        // A gap: the union writes 30 cells for 20 held.
        let c = at(&[(1, 10), (21, 30)]);
        assert_eq!(choose(&s, &c, Some(&rules(None)), &ops), None);
        let loose = FragmentSelection {
            amplification: 1.5,
            ..FragmentSelection::default()
        };
        assert!(choose(&loose, &c, Some(&rules(None)), &ops).is_some());
        // A fragment before the window under the union: not merged.
        let c = at(&[(1, 10), (11, 20)]);
        assert_eq!(choose(&s, &c, Some(&rules(Some(r(15, 15)))), &ops), None);
        // An earlier candidate under a later run's union stops that run.
        let c = at(&[(5, 5), (1, 10), (11, 20)]);
        let s2 = with(2, 2, 0.0);
        assert_eq!(choose(&s2, &c, Some(&rules(None)), &ops), Some(0..2));
    }
}
