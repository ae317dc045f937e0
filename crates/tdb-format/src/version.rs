//! Format versions 1–23 and the history of what each changed, as named
//! predicates so no other crate compares version numbers by hand
//! (see the spec's `array_format_history.md`).

use crate::{FormatError, Result};

/// An on-disk format version this crate knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FormatVersion(u32);

impl FormatVersion {
    /// The oldest version (TileDB 1.4).
    pub const MIN: FormatVersion = FormatVersion(1);
    /// The newest version the spec describes (TileDB 2.30 reads it).
    pub const MAX: FormatVersion = FormatVersion(23);
    /// The version TileDB 2.30 writes for arrays (and tdb writes).
    pub const WRITTEN: FormatVersion = FormatVersion(22);

    /// Checks that `v` is a known version.
    pub fn new(v: u32) -> Result<Self> {
        if (Self::MIN.0..=Self::MAX.0).contains(&v) {
            Ok(FormatVersion(v))
        } else if v > Self::MAX.0 {
            Err(FormatError::NewerVersion { version: v })
        } else {
            Err(FormatError::Invalid {
                field: "format version",
                reason: format!("{v} is outside the known versions 1..=23"),
            })
        }
    }

    /// The number.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The TileDB release that introduced this version.
    pub const fn introduced_in(self) -> &'static str {
        match self.0 {
            1 => "1.4",
            2 => "1.5",
            3 => "1.6",
            4 => "1.7",
            5 => "2.0",
            6 => "2.1",
            7 => "2.2",
            8 => "2.2.3",
            9 => "2.3",
            10 => "2.4",
            11 => "2.7",
            12 => "2.8",
            13 => "2.9",
            14 => "2.10",
            15 => "2.11",
            16 => "2.12",
            17 => "2.14",
            18 => "2.15",
            19 => "2.16",
            20 => "2.17",
            21 => "2.19",
            22 => "2.25",
            _ => "2.30",
        }
    }

    /// v3: fragment metadata has a footer and R-tree, tile offsets in their own
    /// generic tiles (before: the legacy single-tile layout).
    pub const fn has_fragment_metadata_footer(self) -> bool {
        self.0 >= 3
    }

    /// v5: dimensions in separate data files (before: `__coords.tdb`).
    pub const fn has_split_coordinates(self) -> bool {
        self.0 >= 5
    }

    /// v5: per-dimension datatypes, var-sized dimensions, `allows_dups`.
    pub const fn has_heterogeneous_dimensions(self) -> bool {
        self.0 >= 5
    }

    /// v5: fragments are committed by an `.ok`/`.wrt` file (before: by the
    /// presence of their fragment metadata).
    pub const fn has_commit_files(self) -> bool {
        self.0 >= 5
    }

    /// v5: fragment names end in `_v` with the format version.
    pub const fn fragment_name_has_version(self) -> bool {
        self.0 >= 5
    }

    /// v6: attributes carry a fill value.
    pub const fn has_fill_values(self) -> bool {
        self.0 >= 6
    }

    /// v7: nullable attributes and validity files.
    pub const fn has_validity(self) -> bool {
        self.0 >= 7
    }

    /// v8 only: data files named after attributes with some characters
    /// percent-encoded.
    pub const fn data_files_percent_encoded(self) -> bool {
        self.0 == 8
    }

    /// v9: data files named by index (`a0.tdb`, `d1_var.tdb`), not by name.
    pub const fn data_files_named_by_index(self) -> bool {
        self.0 >= 9
    }

    /// v9: consolidated fragment metadata and vacuum URIs are relative.
    pub const fn has_relative_fragment_uris(self) -> bool {
        self.0 >= 9
    }

    /// v10: schemas live in `__schema/` with timestamped names (schema
    /// evolution); the fragment footer names its schema and always stores its
    /// length.
    pub const fn has_schema_evolution(self) -> bool {
        self.0 >= 10
    }

    /// v11: tile min/max/sum/null-count metadata; cells never split across
    /// chunks.
    pub const fn has_tile_metadata(self) -> bool {
        self.0 >= 11
    }

    /// v11: the filter pipeline keeps whole cells in each chunk.
    pub const fn chunks_keep_whole_cells(self) -> bool {
        self.0 >= 11
    }

    /// v12: `__fragments/`, `__commits/` (`.wrt`) and `__fragment_meta/`.
    pub const fn has_fragment_subdirectories(self) -> bool {
        self.0 >= 12
    }

    /// v12: ASCII strings with RLE store offsets inside the data tile.
    pub const fn rle_ascii_offsets_in_data(self) -> bool {
        self.0 >= 12
    }

    /// v13: ASCII strings with dictionary encoding store offsets inside the
    /// data tile.
    pub const fn dictionary_ascii_offsets_in_data(self) -> bool {
        self.0 >= 13
    }

    /// v14: consolidated fragments may carry per-cell timestamps (`t.tdb`).
    pub const fn has_consolidated_timestamps(self) -> bool {
        self.0 >= 14
    }

    /// v15: consolidated fragments may carry delete metadata (`dt.tdb`, `dci.tdb`).
    pub const fn has_delete_metadata(self) -> bool {
        self.0 >= 15
    }

    /// v16: delete and update commit files; processed conditions in fragments.
    pub const fn has_delete_commits(self) -> bool {
        self.0 >= 16
    }

    /// v17: attributes carry a data order; UTF-8 strings with RLE or
    /// dictionary store offsets inside the data tile.
    pub const fn has_attribute_order(self) -> bool {
        self.0 >= 17
    }

    /// v17: UTF-8 strings with RLE or dictionary store offsets inside the
    /// data tile.
    pub const fn utf8_offsets_in_data(self) -> bool {
        self.0 >= 17
    }

    /// v20: bit-width reduction and positive delta encode datetimes and
    /// times (as INT64) instead of passing them through.
    pub const fn windowed_filters_take_datetimes(self) -> bool {
        self.0 >= 20
    }

    /// v18: dimension labels.
    pub const fn has_dimension_labels(self) -> bool {
        self.0 >= 18
    }

    /// v19: the delta filter stores a reinterpret datatype; vacuum files hold
    /// relative paths.
    pub const fn delta_has_reinterpret_datatype(self) -> bool {
        self.0 >= 19
    }

    /// v20: enumerations; double delta stores a reinterpret datatype.
    pub const fn has_enumerations(self) -> bool {
        self.0 >= 20
    }

    /// v20: the double-delta filter stores a reinterpret datatype.
    pub const fn double_delta_has_reinterpret_datatype(self) -> bool {
        self.0 >= 20
    }

    /// v21: tile metadata of nullable fixed-size strings on dense arrays is
    /// trustworthy (earlier versions computed it wrongly).
    pub const fn nullable_fixed_string_tile_metadata_reliable(self) -> bool {
        self.0 >= 21
    }

    /// v22: schemas carry a current domain.
    pub const fn has_current_domain(self) -> bool {
        self.0 >= 22
    }

    /// v23: fragment metadata footers may have optional sections.
    pub const fn has_footer_optional_sections(self) -> bool {
        self.0 >= 23
    }
}

