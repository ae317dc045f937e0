//! Dense tiles larger than a read's tile budget are read by the chunks
//! holding each piece's cells (`tdb-query`'s sliced tiles, `tiles::TileFetch::sliced`). On arrays of
//! every cell and tile order, with edge tiles, a second fragment over
//! part of the first, nullable, var-size and compressed fields, reads under a
//! budget far below one tile (which refused them before slicing) give
//! exactly the batches' cells of reads by the default budget (whole
//! tiles), in every layout, over one range, several and one cell, with
//! and without a condition.

use tdb::{
    Array, ArraySchema, ArrayType, AttributeBuilder, Datatype, DimensionBuilder, FieldBuffer,
    Layout, ReadSpec, ResultLayout, Subarray, WriteSpec,
};
use tdb_filters::Filter;

use crate::common::range;

/// Rows 0..=299 in tiles of 200, columns 0..=199 in tiles of 150 (edge
/// tiles both ways): 30,000 cells a tile, 510 KB of values and validity,
/// and var strings of 0, 6 or 12 bytes (420 KB of offsets and data).
fn schema(cell: Layout, tile: Layout) -> ArraySchema {
    ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("r", 0i32..=299).tile_extent(200i32))
        .dimension(DimensionBuilder::range("c", 0i32..=199).tile_extent(150i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int64).filters([Filter::Zstd { level: 1 }]))
        .attribute(AttributeBuilder::new("n", Datatype::Float64).nullable(true))
        .attribute(
            AttributeBuilder::new("s", Datatype::StringUtf8)
                .var()
                .nullable(true)
                .filters([Filter::Zstd { level: 1 }]),
        )
        .cell_order(cell)
        .tile_order(tile)
        .build()
        .unwrap()
}

/// Cells of the box `[r0, r1] × [c0, c1]`, row-major, stamped by `t`.
fn write(array: &Array, t: u64, (r0, r1): (i32, i32), (c0, c1): (i32, i32)) {
    let mut a = FieldBuffer::new("a", Datatype::Int64, 1, false);
    let mut n = FieldBuffer::new("n", Datatype::Float64, 1, true);
    let mut s = FieldBuffer::new("s", Datatype::StringUtf8, tdb::VAR_NUM, true);
    for r in r0..=r1 {
        for c in c0..=c1 {
            let v = i64::from(r) * 1000 + i64::from(c) + (t as i64) * 1_000_000;
            a.push(&v.to_le_bytes(), true);
            n.push(&(v as f64 / 4.0).to_le_bytes(), (r + c) % 3 != 0);
            let text = format!("{v:x}").repeat((r + c) as usize % 3);
            s.push(text.as_bytes(), (r * c) % 7 != 0);
        }
    }
    let mut sub = Subarray::new(2);
    sub.add_range(0, range(r0, r1));
    sub.add_range(1, range(c0, c1));
    array
        .write(WriteSpec::new(vec![a, n, s]).with_subarray(sub).at(t))
        .unwrap();
}

fn subarray(rows: &[(i32, i32)], cols: &[(i32, i32)]) -> Subarray {
    let mut sub = Subarray::new(2);
    for &(lo, hi) in rows {
        sub.add_range(0, range(lo, hi));
    }
    for &(lo, hi) in cols {
        sub.add_range(1, range(lo, hi));
    }
    sub
}

