//! `cargo xtask interop --storage s3 [DIR]`: the interop checks on an
//! object store. moto's S3 server runs on loopback (`tdb-test-servers`
//! installs and starts it), and then:
//!
//! 1. TileDB writes the corpus into it (`xtask/interop/upload.py`: every
//!    file through TileDB's own VFS and S3 client).
//! 2. Conformance: tdb reads every case from `s3://…` and must answer as
//!    `expected.json` says.
//! 3. Copies: `tdb::copy` writes every case from the server back into it;
//!    TileDB reads each copy from the server and must give the case's
//!    answers (check.py `--copy`, with `TDB_REMOTE` pointing expect.py at
//!    the server).
//! 4. Consolidation and vacuum on the server: every sparse copy with two
//!    or more fragments (one schema, answers that do not depend on how
//!    cells spread over fragments) is consolidated and vacuumed there by
//!    tdb; TileDB reads it from the server (check.py `--consolidated`).
//! 5. Concurrent writers: two creators of one array (exactly one wins),
//!    then [`WRITERS`] processes writing [`FRAGMENTS`] fragments each into
//!    it; tdb and TileDB then read every cell from the server.

use crate::conformance::{self, chain, Options};
use crate::consolidations::fresh;
use crate::interop::{check, copy_case, Copied};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use tdb::StorageConfig;
use tdb_schema::{AttributeBuilder, DimensionBuilder};
use tdb_test_servers::S3Server;

const BUCKET: &str = "tdb";
/// Writer processes of the concurrency check, and fragments each writes.
pub(crate) const WRITERS: usize = 8;
pub(crate) const FRAGMENTS: usize = 50;

/// The whole pass: `(passed, failed, skipped)`.
pub(crate) fn s3(
    root: &Path,
    corpus: &Path,
    python: &Path,
) -> Result<(usize, usize, usize), String> {
    let server = S3Server::start()?;
    server.create_bucket(BUCKET)?;
    let config: StorageConfig = server.settings().into_iter().collect();
    let tiledb = S3Server::tiledb_config_for(server.port());
    let base = format!("s3://{BUCKET}");

    // 1. TileDB writes the corpus into the server.
    crate::run(
        Command::new(python)
            .current_dir(root)
            .env("TDB_TILEDB_CONFIG", &tiledb)
            .arg("xtask/interop/upload.py")
            .arg(corpus)
            .arg(format!("{base}/corpus")),
    )?;

    // 2. tdb reads every case from there.
    let remote_corpus = PathBuf::from(format!("{base}/corpus"));
    let options = Options {
        config: config.clone(),
        ..Options::default()
    };
    let mut report = Vec::new();
    let (conf_passed, conf_failed) = conformance::run(&remote_corpus, &options, &mut report)?;
    for line in String::from_utf8_lossy(&report).lines() {
        if let Some(rest) = line.strip_prefix("FAIL ") {
            println!("FAIL s3/conformance/{rest}");
        }
    }
    println!("s3 conformance: {conf_passed} passed, {conf_failed} failed");

    // 3. tdb copies every case within the server; TileDB reads the copies.
    let local = root.join("target/interop/s3-copies");
    fresh(&local)?;
    let (mut failed, mut skipped) = (conf_failed, 0);
    let cases = conformance::cases(&remote_corpus, &config)?;
    for (name, case) in &cases {
        let out = PathBuf::from(format!("{base}/copies/{name}"));
        match copy_case(case, &out, &local.join(name), &config) {
            Copied::Done => {}
            Copied::Skipped(why) => {
                skipped += 1;
                println!("skip s3 copy {name}: {why}");
            }
            Copied::Failed(why) => {
                failed += 1;
                println!("FAIL s3/copies/{name}: tdb could not copy it: {why}");
            }
        }
    }
    let remote = |dir: &Path| format!("{}={base}/copies", dir.display());
    let (copied, copy_bad) = with_remote(&remote(&local), &tiledb, || {
        check(root, python, corpus, &local, Some("--copy"), None)
    })?;
    println!(
        "s3 copies: TileDB reads {} of {copied} as their sources",
        copied - copy_bad
    );

    // 4. Consolidation and vacuum on the server.
    let consolidated = root.join("target/interop/s3-consolidated");
    fresh(&consolidated)?;
    let mut merged = 0;
    for (name, _) in &cases {
        let Some(key) = consolidable(&corpus.join(name))? else {
            continue;
        };
        let array = PathBuf::from(format!("{base}/copies/{name}/array"));
        let mut open = tdb::OpenOptions::new().storage_config(config.clone());
        if let Some(k) = &key {
            open = open.key(k).map_err(|e| chain(&e))?;
        }
        let done = tdb::Array::open_with(&array, open.clone())
            .and_then(|a| {
                a.consolidate_fragments(&tdb::FragmentSelection::default(), tdb::DEFAULT_BUDGET)
            })
            .and_then(|_| tdb::Array::open_with(&array, open))
            .and_then(|a| a.vacuum_fragments());
        match done {
            Ok(_) => {
                merged += 1;
                let to = consolidated.join(name);
                fs::create_dir_all(&to).map_err(|e| format!("{}: {e}", to.display()))?;
                fs::copy(
                    local.join(name).join("expected.json"),
                    to.join("expected.json"),
                )
                .map_err(|e| format!("{}: {e}", to.display()))?;
            }
            Err(tdb::Error::Unsupported(why)) => {
                skipped += 1;
                println!("skip s3 consolidation {name}: {why}");
            }
            Err(e) => {
                failed += 1;
                println!("FAIL s3/consolidated/{name}: {}", chain(&e));
            }
        }
    }
    let (con_cases, con_bad) = if merged > 0 {
        with_remote(&remote(&consolidated), &tiledb, || {
            check(
                root,
                python,
                corpus,
                &consolidated,
                Some("--consolidated"),
                None,
            )
        })?
    } else {
        (0, 0)
    };
    println!(
        "s3 consolidated: tdb merged and vacuumed {merged} arrays on the server; TileDB reads {} as their sources",
        con_cases - con_bad
    );
    if merged == 0 {
        failed += 1;
        println!("FAIL s3/consolidated: no array consolidated; the check would prove nothing");
    }

    // 5. Concurrent creators and writers.
    let (w_passed, w_failed) = concurrent_writers(root, python, &server, &config, &tiledb)?;
    let passed = conf_passed + (copied - copy_bad) + (con_cases - con_bad) + w_passed;
    Ok((passed, failed + copy_bad + con_bad + w_failed, skipped))
}

