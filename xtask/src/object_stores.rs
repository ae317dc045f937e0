//! The interop checks on an object store.
//!
//! `cargo xtask interop URI [--out URI] [--config KEY=VALUE]...` runs them on
//! a corpus some TileDB already wrote into a store ([`uri`], [`checks`]):
//! tdb reads every case there, copies every case into the store, and
//! consolidates and vacuums the copies there; TileDB reads what tdb wrote.
//!
//! `cargo xtask interop --storage s3 [DIR]` ([`s3`]) starts moto's S3 server
//! on loopback (`tdb-test-servers` installs it), has TileDB write the corpus
//! into it (`xtask/interop/upload.py`: every file through TileDB's own VFS
//! and S3 client), runs the same checks, and then the concurrent writers:
//! two creators of one array (exactly one wins), then [`WRITERS`] processes
//! writing [`FRAGMENTS`] fragments each into it; tdb and TileDB then read
//! every cell from the server.

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

    // 2.–4. Conformance, copies, consolidation and vacuum there.
    let remote = Remote {
        corpus: format!("{base}/corpus"),
        out: format!("{base}/interop"),
        config: config.clone(),
        tiledb: tiledb.clone(),
    };
    let (passed, failed, skipped) = checks(root, python, &remote)?;

    // 5. Concurrent creators and writers.
    let (w_passed, w_failed) = concurrent_writers(root, python, &server, &config, &tiledb)?;
    Ok((passed + w_passed, failed + w_failed, skipped))
}

/// A corpus in an object store, where tdb's copies of it go there, and the
/// settings that reach the store for each engine.
pub(crate) struct Remote {
    /// The corpus's URI.
    pub corpus: String,
    /// A prefix of tdb's own: `copies/` under it is emptied, then filled.
    pub out: String,
    /// tdb's settings beyond the environment.
    pub config: StorageConfig,
    /// TileDB's settings (a JSON object), for expect.py's `TDB_TILEDB_CONFIG`.
    pub tiledb: String,
}

/// `cargo xtask interop URI [--out URI] [--config KEY=VALUE]...`: the
/// checks of a pass on a corpus some TileDB already wrote into a store.
/// Both engines reach it through the environment (`AWS_*`, `AZURE_*`) and
/// `--config` (TileDB's names, or object_store's keys): TileDB's settings
/// are derived from them ([`tiledb_settings`]). Copies go under `--out`,
/// `URI.tdb-interop` by default.
pub(crate) fn uri(
    root: &Path,
    python: &Path,
    args: &[String],
) -> Result<(usize, usize, usize), String> {
    let usage = "usage: cargo xtask interop URI [--out URI] [--config KEY=VALUE]...";
    let mut it = args.iter();
    let corpus = it.next().ok_or(usage)?.trim_end_matches('/').to_owned();
    let (mut out, mut pairs) = (None, Vec::new());
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--out" => out = Some(it.next().ok_or(usage)?.trim_end_matches('/').to_owned()),
            "--config" => {
                let pair = it.next().ok_or(usage)?;
                let (k, v) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("--config {pair}: expected KEY=VALUE"))?;
                pairs.push((k.trim().to_owned(), v.trim().to_owned()));
            }
            other => return Err(format!("interop: unknown argument {other:?}\n{usage}")),
        }
    }
    let out = match out {
        Some(o) => o,
        None if corpus.split("://").nth(1).is_some_and(|p| p.contains('/')) => {
            format!("{corpus}.tdb-interop")
        }
        None => {
            return Err(format!(
                "interop {corpus}: the corpus is a whole bucket or container; say where tdb's copies go with --out URI"
            ))
        }
    };
    let env: Vec<(String, String)> = std::env::vars().collect();
    let remote = Remote {
        tiledb: serde_json::Value::Object(tiledb_settings(&env, &pairs)).to_string(),
        config: pairs.into_iter().collect(),
        corpus,
        out,
    };
    checks(root, python, &remote)
}

