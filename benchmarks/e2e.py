"""End to end: raw data in, labels out; ConsensusClustering against the single algorithms a user would run.

Data (every set has reference labels; K is its number of distinct non-zero labels):

* the 57 sets of ``../shared/data/benchmarks`` (batteries wut, graves, fcps, sipu, other: ``NAME.data.gz``
  whitespace-separated floats, ``NAME.labels0.gz`` one integer a row; label 0 is noise);
* the UCI sets of ``../shared/data/uci`` (iris, wine, glass, ionosphere, wdbc; same format);
* scikit-learn's bundled digits, iris, wine and breast cancer (the last three are the UCI sets again, as
  scikit-learn ships them, like ``peers.py --real``).

A set of more than ``--cap`` rows (default 20,000: only ``sipu/worms_2``, 105,600 rows) is replaced by a
seeded random sample of ``--cap`` rows, which every algorithm then sees; ``--max-rows`` skips larger sets.
The cap keeps the whole run within 20 minutes on 2 cores and every algorithm but spectral on every set:
on all of worms_2, raw Birch ends its tree with 102,042 subclusters, whose final ward step would need
their condensed distance matrix, 42 GB.

Ours: ``ConsensusClustering(n_clusters=K, method=M, random_state=seed)`` with every other parameter at its
default (30 base clusterings of half the rows, z-scored features, its store in this process's memory), one
fresh estimator per method (``--methods``; the default method is ``graph``), given the raw features. Its
seconds are the whole ``fit``: ingest, base clusterings, pairs where the method uses them, the consensus.

Single algorithms (scikit-learn unless said), each given K, each on the raw and on the standardised
(``StandardScaler``) features: ``KMeans(n_init=10)``, ``GaussianMixture``, ``AgglomerativeClustering`` ward
and average, ``Birch(n_clusters=K)``, ``SpectralClustering(affinity="nearest_neighbors")``, ``HDBSCAN()``
(no K: its defaults; its noise label -1 is one more cluster for the score) and Genie (``genieclust``,
``Genie(n_clusters=K)``; ``pip install genieclust``, wheels; left out, and said so, when it is not installed).
Ward and average are skipped above 20,000 rows, spectral above 10,000.

Score: the adjusted Rand index against the reference labels on the non-noise points (every algorithm clusters
all the points, noise included). Seconds: the wall time of one fit (``fit_predict``), in this process, after
every algorithm was warmed up once on 300 rows (imports, numba's compilation).

Printed: a table per set (ARI and seconds per algorithm, raw and standardised), then the summary: for each of
ours, on how many sets it is within 0.02 ARI of the best single algorithm (the highest ARI of any single
algorithm on that set, raw or standardised) and at least KMeans(n_init=10)'s ARI - 0.02 (KMeans's better of
raw and standardised on that set), its mean ARI over the sets, and the median and total seconds of its fits;
the same for each single algorithm on the scaling, raw or standardised, of its higher mean ARI (a skipped
fit counts as not within, and is left out of the mean); then the sets where the default method is furthest
below the best single algorithm, and the warnings the fits raised, by category. ``--csv`` writes one row per
set, algorithm and scaling (with the number of distinct labels the fit returned).

    python benchmarks/e2e.py [--quick] [--sets 'wut/*,iris'] [--max-rows N] [--cap 20000]
        [--methods graph,pcc-kl,bce] [--singles kmeans,genie] [--csv PATH] [--seed 0]
        [--ours-params '{"standardize": false}']
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import json
import logging
import sys
import time
import warnings
import zlib
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(ROOT / "benchmarks"))

from _proc import load_average  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
BATTERIES = ("wut", "graves", "fcps", "sipu", "other")
UCI_SETS = ("iris", "wine", "glass", "ionosphere", "wdbc")
SKLEARN_SETS = ("digits", "iris", "wine", "breast_cancer")
QUICK = ("sklearn/iris", "uci/wine", "fcps/hepta", "sipu/jain", "graves/zigzag_noisy", "wut/x2")

#: ours: the auto candidates (the methods whose time grows linearly with the rows) and auto itself
OURS = ("graph", "pcc-kl", "pcc-l2", "bce", "mm", "kcc", "hbgf", "auto")
DEFAULT_METHOD = "graph"  # ConsensusClustering's default method
SINGLES = ("kmeans", "gmm", "ward", "average", "birch", "spectral", "hdbscan", "genie")
#: the largest set (rows) each single algorithm runs on; None: any
MAX_ROWS = {"ward": 20_000, "average": 20_000, "spectral": 10_000}
TOL = 0.02  # "within 0.02 ARI"


def sets(data_dir):
    """``[(name, loader)]`` of every set, in a fixed order; ``loader()`` returns ``(X float64, y int)``."""
    out = []
    bench = Path(data_dir) / "benchmarks"
    for battery in BATTERIES:
        for f in sorted((bench / battery).glob("*.data.gz")):
            out.append((f"{battery}/{f.name[: -len('.data.gz')]}", lambda f=f: read_pair(f)))
    for name in UCI_SETS:
        f = Path(data_dir) / "uci" / f"{name}.data.gz"
        if f.exists():
            out.append((f"uci/{name}", lambda f=f: read_pair(f)))
    for name in SKLEARN_SETS:

        def bundled(name=name):
            from sklearn import datasets

            d = getattr(datasets, f"load_{name}")()
            return np.asarray(d.data, dtype=np.float64), np.asarray(d.target, dtype=np.int64) + 1  # 0: noise

        out.append((f"sklearn/{name}", bundled))
    return out


def read_pair(data_file):
    """``NAME.data.gz`` and ``NAME.labels0.gz`` beside it (as ``ensemble_dask.io.datasets.load_uci`` reads
    them, for any folder)."""
    from ensemble_dask.io.datasets import load_uci

    return load_uci(data_file.name[: -len(".data.gz")], data_file.parent)


def chosen(all_sets, pattern):
    """The sets whose name (``battery/name``) or bare name matches one of the comma-separated globs."""
    globs = [g.strip() for g in pattern.split(",") if g.strip()]
    picked = [
        (n, f)
        for n, f in all_sets
        if any(fnmatch.fnmatch(n, g) or fnmatch.fnmatch(n.split("/")[1], g) for g in globs)
    ]
    if not picked:
        raise SystemExit(f"--sets {pattern!r} matches no set; names are battery/name: wut/x1, uci/iris, ...")
    return picked


def single(name, K, seed):
    """A fresh estimator of the single algorithm ``name`` for K clusters."""
    from sklearn.cluster import HDBSCAN, AgglomerativeClustering, Birch, KMeans, SpectralClustering
    from sklearn.mixture import GaussianMixture

    if name == "kmeans":
        return KMeans(n_clusters=K, n_init=10, random_state=seed)
    if name == "gmm":
        return GaussianMixture(n_components=K, random_state=seed)
    if name in ("ward", "average"):
        return AgglomerativeClustering(n_clusters=K, linkage=name)
    if name == "birch":
        return Birch(n_clusters=K)
    if name == "spectral":
        return SpectralClustering(n_clusters=K, affinity="nearest_neighbors", random_state=seed)
    if name == "hdbscan":
        return HDBSCAN()
    if name == "genie":
        import genieclust

        return genieclust.Genie(n_clusters=K)
    raise ValueError(name)


def genie_available():
    try:
        import genieclust  # noqa: F401
    except ImportError:
        return False
    return True


def timed(fit, notes):
    """``(labels, seconds, error)`` of ``fit()``; its warnings counted in ``notes`` by category."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        try:
            labels = np.asarray(fit())
            error = None
        except Exception as exc:  # noqa: BLE001 - a failed fit is a row of the table, not the end of the run
            labels, error = None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}"
        seconds = time.perf_counter() - t
    for w in caught:
        notes[w.category.__name__] += 1
    return labels, seconds, error


