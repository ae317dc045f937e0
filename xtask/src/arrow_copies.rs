//! Pass 5 of `cargo xtask interop`: arrays written through Arrow.
//!
//! Every array case is read now as Arrow record batches (tdb-arrow; every
//! field of the latest schema, a sparse array whole, a dense one over its
//! non-empty domain), and the batches are written into a new array with
//! the same schema, enumerations and key under `target/interop/arrow`
//! (dense cells by their coordinate columns). Real TileDB then opens each
//! copy and must give the case's schema and the answers of every query
//! that reads now, as multisets (`check.py`'s `arrow_view` says why): a
//! copy holds one fragment, so queries at earlier times, fragment lists and
//! metadata are not compared, nor queries TileDB answers by how the cells
//! lie in tiles; tdb then reads each copy and must answer as TileDB does. Group cases are skipped (their member arrays are arrays of
//! other cases' shapes).

use crate::conformance::{chain, read_expected};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use tdb::{Array, LocalStorage, OpenOptions, ReadSpec, StorageConfig};
use tdb_arrow::{ArrowArray, ArrowWrite};

/// Where the copies go (a full interop run holds TileDB's crashes over
/// them to its own consolidations there).
pub(crate) fn out_dir(root: &Path) -> PathBuf {
    root.join("target/interop/arrow")
}

/// Writes the copies and runs check.py over them: `(passed, failed,
/// skipped)`.
pub fn arrow_copies(
    root: &Path,
    corpus: &Path,
    python: &Path,
) -> Result<(usize, usize, usize), String> {
    let out = out_dir(root);
    copies_checked_as_cells(
        root,
        corpus,
        python,
        &out,
        |_, src, dst, key| copy(src, dst, key),
        |_, _| true,
    )
}

