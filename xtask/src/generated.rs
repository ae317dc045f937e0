//! The generated pass of `cargo xtask interop`: arrays tdb writes through
//! its API from generated data (every datatype, every filter chain, every
//! layout, dense and sparse, var-length and nullable, encrypted, several
//! fragments, metadata and deletes), which real TileDB must then read.
//!
//! Each array becomes a conformance case under `target/interop/generated`:
//! its `expected.json` starts as the queries alone, real TileDB (expect.py,
//! the fixture venv) fills in everything it reports, and then
//! 1. every query whose answer the generator knows (the cells it wrote)
//!    must be what TileDB returned: TileDB reads tdb's bytes as written;
//! 2. `cargo xtask conformance` runs on the cases: tdb reads them exactly
//!    as TileDB did (schema, metadata, fragments, every query).

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;
use tdb::{
    Array, ArraySchema, Batch, Datatype, FieldBuffer, MetadataEntry, MetadataValue, OpenOptions,
    ResultLayout, SchemaEvolution, Subarray, WriteSpec, VAR_NUM,
};
use tdb_cli::{error_report, values};
use tdb_filters::Filter;
use tdb_format::{ArrayType, Layout};
use tdb_schema::{AttributeBuilder, DimensionBuilder, Range};
use tdb_storage::LocalStorage;

/// The key of the encrypted cases, as TileDB's config takes it.
const KEY: &str = "0123456789abcdeF0123456789abcdeF";

/// A deterministic generator (xorshift64*), so every run writes the same
/// cells.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
}

/// One value of a fixed-size numeric `datatype`, from an integer (floats
/// get quarters, exact in both widths).
fn number(datatype: Datatype, v: i64) -> Vec<u8> {
    let value = if datatype.is_float() {
        json!(v as f64 / 4.0)
    } else if datatype.is_bool() {
        json!(v % 2 != 0)
    } else {
        json!(v)
    };
    encode(datatype, &value)
}

/// A value in the conformance encoding as `datatype`'s bytes; the
/// generator only makes values that fit.
fn encode(datatype: Datatype, value: &Value) -> Vec<u8> {
    values::to_bytes(datatype, value)
        .unwrap_or_else(|e| panic!("generated {value} does not fit {datatype}: {e}"))
}

/// The range of generated values that fits `datatype`.
fn span(datatype: Datatype) -> (i64, i64) {
    match datatype {
        Datatype::UInt8 | Datatype::UInt16 | Datatype::UInt32 | Datatype::UInt64 => (0, 250),
        Datatype::Bool => (0, 1),
        _ => (-120, 120),
    }
}

/// One cell's bytes of a field of `datatype` and `cvn` values (VAR_NUM:
/// 0–6 values).
fn cell(rng: &mut Rng, datatype: Datatype, cvn: u32) -> Vec<u8> {
    let n = if cvn == VAR_NUM {
        rng.below(7) as u32
    } else {
        cvn
    };
    let mut out = Vec::new();
    for _ in 0..n {
        match datatype {
            Datatype::Char | Datatype::StringAscii => {
                out.push(b"abcdefghij"[rng.below(10) as usize]);
            }
            Datatype::StringUtf8 => {
                let pieces = ["a", "b", "é", "✓", "z"];
                out.extend_from_slice(pieces[rng.below(5) as usize].as_bytes());
            }
            Datatype::Blob => out.push(rng.next() as u8),
            d => {
                let (lo, hi) = span(d);
                out.extend(number(d, rng.int(lo, hi)));
            }
        }
    }
    out
}

/// `n` cells of a field, a tenth of them null when nullable.
fn field(
    rng: &mut Rng,
    name: &str,
    datatype: Datatype,
    cvn: u32,
    nullable: bool,
    n: usize,
) -> FieldBuffer {
    let mut b = FieldBuffer::new(name, datatype, cvn, nullable);
    let mut offsets = Vec::new();
    let mut validity = Vec::new();
    for _ in 0..n {
        offsets.push(b.data.len() as u64);
        let valid = !nullable || rng.below(10) != 0;
        let c = cell(rng, datatype, cvn);
        validity.push(u8::from(valid));
        b.data.extend(c);
    }
    if cvn == VAR_NUM {
        b.offsets = Some(offsets);
    }
    if nullable {
        b.validity = Some(validity.into());
    }
    b
}

/// An attribute of a case.
#[derive(Clone)]
struct Attr {
    name: String,
    datatype: Datatype,
    cvn: u32,
    nullable: bool,
    filters: Vec<Filter>,
}

fn attr(name: &str, datatype: Datatype, cvn: u32, nullable: bool) -> Attr {
    Attr {
        name: name.into(),
        datatype,
        cvn,
        nullable,
        filters: Vec::new(),
    }
}

impl Attr {
    fn builder(&self) -> AttributeBuilder {
        let mut b = AttributeBuilder::new(&self.name, self.datatype)
            .nullable(self.nullable)
            .filters(self.filters.clone());
        b = if self.cvn == VAR_NUM {
            b.var()
        } else {
            b.cell_val_num(self.cvn)
        };
        b
    }
}

/// Every attribute kind: each fixed datatype, a fixed multi-value cell,
/// var-length strings and blobs, nullable fixed and var fields.
fn every_attribute() -> Vec<Attr> {
    use Datatype::*;
    let mut out: Vec<Attr> = [
        Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64, Float32, Float64, Bool, Char,
        DatetimeMs, DatetimeNs, TimeUs,
    ]
    .iter()
    .map(|&d| attr(&format!("{d}").to_lowercase(), d, 1, false))
    .collect();
    out.push(attr("int32x3", Int32, 3, false));
    out.push(attr("ascii", StringAscii, VAR_NUM, false));
    out.push(attr("utf8_null", StringUtf8, VAR_NUM, true));
    out.push(attr("blob", Blob, VAR_NUM, false));
    out.push(attr("int64_null", Int64, 1, true));
    out.push(attr("float64x2_null", Float64, 2, true));
    out
}

/// A dimension of a case: numeric over `[lo, hi]` with a tile extent, or
/// a string dimension.
#[derive(Clone, Copy)]
struct Dim {
    name: &'static str,
    datatype: Datatype,
    lo: i64,
    hi: i64,
    extent: i64,
}

fn dim(name: &'static str, datatype: Datatype, lo: i64, hi: i64, extent: i64) -> Dim {
    Dim {
        name,
        datatype,
        lo,
        hi,
        extent,
    }
}

