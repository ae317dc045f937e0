//! `copy`: an array of any format version rewritten at the written version
//! (v22), fragment by fragment, so time travel and deletes answer the same:
//! every schema with its timestamps (each fragment is written with the
//! schema in force when it was written), the enumerations, every array
//! metadata file, every fragment committed and not yet vacuumed (those a
//! consolidation replaced too) with its timestamp range, every vacuum list
//! naming the copies of what it named, and every delete commit as a
//! delete. It is also how arrays are re-encrypted (`to_key`) or decrypted.

use crate::{Array, Error, Group, OpenOptions, Result};
use tdb_format::{names, ArrayType};
use tdb_fragment::{
    write_delete, write_enumeration, write_group_details, write_metadata, write_schema,
    FragmentError, GroupDetails, MetadataFile, ObjectKind, ReadStorage, TimeWindow,
    TimestampedFile,
};
use tdb_query::write::FragmentWriter;
use tdb_query::{ReadSpec, ResultLayout, Snapshot, Subarray, WriteSpec};
use tdb_storage::{join, last_component, Storage};

/// What a copy wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CopySummary {
    /// Schema files.
    pub schemas: usize,
    /// Fragments, with their cells.
    pub fragments: Vec<(String, u64)>,
    /// Array metadata files.
    pub metadata_files: usize,
    /// Delete commits.
    pub deletes: usize,
    /// Fragment vacuum lists (consolidations not yet vacuumed).
    pub vacuum_lists: usize,
    /// Dimension labels' arrays, each copied whole.
    pub labels: usize,
}

/// Copies `src` (opened over its whole history) into a new array at `dir`
/// of `dst`, encrypted with `to_key` (or not). Refuses a `dir` that already
/// holds an array. Fragments consolidated with timestamps keep every
/// version of a cell with its timestamp; sparse fragments of dense arrays
/// (written by TileDB before 2.5) are copied as such, and fragments
/// merged over delete commits keep their delete metadata (and name the
/// copied commits as processed). Update commits are not copied yet: such
/// arrays are refused rather than copied wrong.
pub fn copy<S: ReadStorage, D: Storage>(
    src: &Array<S>,
    dst: &D,
    dir: &str,
    to_key: Option<&[u8; 32]>,
) -> Result<CopySummary> {
    copy_snapshot(&src.storage, &src.snapshot, dst, dir, to_key)
}

