//! A read's spilled runs, of either kind, and their merge: a sparse read's
//! cells as records merged in its result order (`super::spill`, an
//! external sort), a dense read's tile lines as stretches copied to their
//! places in the result (`super::stretches`).

use super::fields::FieldInfo;
use super::spill::{Merge, Spill};
use super::stretches::{StretchMerge, Stretches};
use super::Reader;
use crate::batch::{Batch, FieldBuffer};
use crate::Result;

/// What a read that spills has written so far.
pub(crate) enum Spilled {
    Records(Spill),
    Stretches(Stretches),
}

/// The merge of a read's spilled runs, handing out its batches.
pub(crate) enum Merging {
    Records(Merge),
    Stretches(StretchMerge),
}

impl Merging {
    /// The next batch of `fields` (validity as bits with `packed`), or
    /// `None` once every cell is out; a dense read's written into the
    /// caller's `recycled` buffers where they fit.
    pub fn next_batch(
        &mut self,
        fields: &[FieldInfo],
        packed: bool,
        recycled: &mut Vec<FieldBuffer>,
    ) -> Result<Option<Batch>> {
        match self {
            Merging::Records(m) => m.next_batch(fields, packed),
            Merging::Stretches(m) => m.next_batch(fields, packed, std::mem::take(recycled)),
        }
    }
}

impl Reader {
    /// The merge of what the read spilled, in its result order. The
    /// stretches' runs are merged down (if they must be) through the whole
    /// budget: no tile is held any more, and no batch yet.
    pub(super) fn merge(&self, spilled: Spilled) -> Result<Merging> {
        let cells = self.batch_cells();
        Ok(match spilled {
            Spilled::Records(spill) => {
                tracing::debug!(runs = spill.len(), "merging spilled runs");
                let dedup = !self.snapshot.schema().allows_dups;
                let merge = spill.merge(dedup, cells)?;
                Merging::Records(match self.md_kept && dedup {
                    true => merge.with_watch(self.merge_watch()),
                    false => merge,
                })
            }
            Spilled::Stretches(st) => {
                let memory = self.tile_share.saturating_add(self.batch_share);
                let memory = usize::try_from(memory).unwrap_or(usize::MAX);
                Merging::Stretches(st.merge(self.dense_box()?, cells, memory)?)
            }
        })
    }
}
