"""A consensus design measured against the defaults (issue 58), in memory: not yet the package's code.

The ensemble: ``n_clusterings`` k-means runs (k-means++, one start, at most 100 iterations), each on a fresh
subsample of ``rate`` of the rows with k drawn uniformly in [K, max(K, floor(sqrt(n)))] (Fred & Jain's
evidence accumulation: many small clusters), every row labelled by its nearest centre; features z-scored.

The co-association is kept on a sparse graph only: each row's ``neighbours`` nearest rows in feature space
(self left out, the union of both directions), with per edge the feature distance ``f`` (over its median)
and the share ``ca`` of the runs where the two rows share a cluster; ``lw`` is that share with each cluster
weighted by its reliability over the ensemble (Huang, Wang & Lai 2018, LWEA: exp(-H / (theta M)), H the
cluster's entropy in the other runs' partitions).

Three consensus candidates on that graph, and the one of smallest normalised cut on the ``ca`` graph kept:

* A: Genie (Gagolewski et al. 2016, Gini threshold 0.3) on the minimum spanning tree of 1 - ca + 0.01 f;
* B: Genie (0.3) on the minimum spanning tree of f (1 - lw + 0.1);
* C: spectral clustering of the ``ca`` graph.

Every step is linear in the rows times the neighbours times the runs, except C's eigenvectors (scipy's
sparse solver here) and the joining of a disconnected graph (an exact nearest-neighbour search per extra
component here): the two parts that need another algorithm at millions of rows.
"""

from __future__ import annotations

import numpy as np

__all__ = ["graph_consensus"]

NEIGHBOURS = 20
THETA = 0.4
GINI = 0.3


def ensemble(Z, K, n_clusterings, rate, rng):
    """``n x n_clusterings`` labels: k-means of subsamples, every row by its nearest centre."""
    from sklearn.cluster import KMeans

    n = Z.shape[0]
    m = max(2, int(round(rate * n)))
    k_max = max(K, int(np.sqrt(n)))
    L = np.empty((n, n_clusterings), dtype=np.int64)
    for t in range(n_clusterings):
        k = min(int(rng.integers(K, k_max + 1)), m)
        rows = rng.choice(n, size=m, replace=False)
        km = KMeans(k, n_init=1, max_iter=100, random_state=int(rng.integers(2**31))).fit(Z[rows])
        L[:, t] = km.predict(Z)
    return L


def reliability(L, theta=THETA):
    """``n x M`` weight of each row's cluster in each run: exp(-H / (theta M)) (LWEA's ECI)."""
    n, M = L.shape
    ks = L.max(axis=0) + 1
    W = np.empty((n, M))
    for t in range(M):
        H = np.zeros(ks[t])
        for s in range(M):
            if s == t:
                continue
            table = np.bincount(L[:, t] * ks[s] + L[:, s], minlength=ks[t] * ks[s]).reshape(ks[t], ks[s])
            P = table / np.maximum(table.sum(axis=1, keepdims=True), 1)
            logs = np.log2(np.where(P > 0, P, 1.0))
            H -= (P * logs).sum(axis=1)
        W[:, t] = np.exp(-H / (theta * M))[L[:, t]]
    return W


def _shares(L, W, i, j):
    same = L[i] == L[j]
    return same.mean(axis=1) if W is None else (same * W[i]).mean(axis=1)


def _symmetric(i, j, w, n):
    from scipy import sparse

    G = sparse.coo_matrix((w, (i, j)), shape=(n, n)).tocsr()
    return G.maximum(G.T)


def _connected(G, Z, weight):
    """``G`` with edges added until it is connected: each component but the largest joined to its nearest
    row outside it in feature space, with ``weight(i, j, distance)``."""
    from scipy import sparse
    from scipy.sparse.csgraph import connected_components
    from sklearn.neighbors import NearestNeighbors

    while True:
        n_comp, comp = connected_components(G, directed=False)
        if n_comp == 1:
            return G
        big = np.argmax(np.bincount(comp))
        ii, jj, dd = [], [], []
        for c in range(n_comp):
            if c == big:
                continue
            inside, outside = np.flatnonzero(comp == c), np.flatnonzero(comp != c)
            dist, ind = NearestNeighbors(n_neighbors=1).fit(Z[outside]).kneighbors(Z[inside])
            a = int(np.argmin(dist[:, 0]))
            ii.append(inside[a])
            jj.append(outside[ind[a, 0]])
            dd.append(dist[a, 0])
        ii, jj = np.asarray(ii), np.asarray(jj)
        E = sparse.coo_matrix((weight(ii, jj, np.asarray(dd)), (ii, jj)), shape=G.shape)
        G = (G + E + E.T).tocsr()


def _genie(G, K):
    from genieclust.core import genie_from_mst
    from scipy.sparse.csgraph import minimum_spanning_tree

    T = minimum_spanning_tree(G).tocoo()
    order = np.argsort(T.data, kind="stable")
    edges = np.ascontiguousarray(np.c_[T.row[order], T.col[order]].astype(np.intp))
    return genie_from_mst(np.ascontiguousarray(T.data[order]), edges, K, GINI)["labels"]


def normalised_cut(A, z):
    """(1/K) sum over the clusters of their cut over their volume, on the affinity graph ``A``."""
    A = A.tocoo()
    K = int(z.max()) + 1
    degree = np.bincount(A.row, weights=A.data, minlength=A.shape[0])
    volume = np.bincount(z, weights=degree, minlength=K)
    across = z[A.row] != z[A.col]
    cut = np.bincount(z[A.row][across], weights=A.data[across], minlength=K)
    return float(np.sum(cut / np.maximum(volume, 1e-12)) / K)


def graph_consensus(X, K, seed, *, n_clusterings=50, rate=0.5, standardize=True):
    """Labels of ``X`` in ``K`` clusters by the design above, and the candidate kept (A, B or C)."""
    from sklearn.cluster import spectral_clustering
    from sklearn.neighbors import NearestNeighbors

    rng = np.random.default_rng(seed)
    Z = np.asarray(X, dtype=np.float64)
    if standardize:
        sd = Z.std(axis=0)
        Z = (Z - Z.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    n = Z.shape[0]
    L = ensemble(Z, K, n_clusterings, rate, rng)
    W = reliability(L)
    m = min(NEIGHBOURS, n - 1)
    dist, ind = NearestNeighbors(n_neighbors=m + 1).fit(Z).kneighbors(Z)
    i, j, f = np.repeat(np.arange(n), m), ind[:, 1:].ravel(), dist[:, 1:].ravel()
    scale = max(float(np.median(f)), 1e-12)

    def eac(a, b, d):
        return 1 - _shares(L, None, a, b) + 0.01 * d / scale + 1e-12

    def weighted(a, b, d):
        return d / scale * (1 - _shares(L, W, a, b) + 0.1) + 1e-12

    candidates = {}
    for name, weight in (("A", eac), ("B", weighted)):
        G = _connected(_symmetric(i, j, weight(i, j, f), n), Z, weight)
        candidates[name] = _genie(G, K)
    A_ca = _symmetric(i, j, _shares(L, None, i, j) + 1e-6, n)
    candidates["C"] = spectral_clustering(A_ca, n_clusters=K, random_state=seed)
    cuts = {}
    for name, z in candidates.items():
        z = np.unique(z, return_inverse=True)[1]
        candidates[name], cuts[name] = z, normalised_cut(A_ca, z)
    best = min(cuts, key=lambda c: (cuts[c], c))  # ties: A, B, C
    return candidates[best], best
