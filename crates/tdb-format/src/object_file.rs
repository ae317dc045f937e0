//! Classification of every file name the format uses inside an array or group
//! directory, by its path relative to that directory (`/`-separated), so that
//! no other crate matches file names by hand.

use crate::names::*;
use crate::{
    fragment_metadata_tiles, generic_tile_run, FormatVersion, LocatedTile, Result, TimestampedName,
};

/// What a data file inside a fragment holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DataField {
    /// Attribute number `n` (`a<n>.tdb`, format v9+).
    Attribute(u32),
    /// Dimension number `n` (`d<n>.tdb`, format v9+).
    Dimension(u32),
    /// An attribute or dimension named in the file name (format v5–v8; v8
    /// percent-encodes some characters, kept here as written).
    Named(String),
    /// All coordinates of a pre-v5 fragment (`__coords.tdb`).
    LegacyCoords,
    /// Per-cell timestamps of a consolidated fragment (`t.tdb`, v14+).
    Timestamps,
    /// Per-cell delete timestamps (`dt.tdb`, v15+).
    DeleteTimestamps,
    /// Per-cell delete condition index (`dci.tdb`, v15+).
    DeleteConditionIndex,
}

impl DataField {
    /// A field named in its file name (v5–v8), encoded as `version` writes
    /// it: v8 percent-encodes RFC 3986's reserved characters and those
    /// Windows forbids (`!#$%&'()*+,/:;=?@[]"<>\|`).
    pub fn named(name: &str, version: FormatVersion) -> Self {
        const RESERVED: &[u8] = b"!#$%&'()*+,/:;=?@[]\"<>\\|";
        if !version.data_files_percent_encoded() {
            return DataField::Named(name.to_owned());
        }
        let mut out = String::with_capacity(name.len());
        for c in name.chars() {
            if c.is_ascii() && RESERVED.contains(&(c as u8)) {
                out.push_str(&format!("%{:02X}", c as u32));
            } else {
                out.push(c);
            }
        }
        DataField::Named(out)
    }

    /// The name of the file holding `part` of this field, the mirror of
    /// [`classify`].
    pub fn file_name(&self, part: DataPart) -> String {
        let stem = match self {
            DataField::Attribute(i) => format!("a{i}"),
            DataField::Dimension(i) => format!("d{i}"),
            DataField::Named(n) => n.clone(),
            DataField::LegacyCoords => LEGACY_COORDS_STEM.to_owned(),
            DataField::Timestamps => TIMESTAMPS_STEM.to_owned(),
            DataField::DeleteTimestamps => DELETE_TIMESTAMPS_STEM.to_owned(),
            DataField::DeleteConditionIndex => DELETE_CONDITION_INDEX_STEM.to_owned(),
        };
        let suffix = match part {
            DataPart::Fixed => "",
            DataPart::Var => VAR_SUFFIX,
            DataPart::Validity => VALIDITY_SUFFIX,
        };
        format!("{stem}{suffix}{TDB_EXT}")
    }

    /// For [`DataField::Named`], the field's name with v8's percent-encoding
    /// of file names undone (`%XX` becomes the byte it encodes).
    pub fn decoded_name(&self) -> Option<String> {
        let DataField::Named(s) = self else {
            return None;
        };
        let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        let mut rest = s.as_bytes();
        let mut out = Vec::with_capacity(rest.len());
        while let Some((&c, after)) = rest.split_first() {
            if let [b'%', h, l, ..] = rest {
                if let (Some(h), Some(l)) = (hex(*h), hex(*l)) {
                    out.push((h << 4) | l);
                    rest = rest.get(3..).unwrap_or_default();
                    continue;
                }
            }
            out.push(c);
            rest = after;
        }
        Some(String::from_utf8_lossy(&out).into_owned())
    }
}

/// Which of a field's files this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataPart {
    /// Fixed-size values, or the offsets of var-size values.
    Fixed,
    /// Var-size values (`_var`).
    Var,
    /// Validity bytes (`_validity`).
    Validity,
}

