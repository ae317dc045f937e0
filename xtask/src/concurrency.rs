//! `cargo xtask concurrency [--writers N] [--fragments N] [--readers N]
//! [--reader-pause MS] [--tiledb]`: processes at once on one array on the
//! real filesystem. Writers each write their fragments (a few cells each),
//! readers open and read the whole array in a loop (holding the opened
//! array MS milliseconds before reading), and one process consolidates and
//! vacuums (fragments, commits, fragment metadata) in a loop, until the
//! writers are done. No reader may fail or see part of a fragment (every
//! fragment's cells are all there or none), no consolidation may fail,
//! and at the end tdb (and TileDB, with `--tiledb`) reads every cell of
//! every fragment.
//!
//! With `--storage s3` the array lives in a loopback S3 server (moto,
//! started by `tdb-test-servers`), which every process reaches through the
//! environment (`AWS_*`), as a user's would.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tdb::{
    AnyStorage, Array, ArraySchema, AttributeBuilder, Datatype, DimensionBuilder, FieldBuffer,
    FragmentSelection, OpenOptions, ReadSpec, StorageConfig, WriteSpec,
};
use tdb_format::ArrayType;

type Err = String;

/// Cells per fragment: a reader checks each fragment's cells come whole.
const CELLS: u64 = 4;

fn err(e: tdb::Error) -> Err {
    crate::conformance::chain(&e)
}

fn value(w: u64, k: u64) -> u64 {
    (w << 32) | k
}

fn column(name: &str, values: impl Iterator<Item = u64>) -> FieldBuffer {
    let mut b = FieldBuffer::new(name, Datatype::UInt64, 1, false);
    b.data = values.flat_map(u64::to_le_bytes).collect();
    b
}

fn u64s(b: &FieldBuffer) -> Vec<u64> {
    b.data
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// The array's storage: a local directory or an object store URI, set up
/// by the environment and `config`.
fn storage(dir: &str, config: &StorageConfig) -> Result<AnyStorage, Err> {
    tdb::storage(dir, config).map_err(err)
}

/// Reads the whole array and checks every cell and every fragment's
/// wholeness; the number of cells.
fn read_checked(storage: &AnyStorage, pause: Duration) -> Result<usize, Err> {
    let array = Array::open_in(storage, "", OpenOptions::new()).map_err(err)?;
    // A reader that holds its opened array a while before reading widens
    // the window in which a vacuum removes what it opened.
    std::thread::sleep(pause);
    let batch = array
        .read_all(ReadSpec::new(["w", "k", "a"]))
        .map_err(err)?;
    let field = |n: &str| batch.field(n).map(u64s).ok_or(format!("no field {n}"));
    let (w, k, a) = (field("w")?, field("k")?, field("a")?);
    let mut per_fragment = std::collections::BTreeMap::new();
    for i in 0..w.len() {
        if a[i] != value(w[i], k[i]) {
            return Err(format!("cell ({}, {}) holds {}", w[i], k[i], a[i]));
        }
        *per_fragment.entry((w[i], k[i] / CELLS)).or_insert(0u64) += 1;
    }
    if let Some(((w, j), n)) = per_fragment.iter().find(|(_, &n)| n != CELLS) {
        return Err(format!(
            "fragment {j} of writer {w} shows {n} of its {CELLS} cells"
        ));
    }
    Ok(w.len())
}

/// `xtask concurrency-child write DIR W FRAGMENTS | read DIR STOP PAUSE_MS
/// | consolidate DIR STOP`: prints what it did on stdout.
pub fn child(args: &[String]) -> Result<(), Err> {
    let config = StorageConfig::new();
    match args {
        [role, dir, w, fragments] if role == "write" => {
            let (w, fragments): (u64, u64) = (
                w.parse().map_err(|_| "writer number")?,
                fragments.parse().map_err(|_| "fragment count")?,
            );
            let array =
                Array::open_in(storage(dir, &config)?, "", OpenOptions::new()).map_err(err)?;
            for j in 0..fragments {
                let ks = j * CELLS..(j + 1) * CELLS;
                array
                    .write(WriteSpec::new(vec![
                        column("w", ks.clone().map(|_| w)),
                        column("k", ks.clone()),
                        column("a", ks.map(|k| value(w, k))),
                    ]))
                    .map_err(err)?;
            }
            println!("wrote {fragments}");
        }
        [role, dir, stop, pause] if role == "read" => {
            let pause = Duration::from_millis(pause.parse().map_err(|_| "pause in ms")?);
            let (mut reads, mut most) = (0u64, 0usize);
            let storage = storage(dir, &config)?;
            while !Path::new(stop).exists() {
                most = most.max(read_checked(&storage, pause)?);
                reads += 1;
            }
            println!("{reads} reads, at most {most} cells");
        }
        [role, dir, stop] if role == "consolidate" => {
            let mut rounds = 0u64;
            let storage = storage(dir, &config)?;
            while !Path::new(stop).exists() {
                let a = Array::open_in(&storage, "", OpenOptions::new()).map_err(err)?;
                a.consolidate_fragments(&FragmentSelection::default(), tdb::DEFAULT_BUDGET)
                    .map_err(err)?;
                a.vacuum_fragments().map_err(err)?;
                a.consolidate_commits().map_err(err)?;
                a.vacuum_commits().map_err(err)?;
                a.consolidate_fragment_metadata().map_err(err)?;
                a.vacuum_fragment_metadata().map_err(err)?;
                rounds += 1;
            }
            println!("{rounds} rounds");
        }
        _ => return Err("usage: xtask concurrency-child write|read|consolidate ...".into()),
    }
    Ok(())
}

fn spawn(args: &[String], env: &[(&str, String)]) -> Result<Child, Err> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    Command::new(exe)
        .arg("concurrency-child")
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("concurrency-child: {e}"))
}

