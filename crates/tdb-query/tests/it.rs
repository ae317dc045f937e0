//! The integration tests, one binary: the files beside this one are its
//! modules (one compile and link instead of one per file).

mod aggregate_metadata;
mod budget;
mod condition_corpus;
mod io_trace;
mod read_ahead;
mod state_machine;
mod write_input;
