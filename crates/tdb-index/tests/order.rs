//! One pair at a time ([`cmp_cells`], how writers check cells said to be
//! in order) agrees with [`sort_cells`] (how writers and readers sort) in
//! every order; `WriteGrid::tile_aligned` is TileDB's "coincides with tile
//! bounds".

use tdb_format::{ArrayType, Datatype, Layout};
use tdb_index::dense::{InputOrder, WriteGrid};
use tdb_index::order::{cmp_cells, sort_cells, CellKeys, CellOrder, MAX_KEY_WORDS};
use tdb_index::DomainOps;
use tdb_schema::{ArraySchema, AttributeBuilder, DimensionBuilder, Range};

fn domain() -> tdb_schema::Domain {
    ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", -8i32..=23).tile_extent(4i32))
        .dimension(DimensionBuilder::range("y", 0i64..=99).tile_extent(10i64))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap()
        .domain
}

/// The next state of the tests' linear congruential generator.
fn step(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *state
}

/// A cell of [`domain`] drawn from `state`.
fn cell(state: &mut u64) -> (i32, i64) {
    let s = step(state);
    ((s >> 40) as i32 % 32 - 8, (s >> 20) as i64 % 100)
}

/// `n` cells of [`domain`] drawn from `seed`, as each dimension's bytes.
fn cells(seed: u64, n: usize) -> Vec<[Vec<u8>; 2]> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            let (x, y) = cell(&mut state);
            [x.to_le_bytes().to_vec(), y.to_le_bytes().to_vec()]
        })
        .collect()
}

/// Row- and col-major, and every global order (with Hilbert's cells or
/// not).
fn orders(hilbert: bool) -> Vec<CellOrder> {
    let mut kinds = vec![CellOrder::RowMajor, CellOrder::ColMajor];
    let cells: &[Layout] = if hilbert {
        &[Layout::RowMajor, Layout::ColMajor, Layout::Hilbert]
    } else {
        &[Layout::RowMajor, Layout::ColMajor]
    };
    for tile_order in [Layout::RowMajor, Layout::ColMajor] {
        for &cell_order in cells {
            kinds.push(CellOrder::Global {
                tile_order,
                cell_order,
            });
        }
    }
    kinds
}

#[test]
fn pairwise_comparison_agrees_with_the_sort() {
    let domain = domain();
    let ops = DomainOps::new(&domain).unwrap();
    let cells = cells(7, 300);
    let coord = |i: usize, d: usize| cells[i][d].as_slice();
    for kind in orders(true) {
        let mut order: Vec<usize> = (0..cells.len()).collect();
        sort_cells(
            &mut order,
            &domain,
            ops.dims(),
            kind,
            coord,
            |a, b| a.cmp(&b),
            1,
        );
        for w in order.windows(2) {
            let o = cmp_cells(&domain, ops.dims(), kind, &coord, w[0], w[1]);
            assert!(o.is_le(), "{kind:?}: cells {} and {}", w[0], w[1]);
            assert_eq!(
                cmp_cells(&domain, ops.dims(), kind, &coord, w[1], w[0]),
                o.reverse()
            );
        }
        // And it is not trivially true: some pair is strictly ordered.
        assert!(order
            .windows(2)
            .any(|w| cmp_cells(&domain, ops.dims(), kind, &coord, w[0], w[1]).is_lt()));
    }
}

/// Keys compare as the order does, pair by pair, in every order that has
/// them (none for Hilbert's or a float dimension).
#[test]
fn keys_compare_as_the_pairwise_order() {
    let domain = domain();
    let ops = DomainOps::new(&domain).unwrap();
    let cells = cells(11, 200);
    let coord = |i: usize, d: usize| cells[i][d].as_slice();
    for kind in orders(false) {
        let keys = CellKeys::new(&domain, kind).unwrap();
        let global = matches!(kind, CellOrder::Global { .. });
        assert_eq!(keys.width(), 2 + usize::from(global));
        let key = |i: usize| {
            let mut k = [0u64; MAX_KEY_WORDS];
            keys.key(|d| coord(i, d), &mut k);
            k
        };
        let mut strict = 0;
        for a in 0..cells.len() {
            for b in 0..cells.len() {
                let want = cmp_cells(&domain, ops.dims(), kind, &coord, a, b);
                assert_eq!(key(a).cmp(&key(b)), want, "{kind:?}: cells {a} and {b}");
                strict += usize::from(want.is_lt());
            }
        }
        assert!(strict > 0);
    }
    let hilbert = CellOrder::Global {
        tile_order: Layout::RowMajor,
        cell_order: Layout::Hilbert,
    };
    assert!(CellKeys::new(&domain, hilbert).is_none());
    let floats = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("f", 0f64..=1f64))
        .attribute(AttributeBuilder::new("a", Datatype::Int32))
        .build()
        .unwrap()
        .domain;
    assert!(CellKeys::new(&floats, CellOrder::RowMajor).is_none());
}