impl Dim {
    fn builder(&self) -> DimensionBuilder {
        if self.datatype == Datatype::StringAscii {
            return DimensionBuilder::string(self.name);
        }
        DimensionBuilder::new(self.name, self.datatype)
            .domain_bytes(self.coord(self.lo), self.coord(self.hi))
            .tile_extent_bytes(self.coord(self.extent))
    }

    /// One coordinate's bytes.
    fn coord(&self, v: i64) -> Vec<u8> {
        encode(self.datatype, &self.json(v))
    }

    fn range(&self, lo: i64, hi: i64) -> Range {
        let var = self.datatype == Datatype::StringAscii;
        Range::from_bounds(&self.coord(lo), &self.coord(hi), var)
    }

    /// Coordinate `v` in the conformance encoding (floats take the integer
    /// as is, so distinct integers stay distinct).
    fn json(&self, v: i64) -> Value {
        match self.datatype {
            Datatype::Float32 | Datatype::Float64 => json!(v as f64),
            Datatype::StringAscii => json!(format!("k{:04}", v.unsigned_abs())),
            _ => json!(v),
        }
    }
}

/// A query whose answer the generator knows: the cells it wrote.
struct Known {
    query: String,
    result: Value,
    ordered: bool,
}

/// One generated case: how to make the array, and its queries.
struct Case {
    name: String,
    array_type: ArrayType,
    dims: Vec<Dim>,
    attrs: Vec<Attr>,
    cell_order: Layout,
    tile_order: Layout,
    capacity: u64,
    duplicates: bool,
    encrypted: bool,
    /// Schema-wide coordinate, offsets and validity filters.
    part_filters: [Vec<Filter>; 3],
    /// The writes, each returning the spec it wrote and, when the generator
    /// knows it, the query (with its expected result) that reads it back.
    writes: Vec<Write>,
    /// Metadata written after the writes, at this timestamp.
    metadata: Option<(u64, Vec<MetadataEntry>)>,
    /// A delete after everything, at this timestamp.
    delete: Option<(u64, String)>,
    /// A schema evolution after the writes, at this timestamp.
    evolve: Option<(u64, SchemaEvolution)>,
    /// Commits, fragment metadata (and array metadata) consolidated and
    /// vacuumed by tdb last.
    consolidate: bool,
    /// Fragments consolidated (as these settings say) and vacuumed by tdb
    /// after the writes.
    consolidate_fragments: Option<tdb::FragmentSelection>,
    /// Queries TileDB answers and tdb must match (no known result).
    queries: Vec<Value>,
    /// Dimension labels (dense cases): each write labels its range of the
    /// label's dimension with [`Label::values`].
    labels: Vec<Label>,
}

/// A dimension label of a generated case, with labels a function of the
/// index, so every write agrees with the others.
struct Label {
    dim: usize,
    name: &'static str,
    order: tdb_format::DataOrder,
    datatype: Datatype,
}

impl Label {
    /// The label of index `v`: strictly monotone in the label's order.
    fn value(&self, v: i64) -> Value {
        let k = if self.order == tdb_format::DataOrder::Increasing {
            v
        } else {
            -v
        };
        match self.datatype {
            Datatype::Float64 | Datatype::Float32 => json!(k as f64 * 0.5),
            Datatype::StringAscii => json!(format!("L{:08}", k + 50_000_000)),
            _ => json!(k * 3 + 1),
        }
    }

    /// The labels of indexes `lo..=hi`.
    fn values(&self, lo: i64, hi: i64) -> FieldBuffer {
        let var = self.datatype == Datatype::StringAscii;
        let mut b = FieldBuffer::new(
            self.name,
            self.datatype,
            if var { VAR_NUM } else { 1 },
            false,
        );
        for v in lo..=hi {
            b.push(&encode(self.datatype, &self.value(v)), true);
        }
        b
    }
}

/// One write: cells at a timestamp, in a layout, over a rectangle of
/// coordinate indices (dense) or `n` cells (sparse).
#[derive(Clone)]
struct Write {
    t: u64,
    layout: ResultLayout,
    /// Dense: `[lo, hi]` per dimension.
    rect: Vec<(i64, i64)>,
    /// Sparse: the number of cells.
    cells: usize,
    seed: u64,
    /// Global-order writes: submitted in parts cut before these cells.
    splits: Vec<usize>,
}

fn case(name: &str, array_type: ArrayType, dims: Vec<Dim>, attrs: Vec<Attr>) -> Case {
    Case {
        name: name.into(),
        array_type,
        dims,
        attrs,
        cell_order: Layout::RowMajor,
        tile_order: Layout::RowMajor,
        capacity: 10_000,
        duplicates: false,
        encrypted: false,
        part_filters: Default::default(),
        writes: Vec::new(),
        metadata: None,
        delete: None,
        evolve: None,
        consolidate: false,
        consolidate_fragments: None,
        queries: Vec::new(),
        labels: Vec::new(),
    }
}

fn dense_write(t: u64, layout: ResultLayout, rect: Vec<(i64, i64)>) -> Write {
    Write {
        t,
        layout,
        rect,
        cells: 0,
        seed: t,
        splits: Vec::new(),
    }
}

fn sparse_write(t: u64, layout: ResultLayout, cells: usize) -> Write {
    Write {
        t,
        layout,
        rect: Vec::new(),
        cells,
        seed: t,
        splits: Vec::new(),
    }
}

fn query(name: &str, layout: &str, subarray: Value, timestamp: Value, ordered: bool) -> Value {
    json!({"name": name, "layout": layout, "subarray": subarray, "dims": [], "attrs": [],
           "condition": null, "timestamp": timestamp, "ordered": ordered})
}

/// The whole array in the global order, now.
fn global_read() -> Value {
    query("global", "global-order", Value::Null, Value::Null, true)
}

