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

// Bytes from files (MBRs, non-empty domains) reach the R-tree and order
// code here: no index, slice or arithmetic that could panic or wrap on
// them (tests index freely). `dense` is not rewritten yet and says so.
#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::arithmetic_side_effects)
)]

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
