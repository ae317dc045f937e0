//! The targets and their seeds. A target calls the crate's own parser or
//! decoder, as a read would; where a parse succeeds it also runs what a
//! read does next with the value (a writer that mirrors the parser, the
//! sections a footer points to), since a value a parser accepted is input
//! to those too.

use crate::context::{all_files, cases, select, selector, Case};
use crate::Target;
use std::sync::OnceLock;
use tdb::{Array, MemoryStorage, ReadSpec};
use tdb_filters::FilterPipeline;
use tdb_format::{classify, DataPart, FormatVersion, ObjectFile};
use tdb_fragment::fragment_metadata::{
    ConsolidatedFragmentMeta, Footer, FooterRead, LegacyMetadata, SectionData,
};
use tdb_fragment::{
    ConsolidatedCommits, DeleteCommit, GroupDetails, IgnoreFile, MetadataFile, UpdateCommit,
    VacuumFile,
};
use tdb_schema::{ArraySchema, Enumeration, PartFilters};

/// Every target, in the order `cargo xtask fuzz` runs them.
pub(crate) const ALL: &[Target] = &[
    Target {
        name: "generic_tile",
        about: "a file that is one generic tile (header, filter pipeline, chunks, filters)",
        run: generic_tile,
        seeds: generic_tile_seeds,
    },
    Target {
        name: "filter_pipeline",
        about: "[format version][a serialized filter pipeline]; what parses must write, parse and write again the same bytes",
        run: filter_pipeline,
        seeds: filter_pipeline_seeds,
    },
    Target {
        name: "tile",
        about: "[field of a fixture: 2 bytes][one filtered data tile] unfiltered with that field's pipeline, datatype and key",
        run: tile,
        seeds: tile_seeds,
    },
    Target {
        name: "schema",
        about: "[0: schema, 1: enumeration][a generic tile's unfiltered content]; what parses is written again",
        run: schema,
        seeds: schema_seeds,
    },
    Target {
        name: "commits",
        about: "[0: .con, 1: .ign, 2: .vac, 3: delete, 4: update][the file, or a condition tile's content]",
        run: commits,
        seeds: commits_seeds,
    },
    Target {
        name: "metadata",
        about: "[0: array or group metadata, 1: group details][a generic tile's unfiltered content]",
        run: metadata,
        seeds: metadata_seeds,
    },
    Target {
        name: "fragment_metadata",
        about: "[fragment metadata file of a fixture: 2 bytes][a __fragment_metadata.tdb or .meta file]: footer, then every section it points to, R-tree included",
        run: fragment_metadata,
        seeds: fragment_metadata_seeds,
    },
    Target {
        name: "condition",
        about: "[fixture array: 2 bytes][query condition text], parsed against the array's schema and, where it parses, read with",
        run: condition,
        seeds: condition_seeds,
    },
    Target {
        name: "array",
        about: "[file of a fixture: 2 bytes][new contents of that file]: the array opened and every field read under a budget",
        run: array,
        seeds: array_seeds,
    },
];

const LOCATION: &str = "fuzz";

/// Budget of the reads targets make: small, so a read is cut into pieces.
const BUDGET: u64 = 16 << 20;

/// Batches a read takes: a mutated domain can make a dense read of fill
/// endless, and a few batches show whether reading works.
const BATCHES: usize = 3;

fn generic_tile(data: &[u8]) -> bool {
    tdb_tile::read_generic_tile_file(LOCATION, data, None).is_ok()
}

fn generic_tile_seeds() -> Vec<Vec<u8>> {
    tile_files(|kind| {
        kind.holds_generic_tiles() && !matches!(kind, ObjectFile::FragmentMetadata { .. })
    })
    .filter(|(case, _, _)| case.key.is_none())
    .map(|(_, _, bytes)| bytes.to_vec())
    .collect()
}

fn filter_pipeline(data: &[u8]) -> bool {
    let Some((&v, rest)) = data.split_first() else {
        return false;
    };
    let Ok(version) = FormatVersion::new(1 + u32::from(v) % FormatVersion::MAX.get()) else {
        return false;
    };
    let Ok(pipeline) = FilterPipeline::parse(rest, version) else {
        return false;
    };
    let mut out = Vec::new();
    pipeline.write(version, &mut out);
    let again = FilterPipeline::parse(&out, version)
        .unwrap_or_else(|e| panic!("a written pipeline does not parse: {e}"));
    // Compared as bytes: a float scale may be NaN, which equals nothing.
    let mut out_again = Vec::new();
    again.write(version, &mut out_again);
    assert_eq!(out_again, out, "a pipeline written and parsed back differs");
    true
}

