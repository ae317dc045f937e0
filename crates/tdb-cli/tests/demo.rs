//! `tdb demo` (the README's main job) on a small scale: it writes both
//! arrays, its reads check themselves against the generated data, and the
//! arrays it leaves read as any other.

use crate::common;
use common::tdb;

#[test]
fn demo_writes_reads_back_and_checks_itself() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("demo");
    let run = || tdb(&["demo", d.to_str().unwrap(), "--cells", "40000"]);
    let out = run();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("wrote 40000 dense cells"), "{stdout}");
    assert!(stdout.contains("wrote 40000 sparse cells"), "{stdout}");
    assert!(
        stdout.contains("sparse where v < 400: 400 points"),
        "{stdout}"
    );
    assert!(stdout.contains("cell order hilbert"), "{stdout}");
    // The arrays are ordinary arrays: the first cells of the dense one.
    let cells = tdb(&[
        "export",
        d.join("dense").to_str().unwrap(),
        "--subarray",
        "0:0;0:2",
        "--format",
        "csv",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&cells.stdout),
        "y,x,a\n0,0,0.0\n0,1,1.7\n0,2,3.4\n"
    );
    // A second run refuses to overwrite them.
    let again = run();
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}
