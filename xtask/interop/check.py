#!/usr/bin/env python3
"""TileDB reads the copy tdb re-encoded exactly as it read TileDB's own bytes.

Usage: <venv-0.36.1>/bin/python xtask/interop/check.py [--copy | --consolidated | --arrow] CORPUS COPY [REFERENCE] [--only CASE | --shard I/N]

With --copy, COPY holds arrays tdb wrote anew (`tdb copy`, at format v22, with new
fragment and schema names): what a copy changes by design is left out of the comparison
(file names and sizes, format versions, fragment and schema names, consolidated-metadata
flags, vacuum candidates); the schema, metadata, every fragment's timestamps, cell count
and non-empty domain, and every query's answer must be TileDB's.

With --consolidated, COPY holds cases tdb consolidated and vacuumed in place: their
fragments and files change by design and are left out; the schema, metadata and every
query's answer must be TileDB's (unordered queries as multisets: merging fragments changes
the order TileDB returns them in), for the queries the copy's expected.json still lists
(time travel into a dense merge is dropped there: dense merges keep no timestamps).
Where REFERENCE holds the same case (TileDB's own consolidation of it), the answers TileDB
gives for that are what the copy must give instead of CORPUS's, and its fragments must have
the reference's timestamps, kinds, cell counts and non-empty domains.

With --arrow, COPY holds new arrays with the case's schema that hold its cells now, as tdb
wrote them from the case read as Arrow record batches (one fragment) or by SQL `INSERT`
through a cluster (a fragment a partition): the schema and the answers of the queries the
copy's expected.json lists (those that read now) must be TileDB's, as multisets (see
arrow_view); fragments, metadata and files are left out.

For every case under COPY (a copy of CORPUS in which tdb rewrote files), recompute what
TileDB reports (expect.py's complete_case, in place) and compare it with the committed
expected.json of the same case under CORPUS. File sizes may differ (tdb's compressor
output is not TileDB's); everything else must be equal.

With --shard I/N, only every Nth case from the Ith (from 0) is checked, so N processes
check a corpus at once.
"""
import itertools
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import expect  # noqa: E402


def without_sizes(doc):
    doc = dict(doc)
    doc["files"] = [f[0] for f in doc.get("files", [])]
    return doc


def copy_view(doc, stale=False):
    """What a copy must keep of a case's expectations (`stale`: the source's fragments may
    be stored in an order TileDB no longer sorts by, see stale_order)."""
    doc = dict(doc)
    for k in ("files", "format_versions", "fragments_to_vacuum", "generator", "notes",
              "description", "case"):
        doc.pop(k, None)
    if isinstance(doc.get("schema"), dict):
        doc["schema"] = copied_schema(doc["schema"])
    # Unordered answers as multisets: a copy writes a legacy fragment's cells in today's
    # global order, which for float dimensions TileDB 1.x laid out otherwise. So do
    # global-order answers over fragments stored in an order TileDB no longer sorts by,
    # which TileDB returns as stored and the copy holds sorted.
    unordered_as_multisets(doc, stale)
    lossy_aggregates_dropped(doc)
    # A group's member arrays are copies too.
    members = doc.get("member_arrays")
    if isinstance(members, dict):
        doc["member_arrays"] = {p: member_view(m) for p, m in members.items()}
    elif isinstance(members, list):
        doc["member_arrays"] = [member_view(m) for m in members]
    keep = ("timestamp_range", "sparse", "cell_num", "nonempty_domain")
    doc["fragments"] = [{k: f.get(k) for k in keep} for f in doc.get("fragments", [])]
    return doc


def consolidated_view(doc):
    """What a consolidated case must keep: schema, metadata, answers."""
    doc = dict(doc)
    for k in ("files", "format_versions", "fragments", "fragments_to_vacuum", "generator",
              "notes", "description", "case"):
        doc.pop(k, None)
    unordered_as_multisets(doc)
    return doc


