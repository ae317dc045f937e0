//! Every tile real TileDB wrote in `testdata/` (all format versions)
//! unfilters: every generic tile, and every tile of every data file, with
//! the pipelines of the schema each fragment was written under. Where the
//! pipeline is deterministic (no general-purpose compressor, no WebP, no
//! encryption), filtering the unfiltered tile again gives TileDB's exact
//! bytes, chunking included; elsewhere it unfilters to the same tile.

use std::collections::BTreeMap;
use tdb_filters::{Filter, FilterPipeline, Workspace};
use tdb_format::{classify, DataPart, Datatype, FormatVersion, ObjectFile, TimestampedName};
use tdb_schema::{ArraySchema, SchemaHistory};
use tdb_storage::LocalStorage;
use tdb_testdata::Object;
use tdb_tile::{read_generic_tile, write_generic_tile, TileData, TileFilters};

#[test]
fn every_generic_tile_unfilters() {
    let (mut seen, mut exact) = (0, 0);
    for obj in tdb_testdata::objects() {
        for rel in &obj.files {
            let class = classify(rel);
            if !class.holds_generic_tiles() {
                continue;
            }
            let bytes = obj.read(rel);
            let (tiles, _) = class.generic_tiles(&bytes).unwrap();
            for t in tiles {
                let at = format!("{}: {rel} @{}", obj.case, t.offset);
                let data = read_generic_tile(&at, &t.tile, obj.key.as_ref())
                    .unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(data.len() as u64, t.tile.header.tile_size, "{at}");
                // Written again, it reads back; unencrypted, every tile of
                // every TileDB release comes back byte for byte (TileDB
                // deflates with zlib at level 1, as tdb does).
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
                let original =
                    &bytes[t.offset as usize..][..again.len().min(bytes.len() - t.offset as usize)];
                if obj.key.is_none() {
                    assert!(again == original, "{at}: not TileDB's bytes");
                    exact += 1;
                }
                seen += 1;
            }
        }
    }
    assert!(
        seen > 500 && exact > 5000,
        "{seen} tiles, {exact} byte-exact"
    );
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
    assert!(chain_text(&missing).contains("no key"), "{missing}");
    let wrong = read_generic_tile(rel, &tile, Some(&[7; 32])).unwrap_err();
    assert!(chain_text(&wrong).contains("authentication"), "{wrong}");
}

/// An error's message and its causes', one per line.
fn chain_text(error: &dyn std::error::Error) -> String {
    std::iter::successors(Some(error), |&e| e.source())
        .map(|e| format!("{e}\n"))
        .collect()
}

/// The schema a fragment was written under: the one its metadata names
/// (TileDB's fragment info in expected.json), else, for group members that
/// expected.json does not detail, the one in force at its timestamp.
fn fragment_schema<'h>(
    obj: &Object,
    history: &'h SchemaHistory,
    fragment: &TimestampedName,
) -> &'h ArraySchema {
    let name = fragment.to_string();
    let named = obj.expected.as_ref().and_then(|e| {
        e["fragments"]
            .as_array()?
            .iter()
            .find(|f| f["name"] == name.as_str())?["array_schema_name"]
            .as_str()
    });
    match named {
        Some(n) => {
            &history
                .by_name(n)
                .unwrap_or_else(|| panic!("{}: {n}", obj.case))
                .schema
        }
        None => &history.at(fragment.timestamp_range().1).schema,
    }
}

fn history(obj: &Object) -> Option<SchemaHistory> {
    let has_schema = obj
        .files
        .iter()
        .any(|f| f.starts_with("__schema/") || f == "__array_schema.tdb");
    has_schema.then(|| {
        tdb_fragment::load_schemas(&LocalStorage::new(&obj.dir), "", obj.key.as_ref())
            .unwrap_or_else(|e| panic!("{}: {e}", obj.case))
    })
}

fn deterministic(p: &FilterPipeline) -> bool {
    !p.filters.iter().any(|f| {
        // GZIP is in: tdb deflates with zlib at TileDB's level, so its
        // streams are TileDB's.
        matches!(
            f,
            Filter::Zstd { .. }
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
    // One workspace for every tile of every fixture, as a writer's thread
    // keeps one: no codec state may leak from one tile to the next.
    let mut ws = Workspace::default();
    let mut stats: BTreeMap<&str, usize> = BTreeMap::new();
    for obj in tdb_testdata::objects() {
        let Some(history) = history(&obj) else {
            continue; // a group
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
            let schema = fragment_schema(&obj, &history, &fragment);
            let version = schema.version;
            let (which, part) = schema.data_file(which, part);
            let f = schema
                .part_filters(&which, part, obj.key.is_some())
                .unwrap_or_else(|| panic!("{}: {rel}: no such field or part", obj.case));
            let at = format!("{}: {rel}", obj.case);
            let bytes = obj.read(rel);
            let key = (fragment.to_string(), format!("{which:?}"));
            let var_field = f.field_cell_size.is_none();
            let cell_size = f.cell_size;
            let filters = f.tile_filters(version, obj.key.as_ref());
            if f.pipeline
                .filters
                .iter()
                .any(|f| matches!(f, Filter::Webp { .. }))
            {
                // Not byte-exact (tdb's lossless encoder is not libwebp):
                // checked below by a forward round trip.
                *stats.entry("webp tiles").or_default() += 1;
            }
            // Offsets inside the data tile: the var part's pipeline decides.
            let offsets_inside = var_field
                && schema
                    .part_filters(&which, DataPart::Var, false)
                    .is_some_and(|v| v.pipeline.skip_offsets_filtering(v.datatype, version));
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
                    .filter(&at, &mut ws, data, offsets, &mut again)
                    .unwrap_or_else(|e| panic!("{e}"));
                // TileDB 1.4 (format v1) cut tiles into smaller chunks than
                // any later writer; tdb writes v22 only.
                if deterministic(&f.pipeline) && version.get() > 1 {
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
    assert!(stats["tiles"] >= 1800, "{stats:?}");
    assert!(stats["byte-exact tiles"] >= 440, "{stats:?}");
}

/// The first tile of the first data file of `case`, with its filters.
fn first_tile(case: &str, file: &str) -> (FilterPipeline, Datatype, FormatVersion, Vec<u8>) {
    let obj = tdb_testdata::objects()
        .into_iter()
        .find(|o| o.case == case)
        .unwrap();
    let rel = obj.files.iter().find(|f| f.ends_with(file)).unwrap();
    let ObjectFile::Data {
        field: which, part, ..
    } = classify(rel)
    else {
        panic!("{rel}")
    };
    let history = history(&obj).unwrap();
    let schema = &history.latest().schema;
    let f = schema.part_filters(&which, part, false).unwrap();
    let bytes = obj.read(rel);
    let (chunks, rest) = tdb_format::le::run(tdb_tile::filtered_chunks, &bytes).unwrap();
    assert!(!chunks.is_empty());
    let len = bytes.len() - rest.len();
    (
        f.pipeline,
        f.datatype,
        schema.version,
        bytes[..len].to_vec(),
    )
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
            mismatches += chain_text(&err).contains("checksum mismatch") as usize;
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
