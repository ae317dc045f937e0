//! The integration tests, one binary: the files beside this one are its
//! modules (one compile and link instead of one per file).

mod arrow_files;
mod change;
mod cluster;
mod common;
mod conventions;
mod copy;
mod demo;
mod dissect;
mod export;
mod import;
mod inspect;
mod plot;
mod schema;
mod sql;
mod terminal;
mod verify;
