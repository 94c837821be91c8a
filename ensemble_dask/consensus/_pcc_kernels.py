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
def div_change(code, x1, x2_old, x2_new, eps):
    """``d(x1, x2_new) - d(x1, x2_old)``; for KL inside [eps, 1 - eps] from two logarithms, not four
    (the ``x1 log x1`` parts cancel)."""
    if code == KL:
        lo = min(x2_old, x2_new)
        hi = max(x2_old, x2_new)
        if lo >= eps and hi <= 1.0 - eps:
            r = 0.0
            if x1 > 0.0:
                r -= x1 * np.log(x2_new / x2_old)
            if x1 < 1.0:
                r -= (1.0 - x1) * np.log((1.0 - x2_new) / (1.0 - x2_old))
            return r
    return div(code, x1, x2_new, eps) - div(code, x1, x2_old, eps)


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


# --------------------------------------------------------------------------- PCC and PPC rows
# Helpers that take arrays are plain (not ``inline="always"``) functions: numba's own inlining
# adds reference-count updates of the array arguments at every call site, which in the
# per-neighbour loop cost as much as the arithmetic; LLVM inlines them without.
#
# PPC (papers/002) is the L2 case with unit pair weights plus a diagonal term
# ``diag * (1 - y_j.y_j)^2`` per row (``x_jj = 1``): along a step ``y_J + t (e_U - e_V)``,
# ``y_J.y_J = q0 + dq1 t + 2 t^2`` with ``dq1 = 2 (y_UJ - y_VJ)``. ``diag = 0`` for PCC.


@numba.njit(cache=True, nogil=True)
def _rho(code, eps, step, x, w, lo, a, delta, m, diag, q0, dq1):
    """``(rho, rho')`` at ``step``: rho = d/d step of f along the direction (only J's m terms vary).

    ``x[lo + t]``, ``w[lo + t]``, ``a[t]``, ``delta[t]`` describe J's t-th pair; ``diag``,
    ``q0``, ``dq1`` the diagonal term (see above).
    """
    r = 0.0
    dr = 0.0
    if diag != 0.0:
        res = 1.0 - (q0 + step * (dq1 + 2.0 * step))
        dq = dq1 + 4.0 * step
        r -= 2.0 * diag * res * dq
        dr += 2.0 * diag * (dq * dq - 4.0 * res)
    for t in range(m):
        z = a[t] + step * delta[t]
        r += w[lo + t] * ddiv(code, x[lo + t], z, eps) * delta[t]
        dr += w[lo + t] * d2div(code, x[lo + t], z, eps) * delta[t] * delta[t]
    return r, dr


@numba.njit(cache=True, nogil=True)
def _line_search(code, closed_form, eps, step_rtol, x, w, lo, a, delta, m, y_vj, r0, dr0, diag, q0, dq1):
    """Exact step of eq. (9) on [0, y_VJ]: closed form for L2, else safeguarded Newton on rho.

    ``r0 = rho(0)`` and ``dr0 = rho'(0)`` come from the gather pass. rho is non-decreasing
    (f is convex along the direction). The search keeps a bracket rho(l) <= 0 < rho(r) and
    stops when r - l <= step_rtol * r, returning ``l`` (so the objective never increases and,
    as rho(0) < 0, the step is positive), like the bisection of eq. (10); but its points are
    Newton steps from the last point, moved by step_rtol / 4 towards the side of the bracket
    not yet closed, so that once Newton has converged the next point lands on the other side
    and closes the bracket: 2 to 5 evaluations instead of ~log2(1 / step_rtol). It falls back
    to bisection whenever Newton leaves the bracket or twice fails to change sides. (With PPC's
    diagonal term rho may decrease somewhere; the caller checks that f went down.)
    """
    if r0 >= 0.0:
        return 0.0
    if closed_form and code == L2 and diag == 0.0:
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
        r, dr = _rho(code, eps, t, x, w, lo, a, delta, m, diag, q0, dq1)
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
def _row_gradient(c, nb, m, k_count, g):
    """``g = sum_t c[t] nb[t]``: the gradient of f in row J (eq. 7) from J's gathered pairs."""
    for k in range(k_count):
        g[k] = 0.0
    for t in range(m):
        ct = c[t]
        for k in range(k_count):
            g[k] += ct * nb[t, k]


