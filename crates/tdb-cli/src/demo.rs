//! `tdb demo DIR`: tdb end to end on generated data. Creates a dense and a
//! sparse array under DIR, writes a few million cells into each (the dense
//! one streamed in global order, a band of tiles at a time, so it never
//! holds its cells whole), prints their schemas, reads slices back and
//! checks every answer against the data it generated, cell by cell (a
//! wrong answer is an error, not a line of output).

use crate::CliError;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};
use tdb::{Array, ArraySchema, Datatype, FieldBuffer, Range, ReadSpec, ResultLayout, Subarray};
use tdb::{WriteSpec, VAR_NUM};
use tdb_filters::Filter;
use tdb_format::{ArrayType, Layout};
use tdb_schema::{AttributeBuilder, DimensionBuilder};

/// How the demo reports progress: told the phase, cells done and cells
/// in all (`None` for work of unknown length); an empty phase ends the
/// last one, before the demo prints.
pub type Progress<'a> = &'a mut dyn FnMut(&'static str, Option<(u64, u64)>);

/// The dense array's value at `(y, x)`: smooth, so it compresses.
fn dense_value(y: i64, x: i64) -> f64 {
    ((y * 31 + x * 17) % 1000) as f64 / 10.0
}

/// Scatters the sparse points: odd, so invertible modulo a power of two.
const SCATTER: u64 = 2_654_435_761;

/// Sparse point `i` of `n`, on a `side` × `side` grid (`side` a power of
/// two): a bijection of the grid's cells, so coordinates are scattered and
/// never repeat.
fn sparse_point(i: u64, side: u64) -> (i64, i64) {
    let cell = i.wrapping_mul(SCATTER) & (side * side - 1);
    ((cell / side) as i64, (cell % side) as i64)
}

/// The point number at `(y, x)` ([`sparse_point`] inverted), whether or
/// not that many points were written.
fn sparse_index(y: i64, x: i64, side: u64) -> u64 {
    (y as u64 * side + x as u64).wrapping_mul(SCATTER_INVERSE) & (side * side - 1)
}

/// SCATTER's inverse modulo 2^64, by Newton's iteration (each step
/// doubles the bits that are right), worked out once at compile time.
const SCATTER_INVERSE: u64 = {
    let mut inverse = SCATTER;
    let mut step = 0;
    while step < 6 {
        inverse = inverse.wrapping_mul(2u64.wrapping_sub(SCATTER.wrapping_mul(inverse)));
        step += 1;
    }
    inverse
};

fn f64s(f: &FieldBuffer) -> impl Iterator<Item = f64> + '_ {
    f.data
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
}

fn i64s(f: &FieldBuffer) -> impl Iterator<Item = i64> + '_ {
    f.data
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
}

