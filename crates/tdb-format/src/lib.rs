//! The vocabulary of the TileDB on-disk format.
//!
//! Everything here is plain data and pure functions over bytes and names:
//! datatypes and every other enum code, little-endian primitive parsers and
//! their mirror writers, the generic tile header, timestamped names, the
//! classification of the files an array or group directory holds, and the
//! format-version history. Higher layers (filters, schemas, fragments) build
//! on these so that no crate compares magic numbers of its own.

// Bytes from files reach every parser here: no index, slice or arithmetic
// that could panic or wrap on them (tests index freely).
#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::arithmetic_side_effects)
)]

mod code_enum;
mod datatype;
mod enums;
mod error;
mod generic_tile;
pub mod le;
pub mod names;
mod native;
mod object_file;
mod scalar;
pub mod span;
mod timestamped_name;
mod version;

pub use datatype::{Datatype, DatatypeClass};
pub use enums::{
    ArrayType, Compressor, CurrentDomainType, DataOrder, EncryptionType, FilterOption, FilterType,
    Layout, ObjectType, QueryConditionCombinationOp, QueryConditionOp,
};
pub use error::{FormatError, Result};
pub use generic_tile::{
    fragment_metadata_tiles, generic_tile, generic_tile_run, pipeline_is_well_framed,
    single_generic_tile, GenericTile, GenericTileHeader, LocatedTile, GENERIC_TILE_BASE_SIZE,
};
pub use native::{Native, NativeType};
pub use object_file::{classify, DataField, DataPart, ObjectFile};
pub use scalar::Scalar;
pub use timestamped_name::{NameEra, TimestampedName};
pub use version::FormatVersion;
