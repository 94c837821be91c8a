"""KCC, KCC++ and GKCC beside Li & Liu 2018 Table 4, and the baselines' speed at 50,000 and 500,000 points.

``tables``: on iris, wine, glass (../shared/data/uci) and a KDD Cup 99 subset (every 100th record of
the 10% file, numeric columns standardised, reference = the 5 attack categories), 20 k-means
labelings with k drawn in [2, 2K] are the input ensemble. As in Li & Liu 2018 Sect. 5.1, KCC (random
start) and KCC++ (k-means++) run on the basic partitions GKCC generates, 20 runs each; GKCC runs
with 20 seeds (its result is deterministic for a seed). Printed per set: the condensed objective
(sum ||x - m||^2 / n^2) mean and std, NMI, R_n (Li & Liu 2018 eq. 7-8) and seconds, then the average
over the sets beside Table 4's averages over 36 sets.

Why our average differs from Table 4's: Table 4 averages 36 sets, 16 of them gene-expression sets of
40-250 points in 1,000-2,500 dimensions and 10 image sets with up to 40 classes, where every method
scores low (the paper's NMI 0.40-0.46); ours averages 3 small, low-dimensional UCI sets and a KDD
subset on which k-means base partitions already separate the classes well, so every number is
higher. The ordering is what carries over: KCC < KCC++ <= GKCC in objective, and GKCC's objective
is never above KCC's or KCC++'s on the same generated partitions. Measured 2026-11-23 (load ~20 on
2 cores): R_n 0.471 / 0.502 / 0.504 and NMI 0.550 / 0.564 / 0.566 for KCC / KCC++ / GKCC.

``scale``: 20 k-means labelings (k in [4, 16]) of make_blobs(n, centers=8, n_features=10,
cluster_std=2.5, random_state=0) for n = 50,000 and 500,000; seconds and ARI of every method,
with scikit-learn's KMeans on the sparse one-hot matrix beside KCC. The pair-based methods get
``coassociation(labels, strategy="cocluster", l=10)`` (its build time is printed apart).

``PYTHONPATH=. python benchmarks/paper_tables_kcc.py [--only tables,scale] [--sizes 50000,500000]``
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helpers

from _proc import load_average  # noqa: E402

from ensemble_dask.metrics import nmi, normalized_rand  # noqa: E402


def _shared():
    for base in (ROOT.parent, ROOT.parent.parent):
        if (base / "shared" / "data").is_dir():
            return base / "shared" / "data"
    raise SystemExit(f"no shared/data beside {ROOT}")


TABLE4 = {"R_n": (0.2986, 0.3139, 0.3710), "NMI": (0.3965, 0.4147, 0.4560)}

KDD_CATEGORY = {
    "normal": "normal",
    **dict.fromkeys(["back", "land", "neptune", "pod", "smurf", "teardrop"], "dos"),
    **dict.fromkeys(["ipsweep", "nmap", "portsweep", "satan"], "probe"),
    **dict.fromkeys(
        ["ftp_write", "guess_passwd", "imap", "multihop", "phf", "spy", "warezclient", "warezmaster"], "r2l"
    ),
    **dict.fromkeys(["buffer_overflow", "loadmodule", "perl", "rootkit"], "u2r"),
}


def load_set(name):
    from sklearn.preprocessing import StandardScaler

    from ensemble_dask.io.datasets import load_uci

    data = _shared()
    if name == "kdd-subset":
        rows = []
        with gzip.open(data / "kddcup99" / "kddcup.data_10_percent.gz", "rt") as fh:
            for i, line in enumerate(fh):
                if i % 100 == 0:
                    rows.append(line.strip().rstrip(".").split(","))
        X = np.array([[float(v) for j, v in enumerate(r[:-1]) if j not in (1, 2, 3)] for r in rows])
        cats = np.array([KDD_CATEGORY.get(r[-1], "other") for r in rows])
        _, y = np.unique(cats, return_inverse=True)
    else:
        X, y = load_uci(name, data / "uci")
    return StandardScaler().fit_transform(X), y


def kmeans_labelings(X, ks, seed=0):
    from sklearn.cluster import KMeans

    return np.column_stack(
        [
            KMeans(int(k), n_init=1, max_iter=100, random_state=seed + s).fit_predict(X)
            for s, k in enumerate(ks)
        ]
    ).astype(np.int32)


def tables(runs=20):
    from ensemble_dask.consensus import GKCC, KCC

    print(f"== Li & Liu 2018: KCC, KCC++, GKCC ({runs} runs; {load_average()})")
    print(
        f"{'set':11s} {'n':>5s} {'K':>2s} {'method':6s} {'objective mean':>15s} {'std':>9s} "
        f"{'NMI':>6s} {'R_n':>6s} {'s/run':>7s}"
    )
    avg = {m: {"NMI": [], "R_n": []} for m in ("KCC", "KCC++", "GKCC")}
    for name in ("iris", "wine", "glass", "kdd-subset"):
        X, y = load_set(name)
        K = int(np.unique(y).size)
        labels = kmeans_labelings(X, np.random.default_rng(0).integers(2, 2 * K + 1, 20))
        res = {m: {"obj": [], "NMI": [], "R_n": [], "t": []} for m in avg}
        gk = []
        for s in range(runs):
            t = time.perf_counter()
            g = GKCC(K, random_state=s, compare=None).fit(labels)  # Algorithm 1, the paper's
            res["GKCC"]["t"].append(time.perf_counter() - t)
            gk.append(g)
        for s, g in enumerate(gk):
            P = g.partitions_
            for m, init in (("KCC", "random"), ("KCC++", "k-means++")):
                t = time.perf_counter()
                e = KCC(K, init=init, random_state=s).fit(P)
                res[m]["t"].append(time.perf_counter() - t)
                res[m]["obj"].append(e.objective_)
                res[m]["NMI"].append(nmi(e.labels_, y))
                res[m]["R_n"].append(normalized_rand(e.labels_, y))
            res["GKCC"]["obj"].append(g.objective_)
            res["GKCC"]["NMI"].append(nmi(g.labels_, y))
            res["GKCC"]["R_n"].append(normalized_rand(g.labels_, y))
        for m, r in res.items():
            print(
                f"{name:11s} {X.shape[0]:5d} {K:2d} {m:6s} {np.mean(r['obj']):15.6f} {np.std(r['obj']):9.2e} "
                f"{np.mean(r['NMI']):6.3f} {np.mean(r['R_n']):6.3f} {np.mean(r['t']):7.3f}"
            )
            avg[m]["NMI"].append(np.mean(r["NMI"]))
            avg[m]["R_n"].append(np.mean(r["R_n"]))
        # paired: GKCC against the KCC / KCC++ run on the same generated partitions
        g_obj = np.array(res["GKCC"]["obj"])
        le = {m: np.mean(g_obj <= np.array(res[m]["obj"]) * (1 + 1e-12)) for m in ("KCC", "KCC++")}
        print(
            f"{'':11s} GKCC objective <= KCC's on the same partitions: {le['KCC']:.0%}, "
            f"<= KCC++'s: {le['KCC++']:.0%}"
        )
    print("\naverage over our 4 sets vs Li & Liu 2018 Table 4 (average over its 36 sets)")
    for meas in ("R_n", "NMI"):
        ours = " ".join(f"{m} {np.mean(avg[m][meas]):.3f}" for m in avg)
        paper = " ".join(f"{m} {v:.3f}" for m, v in zip(avg, TABLE4[meas], strict=True))
        print(f"  {meas:4s} ours: {ours}   paper: {paper}")


def _timed(f):
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t


def scale(sizes, with_gkcc_max=50_000):
    import scipy.sparse as sp
    from sklearn.cluster import KMeans
    from sklearn.datasets import make_blobs
    from sklearn.metrics import adjusted_rand_score as ari

    from ensemble_dask.coassoc import coassociation
    from ensemble_dask.consensus import CSPA, GKCC, HBGF, HGPA, KCC, MCLA, EACAverageLink, EACSingleLink
    from ensemble_dask.consensus._common.encoding import encode

    KCC(2).fit(np.array([[0, 1], [1, 0], [0, 1]]))  # compile the kernels outside the timings
    print(
        "\n== scale: 20 k-means labelings of make_blobs(n, centers=8, n_features=10, cluster_std=2.5) "
        f"({load_average()})"
    )
    for n in sizes:
        X, y = make_blobs(n, centers=8, n_features=10, cluster_std=2.5, random_state=0)
        labels, t = _timed(lambda X=X: kmeans_labelings(X, np.random.default_rng(0).integers(4, 17, 20)))
        print(f"n={n}: labelings {t:.1f} s")
        gidx, enc = encode(labels)
        B = sp.csr_matrix(
            (np.ones(gidx.size), gidx.ravel(), np.arange(0, gidx.size + 1, gidx.shape[1])),
            shape=(n, enc.n_categories),
        )
        rows = []
        e, t = _timed(lambda B=B: KMeans(8, n_init=1, random_state=0).fit(B))
        rows.append(("sklearn KMeans (sparse one-hot)", t, ari(y, e.labels_)))
        for name, est in (
            ("kcc (k-means++)", KCC(8, init="k-means++", random_state=0)),
            ("kcc (random, n_init=10)", KCC(8, init="random", n_init=10, random_state=0)),
            ("hgpa", HGPA(8, random_state=0)),
            ("mcla", MCLA(8, random_state=0)),
            ("hbgf", HBGF(8, random_state=0)),
        ):
            e, t = _timed(lambda est=est, labels=labels: est.fit(labels))
            rows.append((name, t, ari(y, e.labels_)))
        if n <= with_gkcc_max:
            e, t = _timed(lambda labels=labels: GKCC(8, random_state=0).fit(labels))
            rows.append(("gkcc", t, ari(y, e.labels_)))
        pc, t = _timed(lambda labels=labels: coassociation(labels, strategy="cocluster", seed=0, l=10))
        rows.append((f"(pairs: cocluster l=10, {pc.n_pairs} pairs)", t, float("nan")))
        for name, est in (
            ("eac-sl", EACSingleLink(8)),
            ("eac-al", EACAverageLink(8)),
            ("cspa", CSPA(8, random_state=0)),
        ):
            e, t = _timed(lambda est=est, pc=pc: est.fit(pc))
            rows.append((name, t, ari(y, e.labels_)))
        for name, t, a in rows:
            print(f"  {name:40s} {t:8.2f} s   ARI {a:.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="tables,scale")
    ap.add_argument("--sizes", default="50000,500000")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    only = args.only.split(",")
    if "tables" in only:
        tables(args.runs)
    if "scale" in only:
        scale([int(s) for s in args.sizes.split(",")])


if __name__ == "__main__":
    main()
