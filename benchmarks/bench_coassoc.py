"""Benchmark of the co-association store (prints its figures; no assertions).

Sections (``--only`` picks some):

``paper``     Lourenço et al. 2015 Sect. 7.3: n = 120,000, 100 clusterings at sampling rate 0.5, uniform
              pairs at p = 0.25 per mille (~1.8M pairs). Seconds for counting on one core (in-memory numba),
              for the whole build (sample + count + write) on the synchronous scheduler and on a
              2-worker LocalCluster, and label comparisons per second.
``budget``    uniform vs cocluster pairs at several budgets (n = 120,000): fraction of stored pairs
              with c_ij > 0, and a consensus accuracy (H criterion against the latent classes) of the
              connected components of the majority graph (pairs with c_ij / N_ij > 1/2).
``kdd``       494,021 points (the size of the KDD'99 10% file), 100 clusterings, per-point l = 30.
``scale``     5,000,000 points, 100 clusterings, written as a chunked zarr store in /tmp, per-point
              l = 20, on a 2-worker LocalCluster: seconds and peak resident memory of every process.

The labels are synthetic (no k-means: 100 fits on 5M points would dominate the run), shaped like
k-means on 3-class data: every point has a latent class (3 classes in the KDD proportions 57/22/20 %)
and a latent position in [0, 1); clustering u has k_u in 2..10 clusters, split among the classes
(for k_u = 2 two classes share a cluster), a class's points are cut into its clusters by position,
10 % of the points get a uniform random cluster, and each clustering holds a random half of the
points (the rest -1).

Usage, from the repository root:
``PYTHONPATH=. python benchmarks/bench_coassoc.py [--only paper,budget,kdd,scale] [--workdir /tmp]
[--strategy per-point|cocluster]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import scipy.sparse as sp
import zarr
from scipy.sparse.csgraph import connected_components

from ensemble_dask.coassoc import (
    build_coassociation,
    count_pairs,
    iter_pair_blocks,
    read_pairs,
    sample_pairs,
)
from ensemble_dask.metrics import h_criterion

N_CLUST = 100
RATE = 0.5
REPEAT = 3


def synthetic_labels(n, n_clust=N_CLUST, rate=RATE, seed=0, rows=None):
    """Rows ``rows`` (default all) of the synthetic labels matrix described in the module docstring."""
    rows = np.arange(n) if rows is None else rows
    crng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    truth, pos = latent(rows, seed)
    rrng = np.random.default_rng(np.random.SeedSequence([seed, int(rows[0])]))
    out = np.empty((len(rows), n_clust), dtype=np.int32)
    for u in range(n_clust):
        k = int(crng.integers(2, 11))
        ids = crng.permutation(k)
        if k == 2:
            shared = crng.integers(3)
            groups = [ids[:1] if c == shared else ids[1:] for c in range(3)]
            groups = [ids[:1], ids[1:], ids[1:]] if shared == 0 else groups
        else:
            cut = np.sort(crng.choice(np.arange(1, k), size=2, replace=False))
            groups = np.split(ids, cut)
        col = np.empty(len(rows), dtype=np.int32)
        for c in range(3):
            m = truth == c
            col[m] = groups[c][(pos[m] * len(groups[c])).astype(np.int64)]
        noise = rrng.random(len(rows)) < 0.1
        col[noise] = rrng.integers(0, k, size=int(noise.sum()))
        col[rrng.random(len(rows)) >= rate] = -1
        out[:, u] = col
    return out


def latent(rows, seed=0):
    """Latent class (KDD proportions) and position in [0, 1) of each row: a fixed hash of (seed, row)."""

    def mix(x):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return ((x ^ (x >> np.uint64(31))) >> np.uint64(11)).astype(np.float64) / 2.0**53

    x = np.asarray(rows, dtype=np.uint64) + np.uint64(seed + 1) * np.uint64(0x9E3779B97F4A7C15)
    v = mix(x)
    w = mix(x ^ np.uint64(0xD6E8FEB86659FD93))
    return np.where(v < 0.57, 0, np.where(v < 0.79, 1, 2)).astype(np.int64), w


def write_labels_store(url, n, row_chunk, seed=0):
    g = zarr.open_group(store=url, mode="w")
    arr = g.create_array("labels", shape=(n, N_CLUST), chunks=(row_chunk, 1), dtype="int32", fill_value=-1)
    for r0 in range(0, n, row_chunk):
        r1 = min(r0 + row_chunk, n)
        arr[r0:r1] = synthetic_labels(n, seed=seed, rows=np.arange(r0, r1))
    return g


def _status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def reset_peak():
    """Reset this process's peak resident set size (VmHWM), as ``echo 5 > clear_refs`` does."""
    with open(f"/proc/{os.getpid()}/clear_refs", "w") as f:
        f.write("5")
    return os.getpid()


def peak_mib(pid=None):
    """Peak resident set size (VmHWM, per process: not inherited from a parent) in MiB."""
    return _status_kib(pid or os.getpid(), "VmHWM") / 1024.0


