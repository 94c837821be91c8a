"""The CLI chain for bring-your-own partitions, timed command by command as a user runs it; prints.

What a user with a feature table and partitions of it types, each command a fresh process (so the
seconds include the interpreter's start and the imports, as the user waits for them)::

    ensemble-dask ingest X.npy --store S            # skipped with --no-ingest: import-labels creates S
    ensemble-dask import-labels labels.npy --store S
    ensemble-dask coassoc --store S                 # its defaults
    ensemble-dask consensus METHOD --store S --set n_clusters=K    # every method in --methods

The partitions are ``benchmarks/peers.py``'s shared ensemble (20 k-means labelings, k in
``[max(2, K // 2), 2 K]``, of ``make_blobs(n, centers=K, n_features=10, cluster_std=2.5,
random_state=0)``), built once and cached. Each consensus result's labels are read back from the
store and scored against the blobs (ARI); ``converged`` is what the store recorded. The chain's
total is ingest + import-labels + coassoc + the first method (``pcc-l2`` by default, the issue's
chain); the other methods' seconds are printed beside it.

    python benchmarks/cli_chain.py [--n 50000] [--K 8] [--methods pcc-l2,pcc-kl,ppc,bce,mm,kcc,gkcc,hbgf]
        [--no-ingest]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from _proc import load_average  # noqa: E402
from peers import blobs, ensemble  # noqa: E402

METHODS = "pcc-l2,pcc-kl,ppc,bce,mm,kcc,gkcc,hbgf"


def run(*args):
    """``ensemble-dask ARGS`` in a fresh process of this interpreter; its wall seconds."""
    cmd = [sys.executable, "-m", "ensemble_dask", *map(str, args)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return seconds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--K", type=int, default=8)
    ap.add_argument("--methods", default=METHODS)
    ap.add_argument("--no-ingest", action="store_true", help="import-labels creates the store (no X)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ensemble_dask_peers")
    args = ap.parse_args(argv)
    import zarr
    from sklearn.metrics import adjusted_rand_score

    args.cache.mkdir(parents=True, exist_ok=True)
    lab_path, y = ensemble(args.n, args.K, args.K, 1.0, args.seed, args.cache)
    print(f"# {load_average()}; n = {args.n:,}, K = {args.K}, labels {lab_path}")
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "chain.zarr"
        steps = []
        if not args.no_ingest:
            np.save(Path(tmp) / "X.npy", blobs(args.n, args.K)[0])
            steps.append(("ingest", run("ingest", Path(tmp) / "X.npy", "--store", store)))
        steps.append(("import-labels", run("import-labels", lab_path, "--store", store)))
        steps.append(("coassoc", run("coassoc", "--store", store)))
        rows = []
        for m in args.methods.split(","):
            seconds = run("consensus", m, "--store", store, "--set", f"n_clusters={args.K}")
            out = zarr.open_group(str(store), mode="r")[f"consensus/{m}"]
            ari = adjusted_rand_score(y, np.asarray(out["labels"][:]))
            rows.append((m, seconds, ari, out.attrs["converged"]))
    for name, s in steps:
        print(f"{name:14s} {s:6.2f} s")
    print(f"\n{'method':10s} {'seconds':>8s} {'ARI':>6s}  converged   chain total")
    before = sum(s for _, s in steps)
    for m, s, ari, conv in rows:
        print(f"{m:10s} {s:8.2f} {ari:6.3f}  {str(conv):9s}   {before + s:6.2f} s")


if __name__ == "__main__":
    main()
