//! The fixtures targets take their context and seeds from: a fixed list of
//! TileDB-written cases covering every file kind and filter family
//! (`tdb_testdata::SMALL_CASES`, then `MORE_CASES`), loaded once per
//! process. The list's order is part of every input's meaning (its first
//! bytes choose a case, file or field), so append, never reorder.

use std::sync::OnceLock;
use tdb::{Array, MemoryStorage, OpenOptions};
use tdb_format::{classify, ObjectFile};
use tdb_schema::ArraySchema;
use tdb_storage::WritableStorage;

/// The cases after `tdb_testdata::SMALL_CASES` (which come first).
const MORE_CASES: &[&str] = &[
    "filter_chains_float",
    "filter_chains_int",
    "filter_webp",
    "filter_xor",
    "filter_delta",
    "filter_positive_delta",
    "filter_float_scale",
    "filter_bitshuffle",
    "filter_byteshuffle",
    "filter_checksum_md5",
    "filter_checksum_sha256",
    "filters_dims_offsets_validity",
    "filters_string_dim_dictionary",
    "sparse_string_dim",
    "sparse_float_dims",
    "sparse_hilbert",
    "delete_query",
    "consolidated_commits",
    "metadata_types",
    "schema_evolution",
    "attr_var_numeric",
    "legacy/1.5.0/sparse_var",
    "legacy/2.0.8/string_dim",
    "group_basic",
    "consolidated_commits_then_fragments",
    "consolidated_before_vacuum",
    "consolidated_array_meta",
    "group_meta_consolidated",
];

/// One fixture object: its files, its key, and (for arrays) the schema
/// TileDB reads it with.
pub(crate) struct Case {
    /// Files relative to the object, with their bytes, sorted by name.
    pub files: Vec<(String, Vec<u8>)>,
    /// The AES-256-GCM key of an encrypted case.
    pub key: Option<[u8; 32]>,
    /// The latest schema; `None` for groups.
    pub schema: Option<ArraySchema>,
    /// Every schema file's schema, by file name (`__array_schema.tdb`
    /// before v10): fragment footers name the one they were written with.
    pub schemas: Vec<(String, ArraySchema)>,
}

impl Case {
    /// A fresh in-memory copy of the object with file `replace` (an index
    /// into `files`) holding `bytes` instead.
    pub fn storage(&self, replace: Option<(usize, &[u8])>) -> MemoryStorage {
        let s = MemoryStorage::new();
        for (k, (name, content)) in self.files.iter().enumerate() {
            let data = match replace {
                Some((r, bytes)) if r == k => bytes,
                _ => content,
            };
            s.write(name, data.to_vec().into())
                .expect("memory storage takes every write");
        }
        s
    }

    /// Open options with the case's key.
    pub fn options(&self) -> OpenOptions {
        match &self.key {
            Some(k) => OpenOptions::new()
                .key(k)
                .expect("a fixture's key has 32 bytes"),
            None => OpenOptions::new(),
        }
    }
}

/// Every case of the list, in order (each top object; a group's members
/// are not separate cases).
pub(crate) fn cases() -> &'static [Case] {
    static CASES_LOADED: OnceLock<Vec<Case>> = OnceLock::new();
    CASES_LOADED.get_or_init(|| {
        let objects = tdb_testdata::objects();
        tdb_testdata::SMALL_CASES
            .iter()
            .chain(MORE_CASES)
            .map(|name| {
                let o = objects
                    .iter()
                    .find(|o| o.case == *name && o.expected.is_some())
                    .unwrap_or_else(|| panic!("fuzz context: no fixture case {name}"));
                let files: Vec<(String, Vec<u8>)> =
                    o.files.iter().map(|f| (f.clone(), o.read(f))).collect();
                let schemas = files
                    .iter()
                    .filter(|(name, _)| {
                        matches!(
                            classify(name),
                            ObjectFile::Schema(_) | ObjectFile::LegacySchema
                        )
                    })
                    .filter_map(|(name, bytes)| {
                        let schema = ArraySchema::from_file(name, bytes, o.key.as_ref()).ok()?;
                        let file = name.rsplit('/').next().unwrap_or(name).to_owned();
                        Some((file, schema))
                    })
                    .collect();
                let mut case = Case {
                    files,
                    key: o.key,
                    schema: None,
                    schemas,
                };
                case.schema = Array::open_in(case.storage(None), "", case.options())
                    .ok()
                    .map(|a| a.schema().clone());
                case
            })
            .collect()
    })
}

/// Every file of every case, in order, as (case, file index).
pub(crate) fn all_files() -> &'static [(usize, usize)] {
    static FILES: OnceLock<Vec<(usize, usize)>> = OnceLock::new();
    FILES.get_or_init(|| {
        cases()
            .iter()
            .enumerate()
            .flat_map(|(c, case)| (0..case.files.len()).map(move |f| (c, f)))
            .collect()
    })
}

/// Splits an input into a selector chosen by its first two bytes (taken
/// modulo `n`, so every input selects something) and the rest.
pub(crate) fn select(data: &[u8], n: usize) -> Option<(usize, &[u8])> {
    if n == 0 || data.len() < 2 {
        return None;
    }
    let k = usize::from(u16::from_le_bytes([data[0], data[1]])) % n;
    Some((k, &data[2..]))
}

/// The selector bytes that choose `k` (the inverse of [`select`]).
pub(crate) fn selector(k: usize, rest: &[u8]) -> Vec<u8> {
    let k = u16::try_from(k).expect("fewer than 65536 choices");
    let mut out = k.to_le_bytes().to_vec();
    out.extend_from_slice(rest);
    out
}
