"""Seconds and peak memory of the report stage on a large run store (default 5,000,000 rows); prints.

A run store of the package's layout is written directly (no clustering is run, the contents are
seeded random data shaped like a run): ``X`` (n x 24 float32, the ingest chunking), ``y_true``
(10 classes), ``labels`` (n x N int32, -1 for the half of the points absent from each clustering,
the generate stage's chunking), a per-point pairs store (``l`` partners per point, the coassoc
stage's CSR layout and chunks) and three consensus results (``Y``, ``labels``, ``uncertainty`` of
K = 10 clusters, the consensus stage's chunking), with stage records that make them current.

Then, each in a fresh child process (so that its peak RSS, VmHWM, is the report's alone):

* ``report_page(store)``: the page and its figures, from a seeded sample of the store;
* ``base_partition_scores(store)``: the base partitions' mean H/ARI/NMI over all n that
  ``write_report`` puts into metrics.json (for comparison: it reads all of ``labels``).

Usage: ``python benchmarks/bench_report.py [--n 5000000] [--clusterings 100] [--l 10] [--dir DIR]``.
The store is kept in ``--dir`` (default a temporary directory, removed at the end) and reused when
it already holds a store of the same shape.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import zarr

from ensemble_dask.io.store import RunStore
from ensemble_dask.stages.generate import label_chunks

CHILD = r"""
import json, sys, time
from ensemble_dask.io.store import RunStore
store = RunStore(sys.argv[1], mode="r+")
t0 = time.perf_counter()
c0 = time.process_time()
if sys.argv[2] == "report":
    from ensemble_dask.stages.report_page import report_page
    out = report_page(store)
else:
    from ensemble_dask.stages.generate import base_partition_scores
    out = base_partition_scores(store)["H"]["mean"]
