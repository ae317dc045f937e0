//! Fragment metadata on every TileDB-written fixture (every format version,
//! encrypted arrays and group members included): footers and legacy
//! metadata parse to what TileDB's fragment info reports, sizes and tile
//! offsets match the data files, v22 footers and sections write back byte
//! for byte, and damaged bytes give typed errors.

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use tdb_format::{classify, DataPart, FormatVersion, ObjectFile, Scalar, TimestampedName};
use tdb_fragment::fragment_metadata::{
    ConsolidatedFragmentMeta, Footer, FooterRead, FragmentMetadata, LegacyMetadata, Section,
    SectionData,
};
use tdb_schema::{ArraySchema, Range, SchemaEntry};
use tdb_testdata::{objects, Object};

struct Fragment {
    /// Directory relative to the object (`__fragments/<name>` or `<name>`).
    dir: String,
    name: TimestampedName,
    /// Footer field index → (part → file) for its data files.
    files: Vec<(DataPart, tdb_format::DataField, String)>,
}

struct Array {
    obj: Object,
    schemas: HashMap<String, ArraySchema>,
    fragments: Vec<Fragment>,
}

fn arrays() -> Vec<Array> {
    let mut out = Vec::new();
    for obj in objects() {
        let mut schemas = HashMap::new();
        let mut fragments: BTreeMap<String, Fragment> = BTreeMap::new();
        for f in &obj.files {
            match classify(f) {
                ObjectFile::LegacySchema | ObjectFile::Schema(_) => {
                    let name = f.rsplit('/').next().unwrap();
                    let e = SchemaEntry::from_file(name, &obj.read(f), obj.key.as_ref())
                        .unwrap_or_else(|e| panic!("{}: {f}: {e}", obj.case));
                    schemas.insert(e.name.clone(), e.schema);
                }
                ObjectFile::FragmentMetadata { fragment, .. } => {
                    let dir = f.rsplit_once('/').unwrap().0.to_owned();
                    fragments.entry(dir.clone()).or_insert(Fragment {
                        dir,
                        name: fragment,
                        files: Vec::new(),
                    });
                }
                _ => {}
            }
        }
        for f in &obj.files {
            if let ObjectFile::Data { field, part, .. } = classify(f) {
                let dir = f.rsplit_once('/').unwrap().0;
                if let Some(fr) = fragments.get_mut(dir) {
                    fr.files.push((part, field, f.clone()));
                }
            }
        }
        if !schemas.is_empty() {
            out.push(Array {
                obj,
                schemas,
                fragments: fragments.into_values().collect(),
            });
        }
    }
    out
}

fn file_size(obj: &Object, rel: &str) -> u64 {
    std::fs::metadata(obj.dir.join(rel)).unwrap().len()
}

/// Parses a v3+ footer the way a reader would: one suffix read, and a
/// second when the first guess was short.
fn read_footer(a: &Array, fr: &Fragment, bytes: &[u8]) -> tdb_fragment::Result<Footer> {
    let lookup = |n: &str| a.schemas.get(n);
    let legacy = a.schemas.get(tdb_schema::LEGACY_SCHEMA_NAME);
    let latest = a.schemas.values().next().unwrap();
    let version = fr.name.implied_format_version();
    let first = Footer::suffix_to_read(legacy.unwrap_or(latest), version).min(bytes.len() as u64);
    let name = fr.name.to_string();
    let mut suffix = &bytes[bytes.len() - first as usize..];
    for _ in 0..2 {
        match Footer::parse(suffix, bytes.len() as u64, &lookup, version, &name)? {
            FooterRead::Done(f) => return Ok(f),
            FooterRead::NeedMore(n) => suffix = &bytes[bytes.len() - n as usize..],
        }
    }
    panic!("{name}: footer still short after a second read");
}

fn json_matches(v: &Value, s: Scalar) -> bool {
    match s {
        Scalar::Int(i) => v.as_i64() == Some(i),
        Scalar::UInt(u) => v.as_u64() == Some(u),
        Scalar::Float(f) => v.as_f64() == Some(f),
        Scalar::Bool(b) => v.as_bool() == Some(b),
    }
}

fn check_domain(case: &str, schema: &ArraySchema, nd: &[Range], expected: &Value) {
    let exp = expected.as_array().unwrap();
    assert_eq!(exp.len(), nd.len(), "{case}");
    for ((r, e), dim) in nd.iter().zip(exp).zip(&schema.domain.dimensions) {
        let (lo, hi) = r.bounds();
        match r {
            Range::Fixed(_) => {
                let lo = Scalar::decode(dim.datatype, lo).unwrap();
                let hi = Scalar::decode(dim.datatype, hi).unwrap();
                assert!(
                    json_matches(&e[0], lo) && json_matches(&e[1], hi),
                    "{case}: domain {e} vs {lo} {hi}"
                );
            }
            Range::Var { .. } => {
                assert_eq!(e[0].as_str().unwrap().as_bytes(), lo, "{case}");
                assert_eq!(e[1].as_str().unwrap().as_bytes(), hi, "{case}");
            }
        }
    }
}