/// Waits for a child: what it printed, or why it failed.
fn finish(what: &str, child: Child) -> Result<String, String> {
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

pub fn concurrency(args: &[String]) -> Result<(), Err> {
    let (mut writers, mut fragments, mut readers, mut tiledb) = (8u64, 100u64, 2u64, false);
    let mut pause = 0u64;
    let mut s3 = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut number = |what: &str| crate::number_arg(&mut it, what);
        match a.as_str() {
            "--writers" => writers = number("--writers")?,
            "--fragments" => fragments = number("--fragments")?,
            "--readers" => readers = number("--readers")?,
            "--tiledb" => tiledb = true,
            "--reader-pause" => pause = number("--reader-pause")?,
            "--storage" => match it.next().map(String::as_str) {
                Some("s3") => s3 = true,
                Some("local") => s3 = false,
                other => return Err(format!("concurrency: --storage local|s3, not {other:?}")),
            },
            other => return Err(format!("concurrency: unknown argument {other}")),
        }
    }
    let root = crate::workspace_root();
    // Its own scratch directory per storage: CI runs the two side by side.
    let work = root.join(if s3 {
        "target/concurrency-s3"
    } else {
        "target/concurrency"
    });
    let _ = std::fs::remove_dir_all(&work);
    let stop = work.join("stop");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    // The server lives until the end of this function.
    let server = if s3 {
        let server = tdb_test_servers::S3Server::start()?;
        server.create_bucket("tdb")?;
        Some(server)
    } else {
        None
    };
    let (dir, config, env) = match &server {
        Some(server) => (
            "s3://tdb/concurrency/array".to_owned(),
            server.settings().into_iter().collect(),
            server.env(),
        ),
        None => (
            work.join("array").display().to_string(),
            StorageConfig::new(),
            Vec::new(),
        ),
    };
    let array_storage = storage(&dir, &config)?;
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("w", 0u64..=63).tile_extent(8u64))
        .dimension(DimensionBuilder::range("k", 0u64..=(1 << 30)).tile_extent(1024u64))
        .attribute(AttributeBuilder::new("a", Datatype::UInt64))
        .build()
        .map_err(|e| e.to_string())?;
    Array::create_in(&array_storage, "", &schema, &[], OpenOptions::new()).map_err(err)?;
    let stop_at = stop.display().to_string();
    let background: Vec<(String, Child)> = (0..readers)
        .map(|r| {
            let args = vec![
                "read".into(),
                dir.clone(),
                stop_at.clone(),
                pause.to_string(),
            ];
            (format!("reader {r}"), args)
        })
        .chain([(
            "consolidator".to_owned(),
            vec!["consolidate".into(), dir.clone(), stop_at.clone()],
        )])
        .map(|(name, args)| spawn(&args, &env).map(|c| (name, c)))
        .collect::<Result<_, _>>()?;
    let started = std::time::Instant::now();
    let writing: Vec<(String, Child)> = (0..writers)
        .map(|w| {
            let args = vec![
                "write".into(),
                dir.clone(),
                w.to_string(),
                fragments.to_string(),
            ];
            spawn(&args, &env).map(|c| (format!("writer {w}"), c))
        })
        .collect::<Result<_, _>>()?;
    let mut failures = Vec::new();
    for (name, child) in writing {
        if let Err(e) = finish(&name, child) {
            failures.push(e);
        }
    }
    let writing_took = started.elapsed();
    std::fs::write(&stop, b"").map_err(|e| e.to_string())?;
    for (name, child) in background {
        match finish(&name, child) {
            Ok(said) => eprintln!("{name}: {said}"),
            Err(e) => failures.push(e),
        }
    }
    let want = (writers * fragments * CELLS) as usize;
    match read_checked(&array_storage, Duration::ZERO) {
        Ok(n) if n == want => {}
        Ok(n) => failures.push(format!("tdb reads {n} cells at the end, not {want}")),
        Err(e) => failures.push(format!("tdb at the end: {e}")),
    }
    if tiledb {
        let tiledb_config = server
            .as_ref()
            .map(|s| tdb_test_servers::S3Server::tiledb_config_for(s.port()));
        if let Err(e) = tiledb_reads(&root, &dir, tiledb_config, want, writers) {
            failures.push(e);
        }
    }
    println!(
        "{writers} writers x {fragments} fragments in {:.1} s beside {readers} readers and a consolidator{}: {}",
        writing_took.as_secs_f64(),
        if s3 { ", on S3" } else { "" },
        if failures.is_empty() { "every read whole, every cell at the end" } else { "FAILED" }
    );
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// TileDB reads every cell tdb's processes wrote, each with its value
/// (through `config`, TileDB's JSON settings, where given).
fn tiledb_reads(
    root: &Path,
    dir: &str,
    config: Option<String>,
    want: usize,
    writers: u64,
) -> Result<(), Err> {
    let writers_tsv = crate::read_writers(root)?;
    let python = crate::venv_for(root, &writers_tsv[0])?.join("bin/python");
    let script = "import json, os, sys, tiledb\n\
        ctx = tiledb.Ctx(tiledb.Config(json.loads(os.environ.get('TDB_TILEDB_CONFIG', '{}'))))\n\
        with tiledb.open(sys.argv[1], ctx=ctx) as A:\n\
        \x20   d = A[:]\n\
        \x20   ok = all(int(a) == (int(w) << 32) | int(k) for w, k, a in zip(d['w'], d['k'], d['a']))\n\
        \x20   print(len(d['a']), len(set(int(w) for w in d['w'])), ok)\n";
    let mut cmd = Command::new(python);
    if let Some(c) = config {
        cmd.env("TDB_TILEDB_CONFIG", c);
    }
    let out = cmd
        .arg("-c")
        .arg(script)
        .arg(dir)
        .output()
        .map_err(|e| format!("python: {e}"))?;
    let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let expected = format!("{want} {writers} True");
    if out.status.success() && said == expected {
        eprintln!("TileDB reads {want} cells of {writers} writers, each with its value");
        Ok(())
    } else {
        Err(format!(
            "TileDB reads \"{said}\", not \"{expected}\": {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
