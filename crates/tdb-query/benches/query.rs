//! The read path's hot inner pieces: copying cell slabs from dense tiles
//! into results, and evaluating query conditions over a batch of cells.
//! `cargo bench -p tdb-query`. The dense reads run against memory storage
//! on tiles without filters, so the copy is what they measure.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use tdb_format::{ArrayType, Datatype};
use tdb_fragment::{create_array, TimeWindow};
use tdb_query::condition::{self, BoundCondition};
use tdb_query::{Batch, FieldBuffer, ReadSpec, Snapshot, Subarray, SyncRead, WriteSpec};
use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder, Range};
use tdb_storage::MemoryStorage;

/// Side of the dense array (int32 cells, 256² tiles, no filters).
const SIDE: i32 = 2048;

fn range(lo: i32, hi: i32) -> Range {
    Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false)
}

fn subarray(rows: (i32, i32), cols: (i32, i32)) -> Subarray {
    let mut sub = Subarray::new(2);
    sub.add_range(0, range(rows.0, rows.1))
        .add_range(1, range(cols.0, cols.1));
    sub
}

fn dense_array() -> (MemoryStorage, Arc<Snapshot>) {
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("r", 0..=SIDE - 1).tile_extent(256))
        .dimension(DimensionBuilder::range("c", 0..=SIDE - 1).tile_extent(256))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .expect("schema");
    let storage = MemoryStorage::new();
    let entry = create_array(&storage, "arr", &schema, &[], None, 1).expect("create");
    let mut a = FieldBuffer::new("a", Datatype::Int32, 1, false);
    a.data = (0..SIDE * SIDE).flat_map(i32::to_le_bytes).collect();
    let spec = WriteSpec::new(vec![a]).with_subarray(subarray((0, SIDE - 1), (0, SIDE - 1)));
    tdb_query::write_fragment(&storage, "arr", &entry, None, &spec).expect("write");
    let snap = Arc::new(Snapshot::load(&storage, "arr", TimeWindow::ALL, None).expect("open"));
    (storage, snap)
}

fn slab_copy(c: &mut Criterion) {
    let (storage, snap) = dense_array();
    let read = |sub: Subarray| {
        let spec = ReadSpec::new(["a"]).with_subarray(sub);
        let mut bytes = 0;
        for batch in SyncRead::new(&storage, snap.clone(), spec).expect("read") {
            bytes += batch.expect("batch").fields[0].data.len();
        }
        bytes
    };
    // 64 slices of 256², each straddling four tiles.
    let slices: Vec<Subarray> = (0..64)
        .map(|k| {
            let (r, c) = (128 + (k / 8) * 224, 128 + (k % 8) * 224);
            subarray((r, r + 255), (c, c + 255))
        })
        .collect();
    let mut group = c.benchmark_group("slab_copy");
    group.sample_size(10);
    let whole = u64::from(SIDE.unsigned_abs()).pow(2) * 4;
    group.throughput(Throughput::Bytes(whole));
    group.bench_function("whole 2048² int32", |b| {
        b.iter(|| black_box(read(subarray((0, SIDE - 1), (0, SIDE - 1)))))
    });
    group.throughput(Throughput::Bytes(64 * 256 * 256 * 4));
    group.bench_function("64 slices 256² across tiles", |b| {
        b.iter(|| {
            for s in &slices {
                black_box(read(s.clone()));
            }
        })
    });
    group.throughput(Throughput::Bytes(u64::from(SIDE.unsigned_abs()) * 4));
    group.bench_function("one column 2048×1", |b| {
        b.iter(|| black_box(read(subarray((0, SIDE - 1), (1000, 1000)))))
    });
    group.finish();
}

/// A million cells: `a` f64 uniform in [0, 1), `i` int64 counting up, `s`
/// a var-length string of 4 to 11 letters.
fn batch() -> (ArraySchema, Batch) {
    const N: usize = 1_000_000;
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", 0i64..=999_999_999).tile_extent(1000i64))
        .attribute(AttributeBuilder::new("a", Datatype::Float64))
        .attribute(AttributeBuilder::new("i", Datatype::Int64))
        .attribute(AttributeBuilder::new("s", Datatype::StringAscii).var())
        .build()
        .expect("schema");
    let mut rng = tdb_testdata::XorShift::new(0x2545_f491_4f6c_dd1d);
    let mut next = move || rng.next_u64();
    let mut a = FieldBuffer::new("a", Datatype::Float64, 1, false);
    let mut i = FieldBuffer::new("i", Datatype::Int64, 1, false);
    let mut s = FieldBuffer::new("s", Datatype::StringAscii, u32::MAX, false);
    let mut offsets = Vec::with_capacity(N);
    for k in 0..N {
        a.data
            .extend_from_slice(&((next() >> 11) as f64 / (1u64 << 53) as f64).to_le_bytes());
        i.data.extend_from_slice(&(k as i64).to_le_bytes());
        offsets.push(s.data.len() as u64);
        let r = next();
        let len = 4 + (r % 8) as usize;
        s.data
            .extend((0..len).map(|j| b'a' + ((r >> (8 + 4 * j)) % 4) as u8));
    }
    s.offsets = Some(offsets);
    let mut batch = Batch::default();
    batch.num_cells = N as u64;
    batch.fields = vec![a, i, s];
    (schema, batch)
}

fn conditions(c: &mut Criterion) {
    let (schema, batch) = batch();
    let mut group = c.benchmark_group("condition");
    group.throughput(Throughput::Elements(batch.num_cells));
    group.sample_size(20);
    for expr in [
        "a < 0.1",
        "i >= 1000 and i < 500000",
        "a < 0.5 or i < 1000",
        "s == 'abcd'",
    ] {
        let parsed = condition::parse(expr, &schema).expect("parse");
        let bound = BoundCondition::new(&parsed, &schema, &HashMap::new()).expect("bind");
        let mut mask = vec![true; batch.num_cells as usize];
        group.bench_function(BenchmarkId::new("evaluate 1M cells", expr), |b| {
            b.iter(|| {
                mask.fill(true);
                bound.evaluate(&batch, &mut mask).expect("evaluate");
                black_box(mask.iter().filter(|&&m| m).count())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, slab_copy, conditions);
criterion_main!(benches);