/// TileDB's settings for a store that object_store reaches with `env` (the
/// process's environment) and `pairs` (`--config`): TileDB's own names
/// (`vfs.*`, `sm.*`) pass through; object_store's keys and variables
/// (`AWS_ENDPOINT_URL`, `aws_access_key_id`, `AZURE_STORAGE_ACCOUNT_NAME`,
/// ...) become TileDB's equivalents unless a TileDB name sets them.
pub(crate) fn tiledb_settings(
    env: &[(String, String)],
    pairs: &[(String, String)],
) -> serde_json::Map<String, serde_json::Value> {
    use std::collections::BTreeMap;
    // object_store's keys are its variables' names in lowercase; pairs win.
    let mut keys: BTreeMap<String, String> = env
        .iter()
        .filter(|(k, _)| k.starts_with("AWS_") || k.starts_with("AZURE_"))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
        .collect();
    let mut out = serde_json::Map::new();
    for (k, v) in pairs {
        if k.starts_with("vfs.") || k.starts_with("sm.") {
            out.insert(k.clone(), v.clone().into());
        } else {
            keys.insert(k.to_ascii_lowercase(), v.clone());
        }
    }
    let get = |names: &[&str]| names.iter().find_map(|n| keys.get(*n)).cloned();
    let mut derived: Vec<(&str, String)> = Vec::new();
    if let Some(endpoint) = get(&["aws_endpoint_url", "aws_endpoint"]) {
        let (scheme, host) = endpoint
            .split_once("://")
            .unwrap_or(("https", endpoint.as_str()));
        derived.push((
            "vfs.s3.endpoint_override",
            host.trim_end_matches('/').into(),
        ));
        derived.push(("vfs.s3.scheme", scheme.into()));
        // A custom endpoint is reached by path unless told otherwise, as
        // object_store does.
        let virtual_hosted = get(&["aws_virtual_hosted_style_request"]);
        derived.push((
            "vfs.s3.use_virtual_addressing",
            virtual_hosted.unwrap_or_else(|| "false".into()),
        ));
    }
    for (names, tiledb) in [
        (&["aws_region", "aws_default_region"][..], "vfs.s3.region"),
        (&["aws_access_key_id"], "vfs.s3.aws_access_key_id"),
        (&["aws_secret_access_key"], "vfs.s3.aws_secret_access_key"),
        (&["aws_session_token"], "vfs.s3.aws_session_token"),
        (
            &["azure_storage_account_name"],
            "vfs.azure.storage_account_name",
        ),
        (
            &["azure_storage_account_key", "azure_storage_access_key"],
            "vfs.azure.storage_account_key",
        ),
        (
            &["azure_storage_sas_key", "azure_storage_sas_token"],
            "vfs.azure.storage_sas_token",
        ),
        (
            &["azure_storage_endpoint", "azure_endpoint"],
            "vfs.azure.blob_endpoint",
        ),
    ] {
        if let Some(v) = get(names) {
            derived.push((tiledb, v));
        }
    }
    for (k, v) in derived {
        out.entry(k).or_insert_with(|| v.into());
    }
    out
}

