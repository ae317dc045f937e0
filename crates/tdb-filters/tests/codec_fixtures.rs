//! RLE, dictionary, delta and double delta against tiles real TileDB 2.30
//! wrote: every chunk reverses to its unfiltered size and to the values the
//! case's expected.json reads back, and forward reproduces TileDB's metadata
//! and data bytes exactly.

use crate::common;

use common::{
    attr, case_dir, datatype, expected, field, fragment, pin_attr, pin_chunks, pipeline, read,
    schema_pipeline, tiles, v22,
};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use tdb_filters::{Filter, Stage, StringOffsets, Unfiltered, Workspace};
use tdb_format::Datatype;

/// Pins attribute `name` of `case`, of datatype `ty` and pipeline `filters`,
/// against the cells of query "all": every chunk reverses to its unfiltered
/// size and forward reproduces TileDB's bytes exactly, compressors included.
fn pin_fixed(case: &str, name: &str, ty: Datatype, filters: Vec<Filter>) {
    let (p, datatype) = pin_attr(case, name, true);
    assert_eq!(p, pipeline(filters), "{case}/{name}");
    assert_eq!(datatype, ty, "{case}/{name}");
}

/// Reverses and re-forwards every tile of var-length string attribute
/// `name` of `case`, whose pipeline is `filters` and whose offsets live in
/// the encoding, and checks that its cells are those query "all" read (in
/// the same order when `ordered`, else as multisets).
fn pin_strings(case: &str, name: &str, filters: Vec<Filter>, ordered: bool) {
    let dir = case_dir(case);
    let expected = expected(&dir);
    let (index, schema) = attr(&expected, name);
    let p = pipeline(filters);
    assert_eq!(schema_pipeline(&schema["filters"]), p, "{case}/{name}");
    assert_eq!(datatype(schema), Datatype::StringUtf8, "{case}/{name}");
    let frag = fragment(&dir);
    // The offsets file holds one empty tile (a zero chunk count) per tile.
    let offsets_file = read(&frag.join(format!("a{index}.tdb")));
    let var = frag.join(format!("a{index}_var.tdb"));
    let var_bytes = read(&var);
    let var_tiles = tiles(&var_bytes);
    assert_eq!(offsets_file, vec![0u8; 8 * var_tiles.len()]);
    let mut cells = Vec::new();
    let (mut out, mut scratch) = (Unfiltered::default(), Workspace::default());
    let reverse =
        Stage::new(Datatype::StringUtf8, v22()).with_string_offsets(StringOffsets::Reverse);
    for (t, tile) in var_tiles.iter().enumerate() {
        let ctx = format!("{} tile {t}", var.display());
        // Never chunked, whatever the tile size.
        assert_eq!(tile.len(), 1, "{ctx}");
        let chunk = &tile[0];
        {
            out.clear();
            p.reverse_chunk(&reverse, &mut scratch, chunk.metadata, chunk.data, &mut out)
        }
        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert_eq!(out.data.len(), chunk.unfiltered, "{ctx}");
        assert_eq!(out.offsets.first(), Some(&0), "{ctx}");
        let ends = out.offsets[1..]
            .iter()
            .copied()
            .chain([out.data.len() as u64]);
        for (&s, e) in out.offsets.iter().zip(ends) {
            cells.push(String::from_utf8(out.data[s as usize..e as usize].to_vec()).unwrap());
        }
        let forward = reverse.with_string_offsets(StringOffsets::Forward(&out.offsets));
        let (meta, data) = p
            .forward_chunk(&forward, &mut Workspace::default(), out.data.clone())
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert_eq!(meta, chunk.metadata, "{ctx}: metadata");
        assert_eq!(data, chunk.data, "{ctx}: data");
    }
    let mut want: Vec<String> = field(&expected, "all", name)["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    if !ordered {
        cells.sort();
        want.sort();
    }
    assert_eq!(cells, want, "{case}/{name}: cells");
}

#[test]
fn rle_int64() {
    pin_fixed(
        "filter_rle",
        "a",
        Datatype::Int64,
        vec![Filter::Rle { level: -1 }],
    );
}

#[test]
fn delta_int64() {
    pin_fixed(
        "filter_delta",
        "a",
        Datatype::Int64,
        vec![Filter::Delta {
            level: -1,
            reinterpret: Some(Datatype::Any),
        }],
    );
}

#[test]
fn double_delta_int64() {
    pin_fixed(
        "filter_double_delta",
        "a",
        Datatype::Int64,
        vec![Filter::DoubleDelta {
            level: -1,
            reinterpret: Some(Datatype::Any),
        }],
    );
}

