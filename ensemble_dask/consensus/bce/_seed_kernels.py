"""Numba kernels of BCE's seeding: k-means++ on label rows, KCC's Lloyd steps, and the symmetric Dirichlet
objective that sets the soft start's prior (:mod:`._seeding`)."""

from __future__ import annotations

import math

import numba
import numpy as np

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)


@numba.njit(cache=True, nogil=True)
def row_distance(a, b):
    """Distance between two label rows: the share of their jointly observed entries that differ.

    On complete rows this is the squared distance of the rows' one-hot codings divided by
    ``2 N``; entries missing (``-1``) in either row are skipped. Rows without a jointly
    observed entry are at distance 1.
    """
    both = 0
    diff = 0
    for j in range(a.size):  # counted without branches (missing entries fall at random)
        ok = (a[j] >= 0) & (b[j] >= 0)
        both += ok
        diff += ok & (a[j] != b[j])
    if both == 0:
        return 1.0
    return diff / both


@numba.njit(cache=True, nogil=True)
def _min_dist_to(gidx, c, dmin, out):
    """``out[i] = min(dmin[i], distance(row i, row c))`` (``out`` may be ``dmin``)."""
    n = gidx.shape[0]
    row = gidx[c]
    for i in range(n):
        d = row_distance(gidx[i], row)
        out[i] = d if d < dmin[i] else dmin[i]


@numba.njit(cache=True, nogil=True)
def kmeanspp_rows(gidx, w, first, u):
    """Greedy k-means++ seeding on the label rows (weights ``w``), distance :func:`row_distance`.

    ``first`` is the first centre; ``u`` ``(k, T)`` holds uniform draws in [0, 1): centre ``c``
    is the best (lowest weighted potential) of ``T`` candidates drawn with probability
    proportional to ``w_i D(i)`` (scikit-learn's greedy variant). Returns the centres' row
    indices; fewer than ``k`` when all rows already coincide with a centre.
    """
    n = gidx.shape[0]
    k, T = u.shape
    centers = np.empty(k, dtype=np.int64)
    centers[0] = first
    dmin = np.full(n, np.inf)
    _min_dist_to(gidx, first, dmin, dmin)
    cum = np.empty(n)
    cand = np.empty(n)
    best_d = np.empty(n)
    for c in range(1, k):
        tot = 0.0
        for i in range(n):
            tot += w[i] * dmin[i]
            cum[i] = tot
        if tot <= 0.0:
            return centers[:c]
        best_pot = np.inf
        best = -1
        for t in range(T):
            r = u[c, t] * tot
            idx = np.searchsorted(cum, r, side="right")
            if idx >= n:
                idx = n - 1
            _min_dist_to(gidx, idx, dmin, cand)
            pot = 0.0
            for i in range(n):
                pot += w[i] * cand[i]
            if pot < best_pot:
                best_pot = pot
                best = idx
                best_d[:] = cand
        centers[c] = best
        dmin[:] = best_d
    return centers


@numba.njit(cache=True, nogil=True)
def kcc_counts(gidx, w, assign, k, R):
    """Per cluster, the weighted count of each global category and of observed entries per column.

    Returns ``counts (k, R)`` and ``nobs (k, N)``.
    """
    n, N = gidx.shape
    counts = np.zeros((k, R))
    nobs = np.zeros((k, N))
    for i in range(n):
        h = assign[i]
        wi = w[i]
        for j in range(N):
            g = gidx[i, j]
            wp = wi if g >= 0 else 0.0  # a select, not a branch: a missing entry adds 0
            counts[h, max(g, 0)] += wp
            nobs[h, j] += wp
    return counts, nobs


@numba.njit(cache=True, nogil=True)
def kcc_assign(gidx, centroid, sqnorm, assign):
    """One Lloyd assignment of k-means on the one-hot labels (KCC), missing entries skipped.

    ``centroid (k, R)`` holds per cluster and column the share of each label among the
    members observed there, ``sqnorm (k, N)`` its squared norm per column. Row ``i`` goes to
    ``argmin_h sum_{j observed} (1 - 2 centroid[h, x_ij] + sqnorm[h, j])``. Updates
    ``assign`` in place and returns the number of rows that moved.
    """
    n, N = gidx.shape
    k = centroid.shape[0]
    moved = 0
    for i in range(n):
        best = np.inf
        arg = 0
        for h in range(k):
            d = 0.0
            for j in range(N):
                g = gidx[i, j]
                present = 1.0 if g >= 0 else 0.0  # a select, not a branch: a missing entry adds 0
                d += present * (sqnorm[h, j] - 2.0 * centroid[h, max(g, 0)])
            if d < best:
                best = d
                arg = h
        if arg != assign[i]:
            moved += 1
            assign[i] = arg
    return moved


@numba.njit(cache=True, nogil=True)
def polya_objective(counts, w, a):
    """``sum_i w_i [lgamma(k a) - k lgamma(a) + sum_h lgamma(a + n_ih) - lgamma(k a + m_i)]``.

    The variational bound's dependence on a symmetric Dirichlet parameter ``a`` once every
    row's ``gamma_i = a + n_i`` is optimal for fixed ``phi`` (``n_ih = sum_j phi_ijh``).
    """
    n, k = counts.shape
    base = math.lgamma(k * a) - k * math.lgamma(a)
    total = 0.0
    for i in range(n):
        s = base
        m = 0.0
        for h in range(k):
            s += math.lgamma(a + counts[i, h])
            m += counts[i, h]
        total += w[i] * (s - math.lgamma(k * a + m))
    return total
