"""Numba kernels of the graph consensus: the co-association on a list of edges, Genie on a spanning tree,
the votes of base clusters, and exact nearest neighbours on small samples. Plain arrays in and out.

Genie (Gagolewski, Bartoszuk & Cena 2016, "Genie: a new, fast, and outlier-resistant hierarchical clustering
algorithm", Information Sciences 363, doi:10.1016/j.ins.2016.05.003) merges along the edges of a minimum
spanning tree in increasing weight, as single linkage does, except that while the normalised Gini index of
the cluster sizes exceeds a threshold, the next merge is the lightest edge that touches a cluster of the
smallest size. A threshold of 1 is single linkage.
"""

from __future__ import annotations

import numba
import numpy as np

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)

__all__ = ["cut", "edge_shares", "genie", "genie_merges", "nearest", "vote_tables", "votes"]


@numba.njit(cache=True, nogil=True)
def edge_shares(L, W, i, j, plain, weighted):
    """For each edge ``(i[e], j[e])``: ``plain[e]``, the share of the clusterings holding both rows that put
    them together, and ``weighted[e]``, the same share with each agreement weighted by ``W[i[e], t]`` (the
    reliability of row ``i[e]``'s cluster in clustering ``t``). 0 when no clustering holds both."""
    N = L.shape[1]
    for e in range(i.shape[0]):
        a = i[e]
        b = j[e]
        both = 0
        same = 0
        wsame = 0.0
        for t in range(N):
            la = L[a, t]
            lb = L[b, t]
            if la < 0 or lb < 0:
                continue
            both += 1
            if la == lb:
                same += 1
                wsame += W[a, t]
        if both > 0:
            plain[e] = same / both
            weighted[e] = wsame / both
        else:
            plain[e] = 0.0
            weighted[e] = 0.0


@numba.njit(cache=True, nogil=True)
def _find(parent, x):
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:  # path compression
        nxt = parent[x]
        parent[x] = root
        x = nxt
    return root


@numba.njit(cache=True, nogil=True)
def _fenwick_add(tree, pos, value):
    while pos < tree.shape[0]:
        tree[pos] += value
        pos += pos & -pos


@numba.njit(cache=True, nogil=True)
def _fenwick_prefix(tree, pos):
    total = 0.0
    while pos > 0:
        total += tree[pos]
        pos -= pos & -pos
    return total


@numba.njit(cache=True, nogil=True)
def _fenwick_first(tree):
    """The smallest position whose prefix count is at least 1 (the smallest size present)."""
    pos = 0
    step = 1
    while step * 2 < tree.shape[0]:
        step *= 2
    remaining = 1.0
    while step > 0:
        nxt = pos + step
        if nxt < tree.shape[0] and tree[nxt] < remaining:
            pos = nxt
            remaining -= tree[nxt]
        step //= 2
    return pos + 1


@numba.njit(cache=True, nogil=True)
def _spread(counts, sums, a, n_left, total_left):
    """Sum of ``|a - s|`` over the sizes ``s`` of the multiset held by the two Fenwick trees."""
    c_le = _fenwick_prefix(counts, a)
    s_le = _fenwick_prefix(sums, a)
    return a * c_le - s_le + (total_left - s_le) - a * (n_left - c_le)


@numba.njit(cache=True, nogil=True)
def genie_merges(u, v, n, k, threshold):
    """The edges Genie merges along, in their order, from ``n`` points down to ``k`` clusters: indices into
    the edges ``(u[e], v[e])`` of a spanning tree or forest sorted by increasing weight (fewer than ``n - k``
    on a forest of more than ``k`` trees). Genie's choice at each step does not depend on ``k``: the first
    ``n - K`` merges of one sequence to ``k <= K`` are the partition at ``K`` (:func:`cut`)."""
    m = u.shape[0]
    parent = np.arange(n)
    size = np.ones(n, dtype=np.int64)
    counts = np.zeros(n + 1)  # Fenwick trees over the sizes 1..n: how many clusters, and their points
    sums = np.zeros(n + 1)
    _fenwick_add(counts, 1, float(n))
    _fenwick_add(sums, 1, float(n))
    n_clusters = n
    spread = 0.0  # sum over pairs of clusters of |size_a - size_b|
    used = np.zeros(m, dtype=np.bool_)
    order = np.empty(max(n - k, 0), dtype=np.int64)
    n_merged = 0
    first = 0
    while n_clusters > k:
        while first < m and used[first]:
            first += 1
        if first == m:
            break
        e = first
        if n_clusters > 1 and spread / ((n_clusters - 1) * n) > threshold:
            smallest = _fenwick_first(counts)
            e = -1
            for f in range(first, m):
                if used[f]:
                    continue
                if size[_find(parent, u[f])] == smallest or size[_find(parent, v[f])] == smallest:
                    e = f
                    break
            if e < 0:  # the smallest clusters are whole trees of a forest: the lightest edge left
                e = first
        used[e] = True
        order[n_merged] = e
        n_merged += 1
        a = _find(parent, u[e])
        b = _find(parent, v[e])
        for r in (a, b):  # take both sizes out of the multiset, then put their sum in
            s = size[r]
            _fenwick_add(counts, s, -1.0)
            _fenwick_add(sums, s, -float(s))
            left = _fenwick_prefix(counts, n)
            spread -= _spread(counts, sums, s, left, _fenwick_prefix(sums, n))
        merged = size[a] + size[b]
        left = _fenwick_prefix(counts, n)
        spread += _spread(counts, sums, merged, left, _fenwick_prefix(sums, n))
        _fenwick_add(counts, merged, 1.0)
        _fenwick_add(sums, merged, float(merged))
        if size[a] < size[b]:
            a, b = b, a
        parent[b] = a
        size[a] = merged
        n_clusters -= 1
    return order[:n_merged]


