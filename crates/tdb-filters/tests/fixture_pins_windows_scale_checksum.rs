//! Bit-width reduction, positive delta, float scaling and the checksums,
//! pinned on tiles real TileDB 2.30 wrote: every chunk reverses to its
//! unfiltered size and to the cells TileDB reads, and forward of what a
//! filter reversed gives back TileDB's exact bytes, alone or inside a chain
//! (there the filters after it are reversed first).

use serde_json::Value;
use std::path::{Path, PathBuf};
use tdb_filters::{Filter, FilterError, FilterPipeline, Parts, Stage, Unfiltered};
use tdb_format::{Datatype, FormatVersion};

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/arrays")
        .join(case)
}

/// A stored chunk: unfiltered size, metadata, data.
type Chunk = (usize, Vec<u8>, Vec<u8>);

/// The tiles of a data file, each a list of chunks.
fn tiles(file: &Path) -> Vec<Vec<Chunk>> {
    let bytes = std::fs::read(file).unwrap();
    let mut rest = &bytes[..];
    let mut take = |n: usize| {
        let (head, tail) = rest.split_at(n);
        rest = tail;
        head
    };
    let mut out = Vec::new();
    let mut left = bytes.len();
    while left > 0 {
        let n = u64::from_le_bytes(take(8).try_into().unwrap());
        left -= 8;
        let tile: Vec<Chunk> = (0..n)
            .map(|_| {
                let mut u32_of = || u32::from_le_bytes(take(4).try_into().unwrap()) as usize;
                let (size, data, meta) = (u32_of(), u32_of(), u32_of());
                let m = take(meta).to_vec();
                (size, m, take(data).to_vec())
            })
            .collect();
        left -= tile
            .iter()
            .map(|(_, m, d)| 12 + m.len() + d.len())
            .sum::<usize>();
        out.push(tile);
    }
    out
}

fn filter_of(f: &Value) -> Filter {
    let o = &f["options"];
    let level = || o["COMPRESSION_LEVEL"].as_i64().unwrap() as i32;
    let reinterpret = || {
        Some(Datatype::from_name(o["COMPRESSION_REINTERPRET_DATATYPE"].as_str().unwrap()).unwrap())
    };
    match f["type"].as_str().unwrap() {
        "BIT_WIDTH_REDUCTION" => Filter::BitWidthReduction {
            max_window: o["BIT_WIDTH_MAX_WINDOW"].as_u64().unwrap() as u32,
        },
        "POSITIVE_DELTA" => Filter::PositiveDelta {
            max_window: o["POSITIVE_DELTA_MAX_WINDOW"].as_u64().unwrap() as u32,
        },
        "SCALE_FLOAT" => Filter::ScaleFloat {
            scale: o["SCALE_FLOAT_FACTOR"].as_f64().unwrap(),
            offset: o["SCALE_FLOAT_OFFSET"].as_f64().unwrap(),
            byte_width: o["SCALE_FLOAT_BYTEWIDTH"].as_u64().unwrap(),
        },
        "CHECKSUM_MD5" => Filter::ChecksumMd5,
        "CHECKSUM_SHA256" => Filter::ChecksumSha256,
        "BITSHUFFLE" => Filter::Bitshuffle,
        "BYTESHUFFLE" => Filter::Byteshuffle,
        "XOR" => Filter::Xor,
        "GZIP" => Filter::Gzip { level: level() },
        "ZSTD" => Filter::Zstd { level: level() },
        "LZ4" => Filter::Lz4 { level: level() },
        "BZIP2" => Filter::Bzip2 { level: level() },
        "DELTA" => Filter::Delta {
            level: level(),
            reinterpret: reinterpret(),
        },
        "DOUBLE_DELTA" => Filter::DoubleDelta {
            level: level(),
            reinterpret: reinterpret(),
        },
        other => panic!("no mapping for {other}"),
    }
}

