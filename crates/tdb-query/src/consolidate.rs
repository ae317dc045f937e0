//! Fragment consolidation and vacuuming, as TileDB 2.30 does them for
//! sparse arrays (so far).
//!
//! Consolidating merges the fragments a window sees into one whose name
//! spans their timestamps: every cell of every fragment, each with its
//! timestamp (the fragment's start, or its own where the fragment already
//! keeps per-cell timestamps), in the global order, a coordinate's
//! versions newest first, as TileDB writes them; then the fragment's commit
//! and, last, a vacuum list `__commits/<name>.vac` naming the fragments it
//! replaces. Reads at every time answer as before (the inputs stay visible
//! to windows that end inside the merged span, the per-cell timestamps
//! answer the rest). Vacuuming then writes an ignore file for commits only
//! a `.con` holds, deletes each replaced fragment's commit and directory,
//! and the vacuum lists last.
//!
//! Not yet: dense arrays, fragments under older schemas, delete commits in
//! the window (TileDB's delete metadata), TileDB's step and amplification
//! selection (every fragment of the window is merged), and a memory budget
//! (the cells are merged in memory).

use crate::write::{FragmentWriter, WriteSpec, Written};
use crate::{FieldBuffer, QueryError, ReadSpec, Result, ResultLayout, Snapshot, SyncRead};
use tdb_format::names::{COMMITS_DIR, IGN_EXT, TIMESTAMPS_FIELD, VAC_EXT};
use tdb_format::{ArrayType, Datatype, FormatVersion, TimestampedName};
use tdb_fragment::{IgnoreFile, OpenArray, TimeWindow, VacuumFile};
use tdb_schema::SchemaHistory;
use tdb_storage::{join, Storage};

/// What a fragment consolidation wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FragmentConsolidation {
    /// The new fragment.
    pub written: Written,
    /// Its vacuum list (`__commits/<name>.vac`).
    pub vacuum_list: String,
    /// The fragments it replaces.
    pub replaced: Vec<String>,
}

fn unsupported(what: &str) -> QueryError {
    QueryError::Unsupported(format!("consolidating {what}"))
}

/// Consolidates the fragments `snapshot` sees (at least two) into one;
/// `None` with fewer.
pub fn consolidate_fragments<S: Storage>(
    storage: &S,
    snapshot: &Snapshot,
) -> Result<Option<FragmentConsolidation>> {
    let open = &snapshot.open;
    let latest = open.schemas.latest();
    if latest.schema.array_type == ArrayType::Dense {
        return Err(unsupported("dense fragments"));
    }
    if !open.directory.conditions.is_empty() {
        return Err(unsupported(
            "fragments with delete or update commits in the window",
        ));
    }
    let frags = &snapshot.fragments;
    if frags.len() < 2 {
        return Ok(None);
    }
    if frags.iter().any(|f| {
        f.metadata.footer.array_schema_name != latest.name || f.metadata.footer.has_delete_meta
    }) {
        return Err(unsupported(
            "fragments written under older schemas or with delete metadata",
        ));
    }
    let schema = &latest.schema;
    let names: Vec<String> = schema
        .domain
        .dimensions
        .iter()
        .map(|d| d.name.clone())
        .chain(schema.attributes.iter().map(|a| a.name.clone()))
        .collect();
    let mut merged: Vec<FieldBuffer> = names
        .iter()
        .map(|n| {
            FieldBuffer::for_field(schema, n)
                .map_err(|_| QueryError::invalid(format!("{n}: no such field")))
        })
        .collect::<Result<_>>()?;
    let mut stamps = FieldBuffer::new(TIMESTAMPS_FIELD, Datatype::UInt64, 1, false);
    // Newest fragment first: the writer's sort keeps a coordinate's
    // versions in input order, and TileDB stores them newest first.
    for i in (0..frags.len()).rev() {
        let f = &frags[i];
        let mut one = snapshot
            .fragment_alone(i)
            .ok_or_else(|| QueryError::invalid("a fragment vanished"))?;
        let own = f.metadata.footer.has_timestamps;
        // Every version of a cell, not the latest alone.
        let entries = one.open.schemas.entries().iter().cloned().map(|mut e| {
            e.schema.allows_dups = true;
            e
        });
        one.open.schemas = SchemaHistory::new(entries.collect())
            .map_err(|e| QueryError::invalid(e.to_string()))?;
        let mut fields = names.clone();
        if own {
            fields.push(TIMESTAMPS_FIELD.to_owned());
        }
        let read = ReadSpec::new(fields).with_layout(ResultLayout::Unordered);
        for batch in SyncRead::new(storage, &one, read)? {
            let batch = batch?;
            let n = batch.num_cells as usize;
            for (m, b) in merged.iter_mut().zip(&batch.fields) {
                m.extend_from(b, 0..n);
            }
            match batch.fields.get(names.len()) {
                Some(t) if own => stamps.extend_from(t, 0..n),
                _ => {
                    let t1 = f.file.name.t1.to_le_bytes();
                    for _ in 0..n {
                        stamps.push(&t1, true);
                    }
                }
            }
        }
    }
    merged.push(stamps);
    let (t1, t2) = (frags[0].file.name.t1, frags[frags.len() - 1].file.name.t2);
    let spec = WriteSpec::new(merged)
        .with_layout(ResultLayout::Unordered)
        .between(t1, t2);
    let written = FragmentWriter::new(storage, &open.dir, latest, open.key(), &spec)?.finish()?;
    // The vacuum list last: until it is there, the inputs stay visible.
    let replaced: Vec<String> = frags.iter().map(|f| f.file.path.clone()).collect();
    let list = VacuumFile::new(replaced.iter().map(|p| format!("/{p}")).collect());
    let vacuum_list = format!("{COMMITS_DIR}/{}{VAC_EXT}", written.fragment);
    super::write::write(storage, &join(&open.dir, &vacuum_list), list.write())?;
    Ok(Some(FragmentConsolidation {
        written,
        vacuum_list,
        replaced,
    }))
}

