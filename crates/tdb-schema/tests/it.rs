//! The integration tests, one binary: the files beside this one are its
//! modules (one compile and link instead of one per file).

mod builder;
mod corpus_validates;
mod error_chain;
mod evolution;
mod fixtures;
mod history;
