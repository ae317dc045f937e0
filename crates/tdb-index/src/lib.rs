//! TileDB's spatial index over a fragment's tiles.
//!
//! [`RTree`] parses, writes and builds the R-tree TileDB keeps per fragment
//! (one leaf MBR per data tile) and answers which tiles a subarray touches.
//! [`RangeOps`] and [`DomainOps`] are the typed comparisons of range bounds
//! it is built on, chosen once per dimension from its datatype. [`dense`]
//! is the tile arithmetic of dense domains; [`order`] the orders of cells
//! (row-major, col-major, global, Hilbert) readers and writers sort by.
//!
//! Ranges and N-dimensional rectangles are `tdb_schema`'s [`Range`] and
//! [`NDRange`] (their serialized layout is the schema's, the domain decides
//! it).

mod compare;
pub mod dense;
mod error;
pub mod hilbert;
pub mod order;
mod rtree;

pub use compare::{DomainOps, RangeOps};
pub use error::{IndexError, Result};
pub use rtree::{RTree, TileOverlap, DEFAULT_FANOUT};
pub use tdb_schema::{NDRange, Range};
