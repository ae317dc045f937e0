//! `cargo xtask interop`: does TileDB read what tdb wrote?
//!
//! Until tdb writes whole arrays, the check re-encodes what tdb can write
//! in place: every file that is one generic tile (schemas, array metadata,
//! enumerations, group details, ...) of every fixture is unfiltered and
//! written again by `tdb-tile` (tdb's GZIP bytes, tdb's AES-256-GCM with
//! fresh IVs), in a copy of the corpus under `target/interop`. Then real
//! TileDB (the fixture venv's tiledb-py 0.36.1) opens every copied case
//! and must report exactly what it reported for TileDB's own bytes
//! (`expected.json`, all but file sizes).

use crate::{run, venv_for, workspace_root, Writer};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use tdb_format::{classify, single_generic_tile, Datatype, ObjectFile};
use tdb_tile::{read_generic_tile, write_generic_tile};

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for entry in fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            fs::copy(&src, &dst).map_err(|e| format!("{}: {e}", src.display()))?;
        }
    }
    Ok(())
}

fn is_object(dir: &Path) -> bool {
    [
        "__schema",
        "__array_schema.tdb",
        "__group",
        "__tiledb_group.tdb",
    ]
    .iter()
    .any(|n| dir.join(n).exists())
}

/// Files of the object at `root`, relative and `/`-separated, and nested
/// objects (group members) found on the way.
fn object_files(root: &Path, rel: &str, files: &mut Vec<String>, nested: &mut Vec<PathBuf>) {
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let Ok(entries) = fs::read_dir(&dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        let child = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if path.is_dir() {
            if rel.is_empty() && !name.starts_with("__") && is_object(&path) {
                nested.push(path);
            } else {
                object_files(root, &child, files, nested);
            }
        } else {
            files.push(child);
        }
    }
}

/// The case's AES key, read from its expected.json without a JSON parser:
/// the `"key"` inside the `"encryption": {...}` object (`null` when not
/// encrypted; metadata may have keys named "key" elsewhere).
fn case_key(case: &Path) -> Option<[u8; 32]> {
    let text = fs::read_to_string(case.join("expected.json")).ok()?;
    let enc = &text[text.find("\"encryption\": {")?..];
    let object = &enc[..enc.find('}')?];
    let at = object.find("\"key\": \"")? + "\"key\": \"".len();
    object.get(at..at + 32)?.as_bytes().try_into().ok()
}

fn cases(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.join("expected.json").is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                cases(&e.path(), out);
            }
        }
    }
}

/// Re-encodes every single-generic-tile file of one object; returns how many.
fn rewrite_object(dir: &Path, key: Option<&[u8; 32]>) -> Result<usize, String> {
    let (mut files, mut nested) = (Vec::new(), Vec::new());
    object_files(dir, "", &mut files, &mut nested);
    let mut n = 0;
    for rel in files {
        let class = classify(&rel);
        if !class.holds_generic_tiles() || matches!(class, ObjectFile::FragmentMetadata { .. }) {
            continue;
        }
        let path = dir.join(&rel);
        let bytes = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let Ok(tile) = single_generic_tile(&bytes) else {
            continue;
        };
        if tile.header.datatype != Datatype::Char || tile.header.cell_size != 1 {
            return Err(format!(
                "{}: a generic tile of other cells than CHAR",
                path.display()
            ));
        }
        let at = path.display().to_string();
        let data = read_generic_tile(&at, &tile, key).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        write_generic_tile(&at, tile.header.version, &data, key, &mut out)
            .map_err(|e| e.to_string())?;
        fs::write(&path, out).map_err(|e| format!("{}: {e}", path.display()))?;
        n += 1;
    }
    for d in nested {
        n += rewrite_object(&d, key)?;
    }
    Ok(n)
}

pub(crate) fn interop(args: &[String], reference: &Writer) -> Result<(), String> {
    if let Some(a) = args.first() {
        return Err(format!("interop: unknown argument {a:?}"));
    }
    let root = workspace_root();
    let venv = venv_for(&root, reference)?;
    let corpus = root.join("testdata/arrays");
    let out = root.join("target/interop");
    if out.exists() {
        fs::remove_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    copy_dir(&corpus, &out)?;
    let mut case_dirs = Vec::new();
    cases(&out, &mut case_dirs);
    let mut tiles = 0;
    for case in &case_dirs {
        let key = case_key(case);
        for sub in ["array", "group"] {
            if case.join(sub).is_dir() {
                tiles += rewrite_object(&case.join(sub), key.as_ref())?;
            }
        }
    }
    eprintln!(
        "interop: tdb re-encoded {tiles} generic tiles in {} cases",
        case_dirs.len()
    );
    run(Command::new(venv.join("bin/python"))
        .current_dir(&root)
        .arg("xtask/interop/check.py")
        .arg(&corpus)
        .arg(&out))
}