/// The filter chains every filterable field is tried with.
fn filter_chains() -> Vec<(&'static str, Vec<Filter>)> {
    use Filter::*;
    vec![
        ("gzip", vec![Gzip { level: 6 }]),
        ("zstd", vec![Zstd { level: 3 }]),
        ("lz4", vec![Lz4 { level: -1 }]),
        ("rle", vec![Rle { level: -1 }]),
        ("bzip2", vec![Bzip2 { level: 9 }]),
        ("dictionary", vec![Dictionary { level: -1 }]),
        (
            "double_delta",
            vec![DoubleDelta {
                level: -1,
                reinterpret: Some(Datatype::Any),
            }],
        ),
        (
            "delta",
            vec![Delta {
                level: -1,
                reinterpret: Some(Datatype::Any),
            }],
        ),
        (
            "bit_width_reduction",
            vec![BitWidthReduction { max_window: 256 }],
        ),
        ("bitshuffle", vec![Bitshuffle]),
        ("byteshuffle", vec![Byteshuffle]),
        ("md5", vec![ChecksumMd5]),
        ("sha256", vec![ChecksumSha256]),
        ("xor", vec![Xor]),
        (
            "scale_float",
            vec![ScaleFloat {
                scale: 0.25,
                offset: 0.0,
                byte_width: 4,
            }],
        ),
        ("byteshuffle_zstd", vec![Byteshuffle, Zstd { level: 3 }]),
        (
            "delta_bitshuffle_lz4",
            vec![
                Delta {
                    level: -1,
                    reinterpret: Some(Datatype::Any),
                },
                Bitshuffle,
                Lz4 { level: -1 },
            ],
        ),
        (
            "bwr_zstd_sha256",
            vec![
                BitWidthReduction { max_window: 256 },
                Zstd { level: 5 },
                ChecksumSha256,
            ],
        ),
    ]
}

