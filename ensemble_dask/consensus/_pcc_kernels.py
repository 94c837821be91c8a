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
  ``dd/dx2 = (x2 - x1) / (x2 (1 - x2))``,
  ``d2d/dx2^2 = ((x2 - x1)^2 + x1 (1 - x1)) / (x2 (1 - x2))^2``. ``x2`` is clamped into
  ``[eps, 1 - eps]`` and outside that interval ``d`` continues along its tangent, so the
  objective stays finite, convex and continuously differentiable in ``x2`` (the line search
  and the descent proof still hold).
* ``L2 = 1``: ``d = 2 (x1 - x2)^2`` (``||psi(x1) - psi(x2)||^2``), ``dd/dx2 = 4 (x2 - x1)``;
  its exact line search is closed form.

To add a double-convex Bregman divergence: give it the next code, add a branch to :func:`div`
(its value), :func:`ddiv` (its derivative in ``x2``) and :func:`d2div` (the second one, used
by the Newton steps of the line search), and register the name in
``ensemble_dask.consensus.pcc.DIVERGENCES``. The line search then works unchanged; a
closed-form step can be added in :func:`_line_search` like the L2 one.
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


@numba.njit(cache=True, nogil=True)
def d2div(code, x1, x2, eps):
    """``d^2/dx2^2 d(x1, x2)`` of divergence ``code`` (0 where KL continues along its tangent)."""
    if code == L2:
        return 4.0
    c = min(max(x2, eps), 1.0 - eps)
    if c != x2:
        return 0.0
    q = c * (1.0 - c)
    e = c - x1
    return (e * e + x1 * (1.0 - x1)) / (q * q)


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


# --------------------------------------------------------------------------- PCC
# State layout: ``S`` is ``n x 2K``, row i = (y_i, g_i), so that visiting a neighbour touches one
# or two cache lines. Helpers that take arrays are plain (not ``inline="always"``) functions:
# numba's own inlining adds reference-count updates of the array arguments at every call site,
# which in the per-neighbour loop cost as much as the arithmetic; LLVM inlines them without.


@numba.njit(cache=True, nogil=True)
def _dot(S, a, b, k_count):
    """y_a . y_b."""
    s = 0.0
    for k in range(k_count):
        s += S[a, k] * S[b, k]
    return s


@numba.njit(cache=True, nogil=True)
def _direction(S, i, k_count):
    """``(U, V, key)`` of eq. (6) for point i: U = argmin g_i, V = argmax of g_i on supp(y_i)."""
    u = 0
    gu = S[i, k_count]
    for k in range(1, k_count):
        g = S[i, k_count + k]
        if g < gu:
            u = k
            gu = g
    v = -1
    gv = 0.0
    for k in range(k_count):
        g = S[i, k_count + k]
        if S[i, k] > 0.0 and (v < 0 or g > gv):
            v = k
            gv = g
    return u, v, gu - gv


@numba.njit(cache=True, nogil=True)
def _rho(code, eps, step, x, w, lo, a, delta, m):
    """``(rho, rho')`` at ``step``: rho = d/d step of f along the direction (only J's m terms vary).

    ``x[lo + t]``, ``w[lo + t]``, ``a[t]``, ``delta[t]`` describe J's t-th pair.
    """
    r = 0.0
    dr = 0.0
    for t in range(m):
        z = a[t] + step * delta[t]
        r += w[lo + t] * ddiv(code, x[lo + t], z, eps) * delta[t]
        dr += w[lo + t] * d2div(code, x[lo + t], z, eps) * delta[t] * delta[t]
    return r, dr