#: more parameters of ours (``--ours-params``): a design measured against the defaults, on the same table
OURS_PARAMS = {}


def ours_fit(method, K, seed):
    from ensemble_dask import ConsensusClustering

    def fit(X):
        model = ConsensusClustering(n_clusters=K, method=method, random_state=seed, **OURS_PARAMS).fit(X)
        return model.labels_

    return fit


def warm_up(methods, singles, seed, notes):
    """Fit everything once on 300 rows (imports, numba's compilation, BLAS threads): not in the seconds."""
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(300, centers=3, n_features=2, random_state=seed)
    t = time.perf_counter()
    for m in methods:
        timed(lambda m=m: ours_fit(m, 3, seed)(X), notes[m])
    for s in singles:
        timed(lambda s=s: single(s, 3, seed).fit_predict(X), notes[s])
    return time.perf_counter() - t


class _Count(logging.Filter):
    """Drops and counts what distributed logs as an embedded cluster closes (its in-process comms)."""

    def __init__(self):
        super().__init__()
        self.dropped = 0

    def filter(self, record):
        if str(record.msg).startswith("Batched Comm Closed"):
            self.dropped += 1
            return False
        return True


def label(m):
    return f"{m} (default)" if m == DEFAULT_METHOD else m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=DATA, help="holds benchmarks/ and uci/ (../shared/data)")
    ap.add_argument("--sets", default=None, help="comma-separated globs of set names, e.g. 'wut/*,iris'")
    ap.add_argument("--quick", action="store_true", help="a smoke run: " + ", ".join(QUICK))
    ap.add_argument("--max-rows", type=int, default=None, help="skip the sets of more rows")
    ap.add_argument("--cap", type=int, default=20_000, help="larger sets: a seeded sample of this many rows")
    ap.add_argument("--methods", default=",".join(OURS), help="ours, comma-separated (default: %(default)s)")
    ap.add_argument("--singles", default=",".join(SINGLES), help="single algorithms (default: %(default)s)")
    ap.add_argument("--csv", type=Path, default=None, help="write one row per set, algorithm and scaling")
    ap.add_argument("--seed", type=int, default=0, help="the one seed of every random choice")
    ap.add_argument(
        "--ours-params", type=json.loads, default={},
        help='more parameters of ours, as JSON (e.g. \'{"standardize": false}\'); default: none',
    )  # fmt: skip
    args = ap.parse_args()
    OURS_PARAMS.update(args.ours_params)

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    singles = [s.strip() for s in args.singles.split(",") if s.strip()]
    unknown = [s for s in singles if s not in SINGLES]
    if unknown:
        raise SystemExit(f"--singles: unknown {unknown}; known: {', '.join(SINGLES)}")
    if "genie" in singles and not genie_available():
        print("genie: genieclust is not installed (pip install genieclust): left out")
        singles.remove("genie")
    all_sets = sets(args.data_dir)
    todo = chosen(all_sets, ",".join(QUICK)) if args.quick else all_sets
    if args.sets is not None:
        todo = chosen(todo, args.sets)

    quiet = _Count()
    logging.getLogger("distributed.batched").addFilter(quiet)
    start = time.perf_counter()
    print(f"e2e: {len(todo)} sets, seed {args.seed}, cap {args.cap:,} rows, {load_average()}")
    print(
        f"ours: ConsensusClustering(n_clusters=K, method=M, random_state={args.seed}"
        + "".join(f", {k}={v!r}" for k, v in OURS_PARAMS.items())
        + f"), defaults otherwise, raw X in; M in {', '.join(methods)}"
    )
    print(
        f"single: {', '.join(singles)}; each on raw and standardised X; ward/average skipped above "
        f"{MAX_ROWS['ward']:,} rows, spectral above {MAX_ROWS['spectral']:,}"
    )
    notes = {a: Counter() for a in methods + singles}
    print(
        f"warm-up (300 rows, every algorithm once): {warm_up(methods, singles, args.seed, notes):.1f} s",
        flush=True,
    )
    for c in notes.values():
        c.clear()

    rows = []  # dicts: set, n, n_full, d, K, noise, algorithm, kind, scaling, ARI, seconds, status
    writer, fh = None, None
    if args.csv is not None:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        fh = open(args.csv, "w", newline="")  # noqa: SIM115 - written set by set, closed at the end
        fields = ["set", "n", "n_full", "d", "K", "noise", "algorithm", "kind", "scaling", "ARI", "seconds",
                  "clusters", "status"]  # fmt: skip
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
    names = []
    for name, load in todo:
        X, y = load()
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.int64)
        if args.max_rows is not None and len(X) > args.max_rows:
            print(f"\n== {name}: skipped ({len(X):,} rows > --max-rows {args.max_rows:,})", flush=True)
            continue
        names.append(name)
        for row in run_set(name, X, y, methods, singles, args, notes):
            rows.append(row)
            if writer is not None:
                writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
        if fh is not None:
            fh.flush()
    if fh is not None:
        fh.close()
    wall = time.perf_counter() - start
    summary(rows, names, methods, singles, notes)
    if quiet.dropped:
        print(
            f"  (and distributed logged 'Batched Comm Closed' with a traceback {quiet.dropped} times as a "
            "fit's embedded cluster closed: not printed)"
        )
    print(f"\nwall time {wall / 60:.1f} min ({wall:.0f} s) for {len(names)} sets; {load_average()}")
    if args.csv is not None:
        print(f"per-set results: {args.csv}")


