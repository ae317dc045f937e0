//! tdb's side of `cargo xtask bench`, one process per measurement:
//!
//! - `tdb-bench phase PHASE.json ARRAY [OUT]`: runs a phase's queries through
//!   the `tdb` facade (the array opened untimed, unless the phase times the
//!   open), touching every result byte; a write phase reads ARRAY's cells
//!   (untimed), then times creating OUT with ARRAY's schema and writing them
//!   into it as one fragment;
//! - `tdb-bench memcpy`: this machine's single-core copy bandwidth;
//! - `tdb-bench zarr-copy ARRAY OUT` / `parquet-copy ARRAY OUT` (feature
//!   `peers`): ARRAY's cells as a Zarr V3 array or a Parquet file, for the
//!   phases that read a peer format beside tdb (`peers`);
//! - `tdb-bench fetch URI`: every byte of every file under URI in one
//!   batch (on an object store: the floor of a read of all of them);
//! - `tdb-bench zstd FILE THREADS`: raw zstd decoding of the chunks of a
//!   tile file (W1's), on `THREADS` threads: the physical limits reads are
//!   judged against.
//!
//! `TDB_CONFIG` (`KEY=VALUE` pairs separated by spaces: TileDB's config
//! names or object_store's keys) adds storage settings to every open.
//!
//! Each prints one JSON object: `seconds`, `cells` (or bytes), a `check`
//! value both engines must agree on, and `peak_kib` (the process's peak
//! resident set).

#[cfg(feature = "peers")]
mod peers;

use serde::Deserialize;
use std::time::Instant;
use tdb::{AggregateOp, AggregateValue, Array, ReadSpec, ResultLayout, Subarray};

#[derive(Deserialize)]
struct Phase {
    fields: Vec<String>,
    queries: Vec<Query>,
    #[serde(default)]
    aggregates: Vec<(String, String)>,
    #[serde(default)]
    time_open: bool,
    #[serde(default)]
    write: bool,
    #[serde(default)]
    consolidate: bool,
    /// Read as Arrow record batches (tdb-arrow) instead of tdb's batches.
    #[serde(default)]
    arrow: bool,
    /// Run this SQL over the array (table `t`, tdb-datafusion) instead of
    /// the queries; the check sums the first row's numbers.
    #[serde(default)]
    sql: Option<String>,
    /// The read's (or consolidation's) memory budget (else `TDB_BUDGET`,
    /// else 1 GiB; a consolidation's else the default).
    #[serde(default)]
    budget: Option<u64>,
    /// Count the requests the reads send (a local array) and the bytes
    /// they fetch, reported as `requests` and `fetched`.
    #[serde(default)]
    count_requests: bool,
    /// Run the queries on a peer format's copy of the array instead
    /// (`zarr`, `parquet`: see `peers`).
    #[serde(default)]
    peer: Option<String>,
}

#[derive(Deserialize)]
struct Query {
    /// One inclusive `[lo, hi]` per dimension; `None`: the whole domain.
    ranges: Option<Vec<(i128, i128)>>,
    /// More inclusive ranges, `[dimension, lo, hi]`, added after `ranges`
    /// (a multi-range subarray; tdb's reads only).
    #[serde(default)]
    more_ranges: Vec<(usize, i128, i128)>,
    layout: String,
    condition: Option<String>,
}

type Error = Box<dyn std::error::Error>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["phase", phase, array] => phase_cmd(phase, array, None),
        ["phase", phase, array, out] => phase_cmd(phase, array, Some(out)),
        ["memcpy"] => memcpy(),
        ["zstd", file, threads] => zstd_cmd(file, threads),
        ["fetch", uri] => fetch(uri),
        #[cfg(feature = "peers")]
        ["zarr-copy", array, out] => open(array).and_then(|a| peers::zarr_copy(&a, out)),
        #[cfg(feature = "peers")]
        ["parquet-copy", array, out] => open(array).and_then(|a| peers::parquet_copy(&a, out)),
        _ => Err(
            "usage: tdb-bench phase PHASE.json ARRAY [OUT] | memcpy | zstd FILE THREADS | fetch URI | zarr-copy ARRAY OUT | parquet-copy ARRAY OUT"
                .into(),
        ),
    };
    match result {
        Ok(v) => println!("{v}"),
        Err(e) => {
            // The whole chain: a facade error's message names the step,
            // its sources the cause.
            let mut text = e.to_string();
            let mut source = e.source();
            while let Some(s) = source {
                text = format!("{text}: {s}");
                source = s.source();
            }
            eprintln!("tdb-bench: {text}");
            std::process::exit(1);
        }
    }
}

