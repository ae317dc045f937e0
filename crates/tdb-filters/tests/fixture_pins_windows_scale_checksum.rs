//! Bit-width reduction, positive delta, float scaling and the checksums,
//! pinned on tiles real TileDB 2.30 wrote: every chunk reverses to its
//! unfiltered size and to the cells TileDB reads, and forward of what a
//! filter reversed gives back TileDB's exact bytes, alone or inside a chain
//! (there the filters after it are reversed first).

use crate::common;

use common::{case_dir, datatype, expected, fragment, pin_attr, read, schema_pipeline, tiles, v22};
use tdb_filters::{Codecs, Filter, FilterError, FilterPipeline, Parts, Stage, Unfiltered};
use tdb_format::Datatype;

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
        let stage = st.with_datatype(types[i]);
        let mut next = Unfiltered::default();
        pipeline.filters[i].reverse(
            &stage,
            &mut Codecs::default(),
            &cur.metadata,
            &cur.data,
            &mut next,
        )?;
        cur = next;
    }
    Ok(cur)
}

/// Whether a filter is one this module pins.
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

#[derive(Default, Debug, PartialEq)]
struct Tally {
    /// Chunks one of this module's filters was pinned on, counted once per
    /// such filter.
    pinned: usize,
    /// Attributes whose every chunk reversed to the cells TileDB read.
    full: usize,
}

/// Pins every attribute of `case` whose pipeline has one of this module's
/// filters: each of them alone (the filters after it reversed first), then
/// the whole pipeline against the cells of query "all", and forward of
/// those cells against TileDB's bytes up to the first general-purpose
/// compressor.
fn pin_case(case: &str) -> Tally {
    let dir = case_dir(case);
    let json = expected(&dir);
    let frag = fragment(&dir);
    let mut tally = Tally::default();
    for (a, attr) in json["schema"]["attrs"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let name = attr["name"].as_str().unwrap();
        let datatype = datatype(attr);
        let pipeline = schema_pipeline(&attr["filters"]);
        if !pipeline.filters.iter().any(mine) {
            continue;
        }
        let st = Stage::new(datatype, v22());
        let types = pipeline.stage_datatypes(datatype);
        let bytes = read(&frag.join(format!("a{a}.tdb")));
        for (t, tile) in tiles(&bytes).iter().enumerate() {
            for (c, chunk) in tile.iter().enumerate() {
                let ctx = format!("{case} {name} tile {t} chunk {c}");
                for (k, filter) in pipeline.filters.iter().enumerate() {
                    if !mine(filter) {
                        continue;
                    }
                    let input = reverse_from(&pipeline, &st, k + 1, chunk.metadata, chunk.data)
                        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    let stage = st.with_datatype(types[k]);
                    let mut out = Unfiltered::default();
                    filter
                        .reverse(
                            &stage,
                            &mut Codecs::default(),
                            &input.metadata,
                            &input.data,
                            &mut out,
                        )
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
                        .forward(
                            &stage,
                            &mut Codecs::default(),
                            meta_in,
                            Parts::one(out.data),
                        )
                        .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    assert_eq!(m2.concat(), input.metadata, "{ctx}: {filter:?} metadata");
                    assert_eq!(d2.concat(), input.data, "{ctx}: {filter:?} data");
                    tally.pinned += 1;
                }
            }
        }
        assert_eq!(pin_attr(case, name, false), (pipeline, datatype));
        tally.full += 1;
    }
    tally
}

#[test]
fn bit_width_reduction() {
    let t = pin_case("filter_bit_width_reduction");
    assert_eq!(t, Tally { pinned: 4, full: 1 });
}

#[test]
fn positive_delta() {
    let t = pin_case("filter_positive_delta");
    assert_eq!(t, Tally { pinned: 4, full: 1 });
}

#[test]
fn float_scale() {
    let t = pin_case("filter_float_scale");
    assert_eq!(t, Tally { pinned: 4, full: 1 });
}

#[test]
fn checksum_md5() {
    let t = pin_case("filter_checksum_md5");
    assert_eq!(t, Tally { pinned: 4, full: 1 });
}

#[test]
fn checksum_sha256() {
    let t = pin_case("filter_checksum_sha256");
    assert_eq!(t, Tally { pinned: 4, full: 1 });
}

#[test]
fn chains_int() {
    // zstd_sha256 (SHA-256 after ZSTD), xor_bwr_gzip (BWR between XOR and
    // GZIP), delta_bwr_lz4_md5 (BWR under LZ4, MD5 last): 4 tiles each.
    let t = pin_case("filter_chains_int");
    assert_eq!(
        t,
        Tally {
            pinned: 4 * 4,
            full: 3
        }
    );
}

#[test]
fn chains_float() {
    // float_scale_delta: float scaling under DELTA, which is reversed first.
    let t = pin_case("filter_chains_float");
    assert_eq!(t, Tally { pinned: 4, full: 1 });
}

#[test]
fn flipping_any_byte_of_a_checksummed_chunk_is_detected() {
    let bytes = read(&fragment(&case_dir("filter_checksum_sha256")).join("a0.tdb"));
    let tiles = tiles(&bytes);
    let (m, d) = (tiles[0][0].metadata, tiles[0][0].data);
    let st = Stage::new(Datatype::Int64, v22());
    let f = Filter::ChecksumSha256;
    for i in 0..d.len() {
        let mut bad = d.to_vec();
        bad[i] ^= 0x20;
        let e = f
            .reverse(
                &st,
                &mut Codecs::default(),
                m,
                &bad,
                &mut Unfiltered::default(),
            )
            .unwrap_err();
        assert!(
            matches!(e, FilterError::ChecksumMismatch { .. }),
            "{i}: {e}"
        );
    }
    for i in 8..m.len() {
        let mut bad = m.to_vec();
        bad[i] ^= 0x20;
        assert!(f
            .reverse(
                &st,
                &mut Codecs::default(),
                &bad,
                d,
                &mut Unfiltered::default()
            )
            .is_err());
    }
}
