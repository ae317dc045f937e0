//! `cargo xtask interop`: does TileDB read what tdb wrote?
//!
//! Until tdb writes whole arrays, the check re-encodes what tdb can write
//! in place: every file that is one generic tile (schemas, array metadata,
//! enumerations, group details, ...) of every fixture is unfiltered and
//! written again by `tdb-tile` (tdb's GZIP bytes, tdb's AES-256-GCM with
//! fresh IVs), in a copy of the corpus under `target/interop`. Then real
//! TileDB (the fixture venv's tiledb-py 0.36.1) opens every copied case
//! and must report exactly what it reported for TileDB's own bytes
//! (`expected.json`, all but file sizes). Every v22 fragment metadata file
//! is also written anew by `tdb-fragment` (every section re-encoded, laid
//! out again, a footer pointing at where each landed), so TileDB reads
//! tdb's footers and sections too.

use crate::{run, venv_for, workspace_root, Writer};
use std::fs;
use std::process::Command;
use tdb_cli::error_report;
use tdb_format::{classify, names, single_generic_tile, Datatype, FormatVersion, ObjectFile};
use tdb_fragment::{FragmentError, OpenArray, TimeWindow};
use tdb_storage::LocalStorage;
use tdb_testdata::Object;
use tdb_tile::{read_generic_tile, write_generic_tile};

/// Re-encodes every single-generic-tile file of one object; returns how many.
fn rewrite_object(object: &Object) -> Result<usize, String> {
    let (dir, key) = (&object.dir, object.key.as_ref());
    let mut n = 0;
    for rel in &object.files {
        let class = classify(rel);
        if !class.holds_generic_tiles() || matches!(class, ObjectFile::FragmentMetadata { .. }) {
            continue;
        }
        let path = dir.join(rel);
        let bytes = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let tile = single_generic_tile(&bytes)
            .map_err(|e| format!("{}: {}", path.display(), error_report(&e)))?;
        if tile.header.datatype != Datatype::Char || tile.header.cell_size != 1 {
            return Err(format!(
                "{}: a generic tile of other cells than CHAR",
                path.display()
            ));
        }
        let at = path.display().to_string();
        let data = read_generic_tile(&at, &tile, key).map_err(|e| error_report(&e))?;
        let mut out = Vec::new();
        write_generic_tile(&at, tile.header.version, &data, key, &mut out)
            .map_err(|e| error_report(&e))?;
        fs::write(&path, out).map_err(|e| format!("{}: {e}", path.display()))?;
        n += 1;
    }
    Ok(n)
}

/// Rewrites every v22 fragment metadata file of one array with
/// `FragmentMetadata::write_file`; returns how many.
fn rewrite_fragment_metadata(object: &Object) -> Result<usize, String> {
    let storage = LocalStorage::new(&object.dir);
    let key = object.key.as_ref();
    let err = |e: FragmentError| format!("{}: {}", object.dir.display(), error_report(&e));
    let array = OpenArray::open(&storage, "", TimeWindow::ALL, key).map_err(err)?;
    let mut n = 0;
    for f in array.load_fragments(&storage).map_err(err)? {
        let mut meta = f.metadata;
        if meta.footer.version != FormatVersion::WRITTEN.get() || f.from_consolidated {
            continue;
        }
        let schema = &array
            .schemas
            .by_name(&meta.footer.array_schema_name)
            .ok_or_else(|| format!("{}: no schema for {}", object.dir.display(), f.file.path))?
            .schema;
        let path = object
            .dir
            .join(&f.file.path)
            .join(names::FRAGMENT_METADATA_FILE);
        let bytes = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        meta.load_all_sections(&bytes, key, schema).map_err(err)?;
        let ours = meta.write_file(schema, key).map_err(err)?;
        fs::write(&path, ours).map_err(|e| format!("{}: {e}", path.display()))?;
        n += 1;
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
    tdb_testdata::copy_dir(&corpus, &out)
        .map_err(|e| format!("copying {} to {}: {e}", corpus.display(), out.display()))?;
    let objects = tdb_testdata::objects_in(&out);
    let (mut tiles, mut metadata_files) = (0, 0);
    for object in &objects {
        tiles += rewrite_object(object)?;
        if object
            .files
            .iter()
            .any(|f| f.starts_with(names::SCHEMA_DIR) || f == names::LEGACY_SCHEMA_FILE)
        {
            metadata_files += rewrite_fragment_metadata(object)?;
        }
    }
    eprintln!(
        "interop: tdb re-encoded {tiles} generic tiles in {} objects and rewrote {metadata_files} fragment metadata files",
        objects.len()
    );
    if metadata_files == 0 {
        return Err("interop: no fragment metadata rewritten; the check would prove less".into());
    }
    if tiles == 0 {
        return Err("interop: no generic tile re-encoded; the check would prove nothing".into());
    }
    run(Command::new(venv.join("bin/python"))
        .current_dir(&root)
        .arg("xtask/interop/check.py")
        .arg(&corpus)
        .arg(&out))
}