fn report(seconds: f64, cells: u64, check: f64) -> serde_json::Value {
    serde_json::json!({"seconds": seconds, "cells": cells, "check": check, "peak_kib": peak_kib()})
}

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Opens `uri` with the settings `TDB_CONFIG` adds.
fn open(uri: &str) -> Result<Array, Error> {
    let config = storage_config()?;
    Ok(Array::open_with(
        uri,
        tdb::OpenOptions::new().storage_config(config),
    )?)
}

/// The storage settings `TDB_CONFIG` gives (`KEY=VALUE ...`).
fn storage_config() -> Result<tdb::StorageConfig, Error> {
    let mut config = tdb::StorageConfig::new();
    for pair in std::env::var("TDB_CONFIG")
        .unwrap_or_default()
        .split_whitespace()
    {
        config = config.parse_pair(pair).map_err(tdb::Error::Storage)?;
    }
    Ok(config)
}

fn phase_cmd(phase: &str, array: &str, out: Option<&str>) -> Result<serde_json::Value, Error> {
    let phase: Phase = serde_json::from_slice(&std::fs::read(phase)?)?;
    if let Some(peer) = &phase.peer {
        // ARRAY is the peer's copy.
        return peer_phase(&phase, peer, array);
    }
    if phase.consolidate {
        return consolidate(&phase, array, out.ok_or("a consolidation phase needs OUT")?);
    }
    if phase.count_requests {
        // The array's own backend (local or remote), recorded.
        let config = storage_config()?;
        let recording = std::sync::Arc::new(tdb_storage::RecordingStorage::new(tdb::storage(
            array, &config,
        )?));
        let storage: tdb::AnyStorage = recording.clone();
        let a = Array::open_in(storage, "", tdb::OpenOptions::new().storage_config(config))?;
        recording.take();
        let start = Instant::now();
        let (cells, check) = run(&phase, &a)?;
        let seconds = start.elapsed().as_secs_f64();
        // Each range a request, and the bytes they brought.
        let (requests, fetched) = (recording.take().iter())
            .map(|r| match r {
                tdb_storage::Request::Read { bytes, .. } => (1, bytes.unwrap_or(0)),
                r => (
                    r.ranges().len(),
                    r.ranges().iter().filter_map(|r| r.2).sum(),
                ),
            })
            .fold((0usize, 0u64), |(n, b), (m, c)| (n + m, b + c));
        let mut out = report(seconds, cells, check);
        out["requests"] = serde_json::json!(requests);
        out["fetched"] = serde_json::json!(fetched);
        return Ok(out);
    }
    let start = Instant::now();
    let a = open(array)?;
    if phase.write {
        return write(&phase, &a, out.ok_or("a write phase needs OUT")?);
    }
    if let Some(sql) = &phase.sql {
        #[cfg(feature = "sql")]
        {
            // The table over the open array is made untimed, as the open is.
            let table = tdb_datafusion::TileDbTable::new(a, array, &Default::default())?;
            let start = Instant::now();
            let (cells, check) = run_sql(sql, table)?;
            return Ok(report(start.elapsed().as_secs_f64(), cells, check));
        }
        #[cfg(not(feature = "sql"))]
        return Err(format!("{sql:?}: tdb-bench was built without its `sql` feature").into());
    }
    let start = if phase.time_open {
        start
    } else {
        Instant::now()
    };
    let (cells, check) = run(&phase, &a)?;
    Ok(report(start.elapsed().as_secs_f64(), cells, check))
}

