"""A consensus command's fixed costs on small data, against the imports every command pays; prints.

Issue 60 (item 4) asks that ``ensemble-dask consensus`` on a 1,000-row store cost at most twice the import
line ``python -c "import numpy, zarr, dask.array, numba"``. Both are measured here side by side in one run,
each a fresh process of this interpreter (as a user waits for them: the interpreter's start and the imports
included), interleaved, one warm-up round left out (numba's cache filled), and the medians compared:

    python -c "import numpy, zarr, dask.array, numba"
    python -m ensemble_dask consensus METHOD --store S --n-clusters K --seed R     # a fit each time (seed R)

The store is ``make_blobs(n, centers=K, n_features=5, random_state=0)`` saved to ``X.npy`` and its labels to
``y.npy``, ``ingest X.npy --labels y.npy`` (so that each result is scored, as a user's with reference labels),
``generate --n-clusters K`` (20 clusterings) and ``coassoc --n-clusters K``, built once per run.

    python benchmarks/cli_overhead.py [--n 1000] [--K 4] [--repeat 7] [--methods graph,pcc-kl,kcc]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _proc import load_average  # noqa: E402

IMPORT_LINE = "import numpy, zarr, dask.array, numba"


def seconds(cmd):
    """Wall seconds of ``cmd`` in a fresh process (its output kept from the terminal)."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    took = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"{' '.join(map(str, cmd))}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    return took


def cli(*args):
    return [sys.executable, "-m", "ensemble_dask", *map(str, args), "-q"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--K", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=7, help="measured rounds (after one warm-up round)")
    ap.add_argument("--methods", default="graph", help="comma-separated consensus methods")
    args = ap.parse_args(argv)
    from sklearn.datasets import make_blobs

    methods = args.methods.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "s.zarr"
        X, y = make_blobs(args.n, centers=args.K, n_features=5, random_state=0)
        np.save(Path(tmp) / "X.npy", X)
        np.save(Path(tmp) / "y.npy", y)
        for step in (
            ("ingest", Path(tmp) / "X.npy", "--labels", Path(tmp) / "y.npy"),
            ("generate", "-N", 20, "--n-clusters", args.K),
            ("coassoc", "--n-clusters", args.K),
        ):
            seconds(cli(*step, "--store", store))
        times = {"import": [], **{m: [] for m in methods}}
        for r in range(args.repeat + 1):  # round 0: the warm-up
            got = {"import": seconds([sys.executable, "-c", IMPORT_LINE])}
            for m in methods:
                got[m] = seconds(cli("consensus", m, "--store", store, "--n-clusters", args.K, "--seed", r))
            if r:
                for key, s in got.items():
                    times[key].append(s)
    base = statistics.median(times["import"])
    print(f"# {load_average()}; n = {args.n:,}, K = {args.K}, {args.repeat} rounds, medians (min - max)")
    print(f"{'command':34s} {'seconds':>8s} {'range':>13s} {'ratio':>6s}")
    for key, ts in times.items():
        name = f'python -c "{IMPORT_LINE}"' if key == "import" else f"consensus {key}"
        med = statistics.median(ts)
        print(f"{name[:34]:34s} {med:8.2f} {min(ts):6.2f} - {max(ts):4.2f} {med / base:6.2f}")


if __name__ == "__main__":
    main()