@numba.njit(cache=True, nogil=True)
def _line_search(code, closed_form, eps, step_rtol, x, w, lo, a, delta, m, y_vj, r0, dr0):
    """Exact step of eq. (9) on [0, y_VJ]: closed form for L2, else safeguarded Newton on rho.

    ``r0 = rho(0)`` and ``dr0 = rho'(0)`` come from the gather pass. rho is non-decreasing
    (f is convex along the direction). The search keeps a bracket rho(l) <= 0 < rho(r) and
    stops when r - l <= step_rtol * r, returning ``l`` (so the objective never increases and,
    as rho(0) < 0, the step is positive), like the bisection of eq. (10); but its points are
    Newton steps from the last point, moved by step_rtol / 4 towards the side of the bracket
    not yet closed, so that once Newton has converged the next point lands on the other side
    and closes the bracket: 2 to 5 evaluations instead of ~log2(1 / step_rtol). It falls back
    to bisection whenever Newton leaves the bracket or twice fails to change sides.
    """
    if r0 >= 0.0:
        return 0.0
    if closed_form and code == L2:
        if dr0 <= 0.0 or r0 + dr0 * y_vj <= 0.0:
            return y_vj
        return -r0 / dr0
    shade = 0.25 * step_rtol
    lo_s = 0.0
    rlo = r0
    dlo = dr0
    hi_s = y_vj
    rhi = 0.0
    dhi = 0.0
    hi_known = False
    from_lo = True  # the last point evaluated is lo_s
    same_side = 0
    for _ in range(200):
        if same_side >= 2 and hi_known:
            t = 0.5 * (lo_s + hi_s)
            same_side = 0
        elif from_lo:
            t = lo_s - rlo / dlo if dlo > 0.0 else np.inf
            t += shade * t
        else:
            t = hi_s - rhi / dhi if dhi > 0.0 else -np.inf
            t -= shade * t
        if not t < hi_s:
            t = hi_s if not hi_known else 0.5 * (lo_s + hi_s)
        elif not t > lo_s:
            t = 0.5 * (lo_s + hi_s)
        r, dr = _rho(code, eps, t, x, w, lo, a, delta, m)
        if r > 0.0:
            hi_s = t
            rhi = r
            dhi = dr
            hi_known = True
            same_side = 0 if from_lo else same_side + 1
            from_lo = False
        elif t == y_vj:  # the full step is feasible and rho(y_VJ) <= 0: take it
            return y_vj
        elif r < 0.0:
            lo_s = t
            rlo = r
            dlo = dr
            same_side = same_side + 1 if from_lo else 0
            from_lo = True
        else:
            return t
        if hi_known and hi_s - lo_s <= step_rtol * hi_s:
            break
    return lo_s


@numba.njit(cache=True, nogil=True)
def _refresh(indptr, indices, x, w, S, k_count, code, eps, key):
    """Recompute every g_i and key_i from Y; return f(Y)."""
    n = S.shape[0]
    f = 0.0
    for i in range(n):
        for k in range(k_count):
            S[i, k_count + k] = 0.0
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            s = _dot(S, i, j, k_count)
            c = w[e] * ddiv(code, x[e], s, eps)
            for k in range(k_count):
                S[i, k_count + k] += c * S[j, k]
            if j > i:
                f += w[e] * div(code, x[e], s, eps)
        key[i] = _direction(S, i, k_count)[2]
    return f


