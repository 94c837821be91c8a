"""Requests each command sends to an S3 server, and its seconds there against a local disk; prints.

The stage commands of a small workflow, each a fresh process as a user runs them, once with the run store on a
local disk and once in a bucket of moto's S3 server on 127.0.0.1 (``tests/_s3_server.py``, its request log
read between commands)::

    ensemble-dask ingest synthetic:kdd99?n=N --store S
    ensemble-dask generate --store S -N 6 --n-workers 1
    ensemble-dask coassoc --store S --n-workers 1
    ensemble-dask consensus METHOD --store S --set n_clusters=4     # each of --methods, then its report

The report is drawn without its figures (``DASK_ENSEMBLE_DASK__REPORT__FIGURES=False``), as in the tests.
A request to moto takes a few milliseconds, to a real object store tens of them: the seconds here are a floor.

    python benchmarks/s3_requests.py [--n 3000] [--methods pcc-l2,bce]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _proc import load_average  # noqa: E402

_REQUEST = re.compile(r'"(GET|HEAD|PUT|POST|DELETE) (\S+) HTTP')


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _requests(log, start):
    """``Counter`` of request methods in the server's log from byte ``start``; the log's new end."""
    with open(log, "rb") as fh:
        fh.seek(start)
        text = fh.read().decode(errors="replace")
        end = fh.tell()
    return collections.Counter(m.group(1) for m in _REQUEST.finditer(text)), end


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000, help="rows of the synthetic KDD table")
    parser.add_argument("--methods", default="pcc-l2,bce")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="s3-requests-"))
    port = _free_port()
    log = tmp / "s3.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "tests._s3_server", "127.0.0.1", str(port)],
            cwd=ROOT,
            stdout=out,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        opts = {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}", "region_name": "us-east-1"},
        }
        import s3fs

        s3fs.S3FileSystem(**opts).call_s3("create_bucket", Bucket="s3-requests")
        env = {**os.environ, "DASK_ENSEMBLE_DASK__REPORT__FIGURES": "False"}
        commands = [
            ["ingest", f"synthetic:kdd99?n={args.n}&seed=1"],
            ["generate", "-N", "6", "--n-workers", "1", "--no-progress"],
            ["coassoc", "--n-workers", "1", "--no-progress"],
            *[["consensus", m, "--set", "n_clusters=4"] for m in args.methods.split(",")],
        ]
        print(f"# {args.n} rows; {load_average()}")
        print(f"{'command':<24} {'local s':>8} {'S3 s':>8} {'requests':>9}  GET HEAD PUT POST DELETE")
        start = log.stat().st_size
        total = collections.Counter()
        seconds = [0.0, 0.0]
        for cmd in commands:
            row = []
            for where in ("local", "s3"):
                store = str(tmp / "run.zarr") if where == "local" else "s3://s3-requests/run.zarr"
                extra = ["--storage-options", json.dumps(opts)] if where == "s3" else []
                t0 = time.perf_counter()
                r = subprocess.run(
                    ["ensemble-dask", *cmd, "--store", store, *extra], env=env, capture_output=True, text=True
                )
                if r.returncode != 0:
                    raise SystemExit(f"{' '.join(cmd)} on {where}: {r.stderr[-2000:]}")
                row.append(time.perf_counter() - t0)
            counts, start = _requests(log, start)
            total += counts
            seconds = [seconds[0] + row[0], seconds[1] + row[1]]
            name = " ".join(cmd[:2]) if cmd[0] == "consensus" else cmd[0]
            per = " ".join(f"{counts[m]:>4}" for m in ("GET", "HEAD", "PUT", "POST", "DELETE"))
            print(f"{name:<24} {row[0]:8.2f} {row[1]:8.2f} {sum(counts.values()):9d}  {per}")
        per = " ".join(f"{total[m]:>4}" for m in ("GET", "HEAD", "PUT", "POST", "DELETE"))
        print(f"{'all':<24} {seconds[0]:8.2f} {seconds[1]:8.2f} {sum(total.values()):9d}  {per}")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
