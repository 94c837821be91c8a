"""How many clusters: the K each side chooses against the true K, on the development set.

Data: the sets of ``e2e.py`` (``../shared/data/benchmarks``, ``../shared/data/uci``, scikit-learn's digits,
iris, wine and breast cancer); K is a set's number of distinct non-zero labels (label 0 is noise); a set of
more than ``--cap`` rows (only ``sipu/worms_2``) is replaced by a seeded sample of ``--cap`` rows. Every side
searches K in ``[2, max(10, 2K)]`` (at most the rows less one).

* ours: one ``ConsensusClustering(n_clusters=(2, k_max), random_state=seed)`` fit per set, every other
  parameter at its default (method ``graph``, 30 base clusterings of half the rows, z-scored features). One
  fit scores every K by every criterion (``k_scores_``): the K each criterion chooses is read from it
  (``ensemble_dask.consensus.graph._choose_k.best_k``), and ``default`` is the fit's ``n_clusters_``.
* ``kmeans+silhouette`` and ``kmeans+ch``: ``KMeans(K, n_init=10)`` at each K of the range on the z-scored
  features (as ours sees them), the K of the highest silhouette (on a seeded sample of at most 5,000 rows) or
  Calinski-Harabasz index.
* ``cc-pac``: the ``consensusclustering`` package (PyPI 0.2.4, Monti et al.'s consensus clustering with
  ``KMeans(n_init=1)`` on resamples of 80% of the rows, ``--cc-resamples`` (default 10, ConsensusClusterPlus's
  ``reps``) each K), the K of the lowest PAC
  (Senbabaoglu et al. 2014: the share of pairs of consensus in (0.1, 0.9]) of its dense ``n x n`` consensus
  matrix; only on sets of at most ``--cc-max-rows`` rows (its pairs are Python tuples: O(n^2) per resample),
  said per set; left out, and said so, when the package is not importable.

Printed: per set n, the true K, each side's K; then per side the sets it ran on, the exact and within-one
counts. ``--json`` writes every set's rows and our per-K scores.

    nice python benchmarks/choose_k.py [--sets 'wut/*,iris'] [--cap 20000] [--seed 0] [--json PATH]
        [--cc-max-rows 1000] [--cc-resamples 10] [--no-anchors]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from e2e import DATA, chosen, sets  # noqa: E402

OURS = ("eigengap", "lifetime", "pac", "stability")


def k_max_of(K, n):
    return int(min(max(10, 2 * K), n - 1))


def ours(X, k_max, seed):
    from ensemble_dask import ConsensusClustering
    from ensemble_dask.consensus.graph._choose_k import best_k

    t0 = time.perf_counter()
    model = ConsensusClustering((2, k_max), random_state=seed).fit(X)
    seconds = time.perf_counter() - t0
    scores = model.k_scores_
    picks = {f"ours-{c}": best_k(scores, c)[0] for c in OURS}
    picks["ours-default"] = model.n_clusters_
    return picks, scores, seconds


def kmeans_anchors(Z, k_max, seed):
    from sklearn.cluster import KMeans
    from sklearn.metrics import calinski_harabasz_score, silhouette_score

    sil, ch = {}, {}
    for K in range(2, k_max + 1):
        z = KMeans(K, n_init=10, random_state=seed).fit_predict(Z)
        if len(np.unique(z)) < 2:
            continue
        sil[K] = silhouette_score(Z, z, sample_size=min(5000, len(Z)), random_state=seed)
        ch[K] = calinski_harabasz_score(Z, z)
    return {
        "kmeans+silhouette": max(sil, key=lambda k: (sil[k], -k)),
        "kmeans+ch": max(ch, key=lambda k: (ch[k], -k)),
    }


def cc_pac(Z, k_max, seed, resamples):
    from consensusclustering import ConsensusClustering as CC
    from sklearn.cluster import KMeans

    cc = CC(KMeans(n_init=1), 2, k_max, resamples, resample_frac=0.8, rng=seed)
    cc.fit(Z)
    iu = np.triu_indices(len(Z), 1)
    pacs = {}
    for K in range(2, k_max + 1):
        co = cc.consensus_k(K)[iu]
        pacs[K] = float(np.mean((co > 0.1) & (co <= 0.9)))
    return min(pacs, key=lambda k: (pacs[k], k))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=DATA)
    ap.add_argument("--sets", default=None, help="comma-separated globs of battery/name")
    ap.add_argument("--cap", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--cc-max-rows", type=int, default=1000)
    ap.add_argument("--cc-resamples", type=int, default=10)
    ap.add_argument("--no-anchors", action="store_true", help="ours only")
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    from sklearn.preprocessing import StandardScaler

    try:
        import consensusclustering  # noqa: F401

        have_cc = not args.no_anchors
    except ImportError:
        have_cc = False
        print("consensusclustering is not importable: cc-pac left out (pip install consensusclustering)")
    todo = sets(args.data_dir) if args.sets is None else chosen(sets(args.data_dir), args.sets)
    sides = [f"ours-{c}" for c in (*OURS, "default")]
    if not args.no_anchors:
        sides += ["kmeans+silhouette", "kmeans+ch"] + (["cc-pac"] if have_cc else [])
    rows = []
    print(f"{'set':28s} {'n':>6s} {'K':>3s} {'range':>7s} " + " ".join(f"{s[-9:]:>9s}" for s in sides))
    for name, load in todo:
        X, y = load()
        if len(X) > args.cap:
            keep = np.sort(np.random.default_rng(args.seed).choice(len(X), args.cap, replace=False))
            X, y = X[keep], y[keep]
        K = int(len(np.unique(y[y > 0])))
        k_max = k_max_of(K, len(X))
        row = {"set": name, "n": len(X), "K": K, "k_max": k_max}
        picks, scores, seconds = ours(X, k_max, args.seed)
        row.update(picks, seconds=round(seconds, 2), scores={str(k): v for k, v in scores.items()})
        if not args.no_anchors:
            Z = StandardScaler().fit_transform(X)
            row.update(kmeans_anchors(Z, k_max, args.seed))
            if have_cc and len(X) <= args.cc_max_rows:
                row["cc-pac"] = cc_pac(Z, k_max, args.seed, args.cc_resamples)
        rows.append(row)
        cells = " ".join(f"{str(row.get(s, '-')):>9s}" for s in sides)
        print(f"{name:28s} {len(X):6d} {K:3d} {f'2-{k_max}':>7s} {cells}", flush=True)
    print()
    print(f"{'side':20s} {'sets':>5s} {'exact':>6s} {'within 1':>9s}")
    for s in sides:
        ran = [r for r in rows if s in r]
        exact = sum(r[s] == r["K"] for r in ran)
        near = sum(abs(r[s] - r["K"]) <= 1 for r in ran)
        print(f"{s:20s} {len(ran):5d} {exact:6d} {near:9d}")
    if have_cc:
        small = [r for r in rows if "cc-pac" in r]
        print(f"\non the {len(small)} sets of at most {args.cc_max_rows} rows (where cc-pac ran):")
        for s in sides:
            exact = sum(r[s] == r["K"] for r in small)
            near = sum(abs(r[s] - r["K"]) <= 1 for r in small)
            print(f"{s:20s} {len(small):5d} {exact:6d} {near:9d}")
    total = sum(r["seconds"] for r in rows)
    print(f"\nours: {total:.0f} s in all, median {np.median([r['seconds'] for r in rows]):.1f} s a set")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=float))


if __name__ == "__main__":
    main()