/// What a file in an array or group directory is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ObjectFile {
    /// The pre-v10 schema, `__array_schema.tdb`.
    LegacySchema,
    /// A schema under `__schema/`.
    Schema(TimestampedName),
    /// An enumeration under `__schema/__enumerations/` (named by a
    /// timestamped-looking name TileDB generates; kept raw).
    Enumeration(String),
    /// A fragment's `__fragment_metadata.tdb`.
    FragmentMetadata {
        /// The fragment.
        fragment: TimestampedName,
        /// Whether it sits in `__fragments/` (v12+) or the array root.
        in_fragments_dir: bool,
    },
    /// A fragment data file.
    Data {
        /// The fragment.
        fragment: TimestampedName,
        /// The field stored.
        field: DataField,
        /// Which part of it.
        part: DataPart,
        /// Whether the fragment sits in `__fragments/` (v12+) or the array root.
        in_fragments_dir: bool,
    },
    /// `<fragment>.ok` in the array root (v5–v11 commits).
    OkCommit(TimestampedName),
    /// `__commits/<fragment>.wrt` (v12+ commits).
    WriteCommit(TimestampedName),
    /// `.del`: a delete commit.
    DeleteCommit(TimestampedName),
    /// `.upd`: an update commit.
    UpdateCommit(TimestampedName),
    /// `.con`: consolidated commits.
    ConsolidatedCommits(TimestampedName),
    /// `.ign`: commits to ignore.
    Ignore(TimestampedName),
    /// `.vac`: a vacuum list, in `__commits/`, `__meta/`, `__group/` or the
    /// root (legacy).
    Vacuum(TimestampedName),
    /// `.meta`: consolidated fragment metadata.
    ConsolidatedFragmentMetadata(TimestampedName),
    /// An array or group metadata file under `__meta/`.
    Metadata(TimestampedName),
    /// A group details file under `__group/`.
    GroupDetails(TimestampedName),
    /// `__tiledb_group.tdb`, the marker of a group directory.
    GroupMarker,
    /// `__lock.tdb`, a legacy lock file.
    Lock,
    /// A file of a dimension-label array under `__labels/`.
    DimensionLabel(String),
    /// Anything else.
    Unknown,
}

impl ObjectFile {
    /// Whether the file is (exactly or starts with) generic tiles, so its
    /// headers can be read without the schema: schemas, enumerations, array,
    /// group and fragment metadata, group details, delete and update commits.
    pub fn holds_generic_tiles(&self) -> bool {
        matches!(
            self,
            ObjectFile::LegacySchema
                | ObjectFile::Schema(_)
                | ObjectFile::Enumeration(_)
                | ObjectFile::FragmentMetadata { .. }
                | ObjectFile::Metadata(_)
                | ObjectFile::GroupDetails(_)
                | ObjectFile::DeleteCommit(_)
                | ObjectFile::UpdateCommit(_)
        )
    }

