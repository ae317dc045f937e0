//! The integration tests, one binary: the files beside this one are its
//! modules (one compile and link instead of one per file).

mod in_memory;
mod servers;
