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
* row-distributed over 3 sites on these labels and on the federated demo's 20,000 rows
  (:func:`federated_suite`): plain against secure aggregation, as below.

Identical label rows are merged before the E-step (exact: they have identical E-steps), and
KDD has many: the E-step runs on the distinct rows only. The kernel's throughput with and
without merging is printed too.

Time per EM iteration (E-step, aggregation of the statistics, M-step) is the median gap between
consecutive E-step calls of fits with tol=0 (time stamps around the product's E-step object;
the first, cold E-step is left out), so setup (reading, encoding, merging, compilation) is not
in it. The machine may be shared: the load average is printed with the figures.

``--federated-only`` is the cost of secure aggregation (issue 25): ``--rows`` (default 1,000,000) rows of
synthetic labels (:func:`synthetic_labels`: nearly all distinct, the E-step's worst case) cut into 3, then
5 sites, each a real site agent process (``python -m ensemble_dask.federated.site.agent``, its own keys and
``site.yaml`` as the federated demo writes them, plain mode allowed, no E-step checkpoint unless
``--site-checkpoint``) on this machine; ``run_federated_bce`` over mutual TLS in plain mode (statistics in
clear) and in secure mode (a SecAgg+ round per sum), the same EM iterations (``--fed-iters``, tol=0) each,
after one warm-up fit per mode; ``--repeat`` pairs alternating which mode goes first. Reported per fit:
``seconds_per_iteration`` (the EM rounds, E-step and aggregation, as the result gives it) and the whole fit
(join, category rounds, preparing the rows, memberships written), the secure / plain ratio pair by pair and
its median; with 5 sites also with ``min_sites=4`` in every site's config (threshold 4: the round survives
a dropout). ``--phases`` adds the coordinator's wait per request kind. Every agent and the coordinator
share this machine's cores (printed); no figure is checked, they are printed.

Usage: python benchmarks/bench_bce.py [--quick] [--iters 21] [--repeats 3] [--repeat 3]
       python benchmarks/bench_bce.py --federated-only [--rows 1000000] [--sites 3,5] [--repeat 3] [--phases]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
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
    from ensemble_dask.consensus._common.encoding import compress_rows
    from ensemble_dask.consensus.bce import BCE
    from ensemble_dask.consensus.bce._em import _InMemoryEStep, encode_labels, estep_stats, label_categories
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
    est._validate_params()
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


# --------------------------------------------------------------------------- federated (site agents)

#: issue 25's cost goals: secure / plain seconds per EM iteration over TLS at 1,000,000 rows, by sites
GOALS = {3: 1.15, 5: 1.30}


def demo_labels(tmp):
    """The federated demo's labels: synthetic KDD-schema table, 20,000 rows, 30 k-means clusterings."""
    from ensemble_dask.io.store import RunStore
    from ensemble_dask.runtime.clients import dask_client
    from ensemble_dask.stages.generate import generate
    from ensemble_dask.stages.ingest import ingest

    store = RunStore(os.path.join(tmp, "demo.zarr"))
    ingest(store, "synthetic:kdd99?n=20000&seed=0")
    with dask_client(n_workers=2) as client:
        generate(store, client, n_clusterings=30, k_min=2, k_max=10, rate=0.5, seed=0)
    return store["labels"][:]


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


def site_configs(root, names, certs, *, min_sites=None, allow_plain=False, checkpoint=True):
    """Each site's own directory and ``site.yaml`` under ``ROOT/sites/NAME``, as the federated demo writes
    them (:func:`~ensemble_dask.stages.sites.write_demo_configs`; keys from ``certs``, made there by
    ``make_certs``); ``allow_plain`` lets the site answer plain mode, ``checkpoint=False`` drops the
    site's E-step checkpoint (written after every E-step). Returns ``(local, configs)``: the sites'
    declarations (``url``: where its labels go, ``output``: its memberships) and the config paths."""
    import yaml

    from ensemble_dask.stages.sites import _demo_layout, write_demo_configs

    local = _demo_layout([{"name": n} for n in names], root)
    configs = write_demo_configs(local, certs, min_sites)
    for cfg in configs:
        spec = yaml.safe_load(cfg.read_text())
        spec["allow_plain"] = bool(allow_plain)
        if not checkpoint:
            spec.pop("checkpoint", None)
        cfg.write_text(yaml.safe_dump(spec, sort_keys=False))
    return local, configs


