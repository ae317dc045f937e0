//! What the fixture tests share: where the cases live, the chunk framing of
//! TileDB data files, a case's expected.json (its schema's filters and
//! datatypes, the cells its queries returned), and pinning a data file's
//! chunks on the bytes TileDB stored.

// Each test binary uses a part of this module.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use tdb_filters::{Filter, FilterPipeline, Stage, Unfiltered, Workspace};
use tdb_format::{Datatype, FilterType, FormatVersion};

/// TileDB's default maximum chunk size, that of every fixture's pipelines.
pub const MAX_CHUNK_SIZE: u32 = 65536;

/// The directory of a case (`""`: the directory of all cases).
pub fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/arrays")
        .join(case)
}

/// The format version TileDB 2.30 writes, that of the current fixtures.
pub fn v22() -> FormatVersion {
    FormatVersion::new(22).unwrap()
}

/// The one fragment directory of an array (old layouts keep it at the top).
pub fn fragment(dir: &Path) -> PathBuf {
    let array = dir.join("array");
    let parent = if array.join("__fragments").exists() {
        array.join("__fragments")
    } else {
        array
    };
    let mut found: Vec<_> = std::fs::read_dir(&parent)
        .unwrap_or_else(|e| panic!("{}: {e}", parent.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && p.file_name().unwrap().to_str().unwrap().starts_with("__"))
        .filter(|p| !p.ends_with("__schema") && !p.ends_with("__commits") && !p.ends_with("__meta"))
        .collect();
    assert_eq!(found.len(), 1, "{}: one fragment", dir.display());
    found.remove(0)
}

/// A file's bytes.
pub fn read(file: &Path) -> Vec<u8> {
    std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// A stored chunk.
pub struct Chunk<'a> {
    /// The size of the chunk before filtering.
    pub unfiltered: usize,
    pub metadata: &'a [u8],
    pub data: &'a [u8],
}

/// A data file as its tiles: `u64` chunk count, then per chunk `u32`
/// unfiltered size, `u32` data size, `u32` metadata size, metadata, data.
pub fn tiles(mut bytes: &[u8]) -> Vec<Vec<Chunk<'_>>> {
    fn take<'a>(bytes: &mut &'a [u8], n: usize) -> &'a [u8] {
        assert!(n <= bytes.len(), "{n} bytes wanted, {} left", bytes.len());
        let (head, tail) = bytes.split_at(n);
        *bytes = tail;
        head
    }
    let u32_of = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap()) as usize;
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let count = u64::from_le_bytes(take(&mut bytes, 8).try_into().unwrap());
        let mut chunks = Vec::new();
        for _ in 0..count {
            let unfiltered = u32_of(take(&mut bytes, 4));
            let data_len = u32_of(take(&mut bytes, 4));
            let meta_len = u32_of(take(&mut bytes, 4));
            let metadata = take(&mut bytes, meta_len);
            let data = take(&mut bytes, data_len);
            chunks.push(Chunk {
                unfiltered,
                metadata,
                data,
            });
        }
        out.push(chunks);
    }
    out
}

