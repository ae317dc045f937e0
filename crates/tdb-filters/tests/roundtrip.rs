//! Property tests: for random chunks of every applicable datatype, every
//! filter and common chains give back their input (float scaling within its
//! bound), and refuse what they cannot take with a typed error, never a
//! panic.

use proptest::prelude::*;
use tdb_filters::{
    Filter, FilterError, FilterPipeline, Stage, StringOffsets, Unfiltered, Workspace,
};
use tdb_format::{Datatype, FormatVersion};

const NUMERIC: &[Datatype] = &[
    Datatype::Int8,
    Datatype::UInt8,
    Datatype::Int16,
    Datatype::UInt16,
    Datatype::Int32,
    Datatype::UInt32,
    Datatype::Int64,
    Datatype::UInt64,
    Datatype::Float32,
    Datatype::Float64,
    Datatype::DatetimeMs,
    Datatype::Char,
];

fn lossless_filters() -> Vec<Vec<Filter>> {
    let single = [
        Filter::None,
        Filter::Gzip { level: -1 },
        Filter::Zstd { level: 3 },
        Filter::Lz4 { level: -1 },
        Filter::Bzip2 { level: 9 },
        Filter::Rle { level: -1 },
        Filter::Delta {
            level: -1,
            reinterpret: None,
        },
        Filter::DoubleDelta {
            level: -1,
            reinterpret: None,
        },
        Filter::BitWidthReduction { max_window: 256 },
        Filter::PositiveDelta { max_window: 64 },
        Filter::Bitshuffle,
        Filter::Byteshuffle,
        Filter::Xor,
        Filter::ChecksumMd5,
        Filter::ChecksumSha256,
    ];
    let mut out: Vec<Vec<Filter>> = single.iter().map(|f| vec![*f]).collect();
    out.extend([
        vec![Filter::Bitshuffle, Filter::Zstd { level: 1 }],
        vec![Filter::Byteshuffle, Filter::Lz4 { level: -1 }],
        vec![
            Filter::Delta {
                level: -1,
                reinterpret: None,
            },
            Filter::Gzip { level: 6 },
        ],
        vec![
            Filter::DoubleDelta {
                level: -1,
                reinterpret: None,
            },
            Filter::ChecksumSha256,
        ],
        vec![Filter::ChecksumMd5, Filter::Zstd { level: -1 }],
        vec![
            // Not RLE after bit-width reduction: RLE runs over whole cells
            // and reduced windows are not whole INT64 cells.
            Filter::BitWidthReduction { max_window: 128 },
            Filter::ChecksumMd5,
            Filter::Zstd { level: -1 },
        ],
        vec![Filter::Xor, Filter::Bitshuffle, Filter::Bzip2 { level: 1 }],
        vec![
            Filter::Delta {
                level: -1,
                reinterpret: Some(Datatype::Int64),
            },
            Filter::Byteshuffle,
            Filter::Zstd { level: 3 },
        ],
        vec![Filter::InternalAes256Gcm],
        vec![Filter::Zstd { level: 1 }, Filter::InternalAes256Gcm],
    ]);
    out
}

const KEY: [u8; 32] = *b"0123456789abcdeF0123456789abcdeF";

fn stage(datatype: Datatype) -> Stage<'static> {
    Stage::new(datatype, FormatVersion::WRITTEN).with_key(Some(&KEY))
}

/// Forward then reverse; `None` when forward refused the input with a typed
/// error (some filters take only some datatypes, or monotonic input); a
/// filter that is not implemented fails the test.
fn round_trip(filters: &[Filter], datatype: Datatype, data: &[u8]) -> Option<Vec<u8>> {
    let pipeline = FilterPipeline {
        max_chunk_size: 65536,
        filters: filters.to_vec(),
    };
    let st = stage(datatype);
    let (metadata, filtered) =
        match pipeline.forward_chunk(&st, &mut Workspace::default(), data.to_vec()) {
            Ok(x) => x,
            Err(FilterError::BadInput { .. }) => return None,
            Err(e) => panic!("{filters:?} on {datatype:?}: {e}"),
        };
    let (mut out, mut scratch) = (Unfiltered::default(), Workspace::default());
    {
        out.clear();
        pipeline.reverse_chunk(&st, &mut scratch, &metadata, &filtered, &mut out)
    }
    .unwrap_or_else(|e| panic!("{filters:?} on {datatype:?}: {e}"));
    Some(out.data)
}

