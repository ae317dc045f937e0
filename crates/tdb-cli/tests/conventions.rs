//! What every command shares: an example in its help, the exit codes in
//! `tdb --help`, shell completions, and logs on stderr with `RUST_LOG`.

use crate::common::{fixture_copy, ok, tdb};

/// The subcommands `tdb --help` lists.
fn commands() -> Vec<String> {
    let help = ok(&tdb(&["--help"]));
    let listed = help
        .split("Commands:")
        .nth(1)
        .and_then(|rest| rest.split("Options:").next())
        .unwrap()
        .to_owned();
    listed
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect()
}

#[test]
fn every_command_shows_an_example_and_the_exit_codes_are_documented() {
    let commands = commands();
    assert!(commands.len() >= 15, "{commands:?}");
    for c in &commands {
        let help = ok(&tdb(&[c, "--help"]));
        assert!(help.contains("Example:"), "tdb {c} --help has no example");
    }
    let help = ok(&tdb(&["--help"]));
    assert!(help.contains("Exit status: 0") && help.contains("RUST_LOG"));
}

#[test]
fn completions_cover_every_command() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = ok(&tdb(&["completions", shell]));
        for c in commands() {
            assert!(script.contains(&c), "{shell} completions lack {c}");
        }
    }
    let out = tdb(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn rust_log_reports_on_stderr_and_leaves_stdout_alone() {
    let dir = tempfile::tempdir().unwrap();
    // Two copies of one array, consolidated with and without logs.
    let consolidate = |name: &str, log: Option<&str>| {
        let array = fixture_copy("sparse_hilbert_multi", &dir.path().join(name));
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tdb"));
        cmd.arg("consolidate").arg(&array);
        match log {
            Some(l) => cmd.env("RUST_LOG", l),
            None => cmd.env_remove("RUST_LOG"),
        };
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (logged_out, logged) = consolidate("logged", Some("tdb_query=info"));
    assert!(logged.contains("consolidation step merges"), "{logged}");
    assert!(logged.contains("fragment committed"), "{logged}");
    assert!(
        !logged.contains('\x1b'),
        "no colours off a terminal: {logged}"
    );
    let (plain_out, plain) = consolidate("plain", None);
    assert!(!plain.contains("committed"), "{plain}");
    // Logs never reach stdout: the same report either way.
    assert!(!logged_out.contains("INFO") && !logged_out.contains("committed"));
    assert_eq!(logged_out.lines().count(), plain_out.lines().count());
    assert!(
        logged_out.contains("2 fragments consolidated into"),
        "{logged_out}"
    );
}

#[test]
fn reports_take_the_same_format_names() {
    let array = tdb_testdata::root().join("sparse_2d_int/array");
    let array = array.to_str().unwrap();
    // Reports: table (the text, the default) or json; --json is json.
    for command in ["inspect", "verify", "schema"] {
        let table = ok(&tdb(&[command, array, "--format", "table"]));
        assert_eq!(table, ok(&tdb(&[command, array])), "{command}");
        let json = ok(&tdb(&[command, array, "--format", "json"]));
        assert!(
            serde_json::from_str::<serde_json::Value>(&json).is_ok(),
            "{command}"
        );
        assert_eq!(json, ok(&tdb(&[command, array, "--json"])), "{command}");
        let out = tdb(&[command, array, "--format", "csv"]);
        assert_eq!(out.status.code(), Some(2), "{command}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--format takes table or json here"), "{err}");
    }
    // Aggregates: json (the default), table or csv, the same answers.
    let agg = |format: &str| {
        ok(&tdb(&[
            "aggregate",
            array,
            "--agg",
            "a:sum,count",
            "--format",
            format,
        ]))
    };
    let json: serde_json::Value = serde_json::from_str(&agg("json")).unwrap();
    let sum = json["a"]["sum"].to_string();
    let csv = agg("csv");
    assert_eq!(csv.lines().next(), Some("field,op,value"));
    assert!(csv.lines().any(|l| l == format!("a,sum,{sum}")), "{csv}");
    let table = agg("table");
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().eq(["a", "sum", sum.as_str()])),
        "{table}"
    );
    // Metadata: json (the default, the conformance entries), table or csv.
    let meta = tdb_testdata::root().join("consolidated_array_meta/array");
    let meta = meta.to_str().unwrap();
    let get = |format: &str| ok(&tdb(&["metadata", meta, "get", "--format", format]));
    let json: serde_json::Value = serde_json::from_str(&get("json")).unwrap();
    assert_eq!(get("json"), ok(&tdb(&["metadata", meta, "get"])));
    let entries = json.as_array().unwrap();
    let csv = get("csv");
    assert_eq!(csv.lines().next(), Some("key,datatype,value_num,value"));
    assert_eq!(csv.lines().count(), entries.len() + 1, "{csv}");
    for e in entries {
        let key = e["key"].as_str().unwrap();
        let row = csv
            .lines()
            .find(|l| l.starts_with(&format!("{key},")))
            .unwrap();
        assert!(row.contains(e["datatype"].as_str().unwrap()), "{row}");
    }
    let table = get("table");
    assert_eq!(
        table
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["key", "datatype", "value_num", "value"]
    );
    assert_eq!(table.lines().count(), entries.len() + 1, "{table}");
    // Dissect: table, json or csv, the same fields.
    let schema = std::fs::read_dir(tdb_testdata::root().join("sparse_2d_int/array/__schema"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_file())
        .unwrap();
    let schema = schema.to_str().unwrap();
    let csv = ok(&tdb(&["dissect", schema, "--format", "csv"]));
    let json: serde_json::Value =
        serde_json::from_str(&ok(&tdb(&["dissect", schema, "--format", "json"]))).unwrap();
    let fields = json["fields"].as_array().unwrap().len()
        + json["decoded"][0]["fields"].as_array().unwrap().len();
    assert_eq!(
        csv.lines().next(),
        Some("file,document,offset,length,path,type,value")
    );
    assert_eq!(csv.lines().count(), fields + 1, "{csv}");
}