/// The checks of a pass on a corpus in a store: `(passed, failed,
/// skipped)`.
///
/// 1. Conformance: tdb reads every case from the store and must answer as
///    its `expected.json` says.
/// 2. Copies: `tdb::copy` writes every case into `out/copies/`; TileDB
///    reads each copy from the store and must give the case's answers
///    (check.py `--copy`, with `TDB_REMOTE` pointing expect.py there).
/// 3. Consolidation and vacuum in the store: every sparse copy with two or
///    more fragments (one schema, answers that do not depend on how cells
///    spread over fragments) is consolidated and vacuumed there by tdb;
///    TileDB reads it from the store (check.py `--consolidated`).
pub(crate) fn checks(
    root: &Path,
    python: &Path,
    remote: &Remote,
) -> Result<(usize, usize, usize), String> {
    let Remote {
        corpus,
        out,
        config,
        tiledb,
    } = remote;
    let remote_corpus = PathBuf::from(corpus);
    let options = Options {
        config: config.clone(),
        ..Options::default()
    };
    let mut report = Vec::new();
    let (conf_passed, conf_failed) = conformance::run(&remote_corpus, &options, &mut report)?;
    for line in String::from_utf8_lossy(&report).lines() {
        if let Some(rest) = line.strip_prefix("FAIL ") {
            println!("FAIL remote/conformance/{rest}");
        }
    }
    println!("remote conformance ({corpus}): {conf_passed} passed, {conf_failed} failed");

    // Copies. The cases' expected.json come down twice: `sources` holds
    // what the case says, `local` what TileDB reports for the copy.
    let copies = format!("{out}/copies");
    tdb::storage(&copies, config)
        .map_err(|e| chain(&e))
        .and_then(|s| s.delete_prefix("").map_err(|e| e.to_string()))
        .map_err(|e| format!("emptying {copies}: {e}"))?;
    let local = root.join("target/interop/remote-copies");
    let sources = root.join("target/interop/remote-sources");
    fresh(&local)?;
    fresh(&sources)?;
    let (mut failed, mut skipped) = (conf_failed, 0);
    let cases = conformance::cases(&remote_corpus, config)?;
    for (name, case) in &cases {
        let to = PathBuf::from(format!("{copies}/{name}"));
        match copy_case(case, &to, &local.join(name), config) {
            Copied::Done => {
                let from = local.join(name).join("expected.json");
                let into = sources.join(name);
                fs::create_dir_all(&into)
                    .and_then(|()| fs::copy(&from, into.join("expected.json")).map(|_| ()))
                    .map_err(|e| format!("{}: {e}", into.display()))?;
            }
            Copied::Skipped(why) => {
                skipped += 1;
                println!("skip remote copy {name}: {why}");
            }
            Copied::Failed(why) => {
                failed += 1;
                println!("FAIL remote/copies/{name}: tdb could not copy it: {why}");
            }
        }
    }
    let mapping = |dir: &Path| format!("{}={copies}", dir.display());
    let (copied, copy_bad) = with_remote(&mapping(&local), tiledb, || {
        check(root, python, &sources, &local, Some("--copy"), None)
    })?;
    println!(
        "remote copies: TileDB reads {} of {copied} as their sources",
        copied - copy_bad
    );

    // Consolidation and vacuum in the store.
    let consolidated = root.join("target/interop/remote-consolidated");
    fresh(&consolidated)?;
    let mut merged = 0;
    for (name, _) in &cases {
        // Only cases copied above (a copy tdb does not make is skipped).
        if !sources.join(name).join("expected.json").exists() {
            continue;
        }
        let Some(key) = consolidable(&sources.join(name))? else {
            continue;
        };
        let array = PathBuf::from(format!("{copies}/{name}/array"));
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
                    sources.join(name).join("expected.json"),
                    to.join("expected.json"),
                )
                .map_err(|e| format!("{}: {e}", to.display()))?;
            }
            Err(tdb::Error::Unsupported(why)) => {
                skipped += 1;
                println!("skip remote consolidation {name}: {why}");
            }
            Err(e) => {
                failed += 1;
                println!("FAIL remote/consolidated/{name}: {}", chain(&e));
            }
        }
    }
    let (con_cases, con_bad) = if merged > 0 {
        with_remote(&mapping(&consolidated), tiledb, || {
            check(
                root,
                python,
                &sources,
                &consolidated,
                Some("--consolidated"),
                None,
            )
        })?
    } else {
        (0, 0)
    };
    println!(
        "remote consolidated: tdb merged and vacuumed {merged} arrays in the store; TileDB reads {} as their sources",
        con_cases - con_bad
    );
    if merged == 0 {
        failed += 1;
        println!("FAIL remote/consolidated: no array consolidated; the check would prove nothing");
    }
    let passed = conf_passed + (copied - copy_bad) + (con_cases - con_bad);
    Ok((passed, failed + copy_bad + con_bad, skipped))
}

/// Runs `f` with expect.py pointed at the store (`TDB_REMOTE`,
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

#[cfg(test)]
mod tests {
    use super::tiledb_settings;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn tiledb_settings_follow_object_stores_variables_and_keys() {
        let env = pairs(&[
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/"),
            ("AWS_ACCESS_KEY_ID", "id"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
            ("AWS_DEFAULT_REGION", "eu-west-1"),
            ("AZURE_STORAGE_ACCOUNT_NAME", "acct"),
            ("HOME", "/root"),
        ]);
        // A --config object_store key overrides the variable; a TileDB
        // name passes through and wins over what is derived.
        let config = pairs(&[
            ("aws_access_key_id", "other"),
            ("vfs.s3.region", "us-east-2"),
            ("vfs.s3.max_parallel_ops", "4"),
        ]);
        let got = serde_json::Value::Object(tiledb_settings(&env, &config));
        assert_eq!(
            got,
            serde_json::json!({
                "vfs.s3.endpoint_override": "127.0.0.1:9000",
                "vfs.s3.scheme": "http",
                "vfs.s3.use_virtual_addressing": "false",
                "vfs.s3.region": "us-east-2",
                "vfs.s3.aws_access_key_id": "other",
                "vfs.s3.aws_secret_access_key": "secret",
                "vfs.s3.max_parallel_ops": "4",
                "vfs.azure.storage_account_name": "acct",
            })
        );
        assert!(tiledb_settings(&pairs(&[("HOME", "/")]), &[]).is_empty());
    }
}
