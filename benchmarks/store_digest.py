"""What the digest of each stage's stored bytes costs beside the stage (issue 61: at most 10%).

Runs one workflow into a fresh local store (synthetic blobs, so ingest is as fast as it gets and the ratio
is at its worst), then, per complete stage, times :meth:`RunStore.bytes_digest` over the arrays its record
describes (the work each stage does when it seals its output, and ``verify`` per stage) against the
stage's own seconds from its record, which leave the digest out (a consensus stage's record times its
writing; its fit's seconds, from its metrics, are added). Printed: MB stored, stage seconds, digest
seconds (median of ``--rounds``), their ratio.

    python benchmarks/store_digest.py [--n 500000] [--d 40] [--centers 23] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500_000)
    ap.add_argument("--d", type=int, default=40)
    ap.add_argument("--centers", type=int, default=23)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--methods", default="pcc-kl,graph")
    args = ap.parse_args()

    from ensemble_dask.io.store import RunStore
    from ensemble_dask.pipeline import run_workflow

    with tempfile.TemporaryDirectory() as tmp:
        url = str(Path(tmp) / "run.zarr")
        k = args.centers
        spec = {
            "seed": 0,
            "store": url,
            "data": {"url": f"synthetic:blobs?n={args.n}&d={args.d}&centers={k}&seed=0"},
            "consensus": {m: {"n_clusters": k} for m in args.methods.split(",")},
        }
        t = time.perf_counter()
        run_workflow(spec, progress=False)
        took = time.perf_counter() - t
        print(f"{args.n:,} x {args.d}, K = {k}, methods {args.methods}: workflow {took:.1f} s")
        store = RunStore(url)
        fs, root = store._fs()
        print(f"{'stage':<22}{'MB stored':>10}{'stage s':>10}{'digest s':>10}{'ratio':>8}")
        for name, rec in store.records().items():
            paths = list(rec.get("content") or {})
            if not rec.get("complete") or not paths:
                continue
            mb = sum(fs.du(f"{root}/{p}") for p in paths) / 1e6
            times = []
            for _ in range(args.rounds):
                t = time.perf_counter()
                for p in paths:
                    store.bytes_digest(p)
                times.append(time.perf_counter() - t)
            digest = statistics.median(times)
            seconds = rec["seconds"]
            if name.startswith("consensus/"):
                seconds += store[name].attrs["metrics"]["seconds"]
            print(f"{name:<22}{mb:>10.1f}{seconds:>10.2f}{digest:>10.3f}{digest / seconds:>8.3f}")


if __name__ == "__main__":
    main()