/// Reads every cell of `a` (dense: row-major over the whole domain; sparse:
/// unordered, coordinates too), then times creating `out` with `a`'s schema
/// and writing the cells there. The check sums the attributes written.
fn write(phase: &Phase, a: &Array, out: &str) -> Result<serde_json::Value, Error> {
    let schema = a.schema();
    let dense = schema.array_type == tdb_format::ArrayType::Dense;
    let layout = if dense {
        ResultLayout::RowMajor
    } else {
        ResultLayout::Unordered
    };
    let cells = a.read_all(
        ReadSpec::new(phase.fields.clone())
            .with_layout(layout)
            .with_budget(1 << 30),
    )?;
    let check: f64 = cells
        .fields
        .iter()
        .filter(|f| schema.attribute(&f.name).is_some())
        .map(touch_buffer)
        .sum();
    let start = Instant::now();
    let copy = Array::create(out, schema)?;
    let written = copy.write(tdb::WriteSpec::new(cells.fields).with_layout(layout))?;
    Ok(report(start.elapsed().as_secs_f64(), written.cells, check))
}

/// Copies `array` to `out` (untimed), then times opening the copy and
/// consolidating its fragments; the cells and check are a read of the
/// consolidated copy's `fields` (untimed).
fn consolidate(phase: &Phase, array: &str, out: &str) -> Result<serde_json::Value, Error> {
    tdb_testdata::copy_dir(std::path::Path::new(array), std::path::Path::new(out))?;
    let start = Instant::now();
    let a = open(out)?;
    let budget = phase.budget.unwrap_or(tdb::DEFAULT_BUDGET);
    if a.consolidate_fragments(&tdb::FragmentSelection::default(), budget)?
        .is_empty()
    {
        return Err("no fragments to consolidate".into());
    }
    let seconds = start.elapsed().as_secs_f64();
    let a = open(out)?;
    let cells = a.read_all(ReadSpec::new(phase.fields.clone()))?;
    let check = cells.fields.iter().map(touch_buffer).sum();
    Ok(report(seconds, cells.num_cells, check))
}

/// The phase's queries on a peer format's copy (`peers`).
#[cfg(feature = "peers")]
fn peer_phase(phase: &Phase, peer: &str, copy: &str) -> Result<serde_json::Value, Error> {
    let start = Instant::now();
    let (cells, check) = match peer {
        "zarr" => peers::zarr_phase(phase, copy)?,
        "parquet" => peers::parquet_phase(phase, copy)?,
        other => return Err(format!("no peer {other:?}").into()),
    };
    Ok(report(start.elapsed().as_secs_f64(), cells, check))
}

#[cfg(not(feature = "peers"))]
fn peer_phase(_: &Phase, peer: &str, _: &str) -> Result<serde_json::Value, Error> {
    Err(format!("{peer}: tdb-bench was built without its `peers` feature").into())
}

fn run(phase: &Phase, a: &Array) -> Result<(u64, f64), Error> {
    let (mut cells, mut check) = (0u64, 0.0f64);
    let mut batch = tdb::Batch::default();
    for q in &phase.queries {
        let budget = phase.budget.unwrap_or_else(|| {
            std::env::var("TDB_BUDGET")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(1 << 30)
        });
        let mut spec = ReadSpec::new(phase.fields.clone())
            .with_budget(budget)
            .with_layout(ResultLayout::from_name(&q.layout).ok_or("unknown layout")?);
        if let Some(r) = &q.ranges {
            spec = spec.with_subarray(subarray(a, r, &q.more_ranges)?);
        }
        if let Some(c) = &q.condition {
            spec = spec.with_condition(c.clone());
        }
        if !phase.aggregates.is_empty() {
            let requests = phase
                .aggregates
                .iter()
                .map(|(f, op)| Ok((f.clone(), AggregateOp::from_name(op).ok_or("unknown op")?)))
                .collect::<Result<Vec<_>, Error>>()?;
            for r in a.aggregate(spec, &requests)? {
                check += match r.value {
                    Some(AggregateValue::Count(n)) => n as f64,
                    Some(AggregateValue::Int(n)) => n as f64,
                    Some(AggregateValue::UInt(n)) => n as f64,
                    Some(AggregateValue::Float(x)) => x,
                    _ => 0.0,
                };
            }
            cells += 1;
            continue;
        }
        if phase.arrow {
            use tdb_arrow::ArrowArray;
            for batch in a.read_arrow(spec)? {
                let batch = batch?;
                cells += batch.num_rows() as u64;
                for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
                    let (datatype, _) = tdb_arrow::tiledb_type(field)?;
                    let data = column.to_data();
                    let var = data.buffers().len() == 2;
                    // Values: the second buffer of var-length columns.
                    let values = &data.buffers()[usize::from(var)];
                    let width = if var { 1 } else { datatype.size() as usize };
                    let bytes = if var {
                        values.as_slice()
                    } else {
                        &values.as_slice()
                            [data.offset() * width..(data.offset() + data.len()) * width]
                    };
                    check += touch(datatype, bytes, var);
                }
            }
            continue;
        }
        // Into one batch's buffers, read after read, as a scan over many
        // batches would (`Query::next_into`).
        let mut read = a.read(spec)?;
        while let Some(next) = read.next_into(&mut batch) {
            next?;
            cells += batch.num_cells;
            for f in &batch.fields {
                check += touch_buffer(f);
            }
        }
    }
    Ok((cells, check))
}

