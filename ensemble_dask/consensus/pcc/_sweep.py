"""One pass of PCC-L2's row descent without its bookkeeping: PCC-KL's first moves from a start of hard labels
(KL's derivative is unbounded at a vertex). The descent itself is :func:`._kernels.descend_rows`."""

from __future__ import annotations

import numba
import numpy as np

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)
from ...runtime.prefetch import prefetch
from .._common.divergences import L2, d2div, ddiv
from ._row_ops import _gather_row, _row_direction, _row_gradient, _scratch


@numba.njit(cache=True, nogil=True)
def l2_sweep_rows(indptr, indices, x, w, Y, k_count, row0, row1, gap_tol, inner_tol, max_inner):
    """One pass of the squared-L2 descent (PCC-L2's steps, no diagonal term) over the rows
    ``row0 <= j < row1`` in order, each visited once; the pairs as in :func:`descend_rows` (row j at
    ``indptr[j - row0]``, ``indices`` global), ``Y``'s first ``k_count`` columns the memberships of every row
    (updated in place).

    The same Y as the first pass of :func:`descend_rows` (``code = L2``, closed form, every row listed, the
    same tolerances), without what only later passes read: no kept gradients of the neighbours (nor the gap
    tests that put them back on the list) and no f. KL's descent from hard labels starts with it (KL's
    derivative is unbounded at a vertex): the rows are off their vertices after one pass, and descending L2
    further does not help KL (the blobs of benchmarks/peers.py at 500,000 points, K = 8: KL's f 1.4726e6
    after L2 to its tolerance, 1.4713e6 after this pass; sub50 1.7274e6, 1.7221e6)."""
    max_deg, wide = _scratch(indptr, row0, row1, Y, k_count)
    nb = np.empty((max_deg, k_count))
    a = np.empty(max_deg)
    c = np.empty(max_deg)
    gp = np.empty(k_count)
    for j in range(row0, row1):
        lo = indptr[j - row0]
        m = indptr[j - row0 + 1] - lo
        # the next row's neighbours are on their way while this row is processed
        for e in range(lo + m, indptr[min(j - row0 + 2, row1 - row0)]):
            prefetch(Y, indices[e], 0)
            if wide:  # the row's last entry on another line (K > 8, or rows not aligned to lines)
                prefetch(Y, indices[e], k_count - 1)
        _gather_row(Y, j, indices, lo, m, k_count, w, x, L2, 0.0, nb, a, c)
        _row_gradient(c, nb, m, k_count, gp)
        u, v, gap = _row_direction(Y, j, gp, k_count)
        if gap <= gap_tol:
            continue
        for _ in range(max_inner):
            r0 = 0.0
            dr0 = 0.0
            for t in range(m):
                d = nb[t, u] - nb[t, v]
                if d != 0.0:
                    r0 += c[t] * d
                    dr0 += w[lo + t] * d2div(L2, x[lo + t], a[t], 0.0) * d * d
            y_vj = Y[j, v]
            if r0 >= 0.0:  # the closed-form step of _line_search
                break
            step = y_vj if dr0 <= 0.0 or r0 + dr0 * y_vj <= 0.0 else -r0 / dr0
            if step <= 0.0:
                break
            Y[j, u] += step
            Y[j, v] = 0.0 if step == y_vj else y_vj - step
            for t in range(m):
                d = nb[t, u] - nb[t, v]
                if d != 0.0:
                    a[t] += step * d
                    c_new = w[lo + t] * ddiv(L2, x[lo + t], a[t], 0.0)
                    dc = c_new - c[t]
                    c[t] = c_new
                    for k in range(k_count):
                        gp[k] += dc * nb[t, k]
            u, v, gap = _row_direction(Y, j, gp, k_count)
            if gap <= inner_tol:
                break
