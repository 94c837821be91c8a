"""Small helpers of the deploy scripts (the standard library, PyYAML, distributed and s3fs).

python _helpers.py storage-options            the S3 settings of the AWS_* variables as JSON
python _helpers.py free-port                  print a free TCP port on 127.0.0.1
python _helpers.py wait-port HOST PORT SECS   wait until something listens there
python _helpers.py make-buckets NAME...       create the buckets (S3 settings from AWS_* variables)
python _helpers.py put LOCAL s3://B/KEY       upload a file
python _helpers.py synthetic-kdd N OUT        write synthetic:kdd99?n=N as a headerless .csv.gz
                                              in the layout of the KDD Cup 99 file
python _helpers.py wait-workers SCHED N SECS  wait for N workers of the scheduler SCHED (an
                                              address or a --scheduler-file) and check scheduler,
                                              worker and client versions agree; print them
python _helpers.py federated-workflow BASE OUT CERTS STORE NAME=ADDRESS...
                                              the coordinator's workflow: BASE with the sites'
                                              names and addresses, its certificates and store
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(host, port, secs):
    deadline = time.monotonic() + float(secs)
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=0.5):
                return 0
        except OSError:
            time.sleep(0.2)
    print(f"nothing listens on {host}:{port} after {secs} s", file=sys.stderr)
    return 1


def _s3():
    import s3fs

    # key, secret and endpoint come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL
    return s3fs.S3FileSystem()


def make_buckets(*names):
    fs = _s3()
    for name in names:
        if not fs.exists(name):
            fs.mkdir(name)
    return 0


def put(local, url):
    _s3().put(local, url)
    return 0


def synthetic_kdd(n, out):
    from ensemble_dask.io.datasets import iter_synthetic_chunks

    with open(out, "wb") as f:
        for _start, frame in iter_synthetic_chunks("kdd99", n=int(n)):
            frame.to_csv(f, header=False, index=False, compression={"method": "gzip", "mtime": 0})
    return 0


def wait_workers(scheduler, n, secs):
    from distributed import Client

    deadline = time.monotonic() + float(secs)
    if "://" in scheduler:
        where = {"address": scheduler}
    else:
        where = {"scheduler_file": scheduler}
        while not os.path.exists(scheduler):
            if time.monotonic() > deadline:
                print(f"no scheduler file {scheduler} after {secs} s", file=sys.stderr)
                return 1
            time.sleep(0.2)
    with Client(**where, timeout=f"{secs}s") as client:
        if int(n) > 0:
            client.wait_for_workers(int(n), timeout=float(secs))
        versions = client.get_versions(check=True)  # raises if scheduler/worker/client disagree
        info = client.scheduler_info()
    packages = versions["scheduler"]["packages"]
    print(
        f"cluster at {info['address']}: {len(info['workers'])} workers; "
        f"dask {packages['dask']}, distributed {packages['distributed']} on scheduler, workers and client"
    )
    return 0


def federated_workflow(base, out, certs, store, *sites):
    """The coordinator's workflow: ``base`` (a workflow YAML) with ``federated.sites`` set to each site's
    name and address (``NAME=https://HOST:PORT``, nothing else of the site's), ``federated.certs`` to the
    coordinator's TLS files and ``store`` to the coordinator's run store; not a demo."""
    import yaml

    with open(base) as f:
        spec = yaml.safe_load(f)
    spec["store"] = store
    fed = spec["federated"]
    fed.update(demo=False, certs=certs)
    fed.pop("demo_min_sites", None)
    fed["sites"] = [dict(zip(("name", "address"), s.split("=", 1), strict=True)) for s in sites]
    with open(out, "w") as f:
        yaml.safe_dump(spec, f, sort_keys=False)
    return 0


def storage_options():
    """fsspec options for --storage-options, from the variables s3fs itself would read."""
    opts = {}
    if os.environ.get("AWS_ACCESS_KEY_ID"):
        opts["key"] = os.environ["AWS_ACCESS_KEY_ID"]
        opts["secret"] = os.environ.get("AWS_SECRET_ACCESS_KEY", "")
    client = {}
    if os.environ.get("AWS_ENDPOINT_URL"):
        client["endpoint_url"] = os.environ["AWS_ENDPOINT_URL"]
    if os.environ.get("AWS_DEFAULT_REGION"):
        client["region_name"] = os.environ["AWS_DEFAULT_REGION"]
    if client:
        opts["client_kwargs"] = client
    return opts


def main(argv):
    cmd, *args = argv
    if cmd == "free-port":
        print(free_port())
        return 0
    if cmd == "storage-options":
        print(json.dumps(storage_options()))
        return 0
    funcs = {
        "wait-port": wait_port,
        "make-buckets": make_buckets,
        "put": put,
        "synthetic-kdd": synthetic_kdd,
        "wait-workers": wait_workers,
        "federated-workflow": federated_workflow,
    }
    return funcs[cmd](*args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
