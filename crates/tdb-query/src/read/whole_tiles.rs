//! Which sparse tiles an aggregation answers from their tile metadata when
//! a budget's pieces, or a merge of spilled runs, see their cells a part
//! at a time. TileDB decides per tile, whatever its memory budget: its
//! global-order reader (unordered reads without duplicates use it too)
//! answers a tile from metadata where every cell of it is kept and its
//! merge of the fragments takes the tile in one slab; its unordered reader
//! with duplicates, where every cell is kept. Answers differ only under
//! lossy filters (FLOAT_SCALE: the metadata holds the values as written)
//! and in a float sum's last bits.
//!
//! A piece (`SparseScan::merged_whole`) or the spilled merge
//! ([`MergeWatch`]) folds the cells of such a tile apart
//! ([`super::BatchNotes::pending`]) until the tile settles: answered from
//! its metadata (`Event::FromMetadata`), or from the cells folded apart
//! (`Event::FromCells`).

/// Whether a read over `plans` merges fragments, so that another
/// fragment's cells may cut a tile: only then must pieces be intervals of
/// the merge (`Reader::cut_layout`) and a tile's parts meet across them
/// (`SparseScan::merged_whole`).
pub(crate) fn merges_fragments(plans: &[super::plan::FragPlan]) -> bool {
    plans.len() > 1
}

/// A sparse tile an aggregation may answer from its metadata, as found by
/// the pieces holding parts of it (each piece its share, the reader their
/// sum): the tile is answered so once every cell of it was seen and kept,
/// and no piece found the merge cut it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pending {
    /// Its candidate cells (in the subarray and the window).
    pub seen: u64,
    /// Those kept (the newest version, undeleted, passing the condition).
    pub kept: u64,
    /// No piece found it cut.
    pub ok: bool,
}

impl Pending {
    /// Nothing found of the tile yet.
    pub(crate) const NONE: Pending = Pending {
        seen: 0,
        kept: 0,
        ok: true,
    };

    /// Whether a tile of `cells` cells, all seen, answers from its
    /// metadata: every cell kept, never found cut.
    pub(crate) fn whole(&self, cells: u64) -> bool {
        self.ok && self.kept == cells
    }

    /// Whether the answer for a tile of `cells` cells is known: every
    /// cell seen, or the tile can no longer be whole (found cut, or a cell
    /// of it dropped), so its cells folded apart need wait no longer.
    pub(crate) fn settled(&self, cells: u64) -> bool {
        !self.ok || self.kept < self.seen || self.seen >= cells
    }

    /// This share added to `self`'s.
    pub(crate) fn add(&mut self, share: Pending) {
        self.seen = self.seen.saturating_add(share.seen);
        self.kept = self.kept.saturating_add(share.kept);
        self.ok &= share.ok;
    }
}

/// What a piece's scan found of the tiles an aggregation may answer from
/// their metadata (`SparseScan::whole`).
#[derive(Debug, Default)]
pub(crate) struct MdFound {
    /// Tiles held and kept whole: answered, their cells left out.
    pub answered: Vec<(usize, u64)>,
    /// This piece's share of tiles it holds part of (or, not ok, of the
    /// last piece's open tile that it found cut).
    pub parts: Vec<((usize, u64), Pending)>,
    /// The tile whose cells end this piece's merge, which the next piece
    /// may go on with.
    pub open: Option<(usize, u64)>,
}

/// Tiles settled, each (plan, tile): answered from their metadata
/// (`whole`), or from their cells folded apart.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Settled {
    pub whole: Vec<(usize, u64)>,
    pub cells: Vec<(usize, u64)>,
}

/// Where a fragment's tiles may answer from metadata: how many cells each
/// holds (its capacity, the last tile its own count).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TileCells {
    pub capacity: u64,
    pub tiles: u64,
    pub last: u64,
}

