#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = (tdb_fuzz::target("filter_pipeline").expect("a target of tdb-fuzz").run)(data);
});
