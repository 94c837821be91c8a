"""PCC on the KDD Cup 99 configuration of Lourenço et al. 2015 Sect. 7.3 (prints its figures; no asserts).

The inputs are built by the package itself, in a run store (default under /tmp):
``ingest`` of kddcup.data_10_percent.gz (schema kdd99, the smurf/neptune/normal classes, a seeded
subset of n = 120,000 records), ``generate`` of 100 type-1 clusterings (k-means, k uniform in
[2, 10], each on a 50% subsample) on an embedded 2-worker Dask cluster, and the ``coassoc``
stage with uniformly sampled pairs, p = 0.25 per mille of the n(n-1)/2 pairs (~1.8M). The stages
skip themselves when the store already holds their output (same parameters), so a second run
only times PCC; ``--fresh`` starts from an empty store.

Then PCC-KL and PCC-L2 from a random start until the KKT test, for K = 3, 4, 5, 8, 10: seconds
(wall and CPU of ``PCC.fit``, which runs on one core), the H criterion against the classes, the
effective number of clusters; the mean H of the base partitions; and the paper's figures:
13.8 s (L2) and 16.7 s (KL) for its single-core C code at K = 3, base partitions H = 79%.

Usage, from the repository root (the machine is shared: pin the process to one core):
    taskset -c 0 python benchmarks/bench_pcc.py [--n 120000] [--rate 0.00025] [--seed 0] [--ks 3 4 5 8 10]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

# Run as a script from a checkout: import this tree's package, not whatever is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ensemble_dask.coassoc import read_pairs  # noqa: E402
from ensemble_dask.coassoc.counting import PairCounts  # noqa: E402
from ensemble_dask.consensus.pcc import PCC
from ensemble_dask.io.store import RunStore  # noqa: E402
from ensemble_dask.metrics import h_criterion  # noqa: E402
from ensemble_dask.runtime.clients import dask_client  # noqa: E402
from ensemble_dask.stages.coassoc import coassoc_stage  # noqa: E402
from ensemble_dask.stages.generate import base_partition_scores, generate  # noqa: E402
from ensemble_dask.stages.ingest import ingest  # noqa: E402

KDD = Path(__file__).resolve().parents[2] / "shared" / "data" / "kddcup99" / "kddcup.data_10_percent.gz"
PAPER_SECONDS = {"l2": 13.8, "kl": 16.7}  # Lourenço et al. 2015 Sect. 7.3, single-core C code, K = 3
PAPER_BASE_H = 0.79


def build_store(url, n, n_partitions, rate, seed, workers):
    """Ingest, generate and coassoc stages on the run store at ``url``; returns the store."""
    store = RunStore(url)
    t0 = time.perf_counter()
    info = ingest(
        store, str(KDD), schema="kdd99", classes=["smurf", "neptune", "normal"], subset=n, seed=seed
    )
    print(
        f"ingest   : n = {info['n']}, d = {info['d']}"
        + (" (up to date)" if info.get("skipped") else f" in {time.perf_counter() - t0:.1f} s")
    )
    with dask_client(n_workers=workers, threads_per_worker=1) as client:
        t0 = time.perf_counter()
        res = generate(
            store,
            client,
            n_clusterings=n_partitions,
            ensemble="type1",
            k_min=2,
            k_max=10,
            rate=0.5,
            seed=seed,
        )
        print(
            f"generate : {res['n_clusterings']} k-means partitions, k in [2, 10], rate 0.5"
            + (" (up to date)" if res["skipped"] else f" in {time.perf_counter() - t0:.1f} s")
        )
        t0 = time.perf_counter()
        res = coassoc_stage(store, client, strategy="uniform", seed=seed, p=rate)
        print(
            f"coassoc  : {res['n_pairs']:,} uniform pairs (p = {rate * 1000:g} per mille), "
            f"{res['nnz'] / n:.1f} stored per point"
            + (" (up to date)" if res["skipped"] else f" in {time.perf_counter() - t0:.1f} s")
        )
    return store


def fit_timed(pairs, k, divergence, seed):
    t0, c0 = time.perf_counter(), time.process_time()
    model = PCC(k, divergence=divergence, random_state=seed).fit(pairs)
    return model, time.perf_counter() - t0, time.process_time() - c0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=120_000)
    p.add_argument("--partitions", type=int, default=100)
    p.add_argument("--rate", type=float, default=0.00025)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ks", type=int, nargs="+", default=[3, 4, 5, 8, 10])
    p.add_argument("--store", default="/tmp/ensemble_dask_bench_pcc/kdd.zarr", help="run store URL")
    p.add_argument("--fresh", action="store_true", help="delete the run store first")
    p.add_argument("--workers", type=int, default=2, help="Dask workers of the generate/coassoc stages")
    args = p.parse_args(argv)

    if args.fresh and "://" not in args.store:
        shutil.rmtree(args.store, ignore_errors=True)
    store = build_store(args.store, args.n, args.partitions, args.rate, args.seed, args.workers)
    pairs = read_pairs(store.group).observed()  # pairs never co-present carry no evidence
    y = store["y_true"][:]
    base = base_partition_scores(store)["H"]
    print(
        f"base partitions: mean H = {base['mean']:.3f} (paper: {PAPER_BASE_H:.2f}), "
        f"min {base['min']:.3f}, max {base['max']:.3f}"
    )

    # warm-up on a tiny problem so that numba compilation (or cache loading) is not timed
    tiny = PairCounts.from_pairs(4, [0, 1, 2], [1, 2, 3], [1, 0, 1], [1, 1, 1], 1)
    for div in PAPER_SECONDS:
        PCC(2, divergence=div, random_state=0).fit(tiny)

    print(
        f"\nPCC from a random start, {pairs.n_pairs:,} pairs "
        "(seconds of PCC.fit: wall, and CPU time of this process)"
    )
    print(
        f"{'divergence':>10} {'K':>3} {'wall s':>7} {'CPU s':>7} {'passes':>8} {'conv':>5} "
        f"{'kkt_gap':>9} {'eff_K':>5} {'H':>6}"
    )
    at_k3 = {}
    for div in ("l2", "kl"):
        for k in args.ks:
            m, wall, cpu = fit_timed(pairs, k, div, args.seed)
            if k == 3:
                at_k3[div] = (wall, cpu)
            h = h_criterion(m.labels_, y)
            print(
                f"{div:>10} {k:>3} {wall:>7.2f} {cpu:>7.2f} {m.n_iter_:>8} {str(m.converged_):>5} "
                f"{m.kkt_gap_:>9.2e} "
                f"{m.effective_k_:>5} {h:>6.3f}"
            )
    print()
    for div, (wall, cpu) in at_k3.items():
        paper = PAPER_SECONDS[div]
        print(
            f"PCC-{div.upper()} K=3: {wall:.2f} s wall, {cpu:.2f} s CPU; paper's C code {paper} s "
            f"-> {paper / cpu:.1f}x faster in CPU time"
        )


if __name__ == "__main__":
    main()
