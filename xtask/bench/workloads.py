"""Writes one benchmark workload's arrays with real TileDB (cargo xtask bench).

usage: workloads.py WORKLOAD OUT_DIR SCALE

WORKLOAD is W1..W7; SCALE is "full" (the sizes of the benchmark issue),
"quick" (tiny, for the CI smoke test) or "scale-F" (W1, W3 and W5 at F times
their size, F in 1, 4, 16: `cargo xtask bench --scale`). Every array is written into OUT_DIR
(emptied first); the caller caches OUT_DIR and re-runs this only when the
workload or scale changes. Data are seeded, so both engines read the same
cells on every machine.
"""

import os
import shutil
import sys

import numpy as np
import tiledb

FULL = {
    "W1": 4096,
    "W2": [1024, 4096, 8192],
    "W3": 4_000_000,
    "W4": 1_000_000,
    "W5": 1000,
    "W6": 262_144,
    "W7": 2000,
}
QUICK = {
    "W1": 512,
    "W2": [256, 512],
    "W3": 20_000,
    "W4": 10_000,
    "W5": 20,
    "W6": 8192,
    "W7": 300,
}


# `--scale`: W1 and W3 at 1x, 4x and 16x their cells (W1 a square of 4096,
# 8192 and 16384 float64 cells: 128 MiB to 2 GiB; W3 4M to 64M cells), and
# W5's fragments to consolidate, 625 to 10,000 (the array to consolidate
# only).
SCALES = {
    f: {"W1": 4096 * {1: 1, 4: 2, 16: 4}[f], "W3": 4_000_000 * f, "W5": 625 * f}
    for f in (1, 4, 16)
}


def dense_2d(path, n, dtype, filters, data):
    dom = tiledb.Domain(
        tiledb.Dim("y", domain=(0, n - 1), tile=min(256, n), dtype=np.int32),
        tiledb.Dim("x", domain=(0, n - 1), tile=min(256, n), dtype=np.int32),
    )
    attr = tiledb.Attr("a", dtype=dtype, filters=tiledb.FilterList(filters))
    tiledb.Array.create(path, tiledb.ArraySchema(domain=dom, attrs=[attr], sparse=False))
    with tiledb.open(path, "w") as a:
        # Row blocks of whole tiles: one fragment, bounded memory.
        step = min(n, 1024)
        for y0 in range(0, n, step):
            a[y0 : y0 + step, 0:n] = data(y0, y0 + step, n)


def w1(out, n):
    def data(y0, y1, n):
        y, x = np.meshgrid(np.arange(y0, y1), np.arange(n), indexing="ij")
        return (np.sin(x / 100.0) * np.cos(y / 100.0) * 1000.0).astype(np.float64)

    filters = [tiledb.ByteShuffleFilter(), tiledb.ZstdFilter(level=3)]
    dense_2d(os.path.join(out, f"dense_f64_{n}"), n, np.float64, filters, data)


def w2(out, sizes):
    def data(y0, y1, n):
        y, x = np.meshgrid(np.arange(y0, y1), np.arange(n), indexing="ij")
        return (y * n + x).astype(np.int32)

    for n in sizes:
        dense_2d(os.path.join(out, f"dense_i32_{n}"), n, np.int32, [], data)


def w3(out, cells):
    path = os.path.join(out, "sparse_2d")
    dom = tiledb.Domain(
        tiledb.Dim("y", domain=(0, 999_999), tile=100_000, dtype=np.int64),
        tiledb.Dim("x", domain=(0, 999_999), tile=100_000, dtype=np.int64),
    )
    attr = tiledb.Attr("a", dtype=np.float64, filters=tiledb.FilterList([tiledb.ZstdFilter(level=3)]))
    schema = tiledb.ArraySchema(
        domain=dom, attrs=[attr], sparse=True, capacity=10_000, allows_duplicates=True
    )
    tiledb.Array.create(path, schema)
    rng = np.random.default_rng(3)
    with tiledb.open(path, "w") as a:
        y = rng.integers(0, 1_000_000, cells)
        x = rng.integers(0, 1_000_000, cells)
        a[y, x] = {"a": rng.random(cells)}


def w4(out, cells):
    path = os.path.join(out, "sparse_var")
    dom = tiledb.Domain(tiledb.Dim("k", domain=(0, 2**40), tile=2**30, dtype=np.uint64))
    attr = tiledb.Attr(
        "s", dtype=str, var=True, filters=tiledb.FilterList([tiledb.ZstdFilter(level=3)])
    )
    tiledb.Array.create(path, tiledb.ArraySchema(domain=dom, attrs=[attr], sparse=True))
    rng = np.random.default_rng(4)
    keys = np.sort(rng.choice(10 * cells, cells, replace=False)).astype(np.uint64)
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyzé0123456789"))
    lengths = rng.integers(4, 29, cells)
    chars = "".join(rng.choice(alphabet, int(lengths.sum())))
    ends = np.cumsum(lengths)
    text = [chars[e - k : e] for e, k in zip(ends, lengths)]
    with tiledb.open(path, "w") as a:
        a[keys] = {"s": np.array(text, dtype=object)}