/// Values shaped like real columns: runs, slow ramps, and noise.
fn chunk() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..600),
        (any::<u8>(), 0usize..600).prop_map(|(b, n)| vec![b; n]),
        (any::<u64>(), 1u64..9, 0usize..80).prop_map(|(start, step, n)| {
            (0..n as u64)
                .flat_map(|i| start.wrapping_add(i * step).to_le_bytes())
                .collect()
        }),
        prop::collection::vec((any::<u8>(), 1usize..20), 0..40)
            .prop_map(|runs| runs.into_iter().flat_map(|(b, n)| vec![b; n]).collect()),
    ]
}

/// The property test below lets a filter refuse input it cannot take; on
/// input every filter takes (whole, rising INT64 values) none may refuse, so
/// a filter that refused everything could not pass unnoticed.
#[test]
fn every_chain_takes_a_rising_int64_column() {
    let data: Vec<u8> = (0..500i64)
        .flat_map(|i| (1000 + 3 * i).to_le_bytes())
        .collect();
    for filters in lossless_filters() {
        let back = round_trip(&filters, Datatype::Int64, &data);
        assert_eq!(back.as_deref(), Some(&data[..]), "{filters:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn lossless_filters_round_trip(data in chunk(), t in 0..NUMERIC.len()) {
        let datatype = NUMERIC[t];
        for filters in lossless_filters() {
            if let Some(back) = round_trip(&filters, datatype, &data) {
                prop_assert_eq!(&back, &data, "{:?} on {:?}", filters, datatype);
            }
        }
    }

    #[test]
    fn float_scaling_is_within_half_a_step(
        values in prop::collection::vec(-1.0e6f64..1.0e6, 0..200),
        scale in prop::sample::select(vec![0.001f64, 0.5, 1.0, 3.0]),
        offset in -100.0f64..100.0,
        byte_width in prop::sample::select(vec![4u64, 8]),
    ) {
        let filters = [Filter::ScaleFloat { scale, offset, byte_width }];
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let back = round_trip(&filters, Datatype::Float64, &data).expect("f64 is accepted");
        prop_assert_eq!(back.len(), data.len());
        for (v, b) in values.iter().zip(back.chunks_exact(8)) {
            let b = f64::from_le_bytes(b.try_into().unwrap());
            let bound = if byte_width == 4 && ((v - offset) / scale).abs() > f64::from(i32::MAX) {
                f64::INFINITY // out of the integer range: TileDB wraps; no bound
            } else {
                scale / 2.0 + v.abs() * 1e-12
            };
            prop_assert!((v - b).abs() <= bound, "{} came back as {}", v, b);
        }
    }

    #[test]
    fn var_length_strings_round_trip_with_their_offsets(
        cells in prop::collection::vec(
            prop_oneof![
                prop::sample::select(vec!["", "a", "bb", "hello", "ñandú"]).prop_map(String::from),
                "[a-c]{0,6}",
            ],
            1..120,
        ),
        utf8 in any::<bool>(),
        chain in 0usize..4,
    ) {
        let datatype = if utf8 { Datatype::StringUtf8 } else { Datatype::StringAscii };
        let filters = match chain {
            0 => vec![Filter::Rle { level: -1 }],
            1 => vec![Filter::Dictionary { level: -1 }],
            2 => vec![Filter::Rle { level: -1 }, Filter::Zstd { level: 1 }],
            _ => vec![Filter::Dictionary { level: -1 }, Filter::ChecksumMd5, Filter::Lz4 { level: 1 }],
        };
        let mut data = Vec::new();
        let mut offsets = Vec::new();
        for c in &cells {
            offsets.push(data.len() as u64);
            data.extend_from_slice(c.as_bytes());
        }
        let pipeline = FilterPipeline { max_chunk_size: 65536, filters };
        let forward = stage(datatype).with_string_offsets(StringOffsets::Forward(&offsets));
        let (metadata, filtered) = pipeline.forward_chunk(&forward, &mut Workspace::default(), data.clone()).unwrap();
        let reverse = stage(datatype).with_string_offsets(StringOffsets::Reverse);
        let (mut out, mut scratch) = (Unfiltered::default(), Workspace::default());
        { out.clear(); pipeline.reverse_chunk(&reverse, &mut scratch, &metadata, &filtered, &mut out) }.unwrap();
        prop_assert_eq!(out.data, data);
        prop_assert_eq!(out.offsets, offsets);
    }
}