class MemoryMonitor:
    """Samples the resident memory of this process and all its descendants every ``interval`` s.

    ``peak_total_mib`` is the largest sum seen at one instant (a lower bound of the true peak of
    the sum: it may miss a spike shorter than the interval); the per-process VmHWM peaks, summed,
    bound it from above.
    """

    def __init__(self, interval=0.1):
        self.interval = interval
        self.peak_total_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for proc in [me, *me.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    pass
            self.peak_total_mib = max(self.peak_total_mib, total / 2**20)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def process_peaks(client):
    """VmHWM of this process and of every process below it (workers, nannies...), in MiB, by name."""
    me = psutil.Process()
    workers = {info["pid"]: addr for addr, info in client.run(lambda: {"pid": os.getpid()}).items()}
    out = {"client (+ scheduler)": peak_mib()}
    for proc in me.children(recursive=True):
        try:
            name = f"worker {workers[proc.pid]}" if proc.pid in workers else " ".join(proc.cmdline()[:3])
            out[f"{name} [{proc.pid}]"] = peak_mib(proc.pid)
        except (psutil.Error, OSError):
            pass
    return out


def cluster(n_workers=2):
    from distributed import Client, LocalCluster

    lc = LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0", memory_limit="8GiB"
    )
    return lc, Client(lc)


