"""PCC on the KDD Cup 99 configuration of papers/003 Sect. 7.3 (prints its figures; no asserts).

120,000 records of smurf/neptune/normal from kddcup.data_10_percent.gz; 100 k-means partitions,
k uniform in [2, 10], each on a 50% subsample; uniformly sampled pairs, p = 0.25 per mille of the
n(n-1)/2 pairs (~1.8M); sparse PCC-KL and PCC-L2 with n*K iterations.
Paper: 13.8 s (L2) and 16.7 s (KL) for its single-core C code; base partitions average H = 79%.

Usage, from the repository root (so that this tree's package is imported):
    PYTHONPATH=. python benchmarks/bench_pcc.py [--n 120000] [--rate 0.00025] [--seed 0] [--ks 3 4 5 8 10]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from ensemble_dask.consensus.pcc import PCC
from ensemble_dask.metrics import h_criterion
from ensemble_dask.pairs import PairCounts

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
KDD = DATA / "kddcup99" / "kddcup.data_10_percent.gz"
CACHE = Path("/tmp/ensemble_dask_bench_cache")

# =============================================================================================
# Input glue. Builds the labels matrix and the sampled pair counts in-process until
# ensemble_dask.datasets (KDD reader), ensemble_dask.generate and the co-association store land
# on main; then these four functions are to be replaced by the package's pipeline.
# =============================================================================================

KDD_COLUMNS = (
    "duration protocol_type service flag src_bytes dst_bytes land wrong_fragment urgent hot "
    "num_failed_logins logged_in num_compromised root_shell su_attempted num_root num_file_creations "
    "num_shells num_access_files num_outbound_cmds is_host_login is_guest_login count srv_count "
    "serror_rate srv_serror_rate rerror_rate srv_rerror_rate same_srv_rate diff_srv_rate "
    "srv_diff_host_rate dst_host_count dst_host_srv_count dst_host_same_srv_rate dst_host_diff_srv_rate "
    "dst_host_same_src_port_rate dst_host_srv_diff_host_rate dst_host_serror_rate dst_host_srv_serror_rate "
    "dst_host_rerror_rate dst_host_srv_rerror_rate label"
).split()


def load_kdd(n, seed):
    """n random records of the three main classes; numeric standardised, categoricals coded."""
    import pandas as pd

    df = pd.read_csv(KDD, header=None, names=KDD_COLUMNS)
    df = df[df["label"].isin(["smurf.", "neptune.", "normal."])]
    df = df.sample(n=n, random_state=seed).reset_index(drop=True)
    y = pd.factorize(df.pop("label"), sort=True)[0]
    for col in ("protocol_type", "service", "flag"):
        df[col] = pd.factorize(df[col], sort=True)[0]
    X = df.to_numpy(dtype=np.float64)
    std = X.std(axis=0)
    X = (X[:, std > 0] - X[:, std > 0].mean(axis=0)) / std[std > 0]  # constant columns dropped
    return X.astype(np.float32), y


def kmeans_ensemble(X, n_partitions, seed, k_range=(2, 10), rate=0.5):
    """n x N labels: k-means with random k and random init on a random subsample; -1 = absent."""
    from sklearn.cluster import KMeans

    n = X.shape[0]
    labels = np.full((n, n_partitions), -1, dtype=np.int32)
    for u, s in enumerate(np.random.SeedSequence(seed).spawn(n_partitions)):
        rng = np.random.default_rng(s)
        k = int(rng.integers(k_range[0], k_range[1] + 1))
        rows = np.sort(rng.choice(n, size=int(rate * n), replace=False))
        km = KMeans(k, init="random", n_init=1, random_state=int(rng.integers(2**31)))
        labels[rows, u] = km.fit_predict(X[rows])
    return labels


def sample_pairs(n, rate, seed):
    """Uniform sample of round(rate * n(n-1)/2) distinct unordered pairs, without enumerating them."""
    rng = np.random.default_rng(seed)
    m = int(round(rate * n * (n - 1) / 2))
    keys = np.empty(0, dtype=np.int64)
    while keys.size < m:
        i = rng.integers(0, n, size=2 * (m - keys.size) + 16)
        j = rng.integers(0, n, size=i.size)
        ok = i != j
        lo, hi = np.minimum(i[ok], j[ok]), np.maximum(i[ok], j[ok])
        keys = np.unique(np.concatenate([keys, lo * n + hi]))
    keys = rng.permutation(keys)[:m]
    return keys // n, keys % n


def count_pairs(labels, i, j, chunk=200_000):
    """c_ij and N_ij of the given pairs from the labels matrix."""
    co = np.empty(i.size, dtype=np.int32)
    both = np.empty(i.size, dtype=np.int32)
    for s in range(0, i.size, chunk):
        a, b = labels[i[s : s + chunk]], labels[j[s : s + chunk]]
        present = (a >= 0) & (b >= 0)
        both[s : s + chunk] = present.sum(axis=1)
        co[s : s + chunk] = (present & (a == b)).sum(axis=1)
    return co, both


# =============================================================================================


def build_inputs(n, n_partitions, rate, seed):
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"kdd_labels_n{n}_N{n_partitions}_s{seed}.npz"
    t0 = time.perf_counter()
    if path.exists():
        z = np.load(path)
        labels, y = z["labels"], z["y"]
        print(f"labels matrix: cached {path}")
    else:
        X, y = load_kdd(n, seed)
        print(f"data: {X.shape[0]} x {X.shape[1]} features, classes {np.bincount(y).tolist()}")
        labels = kmeans_ensemble(X, n_partitions, seed)
        np.savez(path, labels=labels, y=y)
        print(f"labels matrix: {n_partitions} k-means partitions in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    i, j = sample_pairs(n, rate, seed)
    co, both = count_pairs(labels, i, j)
    keep = both > 0  # pairs never co-present carry no information
    pairs = PairCounts.from_pairs(n, i[keep], j[keep], co[keep], both[keep], n_partitions)
    print(
        f"pairs: {pairs.n_pairs:,} sampled (rate {rate * 1000:g} per mille, "
        f"{np.count_nonzero(~keep)} dropped "
        f"with N_ij = 0), {pairs.nnz / n:.1f} stored per point, built in {time.perf_counter() - t0:.1f} s"
    )
    return labels, y, pairs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=120_000)
    p.add_argument("--partitions", type=int, default=100)
    p.add_argument("--rate", type=float, default=0.00025)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ks", type=int, nargs="+", default=[3, 4, 5, 8, 10])
    args = p.parse_args(argv)

    labels, y, pairs = build_inputs(args.n, args.partitions, args.rate, args.seed)
    base_h = [h_criterion(labels[:, u], y) for u in range(labels.shape[1])]
    print(
        f"base partitions: mean H = {np.mean(base_h):.3f} (paper: 0.79), "
        f"min {min(base_h):.3f}, max {max(base_h):.3f}"
    )

    # warm-up on a tiny problem so that numba compilation (or cache loading) is not timed
    tiny = PairCounts.from_pairs(4, [0, 1, 2], [1, 2, 3], [1, 0, 1], [1, 1, 1], 1)
    for div in ("kl", "l2"):
        PCC(2, divergence=div, solver="sparse", random_state=0).fit(tiny)

    print(f"\n{'divergence':>10} {'K':>3} {'seconds':>8} {'n_iter':>8} {'kkt_gap':>9} {'eff_K':>5} {'H':>6}")
    for div, paper in (("l2", 13.8), ("kl", 16.7)):
        for k in args.ks:
            t0 = time.perf_counter()
            m = PCC(k, divergence=div, solver="sparse", random_state=args.seed).fit(pairs)
            dt = time.perf_counter() - t0
            h = h_criterion(m.labels_, y)
            note = f"   (paper's C code: {paper} s)" if k == 3 else ""
            print(
                f"{div:>10} {k:>3} {dt:>8.2f} {m.n_iter_:>8} {m.kkt_gap_:>9.2e} "
                f"{m.effective_k_:>5} {h:>6.3f}{note}"
            )


if __name__ == "__main__":
    main()