/// Runs `f` with expect.py pointed at the server (`TDB_REMOTE`,
/// `TDB_TILEDB_CONFIG`) for the processes it starts.
fn with_remote<T>(remote: &str, tiledb: &str, f: impl FnOnce() -> T) -> T {
    // xtask is one thread here; the variables are only for children.
    std::env::set_var("TDB_REMOTE", remote);
    std::env::set_var("TDB_TILEDB_CONFIG", tiledb);
    let out = f();
    std::env::remove_var("TDB_REMOTE");
    std::env::remove_var("TDB_TILEDB_CONFIG");
    out
}

/// Whether a copied case is consolidated on the server, and its key: a
/// sparse array of two or more fragments under one schema whose answers
/// do not depend on how its cells spread over fragments (the local pass
/// compares the others with TileDB's own consolidations).
fn consolidable(case: &Path) -> Result<Option<Option<[u8; 32]>>, String> {
    let (exp, key) = conformance::read_expected(case, &StorageConfig::new())?;
    let fragments = exp["fragments"].as_array().map_or(&[][..], Vec::as_slice);
    let schemas = exp["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f[0].as_str())
        .filter(|p| p.starts_with("__schema/__") && p.matches('/').count() == 1)
        .count();
    let ok = exp["kind"].as_str().unwrap_or("array") == "array"
        && exp["schema"]["array_type"] == "sparse"
        && fragments.len() >= 2
        && schemas <= 1
        && !crate::consolidations::fragment_dependent(&exp);
    Ok(ok.then_some(key))
}

/// Two processes create one array on the server (exactly one must win),
/// then [`WRITERS`] processes write [`FRAGMENTS`] fragments each into it
/// at once; tdb and TileDB must then read every cell: `(passed, failed)`.
fn concurrent_writers(
    root: &Path,
    python: &Path,
    server: &S3Server,
    config: &StorageConfig,
    tiledb: &str,
) -> Result<(usize, usize), String> {
    let uri = format!("s3://{BUCKET}/concurrent/array");
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let env = server.env();
    let spawn = |args: &[String]| {
        let mut cmd = Command::new(&me);
        cmd.args(args)
            .envs(env.iter().map(|(k, v)| (*k, v)))
            .stderr(std::process::Stdio::piped());
        cmd.spawn().map_err(|e| format!("{me:?}: {e}"))
    };
    let create = vec!["s3-writer".to_owned(), uri.clone(), "create".to_owned()];
    let creators = [spawn(&create)?, spawn(&create)?];
    let mut won = 0;
    let mut said = String::new();
    for c in creators {
        let out = c.wait_with_output().map_err(|e| e.to_string())?;
        if out.status.success() {
            won += 1;
        }
        said.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    let mut failed = 0;
    if won != 1 {
        failed += 1;
        println!(
            "FAIL s3/concurrent: {won} of 2 creators of one array succeeded, not 1: {}",
            said.trim()
        );
    }
    let writers: Vec<_> = (0..WRITERS)
        .map(|i| spawn(&["s3-writer".to_owned(), uri.clone(), i.to_string()]))
        .collect::<Result<_, _>>()?;
    for w in writers {
        let out = w.wait_with_output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            failed += 1;
            println!(
                "FAIL s3/concurrent: a writer failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    let want = (WRITERS * FRAGMENTS) as u64;
    let array = tdb::Array::open_with(&uri, tdb::OpenOptions::new().storage_config(config.clone()))
        .map_err(|e| chain(&e))?;
    let got = array
        .read_all(tdb::ReadSpec::new(["d", "a"]))
        .map_err(|e| chain(&e))?;
    let fragments = array.fragments().len();
    if got.num_cells as u64 != want || fragments != WRITERS * FRAGMENTS {
        failed += 1;
        println!(
            "FAIL s3/concurrent: tdb reads {} cells in {fragments} fragments, not {want}",
            got.num_cells
        );
    }
    let output = Command::new(python)
        .current_dir(root)
        .env("TDB_TILEDB_CONFIG", tiledb)
        .args([
            "-c",
            "import json, os, sys, tiledb; \
             ctx = tiledb.Ctx(tiledb.Config(json.loads(os.environ['TDB_TILEDB_CONFIG']))); \
             a = tiledb.open(sys.argv[1], ctx=ctx); r = a[:]; \
             print(len(r['a']), int(r['a'].sum()), len(tiledb.array_fragments(sys.argv[1], ctx=ctx)))",
            &uri,
        ])
        .output()
        .map_err(|e| format!("python: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let sum: u64 = (0..want).sum();
    let expected = format!("{want} {sum} {}", WRITERS * FRAGMENTS);
    if text != expected {
        failed += 1;
        println!(
            "FAIL s3/concurrent: TileDB reads {text:?} (cells, sum, fragments), not {expected:?}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    println!(
        "s3 concurrent: one of two creators won; {WRITERS} writers x {FRAGMENTS} fragments read whole by tdb and TileDB"
    );
    Ok((usize::from(failed == 0), failed))
}

/// The child side of [`concurrent_writers`] (`xtask s3-writer URI create|N`):
/// creates the array, or writes [`FRAGMENTS`] fragments of one cell each
/// (cell `d = a = N * FRAGMENTS + i`).
pub(crate) fn writer(args: &[String]) -> Result<(), String> {
    let [uri, what] = args else {
        return Err("usage: xtask s3-writer URI create|N".into());
    };
    let config = StorageConfig::new();
    let options = tdb::OpenOptions::new().storage_config(config);
    if what == "create" {
        let schema = tdb::ArraySchema::builder(tdb_format::ArrayType::Sparse)
            .dimension(DimensionBuilder::range("d", 0u64..=1 << 20).tile_extent(1024u64))
            .attribute(AttributeBuilder::new("a", tdb::Datatype::UInt64))
            .build()
            .map_err(|e| e.to_string())?;
        return tdb::Array::create_with(uri, &schema, options)
            .map(|_| ())
            .map_err(|e| chain(&e));
    }
    let n: u64 = what
        .parse()
        .map_err(|_| format!("{what}: not a writer number"))?;
    let array = tdb::Array::open_with(uri, options).map_err(|e| chain(&e))?;
    let column = |name: &str, v: u64| {
        let mut b = tdb::FieldBuffer::new(name, tdb::Datatype::UInt64, 1, false);
        b.data = v.to_le_bytes().to_vec();
        b
    };
    for i in 0..FRAGMENTS as u64 {
        let v = n * FRAGMENTS as u64 + i;
        let spec = tdb::WriteSpec::new(vec![column("d", v), column("a", v)]);
        array.write(spec).map_err(|e| chain(&e))?;
    }
    Ok(())
}
