#!/usr/bin/env python3
"""TileDB consolidates the fragments of each case's array, in place.

Usage: <venv-0.36.1>/bin/python xtask/interop/consolidate.py CONFIG CASE...

CONFIG is a JSON object of `sm.consolidation.*` settings (mode "fragments" is implied);
each CASE is a case directory (FORMAT.md: `array/` and `expected.json`, whose encryption
key opens the array). Prints one line per case: "ok CASE", "FAIL CASE: why" or, where
TileDB itself crashed (each case runs in a child process, so one crash costs one case),
"CRASH CASE: signal N". The interop pass compares the vacuum lists TileDB writes with
tdb's, to show both choose the same fragments.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import expect  # noqa: E402
import tiledb  # noqa: E402


def consolidate(config, case):
    """TileDB consolidates one case; 1 where it refused."""
    with open(os.path.join(case, "expected.json")) as f:
        exp = json.load(f)
    ctx = expect.make_ctx(exp.get("encryption"))
    # Buffers of 1 MiB, not TileDB's 50 MB: the corpus's arrays are small, and allocating
    # the default took a second a case. Buffers set how many cells a pass of the merge
    # reads, not which fragments merge nor what the merged fragment holds.
    cfg = tiledb.Config({"sm.consolidation.mode": "fragments",
                         "sm.consolidation.buffer_size": str(1 << 20)})
    # (A config given to consolidate replaces the context's: the key goes in it too.)
    enc = exp.get("encryption")
    if enc:
        cfg["sm.encryption_type"] = enc.get("type", "AES_256_GCM")
        cfg["sm.encryption_key"] = enc["key"]
    for k, v in config.items():
        cfg[k] = str(v)
    try:
        tiledb.consolidate(os.path.join(case, "array"), config=cfg, ctx=ctx)
        print("ok %s" % case)
        return 0
    except tiledb.TileDBError as e:
        print("FAIL %s: %s" % (case, e))
        return 1


def main(config, cases):
    failed = 0
    for case in cases:
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = consolidate(config, case)
            sys.stdout.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            failed += 1
            print("CRASH %s: signal %d" % (case, os.WTERMSIG(status)))
        elif os.WEXITSTATUS(status) != 0:
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(json.loads(sys.argv[1]), sys.argv[2:]))
