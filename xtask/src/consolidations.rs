//! Pass 3 of `cargo xtask interop`: consolidations.
//!
//! Every array case with two or more fragments is copied as it is under
//! `target/interop/consolidated`, its fragments consolidated (TileDB's
//! default settings, under a 1 MiB budget) and vacuumed there by tdb; real
//! TileDB must then give the case's schema, metadata and query answers
//! (unordered ones as multisets). Dense arrays merge without timestamps and TileDB's own
//! dense merges change some answers (aggregates over tiles' fill values):
//! a dense case is compared with TileDB's own consolidation of it,
//! vacuumed (its fragments' timestamps, cell counts and non-empty domains,
//! and its answers), on the queries whose window holds each merged span
//! whole or misses it.
//! Arrays with several schemas are compared with TileDB's own
//! consolidation too (a merge under the latest schema drops the attributes
//! it dropped), and so are arrays whose ordered answers depend on how cells
//! are spread over fragments (see [`fragment_dependent`]). Arrays tdb does not consolidate yet are listed as skipped.
//!
//! tdb then reads every consolidated copy as TileDB reported it (its
//! fragments, vacuum candidates, metadata and answers).
//!
//! And the fragments tdb chooses are TileDB's: for each of [`SETTINGS`],
//! another copy of every case is consolidated by tdb and one by TileDB
//! (`xtask/interop/consolidate.py`) with the same settings, and the vacuum
//! lists both write must name the same fragments (by timestamp span: the
//! merged fragments' names differ by their UUIDs).

use crate::conformance::{chain, read_expected};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use tdb::FragmentSelection;
use tdb_format::TimestampedName;

/// The settings the choices are compared under: TileDB's defaults, steps
/// of two or three fragments of similar sizes, and merges written as
/// fragments of at most 1,500 bytes of tiles (where a tile alone is larger
/// both refuse).
const SETTINGS: [(&str, &str); 3] = [
    ("defaults", "{}"),
    (
        "runs",
        r#"{"sm.consolidation.steps": 2, "sm.consolidation.step_min_frags": 2,
            "sm.consolidation.step_max_frags": 3, "sm.consolidation.step_size_ratio": 0.5}"#,
    ),
    ("split", r#"{"sm.consolidation.max_fragment_size": 1500}"#),
];

/// The budget of the merges TileDB reads (the issue's least: any
/// consolidation completes under 1 MiB, whatever its tiles).
const SMALL_BUDGET: u64 = 1 << 20;

/// The [`FragmentSelection`] of one of [`SETTINGS`].
fn selection(json: &str) -> Result<FragmentSelection, String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let mut s = FragmentSelection::default();
    let int = |k: &str| v.get(k).and_then(|x| x.as_u64()).map(|x| x as u32);
    let float = |k: &str| v.get(k).and_then(|x| x.as_f64()).map(|x| x as f32);
    s.steps = int("sm.consolidation.steps").unwrap_or(s.steps);
    s.min_frags = int("sm.consolidation.step_min_frags").unwrap_or(s.min_frags);
    s.max_frags = int("sm.consolidation.step_max_frags").unwrap_or(s.max_frags);
    s.size_ratio = float("sm.consolidation.step_size_ratio").unwrap_or(s.size_ratio);
    s.amplification = float("sm.consolidation.amplification").unwrap_or(s.amplification);
    s.max_fragment_size = v
        .get("sm.consolidation.max_fragment_size")
        .and_then(|x| x.as_u64());
    Ok(s)
}

/// What the fragment vacuum lists of an array say, as (merged span, input
/// spans, the merge's fragments) triples, spans being `t1_t2` and each
/// fragment of the merge (several where a maximum fragment size split it)
/// its cells and non-empty domain.
type Choices = BTreeSet<(String, Vec<String>, Vec<String>)>;

/// A case's copy tdb consolidated: the case, tdb's choices, TileDB's copy
/// and the array's key.
type Compared = (PathBuf, Choices, PathBuf, Option<[u8; 32]>);

/// The fragment vacuum lists of an array: in `__commits/` (v12+) or at its
/// root (older arrays); `__meta/` holds the metadata ones.
fn vacuum_lists(array: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = [array.to_path_buf(), array.join("__commits")]
        .iter()
        .filter_map(|dir| fs::read_dir(dir).ok())
        .flat_map(|entries| entries.flatten().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "vac"))
        .collect();
    found.sort();
    found
}