@numba.njit(cache=True, nogil=True)
def cut(u, v, order, n):
    """Labels ``0..c-1`` (by first row) of ``n`` points after the merges along the edges ``order`` (indices
    into ``(u, v)``): ``c = n - len(order)`` clusters on a tree."""
    parent = np.arange(n)
    for e in order:
        a = _find(parent, u[e])
        b = _find(parent, v[e])
        if a != b:
            parent[b] = a
    labels = np.empty(n, dtype=np.int64)
    ids = np.full(n, -1, dtype=np.int64)
    nxt = 0
    for x in range(n):
        r = _find(parent, x)
        if ids[r] < 0:
            ids[r] = nxt
            nxt += 1
        labels[x] = ids[r]
    return labels


@numba.njit(cache=True, nogil=True)
def genie(u, v, n, k, threshold):
    """Labels ``0..c-1`` of ``n`` points cut into ``k`` clusters by Genie, from the edges ``(u[e], v[e])``
    of a spanning tree or forest sorted by increasing weight (a forest of ``c > k`` trees: ``c`` clusters)."""
    return cut(u, v, genie_merges(u, v, n, k, threshold), n)


@numba.njit(cache=True, nogil=True)
def vote_tables(L, z, offsets, K, out):
    """``out[offsets[t] + c, q]``: how many rows of base cluster ``c`` of clustering ``t`` have consensus
    label ``z = q`` (rows absent from ``t`` left out)."""
    n, N = L.shape
    for x in range(n):
        q = z[x]
        for t in range(N):
            c = L[x, t]
            if c >= 0:
                out[offsets[t] + c, q] += 1.0


@numba.njit(cache=True, nogil=True)
def votes(L, tables, offsets, sizes, out):
    """``out[x]``: the mean over the clusterings holding row ``x`` (in a base cluster that the tables know:
    ``c < sizes[t]`` and a row of the table not all zero) of the table row of its base cluster; the rows of
    ``tables`` sum to 1 or are all 0. A row with no such clustering is left all 0."""
    n, N = L.shape
    K = tables.shape[1]
    for x in range(n):
        held = 0
        for t in range(N):
            c = L[x, t]
            if c < 0 or c >= sizes[t]:
                continue
            g = offsets[t] + c
            if tables[g, 0] < 0:  # a base cluster with no member in the fit's rows: no vote
                continue
            held += 1
            for q in range(K):
                out[x, q] += tables[g, q]
        if held > 0:
            for q in range(K):
                out[x, q] /= held


@numba.njit(cache=True, nogil=True)
def nearest(data, queries, dist, ind):
    """The ``k = dist.shape[1]`` rows of ``data`` nearest each row of ``queries``, nearest first, into
    ``dist`` (Euclidean) and ``ind``; rows at the same distance in the order of their index. Every distance
    is computed (``len(data) x len(queries)``): for samples small enough that a tree is not worth building."""
    n, d = data.shape
    k = dist.shape[1]
    for q in range(queries.shape[0]):
        for j in range(k):
            dist[q, j] = np.inf
            ind[q, j] = -1
        for i in range(n):
            s = 0.0
            for f in range(d):
                t = data[i, f] - queries[q, f]
                s += t * t
            if s < dist[q, k - 1]:  # (a tie with the k-th: the row of the lower index stays)
                p = k - 1
                while p > 0 and dist[q, p - 1] > s:
                    dist[q, p] = dist[q, p - 1]
                    ind[q, p] = ind[q, p - 1]
                    p -= 1
                dist[q, p] = s
                ind[q, p] = i
        for j in range(k):
            dist[q, j] = np.sqrt(dist[q, j])
