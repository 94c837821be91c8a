"""A workflow's pair method with its label start computed while the pairs are built, and after them; prints.

What ``ensemble-dask run`` does for a pair method with ``init: auto`` (``pipeline.label_starts_alongside``):
the start (HBGF on the labels) on a thread of its own during the coassoc stage. Against it, the same workflow
with the start after the pairs, as before (``AHEAD_LABELS_BYTES`` set to 0 in that process). The labels are
``benchmarks/peers.py``'s shared ensemble (``--labels sub50``: each of 20 k-means labelings on its own random
half of the points), brought with ``import-labels`` into a store that already holds the blobs' X; each round
runs the two in turn, each on a fresh copy of that store in a fresh process (so the imports, the kernels'
loading and the memory new to the process are counted as a user waits for them). Prints per run the
workflow's seconds, the coassoc stage's (its record) and the consensus fit's (its metrics), and the consensus
objective (the same both ways).

    python benchmarks/starts_alongside.py [--n 500000] [--K 8] [--labels sub50] [--method pcc-kl]
        [--rounds 3] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from _proc import load_average  # noqa: E402
from peers import blobs, ensemble  # noqa: E402

CHILD = """
import json, sys, time
from ensemble_dask.io.store import RunStore
from ensemble_dask.pipeline import run_workflow
from ensemble_dask.stages import consensus as stage
spec = json.loads(sys.argv[1])
if sys.argv[2] == "after":
    stage.AHEAD_LABELS_BYTES = 0  # the start after the pairs, as before
t0 = time.perf_counter()
run_workflow(spec, report=False)
seconds = time.perf_counter() - t0
store = RunStore(spec["store"])
name = next(iter(spec["consensus"]))
metrics = store[f"consensus/{name}"].attrs["metrics"]
coassoc = store.record("coassoc")["seconds"]
print(json.dumps({"run": seconds, "coassoc": coassoc, "consensus": metrics["seconds"],
                  "objective": metrics.get("objective")}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=500_000)
    ap.add_argument("--K", type=int, default=8)
    ap.add_argument("--labels", choices=["complete", "sub50"], default="sub50")
    ap.add_argument("--method", default="pcc-kl")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ensemble_dask_peers")
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    lab_path, _ = ensemble(args.n, args.K, args.K, 0.5 if args.labels == "sub50" else 1.0, 0, args.cache)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        np.save(tmp / "X.npy", blobs(args.n, args.K)[0])
        base = tmp / "base.zarr"
        for cmd in (["ingest", str(tmp / "X.npy")], ["import-labels", str(lab_path)]):
            subprocess.run(["ensemble-dask", *cmd, "--store", str(base)], check=True, capture_output=True)
        spec = {"data": {"url": str(tmp / "X.npy")}, "store": str(tmp / "run.zarr"),
                "consensus": {args.method: {"n_clusters": args.K}}}  # fmt: skip
        print(f"# n = {args.n:,}, K = {args.K}, {args.labels} labels, {args.method}; {load_average()}")
        rows = {"alongside": [], "after": []}
        for r in range(args.rounds):
            for mode in rows:
                shutil.rmtree(tmp / "run.zarr", ignore_errors=True)
                shutil.copytree(base, tmp / "run.zarr")
                cmd = [sys.executable, "-c", CHILD, json.dumps(spec), mode]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True)
                res = json.loads(out.stdout.strip().splitlines()[-1])
                rows[mode].append(res)
                print(f"  round {r}, start {mode:9s}: run {res['run']:.2f} s, coassoc {res['coassoc']:.2f} "
                      f"s, consensus {res['consensus']:.2f} s, objective {res['objective']!r}")  # fmt: skip
        print(f"# medians ({load_average()} at the end)")
        for mode, res in rows.items():
            med = {k: float(np.median([x[k] for x in res])) for k in ("run", "coassoc", "consensus")}
            both = float(np.median([x["coassoc"] + x["consensus"] for x in res]))
            print(f"  start {mode:9s}: run {med['run']:.2f} s, coassoc {med['coassoc']:.2f} s, consensus "
                  f"{med['consensus']:.2f} s, the two stages {both:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