/// The cells of attribute `name` that query "all" returned, little-endian.
/// Numbers are parsed from the JSON text by Rust's exact float parser.
fn expected_cells(json_text: &str, name: &str, datatype: Datatype) -> Vec<u8> {
    let result = json_text.find("\"result\"").unwrap();
    let at = result
        + json_text[result..]
            .find(&format!("\"{name}\": {{"))
            .unwrap();
    let open = at + json_text[at..].find("\"data\": [").unwrap() + 9;
    let close = open + json_text[open..].find(']').unwrap();
    let mut out = Vec::new();
    for n in json_text[open..close].split(',').map(str::trim) {
        match datatype {
            Datatype::Int64 => out.extend(n.parse::<i64>().unwrap().to_le_bytes()),
            Datatype::Int32 => out.extend(n.parse::<i32>().unwrap().to_le_bytes()),
            Datatype::UInt16 => out.extend(n.parse::<u16>().unwrap().to_le_bytes()),
            Datatype::Float64 => out.extend(n.parse::<f64>().unwrap().to_le_bytes()),
            Datatype::Float32 => out.extend((n.parse::<f64>().unwrap() as f32).to_le_bytes()),
            t => panic!("{t:?}"),
        }
    }
    out
}

/// Reverses `pipeline.filters[from..]` over a stored chunk.
fn reverse_from(
    pipeline: &FilterPipeline,
    st: &Stage<'_>,
    from: usize,
    m: &[u8],
    d: &[u8],
) -> Result<Unfiltered, FilterError> {
    let types = pipeline.stage_datatypes(st.datatype);
    let mut cur = Unfiltered {
        metadata: m.to_vec(),
        data: d.to_vec(),
        offsets: Vec::new(),
    };
    for i in (from..pipeline.filters.len()).rev() {
        let stage = Stage {
            datatype: types[i],
            ..*st
        };
        let mut next = Unfiltered::default();
        pipeline.filters[i].reverse(&stage, &cur.metadata, &cur.data, &mut next)?;
        cur = next;
    }
    Ok(cur)
}

fn mine(f: &Filter) -> bool {
    matches!(
        f,
        Filter::BitWidthReduction { .. }
            | Filter::PositiveDelta { .. }
            | Filter::ScaleFloat { .. }
            | Filter::ChecksumMd5
            | Filter::ChecksumSha256
    )
}

#[derive(Default, Debug)]
struct Tally {
    pinned: usize,
    full: usize,
    skipped: Vec<String>,
}

