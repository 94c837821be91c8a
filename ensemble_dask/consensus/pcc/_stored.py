"""PCC and PPC on pairs read a block of rows at a time (out of core).

The row descent of :func:`~ensemble_dask.consensus.pcc._kernels.pcc_rows` needs every point's memberships
(and kept pair gradient: ``n x 2K`` floats) but, per visit, only the visited row's pairs. So with the pairs
in a store (:class:`~ensemble_dask.coassoc.csr.StoredPairs`) the work list is visited one block of rows at
a time (:func:`~ensemble_dask.consensus.pcc._kernels.descend_rows`): each block whose rows are listed is
read, its listed rows are descended until none is, a move flags the neighbours in other blocks whose gap
then fails the test, and the sweeps over the blocks go on until no row is flagged. Every step is the same
exact line search, so f never increases, and the run ends on the same KKT test as in memory. Memory: the
``n x 2K`` array and one block of pairs (about 48 bytes per entry as read and converted); the pairs held
whole take 20 bytes per entry.
"""

from __future__ import annotations

import numpy as np

from ..._validation import InputError
from .._common import pair_kernels as _pairk
from .._common.base import count_weights
from . import _kernels as _k
from . import _sweep

_KL_EPS = 1e-10
_STEP_RTOL = 1e-4
_INNER_TOL = 0.5
_MAX_INNER = 20


def _block(source, row0, row1, unit_weights):
    """``(indptr, indices, x, w)`` of a block: ``x = c / N``, ``w = N`` (the int32 counts themselves, as in
    memory; 1 with ``unit_weights``; 0 where ``N = 0``: such an entry adds nothing)."""
    indptr, indices, co, both = source.read(row0, row1)
    x = np.empty(co.shape[0])
    bad, _ = _pairk.pair_values(co, both, x)
    if bad >= 0:
        raise InputError(
            f"stored pairs, row block {row0}..{row1 - 1}: entry {bad} has c_ij={co[bad]} "
            f"and N_ij={both[bad]}; "
            "the counts must satisfy 0 <= c_ij <= N_ij"
        )
    w = (both > 0).astype(np.int32) if unit_weights else count_weights(both)
    return indptr, indices, x, w


def objective(source, Y, k, code, diag, unit_weights, with_gap=False):
    """``(f(Y), KKT gap or 0, sum of the pair weights)``, one pass over the blocks (``Y``: ``n x K`` or the
    descent's ``n x 2K``)."""
    f = gap = total = 0.0
    for row0, row1 in source.bounds:
        indptr, indices, x, w = _block(source, row0, row1, unit_weights)
        total += float(w.sum())
        if with_gap:
            fb, gb = _k.objective_and_gap_rows(indptr, indices, x, w, Y, k, row0, row1, code, _KL_EPS, diag)
            gap = max(gap, gb)
        else:
            fb = _k.objective_rows(indptr, indices, x, w, Y, k, row0, row1, code, _KL_EPS, diag)
        f += fb
    return f, gap, total