def unordered_as_multisets(doc, global_too=False):
    """The answers of `doc`'s unordered queries (`ordered` false) as multisets, in place;
    of its global-order ones too with `global_too`."""
    if "queries" not in doc:
        return
    queries = []
    for q in doc["queries"]:
        q = dict(q)
        loose = q.get("ordered") is False or (global_too and q.get("layout") == "global-order")
        if loose and isinstance(q.get("result"), dict):
            q["result"] = as_multiset(q["result"])
        queries.append(q)
    doc["queries"] = queries


def stale_order(doc):
    """Whether a case's fragments may be stored in an order TileDB no longer sorts by
    (tdb's `stored_out_of_order`): TileDB 2.2's Hilbert fragments (formats 7 and 8) with
    a dimension it bucketed as an integer, 1.x's (formats 4 and older) of real
    coordinates."""
    schema = doc.get("schema")
    if not isinstance(schema, dict):
        return False
    versions = doc.get("format_versions") or []
    types = [d.get("datatype", "") for d in schema.get("dims", [])]
    real = [t.startswith("FLOAT") for t in types]
    if schema.get("cell_order") == "hilbert":
        integral = [not r and not t.startswith("STRING") and t != "CHAR"
                    for t, r in zip(types, real)]
        return any(v in (7, 8) for v in versions) and any(integral)
    return any(v <= 4 for v in versions) and any(real)


def lossy_aggregates_dropped(doc):
    """Leaves out, in place, the aggregates of fields under FLOAT_SCALE but counts: a
    copy (or a merge) stores the values it read, already quantized, so its tile metadata
    (which answers whole tiles' min, max and sum) holds those, not the values first
    written."""
    lossy = lossy_fields(doc.get("schema"))
    if not lossy or "queries" not in doc:
        return
    queries = []
    for q in doc["queries"]:
        q = dict(q)
        if isinstance(q.get("aggregates"), dict):
            q["aggregates"] = {f: ({op: v for op, v in ops.items() if op == "count"}
                                   if f in lossy else ops)
                               for f, ops in q["aggregates"].items()}
        queries.append(q)
    doc["queries"] = queries


def lossy_fields(schema):
    """The attributes a FLOAT_SCALE filter quantizes as it stores them."""
    if not isinstance(schema, dict):
        return set()
    return {a["name"] for a in schema.get("attrs", [])
            if any(f.get("type") == "SCALE_FLOAT"
                   for f in (a.get("filters") or {}).get("filters", []))}


def several_schemas(doc):
    """Whether a case's fragments were written under several schemas."""
    return len({f.get("array_schema_name") for f in doc.get("fragments", [])}) > 1


def arrow_view(doc, covered=True, evolved=False):
    """What an array written anew from Arrow batches must keep: schema and answers now.

    Every answer is compared as a multiset: the order TileDB returns some reads in
    depends on how the cells are spread over fragments (1-D multi-range reads, equal
    float coordinates), and a copy's fragments are not the case's. A dense copy writes its whole box,
    the fill values of cells no fragment of the case wrote among them; TileDB's dense
    aggregates fold only written cells into sums, minima, maxima and means (its counts
    take every cell), so unless the case's fragments cover their box (`covered`, see
    fully_written) a dense array's aggregates are compared by count alone. Dense means
    are never compared: TileDB divides by a count that depends on how the fragments
    were written (aggregates_dense: 602/36 over TileDB's fragments, 602/48 over a copy
    of the same box). Queries whose answer TileDB gives by how the cells lie in tiles
    (parts_ruled) or by where its fragments begin in them (nulls_shifted) are left out:
    the copy's tiles are not the case's (its copies_checked_as_cells has tdb read them on
    the copy as TileDB does instead).
    Unless covered, the values of fields under FLOAT_SCALE are left out too (their
    validity kept): the copy stores the fill values of cells nobody wrote, quantized,
    and a NaN fill quantizes to what a cast of NaN to an integer gives (rand_21479:
    -21474836.0 where TileDB reads the case's unwritten cell as NaN). Where the case's
    fragments were written under several schemas (`evolved`, see several_schemas),
    queries under a condition are left out: over the case TileDB clears the cells of a
    fragment without an attribute the condition names, over the copy's one fragment it
    tests their fill values (rand_22309, an
    attribute added by evolution)."""
    if not covered:
        doc = values_dropped(doc, lossy_fields(doc.get("schema")))
    doc = consolidated_view(doc)
    lossy_aggregates_dropped(doc)
    for k in ("metadata", "metadata_at"):
        doc.pop(k, None)
    schema = doc.get("schema")
    dense = isinstance(schema, dict) and schema.get("array_type") == "dense"
    if isinstance(schema, dict):
        doc["schema"] = copied_schema(schema)
    keep = (lambda op: op != "mean") if covered else (lambda op: op == "count")
    queries = []
    for q in doc.get("queries", []):
        if parts_ruled(schema, q) or (evolved and q.get("condition")) or nulls_shifted(schema, q):
            continue
        q = dict(q)
        if isinstance(q.get("result"), dict) and "rows" not in q["result"]:
            q["result"] = as_multiset(q["result"])
        if dense and isinstance(q.get("aggregates"), dict):
            q["aggregates"] = {f: {op: v for op, v in ops.items() if keep(op)}
                               for f, ops in q["aggregates"].items()}
        queries.append(q)
    doc["queries"] = queries
    return doc


