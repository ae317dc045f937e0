//! Fuzz targets for every parser and decoder of tdb. Each target is a
//! function from any bytes to nothing: whatever the bytes, it must return
//! (the parser's value or its typed error are both fine), never panic,
//! never abort on an allocation the bytes asked for, never hang.
//!
//! `fuzz/` (outside the workspace, built by `cargo fuzz` on a nightly
//! toolchain) wraps each target in a libFuzzer binary; `cargo xtask fuzz`
//! writes the seeds and runs them. This crate's tests replay every seed and
//! every input a fuzzer ever found (`regressions/<target>/`) on stable
//! Rust, so a finding stays fixed.
//!
//! Targets that need context (a schema, a field's pipeline, a whole array)
//! take it from TileDB-written fixtures: the input's first bytes choose
//! which, the rest is the file under test. Seeds are the fixtures' own
//! files, so a fuzzer starts from what TileDB writes.

mod context;
mod targets;

use std::path::PathBuf;

/// One fuzz target.
pub struct Target {
    /// Its name: the libFuzzer binary's and the regression directory's.
    pub name: &'static str,
    /// What it parses or decodes, and the input's layout.
    pub about: &'static str,
    /// Runs one input: whether it was taken whole (parsed, and read where
    /// the target reads). Refusing an input is fine; a panic is a finding.
    pub run: fn(&[u8]) -> bool,
    /// Inputs to start from, taken from the fixtures: each one taken whole.
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Every target.
pub const TARGETS: &[Target] = targets::ALL;

/// The target named `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// Where inputs a fuzzer found are kept, one directory per target; the
/// tests replay them all.
pub fn regressions_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("regressions")
}