def descend(
    source, Y, k, code, closed_form, diag, unit_weights, f, gap_tol, max_iter, stats, gap_tol_start=0.0
):
    """The row descent from ``Y`` (``n x 2K``: memberships, then the kept gradients, written here) over the
    blocks of ``source``, at most ``max_iter`` sweeps; ``f`` is f(Y) on entry, or nan: summed by the first
    sweep (every row is listed, and the blocks are taken in ascending order, so each row's first visit finds
    its pairs with later rows at their start; as in memory). With ``gap_tol_start`` above
    ``gap_tol`` the test starts there and is tightened tenfold each time every row passes it, as in memory
    (:func:`~ensemble_dask.consensus.pcc._kernels.pcc_rows`).

    Returns ``(sweeps, f, gap, converged, trace)``: the sweeps run, f after them, the KKT gap (from the kept
    gradients when no row is left listed, else recomputed from scratch), whether every row passed the test,
    and f before the first sweep and after each.
    """
    queued = np.ones(source.n, dtype=np.bool_)  # every kept gradient is stale until its row's first visit
    if np.isnan(f) and max_iter < 1:
        f = objective(source, Y, k, code, diag, unit_weights)[0]
    trace = [f]
    scratch = np.empty(max_iter + 1)
    sweeps = 0
    tol = max(gap_tol_start, gap_tol)
    while sweeps < max_iter:
        if not queued.any():
            if tol <= gap_tol:
                break
            tol = max(0.1 * tol, gap_tol)  # every kept gradient is exact now: tighten, list the rows failing
            _k.flag_kept_gaps(Y, k, diag, tol, queued)
            continue
        summing = np.isnan(f)  # the first sweep: each block's descent sums its rows' start terms
        f_start = f_sum = 0.0
        for row0, row1 in source.bounds:
            if not queued[row0:row1].any():
                continue
            indptr, indices, x, w = _block(source, row0, row1, unit_weights)
            _, f_block, _ = _k.descend_rows(
                indptr, indices, x, w, Y, k, queued, row0, row1, code, closed_form, _KL_EPS, diag, _STEP_RTOL,
                tol, _INNER_TOL * tol, max_iter, _MAX_INNER + 2 * k, scratch, stats, np.nan if summing else f,
                tol,
            )  # fmt: skip
            if summing:  # f_block: the block's start terms (scratch[0]) plus the changes of its moves
                f_start += scratch[0]
                f_sum += f_block
            else:
                f = f_block
        if summing:
            f = f_sum
            trace[0] = f_start
        sweeps += 1
        trace.append(f)
    if queued.any():  # stopped at the cap: the listed rows' kept gradients are stale
        f, gap, _ = objective(source, Y, k, code, diag, unit_weights, with_gap=True)
        trace[-1] = f
        return sweeps, f, gap, False, np.array(trace)
    gap = _k.max_kept_gap(Y, k, diag)
    return sweeps, f, gap, gap <= gap_tol, np.array(trace)


def fit(
    source, starts, k, code, closed_form, diag, unit_weights, tol, max_iter, l2_first=False, tol_start=0.0
):
    """Fit PCC (``diag = 0``) or PPC (``diag = 1``, unit weights) on ``source`` from the best of ``starts``
    (``n x K`` matrices, the one of lowest objective); with ``l2_first`` and a start of hard labels (every row
    a vertex) a pass of the squared-L2 descent runs first, as :meth:`PCC.fit` does in memory for KL.

    Returns ``(Y, f, trace, sweeps, gap / scale, converged, stats)`` with ``Y`` the ``n x K`` memberships.
    """
    if len(starts) == 1:  # (the stage's label start) no objective to compare: only the weights' sum
        best, total = 0, 0.0
        for row0, row1 in source.bounds:
            total += float(_block(source, row0, row1, unit_weights)[3].sum())
    else:
        objs = [objective(source, S, k, code, diag, unit_weights) for S in starts]
        best = int(np.argmin([o[0] for o in objs]))
        total = objs[best][2]
    f = np.nan  # summed by the descent's first sweep (bit for bit the in-memory fit's f)
    scale = total / source.n + diag  # PCC: the mean per-point weight; PPC: the mean S_i
    gap_tol = tol * scale
    Y = _k.aligned_rows(source.n, 2 * k)
    Y[:, :k] = starts[best]
    stats = np.zeros(3, dtype=np.int64)
    if l2_first and max_iter >= 1 and np.all(starts[best].max(axis=1) == 1.0):
        # KL's derivative is unbounded at a vertex: a pass of the squared-L2 descent first, as in memory
        for row0, row1 in source.bounds:
            indptr, indices, x, w = _block(source, row0, row1, unit_weights)
            _sweep.l2_sweep_rows(
                indptr, indices, x, w, Y, k, row0, row1, gap_tol, _INNER_TOL * gap_tol, _MAX_INNER + 2 * k
            )
    sweeps, f, gap, conv, trace = descend(
        source, Y, k, code, closed_form, diag, unit_weights, f, gap_tol, max_iter, stats, tol_start * scale
    )
    return np.ascontiguousarray(Y[:, :k]), f, trace, sweeps, gap / scale, conv, stats
