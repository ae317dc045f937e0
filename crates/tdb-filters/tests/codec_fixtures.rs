//! RLE, dictionary, delta and double delta against tiles real TileDB 2.30
//! wrote: every chunk reverses to its unfiltered size and to the values the
//! case's expected.json reads back, and forward reproduces TileDB's metadata
//! and data bytes exactly.

use std::fs;
use std::path::{Path, PathBuf};
use tdb_filters::{Filter, FilterPipeline, Stage, StringOffsets, Unfiltered};
use tdb_format::{Datatype, FormatVersion};

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/arrays")
        .join(case)
}

/// The one fragment directory of a case.
fn fragment(case: &str) -> PathBuf {
    let dir = case_dir(case).join("array/__fragments");
    let mut frags: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(frags.len(), 1, "{}", dir.display());
    frags.pop().unwrap()
}

struct Chunk {
    unfiltered: usize,
    metadata: Vec<u8>,
    data: Vec<u8>,
}

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}

/// The tiles of a data file, each a list of chunks.
fn tiles(file: &Path) -> Vec<Vec<Chunk>> {
    let bytes = fs::read(file).unwrap();
    let mut at = 0;
    let mut tiles = Vec::new();
    while at < bytes.len() {
        let n = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        at += 8;
        let mut chunks = Vec::new();
        for _ in 0..n {
            let unfiltered = u32_at(&bytes, at);
            let data_len = u32_at(&bytes, at + 4);
            let meta_len = u32_at(&bytes, at + 8);
            at += 12;
            let metadata = bytes[at..at + meta_len].to_vec();
            at += meta_len;
            let data = bytes[at..at + data_len].to_vec();
            at += data_len;
            chunks.push(Chunk {
                unfiltered,
                metadata,
                data,
            });
        }
        tiles.push(chunks);
    }
    tiles
}

fn pipeline(filters: Vec<Filter>) -> FilterPipeline {
    FilterPipeline {
        max_chunk_size: 65536,
        filters,
    }
}

fn v22() -> FormatVersion {
    FormatVersion::WRITTEN
}

/// Reverses and re-forwards every chunk of a fixed-size tile file; returns
/// the decoded tiles concatenated.
fn pin_fixed(file: &Path, p: &FilterPipeline, st: &Stage<'_>) -> Vec<u8> {
    let mut all = Vec::new();
    let (mut out, mut scratch) = (Unfiltered::default(), Unfiltered::default());
    for (t, tile) in tiles(file).iter().enumerate() {
        for (c, chunk) in tile.iter().enumerate() {
            let ctx = format!("{} tile {t} chunk {c}", file.display());
            p.reverse_chunk(st, &chunk.metadata, &chunk.data, &mut out, &mut scratch)
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert_eq!(out.data.len(), chunk.unfiltered, "{ctx}");
            let (meta, data) = p
                .forward_chunk(st, out.data.clone())
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert_eq!(meta, chunk.metadata, "{ctx}: metadata");
            assert_eq!(data, chunk.data, "{ctx}: data");
            all.extend_from_slice(&out.data);
        }
    }
    all
}