/// [`touch`] of one of tdb's result buffers.
fn touch_buffer(f: &tdb::FieldBuffer) -> f64 {
    touch(f.datatype, &f.data, f.offsets.is_some())
}

/// Sums a buffer's values (var-size: counts its characters), so every
/// result byte is read, as the TileDB side sums its numpy arrays. Eight
/// running sums, as numpy's pairwise sum keeps several: one serial chain of
/// float additions would time the harness (4 cycles a value), not the read.
fn touch(datatype: tdb::Datatype, data: &[u8], var: bool) -> f64 {
    use tdb::Datatype as D;
    fn lanes<const N: usize>(data: &[u8], value: impl Fn([u8; N]) -> f64) -> f64 {
        let value = |b: &[u8]| value(b.try_into().unwrap_or([0; N]));
        let mut acc = [0.0f64; 8];
        let mut blocks = data.chunks_exact(8 * N);
        for block in &mut blocks {
            for (a, b) in acc.iter_mut().zip(block.chunks_exact(N)) {
                *a += value(b);
            }
        }
        let tail: f64 = blocks.remainder().chunks_exact(N).map(value).sum();
        acc.iter().sum::<f64>() + tail
    }
    if var {
        // Characters, as the lengths of the Python strings sum them.
        return std::str::from_utf8(data).map_or(0, |t| t.chars().count()) as f64;
    }
    let d = data;
    match datatype {
        D::Float64 => lanes(d, f64::from_le_bytes),
        D::Float32 => lanes(d, |b| f64::from(f32::from_le_bytes(b))),
        D::Int64 => lanes(d, |b| i64::from_le_bytes(b) as f64),
        D::UInt64 => lanes(d, |b| u64::from_le_bytes(b) as f64),
        D::Int32 => lanes(d, |b| f64::from(i32::from_le_bytes(b))),
        _ => lanes(d, |[b]: [u8; 1]| f64::from(b)),
    }
}

#[cfg(feature = "sql")]
/// A SQL query over the array as table `t`: one result row, whose
/// numbers are summed for the check (as the TileDB side sums the
/// aggregates it computes).
fn run_sql(sql: &str, table: tdb_datafusion::TileDbTable) -> Result<(u64, f64), Error> {
    use datafusion::arrow::array::{Array as _, AsArray};
    use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type, UInt64Type};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let batches = runtime.block_on(async {
        let ctx = tdb_datafusion::session();
        ctx.register_table("t", std::sync::Arc::new(table))?;
        ctx.sql(sql).await?.collect().await
    })?;
    let mut check = 0.0;
    let row = batches.iter().find(|b| b.num_rows() > 0).ok_or("no rows")?;
    for c in row.columns() {
        if c.is_null(0) {
            continue;
        }
        check += match c.data_type() {
            DataType::Int64 => c.as_primitive::<Int64Type>().value(0) as f64,
            DataType::UInt64 => c.as_primitive::<UInt64Type>().value(0) as f64,
            DataType::Float64 => c.as_primitive::<Float64Type>().value(0),
            t => return Err(format!("a result column of {t}").into()),
        };
    }
    Ok((1, check))
}

