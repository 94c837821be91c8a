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
# A min-heap of the points keyed by (key[j], j): key[j] = [g_j]_U - [g_j]_V <= 0, so the top is the
# point J of eq. (8). ``pos[j]`` is j's slot in ``heap`` so that a key can move either way in
# O(log n). Ties are broken by the smaller point index, like the dense kernel's scan.


@numba.njit(cache=True, nogil=True, inline="always")
def _less(key, a, b):
    return key[a] < key[b] or (key[a] == key[b] and a < b)


@numba.njit(cache=True, nogil=True)
def _sift_up(heap, pos, key, slot):
    node = heap[slot]
    while slot > 0:
        parent = (slot - 1) >> 1
        other = heap[parent]
        if _less(key, node, other):
            heap[slot] = other
            pos[other] = slot
            slot = parent
        else:
            break
    heap[slot] = node
    pos[node] = slot


@numba.njit(cache=True, nogil=True)
def _sift_down(heap, pos, key, slot):
    size = heap.shape[0]
    node = heap[slot]
    while True:
        child = 2 * slot + 1
        if child >= size:
            break
        if child + 1 < size and _less(key, heap[child + 1], heap[child]):
            child += 1
        other = heap[child]
        if _less(key, other, node):
            heap[slot] = other
            pos[other] = slot
            slot = child
        else:
            break
    heap[slot] = node
    pos[node] = slot


