//! The sparse merge: the chosen fragments' cells, every version with its
//! timestamp, into one fragment in the global order.

use super::unsupported;
use crate::write::{FragmentWriter, WriteSpec, Written};
use crate::{Batch, FieldBuffer, QueryError, ReadSpec, Result, ResultLayout, Snapshot, SyncRead};
use tdb_format::names::TIMESTAMPS_FIELD;
use tdb_format::Datatype;
use tdb_fragment::LoadedFragment;
use tdb_index::order::{cmp_cells, CellOrder};
use tdb_index::DomainOps;
use tdb_storage::Storage;

/// One input fragment of a merge: its global-order read, the batch at
/// hand and the next cell in it, and the timestamp of every cell when the
/// fragment keeps none of its own.
struct Input<'a, S: Storage> {
    read: SyncRead<'a, S>,
    batch: Option<Batch>,
    at: usize,
    stamp: Option<[u8; 8]>,
}

impl<S: Storage> Input<'_, S> {
    /// Reads the next batch once this one is done; `batch` is `None` at
    /// the end.
    fn refill(&mut self) -> Result<()> {
        while self
            .batch
            .as_ref()
            .is_none_or(|b| self.at >= b.num_cells as usize)
        {
            self.at = 0;
            match self.read.next() {
                Some(b) => self.batch = Some(b?),
                None => {
                    self.batch = None;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn field(&self, k: usize) -> &FieldBuffer {
        &self
            .batch
            .as_ref()
            .expect("a refilled input has a batch")
            .fields[k]
    }
}

/// Merges fragments `chosen` of `snapshot` (indices in its time order, at
/// least two) into one, streaming: each is read alone in the global order
/// under a share of `budget` bytes and merged cell by cell into a
/// global-order write, so memory does not grow with the array. Of equal
/// coordinates the newest fragment's cells come first, as TileDB stores a
/// coordinate's versions.
pub(super) fn merge_sparse<S: Storage>(
    storage: &S,
    snapshot: &Snapshot,
    chosen: &[usize],
    budget: u64,
) -> Result<Written> {
    let open = &snapshot.open;
    let latest = open.schemas.latest();
    let frags: Vec<&LoadedFragment> = chosen.iter().map(|&i| &snapshot.fragments[i]).collect();
    let first = frags[0].file.name.t1;
    if open.directory.conditions.iter().any(|c| c.name.t2 >= first) {
        return Err(unsupported(
            "fragments with delete or update commits in the window",
        ));
    }
    if frags.iter().any(|f| f.metadata.footer.has_delete_meta) {
        return Err(unsupported("fragments with delete metadata"));
    }
    let schema = &latest.schema;
    let names: Vec<String> = schema
        .domain
        .dimensions
        .iter()
        .map(|d| d.name.clone())
        .chain(schema.attributes.iter().map(|a| a.name.clone()))
        .collect();
    let empty = || -> Result<Vec<FieldBuffer>> {
        let mut fields: Vec<FieldBuffer> = names
            .iter()
            .map(|n| {
                FieldBuffer::for_field(schema, n)
                    .map_err(|_| QueryError::invalid(format!("{n}: no such field")))
            })
            .collect::<Result<_>>()?;
        fields.push(FieldBuffer::new(
            TIMESTAMPS_FIELD,
            Datatype::UInt64,
            1,
            false,
        ));
        Ok(fields)
    };
    // Each fragment alone, every version of its cells, read in the global
    // order under its share of the budget.
    let mut alone = Vec::with_capacity(frags.len());
    for &i in chosen {
        let one = snapshot
            .sparse_fragment_alone(i)?
            .ok_or_else(|| QueryError::invalid("a fragment vanished"))?;
        alone.push(one);
    }
    let share = (budget / (frags.len() as u64 + 1)).max(1);
    let mut inputs = Vec::with_capacity(frags.len());
    for (f, one) in frags.iter().zip(&alone) {
        let own = f.metadata.footer.has_timestamps;
        let mut fields = names.clone();
        if own {
            fields.push(TIMESTAMPS_FIELD.to_owned());
        }
        let read = ReadSpec::new(fields)
            .with_layout(ResultLayout::GlobalOrder)
            .with_budget(share);
        inputs.push(Input {
            read: SyncRead::new(storage, one, read)?,
            batch: None,
            at: 0,
            stamp: (!own).then(|| f.file.name.t1.to_le_bytes()),
        });
    }
    let (t1, t2) = (first, frags[frags.len() - 1].file.name.t2);
    let spec = WriteSpec::new(Vec::new())
        .with_layout(ResultLayout::GlobalOrder)
        .with_cell_timestamps()
        .between(t1, t2);
    let mut writer = FragmentWriter::new(storage, &open.dir, latest, open.key(), &spec)?;
    let ops = DomainOps::new(&schema.domain)?;
    let kind = CellOrder::Global {
        tile_order: schema.tile_order,
        cell_order: schema.cell_order,
    };
    let part_cells = usize::try_from(schema.capacity.max(1)).unwrap_or(usize::MAX);
    let mut part = empty()?;
    let mut in_part = 0usize;
    // Merge: the least cell in the global order next; of equal
    // coordinates the newest fragment's first (its versions are stored
    // newest first too), as TileDB stores a coordinate's versions.
    loop {
        for input in inputs.iter_mut() {
            input.refill()?;
        }
        let mut best: Option<usize> = None;
        for (k, input) in inputs.iter().enumerate() {
            if input.batch.is_none() {
                continue;
            }
            best = Some(match best {
                None => k,
                Some(b) => {
                    let coord = |i: usize, d: usize| -> &[u8] {
                        let input = &inputs[if i == 0 { b } else { k }];
                        input.field(d).column().cell(input.at)
                    };
                    match cmp_cells(&schema.domain, ops.dims(), kind, &coord, 0, 1) {
                        std::cmp::Ordering::Greater | std::cmp::Ordering::Equal => k,
                        std::cmp::Ordering::Less => b,
                    }
                }
            });
        }
        let Some(b) = best else { break };
        let input = &mut inputs[b];
        for (d, out) in part.iter_mut().enumerate().take(names.len()) {
            out.extend_from(input.field(d), input.at..input.at + 1);
        }
        let stamps = &mut part[names.len()];
        match input.stamp {
            Some(t) => stamps.push(&t, true),
            None => stamps.extend_from(input.field(names.len()), input.at..input.at + 1),
        }
        input.at += 1;
        in_part += 1;
        if in_part == part_cells {
            writer.submit(&part)?;
            part.iter_mut().for_each(FieldBuffer::clear);
            in_part = 0;
        }
    }
    if in_part > 0 {
        writer.submit(&part)?;
    }
    writer.finish()
}
