//! Everything a TileDB array directory holds apart from cell data: which
//! fragments a read at a timestamp sees, fragment metadata, commits, array
//! metadata and groups.
//!
//! Parsers here do no I/O: they take bytes and say which byte ranges they
//! need next. Loading from a `tdb_storage` backend is a thin layer on top.

mod array_metadata;
mod error;
mod group;
mod schemas;

pub use array_metadata::{ArrayMetadata, MetadataEntry, MetadataFile, MetadataValue};
pub use error::{FragmentError, Result};
pub use group::{GroupDetails, GroupMember, GroupMemberEntry, GroupMembers, GROUP_DETAILS_VERSION};
pub use schemas::{load_enumeration, load_referenced_enumerations, load_schemas};
