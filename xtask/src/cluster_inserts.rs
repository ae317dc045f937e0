//! Pass 6 of `cargo xtask interop`: arrays written by SQL `INSERT`
//! through a cluster.
//!
//! A cluster of this build's `tdb` runs on loopback (`tdb cluster`: a
//! scheduler and two executors, each a process). For every array case an
//! empty array with the case's schema, enumerations and key is created
//! under `target/interop/insert`, and `tdb sql --cluster ... "INSERT INTO
//! copy SELECT * FROM src"` fills it: the executors read the scan's
//! partitions and write each as a fragment of its own, all committed at
//! once. Real TileDB then checks each copy as the Arrow pass's
//! ([`crate::arrow_copies`]): the case's schema and the answers of every
//! query that reads now, as multisets, but those whose answer TileDB
//! draws from how cells lie in tiles ([`by_tile_layout`]): the copy's
//! tiles are its partitions', not the case's. `--insert [DIR]` runs this
//! pass alone.

use crate::arrow_copies::{copies_checked_as_cells, empty_copy};
use crate::conformance::chain;
use std::path::{Path, PathBuf};
use std::process::Command;
use tdb_test_servers::Cluster;

/// Where the copies go (a full interop run holds TileDB's crashes over
/// them to its own consolidations there, as the Arrow pass's).
pub(crate) fn out_dir(root: &Path) -> PathBuf {
    root.join("target/interop/insert")
}

/// Writes the copies through a cluster and runs check.py over them:
/// `(passed, failed, skipped)`.
pub fn cluster_inserts(
    root: &Path,
    corpus: &Path,
    python: &Path,
) -> Result<(usize, usize, usize), String> {
    let tdb = tdb_binary(root)?;
    let work = root.join("target/interop/insert-cluster");
    if work.exists() {
        std::fs::remove_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    }
    let cluster = Cluster::start(&tdb, 2, 2, &work).map_err(|e| format!("cluster: {e}"))?;
    let (mut inserted, mut most_fragments) = (0, 0);
    let totals = copies_checked_as_cells(
        root,
        corpus,
        python,
        &out_dir(root),
        |rel, src, dst, key| {
            let mut copy = empty_copy(src, dst, key)?;
            let cells = insert(&tdb, cluster.scheduler(), src, dst, key)?;
            copy.copy
                .reopen()
                .map_err(|e| format!("open the copy: {}", chain(&e)))?;
            let fragments = copy.copy.fragments().len();
            inserted += 1;
            most_fragments = most_fragments.max(fragments);
            println!("inserted {rel}: {cells} cells in {fragments} fragments");
            Ok(copy.labels)
        },
        |expected, query| !by_tile_layout(expected, query),
    )?;
    // Partitions written apart are what this pass is for (where any copy
    // was written: both engines may refuse every case of a corpus).
    if inserted > 0 && most_fragments < 2 {
        return Err("interop (insert): no copy took more than one fragment: the cluster wrote no partitions apart".into());
    }
    Ok(totals)
}

/// Whether TileDB 2.30 answers `query` by how the cells lie in the data
/// tiles, not by the cells alone: ranges on a string dimension of a sparse
/// array of two or more dimensions, which it tests a tile's cells in parts
/// and a part's ends decide for its middle (docs/compatibility.md, "string
/// ranges"; fixtures `sparse_string_parts_*`).
fn by_tile_layout(expected: &serde_json::Value, query: &serde_json::Value) -> bool {
    let schema = &expected["schema"];
    let Some(dims) = schema["dims"].as_array() else {
        return false;
    };
    schema["array_type"] == "sparse"
        && dims.len() > 1
        && query["subarray"].as_array().is_some_and(|ranges| {
            ranges.iter().zip(dims).any(|(r, d)| {
                !r.is_null()
                    && d["datatype"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("STRING"))
            })
        })
}

/// `INSERT INTO copy SELECT * FROM src` on the cluster at `scheduler`:
/// the cells it wrote.
fn insert(
    tdb: &Path,
    scheduler: &str,
    src: &Path,
    dst: &Path,
    key: Option<[u8; 32]>,
) -> Result<u64, String> {
    let mut cmd = Command::new(tdb);
    cmd.args(["sql", "--cluster", scheduler, "--format", "json"])
        .arg("--table")
        .arg(format!("src={}", src.display()))
        .arg("--table")
        .arg(format!("copy={}", dst.display()));
    if let Some(k) = &key {
        let k = std::str::from_utf8(k).map_err(|_| "a key tdb sql cannot take (not UTF-8)")?;
        cmd.args(["--key", k]);
    }
    let output = cmd
        .arg("INSERT INTO copy SELECT * FROM src")
        .output()
        .map_err(|e| format!("{}: {e}", tdb.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("INSERT: {}", stderr.trim().replace('\n', " ")));
    }
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("INSERT answered no JSON ({e})"))?;
    answer[0]["count"]
        .as_u64()
        .ok_or_else(|| format!("INSERT answered {answer}, not a count"))
}

/// This build's `tdb`, built as `cargo test --workspace` builds it (its
/// integration tests run it): the same features, so the test stage that
/// follows in CI builds nothing again, where a `cargo build -p tdb-cli`
/// would build DataFusion and Ballista a second time under other
/// features.
fn tdb_binary(root: &Path) -> Result<PathBuf, String> {
    // A clean checkout builds the whole test suite here: cargo's progress
    // shows.
    eprintln!("interop (insert): building the test suite for its tdb (cargo test --no-run)");
    let status = crate::cargo(root)
        .args(["test", "--workspace", "--locked", "--no-run"])
        .status()
        .map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err(format!("cargo test --no-run: {status}"));
    }
    let tdb = root.join("target/debug/tdb");
    if !tdb.is_file() {
        return Err(format!("{}: not built by cargo test", tdb.display()));
    }
    Ok(tdb)
}
