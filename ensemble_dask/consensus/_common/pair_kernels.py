"""Numba kernels around the PCC/PPC descent: the pair arrays of a fit and the objective of hard-label starts.

Plain arrays and scalars in, plain arrays out, as in :mod:`ensemble_dask.consensus.pcc._kernels` (whose
divergences they use).
"""

from __future__ import annotations

import numba

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)
from .divergences import div

__all__ = ["pair_values", "compact_observed", "objective_labels", "objective_change_labels"]


@numba.njit(cache=True, nogil=True)
def pair_values(co, both, x):
    """``x = c / N`` of each stored entry in one pass (the weights ``N`` are the counts themselves): returns
    ``(first entry with c < 0, N < 0 or c > N, or -1; number of entries with N = 0)`` (x is 0 there)."""
    bad = -1
    zeros = 0
    for e in range(co.shape[0]):
        c = co[e]
        b = both[e]
        if bad < 0 and (c < 0 or b < 0 or c > b):
            bad = e
        if b == 0:
            zeros += 1
            x[e] = 0.0
        else:
            x[e] = c / b
    return bad, zeros


@numba.njit(cache=True, nogil=True)
def compact_observed(indptr, indices, x, w, out_indptr):
    """Drop the entries with ``w = 0`` (N = 0) in place, keeping row order: ``indices``, ``x`` and ``w``
    are compacted to their first ``out_indptr[-1]`` entries; returns that number."""
    e_out = 0
    out_indptr[0] = 0
    for j in range(indptr.shape[0] - 1):
        for e in range(indptr[j], indptr[j + 1]):
            if w[e] != 0.0:
                indices[e_out] = indices[e]
                x[e_out] = x[e]
                w[e_out] = w[e]
                e_out += 1
        out_indptr[j + 1] = e_out
    return e_out


@numba.njit(cache=True, nogil=True)
def objective_labels(indptr, indices, x, w, lab, code, eps):
    """f at the vertex start of hard labels ``lab`` (y_i.y_j is 1 within a label, 0 across; PPC's
    diagonal term is 0): :func:`objective` without reading the rows of Y."""
    f = 0.0
    for j in range(lab.shape[0]):
        for e in range(indptr[j], indptr[j + 1]):
            i = indices[e]
            if i > j:
                f += w[e] * div(code, x[e], 1.0 if lab[i] == lab[j] else 0.0, eps)
    return f


@numba.njit(cache=True, nogil=True)
def objective_change_labels(indptr, indices, x, w, la, lb, code, eps):
    """f(vertex start lb) - f(vertex start la): only the pairs with a point whose label differs count."""
    d = 0.0
    for j in range(la.shape[0]):
        if la[j] == lb[j]:
            continue
        for e in range(indptr[j], indptr[j + 1]):
            i = indices[e]
            if la[i] != lb[i] and i < j:
                continue  # counted from row i
            sa = 1.0 if la[i] == la[j] else 0.0
            sb = 1.0 if lb[i] == lb[j] else 0.0
            if sa != sb:
                d += w[e] * (div(code, x[e], sb, eps) - div(code, x[e], sa, eps))
    return d
