//! tdb-format against every array and group real TileDB wrote in `testdata/`
//! (all format versions): every file is classified, every timestamped name and
//! generic tile header parses, parse/write pairs give back TileDB's bytes, and
//! what the names and headers say agrees with what TileDB reported
//! (`expected.json`).

use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use tdb_format::{
    classify, fragment_metadata_tiles, generic_tile_run, le, single_generic_tile, ObjectFile,
    TimestampedName,
};

use tdb_testdata::objects as all_objects;

#[test]
fn every_file_is_classified_and_every_name_parses() {
    let mut seen = 0;
    for obj in all_objects() {
        for path in &obj.files {
            let class = classify(path);
            assert_ne!(class, ObjectFile::Unknown, "{}: {path}", obj.case);
            if let Some(name) = class.timestamped_name() {
                // Display is the mirror of parse on TileDB's names.
                let written = name.to_string();
                assert!(path.contains(&written), "{}: {path} vs {written}", obj.case);
                seen += 1;
            }
        }
    }
    assert!(seen > 100);
}

/// `DataField::file_name` is the mirror of `classify` on every data file
/// TileDB wrote (by index, by name, legacy coordinates, var, validity).
#[test]
fn data_file_names_are_the_mirror_of_classify() {
    let mut seen = 0;
    for obj in all_objects() {
        for path in &obj.files {
            if let ObjectFile::Data { field, part, .. } = classify(path) {
                let file = path.rsplit('/').next().unwrap();
                assert_eq!(field.file_name(part), file, "{}: {path}", obj.case);
                seen += 1;
            }
        }
    }
    assert!(seen > 500, "{seen} data files");
}

#[test]
fn v8_names_are_percent_encoded_and_decode_back() {
    let v = |n| tdb_format::FormatVersion::new(n).unwrap();
    let named = tdb_format::DataField::named("a b/c%d", v(8));
    assert_eq!(named, tdb_format::DataField::Named("a b%2Fc%25d".into()));
    assert_eq!(named.decoded_name().as_deref(), Some("a b/c%d"));
    let plain = tdb_format::DataField::named("a/b", v(7));
    assert_eq!(plain, tdb_format::DataField::Named("a/b".into()));
}

/// Each generic tile, written back, equals TileDB's bytes; whole-tile files
/// are exactly one tile.
#[test]
fn generic_tiles_parse_and_write_back_exactly() {
    let mut tiles_seen = 0;
    for obj in all_objects() {
        for path in &obj.files {
            let class = classify(path);
            if !class.holds_generic_tiles() {
                continue;
            }
            let bytes = fs::read(obj.dir.join(path)).unwrap();
            let ctx = format!("{}: {path}", obj.case);
            let is_fragment_metadata = matches!(class, ObjectFile::FragmentMetadata { .. });
            let (tiles, rest) = class
                .generic_tiles(&bytes)
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert!(!tiles.is_empty(), "{ctx}: no generic tile");
            let mut again = Vec::new();
            for t in &tiles {
                assert_eq!(t.offset as usize, again.len(), "{ctx}");
                t.tile.write(&mut again).unwrap();
                assert_eq!(
                    t.tile.data.len() as u64,
                    t.tile.persisted_size(),
                    "{ctx}: persisted size"
                );
            }
            assert_eq!(
                &bytes[..again.len()],
                &again[..],
                "{ctx}: write(parse(b)) != b"
            );
            tiles_seen += tiles.len();
            if is_fragment_metadata {
                // Where the footer starts is checked against TileDB's fragment
                // info in `fragments_agree_with_tiledb`; here, a split that took
                // look-alike footer bytes for a tile of another version fails.
                let v = tiles[0].tile.header.version;
                assert!(tiles.iter().all(|t| t.tile.header.version == v), "{ctx}");
            } else {
                assert!(
                    rest.is_empty(),
                    "{ctx}: {} bytes after the tile",
                    rest.len()
                );
                single_generic_tile(&bytes).unwrap();
            }
        }
    }
    assert!(tiles_seen > 500, "{tiles_seen}");
}

