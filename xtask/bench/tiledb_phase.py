"""Runs one benchmark phase with TileDB (tiledb-py) and reports it as JSON.

usage: tiledb_phase.py PHASE_JSON ARRAY [OUT]

The phase (written by cargo xtask bench) lists queries: per query a subarray
(one inclusive [lo, hi] per dimension, or null for the whole domain), a layout
and an optional condition; or aggregates. The array is opened first, untimed,
unless the phase times the open too. Every result byte is touched (summed),
nothing is converted. A write phase reads ARRAY's cells (untimed), then times
creating OUT with ARRAY's schema and writing the cells into it in one write.
Prints {"seconds", "cells", "check", "peak_kib"}.
"""

import json
import os
import shutil
import sys
import time

import numpy as np
import tiledb

ORDER = {"row-major": "C", "col-major": "F", "global-order": "G", "unordered": "U"}


def touch(values):
    if values.dtype == object:
        return float(sum(len(v) for v in values))
    return float(np.sum(values, dtype=np.float64))


def run(phase, a):
    cells, check = 0, 0.0
    attrs = phase["fields"]
    for q in phase["queries"]:
        kwargs = {"attrs": attrs, "order": ORDER[q["layout"]]}
        if a.schema.sparse:
            kwargs["dims"] = False
        if q.get("condition"):
            kwargs["cond"] = q["condition"]
        whole = tuple(slice(None) for _ in range(a.schema.ndim))
        index = (
            whole
            if q["ranges"] is None
            else tuple(slice(lo, hi) for lo, hi in q["ranges"])
        )
        if phase.get("aggregates"):
            del kwargs["order"]
            ops = {}
            for field, op in phase["aggregates"]:
                ops.setdefault(field, []).append(op)
            query = a.query(**kwargs).agg(ops)
            r = query[:] if q["ranges"] is None else query.multi_index[index]
            # One field: {op: value}; several: {field: {op: value}}.
            for v in r.values():
                for x in v.values() if isinstance(v, dict) else [v]:
                    check += float(x)
            cells += 1
            continue
        query = a.query(**kwargs)
        r = query[:] if q["ranges"] is None and a.schema.sparse else query.multi_index[index]
        for f in attrs:
            v = r[f]
            v = v if v.dtype == object else v.reshape(-1)
            cells += len(v)
            check += touch(v)
    return cells, check


def write(phase, a, out, ctx):
    schema = a.schema
    dims = [schema.domain.dim(i).name for i in range(schema.ndim)]
    attrs = [f for f in phase["fields"] if f not in dims]
    if schema.sparse:
        data = a.query(attrs=attrs, dims=dims, order="U")[:]
    else:
        data = a.query(attrs=attrs, order="C")[:]
    check = sum(touch(data[f] if data[f].dtype == object else data[f].reshape(-1)) for f in attrs)
    t = time.perf_counter()
    tiledb.Array.create(out, schema, ctx=ctx)
    with tiledb.open(out, "w", ctx=ctx) as w:
        if schema.sparse:
            w[tuple(data[d] for d in dims)] = {f: data[f] for f in attrs}
        else:
            w[:] = {f: data[f] for f in attrs}
    seconds = time.perf_counter() - t
    cells = len(data[attrs[0]].reshape(-1)) if data[attrs[0]].dtype != object else len(data[attrs[0]])
    return seconds, cells, check


def consolidate(phase, path, out, ctx):
    shutil.copytree(path, out)
    t = time.perf_counter()
    tiledb.consolidate(out, config=tiledb.Config({"sm.consolidation.mode": "fragments"}), ctx=ctx)
    seconds = time.perf_counter() - t
    with tiledb.open(out, ctx=ctx) as a:
        data = a.query(attrs=phase["fields"])[:]
    cells = len(data[phase["fields"][0]])
    check = sum(touch(data[f]) for f in phase["fields"])
    return seconds, cells, check


def peak_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def main():
    phase = json.load(open(sys.argv[1]))
    path = sys.argv[2]
    cores = str(os.cpu_count() or 1)
    cfg = {"sm.compute_concurrency_level": cores, "sm.io_concurrency_level": cores}
    # An object store's settings (cargo xtask bench --storage s3).
    cfg.update(json.loads(os.environ.get("TDB_TILEDB_CONFIG", "{}")))
    ctx = tiledb.Ctx(tiledb.Config(cfg))
    if phase.get("consolidate"):
        seconds, cells, check = consolidate(phase, path, sys.argv[3], ctx)
    elif phase.get("write"):
        with tiledb.open(path, ctx=ctx) as a:
            seconds, cells, check = write(phase, a, sys.argv[3], ctx)
    elif phase.get("time_open"):
        t = time.perf_counter()
        with tiledb.open(path, ctx=ctx) as a:
            cells, check = run(phase, a)
        seconds = time.perf_counter() - t
    else:
        with tiledb.open(path, ctx=ctx) as a:
            t = time.perf_counter()
            cells, check = run(phase, a)
            seconds = time.perf_counter() - t
    print(json.dumps({"seconds": seconds, "cells": cells, "check": check, "peak_kib": peak_kib()}))


if __name__ == "__main__":
    main()
