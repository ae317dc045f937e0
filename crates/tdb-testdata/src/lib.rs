//! Test-only access to the fixture corpus in `testdata/arrays` (written by
//! real TileDB through `cargo xtask fixtures`): every case, every TileDB
//! object in it (group members on their own), every file of each object;
//! [`XorShift`] for generated test and bench data; and [`peak`], a counting
//! allocator for tests that bound memory.

pub mod peak;

use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

/// `testdata/arrays` of this workspace.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/arrays")
}

/// Fixture cases covering every file kind and filter family, small enough
/// to read many times over: what hostile-input tests mutate. Append only:
/// the fuzz targets (`tdb-fuzz`) name cases by their index in this list
/// (then in their own extra list), so their corpora stay valid.
pub const SMALL_CASES: [&str; 16] = [
    "dense_1d_int32",
    "sparse_2d_int",
    "attr_nullable",
    "attr_utf8",
    "dense_var_nullable",
    "filter_gzip",
    "filter_zstd",
    "filter_lz4",
    "filter_bzip2",
    "filter_rle_str",
    "filter_dictionary",
    "filter_double_delta",
    "filter_bit_width_reduction",
    "encrypted_aes256",
    "consolidated_fragment_meta",
    "enumeration",
];

/// One TileDB object (array or group) of a case.
#[derive(Debug, Clone)]
pub struct Object {
    /// The case's path under `testdata/arrays`, e.g. `legacy/2.0.0/dense`.
    pub case: String,
    /// The object's directory.
    pub dir: PathBuf,
    /// Its files, relative to `dir`, `/`-separated, sorted; files of nested
    /// objects excluded.
    pub files: Vec<String>,
    /// The case's `expected.json` for the case's top object; `None` for
    /// objects nested in a group.
    pub expected: Option<Value>,
    /// The case's AES-256-GCM key, if it is encrypted.
    pub key: Option<[u8; 32]>,
}

impl Object {
    /// Reads one of the object's files.
    pub fn read(&self, rel: &str) -> Vec<u8> {
        fs::read(self.dir.join(rel)).unwrap_or_else(|e| panic!("{}: {rel}: {e}", self.case))
    }
}

/// Copies the directory tree `from` to `to` (created as needed), for tests
/// and checks that work on a copy of fixtures they may change.
pub fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for e in fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_dir(&e.path(), &target)?;
        } else {
            fs::copy(e.path(), target)?;
        }
    }
    Ok(())
}

/// Every file under `dir`, all levels, as sorted `/`-separated paths
/// relative to it; none when `dir` is missing. For tests that upload a
/// fixture to an object store or count what a process left on disk.
pub fn files_in(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if e.path().is_dir() {
                walk(&e.path(), &child, out);
            } else {
                out.push(child);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, "", &mut out);
    out.sort();
    out
}

/// The kinds (extensions: `con`, `ign`, `wrt`, ...) of the files in the
/// `__commits/` directory of the array at `dir`, sorted: what a test of
/// consolidating or vacuuming compares with what TileDB left.
pub fn commit_kinds(dir: &Path) -> Vec<String> {
    let mut kinds: Vec<String> = fs::read_dir(dir.join("__commits"))
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.rsplit('.').next().unwrap_or("").to_owned()
                })
                .collect()
        })
        .unwrap_or_default();
    kinds.sort();
    kinds
}

/// Every case directory (holding `expected.json`) under `dir`, sorted.
pub fn case_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect_cases(dir, &mut out);
    out
}

fn collect_cases(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.join("expected.json").is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    for e in sorted_entries(dir).into_iter().filter(|e| e.is_dir()) {
        collect_cases(&e, out);
    }
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    entries
}

/// Whether `dir` is a TileDB array or group.
pub fn is_object(dir: &Path) -> bool {
    use tdb_format::names;
    [
        names::SCHEMA_DIR,
        names::LEGACY_SCHEMA_FILE,
        names::GROUP_DETAILS_DIR,
        names::GROUP_FILE,
    ]
    .iter()
    .any(|n| dir.join(n).exists())
}

fn object_files(root: &Path, rel: &str, files: &mut Vec<String>, nested: &mut Vec<PathBuf>) {
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    for e in sorted_entries(&dir) {
        let name = e.file_name().unwrap().to_str().unwrap().to_owned();
        let child = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if e.is_dir() {
            if rel.is_empty() && !name.starts_with("__") && is_object(&e) {
                nested.push(e);
            } else {
                object_files(root, &child, files, nested);
            }
        } else {
            files.push(child);
        }
    }
}

/// Every object of every case, in a stable order. Panics (with the fix) if
/// the corpus is missing.
pub fn objects() -> Vec<Object> {
    let objects = objects_in(&root());
    assert!(
        objects.len() > 20,
        "fixture corpus missing: run `cargo xtask fixtures`"
    );
    objects
}

/// Every object of every case under `root` (a corpus, or a copy of one).
pub fn objects_in(root: &Path) -> Vec<Object> {
    let root = root.to_path_buf();
    let dirs = case_dirs(&root);
    let mut out = Vec::new();
    for case in dirs {
        let text = fs::read_to_string(case.join("expected.json")).unwrap();
        let expected: Value = serde_json::from_str(&text).unwrap();
        let key = expected["encryption"]["key"].as_str().map(|k| {
            k.as_bytes()
                .try_into()
                .unwrap_or_else(|_| panic!("{}: key not 32 bytes", case.display()))
        });
        let name = case
            .strip_prefix(&root)
            .unwrap()
            .display()
            .to_string()
            .replace('\\', "/");
        let top = if case.join("array").is_dir() {
            case.join("array")
        } else {
            case.join("group")
        };
        let mut stack = vec![(top, Some(expected))];
        while let Some((dir, expected)) = stack.pop() {
            let (mut files, mut nested) = (Vec::new(), Vec::new());
            object_files(&dir, "", &mut files, &mut nested);
            stack.extend(nested.into_iter().map(|n| (n, None)));
            out.push(Object {
                case: name.clone(),
                dir,
                files,
                expected,
                key,
            });
        }
    }
    out
}

/// A small deterministic xorshift generator for generated test and bench
/// data (the same seed gives the same data on every machine).
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator from `seed` (non-zero).
    pub fn new(seed: u64) -> Self {
        XorShift(seed.max(1))
    }

    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
