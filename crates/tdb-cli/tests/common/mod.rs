//! What the command-line tests share.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the `tdb` binary with `args` and waits for it.
pub fn tdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tdb"))
        .args(args)
        .output()
        .unwrap()
}

/// The output of a run that must succeed (its stderr when it did not).
pub fn ok(out: &Output) -> String {
    String::from_utf8_lossy(ok_bytes(out)).into_owned()
}

/// [`ok`]'s bytes, for output that is not text.
pub fn ok_bytes(out: &Output) -> &[u8] {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    &out.stdout
}

/// A copy of fixture `case`'s array under `tmp`.
pub fn fixture_copy(case: &str, tmp: &Path) -> PathBuf {
    let src = tdb_testdata::root().join(case).join("array");
    let dst = tmp.join(case);
    tdb_testdata::copy_dir(&src, &dst).unwrap();
    dst
}