/// Reverses and re-forwards every tile of a var-length string file whose
/// offsets live in the encoding; returns the cells.
fn pin_strings(frag: &Path, field: &str, p: &FilterPipeline) -> Vec<String> {
    // The offsets file holds one empty tile (a zero chunk count) per tile.
    let offsets_file = fs::read(frag.join(format!("{field}.tdb"))).unwrap();
    let var = frag.join(format!("{field}_var.tdb"));
    let var_tiles = tiles(&var);
    assert_eq!(offsets_file, vec![0u8; 8 * var_tiles.len()]);
    let mut cells = Vec::new();
    let (mut out, mut scratch) = (Unfiltered::default(), Unfiltered::default());
    let reverse = Stage {
        string_offsets: StringOffsets::Reverse,
        ..Stage::new(Datatype::StringUtf8, v22())
    };
    for (t, tile) in var_tiles.iter().enumerate() {
        let ctx = format!("{} tile {t}", var.display());
        // Never chunked, whatever the tile size.
        assert_eq!(tile.len(), 1, "{ctx}");
        let chunk = &tile[0];
        p.reverse_chunk(
            &reverse,
            &chunk.metadata,
            &chunk.data,
            &mut out,
            &mut scratch,
        )
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
        let forward = Stage {
            string_offsets: StringOffsets::Forward(&out.offsets),
            ..reverse
        };
        let (meta, data) = p
            .forward_chunk(&forward, out.data.clone())
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert_eq!(meta, chunk.metadata, "{ctx}: metadata");
        assert_eq!(data, chunk.data, "{ctx}: data");
    }
    cells
}

/// A case's expected.json without whitespace outside strings, so that its
/// fields can be found by plain text search.
fn expected_json(case: &Path) -> String {
    let json = fs::read_to_string(case.join("expected.json")).unwrap();
    let (mut out, mut in_string, mut escaped) = (String::new(), false, false);
    for ch in json.chars() {
        if in_string {
            in_string = escaped || ch != '"';
            escaped = !escaped && ch == '\\';
        } else if ch == '"' {
            in_string = true;
        } else if ch.is_whitespace() {
            continue;
        }
        out.push(ch);
    }
    out
}

/// The raw text of a field's data array in a case's first query.
fn expected_array(case: &str, field: &str) -> String {
    let json = expected_json(&case_dir(case));
    let q = json.find("\"queries\"").unwrap();
    let f = q + json[q..]
        .find(&format!("\"{field}\":{{\"datatype\""))
        .unwrap();
    let d = f + json[f..].find("\"data\":[").unwrap() + "\"data\":[".len();
    let end = d + json[d..].find(']').unwrap();
    json[d..end].to_string()
}

fn expected_numbers<T: std::str::FromStr>(case: &str, field: &str) -> Vec<T>
where
    T::Err: std::fmt::Debug,
{
    expected_array(case, field)
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect()
}

/// The fixtures' strings are plain ASCII without escapes.
fn expected_strings(case: &str, field: &str) -> Vec<String> {
    let text = expected_array(case, field);
    assert!(!text.contains('\\'));
    text.split(',')
        .map(|s| s.trim().trim_matches('"').to_string())
        .collect()
}

fn int64s(bytes: &[u8]) -> Vec<i64> {
    bytes
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

fn pin_int64(case: &str, filter: Filter) {
    let st = Stage::new(Datatype::Int64, v22());
    let data = pin_fixed(&fragment(case).join("a0.tdb"), &pipeline(vec![filter]), &st);
    assert_eq!(int64s(&data), expected_numbers::<i64>(case, "a"));
}

#[test]
fn rle_int64() {
    pin_int64("filter_rle", Filter::Rle { level: -1 });
}

#[test]
fn delta_int64() {
    pin_int64(
        "filter_delta",
        Filter::Delta {
            level: -1,
            reinterpret: Some(Datatype::Any),
        },
    );
}

#[test]
fn double_delta_int64() {
    pin_int64(
        "filter_double_delta",
        Filter::DoubleDelta {
            level: -1,
            reinterpret: Some(Datatype::Any),
        },
    );
}

#[test]
fn double_delta_then_zstd() {
    let case = "filter_chains_int";
    let p = pipeline(vec![
        Filter::DoubleDelta {
            level: -1,
            reinterpret: Some(Datatype::Any),
        },
        Filter::Zstd { level: 1 },
    ]);
    let st = Stage::new(Datatype::Int64, v22());
    let data = pin_fixed(&fragment(case).join("a1.tdb"), &p, &st);
    assert_eq!(
        int64s(&data),
        expected_numbers::<i64>(case, "double_delta_zstd")
    );
}

#[test]
fn double_delta_reinterpreted_then_bzip2() {
    let case = "filter_chains_float";
    let p = pipeline(vec![
        Filter::DoubleDelta {
            level: -1,
            reinterpret: Some(Datatype::UInt64),
        },
        Filter::Bzip2 { level: -1 },
    ]);
    let st = Stage::new(Datatype::Float64, v22());
    let data = pin_fixed(&fragment(case).join("a2.tdb"), &p, &st);
    let got: Vec<f64> = data
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, expected_numbers::<f64>(case, "double_delta_u64_bzip2"));
}