def values_dropped(doc, names):
    """`doc` with the values of fields `names` left out of every answer (validity kept)."""
    if not names:
        return doc
    queries = []
    for q in doc.get("queries", []):
        q = dict(q)
        if isinstance(q.get("result"), dict):
            fields = q["result"].get("fields", {})
            q["result"] = dict(q["result"], fields={
                n: ({k: v for k, v in f.items() if k != "data"} if n in names else f)
                for n, f in fields.items()})
        queries.append(q)
    return dict(doc, queries=queries)


def nulls_shifted(schema, q):
    """Whether TileDB 2.30 answers query `q` by where its fragments begin in the tiles: a
    dense read across the tiles' cell order (row-major results of col-major tiles or the
    reverse) tests nulls on other cells where a fragment begins inside a cell slab (tdb's
    `read/null_checks.rs`); a copy's one fragment begins elsewhere
    (`dense_null_checks_across_cell_order`)."""
    if not isinstance(schema, dict) or schema.get("array_type") != "dense":
        return False
    across = {"row-major": "col-major", "col-major": "row-major"}.get(q.get("layout"))
    return (across == schema.get("cell_order") and len(schema.get("dims") or []) > 1
            and "None" in (q.get("condition") or ""))


def parts_ruled(schema, q):
    """Whether TileDB 2.30 answers query `q` by how cells lie in tiles: it gives ranges on
    the string dimension a sparse tile's cells are sorted on first (row-major cells: the
    first, col-major: the last) in an array of several dimensions, where a part of a tile
    whose first and last cells agree there is kept or dropped by its first cell (tdb's
    `tiledb_string_parts`). rand_9809: over one fragment holding the case's cells TileDB
    returns four cells outside both ranges that over the case's fragments it does not."""
    if not isinstance(schema, dict) or schema.get("array_type") != "sparse":
        return False
    dims = schema.get("dims") or []
    order = {"row-major": 0, "col-major": len(dims) - 1}.get(schema.get("cell_order"))
    if len(dims) < 2 or order is None or not dims[order].get("var"):
        return False
    sub = q.get("subarray")
    return isinstance(sub, list) and len(sub) > order and bool(sub[order])