#[test]
fn double_delta_then_zstd() {
    pin_fixed(
        "filter_chains_int",
        "double_delta_zstd",
        Datatype::Int64,
        vec![
            Filter::DoubleDelta {
                level: -1,
                reinterpret: Some(Datatype::Any),
            },
            Filter::Zstd { level: 1 },
        ],
    );
}

#[test]
fn double_delta_reinterpreted_then_bzip2() {
    pin_fixed(
        "filter_chains_float",
        "double_delta_u64_bzip2",
        Datatype::Float64,
        vec![
            Filter::DoubleDelta {
                level: -1,
                reinterpret: Some(Datatype::UInt64),
            },
            Filter::Bzip2 { level: -1 },
        ],
    );
}

#[test]
fn rle_var_strings() {
    pin_strings("filter_rle_str", "a", vec![Filter::Rle { level: -1 }], true);
}

#[test]
fn dictionary_var_strings() {
    pin_strings(
        "filter_dictionary",
        "a",
        vec![Filter::Dictionary { level: -1 }],
        true,
    );
}

#[test]
fn rle_var_strings_sparse() {
    // The query is unordered: compare as multisets.
    pin_strings(
        "filters_string_dim_dictionary",
        "c",
        vec![Filter::Rle { level: -1 }],
        false,
    );
}

#[test]
fn dictionary_then_zstd_var_strings() {
    pin_strings(
        "filters_string_dim_rle_dict",
        "c",
        vec![Filter::Dictionary { level: -1 }, Filter::Zstd { level: -1 }],
        true,
    );
}

fn validity_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            validity_files(&p, out);
        } else if p.to_str().unwrap().ends_with("_validity.tdb") {
            out.push(p);
        }
    }
}

/// Validity tiles (RLE over 1-byte cells) of every unencrypted case, legacy
/// versions included, whose validity filters are exactly RLE.
#[test]
fn rle_validity_everywhere() {
    let mut cases = vec![];
    let root = case_dir("");
    let mut stack = vec![root];
    while let Some(d) = stack.pop() {
        if d.join("expected.json").exists() {
            cases.push(d);
            continue;
        }
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    let p = pipeline(vec![Filter::Rle { level: -1 }]);
    let st = Stage::new(Datatype::UInt8, v22());
    let mut pinned = 0;
    for case in cases {
        let json = expected(&case);
        let validity = &json["schema"]["validity_filters"];
        if json.get("encryption") != Some(&Value::Null)
            || validity.is_null()
            || schema_pipeline(validity) != p
        {
            continue;
        }
        let mut files = Vec::new();
        validity_files(&case, &mut files);
        for f in files {
            let data = pin_chunks(&f.display().to_string(), &read(&f), &p, &st, true);
            assert!(data.iter().all(|&b| b <= 1), "{}", f.display());
            pinned += 1;
        }
    }
    assert!(pinned >= 37, "{pinned} validity files");
}

/// Every truncation of a real chunk's metadata or data is an error.
#[test]
fn truncated_real_chunks_are_errors() {
    let strings =
        Stage::new(Datatype::StringUtf8, v22()).with_string_offsets(StringOffsets::Reverse);
    let int64 = Stage::new(Datatype::Int64, v22());
    let any = Some(Datatype::Any);
    let cases = [
        ("filter_rle", "a0.tdb", Filter::Rle { level: -1 }, int64),
        (
            "filter_delta",
            "a0.tdb",
            Filter::Delta {
                level: -1,
                reinterpret: any,
            },
            int64,
        ),
        (
            "filter_double_delta",
            "a0.tdb",
            Filter::DoubleDelta {
                level: -1,
                reinterpret: any,
            },
            int64,
        ),
        (
            "filter_rle_str",
            "a0_var.tdb",
            Filter::Rle { level: -1 },
            strings,
        ),
        (
            "filter_dictionary",
            "a0_var.tdb",
            Filter::Dictionary { level: -1 },
            strings,
        ),
    ];
    let (mut out, mut scratch) = (Unfiltered::default(), Workspace::default());
    for (case, file, filter, st) in cases {
        let p = pipeline(vec![filter]);
        let bytes = read(&fragment(&case_dir(case)).join(file));
        let tiles = tiles(&bytes);
        let chunk = &tiles[0][0];
        for n in 0..chunk.metadata.len() {
            let r = {
                out.clear();
                p.reverse_chunk(
                    &st,
                    &mut scratch,
                    &chunk.metadata[..n],
                    chunk.data,
                    &mut out,
                )
            };
            assert!(r.is_err(), "{case}: metadata cut to {n}");
        }
        for n in 0..chunk.data.len() {
            let r = {
                out.clear();
                p.reverse_chunk(
                    &st,
                    &mut scratch,
                    chunk.metadata,
                    &chunk.data[..n],
                    &mut out,
                )
            };
            assert!(r.is_err(), "{case}: data cut to {n}");
        }
    }
}
