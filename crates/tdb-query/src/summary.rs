//! What the fragments' own summaries (fragment metadata from v12: each
//! field's min, max and null count over the fragment) say of attributes'
//! values, without reading a tile: bounds for planners (DataFusion's
//! statistics), never answers.

use crate::aggregate::{compare, FieldKind};
use crate::{QueryError, Result, Snapshot};
use std::cmp::Ordering;
use tdb_format::names::FRAGMENT_METADATA_FILE;
use tdb_format::{ArrayType, Scalar};
use tdb_fragment::fragment_metadata::Field;
use tdb_fragment::{ReadStorage, Section, SectionData};
use tdb_storage::{join, ByteRange, RangeRequest};

/// Bounds of one attribute's values over the fragments a snapshot sees.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttributeBounds {
    /// The least value a read of the snapshot can give (the attribute's
    /// datatype, raw): cells overwritten or deleted since may make it
    /// loose, never wrong. `None` where a fragment does not say (before
    /// v12, types TileDB keeps no min/max of: var, multi-value, strings).
    pub min: Option<Vec<u8>>,
    /// The greatest, as `min`.
    pub max: Option<Vec<u8>>,
    /// The nulls the fragments wrote: an estimate (overwritten and deleted
    /// cells count, unwritten dense cells do not).
    pub null_count: Option<u64>,
}

/// [`AttributeBounds`] of each of `names` (attributes of the snapshot's
/// schema; other names get no bounds): one batch of reads, one small
/// section per fragment.
pub fn attribute_bounds<S: ReadStorage + ?Sized>(
    storage: &S,
    snapshot: &Snapshot,
    names: &[&str],
) -> Result<Vec<AttributeBounds>> {
    let schema = snapshot.schema();
    let unknown = || vec![AttributeBounds::default(); names.len()];
    let mut out: Vec<Option<Acc>> = names
        .iter()
        .map(|n| {
            let a = schema.attributes.iter().find(|a| a.name == *n)?;
            let numeric = a.cell_val_num == 1 && Scalar::decode(a.datatype, &a.fill).is_some();
            numeric.then(|| Acc::new(a.datatype, &a.fill))
        })
        .collect();
    // No attribute with bounds: nothing to fetch.
    if out.iter().all(Option::is_none) {
        return Ok(unknown());
    }
    let mut requests = Vec::with_capacity(snapshot.fragments.len());
    for frag in &snapshot.fragments {
        let footer = &frag.metadata.footer;
        let name = frag.file.name.to_string();
        // Dense fragments before v16 summarize fill values as written
        // cells (and count them as nulls).
        let trusted = !footer.dense || footer.version >= 16;
        if !trusted || footer.section_offset(Section::FragmentSummaries).is_none() {
            return Ok(unknown());
        }
        let range = footer.section_range(Section::FragmentSummaries, &name)?;
        let path = join(
            &join(&snapshot.open.dir, &frag.file.path),
            FRAGMENT_METADATA_FILE,
        );
        requests.push(RangeRequest::new(
            path,
            ByteRange::new(range.start, range.end.saturating_sub(range.start)),
        ));
    }
    let answers = storage
        .read_ranges(&requests)
        .map_err(|source| QueryError::Storage {
            file: snapshot.open.dir.clone(),
            source,
        })?;
    for (frag, answer) in snapshot.fragments.iter().zip(answers) {
        let footer = &frag.metadata.footer;
        let name = frag.file.name.to_string();
        let file = join(&frag.file.path, FRAGMENT_METADATA_FILE);
        let bytes = answer.ok_or_else(|| QueryError::invalid(format!("{file}: missing")))?;
        let frag_schema = snapshot
            .open
            .schemas
            .by_name(&footer.array_schema_name)
            .map_or(schema, |e| &e.schema);
        let SectionData::Summaries(summaries) = footer.read_section(
            Section::FragmentSummaries,
            &bytes.bytes,
            snapshot.open.key(),
            frag_schema,
            &name,
        )?
        else {
            return Ok(unknown());
        };
        for (acc, name) in out.iter_mut().zip(names) {
            let Some(a) = acc else { continue };
            let index = frag_schema
                .attributes
                .iter()
                .position(|x| x.name == *name)
                .and_then(|i| footer.field_index(Field::Attribute(i)));
            match index.and_then(|i| summaries.get(i)) {
                Some(s) => a.fragment(&s.min, &s.max, s.null_count),
                // Added since: the fragment's cells read as fill values.
                None => {
                    let fill = a.fill.clone();
                    a.widen(&fill, &fill);
                    a.nulls = None;
                }
            }
        }
    }
    if schema.array_type == ArrayType::Dense {
        // Cells no fragment wrote read as fill values.
        for a in out.iter_mut().flatten() {
            let fill = a.fill.clone();
            a.widen(&fill, &fill);
        }
    }
    Ok(out
        .into_iter()
        .map(|a| a.map(Acc::finish).unwrap_or_default())
        .collect())
}

/// One attribute's bounds so far.
struct Acc {
    /// The attribute's order (the aggregates').
    kind: FieldKind,
    fill: Vec<u8>,
    min: Option<Vec<u8>>,
    max: Option<Vec<u8>>,
    /// False once a value cannot be ordered (NaN, bytes that are no value).
    ordered: bool,
    nulls: Option<u64>,
}

impl Acc {
    fn new(datatype: tdb_format::Datatype, fill: &[u8]) -> Self {
        Acc {
            kind: FieldKind {
                datatype,
                nullable: false,
                bytewise: false,
            },
            fill: fill.to_vec(),
            min: None,
            max: None,
            ordered: true,
            nulls: Some(0),
        }
    }

    /// Values between `lo` and `hi`. TileDB stores a fragment of nulls
    /// only as the datatype's greatest and least values, inverted: they
    /// never win.
    fn widen(&mut self, lo: &[u8], hi: &[u8]) {
        let kind = self.kind;
        // Whether `v` replaces `held` (it lies `want` of it); `None` when
        // they cannot be ordered.
        let replaces = |held: &Option<Vec<u8>>, v: &[u8], want: Ordering| match held {
            None => compare(kind, v, v).map(|_| true),
            Some(h) => compare(kind, v, h).map(|o| o == want),
        };
        match (
            replaces(&self.min, lo, Ordering::Less),
            replaces(&self.max, hi, Ordering::Greater),
        ) {
            (Some(new_lo), Some(new_hi)) => {
                if new_lo {
                    self.min = Some(lo.to_vec());
                }
                if new_hi {
                    self.max = Some(hi.to_vec());
                }
            }
            _ => self.ordered = false,
        }
    }

    fn fragment(&mut self, lo: &[u8], hi: &[u8], nulls: u64) {
        self.widen(lo, hi);
        self.nulls = self.nulls.map(|n| n.saturating_add(nulls));
    }

    fn finish(self) -> AttributeBounds {
        let kind = self.kind;
        let (min, max) = match (self.ordered, self.min, self.max) {
            // Nothing but nulls leaves them inverted: no bounds.
            (true, Some(lo), Some(hi)) if compare(kind, &lo, &hi) != Some(Ordering::Greater) => {
                (Some(lo), Some(hi))
            }
            _ => (None, None),
        };
        AttributeBounds {
            min,
            max,
            null_count: self.nulls,
        }
    }
}
