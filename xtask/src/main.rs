//! `cargo xtask <command>`: project automation that needs more than cargo.
//!
//! - `fixtures [--only TILEDB_PY_VERSION]...`: regenerate `testdata/arrays`
//!   with real TileDB. Every row of `xtask/fixtures/writers.tsv` names a
//!   tiledb-py release, the pyenv Python it installs on, a numpy pin, a writer
//!   script and an output directory. Each gets its own venv under
//!   `target/fixtures/`; the writer fills its output directory (emptied first, except for
//!   other writers' directories inside it); then one
//!   expectation pass with the first row's (current) TileDB completes every
//!   case's `expected.json` with what TileDB reports.
//! - `interop [DIR | URI [--out URI] [--config K=V].. | --generated | --arrow [DIR] | --insert [DIR] | --consolidations [DIR] | --storage s3 [DIR]]`:
//!   TileDB reads what tdb wrote (see `interop.rs`); a URI runs the checks
//!   on a corpus in an object store, `--storage s3` on a loopback S3 server
//!   TileDB first writes the corpus into (see `object_stores.rs`).
//! - `bench [--quick] [--only W..] [--json FILE]`: tdb against TileDB on the
//!   same arrays, in one run (see `bench.rs`).
//! - `fuzz [--seconds N] [--runs N] [--target T]... [--list]`: every parser and decoder
//!   under libFuzzer, seeded from the fixtures (see `fuzz.rs`).
//! - `crash [--runs N] [--seed S] [--tiledb] [--storage s3]`: operations SIGKILLed at random points on
//!   the real filesystem, each survivor checked (see `crash.rs`).
//! - `concurrency [--writers N] [--fragments N] [--readers N] [--reader-pause MS] [--tiledb] [--storage s3]`:
//!   writers, readers and a consolidator at once on one array (see
//!   `concurrency.rs`).
//! - `conformance DIR [--only CASE]... [--no-queries] [--arrow] [--budget BYTES] [--piece-aim BYTES]`: every conformance
//!   case under DIR through tdb, compared with its `expected.json` (see
//!   `conformance.rs`); exits non-zero when a case fails.

mod arrow_cells;
mod arrow_copies;
mod bench;
mod cluster_inserts;
mod concurrency;
mod conformance;
mod consolidations;
mod crash;
mod fuzz;
mod generated;
mod interop;
mod object_stores;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

struct Writer {
    tiledb_py: String,
    python: String,
    numpy_pin: String,
    script: String,
    out_dir: String,
}

fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(Path::to_path_buf).unwrap_or(here)
}

fn read_writers(root: &Path) -> Result<Vec<Writer>, String> {
    let path = root.join("xtask/fixtures/writers.tsv");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').map(str::trim).collect();
        let [tiledb_py, python, numpy_pin, script, out_dir] = cols.as_slice() else {
            return Err(format!(
                "{}:{}: expected 5 tab-separated columns",
                path.display(),
                i + 1
            ));
        };
        out.push(Writer {
            tiledb_py: tiledb_py.to_string(),
            python: python.to_string(),
            numpy_pin: numpy_pin.to_string(),
            script: script.to_string(),
            out_dir: out_dir.to_string(),
        });
    }
    if out.is_empty() {
        return Err(format!("{}: no writers", path.display()));
    }
    Ok(out)
}

/// The newest `$PYENV_ROOT/versions/<prefix>[.*]` interpreter.
fn find_python(prefix: &str) -> Result<PathBuf, String> {
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")))
        .ok_or("neither PYENV_ROOT nor HOME is set")?;
    let versions = pyenv.join("versions");
    let mut found: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir(&versions)
        .map_err(|e| format!("{}: {e}", versions.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let matches = name == prefix || name.starts_with(&format!("{prefix}."));
            let key = name.split('.').map(|p| p.parse().unwrap_or(0)).collect();
            matches.then(|| (key, e.path().join("bin/python")))
        })
        .filter(|(_, p)| p.exists())
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, p)| p)
        .ok_or_else(|| format!("no Python {prefix} under {}", versions.display()))
}

/// The whole number after the flag `what` among a command's arguments.
fn number_arg(args: &mut std::slice::Iter<'_, String>, what: &str) -> Result<u64, String> {
    args.next()
        .and_then(|s| s.parse().ok())
        .ok_or(format!("{what} takes a whole number"))
}

