"""BCE / MM against Wang et al. 2011 Table 3, Fig. 3 (missing values) and Fig. 5 (row-distributed); prints.

Protocol (Wang et al. 2011 Sect. 7.1, Table 3): per data set, ``20 * n_subsets`` k-means clusterings
with different initialisations (k = number of classes, raw features, all rows) are made by the
package's own base clusterers: a ``type1`` plan of :func:`ensemble_dask.partitions.clusterers.plan_ensemble`
with ``k_min = k_max`` = the number of classes and ``rate=1.0`` (each clustering has its own seed),
each run by :func:`~ensemble_dask.partitions.clusterers.run_clustering` on the rows of
:func:`~ensemble_dask.partitions.clusterers.subsample_of` (all of them). The package's k-means starts from
k-means++ with one run (``n_init=1``); the paper does not say which initialisation it used. The
clusterings are cut into subsets of 20 and BCE and MM (k = number of classes) are fitted on each
subset. Reported: the maximum and the average micro-precision over the subsets, beside the
paper's values.

Fig. 3: on iris and wine, a fraction p of the entries of a subset is held out (missing), p in
0..90%; the average micro-precision over ``n_missing_runs`` subsets is printed.

Fig. 5: on iris and wine, the rows (shuffled once, seeded) are split evenly into P = 2..10
sites; the exact row-distributed EM with secure aggregation (``run_federated_bce``) runs over P
site agent processes on this machine, each with its own keys and ``site.yaml`` as the federated
demo writes them (``bench_bce.site_configs``); every site writes its rows' memberships, read back
here to score the pooled consensus labels. P = 1 is the fit the federated one equals, ``BCE``
with ``init="random"`` on the pooled rows (a federation has at least 2 sites). The paper's
heuristic sequential EM is no longer in the package (the exact EM's accuracy does not depend on
P). Keys, labels and memberships live in a temporary directory, removed at the end.

The machine may be shared: the load average is printed with the timings.

Usage: python benchmarks/paper_tables_bce.py [--subsets 100] [--fig-runs 5] [--skip-fig5]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

# quieter Dask: worker processes inherit this (distributed's INFO lines on every cluster close)
os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helpers

from _proc import load_average  # noqa: E402

from ensemble_dask.metrics import micro_precision  # noqa: E402

UCI = ROOT.parent / "shared" / "data" / "uci"

# Wang et al. 2011 Table 3: (max MP, average MP) of base k-means, MM and BCE
PAPER = {
    "iris": {"kmeans": (0.8867, 0.6267), "MM": (0.9067, 0.8867), "BCE": (0.9600, 0.8911)},
    "wdbc": {"kmeans": (0.8541, 0.7595), "MM": (0.8840, 0.8840), "BCE": (0.8893, 0.8840)},
    "ionosphere": {"kmeans": (0.7123, 0.6906), "MM": (0.7179, 0.7111), "BCE": (0.7749, 0.7123)},
    "glass": {"kmeans": (0.5421, 0.5140), "MM": (0.5748, 0.5519), "BCE": (0.6121, 0.5526)},
    "wine": {"kmeans": (0.6629, 0.5904), "MM": (0.7247, 0.7129), "BCE": (0.7247, 0.7247)},
}


def load(name):
    X = np.loadtxt(UCI / f"{name}.data.gz")
    y = np.loadtxt(UCI / f"{name}.labels0.gz").astype(int)
    return X, y


def base_clusterings(X, k, n_clusterings, seed):
    """``n_clusterings`` k-means clusterings of all rows of ``X`` with k clusters, different seeds.

    Made by the package's base clusterers: a type-1 ensemble plan with k fixed, each clustering
    run on its (here: full) subsample. Returns the ``n x n_clusterings`` labels matrix.
    """
    from ensemble_dask.partitions.clusterers import plan_ensemble, run_clustering, subsample_of

    n = X.shape[0]
    plans = plan_ensemble(n, n_clusterings, ensemble="type1", k_min=k, k_max=k, rate=1.0, seed=seed)
    labels = np.full((n, n_clusterings), -1, dtype=np.int32)
    for spec in plans:
        idx = subsample_of(spec, n)
        labels[idx, spec["index"]] = run_clustering(X[idx], spec)
    return labels


def table3(names, n_subsets):
    from ensemble_dask.consensus.bce import BCE, MM

    print(
        f"\n== Table 3 protocol: k-means (k = number of classes) with different seeds, "
        f"{n_subsets} subsets of 20 =="
    )
    print(f"{'data':<11} {'method':<7} {'max MP':>8} {'paper':>7} {'avg MP':>8} {'paper':>7}  seconds")
    pools = {}
    for name in names:
        X, y = load(name)
        k = np.unique(y).size
        t = time.perf_counter()
        pool = base_clusterings(X, k, 20 * n_subsets, seed=1)
        pools[name] = (pool, y, k)
        base = [micro_precision(pool[:, j], y) for j in range(pool.shape[1])]
        res = {"kmeans": (max(base), float(np.mean(base)), time.perf_counter() - t)}
        for label, cls in (("MM", MM), ("BCE", BCE)):
            t = time.perf_counter()
            mps = []
            for s in range(n_subsets):
                sub = pool[:, 20 * s : 20 * (s + 1)]
                est = cls(k, n_init=3, random_state=s).fit(sub)
                mps.append(micro_precision(est.labels_, y))
            res[label] = (max(mps), float(np.mean(mps)), time.perf_counter() - t)
        for label in ("kmeans", "MM", "BCE"):
            mx, avg, sec = res[label]
            pm, pa = PAPER[name][label]
            print(f"{name:<11} {label:<7} {mx:8.4f} {pm:7.4f} {avg:8.4f} {pa:7.4f}  {sec:6.1f}")
    return pools


def fig3(pools, runs):
    from ensemble_dask.consensus.bce import BCE, MM

    print(f"\n== Fig. 3: average MP with missing labels (mean over {runs} subsets of 20) ==")
    rates = np.round(np.arange(0.0, 0.91, 0.1), 2)
    print(f"{'data':<6} {'method':<5} " + " ".join(f"{int(100 * r):>5}%" for r in rates))
    for name in ("iris", "wine"):
        pool, y, k = pools[name]
        for label, cls in (("BCE", BCE), ("MM", MM)):
            row = []
            for r in rates:
                mps = []
                for s in range(runs):
                    sub = pool[:, 20 * s : 20 * (s + 1)].copy()
                    rng = np.random.default_rng(100 + s)
                    sub[rng.random(sub.shape) < r] = -1
                    est = cls(k, n_init=3, random_state=s).fit(sub)
                    keep = np.setdiff1d(np.arange(sub.shape[0]), est.empty_rows_)
                    mps.append(micro_precision(est.labels_[keep], y[keep]))
                row.append(np.mean(mps))
            print(f"{name:<6} {label:<5} " + " ".join(f"{v:6.3f}" for v in row))


def fig5(pools, runs, tmp, max_iter):
    import zarr
    from bench_bce import site_configs

    from ensemble_dask.consensus.bce import BCE
    from ensemble_dask.federated.coordinator.bce import run_federated_bce
    from ensemble_dask.federated.coordinator.link import client_context
    from ensemble_dask.federated.protocol.certs import make_certs
    from ensemble_dask.stages.sites import LocalSiteAgents, _write_array

    print(
        f"\n== Fig. 5: average MP, row-distributed over P sites, secure aggregation (mean over {runs} "
        f"subsets, max_iter={max_iter}; P=1: BCE init='random' on the pooled rows) =="
    )
    names = [f"s{p}" for p in range(10)]
    certs = tmp / "certs"
    make_certs(certs, ["coordinator", *names])
    context = client_context(certs)
    subsets = {}
    for name in ("iris", "wine"):
        pool, y, k = pools[name]
        order = np.random.default_rng(7).permutation(pool.shape[0])
        subsets[name] = ([pool[order, 20 * s : 20 * (s + 1)] for s in range(runs)], y[order], k)
    mp = {}
    for name, (subs, y, k) in subsets.items():
        est = [
            BCE(k, init="random", random_state=s, max_iter=max_iter).fit(sub) for s, sub in enumerate(subs)
        ]
        mp[name, 1] = np.mean([micro_precision(e.labels_, y) for e in est])
    for P in range(2, 11):
        local, configs = site_configs(tmp / f"P{P}", names[:P], certs)
        with LocalSiteAgents(configs) as agents:  # the sites read their labels at every join
            sites = [{"name": n, "address": agents.addresses[n]} for n in names[:P]]
            for name, (subs, y, k) in subsets.items():
                mps = []
                for s, sub in enumerate(subs):
                    cuts = np.linspace(0, sub.shape[0], P + 1).astype(int)
                    for p in range(P):
                        _write_array(local[p]["url"], sub[cuts[p] : cuts[p + 1]].astype(np.int32))
                    run_federated_bce(sites, k, context, random_state=s, max_iter=max_iter)
                    pred = np.concatenate(
                        [zarr.open_array(local[p]["output"], mode="r")[:].argmax(axis=1) for p in range(P)]
                    )
                    mps.append(micro_precision(pred, y))
                mp[name, P] = np.mean(mps)
    print(f"{'data':<6} {'mode':<11} " + " ".join(f"P={p:<4}" for p in range(1, 11)))
    for name in subsets:
        print(f"{name:<6} {'secure':<11} " + " ".join(f"{mp[name, p]:6.3f}" for p in range(1, 11)))


def _terminated(signum, frame):
    print(f"\nterminated by signal {signum}; stopping the site agents started here", file=sys.stderr)
    sys.exit(128 + signum)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--subsets", type=int, default=100)
    ap.add_argument("--fig-runs", type=int, default=5)
    ap.add_argument("--skip-fig5", action="store_true")
    ap.add_argument(
        "--only-fig5", action="store_true", help="build the pools, skip Table 3 and Fig. 3 output"
    )
    ap.add_argument("--fig5-max-iter", type=int, default=100)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    # SIGTERM (e.g. timeout) unwinds like Ctrl-C: the site agents started here are stopped on the way out
    signal.signal(signal.SIGTERM, _terminated)
    t = time.perf_counter()
    print(load_average())
    if args.only_fig5:
        pools = {}
        for name in ("iris", "wine"):
            X, y = load(name)
            k = np.unique(y).size
            pools[name] = (base_clusterings(X, k, 20 * args.subsets, seed=1), y, k)
    else:
        pools = table3(["iris", "wdbc", "ionosphere", "glass", "wine"], args.subsets)
        fig3(pools, args.fig_runs)
    print(load_average())
    if not args.skip_fig5:
        with tempfile.TemporaryDirectory(prefix="bce_fig5_") as tmp:
            fig5(pools, max(1, args.fig_runs // 2), Path(tmp), args.fig5_max_iter)
    print(f"\ntotal {time.perf_counter() - t:.0f} s; {load_average()}")


if __name__ == "__main__":
    main()