@numba.njit(cache=True, nogil=True)
def _pcc_core(
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
    use_heap,
):
    """The descent of :func:`pcc_sparse`; J by the heap (``use_heap``) or by a scan of the keys."""
    n, k_count = Y.shape
    S = np.empty((n, 2 * k_count))
    for i in range(n):
        for k in range(k_count):
            S[i, k] = Y[i, k]
    key = np.empty(n)
    hn = n if use_heap else 1
    hkey = np.empty(hn)
    hnode = np.empty(hn, dtype=np.int64)
    pos = np.empty(hn, dtype=np.int64)
    max_deg = 0
    for i in range(n):
        max_deg = max(max_deg, indptr[i + 1] - indptr[i])
    ba = np.empty(max_deg)
    bd = np.empty(max_deg)
    bc = np.empty(max_deg)
    y_old = np.empty(k_count)

    f = _refresh(indptr, indices, x, w, S, k_count, code, eps, key)
    if use_heap:
        heap_build(hkey, hnode, pos, key)
    n_trace = 0
    trace_f[n_trace] = f
    trace_it[n_trace] = 0
    n_trace += 1
    it = 0
    fresh = True
    while it < max_iter:
        if use_heap:
            jj = hnode[0]
        else:
            jj = 0
            for j in range(1, n):
                if key[j] < key[jj]:
                    jj = j
        if -key[jj] <= gap_tol:
            break
        u, v, _ = _direction(S, jj, k_count)
        lo = indptr[jj]
        m = indptr[jj + 1] - lo
        # gather: a = y_J.y_i, delta = y_iU - y_iV, c = w d'(x, a), and rho(0), rho'(0)
        # touch the neighbours' rows first: independent loads that the CPU overlaps, so the
        # gather below finds them in cache instead of waiting for each miss in turn
        touch = 0.0
        for t in range(m):
            touch += S[np.int64(indices[lo + t]), 0]
        if touch < 0.0:  # never (rows are on the simplex); keeps the loads alive
            break
        r0 = 0.0
        dr0 = 0.0
        for t in range(m):
            i = np.int64(indices[lo + t])
            xt = x[lo + t]
            wt = w[lo + t]
            a = 0.0
            for k in range(k_count):
                a += S[jj, k] * S[i, k]
            d = S[i, u] - S[i, v]
            c = wt * ddiv(code, xt, a, eps)
            dd = wt * d2div(code, xt, a, eps)
            ba[t] = a
            bd[t] = d
            bc[t] = c
            r0 += c * d
            dr0 += dd * d * d
        y_vj = S[jj, v]
        step = _line_search(code, closed_form, eps, step_rtol, x, w, lo, ba, bd, m, y_vj, r0, dr0)
        if step <= 0.0:
            # the incremental gradient drifted from the fresh one of the line search:
            # resynchronise, and stop if even then no step is possible (numerically stationary)
            if fresh:
                break
            f = _refresh(indptr, indices, x, w, S, k_count, code, eps, key)
            if use_heap:
                heap_build(hkey, hnode, pos, key)
            fresh = True
            continue
        fresh = False
        # y_J += step (e_U - e_V), y_VJ exactly 0 after a full step; g_J is rebuilt below
        for k in range(k_count):
            y_old[k] = S[jj, k]
            S[jj, k_count + k] = 0.0
        S[jj, u] += step
        if step == y_vj:
            S[jj, v] = 0.0
        else:
            S[jj, v] -= step
        # swap pair (J, i)'s term in g_i and add its new term to g_J. The old coefficient is
        # bc[t], bitwise the one used when that term was added (y_J.y_i is always taken
        # fresh), so g_i holds exactly one term per neighbour.
        for t in range(m):
            i = np.int64(indices[lo + t])
            a = 0.0
            for k in range(k_count):
                a += S[jj, k] * S[i, k]
            c_new = w[lo + t] * ddiv(code, x[lo + t], a, eps)
            c_old = bc[t]
            for k in range(k_count):
                S[i, k_count + k] += c_new * S[jj, k] - c_old * y_old[k]
                S[jj, k_count + k] += c_new * S[i, k]
            gu = S[i, k_count]
            for k in range(1, k_count):
                gu = min(gu, S[i, k_count + k])
            gv = -np.inf
            for k in range(k_count):
                if S[i, k] > 0.0:
                    gv = max(gv, S[i, k_count + k])
            ki = gu - gv
            key[i] = ki
            if use_heap:
                heap_update(hkey, hnode, pos, i, ki)
        kj = _direction(S, jj, k_count)[2]
        key[jj] = kj
        if use_heap:
            heap_update(hkey, hnode, pos, jj, kj)
        it += 1
        if it % refresh_every == 0 and it < max_iter:
            f = _refresh(indptr, indices, x, w, S, k_count, code, eps, key)
            if use_heap:
                heap_build(hkey, hnode, pos, key)
            fresh = True
            trace_f[n_trace] = f
            trace_it[n_trace] = it
            n_trace += 1
    f = _refresh(indptr, indices, x, w, S, k_count, code, eps, key)
    for i in range(n):
        for k in range(k_count):
            Y[i, k] = S[i, k]
    gap = 0.0
    for i in range(n):
        gap = max(gap, -key[i])
    trace_f[n_trace] = f
    trace_it[n_trace] = it
    n_trace += 1
    return it, n_trace, gap


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
    indptr, indices : int64 / int32 arrays
        Symmetric CSR pattern (both (i, j) and (j, i), no diagonal, rows sorted).
    x, w : float64 arrays of shape (nnz,)
        ``c_ij / N_ij`` and ``N_ij``.
    Y : float64 array (n, K), rows on the simplex
        Start point, updated in place.
    code, closed_form, eps, step_rtol
        Divergence code, use of its closed-form step, KL clamp, line search relative tolerance.
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
    return _pcc_core(
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
        True,
    )


@numba.njit(cache=True, nogil=True)
def pcc_dense(
    X, W, Y, code, closed_form, eps, step_rtol, gap_tol, max_iter, refresh_every, trace_f, trace_it
):
    """Algorithm 1 of papers/003 on dense ``n x n`` matrices (``X = C/N``, ``W = N``; W = 0 = unobserved).

    Same arguments, returns and arithmetic as :func:`pcc_sparse` (the two give the same Y on the
    same pairs): the observed entries are listed row by row and the same descent runs on them,
    but J is found by a scan of the n keys instead of a heap (cheaper for small n).
    """
    n = X.shape[0]
    indptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        cnt = 0
        for j in range(n):
            if j != i and W[i, j] > 0.0:
                cnt += 1
        indptr[i + 1] = indptr[i] + cnt
    nnz = indptr[n]
    indices = np.empty(nnz, dtype=np.int32)
    x = np.empty(nnz)
    w = np.empty(nnz)
    e = 0
    for i in range(n):
        for j in range(n):
            if j != i and W[i, j] > 0.0:
                indices[e] = j
                x[e] = X[i, j]
                w[e] = W[i, j]
                e += 1
    return _pcc_core(
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
        False,
    )


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