def fully_written(doc):
    """Whether a case's fragments write every cell of the box their non-empty domains
    span (the box a dense copy writes whole), and only those: a dense fragment TileDB
    merged (timestamps t1 < t2) whose tiles reach beyond its non-empty domain folded
    fill values of cells nobody wrote into its tiles' sums, minima and maxima (the
    consolidator's global-order write visits them; rand_21439, 21443), which a copy
    written in row- or column-major order does not. Non-integer bounds count as not
    covered."""
    frags = doc.get("fragments", [])
    boxes = [f.get("nonempty_domain") for f in frags]
    if not boxes:
        return True
    if not all(isinstance(v, int) for b in boxes for r in b for v in r):
        return False
    for f, b in zip(frags, boxes):
        t = f.get("timestamp_range") or [0, 0]
        if not f.get("sparse") and t[0] != t[-1] and f.get("cell_num") != math.prod(
                hi - lo + 1 for lo, hi in b):
            return False
    # Per dimension, the intervals between consecutive range ends: each lies wholly
    # inside or outside every fragment's range, so their products are checked once.
    pieces = []
    for d in range(len(boxes[0])):
        ends = sorted({b[d][0] for b in boxes} | {b[d][1] + 1 for b in boxes})
        pieces.append(list(zip(ends, ends[1:])))
    for cell in itertools.product(*pieces):
        if not any(all(b[d][0] <= lo and hi - 1 <= b[d][1] for d, (lo, hi) in enumerate(cell))
                   for b in boxes):
            return False
    return True


def fragment_shapes(doc):
    """Each fragment's timestamps, kind, cell count and non-empty domain: what two
    consolidations of one array must agree on (names, versions and sizes may differ)."""
    keys = ("timestamp_range", "sparse", "cell_num", "nonempty_domain")
    return [[f.get(k) for k in keys] for f in doc.get("fragments", [])]


def as_multiset(result):
    """A result with its cells sorted, so two orders of the same cells agree."""
    fields = result.get("fields", {})
    names = sorted(fields)
    n = result.get("num_cells", 0)
    rows = []
    for i in range(n):
        row = []
        for name in names:
            f = fields[name]
            data, validity = f.get("data"), f.get("validity")
            row.append(json.dumps([
                data[i] if isinstance(data, list) and i < len(data) else None,
                validity[i] if isinstance(validity, list) and i < len(validity) else None,
            ], sort_keys=True))
        rows.append(row)
    rows.sort()
    return {"num_cells": n, "rows": rows}


def copied_schema(schema):
    schema = {k: v for k, v in schema.items() if k != "schema_format_version"}
    # From v5 TileDB loads a dimension without filters with a copy of the
    # coordinate filters; older schemas keep them empty. A copy is v22.
    coords = schema.get("coords_filters")
    dims = []
    for d in schema.get("dims", []):
        d = dict(d)
        if isinstance(d.get("filters"), dict) and not d["filters"].get("filters"):
            d["filters"] = coords
        dims.append(d)
    schema["dims"] = dims
    return schema


def member_view(m):
    m = dict(m)
    if isinstance(m.get("schema"), dict):
        m["schema"] = copied_schema(m["schema"])
    return m


