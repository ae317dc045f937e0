//! Every tile real TileDB wrote in `testdata/` (all format versions)
//! unfilters: every generic tile, and every tile of every data file, with
//! the pipelines TileDB reported for each field (`expected.json`). Where the
//! pipeline is deterministic (no general-purpose compressor, no WebP, no
//! encryption), filtering the unfiltered tile again gives TileDB's exact
//! bytes, chunking included; elsewhere it unfilters to the same tile.

use serde_json::Value;
use std::collections::BTreeMap;
use tdb_filters::{Filter, FilterPipeline};
use tdb_format::{
    classify, fragment_metadata_tiles, generic_tile_run, DataField, DataPart, Datatype, FilterType,
    FormatVersion, ObjectFile,
};
use tdb_testdata::Object;
use tdb_tile::{read_generic_tile, write_generic_tile, TileData, TileFilters};

#[test]
fn every_generic_tile_unfilters() {
    let mut seen = 0;
    for obj in tdb_testdata::objects() {
        for rel in &obj.files {
            let class = classify(rel);
            if !class.holds_generic_tiles() {
                continue;
            }
            let bytes = obj.read(rel);
            let (tiles, _) = if matches!(class, ObjectFile::FragmentMetadata { .. }) {
                fragment_metadata_tiles(&bytes).unwrap()
            } else {
                generic_tile_run(&bytes)
            };
            for t in tiles {
                let at = format!("{}: {rel} @{}", obj.case, t.offset);
                let data = read_generic_tile(&at, &t.tile, obj.key.as_ref())
                    .unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(data.len() as u64, t.tile.header.tile_size, "{at}");
                // Written again (other GZIP bytes are allowed), it reads back.
                let mut again = Vec::new();
                write_generic_tile(
                    &at,
                    t.tile.header.version,
                    &data,
                    obj.key.as_ref(),
                    &mut again,
                )
                .unwrap();
                let (tile, _) = tdb_format::le::run(tdb_format::generic_tile, &again).unwrap();
                assert_eq!(
                    tile.filter_pipeline, t.tile.filter_pipeline,
                    "{at}: pipeline"
                );
                assert_eq!(
                    read_generic_tile(&at, &tile, obj.key.as_ref()).unwrap(),
                    data,
                    "{at}"
                );
                seen += 1;
            }
        }
    }
    assert!(seen > 500, "{seen}");
}

#[test]
fn generic_tiles_refuse_a_missing_or_wrong_key() {
    let obj = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.key.is_some())
        .unwrap();
    let rel = obj
        .files
        .iter()
        .find(|f| f.starts_with("__schema/"))
        .unwrap();
    let bytes = obj.read(rel);
    let (tile, _) = tdb_format::le::run(tdb_format::generic_tile, &bytes).unwrap();
    let missing = read_generic_tile(rel, &tile, None).unwrap_err();
    assert!(missing.to_string().contains("no key"), "{missing}");
    let wrong = read_generic_tile(rel, &tile, Some(&[7; 32])).unwrap_err();
    assert!(wrong.to_string().contains("authentication"), "{wrong}");
}

/// One field of an array as `expected.json` describes it.
#[derive(Debug, Clone)]
struct Field {
    datatype: Datatype,
    /// Bytes per cell; `None` for var-size fields.
    cell_size: Option<u64>,
    nullable: bool,
    filters: FilterPipeline,
}