impl std::fmt::Display for FormatVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl TryFrom<u32> for FormatVersion {
    type Error = FormatError;
    fn try_from(v: u32) -> Result<Self> {
        Self::new(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(n: u32) -> FormatVersion {
        FormatVersion::new(n).unwrap()
    }

    #[test]
    fn range_is_checked() {
        assert!(FormatVersion::new(0).is_err());
        assert!(FormatVersion::new(24).is_err());
        assert_eq!(v(23), FormatVersion::MAX);
    }

    #[test]
    fn history_boundaries() {
        assert!(!v(4).has_split_coordinates() && v(5).has_split_coordinates());
        assert!(!v(6).has_validity() && v(7).has_validity());
        assert!(v(8).data_files_percent_encoded() && !v(9).data_files_percent_encoded());
        assert!(!v(8).data_files_named_by_index() && v(9).data_files_named_by_index());
        assert!(!v(11).has_fragment_subdirectories() && v(12).has_fragment_subdirectories());
        assert!(!v(18).delta_has_reinterpret_datatype() && v(19).delta_has_reinterpret_datatype());
        assert!(
            !v(19).double_delta_has_reinterpret_datatype()
                && v(20).double_delta_has_reinterpret_datatype()
        );
        assert!(!v(21).has_current_domain() && v(22).has_current_domain());
        assert_eq!(v(22).introduced_in(), "2.25");
    }
}