/// A filter of expected.json, `{"type": ..., "options": {...}}`. Every
/// option the type takes must be there, and no other.
pub fn filter(json: &Value) -> Filter {
    let options = json["options"]
        .as_object()
        .unwrap_or_else(|| panic!("{json}: no options"));
    let opt = |name: &str| {
        options
            .get(name)
            .unwrap_or_else(|| panic!("{json}: no {name}"))
    };
    let int = |name: &str| {
        opt(name)
            .as_i64()
            .unwrap_or_else(|| panic!("{json}: {name} is not an integer"))
    };
    let float = |name: &str| {
        opt(name)
            .as_f64()
            .unwrap_or_else(|| panic!("{json}: {name} is not a number"))
    };
    let level = || i32::try_from(int("COMPRESSION_LEVEL")).unwrap();
    let reinterpret = || {
        let name = opt("COMPRESSION_REINTERPRET_DATATYPE").as_str().unwrap();
        Some(Datatype::from_name(name).unwrap())
    };
    let window = |name: &str| u32::try_from(int(name)).unwrap();
    let byte = |name: &str| u8::try_from(int(name)).unwrap();
    const LEVEL: &[&str] = &["COMPRESSION_LEVEL"];
    const REINTERPRET: &[&str] = &["COMPRESSION_LEVEL", "COMPRESSION_REINTERPRET_DATATYPE"];
    let name = json["type"].as_str().unwrap();
    let (filter, takes): (Filter, &[&str]) = match FilterType::from_name(name).unwrap() {
        FilterType::None => (Filter::None, &[]),
        FilterType::Gzip => (Filter::Gzip { level: level() }, LEVEL),
        FilterType::Zstd => (Filter::Zstd { level: level() }, LEVEL),
        FilterType::Lz4 => (Filter::Lz4 { level: level() }, LEVEL),
        FilterType::Rle => (Filter::Rle { level: level() }, LEVEL),
        FilterType::Bzip2 => (Filter::Bzip2 { level: level() }, LEVEL),
        FilterType::Dictionary => (Filter::Dictionary { level: level() }, LEVEL),
        FilterType::DoubleDelta => (
            Filter::DoubleDelta {
                level: level(),
                reinterpret: reinterpret(),
            },
            REINTERPRET,
        ),
        FilterType::Delta => (
            Filter::Delta {
                level: level(),
                reinterpret: reinterpret(),
            },
            REINTERPRET,
        ),
        FilterType::BitWidthReduction => (
            Filter::BitWidthReduction {
                max_window: window("BIT_WIDTH_MAX_WINDOW"),
            },
            &["BIT_WIDTH_MAX_WINDOW"],
        ),
        FilterType::PositiveDelta => (
            Filter::PositiveDelta {
                max_window: window("POSITIVE_DELTA_MAX_WINDOW"),
            },
            &["POSITIVE_DELTA_MAX_WINDOW"],
        ),
        FilterType::Bitshuffle => (Filter::Bitshuffle, &[]),
        FilterType::Byteshuffle => (Filter::Byteshuffle, &[]),
        FilterType::ChecksumMd5 => (Filter::ChecksumMd5, &[]),
        FilterType::ChecksumSha256 => (Filter::ChecksumSha256, &[]),
        FilterType::ScaleFloat => (
            Filter::ScaleFloat {
                scale: float("SCALE_FLOAT_FACTOR"),
                offset: float("SCALE_FLOAT_OFFSET"),
                byte_width: u64::try_from(int("SCALE_FLOAT_BYTEWIDTH")).unwrap(),
            },
            &[
                "SCALE_FLOAT_BYTEWIDTH",
                "SCALE_FLOAT_FACTOR",
                "SCALE_FLOAT_OFFSET",
            ],
        ),
        FilterType::Xor => (Filter::Xor, &[]),
        // The image extents come from the schema's tile extents, not from
        // the filter's options.
        FilterType::Webp => (
            Filter::Webp {
                quality: float("WEBP_QUALITY") as f32,
                format: byte("WEBP_INPUT_FORMAT"),
                lossless: byte("WEBP_LOSSLESS"),
                y_extent: 0,
                x_extent: 0,
                padding: [0; 2],
            },
            &["WEBP_INPUT_FORMAT", "WEBP_LOSSLESS", "WEBP_QUALITY"],
        ),
        FilterType::InternalAes256Gcm => (Filter::InternalAes256Gcm, &[]),
        FilterType::Deprecated => panic!("{json}: a retired filter type"),
    };
    let mut given: Vec<&str> = options.keys().map(String::as_str).collect();
    given.sort_unstable();
    assert_eq!(given, takes, "{json}: options");
    filter
}

/// A pipeline of expected.json, `{"max_chunk_size": ..., "filters": [...]}`.
pub fn schema_pipeline(json: &Value) -> FilterPipeline {
    FilterPipeline {
        max_chunk_size: u32::try_from(json["max_chunk_size"].as_u64().unwrap()).unwrap(),
        filters: json["filters"]
            .as_array()
            .unwrap_or_else(|| panic!("{json}: no filters"))
            .iter()
            .map(filter)
            .collect(),
    }
}

/// A pipeline of `filters` with the default maximum chunk size.
pub fn pipeline(filters: Vec<Filter>) -> FilterPipeline {
    FilterPipeline {
        max_chunk_size: MAX_CHUNK_SIZE,
        filters,
    }
}

/// Whether a filter is a general-purpose compressor, whose bytes depend on
/// the library build.
pub fn is_general_compressor(f: &Filter) -> bool {
    matches!(
        f,
        Filter::Gzip { .. } | Filter::Zstd { .. } | Filter::Lz4 { .. } | Filter::Bzip2 { .. }
    )
}

/// A case's expected.json.
pub fn expected(dir: &Path) -> Value {
    let file = dir.join("expected.json");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The `datatype` of a schema entry or query field.
pub fn datatype(json: &Value) -> Datatype {
    Datatype::from_name(json["datatype"].as_str().unwrap()).unwrap()
}

/// The schema entry (attribute) named `name`, with its index.
pub fn attr<'a>(expected: &'a Value, name: &str) -> (usize, &'a Value) {
    let attrs = expected["schema"]["attrs"].as_array().unwrap();
    let index = attrs
        .iter()
        .position(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no attribute {name}"));
    (index, &attrs[index])
}

/// A query's result field `name`.
pub fn field<'a>(expected: &'a Value, query: &str, name: &str) -> &'a Value {
    let query = expected["queries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == query)
        .unwrap_or_else(|| panic!("no query {query}"));
    let field = &query["result"]["fields"][name];
    assert!(field.is_object(), "no field {name}");
    field
}