fn pipeline(list: &Value) -> FilterPipeline {
    let filters = list["filters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let o = &f["options"];
            let level = o["COMPRESSION_LEVEL"].as_i64().unwrap_or(0) as i32;
            let reinterpret = o["COMPRESSION_REINTERPRET_DATATYPE"]
                .as_str()
                .map(|n| Datatype::from_name(n).unwrap());
            let window = |k: &str| o[k].as_u64().unwrap() as u32;
            match FilterType::from_name(f["type"].as_str().unwrap()).unwrap() {
                FilterType::None => Filter::None,
                FilterType::Gzip => Filter::Gzip { level },
                FilterType::Zstd => Filter::Zstd { level },
                FilterType::Lz4 => Filter::Lz4 { level },
                FilterType::Rle => Filter::Rle { level },
                FilterType::Bzip2 => Filter::Bzip2 { level },
                FilterType::Dictionary => Filter::Dictionary { level },
                FilterType::Delta => Filter::Delta { level, reinterpret },
                FilterType::DoubleDelta => Filter::DoubleDelta { level, reinterpret },
                FilterType::BitWidthReduction => Filter::BitWidthReduction {
                    max_window: window("BIT_WIDTH_MAX_WINDOW"),
                },
                FilterType::PositiveDelta => Filter::PositiveDelta {
                    max_window: window("POSITIVE_DELTA_MAX_WINDOW"),
                },
                FilterType::Bitshuffle => Filter::Bitshuffle,
                FilterType::Byteshuffle => Filter::Byteshuffle,
                FilterType::ChecksumMd5 => Filter::ChecksumMd5,
                FilterType::ChecksumSha256 => Filter::ChecksumSha256,
                FilterType::Xor => Filter::Xor,
                FilterType::ScaleFloat => Filter::ScaleFloat {
                    scale: o["SCALE_FLOAT_FACTOR"].as_f64().unwrap(),
                    offset: o["SCALE_FLOAT_OFFSET"].as_f64().unwrap(),
                    byte_width: o["SCALE_FLOAT_BYTEWIDTH"].as_u64().unwrap(),
                },
                FilterType::Webp => Filter::Webp {
                    quality: o["WEBP_QUALITY"].as_f64().unwrap() as f32,
                    format: o["WEBP_INPUT_FORMAT"].as_u64().unwrap() as u8,
                    lossless: o["WEBP_LOSSLESS"].as_u64().unwrap() as u8,
                    y_extent: 0,
                    x_extent: 0,
                    padding: [0; 2],
                },
                other => panic!("unexpected filter {other:?}"),
            }
        })
        .collect();
    FilterPipeline {
        max_chunk_size: list["max_chunk_size"].as_u64().unwrap() as u32,
        filters,
    }
}

fn field(v: &Value, schema: &Value) -> (String, Field) {
    let datatype = Datatype::from_name(v["datatype"].as_str().unwrap()).unwrap();
    let cvn = v["cell_val_num"].as_u64().unwrap();
    let var = v["var"].as_bool().unwrap() || cvn == u64::from(u32::MAX);
    let mut filters = pipeline(&v["filters"]);
    // A dimension without filters of its own uses the coordinate filters.
    if v.get("tile").is_some() && filters.filters.is_empty() {
        filters = pipeline(&schema["coords_filters"]);
    }
    // The stored schema holds WebP's tile extents, expected.json does not:
    // they are the tile extents of dimensions 0 and 1 (TileDB's
    // `WebpFilter::set_extents`), x counting bytes.
    for f in &mut filters.filters {
        if let Filter::Webp {
            y_extent, x_extent, ..
        } = f
        {
            let extent = |i: usize| schema["dims"][i]["tile"].as_u64().unwrap() as u16;
            (*y_extent, *x_extent) = (extent(0), extent(1));
        }
    }
    let field = Field {
        datatype,
        cell_size: (!var).then(|| datatype.size() * cvn),
        nullable: v["nullable"].as_bool().unwrap_or(false),
        filters,
    };
    (v["name"].as_str().unwrap().to_owned(), field)
}