/// Every order sorts as the pairwise comparison then the tie, whatever
/// path the sort takes: keys of integer words (signed and unsigned at
/// their extremes, a dimension without tiles) or the datatypes' own
/// comparisons (a float dimension); duplicates go by the tie.
#[test]
fn the_sort_is_the_pairwise_order_then_the_tie() {
    let ints = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("a", -127i8..=126).tile_extent(16i8))
        .dimension(DimensionBuilder::range("b", 0u64..=u64::MAX - 1))
        .dimension(DimensionBuilder::range("c", -5i16..=1000).tile_extent(100i16))
        .attribute(AttributeBuilder::new("v", Datatype::Int32))
        .build()
        .unwrap()
        .domain;
    let floats = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("a", -127i8..=126).tile_extent(16i8))
        .dimension(DimensionBuilder::range("f", -1.0f64..=1.0).tile_extent(0.25f64))
        .attribute(AttributeBuilder::new("v", Datatype::Int32))
        .build()
        .unwrap()
        .domain;
    // Two coordinates of 63 bits and their tiles do not fit one 128-bit
    // key: sorted by words side by side.
    let wide = ArraySchema::builder(ArrayType::Sparse)
        .dimension(
            DimensionBuilder::range("p", -(1i64 << 62)..=(1i64 << 62)).tile_extent(1i64 << 40),
        )
        .dimension(DimensionBuilder::range("q", 0i64..=(1i64 << 62)).tile_extent(1i64 << 50))
        .attribute(AttributeBuilder::new("v", Datatype::Int32))
        .build()
        .unwrap()
        .domain;
    let mut state = 11u64;
    let mut next = move || step(&mut state) >> 16;
    // Few distinct values per dimension, so duplicates are many.
    let a_values = [-127i8, -1, 0, 15, 16, 126];
    let b_values = [0u64, 1, 1 << 63, u64::MAX - 1];
    let c_values = [-5i16, 94, 95, 1000];
    let f_values = [-1.0f64, -0.5, 0.0, 0.2, 1.0];
    let int_cells: Vec<[Vec<u8>; 3]> = (0..400)
        .map(|_| {
            let a = a_values[next() as usize % a_values.len()];
            let b = b_values[next() as usize % b_values.len()];
            let c = c_values[next() as usize % c_values.len()];
            [
                a.to_le_bytes().to_vec(),
                b.to_le_bytes().to_vec(),
                c.to_le_bytes().to_vec(),
            ]
        })
        .collect();
    let float_cells: Vec<[Vec<u8>; 2]> = (0..400)
        .map(|_| {
            let a = a_values[next() as usize % a_values.len()];
            let f = f_values[next() as usize % f_values.len()];
            [a.to_le_bytes().to_vec(), f.to_le_bytes().to_vec()]
        })
        .collect();
    let mut kinds = vec![CellOrder::RowMajor, CellOrder::ColMajor];
    for tile_order in [Layout::RowMajor, Layout::ColMajor] {
        for cell_order in [Layout::RowMajor, Layout::ColMajor] {
            kinds.push(CellOrder::Global {
                tile_order,
                cell_order,
            });
        }
    }
    /// Sorted from the cells in ascending order and in a shuffled one
    /// (readers sort cells they already ordered otherwise), with a tie
    /// that puts later cells first and one that ties everything (equal
    /// coordinates then keep the order they were given in).
    fn check<'c>(
        kinds: &[CellOrder],
        domain: &tdb_schema::Domain,
        n: usize,
        coord: &(dyn Fn(usize, usize) -> &'c [u8] + Sync),
    ) {
        let ops = DomainOps::new(domain).unwrap();
        let ascending: Vec<usize> = (0..n).collect();
        let shuffled: Vec<usize> = (0..n).map(|i| (i * 7919) % n).collect();
        let later_first = |a: usize, b: usize| b.cmp(&a);
        let none = |_: usize, _: usize| std::cmp::Ordering::Equal;
        for &kind in kinds {
            for given in [&ascending, &shuffled] {
                for (name, tie) in [
                    ("later first", &later_first as &dyn Fn(usize, usize) -> _),
                    ("no tie", &none),
                ] {
                    let mut sorted = given.clone();
                    sort_cells(&mut sorted, domain, ops.dims(), kind, coord, tie, 1);
                    let mut want = given.clone();
                    want.sort_by(|&a, &b| {
                        cmp_cells(domain, ops.dims(), kind, &coord, a, b).then_with(|| tie(a, b))
                    });
                    assert_eq!(sorted, want, "{kind:?}, {name}, from {:?}", &given[..3]);
                }
            }
        }
    }
    let wide_values = [-(1i64 << 62), -1, 0, 1i64 << 41, 1i64 << 62];
    let wide_cells: Vec<[Vec<u8>; 2]> = (0..400)
        .map(|_| {
            let p = wide_values[next() as usize % wide_values.len()];
            let q = wide_values[next() as usize % wide_values.len()].max(0);
            [p.to_le_bytes().to_vec(), q.to_le_bytes().to_vec()]
        })
        .collect();
    check(&kinds, &ints, int_cells.len(), &|i, d| {
        int_cells[i][d].as_slice()
    });
    check(&kinds, &wide, wide_cells.len(), &|i, d| {
        wide_cells[i][d].as_slice()
    });
    check(&kinds, &floats, float_cells.len(), &|i, d| {
        float_cells[i][d].as_slice()
    });
}

