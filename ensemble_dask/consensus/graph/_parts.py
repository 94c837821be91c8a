"""The graph consensus's pieces on a graph of sampled rows, shared by the fit at one K (:mod:`._graph`) and
the fit over a range of K (:mod:`._choose_k`): the symmetric graph, its spanning tree, its spectral embedding,
the normalised cut, and the candidate of the smallest cut. Plain arrays, NumPy and SciPy."""

from __future__ import annotations

import numpy as np

__all__ = ["normalised_cut"]


def normalised_cut(i, j, w, z, n):
    """``(1/K) sum_k cut(k) / volume(k)`` of the partition ``z`` on the graph of edges ``(i, j)`` (each
    listed in both directions) of affinity ``w``."""
    K = int(z.max()) + 1
    degree = np.bincount(i, weights=w, minlength=n)
    volume = np.bincount(z, weights=degree, minlength=K)
    across = z[i] != z[j]
    cut = np.bincount(z[i][across], weights=w[across], minlength=K)
    return float(np.sum(cut / np.maximum(volume, 1e-12)) / K)


def _symmetric(i, j, w, n):
    """The graph of edges ``(i, j)`` of weight ``w`` made symmetric (a pair's larger weight kept), CSR."""
    from scipy import sparse

    G = sparse.coo_matrix((w, (i, j)), shape=(n, n)).tocsr()
    return G.maximum(G.T).tocsr()


def _spectral_embedding(A, K, seed):
    """``(values, embedding)``: the ``K`` largest eigenvalues of ``D^-1/2 A D^-1/2`` (decreasing) and their
    eigenvectors scaled by ``D^-1/2``, each of a fixed sign, in the same order (``n x K``)."""
    from scipy.sparse.linalg import eigsh

    degree = np.asarray(A.sum(axis=1)).ravel()
    scale = 1.0 / np.sqrt(np.maximum(degree, 1e-12))
    M = A.multiply(scale[:, None]).multiply(scale[None, :]).tocsr()
    rng = np.random.default_rng(seed)
    if K >= A.shape[0] - 1:  # Lanczos finds fewer eigenvectors than rows - 1
        values, vectors = np.linalg.eigh(M.toarray())
        values, vectors = values[-K:], vectors[:, -K:]
    else:
        values, vectors = eigsh(M, k=K, which="LA", v0=rng.uniform(-1, 1, A.shape[0]), tol=1e-8)
    order = np.argsort(-values, kind="stable")
    embedding = vectors[:, order] * scale[:, None]
    signs = np.sign(embedding[np.argmax(np.abs(embedding), axis=0), np.arange(K)])
    return values[order], embedding * signs


def _embedded_kmeans(embedding, K, seed):
    """k-means (10 starts) of the rows of the first ``K`` columns of a spectral embedding (NumPy's on a small
    embedding, :func:`~ensemble_dask.consensus._common.small.kmeans`)."""
    from .._common.small import SMALL_KMEANS, kmeans

    if embedding.shape[0] * K <= SMALL_KMEANS:
        return kmeans(embedding[:, :K], K, n_init=10, seed=seed)
    from sklearn.cluster import KMeans

    return KMeans(K, n_init=10, random_state=seed).fit_predict(embedding[:, :K])


def _spanning_tree(G):
    """``(u, v, weight)``: the edges of the minimum spanning tree of ``G`` by increasing weight."""
    from scipy.sparse.csgraph import minimum_spanning_tree

    T = minimum_spanning_tree(G).tocoo()
    order = np.argsort(T.data, kind="stable")
    u = np.ascontiguousarray(T.row[order], dtype=np.int64)
    v = np.ascontiguousarray(T.col[order], dtype=np.int64)
    return u, v, np.asarray(T.data[order], dtype=np.float64)


class _Graph:
    """The sampled rows' graph: edges ``(ei, ej)`` (a neighbour list, not symmetric), their feature distance
    ``ef`` over the median, co-association ``ca`` and reliability-weighted co-association ``lw``; ``A``: the
    symmetric ``ca`` graph (COO, connected: one eigenvalue 1)."""

    def __init__(self, n, ei, ej, ef, ca, lw):
        self.n, self.ei, self.ej, self.ef, self.ca, self.lw = n, ei, ej, ef, ca, lw
        self.A = _symmetric(ei, ej, ca + 1e-6, n).tocoo()

    def tree_graph(self, name, ca=None):
        """The graph whose minimum spanning tree Genie cuts for candidate ``name`` (``ca``: another
        co-association of the edges, e.g. of part of the ensemble)."""
        ca = self.ca if ca is None else ca
        if name == "genie-ca":
            return _symmetric(self.ei, self.ej, 1.0 - ca + 0.01 * self.ef + 1e-12, self.n)
        return _symmetric(self.ei, self.ej, self.ef * (1.0 - self.lw + 0.1) + 1e-12, self.n)


def _least_cut(g, out, cands):
    """``(partition, name, cuts)``: the candidate partitions ``out`` numbered from 0, each one's normalised
    cut on the ``ca`` graph, and the one of the smallest cut (the first listed on a tie)."""
    cuts = {}
    for name in cands:
        out[name] = np.unique(out[name], return_inverse=True)[1].astype(np.int64)
        cuts[name] = normalised_cut(g.A.row, g.A.col, g.A.data, out[name], g.n)
    chosen = min(cands, key=lambda c: (cuts[c], cands.index(c)))
    return out[chosen], chosen, cuts
