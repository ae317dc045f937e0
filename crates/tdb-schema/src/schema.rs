//! The array schema: parse of every format version, write of the latest.

use crate::attribute::Attribute;
use crate::current_domain::CurrentDomain;
use crate::dimension_label::DimensionLabel;
use crate::domain::{count_u32, Domain};
use crate::read::{fail, lift, name_u32, pipeline, put_name_u32, SResult};
use crate::{Result, SchemaError};
use tdb_filters::FilterPipeline;
use tdb_format::le;
use tdb_format::span;
use tdb_format::{ArrayType, Datatype, FormatVersion, Layout};

/// An enumeration as the schema names it: its name and the file under
/// `__schema/__enumerations/` holding its values (v20).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumerationRef {
    /// The enumeration's name, as attributes refer to it.
    pub name: String,
    /// Its file name.
    pub path: String,
}

/// An array schema of any format version.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ArraySchema {
    /// The format version the schema was written with.
    pub version: FormatVersion,
    /// Whether a sparse array may hold duplicate coordinates (v5; false before).
    pub allows_dups: bool,
    /// Dense or sparse.
    pub array_type: ArrayType,
    /// Order of the space tiles.
    pub tile_order: Layout,
    /// Order of cells within a tile.
    pub cell_order: Layout,
    /// Cells per data tile of sparse fragments.
    pub capacity: u64,
    /// Coordinate filters: the default of dimensions without their own.
    pub coords_filters: FilterPipeline,
    /// Filters of var-length offsets tiles.
    pub offsets_filters: FilterPipeline,
    /// Filters of validity tiles (v7; empty before).
    pub validity_filters: FilterPipeline,
    /// The domain.
    pub domain: Domain,
    /// The attributes, in order.
    pub attributes: Vec<Attribute>,
    /// Dimension labels (v18).
    pub dimension_labels: Vec<DimensionLabel>,
    /// Enumerations, in the file's order (v20).
    pub enumerations: Vec<EnumerationRef>,
    /// The current domain (v22; empty before).
    pub current_domain: CurrentDomain,
}

impl ArraySchema {
    /// Reads a schema file (`__schema/<name>`, or `__array_schema.tdb`
    /// before v10): one generic tile, encrypted when `key` is given.
    /// `file` names it in errors.
    pub fn from_file(file: &str, bytes: &[u8], key: Option<&[u8; 32]>) -> Result<Self> {
        let data = tdb_tile::read_generic_tile_file(file, bytes, key)
            .map_err(|e| SchemaError::tile(file, e))?;
        Self::parse(file, &data)
    }

    /// Parses a schema from its generic tile's unfiltered bytes, which it
    /// must use up exactly.
    pub fn parse(file: &str, bytes: &[u8]) -> Result<Self> {
        crate::read::finish(file, "schema", schema(bytes))
    }

    /// The format version [`ArraySchema::write`] stores: the schema's own
    /// from v22 (v23 schemas share the layout), else v22, since TileDB
    /// writes every schema in the latest layout whatever it was read from.
    pub fn written_version(&self) -> FormatVersion {
        self.version.max(FormatVersion::WRITTEN)
    }

    /// Serializes the schema as TileDB's `serialize_array_schema` does, in
    /// the layout of [`ArraySchema::written_version`]: the exact mirror of
    /// [`ArraySchema::parse`] for v22 and v23 schemas.
    pub fn write(&self) -> Result<Vec<u8>> {
        let version = self.written_version();
        let mut out = Vec::new();
        le::put_u32(&mut out, version.get());
        le::put_bool(&mut out, self.allows_dups);
        le::put_u8(&mut out, self.array_type.code());
        le::put_u8(&mut out, self.tile_order.code());
        le::put_u8(&mut out, self.cell_order.code());
        le::put_u64(&mut out, self.capacity);
        self.coords_filters.write(version, &mut out);
        self.offsets_filters.write(version, &mut out);
        self.validity_filters.write(version, &mut out);
        self.domain.write(version, &mut out)?;
        le::put_u32(
            &mut out,
            count_u32("attribute count", self.attributes.len())?,
        );
        for a in &self.attributes {
            a.write(version, &mut out)?;
        }
        let labels = count_u32("dimension label count", self.dimension_labels.len())?;
        le::put_u32(&mut out, labels);
        for l in &self.dimension_labels {
            l.write(&mut out)?;
        }
        le::put_u32(
            &mut out,
            count_u32("enumeration count", self.enumerations.len())?,
        );
        for e in &self.enumerations {
            put_name_u32(&mut out, "enumeration name", &e.name)?;
            put_name_u32(&mut out, "enumeration path", &e.path)?;
        }
        self.current_domain.write(&mut out)?;
        Ok(out)
    }

    /// [`ArraySchema::write`] wrapped in a generic tile, as a schema file.
    pub fn write_file(&self, file: &str, key: Option<&[u8; 32]>) -> Result<Vec<u8>> {
        let data = self.write().map_err(|e| e.in_file(file))?;
        let mut out = Vec::new();
        tdb_tile::write_generic_tile(file, self.written_version(), &data, key, &mut out)
            .map_err(|e| SchemaError::tile(file, e))?;
        Ok(out)
    }