seconds = time.perf_counter() - t0
cpu = time.process_time() - c0
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"seconds": seconds, "cpu": cpu, "peak_rss_mb": int(hwm) / 1024, "out": str(out)}))
"""


def build(url, n, n_clust, l, k=10, n_classes=10, d=24, seed=0):
    rng = np.random.default_rng(seed)
    store = RunStore(url)
    g = store.group
    block = 1 << 20
    x_rows = max(1, min(n, 2**22 // d))
    X = g.create_array("X", shape=(n, d), chunks=(x_rows, d), dtype="float32", overwrite=True)
    X.attrs["summary"] = {"n": n, "d": d, "feature_names": [f"f{j}" for j in range(d)]}
    y = g.create_array("y_true", shape=(n,), chunks=(x_rows,), dtype="int32", overwrite=True)
    lab = g.create_array(
        "labels",
        shape=(n, n_clust),
        chunks=label_chunks(n, n_clust),
        dtype="int32",
        fill_value=-1,
        overwrite=True,
    )
    ks = rng.integers(2, 21, n_clust)
    lab.attrs["partitions"] = [
        {"index": u, "algorithm": "kmeans", "k": int(ks[u]), "rate": 0.5, "n_clusters_found": int(ks[u])}
        for u in range(n_clust)
    ]
    cons = g.require_group("consensus")
    methods = {"pcc-kl": "pcc", "pcc-l2": "pcc", "bce": "bce"}
    outs = {}
    y_rows = max(1, min(n, 2**22 // k))
    for name in methods:
        grp = cons.require_group(name)
        outs[name] = (
            grp.create_array("Y", shape=(n, k), chunks=(y_rows, k), dtype="float32", overwrite=True),
            grp.create_array("labels", shape=(n,), chunks=(y_rows,), dtype="int32", overwrite=True),
            grp.create_array("uncertainty", shape=(n,), chunks=(y_rows,), dtype="float32", overwrite=True),
        )
        grp.attrs.update(
            {
                "method": methods[name],
                "params": {"n_clusters": k},
                "n_iter": 100,
                "objective_trace": np.cumsum(rng.random(100))[::-1].tolist(),
                "converged": True,
                "metrics": {"effective_k": k, "seconds": 1.0},
            }
        )
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        m = r1 - r0
        yt = rng.integers(0, n_classes, m).astype(np.int32)
        y[r0:r1] = yt
        X[r0:r1] = (rng.standard_normal((m, d)) + yt[:, None] * 0.5).astype(np.float32)
        cols = np.empty((m, n_clust), dtype=np.int32)
        for u in range(n_clust):
            col = np.where(rng.random(m) < 0.9, yt % ks[u], rng.integers(0, ks[u], m))
            col[rng.random(m) < 0.5] = -1
            cols[:, u] = col
        lab[r0:r1] = cols
        for Ya, La, Ua in outs.values():
            Y = rng.dirichlet(np.full(k, 0.3), m).astype(np.float32)
            Y[np.arange(m), yt % k] += 2.0
            Y /= Y.sum(axis=1, keepdims=True)
            Ya[r0:r1] = Y
            La[r0:r1] = Y.argmax(axis=1).astype(np.int32)
            Ua[r0:r1] = (-(Y * np.log(np.maximum(Y, 1e-12))).sum(axis=1) / np.log(k)).astype(np.float32)
    # the pairs store: 2 l entries per row (symmetric CSR), chunks as the coassoc stage writes them
    pg = g.require_group("pairs")
    nnz = n * 2 * l
    indptr = pg.create_array("indptr", shape=(n + 1,), chunks=(1 << 16,), dtype="int64", overwrite=True)
    arrs = {
        name: pg.create_array(name, shape=(nnz,), chunks=(1 << 20,), dtype=dt, overwrite=True)
        for name, dt in (("indices", "int64"), ("co", "int32"), ("both", "int32"))
    }
    indptr[:] = np.arange(n + 1, dtype=np.int64) * 2 * l
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        e0, e1 = r0 * 2 * l, r1 * 2 * l
        both = rng.integers(1, n_clust // 4 + 2, e1 - e0).astype(np.int32)
        arrs["indices"][e0:e1] = np.sort(rng.integers(0, n, (r1 - r0, 2 * l)), axis=1).ravel()
        arrs["both"][e0:e1] = both
        arrs["co"][e0:e1] = (rng.random(e1 - e0) * (both + 1)).astype(np.int32)
    pg.attrs.update(
        {
            "complete": True,
            "strategy": "per-point",
            "params": {"l": l},
            "n": n,
            "nnz": nnz,
            "n_pairs": nnz // 2,
            "n_clusterings": n_clust,
            "format": "symmetric-csr",
        }
    )
    rec = {"complete": True, "seconds": 1.0, "finished": "2026-01-01T00:00:00+00:00", "params": {}}
    stages = {
        "ingest": {**rec, "hash": "i", "inputs": [], "params": {"seed": seed}},
        "generate": {**rec, "hash": "g", "inputs": ["i"]},
        "coassoc": {**rec, "hash": "c", "inputs": ["g"]},
    }
    for name, method in methods.items():
        stages[f"consensus/{name}"] = {
            **rec,
            "hash": name,
            "params": {"method": method},
            "inputs": ["c"] if method == "pcc" else ["g"],
        }
    for name, record in stages.items():
        store._set_record(name, record)
    g.attrs["bench_shape"] = [n, n_clust, l, list(label_chunks(n, n_clust))]
    return store


def child(url, what):
    out = subprocess.run(
        [sys.executable, "-c", CHILD, url, what], capture_output=True, text=True, check=False
    )
    if out.returncode:
        raise SystemExit(out.stderr)
    import json

    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=5_000_000)
    ap.add_argument("--clusterings", type=int, default=100)
    ap.add_argument("--l", type=int, default=10)
    ap.add_argument("--dir")
    ap.add_argument("--skip-base", action="store_true", help="do not time base_partition_scores")
    args = ap.parse_args()
    tmp = args.dir or tempfile.mkdtemp(prefix="bench-report-")
    url = os.path.join(tmp, f"report-{args.n}.zarr")
    shape = [args.n, args.clusterings, args.l, list(label_chunks(args.n, args.clusterings))]
    have = zarr.open_group(url, mode="r").attrs.get("bench_shape") if os.path.isdir(url) else None
    if have != shape:
        t0 = time.perf_counter()
        build(url, args.n, args.clusterings, args.l)
        print(
            f"built {url} (n={args.n:,}, N={args.clusterings}, l={args.l}) "
            f"in {time.perf_counter() - t0:.0f} s"
        )
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    r = child(url, "report")
    print(
        f"report_page: {r['seconds']:.1f} s ({r['cpu']:.1f} s CPU), "
        f"peak RSS {r['peak_rss_mb']:.0f} MB -> {r['out']}"
    )
    if not args.skip_base:
        r = child(url, "base")
        print(
            f"base_partition_scores (metrics.json, all n): {r['seconds']:.1f} s ({r['cpu']:.1f} s CPU), "
            f"peak RSS {r['peak_rss_mb']:.0f} MB"
        )
    if not args.dir:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