    /// The generic tiles of a file of this kind and the bytes after them:
    /// a fragment metadata file's tiles stop at its footer (see
    /// [`fragment_metadata_tiles`]); other files are a run of tiles. No
    /// tiles for files that hold none.
    pub fn generic_tiles<'a>(&self, bytes: &'a [u8]) -> Result<(Vec<LocatedTile<'a>>, &'a [u8])> {
        match self {
            ObjectFile::FragmentMetadata { .. } => fragment_metadata_tiles(bytes),
            _ if self.holds_generic_tiles() => Ok(generic_tile_run(bytes)),
            _ => Ok((Vec::new(), bytes)),
        }
    }

    /// A short stable label for listings.
    pub fn label(&self) -> &'static str {
        match self {
            ObjectFile::LegacySchema => "legacy-schema",
            ObjectFile::Schema(_) => "schema",
            ObjectFile::Enumeration(_) => "enumeration",
            ObjectFile::FragmentMetadata { .. } => "fragment-metadata",
            ObjectFile::Data {
                part: DataPart::Fixed,
                ..
            } => "data",
            ObjectFile::Data {
                part: DataPart::Var,
                ..
            } => "data-var",
            ObjectFile::Data {
                part: DataPart::Validity,
                ..
            } => "data-validity",
            ObjectFile::OkCommit(_) => "commit-ok",
            ObjectFile::WriteCommit(_) => "commit-wrt",
            ObjectFile::DeleteCommit(_) => "delete-commit",
            ObjectFile::UpdateCommit(_) => "update-commit",
            ObjectFile::ConsolidatedCommits(_) => "consolidated-commits",
            ObjectFile::Ignore(_) => "ignore",
            ObjectFile::Vacuum(_) => "vacuum",
            ObjectFile::ConsolidatedFragmentMetadata(_) => "consolidated-fragment-metadata",
            ObjectFile::Metadata(_) => "metadata",
            ObjectFile::GroupDetails(_) => "group-details",
            ObjectFile::GroupMarker => "group-marker",
            ObjectFile::Lock => "lock",
            ObjectFile::DimensionLabel(_) => "dimension-label",
            ObjectFile::Unknown => "unknown",
        }
    }

    /// The timestamped name the file carries, if any.
    pub fn timestamped_name(&self) -> Option<&TimestampedName> {
        match self {
            ObjectFile::Schema(n)
            | ObjectFile::FragmentMetadata { fragment: n, .. }
            | ObjectFile::Data { fragment: n, .. }
            | ObjectFile::OkCommit(n)
            | ObjectFile::WriteCommit(n)
            | ObjectFile::DeleteCommit(n)
            | ObjectFile::UpdateCommit(n)
            | ObjectFile::ConsolidatedCommits(n)
            | ObjectFile::Ignore(n)
            | ObjectFile::Vacuum(n)
            | ObjectFile::ConsolidatedFragmentMetadata(n)
            | ObjectFile::Metadata(n)
            | ObjectFile::GroupDetails(n) => Some(n),
            _ => None,
        }
    }
}

fn with_ext(name: &str, ext: &str) -> Option<TimestampedName> {
    name.strip_suffix(ext)
        .and_then(|stem| TimestampedName::parse(stem).ok())
}

fn commit_file(name: &str) -> Option<ObjectFile> {
    let ext = &name[name.rfind('.')?..];
    let n = with_ext(name, ext)?;
    Some(match ext {
        WRT_EXT => ObjectFile::WriteCommit(n),
        OK_EXT => ObjectFile::OkCommit(n),
        DEL_EXT => ObjectFile::DeleteCommit(n),
        UPD_EXT => ObjectFile::UpdateCommit(n),
        CON_EXT => ObjectFile::ConsolidatedCommits(n),
        IGN_EXT => ObjectFile::Ignore(n),
        VAC_EXT => ObjectFile::Vacuum(n),
        META_EXT => ObjectFile::ConsolidatedFragmentMetadata(n),
        _ => return None,
    })
}