fn filter_pipeline_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for schema in cases().iter().filter_map(|c| c.schema.as_ref()) {
        let pipelines = [
            &schema.coords_filters,
            &schema.offsets_filters,
            &schema.validity_filters,
        ]
        .into_iter()
        .chain(schema.attributes.iter().map(|a| &a.filters))
        .chain(schema.domain.dimensions.iter().map(|d| &d.filters));
        for p in pipelines {
            let mut seed = vec![(schema.version.get() - 1) as u8];
            p.write(schema.version, &mut seed);
            seeds.push(seed);
        }
    }
    seeds
}

/// A data file part of a fixture with what unfilters its tiles.
struct Part {
    filters: PartFilters,
    version: FormatVersion,
    key: Option<[u8; 32]>,
    var: bool,
    case: usize,
    file: usize,
}

fn parts() -> &'static [Part] {
    static PARTS: OnceLock<Vec<Part>> = OnceLock::new();
    PARTS.get_or_init(|| {
        let mut out = Vec::new();
        for (c, case) in cases().iter().enumerate() {
            let Some(schema) = &case.schema else { continue };
            for (f, (name, _)) in case.files.iter().enumerate() {
                let ObjectFile::Data {
                    fragment,
                    field,
                    part,
                    ..
                } = classify(name)
                else {
                    continue;
                };
                let Ok(version) = FormatVersion::new(fragment.implied_format_version()) else {
                    continue;
                };
                let (field, part) = schema.data_file(field, part);
                if let Some(filters) = schema.part_filters(&field, part, case.key.is_some()) {
                    out.push(Part {
                        filters,
                        version,
                        key: case.key,
                        var: part == DataPart::Var,
                        case: c,
                        file: f,
                    });
                }
            }
        }
        out
    })
}

fn tile(data: &[u8]) -> bool {
    let parts = parts();
    let Some((k, bytes)) = select(data, parts.len()) else {
        return false;
    };
    let p = &parts[k];
    let filters = p.filters.tile_filters(p.version, p.key.as_ref());
    filters.unfilter_whole(LOCATION, bytes, p.var).is_ok()
}

fn tile_seeds() -> Vec<Vec<u8>> {
    parts()
        .iter()
        .enumerate()
        .filter_map(|(k, p)| {
            let bytes = &cases()[p.case].files[p.file].1;
            let filters = p.filters.tile_filters(p.version, p.key.as_ref());
            // The file's first tile: `unfilter` says how many bytes it spans.
            let (_, n) = filters.unfilter(LOCATION, bytes, p.var).ok()?;
            Some(selector(k, &bytes[..n]))
        })
        .collect()
}

fn schema(data: &[u8]) -> bool {
    let Some((&kind, rest)) = data.split_first() else {
        return false;
    };
    if kind % 2 == 0 {
        ArraySchema::parse(LOCATION, rest).is_ok_and(|s| s.write().is_ok())
    } else {
        Enumeration::parse(LOCATION, rest).is_ok_and(|e| e.values().is_ok() && e.write().is_ok())
    }
}

fn schema_seeds() -> Vec<Vec<u8>> {
    unfiltered(|kind| match kind {
        ObjectFile::LegacySchema | ObjectFile::Schema(_) => Some(0),
        ObjectFile::Enumeration(_) => Some(1),
        _ => None,
    })
}

fn commits(data: &[u8]) -> bool {
    let Some((&kind, rest)) = data.split_first() else {
        return false;
    };
    match kind % 5 {
        0 => ConsolidatedCommits::parse(LOCATION, rest).is_ok(),
        1 => IgnoreFile::parse(LOCATION, rest).is_ok(),
        2 => VacuumFile::parse(LOCATION, rest).is_ok(),
        3 => DeleteCommit::deserialize(LOCATION, rest).is_ok(),
        _ => UpdateCommit::deserialize(LOCATION, rest).is_ok(),
    }
}

