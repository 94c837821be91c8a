"""Where PCC-KL, PCC-L2 and PPC spend their time on the blobs ensemble of ``benchmarks/peers.py``; prints.

The consensus stage's default path, split in its parts and timed one by one after a warm-up (numba
compilation and imports excluded): the pairs (``coassociation``: cocluster draws, ``l`` = the stage's default,
counted, as a symmetric CSR; the draws alone as sorted ``(i, j)`` above it), the label starts (KCC and HBGF of
``consensus.starts``), the choice between them (``pcc._best_start``) and the row-wise descent (``PCC.fit`` /
``PPC.fit`` given the chosen start; PPC has no visit counts). Also prints the descent's passes, row visits,
moves and steps per point, and the ARI of the starts and of the result against the blobs' truth. Seconds are
the CPU time of this process (``--wall``: wall-clock), so that other jobs on a shared machine disturb them
less.

Usage: python benchmarks/pcc_profile.py [--n 50000 500000] [--K 8] [--labels complete sub50] [--l L] [--wall]
[--cache DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _timed(fn, *args, **kw):
    """``(result, seconds)``: CPU seconds of this process (robust to other jobs on a shared machine) unless
    ``WALL`` is set."""
    clock = time.perf_counter if WALL else time.process_time
    t0 = clock()
    out = fn(*args, **kw)
    return out, clock() - t0


WALL = False


def profile(labels, y, K, l=None):
    from sklearn.metrics import adjusted_rand_score

    from ensemble_dask.coassoc import coassociation
    from ensemble_dask.coassoc.sampling import sample_pairs
    from ensemble_dask.consensus import PCC, PPC
    from ensemble_dask.consensus import starts as _starts
    from ensemble_dask.consensus._common.base import as_pair_data
    from ensemble_dask.consensus.pcc import _kernels as _k
    from ensemble_dask.consensus.pcc._pcc import _best_start, check_init
    from ensemble_dask.stages.coassoc import default_pairs_per_point

    n = labels.shape[0]
    l = l or default_pairs_per_point(K, "cocluster")
    times = {}
    _, times["  sample pairs (sorted i, j)"] = _timed(
        sample_pairs, "cocluster", n, seed=0, labels=labels, l=l
    )
    pairs, times["coassociation (sample+count+CSR)"] = _timed(
        coassociation, labels, strategy="cocluster", l=l, seed=0
    )
    starts, times["label starts"] = _timed(_starts.label_starts, labels, K, random_state=0)
    rows = [("l", l), ("stored pairs per point", pairs.nnz / n)]
    for s_no, s in enumerate(starts):
        rows.append((f"ARI of start {s_no}", adjusted_rand_score(y, s)))
    fits = {}
    for name, make, code, diag in (
        ("PCC-KL", lambda init: PCC(K, divergence="kl", init=init, random_state=0), _k.KL, 0.0),
        ("PCC-L2", lambda init: PCC(K, divergence="l2", init=init, random_state=0), _k.L2, 0.0),
        ("PPC", lambda init: PPC(K, init=init, random_state=0), _k.L2, 1.0),
    ):
        # the choice between the starts, as the estimators make it (pcc._best_start)
        data = as_pair_data(pairs, None)
        w = data.w if diag == 0.0 else np.ones(data.nnz, dtype=np.int32)  # as the fits make them
        ind = data.indices.astype(np.int32)
        cands = check_init(starts, n, K)
        (best_y, _), t_choose = _timed(_best_start, cands, data, w, ind, code, diag, K, need_f=False)
        best = starts[next(q for q, c in enumerate(cands) if c is best_y)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, t_fit = _timed(make(best).fit, pairs)
        fits[name] = (model, t_choose, t_fit)
    return times, rows, fits


def main(argv=None):
    from peers import ensemble
    from sklearn.metrics import adjusted_rand_score

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[50_000, 500_000])
    ap.add_argument("--K", type=int, nargs="+", default=[8])
    ap.add_argument("--labels", choices=["complete", "sub50"], nargs="+", default=["complete"])
    ap.add_argument("--l", type=int, default=None, help="pairs per point (default: the stage's)")
    ap.add_argument("--wall", action="store_true", help="wall-clock seconds instead of CPU seconds")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ensemble_dask_peers")
    args = ap.parse_args(argv)
    global WALL
    WALL = args.wall
    args.cache.mkdir(parents=True, exist_ok=True)
    lab, y = ensemble(2000, 4, 4, 1.0, 0, args.cache)  # warm-up: imports and numba caches
    profile(np.load(lab), y, 4)
    for n, K, kind in ((n, K, kind) for n in args.n for K in args.K for kind in args.labels):
        lab_path, y = ensemble(n, K, K, 1.0 if kind == "complete" else 0.5, 0, args.cache)
        labels = np.load(lab_path)
        times, rows, fits = profile(labels, y, K, args.l)
        print(f"\n## n = {n:,}, K = {K}, {kind} labels ({'wall' if WALL else 'CPU'} seconds)")
        for name, t in times.items():
            print(f"{name:28s} {t:8.2f} s")
        for name, v in rows:
            print(f"{name:28s} {v:8.3f}")
        print(
            f"{'method':8s} {'choose s':>8s} {'fit s':>7s} {'passes':>6s} {'visits/n':>8s} "
            f"{'steps/n':>8s} "
            f"{'moves/n':>8s} {'conv':>5s} {'ARI':>6s}"
        )
        for name, (m, t_choose, t) in fits.items():
            visits = getattr(m, "n_visits_", float("nan")) / n
            steps = getattr(m, "n_steps_", float("nan")) / n
            moves = getattr(m, "n_moves_", float("nan")) / n
            print(
                f"{name:8s} {t_choose:8.2f} {t:7.2f} {m.n_iter_:6d} {visits:8.2f} {steps:8.2f} "
                f"{moves:8.2f} "
                f"{m.converged_!s:>5s} {adjusted_rand_score(y, m.labels_):6.3f}"
            )


if __name__ == "__main__":
    main()