/// What a data file holds, from its name.
fn data_file_field(obj: &Object, which: &DataField) -> Option<Field> {
    let schema = &obj.expected.as_ref()?["schema"];
    let dims: Vec<_> = schema["dims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| field(d, schema))
        .collect();
    let attrs: Vec<_> = schema["attrs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| field(a, schema))
        .collect();
    let special = |datatype| Field {
        datatype,
        cell_size: Some(datatype.size()),
        nullable: false,
        filters: pipeline(&schema["coords_filters"]),
    };
    Some(match which {
        DataField::Attribute(i) => attrs[*i as usize].1.clone(),
        DataField::Dimension(i) => dims[*i as usize].1.clone(),
        DataField::Named(name) => {
            let decoded = percent_decode(name);
            dims.iter()
                .chain(&attrs)
                .find(|(n, _)| *n == decoded)
                .unwrap_or_else(|| panic!("{}: no field {name}", obj.case))
                .1
                .clone()
        }
        DataField::LegacyCoords => {
            let first = dims[0].1.clone();
            Field {
                cell_size: Some(first.datatype.size() * dims.len() as u64),
                ..special(first.datatype)
            }
        }
        DataField::Timestamps | DataField::DeleteTimestamps | DataField::DeleteConditionIndex => {
            special(Datatype::UInt64)
        }
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

fn deterministic(p: &FilterPipeline) -> bool {
    !p.filters.iter().any(|f| {
        matches!(
            f,
            Filter::Gzip { .. }
                | Filter::Zstd { .. }
                | Filter::Lz4 { .. }
                | Filter::Bzip2 { .. }
                | Filter::Webp { .. }
                | Filter::InternalAes256Gcm
        )
    })
}

/// Unfilters every tile of one data file; returns the tiles and each one's
/// filtered bytes.
fn unfilter_file(
    at: &str,
    bytes: &[u8],
    filters: &TileFilters<'_>,
    var: bool,
) -> Vec<(TileData, Vec<u8>)> {
    let mut pos = 0;
    let mut tiles = Vec::new();
    while pos < bytes.len() {
        let loc = format!("{at} tile {}", tiles.len());
        let (tile, used) = filters
            .unfilter(&loc, &bytes[pos..], var)
            .unwrap_or_else(|e| panic!("{e}"));
        tiles.push((tile, bytes[pos..pos + used].to_vec()));
        pos += used;
    }
    tiles
}

#[test]
fn every_data_tile_unfilters_and_deterministic_pipelines_are_byte_exact() {
    let mut stats: BTreeMap<&str, usize> = BTreeMap::new();
    for obj in tdb_testdata::objects() {
        let Some(expected) = &obj.expected else {
            continue;
        };
        let schema = &expected["schema"];
        let Some(version) = schema["schema_format_version"].as_u64() else {
            continue; // a group
        };
        let version = FormatVersion::new(version as u32).unwrap();
        // expected.json holds the latest schema only: fragments written under
        // an earlier one (schema evolution) number their fields differently.
        let latest = obj
            .files
            .iter()
            .filter(|f| f.starts_with("__schema/__"))
            .max();
        let other_schema: Vec<&str> = expected["fragments"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| {
                let name = f["array_schema_name"].as_str();
                name.is_some() && latest.is_some_and(|l| Some(&l["__schema/".len()..]) != name)
            })
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        let offsets_filters = pipeline(&schema["offsets_filters"]);
        let validity_filters = pipeline(&schema["validity_filters"]);
        let with_key = |mut p: FilterPipeline| {
            if obj.key.is_some() {
                p.filters.push(Filter::InternalAes256Gcm);
            }
            p
        };
        // Offsets tiles by fragment and field, to pair with var tiles.
        let mut offsets_by_field: BTreeMap<(String, String), Vec<Vec<u64>>> = BTreeMap::new();
        let mut files: Vec<_> = obj.files.iter().collect();
        // Fixed (offsets) files before their var files.
        files.sort_by_key(|f| f.contains("_var"));
        for rel in files {
            let ObjectFile::Data {
                fragment,
                field: which,
                part,
                ..
            } = classify(rel)
            else {
                continue;
            };
            if other_schema.contains(&fragment.to_string().as_str()) {
                *stats
                    .entry("files of fragments under an earlier schema")
                    .or_default() += 1;
                continue;
            }
            let Some(f) = data_file_field(&obj, &which) else {
                continue;
            };
            let at = format!("{}: {rel}", obj.case);
            let bytes = obj.read(rel);
            let key = (fragment.to_string(), format!("{which:?}"));
            let var_field = f.cell_size.is_none();
            let (pipeline, datatype, cell_size) = match part {
                DataPart::Validity => {
                    assert!(f.nullable, "{at}");
                    (with_key(validity_filters.clone()), Datatype::UInt8, 1)
                }
                DataPart::Fixed if var_field => {
                    (with_key(offsets_filters.clone()), Datatype::UInt64, 8)
                }
                DataPart::Fixed => (
                    with_key(f.filters.clone()),
                    f.datatype,
                    f.cell_size.unwrap(),
                ),
                DataPart::Var => (with_key(f.filters.clone()), f.datatype, f.datatype.size()),
            };
            let filters = TileFilters {
                key: obj.key.as_ref(),
                threads: 2,
                ..TileFilters::new(&pipeline, datatype, cell_size, version)
            };
            if pipeline
                .filters
                .iter()
                .any(|f| matches!(f, Filter::Webp { .. }))
            {
                // Not byte-exact (tdb's lossless encoder is not libwebp):
                // checked below by a forward round trip.
                *stats.entry("webp tiles").or_default() += 1;
            }
            let offsets_inside = var_field && f.filters.skip_offsets_filtering(f.datatype, version);
            let tiles = unfilter_file(&at, &bytes, &filters, part == DataPart::Var);
            assert!(!tiles.is_empty(), "{at}");
            let mut var_offsets = Vec::new();
            for (i, (tile, filtered)) in tiles.iter().enumerate() {
                let at = format!("{at} tile {i}");
                let data = &tile.data;
                match part {
                    DataPart::Fixed if var_field && offsets_inside => {
                        // TileDB writes an offsets tile of zero chunks.
                        assert!(data.is_empty(), "{at}");
                        assert_eq!(filtered, &0u64.to_le_bytes(), "{at}");
                    }
                    DataPart::Fixed if var_field => {
                        assert_eq!(data.len() % 8, 0, "{at}");
                        let offs: Vec<u64> = data
                            .chunks_exact(8)
                            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                            .collect();
                        assert!(offs.windows(2).all(|w| w[0] <= w[1]), "{at}: {offs:?}");
                        offsets_by_field.entry(key.clone()).or_default().push(offs);
                    }
                    DataPart::Validity => assert!(data.iter().all(|&b| b <= 1), "{at}"),
                    DataPart::Fixed => {
                        assert_eq!(data.len() as u64 % cell_size, 0, "{at}");
                    }
                    DataPart::Var if offsets_inside => {
                        assert!(!tile.offsets.is_empty(), "{at}: no rebuilt offsets");
                        assert!(tile.offsets.iter().all(|&o| o <= data.len() as u64), "{at}");
                        var_offsets.push(tile.offsets.clone());
                    }
                    DataPart::Var => {
                        let offs = &offsets_by_field.get(&key).unwrap_or_else(|| panic!("{at}"))[i];
                        assert!(offs.iter().all(|&o| o <= data.len() as u64), "{at}");
                        var_offsets.push(offs.clone());
                    }
                }
                let mut again = Vec::new();
                let offsets = (part == DataPart::Var).then(|| var_offsets[i].as_slice());
                filters
                    .filter(&at, data, offsets, &mut again)
                    .unwrap_or_else(|e| panic!("{e}"));
                if deterministic(&pipeline) {
                    assert_eq!(
                        &again, filtered,
                        "{at}: forward differs from TileDB's bytes"
                    );
                    *stats.entry("byte-exact tiles").or_default() += 1;
                } else {
                    let (back, _) = filters
                        .unfilter(&at, &again, part == DataPart::Var)
                        .unwrap();
                    assert_eq!(&back.data, data, "{at}: round trip");
                }
                *stats.entry("tiles").or_default() += 1;
            }
        }
    }
    eprintln!("{stats:?}");
    assert!(stats["tiles"] > 500, "{stats:?}");
    assert!(stats["byte-exact tiles"] > 100, "{stats:?}");
}

/// The first tile of the first data file of `case`, with its filters.
fn first_tile(case: &str, file: &str) -> (FilterPipeline, Datatype, FormatVersion, Vec<u8>) {
    let obj = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == case)
        .unwrap();
    let rel = obj.files.iter().find(|f| f.ends_with(file)).unwrap();
    let ObjectFile::Data { field: which, .. } = classify(rel) else {
        panic!("{rel}")
    };
    let f = data_file_field(&obj, &which).unwrap();
    let schema = &obj.expected.as_ref().unwrap()["schema"];
    let version =
        FormatVersion::new(schema["schema_format_version"].as_u64().unwrap() as u32).unwrap();
    let bytes = obj.read(rel);
    let (_, chunks) = tdb_tile::filtered_chunks(&bytes).unwrap();
    let len = bytes.len()
        - tdb_format::le::run(tdb_tile::filtered_chunks, &bytes)
            .unwrap()
            .1
            .len();
    assert!(!chunks.is_empty());
    (f.filters, f.datatype, version, bytes[..len].to_vec())
}

/// Flipping any byte of a checksummed tile is caught: in the data or the
/// stored digest by the checksum, in the framing by the sizes.
#[test]
fn any_flipped_byte_of_a_checksummed_tile_is_an_error() {
    for case in ["filter_checksum_md5", "filter_checksum_sha256"] {
        let (pipeline, datatype, version, tile) = first_tile(case, "a0.tdb");
        let filters = TileFilters::new(&pipeline, datatype, datatype.size(), version);
        filters.unfilter_whole(case, &tile, false).unwrap();
        let mut mismatches = 0;
        for i in 0..tile.len() {
            let mut bad = tile.clone();
            bad[i] ^= 0x40;
            let err = filters
                .unfilter_whole(case, &bad, false)
                .expect_err(&format!("{case}: flipped byte {i} went unnoticed"));
            mismatches += err.to_string().contains("checksum mismatch") as usize;
        }
        assert!(
            mismatches > tile.len() / 2,
            "{case}: {mismatches} of {}",
            tile.len()
        );
    }
}

/// Every truncation of a real tile, whatever its filters, is a typed error.
#[test]
fn truncated_tiles_are_errors_not_panics() {
    for (case, file) in [
        ("filter_rle", "a0.tdb"),
        ("filter_rle_str", "a0_var.tdb"),
        ("filter_dictionary", "a0_var.tdb"),
        ("filter_double_delta", "a0.tdb"),
        ("filter_delta", "a0.tdb"),
        ("filter_bitshuffle", "a0.tdb"),
        ("filter_byteshuffle", "a0.tdb"),
        ("filter_bit_width_reduction", "a0.tdb"),
        ("filter_positive_delta", "a0.tdb"),
        ("filter_float_scale", "a0.tdb"),
        ("filter_xor", "a0.tdb"),
        ("filter_zstd", "a0.tdb"),
        ("filter_gzip", "a0.tdb"),
        ("filter_lz4", "a0.tdb"),
        ("filter_bzip2", "a0.tdb"),
        ("filter_chains_int", "a0.tdb"),
        ("filter_chains_float", "a0.tdb"),
        ("filter_webp", "a0.tdb"),
    ] {
        let (pipeline, datatype, version, tile) = first_tile(case, file);
        let var = file.ends_with("_var.tdb");
        let filters = TileFilters::new(&pipeline, datatype, datatype.size(), version);
        filters
            .unfilter_whole(case, &tile, var)
            .unwrap_or_else(|e| panic!("{e}"));
        for n in 0..tile.len() {
            assert!(
                filters.unfilter_whole(case, &tile[..n], var).is_err(),
                "{case}: {n} bytes"
            );
        }
        // The filters themselves meet short input when the framing is
        // patched to match: cut the first chunk's data or metadata.
        let (_, chunks) = tdb_tile::filtered_chunks(&tile).unwrap();
        for cut_metadata in [false, true] {
            let part = if cut_metadata {
                chunks[0].metadata
            } else {
                chunks[0].data
            };
            for n in 0..part.len() {
                let mut short = chunks.clone();
                if cut_metadata {
                    short[0].metadata = &part[..n];
                } else {
                    short[0].data = &part[..n];
                }
                let mut bytes = Vec::new();
                tdb_tile::write_filtered_chunks(short.into_iter(), &mut bytes).unwrap();
                let what = if cut_metadata { "metadata" } else { "data" };
                assert!(
                    filters.unfilter_whole(case, &bytes, var).is_err(),
                    "{case}: chunk 0 {what} cut to {n} bytes went unnoticed"
                );
            }
        }
    }
}