#[test]
fn reads_of_tiles_past_the_budget_give_the_whole_tiles_cells() {
    let reads = [
        // Four tiles, both fragments.
        subarray(&[(150, 260)], &[(100, 199)]),
        subarray(&[(0, 3), (120, 290)], &[(140, 160)]),
        subarray(&[(201, 201)], &[(151, 151)]),
    ];
    let mut compared = 0;
    for cell in [Layout::RowMajor, Layout::ColMajor] {
        for tile in [Layout::RowMajor, Layout::ColMajor] {
            let dir = tempfile::tempdir().unwrap();
            let array = Array::create(dir.path(), &schema(cell, tile)).unwrap();
            write(&array, 1, (0, 299), (0, 199));
            write(&array, 2, (50, 180), (30, 170));
            let array = Array::open(dir.path()).unwrap();
            for layout in [
                ResultLayout::RowMajor,
                ResultLayout::ColMajor,
                ResultLayout::GlobalOrder,
            ] {
                for (k, sub) in reads.iter().enumerate() {
                    // A condition on one read: dense cells it rejects are fill.
                    let conditions = match k {
                        0 => &[None, Some("a < 1200000")][..],
                        _ => &[None][..],
                    };
                    for &condition in conditions {
                        let mut spec = ReadSpec::new(["r", "c", "a", "n", "s"])
                            .with_layout(layout)
                            .with_subarray(sub.clone());
                        if let Some(c) = condition {
                            spec = spec.with_condition(c);
                        }
                        let what = format!(
                            "{cell:?} cells, {tile:?} tiles, {layout:?}, read {k}, {condition:?}"
                        );
                        let whole = array.read_all(spec.clone()).unwrap();
                        // Tiles of 1 MB unfiltered, 512 KiB for tiles
                        // (two fragments' at once): refused before slicing.
                        let sliced = array
                            .read_all(spec.with_budget(1 << 20))
                            .unwrap_or_else(|e| panic!("{what}: {}", crate::common::chain(&e)));
                        if let Some(d) = difference(&sliced, &whole) {
                            panic!("{what}: {d}");
                        }
                        compared += 1;
                    }
                }
            }
        }
    }
    assert_eq!(compared, 4 * 3 * 4);
}

/// Where two batches first differ: the field and cell (batches are too
/// large to print).
fn difference(got: &tdb::Batch, want: &tdb::Batch) -> Option<String> {
    if got.num_cells != want.num_cells {
        return Some(format!("{} cells, not {}", got.num_cells, want.num_cells));
    }
    for (g, w) in got.fields.iter().zip(&want.fields) {
        let (gc, wc) = (g.column(), w.column());
        for i in 0..want.num_cells as usize {
            if gc.cell(i) != wc.cell(i) || gc.is_null(i) != wc.is_null(i) {
                return Some(format!(
                    "{} cell {i}: {:?} (null {}), not {:?} (null {})",
                    g.name,
                    gc.cell(i),
                    gc.is_null(i),
                    wc.cell(i),
                    wc.is_null(i)
                ));
            }
        }
    }
    (got != want).then(|| "the buffers differ beyond their cells".to_owned())
}

/// A row of tiles far past the piece size a read aims at (64 tiles of 512
/// KiB with no filter, 64 MiB held as the reader counts tiles, fetched and
/// unfiltered; the aim is 8 MiB) is read in pieces cut inside its tiles,
/// each reading its cells' chunks: the read holds a part of the row at a
/// time (before, one piece of the whole row), and every cell comes back in
/// order.
#[test]
fn a_row_of_tiles_far_past_the_piece_aim_is_read_in_parts() {
    let (rows, cols) = (64i32, 65_536i32);
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("r", 0i32..=rows - 1).tile_extent(rows))
        .dimension(DimensionBuilder::range("c", 0i32..=cols - 1).tile_extent(1024i32))
        .attribute(AttributeBuilder::new("a", Datatype::Int64))
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let array = Array::create(dir.path(), &schema).unwrap();
    let value = |r: i32, c: i32| i64::from(r) * 1_000_000 + i64::from(c);
    let mut a = FieldBuffer::new("a", Datatype::Int64, 1, false);
    for r in 0..rows {
        for c in 0..cols {
            a.push(&value(r, c).to_le_bytes(), true);
        }
    }
    array.write(WriteSpec::new(vec![a]).at(1)).unwrap();
    let array = Array::open(dir.path()).unwrap();
    let spec = ReadSpec::new(["a"]).with_layout(ResultLayout::RowMajor);
    let (mut batches, mut next) = (0, 0usize);
    for batch in array.read(spec).unwrap() {
        let batch = batch.unwrap();
        assert!(
            batch.num_cells < (rows * cols) as u64,
            "the whole row in one batch"
        );
        let column = batch.fields[0].column();
        for i in 0..batch.num_cells as usize {
            let (r, c) = ((next / cols as usize) as i32, (next % cols as usize) as i32);
            assert_eq!(
                column.cell(i),
                &value(r, c).to_le_bytes()[..],
                "cell {next}"
            );
            next += 1;
        }
        batches += 1;
    }
    assert_eq!(next, (rows * cols) as usize);
    assert!(batches >= 2, "{batches} batches");
}
