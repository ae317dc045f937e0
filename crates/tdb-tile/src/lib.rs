//! TileDB tiles: how a tile is cut into chunks, how a filter pipeline runs
//! over them, and generic tiles with their self-describing headers.
//!
//! A data file is a run of filtered tiles, each self-delimiting
//! ([`filtered_chunks`]); [`TileFilters`] unfilters one given the field's
//! pipeline and datatype, and filters one as TileDB's writer would.

// Bytes from files reach the chunk framing and the decoders here: no
// index, slice or arithmetic that could panic or wrap on them (tests
// index freely).
#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::arithmetic_side_effects)
)]

mod chunking;
mod chunks;
mod coords;
mod error;
mod field;
mod generic;
mod tile;
mod walk;

pub use chunking::{
    bare_chunk_data, chunk_ranges, fixed_chunk_size, streamed_chunk_size, ChunkingError, VarCut,
    VarCuts, MAX_TILE_CHUNK_SIZE,
};
pub use chunks::{
    bare_framing_matches, chunk_header, filtered_chunk, filtered_chunks, unfiltered_size,
    write_filtered_chunk, write_filtered_chunks, ChunkHeader, FilteredChunk, CHUNK_HEADER_SIZE,
};
pub use coords::CoordsLayout;
pub use error::{Result, TileError};
pub use field::{FieldTile, TileShape};
pub use generic::{
    read_generic_tile, read_generic_tile_file, write_generic_tile, GENERIC_TILE_GZIP_LEVEL,
};
pub use tile::{TileData, TileFilters};
pub use walk::{ChunkWalk, WalkPoint, WalkedChunk};
