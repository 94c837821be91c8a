"""Every consensus method through the CLI with its defaults, on many data sets; prints ARI per method.

What an acceptance run does on a data set we never saw: ``ingest`` (a CSV with its class column),
``generate --n-clusters K`` and ``coassoc --n-clusters K`` with no other options (``--no-hints``: not
even K), then ``consensus NAME --set n_clusters=K`` (K = the number of classes) for every method. Each
method's ARI is printed beside the mean ARI of the base partitions; ``<`` marks a method below that mean.

Data sets: the UCI sets in ``../shared/data/uci`` (iris, wine, glass, ionosphere, wdbc), scikit-learn's
``digits`` (10 classes, ships with scikit-learn) and seeded ``make_blobs`` with 3, 10, 20 and 31
centres (``--blobs-n`` points each).

    python benchmarks/cli_defaults.py [--data-dir ../shared/data/uci] [--methods pcc-kl,bce]
        [--sets iris,blobs20]

``--standardize both`` ingests every set twice, z-scored (``ingest --standardize``, row ``NAME+z``) and
raw (``--no-standardize``, row ``NAME raw``), with the same generate, coassoc and consensus defaults,
so the two preprocessings can be compared side by side. ``--diagnose`` asks, on each set where a method
misses the mean base partition, whether the ensemble or the solver misses it: the mean NMI of the classes
and of each result with the base partitions (the consensus criterion of Strehl and Ghosh), and the ARI
PCC ends at when started from the classes themselves.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_digits, make_blobs

from ensemble_dask.cli import main as cli_main
from ensemble_dask.io.datasets import load_uci

METHODS = "pcc-kl,pcc-l2,ppc,bce,mm,kcc,gkcc,hbgf,cspa,eac-al,mcla,hgpa,eac-sl"
UCI = ("iris", "wine", "glass", "ionosphere", "wdbc")


def datasets(data_dir, blobs_n):
    for name in UCI:
        if (Path(data_dir) / f"{name}.data.gz").exists():
            yield (name, *load_uci(name, data_dir))
    d = load_digits()
    yield "digits", d.data, d.target
    for c in (3, 10, 20, 31):
        X, y = make_blobs(blobs_n, centers=c, n_features=10, cluster_std=2.5, random_state=0)
        yield f"blobs{c}", X, y


def cli(*args):
    """Run ``ensemble-dask ARGS`` in this process; raise with its stderr on a non-zero exit."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main([str(a) for a in args])
    if rc:
        raise RuntimeError(f"ensemble-dask {' '.join(map(str, args))}: exit {rc}: {err.getvalue()[-500:]}")
    return out.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=str(Path(__file__).parents[1] / ".." / "shared" / "data" / "uci"))
    ap.add_argument("--methods", default=METHODS)
    ap.add_argument("--sets", default=None, help="comma-separated names (default: all)")
    ap.add_argument("--blobs-n", type=int, default=5000)
    ap.add_argument("--no-hints", action="store_true", help="generate and coassoc without --n-clusters K")
    ap.add_argument(
        "--diagnose",
        action="store_true",
        help=(
            "where a method misses the base mean: the consensus criterion at the classes, "
            "PCC from the classes"
        ),
    )
    ap.add_argument(
        "--k-range", type=int, nargs=2, metavar=("K_MIN", "K_MAX"), help="generate --k-min --k-max (all sets)"
    )
    ap.add_argument(
        "--standardize",
        choices=["default", "on", "off", "both"],
        default="default",
        help="ingest with its default, z-scored, raw, or both side by side",
    )
    args = ap.parse_args()
    methods = args.methods.split(",")
    wanted = None if args.sets is None else set(args.sets.split(","))
    print(
        f"{'set':15s} {'n':>6s} {'K':>3s} {'base':>6s} " + " ".join(f"{m:>7s}" for m in methods) + "  >=base"
    )
    below = []
    with tempfile.TemporaryDirectory() as tmp:
        for set_name, X, y in datasets(args.data_dir, args.blobs_n):
            if wanted is not None and set_name not in wanted:
                continue
            K = len(np.unique(y))
            csv = Path(tmp) / f"{set_name}.csv"
            frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
            frame["class"] = y
            frame.to_csv(csv, index=False)
            for name, scaling in VARIANTS[args.standardize]:
                name = set_name + name
                store = Path(tmp) / f"{name}.zarr"
                cli("ingest", csv, "--store", store, "--header", "--label-column", "class", *scaling)
                _run_set(name, store, y, K, methods, args, below)
    print(f"\nbelow the mean base partition: {len(below)}")
    for b in below:
        print("  ", *b)


