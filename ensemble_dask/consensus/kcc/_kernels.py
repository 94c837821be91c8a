"""Numba kernels of KCC: k-means on the 1-of-K binary matrix B, never built densely.

A row of the labels matrix is encoded as ``gidx`` (``n x N`` int64): ``gidx[x, i]`` is the global
category index ``offset_i + position of x's label in clustering i``, or ``-1`` when ``x`` is absent
from clustering ``i``. Centroids are stored transposed as ``MT`` (``sum_i K_i x K``): ``MT[g, k]`` is
the share of cluster ``k``'s members (present in that clustering) whose label is category ``g``.
``sq[k, i]`` is ``||m_{k,i}||^2``, the squared norm of block ``i`` of centroid ``k``.

The squared distance of ``x`` to centroid ``k`` over the clusterings where ``x`` is present is
``sum_i (1 + sq[k, i] - 2 MT[gidx[x, i], k])`` (``||b - m||^2 = 1 - 2 m_l + ||m||^2`` for a one-hot
``b`` with its 1 at ``l``). All kernels take plain arrays only.

With subsampled base clusterings about half of the entries are missing, at random: a branch on
``g < 0`` per entry is mispredicted half the time and cost two thirds of a Lloyd pass. The kernels
therefore look up a missing entry like a present one, in a table with one extra row per clustering
(:func:`_lookup_table`), or multiply its term by 0, adding exactly the same floating-point values as a
branch would (so results are bit-identical).
"""

from __future__ import annotations

import numba
import numpy as np

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)

__all__ = [
    "assign_stats",
    "assign_many",
    "assign_first",
    "partition_counts",
    "distances",
    "point_distances",
    "memberships",
]


@numba.njit(cache=True, nogil=True)
def _row_dist(gidx, x, MT, sq, k, d):
    """Fill ``d[:k]`` with the squared distances of row ``x`` to the ``k`` centroids."""
    N = gidx.shape[1]
    for c in range(k):
        d[c] = 0.0
    for i in range(N):
        g = gidx[x, i]
        present = 1.0 if g >= 0 else 0.0  # a select, not a branch; 0 * term adds nothing
        g = max(g, 0)
        for c in range(k):
            d[c] += present * (1.0 + sq[c, i] - 2.0 * MT[g, c])


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
def assign_many(gidx, weight, MTs, sqs, cand, labels, cext, sizes, far_d, far_row, sse, changed, lhash):
    """One Lloyd assignment of every row for several k-means at once (GKCC's candidates of a step).

    Run ``a`` has centroids ``MTs[a]`` (``G x K``) with block norms ``sqs[a]`` (``K x N``); its labels
    are column ``cand[a]`` of ``labels`` (``n x J`` int32, ``-1`` if none; updated in place) and its
    label counts per cluster are ``cext[cand[a]]`` (``K x (G + N)``, the extra column per clustering
    taking the missing entries), kept from pass to pass: only the rows whose cluster changed are
    moved, which with integer weights gives exactly the counts a fresh pass accumulates (the labels
    start at ``-1`` and ``cext`` at 0). Each run's distances, labels, ``sse[a]``, ``changed[a]``,
    ``sizes[a]`` and farthest rows (``far_d[a]``, ``far_row[a]``) are the same floating-point
    values :func:`assign_stats` gives for that run alone; here the row is read once for all runs
    and the lookups of all runs' centroids go through one table, a loop the compiler vectorises.
    ``lhash[a]`` (uint64, zeroed) receives a hash of run ``a``'s new labels (equal labels, equal hashes).
    """
    n, N = gidx.shape
    A, G, K = MTs.shape
    AK = A * K
    m = far_d.shape[1]
    T = np.empty((G + N, AK))
    tot = np.empty(AK)
    for a in range(A):
        for j in range(m):
            far_d[a, j] = -1.0
            far_row[a, j] = -1
        for g in range(G):
            for c in range(K):
                T[g, a * K + c] = 2.0 * MTs[a, g, c]
        for i in range(N):
            for c in range(K):
                T[G + i, a * K + c] = 1.0 + sqs[a, c, i]
        for c in range(K):
            s = 0.0
            for i in range(N):
                s += 1.0 + sqs[a, c, i]
            tot[a * K + c] = s
    d = np.empty(AK)
    slots = np.empty(N, dtype=np.int64)
    for x in range(n):
        for i in range(N):
            g = gidx[x, i]
            slots[i] = g if g >= 0 else G + i
        for q in range(AK):
            d[q] = tot[q]
        for i in range(N):
            s = slots[i]
            for q in range(AK):
                d[q] -= T[s, q]
        w = weight[x]
        for a in range(A):
            b0 = a * K
            best = 0
            bd = d[b0]
            for c in range(1, K):
                if d[b0 + c] < bd:
                    bd = d[b0 + c]
                    best = c
            if bd < 0.0:
                bd = 0.0
            sse[a] += w * bd
            sizes[a, best] += w
            lhash[a] = lhash[a] * np.uint64(1000003) + np.uint64(best + 1)
            j = cand[a]
            old = labels[x, j]
            if old != best:
                changed[a] += w
                labels[x, j] = best
                for i in range(N):
                    cext[j, best, slots[i]] += w
                if old >= 0:
                    for i in range(N):
                        cext[j, old, slots[i]] -= w
            if m > 0 and bd > far_d[a, m - 1]:
                r = m - 1
                while r > 0 and far_d[a, r - 1] < bd:
                    far_d[a, r] = far_d[a, r - 1]
                    far_row[a, r] = far_row[a, r - 1]
                    r -= 1
                far_d[a, r] = bd
                far_row[a, r] = x