@numba.njit(cache=True, nogil=True)
def _row_direction(Y, j, g, k_count):
    """``(U, V, gap)`` for row j: U = argmin g, V = argmax g on supp(y_j) (eq. 6), and the gap
    ``y_j.g - g_U`` (>= 0; 0 exactly where the KKT conditions of Sect. 5.3 hold for row j: the
    entries of g on the support of y_j are all minimal). Unlike the paper's ``g_V - g_U``,
    it weights each entry by its mass, so that a vanishing entry with a large gradient (KL's
    derivative grows like 1 / y_i.y_j near 0) does not hold the test up; it bounds how much
    re-optimising row j alone (a convex problem) could still lower f."""
    u = 0
    for k in range(1, k_count):
        if g[k] < g[u]:
            u = k
    v = -1
    yg = 0.0
    for k in range(k_count):
        yk = Y[j, k]
        yg += yk * g[k]
        if yk > 0.0 and (v < 0 or g[k] > g[v]):
            v = k
    return u, v, max(yg - g[u], 0.0)


@numba.njit(cache=True, nogil=True)
def _dot_rows(A, a, B, b, k_count):
    q = 0.0
    for k in range(k_count):
        q += A[a, k] * B[b, k]
    return q


@numba.njit(cache=True, nogil=True)
def _gap_of(Yr, r, g, k_count):
    """The gap ``y.g - min g`` of row r of Yr (the weighting of :func:`_row_direction`), >= 0."""
    gmin = g[0]
    yg = 0.0
    for k in range(k_count):
        gmin = min(gmin, g[k])
        yg += Yr[r, k] * g[k]
    return max(yg - gmin, 0.0)


@numba.njit(cache=True, nogil=True)
def _self_dot(Y, j, k_count):
    q = 0.0
    for k in range(k_count):
        q += Y[j, k] * Y[j, k]
    return q


@numba.njit(cache=True, nogil=True)
def objective(indptr, indices, x, w, Y, code, eps, diag):
    """f(Y): the sum over the stored pairs i < j of ``w_ij d(x_ij, y_i.y_j)`` (eq. 3), plus
    ``diag * sum_j (1 - y_j.y_j)^2``."""
    n, k_count = Y.shape
    f = 0.0
    for j in range(n):
        if diag != 0.0:
            r = 1.0 - _self_dot(Y, j, k_count)
            f += diag * r * r
        for e in range(indptr[j], indptr[j + 1]):
            i = indices[e]
            if i > j:
                s = 0.0
                for k in range(k_count):
                    s += Y[j, k] * Y[i, k]
                f += w[e] * div(code, x[e], s, eps)
    return f


@numba.njit(cache=True, nogil=True)
def _add_diag_gradient(Y, j, k_count, diag, g):
    """g += the gradient in y_j of ``diag (1 - y_j.y_j)^2``."""
    if diag != 0.0:
        c = -4.0 * diag * (1.0 - _self_dot(Y, j, k_count))
        for k in range(k_count):
            g[k] += c * Y[j, k]


@numba.njit(cache=True, nogil=True)
def _kept_gap(YG, i, k_count, diag, g):
    """Row i's gap from its kept pair gradient (``YG[i, K:]``, its memberships ``YG[i, :K]``; plus the diagonal
    term's gradient), as the descent tests it."""
    for k in range(k_count):
        g[k] = YG[i, k_count + k]
    _add_diag_gradient(YG, i, k_count, diag, g)
    return _gap_of(YG, i, g, k_count)


@numba.njit(cache=True, nogil=True)
def objective_and_gap(indptr, indices, x, w, Y, code, eps, diag):
    """``(f(Y), max_j gap_j)``: the objective of :func:`objective` and the KKT gap, from scratch."""
    n, k_count = Y.shape
    g = np.empty(k_count)
    gap = 0.0
    for j in range(n):
        for k in range(k_count):
            g[k] = 0.0
        for e in range(indptr[j], indptr[j + 1]):
            i = indices[e]
            s = 0.0
            for k in range(k_count):
                s += Y[j, k] * Y[i, k]
            c = w[e] * ddiv(code, x[e], s, eps)
            for k in range(k_count):
                g[k] += c * Y[i, k]
        _add_diag_gradient(Y, j, k_count, diag, g)
        if indptr[j + 1] > indptr[j] or diag != 0.0:
            gap = max(gap, _row_direction(Y, j, g, k_count)[2])
    return objective(indptr, indices, x, w, Y, code, eps, diag), gap