@contextlib.contextmanager
def phase_clock(enabled):
    """Seconds the coordinator spends per request kind in the EM rounds (``Federation._ask`` by op:
    ``masked``, and in secure mode ``keys``, ``unmask``, plus ``unmask_words``, its own unmasking);
    ``{}`` when not ``enabled``. Only time stamps are added; the requests are unchanged."""
    times = {}
    if not enabled:
        yield times
        return
    from ensemble_dask.federated.coordinator import link as coordinator
    from ensemble_dask.federated.protocol import secagg

    orig_ask, orig_unmask = coordinator.Federation._ask, secagg.unmask_words
    em = [False]

    def ask(self, names, op, messages, what):
        em[0] = str(what).startswith("EM iteration")
        t0 = time.perf_counter()
        try:
            return orig_ask(self, names, op, messages, what)
        finally:
            if em[0]:
                times[op] = times.get(op, 0.0) + time.perf_counter() - t0

    def unmask(*a, **kw):
        t0 = time.perf_counter()
        try:
            return orig_unmask(*a, **kw)
        finally:
            if em[0]:
                times["unmask_words"] = times.get("unmask_words", 0.0) + time.perf_counter() - t0

    coordinator.Federation._ask, secagg.unmask_words = ask, unmask
    try:
        yield times
    finally:
        coordinator.Federation._ask, secagg.unmask_words = orig_ask, orig_unmask