/// TileDB's global-order merge followed coordinate by coordinate over a
/// merge of spilled runs (in the global order, every version of a
/// coordinate together, newest first), by the rule
/// `SparseScan::merged_whole` applies to a piece: a tile is whole unless
/// another tile's cell comes after its first and before its last, or an
/// older version of a coordinate sits beside one of its cells other than
/// its first (beside its only cell is allowed). A fragment's cells are
/// stored in that order, so they come tile after tile: one tile of each
/// is open at a time, and a cell of its next ends it (a map of open tiles,
/// hashed a cell, cost a tenth of a spilled aggregation).
pub(crate) struct MergeWatch {
    /// Per plan, `None` where its tiles cannot answer from metadata.
    plans: Vec<Option<TileCells>>,
    /// Per plan, its open tile and what the merge found of it so far.
    open: Vec<Option<(u64, Pending)>>,
    /// The tile whose cell led the last coordinate.
    current: Option<(usize, u64)>,
    /// Tiles ended, or found cut, since the last [`MergeWatch::flush`],
    /// with what the merge found of them (each tile once).
    finished: Vec<((usize, u64), Pending)>,
    /// The last coordinate's newest version's tile, and whether its cells
    /// fold apart: the result cell asked about next, mostly.
    head: Option<((usize, u64), bool)>,
    /// The batch's runs of cells folded apart (see
    /// [`super::BatchNotes::pending`]).
    pending: Vec<(usize, usize, (usize, u64))>,
}

impl MergeWatch {
    pub(crate) fn new(plans: Vec<Option<TileCells>>) -> Self {
        MergeWatch {
            open: vec![None; plans.len()],
            plans,
            current: None,
            finished: Vec::new(),
            head: None,
            pending: Vec::new(),
        }
    }

    /// The cells of `tile`, where it may answer from metadata.
    fn cells(&self, (fi, t): (usize, u64)) -> Option<u64> {
        let c = self.plans.get(fi).copied().flatten()?;
        Some(match t.saturating_add(1) == c.tiles {
            true => c.last,
            false => c.capacity,
        })
    }

    /// `tile`'s state, where it is open.
    fn open_mut(&mut self, (fi, t): (usize, u64)) -> Option<&mut Pending> {
        match self.open.get_mut(fi) {
            Some(Some((open, p))) if *open == t => Some(p),
            _ => None,
        }
    }

    /// The merge cut `tile` before its last cell: it answers from cells
    /// (settled at once, so its cells folded apart so far count).
    fn cut(&mut self, tile: (usize, u64)) {
        if let Some(p) = self.open_mut(tile) {
            if p.ok {
                p.ok = false;
                let p = *p;
                self.finished.push((tile, p));
            }
        }
    }

    /// Plan `fi`'s open tile ends: settled unless found cut before.
    fn end(&mut self, fi: usize) {
        if let Some((t, p)) = self.open.get_mut(fi).and_then(Option::take) {
            if p.ok {
                self.finished.push(((fi, t), p));
            }
        }
    }

    /// One cell of `tile` seen (`kept`: and kept), where it is watched;
    /// whether its cells fold apart.
    fn seen(&mut self, tile: (usize, u64), kept: bool) -> bool {
        let Some(n) = self.cells(tile) else {
            return false;
        };
        if self.open_mut(tile).is_none() {
            self.end(tile.0);
            if let Some(slot) = self.open.get_mut(tile.0) {
                *slot = Some((tile.1, Pending::NONE));
            }
        }
        let Some(p) = self.open_mut(tile) else {
            return false;
        };
        p.add(Pending {
            seen: 1,
            kept: u64::from(kept),
            ok: true,
        });
        let (seen, ok) = (p.seen, p.ok);
        // Its last cell: settled at the next flush, its cells in this
        // batch folded apart until then.
        if seen >= n {
            self.end(tile.0);
        }
        ok
    }

    /// The versions of one coordinate, newest first: each one's tile and
    /// whether it is kept.
    pub(crate) fn coordinate(&mut self, versions: &[((usize, u64), bool)]) {
        let Some((&(head, kept), older)) = versions.split_first() else {
            return;
        };
        // The slab the merge was taking ends here unless it goes on.
        if let Some(c) = self.current.filter(|&c| c != head) {
            self.cut(c);
        }
        // Older versions beside a cell other than its first.
        if !older.is_empty() && self.open_mut(head).is_some_and(|p| p.seen > 0) {
            self.cut(head);
        }
        let folds = self.seen(head, kept);
        for &(tile, _) in older {
            self.seen(tile, false);
            self.cut(tile);
        }
        self.current = Some(head);
        self.head = Some((head, folds));
    }

    /// Whether a result cell of `tile` is folded apart.
    pub(crate) fn folds_apart(&self, tile: (usize, u64)) -> bool {
        match (self.head, self.open.get(tile.0)) {
            (Some((t, folds)), _) if t == tile => folds,
            (_, Some(Some((t, p)))) if *t == tile.1 => p.ok,
            // (Ended in this batch: -0.0 beside 0.0, a group's second
            // result.)
            _ => (self.finished.iter()).any(|(t, p)| *t == tile && p.ok),
        }
    }

