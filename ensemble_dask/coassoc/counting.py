"""In-memory co-association counts: the shared currency of the consensus solvers (NumPy only).

:class:`PairCounts` holds, for a set of point pairs, ``co`` (c_ij, the number of base
clusterings that put i and j in the same cluster) and ``both`` (N_ij, the number whose
subsample holds both) as a symmetric CSR matrix: both (i, j) and (j, i) are stored, the
diagonal never is. It is what the co-association store on disk reads into, and what PCC/PPC fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import InputError, check_labels_matrix
from ..runtime.threads import even_splits, thread_map, usable_cores
from . import _kernels as _k
from .sampling import DEFAULT_BLOCK_SIZE, THREADED_ROWS, _make_sampler, _sample_upper

__all__ = ["PairCounts", "dense_coassociation", "count_pairs", "coassociation", "index_dtype"]


def index_dtype(n):
    """The dtype of point indices in a pairs CSR of ``n`` points: int32 below 2**31 points, else int64."""
    return np.dtype(np.int32 if n < 2**31 else np.int64)


@dataclass(frozen=True)
class PairCounts:
    """Symmetric sparse co-association counts.

    Attributes
    ----------
    indptr : ndarray of shape (n + 1,), int64
    indices : ndarray of shape (nnz,), int32 (int64 from n = 2**31 points)
        Column of each stored entry; within a row, sorted ascending. Given as another integer
        type, it is converted.
    co : ndarray of shape (nnz,), int32
        c_ij, times i and j were put in the same cluster.
    both : ndarray of shape (nnz,), int32
        N_ij, times i and j were both present.
    n_clusterings : int
        Number of base clusterings N the counts were taken over.
    """

    indptr: np.ndarray
    indices: np.ndarray
    co: np.ndarray
    both: np.ndarray
    n_clusterings: int

    def __post_init__(self):
        dtype = index_dtype(self.n)
        if self.indices.dtype != dtype:
            object.__setattr__(self, "indices", np.asarray(self.indices, dtype=dtype))

    @property
    def n(self) -> int:
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        return len(self.indices)

    @property
    def n_pairs(self) -> int:
        """Number of unordered pairs (half the stored entries)."""
        return self.nnz // 2

    def to_scipy(self):
        """``(co, both)`` as two ``scipy.sparse.csr_array`` of shape (n, n)."""
        import scipy.sparse as sp  # here: the solvers and a federation site read the arrays as they are

        shape = (self.n, self.n)
        co = sp.csr_array((self.co, self.indices, self.indptr), shape=shape)
        both = sp.csr_array((self.both, self.indices, self.indptr), shape=shape)
        return co, both

    def rows(self):
        """Row index of each stored entry, shape (nnz,)."""
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.indptr))

    @classmethod
    def from_pairs(cls, n, i, j, co, both, n_clusterings):
        """Build from unordered pairs ``(i, j)`` with ``i != j`` (each given once).

        Both (i, j) and (j, i) are stored; rows are sorted by column.
        """
        i = np.asarray(i, dtype=np.int64)
        j = np.asarray(j, dtype=np.int64)
        if np.any(i == j):
            raise InputError("pairs must join two different points; got a pair (i, i)")
        rows = np.concatenate([i, j])
        cols = np.concatenate([j, i])
        order = np.lexsort((cols, rows))
        rows, cols = rows[order], cols[order]
        co2 = np.concatenate([co, co]).astype(np.int32)[order]
        both2 = np.concatenate([both, both]).astype(np.int32)[order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        return cls(indptr, cols, co2, both2, int(n_clusterings))

    @classmethod
    def from_dense(cls, co, both, n_clusterings=None, *, keep_zero_both=False):
        """All off-diagonal pairs of dense ``n x n`` count matrices.

        Pairs with ``both == 0`` carry no information and are dropped unless
        ``keep_zero_both`` is true.
        """
        co = np.asarray(co)
        both = np.asarray(both)
        if co.shape != both.shape or co.ndim != 2 or co.shape[0] != co.shape[1]:
            raise InputError(
                f"co and both must be square and of the same shape; got {co.shape}, {both.shape}"
            )
        n = co.shape[0]
        iu, ju = np.triu_indices(n, k=1)
        if not keep_zero_both:
            keep = both[iu, ju] > 0
            iu, ju = iu[keep], ju[keep]
        if n_clusterings is None:
            n_clusterings = int(both.max(initial=0))
        return cls.from_pairs(n, iu, ju, co[iu, ju], both[iu, ju], n_clusterings)

    def observed(self):
        """The pairs with ``both > 0`` (the others carry no evidence), as a new PairCounts."""
        keep = self.both > 0
        if keep.all():
            return self
        counts = np.bincount(self.rows()[keep], minlength=self.n)
        indptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return PairCounts(indptr, self.indices[keep], self.co[keep], self.both[keep], self.n_clusterings)

    def to_dense(self):
        """Dense ``(co, both)`` int32 matrices (small n only); unstored pairs are 0."""
        co, both = self.to_scipy()
        return co.toarray(), both.toarray()


def dense_coassociation(labels):
    """Dense co-association counts of a labels matrix (small n).

    Parameters
    ----------
    labels : array-like of shape (n, N)
        Base-cluster ids, ``-1`` where a point is absent from a clustering.

    Returns
    -------
    co, both : ndarray of shape (n, n), int32
        ``co[i, j]`` counts the clusterings that put i and j together, ``both[i, j]`` those
        that hold both. The diagonal holds each point's number of presences in both.

    Examples
    --------
    >>> co, both = dense_coassociation([[0, 1], [0, -1], [1, 1]])
    >>> co.tolist(), both.tolist()
    ([[2, 1, 1], [1, 1, 0], [1, 0, 2]], [[2, 1, 2], [1, 1, 1], [2, 1, 2]])
    """
    labels = check_labels_matrix(labels)
    n, n_clust = labels.shape
    co = np.zeros((n, n), dtype=np.int32)
    present = (labels >= 0).astype(np.int32)
    both = present @ present.T
    for u in range(n_clust):
        col = labels[:, u]
        keep = np.flatnonzero(col >= 0)
        if keep.size == 0:
            continue
        _, codes = np.unique(col[keep], return_inverse=True)
        onehot = np.zeros((keep.size, codes.max() + 1), dtype=np.int32)
        onehot[np.arange(keep.size), codes] = 1
        co[np.ix_(keep, keep)] += onehot @ onehot.T
    return co, both.astype(np.int32)


def count_pairs(labels, i, j):
    """c_ij and N_ij for the pairs ``(i[p], j[p])``.

    Parameters
    ----------
    labels : array-like of shape (n, N)
        Base-cluster ids, ``-1`` where a point is absent from a clustering.
    i, j : array-like of shape (P,)
        Point indices in ``[0, n)``.

    Returns
    -------
    co, both : ndarray of shape (P,), int32

    Examples
    --------
    >>> co, both = count_pairs([[0, 1], [0, -1], [1, 1]], [0, 0, 1], [1, 2, 2])
    >>> co.tolist(), both.tolist()
    ([1, 1, 0], [1, 2, 1])
    """
    labels = check_labels_matrix(labels)
    i = np.ascontiguousarray(i, dtype=np.int64)
    j = np.ascontiguousarray(j, dtype=np.int64)
    if i.shape != j.shape or i.ndim != 1:
        raise InputError(f"i and j must be 1-d of the same length; got shapes {i.shape} and {j.shape}")
    n = labels.shape[0]
    for name, idx in (("i", i), ("j", j)):
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            bad = idx[(idx < 0) | (idx >= n)][0]
            raise InputError(f"{name} holds point index {bad}, outside [0, n={n})")
    co = np.empty(i.size, dtype=np.int32)
    both = np.empty(i.size, dtype=np.int32)
    _k.count_pairs_kernel(labels, labels, i, j, co, both)
    return co, both


def coassociation(labels, *, strategy, seed, block_size=DEFAULT_BLOCK_SIZE, **params):
    """Sample pairs and count them, in memory (no Dask).

    Parameters
    ----------
    labels : array-like of shape (n, N)
        Base-cluster ids, ``-1`` where a point is absent.
    strategy, seed, block_size, **params
        As in :func:`sample_pairs`.

    Returns
    -------
    PairCounts
        Symmetric counts; equal to what :func:`build_coassociation` stores for the same
        arguments.

    Examples
    --------
    >>> pc = coassociation([[0, 0], [0, 1], [1, 1]], strategy="full", seed=0)
    >>> pc.n_pairs, pc.co.tolist(), pc.both.tolist()
    (3, [1, 0, 1, 1, 0, 1], [2, 2, 2, 2, 2, 2])
    """
    labels = check_labels_matrix(labels)
    if labels.shape[0] >= 2**31:
        raise InputError(f"coassociation holds at most 2**31 - 1 points in memory; got {labels.shape[0]}")
    sampler = _make_sampler(strategy, labels.shape[0], seed, block_size, params)
    # the upper triangle's rows straight from the draws, then both halves with no sort (O(pairs))
    uptr, ucols = _sample_upper(sampler, labels)
    n = sampler.n
    # row ranges of about equal numbers of pairs, counted on this process's cores
    bounds = even_splits(uptr, 1 if n < THREADED_ROWS else usable_cores())
    ranges = range(len(bounds) - 1)
    # each range's lower entries of every row (pairs (i, j) give row j the column i), then the symmetric
    # indptr and where each range's lower entries of a row begin: ranges in order, i ascending within
    # (int32: a range's count for a row is below n; 4 bytes per row per thread, not 8)
    counts = np.zeros((len(ranges), n), dtype=np.int32)
    thread_map(lambda t: _k.lower_counts_kernel(uptr, ucols, bounds[t], bounds[t + 1], counts[t]), ranges)
    low = counts.sum(axis=0, dtype=np.int64)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(low + np.diff(uptr), out=indptr[1:])
    fill = np.cumsum(counts, axis=0, dtype=np.int64)
    fill -= counts
    fill += indptr[:-1]
    nnz = int(indptr[-1])
    indices = np.empty(nnz, dtype=np.int32)
    co = np.empty(nnz, dtype=np.int32)
    both = np.empty(nnz, dtype=np.int32)
    # count each pair once and write it at both of its places (disjoint entries per range)
    thread_map(
        lambda t: _k.count_symmetric_kernel(
            labels, uptr, ucols, bounds[t], bounds[t + 1], indptr, low, fill[t], indices, co, both
        ),
        ranges,
    )
    return PairCounts(indptr, indices, co, both, labels.shape[1])