/// Writes a copy of every array case of `corpus` under `out` with
/// `write(case, src, dst, key)` (which returns the names of the array's
/// dimension labels) and runs check.py `--arrow` over them: `(passed,
/// failed, skipped)`. For copies that hold the cells of the case but not
/// its history: queries at earlier times and of labels are dropped from
/// each copy's expected.json, and those `keep(expected, query)` refuses.
pub(crate) fn copies_checked_as_cells(
    root: &Path,
    corpus: &Path,
    python: &Path,
    out: &Path,
    mut write: impl FnMut(&str, &Path, &Path, Option<[u8; 32]>) -> Result<Vec<String>, String>,
    keep: impl Fn(&Value, &Value) -> bool,
) -> Result<(usize, usize, usize), String> {
    if out.exists() {
        fs::remove_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    let (mut failed, mut skipped, mut both_refuse) = (0, 0, 0);
    for case in tdb_testdata::case_dirs(corpus) {
        let rel = case
            .strip_prefix(corpus)
            .unwrap_or(&case)
            .to_string_lossy()
            .into_owned();
        let (mut expected, key) = read_expected(&case, &StorageConfig::default())?;
        if expected["kind"] == "group" {
            skipped += 1;
            println!("skip {rel}: a group");
            continue;
        }
        let labels = match write(
            &rel,
            &case.join("array"),
            &out.join(&rel).join("array"),
            key,
        ) {
            Ok(labels) => labels,
            Err(why) => {
                // No copy: check.py would count it again.
                let _ = fs::remove_dir_all(out.join(&rel));
                // A write tdb does not do (a typed `Unsupported`, which the
                // cluster's INSERT reports through DataFusion's chain):
                // listed as skipped, never passed.
                if why.contains("not supported yet") || why.contains("Unsupported(") {
                    skipped += 1;
                    println!("skip {rel}: {why}");
                    continue;
                }
                match tiledb_refuses_too(root, python, &case, &out.join(&rel), &why)? {
                    Some(theirs) => {
                        both_refuse += 1;
                        println!(
                            "ok   {rel}: both refuse to put its cells in new tiles \
                             (tdb: {why}; TileDB consolidating it: {theirs})"
                        );
                    }
                    None => {
                        failed += 1;
                        println!("FAIL {rel}: {why}");
                    }
                }
                continue;
            }
        };
        // Copies carry cells, not dimension labels: queries by label
        // or of label data are the copy pass's (pass 1) and the generated
        // cases'.
        let labels: Vec<Value> = labels.into_iter().map(Value::from).collect();
        let kept: Vec<bool> = expected["queries"]
            .as_array()
            .map(|qs| qs.iter().map(|q| keep(&expected, q)).collect())
            .unwrap_or_default();
        if let Some(queries) = expected["queries"].as_array_mut() {
            let mut kept = kept.into_iter();
            queries.retain(|q| {
                kept.next().unwrap_or(true)
                    && q["timestamp"].is_null()
                    && q.get("labels").is_none()
                    && !q["dims"]
                        .as_array()
                        .is_some_and(|d| d.iter().any(|n| labels.contains(n)))
            });
        }
        let text = serde_json::to_string_pretty(&expected).map_err(|e| e.to_string())?;
        fs::write(out.join(&rel).join("expected.json"), text).map_err(|e| format!("{rel}: {e}"))?;
    }
    if !out.exists() {
        return Ok((both_refuse, failed, skipped));
    }
    let (cases, bad) = crate::interop::check(root, python, corpus, out, Some("--arrow"), None)?;
    // check.py left in each copy's expected.json what TileDB reports of
    // the copy: tdb must read it alike, queries TileDB answers by the
    // copy's tiles (which check.py could not hold to the case's) among them.
    for case in tdb_testdata::case_dirs(out) {
        crate::consolidations::drop_order_dependent(&case)?;
        // Copies written in several fragments at one timestamp (a cluster
        // insert's partitions): TileDB orders a coordinate's duplicates
        // from them by how its tiles meet (delete_consolidated_dups: one
        // coordinate's first from one fragment, the next one's from the
        // other), so they compare as multisets, as FORMAT.md has it.
        crate::consolidations::edit_expected(&case, |exp| {
            if exp["schema"]["allows_duplicates"] == true {
                for q in exp["queries"].as_array_mut().into_iter().flatten() {
                    q["ordered"] = false.into();
                }
            }
        })?;
    }
    // Every copy set aside (TileDB crashed on each): nothing left for tdb
    // here; `tiledb_crashes` decides about them.
    if tdb_testdata::case_dirs(out).is_empty() {
        return Ok((cases - bad + both_refuse, failed + bad, skipped));
    }
    let mut report = Vec::new();
    let (_, tdb_bad) =
        crate::conformance::run(out, &crate::conformance::Options::default(), &mut report)?;
    for line in String::from_utf8_lossy(&report).lines() {
        if let Some(rest) = line.strip_prefix("FAIL ") {
            println!("FAIL copy {rest} (tdb reads it otherwise than TileDB)");
        }
    }
    println!(
        "{}: tdb reads {} copies as TileDB does, {tdb_bad} otherwise",
        out.display(),
        cases - tdb_bad.min(cases)
    );
    Ok((cases - bad + both_refuse, failed + bad + tdb_bad, skipped))
}

/// The filter a write refusal names (`filter DOUBLE_DELTA: ...` in tdb's
/// error chain, `filter: "DOUBLE_DELTA"` through a cluster's debug print),
/// as TileDB spells it, lowercased, without underscores (`doubledelta`).
fn refusing_filter(why: &str) -> Option<String> {
    let named = |f: &&str| !f.is_empty() && f.chars().all(|c| c.is_ascii_uppercase() || c == '_');
    (why.rsplit_once("filter: \""))
        .and_then(|(_, rest)| rest.split('"').next())
        .filter(named)
        .or_else(|| {
            let (_, rest) = why.rsplit_once("filter ")?;
            rest.split(':').next().filter(named)
        })
        .map(|f| f.replace('_', "").to_lowercase())
}

/// Where tdb refused to write a copy of `case` because a filter cannot
/// hold its cells in the copy's tiles (DOUBLE_DELTA whose double deltas
/// pass int64 once the cells are tiled anew: fill values beside large
/// ones), whether TileDB refuses alike to put them in new tiles: it
/// consolidates a scratch copy of the array (under `scratch`, removed
/// after) and must fail on the same filter. TileDB's refusal, or `None`.
/// Its amplification check is off: a copy covers the union of the
/// fragments, fill between them, which TileDB would otherwise decline to
/// merge at all, without a word (`rand_15225`: dense fragments far apart,
/// an INT64 27 beside fill values of -2^63 once they share a tile).
fn tiledb_refuses_too(
    root: &Path,
    python: &Path,
    case: &Path,
    scratch: &Path,
    why: &str,
) -> Result<Option<String>, String> {
    let Some(filter) = refusing_filter(why) else {
        return Ok(None);
    };
    let theirs = scratch.join("tiledb-rewrite");
    tdb_testdata::copy_dir(case, &theirs).map_err(|e| format!("{}: {e}", theirs.display()))?;
    let output = std::process::Command::new(python)
        .current_dir(root)
        .arg("xtask/interop/consolidate.py")
        .arg(r#"{"sm.consolidation.amplification": 1e30}"#)
        .arg(&theirs)
        .output()
        .map_err(|e| format!("consolidate.py: {e}"))?;
    let _ = fs::remove_dir_all(scratch);
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix("FAIL ")?.split_once(": ").map(|(_, t)| t))
        .find(|t| t.to_lowercase().replace('_', "").contains(&filter))
        .map(str::to_owned))
}

