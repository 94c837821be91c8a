"""Numba kernels of PCC's row descent (Lourenço et al. 2015 Sect. 5; PPC's too, with a diagonal term).

Plain arrays and scalars in, plain arrays out: no estimator, Dask or zarr object reaches this
module. ``Y`` is the public layout, ``n x K`` with rows on the simplex (the paper's ``K x n``
transposed).

The divergences (``KL``, ``L2``, :func:`div`, :func:`ddiv`, :func:`d2div`) are in
:mod:`ensemble_dask.consensus._common.divergences`, the line search in :mod:`._line_search`.
"""

from __future__ import annotations

import numba
import numpy as np

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)
from ...runtime.prefetch import prefetch
from .._common.divergences import KL, L2, d2div, ddiv, div, div_change  # noqa: F401 (KL: the callers' code)
from ._line_search import _line_search
from ._row_ops import (  # noqa: F401 (objective*, max_kept_gap, flag_kept_gaps: the callers' code)
    _add_diag_gradient,
    _dot_rows,
    _gap_of,
    _gather_row,
    _kept_gap,
    _row_direction,
    _row_gradient,
    _scratch,
    _self_dot,
    flag_kept_gaps,
    max_kept_gap,
    objective,
    objective_and_gap,
    objective_and_gap_rows,
    objective_rows,
)


@numba.njit(cache=True, nogil=True)
def _enqueue(queue, queued, head, count, i):
    """Append i to the circular work list unless it is on it; returns the new count."""
    if not queued[i]:
        queue[(head + count) % queue.shape[0]] = i
        queued[i] = True
        count += 1
    return count


