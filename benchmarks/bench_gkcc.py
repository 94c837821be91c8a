"""GKCC on all of KDD Cup 99 10% (494,021 records) with the kdd99-full workflow's labels; prints.

The labels are a run store's (``--store URL``: e.g. ``runs/kdd99-full.zarr`` after
``ensemble-dask run workflows/kdd99-full.yaml``), or are made here as the workflow makes them, in a
temporary store: ``ingest(kdd99)`` of the whole file, then ``generate`` of 100 type-1 k-means
clusterings (k in 2..10 on 50% subsamples, seed 0) on a 2-worker LocalCluster (about 40 s).

Each fit runs in a fresh child process (one thread per numeric pool) that loads the labels, resets
its peak RSS (VmHWM) and fits ``GKCC(K, random_state=0, compare=None)`` (Algorithm 1 alone); it reports
wall and CPU seconds, the peak RSS of the fit above the loaded labels, and H and ARI against the 23
classes. Variants:

* ``shared``: the default; a step's 59 candidate k-means run together, one pass over the rows per
  Lloyd iteration for all of them, candidates in the same state counted once;
* ``n_jobs=2``: the same with each pass on two threads (each runs half of the pass's
  candidates, after those in the same state are merged; the same result);
* ``one by one`` (``--old``): each candidate its own Lloyd run (``run_candidate``, the former
  path, through ``fit``'s mapper); its labels must equal the shared path's, bit for bit.

The machine may be shared: the load average is printed, and CPU seconds beside wall seconds.

Usage: python benchmarks/bench_gkcc.py [--store URL] [--K 3] [--rows N] [--old] [--no-threads]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helpers

from _proc import ONE_THREAD, load_average, reset_peak, status_mib  # noqa: E402

KDD_FILE = ROOT.parent / "shared" / "data" / "kddcup99" / "kddcup.data_10_percent.gz"


def one_by_one(func, args):
    """``fit``'s mapper running each candidate alone (``run_candidate``): the former path."""
    from ensemble_dask.consensus.kcc._gkcc import run_candidate

    out = []
    for gidx, weight, enc, prior, MT_prev, rows, max_iter, tol in args:
        res = [run_candidate(gidx, weight, enc, prior, MT_prev, r, max_iter, tol) for r in rows]
        labels = np.column_stack([r[0] for r in res]).astype(np.int32)
        out.append((labels, np.array([r[1] for r in res]), np.array([r[2] for r in res])))
    return out


def child(path, variant, K):
    from ensemble_dask.consensus.kcc import GKCC
    from ensemble_dask.metrics import ari, h_criterion

    data = np.load(path)
    labels, y = data["labels"], data["y"]
    warm = np.random.default_rng(0).integers(-1, 4, (2000, 8)).astype(labels.dtype)
    GKCC(2, n_candidates=2, random_state=0).fit(warm)  # compile outside the figures
    GKCC(2, n_candidates=2, random_state=0).fit(warm, mapper=one_by_one)
    base = status_mib("VmRSS")
    reset_peak()
    t, c = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if variant == "old":
            est = GKCC(K, random_state=0, compare=None).fit(labels, mapper=one_by_one)
        else:
            n_jobs = 2 if variant == "threads" else None
            est = GKCC(K, random_state=0, compare=None, n_jobs=n_jobs).fit(labels)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    np.save(f"{path}.{variant}.npy", est.labels_)
    out = {
        "wall": wall,
        "cpu": cpu,
        "peak_mib": status_mib("VmHWM") - base,
        "H": h_criterion(est.labels_, y),
        "ARI": ari(est.labels_, y),
        "objective": est.objective_,
        "converged": bool(est.converged_),
    }
    print("RESULT " + json.dumps(out), flush=True)


def run_child(path, variant, K):
    cmd = [sys.executable, __file__, "--child", path, "--variant", variant, "--K", str(K)]
    res = subprocess.run(cmd, env={**os.environ, **ONE_THREAD}, capture_output=True, text=True, cwd=ROOT)
    if res.returncode:
        sys.stderr.write(res.stderr)
        raise SystemExit(f"child {variant} failed with code {res.returncode}")
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def kdd_labels(store_url, tmp):
    from ensemble_dask.io.store import RunStore

    if store_url:
        store = RunStore(store_url)
        return store["labels"][:], store["y_true"][:], f"labels of {store_url}"
    from ensemble_dask.runtime.clients import dask_client
    from ensemble_dask.stages.generate import generate
    from ensemble_dask.stages.ingest import ingest

    store = RunStore(os.path.join(tmp, "run.zarr"))
    t0 = time.perf_counter()
    ingest(store, str(KDD_FILE), schema="kdd99")
    with dask_client(n_workers=2) as client:
        generate(store, client, n_clusterings=100, ensemble="type1", k_min=2, k_max=10, rate=0.5, seed=0)
    what = f"labels made here (ingest + generate, {time.perf_counter() - t0:.0f} s)"
    return store["labels"][:], store["y_true"][:], what


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", help="run store holding labels and y_true (default: make them)")
    ap.add_argument("--K", type=int, default=3)
    ap.add_argument("--rows", type=int, default=0, help="N rows drawn at random (seed 0; default: all)")
    ap.add_argument("--old", action="store_true", help="also the candidate-by-candidate path")
    ap.add_argument("--no-threads", action="store_true", help="skip the n_jobs=2 fit")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.variant, args.K)
        return
    print(load_average())
    with tempfile.TemporaryDirectory(prefix="bench_gkcc_") as tmp:
        labels, y, what = kdd_labels(args.store, tmp)
        if args.rows:  # a seeded sample of the rows (the first rows are of few classes)
            keep = np.sort(np.random.default_rng(0).choice(labels.shape[0], args.rows, replace=False))
            labels, y = labels[keep], y[keep]
        n, N = labels.shape
        print(f"{what}: {n:,} x {N}, {np.mean(labels < 0):.0%} missing; GKCC K={args.K}, seed 0")
        path = os.path.join(tmp, "labels.npz")
        np.savez(path, labels=labels, y=y)
        del labels
        variants = [("shared", "new")] + ([] if args.no_threads else [("n_jobs=2", "threads")])
        variants += [("one by one", "old")] if args.old else []
        print(
            f"{'path':>12s} {'wall s':>8s} {'cpu s':>8s} {'peak MiB':>9s} {'H':>7s} {'ARI':>7s}  same labels"
        )
        ref = None
        for name, variant in variants:
            r = run_child(path, variant, args.K)
            lab = np.load(f"{path}.{variant}.npy")
            ref = lab if ref is None else ref
            same = "-" if ref is lab else str(bool(np.array_equal(lab, ref)))
            print(
                f"{name:>12s} {r['wall']:8.1f} {r['cpu']:8.1f} {r['peak_mib']:9.0f} "
                f"{r['H']:7.4f} {r['ARI']:7.4f}  {same}",
                flush=True,
            )
    print(load_average())


if __name__ == "__main__":
    main()
