//! `cargo xtask bench [--quick | --scale] [--only W..] [--json FILE] [--storage local|s3]
//! [--tdb-config KEY=VALUE]..`: tdb against TileDB on the same arrays, in
//! the same run (`--tdb-config`: storage settings for tdb's side, e.g.
//! `vfs.min_batch_size`).
//!
//! `--scale` (opt-in, not in CI: up to 3 GB written, half an hour) runs W1's
//! and W3's whole reads at 1×, 4× and 16× their cells and consolidates W5's
//! fragments (625 to 10,000) under a 64 MiB budget, then prints how each
//! phase's time and tdb's peak memory grow against the 1× run (time should
//! grow as the cells, memory stay flat). TileDB reads beside tdb; its
//! consolidation runs at 1× only (its memory grows with the fragments).
//!
//! Each workload's arrays are written once by real TileDB
//! (`xtask/bench/workloads.py` in the fixture venv) and cached under
//! `target/bench/<scale>/<workload>`. Every phase then runs in fresh
//! processes — tdb through the `tdb` facade (`tdb-bench`, release build
//! without features; the peers and the SQL phase run from a second build
//! with them; `--quick`, a smoke test, uses the dev build),
//! TileDB through tiledb-py (`xtask/bench/tiledb_phase.py`, concurrency set
//! to the core count) — one warm-up each, then alternating A B A B. Both
//! sides touch every result byte and report a checksum; a phase whose
//! engines disagree on cells or checksum fails the run. Printed and written
//! as JSON: per phase the medians, their ratio (TileDB time / tdb time) and
//! each side's peak resident set.
//!
//! Full local runs read some phases a third way, on a peer format's copy
//! of the same array (`tdb-bench zarr-copy` / `parquet-copy`, cached under
//! the workload's `peers/`): W1's and W2's reads beside Zarr V3 through
//! zarrs (a chunk per tile, the nearest codec chain), W3's whole read,
//! boxes and condition beside Parquet through arrow-rs (a row group per
//! data tile, in TileDB's global order, ZSTD, statistics pruning on). The
//! peer must give tdb's cells and checksum; its row prints its time, its
//! time over tdb's and its peak.
//!
//! `--storage s3` runs the read phases against a loopback S3 server
//! (moto) behind a proxy that holds every request back 10 ms, as a remote
//! store would: TileDB writes the arrays there (its own VFS), both engines
//! read them through the proxy, which counts each side's requests.

use crate::{run, venv_for, workspace_root, Writer};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One timed thing: a phase file run on an array by both engines.
struct Phase {
    workload: &'static str,
    name: String,
    /// The array, relative to the workload's directory.
    array: String,
    spec: Value,
    /// Result bytes, for throughput.
    bytes: u64,
}

/// One process's report.
#[derive(Debug, Clone, Copy)]
struct Measure {
    seconds: f64,
    cells: u64,
    check: f64,
    peak_kib: u64,
    /// Requests the read sent, where tdb-bench counted them.
    requests: Option<u64>,
}

struct Sizes {
    w1: i64,
    w2: Vec<i64>,
    w3: i64,
    w4: i64,
    w6: i64,
    w7: i64,
    reps: usize,
    warm_up: bool,
}

const FULL: fn() -> Sizes = || Sizes {
    w1: 4096,
    w2: vec![1024, 4096, 8192],
    w3: 4_000_000,
    w4: 1_000_000,
    w6: 262_144,
    w7: 2000,
    reps: 5,
    warm_up: true,
};

const QUICK: fn() -> Sizes = || Sizes {
    w1: 512,
    w2: vec![256, 512],
    w3: 20_000,
    w4: 10_000,
    w6: 8192,
    w7: 300,
    reps: 1,
    warm_up: false,
};

/// A seeded generator, so every run (and both engines) reads the same
/// slices.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: i64) -> i64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n.max(1) as u64) as i64
    }
}

fn query(ranges: Option<Vec<[i64; 2]>>, layout: &str, condition: Option<&str>) -> Value {
    json!({"ranges": ranges, "layout": layout, "condition": condition})
}

fn read(fields: &[&str], queries: Vec<Value>) -> Value {
    json!({"fields": fields, "queries": queries})
}

/// `spec`, read by `peer` too (a name in [`PEERS`]) on its copy of the
/// array.
fn beside(mut spec: Value, peer: &str) -> Value {
    spec["peers"] = json!([peer]);
    spec
}

/// A write phase: `fields` of `array` read (untimed), then written into a
/// new array with its schema; `bytes` is what is written.
fn write_phase(
    workload: &'static str,
    name: String,
    array: &str,
    fields: &[&str],
    bytes: i64,
) -> Phase {
    Phase {
        workload,
        name,
        array: array.into(),
        spec: json!({"fields": fields, "queries": [], "write": true}),
        bytes: bytes as u64,
    }
}

