"""A method's first fit in a fresh environment, where numba compiles its kernels, beside the same fit with
them cached; prints.

Each method fits a small ensemble (20 k-means labelings of 2,000 blob points with a fifth of the labels
missing; PCC and PPC on its cocluster pairs, from HBGF's label start as the consensus stage gives) in a new
process with an empty numba cache (``NUMBA_CACHE_DIR``), then again in a new process with that cache. Both
figures are wall-clock seconds of the whole process (imports included); the difference is what compiling
costs the first run. Also prints how many compiled signatures the fit left in the cache, and each kernel that
was compiled more than once for this one fit (each copy costs as much as the first: a call with other array
layouts or dtypes, or one that left an argument out).

``--root DIR`` runs another checkout (e.g. ``git worktree add /tmp/old HEAD~3``) in the same way, for a
comparison run by run: ``--repeat 3 --root /tmp/old`` alternates the two, fresh cache each time.

Usage: python benchmarks/first_run.py [--methods bce gkcc ...] [--repeat 1] [--root DIR]
"""

from __future__ import annotations

import argparse
import glob
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _proc import load_average  # noqa: E402

METHODS = ["bce", "gbce", "mm", "kcc", "gkcc", "hbgf", "pcc-kl", "pcc-l2", "ppc"]

FIT = """
import sys, warnings
import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
warnings.simplefilter("ignore")
name = sys.argv[1]
X, _ = make_blobs(2000, centers=4, n_features=5, random_state=0)
rng = np.random.default_rng(0)
labels = np.column_stack(
    [KMeans(int(k), n_init=1, random_state=i).fit_predict(X) for i, k in enumerate(rng.integers(4, 9, 20))]
).astype(np.int32)
labels[rng.random(labels.shape) < 0.2] = -1
from ensemble_dask.consensus import BCE, GBCE, GKCC, HBGF, KCC, MM, PCC, PPC
if name in ("pcc-kl", "pcc-l2", "ppc"):
    from ensemble_dask.coassoc import coassociation
    from ensemble_dask.consensus.starts import label_starts
    pairs = coassociation(labels, strategy="cocluster", l=10, seed=0)
    init = label_starts(labels, 4, random_state=0)
    if name == "ppc":
        est = PPC(4, init=init, random_state=0)
    else:
        est = PCC(4, divergence=name[4:], init=init, random_state=0)
    est.fit(pairs)
elif name == "gbce":
    GBCE(4, random_state=0).fit(labels, X).transform(labels, X)
else:
    est = {"bce": BCE, "mm": MM, "kcc": KCC, "gkcc": GKCC, "hbgf": HBGF}[name](4, random_state=0).fit(labels)
    if name in ("bce", "mm", "kcc"):
        est.transform(labels)
"""


def _signatures(cache):
    """``{kernel: number of compiled signatures}`` of a numba cache folder; a kernel is named by its module's
    folder and file, its name and its line (``consensus/kcc/_kernels.memberships:398``), so that two kernels
    of one name are never counted as one."""
    out = {}
    for index in glob.glob(os.path.join(cache, "**", "*.nbi"), recursive=True):
        with open(index, "rb") as fh:
            pickle.load(fh)  # numba's version
            _, overloads = pickle.loads(fh.read())
        folder = os.path.relpath(os.path.dirname(index), cache).replace(os.sep, "/")
        folder = folder.removeprefix("ensemble_dask/")
        name, line = os.path.basename(index).split(".py")[0].rsplit("-", 1)
        out[f"{folder}/{name}:{line}"] = len(overloads)
    return out


def _fit(root, name, cache):
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(root)}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", FIT, name], env=env, check=True, cwd=root)
    return time.perf_counter() - t0


def first_and_cached(root, name):
    """``(first fit s, cached fit s, {kernel: signatures})`` of ``name`` run from the checkout ``root``."""
    with tempfile.TemporaryDirectory() as cache:
        first = _fit(root, name, cache)
        cached = _fit(root, name, cache)
        return first, cached, _signatures(cache)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each (fresh cache each time)")
    ap.add_argument("--root", type=Path, default=None, help="another checkout, run in turn with this one")
    args = ap.parse_args(argv)
    roots = {"this": ROOT} if args.root is None else {"this": ROOT, "other": args.root.resolve()}
    print(load_average())
    print(
        "| method | checkout | first fit s (median) | cached fit s | compiling s | signatures "
        "| compiled twice |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.methods:
        runs = {label: [] for label in roots}
        for _ in range(args.repeat):
            for label, root in roots.items():  # in turn, so that a drift of the machine meets both
                runs[label].append(first_and_cached(root, name))
        for label, got in runs.items():
            first = statistics.median(r[0] for r in got)
            cached = statistics.median(r[1] for r in got)
            sigs = got[-1][2]
            twice = ", ".join(f"{k} ({v})" for k, v in sorted(sigs.items()) if v > 1) or "none"
            print(
                f"| {name} | {label} | {first:.2f} | {cached:.2f} | {first - cached:.2f} | "
                f"{sum(sigs.values())} | {twice} |"
            )
        if len(roots) == 2:
            ratios = [a[0] / b[0] for a, b in zip(runs["this"], runs["other"], strict=True)]
            shown = ", ".join(f"{r:.2f}" for r in ratios)
            print(f"|  | first fit, this / other, run by run | {shown} | | | | |")


if __name__ == "__main__":
    main()