@numba.njit(cache=True, nogil=True)
def assign_first(gidx, weight, MTs, sqs, labels, base, moved, sizes, far_d, far_row, sse, lhash):
    """The first pass of :func:`assign_many` for runs that share their first ``K - 1`` centroids.

    GKCC's candidates of a step start from the same previous centres plus each its own point, so
    the distances to the shared centres (``MTs[0][:, :K-1]``, whose block norms must be those of
    every run) are computed once per row, and a run's nearest centroid is the new one exactly where
    that one is strictly nearer than the nearest shared one (``argmin`` takes the first minimum).
    ``labels`` (``n x A``, all runs) is overwritten; ``base`` (``(K-1) x (G + N)``, zeroed) receives
    the counts of the rows' nearest shared centroid and ``moved`` (``(K-1) x (G + N) x A``, zeroed)
    at ``[b, slot, a]`` those of the rows of ``b`` that went to run ``a``'s new centroid: run
    ``a``'s counts are then ``base[b] - moved_b`` and, for the new cluster, the sum of the moved.
    Distances, labels, ``sse``, ``sizes`` and far rows are :func:`assign_stats`'s for each run;
    ``lhash`` as in :func:`assign_many`.
    """
    n, N = gidx.shape
    A, G, K = MTs.shape
    K1 = K - 1
    m = far_d.shape[1]
    Tb = np.empty((G + N, K1))
    Tn = np.empty((G + N, A))
    totb = np.empty(K1)
    totn = np.empty(A)
    for g in range(G):
        for c in range(K1):
            Tb[g, c] = 2.0 * MTs[0, g, c]
        for a in range(A):
            Tn[g, a] = 2.0 * MTs[a, g, K1]
    for i in range(N):
        for c in range(K1):
            Tb[G + i, c] = 1.0 + sqs[0, c, i]
        for a in range(A):
            Tn[G + i, a] = 1.0 + sqs[a, K1, i]
    for c in range(K1):
        s = 0.0
        for i in range(N):
            s += 1.0 + sqs[0, c, i]
        totb[c] = s
    for a in range(A):
        s = 0.0
        for i in range(N):
            s += 1.0 + sqs[a, K1, i]
        totn[a] = s
        for j in range(m):
            far_d[a, j] = -1.0
            far_row[a, j] = -1
    db = np.empty(K1)
    dn = np.empty(A)
    wm = np.empty(A)
    slots = np.empty(N, dtype=np.int64)
    for x in range(n):
        for i in range(N):
            g = gidx[x, i]
            slots[i] = g if g >= 0 else G + i
        for c in range(K1):
            db[c] = totb[c]
        for a in range(A):
            dn[a] = totn[a]
        for i in range(N):
            s = slots[i]
            for c in range(K1):
                db[c] -= Tb[s, c]
            for a in range(A):
                dn[a] -= Tn[s, a]
        b = 0
        bb = db[0]
        for c in range(1, K1):
            if db[c] < bb:
                bb = db[c]
                b = c
        w = weight[x]
        any_moved = False
        for a in range(A):  # selects, not branches: the new centre wins for about half the runs
            mv = dn[a] < bb
            best = K1 if mv else b
            bd = dn[a] if mv else bb
            wm[a] = w if mv else 0.0
            any_moved |= mv
            bd = max(bd, 0.0)
            sse[a] += w * bd
            sizes[a, best] += w
            lhash[a] = lhash[a] * np.uint64(1000003) + np.uint64(best + 1)
            labels[x, a] = best
            if m > 0 and bd > far_d[a, m - 1]:
                r = m - 1
                while r > 0 and far_d[a, r - 1] < bd:
                    far_d[a, r] = far_d[a, r - 1]
                    far_row[a, r] = far_row[a, r - 1]
                    r -= 1
                far_d[a, r] = bd
                far_row[a, r] = x
        for i in range(N):
            base[b, slots[i]] += w
        if any_moved:  # (moved[b, s, a], not a flat index b * A + a: that one defeats the vectoriser)
            for i in range(N):
                s = slots[i]
                for a in range(A):
                    moved[b, s, a] += wm[a]


