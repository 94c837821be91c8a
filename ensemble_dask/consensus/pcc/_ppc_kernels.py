"""Numba kernel of the sparse Baum-Eagon sweep of PPC (Rota Bulò et al. 2010 eq. 5); the row descent of PPC is
:func:`~ensemble_dask.consensus.pcc._kernels.pcc_rows` with a diagonal term."""

from __future__ import annotations

import numba
import numpy as np

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)


@numba.njit(cache=True, nogil=True)
def ppc_sparse_sweep(indptr, indices, x, w, Y, Ynew):
    """One Baum-Eagon step (Rota Bulò et al. 2010 eq. 5) of PPC restricted to the stored pairs.

    Objective ``P(Y) = sum_i (1 - y_i.y_i)^2 + sum_{stored (i, j)} w_ij (x_ij - y_i.y_j)^2``
    (ordered entries, diagonal included with x_ii = 1 and weight 1, as in the dense
    Frobenius norm). With ``G_i = (1 - y_i.y_i) y_i + sum_j w_ij (x_ij - y_i.y_j) y_j`` and
    ``S_i = 1 + sum_j w_ij``, the growth transformation is
    ``ynew_ik = y_ik (S_i + G_ik) / (S_i + y_i.G_i)`` (the denominator taken as the sum of the
    numerators, equal on the simplex and numerically stable); it reduces to eq. (5) when every pair
    is stored with w = 1 (then S_i = n). Writes ``Ynew`` and returns ``(P(Y), gap)`` at the
    old Y, where gap = max_i (y_i.p_i - min_k p_ik) with ``p_i = -4 G_i`` the gradient of P.
    """
    n, k_count = Y.shape
    g = np.empty(k_count)
    obj = 0.0
    gap = 0.0
    for i in range(n):
        s_self = 0.0
        for k in range(k_count):
            s_self += Y[i, k] * Y[i, k]
        r = 1.0 - s_self
        obj += r * r
        tot = 1.0
        for k in range(k_count):
            g[k] = r * Y[i, k]
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            s = 0.0
            for k in range(k_count):
                s += Y[i, k] * Y[j, k]
            r = x[e] - s
            obj += w[e] * r * r
            tot += w[e]
            for k in range(k_count):
                g[k] += w[e] * r * Y[j, k]
        yg = 0.0
        gmax = g[0]
        for k in range(k_count):
            yg += Y[i, k] * g[k]
            gmax = max(gmax, g[k])
        gap = max(gap, 4.0 * (gmax - yg))
        # the denominator of eq. (5) is S_i + y_i.G_i when sum(y_i) = 1; dividing by the actual
        # sum of the numerators instead keeps rounding errors in sum(y_i) from being amplified
        den = 0.0
        for k in range(k_count):
            Ynew[i, k] = Y[i, k] * (tot + g[k])
            den += Ynew[i, k]
        for k in range(k_count):
            Ynew[i, k] /= den
    return obj, gap