@numba.njit(cache=True, nogil=True)
def _enqueue(queue, queued, head, count, i):
    """Append i to the circular work list unless it is on it; returns the new count."""
    if not queued[i]:
        queue[(head + count) % queue.shape[0]] = i
        queued[i] = True
        count += 1
    return count


@numba.njit(cache=True, nogil=True)
def pcc_rows(
    indptr,
    indices,
    x,
    w,
    Y_out,
    code,
    closed_form,
    eps,
    diag,
    step_rtol,
    gap_tol,
    inner_tol,
    max_passes,
    max_inner,
    trace_f,
    stats,
    f_start=np.nan,
    gap_tol_start=0.0,
):
    """Row-wise descent of PCC: the two-entry steps of papers/003 Sect. 5, many per visited row.

    A visit of row J gathers J's neighbours' rows once, then repeats the step of eqs. (6)-(9)
    on y_J alone (neighbours fixed, so the gradient of eq. (7) is kept up to date from the
    gathered rows in cache) until J's gap (:func:`_row_direction`) is at most ``inner_tol`` or
    ``max_inner`` steps were taken. Each step is an exact line search on f, so f never
    increases. Rows are visited from a FIFO work list that starts with every row; a row that
    moved adds the change of each neighbour's gradient to that neighbour's kept gradient (rows
    not on the list), recomputes its gap from it, and puts the neighbours whose gap exceeds
    ``gap_tol`` back on the list. A visit whose gap is already at most ``gap_tol`` leaves the row
    alone. So when the list runs empty, every row's gap (from its gradient, exact up to rounding)
    is at most ``gap_tol``: the KKT test holds for Y.

    Parameters
    ----------
    indptr, indices : int arrays
        Symmetric CSR pattern (both (i, j) and (j, i), no diagonal).
    x, w : float64 arrays of shape (nnz,)
        ``c_ij / N_ij`` and the pair weights (``N_ij`` times any sample weight), all > 0.
    Y_out : float64 array (n, K), rows on the simplex
        Start point, updated in place (at the end: the descent works on its own copy, see below).
    code, closed_form, eps, diag
        Divergence code, use of its closed-form step, KL clamp, weight of the diagonal term
        (PPC; 0 for PCC).
    step_rtol : float
        Relative tolerance of the line search.
    gap_tol, inner_tol : float
        KKT tolerance of the stopping test, and the gap at which a visit stops (<= gap_tol).
    max_passes, max_inner : int
        Cap on passes (a pass visits the rows that were on the list when it began), and on
        steps per visit.
    trace_f : float64 array
        Receives f before the first pass and after each pass (as many as it holds).
    stats : int64 array of length 3
        Receives the numbers of row visits, of visits that moved the row, and of steps.
    f_start : float, default=nan
        f at the start, when the caller has it already (nan: computed here).
    gap_tol_start : float, default=0
        When larger than ``gap_tol``, the descent starts with this tolerance and tightens it tenfold
        each time the list runs empty until it reaches ``gap_tol``, putting back the rows whose kept
        gap fails the new test (``max_passes`` caps the passes of all tolerances together). From a random start
        this spends the early visits, when the neighbours are still far from their final rows, on
        short moves instead of solving each row exactly (on the paper's KDD configuration
        about a third of the steps). Only the last tolerance decides ``converged``.

    Returns
    -------
    n_passes, f, gap, converged : int, float, float, bool
        Passes run; f(Y); the KKT gap ``max_j gap_j`` (when the list ran empty, from the kept
        gradients, exact up to rounding; recomputed from Y when the cap stopped the run);
        whether the work list ran empty with every gap at most ``gap_tol``.
    """
    n, k_count = Y_out.shape
    # each row's entries and its kept pair gradient side by side (one n x 2K array): a move of row J
    # updates the kept gradients of J's neighbours, whose rows the gather has just brought into cache,
    # so the gradient's line comes with them instead of being a second miss (500,000 points, K = 8,
    # with the gaps recomputed instead of stored, below: 0.93 -> 0.64 s for PCC-L2). Y (row j's
    # memberships: Y[j, :K]) and the kept pair gradient G (Y[j, K + k]) are this one C-contiguous array,
    # which the helpers read up to ``k_count`` (no strided views: the same compiled helpers as elsewhere)
    Y = np.empty((n, 2 * k_count))
    for j in range(n):
        for k in range(k_count):
            Y[j, k] = Y_out[j, k]
    max_deg = 0
    for j in range(n):
        max_deg = max(max_deg, indptr[j + 1] - indptr[j])
    nb = np.empty((max_deg, k_count))
    a = np.empty(max_deg)
    a0 = np.empty(max_deg)
    c = np.empty(max_deg)
    act = np.empty(max_deg, dtype=np.int64)
    ca = np.empty(max_deg)
    cd = np.empty(max_deg)
    cx = np.empty(max_deg)
    cw = np.empty(max_deg)
    gp = np.empty(k_count)  # the pairs' part of J's gradient
    g = np.empty(k_count)
    c0 = np.empty(max_deg)
    yj0 = np.empty(k_count)
    queue = np.arange(n)
    queued = np.ones(n, dtype=np.bool_)
    head = 0
    count = n
    f = objective(indptr, indices, x, w, Y_out, code, eps, diag) if np.isnan(f_start) else f_start
    trace_f[0] = f
    passes = 0
    left = count  # visits left in this pass
    final_tol = gap_tol
    inner_share = inner_tol / gap_tol if gap_tol > 0.0 else 0.0
    if gap_tol_start > gap_tol:
        gap_tol = gap_tol_start
        inner_tol = inner_share * gap_tol
    while passes < max_passes:
        if count == 0 and gap_tol > final_tol:
            # a looser test holds for every row (their kept gaps are exact now): tighten it tenfold
            # and put back the rows that fail it
            gap_tol = max(gap_tol * 0.1, final_tol)
            inner_tol = inner_share * gap_tol
            for i in range(n):
                if _kept_gap(Y, i, k_count, diag, g) > gap_tol:
                    count = _enqueue(queue, queued, head, count, i)
            left = count
            continue  # (an empty list tightens again)
        if count == 0:
            break
        j = queue[head]
        head = head + 1 if head + 1 < n else 0
        count -= 1
        queued[j] = False
        stats[0] += 1
        lo = indptr[j]
        m = indptr[j + 1] - lo
        # touch the neighbours' rows first: independent loads that the CPU overlaps, so the
        # gather below finds them in cache instead of waiting for each miss in turn
        touch = 0.0
        for t in range(m):
            touch += Y[indices[lo + t], 0]
        if touch < 0.0:  # never (rows are on the simplex); keeps the loads alive
            break
        for t in range(m):
            i = indices[lo + t]
            s = 0.0
            for k in range(k_count):
                v = Y[i, k]
                nb[t, k] = v
                s += Y[j, k] * v
            a[t] = s
            c[t] = w[lo + t] * ddiv(code, x[lo + t], s, eps)
        _row_gradient(c, nb, m, k_count, gp)
        for k in range(k_count):
            g[k] = gp[k]
        _add_diag_gradient(Y, j, k_count, diag, g)
        u, v, gap = _row_direction(Y, j, g, k_count)
        if gap > gap_tol:
            for t in range(m):
                a0[t] = a[t]
                c0[t] = c[t]
            for k in range(k_count):
                yj0[k] = Y[j, k]
            q_start = _self_dot(Y, j, k_count)
            moved = False
            for _ in range(max_inner):
                # the step changes y_J.y_i only for the pairs with y_iU != y_iV: gather those
                r0 = 0.0
                dr0 = 0.0
                n_act = 0
                for t in range(m):
                    d = nb[t, u] - nb[t, v]
                    if d != 0.0:
                        act[n_act] = t
                        ca[n_act] = a[t]
                        cd[n_act] = d
                        cx[n_act] = x[lo + t]
                        cw[n_act] = w[lo + t]
                        r0 += c[t] * d
                        dr0 += w[lo + t] * d2div(code, x[lo + t], a[t], eps) * d * d
                        n_act += 1
                y_vj = Y[j, v]
                q0 = _self_dot(Y, j, k_count)
                dq1 = 2.0 * (Y[j, u] - y_vj)
                if diag != 0.0:
                    r0 += g[u] - g[v] - (gp[u] - gp[v])
                    dr0 += 2.0 * diag * (dq1 * dq1 - 4.0 * (1.0 - q0))
                step = _line_search(
                    code, closed_form, eps, step_rtol, cx, cw, 0, ca, cd, n_act, y_vj, r0, dr0, diag, q0, dq1
                )
                if diag != 0.0:  # rho may decrease with the diagonal term: make sure f went down
                    for _ in range(60):
                        df = diag * ((1.0 - q0 - step * (dq1 + 2.0 * step)) ** 2 - (1.0 - q0) ** 2)
                        for s_ in range(n_act):
                            z = ca[s_] + step * cd[s_]
                            df += cw[s_] * (div(code, cx[s_], z, eps) - div(code, cx[s_], ca[s_], eps))
                        if df <= 0.0:
                            break
                        step *= 0.5
                    else:
                        step = 0.0
                if step <= 0.0:
                    break
                moved = True
                stats[2] += 1
                Y[j, u] += step
                Y[j, v] = 0.0 if step == y_vj else y_vj - step
                for s_ in range(n_act):
                    t = act[s_]
                    a[t] += step * cd[s_]
                    c_new = cw[s_] * ddiv(code, cx[s_], a[t], eps)
                    dc = c_new - c[t]
                    c[t] = c_new
                    for k in range(k_count):
                        gp[k] += dc * nb[t, k]
                for k in range(k_count):
                    g[k] = gp[k]
                _add_diag_gradient(Y, j, k_count, diag, g)
                u, v, gap = _row_direction(Y, j, g, k_count)
                if gap <= inner_tol:
                    break
            if moved:
                stats[1] += 1
                for t in range(m):  # f changed by the terms of the pairs whose y_J.y_i moved
                    if a[t] != a0[t]:
                        f += w[lo + t] * div_change(code, x[lo + t], a0[t], a[t], eps)
                if diag != 0.0:
                    f += diag * ((1.0 - _self_dot(Y, j, k_count)) ** 2 - (1.0 - q_start) ** 2)
                # pair (J, i)'s term of g_i went from c0 y_J0 to c y_J: add the change to i's kept
                # gradient and test i's gap y_i.g_i - min g_i from it (y_i = nb[t] is fixed until
                # i's next visit, which recomputes g_i from its pairs); a row on the list is skipped
                for t in range(m):
                    i = indices[lo + t]
                    if queued[i]:
                        continue
                    for k in range(k_count):
                        Y[i, k_count + k] += c[t] * Y[j, k] - c0[t] * yj0[k]
                        g[k] = Y[i, k_count + k]
                    if diag != 0.0:
                        cd_ = -4.0 * diag * (1.0 - _dot_rows(nb, t, nb, t, k_count))
                        for k in range(k_count):
                            g[k] += cd_ * nb[t, k]
                    # (the gap is not stored: one more random write per neighbour; it is recomputed from
                    # G when the tolerance tightens and at the end)
                    if _gap_of(nb, t, g, k_count) > gap_tol:
                        count = _enqueue(queue, queued, head, count, i)
                if gap > gap_tol:  # max_inner steps were not enough
                    count = _enqueue(queue, queued, head, count, j)
        for k in range(k_count):
            Y[j, k_count + k] = gp[k]
        left -= 1
        if left == 0:
            passes += 1
            if passes < trace_f.shape[0]:
                trace_f[passes] = f
            left = count
    for j in range(n):
        for k in range(k_count):
            Y_out[j, k] = Y[j, k]
    if count > 0:  # stopped at the cap: the kept gradients of the rows still listed are stale
        f, gap = objective_and_gap(indptr, indices, x, w, Y_out, code, eps, diag)
        if passes < trace_f.shape[0]:
            trace_f[passes] = f
        return passes, f, gap, False
    gap = 0.0
    for j in range(n):
        gap = max(gap, _kept_gap(Y, j, k_count, diag, g))
    return passes, f, gap, gap <= final_tol


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
