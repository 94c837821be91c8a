"""The row operations of PCC's descent (Lourenço et al. 2015 Sect. 5; PPC's too, with a diagonal term): a
row's gradient from its gathered neighbours, its direction and KKT gap, and the objective of rows of ``Y``.

Plain arrays and scalars in, plain arrays out, as in :mod:`._kernels` (the descent, which uses them).
"""

from __future__ import annotations

import numba
import numpy as np

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)
from .._common.divergences import d2div, ddiv, div, div_change  # noqa: F401 (the kernels' code)

# --------------------------------------------------------------------------- PCC and PPC rows
# Helpers that take arrays are plain (not ``inline="always"``) functions: numba's own inlining
# adds reference-count updates of the array arguments at every call site, which in the
# per-neighbour loop cost as much as the arithmetic; LLVM inlines them without.
#
# PPC's diagonal term: see :mod:`._line_search`.


@numba.njit(cache=True, nogil=True)
def _row_gradient(c, nb, m, k_count, g):
    """``g = sum_t c[t] nb[t]``: the gradient of f in row J (eq. 7) from J's gathered pairs."""
    for k in range(k_count):
        g[k] = 0.0
    for t in range(m):
        ct = c[t]
        for k in range(k_count):
            g[k] += ct * nb[t, k]


@numba.njit(cache=True, nogil=True)
def _scratch(indptr, row0, row1, Y, k_count):
    """The most pairs of a row of ``row0:row1`` (the gather buffers' length) and whether a row of ``Y``'s
    memberships may span two cache lines (K > 8, or rows not 64 bytes apart): then the prefetches ask for
    its last entry too."""
    max_deg = 0
    for j in range(row0, row1):
        max_deg = max(max_deg, indptr[j - row0 + 1] - indptr[j - row0])
    wide = k_count > 8 or Y.ctypes.data % 64 != 0 or Y.strides[0] % 64 != 0
    return max_deg, wide


@numba.njit(cache=True, nogil=True)
def _gather_row(Y, j, indices, lo, m, k_count, w, x, code, eps, nb, a, c):
    """Row j's pairs ``lo:lo + m``: the neighbours' memberships into ``nb``, their dot products with row j
    (``y_i . y_j``) into ``a`` and the weighted derivatives of the divergence there into ``c`` (one loop:
    the derivative of one pair is computed while the next neighbour's row is on its way)."""
    for t in range(m):
        i = indices[lo + t]
        s = 0.0
        for k in range(k_count):
            v = Y[i, k]
            nb[t, k] = v
            s += Y[j, k] * v
        a[t] = s
        c[t] = w[lo + t] * ddiv(code, x[lo + t], s, eps)


@numba.njit(cache=True, nogil=True)
def _row_direction(Y, j, g, k_count):
    """``(U, V, gap)`` for row j: U = argmin g, V = argmax g on supp(y_j) (eq. 6), and the gap
    ``y_j.g - g_U`` (>= 0; 0 exactly where the KKT conditions of Sect. 5.3 hold for row j: the
    entries of g on the support of y_j are all minimal). Unlike the paper's ``g_V - g_U``,
    it weights each entry by its mass, so that a vanishing entry with a large gradient (KL's
    derivative grows like 1 / y_i.y_j near 0) does not hold the test up; it bounds how much
    re-optimising row j alone (a convex problem) could still lower f."""
    u = 0
    for k in range(1, k_count):
        if g[k] < g[u]:
            u = k
    v = -1
    yg = 0.0
    for k in range(k_count):
        yk = Y[j, k]
        yg += yk * g[k]
        if yk > 0.0 and (v < 0 or g[k] > g[v]):
            v = k
    return u, v, max(yg - g[u], 0.0)


@numba.njit(cache=True, nogil=True)
def _dot_rows(A, a, B, b, k_count):
    q = 0.0
    for k in range(k_count):
        q += A[a, k] * B[b, k]
    return q


@numba.njit(cache=True, nogil=True)
def _gap_of(Yr, r, g, k_count):
    """The gap ``y.g - min g`` of row r of Yr (the weighting of :func:`_row_direction`), >= 0."""
    gmin = g[0]
    yg = 0.0
    for k in range(k_count):
        gmin = min(gmin, g[k])
        yg += Yr[r, k] * g[k]
    return max(yg - gmin, 0.0)


@numba.njit(cache=True, nogil=True)
def _self_dot(Y, j, k_count):
    q = 0.0
    for k in range(k_count):
        q += Y[j, k] * Y[j, k]
    return q


