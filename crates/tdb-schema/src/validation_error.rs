//! Why a schema breaks one of TileDB's rules, with what to change. Each
//! variant names the TileDB check it mirrors (TileDB 2.30 sources).

use thiserror::Error;

/// A schema that TileDB would refuse to create or open.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ValidationError {
    /// `ArraySchema::check_without_config`: a domain needs dimensions.
    #[error("the domain has no dimensions; add at least one dimension")]
    NoDimensions,
    /// `check_attribute_dimension_label_names`.
    #[error("name {name:?} is used twice; dimensions, attributes and labels need unique names")]
    DuplicateName {
        /// The repeated name.
        name: String,
    },
    /// `ArraySchema::add_attribute`: `__` is TileDB's prefix for internal fields.
    #[error("attribute {name:?}: names starting with \"__\" are reserved; rename it")]
    ReservedName {
        /// The attribute.
        name: String,
    },
    /// `Dimension::ensure_datatype_is_supported`.
    #[error(
        "dimension {dim}: {datatype} cannot be a dimension type; use an integer, float, \
             datetime, time or STRING_ASCII"
    )]
    DimensionDatatype {
        /// The dimension.
        dim: String,
        /// Its datatype.
        datatype: &'static str,
    },
    /// `Dimension::set_cell_val_num`.
    #[error("dimension {dim}: cell_val_num {cell_val_num} is not supported; {expected}")]
    DimensionCellValNum {
        /// The dimension.
        dim: String,
        /// What it has.
        cell_val_num: u32,
        /// What it needs.
        expected: &'static str,
    },
    /// `Dimension::check_tile_extent`: a fixed-size dimension needs a domain.
    #[error("dimension {dim}: no domain; set its lower and upper bounds")]
    MissingDomain {
        /// The dimension.
        dim: String,
    },
    /// `Dimension::set_domain`/`set_tile_extent`: string dimensions have neither.
    #[error("dimension {dim}: string dimensions take no domain or tile extent; remove them")]
    StringDimensionDomain {
        /// The dimension.
        dim: String,
    },
    /// `Dimension::check_domain`.
    #[error("dimension {dim}: lower bound {lo} is above upper bound {hi}; swap them")]
    DomainBounds {
        /// The dimension.
        dim: String,
        /// Lower bound.
        lo: String,
        /// Upper bound.
        hi: String,
    },
    /// `Dimension::check_domain`: NaN and infinities.
    #[error("dimension {dim}: domain [{lo}, {hi}] is not finite; use finite bounds")]
    DomainNotFinite {
        /// The dimension.
        dim: String,
        /// Lower bound.
        lo: String,
        /// Upper bound.
        hi: String,
    },
    /// `Dimension::check_domain`: the range's cell count must fit a `u64`.
    #[error("dimension {dim}: domain spans every {datatype} value; shrink it by at least one")]
    DomainFullRange {
        /// The dimension.
        dim: String,
        /// Its datatype.
        datatype: &'static str,
    },
    /// `Dimension::check_tile_extent`.
    #[error("dimension {dim}: tile extent {extent} must be greater than 0")]
    TileExtentNotPositive {
        /// The dimension.
        dim: String,
        /// The extent.
        extent: String,
    },
    /// `Dimension::check_tile_extent`.
    #[error(
        "dimension {dim}: tile extent {extent} exceeds the domain range {lo}..={hi}; \
             use an extent of at most {range}"
    )]
    TileExtentTooLarge {
        /// The dimension.
        dim: String,
        /// The extent.
        extent: String,
        /// Lower bound.
        lo: String,
        /// Upper bound.
        hi: String,
        /// The range's size.
        range: String,
    },
    /// `Dimension::check_tile_extent_upper_floor`.
    #[error(
        "dimension {dim}: the domain expanded to whole tiles of {extent} overflows \
             {datatype}; lower the upper bound {hi} by one tile extent"
    )]
    TileExtentOverflow {
        /// The dimension.
        dim: String,
        /// The extent.
        extent: String,
        /// Upper bound.
        hi: String,
        /// Its datatype.
        datatype: &'static str,
    },
    /// Builder: a typed value whose Rust type does not match the datatype.
    #[error("{field}: a {given} value cannot be stored as {datatype}; use the matching Rust type")]
    ValueType {
        /// Which value.
        field: String,
        /// The field's datatype.
        datatype: &'static str,
        /// The value's datatype.
        given: &'static str,
    },
    /// `ArraySchema::set_domain`.
    #[error(
        "dimension {dim}: dense arrays need integer, datetime or time dimensions, not \
             {datatype}; make the array sparse or change the type"
    )]
    DenseDimensionType {
        /// The dimension.
        dim: String,
        /// Its datatype.
        datatype: &'static str,
    },
    /// `ArraySchema::set_domain`.
    #[error(
        "dense arrays need all dimensions of one datatype; dimension {dim} is {datatype} \
             but the first is {first}"
    )]
    DenseMixedTypes {
        /// The dimension that differs.
        dim: String,
        /// Its datatype.
        datatype: &'static str,
        /// The first dimension's.
        first: &'static str,
    },
    /// `ArraySchema::check_without_config`.
    #[error("dense arrays need at least one attribute; add one")]
    DenseWithoutAttributes,
    /// `ArraySchema::set_allows_dups`.
    #[error("dense arrays cannot allow duplicates; make the array sparse or disallow them")]
    DenseAllowsDuplicates,
    /// `ArraySchema::set_cell_order`.
    #[error("Hilbert cell order is only for sparse arrays; use row-major or col-major")]
    HilbertOnDense,
    /// `ArraySchema::check_without_config` (`Hilbert::HC_MAX_DIM`).
    #[error("Hilbert order supports at most 16 dimensions, not {dims}")]
    HilbertTooManyDimensions {
        /// How many the domain has.
        dims: usize,
    },
    /// `ArraySchema::set_cell_order`.
    #[error("{order} is not a cell order; use row-major, col-major or (sparse) hilbert")]
    CellOrder {
        /// The order given.
        order: &'static str,
    },
    /// `ArraySchema::set_tile_order`.
    #[error("{order} is not a tile order; use row-major or col-major")]
    TileOrder {
        /// The order given.
        order: &'static str,
    },
    /// `ArraySchema::set_capacity`.
    #[error("sparse arrays need a capacity above 0")]
    ZeroCapacity,
    /// `ArraySchema::check_double_delta_compressor`.
    #[error(
        "dimension {dim}: float dimensions cannot inherit coordinate filters with \
             DOUBLE_DELTA; give the dimension its own filters or drop DOUBLE_DELTA"
    )]
    CoordsDoubleDeltaOnFloat {
        /// The dimension.
        dim: String,
    },
    /// `FilterPipeline::check_filter_types`, `ArraySchema::check_string_compressor`.
    #[error("{field}: {filter} must be the first filter on var-length strings; move it first")]
    StringFilterNotFirst {
        /// Whose pipeline.
        field: String,
        /// RLE or DICTIONARY.
        filter: &'static str,
    },
    /// `FilterPipeline::check_filter_types` (each filter's `accepts_input_datatype`).
    #[error("{field}: filter {index} ({filter}) does not accept {datatype} input; {hint}")]
    FilterDatatype {
        /// Whose pipeline.
        field: String,
        /// The filter's position.
        index: usize,
        /// Its type.
        filter: &'static str,
        /// What it would receive.
        datatype: &'static str,
        /// What to change.
        hint: &'static str,
    },
    /// `CurrentDomain::check_schema_sanity`: one range per dimension, each
    /// a non-empty range inside its dimension's domain.
    #[error("current domain: {reason}")]
    CurrentDomain {
        /// Which range is wrong, and how.
        reason: String,
    },
    /// `ArraySchema::check_webp_filter`.
    #[error("WebP: {reason}")]
    Webp {
        /// Which WebP rule is broken, and how to fix it.
        reason: String,
    },
    /// `ArraySchema::add_dimension_label` and `DimensionLabel`'s
    /// constructors.
    #[error("dimension label {label}: {reason}")]
    DimensionLabel {
        /// The label.
        label: String,
        /// The rule broken, and what to change.
        reason: String,
    },
    /// `ArraySchema::check_without_config`, `Attribute::set_nullable`,
    /// `Attribute::validate_cell_val_num`.
    #[error("attribute {attr}: ordered attributes {reason}")]
    OrderedAttribute {
        /// The attribute.
        attr: String,
        /// The rule broken.
        reason: &'static str,
    },
    /// `Attribute::validate_cell_val_num`.
    #[error("attribute {attr}: cell_val_num {cell_val_num} is not allowed; {expected}")]
    AttributeCellValNum {
        /// The attribute.
        attr: String,
        /// What it has.
        cell_val_num: u32,
        /// What it needs.
        expected: &'static str,
    },
    /// `Attribute::set_fill_value`.
    #[error("attribute {attr}: fill value of {got} bytes; {expected}")]
    FillSize {
        /// The attribute.
        attr: String,
        /// Its size.
        got: usize,
        /// What it needs.
        expected: String,
    },
    /// `ArraySchema::add_attribute`.
    #[error(
        "attribute {attr}: refers to enumeration {enumeration:?}, which the schema lacks; \
             add the enumeration"
    )]
    UnknownEnumeration {
        /// The attribute.
        attr: String,
        /// The missing enumeration.
        enumeration: String,
    },
    /// `ArraySchema::add_attribute`.
    #[error(
        "attribute {attr}: attributes with an enumeration need an integer type, not \
             {datatype}"
    )]
    EnumerationType {
        /// The attribute.
        attr: String,
        /// Its datatype.
        datatype: &'static str,
    },
    /// `ArraySchema::add_attribute`.
    #[error(
        "attribute {attr}: attributes with an enumeration need cell_val_num 1, not \
             {cell_val_num}"
    )]
    EnumerationCellValNum {
        /// The attribute.
        attr: String,
        /// What it has.
        cell_val_num: u32,
    },
    /// `ArraySchema::add_attribute`.
    #[error(
        "attribute {attr}: {datatype} cannot index all {count} values of enumeration \
             {enumeration:?}; use a wider integer type"
    )]
    EnumerationTooLarge {
        /// The attribute.
        attr: String,
        /// Its datatype.
        datatype: &'static str,
        /// The enumeration.
        enumeration: String,
        /// Its value count.
        count: usize,
    },
    /// `Enumeration`'s own checks (`Enumeration::create`).
    #[error("enumeration {name:?}: {reason}; give increasing u64 offsets within its data")]
    EnumerationOffsets {
        /// The enumeration.
        name: String,
        /// What is wrong with its offsets.
        reason: String,
    },
    /// `ArraySchemaEvolution::evolve_schema`: a change that cannot apply.
    #[error("schema evolution: {reason}")]
    Evolution {
        /// Which change, and why.
        reason: String,
    },
    /// `ArraySchema::add_enumeration`.
    #[error("enumeration {name:?} is added twice; enumeration names must be unique")]
    DuplicateEnumeration {
        /// The name.
        name: String,
    },
}