@numba.njit(cache=True, nogil=True)
def descend_rows(
    indptr,
    indices,
    x,
    w,
    Y,
    k_count,
    queued,
    row0,
    row1,
    code,
    closed_form,
    eps,
    diag,
    step_rtol,
    gap_tol,
    inner_tol,
    max_passes,
    max_inner,
    trace_f,
    stats,
    f,
    gap_tol_start,
):
    """The descent of :func:`pcc_rows` on the rows ``row0 <= j < row1`` flagged in ``queued``, the other rows
    fixed.

    ``indptr``, ``indices``, ``x``, ``w`` hold the pairs of those rows only (row j at ``indptr[j - row0]``;
    ``indices`` are global). ``Y`` is the ``n x 2K`` array of :func:`pcc_rows` (memberships, then the kept
    pair gradient) over every row, and ``queued`` every row's flag: a row whose kept gradient is stale
    (never visited, or a neighbour moved and its gap exceeds ``gap_tol``). A move of row J updates the kept
    gradients of J's neighbours in any range; a neighbour outside ``[row0, row1)`` whose gap then fails the
    test is flagged, for the next descent of its own range. ``f`` is the objective on entry, updated by the
    moves; or nan when every row of the range is listed and ``max_passes >= 1``: then the first pass sums it
    (and writes it to ``trace_f[0]``) from the products its gathers compute anyway. With ``row0 = 0,
    row1 = n`` this is the whole descent of :func:`pcc_rows`; over the ranges of a partition, taken in turn
    until no row is flagged, it is the same descent with the work list visited range by range
    (:func:`~ensemble_dask.consensus.PCC` on pairs read a block of rows at a time).

    Returns
    -------
    n_passes, f, n_listed : int, float, int
        Passes run, f after them, and the rows of the range still listed (0 unless ``max_passes`` stopped
        the descent).
    """
    max_deg, wide = _scratch(indptr, row0, row1, Y, k_count)
    nb = np.empty((max_deg, k_count))
    a = np.empty(max_deg)
    a0 = np.empty(max_deg)
    c = np.empty(max_deg)
    act = np.empty(max_deg, dtype=np.int64)
    ca = np.empty(max_deg)
    cd = np.empty(max_deg)
    cx = np.empty(max_deg)
    cw = np.empty(max_deg)
    gp = np.empty(k_count)  # the pairs' part of J's gradient
    g = np.empty(k_count)
    c0 = np.empty(max_deg)
    yj0 = np.empty(k_count)
    size = row1 - row0
    queue = np.empty(max(size, 1), dtype=np.int64)  # circular: each row of the range is on it at most once
    head = 0
    count = 0
    for j in range(row0, row1):
        if queued[j]:
            queue[count] = j
            count += 1
    passes = 0
    left = count  # visits left in this pass
    final_tol = gap_tol
    inner_share = inner_tol / gap_tol if gap_tol > 0.0 else 0.0
    # f = nan on entry: f(Y) is summed during the first pass instead of by an objective pass of its own (every
    # row of the range is listed, so the first pass visits them in ascending order, each before it moves: at
    # row j's visit the pairs (j, i > j) still have their start terms, from the gather's y_j.y_i)
    sum_f = np.isnan(f)
    f_first = 0.0
    if sum_f:
        f = 0.0  # the moves' changes, until f_first is added at the end of the first pass
    if gap_tol_start > gap_tol:
        gap_tol = gap_tol_start
        inner_tol = inner_share * gap_tol
    while passes < max_passes:
        if count == 0 and gap_tol > final_tol:
            # a looser test holds for every row (their kept gaps are exact now): tighten it tenfold
            # and put back the rows that fail it
            gap_tol = max(gap_tol * 0.1, final_tol)
            inner_tol = inner_share * gap_tol
            for i in range(row0, row1):
                if _kept_gap(Y, i, k_count, diag, g) > gap_tol:
                    count = _enqueue(queue, queued, head, count, i)
            left = count
            continue  # (an empty list tightens again)
        if count == 0:
            break
        j = queue[head]
        head = head + 1 if head + 1 < size else 0
        count -= 1
        queued[j] = False
        stats[0] += 1
        lo = indptr[j - row0]
        m = indptr[j - row0 + 1] - lo
        # the next listed row's neighbours' memberships (one line each, ``aligned_rows``) are on their way
        # while this row is processed; their kept gradients (the second line) only if this row moves, below:
        # prefetching both here, or touching this row's neighbours first, holds up more misses at once
        # than the CPU tracks (either order gives the same Y)
        if count > 0:
            nxt = queue[head] - row0
            for e in range(indptr[nxt], indptr[nxt + 1]):
                prefetch(Y, indices[e], 0)
                if wide:  # the memberships may span two lines (K > 8, or rows not 64 bytes apart)
                    prefetch(Y, indices[e], k_count - 1)
        _gather_row(Y, j, indices, lo, m, k_count, w, x, code, eps, nb, a, c)
        if sum_f and passes == 0:
            for t in range(m):
                if indices[lo + t] > j:
                    f_first += w[lo + t] * div(code, x[lo + t], a[t], eps)
            if diag != 0.0:
                r = 1.0 - _self_dot(Y, j, k_count)
                f_first += diag * r * r
        _row_gradient(c, nb, m, k_count, gp)
        for k in range(k_count):
            g[k] = gp[k]
        _add_diag_gradient(Y, j, k_count, diag, g)
        u, v, gap = _row_direction(Y, j, g, k_count)
        if gap > gap_tol:
            for t in range(m):  # the neighbours' kept gradients, which the move updates
                prefetch(Y, indices[lo + t], k_count)
            for t in range(m):
                a0[t] = a[t]
                c0[t] = c[t]
            for k in range(k_count):
                yj0[k] = Y[j, k]
            q_start = _self_dot(Y, j, k_count)
            moved = False
            for _ in range(max_inner):
                # the step changes y_J.y_i only for the pairs with y_iU != y_iV: gather those
                r0 = 0.0
                dr0 = 0.0
                n_act = 0
                for t in range(m):
                    d = nb[t, u] - nb[t, v]
                    if d != 0.0:
                        act[n_act] = t
                        ca[n_act] = a[t]
                        cd[n_act] = d
                        cx[n_act] = x[lo + t]
                        cw[n_act] = w[lo + t]
                        r0 += c[t] * d
                        dr0 += w[lo + t] * d2div(code, x[lo + t], a[t], eps) * d * d
                        n_act += 1
                y_vj = Y[j, v]
                q0 = _self_dot(Y, j, k_count)
                dq1 = 2.0 * (Y[j, u] - y_vj)
                r0p = r0  # the pairs' part of rho(0) and rho'(0)
                dr0p = dr0
                if diag != 0.0:
                    r0 += g[u] - g[v] - (gp[u] - gp[v])
                    dr0 += 2.0 * diag * (dq1 * dq1 - 4.0 * (1.0 - q0))
                step = _line_search(
                    code, closed_form, eps, step_rtol, cx, cw, 0, ca, cd, n_act, y_vj, r0, dr0, diag, q0, dq1
                )
                if diag != 0.0:  # rho may decrease with the diagonal term: make sure f went down
                    for _ in range(60):
                        df = diag * ((1.0 - q0 - step * (dq1 + 2.0 * step)) ** 2 - (1.0 - q0) ** 2)
                        if closed_form and code == L2:
                            # the pairs' part of f is quadratic in the step: r0p t + dr0p t^2 / 2 from its
                            # derivatives at 0, no loop over J's pairs
                            df += step * (r0p + 0.5 * step * dr0p)
                        else:
                            for s_ in range(n_act):
                                z = ca[s_] + step * cd[s_]
                                df += cw[s_] * (div(code, cx[s_], z, eps) - div(code, cx[s_], ca[s_], eps))
                        if df <= 0.0:
                            break
                        step *= 0.5
                    else:
                        step = 0.0
                if step <= 0.0:
                    break
                moved = True
                stats[2] += 1
                Y[j, u] += step
                Y[j, v] = 0.0 if step == y_vj else y_vj - step
                for s_ in range(n_act):
                    t = act[s_]
                    a[t] += step * cd[s_]
                    c_new = cw[s_] * ddiv(code, cx[s_], a[t], eps)
                    dc = c_new - c[t]
                    c[t] = c_new
                    for k in range(k_count):
                        gp[k] += dc * nb[t, k]
                for k in range(k_count):
                    g[k] = gp[k]
                _add_diag_gradient(Y, j, k_count, diag, g)
                u, v, gap = _row_direction(Y, j, g, k_count)
                if gap <= inner_tol:
                    break
            if moved:
                stats[1] += 1
                for t in range(m):  # f changed by the terms of the pairs whose y_J.y_i moved
                    if a[t] != a0[t]:
                        f += w[lo + t] * div_change(code, x[lo + t], a0[t], a[t], eps)
                if diag != 0.0:
                    f += diag * ((1.0 - _self_dot(Y, j, k_count)) ** 2 - (1.0 - q_start) ** 2)
                # pair (J, i)'s term of g_i went from c0 y_J0 to c y_J: add the change to i's kept
                # gradient and test i's gap y_i.g_i - min g_i from it (y_i = nb[t] is fixed until
                # i's next visit, which recomputes g_i from its pairs); a row on the list is skipped
                for t in range(m):
                    i = indices[lo + t]
                    if queued[i]:
                        continue
                    for k in range(k_count):
                        Y[i, k_count + k] += c[t] * Y[j, k] - c0[t] * yj0[k]
                        g[k] = Y[i, k_count + k]
                    if diag != 0.0:
                        cd_ = -4.0 * diag * (1.0 - _dot_rows(nb, t, nb, t, k_count))
                        for k in range(k_count):
                            g[k] += cd_ * nb[t, k]
                    # (the gap is not stored: one more random write per neighbour; it is recomputed from
                    # G when the tolerance tightens and at the end)
                    if _gap_of(nb, t, g, k_count) > gap_tol:
                        if row0 <= i < row1:
                            count = _enqueue(queue, queued, head, count, i)
                        else:  # another range's row: listed for that range's next descent
                            queued[i] = True
                if gap > gap_tol:  # max_inner steps were not enough
                    count = _enqueue(queue, queued, head, count, j)
        for k in range(k_count):
            Y[j, k_count + k] = gp[k]
        left -= 1
        if left == 0:
            passes += 1
            if sum_f and passes == 1:
                f += f_first
                trace_f[0] = f_first
            if passes < trace_f.shape[0]:
                trace_f[passes] = f
            left = count
    return passes, f, count