def run_set(name, X, y, methods, singles, args, notes):
    """Every algorithm on one set; prints its table and returns its rows (dicts, one per algorithm and
    scaling)."""
    from sklearn.metrics import adjusted_rand_score
    from sklearn.preprocessing import StandardScaler

    n_full = len(X)
    if n_full > args.cap:
        rng = np.random.default_rng([args.seed, zlib.crc32(name.encode())])
        keep = np.sort(rng.choice(n_full, args.cap, replace=False))
        X, y = X[keep], y[keep]
    n, d = X.shape
    scored = y != 0
    K = len(np.unique(y[scored]))
    sample = f", a sample of {n:,} of its {n_full:,} rows (cap)" if n < n_full else ""
    print(f"\n== {name}: n={n:,} d={d} K={K} noise={int((~scored).sum())}{sample}")
    print(f"{'algorithm':22s} {'raw ARI':>8s} {'s':>7s}   {'std ARI':>8s} {'s':>7s}")
    Xs = StandardScaler().fit_transform(X)
    base = {"set": name, "n": n, "n_full": n_full, "d": d, "K": K, "noise": int((~scored).sum())}
    rows = []

    def record(algorithm, kind, scaling, labels, seconds, error, skipped=None):
        clusters = None
        if skipped is not None:
            ari, secs, status = float("nan"), float("nan"), skipped
        elif error is not None:
            ari, secs, status = float("nan"), seconds, f"failed: {error}"
        else:
            ari, secs, status = adjusted_rand_score(y[scored], labels[scored]), seconds, "ok"
            clusters = len(np.unique(labels))  # HDBSCAN: its noise (-1) counted as one
        rows.append({**base, "algorithm": algorithm, "kind": kind, "scaling": scaling, "ARI": ari,
                     "seconds": secs, "clusters": clusters, "status": status})  # fmt: skip
        return rows[-1]

    def cell(row):
        if row["status"] == "ok":
            return f"{row['ARI']:8.3f} {row['seconds']:7.2f}"
        return f"{row['status'][:16]:>16s}"

    for m in methods:
        labels, seconds, error = timed(lambda m=m: ours_fit(m, K, args.seed)(X), notes[m])
        row = record(m, "ours", "raw", labels, seconds, error)
        print(f"{'ours ' + label(m):22s} {cell(row)}", flush=True)
    for s in singles:
        limit = MAX_ROWS.get(s)
        if limit is not None and n > limit:
            for scaling in ("raw", "std"):
                record(s, "single", scaling, None, None, None, skipped=f"skipped (n > {limit:,})")
            print(f"{s:22s} skipped (n={n:,} > {limit:,})", flush=True)
            continue
        cells = []
        for scaling, data in (("raw", X), ("std", Xs)):
            labels, seconds, error = timed(
                lambda s=s, data=data: single(s, K, args.seed).fit_predict(data), notes[s]
            )
            cells.append(cell(record(s, "single", scaling, labels, seconds, error)))
        print(f"{s:22s} {cells[0]}   {cells[1]}", flush=True)
    return rows