/// Loads a fragment's metadata (any era) with every section it has.
fn load(a: &Array, fr: &Fragment) -> (FragmentMetadata, Vec<u8>) {
    let meta_file = format!("{}/__fragment_metadata.tdb", fr.dir);
    let bytes = a.obj.read(&meta_file);
    let case = &a.obj.case;
    let key = a.obj.key.as_ref();
    if fr.name.implied_format_version() <= 2 {
        let schema = &a.schemas[tdb_schema::LEGACY_SCHEMA_NAME];
        let dense = !a.obj.files.contains(&format!("{}/__coords.tdb", fr.dir));
        let legacy = LegacyMetadata::parse(&bytes, schema, dense, key, &fr.name.to_string())
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        return (
            FragmentMetadata::from_legacy(fr.name.clone(), legacy),
            bytes,
        );
    }
    let footer = read_footer(a, fr, &bytes).unwrap_or_else(|e| panic!("{case}: {}: {e:?}", fr.dir));
    let schema = &a.schemas[&footer.array_schema_name];
    let mut meta = FragmentMetadata::new(fr.name.clone(), footer.clone());
    for s in footer.sections() {
        let r = footer
            .section_range(s, &fr.name.to_string())
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        meta.load_section(s, &bytes[r.start as usize..r.end as usize], key, schema)
            .unwrap_or_else(|e| panic!("{case}: {}: {e:?}", fr.dir));
    }
    (meta, bytes)
}

#[test]
fn every_fragment_matches_fragment_info_and_its_data_files() {
    let mut seen_versions = std::collections::BTreeSet::new();
    let mut fragments = 0;
    for a in arrays() {
        let case = &a.obj.case;
        for fr in &a.fragments {
            let (meta, _) = load(&a, fr);
            let footer = &meta.footer;
            seen_versions.insert(footer.version);
            fragments += 1;
            let schema = &a.schemas[&footer.array_schema_name];
            if let Some(exp) = a.obj.expected.as_ref().and_then(|e| {
                e["fragments"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|f| f["name"] == fr.name.to_string())
                    .cloned()
            }) {
                assert_eq!(
                    Some(footer.version as u64),
                    exp["format_version"].as_u64(),
                    "{case}"
                );
                assert_eq!(footer.array_schema_name, exp["array_schema_name"], "{case}");
                assert_eq!(!footer.dense, exp["sparse"].as_bool().unwrap(), "{case}");
                assert_eq!(
                    meta.cell_num(schema),
                    exp["cell_num"].as_u64(),
                    "{case}: {}",
                    fr.dir
                );
                check_domain(
                    case,
                    schema,
                    footer.non_empty_domain.as_ref().unwrap(),
                    &exp["nonempty_domain"],
                );
            }
            // Sizes and tiles of every data file.
            for (part, field, path) in &fr.files {
                let (field, part) = schema.data_file(field.clone(), *part);
                let (field, part) = (&field, &part);
                let idx = footer
                    .data_field_index(field, schema)
                    .unwrap_or_else(|| panic!("{case}: {path}: no field"));
                let size = file_size(&a.obj, path);
                let data = a.obj.read(path);
                let section = match part {
                    DataPart::Fixed => Section::TileOffsets(idx),
                    DataPart::Var => Section::VarOffsets(idx),
                    DataPart::Validity => Section::ValidityOffsets(idx),
                };
                assert_eq!(footer.file_size(idx, *part), Some(size), "{case}: {path}");
                let Some(SectionData::U64s(offsets)) = meta.section(section) else {
                    panic!("{case}: {path}: {section:?} not loaded")
                };
                assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{case}: {path}");
                for t in 0..offsets.len() as u64 {
                    let r = match part {
                        DataPart::Fixed => meta.tile_range(idx, t),
                        DataPart::Var => meta.var_tile_range(idx, t),
                        DataPart::Validity => meta.validity_tile_range(idx, t),
                    }
                    .unwrap_or_else(|e| panic!("{case}: {path}: {e}"));
                    let tile = &data[r.start as usize..r.end as usize];
                    let (rest, _) = tdb_tile::filtered_chunks(tile)
                        .unwrap_or_else(|e| panic!("{case}: {path}: tile {t}: {e:?}"));
                    assert!(
                        rest.is_empty(),
                        "{case}: {path}: tile {t} has trailing bytes"
                    );
                }
            }
        }
    }
    for v in 2..=22 {
        assert!(seen_versions.contains(&v), "no fragment of version {v}");
    }
    assert!(fragments > 150, "{fragments}");
}