@numba.njit(cache=True, nogil=True)
def partition_counts(gidx, weight, part, counts):
    """``counts[part[x], gidx[x, i]] += weight[x]`` over the present entries (``counts`` is ``K x G``)."""
    n, N = gidx.shape
    for x in range(n):
        k = part[x]
        w = weight[x]
        for i in range(N):
            g = gidx[x, i]
            if g >= 0:
                counts[k, g] += w


@numba.njit(cache=True, nogil=True)
def distances(gidx, MT, sq):
    """Squared distances (n, K) of every row to every centroid."""
    n = gidx.shape[0]
    K = MT.shape[1]
    out = np.empty((n, K))
    d = np.empty(K)
    for x in range(n):
        _row_dist(gidx, x, MT, sq, K, d)
        for c in range(K):
            out[x, c] = max(d[c], 0.0)
    return out


@numba.njit(cache=True, nogil=True)
def point_distances(gidx, center, csq, closest, out):
    """Squared distances of every row to one centre; ``closest`` is lowered to them in place if given.

    ``center`` is a length-``G`` vector (the centre over all categories), ``csq[i]`` its block norms.
    When ``closest`` has length ``n`` it becomes ``min(closest, distance)``; ``out`` (length ``n``)
    receives the distances. Returns the sum of ``min(closest, distance)`` (or of the distances).
    """
    n, N = gidx.shape
    update = closest.shape[0] == n
    tot = 0.0
    for x in range(n):
        s = 0.0
        for i in range(N):
            g = gidx[x, i]
            present = 1.0 if g >= 0 else 0.0  # a select, not a branch; 0 * term adds nothing
            s += present * (1.0 + csq[i] - 2.0 * center[max(g, 0)])
        if s < 0.0:
            s = 0.0
        out[x] = s
        if update:
            if s < closest[x]:
                closest[x] = s
            tot += closest[x]
        else:
            tot += s
    return tot


@numba.njit(cache=True, nogil=True)
def memberships(gidx, MT, sq, labels, Y):
    """Hard labels and Gibbs memberships ``Y[x, k] ~ exp(-(d(x, k) - min_k d(x, k)) / 2)``."""
    n = gidx.shape[0]
    K = MT.shape[1]
    d = np.empty(K)
    for x in range(n):
        _row_dist(gidx, x, MT, sq, K, d)
        best = 0
        for c in range(1, K):
            if d[c] < d[best]:
                best = c
        labels[x] = best
        tot = 0.0
        for c in range(K):
            e = np.exp(-0.5 * (d[c] - d[best]))
            Y[x, c] = e
            tot += e
        for c in range(K):
            Y[x, c] /= tot


@numba.njit(cache=True, nogil=True)
def category_counts(gidx, weight, n_categories):
    """Weighted number of rows with each global category, shape (G,)."""
    out = np.zeros(n_categories)
    n, N = gidx.shape
    for x in range(n):
        w = weight[x]
        for i in range(N):
            g = gidx[x, i]
            out[max(g, 0)] += w if g >= 0 else 0.0
    return out