/// `--scale`'s phases at `f` times W1's, W3's and W5's size (the arrays
/// `workloads.py` writes for scale `scale-F`): W1 and W3 read whole, W5's
/// fragments consolidated under 64 MiB (tdb only past 1×).
fn scale_phases(f: i64) -> Vec<Phase> {
    let n: i64 = 4096 * [1, 2, 4][[1, 4, 16].iter().position(|&x| x == f).unwrap_or(0)];
    let cells = 4_000_000 * f;
    let mut consolidate = json!({"fields": ["a"], "queries": [], "consolidate": true,
        "budget": 64u64 << 20});
    if f > 1 {
        consolidate["tdb_only"] = json!(true);
    }
    vec![
        Phase {
            workload: "W1",
            name: format!("whole {n}² ({f}×)"),
            array: format!("dense_f64_{n}"),
            spec: read(&["a"], vec![query(None, "row-major", None)]),
            bytes: (n * n * 8) as u64,
        },
        Phase {
            workload: "W3",
            name: format!("whole {cells} cells ({f}×)"),
            array: "sparse_2d".into(),
            spec: read(&["a"], vec![query(None, "unordered", None)]),
            bytes: (cells * 8) as u64,
        },
        Phase {
            workload: "W5",
            name: format!("consolidate {} fragments, 64 MiB ({f}×)", 625 * f),
            array: "fragments".into(),
            spec: consolidate,
            bytes: 0,
        },
    ]
}

/// `--scale`'s summary: per phase, time and tdb's peak as multiples of the
/// 1× run's (printed, and kept in each row as `scale_time` and
/// `scale_peak`).
fn scale_growth(rows: &mut [Value]) {
    let family = |row: &Value| -> Option<(String, i64)> {
        let name = row["phase"].as_str()?;
        let (_, f) = name.rsplit_once(" (")?;
        let f: i64 = f.strip_suffix("×)")?.parse().ok()?;
        Some((row["workload"].as_str()?.to_owned(), f))
    };
    let base: Vec<(String, f64, f64)> = (rows.iter())
        .filter_map(|r| {
            let (w, f) = family(r)?;
            let (t, m) = (r["tdb_s"].as_f64()?, r["tdb_peak_mib"].as_f64()?);
            (f == 1).then_some((w, t, m))
        })
        .collect();
    for row in rows.iter_mut() {
        let Some((w, f)) = family(row) else { continue };
        let Some((_, t0, m0)) = base.iter().find(|b| b.0 == w) else {
            continue;
        };
        let time = row["tdb_s"].as_f64().unwrap_or(0.0) / t0;
        let peak = row["tdb_peak_mib"].as_f64().unwrap_or(0.0) / m0;
        if f > 1 {
            println!("{w:<4} {f}× the size: {time:.1}x the time, {peak:.2}x the peak memory of 1×");
        }
        row["scale_time"] = json!(time);
        row["scale_peak"] = json!(peak);
    }
}

