//! Builders for schemas in code: typed bounds, extents and fill values,
//! filters as values, and TileDB's defaults for everything left out.
//! Problems surface once, from [`ArraySchemaBuilder::build`], which runs
//! [`ArraySchema::validate`]'s rules.

use crate::value::{compatible, decode, Num};
use crate::{
    ArraySchema, CurrentDomain, Dimension, DimensionLabel, Domain, Enumeration, EnumerationRef,
    Result, ValidationError, Value, VAR_NUM,
};
use std::ops::RangeInclusive;
use tdb_filters::{Filter, FilterPipeline};
use tdb_format::{ArrayType, DataOrder, Datatype, FormatVersion, Layout};

/// TileDB's `constants::capacity`.
pub const DEFAULT_CAPACITY: u64 = 10_000;

/// A value given as a Rust number: its own datatype, to check against the
/// field's, and its bytes.
#[derive(Debug, Clone)]
struct Typed {
    given: Datatype,
    bytes: Vec<u8>,
}

impl Typed {
    fn new<T: Value>(v: T) -> Self {
        Typed {
            given: T::DATATYPE,
            bytes: v.to_le(),
        }
    }

    fn check(
        &self,
        field: impl FnOnce() -> String,
        datatype: Datatype,
    ) -> Result<(), ValidationError> {
        if compatible(self.given, datatype) {
            Ok(())
        } else {
            Err(ValidationError::ValueType {
                field: field(),
                datatype: datatype.name(),
                given: self.given.name(),
            })
        }
    }
}

/// Builds a [`Dimension`]. Dimensions cannot be nullable in TileDB, so there
/// is no such setting.
#[derive(Debug, Clone)]
pub struct DimensionBuilder {
    name: String,
    datatype: Datatype,
    domain: Option<(Typed, Typed)>,
    tile_extent: Option<Typed>,
    filters: FilterPipeline,
}

impl Dimension {
    /// A builder for a dimension of `datatype`.
    pub fn builder(name: impl Into<String>, datatype: Datatype) -> DimensionBuilder {
        DimensionBuilder::new(name, datatype)
    }
}

impl DimensionBuilder {
    /// A dimension of `datatype`; set its domain with [`DimensionBuilder::domain`].
    pub fn new(name: impl Into<String>, datatype: Datatype) -> Self {
        DimensionBuilder {
            name: name.into(),
            datatype,
            domain: None,
            tile_extent: None,
            filters: FilterPipeline::new([]),
        }
    }

    /// A dimension whose datatype is `T`'s, over `range`.
    pub fn range<T: Value>(name: impl Into<String>, range: RangeInclusive<T>) -> Self {
        let (lo, hi) = range.into_inner();
        Self::new(name, T::DATATYPE).domain(lo, hi)
    }

    /// A var-length `STRING_ASCII` dimension, the only string dimension
    /// TileDB has; it takes no domain or tile extent.
    pub fn string(name: impl Into<String>) -> Self {
        Self::new(name, Datatype::StringAscii)
    }

    /// The inclusive bounds (`i64` for datetime and time dimensions).
    pub fn domain<T: Value>(mut self, lo: T, hi: T) -> Self {
        self.domain = Some((Typed::new(lo), Typed::new(hi)));
        self
    }

    /// The tile extent; without one, TileDB's default applies (the whole
    /// domain, except under Hilbert order, where the extent stays unset).
    pub fn tile_extent<T: Value>(mut self, extent: T) -> Self {
        self.tile_extent = Some(Typed::new(extent));
        self
    }

    /// The inclusive bounds as raw little-endian bytes of the dimension's
    /// datatype (for callers that hold values, not Rust numbers, such as a
    /// schema read from JSON); a wrong width fails validation.
    pub fn domain_bytes(mut self, lo: Vec<u8>, hi: Vec<u8>) -> Self {
        let raw = |bytes| Typed {
            given: self.datatype,
            bytes,
        };
        self.domain = Some((raw(lo), raw(hi)));
        self
    }

    /// The tile extent as raw little-endian bytes of the dimension's datatype.
    pub fn tile_extent_bytes(mut self, extent: Vec<u8>) -> Self {
        self.tile_extent = Some(Typed {
            given: self.datatype,
            bytes: extent,
        });
        self
    }

    /// The dimension's own filters; without any it inherits the schema's
    /// coordinate filters.
    pub fn filters(mut self, filters: impl IntoIterator<Item = Filter>) -> Self {
        self.filters = FilterPipeline::new(filters);
        self
    }

    /// The dimension's own pipeline, chunk size included.
    pub fn filter_pipeline(mut self, pipeline: FilterPipeline) -> Self {
        self.filters = pipeline;
        self
    }