def summary(rows, names, methods, singles, notes):
    """The issue's summary lines: counts against the best single algorithm and k-means, and mean ARIs."""
    ari = {(r["set"], r["algorithm"], r["scaling"]): r["ARI"] for r in rows}
    sec = {(r["set"], r["algorithm"], r["scaling"]): r["seconds"] for r in rows}
    M = len(names)

    def seconds(alg, sc):  # median and total seconds of a fit over the sets it ran on
        v = np.array([sec.get((s, alg, sc), np.nan) for s in names], dtype=float)
        v = v[~np.isnan(v)]
        return f"{np.median(v) if len(v) else np.nan:9.2f} {v.sum():8.0f}"

    if not M:
        print("\nno set was run")
        return

    def per_set_best(alg, s):  # a single algorithm's better of raw and standardised on set s (nan: none)
        v = [ari.get((s, alg, sc), np.nan) for sc in ("raw", "std")]
        return np.nan if np.all(np.isnan(v)) else np.nanmax(v)

    best = {}
    for s in names:
        v = [per_set_best(a, s) for a in singles]
        best[s] = (np.nan, "-") if np.all(np.isnan(v)) else (np.nanmax(v), singles[int(np.nanargmax(v))])
    kmeans = {s: per_set_best("kmeans", s) for s in names} if "kmeans" in singles else None

    print(f"\n==== summary over {M} sets ====")
    print(
        "best single: the highest ARI of any single algorithm on the set, raw or standardised; "
        "KMeans: KMeans(n_init=10)'s better of raw and standardised on the set"
    )
    head = f"{'ours':18s} {'within 0.02 of best single':>27s}"
    head += f" {'>= KMeans - 0.02':>17s}" if kmeans else ""
    print(head + f" {'mean ARI':>9s} {'median s':>9s} {'total s':>8s}")
    b = np.array([best[s][0] for s in names])
    for m in methods:
        a = np.array([ari.get((s, m, "raw"), np.nan) for s in names])
        within = int(np.sum(a >= b - TOL))  # a failed fit (nan) counts as not within
        line = f"{label(m):18s} {f'{within} of {M}':>27s}"
        if kmeans:
            k = np.array([kmeans[s] for s in names])
            line += f" {f'{int(np.sum(a >= k - TOL))} of {M}':>17s}"
        ran = int(np.sum(~np.isnan(a)))
        line += f" {np.nanmean(a) if ran else np.nan:9.3f} {seconds(m, 'raw')}"
        print(line + ("" if ran == M else f" (ARI over {ran} sets)"))

    print(
        f"\n{'single':18s} {'within 0.02 of best single':>27s}"
        + (f" {'>= KMeans - 0.02':>17s}" if kmeans else "")
        + f" {'mean ARI':>9s} {'median s':>9s} {'total s':>8s}"
        + f" {'on':>4s} {'raw':>7s} {'std':>7s} {'sets':>5s}"
    )
    partial = False
    for alg in singles:
        means = {}
        for sc in ("raw", "std"):
            v = np.array([ari.get((s, alg, sc), np.nan) for s in names])
            means[sc] = (np.nanmean(v) if np.any(~np.isnan(v)) else np.nan, int(np.sum(~np.isnan(v))))
        higher = np.nan_to_num(means["std"][0], nan=-1) > np.nan_to_num(means["raw"][0], nan=-1)
        on = "std" if higher else "raw"
        ran = means[on][1]
        partial = partial or ran < M
        a = np.array([ari.get((s, alg, on), np.nan) for s in names])  # on the scaling of its higher mean
        line = f"{alg:18s} {f'{int(np.sum(a >= b - TOL))} of {M}':>27s}"
        if kmeans:
            k = np.array([kmeans[s] for s in names])
            line += f" {f'{int(np.sum(a >= k - TOL))} of {M}':>17s}"
        line += (
            f" {means[on][0]:9.3f} {seconds(alg, on)} {on:>4s} {means['raw'][0]:7.3f} {means['std'][0]:7.3f}"
        )
        print(line + f" {f'{ran}' if ran == M else f'{ran}*':>5s}")
    if partial:
        print(
            "(* mean and seconds over the sets it ran on: skipped above its row limit, or failed, which the "
            "counts take as not within)"
        )
    best_mean = np.nanmean([best[s][0] for s in names])
    print(f"{'best single/set':18s} {best_mean:9.3f}  (the per-set best of the single algorithms: an oracle)")

    if DEFAULT_METHOD in methods:
        ours = {s: np.nan_to_num(ari.get((s, DEFAULT_METHOD, "raw"), np.nan), nan=-1) for s in names}
        gap = sorted(names, key=lambda s: ours[s] - best[s][0])
        print(f"\nthe sets where {label(DEFAULT_METHOD)} is furthest below the best single algorithm:")
        others = [m for m in methods if m != DEFAULT_METHOD]
        head = f"{'set':24s} {'best single':>18s} {DEFAULT_METHOD:>7s} {'gap':>6s}  "
        print(head + " ".join(f"{m:>6s}" for m in others))
        for s in gap[:8]:
            a = ari.get((s, DEFAULT_METHOD, "raw"), np.nan)
            bs = f"{best[s][1]} {best[s][0]:.3f}"
            print(
                f"{s:24s} {bs:>18s} {a:7.3f} {best[s][0] - a:6.3f}  "
                + " ".join(f"{ari.get((s, m, 'raw'), np.nan):6.3f}" for m in others)
            )

    failed = [
        (r["set"], r["algorithm"], r["scaling"], r["status"]) for r in rows if r["status"][:6] == "failed"
    ]
    if failed:
        print("\nfailed fits:")
        for f in failed:
            print("  " + " ".join(f))
    warned = {a: c for a, c in notes.items() if c}
    if warned:
        print("\nwarnings raised by the fits (category: count), by algorithm:")
        for a, c in warned.items():
            print(f"  {a}: " + ", ".join(f"{k} {v}" for k, v in c.most_common()))


if __name__ == "__main__":
    main()
