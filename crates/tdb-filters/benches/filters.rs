//! Forward and reverse throughput of every filter on 1 MiB of typical data,
//! cut into TileDB's 64 KiB chunks, next to raw zstd and lz4 on the same
//! bytes. `cargo bench -p tdb-filters` (criterion reports MiB/s).
//!
//! The `lz4` filter rows encode with the crate's port of liblz4's encoder
//! (TileDB's bytes); the raw rows are lz4_flex, which the filter decodes
//! with, so `raw/lz4_compress` against `forward/lz4` is lz4_flex's
//! encoder against the port.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use tdb_filters::{Filter, FilterPipeline, Stage, Unfiltered, Workspace};
use tdb_format::{Datatype, FormatVersion};

const MIB: usize = 1 << 20;
const CHUNK: usize = 64 * 1024;

/// Slowly rising i64 values with noise: timestamps, ids, sensor counts.
fn ints() -> Vec<u8> {
    let mut rng = tdb_testdata::XorShift::new(0x2545_f491_4f6c_dd1d);
    let mut v = 1_000_000i64;
    let mut out = Vec::with_capacity(MIB);
    while out.len() < MIB {
        v += (rng.next_u64() % 16) as i64;
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// f64 readings of a smooth signal.
fn floats() -> Vec<u8> {
    (0..MIB / 8)
        .flat_map(|i| (20.0 + (i as f64 / 500.0).sin() * 5.0).to_le_bytes())
        .collect()
}

fn cases() -> Vec<(&'static str, Filter, Datatype, Vec<u8>)> {
    let (i, f) = (ints(), floats());
    let int = |name, filter| (name, filter, Datatype::Int64, i.clone());
    vec![
        int("gzip", Filter::Gzip { level: -1 }),
        int("zstd", Filter::Zstd { level: -1 }),
        int("lz4", Filter::Lz4 { level: -1 }),
        int("bzip2", Filter::Bzip2 { level: -1 }),
        int("rle", Filter::Rle { level: -1 }),
        int(
            "delta",
            Filter::Delta {
                level: -1,
                reinterpret: None,
            },
        ),
        int(
            "double_delta",
            Filter::DoubleDelta {
                level: -1,
                reinterpret: None,
            },
        ),
        int(
            "bit_width_reduction",
            Filter::BitWidthReduction { max_window: 256 },
        ),
        int("positive_delta", Filter::PositiveDelta { max_window: 256 }),
        int("bitshuffle", Filter::Bitshuffle),
        int("byteshuffle", Filter::Byteshuffle),
        int("xor", Filter::Xor),
        int("checksum_md5", Filter::ChecksumMd5),
        int("checksum_sha256", Filter::ChecksumSha256),
        (
            "scale_float",
            Filter::ScaleFloat {
                scale: 0.001,
                offset: 0.0,
                byte_width: 4,
            },
            Datatype::Float64,
            f,
        ),
    ]
}

fn stage(datatype: Datatype) -> Stage<'static> {
    Stage::new(datatype, FormatVersion::WRITTEN)
}

fn filters(c: &mut Criterion) {
    let mut group = c.benchmark_group("filters");
    group.throughput(Throughput::Bytes(MIB as u64));
    group.sample_size(10);
    for (name, filter, datatype, data) in cases() {
        let pipeline = FilterPipeline {
            max_chunk_size: CHUNK as u32,
            filters: vec![filter],
        };
        let st = stage(datatype);
        // One workspace per pipeline, as a writer's worker keeps one: its
        // compression contexts and ciphers are made once, not per chunk.
        let mut ws = Workspace::default();
        let filtered: Vec<(Vec<u8>, Vec<u8>)> = data
            .chunks(CHUNK)
            .map(|c| {
                pipeline
                    .forward_chunk(&st, &mut ws, c.to_vec())
                    .expect(name)
            })
            .collect();
        group.bench_function(BenchmarkId::new("forward", name), |b| {
            b.iter(|| {
                for c in data.chunks(CHUNK) {
                    black_box(pipeline.forward_chunk(&st, &mut ws, c.to_vec()).unwrap());
                }
            })
        });
        let (mut out, mut scratch) = (Unfiltered::default(), Workspace::default());
        group.bench_function(BenchmarkId::new("reverse", name), |b| {
            b.iter(|| {
                for (m, d) in &filtered {
                    {
                        out.clear();
                        pipeline.reverse_chunk(&st, &mut scratch, m, d, &mut out)
                    }
                    .unwrap();
                    black_box(&out.data);
                }
            })
        });
    }
    // The same bytes through the raw codecs, for scale.
    let data = ints();
    group.bench_function(BenchmarkId::new("raw", "zstd_compress"), |b| {
        b.iter(|| {
            for c in data.chunks(CHUNK) {
                black_box(zstd::bulk::compress(c, 3).unwrap());
            }
        })
    });
    let zstd_chunks: Vec<_> = data
        .chunks(CHUNK)
        .map(|c| zstd::bulk::compress(c, 3).unwrap())
        .collect();
    group.bench_function(BenchmarkId::new("raw", "zstd_decompress"), |b| {
        b.iter(|| {
            for c in &zstd_chunks {
                black_box(zstd::bulk::decompress(c, CHUNK).unwrap());
            }
        })
    });
    group.bench_function(BenchmarkId::new("raw", "lz4_compress"), |b| {
        b.iter(|| {
            for c in data.chunks(CHUNK) {
                black_box(lz4_flex::block::compress(c));
            }
        })
    });
    let lz4_chunks: Vec<_> = data.chunks(CHUNK).map(lz4_flex::block::compress).collect();
    group.bench_function(BenchmarkId::new("raw", "lz4_decompress"), |b| {
        b.iter(|| {
            for c in &lz4_chunks {
                black_box(lz4_flex::block::decompress(c, CHUNK).unwrap());
            }
        })
    });
    group.finish();
}

criterion_group!(benches, filters);
criterion_main!(benches);
