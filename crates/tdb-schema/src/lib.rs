//! TileDB array schemas as Rust types.
//!
//! [`ArraySchema::from_file`] reads a schema file of any format version
//! (1–23): the generic tile's bytes are unfiltered by `tdb-tile` and parsed
//! here, following TileDB's own `deserialize` functions version check by
//! version check. [`ArraySchema::write`] is the mirror for the latest layout
//! (v22/v23), which is the only one TileDB writes. Domains, tile extents and
//! fill values stay the raw little-endian bytes TileDB stores, so a parsed
//! schema writes back byte for byte. [`SchemaHistory`] holds every schema of
//! an array, picks the one in force at a timestamp as TileDB does, and
//! [`diff`] says what each evolution changed.

// Bytes from files reach the schema parsers here: no index, slice or
// arithmetic that could panic or wrap on them (tests index freely).
#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::arithmetic_side_effects)
)]

mod attribute;
mod attribute_builder;
mod builder;
mod change;
mod current_domain;
mod data_part;
mod dimension;
mod dimension_label;
mod display;
mod domain;
mod enumeration;
mod error;
mod evolution;
mod history;
mod nd_range;
mod read;
mod schema;
mod validate;
mod validate_filters;
mod validation_error;
mod value;

pub use attribute::Attribute;
pub use attribute_builder::AttributeBuilder;
pub use builder::{ArraySchemaBuilder, DimensionBuilder, DEFAULT_CAPACITY};
pub use change::{diff, SchemaChange};
pub use current_domain::{CurrentDomain, CURRENT_DOMAIN_VERSION};
pub use data_part::{PartFilters, SchemaField};
pub use dimension::{Dimension, VAR_NUM};
pub use dimension_label::DimensionLabel;
pub use domain::Domain;
pub use enumeration::{Enumeration, ENUMERATION_VERSION};
pub use error::{Result, SchemaError};
pub use evolution::{Evolved, SchemaEvolution};
pub use history::{Evolution, SchemaEntry, SchemaHistory, LEGACY_SCHEMA_NAME};
pub use nd_range::{NDRange, Range};
pub use schema::{ArraySchema, EnumerationRef};
pub use validation_error::ValidationError;
pub use value::Value;
