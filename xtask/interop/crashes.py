#!/usr/bin/env python3
"""Which of a case's queries kill TileDB: each runs in a child process of its own.

Usage: <venv-0.36.1>/bin/python xtask/interop/crashes.py CASE...

Each CASE is a case directory (FORMAT.md: `array/` and `expected.json`, whose encryption
key opens the array). Prints one line per case: "CRASH CASE: NAME..." naming the queries
whose child died by a signal, or "ok CASE". The consolidation pass asks this of a copy
TileDB crashed reading and of TileDB's own consolidation of the same case: queries that
kill TileDB over both are its bug (TILEDB notes in docs/fixtures.md), not tdb's.
"""
import json
import os
import sys

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


def main(cases):
    for case in cases:
        with open(os.path.join(case, "expected.json")) as f:
            exp = json.load(f)
        names = [str(q.get("name")) for q in exp.get("queries", []) if killed(case, exp, q)]
        print("CRASH %s: %s" % (case, " ".join(names)) if names else "ok %s" % case)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
