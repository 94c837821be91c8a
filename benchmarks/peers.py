"""Our consensus methods side by side with the peers, in one run on one shared labels matrix; prints.

Data: ``make_blobs(n, centers=C, n_features=10, cluster_std=2.5, random_state=0)`` with ``C = K``
(``--centers`` fixes C instead), then an ensemble of 20 k-means labelings (``KMeans(k, n_init=1)``,
``k`` drawn in ``[max(2, K // 2), 2 K]``, i.e. 4..16 at K = 8), all drawn from ``--seed``:

* ``complete``: every clustering labels every point;
* ``sub50``: each clustering is fitted on its own random half of the points; the other half
  gets ``-1`` (absent).

Every method gets the same labels matrix and K and runs in a fresh subprocess (so its peak
memory is its own), warmed up once on 500 rows (imports, JIT caches): seconds are the wall time
of the fit (with ``--repeat R``, the fastest of R fits in that process: on a machine shared with other jobs
the least disturbed one) (for the pairwise methods the co-association sampling included), peak RSS is
``VmHWM`` of that process, reset after the labels are loaded (``/proc/self/clear_refs``), so it is the memory
the method added. ARI and NMI against the blobs' true labels.

How each method is given the ``-1`` entries:

* BCE, MM (ours): skipped (marginalised out of the likelihood);
* PCC-KL, PCC-L2, PPC (ours), as a workflow runs them: started from HBGF's labels
  (:func:`~ensemble_dask.consensus.starts.label_starts`, computed on a thread of its own while the pairs are
  built, as ``pipeline.label_starts_alongside`` does; here the pairs are built in memory on this process's
  threads, where a workflow's coassoc stage builds them on its Dask cluster, which the start then shares
  cores with: ``ensemble-dask run`` gains less, see the benchmarks page) and fitted on
  ``coassociation(labels, strategy="cocluster", l=default_pairs_per_point(K, "cocluster"), seed=0)`` (the
  stage's defaults; the seconds include the start and the pair sampling); a pair is counted only over the
  clusterings that label both points (``N_ij``); the same pairs for EAC-SL, EAC-AL and CSPA;
* KCC, GKCC, HGPA, MCLA, HBGF (ours): on the labels, ``-1`` skipped;
* one-hot k-means (scikit-learn ``OneHotEncoder`` + ``KMeans(K, n_init=1)``): ``-1`` is an
  unknown category, i.e. an all-zero block for that clustering;
* ccHBGF: it has no missing-value handling: ``-1`` is passed as is and becomes one more cluster
  of that clustering;
* ensembleclustering (``cluster_ensembles``, base clusterings as rows): ``-1`` becomes NaN, which
  its hypergraph leaves out (the point is in none of that clustering's hyperedges).

Methods are one line each in ``METHODS`` (an argument such as ``init=`` is a one-line change;
KCC/GKCC and the baselines eac-sl, eac-al, cspa, hgpa, mcla, hbgf plug in the same way). The peers
are in the ``bench`` extra: ``pip install -e .[bench]`` and ``pip install --no-deps
ensembleclustering`` (its metadata pins pytest; kahypar and pymetis come from the extra); a peer
that is not installed is reported as such.

Real data (``--real``): scikit-learn's bundled iris, wine, breast_cancer and digits and the UCI sets in
``--data-dir`` (default ``../shared/data/uci`` beside the checkout: ``NAME.data.gz`` whitespace-separated
numbers, ``NAME.labels0.gz`` one integer per line; iris, wine, ionosphere, wdbc, glass; a set that is
absent is skipped). Each set is standardised (a constant feature stays 0), K = its number of classes, and
the ensemble is 30 k-means labelings (``KMeans(k, n_init=1)``, ``k`` drawn in ``[K, 2 K]``), ``complete``
or ``sub50`` (each fitted on its own random half, the other half ``-1``), ``--seeds`` of each kind (seeds
``--seed`` on, with the set's position). The sets are small (at most 1,797 points), so every method runs in
this process, one after the other (no seconds, no memory); prints each method's mean ARI on each set and
kind of ensemble beside the base partitions', and, per method, on how many of them it is at least the best
peer (within 0.005 ARI), at least the base partitions' mean, at least the best of our methods (for
``auto``), and, ensemble by ensemble, how often it is better and worse than ccHBGF.

With ``--rounds R`` the methods run R times in turn (each time in a fresh process, in the order given); the
table then holds each method's median seconds and peak, and each method's ratio to ccHBGF's time is printed
round by round (its median, least and largest): on a shared machine whose speed drifts between runs, the
ratio of two fits run one after the other holds better than a ratio of two single runs.

Usage: python benchmarks/peers.py [--quick] [--n 50000 500000] [--K 3 8 30] [--labels complete sub50]
       [--centers C] [--methods bce mm ...] [--timeout 600] [--repeat R] [--rounds R] [--cache DIR]
       python benchmarks/peers.py --real [--seeds 5] [--labels complete sub50] [--methods ...]
              [--data-dir DIR] [--pairs full]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

N_CLUSTERINGS = 20


# --------------------------------------------------------------------------- methods (run in the worker)


#: the pair methods' pairs (``--pairs``): the consensus stage's default, or every pair
PAIRS = "cocluster"


def _pairs(labels, K):
    """The pairs the consensus stage draws by default: cocluster, its default partners per point (``--pairs
    full``: every pair, for sets of at most 5,000 points)."""
    from ensemble_dask.coassoc import coassociation
    from ensemble_dask.stages.coassoc import default_pairs_per_point

    if PAIRS == "full":
        return coassociation(labels, strategy="full", seed=0)
    return coassociation(labels, strategy="cocluster", l=default_pairs_per_point(K, "cocluster"), seed=0)


def _label_starts(labels, K):
    """The pair methods' default start in the consensus stage: HBGF's labels."""
    from ensemble_dask.consensus.starts import label_starts

    return label_starts(labels, K, random_state=0)


def _ours(make, on_pairs=False):
    def run(labels, K):
        data = _pairs(labels, K) if on_pairs else labels
        return make(K, labels).fit(data).labels_

    return run


def _bce(K, labels):
    from ensemble_dask.consensus import BCE

    return BCE(n_clusters=K, random_state=0)


def _mm(K, labels):
    from ensemble_dask.consensus import MM

    return MM(n_clusters=K, random_state=0)


def _started(make):
    """A pair method as a workflow runs it: its start (HBGF's labels) computed on a thread of its own while
    the pairs are built (``pipeline.label_starts_alongside``), then the fit from it."""

    def run(labels, K):
        from concurrent.futures import ThreadPoolExecutor

        from ensemble_dask.consensus.starts import import_start_modules

        import_start_modules()  # as the workflow does: two threads importing at once can break an import
        with ThreadPoolExecutor(1) as pool:
            start = pool.submit(_label_starts, labels, K)
            data = _pairs(labels, K)
            return make(K, start.result()).fit(data).labels_

    return run


def _pcc(divergence):
    def make(K, init):
        from ensemble_dask.consensus import PCC

        return PCC(n_clusters=K, divergence=divergence, init=init, random_state=0)

    return make


def _ppc(K, init):
    from ensemble_dask.consensus import PPC

    return PPC(n_clusters=K, init=init, random_state=0)


def _baseline(name):
    def make(K, labels):
        import inspect

        from ensemble_dask.consensus import registry

        cls = registry.get(name).estimator_class()
        kw = {"random_state": 0} if "random_state" in inspect.signature(cls).parameters else {}
        return cls(n_clusters=K, **kw)

    return make


#: auto's candidates, each fitted as its own line below fits it
_CANDIDATES = {
    "pcc-kl": (_pcc("kl"), True),
    "pcc-l2": (_pcc("l2"), True),
    "bce": (_bce, False),
    "mm": (_mm, False),
    "kcc": (_baseline("kcc"), False),
    "hbgf": (_baseline("hbgf"), False),
}


def _auto(labels, K):
    """``auto``: the candidates' result of highest ANMI with the labels (AutoConsensus, the stage's rule)."""
    from ensemble_dask.consensus.selection import CANDIDATES, AutoConsensus

    assert set(CANDIDATES) == set(_CANDIDATES), "auto's default candidates changed: update _CANDIDATES"
    pairs = []

    def fit(name, method, params):
        make, on_pairs = _CANDIDATES[name]
        if on_pairs and not pairs:
            pairs.append(_pairs(labels, K))
        if on_pairs:  # the stage's auto computes the start after the pairs (then reads it from the store)
            return make(K, _label_starts(labels, K)).fit(pairs[0])
        return make(K, labels).fit(labels)

    return AutoConsensus(K, random_state=0).fit(labels, fit_candidate=fit).labels_


def onehot_kmeans(labels, K):
    from sklearn.cluster import KMeans
    from sklearn.preprocessing import OneHotEncoder

    cats = [np.unique(c[c >= 0]) for c in labels.T]  # -1 is left out: unknown -> all-zero block
    onehot = OneHotEncoder(categories=cats, handle_unknown="ignore").fit_transform(labels)
    return KMeans(K, n_init=1, random_state=0).fit_predict(onehot)


def cchbgf(labels, K):
    from ccHBGF import ccHBGF

    return ccHBGF(labels, n_clusters=K, random_state=0)  # -1 is one more label of its clustering


def _ensembleclustering(solver):
    def run(labels, K):
        from ensembleclustering import cluster_ensembles

        base = labels.T.astype(np.float64)
        base[base < 0] = np.nan
        return cluster_ensembles(base, nclass=K, solver=solver, random_state=0)

    return run


# name -> (group, runner); one line per method
METHODS = {
    "bce": ("ours", _ours(_bce)),
    "mm": ("ours", _ours(_mm)),
    "pcc-kl": ("ours", _started(_pcc("kl"))),
    "pcc-l2": ("ours", _started(_pcc("l2"))),
    "ppc": ("ours", _started(_ppc)),
    "kcc": ("ours", _ours(_baseline("kcc"))),
    "gkcc": ("ours", _ours(_baseline("gkcc"))),
    "eac-sl": ("ours", _ours(_baseline("eac-sl"), on_pairs=True)),
    "eac-al": ("ours", _ours(_baseline("eac-al"), on_pairs=True)),
    "cspa": ("ours", _ours(_baseline("cspa"), on_pairs=True)),
    "hgpa": ("ours", _ours(_baseline("hgpa"))),
    "mcla": ("ours", _ours(_baseline("mcla"))),
    "hbgf": ("ours", _ours(_baseline("hbgf"))),
    "auto": ("ours", _auto),
    "onehot-kmeans": ("peer", onehot_kmeans),
    "cchbgf": ("peer", cchbgf),
    "ec-hgpa": ("peer", _ensembleclustering("hgpa")),
    "ec-hbgf": ("peer", _ensembleclustering("hbgf")),
    "ec-mcla": ("peer", _ensembleclustering("mcla")),
}
DEFAULT_METHODS = list(METHODS)
MISSING = {
    "bce": "skipped",
    "mm": "skipped",
    "pcc-kl": "pairs over jointly labelled clusterings",
    "pcc-l2": "pairs over jointly labelled clusterings",
    "ppc": "pairs over jointly labelled clusterings",
    "kcc": "skipped (incomplete-partition KCC)",
    "gkcc": "skipped (incomplete-partition KCC)",
    "eac-sl": "pairs over jointly labelled clusterings",
    "eac-al": "pairs over jointly labelled clusterings",
    "cspa": "pairs over jointly labelled clusterings",
    "hgpa": "in no hyperedge of that clustering",
    "mcla": "in no hyperedge of that clustering",
    "hbgf": "no edge to that clustering's clusters",
    "auto": "as the candidate it keeps",
    "onehot-kmeans": "all-zero block",
    "cchbgf": "-1 = one more cluster",
    "ec-hgpa": "NaN (left out of the hypergraph)",
    "ec-hbgf": "NaN (left out of the hypergraph)",
    "ec-mcla": "NaN (left out of the hypergraph)",
}


def _vm(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0  # MB
    return float("nan")


def worker(args):
    labels = np.load(args.labels_file)
    _, run = METHODS[args.worker]
    warmup_error = None
    try:  # warm-up on a few rows: imports and JIT caches are loaded before the clock starts
        run(np.ascontiguousarray(labels[:: max(1, labels.shape[0] // 500)]), args.K)
    except Exception as exc:  # noqa: BLE001 - the timed call runs all the same; the driver says it failed
        warmup_error = f"{type(exc).__name__}: {exc}"[:200]
    try:  # the peak RSS from here on is the method's own
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    base_rss = _vm("VmRSS")
    seconds = np.inf
    for _ in range(args.repeat):  # the fastest of the repeats: the run least disturbed by other jobs
        t0 = time.perf_counter()
        pred = np.asarray(run(labels, args.K))
        seconds = min(seconds, time.perf_counter() - t0)
    np.save(args.out, pred.astype(np.int64))
    print(json.dumps({"seconds": seconds, "peak_mb": _vm("VmHWM") - base_rss, "warmup_error": warmup_error}))


# --------------------------------------------------------------------------- data and driver


def blobs(n, centers):
    """The data every ensemble here is drawn from: ``(X, y)``."""
    from sklearn.datasets import make_blobs

    return make_blobs(n, centers=centers, n_features=10, cluster_std=2.5, random_state=0)


def ensemble(n, K, centers, subsample, seed, cache):
    """Cached blobs ensemble: returns (labels path, true labels)."""
    from sklearn.cluster import KMeans

    tag = f"blobs_n{n}_c{centers}_K{K}_s{subsample}_seed{seed}"
    lab_path, y_path = cache / f"{tag}_labels.npy", cache / f"{tag}_y.npy"
    if lab_path.exists() and y_path.exists():
        return lab_path, np.load(y_path)
    X, y = blobs(n, centers)
    rng = np.random.default_rng(seed)
    labels = np.full((n, N_CLUSTERINGS), -1, dtype=np.int32)
    for j in range(N_CLUSTERINGS):
        k = int(rng.integers(max(2, K // 2), 2 * K + 1))
        rows = np.arange(n) if subsample >= 1 else np.sort(rng.choice(n, int(subsample * n), replace=False))
        km = KMeans(k, n_init=1, random_state=int(rng.integers(2**31)))
        labels[rows, j] = km.fit_predict(X[rows])
    np.save(lab_path, labels)
    np.save(y_path, y)
    return lab_path, y


def run_method(name, lab_path, K, y, timeout, tmp, repeat=1):
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    out = Path(tmp) / f"pred_{name}.npy"
    cmd = [sys.executable, __file__, "--worker", name, "--labels-file", str(lab_path), "--K", str(K)]
    cmd += ["--out", str(out), "--repeat", str(repeat), "--pairs", PAIRS]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": f"timeout > {timeout:.0f} s"}
    if proc.returncode != 0:
        err = (proc.stderr.strip().splitlines() or ["?"])[-1]
        if "ModuleNotFoundError" in err:
            return {"status": "not installed: " + err.split("'")[-2] if "'" in err else err}
        return {"status": "crash: " + err[:120]}
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    warmup_error = res.pop("warmup_error", None)
    if warmup_error:  # the time then holds imports and compilation, and a transient error would pass unseen
        print(f"warning: {name}: the warm-up on a few rows failed: {warmup_error}", file=sys.stderr)
    pred = np.load(out)
    res["ari"] = adjusted_rand_score(y, pred)
    res["nmi"] = normalized_mutual_info_score(y, pred)
    res["status"] = "ok"
    return res


def base_scores(labels, y):
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    ari, nmi = [], []
    for col in labels.T:
        m = col >= 0
        ari.append(adjusted_rand_score(y[m], col[m]))
        nmi.append(normalized_mutual_info_score(y[m], col[m]))
    return float(np.mean(ari)), float(np.mean(nmi))


def _median_round(results):
    """One method's result over the rounds: the first's, with the median seconds and peak of the rounds."""
    ok = [r for r in results if r["status"] == "ok"]
    if len(ok) < len(results):
        return next(r for r in results if r["status"] != "ok")
    return {**ok[0], "seconds": float(np.median([r["seconds"] for r in ok])),
            "peak_mb": float(np.median([r["peak_mb"] for r in ok]))}  # fmt: skip


def print_rounds(rounds, load):
    """Each round's seconds, then each method's ratio to ccHBGF's time of the same round (median, least,
    largest): on a machine whose speed drifts, a ratio of two fits run one after the other holds better than
    two medians."""
    names = list(rounds[0])
    print(f"# {len(rounds)} rounds (load average {load:.1f} at the end); seconds of each round:")
    for no, rnd in enumerate(rounds):
        print(
            f"  round {no}: " + ", ".join(f"{m} {r.get('seconds', float('nan')):.2f}" for m, r in rnd.items())
        )
    if "cchbgf" not in names:
        return
    for m in names:
        if m == "cchbgf":
            continue
        q = [
            rnd[m]["seconds"] / rnd["cchbgf"]["seconds"]
            for rnd in rounds
            if "seconds" in rnd[m] and "seconds" in rnd["cchbgf"]
        ]
        if q:
            print(f"  {m:14s} / ccHBGF: median {np.median(q):.2f}, least {min(q):.2f}, largest {max(q):.2f}")


def markdown(case, rows):
    lines = [
        f"**{case}**",
        "",
        "| method | -1 given as | ARI | NMI | seconds | peak RSS (MB) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rows:
        if r.get("status") != "ok":
            lines.append(f"| {name} | {MISSING.get(name, '')} | {r['status']} | | | |")
        elif name == "base partitions (mean)":
            lines.append(f"| {name} | labelled points | {r['ari']:.3f} | {r['nmi']:.3f} | | |")
        else:
            lines.append(
                f"| {name} | {MISSING[name]} | {r['ari']:.3f} | {r['nmi']:.3f} | "
                f"{r['seconds']:.2f} | {r['peak_mb']:.0f} |"
            )
    return "\n".join(lines)


# --------------------------------------------------------------------------- real data (in this process)

N_REAL_CLUSTERINGS = 30
UCI_SETS = ("iris", "wine", "ionosphere", "wdbc", "glass")
#: within this much ARI of the best peer a method counts as at least as good
TIE = 0.005


def real_sets(data_dir):
    """``(name, X, y)`` of scikit-learn's bundled sets, then of the UCI sets found in ``data_dir``."""
    from sklearn import datasets

    from ensemble_dask.io.datasets import load_uci

    for name in ("iris", "wine", "breast_cancer", "digits"):
        d = getattr(datasets, f"load_{name}")()
        yield f"sk-{name}", d.data, d.target
    for name in UCI_SETS:
        if (Path(data_dir) / f"{name}.data.gz").exists():
            yield (f"uci-{name}", *load_uci(name, data_dir))