/// The cases: see the module docs.
fn cases() -> Vec<Case> {
    use ArrayType::{Dense, Sparse};
    use Datatype::*;
    use ResultLayout::*;
    let mut out = Vec::new();
    // Every attribute kind, dense (partial tiles, fill beyond the write)
    // and sparse (several tiles), plain and encrypted.
    for encrypted in [false, true] {
        let suffix = if encrypted { "_encrypted" } else { "" };
        let mut c = case(
            &format!("types_dense{suffix}"),
            Dense,
            vec![dim("x", Int32, 0, 99, 16)],
            every_attribute(),
        );
        c.encrypted = encrypted;
        c.writes.push(dense_write(10, RowMajor, vec![(5, 90)]));
        c.queries
            .push(query("whole", "row-major", Value::Null, Value::Null, true));
        out.push(c);
        let mut c = case(
            &format!("types_sparse{suffix}"),
            Sparse,
            vec![
                dim("d0", Int64, -500, 499, 100),
                dim("d1", Float64, 0, 999, 250),
            ],
            every_attribute(),
        );
        c.encrypted = encrypted;
        c.capacity = 7;
        c.writes.push(sparse_write(10, Unordered, 60));
        c.queries.push(global_read());
        out.push(c);
    }
    // Every dimension datatype of sparse arrays, a string one included.
    for d in [
        Int8,
        UInt8,
        Int16,
        UInt16,
        Int32,
        UInt32,
        Int64,
        UInt64,
        Float32,
        Float64,
        DatetimeMs,
        DatetimeNs,
        StringAscii,
    ] {
        // (TIME_* dimensions are TileDB's too, but TileDB-Py cannot open them.)
        let (lo, hi) = if d == UInt8 || d == Int8 {
            (0, 100)
        } else {
            (-2, 3000)
        };
        let lo = if matches!(d, UInt16 | UInt32 | UInt64) {
            0
        } else {
            lo
        };
        let mut c = case(
            &format!("dim_{}", format!("{d}").to_lowercase()),
            Sparse,
            vec![dim("d", d, lo, hi, 16)],
            vec![
                attr("a", Int32, 1, true),
                attr("s", StringAscii, VAR_NUM, false),
            ],
        );
        c.capacity = 5;
        c.writes.push(sparse_write(10, Unordered, 40));
        c.queries.push(global_read());
        out.push(c);
    }
    // Layouts: Hilbert, col-major cells and tiles, dense writes in every
    // order, sparse global-order writes, duplicates.
    // Dense dimensions share one datatype; sparse ones need not.
    let two = || vec![dim("r", Int32, 0, 15, 4), dim("c", Int32, 0, 15, 4)];
    let attrs = || {
        vec![
            attr("a", Float64, 1, false),
            attr("s", StringUtf8, VAR_NUM, true),
        ]
    };
    let mut c = case("hilbert", Sparse, two(), attrs());
    c.cell_order = Layout::Hilbert;
    c.capacity = 6;
    c.writes.push(sparse_write(10, Unordered, 50));
    c.queries.push(global_read());
    out.push(c);
    for (name, cells, tiles) in [
        ("col_col", Layout::ColMajor, Layout::ColMajor),
        ("col_row", Layout::ColMajor, Layout::RowMajor),
        ("row_col", Layout::RowMajor, Layout::ColMajor),
    ] {
        for (w, layout) in [("rows", RowMajor), ("cols", ColMajor)] {
            let mut c = case(&format!("dense_{name}_{w}"), Dense, two(), attrs());
            c.cell_order = cells;
            c.tile_order = tiles;
            c.writes
                .push(dense_write(10, layout, vec![(2, 13), (1, 14)]));
            c.queries.push(global_read());
            out.push(c);
        }
        let mixed = vec![dim("r", Int32, 0, 15, 4), dim("c", Int64, 0, 15, 4)];
        let mut c = case(&format!("sparse_{name}"), Sparse, mixed, attrs());
        c.cell_order = cells;
        c.tile_order = tiles;
        c.capacity = 4;
        c.writes.push(sparse_write(10, Unordered, 70));
        c.queries.push(global_read());
        out.push(c);
    }
    let mut c = case("dense_global_write", Dense, two(), attrs());
    c.writes
        .push(dense_write(10, GlobalOrder, vec![(4, 11), (0, 7)]));
    out.push(c);
    let mut c = case(
        "sparse_global_write",
        Sparse,
        vec![dim("d", Int64, 0, 999, 50)],
        attrs(),
    );
    c.capacity = 8;
    c.writes.push(sparse_write(10, GlobalOrder, 60));
    out.push(c);
    // Global-order writes in parts (cut inside tiles, on tile bounds, one
    // cell long) make one fragment.
    let mut c = case("dense_global_parts", Dense, two(), attrs());
    let mut w = dense_write(10, GlobalOrder, vec![(4, 11), (0, 7)]);
    w.splits = vec![1, 16, 37];
    c.writes.push(w);
    out.push(c);
    let one = || vec![dim("d", Int64, 0, 999, 50)];
    for (name, dims, order) in [
        ("sparse_global_parts", two(), Layout::RowMajor),
        ("hilbert_global_parts", one(), Layout::Hilbert),
    ] {
        let mut c = case(name, Sparse, dims, attrs());
        c.cell_order = order;
        c.capacity = 8;
        let mut w = sparse_write(10, GlobalOrder, 60);
        w.splits = vec![3, 4, 16, 45];
        c.writes.push(w);
        c.queries.push(global_read());
        out.push(c);
    }
    let mut c = case(
        "duplicates",
        Sparse,
        vec![dim("d", Int32, 0, 9, 5)],
        attrs(),
    );
    c.duplicates = true;
    c.capacity = 6;
    c.writes.push(sparse_write(10, Unordered, 40));
    out.push(c);
    // Every filter chain on every field it fits, dense and sparse.
    for (name, chain) in filter_chains() {
        for array_type in [Dense, Sparse] {
            let kind = if array_type == Dense {
                "dense"
            } else {
                "sparse"
            };
            let mut attrs = Vec::new();
            for mut a in [
                attr("i64", Int64, 1, true),
                attr("u16", UInt16, 1, false),
                attr("f64", Float64, 1, false),
                attr("f32", Float32, 1, true),
                attr("s", StringAscii, VAR_NUM, true),
            ] {
                a.filters = chain.clone();
                if fits(&chain, &a) && accepts(array_type, &a) {
                    attrs.push(a);
                }
            }
            if attrs.is_empty() {
                continue;
            }
            let mut c = case(
                &format!("filter_{name}_{kind}"),
                array_type,
                vec![dim("d", Int64, 0, 199, 32)],
                attrs,
            );
            c.capacity = 16;
            c.writes.push(if array_type == Dense {
                dense_write(10, RowMajor, vec![(3, 180)])
            } else {
                sparse_write(10, Unordered, 90)
            });
            out.push(c);
        }
    }
    let mut c = case(
        "part_filters",
        Sparse,
        vec![dim("d", Int64, 0, 999, 50), dim("e", StringAscii, 0, 0, 0)],
        vec![attr("s", StringUtf8, VAR_NUM, true)],
    );
    c.part_filters = [
        vec![Filter::Zstd { level: 1 }],
        vec![
            Filter::PositiveDelta { max_window: 128 },
            Filter::Zstd { level: 3 },
        ],
        vec![Filter::Rle { level: -1 }],
    ];
    c.capacity = 9;
    c.writes.push(sparse_write(10, Unordered, 50));
    out.push(c);
    // Several fragments, time travel, metadata and deletes.
    let one = || vec![dim("d", Int32, 0, 63, 8)];
    let attrs2 = || {
        vec![
            attr("a", Int32, 1, false),
            attr("s", StringAscii, VAR_NUM, true),
        ]
    };
    let mut c = case("dense_fragments", Dense, one(), attrs2());
    c.writes.push(dense_write(10, RowMajor, vec![(0, 40)]));
    c.writes.push(dense_write(20, RowMajor, vec![(30, 63)]));
    c.metadata = Some((15, metadata_entries()));
    for t in [json!(15), json!(25), json!([15, 25])] {
        c.queries
            .push(query(&format!("at_{t}"), "row-major", Value::Null, t, true));
    }
    out.push(c);
    // Unordered reads at these times and now.
    let at_times = |c: &mut Case, times: &[i64]| {
        for t in times.iter().map(|t| json!(t)).chain([Value::Null]) {
            c.queries.push(query(
                &format!("at_{t}"),
                "unordered",
                Value::Null,
                t,
                false,
            ));
        }
    };
    // Two fragments, metadata and a delete; plain, encrypted, and with its
    // commits (the delete's among them), fragment metadata and metadata
    // consolidated and vacuumed by tdb, so TileDB reads the fragments, the
    // delete and time travel through tdb's `.con` alone and the footers
    // through tdb's `.meta`.
    for (suffix, encrypted, consolidate) in [
        ("", false, false),
        ("_encrypted", true, false),
        ("_consolidated", false, true),
    ] {
        let mut c = case(&format!("sparse_deletes{suffix}"), Sparse, one(), attrs2());
        c.encrypted = encrypted;
        c.duplicates = true;
        c.capacity = 5;
        c.writes.push(sparse_write(10, Unordered, 30));
        c.writes.push(sparse_write(20, Unordered, 30));
        c.metadata = Some((25, metadata_entries()));
        c.delete = Some((30, "a < 0 or s == None".into()));
        c.consolidate = consolidate;
        at_times(&mut c, if consolidate { &[15, 25] } else { &[25] });
        out.push(c);
    }
    // Fragments overwriting each other's cells, consolidated and vacuumed
    // by tdb: TileDB answers time travel into the merged fragment from its
    // per-cell timestamps.
    for (name, dups) in [
        ("sparse_fragments_consolidated", false),
        ("sparse_fragments_consolidated_dups", true),
    ] {
        let mut c = case(name, Sparse, one(), attrs2());
        c.duplicates = dups;
        c.capacity = 7;
        for t in [10, 20, 30] {
            c.writes.push(sparse_write(t, Unordered, 25));
        }
        c.consolidate_fragments = Some(tdb::FragmentSelection::default());
        at_times(&mut c, &[15, 25]);
        out.push(c);
    }
    // The same merge split by a maximum fragment size: TileDB reads the
    // fragments through the one consolidated commits file that commits them.
    let mut c = case(
        "sparse_fragments_consolidated_split",
        Sparse,
        one(),
        attrs2(),
    );
    c.capacity = 7;
    for t in [10, 20, 30] {
        c.writes.push(sparse_write(t, Unordered, 25));
    }
    let mut split = tdb::FragmentSelection::default();
    split.max_fragment_size = Some(1000);
    c.consolidate_fragments = Some(split);
    at_times(&mut c, &[15, 25]);
    out.push(c);
    // Dimension labels, written with the cells by tdb and read by label
    // range by TileDB (and tdb): two labels on one dimension, one on the
    // other; three writes, the last relabelling part of the first.
    let mut c = case(
        "dense_labels",
        Dense,
        vec![dim("r", Int32, 0, 99, 10), dim("c", Int32, -5, 20, 7)],
        vec![
            attr("a", Int32, 1, false),
            attr("s", StringUtf8, VAR_NUM, true),
        ],
    );
    use tdb_format::DataOrder::{Decreasing, Increasing};
    for (dim, name, order, datatype) in [
        (0, "rf", Increasing, Float64),
        (0, "rs", Decreasing, StringAscii),
        (1, "ci", Increasing, Int16),
    ] {
        c.labels.push(Label {
            dim,
            name,
            order,
            datatype,
        });
    }
    c.writes
        .push(dense_write(10, RowMajor, vec![(0, 59), (-5, 20)]));
    c.writes
        .push(dense_write(20, ColMajor, vec![(60, 99), (-5, 20)]));
    c.writes
        .push(dense_write(30, RowMajor, vec![(20, 29), (0, 9)]));
    let by_label = |name: &str, labels: Value, dims: Value, t: Value| {
        let mut q = query(name, "row-major", Value::Null, t, true);
        q["labels"] = labels;
        q["dims"] = dims;
        q["attrs"] = json!(["a", "s"]);
        q
    };
    let lab = |i: usize, v: i64| c.labels[i].value(v);
    let queries = vec![
        by_label(
            "rf_range",
            json!({"rf": [[lab(0, 17), lab(0, 41)]]}),
            json!(["rf"]),
            Value::Null,
        ),
        by_label(
            "rs_ci_ranges",
            // (Index ranges out of order crash TileDB-Py 0.36.1 reading a
            // nullable var attribute: `realloc(): invalid old size`.)
            json!({"rs": [[lab(1, 9), lab(1, 3)], [lab(1, 80), lab(1, 62)]],
                   "ci": [[lab(2, -2), lab(2, 4)]]}),
            json!(["rs", "ci"]),
            Value::Null,
        ),
        by_label(
            "rf_at_10",
            json!({"rf": [[lab(0, 50), lab(0, 70)]]}),
            json!(["rf"]),
            json!(15),
        ),
    ];
    c.queries.extend(queries);
    out.push(c);
    // Schema evolution: an attribute dropped, two added (one enumerated,
    // with a new enumeration); reads before it use the old schema, reads
    // after it fill the new attributes in the old fragments.
    for array_type in [Dense, Sparse] {
        let name = if array_type == Dense {
            "dense_evolved"
        } else {
            "sparse_evolved"
        };
        let mut c = case(name, array_type, one(), attrs2());
        if array_type == Dense {
            c.writes.push(dense_write(10, RowMajor, vec![(0, 40)]));
            c.writes.push(dense_write(20, RowMajor, vec![(30, 63)]));
        } else {
            c.writes.push(sparse_write(10, Unordered, 30));
            c.writes.push(sparse_write(20, Unordered, 30));
        }
        let colors =
            tdb::Enumeration::from_values("colors", StringUtf8, VAR_NUM, ["red", "green", "blue"]);
        c.evolve = Some((
            30,
            SchemaEvolution::new()
                .drop_attribute("s")
                .add_attribute(AttributeBuilder::new("b", Float64).nullable(true))
                .add_enumeration(colors)
                .add_attribute(AttributeBuilder::new("e", UInt8).enumeration("colors")),
        ));
        let layout = if array_type == Dense {
            "row-major"
        } else {
            "unordered"
        };
        for t in [json!(25), Value::Null] {
            c.queries.push(query(
                &format!("at_{t}"),
                layout,
                Value::Null,
                t,
                array_type == Dense,
            ));
        }
        out.push(c);
    }
    out
}

