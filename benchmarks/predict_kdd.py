"""Labelling new rows on KDD Cup 99 10%: fit on a seeded 90%, predict the other 10%; prints a table.

For each method (by default BCE, KCC and PCC-KL, at K = 3), two workflows of
the ``kdd99`` schema, 100 k-means clusterings of 50% subsamples, seed 0: one on the 90% (``fit``), one on
every row (``all``). The held-out 10% are then labelled by the 90% fit (``ensemble-dask predict``'s code)
and compared with the labels the all-rows fit gives those rows (ARI; beside it, the ARI of the two fits on
the rows both fitted: how far apart the fits themselves are), and the accuracy H (Lourenço et al. 2015 eq. 11,
``ensemble_dask.metrics.h_criterion``, against the classes) of the prediction with the in-sample H of the
90% fit. Seconds: the prediction's, the base clusterings' centres included.

Usage: python benchmarks/predict_kdd.py [--data ../shared/data/kddcup99/kddcup.data_10_percent.gz]
       [--methods bce kcc pcc-kl] [--n-clusterings 100] [--work DIR]
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing


def split(src, work, seed=0):
    """The file's lines cut into a seeded 90% (fit.csv) and 10% (new.csv); returns the held-out mask."""
    with gzip.open(src, "rt") as fh:
        lines = fh.readlines()
    held = np.random.default_rng(seed).random(len(lines)) < 0.1
    (work / "fit.csv").write_text("".join(l for l, h in zip(lines, held, strict=True) if not h))
    (work / "new.csv").write_text("".join(l for l, h in zip(lines, held, strict=True) if h))
    return held


def main(argv=None):
    from sklearn.metrics import adjusted_rand_score

    from ensemble_dask import pipeline
    from ensemble_dask.io.store import RunStore
    from ensemble_dask.metrics import h_criterion
    from ensemble_dask.stages.predict import predict_rows

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared/data/kddcup99/kddcup.data_10_percent.gz"))
    ap.add_argument("--methods", nargs="+", default=["bce", "kcc", "pcc-kl"])
    ap.add_argument("--n-clusterings", type=int, default=100)
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="predict-kdd-"))
    work.mkdir(parents=True, exist_ok=True)
    held = split(args.data, work)
    runs = {}
    for name, url in (("fit", work / "fit.csv"), ("all", Path(args.data))):
        spec = {
            "seed": 0,
            "store": str(work / f"{name}.zarr"),
            "data": {"url": str(url), "schema": "kdd99"},
            "generate": {"n_clusterings": args.n_clusterings, "rate": 0.5, "k_min": 2, "k_max": 10},
            "consensus": {m: {"n_clusters": 3} for m in args.methods},
        }
        t0 = time.perf_counter()
        pipeline.run_workflow(spec)
        runs[name] = RunStore(spec["store"], mode="r+")
        print(f"{name}: workflow {time.perf_counter() - t0:.1f} s", flush=True)
    fit, whole = runs["fit"], runs["all"]
    y_all = whole["y_true"][:]
    print(f"\n{held.sum()} held-out rows of {held.size}\n")
    print(
        "| method | ARI vs the all-rows fit | the two fits on the 90% | H predicted | H in-sample | seconds |"
    )
    print("|---|---|---|---|---|---|")
    for m in args.methods:
        t0 = time.perf_counter()
        pred = predict_rows(fit, m, str(work / "new.csv"))[0]
        seconds = time.perf_counter() - t0
        ref = whole[f"consensus/{m}/labels"][:][held]
        own = fit[f"consensus/{m}/labels"][:]
        h_fit = h_criterion(own, fit["y_true"][:])
        fits = adjusted_rand_score(
            own, whole[f"consensus/{m}/labels"][:][~held]
        )  # how far apart the fits are
        h_new = h_criterion(pred, y_all[held])
        agree = adjusted_rand_score(ref, pred)
        print(f"| {m} | {agree:.4f} | {fits:.4f} | {h_new:.4f} | {h_fit:.4f} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