    /// Once the batch holding the cells seen so far is out: the tiles
    /// settled since the last flush (`last`: every tile), answered from
    /// metadata (whole) or from their cells.
    pub(crate) fn flush(&mut self, last: bool) -> Settled {
        if last {
            (0..self.open.len()).for_each(|fi| self.end(fi));
        }
        self.head = None;
        let mut settled = Settled::default();
        for (tile, p) in std::mem::take(&mut self.finished) {
            match p.whole(self.cells(tile).unwrap_or(0)) {
                true => settled.whole.push(tile),
                false => settled.cells.push(tile),
            }
        }
        settled
    }

    /// The runs of a batch's cells folded apart, as the merge marks them.
    pub(crate) fn pending(&mut self) -> &mut Vec<(usize, usize, (usize, u64))> {
        &mut self.pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fragment 0: tiles of 3 cells (2 in its last of 2); fragment 1 the same.
    fn watch() -> MergeWatch {
        let c = TileCells {
            capacity: 3,
            tiles: 2,
            last: 2,
        };
        MergeWatch::new(vec![Some(c), Some(c)])
    }

    fn run(w: &mut MergeWatch, coords: &[&[((usize, u64), bool)]]) -> Settled {
        for c in coords {
            w.coordinate(c);
        }
        w.flush(true)
    }

    fn settled(whole: &[(usize, u64)], cells: &[(usize, u64)]) -> Settled {
        Settled {
            whole: whole.to_vec(),
            cells: cells.to_vec(),
        }
    }

    #[test]
    fn a_tile_settles_once_its_answer_is_known() {
        let share = |seen, kept, ok| Pending { seen, kept, ok };
        let mut p = Pending::NONE;
        p.add(share(2, 2, true));
        assert!(!p.settled(4), "two cells of four seen, all kept");
        let mut dropped = p;
        dropped.add(share(1, 0, true));
        assert!(dropped.settled(4) && !dropped.whole(4), "a cell dropped");
        let mut cut = p;
        cut.add(share(0, 0, false));
        assert!(cut.settled(4) && !cut.whole(4), "found cut");
        p.add(share(2, 2, true));
        assert!(p.settled(4) && p.whole(4), "every cell seen and kept");
    }

    const A0: (usize, u64) = (0, 0);
    const A1: (usize, u64) = (0, 1);
    const B0: (usize, u64) = (1, 0);

    #[test]
    fn tiles_merged_in_one_slab_are_whole() {
        let mut w = watch();
        let got = run(
            &mut w,
            &[
                &[(A0, true)],
                &[(A0, true)],
                &[(A0, true)],
                &[(B0, true)],
                &[(B0, true)],
            ],
        );
        assert_eq!(got, settled(&[A0], &[B0]), "B0's third cell was never seen");
    }

    #[test]
    fn another_tile_between_first_and_last_cuts() {
        let mut w = watch();
        let coords: &[&[((usize, u64), bool)]] = &[
            &[(A0, true)],
            &[(B0, true)],
            &[(A0, true)],
            &[(A0, true)],
            &[(B0, true)],
            &[(B0, true)],
        ];
        // A0 is cut at once (settled first), B0 when A0 comes between.
        assert_eq!(run(&mut w, coords), settled(&[], &[A0, B0]));
    }

    #[test]
    fn older_versions_beside_the_first_cell_only() {
        // Beside A0's first cell: whole; beside A1's second: cut.
        let mut w = watch();
        let coords: &[&[((usize, u64), bool)]] = &[
            &[(A0, true), (B0, false)],
            &[(A0, true)],
            &[(A0, true)],
            &[(A1, true)],
            &[(A1, true), (B0, false)],
        ];
        // B0's cells are older versions: cut, and not kept.
        assert_eq!(run(&mut w, coords), settled(&[A0], &[B0, A1]));
    }

    #[test]
    fn a_cell_not_kept_answers_from_cells() {
        let mut w = watch();
        w.coordinate(&[(A1, true)]);
        assert!(w.folds_apart(A1), "may yet be whole: folded apart");
        w.coordinate(&[(A1, false)]);
        assert_eq!(w.flush(false), settled(&[], &[A1]));
        assert!(!w.folds_apart(A1));
    }
}
