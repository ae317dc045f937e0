//! Every fuzz target over its seeds, a few deterministic mutations of
//! each, and every input a fuzzer found (`regressions/<target>/`): each
//! run must return. A panic fails the test with the target and input.

use std::fs;
use std::path::Path;
use tdb_fuzz::{regressions_dir, Target, TARGETS};
use tdb_testdata::XorShift;

/// Runs one input: whether the target took it whole.
fn run(target: &Target, input: &[u8], what: &str) -> bool {
    std::panic::catch_unwind(|| (target.run)(input)).unwrap_or_else(|_| {
        panic!(
            "target {} panicked on {what} ({} bytes)",
            target.name,
            input.len()
        )
    })
}

#[test]
fn every_target_takes_its_seeds_and_mutations_of_them() {
    let mut rng = XorShift::new(0x7db_f022);
    for target in TARGETS {
        let seeds = (target.seeds)();
        assert!(!seeds.is_empty(), "target {} has no seeds", target.name);
        eprintln!("{}: {} seeds", target.name, seeds.len());
        for (i, seed) in seeds.iter().enumerate() {
            // Seeds are TileDB's own files: refusing one is a bug too.
            assert!(
                run(target, seed, &format!("seed {i}")),
                "target {} refuses its seed {i}",
                target.name
            );
            // Seeds' first bytes choose a context: mutate past them.
            if seed.len() < 4 {
                continue;
            }
            let mut cut = seed.clone();
            cut.truncate(2 + (rng.next_u64() % (seed.len() as u64 - 2)) as usize);
            let _ = run(target, &cut, &format!("seed {i} cut to {}", cut.len()));
            let mut flipped = seed.clone();
            for _ in 0..4 {
                let at = 2 + (rng.next_u64() % (seed.len() as u64 - 2)) as usize;
                flipped[at] ^= 1 << (rng.next_u64() % 8);
            }
            let _ = run(target, &flipped, &format!("seed {i} with 4 bits flipped"));
        }
    }
}

#[test]
fn every_finding_stays_fixed() {
    let dir = regressions_dir();
    let mut found = 0;
    for target in TARGETS {
        let Ok(entries) = fs::read_dir(dir.join(target.name)) else {
            continue;
        };
        for e in entries {
            let path = e.unwrap().path();
            let input = fs::read(&path).unwrap();
            let _ = run(target, &input, &path.display().to_string());
            found += 1;
        }
    }
    // Directories under regressions/ name targets that exist.
    for e in fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            name == "README.md" || TARGETS.iter().any(|t| t.name == name),
            "regressions/{name} names no target"
        );
    }
    eprintln!("{found} findings replayed");
}

#[test]
fn every_target_has_a_libfuzzer_binary() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let manifest = fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
    for target in TARGETS {
        let source = fuzz.join(format!("fuzz_targets/{}.rs", target.name));
        let text =
            fs::read_to_string(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        assert!(
            text.contains(&format!("tdb_fuzz::target(\"{}\")", target.name)),
            "{} runs another target",
            source.display()
        );
        assert!(
            manifest.contains(&format!("name = \"{}\"", target.name)),
            "fuzz/Cargo.toml has no binary {}",
            target.name
        );
    }
}