@numba.njit(cache=True, nogil=True)
def objective(indptr, indices, x, w, Y, code, eps, diag):
    """f(Y): the sum over the stored pairs i < j of ``w_ij d(x_ij, y_i.y_j)`` (eq. 3), plus
    ``diag * sum_j (1 - y_j.y_j)^2``."""
    return objective_rows(indptr, indices, x, w, Y, Y.shape[1], 0, Y.shape[0], code, eps, diag)


@numba.njit(cache=True, nogil=True)
def objective_rows(indptr, indices, x, w, Y, k_count, row0, row1, code, eps, diag):
    """The part of f(Y) of the rows ``row0 <= j < row1``: the terms of their pairs (j, i) with i > j and their
    diagonal terms, from a CSR of those rows only (``indptr[j - row0]``; ``indices`` global). ``Y`` holds
    every row (its first ``k_count`` columns are the memberships), so that summed over a partition of the rows
    into ranges this is :func:`objective`."""
    f = 0.0
    for j in range(row0, row1):
        if diag != 0.0:
            r = 1.0 - _self_dot(Y, j, k_count)
            f += diag * r * r
        for e in range(indptr[j - row0], indptr[j - row0 + 1]):
            i = indices[e]
            if i > j:
                s = 0.0
                for k in range(k_count):
                    s += Y[j, k] * Y[i, k]
                f += w[e] * div(code, x[e], s, eps)
    return f


@numba.njit(cache=True, nogil=True)
def _add_diag_gradient(Y, j, k_count, diag, g):
    """g += the gradient in y_j of ``diag (1 - y_j.y_j)^2``."""
    if diag != 0.0:
        c = -4.0 * diag * (1.0 - _self_dot(Y, j, k_count))
        for k in range(k_count):
            g[k] += c * Y[j, k]


@numba.njit(cache=True, nogil=True)
def _kept_gap(YG, i, k_count, diag, g):
    """Row i's gap from its kept pair gradient (``YG[i, K:]``, its memberships ``YG[i, :K]``; plus the
    diagonal term's gradient), as the descent tests it."""
    for k in range(k_count):
        g[k] = YG[i, k_count + k]
    _add_diag_gradient(YG, i, k_count, diag, g)
    return _gap_of(YG, i, g, k_count)


@numba.njit(cache=True, nogil=True)
def max_kept_gap(YG, k_count, diag):
    """``max_j`` of the rows' gaps from their kept pair gradients (:func:`_kept_gap`), once every row's is."""
    g = np.empty(k_count)
    gap = 0.0
    for j in range(YG.shape[0]):
        gap = max(gap, _kept_gap(YG, j, k_count, diag, g))
    return gap


@numba.njit(cache=True, nogil=True)
def flag_kept_gaps(YG, k_count, diag, gap_tol, queued):
    """Flag in ``queued`` the rows whose gap from their kept pair gradient exceeds ``gap_tol``; returns how
    many (a tightened test puts them back on the work list)."""
    g = np.empty(k_count)
    count = 0
    for j in range(YG.shape[0]):
        if _kept_gap(YG, j, k_count, diag, g) > gap_tol:
            queued[j] = True
            count += 1
    return count


@numba.njit(cache=True, nogil=True)
def objective_and_gap(indptr, indices, x, w, Y, code, eps, diag):
    """``(f(Y), max_j gap_j)``: the objective of :func:`objective` and the KKT gap, from scratch."""
    return objective_and_gap_rows(indptr, indices, x, w, Y, Y.shape[1], 0, Y.shape[0], code, eps, diag)


@numba.njit(cache=True, nogil=True)
def objective_and_gap_rows(indptr, indices, x, w, Y, k_count, row0, row1, code, eps, diag):
    """:func:`objective_rows` and the largest KKT gap of the rows ``row0 <= j < row1``, from scratch (a CSR
    of those rows only; ``Y``'s first ``k_count`` columns are the memberships of every row)."""
    g = np.empty(k_count)
    gap = 0.0
    for j in range(row0, row1):
        for k in range(k_count):
            g[k] = 0.0
        lo = indptr[j - row0]
        hi = indptr[j - row0 + 1]
        for e in range(lo, hi):
            i = indices[e]
            s = 0.0
            for k in range(k_count):
                s += Y[j, k] * Y[i, k]
            c = w[e] * ddiv(code, x[e], s, eps)
            for k in range(k_count):
                g[k] += c * Y[i, k]
        _add_diag_gradient(Y, j, k_count, diag, g)
        if hi > lo or diag != 0.0:
            gap = max(gap, _row_direction(Y, j, g, k_count)[2])
    return objective_rows(indptr, indices, x, w, Y, k_count, row0, row1, code, eps, diag), gap