/// A sort large enough to make its keys on two threads orders the cells
/// as one thread does, from ascending and from shuffled cells.
#[test]
fn a_large_sort_on_threads_is_the_sort_on_one() {
    let domain = domain();
    let ops = DomainOps::new(&domain).unwrap();
    let n = 1_200_000usize;
    let mut state = 5u64;
    let cells: Vec<u8> = (0..n)
        .flat_map(|_| {
            let (x, y) = cell(&mut state);
            x.to_le_bytes().into_iter().chain(y.to_le_bytes())
        })
        .collect();
    let coord = |i: usize, d: usize| {
        let at = i * 12 + if d == 0 { 0 } else { 4 };
        &cells[at..at + if d == 0 { 4 } else { 8 }]
    };
    let kind = CellOrder::Global {
        tile_order: Layout::RowMajor,
        cell_order: Layout::ColMajor,
    };
    let ascending: Vec<usize> = (0..n).collect();
    let shuffled: Vec<usize> = (0..n).map(|i| (i * 7919) % n).collect();
    for given in [ascending, shuffled] {
        let sort = |threads| {
            let mut order = given.clone();
            let tie = |a: usize, b: usize| a.cmp(&b);
            sort_cells(&mut order, &domain, ops.dims(), kind, coord, tie, threads);
            order
        };
        let one = sort(1);
        assert!(one
            .windows(2)
            .all(|w| cmp_cells(&domain, ops.dims(), kind, &coord, w[0], w[1]).is_le()));
        assert_eq!(sort(2), one);
    }
}

#[test]
fn tile_aligned_means_starting_and_ending_on_tile_bounds() {
    let domain = domain();
    let rect = |x: (i32, i32), y: (i64, i64)| {
        vec![
            Range::from_bounds(&x.0.to_le_bytes(), &x.1.to_le_bytes(), false),
            Range::from_bounds(&y.0.to_le_bytes(), &y.1.to_le_bytes(), false),
        ]
    };
    let aligned = |x, y| {
        WriteGrid::new(
            &domain,
            Layout::RowMajor,
            Layout::RowMajor,
            &rect(x, y),
            InputOrder::RowMajor,
        )
        .unwrap()
        .tile_aligned()
    };
    assert!(aligned((-8, 23), (0, 99)));
    assert!(aligned((-4, 3), (10, 29)));
    assert!(!aligned((-3, 3), (10, 29)));
    assert!(!aligned((-4, 4), (10, 29)));
    assert!(!aligned((-4, 3), (10, 28)));
}