fn metadata_entries() -> Vec<MetadataEntry> {
    let put = |key: &str, datatype: Datatype, bytes: Vec<u8>| {
        let n = (bytes.len() as u64 / datatype.size()) as u32;
        MetadataEntry::Put {
            key: key.into(),
            value: MetadataValue::new(datatype, n, bytes).expect("whole values"),
        }
    };
    vec![
        put(
            "ints",
            Datatype::Int64,
            [1i64, -2, 3].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ),
        put("float", Datatype::Float32, 1.5f32.to_le_bytes().to_vec()),
        put("text", Datatype::StringUtf8, "héllo".as_bytes().to_vec()),
        put("bytes", Datatype::Blob, vec![0, 255, 7]),
        put("empty", Datatype::Int32, Vec::new()),
    ]
}

/// Whether the generated cells of `a` survive `chain` as TileDB's filters
/// take them: schemas allow more than writes do (DICTIONARY fails on
/// anything but var-length strings, as in TileDB), and SCALE_FLOAT is lossy
/// on anything but floats. (POSITIVE_DELTA, which refuses decreasing
/// values, is tried on offsets, which only grow: `part_filters`.)
fn fits(chain: &[Filter], a: &Attr) -> bool {
    chain.iter().all(|f| match f {
        Filter::Dictionary { .. } => a.datatype.is_string() && a.cvn == VAR_NUM,
        Filter::ScaleFloat { .. } => a.datatype.is_float(),
        _ => true,
    })
}

/// Whether TileDB's schema rules take attribute `a` (with its filters) in
/// an array of `array_type`.
fn accepts(array_type: ArrayType, a: &Attr) -> bool {
    ArraySchema::builder(array_type)
        .dimension(DimensionBuilder::range("d", 0i64..=9).tile_extent(5i64))
        .attribute(a.builder())
        .build()
        .is_ok()
}

impl Case {
    fn schema(&self) -> Result<ArraySchema, String> {
        let mut b = ArraySchema::builder(self.array_type)
            .cell_order(self.cell_order)
            .tile_order(self.tile_order)
            .coords_filters(self.part_filters[0].clone())
            .offsets_filters(self.part_filters[1].clone())
            .validity_filters(self.part_filters[2].clone());
        if self.array_type == ArrayType::Sparse {
            b = b.capacity(self.capacity).allows_duplicates(self.duplicates);
        }
        for d in &self.dims {
            b = b.dimension(d.builder());
        }
        for a in &self.attrs {
            b = b.attribute(a.builder());
        }
        for l in &self.labels {
            b = b.dimension_label(self.dims[l.dim].name, l.name, l.order, l.datatype);
        }
        b.build()
            .map_err(|e| format!("schema: {}", error_report(&e)))
    }