/// [`copy`] of the array `snapshot` opened in `storage` (its labels'
/// arrays opened alike, at its window).
fn copy_snapshot<S: ReadStorage, D: Storage>(
    storage: &S,
    snapshot: &Snapshot,
    dst: &D,
    dir: &str,
    to_key: Option<&[u8; 32]>,
) -> Result<CopySummary> {
    // Every fragment, those consolidations replaced included: a read of
    // the copy at an earlier time sees them as a read of the source does.
    let history = snapshot.with_history(storage)?;
    let snap = &history;
    let open = &snap.open;
    let key = open.key();
    let unsupported = |what: &str| Error::Unsupported(format!("copying {what}"));
    if open.directory.conditions.iter().any(|c| c.is_update) {
        return Err(unsupported("update commits"));
    }
    if tdb_fragment::object_kind(dst, dir)?.is_some() {
        return Err(Error::Write(FragmentError::invalid(
            if dir.is_empty() { "." } else { dir },
            "directory",
            "already holds a TileDB object",
        )));
    }
    let mut summary = CopySummary::default();
    // Enumerations of every schema, then the schemas (the schema file is
    // what makes the directory an array).
    let mut written_enums = std::collections::BTreeSet::new();
    for entry in open.schemas.entries() {
        for e in &entry.schema.enumerations {
            if written_enums.insert(e.path.clone()) {
                let en = tdb_fragment::load_enumeration(storage, &open.dir, &e.path, key)?;
                write_enumeration(dst, dir, &en, to_key).map_err(Error::Write)?;
            }
        }
    }
    // The arrays of the dimension labels the array stores, each copied
    // whole at the same window (before the schema files, which make the
    // directory an array).
    for label in &open.schema().schema.dimension_labels {
        if label.is_external {
            continue;
        }
        let from = join(&open.dir, &label.uri);
        let labels = Snapshot::load(storage, &from, open.directory.window, key)?;
        copy_snapshot(storage, &labels, dst, &join(dir, &label.uri), to_key)?;
        summary.labels += 1;
    }
    let mut names = std::collections::HashMap::new();
    for entry in open.schemas.entries() {
        let t = entry
            .timestamps
            .as_ref()
            .map_or((0, 0), |n| n.timestamp_range());
        let new = write_schema(dst, dir, &entry.schema, t, to_key).map_err(Error::Write)?;
        names.insert(entry.name.clone(), new);
        summary.schemas += 1;
    }
    // Array metadata, file by file with the same timestamps (read in one
    // batch), those a consolidation superseded too, and the vacuum lists
    // naming their copies: opens at earlier times read them as before.
    let mut meta_copied = std::collections::HashMap::new();
    for (f, bytes) in open.all_metadata_files(storage)? {
        let file = MetadataFile::parse(&f.path, &bytes, key)?;
        let written = write_metadata(dst, dir, &file, f.name.timestamp_range(), to_key)
            .map_err(Error::Write)?;
        let Some(written) = written else {
            continue;
        };
        meta_copied.insert(f.path.clone(), written);
        summary.metadata_files += 1;
    }
    for (vac, replaced) in &open.directory.array_metadata_vacuum_lists {
        let replaced: Vec<String> = (replaced.iter())
            .filter_map(|p| meta_copied.get(p).cloned())
            .collect();
        if replaced.is_empty() {
            continue;
        }
        let replacing = copied_list_name(&meta_copied, vac)?;
        tdb_fragment::write_vacuum_list(dst, dir, &replacing, &replaced).map_err(Error::Write)?;
        summary.vacuum_lists += 1;
    }
    // Deletes, as deletes, with their timestamps (before the fragments,
    // whose processed conditions name them).
    // Each commit's new path by its old condition marker, for the processed
    // conditions of fragments merged over them.
    let mut renamed = std::collections::HashMap::new();
    for (c, del) in open.delete_commits(storage)? {
        let new =
            write_delete(dst, dir, &del, c.name.timestamp_range(), to_key).map_err(Error::Write)?;
        renamed.insert(c.marker.clone(), new);
        summary.deletes += 1;
    }
    let frags: Vec<&tdb_fragment::LoadedFragment> = snap.fragments.iter().collect();
    let processed = open.processed_conditions(storage, &frags)?;
    // Fragments, oldest first, each read alone (no deletes applied, no
    // newer fragment over it) with the schema it was written with. Each
    // one's new path by its old one, for the vacuum lists.
    let mut copied = std::collections::HashMap::new();
    for ((fi, f), applied) in snap.fragments.iter().enumerate().zip(processed) {
        let footer = &f.metadata.footer;
        let dense_frag = footer.dense;
        let schema_entry = open
            .schemas
            .by_name(&footer.array_schema_name)
            .unwrap_or_else(|| open.schema());
        let target = names
            .get(&schema_entry.name)
            .ok_or_else(|| unsupported("a fragment whose schema is missing"))?;
        // A sparse fragment of a dense array (TileDB before 2.5 wrote them;
        // 2.30 still reads them) is written as one: its cells in the global
        // order of the array's space tiles, `capacity` to a tile, under
        // the array's schema (the footer names it).
        let sparse_in_dense = schema_entry.schema.array_type == ArrayType::Dense && !dense_frag;
        let sparse_view;
        let target = if sparse_in_dense {
            let mut view = target.clone();
            view.schema.array_type = ArrayType::Sparse;
            sparse_view = view;
            &sparse_view
        } else {
            target
        };
        // A sparse fragment is read as one (every cell it stores, versions
        // with their timestamps included); a dense one over its domain.
        let one = if dense_frag {
            snap.fragment_alone(fi)
        } else {
            snap.sparse_fragment_alone(fi)?
        }
        .ok_or_else(|| unsupported("a fragment that vanished"))?;
        let with_timestamps = footer.has_timestamps;
        let (t1, t2) = f.file.name.timestamp_range();
        let schema = one.schema().clone();
        let fields: Vec<String> = schema
            .attributes
            .iter()
            .map(|a| a.name.clone())
            .chain(
                (!dense_frag)
                    .then(|| schema.domain.dimensions.iter().map(|d| d.name.clone()))
                    .into_iter()
                    .flatten(),
            )
            .chain(with_timestamps.then(|| names::TIMESTAMPS_FIELD.to_owned()))
            .chain(
                footer
                    .has_delete_meta
                    .then(|| {
                        [
                            names::DELETE_TIMESTAMPS_FIELD,
                            names::DELETE_CONDITION_INDEX_FIELD,
                        ]
                        .map(str::to_owned)
                    })
                    .into_iter()
                    .flatten(),
            )
            .collect();
        let mut read = ReadSpec::new(fields.clone());
        let applied = applied
            .into_iter()
            .map(|m| renamed.get(&m).cloned().unwrap_or(m))
            .collect();
        let mut write = WriteSpec::new(Vec::new())
            .between(t1, t2)
            .with_processed_conditions(applied);
        let merged = dense_frag && t1 < t2;
        let one = std::sync::Arc::new(one);
        let written = if dense_frag && !merged {
            // One row-major write of its non-empty domain, given in bands
            // of whole space tiles, each read on its own: the copy holds
            // one band, not the fragment.
            let ned = footer
                .non_empty_domain
                .clone()
                .ok_or_else(|| unsupported("a dense fragment without a non-empty domain"))?;
            let write = write
                .with_subarray(subarray_of(&ned))
                .with_layout(ResultLayout::RowMajor);
            let mut writer = FragmentWriter::new(dst, dir, target, to_key, &write)?;
            for band in &tdb_query::write::dense_bands(&schema, &ned)? {
                let spec = (read.clone())
                    .with_subarray(subarray_of(band))
                    .with_layout(ResultLayout::RowMajor);
                let mut all = tdb_query::Batch::default();
                for b in tdb_query::SyncRead::new(storage, std::sync::Arc::clone(&one), spec)? {
                    all.append(&b?);
                }
                writer.submit_band(band, &all.fields)?;
            }
            writer.finish()?
        } else if !dense_frag && tdb_query::stored_out_of_order(&schema, f.file.format_version()) {
            // Stored in an order TileDB no longer sorts by (TileDB 2.2's
            // Hilbert, 1.x's real coordinates; no timestamps or delete
            // metadata that old): read whole, sorted into today's order by
            // the write. (A global-order read returns them as stored.)
            let read = read.with_layout(ResultLayout::Unordered);
            let mut write = write.with_layout(ResultLayout::Unordered);
            let mut all = tdb_query::Batch::default();
            for b in tdb_query::SyncRead::new(storage, one, read)? {
                all.append(&b?);
            }
            write.fields = all.fields;
            tdb_query::write_fragment(dst, dir, target, to_key, &write)?
        } else {
            if merged {
                // A dense fragment spanning several times is a merge: its
                // tiles hold what the merge read past its non-empty domain
                // (fill values), not the zeros a write leaves there, so it
                // is laid out again as a merge, streamed.
                let ned = footer
                    .non_empty_domain
                    .as_ref()
                    .ok_or_else(|| unsupported("a dense fragment without a non-empty domain"))?;
                (read, write) = tdb_query::dense_merge_specs(
                    &schema,
                    ned,
                    (t1, t2),
                    tdb_query::DEFAULT_BUDGET,
                )?;
            } else {
                // Sparse: streamed, batch by batch in the global order (the
                // stored order, versions included) into a global-order write.
                read = read.with_layout(ResultLayout::GlobalOrder);
                write = write.with_layout(ResultLayout::GlobalOrder);
                if with_timestamps {
                    write = write.with_cell_timestamps();
                }
                if footer.has_delete_meta {
                    write = write.with_delete_metadata();
                }
            }
            let mut writer = FragmentWriter::new(dst, dir, target, to_key, &write)?;
            for b in tdb_query::SyncRead::new(storage, one, read)? {
                writer.submit(&b?.fields)?;
            }
            writer.finish()?
        };
        copied.insert(
            f.file.path.clone(),
            format!("{}/{}", names::FRAGMENTS_DIR, written.fragment),
        );
        summary
            .fragments
            .push((written.fragment.to_string(), written.cells));
    }
    // Vacuum lists, with their timestamps (a list hides what it names only
    // in windows that hold it), naming the copies of what they named;
    // each is named after the copy of the fragment it is named after.
    for (vac, replaced) in open.directory.fragment_vacuum_lists()? {
        let replaced: Vec<String> = replaced
            .iter()
            .filter_map(|p| copied.get(p).cloned())
            .collect();
        if replaced.is_empty() {
            continue;
        }
        let stem = vac.file_name().trim_end_matches(names::VAC_EXT);
        let replacing = match copied.iter().find(|(old, _)| last_component(old) == stem) {
            Some((_, new)) => format!("{}/{}", names::COMMITS_DIR, last_component(new)),
            None => {
                let (t1, t2) = vac.name.timestamp_range();
                let name = tdb_format::TimestampedName::generate(
                    t1,
                    t2,
                    Some(tdb_format::FormatVersion::WRITTEN),
                )
                .map_err(|e| Error::Unsupported(format!("naming a vacuum list: {e}")))?;
                format!("{}/{name}", names::COMMITS_DIR)
            }
        };
        tdb_fragment::write_vacuum_list(dst, dir, &replacing, &replaced).map_err(Error::Write)?;
        summary.vacuum_lists += 1;
    }
    Ok(summary)
}

