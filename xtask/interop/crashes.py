#!/usr/bin/env python3
"""Which of a case's queries kill TileDB: each runs in a child process of its own.

Usage: <venv-0.36.1>/bin/python xtask/interop/crashes.py [--own] CASE...

Each CASE is a case directory (FORMAT.md: `array/` and `expected.json`, whose encryption
key opens the array). Prints one line per case: "CRASH CASE: NAME..." naming the queries
whose child died by a signal, or "ok CASE". The consolidation pass asks this of a copy
TileDB crashed reading and of TileDB's own consolidation of the same case: queries that
kill TileDB over both are its bug (TILEDB notes in docs/fixtures.md), not tdb's.

With --own, each sparse CASE's cells are also written by TileDB itself, in one fragment
of the same schema (what tdb's one-fragment copies are), and the queries run there too:
"CRASH-OWN CASE: NAME..." or "ok-own CASE". TileDB's consolidation keeps every version
of a coordinate where tdb's copy keeps the newest, so a query can kill TileDB over tdb's
copy and over TileDB's own write of the same cells, but not over its consolidation
(rand_12503: two string dimensions, Hilbert cells, 36 cells in tiles of 35).
"""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import expect  # noqa: E402


def killed(case, exp, query):
    """Whether TileDB dies by a signal running `query` over the case's array."""
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        try:
            ctx = expect.make_ctx(exp.get("encryption"))
            q = {k: v for k, v in query.items() if k not in ("result",)}
            expect.complete_queries(expect.object_path(case, "array"), ctx, [q])
        except Exception:  # an error is an answer, not a crash
            pass
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status)


def own_write(case, exp, to):
    """TileDB's own one-fragment write of a sparse case's cells into a case at `to`
    (its expected.json the case's); False where it cannot be made."""
    import tiledb

    try:
        ctx = expect.make_ctx(exp.get("encryption"))
        with tiledb.open(expect.object_path(case, "array"), ctx=ctx) as a:
            schema = a.schema
            if not schema.sparse:
                return False
            cells = a.query(order="U")[:]
        array = os.path.join(to, "array")
        tiledb.Array.create(array, schema, ctx=ctx)
        dims = tuple(cells[schema.domain.dim(i).name] for i in range(schema.domain.ndim))
        attrs = {schema.attr(i).name: cells[schema.attr(i).name] for i in range(schema.nattr)}
        with tiledb.open(array, "w", ctx=ctx) as b:
            b[dims] = attrs
        with open(os.path.join(to, "expected.json"), "w") as f:
            json.dump(exp, f)
        return True
    except Exception as e:  # no copy: nothing to hold the crash to
        print("     no TileDB write of %s: %s" % (case, e), file=sys.stderr)
        return False


def written(case, exp, to):
    """`own_write` in a child process: this one never opens TileDB, whose
    contexts do not survive a fork."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os._exit(0 if own_write(case, exp, to) else 1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def crashed(case, exp):
    return [str(q.get("name")) for q in exp.get("queries", []) if killed(case, exp, q)]


def main(args):
    own = args[:1] == ["--own"]
    for case in args[1:] if own else args:
        with open(os.path.join(case, "expected.json")) as f:
            exp = json.load(f)
        names = crashed(case, exp)
        print("CRASH %s: %s" % (case, " ".join(names)) if names else "ok %s" % case)
        if own:
            to = tempfile.mkdtemp(prefix="tdb-own-")
            try:
                if written(case, exp, to):
                    names = crashed(to, exp)
                    print("CRASH-OWN %s: %s" % (case, " ".join(names)) if names else "ok-own %s" % case)
            finally:
                shutil.rmtree(to, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