fn elapsed(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn mismatch(what: &str, got: impl std::fmt::Display, want: impl std::fmt::Display) -> CliError {
    CliError::Output(format!("demo: {what}: read {got}, wrote {want}"))
}

/// Runs the demo with about `cells` cells per array, writing to `out` and
/// reporting progress to `progress`.
pub fn run(
    dir: &Path,
    cells: u64,
    out: &mut dyn Write,
    progress: Progress<'_>,
) -> Result<(), CliError> {
    let io = CliError::output;
    // Whole tiles of 256 (global-order dense writes take whole tiles).
    let side = ((cells as f64).sqrt() as i64).max(16);
    let tile = 256.min(side);
    let side = (side + tile - 1) / tile * tile;
    // The sparse grid: the power of two whose square holds every point.
    let grid = (cells.max(256) as f64).sqrt().ceil() as u64;
    let grid = grid.next_power_of_two();
    let points = cells.max(256);
    writeln!(
        out,
        "tdb demo in {}: a dense {side} x {side} array and {points} sparse points",
        dir.display()
    )
    .map_err(io)?;

    // Dense: FLOAT64 over a side x side grid, BYTESHUFFLE + ZSTD.
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dimension(DimensionBuilder::range("y", 0i64..=side - 1).tile_extent(tile))
        .dimension(DimensionBuilder::range("x", 0i64..=side - 1).tile_extent(tile))
        .attribute(
            AttributeBuilder::new("a", Datatype::Float64)
                .filters([Filter::Byteshuffle, Filter::Zstd { level: 3 }]),
        )
        .build()?;
    let dense_dir = dir.join("dense");
    let dense = Array::create(&dense_dir, &schema)?;
    let total = (side * side) as u64;
    let started = Instant::now();
    // A band of tiles at a time, in the global order: tile by tile along
    // the band, each tile's cells row by row.
    let mut writer =
        dense.writer(WriteSpec::new(Vec::new()).with_layout(ResultLayout::GlobalOrder))?;
    let mut a = FieldBuffer::new("a", Datatype::Float64, 1, false);
    for band in (0..side).step_by(tile as usize) {
        a.clear();
        for tx in (0..side).step_by(tile as usize) {
            for y in band..band + tile {
                for x in tx..tx + tile {
                    a.data.extend_from_slice(&dense_value(y, x).to_le_bytes());
                }
            }
        }
        writer
            .submit(std::slice::from_ref(&a))
            .map_err(tdb::Error::from)?;
        progress(
            "writing the dense array",
            Some(((band + tile) as u64 * side as u64, total)),
        );
    }
    let written = writer.finish().map_err(tdb::Error::from)?;
    let took = started.elapsed();
    progress("", None);
    writeln!(
        out,
        "wrote {} dense cells ({} MiB) in {} ({:.0} MiB/s)",
        written.cells,
        (total * 8) >> 20,
        elapsed(took),
        (total * 8) as f64 / 1048576.0 / took.as_secs_f64()
    )
    .map_err(io)?;

    // Sparse: INT64 points on a grid, a FLOAT64 and a var-length string.
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .capacity(10_000)
        .cell_order(Layout::Hilbert)
        .dimension(DimensionBuilder::range("y", 0i64..=grid as i64 - 1))
        .dimension(DimensionBuilder::range("x", 0i64..=grid as i64 - 1))
        .attribute(
            AttributeBuilder::new("v", Datatype::Float64).filters([Filter::Zstd { level: 3 }]),
        )
        .attribute(
            AttributeBuilder::new("name", Datatype::StringUtf8)
                .var()
                .filters([Filter::Zstd { level: 3 }]),
        )
        .build()?;
    let sparse_dir = dir.join("sparse");
    let sparse = Array::create(&sparse_dir, &schema)?;
    let mut y = FieldBuffer::new("y", Datatype::Int64, 1, false);
    let mut x = FieldBuffer::new("x", Datatype::Int64, 1, false);
    let mut v = FieldBuffer::new("v", Datatype::Float64, 1, false);
    let mut name = FieldBuffer::new("name", Datatype::StringUtf8, VAR_NUM, false);
    for i in 0..points {
        let (py, px) = sparse_point(i, grid);
        y.data.extend_from_slice(&py.to_le_bytes());
        x.data.extend_from_slice(&px.to_le_bytes());
        v.data.extend_from_slice(&(i as f64).to_le_bytes());
        name.push(format!("point-{i}").as_bytes(), true);
        if i % 65_536 == 0 {
            progress("generating sparse cells", Some((i, points)));
        }
    }
    progress(
        "writing the sparse array (sorting into Hilbert order)",
        None,
    );
    let started = Instant::now();
    let written = sparse.write(WriteSpec::new(vec![y, x, v, name]))?;
    progress("", None);
    writeln!(
        out,
        "wrote {} sparse cells in {}",
        written.cells,
        elapsed(started.elapsed())
    )
    .map_err(io)?;

    let dense = Array::open(&dense_dir)?;
    let sparse = Array::open(&sparse_dir)?;
    writeln!(
        out,
        "\nschema of {}:\n{}",
        dense_dir.display(),
        dense.schema()
    )
    .map_err(io)?;
    writeln!(
        out,
        "schema of {}:\n{}",
        sparse_dir.display(),
        sparse.schema()
    )
    .map_err(io)?;

    // Reads, each checked against the generated data.
    // Both arrays have two INT64 dimensions.
    let box_of = |(y0, y1): (i64, i64), (x0, x1): (i64, i64)| -> Subarray {
        let mut s = Subarray::new(2);
        for (d, (lo, hi)) in [(0, (y0, y1)), (1, (x0, x1))] {
            s.add_range(
                d,
                Range::from_bounds(&lo.to_le_bytes(), &hi.to_le_bytes(), false),
            );
        }
        s
    };
    let sum_f64 = |f: &FieldBuffer| -> f64 { f64s(f).sum() };
    writeln!(out, "reads (each checked against the data written):").map_err(io)?;

    let (lo, hi) = (side / 3, (side / 3 + 255).min(side - 1));
    let started = Instant::now();
    let got = dense.read_all(ReadSpec::new(["a"]).with_subarray(box_of((lo, hi), (lo, hi))))?;
    let took = started.elapsed();
    let want: f64 = (lo..=hi)
        .flat_map(|y| (lo..=hi).map(move |x| dense_value(y, x)))
        .sum();
    let got_sum = got.field("a").map_or(0.0, sum_f64);
    if got.num_cells != ((hi - lo + 1) * (hi - lo + 1)) as u64 || got_sum != want {
        return Err(mismatch("dense slice", got_sum, want));
    }
    writeln!(
        out,
        "  dense [{lo}, {hi}] x [{lo}, {hi}]: {} cells, sum {got_sum}, {}",
        got.num_cells,
        elapsed(took)
    )
    .map_err(io)?;

    let column = side / 2;
    let started = Instant::now();
    let got = dense
        .read_all(ReadSpec::new(["a"]).with_subarray(box_of((0, side - 1), (column, column))))?;
    let took = started.elapsed();
    let want: f64 = (0..side).map(|y| dense_value(y, column)).sum();
    let got_sum = got.field("a").map_or(0.0, sum_f64);
    if got_sum != want {
        return Err(mismatch("dense column", got_sum, want));
    }
    writeln!(
        out,
        "  dense column x = {column}: {} cells, sum {got_sum}, {}",
        got.num_cells,
        elapsed(took)
    )
    .map_err(io)?;

    let edge = (grid as i64 / 10).max(1) - 1;
    let started = Instant::now();
    let got = sparse
        .read_all(ReadSpec::new(["y", "x", "v"]).with_subarray(box_of((0, edge), (0, edge))))?;
    let took = started.elapsed();
    let want = (0..points)
        .map(|i| sparse_point(i, grid))
        .filter(|&(y, x)| y <= edge && x <= edge)
        .count() as u64;
    if got.num_cells != want {
        return Err(mismatch("sparse box", got.num_cells, want));
    }
    // Every point is one written, with its value.
    let (ys, xs, vs) = (got.field("y"), got.field("x"), got.field("v"));
    let (Some(ys), Some(xs), Some(vs)) = (ys, xs, vs) else {
        return Err(mismatch("sparse box", "missing fields", "y, x, v"));
    };
    for ((py, px), pv) in i64s(ys).zip(i64s(xs)).zip(f64s(vs)) {
        let i = sparse_index(py, px, grid);
        if py > edge || px > edge || i >= points || pv != i as f64 {
            return Err(mismatch(&format!("sparse point ({py}, {px})"), pv, i));
        }
    }
    writeln!(
        out,
        "  sparse box [0, {edge}]²: {} points, {}",
        got.num_cells,
        elapsed(took)
    )
    .map_err(io)?;

    let limit = (points / 100).max(1);
    let started = Instant::now();
    let got =
        sparse.read_all(ReadSpec::new(["v", "name"]).with_condition(format!("v < {limit}")))?;
    let took = started.elapsed();
    let (Some(vs), Some(names)) = (got.field("v"), got.field("name")) else {
        return Err(mismatch("sparse condition", "missing fields", "v, name"));
    };
    let names = names.column();
    if got.num_cells != limit || names.len() as u64 != limit {
        return Err(mismatch("sparse condition", got.num_cells, limit));
    }
    // Each point below the limit once, with its own name.
    let mut seen = vec![false; limit as usize];
    for (k, pv) in f64s(vs).enumerate() {
        let want = format!("point-{pv}");
        let slot = seen
            .get_mut(pv as usize)
            .filter(|s| !**s && pv.fract() == 0.0);
        match slot {
            Some(s) if names.cell(k) == want.as_bytes() => *s = true,
            _ => {
                return Err(mismatch(
                    "sparse condition point",
                    pv,
                    "a point below the limit",
                ))
            }
        }
    }
    writeln!(
        out,
        "  sparse where v < {limit}: {} points with their names, {}",
        got.num_cells,
        elapsed(took)
    )
    .map_err(io)?;
    writeln!(
        out,
        "\ntry: tdb export {} --subarray \"0:3;0:3\" --format csv",
        dense_dir.display()
    )
    .map_err(io)?;
    Ok(())
}