    fn build(self, hilbert: bool) -> Result<Dimension, ValidationError> {
        let at = |what: &str| format!("dimension {} {what}", self.name);
        let mut domain = Vec::new();
        if let Some((lo, hi)) = &self.domain {
            lo.check(|| at("domain"), self.datatype)?;
            hi.check(|| at("domain"), self.datatype)?;
            domain = [lo.bytes.as_slice(), &hi.bytes].concat();
        }
        let mut tile_extent = None;
        if let Some(e) = &self.tile_extent {
            e.check(|| at("tile extent"), self.datatype)?;
            tile_extent = Some(e.bytes.clone());
        } else if !hilbert {
            tile_extent = whole_range(self.datatype, &domain);
        }
        let string = self.datatype == Datatype::StringAscii;
        Ok(Dimension {
            cell_val_num: if string { VAR_NUM } else { 1 },
            datatype: self.datatype,
            filters: self.filters,
            domain,
            tile_extent,
            name: self.name,
        })
    }
}

/// TileDB's default tile extent (`Dimension::set_null_tile_extent_to_range`):
/// the domain's range, `hi - lo + 1` for integers and `hi - lo` for floats;
/// `None` when there is no numeric domain or the range overflows (validation
/// then names the problem).
fn whole_range(dt: Datatype, domain: &[u8]) -> Option<Vec<u8>> {
    let (lo, hi) = domain.split_at(domain.len() / 2);
    match (decode(dt, lo)?, decode(dt, hi)?) {
        (Num::Int(l), Num::Int(h)) => {
            let e = h.checked_sub(l)?.checked_add(1)?;
            let (min, max) = crate::value::int_limits(dt);
            let bytes = e.to_le_bytes();
            (min..=max)
                .contains(&e)
                .then(|| bytes.get(..lo.len()).map(<[u8]>::to_vec))
                .flatten()
        }
        (Num::Float(l), Num::Float(h)) if dt == Datatype::Float32 => {
            Some(((h - l) as f32).to_le_bytes().to_vec())
        }
        (Num::Float(l), Num::Float(h)) => Some((h - l).to_le_bytes().to_vec()),
        _ => None,
    }
}

/// What every schema made here goes through last (built or evolved): WebP
/// extents set as TileDB sets them, then TileDB's rules with the
/// enumerations' values at hand.
pub(crate) fn finish(s: &mut ArraySchema, enumerations: &[Enumeration]) -> Result<()> {
    set_webp_extents(s);
    crate::validate::check(s, enumerations)?;
    Ok(())
}

/// WebP filters take their image tile's rows and columns from the first two
/// dimensions' tile extents, as TileDB sets them when it checks a schema
/// (`ArraySchema::check_webp_filter`); validation judges the result.
fn set_webp_extents(s: &mut ArraySchema) {
    let extent = |i: usize| {
        let d = s.domain.dimensions.get(i)?;
        match decode(d.datatype, d.tile_extent.as_deref()?)? {
            Num::Int(e) => u16::try_from(e).ok(),
            Num::Float(_) => None,
        }
    };
    let (Some(y), Some(x)) = (extent(0), extent(1)) else {
        return;
    };
    for a in &mut s.attributes {
        for f in &mut a.filters.filters {
            if let Filter::Webp {
                y_extent, x_extent, ..
            } = f
            {
                (*y_extent, *x_extent) = (y, x);
            }
        }
    }
}

/// Builds an [`ArraySchema`] with TileDB's defaults (`ArraySchema`'s
/// constructor and `constants.cc`): format version 22, row-major tile and
/// cell orders, capacity 10000, no duplicates, coordinate and offsets
/// filters ZSTD (level -1), validity filters RLE (level -1), an empty
/// current domain.
#[derive(Debug, Clone)]
pub struct ArraySchemaBuilder {
    schema: ArraySchema,
    dimensions: Vec<DimensionBuilder>,
    attributes: Vec<crate::AttributeBuilder>,
    enumerations: Vec<Enumeration>,
    /// Labels to add: (dimension name, label name, order, datatype).
    labels: Vec<(String, String, DataOrder, Datatype)>,
}

impl ArraySchema {
    /// A builder for a dense or sparse array's schema.
    pub fn builder(array_type: ArrayType) -> ArraySchemaBuilder {
        ArraySchemaBuilder {
            schema: ArraySchema {
                version: FormatVersion::WRITTEN,
                allows_dups: false,
                array_type,
                tile_order: Layout::RowMajor,
                cell_order: Layout::RowMajor,
                capacity: DEFAULT_CAPACITY,
                coords_filters: FilterPipeline::new([Filter::Zstd { level: -1 }]),
                offsets_filters: FilterPipeline::new([Filter::Zstd { level: -1 }]),
                validity_filters: FilterPipeline::new([Filter::Rle { level: -1 }]),
                domain: Domain {
                    dimensions: Vec::new(),
                },
                attributes: Vec::new(),
                dimension_labels: Vec::new(),
                enumerations: Vec::new(),
                current_domain: CurrentDomain::default(),
            },
            dimensions: Vec::new(),
            attributes: Vec::new(),
            enumerations: Vec::new(),
            labels: Vec::new(),
        }
    }
}