def timed(fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def bench_paper(workdir):
    n, p = 120_000, 0.00025
    print(f"\n== paper configuration: n={n:,}, {N_CLUST} clusterings at rate {RATE}, uniform p={p} ==")
    labels, t = timed(synthetic_labels, n)
    print(f"synthetic labels: {t:.2f} s")
    (i, j), t_sample = timed(sample_pairs, "uniform", n, seed=1, p=p)
    print(f"sampling {len(i):,} pairs (expected {p * n * (n - 1) / 2:,.0f}): {t_sample:.3f} s")
    count_pairs(labels[:10], i[:1] % 10, j[:1] % 10)  # compile / load the numba cache outside the timing
    best = min(timed(count_pairs, labels, i, j)[1] for _ in range(3))
    comps = len(i) * N_CLUST
    print(
        f"counting on one core (in memory, best of 3): {best:.3f} s = {comps / best / 1e6:,.0f} M label "
        f"comparisons/s ({len(i):,} pairs x {N_CLUST})"
    )
    url = str(Path(workdir) / "bench_paper.zarr")
    g = zarr.open_group(store=url, mode="w")
    g.create_array("labels", data=labels, chunks=(16384, 1))
    del labels
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (2 cores, shared machine)")

    def build(scheduler, mode):
        kwargs = {
            "strategy": "uniform",
            "seed": 1,
            "p": p,
            "client_or_scheduler": scheduler,
            "count_mode": mode,
        }
        return timed(build_coassociation, url, **kwargs)

    one_core = {}
    for mode in ("rows", "join"):
        reset_peak()
        times = [build("sync", mode)[1] for _ in range(REPEAT)]
        one_core[mode] = min(times)
        print(
            f"build on one core (sync scheduler, count_mode={mode}, sample+count+write zarr): best "
            f"{min(times):.2f} s, median {np.median(times):.2f} s of {REPEAT}; "
            f"peak memory {peak_mib():,.0f} MiB"
        )
    lc, client = cluster(2)
    two_workers = {}
    try:
        client.run(lambda: count_pairs([[0], [0]], [0], [1]))  # warm the numba cache in the workers
        for mode in ("rows", "join"):
            reset_peak()
            client.run(reset_peak)
            with MemoryMonitor() as monitor:
                times = [build(client, mode)[1] for _ in range(REPEAT)]
            peaks = process_peaks(client)
            two_workers[mode] = min(times)
            per_process = ", ".join(f"{name.split(' [')[0]} {v:,.0f}" for name, v in peaks.items())
            print(
                f"build on a 2-worker LocalCluster (count_mode={mode}): best {min(times):.2f} s, median "
                f"{np.median(times):.2f} s of {REPEAT}; peak memory "
                f"{per_process} MiB, sum "
                f"{sum(peaks.values()):,.0f} MiB (largest sampled total {monitor.peak_total_mib:,.0f} MiB)"
            )
    finally:
        client.close()
        lc.close()
    print(
        f"SUMMARY 120k: {comps / best / 1e6:,.0f} M label comparisons/s counting on one core; build "
        f"(count_mode=rows, the default here) {one_core['rows']:.2f} s on one core vs "
        f"{two_workers['rows']:.2f} s on a 2-worker LocalCluster "
        f"(= {comps / one_core['rows'] / 1e6:,.0f} vs {comps / two_workers['rows'] / 1e6:,.0f} M label "
        f"comparisons/s end to end)"
    )
    pc = read_pairs(url)
    print(f"stored: {pc.n_pairs:,} pairs, mean N_ij = {pc.both.mean():.1f}, mean c_ij = {pc.co.mean():.1f}")
    shutil.rmtree(url)


def majority_accuracy(pc, truth):
    """H criterion of the connected components of the graph of pairs with c_ij / N_ij > 1/2."""
    rows = pc.rows()
    keep = (pc.both > 0) & (2 * pc.co > pc.both)
    graph = sp.csr_array((np.ones(int(keep.sum())), (rows[keep], pc.indices[keep])), shape=(pc.n, pc.n))
    _, comp = connected_components(graph, directed=False)
    # the three largest components are the consensus clusters; the rest count as errors
    sizes = np.bincount(comp)
    top = np.argsort(sizes)[::-1][:3]
    pred = np.full(pc.n, -1)
    for c, t in enumerate(top):
        pred[comp == t] = c
    pred[pred < 0] = 3
    return h_criterion(pred, truth)


def bench_budget(workdir):
    n = 120_000
    print(f"\n== pair budget: uniform vs cocluster, n={n:,} ==")
    labels = synthetic_labels(n)
    truth = latent(np.arange(n))[0]
    url = str(Path(workdir) / "bench_budget.zarr")
    g = zarr.open_group(store=url, mode="w")
    g.create_array("labels", data=labels, chunks=(16384, 1))
    total = n * (n - 1) / 2
    print(
        f"{'strategy':>10} {'budget':>12} {'pairs':>11} {'per mille':>9} {'frac c>0':>9} "
        f"{'frac c/N>1/2':>12} {'H(majority CC)':>15} {'s':>6}"
    )
    for l in (1, 2, 4, 8, 15):
        for strategy, params in (("uniform", {"p": n * l / total}), ("cocluster", {"l": l, "fraction": 0.5})):
            _, t = timed(
                build_coassociation, url, strategy=strategy, seed=3, client_or_scheduler="sync", **params
            )
            pc = read_pairs(url)
            frac = float(np.mean(pc.co > 0))
            major = float(np.mean(2 * pc.co > pc.both))
            acc = majority_accuracy(pc, truth)
            budget = f"p={params['p']:.2e}" if strategy == "uniform" else f"l={l}"
            print(
                f"{strategy:>10} {budget:>12} {pc.n_pairs:>11,} {1000 * pc.n_pairs / total:>9.4f} "
                f"{frac:>9.3f} {major:>12.3f} {acc:>15.3f} {t:>6.2f}"
            )
    shutil.rmtree(url)


def bench_large(workdir, n, l, row_chunk, label, strategy="per-point"):
    print(f"\n== {label}: n={n:,}, {N_CLUST} clusterings, {strategy} l={l}, 2-worker LocalCluster ==")
    url = str(Path(workdir) / f"bench_{n}.zarr")
    _, t = timed(write_labels_store, url, n, row_chunk)
    print(f"labels written to {url} ({n * N_CLUST * 4 / 2**30:.2f} GiB as int32): {t:.1f} s")
    lc, client = cluster(2)
    try:
        client.run(lambda: count_pairs([[0], [0]], [0], [1]))
        load = os.getloadavg()
        before = {"client": peak_mib(), **{a: v for a, v in client.run(peak_mib).items()}}
        reset_peak()
        client.run(reset_peak)
        with MemoryMonitor() as monitor:
            summary, t = timed(
                build_coassociation, url, strategy=strategy, seed=5, l=l, client_or_scheduler=client
            )
        peaks = process_peaks(client)
    finally:
        client.close()
        lc.close()
    print(
        f"build: {t:.1f} s, {summary['n_pairs']:,} pairs, nnz={summary['nnz']:,}, "
        f"count_mode={summary['count_mode']}, row_block={summary['row_block']:,}, spill={summary['spill']} "
        f"(load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})"
    )
    print(
        "peak resident memory (VmHWM) before the build: "
        f"{', '.join(f'{v:,.0f}' for v in before.values())} MiB"
    )
    print("peak resident memory during the build (VmHWM, reset at its start):")
    for name, v in peaks.items():
        print(f"    {name}: {v:,.0f} MiB")
    print(
        f"    sum of the per-process peaks: {sum(peaks.values()):,.0f} MiB; largest total sampled every "
        f"0.1 s: {monitor.peak_total_mib:,.0f} MiB"
    )
    t = time.perf_counter()
    rows = 0
    for block in iter_pair_blocks(url, rows_per_block=1 << 19):
        rows += block.row_stop - block.row_start
    print(f"streaming read of pairs/ by 524,288-row blocks: {time.perf_counter() - t:.1f} s")
    shutil.rmtree(url)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="paper,budget,kdd,scale")
    parser.add_argument("--workdir", default=tempfile.gettempdir())
    parser.add_argument(
        "--strategy",
        choices=["per-point", "cocluster"],
        default="per-point",
        help="pairs of the kdd and scale sections (cocluster: l = 10, the stage's default)",
    )
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    workdir = Path(tempfile.mkdtemp(prefix="bench_coassoc_", dir=args.workdir))
    print(f"python {sys.version.split()[0]}, workdir {workdir}")
    try:
        if "paper" in only:
            bench_paper(workdir)
        if "budget" in only:
            bench_budget(workdir)
        co = args.strategy == "cocluster"
        if "kdd" in only:
            bench_large(workdir, 494_021, 10 if co else 30, 65_536, "KDD'99 10% size", args.strategy)
        if "scale" in only:
            bench_large(workdir, 5_000_000, 10 if co else 20, 131_072, "5M points", args.strategy)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