fn phases(s: &Sizes) -> Vec<Phase> {
    let mut out = Vec::new();
    let mut rng = Lcg(42);
    let slices = |n: i64, side: i64, rng: &mut Lcg| -> Vec<Value> {
        (0..64)
            .map(|_| {
                let (y, x) = (rng.below(n - side + 1), rng.below(n - side + 1));
                query(
                    Some(vec![[y, y + side - 1], [x, x + side - 1]]),
                    "row-major",
                    None,
                )
            })
            .collect()
    };
    // W1: dense float64, BYTESHUFFLE + ZSTD(3).
    let n = s.w1;
    let side = 256.min(n / 2);
    let array = format!("dense_f64_{n}");
    out.push(Phase {
        workload: "W1",
        name: format!("whole {n}²"),
        array: array.clone(),
        spec: beside(read(&["a"], vec![query(None, "row-major", None)]), "zarr"),
        bytes: (n * n * 8) as u64,
    });
    out.push(Phase {
        workload: "W1",
        name: format!("64 slices {side}²"),
        array: array.clone(),
        spec: beside(read(&["a"], slices(n, side, &mut rng)), "zarr"),
        bytes: (64 * side * side * 8) as u64,
    });
    out.push(write_phase(
        "W1",
        format!("write {n}²"),
        &array,
        &["a"],
        n * n * 8,
    ));
    let c = rng.below(n);
    out.push(Phase {
        workload: "W1",
        name: format!("column {n}×1"),
        array,
        spec: beside(
            read(
                &["a"],
                vec![query(Some(vec![[0, n - 1], [c, c]]), "row-major", None)],
            ),
            "zarr",
        ),
        bytes: (n * 8) as u64,
    });
    // W2: dense int32, no filters, at several sizes.
    for &n in &s.w2 {
        out.push(Phase {
            workload: "W2",
            name: format!("whole {n}²"),
            array: format!("dense_i32_{n}"),
            spec: beside(read(&["a"], vec![query(None, "row-major", None)]), "zarr"),
            bytes: (n * n * 4) as u64,
        });
    }
    let n = s.w2[s.w2.len() / 2];
    // The same whole read four times in one process, as a scan over many
    // batches or a loop of reads makes it: tdb writes each into the
    // buffers of the one before (`Query::next_into`), so only the first
    // pays for fresh pages; TileDB reads as it does for the plain phase.
    out.push(Phase {
        workload: "W2",
        name: format!("whole {n}², 4 reads into reused buffers"),
        array: format!("dense_i32_{n}"),
        spec: read(&["a"], vec![query(None, "row-major", None); 4]),
        bytes: (4 * n * n * 4) as u64,
    });
    // The same read as Arrow record batches (tdb-arrow; TileDB reads as
    // it does for the plain phase): its cost beside the plain one.
    out.push(Phase {
        workload: "W2",
        name: format!("whole {n}² as Arrow"),
        array: format!("dense_i32_{n}"),
        spec: json!({"fields": ["a"], "queries": [query(None, "row-major", None)], "arrow": true}),
        bytes: (n * n * 4) as u64,
    });
    let side = 256.min(n / 2);
    out.push(Phase {
        workload: "W2",
        name: format!("64 slices {side}² of {n}²"),
        array: format!("dense_i32_{n}"),
        spec: beside(read(&["a"], slices(n, side, &mut rng)), "zarr"),
        bytes: (64 * side * side * 4) as u64,
    });
    out.push(write_phase(
        "W2",
        format!("write {n}²"),
        &format!("dense_i32_{n}"),
        &["a"],
        n * n * 4,
    ));
    // W3: sparse 2D, 1% boxes, a 10% condition, aggregates.
    let cells = s.w3;
    let whole = |layout: &str| read(&["a"], vec![query(None, layout, None)]);
    out.push(Phase {
        workload: "W3",
        name: format!("whole {cells} cells"),
        array: "sparse_2d".into(),
        spec: beside(whole("unordered"), "parquet"),
        bytes: (cells * 8) as u64,
    });
    let boxes = (0..16)
        .map(|_| {
            let (y, x) = (rng.below(900_000), rng.below(900_000));
            query(
                Some(vec![[y, y + 99_999], [x, x + 99_999]]),
                "unordered",
                None,
            )
        })
        .collect();
    out.push(Phase {
        workload: "W3",
        name: "16 boxes of 1%".into(),
        array: "sparse_2d".into(),
        spec: beside(read(&["a"], boxes), "parquet"),
        bytes: (cells * 16 / 100 * 8) as u64,
    });
    out.push(Phase {
        workload: "W3",
        name: "condition a < 0.1".into(),
        array: "sparse_2d".into(),
        spec: beside(
            read(&["a"], vec![query(None, "unordered", Some("a < 0.1"))]),
            "parquet",
        ),
        bytes: (cells / 10 * 8) as u64,
    });
    out.push(Phase {
        workload: "W3",
        name: "sum and count".into(),
        array: "sparse_2d".into(),
        spec: json!({
            "fields": ["a"],
            "queries": [query(None, "unordered", None)],
            "aggregates": [["a", "sum"], ["a", "count"]],
        }),
        bytes: (cells * 8) as u64,
    });
    // The same aggregates through SQL (tdb-datafusion) beside TileDB-Py's.
    out.push(Phase {
        workload: "W3",
        name: "SQL sum and count".into(),
        array: "sparse_2d".into(),
        spec: json!({
            "fields": ["a"],
            "queries": [query(None, "unordered", None)],
            "aggregates": [["a", "sum"], ["a", "count"]],
            "sql": "SELECT sum(a), count(a) FROM t",
        }),
        bytes: (cells * 8) as u64,
    });
    out.push(write_phase(
        "W3",
        format!("write {cells} cells"),
        "sparse_2d",
        &["y", "x", "a"],
        cells * 24,
    ));
    // W4: sparse 1D, var-length UTF-8.
    let cells = s.w4;
    out.push(write_phase(
        "W4",
        format!("write {cells} strings"),
        "sparse_var",
        &["k", "s"],
        cells * (8 + 17),
    ));
    out.push(Phase {
        workload: "W4",
        name: format!("whole {cells} strings"),
        array: "sparse_var".into(),
        spec: read(&["s"], vec![query(None, "unordered", None)]),
        bytes: (cells * 17) as u64,
    });
    out.push(Phase {
        workload: "W4",
        name: format!("whole {cells} strings as Arrow"),
        array: "sparse_var".into(),
        spec: json!({"fields": ["s"], "queries": [query(None, "unordered", None)], "arrow": true}),
        bytes: (cells * 17) as u64,
    });
    out.push(Phase {
        workload: "W4",
        name: "10% range".into(),
        array: "sparse_var".into(),
        spec: read(
            &["s"],
            vec![query(Some(vec![[0, cells - 1]]), "unordered", None)],
        ),
        bytes: (cells / 10 * 17) as u64,
    });
    // W6: 20 vectors (2,560 cells) out of one tile holding them all
    // (128 MiB at full scale), as a vector search reads its candidates.
    let v = rng.below(s.w6 - 20);
    out.push(Phase {
        workload: "W6",
        name: format!("20 vectors of a {} MiB tile", (s.w6 * 128 * 4) >> 20),
        array: "vectors".into(),
        spec: read(
            &["a"],
            vec![query(Some(vec![[0, 127], [v, v + 19]]), "row-major", None)],
        ),
        bytes: 20 * 128 * 4,
    });
    // W7: whole reads of small sparse arrays against their cell order
    // (and one along it, and unordered ones) under small budgets, beside
    // the same read unbudgeted: what a budget costs in time and requests
    // (tdb's own ratios; TileDB reads unbudgeted). And a dense array whose
    // row of tiles passes the budgets, read along its cell order and
    // across it.
    for (array, layout) in [
        ("hilbert_3d", "row-major"),
        ("row_2d", "col-major"),
        ("col_2d", "row-major"),
        ("row_2d", "row-major"),
        ("hilbert_3d", "unordered"),
        ("col_2d", "unordered"),
        ("dense_rows", "row-major"),
        ("dense_rows", "col-major"),
    ] {
        for budget in [None, Some(1u64 << 20), Some(64 << 10), Some(16 << 10)] {
            let mut spec = read(&["a"], vec![query(None, layout, None)]);
            spec["budget"] = json!(budget);
            spec["count_requests"] = json!(true);
            out.push(Phase {
                workload: "W7",
                name: format!(
                    "{array} {layout}, {}",
                    budget.map_or("unbudgeted".into(), |b| format!("budget {} KiB", b >> 10))
                ),
                array: array.into(),
                spec,
                bytes: (s.w7 * 4) as u64,
            });
        }
    }
    // W5: consolidating the 1,000 fragments (a copy, made untimed).
    out.push(Phase {
        workload: "W5",
        name: "consolidate the fragments".into(),
        array: "fragments".into(),
        spec: json!({"fields": ["a"], "queries": [], "consolidate": true}),
        bytes: 0,
    });
    // W5: many small fragments; open and read one cell.
    for (array, what) in [
        ("fragments", "open + one cell"),
        ("fragments_commits", "open + one cell, commits consolidated"),
        (
            "fragments_meta",
            "open + one cell, fragment metadata consolidated",
        ),
    ] {
        out.push(Phase {
            workload: "W5",
            name: what.into(),
            array: array.into(),
            spec: json!({
                "fields": ["a"],
                "queries": [query(Some(vec![[0, 0]]), "unordered", None)],
                "time_open": true,
            }),
            bytes: 8,
        });
    }
    out
}

