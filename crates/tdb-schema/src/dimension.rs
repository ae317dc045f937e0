//! One dimension: name, datatype, values per cell, its own filters, and the
//! domain and tile extent as the raw little-endian bytes TileDB stores, so a
//! parsed schema writes back byte for byte whatever the datatype.

use crate::read::{datatype, lift, name_u32, pipeline, put_name_u32, SResult};
use crate::{Result, SchemaError};
use tdb_filters::FilterPipeline;
use tdb_format::le;
use tdb_format::{Datatype, FormatVersion};

/// `cell_val_num` of var-length fields (`u32::MAX`).
pub const VAR_NUM: u32 = u32::MAX;

/// A dimension of the domain.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Dimension {
    /// The name.
    pub name: String,
    /// Datatype of the coordinates (before v5, the domain's one datatype).
    pub datatype: Datatype,
    /// Values per coordinate: 1, or [`VAR_NUM`] for string dimensions.
    pub cell_val_num: u32,
    /// The pipeline as stored. From v5 empty means "use the schema's
    /// coordinate filters"; see [`Dimension::effective_filters`]. Always
    /// empty before v5.
    pub filters: FilterPipeline,
    /// `lo` then `hi`, each one value of `datatype`; empty for var-length
    /// (string) dimensions, which have no domain.
    pub domain: Vec<u8>,
    /// One value of `datatype`, or `None` when the extent is null.
    pub tile_extent: Option<Vec<u8>>,
}

impl Dimension {
    /// A dimension from its parts, with no filters of its own (checking it
    /// is `ArraySchema::validate`'s job; the builder checks as it builds).
    pub fn new(
        name: impl Into<String>,
        datatype: Datatype,
        cell_val_num: u32,
        domain: Vec<u8>,
        tile_extent: Option<Vec<u8>>,
    ) -> Self {
        Dimension {
            name: name.into(),
            datatype,
            cell_val_num,
            filters: FilterPipeline::default(),
            domain,
            tile_extent,
        }
    }

    /// Whether coordinates are var-length (string dimensions).
    pub fn is_var(&self) -> bool {
        self.cell_val_num == VAR_NUM
    }

    /// The domain's bounds, each one value's little-endian bytes; `None`
    /// for var-length dimensions.
    pub fn bounds(&self) -> Option<(&[u8], &[u8])> {
        (!self.domain.is_empty()).then(|| self.domain.split_at(self.domain.len() / 2))
    }

    /// The filters TileDB applies to a dimension of a schema of `version`
    /// with coordinate filters `coords`: from v5 the dimension's own, or
    /// `coords` when it has none (TileDB substitutes them on load); before
    /// v5 none (the coordinate filters apply to the whole `__coords.tdb`).
    pub fn effective_filters<'a>(
        &'a self,
        version: FormatVersion,
        coords: &'a FilterPipeline,
    ) -> &'a FilterPipeline {
        if version.has_heterogeneous_dimensions() && self.filters.filters.is_empty() {
            coords
        } else {
            &self.filters
        }
    }

    /// Parses dimension `index` of format `version`. Before v5 the datatype
    /// comes from the domain (`domain_type`), the domain has no length prefix,
    /// and there is no cell_val_num or pipeline.
    pub(crate) fn parse(
        input: &[u8],
        version: FormatVersion,
        index: usize,
        domain_type: Option<Datatype>,
    ) -> SResult<'_, Self> {
        let at = |what: &str| format!("dimension {index} {what}");
        let (input, name) = name_u32(input, || at("name"))?;
        let field = |what: &str| format!("dimension {index} ({name}) {what}");
        let (input, dt, cell_val_num, filters, domain_len) = match domain_type {
            None => {
                let (input, dt) = datatype(input, || field("datatype"))?;
                let (input, cvn) = lift(le::u32("cell_val_num")(input), || field("cell_val_num"))?;
                let (input, filters) = pipeline(input, version, || field("filters"))?;
                let (input, len) = lift(le::u64("domain size")(input), || field("domain size"))?;
                (input, dt, cvn, filters, len)
            }
            Some(dt) => {
                let cvn = if dt.is_string() { VAR_NUM } else { 1 };
                (input, dt, cvn, FilterPipeline::default(), dt.cell_size(2))
            }
        };
        if domain_len != 0 && domain_len != dt.cell_size(2) {
            return crate::read::fail(SchemaError::invalid(
                field("domain"),
                format!("{domain_len} bytes are not two {} values", dt.name()),
            ));
        }
        let (input, domain) = lift(le::bytes("domain", domain_len)(input), || field("domain"))?;
        let (input, null_extent) = lift(le::u8("null tile extent")(input), || {
            field("null tile extent")
        })?;
        let (input, tile_extent) = if null_extent == 0 {
            let (input, e) = lift(le::bytes("tile extent", dt.size())(input), || {
                field("tile extent")
            })?;
            (input, Some(e.to_vec()))
        } else {
            (input, None)
        };
        Ok((
            input,
            Dimension {
                datatype: dt,
                cell_val_num,
                filters,
                domain: domain.to_vec(),
                tile_extent,
                name,
            },
        ))
    }

    /// Writes the v5+ layout (TileDB writes only the latest).
    pub(crate) fn write(&self, version: FormatVersion, out: &mut Vec<u8>) -> Result<()> {
        put_name_u32(out, "dimension name", &self.name)?;
        le::put_u8(out, self.datatype.code());
        le::put_u32(out, self.cell_val_num);
        self.filters.write(version, out);
        le::put_bytes_u64(out, &self.domain);
        match &self.tile_extent {
            Some(e) => {
                le::put_u8(out, 0);
                out.extend_from_slice(e);
            }
            None => le::put_u8(out, 1),
        }
        Ok(())
    }
}
