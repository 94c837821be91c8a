"""Numba kernels of PCC (papers/003 Sect. 5) and of the sparse PPC sweep (papers/002 eq. 5).

Plain arrays and scalars in, plain arrays out: no estimator, Dask or zarr object reaches this
module. ``Y`` is the public layout, ``n x K`` with rows on the simplex (the paper's ``K x n``
transposed).

Divergences
-----------
The divergence ``d(x1, x2) = B_phi(psi(x1) || psi(x2))`` with ``psi(x) = (x, 1 - x)`` is chosen by
an integer code that :func:`div` and :func:`ddiv` dispatch on (an integer keeps the kernels
typed simply and cacheable; first-class function arguments would recompile per function).

* ``KL = 0``: ``d = x1 log(x1/x2) + (1-x1) log((1-x1)/(1-x2))``,
  ``dd/dx2 = (x2 - x1) / (x2 (1 - x2))``. ``x2`` is clamped into ``[eps, 1 - eps]`` and outside
  that interval ``d`` continues along its tangent, so the objective stays finite, convex and
  continuously differentiable in ``x2`` (the line search and the descent proof still hold).
* ``L2 = 1``: ``d = 2 (x1 - x2)^2`` (``||psi(x1) - psi(x2)||^2``), ``dd/dx2 = 4 (x2 - x1)``;
  its exact line search is closed form.

To add a double-convex Bregman divergence: give it the next code, add a branch to :func:`div`
(its value) and :func:`ddiv` (its derivative in ``x2``), and register the name in
``ensemble_dask.consensus.pcc.DIVERGENCES``. The bisection line search (eq. 10) then works
unchanged; a closed-form step can be added in :func:`_line_search` like the L2 one.
"""

from __future__ import annotations

import numba
import numpy as np

KL = 0
L2 = 1


@numba.njit(cache=True, nogil=True)
def div(code, x1, x2, eps):
    """``d(x1, x2)`` of divergence ``code`` (KL clamped, tangent-extended outside [eps, 1-eps])."""
    if code == L2:
        t = x1 - x2
        return 2.0 * t * t
    c = min(max(x2, eps), 1.0 - eps)
    d = 0.0
    if x1 > 0.0:
        d += x1 * np.log(x1 / c)
    if x1 < 1.0:
        d += (1.0 - x1) * np.log((1.0 - x1) / (1.0 - c))
    if c != x2:
        d += (c - x1) / (c * (1.0 - c)) * (x2 - c)
    return d


@numba.njit(cache=True, nogil=True)
def ddiv(code, x1, x2, eps):
    """``d/dx2 d(x1, x2)`` of divergence ``code``."""
    if code == L2:
        return 4.0 * (x2 - x1)
    c = min(max(x2, eps), 1.0 - eps)
    return (c - x1) / (c * (1.0 - c))


# --------------------------------------------------------------------------- indexed binary heap
# A min-heap of the points keyed by (key_j, j), key_j = [g_j]_U - [g_j]_V <= 0, so the top is the
# point J of eq. (8). Slot s holds node ``hnode[s]`` with key ``hkey[s]`` (keys live in the heap so
# that a comparison touches one array), and ``pos[j]`` is j's slot, so a key can move either way
# in O(log n). Ties are broken by the smaller point index, like the dense kernel's scan.


@numba.njit(cache=True, nogil=True, inline="always")
def _less(ka, a, kb, b):
    return ka < kb or (ka == kb and a < b)


@numba.njit(cache=True, nogil=True)
def _sift_up(hkey, hnode, pos, slot):
    k = hkey[slot]
    node = hnode[slot]
    while slot > 0:
        parent = (slot - 1) >> 1
        if _less(k, node, hkey[parent], hnode[parent]):
            hkey[slot] = hkey[parent]
            hnode[slot] = hnode[parent]
            pos[hnode[slot]] = slot
            slot = parent
        else:
            break
    hkey[slot] = k
    hnode[slot] = node
    pos[node] = slot


@numba.njit(cache=True, nogil=True)
def _sift_down(hkey, hnode, pos, slot):
    size = hkey.shape[0]
    k = hkey[slot]
    node = hnode[slot]
    while True:
        child = 2 * slot + 1
        if child >= size:
            break
        if child + 1 < size and _less(hkey[child + 1], hnode[child + 1], hkey[child], hnode[child]):
            child += 1
        if _less(hkey[child], hnode[child], k, node):
            hkey[slot] = hkey[child]
            hnode[slot] = hnode[child]
            pos[hnode[slot]] = slot
            slot = child
        else:
            break
    hkey[slot] = k
    hnode[slot] = node
    pos[node] = slot