/// Whether `other`'s report (`label`'s) agrees with tdb's `x`: the same
/// cells, checksums equal to a millionth (sums in another order round
/// otherwise). A disagreement is added to `failures`, naming phase `what`.
fn same_answer(
    failures: &mut Vec<String>,
    what: &str,
    x: &Measure,
    label: &str,
    other: &Measure,
) -> bool {
    let same = x.cells == other.cells
        && (x.check - other.check).abs() <= 1e-6 * x.check.abs().max(other.check.abs()).max(1.0);
    if !same {
        failures.push(format!(
            "{what}: tdb {} cells (check {}), {label} {} cells (check {})",
            x.cells, x.check, other.cells, other.check
        ));
    }
    same
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Runs `cmd` and parses the JSON object it prints last.
fn measure(cmd: &mut Command) -> Result<Measure, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or("");
    let v: Value = serde_json::from_str(line).map_err(|e| format!("{cmd:?}: {e}: {line}"))?;
    let f = |k: &str| {
        v[k].as_f64()
            .ok_or_else(|| format!("{cmd:?}: no {k} in {line}"))
    };
    Ok(Measure {
        seconds: f("seconds")?,
        cells: f("cells")? as u64,
        check: f("check")?,
        peak_kib: f("peak_kib")? as u64,
        requests: v["requests"].as_u64(),
    })
}

/// The workload's arrays, written by TileDB unless cached for this scale
/// and this generator.
fn workload_dir(root: &Path, python: &Path, w: &str, scale: &str) -> Result<PathBuf, String> {
    let dir = root.join("target/bench").join(scale).join(w);
    let script = root.join("xtask/bench/workloads.py");
    let source = std::fs::read(&script).map_err(|e| format!("{}: {e}", script.display()))?;
    let stamp_text = format!("{w} {scale} {:016x}", fnv(&source));
    let stamp = dir.join(".tdb-bench");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(stamp_text.as_str()) {
        return Ok(dir);
    }
    eprintln!("bench: writing {w} ({scale}) with TileDB");
    let peers = dir.join("peers");
    if peers.exists() {
        std::fs::remove_dir_all(&peers).map_err(|e| format!("{}: {e}", peers.display()))?;
    }
    run(Command::new(python)
        .arg(&script)
        .arg(w)
        .arg(&dir)
        .arg(scale))?;
    std::fs::write(&stamp, stamp_text).map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(dir)
}

