//! `tdb verify`: the scrub's report as JSON.

use serde_json::{json, Value};
use tdb_fragment::{Problem, VerifyReport};

/// The summary and every problem, for machines.
pub fn json(summary: &VerifyReport, problems: &[Problem]) -> Value {
    json!({
        "clean": problems.is_empty(),
        "files": summary.files,
        "fragments": summary.fragments,
        "tiles": summary.tiles,
        "bytes_read": summary.bytes_read,
        "problems": problems.iter().map(|p| json!({
            "kind": format!("{:?}", p.kind),
            "file": p.file,
            "tile": p.tile,
            "offset": p.offset,
            "detail": p.detail,
        })).collect::<Vec<_>>(),
    })
}
