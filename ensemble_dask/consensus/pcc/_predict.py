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

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)
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
def _mix(z):
    """SplitMix64's finaliser: a well-mixed 64-bit word of ``z``."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def _draw_partners(labels, order, base, l, seed, partners):
    """``partners[i]``: ``l`` fitted rows for new row ``i``, drawn from ``seed`` and the row's base labels
    alone (a counter-based generator keyed on them), so a row gets the same partners in any block, at any
    position, on any worker. The first ``l // 2`` are uniform members of the row's cluster in a uniformly
    drawn clustering (``order[:, u]``: the fitted rows sorted by their cluster in ``u``), or uniform fitted
    rows where the row has no label there or the cluster no fitted member; the others are uniform fitted
    rows."""
    n, N = labels.shape
    m = base.shape[0]
    golden = np.uint64(0x9E3779B97F4A7C15)
    for i in range(m):
        key = _mix(np.uint64(seed) + golden)
        for u in range(N):
            key = _mix(key ^ np.uint64(base[i, u] + 1) + golden)
        for t in range(l):
            partners[i, t] = _mix(key + np.uint64(3 * t + 1) * golden) % np.uint64(n)
            if t >= l // 2:
                continue
            u = np.int64(_mix(key + np.uint64(3 * t + 2) * golden) % np.uint64(N))
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
                r = np.int64(_mix(key + np.uint64(3 * t + 3) * golden) % np.uint64(lo - first))
                partners[i, t] = order[first + r, u]


def new_row_memberships(
    Y, labels, base, *, code, closed_form, diag=0.0, l=30, tol=1e-3, max_passes=100, seed=0, order=None
):
    """Memberships (``m x K``) of new rows with base labels ``base`` (``m x N``) against the fitted rows'
    memberships ``Y`` (``n x K``) and base labels ``labels`` (``n x N``).

    ``code``, ``closed_form``, ``diag``: the fit's divergence (PCC: KL or L2, ``diag = 0``; PPC: L2 with unit
    pair weights and ``diag = 1``). ``l`` partners per row; ``tol`` the KKT tolerance, relative to the total
    pair weight of a row whose partners share half its labels (``l N / 2``). A row's partners are drawn from
    ``seed`` and its base labels alone: its memberships do not depend on the other rows, their order or the
    blocks.
    ``order``: the fitted rows sorted by cluster, per clustering (``np.argsort(labels, axis=0)``), when the
    caller keeps it for many blocks.
    """
    Y = np.asarray(Y, dtype=np.float64)
    labels = np.ascontiguousarray(labels, dtype=np.int32)
    base = np.ascontiguousarray(base, dtype=np.int32)
    n, k = Y.shape
    m = base.shape[0]
    if order is None:
        order = np.argsort(labels, axis=0, kind="stable")
    partners = np.empty((m, l), dtype=np.int64)
    _draw_partners(labels, np.ascontiguousarray(order), base, l, int(seed), partners)
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
    gap_tol = tol * (1.0 + 0.5 * l * labels.shape[1])  # the same for every block: a row's own tolerance
    stats = np.zeros(3, dtype=np.int64)
    _k.descend_rows(
        indptr, indices, x, w, Yall, k, queued, n, n + m, code, closed_form, _KL_EPS, float(diag), _STEP_RTOL,
        gap_tol, 0.5 * gap_tol, max_passes, 20 + 2 * k, np.empty(max_passes + 1), stats, 0.0, gap_tol,
    )  # fmt: skip
    out = np.clip(Yall[n:, :k], 0.0, None)
    return out / out.sum(axis=1, keepdims=True)
