//! Every directory and file name of the format, once: the other crates name
//! these constants instead of spelling the strings (TileDB's
//! `tiledb/sm/misc/constants.cc`).

/// Fragment directories of format v12+.
pub const FRAGMENTS_DIR: &str = "__fragments";
/// Commit files of format v12+ (`.wrt`, `.del`, `.upd`, `.con`, `.ign`, `.vac`).
pub const COMMITS_DIR: &str = "__commits";
/// Consolidated fragment metadata files (`.meta`) of format v12+.
pub const FRAGMENT_META_DIR: &str = "__fragment_meta";
/// Array schemas of format v10+.
pub const SCHEMA_DIR: &str = "__schema";
/// Enumerations, inside [`SCHEMA_DIR`].
pub const ENUMERATIONS_DIR: &str = "__enumerations";
/// Array or group metadata.
pub const METADATA_DIR: &str = "__meta";
/// Dimension-label arrays.
pub const LABELS_DIR: &str = "__labels";
/// Group details files.
pub const GROUP_DETAILS_DIR: &str = "__group";

/// The directory names TileDB reserves in an array directory (never a fragment).
pub const ARRAY_DIRS: [&str; 6] = [
    SCHEMA_DIR,
    METADATA_DIR,
    FRAGMENT_META_DIR,
    FRAGMENTS_DIR,
    COMMITS_DIR,
    LABELS_DIR,
];

/// The schema before format v10, in the array root.
pub const LEGACY_SCHEMA_FILE: &str = "__array_schema.tdb";
/// The marker file of a group directory.
pub const GROUP_FILE: &str = "__tiledb_group.tdb";
/// A fragment's metadata, inside its directory.
pub const FRAGMENT_METADATA_FILE: &str = "__fragment_metadata.tdb";
/// The legacy lock file.
pub const LOCK_FILE: &str = "__lock.tdb";

/// Data and metadata files inside a fragment.
pub const TDB_EXT: &str = ".tdb";
/// A fragment commit of format v5–v11, in the array root.
pub const OK_EXT: &str = ".ok";
/// A fragment commit of format v12+, in [`COMMITS_DIR`].
pub const WRT_EXT: &str = ".wrt";
/// Consolidated commits.
pub const CON_EXT: &str = ".con";
/// Commits to ignore.
pub const IGN_EXT: &str = ".ign";
/// A vacuum list.
pub const VAC_EXT: &str = ".vac";
/// A delete commit.
pub const DEL_EXT: &str = ".del";
/// An update commit.
pub const UPD_EXT: &str = ".upd";
/// Consolidated fragment metadata.
pub const META_EXT: &str = ".meta";
/// A metadata file still being written (TileDB skips it when listing).
pub const TMP_EXT: &str = ".tmp";

/// Var-size values of a field (`<field>_var.tdb`).
pub const VAR_SUFFIX: &str = "_var";
/// Validity of a nullable field (`<field>_validity.tdb`).
pub const VALIDITY_SUFFIX: &str = "_validity";
/// All coordinates of a pre-v5 fragment (file stem).
pub const LEGACY_COORDS_STEM: &str = "__coords";
/// Per-cell timestamps (file stem, v14+).
pub const TIMESTAMPS_STEM: &str = "t";
/// The name of the per-cell timestamps as a field (TileDB's
/// `constants::timestamps`): UINT64, one per cell, in fragments consolidated
/// with timestamps.
pub const TIMESTAMPS_FIELD: &str = "__timestamps";
/// Per-cell delete timestamps (file stem, v15+).
pub const DELETE_TIMESTAMPS_STEM: &str = "dt";
/// Per-cell delete condition indexes (file stem, v15+).
pub const DELETE_CONDITION_INDEX_STEM: &str = "dci";
/// The per-cell delete timestamps as a field (TileDB's
/// `constants::delete_timestamps`): UINT64, when each cell was deleted
/// (`u64::MAX`: never), in fragments consolidated with delete metadata.
pub const DELETE_TIMESTAMPS_FIELD: &str = "__delete_timestamps";
/// The per-cell delete condition indexes as a field (TileDB's
/// `constants::delete_condition_index`): UINT64, which of the fragment's
/// processed conditions deleted each cell (`u64::MAX`: none).
pub const DELETE_CONDITION_INDEX_FIELD: &str = "__delete_condition_index";

/// A fresh random label as TileDB's `random_label` makes them for fragment,
/// schema, metadata and enumeration names: 32 lowercase hex digits.
pub fn random_label() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