/// The name (without `.vac`) of the copy of metadata vacuum list `vac`:
/// the copy of the file it is named after (`copied`: old path to new), or
/// where a merge of deletions alone wrote no file, its list alone emptying
/// the map, a new name with its timestamps.
fn copied_list_name(
    copied: &std::collections::HashMap<String, String>,
    vac: &TimestampedFile,
) -> Result<String> {
    if let Some(new) = copied.get(vac.path.trim_end_matches(names::VAC_EXT)) {
        return Ok(new.clone());
    }
    let (t1, t2) = vac.name.timestamp_range();
    let name = tdb_format::TimestampedName::generate(t1, t2, None)
        .map_err(|e| Error::Unsupported(format!("naming a vacuum list: {e}")))?;
    Ok(format!("{}/{name}", names::METADATA_DIR))
}

/// A subarray of one range a dimension.
fn subarray_of(nd: &tdb_schema::NDRange) -> Subarray {
    let mut sub = Subarray::new(nd.len());
    for (d, r) in nd.iter().enumerate() {
        sub.add_range(d, r.clone());
    }
    sub
}

/// What a group copy wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupCopySummary {
    /// Group metadata files, this group's and its subgroups'.
    pub metadata_files: usize,
    /// Member details files (each a commit of member changes).
    pub details_files: usize,
    /// Member arrays copied, by path below the group.
    pub arrays: Vec<(String, CopySummary)>,
    /// Member groups copied, by path below the group.
    pub groups: Vec<String>,
}

