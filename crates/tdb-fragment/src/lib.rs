//! Everything a TileDB array directory holds apart from cell data: which
//! fragments a read at a timestamp sees, fragment metadata, commits, array
//! metadata and groups.
//!
//! Parsers here do no I/O: they take bytes and say which byte ranges they
//! need next. Loading from a `tdb_storage` backend is a thin layer on top.

// Bytes from files reach every parser here (footers, sections, commits,
// metadata, listings): no index, slice or arithmetic that could panic or
// wrap on them (tests index freely).
#![cfg_attr(
    not(test),
    warn(clippy::indexing_slicing, clippy::arithmetic_side_effects)
)]

mod array_metadata;
mod commits;
mod condition;
mod consolidate;
mod create;
mod directory;
mod dissect;
mod error;
pub mod fragment_metadata;
mod group;
mod open;
mod opening;
mod schemas;
mod tile_file;
pub mod tile_metadata;
mod verify;

pub use array_metadata::{ArrayMetadata, MetadataEntry, MetadataFile, MetadataValue};
pub use commits::{ConsolidatedCommit, ConsolidatedCommits, IgnoreFile, VacuumFile};
pub use condition::{Condition, DeleteCommit, UpdateCommit, UpdateValue};
pub use consolidate::{
    consolidate_commits, consolidate_fragment_metadata, consolidate_group_metadata,
    consolidate_metadata, vacuum_commits, vacuum_fragment_metadata, vacuum_fragments,
    vacuum_group_metadata, vacuum_metadata, vacuum_uncommitted, MetadataConsolidation,
};
pub use create::{
    create_array, create_group, create_labelled_array, write_delete, write_enumeration,
    write_evolved_schema, write_fragment_commits, write_group_details, write_metadata,
    write_schema, write_vacuum_lines, write_vacuum_list,
};
pub use directory::{
    select_latest_schema, ArrayDirectory, CommitLocation, ConditionCommit, DirectoryListing,
    FilteredFragments, GroupDirectory, ListedFile, TimeWindow, TimestampedFile,
    CONSOLIDATION_WITH_TIMESTAMPS_MIN_VERSION,
};
pub use dissect::{dissect, Dissection};
pub use error::{FragmentError, Result};
pub use fragment_metadata::{
    ConsolidatedFragmentMeta, Footer, FooterRead, FragmentMetadata, LegacyMetadata, Section,
    SectionData,
};
pub use group::{GroupDetails, GroupMember, GroupMemberEntry, GroupMembers, GROUP_DETAILS_VERSION};
pub use open::{
    list_object, object_files, object_kind, LoadedFragment, ObjectFiles, ObjectKind, OpenArray,
    OpenGroup, ReadStorage,
};
pub use opening::{OpenStep, OpenedArray, Opening};
pub use schemas::{load_enumeration, load_referenced_enumerations, load_schemas};
pub use verify::{verify_array, Problem, ProblemKind, VerifyReport};
