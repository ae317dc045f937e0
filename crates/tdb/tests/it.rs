//! The integration tests, one binary: the files beside this one are its
//! modules (one compile and link instead of one per file).

mod attribute_bounds;
mod bare_tiles;
mod budget_cuts;
mod cell_timestamps;
mod commit_consolidation;
mod common;
mod concurrent;
mod copy;
mod copy_group;
mod crash;
mod datetime_ranges;
mod delete_consolidation;
mod deletes;
mod dense_consolidation;
mod dim_labels;
mod errors;
mod evolution;
mod fetch_runs;
mod fragment_consolidation;
mod fragment_metadata_consolidation;
mod group_members;
mod group_metadata_consolidation;
mod max_fragment_size;
mod metadata_consolidation;
mod object_store;
mod packed_validity;
mod parts;
mod read_into;
mod scattered_cells;
mod sliced_tiles;
mod sorted_runs;
mod string_parts;
mod tampering;
mod tiledb_inputs;
mod verify_written;
