//! WEBP on the tile real TileDB 2.30 wrote (`filter_webp`: an 8 x 8 RGB
//! image, lossless): the schema stores the tile extents in the filter's
//! options, the tile unfilters to exactly the cells TileDB's query returned,
//! and tdb's own lossless encoding of those cells (other bytes than
//! libwebp's) unfilters to them again.

use serde_json::Value;
use std::path::{Path, PathBuf};
use tdb_filters::{Filter, FilterPipeline, Stage, Unfiltered, Workspace};
use tdb_format::{single_generic_tile, Datatype, FormatVersion};

use crate::common;

fn case_dir() -> PathBuf {
    common::case_dir("filter_webp")
}

fn one_file(dir: &Path) -> Vec<u8> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{dir:?}");
    std::fs::read(files.pop().unwrap()).unwrap()
}

fn unfilter(p: &FilterPipeline, st: &Stage<'_>, metadata: &[u8], data: &[u8]) -> Vec<u8> {
    let (mut out, mut scratch) = (Unfiltered::default(), Workspace::default());
    {
        out.clear();
        p.reverse_chunk(st, &mut scratch, metadata, data, &mut out)
    }
    .unwrap();
    out.data
}

/// The attribute's pipeline as the schema stores it.
fn stored_pipeline() -> FilterPipeline {
    let file = one_file(&case_dir().join("array/__schema"));
    let tile = single_generic_tile(&file).unwrap();
    let version = tile.header.version;
    let gzip = FilterPipeline::parse(tile.filter_pipeline, version).unwrap();
    let st = Stage::new(tile.header.datatype, version);
    let tiles = common::tiles(tile.data);
    assert_eq!(tiles.len(), 1, "a schema is one tile");
    let schema: Vec<u8> = tiles[0]
        .iter()
        .flat_map(|c| unfilter(&gzip, &st, c.metadata, c.data))
        .collect();
    // max_chunk_size 65536, one filter, WEBP (18) with 12 bytes of options.
    let head = [0, 0, 1, 0, 1, 0, 0, 0, 18, 12, 0, 0, 0];
    let at = schema.windows(head.len()).position(|w| w == head).unwrap();
    FilterPipeline::parse(&schema[at..at + head.len() + 12], version).unwrap()
}

fn expected_cells() -> Vec<u8> {
    let json: Value =
        serde_json::from_slice(&std::fs::read(case_dir().join("expected.json")).unwrap()).unwrap();
    json["queries"][0]["result"]["fields"]["rgb"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u8)
        .collect()
}

#[test]
fn the_schema_stores_the_tile_extents() {
    assert_eq!(
        stored_pipeline().filters,
        [Filter::Webp {
            quality: 100.0,
            format: 1,
            lossless: 1,
            y_extent: 8,
            // 8 pixels of 3 bytes: dimension 1's tile extent.
            x_extent: 24,
            padding: [0, 0],
        }]
    );
}

#[test]
fn tiledb_tile_unfilters_to_the_cells_and_tdb_forward_round_trips() {
    let pipeline = stored_pipeline();
    let version = FormatVersion::new(22).unwrap();
    assert!(!pipeline.use_tile_chunking(false, version, Datatype::UInt8));
    let st = Stage::new(Datatype::UInt8, version);
    let a0 = common::read(&common::fragment(&case_dir()).join("a0.tdb"));
    let tiles = common::tiles(&a0);
    let [tile] = &tiles[..] else {
        panic!("one tile, not {}", tiles.len())
    };
    let [common::Chunk {
        unfiltered,
        metadata,
        data,
    }] = tile[..]
    else {
        panic!("a WebP tile is one chunk, not {}", tile.len());
    };
    // u32 part count 1, u32 size of the one WebP file.
    assert_eq!(metadata[..4], 1u32.to_le_bytes());
    assert_eq!(metadata[4..], (data.len() as u32).to_le_bytes());
    assert_eq!(&data[..4], b"RIFF");
    let cells = expected_cells();
    assert_eq!((unfiltered, cells.len()), (192, 192));
    assert_eq!(unfilter(&pipeline, &st, metadata, data), cells);

    let (meta, again) = pipeline
        .forward_chunk(&st, &mut Workspace::default(), cells.clone())
        .unwrap();
    assert_eq!(meta[..4], 1u32.to_le_bytes());
    assert_eq!(meta[4..], (again.len() as u32).to_le_bytes());
    assert_eq!(unfilter(&pipeline, &st, &meta, &again), cells);
}
