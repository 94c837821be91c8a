"""PCC's and PPC's memberships of new rows: each new row's own problem against fitted partners.

A new row ``i`` with base labels ``b`` (one per clustering, ``-1``: none) gets ``l`` partners among the
fitted rows: half drawn from its own base clusters (a random clustering ``u``, then a random member of
cluster ``b_u`` there), half uniformly. Its co-association with partner ``j`` is ``c_ij / N_ij`` over the
clusterings that label both. With the partners' memberships fixed, ``y_i`` is descended by the fit's own
row steps (:func:`~ensemble_dask.consensus.pcc._kernels.descend_rows`, listed rows only) from the
co-association-weighted mean of its partners' memberships, until its KKT test holds. Plain arrays in and
out.
"""

from __future__ import annotations

import numba
import numpy as np

from . import _kernels as _k
from ._pcc import _KL_EPS, _STEP_RTOL  # the fit's own clamp and line-search tolerance

__all__ = ["new_row_memberships"]


@numba.njit(cache=True, nogil=True)
def _pairs(labels, base, partners, n_fit, indptr, indices, x, w):
    """The CSR pairs of the new rows (row ``i``'s at ``indptr[i]``; partners are global rows < ``n_fit``):
    ``x = c / N``, ``w = N`` over the clusterings that label both; a partner sharing none is left out.
    Returns the number of entries written."""
    m, l = partners.shape
    N = labels.shape[1]
    pos = 0
    for i in range(m):
        indptr[i] = pos
        for t in range(l):
            j = partners[i, t]
            both = 0
            same = 0
            for u in range(N):
                lj = labels[j, u]
                if lj >= 0 and base[i, u] >= 0:
                    both += 1
                    if lj == base[i, u]:
                        same += 1
            if both > 0:
                indices[pos] = j
                x[pos] = same / both
                w[pos] = both
                pos += 1
    indptr[m] = pos
    return pos


@numba.njit(cache=True, nogil=True)
def _draw_own(labels, order, base, u_draw, r_draw, partners):
    """``partners[i, t]`` for ``t < own``: a uniform member of new row ``i``'s cluster in clustering
    ``u_draw[i, t]`` (``order[:, u]``: the fitted rows sorted by their cluster in ``u``); left as it is when
    the row has no label there or the cluster no fitted member."""
    m, own = u_draw.shape
    n = order.shape[0]
    for i in range(m):
        for t in range(own):
            u = u_draw[i, t]
            c = base[i, u]
            if c < 0:
                continue
            lo, hi = 0, n  # first position whose label is >= c
            while lo < hi:
                mid = (lo + hi) // 2
                if labels[order[mid, u], u] < c:
                    lo = mid + 1
                else:
                    hi = mid
            first = lo
            hi = n  # first position whose label is > c
            while lo < hi:
                mid = (lo + hi) // 2
                if labels[order[mid, u], u] <= c:
                    lo = mid + 1
                else:
                    hi = mid
            if lo > first:
                partners[i, t] = order[first + int(r_draw[i, t] * (lo - first)), u]


def _partners(labels, order, base, l, rng):
    """``(m, l)`` fitted rows: half from each new row's base clusters, half uniform (repeats possible)."""
    n, N = labels.shape
    m = base.shape[0]
    partners = rng.integers(0, n, size=(m, l))
    own = l // 2
    _draw_own(labels, order, base, rng.integers(0, N, size=(m, own)), rng.random((m, own)), partners)
    return partners


def new_row_memberships(
    Y, labels, base, *, code, closed_form, diag=0.0, l=30, tol=1e-3, max_passes=100, seed=0, order=None
):
    """Memberships (``m x K``) of new rows with base labels ``base`` (``m x N``) against the fitted rows'
    memberships ``Y`` (``n x K``) and base labels ``labels`` (``n x N``).

    ``code``, ``closed_form``, ``diag``: the fit's divergence (PCC: KL or L2, ``diag = 0``; PPC: L2 with unit
    pair weights and ``diag = 1``). ``l`` partners per row; ``tol`` the KKT tolerance, relative to a row's
    total pair weight. Drawn from ``seed``: the same rows give the same memberships. ``order``: the fitted
    rows sorted by cluster, per clustering (``np.argsort(labels, axis=0)``), when the caller keeps it for many
    blocks.
    """
    Y = np.asarray(Y, dtype=np.float64)
    labels = np.ascontiguousarray(labels, dtype=np.int32)
    base = np.ascontiguousarray(base, dtype=np.int32)
    n, k = Y.shape
    m = base.shape[0]
    rng = np.random.default_rng(seed)
    if order is None:
        order = np.argsort(labels, axis=0, kind="stable")
    partners = _partners(labels, np.ascontiguousarray(order), base, l, rng)
    indptr = np.empty(m + 1, dtype=np.int64)
    indices = np.empty(m * l, dtype=np.int64)
    x, w = np.empty(m * l), np.empty(m * l)
    nnz = _pairs(labels, base, partners, n, indptr, indices, x, w)
    indices, x, w = indices[:nnz], x[:nnz], w[:nnz]
    if diag:  # PPC: unit pair weights
        w = np.ones(nnz)
    rows = np.repeat(np.arange(m), np.diff(indptr))
    start = np.zeros((m, k))
    np.add.at(start, rows, (x * w)[:, None] * Y[indices])  # partners' memberships, by co-association
    start += 1e-3 / k
    start /= start.sum(axis=1, keepdims=True)
    Yall = np.empty((n + m, 2 * k))
    Yall[:n, :k] = Y
    Yall[n:, :k] = start
    queued = np.zeros(n + m, dtype=np.bool_)
    queued[n:] = True
    gap_tol = tol * (1.0 + float(w.sum()) / max(m, 1))  # relative to a row's mean total pair weight
    stats = np.zeros(3, dtype=np.int64)
    _k.descend_rows(
        indptr, indices, x, w, Yall, k, queued, n, n + m, code, closed_form, _KL_EPS, float(diag), _STEP_RTOL,
        gap_tol, 0.5 * gap_tol, max_passes, 20 + 2 * k, np.empty(max_passes + 1), stats, 0.0, gap_tol,
    )  # fmt: skip
    out = np.clip(Yall[n:, :k], 0.0, None)
    return out / out.sum(axis=1, keepdims=True)
