//! The fields a read touches, resolved once against the array's schema and
//! then against each fragment's own schema (a fragment written before an
//! attribute was added has no file for it: its cells read as fill).

use crate::column::{cell_size, VAR_NUM};
use crate::{QueryError, Result};
use tdb_format::{ArrayType, DataField, DataPart, Datatype, FormatVersion};
use tdb_fragment::fragment_metadata::Field;
use tdb_fragment::Footer;
use tdb_schema::{ArraySchema, PartFilters};
use tdb_storage::join;
use tdb_tile::CoordsLayout;

/// A dimension or attribute of the array schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Dim(usize),
    Attr(usize),
    /// A per-cell field of consolidated sparse fragments: timestamps, or
    /// delete metadata (see `Field::PER_CELL`).
    PerCell(Field),
}

/// One field the read needs (requested, or read for the condition or the
/// coordinates).
#[derive(Debug, Clone)]
pub(crate) struct FieldInfo {
    pub name: String,
    pub kind: Kind,
    pub datatype: Datatype,
    pub cell_val_num: u32,
    pub nullable: bool,
    /// One cell of fill (attributes).
    pub fill: Vec<u8>,
    pub fill_validity: u8,
}

impl FieldInfo {
    pub fn resolve(schema: &ArraySchema, name: &str) -> Result<Self> {
        if let Some((i, d)) =
            (schema.domain.dimensions.iter().enumerate()).find(|(_, d)| d.name == name)
        {
            return Ok(FieldInfo {
                name: name.to_owned(),
                kind: Kind::Dim(i),
                datatype: d.datatype,
                cell_val_num: d.cell_val_num,
                nullable: false,
                fill: Vec::new(),
                fill_validity: 0,
            });
        }
        if let Some((i, a)) = (schema.attributes.iter().enumerate()).find(|(_, a)| a.name == name) {
            return Ok(FieldInfo {
                name: name.to_owned(),
                kind: Kind::Attr(i),
                datatype: a.datatype,
                cell_val_num: a.cell_val_num,
                nullable: a.nullable,
                fill: a.fill.clone(),
                fill_validity: a.fill_validity,
            });
        }
        if let Some(f) = Field::per_cell(name).filter(|_| schema.array_type == ArrayType::Sparse) {
            return Ok(FieldInfo {
                name: name.to_owned(),
                kind: Kind::PerCell(f),
                datatype: Datatype::UInt64,
                cell_val_num: 1,
                nullable: false,
                fill: Vec::new(),
                fill_validity: 0,
            });
        }
        Err(QueryError::UnknownField {
            name: name.to_owned(),
            known: schema.field_names(),
        })
    }

    /// An empty result buffer of this field's shape.
    pub fn empty_buffer(&self) -> crate::FieldBuffer {
        crate::FieldBuffer::new(&self.name, self.datatype, self.cell_val_num, self.nullable)
    }

    pub fn is_var(&self) -> bool {
        self.cell_val_num == VAR_NUM
    }

    /// Bytes per fixed-size cell (0 for var-size fields).
    pub fn cell_size(&self) -> usize {
        cell_size(self.datatype, self.cell_val_num)
    }
}

/// Where one field's tiles live in one fragment.
#[derive(Debug, Clone)]
pub(crate) struct FragField {
    /// Index of the field among the footer's fields (section numbering).
    pub index: usize,
    pub data_field: DataField,
    /// Pre-v5 sparse fragments zip every dimension into `__coords`:
    /// which dimension this is, how many there are, and how an unfiltered
    /// tile holds them.
    pub zipped: Option<(usize, usize, CoordsLayout)>,
    pub parts: Vec<(DataPart, PartFilters)>,
    /// Each part's file, once the fragment's directory is known
    /// ([`FragField::in_dir`]): a read plans each tile's parts' files
    /// piece after piece, and joining and naming them was 1.5% of
    /// `sparse_bounded_tiles` read under 16 KiB.
    pub paths: Vec<String>,
}

impl FragField {
    /// This field's parts' files in fragment directory `dir`.
    pub fn in_dir(mut self, dir: &str) -> Self {
        self.paths = (self.parts.iter())
            .map(|(p, _)| join(dir, &self.data_field.file_name(*p)))
            .collect();
        self
    }
}

/// How `field` is stored in the fragment of `footer` (written with `schema`), or `None` when
/// the fragment has no data for it (dense fragments store no coordinates;
/// attributes added later).
pub(crate) fn frag_field(
    footer: &Footer,
    schema: &ArraySchema,
    field: &FieldInfo,
    encrypted: bool,
) -> Option<FragField> {
    let (ffield, zipped) = match field.kind {
        Kind::Dim(_) if footer.dense => return None,
        Kind::Dim(_) => {
            let d = schema
                .domain
                .dimensions
                .iter()
                .position(|d| d.name == field.name)?;
            if footer.version < 5 {
                (Field::Coords, Some((d, schema.domain.dimensions.len())))
            } else {
                (Field::Dimension(d), None)
            }
        }
        Kind::PerCell(f) => (f, None),
        Kind::Attr(_) => {
            let a = schema
                .attributes
                .iter()
                .position(|a| a.name == field.name)?;
            (Field::Attribute(a), None)
        }
    };
    special_field(footer, schema, ffield, encrypted).map(|mut f| {
        f.zipped = zipped.map(|(d, dims)| {
            let layout = match (FormatVersion::new(footer.version), f.parts.first()) {
                (Ok(v), Some((_, pf))) => CoordsLayout::of(v, &pf.pipeline),
                _ => CoordsLayout::Split,
            };
            (d, dims, layout)
        });
        f
    })
}

/// How one of the footer's fields (including timestamps and delete
/// metadata) is stored in its fragment.
pub(crate) fn special_field(
    footer: &Footer,
    schema: &ArraySchema,
    ffield: Field,
    encrypted: bool,
) -> Option<FragField> {
    let index = footer.field_index(ffield)?;
    let data_field = footer.data_field(ffield, schema)?;
    let mut parts = Vec::new();
    for part in [DataPart::Fixed, DataPart::Var, DataPart::Validity] {
        if part == DataPart::Validity && footer.version < 7 {
            continue;
        }
        if let Some(pf) = schema.part_filters(&data_field, part, encrypted) {
            parts.push((part, pf));
        }
    }
    Some(FragField {
        index,
        data_field,
        zipped: None,
        parts,
        paths: Vec::new(),
    })
}
