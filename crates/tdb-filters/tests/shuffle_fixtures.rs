//! BITSHUFFLE, BYTESHUFFLE and XOR on tiles real TileDB 2.30 wrote: every
//! chunk unfilters to the cells the fixture's query returned, and filtering
//! those cells forward gives back TileDB's bytes (up to the first
//! general-purpose compressor, whose bytes depend on the library build).

use crate::common;

use common::{
    attr, case_dir, cell_bytes, datatype, expected, field, fragment, pin_attr, pin_chunks, read,
    schema_pipeline,
};
use std::path::Path;
use tdb_filters::{FilterPipeline, Stage};
use tdb_format::{Datatype, FormatVersion};

/// Unfilters every chunk of a data file and checks that filtering its cells
/// forward gives TileDB's bytes back (up to the first general-purpose
/// compressor). Returns the file's cells.
fn pin_file(
    ctx: &str,
    file: &Path,
    datatype: Datatype,
    version: u32,
    pipeline: &FilterPipeline,
) -> Vec<u8> {
    let st = Stage::new(datatype, FormatVersion::new(version).unwrap());
    pin_chunks(ctx, &read(file), pipeline, &st, false)
}

/// Pins attribute `name` of a TileDB 2.30 case against the cells of its
/// query "all", forward up to the first general-purpose compressor.
fn pin(case: &str, name: &str) {
    pin_attr(case, name, false);
}

fn sorted_i32(bytes: &[u8]) -> Vec<i32> {
    let mut v: Vec<i32> = bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn bitshuffle_int32() {
    pin("filter_bitshuffle", "a");
}

#[test]
fn byteshuffle_float64() {
    pin("filter_byteshuffle", "a");
}

#[test]
fn xor_float64() {
    pin("filter_xor", "a");
}

#[test]
fn chains() {
    pin("filter_chains_int", "bitshuffle_zstd");
    pin("filter_chains_float", "byteshuffle_lz4");
    pin("filter_chains_float", "xor_zstd");
    pin("filter_chains_int", "xor_bwr_gzip");
}

/// Sparse: the validity tiles of `s` under BITSHUFFLE + GZIP (20-byte
/// chunks, so a 16-byte shuffled part and a 4-byte copied one) and the var
/// data of `v` under BYTESHUFFLE. Cells are compared as multisets: the
/// query's order is not the storage order.
#[test]
fn validity_and_var_data() {
    let case = "filters_dims_offsets_validity";
    let dir = case_dir(case);
    let expected = expected(&dir);
    let frag = fragment(&dir);

    let (index, s) = attr(&expected, "s");
    let validity = pin_file(
        &format!("{case}/s validity"),
        &frag.join(format!("a{index}_validity.tdb")),
        Datatype::UInt8,
        22,
        &schema_pipeline(&expected["schema"]["validity_filters"]),
    );
    assert!(s["nullable"].as_bool().unwrap());
    let want: Vec<u64> = field(&expected, "all", "s")["validity"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(validity.len(), want.len());
    let ones = validity.iter().filter(|&&b| b == 1).count();
    assert_eq!(ones, want.iter().filter(|&&b| b == 1).count());
    assert!(validity.iter().all(|&b| b <= 1));

    let (index, v) = attr(&expected, "v");
    let values = pin_file(
        &format!("{case}/v var"),
        &frag.join(format!("a{index}_var.tdb")),
        datatype(v),
        22,
        &schema_pipeline(&v["filters"]),
    );
    let mut want: Vec<i32> = field(&expected, "all", "v")["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|cell| cell.as_array().unwrap().iter())
        .map(|x| x.as_i64().unwrap() as i32)
        .collect();
    want.sort_unstable();
    assert_eq!(sorted_i32(&values), want);
}

/// `v` (INT32, BYTESHUFFLE + LZ4) as every TileDB since 1.6 wrote it: the
/// older releases shuffled with their bundled Blosc 1 and bitshuffle.
#[test]
fn legacy_byteshuffle() {
    let root = case_dir("legacy");
    let mut checked = 0;
    for release in std::fs::read_dir(&root).unwrap() {
        let dir = release.unwrap().path().join("sparse_var");
        let expected = expected(&dir);
        let version = expected["format_versions"][0].as_u64().unwrap() as u32;
        if version < 3 {
            continue; // Before filter pipelines (TileDB 1.5): no chunk framing.
        }
        let (index, v) = attr(&expected, "v");
        let frag = fragment(&dir);
        let file = [frag.join("v.tdb"), frag.join(format!("a{index}.tdb"))]
            .into_iter()
            .find(|f| f.exists())
            .unwrap();
        let ctx = format!("{}", dir.display());
        let values = pin_file(
            &ctx,
            &file,
            datatype(v),
            version,
            &schema_pipeline(&v["filters"]),
        );
        let want: Vec<u8> = cell_bytes(
            Datatype::Int32,
            field(&expected, "all", "v")["data"].as_array().unwrap(),
        );
        assert_eq!(sorted_i32(&values), sorted_i32(&want), "{ctx}");
        checked += 1;
    }
    assert!(checked >= 15, "{checked}");
}