fn span(name: &str) -> Result<String, String> {
    let last = name
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(name);
    let n = TimestampedName::parse(last).map_err(|e| format!("{name:?}: {e}"))?;
    Ok(format!("{}_{}", n.t1, n.t2))
}

/// The choices the vacuum lists of `array` record, but for those in
/// `before` (the case's own, from consolidations TileDB made).
fn choices(array: &Path, before: &[PathBuf], key: Option<&[u8; 32]>) -> Result<Choices, String> {
    let mut options = tdb::OpenOptions::new();
    if let Some(k) = key {
        options = options.key(k).map_err(|e| chain(&e))?;
    }
    let opened = tdb::Array::open_with(array, options).map_err(|e| chain(&e))?;
    let capacity = opened.schema().capacity;
    // Per span, its fragments' cells and non-empty domains.
    let mut made: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for f in opened.fragments() {
        let footer = &f.metadata.footer;
        let cells = match footer.sparse_tile_num {
            0 => 0,
            n => (n - 1) * capacity + footer.last_tile_cell_num,
        };
        let span = format!("{}_{}", f.file.name.t1, f.file.name.t2);
        let about = format!("{cells} cells in {:?}", footer.non_empty_domain);
        made.entry(span).or_default().push(about);
    }
    let mut out = Choices::new();
    for path in vacuum_lists(array) {
        if before.iter().any(|b| b.file_name() == path.file_name()) {
            continue;
        }
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let mut inputs = text
            .lines()
            .filter(|l| !l.is_empty())
            .map(span)
            .collect::<Result<Vec<_>, _>>()?;
        inputs.sort();
        let merged = span(stem)?;
        let mut fragments = made.get(&merged).cloned().unwrap_or_default();
        fragments.sort();
        out.insert((merged, inputs, fragments));
    }
    Ok(out)
}

/// The array of the case copied at `out`, opened with its key.
fn open(out: &Path, key: Option<&[u8; 32]>) -> Result<tdb::Array, String> {
    let mut options = tdb::OpenOptions::new();
    if let Some(k) = key {
        options = options.key(k).map_err(|e| chain(&e))?;
    }
    tdb::Array::open_with(out.join("array"), options).map_err(|e| chain(&e))
}

/// Consolidates the fragments of the array copied at `out` with
/// `selection`: `Ok(false)` when tdb does not consolidate such an array
/// yet.
fn tdb_consolidates(
    out: &Path,
    key: Option<&[u8; 32]>,
    selection: &FragmentSelection,
    budget: u64,
) -> Result<bool, String> {
    match open(out, key)?.consolidate_fragments(selection, budget) {
        Ok(_) => Ok(true),
        Err(tdb::Error::Unsupported(_)) => Ok(false),
        Err(e) => Err(chain(&e)),
    }
}

fn vacuum(out: &Path, key: Option<&[u8; 32]>) -> Result<(), String> {
    open(out, key)?.vacuum_fragments().map_err(|e| chain(&e))?;
    Ok(())
}