    /// The cells of write `w`, fields in query order (dims of sparse
    /// arrays, then attributes), and the subarray JSON of a dense write.
    fn cells(&self, w: &Write) -> (Vec<FieldBuffer>, usize, Option<Subarray>, Value) {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ w.seed.wrapping_mul(0x1000_0001));
        let mut fields = Vec::new();
        let n = if self.array_type == ArrayType::Dense {
            w.rect
                .iter()
                .map(|(lo, hi)| (hi - lo + 1) as usize)
                .product()
        } else {
            // Distinct coordinates (unless duplicates are allowed), sorted
            // when the write is in global order: space tiles, then cells,
            // both row-major (cases with other orders have one dimension,
            // where every order is the coordinates' own).
            let mut points: Vec<Vec<i64>> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            while points.len() < w.cells {
                let p: Vec<i64> = self
                    .dims
                    .iter()
                    .map(|d| match d.datatype {
                        Datatype::StringAscii => rng.int(0, 400),
                        _ => rng.int(d.lo, d.hi),
                    })
                    .collect();
                if self.duplicates || seen.insert(p.clone()) {
                    points.push(p);
                }
            }
            if w.layout == ResultLayout::GlobalOrder {
                let tiles = |p: &Vec<i64>| -> Vec<i64> {
                    self.dims
                        .iter()
                        .zip(p)
                        .map(|(d, &v)| (v - d.lo) / d.extent.max(1))
                        .collect()
                };
                points.sort_by_key(|p| (tiles(p), p.clone()));
            }
            for (i, d) in self.dims.iter().enumerate() {
                let var = d.datatype == Datatype::StringAscii;
                let mut b =
                    FieldBuffer::new(d.name, d.datatype, if var { VAR_NUM } else { 1 }, false);
                let mut offsets = Vec::new();
                for p in &points {
                    offsets.push(b.data.len() as u64);
                    b.data.extend(d.coord(p[i]));
                }
                if var {
                    b.offsets = Some(offsets);
                }
                fields.push(b);
            }
            w.cells
        };
        for a in &self.attrs {
            fields.push(field(&mut rng, &a.name, a.datatype, a.cvn, a.nullable, n));
        }
        if self.array_type == ArrayType::Sparse {
            return (fields, n, None, Value::Null);
        }
        let mut sub = Subarray::new(self.dims.len());
        let mut json_sub = Vec::new();
        for (d, &(lo, hi)) in self.dims.iter().zip(&w.rect) {
            sub.add_range(json_sub.len(), d.range(lo, hi));
            json_sub.push(json!([[d.json(lo), d.json(hi)]]));
        }
        (fields, n, Some(sub), Value::Array(json_sub))
    }

    /// Writes the array under `dir/array` and the case's `expected.json`
    /// stub; returns the queries whose answers are known.
    fn write(&self, dir: &Path) -> Result<Vec<Known>, String> {
        let err = |e: tdb::Error| crate::conformance::chain(&e);
        let schema = self.schema()?;
        let mut options = OpenOptions::new();
        if self.encrypted {
            options = options.key(KEY.as_bytes()).map_err(err)?;
        }
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let storage = LocalStorage::new(dir.join("array"));
        let array = Array::create_in(storage, "", &schema, &[], options.clone()).map_err(err)?;
        let mut queries = self.queries.clone();
        let mut known = Vec::new();
        for (i, w) in self.writes.iter().enumerate() {
            let (fields, n, sub, json_sub) = self.cells(w);
            let mut spec = WriteSpec::new(Vec::new()).with_layout(w.layout).at(w.t);
            if let Some(s) = sub {
                spec = spec.with_subarray(s);
            }
            if !self.labels.is_empty() {
                // Label data goes with a write of one part.
                spec.fields.clone_from(&fields);
                for l in &self.labels {
                    let (lo, hi) = w.rect[l.dim];
                    spec = spec.with_label(l.values(lo, hi));
                }
                array.write(spec).map_err(err)?;
                continue;
            }
            // One fragment, from one part or from several runs of cells.
            let mut writer = array.writer(spec).map_err(err)?;
            if w.splits.is_empty() {
                writer.submit(&fields).map_err(|e| err(e.into()))?;
            } else {
                let mut bounds = vec![0];
                bounds.extend(w.splits.iter().copied());
                bounds.push(n);
                for r in bounds.windows(2) {
                    let part: Vec<FieldBuffer> =
                        fields.iter().map(|f| f.slice(r[0]..r[1])).collect();
                    writer.submit(&part).map_err(|e| err(e.into()))?;
                }
            }
            writer.finish().map_err(|e| err(e.into()))?;
            if self.writes.len() == 1 && self.delete.is_none() && self.evolve.is_none() {
                let name = format!("written_{i}");
                let (layout, ordered) = match (self.array_type, w.layout) {
                    (ArrayType::Sparse, _) => ("unordered", false),
                    (_, l) => (l.name(), true),
                };
                let mut q = query(&name, layout, json_sub, Value::Null, ordered);
                let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
                let split = if self.array_type == ArrayType::Sparse {
                    self.dims.len()
                } else {
                    0
                };
                q["dims"] = json!(names[..split]);
                q["attrs"] = json!(names[split..]);
                queries.push(q);
                let mut batch = Batch::default();
                batch.num_cells = n as u64;
                batch.fields = fields;
                known.push(Known {
                    query: name,
                    result: values::batch(&batch),
                    ordered,
                });
            }
        }
        if let Some((t, entries)) = &self.metadata {
            let at = Array::open_in(
                LocalStorage::new(dir.join("array")),
                "",
                options.clone().at(*t),
            )
            .map_err(err)?;
            at.write_metadata(entries.clone()).map_err(err)?;
        }
        if let Some((t, evolution)) = &self.evolve {
            let at = Array::open_in(
                LocalStorage::new(dir.join("array")),
                "",
                options.clone().at(*t),
            )
            .map_err(err)?;
            at.evolve(evolution).map_err(err)?;
        }
        if let Some((t, condition)) = &self.delete {
            let at = Array::open_in(
                LocalStorage::new(dir.join("array")),
                "",
                options.clone().at(*t),
            )
            .map_err(err)?;
            at.delete(condition).map_err(err)?;
        }
        if let Some(selection) = &self.consolidate_fragments {
            let now = Array::open_in(LocalStorage::new(dir.join("array")), "", options.clone())
                .map_err(err)?;
            let steps = now
                .consolidate_fragments(selection, tdb::DEFAULT_BUDGET)
                .map_err(err)?;
            let Some(step) = steps.first() else {
                return Err("no fragments to consolidate".into());
            };
            if selection.max_fragment_size.is_some() && step.written.fragments.len() < 2 {
                return Err("the merge was not split: the test would prove less".into());
            }
            now.vacuum_fragments().map_err(err)?;
        }
        if self.consolidate {
            let now =
                Array::open_in(LocalStorage::new(dir.join("array")), "", options).map_err(err)?;
            now.consolidate_commits()
                .map_err(err)?
                .ok_or("no commit to consolidate")?;
            now.vacuum_commits().map_err(err)?;
            now.consolidate_metadata().map_err(err)?;
            now.vacuum_metadata().map_err(err)?;
            now.consolidate_fragment_metadata()
                .map_err(err)?
                .ok_or("no fragment metadata to consolidate")?;
            now.vacuum_fragment_metadata().map_err(err)?;
        }
        let mut exp = json!({
            "case": self.name,
            "description": "written by tdb through its API (cargo xtask interop)",
            "kind": "array",
            "encryption": if self.encrypted { json!({"type": "AES_256_GCM", "key": KEY}) } else { Value::Null },
            "queries": queries,
        });
        if let Some((t, _)) = &self.metadata {
            exp["metadata_at"] = json!([{"timestamp": t - 1}, {"timestamp": t}]);
        }
        let text = serde_json::to_string_pretty(&exp).map_err(|e| e.to_string())?;
        fs::write(dir.join("expected.json"), text).map_err(|e| e.to_string())?;
        Ok(known)
    }
}