@numba.njit(cache=True, nogil=True)
def heap_build(hkey, hnode, pos, key):
    """Build the heap of nodes ``0..n-1`` with keys ``key`` into ``hkey``, ``hnode``, ``pos``."""
    size = key.shape[0]
    for s in range(size):
        hkey[s] = key[s]
        hnode[s] = s
        pos[s] = s
    for s in range(size // 2 - 1, -1, -1):
        _sift_down(hkey, hnode, pos, s)


@numba.njit(cache=True, nogil=True)
def heap_update(hkey, hnode, pos, node, new_key):
    """Set the key of ``node`` to ``new_key`` and restore the heap (increase- or decrease-key)."""
    slot = pos[node]
    old = hkey[slot]
    hkey[slot] = new_key
    if new_key < old:
        _sift_up(hkey, hnode, pos, slot)
    elif new_key > old:
        _sift_down(hkey, hnode, pos, slot)


# --------------------------------------------------------------------------- shared pieces


@numba.njit(cache=True, nogil=True)
def _direction(g, y):
    """``(U, V, key)`` of eq. (6) for one point: U = argmin g, V = argmax of g on supp(y)."""
    k_count = g.shape[0]
    u = 0
    for k in range(1, k_count):
        if g[k] < g[u]:
            u = k
    v = -1
    for k in range(k_count):
        if y[k] > 0.0 and (v < 0 or g[k] > g[v]):
            v = k
    return u, v, g[u] - g[v]


@numba.njit(cache=True, nogil=True, inline="always")
def _dot(a, b):
    s = 0.0
    for k in range(a.shape[0]):
        s += a[k] * b[k]
    return s


@numba.njit(cache=True, nogil=True)
def _rho(code, eps, step, x, w, a, delta, m):
    """rho(step) = d/d step of f along the search direction (only the J row's m terms vary)."""
    r = 0.0
    for t in range(m):
        r += w[t] * ddiv(code, x[t], a[t] + step * delta[t], eps) * delta[t]
    return r


@numba.njit(cache=True, nogil=True)
def _line_search(code, closed_form, eps, step_rtol, x, w, a, delta, m, y_vj):
    """Exact step of eq. (9) on [0, y_VJ]: closed form for L2, else bisection (eq. 10).

    The bisection keeps rho(l) <= 0 < rho(r) and stops when r - l <= step_rtol * r; it returns
    ``l``, so the objective never increases and, as rho(0) < 0, the step is positive.
    """
    if closed_form and code == L2:
        r0 = 0.0
        q = 0.0
        for t in range(m):
            r0 += w[t] * 4.0 * (a[t] - x[t]) * delta[t]
            q += w[t] * 4.0 * delta[t] * delta[t]
        if r0 >= 0.0:
            return 0.0
        if q <= 0.0 or r0 + q * y_vj <= 0.0:
            return y_vj
        return -r0 / q
    if _rho(code, eps, 0.0, x, w, a, delta, m) >= 0.0:
        return 0.0
    if _rho(code, eps, y_vj, x, w, a, delta, m) <= 0.0:
        return y_vj
    lo = 0.0
    hi = y_vj
    for _ in range(200):
        if hi - lo <= step_rtol * hi:
            break
        mid = 0.5 * (lo + hi)
        r = _rho(code, eps, mid, x, w, a, delta, m)
        if r > 0.0:
            hi = mid
        elif r < 0.0:
            lo = mid
        else:
            return mid
    return lo


@numba.njit(cache=True, nogil=True)
def _take_step(Y, jj, u, v, step, y_vj, y_old):
    """Y[J] += step (e_U - e_V), keeping the old row in ``y_old``; y_VJ is set to exactly 0 at the end."""
    for k in range(Y.shape[1]):
        y_old[k] = Y[jj, k]
    Y[jj, u] += step
    if step == y_vj:
        Y[jj, v] = 0.0
    else:
        Y[jj, v] -= step


@numba.njit(cache=True, nogil=True, inline="always")
def _move_neighbour(code, eps, Y, G, jj, i, x, w, a_old, y_old):
    """Swap pair (J, i)'s term in g_i and add its new term to g_J (which starts from 0).

    The old coefficient is recomputed from ``a_old = y_J_old . y_i``, which is bitwise the value
    used when that term was added (the dot products are always taken fresh), so g_i holds
    exactly one term per neighbour.
    """
    a_new = _dot(Y[jj], Y[i])
    c_old = w * ddiv(code, x, a_old, eps)
    c_new = w * ddiv(code, x, a_new, eps)
    for k in range(Y.shape[1]):
        G[i, k] += c_new * Y[jj, k] - c_old * y_old[k]
        G[jj, k] += c_new * Y[i, k]


# --------------------------------------------------------------------------- sparse PCC


@numba.njit(cache=True, nogil=True)
def _sparse_refresh(indptr, indices, x, w, Y, code, eps, G, key):
    """Recompute every g_i and key_i from Y; return f(Y)."""
    n, k_count = Y.shape
    f = 0.0
    for i in range(n):
        for k in range(k_count):
            G[i, k] = 0.0
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            s = _dot(Y[i], Y[j])
            c = w[e] * ddiv(code, x[e], s, eps)
            for k in range(k_count):
                G[i, k] += c * Y[j, k]
            if j > i:
                f += w[e] * div(code, x[e], s, eps)
        key[i] = _direction(G[i], Y[i])[2]
    return f


@numba.njit(cache=True, nogil=True)
def pcc_sparse(
    indptr,
    indices,
    x,
    w,
    Y,
    code,
    closed_form,
    eps,
    step_rtol,
    gap_tol,
    max_iter,
    refresh_every,
    trace_f,
    trace_it,
):
    """Greedy two-entry descent of PCC on stored pairs with a heap (papers/003 Sect. 5.4).

    Parameters
    ----------
    indptr, indices : int64 arrays
        Symmetric CSR pattern (both (i, j) and (j, i), no diagonal, rows sorted).
    x, w : float64 arrays of shape (nnz,)
        ``c_ij / N_ij`` and ``N_ij``.
    Y : float64 array (n, K), rows on the simplex
        Start point, updated in place.
    code, closed_form, eps, step_rtol
        Divergence code, use of its closed-form step, KL clamp, bisection relative tolerance.
    gap_tol : float
        Stop when max_j ([g_j]_V - [g_j]_U) <= gap_tol.
    max_iter, refresh_every : int
        Iteration cap; every ``refresh_every`` iterations the gradients are recomputed from Y
        (bounding the rounding drift of the incremental updates) and f(Y) is traced.
    trace_f, trace_it : float64 / int64 arrays, length >= max_iter // refresh_every + 2

    Returns
    -------
    n_iter, n_trace, gap : int, int, float
        Steps taken, trace entries written, final KKT gap (from recomputed gradients).

    Notes
    -----
    ``y_i.y_j`` is recomputed when needed rather than stored per pair: an iteration reads
    y_i of J's neighbours anyway, and not keeping per-pair state avoids random access to
    nnz-long arrays, which dominated the running time at n = 120,000.
    """
    n, k_count = Y.shape
    G = np.empty((n, k_count))
    key = np.empty(n)
    hkey = np.empty(n)
    hnode = np.empty(n, dtype=np.int64)
    pos = np.empty(n, dtype=np.int64)
    max_deg = 0
    for i in range(n):
        max_deg = max(max_deg, indptr[i + 1] - indptr[i])
    ba = np.empty(max_deg)
    bd = np.empty(max_deg)
    y_old = np.empty(k_count)

    f = _sparse_refresh(indptr, indices, x, w, Y, code, eps, G, key)
    heap_build(hkey, hnode, pos, key)
    n_trace = 0
    trace_f[n_trace] = f
    trace_it[n_trace] = 0
    n_trace += 1
    it = 0
    fresh = True
    while it < max_iter:
        if -hkey[0] <= gap_tol:
            break
        jj = hnode[0]
        u, v, _ = _direction(G[jj], Y[jj])
        lo = indptr[jj]
        hi = indptr[jj + 1]
        m = hi - lo
        for t in range(m):
            i = indices[lo + t]
            ba[t] = _dot(Y[jj], Y[i])
            bd[t] = Y[i, u] - Y[i, v]
        y_vj = Y[jj, v]
        step = _line_search(code, closed_form, eps, step_rtol, x[lo:hi], w[lo:hi], ba, bd, m, y_vj)
        if step <= 0.0:
            # the incremental gradient drifted from the fresh one of the line search:
            # resynchronise, and stop if even then no step is possible (numerically stationary)
            if fresh:
                break
            f = _sparse_refresh(indptr, indices, x, w, Y, code, eps, G, key)
            heap_build(hkey, hnode, pos, key)
            fresh = True
            continue
        fresh = False
        _take_step(Y, jj, u, v, step, y_vj, y_old)
        for k in range(k_count):
            G[jj, k] = 0.0
        for t in range(m):
            i = indices[lo + t]
            _move_neighbour(code, eps, Y, G, jj, i, x[lo + t], w[lo + t], ba[t], y_old)
            heap_update(hkey, hnode, pos, i, _direction(G[i], Y[i])[2])
        heap_update(hkey, hnode, pos, jj, _direction(G[jj], Y[jj])[2])
        it += 1
        if it % refresh_every == 0 and it < max_iter:
            f = _sparse_refresh(indptr, indices, x, w, Y, code, eps, G, key)
            heap_build(hkey, hnode, pos, key)
            fresh = True
            trace_f[n_trace] = f
            trace_it[n_trace] = it
            n_trace += 1
    f = _sparse_refresh(indptr, indices, x, w, Y, code, eps, G, key)
    gap = 0.0
    for i in range(n):
        gap = max(gap, -key[i])
    trace_f[n_trace] = f
    trace_it[n_trace] = it
    n_trace += 1
    return it, n_trace, gap


# --------------------------------------------------------------------------- dense PCC


@numba.njit(cache=True, nogil=True)
def _dense_refresh(X, W, Y, code, eps, G, key):
    n, k_count = Y.shape
    f = 0.0
    for i in range(n):
        for k in range(k_count):
            G[i, k] = 0.0
        for j in range(n):
            if j == i or W[i, j] <= 0.0:
                continue
            s = _dot(Y[i], Y[j])
            c = W[i, j] * ddiv(code, X[i, j], s, eps)
            for k in range(k_count):
                G[i, k] += c * Y[j, k]
            if j > i:
                f += W[i, j] * div(code, X[i, j], s, eps)
        key[i] = _direction(G[i], Y[i])[2]
    return f


@numba.njit(cache=True, nogil=True)
def pcc_dense(
    X, W, Y, code, closed_form, eps, step_rtol, gap_tol, max_iter, refresh_every, trace_f, trace_it
):
    """Algorithm 1 of papers/003 on dense ``n x n`` matrices (``X = C/N``, ``W = N``; W = 0 = unobserved).

    Same arguments, returns and arithmetic as :func:`pcc_sparse` (the two give the same Y on the
    same pairs), but the data are dense and J is found by a scan of the n keys, not a heap.
    """
    n, k_count = Y.shape
    G = np.empty((n, k_count))
    key = np.empty(n)
    nb = np.empty(n, dtype=np.int64)
    bx = np.empty(n)
    bw = np.empty(n)
    ba = np.empty(n)
    bd = np.empty(n)
    y_old = np.empty(k_count)

    f = _dense_refresh(X, W, Y, code, eps, G, key)
    n_trace = 0
    trace_f[n_trace] = f
    trace_it[n_trace] = 0
    n_trace += 1
    it = 0
    fresh = True
    while it < max_iter:
        jj = 0
        for j in range(1, n):
            if key[j] < key[jj]:
                jj = j
        if -key[jj] <= gap_tol:
            break
        u, v, _ = _direction(G[jj], Y[jj])
        m = 0
        for i in range(n):
            if i == jj or W[jj, i] <= 0.0:
                continue
            nb[m] = i
            bx[m] = X[jj, i]
            bw[m] = W[jj, i]
            ba[m] = _dot(Y[jj], Y[i])
            bd[m] = Y[i, u] - Y[i, v]
            m += 1
        y_vj = Y[jj, v]
        step = _line_search(code, closed_form, eps, step_rtol, bx, bw, ba, bd, m, y_vj)
        if step <= 0.0:
            if fresh:
                break
            f = _dense_refresh(X, W, Y, code, eps, G, key)
            fresh = True
            continue
        fresh = False
        _take_step(Y, jj, u, v, step, y_vj, y_old)
        for k in range(k_count):
            G[jj, k] = 0.0
        for t in range(m):
            i = nb[t]
            _move_neighbour(code, eps, Y, G, jj, i, bx[t], bw[t], ba[t], y_old)
            key[i] = _direction(G[i], Y[i])[2]
        key[jj] = _direction(G[jj], Y[jj])[2]
        it += 1
        if it % refresh_every == 0 and it < max_iter:
            f = _dense_refresh(X, W, Y, code, eps, G, key)
            fresh = True
            trace_f[n_trace] = f
            trace_it[n_trace] = it
            n_trace += 1
    f = _dense_refresh(X, W, Y, code, eps, G, key)
    gap = 0.0
    for i in range(n):
        gap = max(gap, -key[i])
    trace_f[n_trace] = f
    trace_it[n_trace] = it
    n_trace += 1
    return it, n_trace, gap


# --------------------------------------------------------------------------- PPC (sparse sweep)


@numba.njit(cache=True, nogil=True)
def ppc_sparse_sweep(indptr, indices, x, w, Y, Ynew):
    """One Baum-Eagon step (papers/002 eq. 5) of PPC restricted to the stored pairs.

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
