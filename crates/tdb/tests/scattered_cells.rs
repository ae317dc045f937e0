//! Unordered reads of arrays with duplicates whose condition or box keeps a
//! cell here and there: the read lists each tile's kept cells instead of
//! making each run of them a slab (`tdb-query`'s `Slab::LISTED`). Over two
//! fragments that write some coordinates twice, with fixed cells of 8 and
//! 3 bytes, nullable and var-size fields, validity as bytes and as bits,
//! unbudgeted, under budgets whose batches cut a tile's list, and under
//! one below a tile (its cells spilled in runs), every read returns
//! exactly the written cells its condition and box keep.

use tdb::{
    Array, ArraySchema, ArrayType, AttributeBuilder, Batch, Datatype, DimensionBuilder,
    FieldBuffer, ReadSpec, ResultLayout, Subarray, WriteSpec,
};
use tdb_filters::Filter;

use crate::common::range;

fn schema() -> ArraySchema {
    ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("x", 0i32..=999).tile_extent(250i32))
        .dimension(DimensionBuilder::range("y", 0i32..=999).tile_extent(250i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int64).filters([Filter::Zstd { level: 1 }]))
        .attribute(AttributeBuilder::new("n", Datatype::Float64).nullable(true))
        .attribute(AttributeBuilder::new("r", Datatype::UInt8).cell_val_num(3))
        .attribute(
            AttributeBuilder::new("s", Datatype::StringUtf8)
                .var()
                .nullable(true)
                .filters([Filter::Zstd { level: 1 }]),
        )
        .capacity(400)
        .allows_duplicates(true)
        .build()
        .unwrap()
}

/// One written cell: coordinates, `a`, `n` (if valid), `r`, `s` (if valid).
type Cell = (i32, i32, i64, Option<u64>, Vec<u8>, Option<Vec<u8>>);

/// `count` cells from `seed`; coordinates on a grid of 100 × 100, so the
/// two fragments share some. `a` is scattered over 0..1000.
fn cells(seed: u64, count: usize) -> Vec<Cell> {
    let mut rng = tdb_testdata::XorShift::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut below = move |m: u64| rng.next_u64() % m;
    (0..count)
        .map(|_| {
            let k = below(10_000) as i32;
            let (x, y) = ((k / 100) * 10, (k % 100) * 10);
            let a = below(1000) as i64;
            let n = (a % 3 != 0).then(|| (a as f64 / 4.0).to_bits());
            let r = vec![x as u8, y as u8, a as u8];
            let s = (a % 7 != 0).then(|| format!("{a:x}").repeat(a as usize % 4).into_bytes());
            (x, y, a, n, r, s)
        })
        .collect()
}

fn write(array: &Array, t: u64, cells: &[Cell]) {
    let mut x = FieldBuffer::new("x", Datatype::Int32, 1, false);
    let mut y = FieldBuffer::new("y", Datatype::Int32, 1, false);
    let mut a = FieldBuffer::new("a", Datatype::Int64, 1, false);
    let mut n = FieldBuffer::new("n", Datatype::Float64, 1, true);
    let mut r = FieldBuffer::new("r", Datatype::UInt8, 3, false);
    let mut s = FieldBuffer::new("s", Datatype::StringUtf8, tdb::VAR_NUM, true);
    for (cx, cy, ca, cn, cr, cs) in cells {
        x.push(&cx.to_le_bytes(), true);
        y.push(&cy.to_le_bytes(), true);
        a.push(&ca.to_le_bytes(), true);
        n.push(&cn.unwrap_or(0).to_le_bytes(), cn.is_some());
        r.push(cr, true);
        s.push(cs.as_deref().unwrap_or_default(), cs.is_some());
    }
    array
        .write(WriteSpec::new(vec![x, y, a, n, r, s]).at(t))
        .unwrap();
}

/// A batch's cells as written cells, sorted.
fn got(b: &Batch) -> Vec<Cell> {
    let col = |name: &str| b.field(name).unwrap().column();
    let (x, y, a, n, r, s) = (col("x"), col("y"), col("a"), col("n"), col("r"), col("s"));
    let int = |c: &[u8]| i64::from_le_bytes(c.try_into().unwrap());
    let i32_of = |c: &[u8]| i32::from_le_bytes(c.try_into().unwrap());
    let mut out: Vec<Cell> = (0..b.num_cells as usize)
        .map(|i| {
            (
                i32_of(x.cell(i)),
                i32_of(y.cell(i)),
                int(a.cell(i)),
                (!n.is_null(i)).then(|| int(n.cell(i)) as u64),
                r.cell(i).to_vec(),
                (!s.is_null(i)).then(|| s.cell(i).to_vec()),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn reads_keeping_scattered_cells_return_exactly_those_cells() {
    let dir = tempfile::tempdir().unwrap();
    let array = Array::create(dir.path(), &schema()).unwrap();
    let (first, second) = (cells(1, 3000), cells(2, 2000));
    write(&array, 1, &first);
    write(&array, 2, &second);
    let array = Array::open(dir.path()).unwrap();
    let written: Vec<&Cell> = first.iter().chain(&second).collect();
    let mut boxed = Subarray::new(2);
    boxed.add_range(0, range(120, 730));
    boxed.add_range(1, range(300, 999));
    // One cell in ten, about half (more cells to a tile than a batch of
    // the small budget holds), nine in ten (long runs), and every cell.
    // (The condition and the values of `a` it keeps.)
    let conditions = [
        (Some("a < 100"), 0..100),
        (Some("a < 450"), 0..450),
        (Some("a >= 100"), 100..1000),
        (None, 0..1000),
    ];
    let mut compared = 0;
    for (condition, keeps) in conditions {
        let keeps = |a: i64| keeps.contains(&a);
        for sub in [None, Some(&boxed)] {
            let inside = |c: &&&Cell| {
                sub.is_none() || ((120..=730).contains(&c.0) && (300..=999).contains(&c.1))
            };
            let mut want: Vec<Cell> = (written.iter())
                .filter(|c| keeps(c.2))
                .filter(inside)
                .map(|c| (*c).clone())
                .collect();
            want.sort();
            assert!(want.len() > 100, "{condition:?}: {} cells", want.len());
            for budget in [None, Some(16 << 10), Some(64 << 10), Some(128 << 10)] {
                for packed in [false, true] {
                    let mut spec = ReadSpec::new(["x", "y", "a", "n", "r", "s"])
                        .with_layout(ResultLayout::Unordered);
                    if let Some(c) = condition {
                        spec = spec.with_condition(c);
                    }
                    if let Some(sub) = sub {
                        spec = spec.with_subarray(sub.clone());
                    }
                    if let Some(b) = budget {
                        spec = spec.with_budget(b);
                    }
                    if packed {
                        spec = spec.with_packed_validity();
                    }
                    let what = format!(
                        "{condition:?}, box {}, budget {budget:?}, packed {packed}",
                        sub.is_some()
                    );
                    let mut batches = 0;
                    let mut all = Batch::default();
                    for b in array.read(spec).unwrap() {
                        all.append(&b.unwrap());
                        batches += 1;
                    }
                    assert!(budget.is_none() || batches > 1, "{what}: {batches} batches");
                    assert!(got(&all) == want, "{what}: the cells differ");
                    compared += 1;
                }
            }
        }
    }
    assert_eq!(compared, 4 * 2 * 4 * 2);
}
