//! How the tiles of each data file of a fragment are filtered: the one
//! place that decides pipeline, datatype and cell size per file part.

use crate::ArraySchema;
use tdb_filters::{Filter, FilterPipeline};
use tdb_format::{DataField, DataPart, Datatype};

/// How one data file's tiles are filtered, as TileDB reads them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PartFilters {
    /// The pipeline, with `InternalAes256Gcm` appended for encrypted arrays
    /// (TileDB adds it at read and write time; schemas never hold it).
    pub pipeline: FilterPipeline,
    /// The datatype the pipeline's first filter sees.
    pub datatype: Datatype,
    /// Bytes per cell of this part (8 for offsets, 1 for validity, the
    /// datatype's size for var data).
    pub cell_size: u64,
    /// The field's own datatype.
    pub field_datatype: Datatype,
    /// Bytes per cell of the field's values; `None` for var-size fields.
    pub field_cell_size: Option<u64>,
    /// Whether the field is nullable.
    pub nullable: bool,
}

impl PartFilters {
    /// How tiles of this part are filtered and unfiltered at format
    /// `version`, with the array's key (or none).
    pub fn tile_filters<'a>(
        &'a self,
        version: tdb_format::FormatVersion,
        key: Option<&'a [u8; 32]>,
    ) -> tdb_tile::TileFilters<'a> {
        tdb_tile::TileFilters::new(&self.pipeline, self.datatype, self.cell_size, version)
            .with_key(key)
    }
}

/// An attribute or a dimension of a schema, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaField {
    /// Attribute `i`.
    Attribute(usize),
    /// Dimension `i`.
    Dimension(usize),
}

impl ArraySchema {
    /// The attribute or dimension a data file's field names: by index from
    /// v9, by (percent-decoded) name in v5–v8. `None` for the fields no
    /// schema declares (coordinates, timestamps, delete metadata) and for
    /// names the schema does not have.
    pub fn field_of_file(&self, field: &DataField) -> Option<SchemaField> {
        match field {
            DataField::Attribute(i) => Some(SchemaField::Attribute(*i as usize)),
            DataField::Dimension(i) => Some(SchemaField::Dimension(*i as usize)),
            DataField::Named(_) => {
                let name = field.decoded_name()?;
                let attr = self.attributes.iter().position(|a| a.name == name);
                let dims = &self.domain.dimensions;
                attr.map(SchemaField::Attribute).or_else(|| {
                    dims.iter()
                        .position(|d| d.name == name)
                        .map(SchemaField::Dimension)
                })
            }
            _ => None,
        }
    }

    /// The field and part of a data file [`tdb_format::classify`] read as
    /// `(field, part)` from its name alone, under this schema: a v5–v8
    /// name ending in `_var` or `_validity` is the fixed (or offsets) file
    /// of a field whose own name ends so (`tag_var.tdb`: attribute
    /// `tag_var`'s offsets, not `tag`'s var data) when the shorter name
    /// has no such part here (no field `tag`, or a fixed-size one).
    pub fn data_file(&self, field: DataField, part: DataPart) -> (DataField, DataPart) {
        let suffix = match part {
            DataPart::Fixed => return (field, part),
            DataPart::Var => tdb_format::names::VAR_SUFFIX,
            DataPart::Validity => tdb_format::names::VALIDITY_SUFFIX,
        };
        let DataField::Named(base) = &field else {
            return (field, part);
        };
        let whole = DataField::Named(format!("{base}{suffix}"));
        if self.part_filters(&field, part, false).is_none() && self.field_of_file(&whole).is_some()
        {
            (whole, DataPart::Fixed)
        } else {
            (field, part)
        }
    }

    /// How the tiles of `part` of `field`'s data file are filtered under
    /// this schema (the one the fragment was written with), `encrypted`
    /// when the array has a key. `None` when the schema has no such field,
    /// or no such part (validity of a non-nullable field, var data of a
    /// fixed-size one). Fields named in v5–v8 file names may be percent
    /// encoded (v8); they are decoded here.
    pub fn part_filters(
        &self,
        field: &DataField,
        part: DataPart,
        encrypted: bool,
    ) -> Option<PartFilters> {
        let dims = &self.domain.dimensions;
        let dim = |i: usize| {
            let d = dims.get(i)?;
            Some((
                d.datatype,
                (!d.is_var()).then(|| d.datatype.size()),
                false,
                d.effective_filters(self.version, &self.coords_filters),
            ))
        };
        let attr = |i: usize| {
            let a = self.attributes.get(i)?;
            Some((
                a.datatype,
                (!a.is_var()).then(|| a.datatype.cell_size(a.cell_val_num)),
                a.nullable,
                &a.filters,
            ))
        };
        let (datatype, cell_size, nullable, filters) = match field {
            DataField::Attribute(i) => attr(*i as usize)?,
            DataField::Dimension(i) => dim(*i as usize)?,
            DataField::Named(_) => match self.field_of_file(field)? {
                SchemaField::Dimension(i) => dim(i)?,
                SchemaField::Attribute(i) => attr(i)?,
            },
            DataField::LegacyCoords => {
                let t = dims.first()?.datatype;
                (
                    t,
                    Some(t.size().saturating_mul(dims.len() as u64)),
                    false,
                    &self.coords_filters,
                )
            }
            DataField::Timestamps
            | DataField::DeleteTimestamps
            | DataField::DeleteConditionIndex => {
                (Datatype::UInt64, Some(8), false, &self.coords_filters)
            }
        };
        let (pipeline, part_datatype, part_cell_size) = match part {
            DataPart::Validity if nullable => (&self.validity_filters, Datatype::UInt8, 1),
            DataPart::Validity => return None,
            DataPart::Fixed => match cell_size {
                Some(n) => (filters, datatype, n),
                None => (&self.offsets_filters, Datatype::UInt64, 8),
            },
            DataPart::Var if cell_size.is_none() => (filters, datatype, datatype.size()),
            DataPart::Var => return None,
        };
        let mut pipeline = pipeline.clone();
        if encrypted {
            pipeline.filters.push(Filter::InternalAes256Gcm);
        }
        Some(PartFilters {
            pipeline,
            datatype: part_datatype,
            cell_size: part_cell_size,
            field_datatype: datatype,
            field_cell_size: cell_size,
            nullable,
        })
    }
}