    /// The attribute named `name`.
    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name == name)
    }

    /// The dimension named `name`.
    pub fn dimension(&self, name: &str) -> Option<&crate::Dimension> {
        self.domain.dimensions.iter().find(|d| d.name == name)
    }

    /// The datatype and values per cell of the dimension or attribute
    /// named `name`.
    pub fn field_type(&self, name: &str) -> Option<(Datatype, u32)> {
        self.dimension(name)
            .map(|d| (d.datatype, d.cell_val_num))
            .or_else(|| self.attribute(name).map(|a| (a.datatype, a.cell_val_num)))
    }

    /// Every field's name, dimensions first, comma separated: what an
    /// error about an unknown field lists.
    pub fn field_names(&self) -> String {
        self.fields().collect::<Vec<_>>().join(", ")
    }

    /// Every dimension's name, then every attribute's, in schema order:
    /// what a read of all of an array's cells asks for.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        let dims = self.domain.dimensions.iter().map(|d| d.name.as_str());
        dims.chain(self.attributes.iter().map(|a| a.name.as_str()))
    }

    /// The tile order TileDB reports: none under Hilbert cell order, where
    /// tiles have no order of their own.
    pub fn reported_tile_order(&self) -> Option<Layout> {
        (self.cell_order != Layout::Hilbert).then_some(self.tile_order)
    }

    /// The enumeration named `name`.
    pub fn enumeration(&self, name: &str) -> Option<&EnumerationRef> {
        self.enumerations.iter().find(|e| e.name == name)
    }

    /// The enumerations attributes refer to, in the order attributes first
    /// refer to them (each once).
    pub fn referenced_enumerations(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for name in self
            .attributes
            .iter()
            .filter_map(|a| a.enumeration.as_deref())
        {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }
}

/// A `u8` enum code, named in errors.
fn code<'a, T: std::fmt::Debug>(
    input: &'a [u8],
    field: &'static str,
    from: impl Fn(u8) -> tdb_format::Result<T>,
) -> SResult<'a, T> {
    lift(le::code(field, from)(input), || field.into())
}

/// The parser of a whole schema, dispatching on its leading version.
fn schema(input: &[u8]) -> SResult<'_, ArraySchema> {
    let (input, v) = lift(le::u32("version")(input), || "version".into())?;
    let version =
        FormatVersion::new(v).map_err(|e| crate::read::format_error("version".into(), e))?;
    let (mut input, allows_dups) = if version.has_heterogeneous_dimensions() {
        lift(le::bool("allows dups")(input), || "allows dups".into())?
    } else {
        (input, false)
    };
    let array_type;
    (input, array_type) = code(input, "array type", ArrayType::from_code)?;
    let (input, tile_order) = code(input, "tile order", Layout::from_code)?;
    let (input, cell_order) = code(input, "cell order", Layout::from_code)?;
    if matches!(
        tile_order,
        Layout::Hilbert | Layout::GlobalOrder | Layout::Unordered
    ) {
        return fail(SchemaError::invalid(
            "tile order",
            format!("{} is not a tile order", tile_order.name()),
        ));
    }
    if matches!(cell_order, Layout::GlobalOrder | Layout::Unordered) {
        return fail(SchemaError::invalid(
            "cell order",
            format!("{} is not a cell order", cell_order.name()),
        ));
    }
    let (input, capacity) = lift(le::u64("capacity")(input), || "capacity".into())?;
    let (input, coords_filters) = pipeline(input, version, || "coords filters".into())?;
    let (mut input, offsets_filters) = pipeline(input, version, || "offsets filters".into())?;
    let mut validity_filters = FilterPipeline::default();
    if version.has_validity() {
        (input, validity_filters) = pipeline(input, version, || "validity filters".into())?;
    }
    let domain;
    (input, domain) = {
        let _domain = span::scope("domain");
        Domain::parse(input, version)?
    };
    let count;
    (input, count) = lift(le::u32("attribute count")(input), || {
        "attribute count".into()
    })?;
    let mut attributes = Vec::new();
    for index in 0..count as usize {
        let _attribute = span::scope(format_args!("attributes[{index}]"));
        let a;
        (input, a) = Attribute::parse(input, version, index)?;
        attributes.push(a);
    }
    let mut dimension_labels = Vec::new();
    if version.has_dimension_labels() {
        let count;
        (input, count) = lift(le::u32("label count")(input), || {
            "dimension label count".into()
        })?;
        for index in 0..count as usize {
            let _label = span::scope(format_args!("labels[{index}]"));
            let l;
            (input, l) = DimensionLabel::parse(input, index)?;
            dimension_labels.push(l);
        }
    }
    let mut enumerations = Vec::new();
    if version.has_enumerations() {
        let count;
        (input, count) = lift(le::u32("enumeration count")(input), || {
            "enumeration count".into()
        })?;
        for index in 0..count as usize {
            let _enumeration = span::scope(format_args!("enumerations[{index}]"));
            let (name, path);
            (input, name) = name_u32(input, || format!("enumeration {index} name"))?;
            (input, path) = name_u32(input, || format!("enumeration {index} ({name}) path"))?;
            enumerations.push(EnumerationRef { name, path });
        }
    }
    let mut current_domain = CurrentDomain::default();
    if version.has_current_domain() {
        let _current = span::scope("current domain");
        (input, current_domain) = CurrentDomain::parse(input, &domain)?;
    }
    Ok((
        input,
        ArraySchema {
            version,
            allows_dups,
            array_type,
            tile_order,
            cell_order,
            capacity,
            coords_filters,
            offsets_filters,
            validity_filters,
            domain,
            attributes,
            dimension_labels,
            enumerations,
            current_domain,
        },
    ))
}