fn commits_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for (_, kind, bytes) in tile_files(|_| true) {
        let k = match kind {
            ObjectFile::ConsolidatedCommits(_) => 0,
            ObjectFile::Ignore(_) => 1,
            ObjectFile::Vacuum(_) => 2,
            _ => continue,
        };
        let mut seed = vec![k];
        seed.extend_from_slice(bytes);
        seeds.push(seed);
    }
    seeds.extend(unfiltered(|kind| match kind {
        ObjectFile::DeleteCommit(_) => Some(3),
        ObjectFile::UpdateCommit(_) => Some(4),
        _ => None,
    }));
    seeds
}

fn metadata(data: &[u8]) -> bool {
    let Some((&kind, rest)) = data.split_first() else {
        return false;
    };
    if kind % 2 == 0 {
        MetadataFile::parse_content(LOCATION, rest).is_ok()
    } else {
        GroupDetails::parse_content(LOCATION, rest).is_ok()
    }
}

fn metadata_seeds() -> Vec<Vec<u8>> {
    unfiltered(|kind| match kind {
        ObjectFile::Metadata(_) => Some(0),
        ObjectFile::GroupDetails(_) => Some(1),
        _ => None,
    })
}

/// A fragment metadata file of a fixture, with what parses it.
struct MetaFile {
    case: usize,
    file: usize,
    /// The fragment's format version (`None` for a `.meta` file).
    version: Option<u32>,
    /// For v1–v2: whether the fragment is dense (it has no coordinates).
    dense: bool,
}

fn meta_files() -> &'static [MetaFile] {
    static FILES: OnceLock<Vec<MetaFile>> = OnceLock::new();
    FILES.get_or_init(|| {
        let mut out = Vec::new();
        for (c, case) in cases().iter().enumerate() {
            if case.schema.is_none() {
                continue;
            }
            for (f, (name, _)) in case.files.iter().enumerate() {
                let version = match classify(name) {
                    ObjectFile::FragmentMetadata { fragment, .. } => {
                        Some(fragment.implied_format_version())
                    }
                    ObjectFile::ConsolidatedFragmentMetadata(_) => None,
                    _ => continue,
                };
                let dir = name.rsplit_once('/').map_or("", |(d, _)| d);
                let coords = format!("{dir}/__coords.tdb");
                let dense = !case.files.iter().any(|(n, _)| *n == coords);
                out.push(MetaFile {
                    case: c,
                    file: f,
                    version,
                    dense,
                });
            }
        }
        out
    })
}

fn fragment_metadata(data: &[u8]) -> bool {
    let files = meta_files();
    let Some((k, bytes)) = select(data, files.len()) else {
        return false;
    };
    let m = &files[k];
    let case = &cases()[m.case];
    let Some(schema) = case.schema.as_ref() else {
        return false;
    };
    let key = case.key.as_ref();
    let lookup = |name: &str| {
        let by_name = case.schemas.iter().find(|(n, _)| n == name);
        Some(by_name.map_or(schema, |(_, s)| s))
    };
    match m.version {
        None => ConsolidatedFragmentMeta::parse(bytes, key, &lookup, LOCATION).is_ok(),
        Some(v) if v <= 2 => LegacyMetadata::parse(bytes, schema, m.dense, key, LOCATION).is_ok(),
        Some(v) => match Footer::parse(bytes, bytes.len() as u64, &lookup, v, LOCATION) {
            Ok(FooterRead::Done(footer)) => sections(&footer, bytes, key, schema, v),
            _ => false,
        },
    }
}

/// Reads every section a footer points to, as a read may, and builds the
/// R-tree from its section: whether all of them parse.
fn sections(
    footer: &Footer,
    bytes: &[u8],
    key: Option<&[u8; 32]>,
    schema: &ArraySchema,
    v: u32,
) -> bool {
    let mut all = true;
    for section in footer.sections() {
        let section_bytes = footer
            .section_range(section, LOCATION)
            .ok()
            .and_then(|r| Some(usize::try_from(r.start).ok()?..usize::try_from(r.end).ok()?))
            .and_then(|r| bytes.get(r));
        let Some(section_bytes) = section_bytes else {
            all = false;
            continue;
        };
        all &= match footer.read_section(section, section_bytes, key, schema, LOCATION) {
            Ok(SectionData::RTree(content)) => FormatVersion::new(v).is_ok_and(|version| {
                tdb_index::RTree::parse(&content, &schema.domain, version).is_ok()
            }),
            Ok(_) => true,
            Err(_) => false,
        };
    }
    all
}