@numba.njit(cache=True, nogil=True)
def heap_build(heap, pos, key):
    """Arrange ``heap`` (a permutation of the nodes) into a heap on ``key``; fill ``pos``."""
    size = heap.shape[0]
    for s in range(size):
        pos[heap[s]] = s
    for s in range(size // 2 - 1, -1, -1):
        _sift_down(heap, pos, key, s)


@numba.njit(cache=True, nogil=True)
def heap_update(heap, pos, key, node, new_key):
    """Set ``key[node] = new_key`` and restore the heap (increase- or decrease-key)."""
    old = key[node]
    key[node] = new_key
    if new_key < old:
        _sift_up(heap, pos, key, pos[node])
    elif new_key > old:
        _sift_down(heap, pos, key, pos[node])


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


# --------------------------------------------------------------------------- sparse PCC


@numba.njit(cache=True, nogil=True)
def _sparse_refresh(indptr, indices, x, w, Y, code, eps, A, coef, G, U, V, key):
    """Recompute A_ij = y_i.y_j, the gradient coefficients, g_i, (U_i, V_i, key_i); return f(Y)."""
    n, k_count = Y.shape
    f = 0.0
    for i in range(n):
        for k in range(k_count):
            G[i, k] = 0.0
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            s = 0.0
            for k in range(k_count):
                s += Y[i, k] * Y[j, k]
            A[e] = s
            c = w[e] * ddiv(code, x[e], s, eps)
            coef[e] = c
            for k in range(k_count):
                G[i, k] += c * Y[j, k]
            if j > i:
                f += w[e] * div(code, x[e], s, eps)
        u, v, kk = _direction(G[i], Y[i])
        U[i] = u
        V[i] = v
        key[i] = kk
    return f


@numba.njit(cache=True, nogil=True)
def pcc_sparse(
    indptr,
    indices,
    mirror,
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
        Symmetric CSR pattern (both (i, j) and (j, i), no diagonal); ``mirror[e]`` is the
        entry of the transposed pair.
    x, w : float64 arrays of shape (nnz,)
        ``c_ij / N_ij`` and ``N_ij``.
    Y : float64 array (n, K), rows on the simplex
        Start point, updated in place.
    code, closed_form, eps, step_rtol
        Divergence code, use of its closed-form step, KL clamp, bisection relative tolerance.
    gap_tol : float
        Stop when max_j ([g_j]_V - [g_j]_U) <= gap_tol.
    max_iter, refresh_every : int
        Iteration cap; every ``refresh_every`` iterations A and g are recomputed from Y (this
        bounds rounding drift of the incremental updates) and f(Y) is appended to the trace.
    trace_f, trace_it : float64 / int64 arrays, length >= max_iter // refresh_every + 2

    Returns
    -------
    n_iter, n_trace, gap : int, int, float
        Steps taken, trace entries written, final KKT gap (from recomputed gradients).
    """
    n, k_count = Y.shape
    nnz = indices.shape[0]
    A = np.empty(nnz)
    coef = np.empty(nnz)
    G = np.empty((n, k_count))
    U = np.empty(n, dtype=np.int64)
    V = np.empty(n, dtype=np.int64)
    key = np.empty(n)
    heap = np.arange(n)
    pos = np.empty(n, dtype=np.int64)
    max_deg = 0
    for i in range(n):
        max_deg = max(max_deg, indptr[i + 1] - indptr[i])
    bx = np.empty(max_deg)
    bw = np.empty(max_deg)
    ba = np.empty(max_deg)
    bd = np.empty(max_deg)
    y_old = np.empty(k_count)

    f = _sparse_refresh(indptr, indices, x, w, Y, code, eps, A, coef, G, U, V, key)
    heap_build(heap, pos, key)
    n_trace = 0
    trace_f[n_trace] = f
    trace_it[n_trace] = 0
    n_trace += 1
    it = 0
    fresh = True
    while it < max_iter:
        jj = heap[0]
        if -key[jj] <= gap_tol:
            break
        u = U[jj]
        v = V[jj]
        lo = indptr[jj]
        m = indptr[jj + 1] - lo
        for t in range(m):
            i = indices[lo + t]
            bx[t] = x[lo + t]
            bw[t] = w[lo + t]
            ba[t] = A[lo + t]
            bd[t] = Y[i, u] - Y[i, v]
        y_vj = Y[jj, v]
        step = _line_search(code, closed_form, eps, step_rtol, bx, bw, ba, bd, m, y_vj)
        if step <= 0.0:
            # the incremental gradient drifted from the line search's fresh one: resynchronise,
            # and give up if even fresh quantities do not allow a step (numerically stationary)
            if fresh:
                break
            f = _sparse_refresh(indptr, indices, x, w, Y, code, eps, A, coef, G, U, V, key)
            heap_build(heap, pos, key)
            fresh = True
            continue
        fresh = False
        for k in range(k_count):
            y_old[k] = Y[jj, k]
        Y[jj, u] += step
        if step == y_vj:
            Y[jj, v] = 0.0
        else:
            Y[jj, v] -= step
        for t in range(m):
            e = lo + t
            i = indices[e]
            a_new = ba[t] + step * bd[t]
            c_new = bw[t] * ddiv(code, bx[t], a_new, eps)
            dc = c_new - coef[e]
            A[e] = a_new
            coef[e] = c_new
            A[mirror[e]] = a_new
            coef[mirror[e]] = c_new
            for k in range(k_count):
                G[i, k] += dc * y_old[k]
            G[i, u] += c_new * step
            G[i, v] -= c_new * step
            ui, vi, ki = _direction(G[i], Y[i])
            U[i] = ui
            V[i] = vi
            heap_update(heap, pos, key, i, ki)
        for k in range(k_count):
            G[jj, k] = 0.0
        for t in range(m):
            e = lo + t
            i = indices[e]
            c = coef[e]
            for k in range(k_count):
                G[jj, k] += c * Y[i, k]
        uj, vj, kj = _direction(G[jj], Y[jj])
        U[jj] = uj
        V[jj] = vj
        heap_update(heap, pos, key, jj, kj)
        it += 1
        if it % refresh_every == 0 and it < max_iter:
            f = _sparse_refresh(indptr, indices, x, w, Y, code, eps, A, coef, G, U, V, key)
            heap_build(heap, pos, key)
            fresh = True
            trace_f[n_trace] = f
            trace_it[n_trace] = it
            n_trace += 1
    f = _sparse_refresh(indptr, indices, x, w, Y, code, eps, A, coef, G, U, V, key)
    gap = 0.0
    for i in range(n):
        gap = max(gap, -key[i])
    trace_f[n_trace] = f
    trace_it[n_trace] = it
    n_trace += 1
    return it, n_trace, gap


# --------------------------------------------------------------------------- dense PCC


@numba.njit(cache=True, nogil=True)
def _dense_refresh(X, W, Y, code, eps, A, coef, G, U, V, key):
    n, k_count = Y.shape
    f = 0.0
    for i in range(n):
        for k in range(k_count):
            G[i, k] = 0.0
        for j in range(n):
            if j == i or W[i, j] <= 0.0:
                continue
            s = 0.0
            for k in range(k_count):
                s += Y[i, k] * Y[j, k]
            A[i, j] = s
            c = W[i, j] * ddiv(code, X[i, j], s, eps)
            coef[i, j] = c
            for k in range(k_count):
                G[i, k] += c * Y[j, k]
            if j > i:
                f += W[i, j] * div(code, X[i, j], s, eps)
        u, v, kk = _direction(G[i], Y[i])
        U[i] = u
        V[i] = v
        key[i] = kk
    return f


@numba.njit(cache=True, nogil=True)
def pcc_dense(
    X, W, Y, code, closed_form, eps, step_rtol, gap_tol, max_iter, refresh_every, trace_f, trace_it
):
    """Algorithm 1 of papers/003 on dense ``n x n`` matrices (``X = C/N``, ``W = N``; W = 0 = unobserved).

    Same arguments, returns and arithmetic as :func:`pcc_sparse` (the two give the same Y on the
    same pairs), but A, the gradient coefficients and the data are dense and J is found by a
    scan of the n keys instead of a heap.
    """
    n, k_count = Y.shape
    A = np.zeros((n, n))
    coef = np.zeros((n, n))
    G = np.empty((n, k_count))
    U = np.empty(n, dtype=np.int64)
    V = np.empty(n, dtype=np.int64)
    key = np.empty(n)
    nb = np.empty(n, dtype=np.int64)
    bx = np.empty(n)
    bw = np.empty(n)
    ba = np.empty(n)
    bd = np.empty(n)
    y_old = np.empty(k_count)

    f = _dense_refresh(X, W, Y, code, eps, A, coef, G, U, V, key)
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
        u = U[jj]
        v = V[jj]
        m = 0
        for i in range(n):
            if i == jj or W[jj, i] <= 0.0:
                continue
            nb[m] = i
            bx[m] = X[jj, i]
            bw[m] = W[jj, i]
            ba[m] = A[jj, i]
            bd[m] = Y[i, u] - Y[i, v]
            m += 1
        y_vj = Y[jj, v]
        step = _line_search(code, closed_form, eps, step_rtol, bx, bw, ba, bd, m, y_vj)
        if step <= 0.0:
            if fresh:
                break
            f = _dense_refresh(X, W, Y, code, eps, A, coef, G, U, V, key)
            fresh = True
            continue
        fresh = False
        for k in range(k_count):
            y_old[k] = Y[jj, k]
        Y[jj, u] += step
        if step == y_vj:
            Y[jj, v] = 0.0
        else:
            Y[jj, v] -= step
        for t in range(m):
            i = nb[t]
            a_new = ba[t] + step * bd[t]
            c_new = bw[t] * ddiv(code, bx[t], a_new, eps)
            dc = c_new - coef[jj, i]
            A[jj, i] = a_new
            A[i, jj] = a_new
            coef[jj, i] = c_new
            coef[i, jj] = c_new
            for k in range(k_count):
                G[i, k] += dc * y_old[k]
            G[i, u] += c_new * step
            G[i, v] -= c_new * step
            ui, vi, ki = _direction(G[i], Y[i])
            U[i] = ui
            V[i] = vi
            key[i] = ki
        for k in range(k_count):
            G[jj, k] = 0.0
        for t in range(m):
            i = nb[t]
            c = coef[jj, i]
            for k in range(k_count):
                G[jj, k] += c * Y[i, k]
        uj, vj, kj = _direction(G[jj], Y[jj])
        U[jj] = uj
        V[jj] = vj
        key[jj] = kj
        it += 1
        if it % refresh_every == 0 and it < max_iter:
            f = _dense_refresh(X, W, Y, code, eps, A, coef, G, U, V, key)
            fresh = True
            trace_f[n_trace] = f
            trace_it[n_trace] = it
            n_trace += 1
    f = _dense_refresh(X, W, Y, code, eps, A, coef, G, U, V, key)
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
