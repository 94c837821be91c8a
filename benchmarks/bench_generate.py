"""Benchmark of the generate stage (prints figures; asserts nothing about time).

1. 100 type-1 clusterings (k-means, k in [2, 10], rate 0.5) of the 120,000-record KDD subset of
   Lourenço et al. 2015 Sect. 7.3, run (a) as a plain sequential scikit-learn loop in one process and (b)
   through the Dask graph on a 2-worker LocalCluster, with the same seeds; both times, their ratio,
   and whether the labels are identical.
2. Peak memory (VmHWM of a fresh process) of ingesting the whole 494,021-record file.

Usage: python benchmarks/bench_generate.py [--kdd PATH] [--n-clusterings 100]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ensemble_dask.io.store import RunStore
from ensemble_dask.partitions.clusterers import plan_ensemble, run_clustering, subsample_of
from ensemble_dask.runtime.clients import dask_client
from ensemble_dask.stages.generate import generate
from ensemble_dask.stages.ingest import ingest

DEFAULT_KDD = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "kddcup99" / "kddcup.data_10_percent.gz"
)

INGEST_SCRIPT = """
import sys, time
from ensemble_dask.stages.ingest import ingest
from ensemble_dask.io.store import RunStore
t0 = time.perf_counter()
info = ingest(RunStore(sys.argv[2]), sys.argv[1], schema="kdd99")
secs = time.perf_counter() - t0
hwm = [ln for ln in open("/proc/self/status") if ln.startswith("VmHWM")][0].split()[1]
print(info["n"], info["d"], secs, hwm)
"""

BASELINE_SCRIPT = """
import sys
import pandas as pd
frame = pd.read_csv(sys.argv[1], header=None)
hwm = [ln for ln in open("/proc/self/status") if ln.startswith("VmHWM")][0].split()[1]
print(len(frame), hwm)
"""


def _warm_up():
    import sklearn.cluster  # noqa: F401
    import threadpoolctl

    threadpoolctl.threadpool_info()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kdd", default=str(DEFAULT_KDD))
    ap.add_argument("--n-clusterings", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench_generate_"))
    store = RunStore(tmp / "run.zarr")
    t0 = time.perf_counter()
    ingest(
        store,
        args.kdd,
        schema="kdd99",
        classes=["smurf", "neptune", "normal"],
        subset=120_000,
        seed=args.seed,
    )
    print(f"ingest of the 120,000-record subset: {time.perf_counter() - t0:.2f} s, X {store['X'].shape}")
    x = store["X"][:]
    params = dict(
        n_clusterings=args.n_clusterings, ensemble="type1", k_min=2, k_max=10, rate=0.5, seed=args.seed
    )

    # (a) plain sequential scikit-learn loop, one process (each clustering single-threaded, as in (b))
    plans = plan_ensemble(x.shape[0], **params)
    t0 = time.perf_counter()
    seq = np.full((x.shape[0], len(plans)), -1, dtype=np.int32)
    for spec in plans:
        idx = subsample_of(spec, x.shape[0])
        seq[idx, spec["index"]] = run_clustering(x[idx], spec)
    t_seq = time.perf_counter() - t0

    # (b) the Dask graph on a 2-worker LocalCluster (one thread each), writing to the store
    with dask_client(n_workers=2, threads_per_worker=1) as client:
        client.run(_warm_up)  # workers import scikit-learn before timing, as this process has
        t0 = time.perf_counter()
        generate(store, client, **params)
        t_dask = time.perf_counter() - t0
    lab = store["labels"][:]

    print(f"{len(plans)} type-1 clusterings (k in [2, 10], rate 0.5) of n = {x.shape[0]}:")
    print(f"  sequential scikit-learn loop : {t_seq:8.2f} s")
    print(f"  Dask graph, 2-worker cluster : {t_dask:8.2f} s")
    print(f"  speed-up (sequential / Dask) : {t_seq / t_dask:8.2f}x")
    print(f"  labels identical             : {bool(np.array_equal(seq, lab))}")
    print(f"  absent entries               : {(lab == -1).mean():.3f}")

    out = subprocess.run(
        [sys.executable, "-c", INGEST_SCRIPT, args.kdd, str(tmp / "full.zarr")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    base = subprocess.run(
        [sys.executable, "-c", BASELINE_SCRIPT, args.kdd], capture_output=True, text=True, check=True
    ).stdout.split()
    print(f"ingest of the whole file (n = {out[0]}, d = {out[1]}): {float(out[2]):.2f} s")
    print(f"  peak memory (VmHWM) of the ingest process       : {int(out[3]) / 1024:8.0f} MiB")
    print(f"  for comparison, pandas.read_csv of the whole file: {int(base[1]) / 1024:8.0f} MiB")


if __name__ == "__main__":
    main()
