//! TileDB's spatial index over a fragment's tiles.
//!
//! Ranges and N-dimensional rectangles are `tdb_schema`'s [`Range`] and
//! [`NDRange`] (their serialized layout is the schema's, the domain decides
//! it).

pub use tdb_schema::{NDRange, Range};

pub mod dense;
