"""Speed benchmark of BCE on the KDD Cup 99 10% file (494,021 records), built by the package; prints.

The input is made the way a user makes it, in a run store in a temporary directory:

* ``ingest(store, KDD_FILE, schema="kdd99")`` on the whole file;
* ``generate(store, client, n_clusterings=20, ensemble="type1", k_min=3, k_max=12, rate=1.0,
  seed=0)`` on ``dask_client(n_workers=2)`` (k-means on all rows, k drawn in 3..12).

Then BCE with k=5:

* in memory on one core (``BCE``, in a fresh child process with one thread per pool): seconds
  per EM iteration, iterations to converge, peak memory of the fit (VmHWM of that process,
  reset after the labels are loaded; ``ru_maxrss`` of a child would include the pages of the
  parent it was forked from);
* on the same 2-worker LocalCluster (``fit_bce_dask`` on the store's ``labels`` URL, in blocks
  of 50,000 rows): seconds per EM iteration and the ratio to one core;
* row-distributed over 3 sites (one local worker process per site, :func:`federated_section`), on
  these labels and on the federated demo's 20,000 rows: seconds per EM iteration in memory, with
  plain and with secure aggregation, each over TCP and over TLS (fits of the two modes
  interleaved, so that both see the same load): the overheads of masking and of TLS.

Identical label rows are merged before the E-step (exact: they have identical E-steps), and
KDD has many: the E-step runs on the distinct rows only. The kernel's throughput with and
without merging is printed too.

Time per EM iteration (E-step, aggregation of the statistics, M-step) is the median gap between
consecutive E-step calls of fits with tol=0 (time stamps around the product's E-step object;
the first, cold E-step is left out), so setup (reading, encoding, merging, compilation) is not
in it. The machine may be shared: the load average is printed with the figures.

``--federated-only --rows 5000000`` times the federated configurations alone on 5 million rows of
synthetic labels (:func:`synthetic_labels`: nearly all distinct, the E-step's worst case).

Usage: python benchmarks/bench_bce.py [--quick] [--iters 21] [--repeats 3] [--fed-repeats 8] [--federated-only [--rows N]]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

# quieter Dask: worker processes inherit this (distributed's INFO lines on every cluster close)
os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout (python benchmarks/bench_bce.py) without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helpers

from _proc import ONE_THREAD, load_average, reset_peak, status_mib  # noqa: E402

from ensemble_dask.metrics import micro_precision  # noqa: E402

KDD_FILE = ROOT.parent / "shared" / "data" / "kddcup99" / "kddcup.data_10_percent.gz"
K = 5
SITES = ["site-a", "site-b", "site-c"]
BLOCK_ROWS = 50_000
CONVERGE_MAX_ITER = 2000  # BCE's default max_iter=300 stops this fit short of tol=1e-5


@contextlib.contextmanager
def iteration_clock(estep_class):
    """Time stamps of every call of ``estep_class.__call__`` (one call per EM iteration).

    Only a time stamp is added around the product's own E-step object; the fit is unchanged.
    """
    stamps = []
    orig = estep_class.__call__

    def call(self, params, t):
        stamps.append(time.perf_counter())
        return orig(self, params, t)

    estep_class.__call__ = call
    try:
        yield stamps
    finally:
        estep_class.__call__ = orig


def per_iteration(estep_class, run, n_iter, repeats):
    """Seconds per EM iteration (E-step + aggregation + M-step), from ``repeats`` fits of ``n_iter``.

    A fit with tol=0 calls the E-step ``n_iter`` times; the gaps between consecutive calls are
    whole iterations. The first gap (the cold E-step from gamma = -1) is left out. Returns
    ``{"median", "mean", "setup"}``: median and mean of the gaps, and the best time from the
    start of a fit to its first E-step (reading, encoding, merging).
    """
    gaps, setup = [], []
    for _ in range(repeats):
        with iteration_clock(estep_class) as stamps:
            t0 = time.perf_counter()
            run(n_iter)
        setup.append(stamps[0] - t0)
        gaps.extend(np.diff(stamps)[1:])
    return {"median": float(np.median(gaps)), "mean": float(np.mean(gaps)), "setup": min(setup)}


# --------------------------------------------------------------------------- one core, child


def child_in_memory(store_url, n_iter, repeats, converge):
    """One core, in memory; runs in a fresh process. Returns a dict of figures."""
    from ensemble_dask.consensus._bce_common import _InMemoryEStep
    from ensemble_dask.consensus.bce import BCE, compress_rows, encode_labels, estep_stats, label_categories
    from ensemble_dask.io.store import RunStore

    store = RunStore(store_url, mode="r")
    labels = store["labels"][:]
    y = store["y_true"][:]
    BCE(K, max_iter=2, random_state=0).fit(labels[:1000])  # compile (or load numba's cache)
    out = {"rss_before_mib": status_mib("VmRSS"), "labels_mib": labels.nbytes / 2**20}
    out["peak_reset"] = reset_peak()
    out["iter"] = per_iteration(
        _InMemoryEStep,
        lambda m: BCE(K, max_iter=m, tol=0.0, random_state=0).fit(labels),
        n_iter,
        repeats,
    )
    if converge:
        t0 = time.perf_counter()
        est = BCE(K, max_iter=CONVERGE_MAX_ITER, random_state=0).fit(labels)
        out.update(
            converge_s=time.perf_counter() - t0,
            n_iter=int(est.n_iter_),
            converged=bool(est.converged_),
            lower_bound=float(est.lower_bound_),
            effective_k=int(est.effective_k_),
            mp=float(micro_precision(est.labels_, y)),
        )
    out["peak_mib"] = status_mib("VmHWM")

    # the E-step kernel alone, warm-started, with and without merging identical rows
    cats = label_categories(labels)
    gidx, _ = encode_labels(labels, cats)
    t0 = time.perf_counter()
    uniq, weight, _ = compress_rows(gidx)
    out["merge_s"] = time.perf_counter() - t0
    est = BCE(K, random_state=0)
    est._check_params()
    params = est._random_params(np.random.default_rng(0), cats)
    n, N = gidx.shape
    for name, g, w in (("merged", uniq, weight), ("unmerged", gidx, np.ones(n))):
        gamma = np.full((g.shape[0], K), -1.0)
        times = []
        for _ in range(4):  # the first call starts from gamma = -1 (cold), the others are warm
            t0 = time.perf_counter()
            estep_stats(g, np.ones(N), np.empty((g.shape[0], 0)), np.empty(0), params, gamma, 1e-4, 100, w)
            times.append(time.perf_counter() - t0)
        out[f"estep_{name}_s"] = min(times[1:])
        out[f"estep_{name}_rows"] = int(g.shape[0])
    out["n"], out["N"] = int(n), int(N)
    return out


def run_child(store_url, n_iter, repeats, converge):
    cmd = [sys.executable, __file__, "--child", store_url, "--iters", str(n_iter), "--repeats", str(repeats)]
    cmd += [] if converge else ["--quick"]
    res = subprocess.run(
        cmd, env={**os.environ, **ONE_THREAD}, capture_output=True, text=True, check=False, cwd=ROOT
    )
    if res.returncode:
        sys.stderr.write(res.stderr)
        raise SystemExit(f"in-memory child failed with code {res.returncode}")
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


# --------------------------------------------------------------------------- federated (3 sites)


def demo_labels(tmp):
    """The federated demo's labels: synthetic KDD-schema table, 20,000 rows, 30 k-means clusterings."""
    from ensemble_dask.io.store import RunStore
    from ensemble_dask.parallel import dask_client
    from ensemble_dask.stages.generate import generate
    from ensemble_dask.stages.ingest import ingest

    store = RunStore(os.path.join(tmp, "demo.zarr"))
    ingest(store, "synthetic:kdd99?n=20000&seed=0")
    with dask_client(n_workers=2) as client:
        generate(store, client, n_clusterings=30, k_min=2, k_max=10, rate=0.5, seed=0)
    return store["labels"][:], tmp