def w5(out, fragments, scaled=False):
    def one(path):
        dom = tiledb.Domain(tiledb.Dim("d", domain=(0, 1_000_000), tile=1000, dtype=np.int64))
        attr = tiledb.Attr("a", dtype=np.int64)
        tiledb.Array.create(path, tiledb.ArraySchema(domain=dom, attrs=[attr], sparse=True))
        for i in range(fragments):
            with tiledb.open(path, "w") as a:
                a[np.array([i * 10, i * 10 + 1], dtype=np.int64)] = {
                    "a": np.array([i, -i], dtype=np.int64)
                }

    one(os.path.join(out, "fragments"))
    if scaled:
        return
    path = os.path.join(out, "fragments_commits")
    one(path)
    tiledb.consolidate(path, config=tiledb.Config({"sm.consolidation.mode": "commits"}))
    path = os.path.join(out, "fragments_meta")
    one(path)
    tiledb.consolidate(path, config=tiledb.Config({"sm.consolidation.mode": "fragment_meta"}))


def w6(out, vectors):
    """Vectors as tiledb-vector-search stores them: 128 float32 dimensions
    per vector, one dense tile holding every vector (128 MiB at full scale),
    cells column-major so each vector's values are contiguous; no filters."""
    path = os.path.join(out, "vectors")
    dom = tiledb.Domain(
        tiledb.Dim("d", domain=(0, 127), tile=128, dtype=np.int32),
        tiledb.Dim("v", domain=(0, vectors - 1), tile=vectors, dtype=np.int32),
    )
    attr = tiledb.Attr("a", dtype=np.float32)
    schema = tiledb.ArraySchema(
        domain=dom, attrs=[attr], sparse=False, cell_order="col-major", tile_order="col-major"
    )
    tiledb.Array.create(path, schema)
    rng = np.random.default_rng(6)
    with tiledb.open(path, "w") as a:
        a[0:128, 0:vectors] = rng.random((128, vectors), dtype=np.float32)


def w7(out, cells):
    """Small sparse arrays in three fragments, for reads under small memory
    budgets: a 3-D Hilbert-ordered array (the issue's case: int32, float64
    and int64 dimensions, capacity 8), and 2-D arrays of row-major and
    col-major cells and tiles (capacity 64); and a dense array whose row of
    tiles (16 int32 tiles of 256², stored as they are) passes the budgets,
    read along its cell order and across it."""
    rng = np.random.default_rng(7)
    rows = 256 if cells >= 1000 else 64
    path = os.path.join(out, "dense_rows")
    dom = tiledb.Domain(
        tiledb.Dim("y", domain=(0, rows - 1), tile=min(256, rows), dtype=np.int32),
        tiledb.Dim("x", domain=(0, 4095), tile=256, dtype=np.int32),
    )
    tiledb.Array.create(
        path,
        tiledb.ArraySchema(domain=dom, attrs=[tiledb.Attr("a", dtype=np.int32)], sparse=False),
    )
    with tiledb.open(path, "w") as a:
        a[0:rows, 0:4096] = rng.integers(-1000, 1000, (rows, 4096)).astype(np.int32)

    def fill(path, coords):
        for part in np.array_split(np.arange(cells), 3):
            with tiledb.open(path, "w") as a:
                a[tuple(c[part] for c in coords)] = {
                    "a": rng.integers(-1000, 1000, len(part)).astype(np.int32),
                    "f": rng.random(len(part)),
                }

    attrs = [tiledb.Attr("a", dtype=np.int32), tiledb.Attr("f", dtype=np.float64)]
    path = os.path.join(out, "hilbert_3d")
    dom = tiledb.Domain(
        tiledb.Dim("x", domain=(0, 999), tile=100, dtype=np.int32),
        tiledb.Dim("y", domain=(0.0, 1000.0), tile=100.0, dtype=np.float64),
        tiledb.Dim("z", domain=(0, 999), tile=100, dtype=np.int64),
    )
    tiledb.Array.create(
        path,
        tiledb.ArraySchema(
            domain=dom, attrs=attrs, sparse=True, cell_order="hilbert", capacity=8,
            allows_duplicates=True,
        ),
    )
    fill(path, [rng.integers(0, 1000, cells).astype(np.int32), rng.random(cells) * 1000.0,
                rng.integers(0, 1000, cells)])
    for name, order in [("row_2d", "row-major"), ("col_2d", "col-major")]:
        path = os.path.join(out, name)
        dom = tiledb.Domain(
            tiledb.Dim("y", domain=(0, 9999), tile=1000, dtype=np.int64),
            tiledb.Dim("x", domain=(0, 9999), tile=1000, dtype=np.int64),
        )
        tiledb.Array.create(
            path,
            tiledb.ArraySchema(
                domain=dom, attrs=attrs, sparse=True, cell_order=order, tile_order=order,
                capacity=64, allows_duplicates=True,
            ),
        )
        fill(path, [rng.integers(0, 10000, cells), rng.integers(0, 10000, cells)])


def main():
    workload, out, scale = sys.argv[1:4]
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    if scale.startswith("scale-"):
        size = SCALES[int(scale[len("scale-"):])][workload]
        if workload == "W5":
            w5(out, size, scaled=True)
        else:
            {"W1": w1, "W3": w3}[workload](out, size)
        return
    sizes = FULL if scale == "full" else QUICK
    {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6, "W7": w7}[workload](out, sizes[workload])


if __name__ == "__main__":
    main()