/// The generated group case: a group tdb builds through its API over
/// time (member arrays and a subgroup added, a member removed, metadata
/// put, changed and deleted at a later time), its metadata then
/// consolidated by tdb. TileDB reports its members, metadata, subgroups
/// and member arrays; then TileDB's vacuum must remove exactly the files
/// tdb's vacuum list names (absolute URIs, as TileDB writes them), and tdb
/// must read the group alike.
const GROUP_CASE: &str = "group_members";

fn write_group(dir: &Path) -> Result<(), String> {
    use tdb::{Group, MemberChange};
    let err = |e: tdb::Error| crate::conformance::chain(&e);
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let storage = LocalStorage::new(dir.join("group"));
    let at = |t: u64| OpenOptions::new().at(t);
    let member = |path: &str, array_type: ArrayType, n: i64| -> Result<(), String> {
        let schema = ArraySchema::builder(array_type)
            .dimension(DimensionBuilder::range("d", 0i64..=n - 1).tile_extent(4i64))
            .attribute(AttributeBuilder::new("a", Datatype::Int64))
            .build()
            .map_err(|e| e.to_string())?;
        let a = Array::create_in(&storage, path, &schema, &[], at(5)).map_err(err)?;
        let column = |name: &str, f: &dyn Fn(i64) -> i64| {
            let mut b = FieldBuffer::new(name, Datatype::Int64, 1, false);
            b.data = (0..n).flat_map(|i| f(i).to_le_bytes()).collect();
            b
        };
        let values = column("a", &|i| i * 10 - 3);
        let spec = if array_type == ArrayType::Dense {
            WriteSpec::new(vec![values])
        } else {
            WriteSpec::new(vec![column("d", &|i| n - 1 - i), values])
        };
        a.write(spec.at(7)).map_err(err)?;
        Ok(())
    };
    let add = |uri: &str| MemberChange::Add {
        uri: uri.into(),
        relative: true,
        name: Some(uri.into()),
    };
    let g = Group::create_in(&storage, "", at(10)).map_err(err)?;
    member("dense", ArrayType::Dense, 8)?;
    member("gone", ArrayType::Dense, 4)?;
    let sub = Group::create_in(&storage, "sub", at(10)).map_err(err)?;
    member("sub/sparse", ArrayType::Sparse, 5)?;
    sub.change_members(&[add("sparse")]).map_err(err)?;
    g.change_members(&[add("dense"), add("sub"), add("gone")])
        .map_err(err)?;
    g.write_metadata(metadata_entries()).map_err(err)?;
    let later = Group::open_in(&storage, "", at(20)).map_err(err)?;
    later
        .change_members(&[MemberChange::Remove("gone".into())])
        .map_err(err)?;
    later
        .write_metadata([
            MetadataEntry::Delete {
                key: "float".into(),
            },
            MetadataEntry::Put {
                key: "text".into(),
                value: MetadataValue::new(Datatype::StringAscii, 5, b"later".to_vec())
                    .map_err(|e| e.to_string())?,
            },
        ])
        .map_err(err)?;
    Group::open_in(&storage, "", OpenOptions::new())
        .map_err(err)?
        .consolidate_metadata()
        .map_err(err)?
        .ok_or("no group metadata consolidated")?;
    let exp = json!({
        "case": GROUP_CASE,
        "description": "a group written by tdb through its API, its metadata consolidated (cargo xtask interop)",
        "kind": "group",
        "encryption": Value::Null,
        "queries": [],
    });
    let text = serde_json::to_string_pretty(&exp).map_err(|e| e.to_string())?;
    fs::write(dir.join("expected.json"), text).map_err(|e| e.to_string())
}

/// The generated case of array metadata consolidation: metadata changed
/// at 2, 3 and 4 (a key deleted and put again), consolidated and vacuumed
/// by tdb. TileDB must see the latest metadata now and, as after its own
/// consolidation, none in windows that end inside the consolidated span.
const METADATA_CASE: &str = "metadata_consolidated";

fn write_consolidated_metadata(dir: &Path) -> Result<(), String> {
    let err = |e: tdb::Error| crate::conformance::chain(&e);
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let storage = LocalStorage::new(dir.join("array"));
    let at = |t: u64| OpenOptions::new().at(t);
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dimension(DimensionBuilder::range("d", 0i64..=9).tile_extent(5i64))
        .attribute(AttributeBuilder::new("a", Datatype::Int64))
        .build()
        .map_err(|e| e.to_string())?;
    Array::create_in(&storage, "", &schema, &[], at(1)).map_err(err)?;
    let put = |key: &str, v: i64| MetadataEntry::Put {
        key: key.into(),
        value: MetadataValue::new(Datatype::Int64, 1, v.to_le_bytes().to_vec()).expect("one value"),
    };
    let changes = [
        vec![put("k1", 1), put("shared", 10)],
        vec![
            put("k2", 2),
            MetadataEntry::Delete {
                key: "shared".into(),
            },
        ],
        vec![put("k3", 3), put("shared", 30)],
    ];
    for (t, change) in (2..).zip(changes) {
        let a = Array::open_in(&storage, "", at(t)).map_err(err)?;
        a.write_metadata(change).map_err(err)?;
    }
    let a = Array::open_in(&storage, "", OpenOptions::new()).map_err(err)?;
    a.consolidate_metadata()
        .map_err(err)?
        .ok_or("nothing consolidated")?;
    a.vacuum_metadata().map_err(err)?;
    let exp = json!({
        "case": METADATA_CASE,
        "description": "array metadata consolidated and vacuumed by tdb (cargo xtask interop)",
        "kind": "array",
        "encryption": Value::Null,
        "metadata_at": [{"timestamp": 2}, {"timestamp": 3}, {"timestamp": 4}],
        "queries": [],
    });
    let text = serde_json::to_string_pretty(&exp).map_err(|e| e.to_string())?;
    fs::write(dir.join("expected.json"), text).map_err(|e| e.to_string())
}

