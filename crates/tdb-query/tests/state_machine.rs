//! The reader is a state machine any driver can run: answers pushed in
//! any order and in several pushes, decoding run on another thread, and
//! the async driver (a `Stream`) give the synchronous driver's batches;
//! misuse is an error, not a panic.

use futures_executor::block_on_stream;
use std::sync::Arc;
use tdb_fragment::TimeWindow;
use tdb_query::{Batch, ReadSpec, ReadStep, ReadStream, Reader, ResultLayout, Snapshot, SyncRead};
use tdb_storage::{LocalStorage, ReadableStorage};

/// Fixtures whose reads go through every phase: delete commits, sections,
/// several fragments, dense and sparse, Hilbert order.
const CASES: [(&str, ResultLayout); 6] = [
    ("dense_multi_chunk", ResultLayout::RowMajor),
    ("dense_overlapping_fragments", ResultLayout::ColMajor),
    ("sparse_multi_range", ResultLayout::RowMajor),
    ("delete_query", ResultLayout::Unordered),
    ("sparse_hilbert_multi", ResultLayout::GlobalOrder),
    ("sparse_float_string_pieces", ResultLayout::RowMajor),
];

/// Budgets: everything at once, and 64 KiB (several pieces; a tile held
/// whole past it is held over it).
fn budgets() -> [u64; 2] {
    [tdb_query::DEFAULT_BUDGET, 64 << 10]
}

fn open(case: &str) -> (LocalStorage, Arc<Snapshot>) {
    let storage = LocalStorage::new(tdb_testdata::root().join(case).join("array"));
    let snap = Snapshot::load(&storage, "", TimeWindow::ALL, None).unwrap();
    (storage, Arc::new(snap))
}

/// Every dimension and attribute.
fn spec(snap: &Snapshot, layout: ResultLayout, budget: u64) -> ReadSpec {
    let names: Vec<String> = snap.schema().fields().map(str::to_owned).collect();
    ReadSpec::new(names).with_layout(layout).with_budget(budget)
}

