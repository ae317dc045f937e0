"""Requests a cluster query makes against S3, by process count: the measured
figures of docs/scaling.md.

Starts moto on loopback, has TileDB write a sparse array of FRAGMENTS
fragments into it, then runs queries through `tdb sql` alone and through
clusters of 1 and 2 executors (this build's `tdb`), counting the requests
moto logs for each query. Run with the fixture venv's Python (tiledb-py):

    target/fixtures/venv-0.36.1/bin/python xtask/cluster/requests.py \
        [--tdb target/debug/tdb] [--fragments 20] [--cells 10000]
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import tiledb

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port):
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"nothing listens on {port}")


def counts(log):
    """Requests in moto's access log, by kind."""
    kinds = {}
    for line in open(log):
        # Werkzeug colours its log lines.
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        m = re.search(r'"(GET|PUT|HEAD|POST|DELETE) (\S+)', line)
        if not m:
            continue
        method, path = m.groups()
        kind = "LIST" if method == "GET" and ("list-type" in path or "prefix=" in path) else method
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tdb", default=os.path.join(ROOT, "target/debug/tdb"))
    ap.add_argument("--fragments", type=int, default=20)
    ap.add_argument("--cells", type=int, default=10000)
    ap.add_argument("--executors", type=int, nargs="*", default=[1, 2])
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    port = free_port()
    log = os.path.join(tmp, "moto.log")
    moto = subprocess.Popen(
        [os.path.join(ROOT, "target/servers/venv/bin/moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=open(log, "w"), stderr=subprocess.STDOUT)
    procs = [moto]
    try:
        wait_for(port)
        endpoint = f"http://127.0.0.1:{port}"
        settings = {"aws_access_key_id": "test", "aws_secret_access_key": "test",
                    "aws_region": "us-east-1", "aws_endpoint_url": endpoint, "aws_allow_http": "true"}
        ctx = tiledb.Ctx({"vfs.s3.endpoint_override": f"127.0.0.1:{port}", "vfs.s3.scheme": "http",
                          "vfs.s3.use_virtual_addressing": "false", "vfs.s3.aws_access_key_id": "test",
                          "vfs.s3.aws_secret_access_key": "test", "vfs.s3.region": "us-east-1"})
        tiledb.VFS(ctx=ctx).create_bucket("s3://figures")
        uri = "s3://figures/array"
        dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 999_999), tile=10_000, dtype=np.int64, ctx=ctx),
                            tiledb.Dim("y", domain=(0, 999), tile=100, dtype=np.int64, ctx=ctx), ctx=ctx)
        schema = tiledb.ArraySchema(domain=dom, sparse=True, capacity=10_000,
                                    attrs=[tiledb.Attr("a", dtype=np.int64, filters=[tiledb.ZstdFilter()], ctx=ctx)], ctx=ctx)
        tiledb.Array.create(uri, schema, ctx=ctx)
        rng = np.random.default_rng(7)
        for f in range(args.fragments):
            with tiledb.open(uri, "w", timestamp=f + 1, ctx=ctx) as a:
                x = rng.choice(1_000_000, args.cells, replace=False)
                a[x, rng.integers(0, 1000, args.cells)] = {"a": x}
        options = ", ".join(f"'{k}' '{v}'" for k, v in settings.items())
        queries = {
            "count": "SELECT count(*), sum(a) FROM t",
            "range": "SELECT count(*) FROM t WHERE x < 100000",
        }
        opts = ["--table", f"t={uri}"]
        env = dict(os.environ, **{k.upper(): v for k, v in settings.items()})

        def run(sql, cluster):
            before = sum(counts(log).values())
            kinds_before = counts(log)
            cmd = [args.tdb, "sql", "--format", "csv", *opts, sql]
            if cluster:
                cmd[2:2] = ["--cluster", cluster]
            t = time.time()
            out = subprocess.run(cmd, capture_output=True, text=True, env=env)
            secs = time.time() - t
            if out.returncode:
                sys.exit(out.stderr)
            after = counts(log)
            diff = {k: v - kinds_before.get(k, 0) for k, v in after.items() if v != kinds_before.get(k, 0)}
            return diff, secs, " ".join(out.stdout.split()[1:])

        print(f"{args.fragments} fragments of {args.cells} cells, moto on loopback, {args.tdb}")
        for name, sql in queries.items():
            diff, secs, answer = run(sql, None)
            print(f"one process | {name} | {answer} | {diff} | {secs:.2f} s")
        for executors in args.executors:
            sched = subprocess.Popen([args.tdb, "cluster", "scheduler", "--bind", "127.0.0.1:0"],
                                     stdout=subprocess.PIPE, text=True, env=env)
            procs.append(sched)
            addr = sched.stdout.readline().split()[-1]
            for i in range(executors):
                work = os.path.join(tmp, f"e{executors}-{i}")
                procs.append(subprocess.Popen(
                    [args.tdb, "cluster", "executor", "--scheduler", addr, "--port", "0",
                     "--grpc-port", "0", "--work-dir", work, "--heartbeat", "1"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
            time.sleep(2)
            for name, sql in queries.items():
                for round in ("first", "again"):
                    diff, secs, answer = run(sql, addr)
                    print(f"{executors} executor(s) | {name} ({round}) | {answer} | {diff} | {secs:.2f} s")
    finally:
        for p in procs:
            p.kill()


if __name__ == "__main__":
    main()