fn index(s: &str, prefix: char) -> Option<u32> {
    let digits = s.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Classifies a file inside a fragment directory. Files are named by index
/// from format v9 on and by field name before; a fragment's version comes
/// from its name (`_v`), and names without one are pre-v5.
fn fragment_file(fragment: TimestampedName, file: &str, in_fragments_dir: bool) -> ObjectFile {
    if file == FRAGMENT_METADATA_FILE {
        return ObjectFile::FragmentMetadata {
            fragment,
            in_fragments_dir,
        };
    }
    let Some(stem) = file.strip_suffix(TDB_EXT) else {
        return ObjectFile::Unknown;
    };
    let (base, part) = if let Some(b) = stem.strip_suffix(VAR_SUFFIX) {
        (b, DataPart::Var)
    } else if let Some(b) = stem.strip_suffix(VALIDITY_SUFFIX) {
        (b, DataPart::Validity)
    } else {
        (stem, DataPart::Fixed)
    };
    let by_index = FormatVersion::new(fragment.implied_format_version())
        .map(FormatVersion::data_files_named_by_index)
        .unwrap_or(false);
    let field = match base {
        LEGACY_COORDS_STEM => DataField::LegacyCoords,
        TIMESTAMPS_STEM if by_index => DataField::Timestamps,
        DELETE_TIMESTAMPS_STEM if by_index => DataField::DeleteTimestamps,
        DELETE_CONDITION_INDEX_STEM if by_index => DataField::DeleteConditionIndex,
        _ if by_index => match (index(base, 'a'), index(base, 'd')) {
            (Some(i), _) => DataField::Attribute(i),
            (_, Some(i)) => DataField::Dimension(i),
            _ => return ObjectFile::Unknown,
        },
        _ => DataField::Named(base.to_owned()),
    };
    ObjectFile::Data {
        fragment,
        field,
        part,
        in_fragments_dir,
    }
}

/// Classifies a path relative to an array or group directory.
pub fn classify(path: &str) -> ObjectFile {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        [LEGACY_SCHEMA_FILE] => ObjectFile::LegacySchema,
        [GROUP_FILE] => ObjectFile::GroupMarker,
        [LOCK_FILE] => ObjectFile::Lock,
        [SCHEMA_DIR, ENUMERATIONS_DIR, name] => ObjectFile::Enumeration((*name).to_owned()),
        [SCHEMA_DIR, name] => TimestampedName::parse(name)
            .map(ObjectFile::Schema)
            .unwrap_or(ObjectFile::Unknown),
        [METADATA_DIR, name] => match with_ext(name, VAC_EXT) {
            Some(n) => ObjectFile::Vacuum(n),
            None => TimestampedName::parse(name)
                .ok()
                .filter(|_| !name.contains('.'))
                .map(ObjectFile::Metadata)
                .unwrap_or(ObjectFile::Unknown),
        },
        [GROUP_DETAILS_DIR, name] => match with_ext(name, VAC_EXT) {
            Some(n) => ObjectFile::Vacuum(n),
            None => TimestampedName::parse(name)
                .ok()
                .filter(|_| !name.contains('.'))
                .map(ObjectFile::GroupDetails)
                .unwrap_or(ObjectFile::Unknown),
        },
        [COMMITS_DIR, name] | [FRAGMENT_META_DIR, name] => {
            commit_file(name).unwrap_or(ObjectFile::Unknown)
        }
        [FRAGMENTS_DIR, frag, file] => match TimestampedName::parse(frag) {
            Ok(n) if !frag.contains('.') => fragment_file(n, file, true),
            _ => ObjectFile::Unknown,
        },
        [LABELS_DIR, inside @ ..] => ObjectFile::DimensionLabel(inside.join("/")),
        [name] => commit_file(name).unwrap_or(ObjectFile::Unknown),
        [frag, file] => match TimestampedName::parse(frag) {
            Ok(n) if !frag.contains('.') => fragment_file(n, file, false),
            _ => ObjectFile::Unknown,
        },
        _ => ObjectFile::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn named_fields_undo_percent_encoding() {
        let name = |s: &str| DataField::Named(s.into()).decoded_name().unwrap();
        assert_eq!(name("a%20b"), "a b");
        assert_eq!(name("%41"), "A");
        assert_eq!(name("%4"), "%4");
        assert_eq!(name("a%"), "a%");
        assert_eq!(name("%zz%41"), "%zzA");
        assert_eq!(name("%%41"), "%A");
        assert_eq!(DataField::Attribute(0).decoded_name(), None);
    }

    #[test]
    fn modern_array_files() {
        let f = format!("__fragments/__1_1_{U}_22");
        assert_eq!(classify(&format!("__schema/__1_1_{U}")).label(), "schema");
        assert!(matches!(
            classify(&format!("{f}/a0.tdb")),
            ObjectFile::Data {
                field: DataField::Attribute(0),
                part: DataPart::Fixed,
                ..
            }
        ));
        assert!(matches!(
            classify(&format!("{f}/d12_var.tdb")),
            ObjectFile::Data {
                field: DataField::Dimension(12),
                part: DataPart::Var,
                ..
            }
        ));
        assert!(matches!(
            classify(&format!("{f}/a3_validity.tdb")),
            ObjectFile::Data {
                field: DataField::Attribute(3),
                part: DataPart::Validity,
                ..
            }
        ));
        assert!(matches!(
            classify(&format!("{f}/t.tdb")),
            ObjectFile::Data {
                field: DataField::Timestamps,
                ..
            }
        ));
        assert_eq!(
            classify(&format!("{f}/__fragment_metadata.tdb")).label(),
            "fragment-metadata"
        );
        assert_eq!(
            classify(&format!("__commits/__1_1_{U}_22.wrt")).label(),
            "commit-wrt"
        );
        assert_eq!(
            classify(&format!("__commits/__1_2_{U}.con")).label(),
            "consolidated-commits"
        );
        assert_eq!(
            classify(&format!("__commits/__1_2_{U}.del")).label(),
            "delete-commit"
        );
        assert_eq!(
            classify(&format!("__commits/__1_2_{U}.ign")).label(),
            "ignore"
        );
        assert_eq!(
            classify(&format!("__commits/__1_2_{U}_22.vac")).label(),
            "vacuum"
        );
        assert_eq!(
            classify(&format!("__fragment_meta/__1_2_{U}_22.meta")).label(),
            "consolidated-fragment-metadata"
        );
        assert_eq!(classify(&format!("__meta/__1_2_{U}")).label(), "metadata");
        assert_eq!(classify(&format!("__meta/__1_2_{U}.vac")).label(), "vacuum");
        assert_eq!(
            classify("__schema/__enumerations/__abc_0").label(),
            "enumeration"
        );
        assert_eq!(
            classify(&format!("__group/__1_2_{U}")).label(),
            "group-details"
        );
        assert_eq!(classify("__tiledb_group.tdb").label(), "group-marker");
    }

    #[test]
    fn legacy_array_files() {
        assert_eq!(classify("__array_schema.tdb").label(), "legacy-schema");
        assert_eq!(classify("__lock.tdb").label(), "lock");
        assert_eq!(classify(&format!("__1_1_{U}_5.ok")).label(), "commit-ok");
        assert!(matches!(
            classify(&format!("__{U}_7/__coords.tdb")),
            ObjectFile::Data {
                field: DataField::LegacyCoords,
                ..
            }
        ));
        // Before v9 data files are named after their field, even "a0".
        assert!(matches!(
            classify(&format!("__1_1_{U}_8/a0.tdb")),
            ObjectFile::Data { field: DataField::Named(ref n), .. } if n == "a0"
        ));
        assert!(matches!(
            classify(&format!("__1_1_{U}/price_var.tdb")),
            ObjectFile::Data { field: DataField::Named(ref n), part: DataPart::Var, .. } if n == "price"
        ));
        assert!(matches!(
            classify(&format!("__1_1_{U}_11/__fragment_metadata.tdb")),
            ObjectFile::FragmentMetadata {
                in_fragments_dir: false,
                ..
            }
        ));
    }

    #[test]
    fn strangers_are_unknown() {
        for p in [
            "README",
            "__schema/notaname",
            "__commits/x.wrt",
            "a/b/c/d",
            "__fragments/x/a0.tdb",
        ] {
            assert_eq!(classify(p), ObjectFile::Unknown, "{p}");
        }
        assert_eq!(
            classify(&format!("__fragments/__1_1_{U}_22/zz.tdb")),
            ObjectFile::Unknown
        );
    }
}