/// Vacuums the fragments consolidations replaced in the array at `dir`
/// (over its whole history): an ignore file for commits only a `.con`
/// holds, then each fragment's commit and directory, then the vacuum
/// lists. Returns how many fragments went.
pub fn vacuum_fragments<S: Storage>(
    storage: &S,
    dir: &str,
    key: Option<&[u8; 32]>,
) -> Result<usize> {
    let all = OpenArray::open(storage, dir, TimeWindow::ALL, key)?;
    let f = all.directory.filtered_fragments(true)?;
    let storage_err = |file: &str, e| QueryError::Storage {
        file: file.to_owned(),
        source: e,
    };
    if let (Some(first), Some(last)) = (f.commits_to_ignore.first(), f.commits_to_ignore.last()) {
        let stamp = |p: &str| {
            TimestampedName::parse(p.rsplit('/').next().unwrap_or(p))
                .map_err(|e| QueryError::invalid(format!("{p}: {e}")))
        };
        let name = TimestampedName::generate(
            stamp(first)?.t1,
            stamp(last)?.t2,
            Some(FormatVersion::WRITTEN),
        )
        .map_err(|e| QueryError::invalid(e.to_string()))?;
        let path = join(dir, &format!("{COMMITS_DIR}/{name}{IGN_EXT}"));
        let ign = IgnoreFile::new(f.commits_to_ignore.clone());
        super::write::write(storage, &path, ign.write())?;
    }
    // Each replaced fragment's commit file, wherever it is listed (one a
    // `.con` also holds is ignored from now on, but may exist on its own
    // too), then its directory: a directory without its commit is never
    // read.
    for commit in f.commits_to_vacuum.iter().chain(&f.commits_to_ignore) {
        let path = join(dir, commit);
        storage.delete(&path).map_err(|e| storage_err(&path, e))?;
    }
    for frag in &f.fragments_to_vacuum {
        let path = join(dir, frag);
        storage
            .delete_prefix(&path)
            .map_err(|e| storage_err(&path, e))?;
    }
    for vac in &f.vac_files_to_vacuum {
        let path = join(dir, vac);
        storage.delete(&path).map_err(|e| storage_err(&path, e))?;
    }
    Ok(f.fragments_to_vacuum.len())
}
