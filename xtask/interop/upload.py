#!/usr/bin/env python3
"""TileDB writes a corpus of conformance cases into an object store, file by file, through its
own VFS (its S3 client: multipart uploads for files of MULTIPART bytes or more, single puts for
the rest: a multipart upload of a small file costs four requests, not two), so tdb then reads
bytes TileDB itself put there.

Usage: <venv-0.36.1>/bin/python xtask/interop/upload.py CORPUS URI
with TDB_TILEDB_CONFIG (a JSON object) holding the settings that reach the store.
"""
import json
import os
import sys

import tiledb


MULTIPART = 64 * 1024


def main(corpus, uri):
    cfg = json.loads(os.environ.get("TDB_TILEDB_CONFIG", "{}"))
    multipart = tiledb.VFS(config=tiledb.Config(cfg))
    single = tiledb.VFS(config=tiledb.Config(dict(cfg, **{"vfs.s3.use_multipart_upload": "false"})))
    uri = uri.rstrip("/")
    n = 0
    for dirpath, dirnames, filenames in os.walk(corpus):
        dirnames.sort()
        for fn in sorted(filenames):
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, corpus).replace(os.sep, "/")
            with open(path, "rb") as src:
                data = src.read()
            vfs = multipart if len(data) >= MULTIPART else single
            with vfs.open("%s/%s" % (uri, rel), "wb") as dst:
                dst.write(data)
            n += 1
            if n % 1000 == 0:  # large corpora take minutes: show it moves
                print("upload: %d files so far" % n, flush=True)
    print("upload: TileDB wrote %d files under %s" % (n, uri))
    return 0 if n else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