/// The peers a phase reads beside tdb and TileDB (`spec["peers"]`), by
/// the name `tdb-bench` knows them by, and what the row calls them.
const PEERS: [(&str, &str); 2] = [("zarr", "Zarr (zarrs)"), ("parquet", "Parquet (arrow-rs)")];

/// `array`'s copy in peer format `peer`, written by `tdb-bench` from the
/// array unless cached (under the workload's `peers/`, which a rewrite of
/// the workload removes).
fn peer_copy(tdb: &Path, dir: &Path, array: &str, peer: &str) -> Result<PathBuf, String> {
    let out = dir.join("peers").join(format!("{array}.{peer}"));
    if out.exists() {
        return Ok(out);
    }
    let tmp = out.with_extension("partial");
    if tmp.exists() {
        let _ = std::fs::remove_dir_all(&tmp).or_else(|_| std::fs::remove_file(&tmp));
    }
    std::fs::create_dir_all(dir.join("peers")).map_err(|e| format!("{}: {e}", dir.display()))?;
    eprintln!("bench: copying {array} as {peer}");
    run(Command::new(tdb)
        .arg(format!("{peer}-copy"))
        .arg(dir.join(array))
        .arg(&tmp))?;
    std::fs::rename(&tmp, &out).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(out)
}

/// FNV-1a: a generator's fingerprint for the cache stamp.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}