/// Numbers of a query's result as TileDB stores them, little-endian.
pub fn cell_bytes(datatype: Datatype, values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        let int = || v.as_i64().unwrap_or_else(|| panic!("{v}: not an integer"));
        let uint = || v.as_u64().unwrap_or_else(|| panic!("{v}: not an unsigned"));
        match datatype {
            Datatype::Int8 => out.extend(i8::try_from(int()).unwrap().to_le_bytes()),
            Datatype::UInt8 => out.extend(u8::try_from(uint()).unwrap().to_le_bytes()),
            Datatype::Int16 => out.extend(i16::try_from(int()).unwrap().to_le_bytes()),
            Datatype::UInt16 => out.extend(u16::try_from(uint()).unwrap().to_le_bytes()),
            Datatype::Int32 => out.extend(i32::try_from(int()).unwrap().to_le_bytes()),
            Datatype::UInt32 => out.extend(u32::try_from(uint()).unwrap().to_le_bytes()),
            Datatype::Int64 => out.extend(int().to_le_bytes()),
            Datatype::UInt64 => out.extend(uint().to_le_bytes()),
            Datatype::Float32 => out.extend((v.as_f64().unwrap() as f32).to_le_bytes()),
            Datatype::Float64 => out.extend(v.as_f64().unwrap().to_le_bytes()),
            other => panic!("datatype {other} is not used by these fixtures"),
        }
    }
    out
}

/// Unfilters every chunk of a data file and checks that it reverses to its
/// unfiltered size and that filtering it forward gives TileDB's bytes back:
/// all of them when `exact`, else up to the first general-purpose
/// compressor (compared with what the rest of the pipeline reverses the
/// stored chunk to). Returns the file's cells.
pub fn pin_chunks(
    ctx: &str,
    bytes: &[u8],
    pipeline: &FilterPipeline,
    st: &Stage<'_>,
    exact: bool,
) -> Vec<u8> {
    let filters = &pipeline.filters;
    let split = match filters.iter().position(is_general_compressor) {
        Some(i) if !exact => i,
        _ => filters.len(),
    };
    let head = FilterPipeline {
        filters: filters[..split].to_vec(),
        ..*pipeline
    };
    let tail = FilterPipeline {
        filters: filters[split..].to_vec(),
        ..*pipeline
    };
    let tail_stage = st.with_datatype(
        pipeline
            .stage_datatypes(st.datatype)
            .get(split)
            .copied()
            .unwrap_or(st.datatype),
    );

    let (mut out, mut scratch) = (Unfiltered::default(), Workspace::default());
    let mut cells = Vec::new();
    for (t, tile) in tiles(bytes).iter().enumerate() {
        for (c, chunk) in tile.iter().enumerate() {
            let ctx = format!("{ctx} tile {t} chunk {c}");
            {
                out.clear();
                pipeline.reverse_chunk(st, &mut scratch, chunk.metadata, chunk.data, &mut out)
            }
            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert_eq!(out.data.len(), chunk.unfiltered, "{ctx}");
            cells.extend_from_slice(&out.data);

            let (meta, data) = head
                .forward_chunk(st, &mut Workspace::default(), out.data.clone())
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let mut mid = Unfiltered::default();
            if tail.filters.is_empty() {
                mid.metadata = chunk.metadata.to_vec();
                mid.data = chunk.data.to_vec();
            } else {
                {
                    mid.clear();
                    tail.reverse_chunk(
                        &tail_stage,
                        &mut scratch,
                        chunk.metadata,
                        chunk.data,
                        &mut mid,
                    )
                }
                .unwrap_or_else(|e| panic!("{ctx}: {e}"));
            }
            assert_eq!(meta, mid.metadata, "{ctx}: metadata");
            assert_eq!(data, mid.data, "{ctx}: data");
        }
    }
    cells
}

/// Pins attribute `name` of a TileDB 2.30 case through the pipeline its
/// schema gives (see [`pin_chunks`]) against the cells of its query "all"
/// (dense, so stored in query order). Returns that pipeline and the
/// attribute's datatype.
pub fn pin_attr(case: &str, name: &str, exact: bool) -> (FilterPipeline, Datatype) {
    let dir = case_dir(case);
    let expected = expected(&dir);
    let (index, schema) = attr(&expected, name);
    let datatype = datatype(schema);
    let pipeline = schema_pipeline(&schema["filters"]);
    let file = fragment(&dir).join(format!("a{index}.tdb"));
    let st = Stage::new(datatype, v22());
    let cells = pin_chunks(
        &format!("{case}/{name}"),
        &read(&file),
        &pipeline,
        &st,
        exact,
    );
    let values = field(&expected, "all", name)["data"].as_array().unwrap();
    assert_eq!(cells, cell_bytes(datatype, values), "{case}/{name}: cells");
    (pipeline, datatype)
}