/// An array created empty with the schema of another (see [`empty_copy`]).
pub(crate) struct EmptyCopy {
    /// The array copied, open.
    pub src: Array<LocalStorage>,
    /// The copy, open.
    pub copy: Array<LocalStorage>,
    /// The names of the source's dimension labels, which the copy's labels
    /// do not hold.
    pub labels: Vec<String>,
}

/// Creates an array at `dst` with the schema, enumerations and key of the
/// array at `src`.
pub(crate) fn empty_copy(
    src: &Path,
    dst: &Path,
    key: Option<[u8; 32]>,
) -> Result<EmptyCopy, String> {
    let options = || -> Result<OpenOptions, String> {
        let o = OpenOptions::new();
        match &key {
            Some(k) => o.key(k).map_err(|e| chain(&e)),
            None => Ok(o),
        }
    };
    let array = Array::open_in(LocalStorage::new(src), "", options()?)
        .map_err(|e| format!("open: {}", chain(&e)))?;
    let schema = array.schema();
    let labels = schema
        .dimension_labels
        .iter()
        .map(|l| l.name.clone())
        .collect();
    fs::create_dir_all(dst).map_err(|e| format!("{}: {e}", dst.display()))?;
    let enumerations: Vec<_> = array.snapshot().enumerations.values().cloned().collect();
    let copy = Array::create_in(
        LocalStorage::new(dst),
        "",
        schema,
        &enumerations,
        options()?,
    )
    .map_err(|e| format!("create: {}", chain(&e)))?;
    Ok(EmptyCopy {
        src: array,
        copy,
        labels,
    })
}

/// Reads `src` as record batches and writes them into a new array at
/// `dst` with its schema, enumerations and key; the names of its
/// dimension labels, which the copy's labels do not hold.
fn copy(src: &Path, dst: &Path, key: Option<[u8; 32]>) -> Result<Vec<String>, String> {
    let EmptyCopy {
        src: array,
        copy,
        labels,
    } = empty_copy(src, dst, key)?;
    let schema = array.schema();
    let mut spec = ReadSpec::new(schema.fields().map(str::to_owned));
    if schema.array_type == tdb_format::ArrayType::Dense {
        match array.non_empty_subarray().map_err(|e| chain(&e))? {
            Some(sub) => spec = spec.with_subarray(sub),
            None => spec.fields.clear(),
        }
    }
    if spec.fields.is_empty() {
        return Ok(labels);
    }
    let batches = array
        .read_arrow(spec)
        .map_err(|e| format!("Arrow read: {}", chain(&e)))?
        .map(|b| b.map_err(|e| format!("Arrow read: {}", chain(&e))))
        .collect::<Result<Vec<_>, _>>()?;
    if batches.iter().all(|b| b.num_rows() == 0) {
        return Ok(labels);
    }
    copy.write_arrow(&batches, &ArrowWrite::new())
        .map_err(|e| format!("Arrow write: {}", chain(&e)))?;
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::refusing_filter;

    #[test]
    fn a_refusal_names_its_filter_as_tiledb_spells_it() {
        let chain = "Arrow write: query failed / a0.tdb: tile 0 / a0.tdb: tile 0, chunk 0: \
                     filter / filter DOUBLE_DELTA: a double delta exceeds the range of int64";
        assert_eq!(refusing_filter(chain).as_deref(), Some("doubledelta"));
        let debug = "Tile { file: \"a0.tdb\", tile: 0, source: Filter { chunk: 0, source: \
                     BadInput { filter: \"DOUBLE_DELTA\", reason: \"a double delta\" } } }";
        assert_eq!(refusing_filter(debug).as_deref(), Some("doubledelta"));
        assert_eq!(refusing_filter("query failed: no such file"), None);
        assert_eq!(refusing_filter("a filter / of sorts"), None);
    }
}