def close(a, b):
    """Equal, except that floats may differ in their last bits: TileDB sums
    floats for aggregates on several threads, so a float sum or mean can
    change in its last ulp from one run to the next (seen on
    aggregates_sparse's `t1` mean, on the same bytes)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return False
        # A field holding NaN: its min and max depend on the order TileDB's
        # threads fold tiles in (seen on a dense merge's fill values, max
        # 5.75 in one run and NaN in the next, same bytes); the sum says
        # NaN either way.
        nan = a.get("sum") == "NaN" and b.get("sum") == "NaN"
        return all(close(a[k], b[k]) for k in a if not (nan and k in ("min", "max")))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return a == b


def same(want, got):
    """Documents equal, with aggregate values compared by `close`."""
    if want.keys() != got.keys():
        return False
    for k in want:
        if k != "queries":
            if want[k] != got[k]:
                return False
            continue
        if len(want[k]) != len(got[k]):
            return False
        for qw, qg in zip(want[k], got[k]):
            if qw.keys() != qg.keys():
                return False
            for f in qw:
                ok = close(qw[f], qg[f]) if f == "aggregates" else qw[f] == qg[f]
                if not ok:
                    return False
    return True


def main(corpus, copy, mode=None, reference=None, only=None, shard=(0, 1)):
    view = {"--copy": copy_view, "--consolidated": consolidated_view,
            "--arrow": arrow_view}.get(mode, without_sizes)
    failed = 0
    cases = [c for c in expect.find_cases(copy)
             if only is None or os.path.relpath(c, copy) == only][shard[0]::shard[1]]
    for case_dir in cases:
        rel = os.path.relpath(case_dir, copy)
        with open(os.path.join(corpus, rel, "expected.json")) as f:
            source = json.load(f)
        if mode == "--arrow":
            covered, evolved = fully_written(source), several_schemas(source)
            view = lambda doc: arrow_view(doc, covered, evolved)  # noqa: E731
        elif mode == "--copy":
            stale = stale_order(source)
            view = lambda doc: copy_view(doc, stale)  # noqa: E731
        want = view(source)
        if mode in ("--consolidated", "--arrow"):
            # The copy lists the queries its consolidation left answerable
            # (dense merges keep no timestamps): compare those.
            with open(os.path.join(case_dir, "expected.json")) as f:
                kept = {q.get("name") for q in json.load(f).get("queries", [])}
            want["queries"] = [q for q in want.get("queries", []) if q.get("name") in kept]
        ref_case = os.path.join(reference, rel) if reference else None
        has_ref = bool(ref_case and os.path.isdir(ref_case))
        if has_ref:
            # Compare with what TileDB reports for its own bytes instead,
            # its merged fragments' shape included.
            try:
                expect.complete_case(ref_case)
                with open(os.path.join(ref_case, "expected.json")) as f:
                    raw = json.load(f)
                want = view(raw)
                want["fragments"] = fragment_shapes(raw)
            except Exception as e:
                failed += 1
                print("FAIL %s: TileDB could not read its own reference: %s" % (rel, e))
                continue
        try:
            expect.complete_case(case_dir)
            with open(os.path.join(case_dir, "expected.json")) as f:
                raw = json.load(f)
            got = view(raw)
            if has_ref:
                got["fragments"] = fragment_shapes(raw)
            elif mode == "--consolidated":
                # Without TileDB's own merge to compare with: a merge stores the
                # values it read, quantized, and its tile metadata holds those
                # (rand_22093's float32 under FLOAT_SCALE).
                lossy_aggregates_dropped(got)
                lossy_aggregates_dropped(want)
        except Exception as e:  # report every broken case, then fail
            failed += 1
            print("FAIL %s: TileDB could not read tdb's bytes: %s: %s" % (rel, type(e).__name__, e))
            continue
        if not same(want, got):
            failed += 1
            keys = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
            detail = ""
            if "queries" in keys:
                bad = [qw.get("name") for qw, qg in zip(want["queries"], got["queries"]) if qw != qg]
                detail = " (queries %s)" % ", ".join(map(str, bad[:5]))
            print("FAIL %s: TileDB reports other %s%s" % (rel, ", ".join(keys), detail))
        else:
            print("ok   %s" % rel)
    label = {"--copy": " (copies)", "--consolidated": " (consolidated)",
             # The Arrow pass's copies and the insert pass's: named by their directory.
             "--arrow": " (%s: cells)" % os.path.basename(os.path.normpath(copy))}.get(mode, "")
    print("interop%s: %d cases, %d failed" % (label, len(cases), failed))
    return 1 if failed or not cases else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    only = None
    if "--only" in args:
        i = args.index("--only")
        only = args[i + 1] if i + 1 < len(args) else None
        args = args[:i] + args[i + 2:]
    shard = (0, 1)
    if "--shard" in args:
        i = args.index("--shard")
        try:
            shard = tuple(int(n) for n in args[i + 1].split("/"))
            assert len(shard) == 2 and 0 <= shard[0] < shard[1]
        except (IndexError, ValueError, AssertionError):
            print(__doc__, file=sys.stderr)
            sys.exit(2)
        args = args[:i] + args[i + 2:]
    mode = args[0] if args and args[0] in ("--copy", "--consolidated", "--arrow") else None
    if mode:
        args = args[1:]
    if len(args) not in (2, 3) or ("--only" in sys.argv and only is None):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*args[:2], mode, *args[2:], only=only, shard=shard))
