"""Consensus on a sparse co-association graph: :class:`GraphConsensus`."""

from __future__ import annotations

import numbers

import numpy as np

from ..._validation import InputError, check_labels_matrix, check_random_state
from .._common.base import SoftConsensusMixin
from .._common.krange import is_k_range, k_range
from .._common.params import Interval, Options, check_n_clusters
from .._common.small import SMALL_SEARCH
from . import _choose_k
from . import _kernels as _k
from ._parts import (
    _embedded_kmeans,
    _Graph,
    _least_cut,
    _spanning_tree,
    _spectral_embedding,
    normalised_cut,
)

__all__ = ["GraphConsensus", "normalised_cut", "reliability"]

CANDIDATES = ("genie-ca", "genie-weighted", "spectral")
#: a sampled row's weight of its own label in its memberships (more than half: its argmax is that label)
_OWN = 0.51


def reliability(L, theta=0.4):
    """``n x N``: the reliability of each row's cluster in each clustering, ``exp(-H / (theta N))`` with ``H``
    the cluster's entropy over the other clusterings' partitions (Huang, Wang & Lai 2018, "Locally weighted
    cluster ensembles", IEEE Trans. Cybernetics 48(5), doi:10.1109/TCYB.2017.2702343: the ensemble-driven
    cluster index). Rows absent from a clustering (``-1``) count in neither its clusters nor the others'."""
    n, N = L.shape
    W = np.zeros((n, N))
    ks = L.max(axis=0) + 1
    for t in range(N):
        if ks[t] <= 0:
            continue
        H = np.zeros(ks[t])
        for s in range(N):
            if s == t or ks[s] <= 0:
                continue
            both = (L[:, t] >= 0) & (L[:, s] >= 0)
            table = np.bincount(
                L[both, t].astype(np.int64) * ks[s] + L[both, s], minlength=ks[t] * ks[s]
            ).reshape(ks[t], ks[s])
            P = table / np.maximum(table.sum(axis=1, keepdims=True), 1)
            H -= (P * np.log2(np.where(P > 0, P, 1.0))).sum(axis=1)
        present = L[:, t] >= 0
        W[present, t] = np.exp(-H / (theta * N))[L[present, t]]
    return W


class _Neighbours:
    """Exact nearest rows of ``data`` (Euclidean, nearest first), as scikit-learn's ``NearestNeighbors``
    finds them; on a small search (:data:`~ensemble_dask.consensus._common.small.SMALL_SEARCH`) every
    distance by a kernel, without importing scikit-learn (rows at the same distance by their index)."""

    def __init__(self, data):
        self.data = np.ascontiguousarray(data, dtype=np.float64)
        self._tree = None

    def kneighbors(self, queries, k):
        queries = np.ascontiguousarray(queries, dtype=np.float64)
        if self._tree is None and self.data.size * len(queries) <= SMALL_SEARCH:
            dist, ind = np.empty((len(queries), k)), np.empty((len(queries), k), dtype=np.int64)
            _k.nearest(self.data, queries, dist, ind)
            return dist, ind
        if self._tree is None:
            from sklearn.neighbors import NearestNeighbors

            self._tree = NearestNeighbors().fit(self.data)
        return self._tree.kneighbors(queries, n_neighbors=k)


def _joining_edges(i, j, Z, n):
    """Edges ``(a, b, distance)`` that make the graph of edges ``(i, j)`` connected: each component but the
    largest joined, round after round, by the shortest edge in feature space from one of its rows to a row
    outside it (looked for among each row's 64 nearest rows first, then among all rows outside)."""
    from scipy import sparse
    from scipy.sparse.csgraph import connected_components

    G = sparse.coo_matrix((np.ones(len(i)), (i, j)), shape=(n, n)).tocsr()
    ii, jj, dd = [], [], []
    index = None
    while True:
        n_comp, comp = connected_components(G, directed=False)
        if n_comp == 1:
            break
        big = int(np.argmax(np.bincount(comp)))
        rows = np.flatnonzero(comp != big)
        if index is None:
            index = _Neighbours(Z)
        dist, ind = index.kneighbors(Z[rows], min(64, n - 1) + 1)
        dist = np.where(comp[ind] != comp[rows][:, None], dist, np.inf)
        best = np.argmin(dist, axis=1)
        d_row = dist[np.arange(len(rows)), best]
        a_new, b_new, d_new = [], [], []
        for c in np.unique(comp[rows]):
            mine = np.flatnonzero(comp[rows] == c)
            k = mine[np.argmin(d_row[mine])]
            if np.isfinite(d_row[k]):
                a, b, d = rows[k], ind[k, best[k]], d_row[k]
            else:  # every near row is in the component: its nearest row outside, exactly
                inside, outside = rows[mine], np.flatnonzero(comp != c)
                dist_c, ind_c = _Neighbours(Z[outside]).kneighbors(Z[inside], 1)
                q = int(np.argmin(dist_c[:, 0]))
                a, b, d = inside[q], outside[ind_c[q, 0]], dist_c[q, 0]
            a_new.append(a)
            b_new.append(b)
            d_new.append(d)
        E = sparse.coo_matrix((np.ones(len(a_new)), (a_new, b_new)), shape=(n, n))
        G = (G + E + E.T).tocsr()
        ii += a_new
        jj += b_new
        dd += d_new
    return np.asarray(ii, dtype=np.int64), np.asarray(jj, dtype=np.int64), np.asarray(dd, dtype=np.float64)


