//! What the command-line tests share.

use std::process::{Command, Output};

/// Runs the `tdb` binary with `args` and waits for it.
pub fn tdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tdb"))
        .args(args)
        .output()
        .unwrap()
}