/// The footer's leading fields, read where `fragment_metadata_tiles` says the
/// footer starts: (schema name from v10, dense flag).
fn footer_head(footer: &[u8], version: u32) -> (Option<String>, bool) {
    let (_, mut rest) = le::run(le::u32("version"), footer).unwrap();
    let mut schema = None;
    if version >= 10 {
        let (name, r) = le::run(le::bytes_u64("schema name"), rest).unwrap();
        schema = Some(String::from_utf8(name.to_vec()).unwrap());
        rest = r;
    }
    let (dense, _) = le::run(le::bool("dense"), rest).unwrap();
    (schema, dense)
}

/// Fragment names and metadata headers agree with TileDB's fragment info.
#[test]
fn fragments_agree_with_tiledb() {
    let mut checked = 0;
    for obj in all_objects() {
        let Some(expected) = &obj.expected else {
            continue;
        };
        let Some(frags) = expected["fragments"].as_array() else {
            continue;
        };
        type Seen = (TimestampedName, u32, Option<(Option<String>, bool)>);
        let mut on_disk: BTreeMap<String, Seen> = BTreeMap::new();
        for path in &obj.files {
            if let ObjectFile::FragmentMetadata { fragment, .. } = classify(path) {
                let bytes = fs::read(obj.dir.join(path)).unwrap();
                let (tiles, footer) = fragment_metadata_tiles(&bytes).unwrap();
                let header_version = tiles[0].tile.header.version.get();
                if let Some(v) = fragment.version {
                    assert_eq!(v, header_version, "{}: {path}", obj.case);
                }
                let head = (header_version >= 3).then(|| footer_head(footer, header_version));
                on_disk.insert(fragment.to_string(), (fragment, header_version, head));
            }
        }
        for f in frags {
            let name = f["name"].as_str().unwrap();
            let (parsed, version, head) = on_disk
                .get(name)
                .unwrap_or_else(|| panic!("{}: fragment {name} not on disk", obj.case));
            let range: Vec<u64> = f["timestamp_range"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(vec![parsed.t1, parsed.t2], range, "{}: {name}", obj.case);
            assert_eq!(
                u64::from(*version),
                f["format_version"].as_u64().unwrap(),
                "{}",
                obj.case
            );
            if let Some((schema, dense)) = head {
                assert_eq!(
                    *dense,
                    !f["sparse"].as_bool().unwrap(),
                    "{}: {name} dense",
                    obj.case
                );
                if let Some(schema) = schema {
                    assert_eq!(
                        schema,
                        f["array_schema_name"].as_str().unwrap(),
                        "{}",
                        obj.case
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "{checked}");
}

/// The versions in schema headers are among those TileDB reported.
#[test]
fn schema_versions_agree_with_tiledb() {
    let mut checked = 0;
    for obj in all_objects() {
        let Some(expected) = &obj.expected else {
            continue;
        };
        let Some(want) = expected["schema"]["schema_format_version"].as_u64() else {
            continue;
        };
        let mut schemas: Vec<(TimestampedName, u32)> = Vec::new();
        for path in &obj.files {
            let class = classify(path);
            let name = match &class {
                ObjectFile::Schema(n) => n.clone(),
                ObjectFile::LegacySchema => {
                    TimestampedName::parse(&format!("__0_0_{}", "0".repeat(32))).unwrap()
                }
                _ => continue,
            };
            let bytes = fs::read(obj.dir.join(path)).unwrap();
            schemas.push((
                name,
                single_generic_tile(&bytes).unwrap().header.version.get(),
            ));
        }
        schemas.sort();
        let latest = schemas
            .last()
            .unwrap_or_else(|| panic!("{}: no schema", obj.case))
            .1;
        assert_eq!(u64::from(latest), want, "{}", obj.case);
        checked += 1;
    }
    assert!(checked > 180, "only {checked} arrays");
}

/// Every prefix of real files is a typed error, never a panic.
#[test]
fn truncated_real_files_are_errors() {
    let objs = all_objects();
    let mut done = 0;
    for obj in objs.iter().filter(|o| {
        o.case.ends_with("sparse_string_dim")
            || o.case.contains("legacy/1.5.0/dense")
            || o.case.ends_with("encrypted_aes256")
            || o.case.ends_with("metadata_types")
    }) {
        for path in &obj.files {
            let class = classify(path);
            if !class.holds_generic_tiles() {
                continue;
            }
            let bytes = fs::read(obj.dir.join(path)).unwrap();
            let (tiles, _) = generic_tile_run(&bytes);
            let first_len = tiles[0].tile.encoded_len() as usize;
            for n in 0..first_len {
                assert!(
                    single_generic_tile(&bytes[..n]).is_err(),
                    "{}: {path}[..{n}]",
                    obj.case
                );
                assert!(
                    generic_tile_run(&bytes[..n]).0.is_empty(),
                    "{}: {path}[..{n}]",
                    obj.case
                );
            }
            if matches!(class, ObjectFile::FragmentMetadata { .. }) {
                // No panic on any cut. (A cut inside the footer can end on
                // bytes that pass for a footer length; only parsing the footer
                // with the schema, in tdb-fragment, can tell.)
                let accepted =
                    (0..bytes.len()).filter(|&n| fragment_metadata_tiles(&bytes[..n]).is_ok());
                assert!(accepted.count() < bytes.len() / 20, "{}: {path}", obj.case);
            }
            done += 1;
        }
        for path in &obj.files {
            for cut in 0..path.len() {
                let _ = classify(&path[..cut]);
                let _ = TimestampedName::parse(&path[..cut]);
            }
        }
    }
    assert!(done >= 4, "{done}");
}

/// Garbage never panics and never reads beyond its input.
#[test]
fn garbage_is_an_error() {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for len in 0..300usize {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        assert!(
            generic_tile_run(&bytes).0.is_empty(),
            "{len} bytes of garbage"
        );
        assert!(
            single_generic_tile(&bytes).is_err(),
            "{len} bytes of garbage"
        );
    }
}

/// TileDB's names for datatypes, filters, layouts and array types, as its
/// schema summaries spell them, are the names tdb-format knows.
#[test]
fn tiledb_names_are_known() {
    use tdb_format::{ArrayType, CurrentDomainType, Datatype, FilterType, Layout};
    fn filters(list: &Value, seen: &mut usize) {
        for f in list["filters"].as_array().into_iter().flatten() {
            let name = f["type"].as_str().unwrap();
            FilterType::from_name(name).unwrap_or_else(|e| panic!("{e}"));
            *seen += 1;
        }
    }
    let mut filters_seen = 0;
    let mut types = std::collections::BTreeSet::new();
    for obj in all_objects() {
        let Some(schema) = obj.expected.as_ref().map(|e| &e["schema"]) else {
            continue;
        };
        if schema.is_null() {
            continue;
        }
        ArrayType::from_name(schema["array_type"].as_str().unwrap()).unwrap();
        Layout::from_name(schema["cell_order"].as_str().unwrap()).unwrap();
        if let Some(t) = schema["tile_order"].as_str() {
            Layout::from_name(t).unwrap();
        }
        for key in ["coords_filters", "offsets_filters", "validity_filters"] {
            filters(&schema[key], &mut filters_seen);
        }
        for field in schema["dims"]
            .as_array()
            .unwrap()
            .iter()
            .chain(schema["attrs"].as_array().unwrap())
        {
            let dt = Datatype::from_name(field["datatype"].as_str().unwrap()).unwrap();
            types.insert(dt);
            filters(&field["filters"], &mut filters_seen);
        }
        if let Some(t) = schema["current_domain"]["type"].as_str() {
            CurrentDomainType::from_name(t).unwrap();
        }
    }
    assert!(filters_seen > 500, "{filters_seen}");
    assert!(types.len() >= 30, "{types:?}");
}
