"""The kernels of the pair methods' consensus path one by one, on the blobs ensembles of
``benchmarks/peers.py``; prints CPU seconds (the best of ``--repeat``) and what each ends at.

For each kind of ensemble (``complete``, ``sub50``): the stage's cocluster pairs and HBGF's label start (as
``peers.py`` makes them, not timed), then

* ``pair count``: ``count_symmetric_kernel`` on one thread (the count and mirror of ``coassociation``);
* ``KL: L2 pass``: ``l2_sweep_rows`` from the label start (PCC-KL's first moves);
* ``KL: descent``: PCC-KL's KL descent (``pcc_rows``) from the end of that pass;
* ``PCC-L2``, ``PPC``: their descents (``pcc_rows``) from the label start;

with the objective each descent ends at (bit for bit the fit's ``objective_``) and its passes. Other jobs on a
shared machine inflate the seconds: compare figures of one run.

Usage: python benchmarks/pcc_parts.py [--n 500000] [--K 8] [--labels complete sub50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _best(repeat, fn):
    """``(result of the last call, least CPU seconds)`` of ``repeat`` calls of ``fn``."""
    best = np.inf
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return out, best


def parts(labels, K, repeat):
    from ensemble_dask.coassoc import _kernels as CK
    from ensemble_dask.coassoc import coassociation, sampling
    from ensemble_dask.consensus._common.base import as_pair_data, dense_codes
    from ensemble_dask.consensus.pcc import _kernels as _k
    from ensemble_dask.consensus.pcc import _pcc, _sweep
    from ensemble_dask.consensus.starts import label_starts
    from ensemble_dask.runtime.threads import even_splits
    from ensemble_dask.stages.coassoc import default_pairs_per_point

    l = default_pairs_per_point(K, "cocluster")
    pairs = coassociation(labels, strategy="cocluster", l=l, seed=0)
    start = label_starts(labels, K, random_state=0)
    start = start[0] if isinstance(start, list) else start
    data = as_pair_data(pairs, None)
    n, ind = data.n, data.indices
    hard = np.zeros((n, K))
    hard[np.arange(n), dense_codes(np.asarray(start), n)[1]] = 1.0
    rows = []

    # the pair count on one thread, from the same upper-triangle CSR as coassociation's
    sampler = sampling._make_sampler("cocluster", n, 0, sampling.DEFAULT_BLOCK_SIZE, {"l": l})
    uptr, ucols = sampling._sample_upper(sampler, labels)
    bounds = even_splits(uptr, 1)
    counts = np.zeros((1, n), dtype=np.int32)
    CK.lower_counts_kernel(uptr, ucols, 0, n, counts[0])
    low = counts[0].astype(np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(low + np.diff(uptr), out=indptr[1:])
    nnz = int(indptr[-1])
    out = [np.empty(nnz, dtype=np.int32) for _ in range(3)]

    def count():
        fill = indptr[:-1].copy()
        CK.count_symmetric_kernel(labels, uptr, ucols, bounds[0], bounds[1], indptr, low, fill, *out)

    rows.append(("pair count (1 thread)", _best(repeat, count)[1], "", ""))

    w = data.w
    gap_tol = _pcc._TOL_GIVEN * float(w.sum()) / n
    inner, max_inner = _pcc._INNER_TOL * gap_tol, _pcc._MAX_INNER + 2 * K

    def sweep():
        Y = _k.aligned_rows(n, 2 * K)  # as the fit does: in the descent's n x 2K array, rows on cache lines
        Y[:, :K] = hard
        _sweep.l2_sweep_rows(data.indptr, ind, data.x, w, Y, K, 0, n, gap_tol, inner, max_inner)
        return Y[:, :K].copy()

    Y_l2, t = _best(repeat, sweep)
    rows.append(("KL: L2 pass", t, "", ""))

    def descend(Y0, code, closed, diag, ww, tol):
        def run():
            Y = Y0.copy()
            o = _k.pcc_rows(
                data.indptr, ind, data.x, ww, Y, code, closed, _pcc._KL_EPS, diag, _pcc._STEP_RTOL, tol,
                _pcc._INNER_TOL * tol, 300, max_inner, np.empty(301), np.zeros(3, dtype=np.int64), np.nan,
                tol,
            )  # fmt: skip
            return o

        o, t = _best(repeat, run)
        return t, f"{o[1]:.10e}", o[0]

    rows.append(("KL: descent", *descend(Y_l2, _k.KL, False, 0.0, w, gap_tol)))
    rows.append(("PCC-L2 descent", *descend(hard, _k.L2, True, 0.0, w, gap_tol)))
    ones = np.ones(data.nnz, dtype=np.int32)  # PPC's unit pair weights, as its fit makes them
    rows.append(("PPC descent", *descend(hard, _k.L2, True, 1.0, ones, _pcc._TOL_GIVEN * (1 + data.nnz / n))))
    return rows


def main(argv=None):
    from peers import ensemble

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500_000)
    ap.add_argument("--K", type=int, default=8)
    ap.add_argument("--labels", nargs="+", default=["complete", "sub50"], choices=["complete", "sub50"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ensemble_dask_peers")
    args = ap.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    lab, _ = ensemble(2000, 4, 4, 1.0, 0, args.cache)  # warm-up: imports and numba caches
    parts(np.load(lab), 4, 1)
    for kind in args.labels:
        lab, _ = ensemble(args.n, args.K, args.K, 1.0 if kind == "complete" else 0.5, 0, args.cache)
        rows = parts(np.load(lab), args.K, args.repeat)
        print(f"\n## n = {args.n:,}, K = {args.K}, {kind} (CPU seconds, best of {args.repeat})")
        print(f"{'part':24s} {'s':>6s} {'f at the end':>18s} {'passes':>6s}")
        for name, t, f, passes in rows:
            print(f"{name:24s} {t:6.3f} {f:>18s} {passes!s:>6s}")


if __name__ == "__main__":
    main()