/// Copies the group `src` into a new group at `dir` of `dst`, encrypted
/// with `to_key` (or not): every metadata file and every member commit
/// with its timestamps (so the group answers the same at every time), and
/// every member stored inside the group (relative URIs) that is there, an
/// array by [`copy`] and a group by this, with the group's key. Members
/// named by absolute URI, or outside the group, are recorded as they were
/// and not copied: the copy points where the original pointed.
pub fn copy_group<S: ReadStorage, D: Storage>(
    src: &Group<S>,
    dst: &D,
    dir: &str,
    to_key: Option<&[u8; 32]>,
) -> Result<GroupCopySummary> {
    let mut summary = GroupCopySummary::default();
    let from = GroupSource {
        storage: src.storage(),
        dir: &src.dir,
        open: &src.open,
        key: src.options.key.as_ref(),
    };
    copy_group_files(&from, dst, dir, to_key, "", &mut summary)?;
    Ok(summary)
}

/// A group being copied.
struct GroupSource<'a, S: ?Sized> {
    storage: &'a S,
    dir: &'a str,
    open: &'a tdb_fragment::OpenGroup,
    key: Option<&'a [u8; 32]>,
}

/// One group's files, then its members'; `at` is its path below the group
/// the copy started from.
fn copy_group_files<S: ReadStorage + ?Sized, D: Storage>(
    src: &GroupSource<'_, S>,
    dst: &D,
    dir: &str,
    to_key: Option<&[u8; 32]>,
    at: &str,
    summary: &mut GroupCopySummary,
) -> Result<()> {
    let (storage, key) = (src.storage, src.key);
    tdb_fragment::create_group(dst, dir).map_err(Error::Write)?;
    let directory = &src.open.directory;
    // Metadata files, those a consolidation superseded too, and the vacuum
    // lists naming their copies (by absolute URI, as TileDB's group lists).
    let mut files: Vec<&TimestampedFile> = (directory.metadata.iter())
        .chain(&directory.metadata_replaced)
        .collect();
    files.sort_by_key(|f| f.name.t1);
    let mut meta_copied = std::collections::HashMap::new();
    for f in files {
        let bytes = read_whole(storage, &join(src.dir, &f.path))?;
        let file = MetadataFile::parse(&f.path, &bytes, key)?;
        if let Some(new) = write_metadata(dst, dir, &file, f.name.timestamp_range(), to_key)
            .map_err(Error::Write)?
        {
            meta_copied.insert(f.path.clone(), new);
            summary.metadata_files += 1;
        }
    }
    let base = dst.uri(dir).unwrap_or_else(|| dir.to_owned());
    let base = base.trim_end_matches('/');
    for (vac, replaced) in &directory.metadata_vacuum_lists {
        let lines: Vec<String> = (replaced.iter())
            .filter_map(|p| Some(format!("{base}/{}", meta_copied.get(p)?)))
            .collect();
        if lines.is_empty() {
            continue;
        }
        let replacing = copied_list_name(&meta_copied, vac)?;
        tdb_fragment::write_vacuum_lines(dst, dir, &replacing, lines).map_err(Error::Write)?;
    }
    let mut inside = std::collections::BTreeSet::new();
    for f in &directory.details {
        let details = group_details(storage, src.dir, f, key)?;
        // Members removed since are copied too: the group at an earlier
        // time has them.
        inside.extend(
            details
                .entries
                .iter()
                .filter(|e| e.member.relative && tdb_storage::check_path(&e.member.uri).is_ok())
                .map(|e| e.member.uri.clone()),
        );
        write_group_details(dst, dir, &details, f.name.timestamp_range().0, to_key)
            .map_err(Error::Write)?;
        summary.details_files += 1;
    }
    let options = || -> Result<OpenOptions> {
        Ok(match key {
            Some(k) => OpenOptions::new().key(k)?,
            None => OpenOptions::new(),
        })
    };
    for uri in inside {
        let (from, to, path) = (join(src.dir, &uri), join(dir, &uri), join(at, &uri));
        match tdb_fragment::object_kind(storage, &from)? {
            Some(ObjectKind::Array) => {
                let array = Array::open_in(storage, &from, options()?)?;
                summary.arrays.push((path, copy(&array, dst, &to, to_key)?));
            }
            Some(ObjectKind::Group) => {
                let open = tdb_fragment::OpenGroup::open(storage, &from, TimeWindow::ALL, key)?;
                let sub = GroupSource {
                    storage,
                    dir: &from,
                    open: &open,
                    key,
                };
                copy_group_files(&sub, dst, &to, to_key, &path, summary)?;
                summary.groups.push(path);
            }
            // A member that is not there: the copy keeps it as dangling as
            // the original's.
            None => {}
        }
    }
    Ok(())
}

fn group_details<S: ReadStorage + ?Sized>(
    storage: &S,
    dir: &str,
    f: &TimestampedFile,
    key: Option<&[u8; 32]>,
) -> Result<GroupDetails> {
    let bytes = read_whole(storage, &join(dir, &f.path))?;
    Ok(GroupDetails::parse(&f.path, &bytes, key)?)
}

fn read_whole<S: ReadStorage + ?Sized>(storage: &S, key: &str) -> Result<Vec<u8>> {
    Ok(storage
        .read(key)
        .map_err(|e| FragmentError::storage(key, e))?
        .ok_or_else(|| FragmentError::missing(key, "file"))?
        .to_vec())
}