VARIANTS = {
    "default": [("", ())],
    "on": [("", ("--standardize",))],
    "off": [("", ("--no-standardize",))],
    "both": [("+z", ("--standardize",)), (" raw", ("--no-standardize",))],
}


def _run_set(name, store, y, K, methods, args, below):
    """generate, coassoc and every consensus method with their defaults; print the set's rows."""
    hint = () if args.no_hints else ("--n-clusters", K)
    k_range = () if args.k_range is None else ("--k-min", args.k_range[0], "--k-max", args.k_range[1])
    cli("generate", "--store", store, "--no-progress", *hint, *k_range)
    cli("coassoc", "--store", store, *hint)
    row, secs = [], []
    for m in methods:
        t0 = time.perf_counter()
        try:
            cli("consensus", m, "--store", store, "--set", f"n_clusters={K}")
        except RuntimeError as exc:
            print(f"  {name} {m}: {exc}")
        secs.append(time.perf_counter() - t0)
    metrics = json.loads((store / "report" / "metrics.json").read_text())
    base = metrics["base_partitions"]["ARI"]["mean"]
    for m in methods:
        ari = metrics["methods"].get(m, {}).get("ARI", float("nan"))
        row.append(f"{ari:6.3f}{'<' if ari < base - 1e-9 else ' '}")
        if not ari >= base - 1e-9:
            below.append((name, m, round(ari, 3), round(base, 3)))
    reached = sum(metrics["methods"].get(m, {}).get("ARI", -1.0) >= base - 1e-9 for m in methods)
    print(
        f"{name:15s} {len(y):6d} {K:3d} {base:6.3f} " + " ".join(row) + f"  {reached}/{len(methods)}",
        flush=True,
    )
    print(f"{'':15s} {'':6s} {'':3s} {'secs':>6s} " + " ".join(f"{s:7.1f}" for s in secs), flush=True)
    if args.diagnose and any(b[0] == name for b in below):
        _diagnose(store, y, K, methods)


def _anmi(p, labels):
    """Mean NMI (geometric normalisation) of partition ``p`` with the base partitions, each over the points
    it labels: Strehl and Ghosh's consensus criterion."""
    from sklearn.metrics import normalized_mutual_info_score as nmi

    return float(np.mean([nmi(p[c >= 0], c[c >= 0], average_method="geometric") for c in labels.T]))


def _diagnose(store, y, K, methods):
    """Is the bar missed by the solver or by the ensemble? The criteria at the classes and at the results,
    and PCC started from the classes themselves on the stage's pairs."""
    import warnings

    import zarr
    from sklearn.metrics import adjusted_rand_score

    from ensemble_dask.coassoc import StoredPairs
    from ensemble_dask.consensus import PCC

    g = zarr.open_group(str(store), mode="r")
    labels = np.asarray(g["labels"][:])
    y = np.asarray(g["y_true"][:])  # the rows ingest kept
    truth = np.unique(y, return_inverse=True)[1]
    print(f"{'':15s} ANMI with the base partitions: the classes {_anmi(truth, labels):.3f}", end="")
    for m in methods:
        if f"consensus/{m}" in g:
            print(f", {m} {_anmi(np.asarray(g[f'consensus/{m}/labels'][:]), labels):.3f}", end="")
    print()
    with StoredPairs(str(store)) as pairs, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for div in ("kl", "l2"):
            fit = PCC(n_clusters=K, divergence=div, init=truth).fit(pairs)
            print(
                f"{'':15s} PCC-{div.upper()} started from the classes ends at ARI "
                f"{adjusted_rand_score(y, fit.labels_):.3f} ({len(np.unique(fit.labels_))} clusters)",
                flush=True,
            )


if __name__ == "__main__":
    main()