def synthetic_labels(n, n_clusterings=20, seed=0):
    """``n`` rows of labels without data behind them: 5 latent classes, clustering ``j`` a noisy copy.

    Clustering ``j`` has ``k_j`` in 3..12 labels; a row's label is its class's label (a random map of
    the 5 classes onto the ``k_j`` labels) with probability 0.7, else a uniform draw. Nearly every row
    is distinct, so merging identical rows saves nothing: the E-step's worst case at this size.
    """
    rng = np.random.default_rng(seed)
    cls = rng.integers(0, 5, size=n)
    out = np.empty((n, n_clusterings), dtype=np.int32)
    for j in range(n_clusterings):
        k = int(rng.integers(3, 13))
        noisy = rng.random(n) >= 0.7
        col = rng.integers(0, k, size=5)[cls]
        col[noisy] = rng.integers(0, k, size=int(noisy.sum()))
        out[:, j] = col
    return out


def masking_seconds(result, repeats=200):
    """Seconds one site spends masking a statistics vector of ``result``'s size (2 peers, in this process)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    from ensemble_dask.federated.secure import derive_pair_keys, mask_vector

    keys = {s: X25519PrivateKey.generate() for s in SITES}
    roster = {s: k.public_key().public_bytes_raw() for s, k in keys.items()}
    pair = derive_pair_keys(keys[SITES[0]], SITES[0], roster, "bench")
    k, R = result.alpha_.size, sum(b.shape[1] for b in result.beta_)
    vec = np.random.default_rng(0).random(k * R + k + 2)
    t0 = time.perf_counter()
    for r in range(repeats):
        mask_vector(vec, SITES[0], pair, r + 1, n_sites=len(SITES))
    return (time.perf_counter() - t0) / repeats


def federated_section(labels, tmp, what, iters, repeats):
    """Seconds per EM iteration of row-distributed BCE over 3 local site processes, by configuration.

    In memory (``BCE`` in this process, one core) against ``run_federated_bce`` with plain and with
    secure aggregation, each over plain TCP and over TLS (certificates from ``make_certs``; every site
    worker loads its masking key with the site preload). Per configuration: the median gap between
    consecutive EM iterations (``progress`` callback time stamps, first gap left out) over
    ``repeats`` fits of ``iters`` iterations; plain and secure fits interleaved on the same cluster.
    """
    from ensemble_dask.consensus._bce_common import _InMemoryEStep
    from ensemble_dask.consensus.bce import BCE
    from ensemble_dask.federated.certs import load_mask_public, make_certs
    from ensemble_dask.federated.rows import run_federated_bce
    from ensemble_dask.stages.federated import _local_sites_cluster

    root = Path(tmp) / f"fed-{labels.shape[0]}"
    certs = root / "certs"
    make_certs(certs, ["coordinator", *SITES])
    pins = {s: load_mask_public(certs / f"{s}-mask.pub") for s in SITES}
    bounds = np.linspace(0, labels.shape[0], len(SITES) + 1).astype(int)
    sites = []
    for name, a, b in zip(SITES, bounds[:-1], bounds[1:], strict=True):
        np.save(root / f"{name}.npy", labels[a:b])
        sites.append({"name": name, "url": str(root / f"{name}.npy"), "resource": name})
    mem = per_iteration(
        _InMemoryEStep,
        lambda m: BCE(K, init="random", max_iter=m, tol=0.0, random_state=0).fit(labels),
        iters,
        1,
    )  # the federated fits start from random draws too (k-means++ needs all rows in one place)
    rows = {"in memory": [mem["median"]]}
    bounds_seen = {}
    for tls in (False, True):
        with _local_sites_cluster(sites, certs, tls) as client:
            run_federated_bce(sites, K, client, max_iter=2, pins=pins, random_state=0)  # compile, warm
            for r in range(repeats):
                for mode in ("plain", "secure") if r % 2 == 0 else ("secure", "plain"):
                    stamps = []
                    res = run_federated_bce(
                        sites, K, client, mode=mode, max_iter=iters, tol=0.0, random_state=0, pins=pins,
                        progress=lambda t, b, stamps=stamps: stamps.append(time.perf_counter()),
                    )  # fmt: skip
                    bounds_seen[mode] = res.lower_bound_
                    rows.setdefault(f"{mode}, {'TLS' if tls else 'TCP'}", []).append(
                        float(np.median(np.diff(stamps)[1:]))
                    )
    ref = BCE(K, init="random", max_iter=iters, tol=0.0, random_state=0).fit(labels)
    print(
        f"\n== row-distributed BCE k={K}, {what} x {labels.shape[1]} clusterings, {len(SITES)} sites (one "
        f"worker process each); seconds per EM iteration, median over {repeats} fits x {iters - 2} warm "
        f"iterations =="
    )
    med = {k: float(np.median(v)) for k, v in rows.items()}
    for k, v in med.items():
        print(f"{k:<16} {1000 * v:9.2f} ms  ({v / med['in memory']:.2f} x in memory)")
    print(
        f"masking overhead: {100 * (med['secure, TCP'] / med['plain, TCP'] - 1):+.1f}% over TCP, "
        f"{100 * (med['secure, TLS'] / med['plain, TLS'] - 1):+.1f}% over TLS; TLS overhead: "
        f"{100 * (med['plain, TLS'] / med['plain, TCP'] - 1):+.1f}% plain, "
        f"{100 * (med['secure, TLS'] / med['secure, TCP'] - 1):+.1f}% secure; secure+TLS vs plain TCP: "
        f"{100 * (med['secure, TLS'] / med['plain, TCP'] - 1):+.1f}%"
    )
    print(f"masking compute alone, per site and iteration: {1e6 * masking_seconds(res):.0f} us")
    print(
        f"secure vs centralised after {iters} iterations: relative bound difference "
        f"{abs(bounds_seen['secure'] / ref.lower_bound_ - 1):.1e}; {load_average()}"
    )


# --------------------------------------------------------------------------- parent


def _worker_hwm():
    return status_mib("VmHWM")


def ms(d):
    return f"{1000 * d['median']:8.2f} ms (mean {1000 * d['mean']:.2f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer timed iterations, no convergence runs")
    ap.add_argument("--iters", type=int, default=21, help="max_iter of each timed fit (tol=0)")
    ap.add_argument("--repeats", type=int, default=3, help="timed fits per configuration")
    ap.add_argument("--fed-repeats", type=int, default=8, help="timed federated fits per mode")
    ap.add_argument("--federated-only", action="store_true", help="only the federated timings (3 sites)")
    ap.add_argument(
        "--rows",
        type=int,
        default=0,
        help="with --federated-only: only N rows of synthetic labels (e.g. 5000000)",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    if args.quick:
        args.iters, args.repeats, args.fed_repeats = min(args.iters, 6), 1, 2
    if args.child:
        out = child_in_memory(args.child, args.iters, args.repeats, not args.quick)
        print("RESULT " + json.dumps(out))
        return
    if args.federated_only:
        federated_only(args)
        return

    from ensemble_dask.federated.dask import DaskBlockEStep, fit_bce_dask
    from ensemble_dask.io.store import RunStore
    from ensemble_dask.parallel import dask_client
    from ensemble_dask.stages.generate import generate
    from ensemble_dask.stages.ingest import ingest

    timed = f"median (mean) over {args.repeats} fits x {args.iters - 2} warm iterations"
    t_start = time.perf_counter()
    print(load_average())
    with tempfile.TemporaryDirectory(prefix="bench_bce_") as tmp:
        store = RunStore(os.path.join(tmp, "run.zarr"))
        t0 = time.perf_counter()
        info = ingest(store, str(KDD_FILE), schema="kdd99")
        print(
            f"ingest: {info['n']:,} records, d={info['d']} "
            f"(dropped constant: {info['dropped_constant']}), {len(info['classes'])} classes, "
            f"{time.perf_counter() - t0:.1f} s"
        )
        labels_url = f"{store.url}/labels"
        with dask_client(n_workers=2) as client:
            t0 = time.perf_counter()
            generate(store, client, n_clusterings=20, ensemble="type1", k_min=3, k_max=12, rate=1.0, seed=0)
            gen_s = time.perf_counter() - t0
            labels = store["labels"][:]
            y = store["y_true"][:]
            n, N = labels.shape
            ks = [p["k"] for p in store["labels"].attrs["partitions"]]
            base_mp = [micro_precision(labels[:, j], y) for j in range(N)]
            print(
                f"generate: {N} k-means clusterings (type1, k in 3..12, rate 1.0) of all {n:,} rows "
                f"on 2 workers, {gen_s:.1f} s; k = {ks}"
            )
            print(
                f"micro-precision of the base clusterings vs the {y.max() + 1} labels: "
                f"mean {np.mean(base_mp):.4f}, max {np.max(base_mp):.4f}"
            )
            distinct = np.unique(labels, axis=0).shape[0]
            per_block = sum(
                np.unique(labels[a : a + BLOCK_ROWS], axis=0).shape[0] for a in range(0, n, BLOCK_ROWS)
            )
            print(
                f"distinct label rows: {distinct:,} of {n:,}; the E-step merges identical rows (exact), "
                f"so it runs on {distinct:,} rows in memory and on {per_block:,} rows over the "
                f"{-(-n // BLOCK_ROWS)} Dask blocks of {BLOCK_ROWS:,} rows"
            )
            print(load_average())

            # ---- 2-worker LocalCluster, labels read from the run store in row blocks
            client.restart()  # fresh worker processes: their peak memory is the fit's
            client.run(reset_peak)
            fit_bce_dask(labels_url, K, client=client, block_rows=BLOCK_ROWS, max_iter=2, random_state=0)
            dask_it = per_iteration(
                DaskBlockEStep,
                lambda m: fit_bce_dask(
                    labels_url, K, client=client, block_rows=BLOCK_ROWS, max_iter=m, tol=0.0, random_state=0
                ),
                args.iters,
                args.repeats,
            )
            dask_fit = None
            if not args.quick:
                t0 = time.perf_counter()
                dask_fit = fit_bce_dask(
                    labels_url,
                    K,
                    client=client,
                    block_rows=BLOCK_ROWS,
                    max_iter=CONVERGE_MAX_ITER,
                    random_state=0,
                )
                dask_fit_s = time.perf_counter() - t0
            worker_peak = sorted(client.run(_worker_hwm).values())
            load_dask = load_average()

        # ---- one core, in memory (fresh process)
        mem = run_child(store.url, args.iters, args.repeats, not args.quick)
        load_mem = load_average()
        mem_it = mem["iter"]

        print(f"\n== BCE k={K} on the {n:,} x {N} labels; seconds per EM iteration: {timed} ==")
        print(
            f"in memory, 1 core:           {ms(mem_it)}; setup before the first E-step {mem_it['setup']:.2f} s"
        )
        print(
            f"Dask, 2 workers x 1 thread:  {ms(dask_it)}; setup before the first E-step "
            f"{dask_it['setup']:.2f} s"
        )
        print(
            f"ratio 1 core / Dask 2 workers (median): {mem_it['median'] / dask_it['median']:.3f} "
            "(> 1: Dask faster)"
        )
        if "n_iter" in mem:
            print(
                f"in memory to convergence (tol=1e-5, max_iter={CONVERGE_MAX_ITER}): {mem['n_iter']} iterations, "
                f"{mem['converge_s']:.2f} s in all, converged={mem['converged']}, "
                f"effective k={mem['effective_k']}, micro-precision vs the {y.max() + 1} labels "
                f"{mem['mp']:.4f}"
            )
        if dask_fit is not None:
            print(
                f"Dask to convergence: {dask_fit.n_iter_} iterations, {dask_fit_s:.2f} s in all, "
                f"relative bound difference to in memory "
                f"{abs(dask_fit.lower_bound_ / mem['lower_bound'] - 1):.1e}, "
                f"micro-precision {micro_precision(dask_fit.labels_, y):.4f}"
            )
        print(
            f"peak memory, in memory: VmHWM {mem['peak_mib']:.0f} MiB over the fits "
            f"(reset after loading: {'yes' if mem['peak_reset'] else 'no'}; RSS before the fits "
            f"{mem['rss_before_mib']:.0f} MiB, labels matrix {mem['labels_mib']:.0f} MiB)"
        )
        print(
            "peak memory, Dask workers (VmHWM since restart): "
            f"{', '.join(f'{w:.0f}' for w in worker_peak)} MiB"
        )
        m_rows, u_rows = mem["estep_merged_rows"], mem["estep_unmerged_rows"]
        print(
            f"E-step kernel, 1 core, warm start: merged ({m_rows:,} distinct rows, weighted) "
            f"{1000 * mem['estep_merged_s']:.2f} ms = {n / mem['estep_merged_s']:,.0f} input rows/s; "
            f"unmerged ({u_rows:,} rows) {mem['estep_unmerged_s']:.3f} s = "
            f"{n / mem['estep_unmerged_s']:,.0f} rows/s; merging itself {mem['merge_s']:.2f} s once per fit"
        )
        print(f"during the Dask timings: {load_dask}; during the in-memory timings: {load_mem}")

        # ---- 3 sites: in memory vs plain vs secure aggregation, over TCP and over TLS
        federated_section(labels, tmp, f"KDD {n:,} rows", args.iters, args.fed_repeats)
        federated_section(*demo_labels(tmp), "synthetic 20,000 rows", args.iters, args.fed_repeats)
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s; {load_average()}")


def federated_only(args):
    """The federated timings alone: the demo's 20,000 rows, then KDD (ingest + 20 k-means clusterings)."""
    from ensemble_dask.io.store import RunStore
    from ensemble_dask.parallel import dask_client
    from ensemble_dask.stages.generate import generate
    from ensemble_dask.stages.ingest import ingest

    print(load_average())
    if args.rows:
        with tempfile.TemporaryDirectory(prefix="bench_fed_") as tmp:
            labels = synthetic_labels(args.rows)
            what = f"{args.rows:,} rows of synthetic labels ({len(np.unique(labels, axis=0)):,} distinct)"
            federated_section(labels, tmp, what, args.iters, args.fed_repeats)
        return
    with tempfile.TemporaryDirectory(prefix="bench_fed_") as tmp:
        federated_section(*demo_labels(tmp), "synthetic 20,000 rows", args.iters, args.fed_repeats)
        store = RunStore(os.path.join(tmp, "run.zarr"))
        ingest(store, str(KDD_FILE), schema="kdd99")
        with dask_client(n_workers=2) as client:
            generate(store, client, n_clusterings=20, ensemble="type1", k_min=3, k_max=12, rate=1.0, seed=0)
        labels = store["labels"][:]
        federated_section(labels, tmp, f"KDD {labels.shape[0]:,} rows", args.iters, args.fed_repeats)


if __name__ == "__main__":
    main()
