"""moto's S3 server (moto 5.2), cheaper per request: the interop pass on S3
makes ~60,000 requests, and moto's one process serves them a few
milliseconds each. Three costs of moto_server are left out (measured with
py-spy during that pass):

- moto_server serves every AWS service: each request first looks for its
  service among all of moto's modules (listing moto's package directory
  each time), a fifth of the server's time. Here moto's S3 application
  serves alone, as moto_server hands S3 requests to it.
- A LIST walks every key of the bucket through Python (a copy of the
  bucket's dict, then a lookup per key), a tenth of the time with the
  corpus and its copies in one bucket. Here a LIST with a prefix first
  picks the names under it (one C-level copy of the names, one
  `startswith` each) and hands moto's own `list_objects` a bucket holding
  only those, so answers (delimiters, markers, versions, delete markers)
  are moto's.
- Threads: werkzeug's threaded server starts a thread per request, and
  the threads then contend for the GIL that serializes moto anyway. Here
  one thread serves every request in turn (HTTP/1.0, a connection each,
  cheap on loopback): the S3 interop pass took 148 s instead of 200.

Run: `python -c "$(cat moto_server.py)" -H HOST -p PORT`.
"""

import argparse
import os
import sys

from moto.s3.models import FakeTableStorageBucket, S3Backend
from moto.s3.utils import _VersionedKeyStore
from moto.server import create_backend_app
from werkzeug.serving import run_simple

_list_objects = S3Backend.list_objects


class _Narrowed:
    """What `list_objects` reads of a bucket: its keys (here, some of them)."""

    def __init__(self, keys):
        self.keys = keys


def _list_under_prefix(self, bucket, prefix, delimiter, marker, max_keys):
    if prefix and not isinstance(bucket, FakeTableStorageBucket):
        # list() of a dict's keys runs in C under the GIL: a consistent
        # snapshot while other request threads put and delete.
        names = list(dict.keys(bucket.keys))
        narrowed = _VersionedKeyStore()
        for name in names:
            if name.startswith(prefix):
                versions = bucket.keys.getlist(name)
                if versions:
                    dict.__setitem__(narrowed, name, list(versions))
        bucket = _Narrowed(narrowed)
    return _list_objects(self, bucket, prefix, delimiter, marker, max_keys)


def main(argv):
    parser = argparse.ArgumentParser()
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args(argv)
    # As moto_server: moto builds some URLs from it.
    os.environ.setdefault("MOTO_PORT", str(args.port))
    S3Backend.list_objects = _list_under_prefix
    run_simple(args.host, args.port, create_backend_app("s3"), threaded=False)


if __name__ == "__main__":
    main(sys.argv[1:])
