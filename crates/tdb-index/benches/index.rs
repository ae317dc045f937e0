//! The index's hot inner pieces: R-tree queries (which tiles a read
//! touches), Hilbert values, and cell comparisons in the global order (every
//! write sorts by them, every merge step of a read or a consolidation
//! compares by them). `cargo bench -p tdb-index`; criterion reports
//! elements per second.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::hint::black_box;
use tdb_format::{ArrayType, Datatype, Layout};
use tdb_index::order::{cmp_cells, sort_cells, CellOrder};
use tdb_index::{hilbert, DomainOps, RTree, Range};
use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder, Domain};

/// W3's domain: two int64 dimensions on [0, 1e6), space tiles of 10,000.
fn domain(cell_order: Layout) -> Domain {
    ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", 0i64..=999_999).tile_extent(10_000i64))
        .dimension(DimensionBuilder::range("y", 0i64..=999_999).tile_extent(10_000i64))
        .attribute(AttributeBuilder::new("a", Datatype::Float64))
        .cell_order(cell_order)
        .build()
        .expect("schema")
        .domain
}

fn range(lo: i64, hi: i64) -> Range {
    Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false)
}

/// `n` uniform random cells, as coordinate bytes per dimension.
fn cells(n: usize) -> [Vec<[u8; 8]>; 2] {
    let mut rng = tdb_testdata::XorShift::new(0x9E37_79B9_7F4A_7C15);
    let mut next = move || ((rng.next_u64() % 1_000_000) as i64).to_le_bytes();
    let xs = (0..n).map(|_| next()).collect();
    let ys = (0..n).map(|_| next()).collect();
    [xs, ys]
}

fn rtree(c: &mut Criterion) {
    let domain = domain(Layout::RowMajor);
    // 10,000 leaves: a 100 × 100 grid of 10,000² tiles, in row-major order.
    let leaves = (0..100i64)
        .flat_map(|i| (0..100i64).map(move |j| (i, j)))
        .map(|(i, j)| {
            vec![
                range(i * 10_000, i * 10_000 + 9_999),
                range(j * 10_000, j * 10_000 + 9_999),
            ]
        })
        .collect();
    let tree = RTree::build(&domain, leaves, 10).expect("tree");
    // 16 boxes of 1% of the domain each, at scattered offsets.
    let boxes: Vec<Vec<Range>> = (0..16i64)
        .map(|k| {
            let (x, y) = ((k * 61_231) % 900_000, (k * 37_813) % 900_000);
            vec![range(x, x + 99_999), range(y, y + 99_999)]
        })
        .collect();
    let mut group = c.benchmark_group("rtree");
    group.throughput(Throughput::Elements(boxes.len() as u64));
    group.bench_function("tile_overlap 16 boxes of 1%", |b| {
        b.iter(|| {
            for q in &boxes {
                black_box(tree.tile_overlap(&domain, q).expect("query"));
            }
        })
    });
    group.finish();
}

fn hilbert(c: &mut Criterion) {
    const N: usize = 100_000;
    let domain = domain(Layout::Hilbert);
    let [xs, ys] = cells(N);
    let bits = hilbert::bits(2);
    let mut group = c.benchmark_group("hilbert");
    group.throughput(Throughput::Elements(N as u64));
    group.bench_function("bucket and value, 2D int64", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for (x, y) in xs.iter().zip(&ys) {
                let bx = hilbert::bucket(&domain.dimensions[0], x, bits);
                let by = hilbert::bucket(&domain.dimensions[1], y, bits);
                sum = sum.wrapping_add(hilbert::value(&[bx, by], bits));
            }
            black_box(sum)
        })
    });
    group.finish();
}

fn order(c: &mut Criterion) {
    const N: usize = 100_000;
    let [xs, ys] = cells(N);
    let coord = |i: usize, d: usize| -> &[u8] {
        if d == 0 {
            &xs[i]
        } else {
            &ys[i]
        }
    };
    let orders = [
        ("row-major", Layout::RowMajor, CellOrder::RowMajor),
        (
            "global",
            Layout::RowMajor,
            CellOrder::Global {
                tile_order: Layout::RowMajor,
                cell_order: Layout::RowMajor,
            },
        ),
        (
            "hilbert",
            Layout::Hilbert,
            CellOrder::Global {
                tile_order: Layout::RowMajor,
                cell_order: Layout::Hilbert,
            },
        ),
    ];
    let mut group = c.benchmark_group("order");
    group.throughput(Throughput::Elements(N as u64));
    group.sample_size(10);
    for (name, cell_order, kind) in orders {
        let domain = domain(cell_order);
        let ops = DomainOps::new(&domain).expect("ops").dims().to_vec();
        group.bench_function(BenchmarkId::new("sort_cells 100k", name), |b| {
            b.iter(|| {
                let mut order: Vec<usize> = (0..N).collect();
                sort_cells(&mut order, &domain, &ops, kind, coord, |a, b| a.cmp(&b), 1);
                black_box(order)
            })
        });
        group.bench_function(BenchmarkId::new("cmp_cells 100k pairs", name), |b| {
            b.iter(|| {
                let mut less = 0usize;
                for i in 1..N {
                    less += cmp_cells(&domain, &ops, kind, &coord, i - 1, i).is_lt() as usize;
                }
                black_box(less)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, rtree, hilbert, order);
criterion_main!(benches);