#[test]
fn rle_var_strings() {
    let case = "filter_rle_str";
    let cells = pin_strings(
        &fragment(case),
        "a0",
        &pipeline(vec![Filter::Rle { level: -1 }]),
    );
    assert_eq!(cells, expected_strings(case, "a"));
}

#[test]
fn dictionary_var_strings() {
    let case = "filter_dictionary";
    let cells = pin_strings(
        &fragment(case),
        "a0",
        &pipeline(vec![Filter::Dictionary { level: -1 }]),
    );
    assert_eq!(cells, expected_strings(case, "a"));
}

#[test]
fn rle_var_strings_sparse() {
    let case = "filters_string_dim_dictionary";
    let mut cells = pin_strings(
        &fragment(case),
        "a0",
        &pipeline(vec![Filter::Rle { level: -1 }]),
    );
    // The query is unordered: compare as multisets.
    let mut want = expected_strings(case, "c");
    cells.sort();
    want.sort();
    assert_eq!(cells, want);
}

#[test]
fn dictionary_then_zstd_var_strings() {
    let case = "filters_string_dim_rle_dict";
    let cells = pin_strings(
        &fragment(case),
        "a0",
        &pipeline(vec![
            Filter::Dictionary { level: -1 },
            Filter::Zstd { level: -1 },
        ]),
    );
    assert_eq!(cells, expected_strings(case, "c"));
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
    let rle = "\"validity_filters\":{\"max_chunk_size\":65536,\"filters\":\
               [{\"type\":\"RLE\",\"options\":{\"COMPRESSION_LEVEL\":-1}}]}";
    let p = pipeline(vec![Filter::Rle { level: -1 }]);
    let st = Stage::new(Datatype::UInt8, v22());
    let mut pinned = 0;
    for case in cases {
        let json = expected_json(&case);
        if !json.contains(rle) || !json.contains("\"encryption\":null") {
            continue;
        }
        let mut files = Vec::new();
        validity_files(&case, &mut files);
        for f in files {
            let data = pin_fixed(&f, &p, &st);
            assert!(data.iter().all(|&b| b <= 1), "{}", f.display());
            pinned += 1;
        }
    }
    assert!(pinned >= 35, "{pinned} validity files");
}

/// Every truncation of a real chunk's metadata or data is an error.
#[test]
fn truncated_real_chunks_are_errors() {
    let strings = Stage {
        string_offsets: StringOffsets::Reverse,
        ..Stage::new(Datatype::StringUtf8, v22())
    };
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
    let (mut out, mut scratch) = (Unfiltered::default(), Unfiltered::default());
    for (case, file, filter, st) in cases {
        let p = pipeline(vec![filter]);
        let tiles = tiles(&fragment(case).join(file));
        let chunk = &tiles[0][0];
        for n in 0..chunk.metadata.len() {
            let r = p.reverse_chunk(
                &st,
                &chunk.metadata[..n],
                &chunk.data,
                &mut out,
                &mut scratch,
            );
            assert!(r.is_err(), "{case}: metadata cut to {n}");
        }
        for n in 0..chunk.data.len() {
            let r = p.reverse_chunk(
                &st,
                &chunk.metadata,
                &chunk.data[..n],
                &mut out,
                &mut scratch,
            );
            assert!(r.is_err(), "{case}: data cut to {n}");
        }
    }
}