#[test]
fn v22_footers_and_sections_write_back_byte_for_byte() {
    let mut footers = 0;
    let mut sections = 0;
    for a in arrays() {
        let case = &a.obj.case;
        for fr in &a.fragments {
            if fr.name.implied_format_version() <= 2 {
                continue;
            }
            let (meta, bytes) = load(&a, fr);
            let footer = &meta.footer;
            let schema = &a.schemas[&footer.array_schema_name];
            let written = footer.write(schema);
            if footer.version == 22 {
                assert!(bytes.ends_with(&written), "{case}: {}: footer", fr.dir);
                footers += 1;
            } else {
                // Older footers mirror too, length field included or not.
                assert!(
                    bytes.ends_with(&written),
                    "{case}: {}: v{} footer",
                    fr.dir,
                    footer.version
                );
            }
            let version = FormatVersion::new(footer.version).unwrap();
            for s in footer.sections() {
                let data = meta.section(s).unwrap();
                let r = footer.section_range(s, &fr.name.to_string()).unwrap();
                let original = &bytes[r.start as usize..r.end as usize];
                assert_eq!(
                    SectionData::parse(s, &data.write_content(), footer.fields().len(), "x")
                        .unwrap(),
                    *data
                );
                // The parser's mirror: TileDB's unfiltered bytes exactly.
                let (tile, _) = tdb_format::le::run(tdb_format::generic_tile, original).unwrap();
                let content = tdb_tile::read_generic_tile("x", &tile, a.obj.key.as_ref()).unwrap();
                assert!(data.write_content() == content, "{case}: {}: {s:?}", fr.dir);
                if footer.version == 22 && a.obj.key.is_none() {
                    // Whole tiles byte for byte: header, pipeline and the
                    // deflate stream (zlib level 1, as TileDB's).
                    let w = data.write(version, None, &fr.name.to_string()).unwrap();
                    let (mine, _) = tdb_format::le::run(tdb_format::generic_tile, &w).unwrap();
                    assert_eq!(mine.header, tile.header, "{case}: {s:?}");
                    assert_eq!(mine.filter_pipeline, tile.filter_pipeline, "{case}: {s:?}");
                    assert!(
                        w[..] == original[..w.len().min(original.len())],
                        "{case}: {s:?}"
                    );
                    sections += 1;
                } else if a.obj.key.is_some() {
                    let w = data.write(version, a.obj.key.as_ref(), "x").unwrap();
                    let back = footer
                        .read_section(s, &w, a.obj.key.as_ref(), schema, "x")
                        .unwrap();
                    assert_eq!(&back, data, "{case}: encrypted {s:?}");
                }
            }
        }
    }
    assert!(
        footers > 50 && sections > 500,
        "{footers} footers, {sections} sections"
    );
}

#[test]
fn consolidated_fragment_metadata_parses_and_writes_back() {
    let a = arrays()
        .into_iter()
        .find(|a| a.obj.case == "consolidated_fragment_meta")
        .unwrap();
    let lookup = |n: &str| a.schemas.get(n);
    let meta_file = a.obj.files.iter().find(|f| f.ends_with(".meta")).unwrap();
    let bytes = a.obj.read(meta_file);
    let c = ConsolidatedFragmentMeta::parse(&bytes, None, &lookup, meta_file).unwrap();
    assert_eq!(c.entries.len(), 4);
    for e in &c.entries {
        let fr = a
            .fragments
            .iter()
            .find(|f| f.name.to_string() == e.fragment_name())
            .unwrap();
        let (meta, own) = load(&a, fr);
        let mut footer = e.footer.clone();
        footer.locate(own.len() as u64);
        assert_eq!(footer, meta.footer, "{}", e.stored_name);
    }
    let tile = tdb_format::single_generic_tile(&bytes).unwrap();
    let content = tdb_tile::read_generic_tile("x", &tile, None).unwrap();
    assert!(c.write_content(&lookup, meta_file).unwrap() == content);
    let written = c
        .write(FormatVersion::new(22).unwrap(), None, &lookup, meta_file)
        .unwrap();
    let mine = tdb_format::single_generic_tile(&written).unwrap();
    assert_eq!(
        (mine.header, mine.filter_pipeline),
        (tile.header, tile.filter_pipeline)
    );
    let back = ConsolidatedFragmentMeta::parse(&written, None, &lookup, meta_file).unwrap();
    assert_eq!(back, c);
}

