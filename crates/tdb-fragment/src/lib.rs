//! Everything a TileDB array directory holds apart from cell data: which
//! fragments a read at a timestamp sees, fragment metadata, commits, array
//! metadata and groups.
//!
//! Parsers here do no I/O: they take bytes and say which byte ranges they
//! need next. Loading from a `tdb_storage` backend is a thin layer on top.

mod error;
pub mod fragment_metadata;

pub use error::{FragmentError, Result};
pub use fragment_metadata::{
    ConsolidatedFragmentMeta, Footer, FooterRead, FragmentMetadata, LegacyMetadata, Section,
    SectionData,
};