pub(crate) fn bench(args: &[String], reference: &Writer) -> Result<(), String> {
    let mut quick = false;
    let mut only: Vec<String> = Vec::new();
    let mut tdb_config: Vec<String> = Vec::new();
    let mut json_out = None;
    let mut s3 = false;
    let mut scaled = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--scale" => scaled = true,
            "--only" => only.push(it.next().ok_or("--only needs a workload")?.clone()),
            "--json" => json_out = Some(PathBuf::from(it.next().ok_or("--json needs a file")?)),
            "--tdb-config" => {
                tdb_config.push(it.next().ok_or("--tdb-config needs KEY=VALUE")?.clone())
            }
            "--storage" => match it.next().map(String::as_str) {
                Some("s3") => s3 = true,
                Some("local") => s3 = false,
                _ => return Err("bench: --storage takes local or s3".into()),
            },
            other => return Err(format!("bench: unknown argument {other:?}")),
        }
    }
    let root = workspace_root();
    let python = venv_for(&root, reference)?.join("bin/python");
    // `--quick` is a smoke test (both engines run every phase but the SQL
    // one and agree): the dev build serves, without DataFusion (its SQL
    // answers are the tests') and without the peers. Timings come from
    // full runs only. Built beside xtask, whose dependencies resolve the
    // workspace's features: alone, tdb-bench would resolve fewer and build
    // every library it shares with xtask again.
    //
    // A full run builds tdb-bench twice: without features for tdb's own
    // phases, and with the peers and DataFusion for the peers' phases and
    // the SQL one. Linked into every phase, they added 10 MiB to each one's
    // resident set (relocated data of a 124 MB binary) and slowed some
    // reads by a tenth (W3's condition 65 -> 73 ms, side by side).
    let profile = if quick { "debug" } else { "release" };
    let built = root.join("target").join(profile).join("tdb-bench");
    let mut build = crate::cargo(&root);
    build.args(["build", "--quiet", "-p", "tdb-bench"]);
    let tdb = if quick {
        run(build.args(["-p", "xtask"]))?;
        built.clone()
    } else {
        run(build.arg("--release"))?;
        let lean = root.join("target/bench/tdb-bench-lean");
        std::fs::create_dir_all(root.join("target/bench")).map_err(|e| e.to_string())?;
        std::fs::copy(&built, &lean).map_err(|e| format!("{}: {e}", lean.display()))?;
        let mut build = crate::cargo(&root);
        build.args(["build", "--quiet", "-p", "tdb-bench", "--release"]);
        run(build.args(["--features", "sql,peers"]))?;
        lean
    };
    // The build with the peers and DataFusion (the quick run's has none).
    let tdb_full = built;
    let tiledb_phase = root.join("xtask/bench/tiledb_phase.py");
    if scaled && (quick || s3) {
        return Err("bench: --scale runs alone (local storage, release build)".into());
    }
    let (scale, mut sizes) = if quick {
        ("quick", QUICK())
    } else {
        ("full", FULL())
    };
    // Each phase with the scale its arrays were written at.
    let jobs: Vec<(String, Phase)> = if scaled {
        sizes.reps = 3;
        sizes.warm_up = false;
        [1, 4, 16]
            .into_iter()
            .flat_map(|f| {
                scale_phases(f)
                    .into_iter()
                    .map(move |p| (format!("scale-{f}"), p))
            })
            .collect()
    } else {
        phases(&sizes)
            .into_iter()
            .map(|p| (scale.to_owned(), p))
            .collect()
    };
    let selected = |w: &str| only.is_empty() || only.iter().any(|o| o.eq_ignore_ascii_case(w));
    let work = root.join("target/bench/phases");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let mut rows: Vec<Value> = Vec::new();
    let mut failures = Vec::new();
    let remote = if s3 {
        Some(Remote::start(&root, &python)?)
    } else {
        None
    };
    println!(
        "{:<4} {:<48} {:>10} {:>10} {:>7} {:>9} {:>9}{}",
        "",
        "phase",
        "tdb s",
        "TileDB s",
        "ratio",
        "tdb MiB",
        "TileDB MiB",
        if s3 { "   tdb req TileDB req" } else { "" }
    );
    for (k, (scale, p)) in jobs.iter().enumerate() {
        let scale = scale.as_str();
        if !selected(p.workload) {
            continue;
        }
        let tdb_only = p.spec["tdb_only"].as_bool().unwrap_or(false);
        if quick && p.spec.get("sql").is_some() {
            // The smoke test's tdb-bench is built without DataFusion.
            continue;
        }
        let dir = workload_dir(&root, &python, p.workload, scale)?;
        let writes = ["write", "consolidate"]
            .iter()
            .any(|k| p.spec[*k].as_bool().unwrap_or(false));
        let array = match &remote {
            // Reads only: the arrays live in the server.
            Some(_) if writes => continue,
            Some(r) => PathBuf::from(r.array(&root, &python, &dir, p.workload, scale, &p.array)?),
            None => dir.join(&p.array),
        };
        let spec = work.join(format!("phase{k}.json"));
        std::fs::write(&spec, p.spec.to_string())
            .map_err(|e| format!("{}: {e}", spec.display()))?;
        // Write and consolidation phases write an array here, removed
        // before every run.
        let out = writes.then(|| work.join(format!("written{k}")));
        let with_out = |c: &mut Command| -> Result<(), String> {
            if let Some(out) = &out {
                if out.exists() {
                    std::fs::remove_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
                }
                c.arg(out);
            }
            Ok(())
        };
        let tdb_cmd = || {
            let bin = if p.spec.get("sql").is_some() {
                &tdb_full
            } else {
                &tdb
            };
            let mut c = Command::new(bin);
            c.arg("phase").arg(&spec).arg(&array);
            if let Some(r) = &remote {
                c.envs(r.tdb_env());
            }
            c.env("TDB_CONFIG", tdb_config.join(" "));
            with_out(&mut c)?;
            measure(&mut c)
        };
        let tiledb_cmd = || {
            let mut c = Command::new(&python);
            c.arg(&tiledb_phase).arg(&spec).arg(&array);
            if let Some(r) = &remote {
                c.env("TDB_TILEDB_CONFIG", r.tiledb_config());
            }
            with_out(&mut c)?;
            measure(&mut c)
        };
        // Requests one run of each engine sends (through the proxy).
        let requests = |m: &dyn Fn() -> Result<Measure, String>| -> Result<(Measure, u64), String> {
            if let Some(r) = &remote {
                r.proxy.requests(true);
            }
            let got = m()?;
            Ok((got, remote.as_ref().map_or(0, |r| r.proxy.requests(true))))
        };
        // The peers this phase reads too (full local runs: the quick
        // build has none), each from its copy of the array, the phase's
        // spec naming it.
        let peers: Vec<(&str, &str, PathBuf, PathBuf)> = if quick || remote.is_some() {
            Vec::new()
        } else {
            PEERS
                .iter()
                .filter(|(peer, _)| {
                    p.spec["peers"]
                        .as_array()
                        .is_some_and(|l| l.iter().any(|x| x == peer))
                })
                .map(|&(peer, label)| {
                    let copy = peer_copy(&tdb_full, &dir, &p.array, peer)?;
                    let mut spec_json = p.spec.clone();
                    spec_json["peer"] = json!(peer);
                    let file = work.join(format!("phase{k}-{peer}.json"));
                    std::fs::write(&file, spec_json.to_string())
                        .map_err(|e| format!("{}: {e}", file.display()))?;
                    Ok((peer, label, file, copy))
                })
                .collect::<Result<_, String>>()?
        };
        let peer_cmd = |file: &Path, copy: &Path| {
            measure(Command::new(&tdb_full).arg("phase").arg(file).arg(copy))
        };
        if sizes.warm_up {
            tdb_cmd()?;
            if !tdb_only {
                tiledb_cmd()?;
            }
            for (_, _, file, copy) in &peers {
                peer_cmd(file, copy)?;
            }
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut c: Vec<Vec<Measure>> = vec![Vec::new(); peers.len()];
        let (mut a_req, mut b_req) = (0, 0);
        for _ in 0..sizes.reps {
            let (m, n) = requests(&tdb_cmd)?;
            a.push(m);
            a_req = n;
            for ((_, _, file, copy), runs) in peers.iter().zip(&mut c) {
                runs.push(peer_cmd(file, copy)?);
            }
            if tdb_only {
                continue;
            }
            let (m, n) = requests(&tiledb_cmd)?;
            b.push(m);
            b_req = n;
        }
        // A phase TileDB does not run agrees with itself.
        let (x, y) = (a[0], b.first().copied().unwrap_or(a[0]));
        let what = format!("{} {}", p.workload, p.name);
        let agree = same_answer(&mut failures, &what, &x, "TileDB", &y);
        let tdb_s = median(&mut a.iter().map(|m| m.seconds).collect::<Vec<_>>());
        // (NaN where TileDB did not run.)
        let tiledb_s = median(&mut b.iter().map(|m| m.seconds).collect::<Vec<_>>());
        let peak = |v: &[Measure]| v.iter().map(|m| m.peak_kib).max().unwrap_or(0) as f64 / 1024.0;
        let (tdb_mib, tiledb_mib) = (peak(&a), peak(&b));
        println!(
            "{:<4} {:<48} {:>10.4} {:>10.4} {:>7.2} {:>9.1} {:>9.1}{}{}",
            p.workload,
            p.name,
            tdb_s,
            tiledb_s,
            tiledb_s / tdb_s,
            tdb_mib,
            tiledb_mib,
            if s3 {
                format!(" {a_req:>9} {b_req:>10}")
            } else {
                String::new()
            },
            if agree { "" } else { "  MISMATCH" }
        );
        // Each peer beside tdb: the same answers, its time and peak.
        let mut peer_rows = serde_json::Map::new();
        for ((peer, label, _, _), runs) in peers.iter().zip(&c) {
            let z = runs[0];
            let same = same_answer(&mut failures, &what, &x, label, &z);
            let peer_s = median(&mut runs.iter().map(|m| m.seconds).collect::<Vec<_>>());
            let peer_mib = peak(runs);
            println!(
                "{:<4} {:<48} {:>10} {:>10.4} {:>7.2} {:>9} {:>9.1}{}",
                "",
                format!("  beside {label}"),
                "",
                peer_s,
                peer_s / tdb_s,
                "",
                peer_mib,
                if same { "" } else { "  MISMATCH" }
            );
            peer_rows.insert(
                (*peer).to_owned(),
                json!({"label": label, "seconds": peer_s, "ratio": peer_s / tdb_s, "peak_mib": peer_mib}),
            );
        }
        rows.push(json!({
            "peers": peer_rows,
            "workload": p.workload,
            "phase": p.name,
            "tdb_s": tdb_s,
            "tiledb_s": tiledb_s,
            "ratio": tiledb_s / tdb_s,
            "tdb_peak_mib": tdb_mib,
            "tiledb_peak_mib": tiledb_mib,
            "bytes": p.bytes,
            "storage": if s3 { "s3" } else { "local" },
            "tdb_requests": remote.as_ref().map(|_| a_req).or(a[0].requests),
            "tiledb_requests": remote.as_ref().map(|_| b_req),
        }));
    }
    budget_ratios(&mut rows);
    if scaled {
        scale_growth(&mut rows);
    }
    // The store's floor: every byte of W1's array through the proxy, as
    // fast as tdb's storage layer fetches them.
    if let (Some(r), true) = (&remote, selected("W1")) {
        let dir = workload_dir(&root, &python, "W1", scale)?;
        let array = format!("dense_f64_{}", sizes.w1);
        let uri = r.array(&root, &python, &dir, "W1", scale, &array)?;
        let mut runs = (0..3)
            .map(|_| measure(Command::new(&tdb).arg("fetch").arg(&uri).envs(r.tdb_env())))
            .collect::<Result<Vec<_>, _>>()?;
        runs.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        let m = runs[1];
        println!(
            "s3: every byte of W1's array ({:.1} MiB) fetched in {:.3} s ({:.0} MB/s), the floor of its whole read",
            m.cells as f64 / (1 << 20) as f64,
            m.seconds,
            m.cells as f64 / m.seconds / 1e6
        );
        rows.push(machine_row("s3: every byte of W1's array", m));
    }
    // The physical limits: memory copy, and raw zstd on W1's tile bytes.
    if selected("W1") && !s3 {
        let gbps = |m: Measure| m.cells as f64 / m.seconds / 1e9;
        let memcpy = measure(Command::new(&tdb).arg("memcpy"))?;
        println!("machine: memcpy {:.1} GB/s (one core)", gbps(memcpy));
        let dir = workload_dir(&root, &python, "W1", scale)?;
        let tiles = find_file(&dir.join(format!("dense_f64_{}", sizes.w1)), "a0.tdb")
            .ok_or("bench: W1 has no a0.tdb")?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let one = measure(Command::new(&tdb).arg("zstd").arg(&tiles).arg("1"))?;
        let all = measure(
            Command::new(&tdb)
                .arg("zstd")
                .arg(&tiles)
                .arg(cores.to_string()),
        )?;
        println!(
            "machine: raw zstd decode of W1's tiles {:.2} GB/s on one core, {:.2} GB/s on {cores}",
            gbps(one),
            gbps(all)
        );
        for (phase, m) in [
            ("memcpy, one core", memcpy),
            ("raw zstd decode of W1 tiles, one core", one),
            ("raw zstd decode of W1 tiles, all cores", all),
        ] {
            rows.push(machine_row(phase, m));
        }
    }
    if let Some(path) = json_out {
        let text = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "bench: the engines disagree:\n  {}",
            failures.join("\n  ")
        ))
    }
}