/// `cargo` in the workspace, as if run from a shell. `cargo xtask` runs
/// this program with the variables cargo gives a package it runs
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, ...); build scripts that watch
/// them (ring's watches `CARGO_MANIFEST_DIR`) would see a change, and the
/// next build from a shell would build them and all above them again.
fn cargo(root: &Path) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cmd.current_dir(root);
    for (name, _) in std::env::vars_os() {
        let n = name.to_string_lossy();
        if n.starts_with("CARGO_PKG_")
            || n.starts_with("CARGO_MANIFEST_")
            || [
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .contains(&&*n)
        {
            cmd.env_remove(&name);
        }
    }
    cmd
}

fn run(cmd: &mut Command) -> Result<(), String> {
    eprintln!("+ {cmd:?}");
    let status = cmd.status().map_err(|e| format!("{cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed: {status}"))
    }
}

/// The venv holding writer `w`'s tiledb-py, installed on first use (once,
/// however many xtask processes ask for it at the same time).
fn venv_for(root: &Path, w: &Writer) -> Result<PathBuf, String> {
    let venv = root
        .join("target/fixtures")
        .join(format!("venv-{}", w.tiledb_py));
    tdb_test_servers::install_once(&venv, |venv| {
        if !venv.join("bin/python").exists() {
            let python = find_python(&w.python)?;
            run(Command::new(python).arg("-m").arg("venv").arg(venv))?;
        }
        let mut pip = Command::new(venv.join("bin/python"));
        pip.args(["-m", "pip", "install", "--quiet", "--only-binary=:all:"])
            .arg(format!("tiledb=={}", w.tiledb_py));
        if !w.numpy_pin.is_empty() && w.numpy_pin != "-" {
            pip.arg(&w.numpy_pin);
        }
        run(&mut pip)
    })?;
    Ok(venv)
}

/// Empties a writer's output directory, keeping the directories that hold
/// other writers' output (the current corpus contains `legacy/`).
fn clear_out_dir(root: &Path, out_dir: &str, writers: &[Writer]) -> Result<(), String> {
    let out = root.join(out_dir);
    if !out.exists() {
        return Ok(());
    }
    let others: Vec<PathBuf> = writers
        .iter()
        .filter(|o| o.out_dir != out_dir)
        .map(|o| root.join(&o.out_dir))
        .collect();
    for entry in std::fs::read_dir(&out).map_err(|e| format!("{}: {e}", out.display()))? {
        let path = entry.map_err(|e| format!("{}: {e}", out.display()))?.path();
        if others.iter().any(|o| o.starts_with(&path)) {
            continue;
        }
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn fixtures(args: &[String]) -> Result<(), String> {
    let mut only = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--only" => only.push(it.next().ok_or("--only needs a tiledb-py version")?.clone()),
            other => return Err(format!("fixtures: unknown argument {other:?}")),
        }
    }
    let root = workspace_root();
    let writers = read_writers(&root)?;
    let reference = venv_for(&root, &writers[0])?;
    let mut written = Vec::new();
    for w in writers
        .iter()
        .filter(|w| only.is_empty() || only.contains(&w.tiledb_py))
    {
        let venv = venv_for(&root, w)?;
        clear_out_dir(&root, &w.out_dir, &writers)?;
        run(Command::new(venv.join("bin/python"))
            .current_dir(&root)
            .arg(Path::new("xtask/fixtures").join(&w.script))
            .arg("--out")
            .arg(&w.out_dir))?;
        written.push(w.out_dir.clone());
    }
    for dir in &written {
        run(Command::new(reference.join("bin/python"))
            .current_dir(&root)
            .arg("xtask/fixtures/expect.py")
            .arg(dir))?;
    }
    eprintln!(
        "fixtures: {} writer(s) ran; expected.json completed",
        written.len()
    );
    Ok(())
}

