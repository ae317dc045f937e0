//! The integration tests, one binary: the files beside this one are its
//! modules (one compile and link instead of one per file).

mod array_metadata;
mod directory_fixtures;
mod directory_rules;
mod dissect;
mod fragment_metadata;
mod group;
mod open;
mod schemas;
mod support_meta;
mod verify;