/// W7's budgeted reads beside the same read unbudgeted: tdb's time and
/// requests as multiples of the unbudgeted read's (printed, and kept in
/// each row as `budget_time_ratio` and `budget_request_ratio`).
fn budget_ratios(rows: &mut [Value]) {
    let base = |row: &Value| -> Option<(String, String)> {
        let name = row["phase"].as_str()?;
        let (read, budget) = name.rsplit_once(", ")?;
        (row["workload"] == "W7").then(|| (read.to_owned(), budget.to_owned()))
    };
    let unbudgeted: Vec<(String, f64, f64)> = (rows.iter())
        .filter_map(|r| {
            let (read, budget) = base(r)?;
            let requests = r["tdb_requests"].as_f64()?;
            (budget == "unbudgeted").then(|| (read, r["tdb_s"].as_f64().unwrap_or(0.0), requests))
        })
        .collect();
    for row in rows.iter_mut() {
        let Some((read, budget)) = base(row) else {
            continue;
        };
        let Some((_, s0, r0)) = unbudgeted.iter().find(|u| u.0 == read) else {
            continue;
        };
        let time = row["tdb_s"].as_f64().unwrap_or(0.0) / s0;
        let requests = row["tdb_requests"].as_f64().unwrap_or(0.0) / r0.max(1.0);
        if budget != "unbudgeted" {
            println!("W7   {read}, {budget}: {time:.1}x the time, {requests:.1}x the requests of the unbudgeted read");
        }
        row["budget_time_ratio"] = json!(time);
        row["budget_request_ratio"] = json!(requests);
    }
}