/// TileDB vacuums [`GROUP_CASE`]'s metadata: only the file tdb merged
/// must be left (TileDB matched tdb's vacuum list).
fn tiledb_vacuums_group_metadata(root: &Path, python: &Path, group: &Path) -> Result<(), String> {
    let output = Command::new(python)
        .current_dir(root)
        .args([
            "-c",
            "import sys, tiledb; tiledb.Group.vacuum_metadata(sys.argv[1])",
        ])
        .arg(group)
        .output()
        .map_err(|e| format!("python: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "TileDB's vacuum failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let left: Vec<String> = fs::read_dir(group.join("__meta"))
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if left.len() != 1 || !left[0].starts_with("__10_20_") {
        return Err(format!(
            "after TileDB's vacuum __meta/ holds {left:?}, not tdb's merged file alone"
        ));
    }
    Ok(())
}

/// What TileDB must report of [`METADATA_CASE`]: the keys seen at 2, 3, 4.
fn check_consolidated_metadata(exp: &Value) -> Result<(), String> {
    let keys = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e["key"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let at: Vec<Vec<String>> = exp["metadata_at"]
        .as_array()
        .ok_or("no metadata_at")?
        .iter()
        .map(|m| keys(&m["metadata"]))
        .collect();
    let want = vec![vec![], vec![], vec!["k1", "k2", "k3", "shared"]];
    if at != want {
        return Err(format!(
            "TileDB sees metadata {at:?} at 2, 3, 4; want {want:?}"
        ));
    }
    Ok(())
}

/// The generated pass: `(passed, failed)`, a line per failed case.
pub(crate) fn generated(root: &Path, python: &Path) -> Result<(usize, usize), String> {
    let out = root.join("target/interop/generated");
    if out.exists() {
        fs::remove_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    let all = cases();
    // The first failure of each case.
    let mut failed: BTreeMap<String, String> = BTreeMap::new();
    let mut known = Vec::new();
    if let Err(e) = write_group(&out.join(GROUP_CASE)) {
        failed.insert(GROUP_CASE.into(), format!("tdb could not write it: {e}"));
    }
    if let Err(e) = write_consolidated_metadata(&out.join(METADATA_CASE)) {
        failed.insert(METADATA_CASE.into(), format!("tdb could not write it: {e}"));
    }
    for c in &all {
        match c.write(&out.join(&c.name)) {
            Ok(k) => known.push((c.name.clone(), k)),
            Err(e) => {
                failed.insert(c.name.clone(), format!("tdb could not write it: {e}"));
            }
        }
    }
    // TileDB answers every query of every case (and reports schema,
    // metadata and fragments) from tdb's bytes.
    let output = Command::new(python)
        .current_dir(root)
        .arg("xtask/fixtures/expect.py")
        .arg(&out)
        .output()
        .map_err(|e| format!("expect.py: {e}"))?;
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let names = all
            .iter()
            .map(|c| c.name.as_str())
            .chain([GROUP_CASE, METADATA_CASE]);
        if let Some(name) = names.into_iter().find(|n| line.contains(&format!("/{n}:"))) {
            if line.starts_with("FAIL") {
                failed
                    .entry(name.to_owned())
                    .or_insert_with(|| format!("TileDB could not read it: {line}"));
            }
        }
    }
    // What TileDB read is what tdb wrote.
    if !failed.contains_key(METADATA_CASE) {
        let (exp, _) = crate::conformance::read_expected(
            &out.join(METADATA_CASE),
            &tdb::StorageConfig::new(),
        )?;
        if let Err(e) = check_consolidated_metadata(&exp) {
            failed.insert(METADATA_CASE.into(), e);
        }
    }
    if !failed.contains_key(GROUP_CASE) {
        let group = out.join(GROUP_CASE).join("group");
        if let Err(e) = tiledb_vacuums_group_metadata(root, python, &group) {
            failed.insert(GROUP_CASE.into(), e);
        }
    }
    for (name, queries) in &known {
        if failed.contains_key(name) {
            continue;
        }
        let (exp, _) =
            crate::conformance::read_expected(&out.join(name), &tdb::StorageConfig::new())?;
        for k in queries {
            let got = exp["queries"]
                .as_array()
                .and_then(|qs| qs.iter().find(|x| x["name"] == json!(k.query)))
                .map(|x| &x["result"]);
            let outcome = match got {
                Some(got) => crate::conformance::compare_result(&k.result, got, k.ordered),
                None => Err("no answer".into()),
            };
            if let Err(e) = outcome {
                failed.entry(name.clone()).or_insert_with(|| {
                    format!("TileDB reads other cells than tdb wrote ({}): {e}", k.query)
                });
            }
        }
    }
    // tdb reads them as TileDB did.
    let mut report = Vec::new();
    crate::conformance::run(&out, &crate::conformance::Options::default(), &mut report)?;
    for line in String::from_utf8_lossy(&report).lines() {
        if let Some(rest) = line.strip_prefix("FAIL ") {
            let name = rest.split(':').next().unwrap_or(rest).to_owned();
            failed
                .entry(name)
                .or_insert_with(|| format!("tdb reads it otherwise than TileDB: {rest}"));
        }
    }
    for (name, why) in &failed {
        println!("FAIL generated/{name}: {why}");
    }
    let cases = all.len() + 2;
    println!(
        "generated: {} arrays and a group written by tdb, read by TileDB and by tdb: {} failed",
        all.len() + 1,
        failed.len()
    );
    Ok((cases.saturating_sub(failed.len()), failed.len()))
}