impl ArraySchemaBuilder {
    /// Appends a dimension.
    pub fn dimension(mut self, d: DimensionBuilder) -> Self {
        self.dimensions.push(d);
        self
    }

    /// Appends an attribute.
    pub fn attribute(mut self, a: crate::AttributeBuilder) -> Self {
        self.attributes.push(a);
        self
    }

    /// Adds an enumeration attributes may refer to. The schema records its
    /// name and path; writing its file is the caller's job.
    pub fn enumeration(mut self, e: Enumeration) -> Self {
        self.enumerations.push(e);
        self
    }

    /// Adds dimension label `name` to dimension `dim`: labels of
    /// `datatype` (a dimension datatype) in strictly increasing or
    /// decreasing `order`, kept in an array of their own inside the array
    /// (`__labels/l<N>`, created with it).
    pub fn dimension_label(
        mut self,
        dim: &str,
        name: impl Into<String>,
        order: DataOrder,
        datatype: Datatype,
    ) -> Self {
        self.labels
            .push((dim.to_owned(), name.into(), order, datatype));
        self
    }

    /// Order of cells within a tile.
    pub fn cell_order(mut self, order: Layout) -> Self {
        self.schema.cell_order = order;
        self
    }

    /// Order of the space tiles.
    pub fn tile_order(mut self, order: Layout) -> Self {
        self.schema.tile_order = order;
        self
    }

    /// Cells per data tile of sparse fragments.
    pub fn capacity(mut self, capacity: u64) -> Self {
        self.schema.capacity = capacity;
        self
    }

    /// Whether a sparse array may hold duplicate coordinates.
    pub fn allows_duplicates(mut self, allows: bool) -> Self {
        self.schema.allows_dups = allows;
        self
    }

    /// The coordinate filters, inherited by dimensions without their own.
    pub fn coords_filters(mut self, filters: impl IntoIterator<Item = Filter>) -> Self {
        self.schema.coords_filters = FilterPipeline::new(filters);
        self
    }

    /// The filters of var-length offsets.
    pub fn offsets_filters(mut self, filters: impl IntoIterator<Item = Filter>) -> Self {
        self.schema.offsets_filters = FilterPipeline::new(filters);
        self
    }

    /// The filters of validity tiles.
    pub fn validity_filters(mut self, filters: impl IntoIterator<Item = Filter>) -> Self {
        self.schema.validity_filters = FilterPipeline::new(filters);
        self
    }

    /// The coordinate pipeline, chunk size included.
    pub fn coords_filter_pipeline(mut self, pipeline: FilterPipeline) -> Self {
        self.schema.coords_filters = pipeline;
        self
    }

    /// The offsets pipeline, chunk size included.
    pub fn offsets_filter_pipeline(mut self, pipeline: FilterPipeline) -> Self {
        self.schema.offsets_filters = pipeline;
        self
    }

    /// The validity pipeline, chunk size included.
    pub fn validity_filter_pipeline(mut self, pipeline: FilterPipeline) -> Self {
        self.schema.validity_filters = pipeline;
        self
    }

    /// The current domain (v22): one range per dimension, each within the
    /// dimension's domain; schema evolution can grow it later.
    pub fn current_domain(mut self, ranges: Vec<crate::Range>) -> Self {
        self.schema.current_domain.ranges = Some(ranges);
        self
    }

    /// The schema, if it keeps every TileDB rule.
    pub fn build(self) -> Result<ArraySchema> {
        let mut s = self.schema;
        let hilbert = s.cell_order == Layout::Hilbert;
        for d in self.dimensions {
            s.domain.dimensions.push(d.build(hilbert)?);
        }
        for a in self.attributes {
            s.attributes.push(a.build()?);
        }
        for (dim, name, order, datatype) in self.labels {
            let d = s
                .domain
                .dimensions
                .iter()
                .position(|d| d.name == dim)
                .and_then(|d| u32::try_from(d).ok())
                .ok_or_else(|| ValidationError::DimensionLabel {
                    label: name.clone(),
                    reason: format!("there is no dimension {dim:?}"),
                })?;
            let index = s.dimension_labels.len();
            s.dimension_labels
                .push(DimensionLabel::new(d, name, index, order, datatype));
        }
        s.enumerations = self
            .enumerations
            .iter()
            .map(|e| EnumerationRef {
                name: e.name.clone(),
                path: e.path.clone(),
            })
            .collect();
        finish(&mut s, &self.enumerations)?;
        Ok(s)
    }
}