/// A JSON row for a measure of the machine (or the store), tdb's side only.
fn machine_row(phase: &str, m: Measure) -> Value {
    json!({
        "workload": "machine",
        "phase": phase,
        "tdb_s": m.seconds,
        "tiledb_s": null,
        "ratio": null,
        "tdb_peak_mib": m.peak_kib as f64 / 1024.0,
        "tiledb_peak_mib": null,
        "bytes": m.cells,
    })
}

/// The first file named `name` under `dir`.
fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, name) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
    }
    None
}

/// The S3 side of `--storage s3`: the server, the latency proxy in front
/// of it, and the workloads uploaded so far.
struct Remote {
    server: tdb_test_servers::S3Server,
    proxy: tdb_test_servers::LatencyProxy,
    uploaded: std::cell::RefCell<Vec<String>>,
}

/// What each request to the server costs through the proxy.
const LATENCY: std::time::Duration = std::time::Duration::from_millis(10);
const BENCH_BUCKET: &str = "bench";

impl Remote {
    fn start(_root: &Path, _python: &Path) -> Result<Remote, String> {
        let server = tdb_test_servers::S3Server::start()?;
        server.create_bucket(BENCH_BUCKET)?;
        let proxy = tdb_test_servers::LatencyProxy::start(server.port(), LATENCY)?;
        Ok(Remote {
            server,
            proxy,
            uploaded: Default::default(),
        })
    }

    /// TileDB's config, through the proxy.
    fn tiledb_config(&self) -> String {
        tdb_test_servers::S3Server::tiledb_config_for(self.proxy.port())
    }

    /// tdb's environment, through the proxy.
    fn tdb_env(&self) -> Vec<(&'static str, String)> {
        let mut env = self.server.env();
        for (k, v) in &mut env {
            if *k == "AWS_ENDPOINT_URL" {
                *v = format!("http://127.0.0.1:{}", self.proxy.port());
            }
        }
        env
    }

    /// The URI of `array` of workload `w`, which TileDB puts in the server
    /// (straight, not through the proxy) the first time it is asked for.
    fn array(
        &self,
        root: &Path,
        python: &Path,
        dir: &Path,
        w: &str,
        scale: &str,
        array: &str,
    ) -> Result<String, String> {
        let base = format!("s3://{BENCH_BUCKET}/{scale}/{w}");
        if !self.uploaded.borrow().iter().any(|u| u == w) {
            run(Command::new(python)
                .current_dir(root)
                .env(
                    "TDB_TILEDB_CONFIG",
                    tdb_test_servers::S3Server::tiledb_config_for(self.server.port()),
                )
                .arg("xtask/interop/upload.py")
                .arg(dir)
                .arg(&base))?;
            self.uploaded.borrow_mut().push(w.to_owned());
        }
        Ok(format!("{base}/{array}"))
    }
}
