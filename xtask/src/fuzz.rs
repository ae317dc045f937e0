//! `cargo xtask fuzz [--seconds N] [--runs N] [--target T]... [--list]`:
//! every tdb-fuzz target under libFuzzer (`cargo fuzz` on the nightly
//! toolchain, AddressSanitizer on), N seconds each (60 by default) or N
//! executions each (`--runs`; with both, whichever ends first), with at most 2 GiB
//! resident, 2 GiB in one allocation and 10 s per input. Seeds come from
//! the fixtures (`target/fuzz/seeds/<T>/`, written anew each run); what the
//! fuzzer learns stays in `target/fuzz/corpus/<T>/` for the next run. A
//! finding is left where libFuzzer puts it (`fuzz/artifacts/<T>/`): copy it
//! to `crates/tdb-fuzz/regressions/<T>/` with the fix, so the tests replay it.

use crate::workspace_root;
use std::fs;
use std::path::Path;
use std::process::Command;

const LIMIT_MB: u32 = 2048;
const INPUT_TIMEOUT_S: u32 = 10;

struct Outcome {
    name: &'static str,
    executions: u64,
    seconds: u64,
    finding: Option<String>,
}

pub fn fuzz(args: &[String]) -> Result<(), String> {
    let mut seconds = None;
    let mut runs = None;
    let mut only = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => seconds = Some(crate::number_arg(&mut it, "--seconds")?),
            "--runs" => runs = Some(crate::number_arg(&mut it, "--runs")?),
            "--target" => only.push(it.next().ok_or("--target takes a name")?.clone()),
            "--list" => {
                for t in tdb_fuzz::TARGETS {
                    println!("{:<18} {}", t.name, t.about);
                }
                return Ok(());
            }
            other => return Err(format!("fuzz: unknown argument {other}")),
        }
    }
    for name in &only {
        if tdb_fuzz::target(name).is_none() {
            return Err(format!("fuzz: no target {name} (see --list)"));
        }
    }
    // Without cargo-fuzz every target "fails" at once, which must not read
    // as inputs they do not survive.
    let probe = Command::new("rustup")
        .args(["run", "nightly", "cargo", "fuzz", "--version"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO")
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        return Err(
            "fuzz: `cargo fuzz` does not run on the nightly toolchain: install it \
                    (`cargo +nightly install cargo-fuzz`) and the nightly toolchain"
                .into(),
        );
    }
    let mut limits = vec![format!(
        "-max_total_time={}",
        seconds.unwrap_or(if runs.is_some() { 0 } else { 60 })
    )];
    limits.extend(runs.map(|n| format!("-runs={n}")));
    let root = workspace_root();
    let work = root.join("target/fuzz");
    let mut outcomes = Vec::new();
    for target in tdb_fuzz::TARGETS
        .iter()
        .filter(|t| only.is_empty() || only.iter().any(|n| n == t.name))
    {
        let seeds = work.join("seeds").join(target.name);
        let corpus = work.join("corpus").join(target.name);
        let _ = fs::remove_dir_all(&seeds);
        fs::create_dir_all(&seeds).map_err(|e| format!("{}: {e}", seeds.display()))?;
        fs::create_dir_all(&corpus).map_err(|e| format!("{}: {e}", corpus.display()))?;
        for (i, seed) in (target.seeds)().iter().enumerate() {
            let path = seeds.join(format!("seed-{i:04}"));
            fs::write(&path, seed).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        eprintln!(
            "== {} ({}): {}",
            target.name,
            limits.join(" "),
            target.about
        );
        outcomes.push(run_target(&root, target.name, &corpus, &seeds, &limits)?);
    }
    println!("target             executions   seconds  result");
    for o in &outcomes {
        println!(
            "{:<18} {:>10} {:>9}  {}",
            o.name,
            o.executions,
            o.seconds,
            o.finding
                .as_deref()
                .unwrap_or("0 crashes, 0 OOMs, 0 timeouts")
        );
    }
    let found = outcomes.iter().filter(|o| o.finding.is_some()).count();
    if found > 0 {
        return Err(format!(
            "{found} target(s) found an input they do not survive; see above"
        ));
    }
    Ok(())
}

fn run_target(
    root: &Path,
    name: &'static str,
    corpus: &Path,
    seeds: &Path,
    limits: &[String],
) -> Result<Outcome, String> {
    let mut cmd = Command::new("rustup");
    cmd.current_dir(root)
        .args([
            "run",
            "nightly",
            "cargo",
            "fuzz",
            "run",
            "--fuzz-dir",
            "fuzz",
            "-O",
        ])
        .arg(name)
        .arg(corpus)
        .arg(seeds)
        .arg("--")
        .args(limits)
        .arg(format!("-rss_limit_mb={LIMIT_MB}"))
        .arg(format!("-malloc_limit_mb={LIMIT_MB}"))
        .arg(format!("-timeout={INPUT_TIMEOUT_S}"))
        .arg("-print_final_stats=1")
        // The outer cargo's settings are for the stable workspace build.
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .env_remove("CARGO_TARGET_DIR")
        .env("CARGO_INCREMENTAL", "0");
    // libFuzzer's progress goes to a file the user can follow while it
    // runs (`tail -f`); the outcome is read from it afterwards.
    let logs = root.join("target/fuzz/logs");
    fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let log_path = logs.join(format!("{name}.log"));
    let log_file =
        fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    eprintln!("   progress: tail -f {}", log_path.display());
    cmd.stderr(log_file);
    let started = std::time::Instant::now();
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    let elapsed = started.elapsed().as_secs();
    let log = fs::read_to_string(&log_path).unwrap_or_default();
    let stat = |key: &str| {
        log.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    // Stopped by a signal (Ctrl-C, or a shorter session), libFuzzer says so
    // and exits 72: what ran found nothing.
    let interrupted = log.contains("libFuzzer: run interrupted");
    let finding = (!out.status.success() && !interrupted).then(|| {
        // libFuzzer names the input it stopped on; cargo fuzz's own errors
        // (a build failure) end the log.
        log.lines()
            .find(|l| l.contains("Test unit written to"))
            .map(|l| l.trim().to_owned())
            .unwrap_or_else(|| {
                let tail: Vec<&str> = log.lines().rev().take(15).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("failed ({}):\n{}", out.status, tail.join("\n"))
            })
    });
    if let Some(f) = &finding {
        eprintln!("{name}: {f}");
    }
    if interrupted {
        eprintln!("{name}: interrupted; nothing found in what ran");
    }
    Ok(Outcome {
        name,
        executions: stat("stat::number_of_executed_units:"),
        // libFuzzer's own count, or (when it stopped on a finding) the
        // run's, build included.
        seconds: match stat("stat::total_time:") {
            0 => elapsed,
            s => s,
        },
        finding,
    })
}
