"""The one Lloyd step of k-means on the one-hot labels (KCC's, papers/004), shared by KCC's fit and the
starts of the BCE family, and the label counts of a partition.

A row of the labels matrix is encoded as ``gidx`` (``n x N``): ``gidx[x, i]`` is the global category index of
x's label in clustering ``i``, ``-1`` when x is absent from it. Centroids are stored transposed as ``MT``
(``G x K``, ``G = sum_i K_i``); ``sq[k, i]`` is the squared norm of block ``i`` of centroid ``k``. The squared
distance of x to centroid k over the clusterings where x is present is ``sum_i (1 + sq[k, i] - 2 MT[g, k])``.
A missing entry is looked up like a present one, in a table with one extra row per clustering
(:func:`_lookup_table`): the same floating-point sums as a branch, without its mispredictions.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["assign_stats", "partition_counts", "counts_of_partition"]


@numba.njit(cache=True, nogil=True)
def _lookup_table(MT, sq):
    """``T`` of shape ``(G + N, K)``: ``T[g] = 2 MT[g]`` for a category, ``T[G + i] = 1 + sq[:, i]`` for
    "missing from clustering i", so that :func:`_row_dist_fast` subtracts ``T[slot]`` for every entry."""
    G, K = MT.shape
    N = sq.shape[1]
    T = np.empty((G + N, K))
    for g in range(G):
        for c in range(K):
            T[g, c] = 2.0 * MT[g, c]
    for i in range(N):
        for c in range(K):
            T[G + i, c] = 1.0 + sq[c, i]
    return T


@numba.njit(cache=True, nogil=True)
def _row_dist_fast(gidx, x, T, G, tot, k, d):
    """As :func:`_row_dist`, from the precomputed ``tot[c] = sum_i (1 + sq[c, i])`` and the table of
    :func:`_lookup_table`: one lookup per entry (a missing one gives its term back)."""
    N = gidx.shape[1]
    for c in range(k):
        d[c] = tot[c]
    for i in range(N):
        g = gidx[x, i]
        slot = g if g >= 0 else G + i
        for c in range(k):
            d[c] -= T[slot, c]


@numba.njit(cache=True, nogil=True)
def assign_stats(gidx, weight, MT, sq, labels, counts, sizes, far_d, far_row):
    """Assign each row to its nearest centroid and accumulate the sufficient statistics.

    Parameters
    ----------
    gidx : int64 (n, N)
    weight : float64 (n,)
        Multiplicity of each row.
    MT : float64 (G, K)
    sq : float64 (K, N)
    labels : int64 (n,)
        Previous assignment (``-1`` if none); overwritten with the new one.
    counts : float64 (K, G)
        Zeroed on entry; receives the weighted label counts of each cluster.
    sizes : float64 (K,)
        Zeroed on entry; receives the weighted cluster sizes (rows with every label missing included).
    far_d, far_row : float64 (m,), int64 (m,)
        Receive the ``m`` largest distances of a row to its centroid and those rows (``-1`` if fewer),
        in decreasing order: the candidates to reseed empty clusters.

    Returns
    -------
    sse : float
        Weighted sum of the squared distances to the assigned centroids.
    n_changed : float
        Weighted number of rows whose assignment changed.
    """
    n, N = gidx.shape
    G, K = MT.shape
    m = far_d.shape[0]
    for j in range(m):
        far_d[j] = -1.0
        far_row[j] = -1
    T = _lookup_table(MT, sq)
    # counts with one extra column per clustering, where the missing entries land (dropped at the end)
    cext = np.zeros((K, G + N))
    d = np.empty(K)
    tot = np.empty(K)
    for c in range(K):
        tot[c] = 0.0
        for i in range(N):
            tot[c] += 1.0 + sq[c, i]
    sse = 0.0
    n_changed = 0.0
    for x in range(n):
        _row_dist_fast(gidx, x, T, G, tot, K, d)
        best = 0
        bd = d[0]
        for c in range(1, K):
            if d[c] < bd:
                bd = d[c]
                best = c
        if bd < 0.0:
            bd = 0.0
        w = weight[x]
        if labels[x] != best:
            n_changed += w
            labels[x] = best
        sse += w * bd
        sizes[best] += w
        for i in range(N):
            g = gidx[x, i]
            cext[best, g if g >= 0 else G + i] += w
        if m > 0 and bd > far_d[m - 1]:
            j = m - 1
            while j > 0 and far_d[j - 1] < bd:
                far_d[j] = far_d[j - 1]
                far_row[j] = far_row[j - 1]
                j -= 1
            far_d[j] = bd
            far_row[j] = x
    for c in range(K):
        for g in range(G):
            counts[c, g] += cext[c, g]
    return sse, n_changed


@numba.njit(cache=True, nogil=True)
def partition_counts(gidx, weight, part, counts):
    """``counts[part[x], gidx[x, i]] += weight[x]`` over the present entries (``counts`` is ``K x G``; a row
    with ``part[x] = -1`` is left out)."""
    n, N = gidx.shape
    for x in range(n):
        k = part[x]
        if k < 0:  # a row the partition leaves out
            continue
        w = weight[x]
        for i in range(N):
            g = gidx[x, i]
            if g >= 0:
                counts[k, g] += w


def counts_of_partition(gidx, part, n_categories, k, weight=None):
    """``(k, n_categories)`` label counts of the hard partition ``part`` (each row's cluster, ``-1``: left
    out): per cluster, the (weighted) rows holding each global category."""
    counts = np.zeros((k, int(n_categories)))
    weight = np.ones(gidx.shape[0]) if weight is None else np.asarray(weight, dtype=np.float64)
    partition_counts(np.asarray(gidx), weight, np.asarray(part, dtype=np.int64), counts)
    return counts
