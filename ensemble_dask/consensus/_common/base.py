"""Shared pieces of the pairwise consensus estimators (NumPy only).

* :func:`as_pair_data` turns what ``fit`` accepts (a :class:`~ensemble_dask.pairs.PairCounts` or a
  ``(co, both)`` tuple of dense ``n x n`` count matrices) into validated arrays, in CSR or dense
  form as the chosen solver needs;
* :class:`SoftConsensusMixin` derives the outputs common to every soft consensus method
  (``labels_``, ``uncertainty_``, ``effective_k_``) from ``memberships_`` and gives ``fit_predict``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..._validation import InputError
from ...coassoc.counting import PairCounts, index_dtype
from . import _kernels as _ck
from . import pair_kernels as _pk
from .params import ParamsMixin

__all__ = [
    "PairData",
    "as_pair_data",
    "count_weights",
    "pair_data_from_fractions",
    "normalized_entropy",
    "SoftConsensusMixin",
]


@dataclass
class PairData:
    """Validated co-association input of a pairwise solver.

    Attributes
    ----------
    n : int
        Number of points.
    indptr, indices : ndarray of int64, ndarray of int32
        Symmetric CSR pattern of the observed pairs (both orientations, no diagonal, rows sorted);
        ``indices`` are int64 from n = 2**31 points.
    x : ndarray of float64, shape (nnz,)
        Co-association fraction ``c_ij / N_ij`` of each stored entry.
    w : ndarray of int32 or float64, shape (nnz,)
        ``N_ij`` of each stored entry (> 0, or 0 for the :attr:`unobserved` ones): the int32 counts themselves
        where they came as such (no float64 copy: the kernels convert each one exactly where they read it, so
        the fit is the same bit for bit), else float64.
    s : ndarray of float64, shape (nnz,), or None
        The sample weight of each stored entry, None when not given (all 1).
    unobserved : int
        Stored entries with ``N_ij = 0`` (never both present) kept with ``w = 0`` and ``x = 0``, which every
        sum of the fit weighs by ``w`` (only with ``as_pair_data(..., keep_unobserved=True)``; else 0: they
        are left out).
    """

    n: int
    indptr: np.ndarray
    indices: np.ndarray
    x: np.ndarray
    w: np.ndarray
    s: np.ndarray | None = None
    unobserved: int = 0

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    @property
    def density(self) -> float:
        """Fraction of the ``n (n - 1)`` ordered off-diagonal pairs that are stored."""
        return self.nnz / max(self.n * (self.n - 1), 1)

    def rows(self):
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.indptr))

    def dense(self):
        """``(X, W)``: dense ``n x n`` float64 fraction and weight matrices, 0 where unobserved."""
        rows = self.rows()
        X = np.zeros((self.n, self.n))
        W = np.zeros((self.n, self.n))
        X[rows, self.indices] = self.x
        W[rows, self.indices] = self.w
        return X, W


def _check_counts(co, both, where):
    if np.any(co < 0):
        raise InputError(f"co-association counts must be >= 0; got {co.min()} {where}")
    bad = co > both
    if np.any(bad):
        k = int(np.flatnonzero(bad.ravel())[0])
        raise InputError(
            "co-association counts must satisfy c_ij <= N_ij; "
            f"got c={co.ravel()[k]} > N={both.ravel()[k]} {where}"
        )


def as_pair_data(pairs, sample_weight=None, *, keep_unobserved=False):
    """Validate ``pairs`` (and ``sample_weight``) and return a :class:`PairData`.

    ``pairs`` is a :class:`~ensemble_dask.coassoc.counting.PairCounts` or a tuple ``(co, both)``
    of dense symmetric ``n x n`` count matrices, whose diagonal is ignored. Pairs with
    ``N_ij = 0`` (never both present) carry no evidence and are left out; ``keep_unobserved``: a
    PairCounts' are kept where they are, with weight 0 (:attr:`PairData.unobserved`), for a solver whose
    every sum weighs a pair by ``w`` (PCC, PPC): leaving them out takes a copy of the caller's indices and
    counts. They
    are left out still with ``sample_weight`` or counts that are not int32 (then copied anyway), and from a
    ``(co, both)`` tuple.
    A :class:`PairData` (this function's own result) is returned as it is, with ``sample_weight`` attached
    if given: a caller that reads a large store converts once and lets the counts go before fitting.

    ``sample_weight`` is None or one positive weight per pair (e.g. its inverse inclusion
    probability under the sampling design): an array of shape ``(pairs.nnz,)`` aligned with the
    stored entries of a PairCounts, or of shape ``(n, n)`` for a ``(co, both)`` tuple; either way
    symmetric (``s_ij = s_ji``). It is returned in ``PairData.s`` on the kept pairs.
    """
    if isinstance(pairs, PairData):
        if sample_weight is None:
            return pairs
        return replace(pairs, s=_check_pair_weights(sample_weight, pairs))  # any kept unobserved pairs too
    if isinstance(pairs, PairCounts):
        if pairs.nnz == 0:
            raise InputError(f"pairs holds no pair of points (n={pairs.n}, nnz=0); nothing to fit")
        if pairs.co.ndim == 1 and pairs.co.shape == pairs.both.shape == pairs.indices.shape:
            # one pass over the counts when they are all valid and observed (the usual case)
            x = np.empty(pairs.nnz)
            bad, zeros = _pk.pair_values(pairs.co, pairs.both, x)
            if bad < 0 and (zeros == 0 or sample_weight is None) and zeros < pairs.nnz:
                s = None if sample_weight is None else _check_pair_weights(sample_weight, pairs)
                indptr = np.ascontiguousarray(pairs.indptr, dtype=np.int64)
                indices = np.ascontiguousarray(pairs.indices, dtype=index_dtype(pairs.n))
                w = count_weights(pairs.both)
                if zeros and keep_unobserved:  # x is 0 there, and w (N_ij) 0
                    return PairData(pairs.n, indptr, indices, x, w, s, unobserved=zeros)
                if zeros:  # pairs never both present (N_ij = 0) carry no evidence: left out in one pass
                    # compacted in place below; the caller's pairs stay whole
                    if np.shares_memory(indices, pairs.indices):
                        indices = indices.copy()
                    if np.shares_memory(w, pairs.both):
                        w = w.copy()
                    kept = np.empty_like(indptr)
                    m = _pk.compact_observed(indptr, indices, x, w, kept)
                    indptr, indices, x, w = kept, indices[:m], x[:m], w[:m]
                return PairData(pairs.n, indptr, indices, x, w, s)
        # the counts as stored (int32 from the pairs store): no int64 copies of two nnz-long arrays
        co = np.asarray(pairs.co)
        both = np.asarray(pairs.both)
        if not (np.issubdtype(co.dtype, np.integer) and np.issubdtype(both.dtype, np.integer)):
            co, both = co.astype(np.int64), both.astype(np.int64)
        if np.any(both < 0):
            raise InputError(f"N_ij counts must be >= 0; got {both.min()} in pairs")
        _check_counts(co, both, "in pairs")
        s = None if sample_weight is None else _check_pair_weights(sample_weight, pairs)
        indptr = np.ascontiguousarray(pairs.indptr, dtype=np.int64)
        indices = np.ascontiguousarray(pairs.indices, dtype=index_dtype(pairs.n))
        indptr, (indices, co, both, s) = _keep_observed(pairs.n, indptr, both > 0, indices, co, both, s)
        return PairData(pairs.n, indptr, indices, co / both, count_weights(both), s)
    if isinstance(pairs, tuple) and len(pairs) == 2:
        co = np.asarray(pairs[0])
        both = np.asarray(pairs[1])
        if co.ndim != 2 or co.shape[0] != co.shape[1] or co.shape != both.shape:
            raise InputError(
                f"(co, both) must be two square matrices of the same shape; got {co.shape} and {both.shape}"
            )
        if not (np.issubdtype(co.dtype, np.integer) and np.issubdtype(both.dtype, np.integer)):
            raise InputError(f"(co, both) must hold integer counts; got dtypes {co.dtype} and {both.dtype}")
        if not (np.array_equal(co, co.T) and np.array_equal(both, both.T)):
            raise InputError("(co, both) must be symmetric matrices")
        n = co.shape[0]
        off = ~np.eye(n, dtype=bool)
        _check_counts(co[off], both[off], "in (co, both)")
        if np.any(both[off] < 0):
            raise InputError(f"N_ij counts must be >= 0; got {both[off].min()}")
        observed = off & (both > 0)
        if not observed.any():
            raise InputError(f"(co, both) holds no observed pair of points (n={n}); nothing to fit")
        s = None
        if sample_weight is not None:
            sw = _check_weight_values(sample_weight, (n, n))
            if not np.array_equal(sw, sw.T):
                raise InputError("sample_weight must be a symmetric (n, n) matrix for a (co, both) tuple")
        rows, cols = np.nonzero(observed)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        nb = both[rows, cols]
        if sample_weight is not None:
            s = sw[rows, cols]
        return PairData(n, indptr, cols.astype(index_dtype(n)), co[rows, cols] / nb, count_weights(nb), s)
    raise InputError(
        "pairs must be a PairCounts or a (co, both) tuple of dense count matrices; "
        f"got {type(pairs).__name__}"
    )


def count_weights(both):
    """The weights ``w = N_ij`` of counts ``both``: the int32 array itself (C-contiguous), else as float64.

    No float64 copy of int32 counts is made (memory new to the process, which a VM maps on first
    touch); int32 counts convert exactly, so the kernels
    compute the same f and steps (their int32 build is a second numba specialisation)."""
    if both.dtype == np.int32:
        return np.ascontiguousarray(both)
    return np.asarray(both, dtype=np.float64)


def _keep_observed(n, indptr, keep, *arrays):
    """``(indptr, arrays)`` restricted to the stored entries where ``keep`` (``N_ij > 0``); None passes."""
    if keep.all():
        return indptr, arrays
    if not keep.any():
        raise InputError(f"pairs holds no pair with N_ij > 0 (n={n}); nothing to fit")
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    kept = np.zeros_like(indptr)
    np.cumsum(np.bincount(rows[keep], minlength=n), out=kept[1:])
    return kept, tuple(None if a is None else a[keep] for a in arrays)


def pair_data_from_fractions(n, indptr, indices, x, w):
    """:class:`PairData` of ``x = c / N`` and ``w = N`` per stored entry (``w = 0``: never both present,
    left out), e.g. from :func:`~ensemble_dask.coassoc.csr.read_pair_fractions`, which computes them from a
    large store chunk by chunk."""
    if len(indices) == 0:
        raise InputError(f"pairs holds no pair of points (n={n}, nnz=0); nothing to fit")
    indptr, (indices, x, w) = _keep_observed(n, np.asarray(indptr, dtype=np.int64), w > 0, indices, x, w)
    return PairData(n, indptr, np.ascontiguousarray(indices, dtype=index_dtype(n)), x, w)


def _check_weight_values(sample_weight, shape):
    """``sample_weight`` as float64 of ``shape``, positive and finite (off the diagonal if square)."""
    sw = np.asarray(sample_weight, dtype=np.float64)
    if sw.shape != shape:
        raise InputError(f"sample_weight must have shape {shape}; got {sw.shape}")
    vals = sw[~np.eye(shape[0], dtype=bool)] if len(shape) == 2 else sw
    if not np.all(np.isfinite(vals)) or np.any(vals <= 0):
        bad = vals[~(np.isfinite(vals) & (vals > 0))][0]
        raise InputError(f"sample_weight must be positive and finite; got {bad}")
    return np.ascontiguousarray(sw)


def _check_pair_weights(sample_weight, pairs):
    """One weight per stored entry of ``pairs``, the same for (i, j) and (j, i)."""
    sw = _check_weight_values(sample_weight, (pairs.nnz,))
    rows = pairs.rows()
    order = np.lexsort((rows, pairs.indices))  # the entries (j, i) in the order of the (i, j)
    if not np.array_equal(sw, sw[order]):
        raise InputError("sample_weight must be symmetric: the weight of (i, j) must equal that of (j, i)")
    return sw


def normalized_entropy(Y):
    """Entropy of each row of ``Y`` divided by ``log K`` (in [0, 1]; 0 when K = 1)."""
    Y = np.ascontiguousarray(Y, dtype=np.float64)
    out = np.zeros(Y.shape[0])
    if Y.shape[1] >= 2:
        # a kernel: the NumPy expression would make four n x K temporaries
        _ck.row_entropy(Y, out)
    return out


class SoftConsensusMixin(ParamsMixin):
    """Outputs shared by soft consensus estimators, derived from ``memberships_`` (n x K).

    ``labels_`` is the row-wise argmax (the maximum-likelihood hard partition of Lourenço et al. 2015
    Sect. 7), ``uncertainty_`` the normalised entropy of each row (Rota Bulò et al. 2010 Sect. 6), and
    ``effective_k_`` the number of clusters that are the argmax of at least one point.
    """

    def _set_memberships(self, Y):
        Y = np.asarray(Y, dtype=np.float64)
        self.memberships_ = Y
        self.labels_ = np.argmax(Y, axis=1).astype(np.int64)
        self.uncertainty_ = normalized_entropy(Y)
        self.effective_k_ = int(np.unique(self.labels_).size)

    def fit_predict(self, pairs, y=None):
        """Fit on ``pairs`` and return ``labels_``."""
        return self.fit(pairs).labels_


def dense_codes(vals, n):
    """``(n_codes, inverse)`` of integer labels ``vals >= 0``: their distinct values numbered 0, 1, ...
    in increasing order (codes up to ``4 n + 1024`` by a table instead of a sort)."""
    if vals.size and int(vals.max()) <= 4 * n + 1024:
        present = np.bincount(vals) > 0
        return int(present.sum()), (np.cumsum(present) - 1)[vals]
    codes, inv = np.unique(vals, return_inverse=True)
    return codes.size, inv