pub(crate) const USAGE: &str = "usage: cargo xtask fixtures [--only TILEDB_PY_VERSION]...
       cargo xtask interop [DIR | URI [--out URI] [--config KEY=VALUE].. | --generated | --arrow [DIR] | --insert [DIR] | --consolidations [DIR] | --storage s3 [DIR]]
       cargo xtask bench [--quick | --scale] [--only W..] [--json FILE] [--storage local|s3] [--tdb-config KEY=VALUE]..
       cargo xtask conformance DIR [--only CASE]... [--no-queries] [--arrow] [--budget BYTES] [--piece-aim BYTES] [--config KEY=VALUE]..
       cargo xtask fuzz [--seconds N] [--runs N] [--target T]... [--list]
       cargo xtask crash [--runs N] [--seed S] [--tiledb] [--storage s3]
       cargo xtask concurrency [--writers N] [--fragments N] [--readers N] [--reader-pause MS] [--tiledb] [--storage s3]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("conformance") {
        return match conformance::conformance(&args[1..]) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("xtask: {e}");
                ExitCode::from(2)
            }
        };
    }
    let result = match args.first().map(String::as_str) {
        Some("fixtures") => fixtures(&args[1..]),
        Some("bench") => {
            read_writers(&workspace_root()).and_then(|w| bench::bench(&args[1..], &w[0]))
        }
        // A writer process of the S3 pass's concurrency check.
        Some("s3-writer") => object_stores::writer(&args[1..]),
        Some("fuzz") => fuzz::fuzz(&args[1..]),
        Some("crash") => crash::crash(&args[1..]),
        Some("concurrency") => concurrency::concurrency(&args[1..]),
        // The processes `concurrency` starts.
        Some("concurrency-child") => concurrency::child(&args[1..]),
        // The process `crash` kills.
        Some("crash-child") => crash::child(&args[1..]),
        Some("interop") => {
            read_writers(&workspace_root()).and_then(|w| interop::interop(&args[1..], &w[0]))
        }
        _ => Err(USAGE.to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// Each package `cargo tree` lists for `args`, with every feature set it
    /// is built with (a build dependency can be built twice, with two sets).
    fn features(args: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
        let out = cargo(&workspace_root())
            .args(["tree", "--locked", "--prefix", "none", "-f", "{p} [{f}]"])
            .args(args)
            .output()
            .expect("cargo tree runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut map: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // "name vX.Y.Z [(path)] [f1,f2] [(*)]"
            let mut words = line.split_whitespace();
            let (Some(name), Some(version)) = (words.next(), words.next()) else {
                continue;
            };
            let Some(set) = words.find(|w| w.starts_with('[')) else {
                continue;
            };
            map.entry(format!("{name} {version}"))
                .or_default()
                .insert(set.to_owned());
        }
        map
    }

    /// xtask's dependencies must resolve every package it links with the
    /// features `cargo test --workspace` builds it with, or CI (which builds
    /// xtask, then the tests) compiles it, and all above it, twice. The fix
    /// for a failure: add, among the "not used in code" dependencies of
    /// xtask/Cargo.toml, the dev-dependency that brings the missing features.
    #[test]
    fn features_match_the_workspace_tests() {
        let xtask = features(&["-p", "xtask", "-e", "normal,build"]);
        let tests = features(&["--workspace"]);
        assert!(
            xtask.len() > 100,
            "cargo tree listed {} packages",
            xtask.len()
        );
        let differ: Vec<String> = xtask
            .iter()
            .filter(|(p, _)| !p.starts_with("xtask "))
            .filter(|(p, sets)| tests.get(*p) != Some(sets))
            .map(|(p, sets)| format!("{p}: {sets:?}, tests {:?}", tests.get(p)))
            .collect();
        assert!(differ.is_empty(), "{differ:#?}");
    }

    /// The libraries Cargo.toml builds unoptimized (it says why) must be
    /// every crate of their families xtask links: one that a DataFusion,
    /// Ballista or Arrow upgrade adds would otherwise build at opt-level 1,
    /// minutes of a clean build. The fix for a failure: add it to
    /// `[profile.dev.package]` with `{ opt-level = 0 }`.
    #[test]
    fn heavy_libraries_build_unoptimized() {
        const FAMILIES: [&str; 6] = [
            "arrow",
            "ballista",
            "datafusion",
            "object_store",
            "parquet",
            "sqlparser",
        ];
        let manifest = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
        let unoptimized: BTreeSet<&str> = manifest
            .lines()
            .filter_map(|l| l.strip_suffix(" = { opt-level = 0 }"))
            .collect();
        let linked = features(&["-p", "xtask", "-e", "normal,build"]);
        let heavy: BTreeSet<&str> = linked
            .keys()
            .filter_map(|p| p.split(' ').next())
            .filter(|name| {
                FAMILIES.iter().any(|f| {
                    name.strip_prefix(f)
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
                })
            })
            .collect();
        assert!(heavy.len() > 40, "xtask links {heavy:?}");
        let missing: Vec<&&str> = heavy.difference(&unoptimized).collect();
        assert!(missing.is_empty(), "built at opt-level 1: {missing:?}");
    }
}