/// Rewrites a case's expected.json through `change`.
pub(crate) fn edit_expected(
    case: &Path,
    change: impl FnOnce(&mut serde_json::Value),
) -> Result<(), String> {
    let path = case.join("expected.json");
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut exp: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    change(&mut exp);
    let text = serde_json::to_string_pretty(&exp).map_err(|e| e.to_string())?;
    fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// A dense merge keeps no per-cell timestamps: once vacuumed, a window
/// that holds part of a merged span only cannot be answered (TileDB's own
/// consolidation loses the same). Drops such queries from the copy's
/// expected.json; check.py compares the rest.
fn drop_unanswerable(copy: &Path, merged: &Choices) -> Result<(), String> {
    let spans: Vec<(u64, u64)> = merged
        .iter()
        .filter_map(|(span, _, _)| {
            let (a, b) = span.split_once('_')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect();
    let answerable = |q: &serde_json::Value| {
        let (start, end) = match &q["timestamp"] {
            serde_json::Value::Number(t) => (0, t.as_u64().unwrap_or(u64::MAX)),
            serde_json::Value::Array(w) if w.len() == 2 => (
                w[0].as_u64().unwrap_or(0),
                w[1].as_u64().unwrap_or(u64::MAX),
            ),
            _ => (0, u64::MAX),
        };
        spans
            .iter()
            .all(|&(t1, t2)| (start <= t1 && t2 <= end) || end < t1 || start > t2)
    };
    edit_expected(copy, |exp| {
        if let Some(queries) = exp["queries"].as_array_mut() {
            queries.retain(answerable);
        }
    })
}

pub(crate) fn fresh(dir: &Path) -> Result<(), String> {
    if dir.exists() {
        fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok(())
}

/// Whether the array at `dir` has more than one schema (it was evolved).
fn evolved(dir: &Path) -> bool {
    fs::read_dir(dir.join("__schema")).is_ok_and(|entries| {
        entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .count()
            > 1
    })
}

/// Whether some ordered answer of the case depends on how its cells are
/// spread over fragments, which a merge changes: TileDB returns a sparse
/// read of one dimension over ranges out of order (or overlapping) range
/// by range when every cell comes from one fragment, sorted otherwise.
/// And whether some answer depends on how cells lie in tiles, which a
/// merge changes too: ranges on a string dimension that a sparse array
/// of two or more dimensions sorts its cells by first (TileDB's string
/// parts, docs/compatibility.md; seeds 11600–11647 found `rand_11606`,
/// whose merged tiles TileDB answers otherwise, over its own merge too).
pub(crate) fn fragment_dependent(exp: &serde_json::Value) -> bool {
    fragments_ordered(exp) || string_parts(exp)
}

/// A sparse array of two or more dimensions whose cell order sorts a
/// string dimension first (row-major: the first, col-major: the last),
/// queried with ranges on it.
fn string_parts(exp: &serde_json::Value) -> bool {
    let schema = &exp["schema"];
    let dims = schema["dims"].as_array().map_or(&[][..], Vec::as_slice);
    let first = match schema["cell_order"].as_str() {
        Some("row-major") => dims.first().map(|_| 0),
        Some("col-major") => dims.len().checked_sub(1),
        _ => None,
    };
    let Some(d) = first.filter(|_| schema["array_type"] == "sparse" && dims.len() >= 2) else {
        return false;
    };
    let string = (dims.get(d))
        .and_then(|dim| dim["datatype"].as_str())
        .and_then(|t| tdb_format::Datatype::from_name(t).ok())
        .is_some_and(tdb_format::Datatype::is_string);
    string
        && exp["queries"].as_array().into_iter().flatten().any(|q| {
            q["subarray"][d]
                .as_array()
                .is_some_and(|ranges| !ranges.is_empty())
        })
}

/// See [`fragment_dependent`]: one dimension, ranges out of order.
fn fragments_ordered(exp: &serde_json::Value) -> bool {
    let sparse = exp["schema"]["array_type"] == "sparse";
    let one_dim = exp["schema"]["dims"]
        .as_array()
        .is_some_and(|d| d.len() == 1);
    // Whether range bound `a` lies before `b` (numbers or strings; any
    // other pair counts as not, which only costs a comparison with
    // TileDB's own consolidation).
    let before = |a: &serde_json::Value, b: &serde_json::Value| match (a, b) {
        (serde_json::Value::String(a), serde_json::Value::String(b)) => a < b,
        _ => matches!((a.as_f64(), b.as_f64()), (Some(a), Some(b)) if a < b),
    };
    let out_of_order = |q: &serde_json::Value| {
        let ranges = q["subarray"][0].as_array().map_or(&[][..], Vec::as_slice);
        ranges.windows(2).any(|w| !before(&w[0][1], &w[1][0]))
    };
    sparse
        && one_dim
        && exp["queries"].as_array().into_iter().flatten().any(|q| {
            q["ordered"] == true
                && (q["layout"] == "row-major" || q["layout"] == "col-major")
                && out_of_order(q)
        })
}

/// The cases `check` set aside because TileDB crashed reading tdb's
/// one-fragment copy of them (in `<out>.crashed`: tdb's consolidation, or
/// the Arrow pass's rewrite), where each query that kills TileDB kills it
/// over TileDB's own consolidation of the case as well (vacuumed, as tdb's
/// is), or over TileDB's own one-fragment write of the copy's cells:
/// TileDB's bug, not a difference. This pass makes those
/// consolidations, so a full interop run asks for the Arrow pass after it,
/// and `--arrow` alone does not. The queries are named and left out, the
/// rest checked again (`check` with `flag` and `reference`) and the case
/// put back in `out`. Returns how many set-aside cases were so explained
/// and how many of them failed on their other queries; a query that kills
/// TileDB over tdb's copy only stays a failure.
pub(crate) fn tiledb_crashes(
    root: &Path,
    python: &Path,
    corpus: &Path,
    out: &Path,
    flag: &str,
    reference: Option<&Path>,
) -> Result<(usize, usize), String> {
    let crashed = out.with_extension("crashed");
    // `check` makes the directory only when TileDB crashed.
    if !crashed.is_dir() {
        return Ok((0, 0));
    }
    let cases = tdb_testdata::case_dirs(&crashed);
    if cases.is_empty() {
        return Ok((0, 0));
    }
    // TileDB's own consolidation of each (the defaults' choice copy).
    let theirs_root = PathBuf::from(format!("{}-crashes", out.display()));
    fresh(&theirs_root)?;
    let mut pairs = Vec::new();
    for mine in &cases {
        let rel = mine.strip_prefix(&crashed).unwrap_or(mine).to_path_buf();
        let (_, key) = read_expected(mine, &tdb::StorageConfig::new())?;
        let theirs = theirs_root.join(&rel);
        let made = (choices_dir(root))
            .join(SETTINGS[0].0)
            .join("tiledb")
            .join(&rel);
        if !made.is_dir() {
            println!(
                "     {}: no consolidation by TileDB to hold the crash to (the \
                 consolidation pass makes them)",
                rel.display()
            );
            continue;
        }
        copy(&made, &theirs)?;
        vacuum(&theirs, key.as_ref())?;
        fs::copy(mine.join("expected.json"), theirs.join("expected.json"))
            .map_err(|e| format!("{}: {e}", theirs.display()))?;
        pairs.push((rel, mine.clone(), theirs));
    }
    let output = Command::new(python)
        .current_dir(root)
        .arg("xtask/interop/crashes.py")
        .arg("--own")
        .args(pairs.iter().flat_map(|(_, mine, theirs)| [mine, theirs]))
        .output()
        .map_err(|e| format!("crashes.py: {e}"))?;
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    // The queries that killed TileDB, by case directory.
    let by = |tag: &str| -> std::collections::HashMap<&str, BTreeSet<&str>> {
        (text.lines())
            .filter_map(|l| l.strip_prefix(tag)?.split_once(": "))
            .map(|(case, names)| (case, names.split(' ').collect()))
            .collect()
    };
    // Over each copy, and over TileDB's own one-fragment write of its
    // cells (`--own`).
    let (killers, own) = (by("CRASH "), by("CRASH-OWN "));
    let none = BTreeSet::new();
    let killed = |p: &Path| killers.get(p.to_string_lossy().as_ref()).unwrap_or(&none);
    let killed_own = |p: &Path| own.get(p.to_string_lossy().as_ref()).unwrap_or(&none);
    let retry = PathBuf::from(format!("{}-retried", out.display()));
    fresh(&retry)?;
    let mut explained = Vec::new();
    for (rel, mine, theirs) in &pairs {
        let (ours, tiledb) = (killed(mine), killed(theirs));
        // TileDB's consolidation keeps every version of a coordinate, tdb's
        // copy the newest: a query may kill TileDB over TileDB's own write
        // of the copy's cells and not over its consolidation.
        let tiledb: BTreeSet<&str> = tiledb.union(killed_own(mine)).copied().collect();
        let tiledb = &tiledb;
        if ours.is_empty() || !ours.is_subset(tiledb) {
            let only: Vec<_> = ours.difference(tiledb).collect();
            println!(
                "     {}: queries killing TileDB over tdb's merge only: {only:?} (over both: {:?})",
                rel.display(),
                ours.intersection(tiledb).collect::<Vec<_>>()
            );
            continue;
        }
        println!(
            "skip {} queries {ours:?}: they kill TileDB over its own consolidation or write too (its \
             bug; the FAIL above is withdrawn, the other queries checked again)",
            rel.display()
        );
        let keep = |exp: &mut serde_json::Value| {
            if let Some(queries) = exp["queries"].as_array_mut() {
                queries.retain(|q| !q["name"].as_str().is_some_and(|n| ours.contains(n)));
            }
        };
        edit_expected(mine, keep)?;
        if let Some(case) = reference.map(|r| r.join(rel)).filter(|c| c.is_dir()) {
            edit_expected(&case, keep)?;
        }
        let to = retry.join(rel);
        fs::create_dir_all(to.parent().unwrap_or(&retry))
            .and_then(|()| fs::rename(mine, &to))
            .map_err(|e| format!("{}: {e}", to.display()))?;
        explained.push(rel.clone());
    }
    if explained.is_empty() {
        return Ok((0, 0));
    }
    let (_, bad) = crate::interop::check(root, python, corpus, &retry, Some(flag), reference)?;
    for rel in &explained {
        let (from, to) = (retry.join(rel), out.join(rel));
        if from.is_dir() {
            fs::create_dir_all(to.parent().unwrap_or(out))
                .and_then(|()| fs::rename(&from, &to))
                .map_err(|e| format!("{}: {e}", to.display()))?;
        }
    }
    Ok((explained.len(), bad))
}

/// Drops from `case`'s expected.json the min and max of every aggregate
/// whose sum is NaN: TileDB's threads make those depend on the order its
/// tiles finish (5.75 one run, NaN the next), so a report of them does not
/// say what TileDB answers (check.py ignores them likewise). Over an array
/// with duplicates, row- and col-major answers count as multisets: TileDB
/// sorts them by coordinates alone (an unstable sort), so cells of equal
/// coordinates come in no set order (`sparse_dups_float_scale_ranges`
/// consolidated: the newer of two cells stored first, returned second).
pub(crate) fn drop_order_dependent(case: &Path) -> Result<(), String> {
    edit_expected(case, |exp| {
        let dups = exp["schema"]["allows_duplicates"] == true;
        for q in exp["queries"].as_array_mut().into_iter().flatten() {
            let across = ["row-major", "col-major"].contains(&q["layout"].as_str().unwrap_or(""));
            if dups && across {
                q["ordered"] = false.into();
            }
            // `get_mut`: indexing a query without aggregates would add a null.
            let aggregates = q.get_mut("aggregates").and_then(|a| a.as_object_mut());
            for ops in aggregates.into_iter().flat_map(|a| a.values_mut()) {
                if let Some(ops) = ops
                    .as_object_mut()
                    .filter(|o| o.get("sum") == Some(&"NaN".into()))
                {
                    ops.remove("min");
                    ops.remove("max");
                }
            }
        }
    })
}

fn copy(case: &Path, out: &Path) -> Result<(), String> {
    tdb_testdata::copy_dir(case, out).map_err(|e| format!("copying {}: {e}", case.display()))
}

/// Where the consolidation pass keeps each setting's copies, tdb's and
/// TileDB's (`<setting>/{tdb,tiledb}/<case>`): `tiledb_crashes` holds
/// crashes to TileDB's.
fn choices_dir(root: &Path) -> PathBuf {
    root.join("target/interop/choices")
}

/// The consolidation pass (see the module's docs): `(passed, failed,
/// skipped)`.
pub(crate) fn consolidations(
    root: &Path,
    corpus: &Path,
    python: &Path,
) -> Result<(usize, usize, usize), String> {
    let out = root.join("target/interop/consolidated");
    let choice_root = choices_dir(root);
    fresh(&out)?;
    fresh(&choice_root)?;
    let (mut failed, mut skipped) = (0, 0);
    // Per setting, the copies tdb consolidated.
    let mut compared: Vec<Vec<Compared>> = vec![Vec::new(); SETTINGS.len()];
    // Per setting: (case, why tdb refused, TileDB's copy): TileDB must
    // refuse the same merge (a codec's refusal, say) for it to agree.
    let mut refused: Vec<Vec<(PathBuf, String, PathBuf)>> = vec![Vec::new(); SETTINGS.len()];
    // Cases compared with TileDB's own consolidation (dense ones, and those
    // whose fragments were written under older schemas), and their keys.
    let mut referenced = Vec::new();
    for case in tdb_testdata::case_dirs(corpus) {
        let rel = case.strip_prefix(corpus).unwrap_or(&case).to_path_buf();
        let (exp, key) = read_expected(&case, &tdb::StorageConfig::new())?;
        let fragments = exp["fragments"].as_array().map_or(0, Vec::len);
        if exp.get("kind").and_then(|k| k.as_str()).unwrap_or("array") != "array" || fragments < 2 {
            continue;
        }
        let before = vacuum_lists(&case.join("array"));
        for (s, (label, json)) in SETTINGS.iter().enumerate() {
            let selection = selection(json)?;
            // The default setting's copy is vacuumed and read by TileDB too.
            let mine = if s == 0 {
                out.join(&rel)
            } else {
                choice_root.join(label).join("tdb").join(&rel)
            };
            copy(&case, &mine)?;
            // The copy TileDB reads is merged under a small budget: more
            // than two fragments then merge in levels through temporary
            // runs (`consolidate/runs.rs`), large tiles by their chunks.
            let budget = if s == 0 {
                SMALL_BUDGET
            } else {
                tdb::DEFAULT_BUDGET
            };
            match tdb_consolidates(&mine, key.as_ref(), &selection, budget) {
                Ok(true) => {}
                Ok(false) => {
                    fresh(&mine)?;
                    if s == 0 {
                        skipped += 1;
                        println!("skip consolidating {}: not supported yet", rel.display());
                    }
                    continue;
                }
                Err(why) => {
                    fresh(&mine)?;
                    let theirs = choice_root.join(label).join("tiledb").join(&rel);
                    copy(&case, &theirs)?;
                    refused[s].push((rel.clone(), why, theirs));
                    continue;
                }
            }
            let chose = choices(&mine.join("array"), &before, key.as_ref())?;
            if s == 0 {
                vacuum(&mine, key.as_ref())?;
                let dense = exp["schema"]["array_type"] == "dense";
                if dense {
                    drop_unanswerable(&mine, &chose)?;
                }
                if dense || evolved(&case.join("array")) || fragment_dependent(&exp) {
                    referenced.push((rel.clone(), key));
                }
            }
            let theirs = choice_root.join(label).join("tiledb").join(&rel);
            copy(&case, &theirs)?;
            compared[s].push((rel.clone(), chose, theirs, key));
        }
    }
    // TileDB consolidates its copies, one process per setting.
    let mut same = 0;
    for (s, (label, json)) in SETTINGS.iter().enumerate() {
        if compared[s].is_empty() && refused[s].is_empty() {
            continue;
        }
        let output = Command::new(python)
            .current_dir(root)
            .arg("xtask/interop/consolidate.py")
            .arg(json)
            .args(compared[s].iter().map(|(_, _, theirs, _)| theirs))
            .args(refused[s].iter().map(|(_, _, theirs)| theirs))
            .output()
            .map_err(|e| format!("consolidate.py: {e}"))?;
        let text = String::from_utf8_lossy(&output.stdout);
        eprint!("{}", String::from_utf8_lossy(&output.stderr));
        // TileDB's refusals, by case directory.
        let tiledb_refused: std::collections::HashMap<&str, &str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("FAIL ")?.split_once(": "))
            .collect();
        // Cases TileDB crashed on (its bug: nothing to compare with), by
        // case directory.
        let crashed: std::collections::HashMap<&str, &str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("CRASH ")?.split_once(": "))
            .collect();
        let crash = |theirs: &Path| crashed.get(theirs.to_string_lossy().as_ref()).copied();
        for (rel, why, theirs) in &refused[s] {
            if let Some(signal) = crash(theirs) {
                skipped += 1;
                println!(
                    "skip {} ({label}): TileDB crashed consolidating it ({signal}); tdb: {why}",
                    rel.display()
                );
                continue;
            }
            match tiledb_refused.get(theirs.to_string_lossy().as_ref()) {
                Some(t) => {
                    same += 1;
                    println!(
                        "ok   {} ({label}): both refuse the merge (tdb: {why}; TileDB: {t})",
                        rel.display()
                    );
                }
                None => {
                    failed += 1;
                    println!(
                        "FAIL {} ({label}): tdb could not consolidate it, TileDB did: {why}",
                        rel.display()
                    );
                }
            }
        }
        let refused_here: Vec<String> = refused[s]
            .iter()
            .map(|(_, _, theirs)| theirs.to_string_lossy().into_owned())
            .collect();
        for line in text.lines().filter(|l| l.starts_with("FAIL")) {
            let case = line.strip_prefix("FAIL ").and_then(|l| l.split_once(": "));
            if !case.is_some_and(|(c, _)| refused_here.iter().any(|r| r == c)) {
                println!("{line}");
            }
        }
        for (rel, chose, theirs, key) in &compared[s] {
            if let Some(signal) = crash(theirs) {
                skipped += 1;
                println!(
                    "skip {} ({label}): TileDB crashed consolidating it ({signal})",
                    rel.display()
                );
                if s == 0 {
                    // No TileDB merge to compare tdb's with, nor to read.
                    referenced.retain(|(r, _)| r != rel);
                    fresh(&out.join(rel))?;
                }
                continue;
            }
            let before = vacuum_lists(&corpus.join(rel).join("array"));
            match choices(&theirs.join("array"), &before, key.as_ref()) {
                Ok(theirs) if &theirs == chose => same += 1,
                Ok(theirs) => {
                    failed += 1;
                    println!(
                        "FAIL {} ({label}): tdb merged {chose:?}, TileDB {theirs:?}",
                        rel.display()
                    );
                }
                Err(why) => {
                    failed += 1;
                    println!("FAIL {} ({label}): {why}", rel.display());
                }
            }
        }
    }
    println!(
        "consolidations: tdb chose TileDB's fragments (or refused as TileDB did) in {same} runs"
    );
    // Nothing consolidated (a corpus of one case both refuse): nothing
    // for TileDB to read.
    if !out.exists() || tdb_testdata::case_dirs(&out).is_empty() {
        return Ok((same, failed, skipped));
    }
    // TileDB's own dense merges change some answers (aggregates over the
    // tiles' fill values, which TileDB's tile statistics then count), and
    // merges under the latest schema lose the attributes it dropped (time
    // travel then reads them as fill values): such a case is compared with
    // TileDB's own consolidation, vacuumed, under the same queries.
    let reference = root.join("target/interop/consolidated-reference");
    fresh(&reference)?;
    for (rel, key) in &referenced {
        let theirs = reference.join(rel);
        copy(
            &choice_root.join(SETTINGS[0].0).join("tiledb").join(rel),
            &theirs,
        )?;
        vacuum(&theirs, key.as_ref())?;
        fs::copy(
            out.join(rel).join("expected.json"),
            theirs.join("expected.json"),
        )
        .map_err(|e| format!("{}: {e}", theirs.display()))?;
    }
    let (cases, mut bad) = crate::interop::check(
        root,
        python,
        corpus,
        &out,
        Some("--consolidated"),
        Some(&reference),
    )?;
    let (explained, retried_bad) = tiledb_crashes(
        root,
        python,
        corpus,
        &out,
        "--consolidated",
        Some(&reference),
    )?;
    bad = bad - explained + retried_bad;
    // Every case crashed TileDB: nothing left for tdb to read.
    if tdb_testdata::case_dirs(&out).is_empty() {
        return Ok((cases - bad + same, failed + bad, skipped));
    }
    // check.py left in each copy's expected.json what TileDB reports of
    // tdb's consolidated bytes (fragments included): tdb must read them
    // alike.
    for case in tdb_testdata::case_dirs(&out) {
        drop_order_dependent(&case)?;
    }
    let mut report = Vec::new();
    let (_, tdb_bad) =
        crate::conformance::run(&out, &crate::conformance::Options::default(), &mut report)?;
    for line in String::from_utf8_lossy(&report).lines() {
        if let Some(rest) = line.strip_prefix("FAIL ") {
            println!("FAIL consolidated/{rest} (tdb reads it otherwise than TileDB)");
        }
    }
    println!(
        "interop (consolidated): tdb reads {} cases as TileDB does, {tdb_bad} otherwise",
        cases - tdb_bad.min(cases)
    );
    Ok((cases - bad + same, failed + bad + tdb_bad, skipped))
}