/// One inclusive range per dimension, in each dimension's datatype, then
/// any `more` (`(dimension, lo, hi)`).
fn subarray(
    a: &Array,
    ranges: &[(i128, i128)],
    more: &[(usize, i128, i128)],
) -> Result<Subarray, Error> {
    let dims = &a.schema().domain.dimensions;
    if dims.len() != ranges.len() {
        return Err("one range per dimension".into());
    }
    let mut s = Subarray::new(dims.len());
    for (d, (dim, &(lo, hi))) in dims.iter().zip(ranges).enumerate() {
        let range = tdb_index::dense::int_range_of(dim, lo, hi)
            .ok_or_else(|| format!("dimension {} is not an integer", dim.name))?;
        s.add_range(d, range);
    }
    for &(d, lo, hi) in more {
        let dim = dims.get(d).ok_or("a range past the dimensions")?;
        let range = tdb_index::dense::int_range_of(dim, lo, hi)
            .ok_or_else(|| format!("dimension {} is not an integer", dim.name))?;
        s.add_range(d, range);
    }
    Ok(s)
}

fn memcpy() -> Result<serde_json::Value, Error> {
    let n = 256 << 20;
    let src = vec![1u8; n];
    let mut dst = vec![0u8; n];
    dst.copy_from_slice(&src);
    let reps = 8;
    let start = Instant::now();
    for i in 0..reps {
        dst.copy_from_slice(&src);
        std::hint::black_box(&mut dst);
        dst[i] = 2;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(report(seconds, (n * reps) as u64, f64::from(dst[0])))
}

/// Every byte of every file under `uri`, fetched in one batch of 8 MiB
/// ranges (the storage's own coalescing and concurrency): the floor any
/// read of all of them stands on.
fn fetch(uri: &str) -> Result<serde_json::Value, Error> {
    use tdb_storage::{ListableStorage as _, ReadableStorage as _};
    let config = tdb::StorageConfig::new();
    let storage = tdb::storage(uri, &config)?;
    let files = storage.list_prefix("")?;
    let part: u64 = 8 << 20;
    let mut requests = Vec::new();
    for f in &files {
        let size = f.size.unwrap_or(0);
        let mut at = 0;
        while at < size {
            let len = part.min(size - at);
            requests.push(tdb_storage::RangeRequest::new(
                f.key.clone(),
                tdb_storage::ByteRange::new(at, len),
            ));
            at += len;
        }
    }
    let start = Instant::now();
    let got = storage.read_ranges(&requests)?;
    let seconds = start.elapsed().as_secs_f64();
    let bytes: u64 = got.iter().flatten().map(|r| r.bytes.len() as u64).sum();
    Ok(report(seconds, bytes, bytes as f64))
}

fn zstd_cmd(file: &str, threads: &str) -> Result<serde_json::Value, Error> {
    let bytes = std::fs::read(file)?;
    let threads: usize = threads.parse()?;
    // Every chunk's data: the compression filter's frames, one per part.
    let mut chunks: Vec<&[u8]> = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let (tile, next) = tdb_format::le::run(tdb_tile::filtered_chunks, rest)?;
        chunks.extend(tile.iter().map(|c| c.data));
        rest = next;
    }
    let decode = |part: &[&[u8]]| -> u64 {
        let mut out = 0u64;
        let mut d = zstd::bulk::Decompressor::new().ok();
        let mut buf = vec![0u8; 1 << 17];
        for c in part {
            let mut frames = *c;
            while !frames.is_empty() {
                let Ok(size) = zstd::zstd_safe::find_frame_compressed_size(frames) else {
                    break;
                };
                let (frame, tail) = frames.split_at(size.min(frames.len()));
                if let Some(d) = d.as_mut() {
                    out += d.decompress_to_buffer(frame, &mut buf[..]).unwrap_or(0) as u64;
                }
                frames = tail;
            }
        }
        out
    };
    let start = Instant::now();
    let per = chunks.len().div_ceil(threads.max(1)).max(1);
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .chunks(per)
            .map(|p| s.spawn(move || decode(p)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    Ok(report(start.elapsed().as_secs_f64(), total, total as f64))
}