@numba.njit(cache=True, nogil=True)
def one_hot_rows(labels, Y, k_count):
    """The first ``k_count`` entries of row i of ``Y`` the vertex of label ``labels[i]`` (1 there, 0 at the
    others), in one pass over the rows."""
    for i in range(Y.shape[0]):
        for k in range(k_count):
            Y[i, k] = 0.0
        Y[i, labels[i]] = 1.0


def aligned_rows(n, width, align=64):
    """An uninitialised ``n x width`` float64 array (C order) starting on an ``align``-byte boundary.

    NumPy aligns a large array to 16 bytes only (so a row of 2 K = 16 floats spans three 64-byte cache lines,
    and its K memberships two); aligned, a row gathered by the descent is one line of memberships and one of
    kept gradient."""
    buf = np.empty(n * width + align // 8)
    off = (-buf.ctypes.data % align) // 8
    return buf[off : off + n * width].reshape(n, width)


def pcc_rows(
    indptr,
    indices,
    x,
    w,
    Y_out,
    code,
    closed_form,
    eps,
    diag,
    step_rtol,
    gap_tol,
    inner_tol,
    max_passes,
    max_inner,
    trace_f,
    stats,
    f_start=np.nan,
    gap_tol_start=0.0,
):
    """Row-wise descent of PCC: the two-entry steps of Lourenço et al. 2015 Sect. 5, many per visited row.

    A plain function around the compiled :func:`descend_rows` on every row (so that numba compiles that
    loop once, not a second time inlined here).

    A visit of row J gathers J's neighbours' rows once, then repeats the step of eqs. (6)-(9)
    on y_J alone (neighbours fixed, so the gradient of eq. (7) is kept up to date from the
    gathered rows in cache) until J's gap (:func:`_row_direction`) is at most ``inner_tol`` or
    ``max_inner`` steps were taken. Each step is an exact line search on f, so f never
    increases. Rows are visited from a FIFO work list that starts with every row; a row that
    moved adds the change of each neighbour's gradient to that neighbour's kept gradient (rows
    not on the list), recomputes its gap from it, and puts the neighbours whose gap exceeds
    ``gap_tol`` back on the list. A visit whose gap is already at most ``gap_tol`` leaves the row
    alone. So when the list runs empty, every row's gap (from its gradient, exact up to rounding)
    is at most ``gap_tol``: the KKT test holds for Y.

    Parameters
    ----------
    indptr, indices : int arrays
        Symmetric CSR pattern (both (i, j) and (j, i), no diagonal).
    x, w : arrays of shape (nnz,)
        ``c_ij / N_ij`` (float64) and the pair weights (``N_ij`` times any sample weight; 0 for a pair never
        both present, which then adds 0 to every sum): float64, or the int32 counts ``N_ij`` themselves
        (converted exactly where read).
    Y_out : float64 array (n, K), rows on the simplex
        Start point, updated in place (at the end: the descent works on its own copy, see below).
    code, closed_form, eps, diag
        Divergence code, use of its closed-form step, KL clamp, weight of the diagonal term
        (PPC; 0 for PCC).
    step_rtol : float
        Relative tolerance of the line search.
    gap_tol, inner_tol : float
        KKT tolerance of the stopping test, and the gap at which a visit stops (<= gap_tol).
    max_passes, max_inner : int
        Cap on passes (a pass visits the rows that were on the list when it began), and on
        steps per visit.
    trace_f : float64 array
        Receives f before the first pass and after each pass (as many as it holds).
    stats : int64 array of length 3
        Receives the numbers of row visits, of visits that moved the row, and of steps.
    f_start : float, default=nan
        f at the start, when the caller has it already (nan: computed here).
    gap_tol_start : float, default=0
        When larger than ``gap_tol``, the descent starts with this tolerance and tightens it tenfold
        each time the list runs empty until it reaches ``gap_tol``, putting back the rows whose kept
        gap fails the new test (``max_passes`` caps the passes of all tolerances together). From a random
        start this spends the early visits, when the neighbours are still far from their final rows, on
        short moves instead of solving each row exactly (on the paper's KDD configuration
        about a third of the steps). Only the last tolerance decides ``converged``.

    Returns
    -------
    n_passes, f, gap, converged : int, float, float, bool
        Passes run; f(Y); the KKT gap ``max_j gap_j`` (when the list ran empty, from the kept
        gradients, exact up to rounding; recomputed from Y when the cap stopped the run);
        whether the work list ran empty with every gap at most ``gap_tol``.
    """
    n, k_count = Y_out.shape
    # each row's entries and its kept pair gradient side by side (one n x 2K array): a move of row J
    # updates the kept gradients of J's neighbours, whose rows the gather has just brought into cache,
    # so the gradient's line comes with them instead of being a second miss. Y (row j's
    # memberships: Y[j, :K]) and the kept pair gradient G (Y[j, K + k]) are this one C-contiguous array,
    # which the helpers read up to ``k_count`` (no strided views: the same compiled helpers as elsewhere)
    Y = aligned_rows(n, 2 * k_count)
    Y[:, :k_count] = Y_out
    out = pcc_rows_on(
        indptr, indices, x, w, Y, k_count, code, closed_form, eps, diag, step_rtol, gap_tol, inner_tol,
        max_passes, max_inner, trace_f, stats, f_start, gap_tol_start,
    )  # fmt: skip
    Y_out[:] = Y[:, :k_count]
    return out


def pcc_rows_on(
    indptr,
    indices,
    x,
    w,
    Y,
    k_count,
    code,
    closed_form,
    eps,
    diag,
    step_rtol,
    gap_tol,
    inner_tol,
    max_passes,
    max_inner,
    trace_f,
    stats,
    f_start=np.nan,
    gap_tol_start=0.0,
):
    """:func:`pcc_rows` on the descent's own ``n x 2K`` array ``Y`` (:func:`aligned_rows`; the start in its
    first ``k_count`` columns, where the memberships are left, the rest scratch): for a caller that makes the
    start there (PCC-KL from hard labels, whose L2 pass runs on it too), with no ``n x K`` array besides."""
    n = Y.shape[0]
    queued = np.ones(n, dtype=np.bool_)
    f = f_start  # nan: descend_rows sums it in its first pass
    if np.isnan(f) and (n == 0 or max_passes < 1):
        f = objective_rows(indptr, indices, x, w, Y, k_count, 0, n, code, eps, diag)
    trace_f[0] = f
    passes, f, count = descend_rows(
        indptr, indices, x, w, Y, k_count, queued, 0, n, code, closed_form, eps, diag, step_rtol, gap_tol,
        inner_tol, max_passes, max_inner, trace_f, stats, f, gap_tol_start,
    )  # fmt: skip
    if count > 0:  # stopped at the cap: the kept gradients of the rows still listed are stale
        f, gap = objective_and_gap_rows(indptr, indices, x, w, Y, k_count, 0, n, code, eps, diag)
        if passes < trace_f.shape[0]:
            trace_f[passes] = f
        return passes, f, gap, False
    gap = max_kept_gap(Y, k_count, diag)
    return passes, f, gap, bool(gap <= gap_tol)