def secagg_seconds(n_sites, t, size, repeats=20):
    """Crypto of one SecAgg+ round for a vector of ``size`` entries, every party in this process:
    ``(seconds per site, seconds at the coordinator)``. A site: ``advertise`` (round key, Shamir shares,
    their encryption, bound to a 32-byte transcript as the agent's), ``receive_shares`` + ``masked_input``
    (decryption, pair masks), ``confirm_tag`` to each peer and ``check_tags`` (the consistency check),
    ``reveal``; the coordinator: ``unmask_words`` (Shamir combine, self masks). No network, no E-step."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    from ensemble_dask.federated.protocol import secagg
    from ensemble_dask.federated.protocol.secure import sum_words

    names = [f"s{i}" for i in range(n_sites)]
    own = {n: X25519PrivateKey.generate() for n in names}
    pins = {n: k.public_key().public_bytes_raw() for n, k in own.items()}
    session = "0123456789abcdef" * 2
    channel = {n: secagg.channel_keys(own[n], n, pins, session) for n in names}
    vec = np.random.default_rng(0).random(size)
    site_s = coord_s = 0.0
    for r in range(1, repeats + 1):
        t0 = time.perf_counter()
        context = bytes(32)  # the agent's transcript digest of the session (the same at every site)
        adv = {n: secagg.advertise(n, names, channel[n], session, r, t, context=context) for n in names}
        keys = {n: a[1] for n, a in adv.items()}
        words = []
        for n in names:
            shares = {u: adv[u][2][n] for u in names if u != n}
            secagg.receive_shares(n, adv[n][0], keys, shares, channel[n], session)
            words.append(secagg.masked_input(vec, n, adv[n][0], session, n_sites=n_sites))
        tags = {
            n: {
                u: secagg.confirm_tag(channel[n][u], session, adv[n][0], n, u, names) for u in names if u != n
            }
            for n in names
        }
        for n in names:
            mine = {u: tags[u][n] for u in names if u != n}
            secagg.check_tags(n, adv[n][0], names, mine, channel[n], session, t)
        reveals = {n: secagg.reveal(adv[n][0], names) for n in names}
        t1 = time.perf_counter()
        secagg.unmask_words(sum_words(words), names, keys, names, reveals, session, r, t)
        t2 = time.perf_counter()
        site_s += (t1 - t0) / n_sites
        coord_s += t2 - t1
    return site_s / repeats, coord_s / repeats


def cpu_seconds(pids):
    """CPU seconds (user + system) of this process and of the processes ``pids`` so far."""
    tick = os.sysconf("SC_CLK_TCK")
    total = time.process_time()
    for pid in pids:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()  # after the command name: field 3 onwards
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14 and 15)
    return total


def federated_config(labels, root, certs, n_sites, *, min_sites, k, iters, repeat, checkpoint, phases):
    """Plain against secure ``run_federated_bce`` over ``n_sites`` site agent processes (one config each,
    plain allowed), the same ``iters`` EM iterations (tol=0) per fit; a warm-up fit per mode first, then
    ``repeat`` pairs, alternating which mode goes first. Returns a dict of figures.

    Per fit: ``seconds_per_iteration`` and ``seconds`` of the result, and the CPU seconds per EM iteration
    of every party (the agents' processes, whose Dask workers are threads, and this one), read at the
    ``progress`` call of the first and of the last iteration: work, which other load on the machine
    changes far less than it changes wall time."""
    from ensemble_dask.federated.coordinator.bce import run_federated_bce
    from ensemble_dask.federated.coordinator.link import client_context
    from ensemble_dask.federated.protocol.secagg import threshold
    from ensemble_dask.stages.sites import LocalSiteAgents, _write_array

    names = [f"site-{i + 1}" for i in range(n_sites)]
    local, configs = site_configs(
        root, names, certs, min_sites=min_sites, allow_plain=True, checkpoint=checkpoint
    )
    bounds = np.linspace(0, labels.shape[0], n_sites + 1).astype(int)
    for s, a, b in zip(local, bounds[:-1], bounds[1:], strict=True):
        if not Path(s["url"]).exists():  # the same rows for every config of this many sites
            _write_array(s["url"], labels[a:b])
    context = client_context(certs)
    pairs, seen = [], {}
    with LocalSiteAgents(configs) as agents:
        sites = [{"name": n, "address": agents.addresses[n]} for n in names]

        pids = [proc.pid for proc in agents.procs.values()]

        def fit(mode, max_iter, marks=None):
            def progress(t, bound):
                if marks is not None:
                    marks.append(cpu_seconds(pids))

            return run_federated_bce(
                sites, k, context, mode=mode, max_iter=max_iter, tol=0.0, random_state=0, progress=progress
            )

        for mode in ("plain", "secure"):  # warm-up: numba's kernels (or their cache), imports, TLS
            fit(mode, 3)
        for r in range(repeat):
            pair = {}
            for mode in ("plain", "secure") if r % 2 == 0 else ("secure", "plain"):
                marks = []
                with phase_clock(phases) as times:
                    res = fit(mode, iters, marks)
                pair[mode] = {
                    "it": res.seconds_per_iteration,
                    "cpu": (marks[-1] - marks[0]) / (len(marks) - 1),
                    "fit": res.seconds,
                    "phases": {op: s / res.n_iter_ for op, s in times.items()},
                }
                seen[mode] = res
            pair["first"] = "plain" if r % 2 == 0 else "secure"
            pairs.append(pair)
    res = seen["secure"]
    size = res.alpha_.size * (1 + sum(b.shape[1] for b in res.beta_)) + 2
    t = threshold(n_sites, min_sites if min_sites is not None else n_sites)
    return {
        "n_sites": n_sites,
        "min_sites": min_sites if min_sites is not None else n_sites,
        "threshold": t,
        "pairs": pairs,
        "n_iter": res.n_iter_,
        "rows": res.rows_per_site,
        "bound_diff": abs(seen["secure"].lower_bound_ / seen["plain"].lower_bound_ - 1),
        "size": size,
        "crypto": secagg_seconds(n_sites, t, size),
        "load": load_average(),
    }


def _med(pairs, mode, key):
    return float(np.median([p[mode][key] for p in pairs]))


def print_config(fig, what):
    """The table of one configuration: per pair, seconds per EM iteration and per fit, and the ratios."""
    P, pairs = fig["n_sites"], fig["pairs"]
    print(
        f"\n== {P} sites (min_sites {fig['min_sites']}, threshold {fig['threshold']}), {what}; "
        f"{fig['n_iter']} EM iterations per fit (tol=0); rows per site "
        f"{', '.join(f'{v:,}' for v in fig['rows'].values())} =="
    )
    cols = (("it", "s/it", 3), ("cpu", "CPU s/it", 3), ("fit", "fit s", 2))
    print(f"{'':<13}" + "".join(f"{name:^28}" for _, name, _ in cols))
    print(f"{'pair':<5} {'first':<7}" + f"{'plain':>9} {'secure':>9} {'ratio':>7}  " * len(cols))
    ratios = {key: [p["secure"][key] / p["plain"][key] for p in pairs] for key, _, _ in cols}
    for i, p in enumerate(pairs):
        cells = "".join(
            f"{p['plain'][key]:9.{d}f} {p['secure'][key]:9.{d}f} {ratios[key][i]:7.3f}  "
            for key, _, d in cols
        )
        print(f"{i + 1:<5} {p['first']:<7}" + cells)
    for key, _, _ in cols:
        fig[f"{key}_ratio"] = float(np.median(ratios[key]))
    cells = "".join(
        f"{_med(pairs, 'plain', key):9.{d}f} {_med(pairs, 'secure', key):9.{d}f} {fig[f'{key}_ratio']:7.3f}  "
        for key, _, d in cols
    )
    print(f"{'median':<13}" + cells)
    if pairs[0]["plain"]["phases"]:
        print("coordinator's wait per EM iteration, median over the pairs (ms):")
        for mode in ("plain", "secure"):
            ops = sorted({op for p in pairs for op in p[mode]["phases"]})
            cells = [
                f"{op} {1000 * float(np.median([p[mode]['phases'].get(op, 0.0) for p in pairs])):.1f}"
                for op in ops
            ]
            print(f"  {mode:<7} " + ", ".join(cells))
    site_s, coord_s = fig["crypto"]
    print(
        f"SecAgg+ crypto alone per round ({fig['size']:,} statistics): {1000 * site_s:.1f} ms per site "
        f"(keys, shares, masks, tags), {1000 * coord_s:.1f} ms at the coordinator (unmasking); secure vs "
        f"plain bound after {fig['n_iter']} iterations: relative difference {fig['bound_diff']:.1e}; "
        f"{fig['load']}"
    )


def federated_suite(labels, tmp, what, configs, *, k=K, iters=20, repeat=3, checkpoint=False, phases=False):
    """Plain against secure aggregation over site agents for each ``(n_sites, min_sites)`` of ``configs``;
    prints a table per configuration and a summary; returns the figures."""
    from ensemble_dask.federated.protocol.certs import make_certs

    root = Path(tmp) / f"fed-{labels.shape[0]}"
    certs = root / "certs"
    make_certs(certs, ["coordinator", *(f"site-{i + 1}" for i in range(max(p for p, _ in configs)))])
    figs = []
    saved = {v: os.environ.get(v) for v in ONE_THREAD}
    os.environ.update(ONE_THREAD)  # the agents inherit it: one thread each (BLAS, numba)
    try:
        for n_sites, min_sites in configs:
            fig = federated_config(
                labels, root / f"{n_sites}-sites", certs, n_sites, min_sites=min_sites, k=k, iters=iters,
                repeat=repeat, checkpoint=checkpoint, phases=phases,
            )  # fmt: skip
            print_config(fig, what)
            figs.append(fig)
    finally:
        for v, value in saved.items():
            if value is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = value
    print(f"\n== summary, {what}: secure / plain, median over {repeat} pairs ==")
    print(
        f"{'sites':<6} {'min_sites':>9} {'plain s/it':>10} {'secure s/it':>11} {'ratio':>6} {'CPU ratio':>9} "
        f"{'fit ratio':>9}  goal (s/it ratio)"
    )
    for fig in figs:
        goal = GOALS.get(fig["n_sites"])
        verdict = "" if goal is None else f"<= {goal:.2f}: {'met' if fig['it_ratio'] <= goal else 'NOT met'}"
        if goal is not None and labels.shape[0] != 1_000_000:
            verdict += " (the goal is set at 1,000,000 rows)"
        print(
            f"{fig['n_sites']:<6} {fig['min_sites']:>9} {_med(fig['pairs'], 'plain', 'it'):10.3f} "
            f"{_med(fig['pairs'], 'secure', 'it'):11.3f} {fig['it_ratio']:6.3f} {fig['cpu_ratio']:9.3f} "
            f"{fig['fit_ratio']:9.3f}  {verdict}"
        )
    return figs


# --------------------------------------------------------------------------- parent


def _worker_hwm():
    return status_mib("VmHWM")


def ms(d):
    return f"{1000 * d['median']:8.2f} ms (mean {1000 * d['mean']:.2f})"


def _terminated(signum, frame):
    print(f"\nterminated by signal {signum}; stopping the site agents started here", file=sys.stderr)
    sys.exit(128 + signum)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer timed iterations, no convergence runs")
    ap.add_argument("--iters", type=int, default=21, help="max_iter of each timed fit (tol=0)")
    ap.add_argument("--repeats", type=int, default=3, help="timed fits per configuration")
    ap.add_argument(
        "--repeat",
        "--fed-repeats",
        dest="fed_repeats",
        type=int,
        default=3,
        help="timed plain/secure pairs per federated configuration",
    )
    ap.add_argument("--fed-iters", type=int, default=20, help="EM iterations of each federated fit (tol=0)")
    ap.add_argument("--federated-only", action="store_true", help="only plain vs secure over site agents")
    ap.add_argument(
        "--rows", type=int, default=1_000_000, help="with --federated-only: rows of synthetic labels"
    )
    ap.add_argument("--clusterings", type=int, default=20, help="with --federated-only: clusterings")
    ap.add_argument("--sites", default="3,5", help="with --federated-only: numbers of sites, e.g. 3,5")
    ap.add_argument(
        "--tolerant",
        default="5",
        help="with --federated-only: numbers of sites also run with min_sites = sites - 1 ('' for none)",
    )
    ap.add_argument("--site-checkpoint", action="store_true", help="sites save gamma after every E-step")
    ap.add_argument("--phases", action="store_true", help="the coordinator's wait per request kind")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    # SIGTERM (e.g. timeout) unwinds like Ctrl-C: the site agents started here are stopped on the way out
    signal.signal(signal.SIGTERM, _terminated)
    if args.quick:
        args.iters, args.repeats, args.fed_repeats = min(args.iters, 6), 1, 1
        args.fed_iters = min(args.fed_iters, 6)
    if args.child:
        out = child_in_memory(args.child, args.iters, args.repeats, not args.quick)
        print("RESULT " + json.dumps(out))
        return
    if args.federated_only:
        federated_only(args)
        return

    from ensemble_dask.io.store import RunStore
    from ensemble_dask.rowblocks.bce import DaskBlockEStep, fit_bce_dask
    from ensemble_dask.runtime.clients import dask_client
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
            f"in memory, 1 core:           {ms(mem_it)}; setup before the first E-step "
            f"{mem_it['setup']:.2f} s"
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
                f"in memory to convergence (tol=1e-5, max_iter={CONVERGE_MAX_ITER}): "
                f"{mem['n_iter']} iterations, "
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
        fed = {"iters": args.fed_iters, "repeat": args.fed_repeats, "phases": args.phases}
        federated_suite(labels, tmp, f"KDD {n:,} rows x {N} clusterings", [(3, None)], **fed)
        federated_suite(demo_labels(tmp), tmp, "the demo's 20,000 rows x 30 clusterings", [(3, None)], **fed)
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s; {load_average()}")


def federated_only(args):
    """Plain against secure aggregation over site agents on ``--rows`` synthetic rows, 3 then 5 sites."""
    print("$ python " + " ".join(shlex.quote(a) for a in sys.argv))
    sizes = [int(s) for s in args.sites.split(",") if s.strip()]
    tolerant = {int(s) for s in args.tolerant.split(",") if s.strip()}
    configs = [(p, None) for p in sizes] + [(p, p - 1) for p in sizes if p in tolerant]
    labels = synthetic_labels(args.rows, args.clusterings)
    distinct = np.unique(labels, axis=0).shape[0]
    what = f"{args.rows:,} rows x {args.clusterings} synthetic clusterings ({distinct:,} distinct), k={K}"
    print(
        f"{load_average()}: the site agents (a process each, E-steps on one thread) and the coordinator "
        f"share them; up to {max(sizes)} agents' E-steps run at once on {os.cpu_count()} cores"
    )
    with tempfile.TemporaryDirectory(prefix="bench_fed_") as tmp:
        federated_suite(
            labels, tmp, what, configs, iters=args.fed_iters, repeat=args.fed_repeats,
            checkpoint=args.site_checkpoint, phases=args.phases,
        )  # fmt: skip


if __name__ == "__main__":
    main()