fn sync_batches(storage: &LocalStorage, snap: &Arc<Snapshot>, spec: ReadSpec) -> Vec<Batch> {
    SyncRead::new(storage, snap.clone(), spec)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A driver as unlike the synchronous one as the contract allows: each
/// batch's answers pushed last first, in two pushes; decoding on a thread
/// of its own.
fn scrambled_batches(
    storage: &LocalStorage,
    snap: &Arc<Snapshot>,
    spec: ReadSpec,
) -> (Vec<Batch>, usize) {
    let mut reader = Reader::new(snap.clone(), spec).unwrap();
    let (mut out, mut decodes) = (Vec::new(), 0);
    loop {
        match reader.step().unwrap() {
            ReadStep::Need(requests) => {
                let got = storage.read_ranges(&requests).unwrap();
                let mut answers: Vec<_> = requests.into_iter().zip(got).collect();
                answers.reverse();
                let rest = answers.split_off(answers.len() / 2);
                reader.push(answers).unwrap();
                reader.push(rest).unwrap();
            }
            ReadStep::Decode(work) => {
                decodes += 1;
                let decoded = std::thread::spawn(move || work.run()).join().unwrap();
                reader.push_decoded(decoded.unwrap()).unwrap();
            }
            ReadStep::Batch(b) => out.push(b),
            ReadStep::Done => return (out, decodes),
        }
    }
}

#[test]
fn answers_in_any_order_and_decoding_elsewhere_give_the_same_batches() {
    for (case, layout) in CASES {
        let (storage, snap) = open(case);
        for budget in budgets() {
            let want = sync_batches(&storage, &snap, spec(&snap, layout, budget));
            let (got, decodes) = scrambled_batches(&storage, &snap, spec(&snap, layout, budget));
            assert!(decodes > 0, "{case}: nothing decoded");
            assert_eq!(got, want, "{case} at {budget} bytes");
        }
    }
}

#[test]
fn the_stream_gives_the_iterators_batches() {
    for (case, layout) in CASES {
        let (storage, snap) = open(case);
        for budget in budgets() {
            let want = sync_batches(&storage, &snap, spec(&snap, layout, budget));
            let stream =
                ReadStream::new(&storage, snap.clone(), spec(&snap, layout, budget)).unwrap();
            let got: Vec<Batch> = block_on_stream(stream).map(Result::unwrap).collect();
            assert_eq!(got, want, "{case} at {budget} bytes");
        }
    }
}

#[test]
fn a_stream_ends_after_an_error() {
    let (_, snap) = open("dense_multi_chunk");
    // The fragments' files are not where this storage looks.
    let elsewhere = LocalStorage::new(tdb_testdata::root().join("dense_multi_chunk"));
    let stream = ReadStream::new(
        &elsewhere,
        snap.clone(),
        spec(&snap, ResultLayout::RowMajor, 1 << 20),
    )
    .unwrap();
    let got: Vec<_> = block_on_stream(stream).collect();
    assert_eq!(got.len(), 1);
    let err = got.into_iter().next().unwrap().unwrap_err();
    // The message and its causes, as a user prints them.
    let mut chain = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(e) = source {
        chain = format!("{chain}: {e}");
        source = e.source();
    }
    assert!(chain.contains("missing fragment metadata"), "{chain}");
}

#[test]
fn misuse_is_an_error_not_a_panic() {
    let (storage, snap) = open("sparse_multi_range");
    let mut reader =
        Reader::new(snap.clone(), spec(&snap, ResultLayout::RowMajor, 1 << 20)).unwrap();
    // Nothing asked yet.
    assert!(reader.push([]).is_err());
    let ReadStep::Need(requests) = reader.step().unwrap() else {
        panic!("a read starts with a need");
    };
    // Asked twice without an answer.
    let again = reader.step().unwrap_err().to_string();
    assert!(again.contains("call push"), "{again}");
    let got = storage.read_ranges(&requests).unwrap();
    let mut answers: Vec<_> = requests.into_iter().zip(got).collect();
    // An answer to a range never asked for.
    let mut stranger = answers[0].clone();
    stranger.0.key.push_str(".other");
    let err = reader.push([stranger]).unwrap_err().to_string();
    assert!(err.contains("not asked for"), "{err}");
    // One answer twice.
    let first = answers.remove(0);
    reader.push([first.clone()]).unwrap();
    assert!(reader.push([first]).is_err());
    reader.push(answers).unwrap();
    // On to the tiles: their decoding, handed out once.
    let work = loop {
        match reader.step().unwrap() {
            ReadStep::Need(r) => {
                let got = storage.read_ranges(&r).unwrap();
                reader.push(r.into_iter().zip(got)).unwrap();
            }
            ReadStep::Decode(work) => break work,
            other => panic!("{other:?}"),
        }
    };
    assert!(work.tiles() > 0 && work.bytes() > 0);
    let waiting = reader.step().unwrap_err().to_string();
    assert!(waiting.contains("push_decoded"), "{waiting}");
    reader.push_decoded(work.run().unwrap()).unwrap();
    assert!(matches!(reader.step().unwrap(), ReadStep::Batch(_)));
}

#[test]
fn decoded_tiles_of_another_read_are_refused() {
    let (storage, snap) = open("dense_multi_chunk");
    // The next decoding a reader hands out, its batches before it taken.
    let decode = |reader: &mut Reader| loop {
        match reader.step().unwrap() {
            ReadStep::Need(r) => {
                let got = storage.read_ranges(&r).unwrap();
                reader.push(r.into_iter().zip(got)).unwrap();
            }
            ReadStep::Decode(work) => return work,
            ReadStep::Batch(_) => {}
            ReadStep::Done => panic!("a read of one piece"),
        }
    };
    let spec = || spec(&snap, ResultLayout::RowMajor, 2 << 20);
    let mut a = Reader::new(snap.clone(), spec()).unwrap();
    let first = decode(&mut a).run().unwrap();
    a.push_decoded(first).unwrap();
    let _second = decode(&mut a);
    // Another read's first piece, while this one waits for its second.
    let mut b = Reader::new(snap.clone(), spec()).unwrap();
    let stale = decode(&mut b).run().unwrap();
    let err = a.push_decoded(stale).unwrap_err().to_string();
    assert!(err.contains("not waiting for"), "{err}");
}

#[test]
fn readers_and_streams_move_between_threads() {
    fn send<T: Send + 'static>() {}
    send::<Reader>();
    send::<tdb_query::DecodeWork>();
    send::<ReadStream<'static, LocalStorage>>();
}