def _spectral(A, K, seed):
    """Spectral clustering of the connected affinity graph ``A`` (symmetric, CSR): the ``K`` leading
    eigenvectors of ``D^-1/2 A D^-1/2`` (Lanczos, on products with ``A`` only: no factorisation), scaled by
    ``D^-1/2``, then k-means (10 starts) of their rows, as scikit-learn's ``spectral_clustering`` does."""
    return _embedded_kmeans(_spectral_embedding(A, K, seed)[1], K, seed)


def _genie_of_graph(G, K, threshold):
    u, v, _ = _spanning_tree(G)
    return _k.genie(u, v, G.shape[0], K, float(threshold))


class GraphConsensus(SoftConsensusMixin):
    """Consensus of base clusterings on their co-association kept on a sparse nearest-neighbour graph.

    The consensus partition is fitted on the rows of a seeded sample (every row when there are at most
    ``sample_size``): each sampled row is joined to its ``n_neighbors`` nearest sampled rows in feature space,
    and each edge carries its feature distance ``f`` (over the median) and ``ca``, the share of the base
    clusterings that put its two rows together. Three candidate partitions of that graph, and the one of the
    smallest normalised cut on the ``ca`` graph kept:

    * ``genie-ca``: Genie on the minimum spanning tree of ``1 - ca + 0.01 f`` (evidence accumulation, Fred &
      Jain 2005, with Genie instead of single linkage);
    * ``genie-weighted``: Genie on the minimum spanning tree of ``f (1 - lw + 0.1)``, ``lw`` the
      co-association with each agreement weighted by its cluster's reliability (:func:`reliability`);
    * ``spectral``: spectral clustering of the ``ca`` graph.

    A row's soft membership is the mean, over its base clusterings, of the shares of the consensus labels
    among its base cluster's sampled members (its votes); a sampled row's is 0.51 its own label and 0.49 its
    votes, so that its ``labels_`` (the argmax) is the graph's. A new row labelled by the base clusterings
    gets its votes (:meth:`transform`), as does a row left out of the sample.

    No ``n x n`` matrix is built: the graph has at most ``2 n_neighbors`` edges per sampled row. A base
    ensemble for it has many small clusters (k up to about the square root of the rows, every row labelled:
    ``generate``'s ``k_max: sqrt`` and ``extend: true``).

    ``n_clusters`` may instead ask for K to be chosen: ``"auto"`` (K in ``[2, clip(floor(sqrt(n) / 4), 10,
    30)]``) or a range ``(k_min, k_max)``. The graph is then built once, the consensus had at every K of the
    range and scored by ``k_criterion`` (:mod:`._choose_k`: ``eigengap``, ``lifetime``, ``pac``,
    ``stability``), and the best K kept.

    Parameters
    ----------
    n_clusters : int, "auto" or (int, int), default=2
    n_neighbors : int, default=20
    sample_size : int, default=20000
        Rows the graph is built on (a seeded sample when there are more); the others get the votes of their
        base clusters.
    gini_threshold : float in [0, 1], default=0.3
        Genie's threshold (1: single linkage).
    candidates : tuple of str, default=("genie-ca", "genie-weighted", "spectral")
        The candidate partitions compared (one of them: that one, with no comparison).
    spectral_max_clusters : int or None, default=50
        More clusters than this: the spectral candidate is left out while another remains. Its ``K``
        leading eigenvalues then crowd near 1, so that which ones Lanczos finds depends on its start vector,
        and it costs most of the fit (the benchmarks page, "At scale"). None: never left out.
    k_criterion : {"eigengap", "lifetime", "pac", "stability"}, default="stability"
        What chooses K when ``n_clusters`` is a range (every criterion is computed and kept).
    n_resamples : int, default=10
        Splits of the base clusterings into two random halves that ``pac`` and ``stability`` read (a range
        of K only).
    random_state : int, Generator or None, default=None

    Attributes
    ----------
    labels_, memberships_, uncertainty_, effective_k_
    n_clusters_ : int
        K of the result: ``n_clusters``, or the K chosen.
    k_scores_ : dict
        A range of K only: per K, every criterion's value, the candidate kept at that K and its cut (the
        spectral candidate is compared at the K chosen only: at another K, the Genie candidates).
    k_cdf_ : dict
        A range of K only: per K, the consensus CDF at ``_choose_k.CDF_GRID`` (the consensus values of
        ``pac``).
    k_reason_ : str
        A range of K only: why the K chosen won.
    candidate_ : str
        The candidate kept.
    cuts_ : dict
        Each candidate's normalised cut.
    tables_ : ndarray, shape (sum of the base clusterings' k, n_clusters)
        Each base cluster's share of each consensus cluster among its sampled members (-1: a base cluster with
        no sampled member), clustering ``t``'s rows from ``offsets_[t]``.
    offsets_ : ndarray of int, shape (N + 1,)
    sample_ : ndarray of int
        The rows the graph was built on.
    """

    _parameter_constraints = {
        "n_clusters": [Interval(numbers.Integral, 2, None), Options("auto"), list, tuple],
        "n_neighbors": [Interval(numbers.Integral, 1, None)],
        "sample_size": [Interval(numbers.Integral, 2, None)],
        "gini_threshold": [Interval(numbers.Real, 0, 1)],
        "candidates": [list, tuple],
        "spectral_max_clusters": [Interval(numbers.Integral, 1, None), None],
        "k_criterion": [Options(*_choose_k.CRITERIA)],
        "n_resamples": [Interval(numbers.Integral, 1, None)],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_clusters=2,
        *,
        n_neighbors=20,
        sample_size=20000,
        gini_threshold=0.3,
        candidates=CANDIDATES,
        spectral_max_clusters=50,
        k_criterion=_choose_k.DEFAULT_CRITERION,
        n_resamples=10,
        random_state=None,
    ):
        self.n_clusters = n_clusters
        self.n_neighbors = n_neighbors
        self.sample_size = sample_size
        self.gini_threshold = gini_threshold
        self.candidates = candidates
        self.spectral_max_clusters = spectral_max_clusters
        self.k_criterion = k_criterion
        self.n_resamples = n_resamples
        self.random_state = random_state

    def _spectral_at(self, K):
        """Whether the spectral candidate is computed at ``K`` clusters (``spectral_max_clusters``)."""
        return self.spectral_max_clusters is None or K <= self.spectral_max_clusters

    def _check_candidates(self):
        cands = list(self.candidates)
        unknown = [c for c in cands if c not in CANDIDATES]
        if not cands or unknown or len(set(cands)) != len(cands):
            raise InputError(
                "The 'candidates' parameter of GraphConsensus takes distinct names among "
                f"{list(CANDIDATES)}; got {cands}"
            )
        return cands

    def fit(self, labels, X, y=None):
        """Fit on base labels ``(n, N)`` (``-1``: a row outside a clustering) and the features ``X``
        ``(n, D)`` the base clusterings were made on; returns ``self``."""
        self._validate_params()
        cands = self._check_candidates()
        L = check_labels_matrix(labels)
        X = np.asarray(X, dtype=np.float64)
        n = L.shape[0]
        if X.ndim != 2 or X.shape[0] != n:
            raise InputError(f"X must be a 2-d array of the labels' {n} rows; got shape {X.shape}")
        if not np.isfinite(X).all():
            raise InputError("X must hold finite values only (no NaN or infinity)")
        chooses = is_k_range(self.n_clusters)
        if chooses:
            k_min, k_max = k_range(self.n_clusters, n)
            k_range((k_min, k_max), min(n, int(self.sample_size)))  # k_max < the graph's rows
        else:
            K = check_n_clusters(self, n)
            if not self._spectral_at(K) and len(cands) > 1:
                cands = [c for c in cands if c != "spectral"]
        rng = check_random_state(self.random_state)
        if n > self.sample_size:
            sample = np.sort(rng.choice(n, size=int(self.sample_size), replace=False))
        else:
            sample = np.arange(n)
        if chooses:
            z, K = self._choose(L[sample], X[sample], list(range(k_min, k_max + 1)), cands, rng)
        else:
            for name in ("k_scores_", "k_cdf_", "k_reason_"):  # of an earlier fit on a range
                self.__dict__.pop(name, None)
            z, self.candidate_, self.cuts_ = self._partition(L[sample], X[sample], K, cands, rng)
        self.n_clusters_ = K
        self.sample_ = sample
        self._tables(L[sample], z, L.max(axis=0) + 1, K)
        Y = self._votes(L)
        # a sampled row: its own label, just over half, and its base clusters' votes (argmax: its label)
        Y[sample] *= 1.0 - _OWN
        Y[sample, z] += _OWN
        self._set_memberships(Y)
        return self

    def _partition(self, L, Z, K, cands, rng):
        """The candidates' partitions of the sampled rows, and the one of the smallest normalised cut."""
        g = self._graph(L, Z, cands)
        out = {}
        for name in ("genie-ca", "genie-weighted"):
            if name in cands:
                out[name] = _genie_of_graph(g.tree_graph(name), K, self.gini_threshold)
        if "spectral" in cands:
            out["spectral"] = _spectral(g.A.tocsr(), K, int(rng.integers(2**31 - 1)))
        return _least_cut(g, out, cands)

    def _choose(self, L, Z, ks, cands, rng):
        """The partition of the K chosen among ``ks`` (:func:`._choose_k.sweep`), and that K."""
        K, self.k_reason_, z, kept, cuts, scores, cdfs = _choose_k.sweep(
            self, L, Z, ks, cands, rng, int(self.n_resamples), self.k_criterion
        )
        self.k_scores_ = {k: {**scores[k], "candidate": kept[k], "cut": cuts[k].get(kept[k])} for k in ks}
        self.k_cdf_ = cdfs
        self.candidate_, self.cuts_ = kept[K], cuts[K]
        return z, K

    def _graph(self, L, Z, cands):
        """The sampled rows' neighbour graph (:class:`_Graph`), joined into one component."""
        n = L.shape[0]
        m = min(int(self.n_neighbors), n - 1)
        dist, ind = _Neighbours(Z).kneighbors(Z, m + 1)
        i = np.repeat(np.arange(n, dtype=np.int64), m)
        j, f = ind[:, 1:].ravel().astype(np.int64), dist[:, 1:].ravel()
        scale = max(float(np.median(f)), 1e-12)
        W = reliability(L) if "genie-weighted" in cands else np.zeros(L.shape)

        ji, jj, jd = _joining_edges(i, j, Z, n)  # the neighbour graph joined into one component
        ei, ej, ef = np.r_[i, ji], np.r_[j, jj], np.r_[f, jd] / scale
        ca, lw = np.empty(len(ei)), np.empty(len(ei))
        _k.edge_shares(L, W, ei, ej, ca, lw)
        return _Graph(n, ei, ej, ef, ca, lw)

    def _tables(self, L, z, ks, K):
        ks = np.maximum(ks, 0).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(ks)]).astype(np.int64)
        tables = np.zeros((int(offsets[-1]), K))
        _k.vote_tables(L, z, offsets, K, tables)
        total = tables.sum(axis=1, keepdims=True)
        tables = np.where(total > 0, tables / np.maximum(total, 1), -1.0)
        self.tables_, self.offsets_ = tables, offsets

    def _votes(self, L):
        n = L.shape[0]
        Y = np.zeros((n, self.tables_.shape[1]))
        sizes = np.diff(self.offsets_)
        _k.votes(L, self.tables_, self.offsets_[:-1].copy(), sizes, Y)
        empty = Y.sum(axis=1) == 0
        Y[empty] = 1.0 / Y.shape[1]  # a row that no base cluster of the fit holds
        return Y

    @classmethod
    def from_parameters(cls, tables, offsets):
        """A fitted model from its ``tables_`` and ``offsets_`` (as a run store keeps them), for
        :meth:`transform` and :meth:`predict`."""
        tables = np.asarray(tables, dtype=np.float64)
        offsets = np.asarray(offsets, dtype=np.int64)
        if tables.ndim != 2 or offsets.ndim != 1 or offsets[0] != 0 or offsets[-1] != tables.shape[0]:
            raise InputError(
                f"tables of shape {tables.shape} and offsets ending at {offsets[-1]} do not fit each other"
            )
        est = cls(n_clusters=tables.shape[1])
        est.tables_, est.offsets_ = tables, offsets
        return est

    def transform(self, labels):
        """Memberships of (new) rows from their base labels ``(m, N)`` in the fitted ensemble's
        clusterings."""
        L = check_labels_matrix(labels)
        if L.shape[1] != len(self.offsets_) - 1:
            raise InputError(
                f"labels must have the fitted ensemble's {len(self.offsets_) - 1} columns; got {L.shape[1]}"
            )
        return self._votes(L)

    def predict(self, labels):
        """Consensus labels of (new) rows from their base labels."""
        return np.argmax(self.transform(labels), axis=1).astype(np.int64)