fn fragment_metadata_seeds() -> Vec<Vec<u8>> {
    meta_files()
        .iter()
        .enumerate()
        .map(|(k, m)| selector(k, &cases()[m.case].files[m.file].1))
        .collect()
}

/// The fixture arrays, opened once (a condition's read needs no fresh
/// copy: it changes nothing).
fn arrays() -> &'static [Array<MemoryStorage>] {
    static ARRAYS: OnceLock<Vec<Array<MemoryStorage>>> = OnceLock::new();
    ARRAYS.get_or_init(|| {
        cases()
            .iter()
            .filter(|c| c.schema.is_some())
            .filter_map(|c| Array::open_in(c.storage(None), "", c.options()).ok())
            .collect()
    })
}

fn condition(data: &[u8]) -> bool {
    let arrays = arrays();
    let Some((k, bytes)) = select(data, arrays.len()) else {
        return false;
    };
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    let array = &arrays[k];
    if tdb_query::condition::parse(text, array.schema()).is_err() {
        return false;
    }
    let fields: Vec<String> = array.schema().fields().map(str::to_owned).collect();
    let spec = ReadSpec::new(fields)
        .with_condition(text)
        .with_budget(BUDGET);
    array
        .read(spec)
        .is_ok_and(|read| read.take(BATCHES).all(|b| b.is_ok()))
}

fn condition_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for (k, array) in arrays().iter().enumerate() {
        let schema = array.schema();
        for a in &schema.attributes {
            let n = &a.name;
            for text in [
                format!("{n} > 1"),
                format!("{n} == 'abc'"),
                format!("{n} != 2 and {n} < 10"),
                format!("not ({n} >= 0) or {n} is null"),
                format!("{n} in [1, 2, 3]"),
            ] {
                seeds.push(selector(k, text.as_bytes()));
            }
        }
        for d in &schema.domain.dimensions {
            let text = format!("{} <= 4", d.name);
            seeds.push(selector(k, text.as_bytes()));
        }
    }
    // Only conditions the schema takes: a seed starts the fuzzer inside.
    seeds.retain(|s| condition(s));
    seeds
}

fn array(data: &[u8]) -> bool {
    let files = all_files();
    let Some((k, bytes)) = select(data, files.len()) else {
        return false;
    };
    let (c, f) = files[k];
    let case = &cases()[c];
    let storage = case.storage(Some((f, bytes)));
    if case.schema.is_none() {
        // A group: opening reads its details and metadata.
        return tdb::Group::open_in(&storage, "", case.options()).is_ok();
    }
    read_all(&storage, case)
}

/// Opens the array in `storage` and reads a few batches of every field.
fn read_all(storage: &MemoryStorage, case: &Case) -> bool {
    let Ok(array) = Array::open_in(storage, "", case.options()) else {
        return false;
    };
    let fields: Vec<String> = array.schema().fields().map(str::to_owned).collect();
    array
        .read(ReadSpec::new(fields).with_budget(BUDGET))
        .is_ok_and(|read| read.take(BATCHES).all(|b| b.is_ok()))
}

fn array_seeds() -> Vec<Vec<u8>> {
    all_files()
        .iter()
        .enumerate()
        .map(|(k, &(c, f))| selector(k, &cases()[c].files[f].1))
        .collect()
}

/// Every file of every case whose kind `keep` accepts, with the case.
fn tile_files(
    keep: impl Fn(&ObjectFile) -> bool,
) -> impl Iterator<Item = (&'static Case, ObjectFile, &'static [u8])> {
    cases().iter().flat_map(move |case| {
        case.files
            .iter()
            .map(|(name, bytes)| (case, classify(name), bytes.as_slice()))
            .filter(|(_, kind, _)| keep(kind))
            .collect::<Vec<_>>()
    })
}

/// Seeds of the unfiltered contents of the one-tile files `kind_byte`
/// gives a leading byte for (decrypted with the case's key).
fn unfiltered(kind_byte: impl Fn(&ObjectFile) -> Option<u8>) -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for (case, kind, bytes) in tile_files(|k| kind_byte(k).is_some()) {
        let Some(k) = kind_byte(&kind) else { continue };
        if let Ok(content) = tdb_tile::read_generic_tile_file(LOCATION, bytes, case.key.as_ref()) {
            let mut seed = vec![k];
            seed.extend_from_slice(&content);
            seeds.push(seed);
        }
    }
    seeds
}
