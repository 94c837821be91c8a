"""Baselines on the sparse co-association pairs: EAC single link, EAC average link, CSPA.

Each estimator's ``fit`` takes a :class:`~ensemble_dask.pairs.PairCounts` (or a ``(co, both)``
tuple of dense counts, for small tests) and works on the stored pairs only; no ``n x n`` matrix is
ever built. The similarity of a stored pair is the co-association fraction ``c_ij / N_ij``; a pair
that is not stored counts as similarity 0 (never seen together), so points joined by no chain of
stored pairs only meet when fewer clusters than connected components are asked for (then the
largest ``K - 1`` components stay apart and the rest form one cluster; for single and average
link every such merge is a tie at similarity 0, so this is one valid tie-break).

The soft membership of these hard methods is the one-hot matrix of their labels (uncertainty 0).
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
import scipy.sparse as sp

from ..._validation import check_random_state
from .._common.base import PairData, SoftConsensusMixin, as_pair_data
from .._common.params import Interval, check_n_clusters
from . import _kernels as kern

__all__ = ["EACSingleLink", "EACAverageLink", "CSPA", "one_hot", "merge_components"]


def one_hot(labels, k):
    """``n x k`` one-hot float matrix of ``labels``."""
    Y = np.zeros((labels.shape[0], k))
    Y[np.arange(labels.shape[0]), labels] = 1.0
    return Y


def relabel(labels):
    """Labels renumbered ``0..m-1`` by first appearance."""
    labels = np.asarray(labels)
    if labels.ndim == 1 and labels.size and labels.dtype.kind in "iu":
        lo, hi = int(labels.min()), int(labels.max())
        if lo >= 0 and hi <= 4 * labels.size + 1024:  # small labels: one pass with a table, no sort
            return kern.first_seen_codes(labels.astype(np.int64, copy=False), hi + 1)
    _, first, inv = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first, kind="stable"), kind="stable")
    return order[inv.ravel()].astype(np.int64)


def merge_components(labels, k):
    """Keep the ``k - 1`` largest groups of ``labels`` apart and merge the rest into one (ties: first
    seen)."""
    labels = relabel(labels)
    m = int(labels.max()) + 1
    if m <= k:
        return labels
    sizes = np.bincount(labels)
    keep = np.argsort(-sizes, kind="stable")[: k - 1]
    new = np.full(m, k - 1, dtype=np.int64)
    new[np.sort(keep)] = np.arange(k - 1)
    return relabel(new[labels])


def _similarity_graph(pd: PairData):
    """Symmetric CSR of the stored pairs with a positive co-association fraction."""
    # copies: eliminate_zeros works in place and pd's arrays may be the caller's PairCounts arrays
    S = sp.csr_array((pd.x.copy(), pd.indices.copy(), pd.indptr.copy()), shape=(pd.n, pd.n))
    S.eliminate_zeros()
    return S


class _PairBaseline(SoftConsensusMixin):
    _parameter_constraints = {"n_clusters": [Interval(Integral, 2, None)]}

    def _prepare(self, pairs):
        self._validate_params()
        pd = as_pair_data(pairs)
        self._k = check_n_clusters(self, pd.n)
        return pd

    def _finish(self, labels):
        labels = relabel(labels)
        self._set_memberships(one_hot(labels, max(self._k, int(labels.max()) + 1)))
        return self


class EACSingleLink(_PairBaseline):
    """Evidence accumulation, single link: the minimum spanning tree of the stored pairs, cut.

    Distances are ``1 - c_ij / N_ij`` on the stored pairs; the ``K - 1`` longest edges of the
    minimum spanning forest are cut (after the components' own separations, see the module notes).

    Parameters
    ----------
    n_clusters : int, default=2

    Attributes
    ----------
    labels_, memberships_ (one-hot), uncertainty_, effective_k_
    n_components_ : int
        Connected components of the stored pairs with a positive co-association.

    Examples
    --------
    >>> import numpy as np
    >>> from ensemble_dask.coassoc import dense_coassociation
    >>> labels = np.array([[0, 0], [0, 0], [1, 1], [1, 2]])
    >>> EACSingleLink(2).fit(dense_coassociation(labels)).labels_.tolist()
    [0, 0, 1, 1]
    """

    def __init__(self, n_clusters=2):
        self.n_clusters = n_clusters

    def fit(self, pairs, y=None):
        from scipy.sparse.csgraph import connected_components, minimum_spanning_tree  # a site needs none

        pd = self._prepare(pairs)
        S = _similarity_graph(pd)
        # distances 1 - s in (0, 1]; a tiny floor keeps s = 1 edges (scipy drops explicit zeros)
        D = S.copy()
        D.data = np.maximum(1.0 - D.data, 1e-12)
        T = minimum_spanning_tree(D).tocoo()
        n_comp, comp = connected_components(S, directed=False)
        self.n_components_ = int(n_comp)
        if n_comp >= self._k:
            return self._finish(merge_components(comp, self._k))
        n_cut = self._k - n_comp
        order = np.argsort(-T.data, kind="stable")
        keep = np.sort(order[n_cut:])
        F = sp.coo_array((np.ones(keep.size), (T.row[keep], T.col[keep])), shape=(pd.n, pd.n))
        _, labels = connected_components(F, directed=False)
        return self._finish(labels)


def _contract(S, mapping, m):
    """``P^T S P`` for the cluster map ``mapping`` (sums of similarities), diagonal dropped.

    Each unordered pair is summed once and mirrored, so the result is exactly symmetric (the
    mutual-best test compares floats for equality).
    """
    C = sp.triu(S, k=1, format="coo")
    r, c = mapping[C.row], mapping[C.col]
    off = r != c
    lo, hi = np.minimum(r[off], c[off]), np.maximum(r[off], c[off])
    U = sp.coo_array((C.data[off], (lo, hi)), shape=(m, m)).tocsr()
    U.sum_duplicates()
    return (U + U.T).tocsr()


class EACAverageLink(_PairBaseline):
    """Evidence accumulation, average link, on the stored pairs.

    The similarity of two clusters is the sum of ``c_ij / N_ij`` over the stored pairs between
    them divided by ``|A| |B|``: a pair not stored counts as 0 (as in the exact algorithm on a
    co-association matrix whose unobserved entries are 0). Average linkage is reducible, so a maximal
    matching of mutually best pairs is merged at once, round after round, on a contracted sparse graph
    (``O(nnz)`` per round); the merges, sorted by similarity, give the average-link dendrogram,
    cut at ``K`` clusters. It equals scipy's ``linkage(method='average')`` when no two merges tie;
    with ties (common: fractions c/N share denominators) it is one valid tie order among several.

    Parameters
    ----------
    n_clusters : int, default=2

    Attributes
    ----------
    labels_, memberships_ (one-hot), uncertainty_, effective_k_
    merge_similarities_ : ndarray
        Similarity of every merge of the dendrogram, in decreasing order.

    Examples
    --------
    >>> import numpy as np
    >>> from ensemble_dask.coassoc import dense_coassociation
    >>> labels = np.array([[0, 0], [0, 0], [1, 1], [1, 2]])
    >>> EACAverageLink(2).fit(dense_coassociation(labels)).labels_.tolist()
    [0, 0, 1, 1]
    """

    def __init__(self, n_clusters=2):
        self.n_clusters = n_clusters

    def fit(self, pairs, y=None):
        pd = self._prepare(pairs)
        n = pd.n
        S = _contract(_similarity_graph(pd), np.arange(n), n)  # exactly symmetric
        ip, ix, val = S.indptr.astype(np.int64), S.indices.astype(np.int64), S.data.astype(np.float64)
        rep = np.arange(n, dtype=np.int64)  # a point of each current cluster
        sizes = np.ones(n)
        ma, mb, ms, mr = [], [], [], []
        rnd = 0
        while ix.size:
            m = ip.size - 1
            best = np.empty(m, dtype=np.int64)
            bsim = np.empty(m)
            kern.best_neighbours(ip, ix, val, sizes, best, bsim)
            match = np.empty(m, dtype=np.int64)
            if kern.mutual_best_matching(ip, ix, val, sizes, bsim, match) == 0:
                raise RuntimeError("average link found no mutually best pair on a non-empty graph")
            idx = np.arange(m)
            a = np.flatnonzero(match > idx)
            b = match[a]
            ma.append(rep[a])
            mb.append(rep[b])
            ms.append(bsim[a])
            mr.append(np.full(a.size, rnd))
            rnd += 1
            keep = match < 0
            keep[a] = True  # new clusters: unmatched rows and the smaller end of each matched pair
            new_id = np.cumsum(keep) - 1
            mapping = np.where(
                match > idx, new_id, np.where(match >= 0, new_id[np.maximum(match, 0)], new_id)
            )
            mnew = int(keep.sum())
            group = np.argsort(mapping, kind="stable")
            group_ptr = np.concatenate([[0], np.cumsum(np.bincount(mapping, minlength=mnew))]).astype(
                np.int64
            )
            sizes = np.bincount(mapping, weights=sizes, minlength=mnew)
            rep = rep[keep]
            ip, ix, val = kern.contract(ip, ix, val, mapping, group_ptr, group, mnew)
        if ma:
            a, b, s, r = (np.concatenate(v) for v in (ma, mb, ms, mr))
        else:
            a = b = r = np.zeros(0, dtype=np.int64)
            s = np.zeros(0)
        order = np.lexsort((r, -s))
        a, b, s = a[order], b[order], s[order]
        self.merge_similarities_ = s
        parent = np.arange(n, dtype=np.int64)
        kern.union_merges(parent, a, b, min(a.size, n - self._k))
        return self._finish(merge_components(kern.find_roots(parent), self._k))


def metis_parts(indptr, indices, weights, k, seed, ufactor=None, recursive=False):
    """Partition a symmetric graph (CSR, positive integer edge weights) into ``k`` parts with METIS."""
    import pymetis

    opts = {"seed": int(seed)}
    if ufactor is not None:
        opts["ufactor"] = int(ufactor)
    xadj = np.ascontiguousarray(indptr, dtype=np.int32)
    adjncy = np.ascontiguousarray(indices, dtype=np.int32)
    # pymetis >= 2025.2 takes the graph as a CSRAdjacency (xadj/adjncy are deprecated there)
    graph = (
        {"adjacency": pymetis.CSRAdjacency(xadj, adjncy)}
        if hasattr(pymetis, "CSRAdjacency")
        else {"xadj": xadj, "adjncy": adjncy}
    )
    _, parts = pymetis.part_graph(
        k,
        **graph,
        eweights=np.ascontiguousarray(weights, dtype=np.int32),
        options=pymetis.Options(**opts),
        recursive=recursive,
    )
    return np.asarray(parts, dtype=np.int64)


class CSPA(_PairBaseline):
    """Cluster-based similarity partitioning (Strehl & Ghosh 2002): METIS on the co-association graph.

    Edge weights are ``round(1000 c_ij / N_ij)`` on the stored pairs (pairs with weight 0 are
    dropped); METIS (``pymetis``) returns ``K`` parts of balanced size, as in the original method.

    Parameters
    ----------
    n_clusters : int, default=2
    random_state : int, Generator or None, default=None
        Seeds METIS.

    Attributes
    ----------
    labels_, memberships_ (one-hot), uncertainty_, effective_k_

    Examples
    --------
    >>> import numpy as np
    >>> from ensemble_dask.coassoc import dense_coassociation
    >>> labels = np.array([[0, 0], [0, 0], [1, 1], [1, 2]])
    >>> CSPA(2, random_state=0).fit(dense_coassociation(labels)).labels_.tolist()
    [0, 0, 1, 1]
    """

    _parameter_constraints = {**_PairBaseline._parameter_constraints, "random_state": ["random_state"]}

    def __init__(self, n_clusters=2, *, random_state=None):
        self.n_clusters = n_clusters
        self.random_state = random_state

    def fit(self, pairs, y=None):
        pd = self._prepare(pairs)
        seed = int(check_random_state(self.random_state).integers(2**31 - 1))
        W = sp.csr_array((np.rint(1000 * pd.x), pd.indices.copy(), pd.indptr.copy()), shape=(pd.n, pd.n))
        W.eliminate_zeros()
        parts = metis_parts(W.indptr, W.indices, W.data, self._k, seed)
        return self._finish(parts)
