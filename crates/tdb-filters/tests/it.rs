//! The integration tests, one binary: the files beside this one are its
//! modules (one compile and link instead of one per file).

mod codec_fixtures;
mod common;
mod fixture_pins_windows_scale_checksum;
mod fixtures;
mod roundtrip;
mod shuffle_fixtures;
mod webp_fixture;
