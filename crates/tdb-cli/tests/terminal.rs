//! The CLI in a terminal (a pty): progress bars are drawn there, and
//! `--quiet` silences them; off a terminal the other tests show none.

use std::process::Command;

/// Everything `tdb args` wrote to a terminal, stdout and stderr together.
fn in_terminal(args: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tdb"));
    cmd.args(args);
    let mut session = rexpect::session::spawn_command(cmd, Some(60_000)).unwrap();
    session.exp_eof().unwrap()
}

#[test]
fn progress_bars_show_in_a_terminal_unless_quiet() {
    let array = tdb_testdata::root().join("sparse_many_tiles/array");
    let array = array.to_str().unwrap();
    // A small budget: many batches, so the bar moves while cells print.
    let args = ["export", array, "--budget", "4096", "--format", "csv"];
    // The bar (a spinner: a sparse read's cell count is unknown until
    // read) is named after the command, and cleared at the end.
    let bar = |s: &str| s.contains("export") && s.contains("\x1b[2K");
    let shown = in_terminal(&args);
    assert!(bar(&shown), "no progress bar in:\n{shown}");
    let quiet = in_terminal(&[&["--quiet"][..], &args[..]].concat());
    assert!(!bar(&quiet), "a bar despite --quiet:\n{quiet}");
    // The cells themselves are the same either way.
    let rows = |s: &str| s.lines().filter(|l| l.contains(',')).count();
    assert!(rows(&quiet) > 10);
}

#[test]
fn verify_and_copy_show_a_spinner_in_a_terminal() {
    let array = tdb_testdata::root().join("sparse_many_tiles/array");
    let array = array.to_str().unwrap();
    let shown = in_terminal(&["verify", array]);
    assert!(
        shown.contains("verifying") && shown.contains("clean"),
        "{shown}"
    );
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join("copy");
    let shown = in_terminal(&["copy", array, to.to_str().unwrap()]);
    assert!(
        shown.contains("copying") && shown.contains("fragments"),
        "{shown}"
    );
    let quiet = in_terminal(&["--quiet", "verify", array]);
    assert!(!quiet.contains("verifying"), "{quiet}");
}
