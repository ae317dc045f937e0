//! Everything a TileDB array directory holds apart from cell data: which
//! fragments a read at a timestamp sees, fragment metadata, commits, array
//! metadata and groups.