/// Pins every attribute of `case` whose pipeline has one of this module's
/// filters. Filters of other modules that are not implemented yet skip
/// only the checks that need them.
fn pin_case(case: &str) -> Tally {
    let dir = case_dir(case);
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["queries"][0]["name"], "all");
    let mut frags: Vec<_> = std::fs::read_dir(dir.join("array/__fragments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    frags.sort();
    let v22 = FormatVersion::new(22).unwrap();
    let mut tally = Tally::default();
    for (a, attr) in json["schema"]["attrs"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let name = attr["name"].as_str().unwrap();
        let datatype = Datatype::from_name(attr["datatype"].as_str().unwrap()).unwrap();
        let pipeline = FilterPipeline {
            max_chunk_size: 65536,
            filters: attr["filters"]["filters"]
                .as_array()
                .unwrap()
                .iter()
                .map(filter_of)
                .collect(),
        };
        if !pipeline.filters.iter().any(mine) {
            continue;
        }
        let st = Stage::new(datatype, v22);
        let types = pipeline.stage_datatypes(datatype);
        let mut cells = Vec::new();
        let mut full = true;
        for (t, tile) in tiles(&dir.join(&frags[0]).join(format!("a{a}.tdb")))
            .iter()
            .enumerate()
        {
            for (c, (size, m, d)) in tile.iter().enumerate() {
                let ctx = format!("{case} {name} tile {t} chunk {c}");
                for (k, filter) in pipeline.filters.iter().enumerate() {
                    if !mine(filter) {
                        continue;
                    }
                    let input = match reverse_from(&pipeline, &st, k + 1, m, d) {
                        Ok(x) => x,
                        Err(FilterError::Unsupported { filter: which, .. }) => {
                            tally
                                .skipped
                                .push(format!("{ctx}: {which} after {filter:?}"));
                            continue;
                        }
                        Err(e) => panic!("{ctx}: {e}"),
                    };
                    let stage = Stage {
                        datatype: types[k],
                        ..st
                    };
                    let mut out = Unfiltered::default();
                    filter
                        .reverse(&stage, &input.metadata, &input.data, &mut out)
                        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    // Checksums write the part count: after a compressor
                    // there is one metadata part, first there is none.
                    let meta_in = if k == 0 {
                        assert!(out.metadata.is_empty());
                        Parts::new()
                    } else {
                        Parts::one(out.metadata)
                    };
                    let (m2, d2) = filter
                        .forward(&stage, meta_in, Parts::one(out.data))
                        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    assert_eq!(m2.concat(), input.metadata, "{ctx}: {filter:?} metadata");
                    assert_eq!(d2.concat(), input.data, "{ctx}: {filter:?} data");
                    tally.pinned += 1;
                }
                let (mut out, mut scratch) = (Unfiltered::default(), Unfiltered::default());
                match pipeline.reverse_chunk(&st, m, d, &mut out, &mut scratch) {
                    Ok(()) => {
                        assert_eq!(out.data.len(), *size, "{ctx}");
                        cells.extend_from_slice(&out.data);
                    }
                    Err(FilterError::Unsupported { filter: which, .. }) => {
                        tally
                            .skipped
                            .push(format!("{ctx}: whole pipeline ({which})"));
                        full = false;
                    }
                    Err(e) => panic!("{ctx}: {e}"),
                }
                if pipeline.filters.iter().all(mine) {
                    let (m2, d2) = pipeline.forward_chunk(&st, out.data.clone()).unwrap();
                    assert_eq!((&m2, &d2), (m, d), "{ctx}: whole pipeline forward");
                }
            }
        }
        if full {
            assert_eq!(
                cells,
                expected_cells(&text, name, datatype),
                "{case} {name}"
            );
            tally.full += 1;
        }
    }
    tally
}

#[test]
fn bit_width_reduction() {
    let t = pin_case("filter_bit_width_reduction");
    assert_eq!((t.pinned, t.full, t.skipped.len()), (4, 1, 0), "{t:?}");
}

#[test]
fn positive_delta() {
    let t = pin_case("filter_positive_delta");
    assert_eq!((t.pinned, t.full, t.skipped.len()), (4, 1, 0), "{t:?}");
}

#[test]
fn float_scale() {
    let t = pin_case("filter_float_scale");
    assert_eq!((t.pinned, t.full, t.skipped.len()), (4, 1, 0), "{t:?}");
}

#[test]
fn checksum_md5() {
    let t = pin_case("filter_checksum_md5");
    assert_eq!((t.pinned, t.full, t.skipped.len()), (4, 1, 0), "{t:?}");
}

#[test]
fn checksum_sha256() {
    let t = pin_case("filter_checksum_sha256");
    assert_eq!((t.pinned, t.full, t.skipped.len()), (4, 1, 0), "{t:?}");
}

#[test]
fn chains_int() {
    // zstd_sha256 (SHA-256 after ZSTD), xor_bwr_gzip (BWR between XOR and
    // GZIP), delta_bwr_lz4_md5 (BWR under LZ4, MD5 last): 4 tiles each.
    let t = pin_case("filter_chains_int");
    for s in &t.skipped {
        eprintln!("skipped: {s}");
    }
    assert_eq!(t.pinned, 4 * 4, "{t:?}");
    // XOR and DELTA may not be in yet; zstd_sha256 needs neither.
    let full = if t.skipped.is_empty() { 3 } else { 1 };
    assert!(t.full >= full, "{t:?}");
}

#[test]
fn chains_float() {
    // float_scale_delta: float scaling under DELTA, which is reversed first.
    let t = pin_case("filter_chains_float");
    for s in &t.skipped {
        eprintln!("skipped: {s}");
    }
    if t.skipped.is_empty() {
        assert_eq!((t.pinned, t.full), (4, 1), "{t:?}");
    } else {
        assert_eq!(t.pinned + t.skipped.len(), 4 + 4, "{t:?}");
    }
}

#[test]
fn flipping_any_byte_of_a_checksummed_chunk_is_detected() {
    let dir = case_dir("filter_checksum_sha256");
    let frag = std::fs::read_dir(dir.join("array/__fragments"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let (_, m, d) = &tiles(&frag.join("a0.tdb"))[0][0];
    let st = Stage::new(Datatype::Int64, FormatVersion::new(22).unwrap());
    let f = Filter::ChecksumSha256;
    for i in 0..d.len() {
        let mut bad = d.clone();
        bad[i] ^= 0x20;
        let e = f
            .reverse(&st, m, &bad, &mut Unfiltered::default())
            .unwrap_err();
        assert!(
            matches!(e, FilterError::ChecksumMismatch { .. }),
            "{i}: {e}"
        );
    }
    for i in 8..m.len() {
        let mut bad = m.clone();
        bad[i] ^= 0x20;
        assert!(f.reverse(&st, &bad, d, &mut Unfiltered::default()).is_err());
    }
}
