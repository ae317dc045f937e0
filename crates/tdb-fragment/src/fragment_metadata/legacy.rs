//! Fragment metadata of format v1–v2 (TileDB 1.4–1.5): the whole file is
//! one generic tile holding the version, the non-empty domain, the MBRs,
//! the bounding coordinates, every field's tile offsets, var offsets and
//! var sizes, the last tile's cell count and the file sizes. Fields are the
//! attributes plus `__coords` (offsets, file sizes) or the attributes alone
//! (var offsets, var sizes, var file sizes). All dimensions share one
//! datatype, so each range is `2 × size` bytes.

use super::footer::{Footer, SectionOffsets};
use super::{metadata_file, Reader};
use crate::tile_file::read_tile_file;
use crate::{FragmentError, Result};
use tdb_schema::{ArraySchema, NDRange, Range, LEGACY_SCHEMA_NAME};

/// A parsed v1–v2 fragment metadata file.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LegacyMetadata {
    /// The fields every era has (no section offsets: nothing is lazy).
    pub footer: Footer,
    /// Each sparse tile's MBR, for the R-tree.
    pub mbrs: Vec<NDRange>,
    /// Each pair of bounding coordinates (first and last cell of a tile),
    /// raw: `2 × dim_num` values.
    pub bounding_coords: Vec<Vec<u8>>,
    /// Tile offsets per field (attributes, then `__coords`).
    pub tile_offsets: Vec<Vec<u64>>,
    /// Var tile offsets per attribute.
    pub tile_var_offsets: Vec<Vec<u64>>,
    /// Var tile sizes per attribute.
    pub tile_var_sizes: Vec<Vec<u64>>,
}

impl LegacyMetadata {
    /// Parses the whole `__fragment_metadata.tdb` of a v1–v2 fragment.
    /// `dense` is whether the fragment has no `__coords.tdb` (TileDB's rule:
    /// the file does not say). `key` for encrypted arrays.
    pub fn parse(
        bytes: &[u8],
        schema: &ArraySchema,
        dense: bool,
        key: Option<&[u8; 32]>,
        fragment: &str,
    ) -> Result<LegacyMetadata> {
        let file = metadata_file(fragment);
        let content = read_tile_file(&file, "metadata tile", bytes, key)?;
        let mut r = Reader::new(&content, &file, "legacy metadata");
        let version = r.u32("version")?;
        if !(1..=2).contains(&version) {
            return Err(FragmentError::invalid(
                &file,
                "legacy metadata: version",
                format!("{version} is not 1 or 2"),
            ));
        }
        let dims = &schema.domain.dimensions;
        let range_bytes: u64 = dims
            .iter()
            .map(|d| d.datatype.cell_size(2))
            .fold(0, u64::saturating_add);
        // `b` holds `range_bytes`: every dimension's two bounds.
        let nd = |b: &[u8]| -> NDRange {
            let mut rest = b;
            dims.iter()
                .map(|d| {
                    let n = (d.datatype.cell_size(2) as usize).min(rest.len());
                    let (range, next) = rest.split_at(n);
                    rest = next;
                    Range::Fixed(range.to_vec())
                })
                .collect()
        };
        let domain_size = r.u64("non-empty domain size")?;
        let non_empty_domain = if domain_size == 0 {
            None
        } else {
            if domain_size != range_bytes {
                return Err(FragmentError::invalid(
                    &file,
                    "legacy metadata: non-empty domain size",
                    format!("{domain_size}, the schema's dimensions take {range_bytes}"),
                ));
            }
            Some(nd(r.bytes(domain_size, "non-empty domain")?))
        };
        let mbr_num = r.u64("MBR count")?;
        let mut mbrs = Vec::new();
        for _ in 0..mbr_num {
            mbrs.push(nd(r.bytes(range_bytes, "MBR")?));
        }
        let bc_num = r.u64("bounding coords count")?;
        let mut bounding_coords = Vec::new();
        for _ in 0..bc_num {
            bounding_coords.push(r.bytes(range_bytes, "bounding coords")?.to_vec());
        }
        let a = schema.attributes.len();
        let mut lists = |n: usize, field: &'static str| -> Result<Vec<Vec<u64>>> {
            (0..n).map(|_| r.counted_u64s(field)).collect()
        };
        let tile_offsets = lists(a.saturating_add(1), "tile offsets")?;
        let tile_var_offsets = lists(a, "tile var offsets")?;
        let tile_var_sizes = lists(a, "tile var sizes")?;
        let last_tile_cell_num = r.u64("last tile cell num")?;
        let file_sizes = r.u64s((a as u64).saturating_add(1), "file sizes")?;
        let file_var_sizes = r.u64s(a as u64, "file var sizes")?;
        if !r.input.is_empty() {
            return Err(FragmentError::invalid(
                &file,
                "legacy metadata",
                format!("{} bytes after the last field", r.input.len()),
            ));
        }
        let footer = Footer {
            version,
            array_schema_name: LEGACY_SCHEMA_NAME.to_owned(),
            dense,
            non_empty_domain,
            sparse_tile_num: mbr_num,
            last_tile_cell_num,
            has_timestamps: false,
            has_delete_meta: false,
            file_sizes,
            file_var_sizes,
            file_validity_sizes: Vec::new(),
            offsets: SectionOffsets::default(),
            optional_sections: Vec::new(),
            attribute_num: a,
            dim_num: dims.len(),
            size: 0,
            has_length: false,
            offset: None,
        };
        Ok(LegacyMetadata {
            footer,
            mbrs,
            bounding_coords,
            tile_offsets,
            tile_var_offsets,
            tile_var_sizes,
        })
    }
}