def real_ensemble(X, K, subsample, rng):
    """30 k-means labelings (k in [K, 2 K]) of the standardised ``X``; with ``subsample < 1`` each is fitted
    on its own random share of the rows and the others get ``-1``."""
    from sklearn.cluster import KMeans

    X = np.asarray(X, dtype=np.float64)
    sd = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    n = X.shape[0]
    labels = np.full((n, N_REAL_CLUSTERINGS), -1, dtype=np.int32)
    for j in range(N_REAL_CLUSTERINGS):
        k = int(rng.integers(K, 2 * K + 1))
        rows = np.arange(n) if subsample >= 1 else np.sort(rng.choice(n, int(subsample * n), replace=False))
        km = KMeans(k, n_init=1, random_state=int(rng.integers(2**31)))
        labels[rows, j] = km.fit_predict(X[rows])
    return labels


def run_real(args):
    """Every method on every real set and ensemble (``--seeds`` ensembles of each kind), in this process;
    prints the table of mean ARI per set and the summary."""
    import warnings

    from sklearn.metrics import adjusted_rand_score

    methods = args.methods
    peers = [m for m in methods if METHODS[m][0] == "peer"]
    ours = [m for m in methods if METHODS[m][0] == "ours" and m != "auto"]
    cases, table = [], {}  # table[(case, method)] = ARI per ensemble seed (None: failed)
    for i, (name, X, y) in enumerate(real_sets(args.data_dir)):
        y = np.unique(y, return_inverse=True)[1]
        K = int(y.max()) + 1
        for kind in args.labels:
            case = f"{name} {kind}"
            cases.append(case)
            for seed in range(args.seed, args.seed + args.seeds):
                rng = np.random.default_rng([seed, i, 0 if kind == "complete" else 1])
                labels = real_ensemble(X, K, 1.0 if kind == "complete" else 0.5, rng)
                base = base_scores(labels, y)[0]
                table.setdefault((case, "base partitions (mean)"), []).append(base)
                line = [f"{case} seed {seed} (n = {len(y)}, K = {K}): base {base:.3f}"]
                for m in methods:
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            pred = np.asarray(METHODS[m][1](labels, K))
                        ari = adjusted_rand_score(y, pred)
                        line.append(f"{m} {ari:.3f}")
                    except ModuleNotFoundError as exc:
                        ari = None
                        line.append(f"{m} not installed ({exc.name})")
                    except Exception as exc:  # noqa: BLE001 - reported, the other methods still run
                        ari = None
                        line.append(f"{m} crash ({type(exc).__name__}: {str(exc)[:60]})")
                    table.setdefault((case, m), []).append(ari)
                print("; ".join(line), flush=True)

    def mean(case, m):
        v = table[(case, m)]
        return None if any(a is None for a in v) else float(np.mean(v))

    rows = ["base partitions (mean)", *methods]
    print(f"\n# ARI per method (rows) and set (columns), mean of {args.seeds} ensemble(s) each\n")
    print("| method | " + " | ".join(cases) + " |")
    print("|---|" + "---|" * len(cases))
    for m in rows:
        cells = ["" if mean(c, m) is None else f"{mean(c, m):.3f}" for c in cases]
        print(f"| {m} | " + " | ".join(cells) + " |")
    print(
        f"\n# per method, over the {len(cases)} sets (each the mean of {args.seeds} ensemble(s)): >= the "
        f"best peer - {TIE} (peers: "
        + ", ".join(peers)
        + f"), >= the base partitions' mean ARI, >= the best of "
        f"ours ({', '.join(ours)}) - {TIE}; mean ARI; per ensemble, better / worse than ccHBGF by more "
        f"than {TIE}\n"
    )
    print("| method | >= best peer | >= base mean | >= best of ours | mean ARI | vs ccHBGF +/- |")
    print("|---|---|---|---|---|---|")
    results = []
    for m in methods:
        ok_peer = ok_base = ok_ours = 0
        for c in cases:
            a = mean(c, m)
            if a is None:
                continue
            best = max((mean(c, p) for p in peers if mean(c, p) is not None), default=None)
            ok_peer += best is None or a >= best - TIE
            ok_base += a >= mean(c, "base partitions (mean)")
            ok_ours += a >= max(mean(c, o) for o in ours if mean(c, o) is not None) - TIE
            results.append({"set": c, "method": m, "ari": table[(c, m)], "best_peer": best})
        aris = [mean(c, m) for c in cases if mean(c, m) is not None]
        paired = [
            (a, b)
            for c in cases
            for a, b in zip(table[(c, m)], table.get((c, "cchbgf"), []), strict=False)
            if a is not None and b is not None
        ]
        better = sum(a > b + TIE for a, b in paired)
        worse = sum(a < b - TIE for a, b in paired)
        avg = f"{np.mean(aris):.3f}" if aris else ""
        print(f"| {m} | {ok_peer} | {ok_base} | {ok_ours} | {avg} | {better} / {worse} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n = 50,000 only")
    ap.add_argument("--n", type=int, nargs="+", default=[50_000, 500_000])
    ap.add_argument("--K", type=int, nargs="+", default=[3, 8, 30])
    ap.add_argument("--labels", nargs="+", default=["complete", "sub50"], choices=["complete", "sub50"])
    ap.add_argument("--centers", type=int, default=None, help="blob centres (default: K)")
    ap.add_argument("--methods", nargs="+", default=DEFAULT_METHODS, choices=list(METHODS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per method and case")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ensemble_dask_peers")
    ap.add_argument("--json", type=Path, default=None, help="also write every result here")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="time each fit this many times, report the fastest (shared machines)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the methods this many times in turn, each in a fresh process; report each method's median "
        "seconds and the median, least and largest of its ratio to ccHBGF's time round by round",
    )
    ap.add_argument(
        "--pairs",
        choices=["cocluster", "full"],
        default="cocluster",
        help="the pair methods' pairs: the consensus stage's default (cocluster) or every pair (n <= 5,000)",
    )
    ap.add_argument("--real", action="store_true", help="real data sets instead of blobs, in this process")
    ap.add_argument("--seeds", type=int, default=1, help="ensembles of each kind per real set (--real)")
    ap.add_argument(
        "--data-dir", type=Path, default=ROOT.parent / "shared" / "data" / "uci", help="the UCI sets (--real)"
    )
    # worker mode (one method in a fresh process)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--labels-file", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    global PAIRS
    PAIRS = args.pairs
    if args.worker:
        args.K = args.K[0]
        return worker(args)
    if args.real:
        return run_real(args)
    if args.quick:
        args.n = [50_000]
    args.cache.mkdir(parents=True, exist_ok=True)
    print(
        f"# load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; ensemble cache {args.cache}; "
        f"seconds: fastest of {args.repeat} fit(s)"
    )
    print("# how each method gets the -1 entries: " + "; ".join(f"{m}: {MISSING[m]}" for m in args.methods))
    results = []
    tables = []
    for n in args.n:
        for K in args.K:
            centers = args.centers or K
            for kind in args.labels:
                sub = 1.0 if kind == "complete" else 0.5
                t0 = time.perf_counter()
                lab_path, y = ensemble(n, K, centers, sub, args.seed, args.cache)
                labels = np.load(lab_path)
                case = f"n = {n:,}, K = {K}, {centers} blobs, {kind} labels"
                print(f"\n## {case} (ensemble ready in {time.perf_counter() - t0:.1f} s)", flush=True)
                b_ari, b_nmi = base_scores(labels, y)
                rows = [("base partitions (mean)", {"status": "ok", "ari": b_ari, "nmi": b_nmi})]
                print(f"{'base partitions (mean)':24s} ARI {b_ari:.3f}  NMI {b_nmi:.3f}", flush=True)
                del labels
                with tempfile.TemporaryDirectory() as tmp:
                    rounds = [
                        {
                            name: run_method(name, lab_path, K, y, args.timeout, tmp, args.repeat)
                            for name in args.methods
                        }
                        for _ in range(args.rounds)
                    ]
                    if args.rounds > 1:
                        print_rounds(rounds, os.getloadavg()[0])
                    for name in args.methods:
                        r = _median_round([rnd[name] for rnd in rounds])
                        rows.append((name, r))
                        results.append(
                            {"n": n, "K": K, "centers": centers, "labels": kind, "method": name, **r}
                        )
                        if r["status"] == "ok":
                            print(
                                f"{name:24s} ARI {r['ari']:.3f}  NMI {r['nmi']:.3f}  "
                                f"{r['seconds']:7.2f} s  peak RSS {r['peak_mb']:7.0f} MB",
                                flush=True,
                            )
                        else:
                            print(f"{name:24s} {r['status']}", flush=True)
                tables.append(markdown(case, rows))
    print("\n# Markdown\n")
    print("\n\n".join(tables))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