#[test]
fn damaged_footers_give_errors_naming_the_fragment() {
    let mut checked = std::collections::BTreeSet::new();
    for a in arrays() {
        for fr in &a.fragments {
            let v = fr.name.implied_format_version();
            if v <= 2 || !checked.insert((v, a.obj.key.is_some(), a.obj.case.contains("string"))) {
                continue;
            }
            let name = fr.name.to_string();
            let bytes = a.obj.read(&format!("{}/__fragment_metadata.tdb", fr.dir));
            let footer = read_footer(&a, fr, &bytes).unwrap();
            let lookup = |n: &str| a.schemas.get(n);
            let tail = (footer.size + if footer.has_length { 8 } else { 0 }) as usize;
            // Every truncation of the file inside the footer.
            for cut in bytes.len() - tail..bytes.len() {
                let short = &bytes[..cut];
                match Footer::parse(short, cut as u64, &lookup, v, &name) {
                    Err(e) => assert!(format!("{e}").contains(&name), "{e}"),
                    Ok(FooterRead::NeedMore(n)) => assert!(n > cut as u64),
                    Ok(FooterRead::Done(_)) => {}
                }
            }
            // Every bit of the length field (and of the schema name size).
            let mut fields = Vec::new();
            if footer.has_length {
                fields.extend(bytes.len() - 8..bytes.len());
            }
            if footer.version >= 10 {
                let start = bytes.len() - tail;
                fields.extend(start + 4..start + 12);
            }
            for at in fields {
                for bit in 0..8 {
                    let mut b = bytes.clone();
                    b[at] ^= 1 << bit;
                    let r = Footer::parse(&b, b.len() as u64, &lookup, v, &name);
                    let e = r.expect_err("a flipped length must not parse");
                    assert!(format!("{e}").contains(&name), "{e}");
                }
            }
            // Truncated and miscounted sections.
            let schema = &a.schemas[&footer.array_schema_name];
            for s in footer.sections() {
                let r = footer.section_range(s, &name).unwrap();
                let sec = &bytes[r.start as usize..r.end as usize];
                let (tile, _) = tdb_format::le::run(tdb_format::generic_tile, sec).unwrap();
                let len = tile.encoded_len() as usize;
                for cut in [0, 1, 8, 33, 40, len / 2, len - 1] {
                    let e = footer
                        .read_section(s, &sec[..cut], a.obj.key.as_ref(), schema, &name)
                        .expect_err("truncated section");
                    assert!(format!("{e}").contains(&name), "{e}");
                }
                let content = footer
                    .read_section(s, sec, a.obj.key.as_ref(), schema, &name)
                    .unwrap()
                    .write_content();
                if content.len() >= 8 && s != Section::RTree {
                    for bad in [u64::MAX, u64::MAX / 8 + 1, content.len() as u64] {
                        let mut c = content.clone();
                        c[..8].copy_from_slice(&bad.to_le_bytes());
                        let e = SectionData::parse(s, &c, footer.fields().len(), &name)
                            .expect_err("bad count");
                        assert!(format!("{e}").contains(&name), "{e}");
                    }
                }
            }
        }
    }
    assert!(checked.len() > 20, "{checked:?}");
}

#[test]
fn v23_optional_sections_parse_and_unknown_ones_are_skipped() {
    use tdb_fragment::fragment_metadata::OptionalSection;
    let a = arrays()
        .into_iter()
        .find(|a| a.obj.case == "sparse_2d_int")
        .unwrap();
    let fr = &a.fragments[0];
    let (meta, _) = load(&a, fr);
    let schema = &a.schemas[&meta.footer.array_schema_name];
    let mut f = meta.footer.clone();
    f.version = 23;
    let d = f.dim_num;
    f.optional_sections = vec![
        OptionalSection::Unknown {
            id: 7,
            data: vec![1, 2, 3],
        },
        OptionalSection::TileGlobalOrder {
            mins: (0..d as u64).map(|i| 1000 + i).collect(),
            maxes: (0..d as u64).map(|i| 2000 + i).collect(),
        },
    ];
    let mut file = vec![0u8; 64];
    file.extend(f.write(schema));
    let lookup = |n: &str| a.schemas.get(n);
    let FooterRead::Done(back) =
        Footer::parse(&file, file.len() as u64, &lookup, 23, "frag").unwrap()
    else {
        panic!("short")
    };
    assert_eq!(back.optional_sections, f.optional_sections);
    let (mins, maxes) = back.tile_global_order_offsets().unwrap();
    assert_eq!((mins[0], maxes[d - 1]), (1000, 2000 + d as u64 - 1));
    assert!(back.sections().contains(&Section::GlobalOrderMaxes(d - 1)));
    // A global order section of the wrong size is refused.
    let mut bad = f.clone();
    bad.optional_sections = vec![OptionalSection::TileGlobalOrder {
        mins: vec![1],
        maxes: vec![],
    }];
    let mut file = vec![0u8; 64];
    file.extend(bad.write(schema));
    let e = Footer::parse(&file, file.len() as u64, &lookup, 23, "frag").unwrap_err();
    assert!(e.to_string().contains("frag"), "{e}");
}
