"""Numba kernels of the BCE / GBCE variational E-step (Wang et al. 2011 eqs. 5-6 and 12-14).

Kernels take plain arrays and scalars only. The E-step of one row works on a small ``(m, k)`` matrix ``ll``
holding, for each of the row's ``m`` observed entries (non-missing base labels, then non-missing features),
the log-likelihood of that entry under each consensus cluster: ``log beta_hj(x_ij)`` for a base clustering,
the Gaussian log-density for a feature. The row-block kernel builds ``ll`` from the global category index of
each label and the current parameters, and the column-distributed server kernel receives it from the
clients; both then call the same :func:`row_estep` and :func:`row_bound`, so they perform identical
floating-point operations.

A row's variational Dirichlet parameter ``gamma`` is warm-started from the previous EM iteration when given
(a row whose ``gamma[i, 0] < 0`` starts from ``alpha + m / k``): every coordinate update of (phi, gamma) is
then an exact maximisation, so the lower bound cannot decrease from one EM iteration to the next.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)
from ._digamma import digamma

LOG_2PI = math.log(2.0 * math.pi)


#: below this sum of an entry's products the E-step takes that entry in the log domain (no underflow)
_LINEAR_FLOOR = 1e-250


@numba.njit(cache=True, nogil=True)
def row_estep(ll, el, lmax, w, alpha, gamma, phi, dig, lognorm, tol, max_iter):
    """Coordinate ascent on (phi, gamma) of one row; ``gamma`` and ``phi`` are updated in place.

    ``phi_jh ∝ exp(Psi(gamma_h) + ll_jh)`` (eq. 5; ``Psi(sum gamma)`` cancels in the
    normalisation) and ``gamma_h = alpha_h + sum_j w_j phi_jh`` (eq. 6 / 14), until the
    mean absolute change of ``gamma`` is below ``tol`` (scikit-learn's LDA rule) or after
    ``max_iter`` sweeps. ``el`` holds ``exp(ll_jh - lmax_j)`` with ``lmax_j = max_h ll_jh``
    (:func:`linear_factors`), so a sweep takes ``k``
    exponentials, ``exp(Psi_h - max Psi)``, and multiplies (an entry whose products all
    underflow is taken in the log domain instead). On return ``dig`` holds the ``Psi(gamma_h)``
    of the last sweep and ``lognorm`` each entry's normaliser: ``log phi_jh = dig_h + ll_jh -
    lognorm_j`` (what :func:`row_bound` needs instead of ``m k`` logarithms).
    Returns the number of sweeps.
    """
    m, k = ll.shape
    edig = np.empty(k)
    newg = np.empty(k)
    it = 0
    while it < max_iter:
        it += 1
        dmax = -np.inf
        for h in range(k):
            dig[h] = digamma(gamma[h])
            dmax = max(dmax, dig[h])
            newg[h] = alpha[h]
        for h in range(k):
            edig[h] = math.exp(dig[h] - dmax)
        for j in range(m):
            s = 0.0
            for h in range(k):
                e = edig[h] * el[j, h]
                phi[j, h] = e
                s += e
            if s >= _LINEAR_FLOOR:
                lognorm[j] = dmax + lmax[j] + math.log(s)
            else:  # both factors tiny where the other is 1: this entry in the log domain
                mx = -np.inf
                for h in range(k):
                    v = dig[h] + ll[j, h]
                    phi[j, h] = v
                    mx = max(mx, v)
                s = 0.0
                for h in range(k):
                    e = math.exp(phi[j, h] - mx)
                    phi[j, h] = e
                    s += e
                lognorm[j] = mx + math.log(s)
            inv = 1.0 / s
            for h in range(k):
                phi[j, h] *= inv
                newg[h] += w[j] * phi[j, h]
        diff = 0.0
        for h in range(k):
            diff += abs(newg[h] - gamma[h])
            gamma[h] = newg[h]
        if diff < tol * k:
            break
    return it


@numba.njit(cache=True, nogil=True)
def linear_factors(ll, el, lmax):
    """``lmax_j = max_h ll_jh`` and ``el_jh = exp(ll_jh - lmax_j)`` of each row of ``ll`` (for
    :func:`row_estep`)."""
    m, k = ll.shape
    for j in range(m):
        mx = -np.inf
        for h in range(k):
            mx = max(mx, ll[j, h])
        lmax[j] = mx
        for h in range(k):
            el[j, h] = math.exp(ll[j, h] - mx)


@numba.njit(cache=True, nogil=True)
def row_bound(w, alpha, lg_alpha_const, gamma, phi, dig, lognorm, elog):
    """Variational lower bound of one row; writes ``E[log theta_h] = Psi(gamma_h) - Psi(sum gamma)``.

    ``lg_alpha_const = lgamma(sum alpha) - sum_h lgamma(alpha_h)``. The bound is
    ``E_q[log p(theta|alpha)] + sum_j w_j E_q[log p(z_j|theta) + log p(x_j|z_j)] + H(q)``, whose
    entry terms ``sum_h phi_jh (elog_h + ll_jh - log phi_jh)`` are, with ``dig`` and ``lognorm``
    from :func:`row_estep`, ``sum_h phi_jh (elog_h - dig_h) + lognorm_j``.
    """
    m, k = phi.shape
    sg = 0.0
    for h in range(k):
        sg += gamma[h]
    dsg = digamma(sg)
    b = lg_alpha_const - math.lgamma(sg)
    for h in range(k):
        elog[h] = digamma(gamma[h]) - dsg
        b += (alpha[h] - gamma[h]) * elog[h] + math.lgamma(gamma[h])
    for j in range(m):
        acc = lognorm[j]
        for h in range(k):
            acc += phi[j, h] * (elog[h] - dig[h])
        b += w[j] * acc
    return b


@numba.njit(cache=True, nogil=True)
def _lg_alpha_const(alpha):
    s = 0.0
    c = 0.0
    for h in range(alpha.size):
        s += alpha[h]
        c -= math.lgamma(alpha[h])
    return c + math.lgamma(s)


#: the grid of a row's term in :func:`estep_block_exact`'s sums: ``2**-32``
UNIT = 2.0**32


@numba.njit(cache=True, nogil=True)
def _add_units(q, j, x, n):
    """``q[:, j] += n x``, ``x`` rounded to ``2**-32``: ``q[0]`` the whole parts, ``q[1] >= 0`` the units."""
    whole = math.floor(x)
    q[0, j] += n * np.int64(whole)
    q[1, j] += n * np.int64(np.rint((x - whole) * UNIT))  # x - whole in [0, 1] (rounded: a function of x)


@numba.njit(cache=True, nogil=True)
def estep_block(gidx, rweight, ucol, logbeta, X, ufeat, mu, var, alpha, gamma, tol, max_iter, clip):
    """:func:`estep_block_exact` without its exact sums."""
    no = np.zeros((0, 0), dtype=np.int64)
    return estep_block_exact(
        gidx, rweight, ucol, logbeta, X, ufeat, mu, var, alpha, gamma, tol, max_iter, clip, no, no, no
    )


@numba.njit(cache=True, nogil=True)
def estep_block_exact(
    gidx, rweight, ucol, logbeta, X, ufeat, mu, var, alpha, gamma, tol, max_iter, clip, qcounts, qss, qbound
):
    """E-step of a block of rows and its sufficient statistics.

    Parameters
    ----------
    gidx : int64 (n, N)
        Global category index ``offset_j + code`` of each base label, ``-1`` if missing.
    rweight : float64 (n,)
        Multiplicity of each row (identical rows are processed once: their E-steps coincide).
    ucol : float64 (N,)
        Weight of each base clustering (1 for BCE).
    logbeta : float64 (k, R)
        ``log beta`` of every (cluster, global category).
    X : float64 (n, D)
        Original features (``D = 0`` for BCE), ``nan`` if missing.
    ufeat, mu, var : float64 (D,), (k, D), (k, D)
        Feature weights and Gaussian parameters.
    alpha : float64 (k,)
    gamma : float64 (n, k)
        Variational Dirichlet parameters, updated in place (warm start; ``gamma[i, 0] < 0``
        means a fresh start). A row without any observed entry gets ``gamma = alpha``.
    tol, max_iter : float, int
        E-step stopping rule of :func:`row_estep`.
    clip : float
        Bound on a row's terms of ``ss`` and ``bound``: a larger magnitude (or a NaN) is set to ``-clip``
        or ``clip`` (``math.inf``: none). A federated site passes one, so that its sums stay in the
        fixed-point range whatever parameters it is sent; a fit's parameters give terms far inside it.
        Every caller passes it, so that numba compiles one copy of this kernel.
    qcounts, qss, qbound : int64 (R, k), (2, k), (2, 1), or all (0, 0) for none
        Exact sums, added to (for rows of ``ucol <= 1`` and integer ``rweight``, without features): each
        row's terms of ``counts`` (in units of ``2**-32``), ``ss`` and ``bound`` (:func:`_add_units`),
        rounded to ``2**-32`` before they are summed as integers. So they are sums over the rows of a
        function of each row alone: the same, however the rows are split into blocks or among sites, where
        float sums round differently (a federated site's total would tell its own split apart). Exact
        while ``rweight.sum() < 2**31``.

    Returns
    -------
    counts : (k, R) sum of ``w_j phi_ijh`` per category (eq. 7 / 15 numerator)
    wsum, wy, wy2 : (k, D) weighted ``sum phi``, ``sum phi y``, ``sum phi y^2`` per feature
    ss : (k,) ``sum_i Psi(gamma_ih) - Psi(sum_h gamma_ih)`` (the data term of eq. 8)
    bound : float, sum of the rows' lower bounds
    n_rows : float, (weighted) rows with at least one observed entry
    sweeps : int, total inner sweeps (for diagnostics)
    clipped : float, (weighted) rows with a term clipped
    """
    n, N = gidx.shape
    k = alpha.size
    R = logbeta.shape[1]
    D = X.shape[1]
    # per category, contiguous: log beta, its max over clusters and exp(log beta - max) (label
    # entries then take no exponential at all)
    lbT = np.empty((R, k))
    elT = np.empty((R, k))
    lmT = np.empty(R)
    for g in range(R):
        for h in range(k):
            lbT[g, h] = logbeta[h, g]
    linear_factors(lbT, elT, lmT)
    countsT = np.zeros((R, k))
    wsum = np.zeros((k, D))
    wy = np.zeros((k, D))
    wy2 = np.zeros((k, D))
    ss = np.zeros(k)
    bound = 0.0
    n_rows = 0.0
    sweeps = 0
    clipped = 0.0
    mtot = N + D
    ll = np.empty((mtot, k))
    el = np.empty((mtot, k))
    lmax = np.empty(mtot)
    w = np.empty(mtot)
    phi = np.empty((mtot, k))
    dig = np.empty(k)
    lognorm = np.empty(mtot)
    idx = np.empty(mtot, dtype=np.int64)
    elog = np.empty(k)
    logvar = np.log(var)
    lgc = _lg_alpha_const(alpha)
    for i in range(n):
        m = 0
        wtot = 0.0
        for j in range(N):
            g = gidx[i, j]
            if g >= 0 and ucol[j] > 0.0:
                for h in range(k):
                    ll[m, h] = lbT[g, h]
                    el[m, h] = elT[g, h]
                lmax[m] = lmT[g]
                w[m] = ucol[j]
                wtot += ucol[j]
                idx[m] = g
                m += 1
        mg = m
        for d in range(D):
            y = X[i, d]
            if not math.isnan(y) and ufeat[d] > 0.0:
                for h in range(k):
                    r = y - mu[h, d]
                    ll[m, h] = -0.5 * (LOG_2PI + logvar[h, d]) - r * r / (2.0 * var[h, d])
                w[m] = ufeat[d]
                wtot += ufeat[d]
                idx[m] = d
                m += 1
        if m == 0:
            for h in range(k):
                gamma[i, h] = alpha[h]
            continue
        if m > mg:
            linear_factors(ll[mg:m], el[mg:m], lmax[mg:m])
        if gamma[i, 0] < 0.0:
            for h in range(k):
                gamma[i, h] = alpha[h] + wtot / k
        sweeps += row_estep(
            ll[:m], el[:m], lmax[:m], w[:m], alpha, gamma[i], phi[:m], dig, lognorm[:m], tol, max_iter
        )
        rw = rweight[i]
        rb = row_bound(w[:m], alpha, lgc, gamma[i], phi[:m], dig, lognorm[:m], elog)
        if clip < math.inf and _clip_row(elog, rb, clip):
            rb = _clamp(rb, clip)
            clipped += rw
        bound += rw * rb
        n_rows += rw
        for h in range(k):
            ss[h] += rw * elog[h]
        for r in range(mg):
            g = idx[r]
            for h in range(k):
                countsT[g, h] += rw * w[r] * phi[r, h]
        if qss.size:
            n_i = np.int64(rw)
            _add_units(qbound, 0, rb, n_i)
            for h in range(k):
                _add_units(qss, h, elog[h], n_i)
            for r in range(mg):
                for h in range(k):
                    qcounts[idx[r], h] += n_i * np.int64(np.rint(w[r] * phi[r, h] * UNIT))
        for r in range(mg, m):
            d = idx[r]
            y = X[i, d]
            for h in range(k):
                a = rw * w[r] * phi[r, h]
                wsum[h, d] += a
                wy[h, d] += a * y
                wy2[h, d] += a * y * y
    counts = np.ascontiguousarray(countsT.T)
    return counts, wsum, wy, wy2, ss, bound, n_rows, sweeps, clipped


@numba.njit(cache=True, nogil=True)
def _clamp(x, clip):
    """``x`` in ``[-clip, clip]`` (a NaN: ``-clip``)."""
    return min(max(x, -clip), clip) if x == x else -clip


@numba.njit(cache=True, nogil=True)
def _clip_row(elog, rb, clip):
    """Clip ``elog`` into ``[-clip, clip]`` in place (:func:`_clamp`); whether it or ``rb`` was out."""
    out = not -clip <= rb <= clip
    for h in range(elog.size):
        if not -clip <= elog[h] <= clip:
            elog[h] = _clamp(elog[h], clip)
            out = True
    return out


@numba.njit(cache=True, nogil=True)
def soft_gamma_rows(gidx, p, a, gamma):
    """``gamma_i = a + sum_j p[gidx_ij]`` over the row's observed labels (``-1`` skipped); a row with
    none gets ``gamma_i0 = -1`` (a fresh start for :func:`estep_block`)."""
    n, N = gidx.shape
    k = p.shape[1]
    for i in range(n):
        for h in range(k):
            gamma[i, h] = a
        m = 0
        for j in range(N):
            g = gidx[i, j]
            if g >= 0:
                m += 1
                for h in range(k):
                    gamma[i, h] += p[g, h]
        if m == 0:
            for h in range(k):
                gamma[i, h] = -1.0


@numba.njit(cache=True, nogil=True)
def estep_from_loglik(ll_all, u, alpha, gamma, tol, max_iter):
    """E-step of the column-distributed server on received log-likelihoods.

    ``ll_all`` is ``(n, N, k)``: ``log beta_hj(x_ij)`` as computed by the clients, ``nan`` in
    ``ll_all[i, j, 0]`` where ``x_ij`` is missing. Returns ``phi`` ``(n, N, k)`` (zero where
    missing), ``ss``, the bound and the number of non-empty rows; ``gamma`` is updated in
    place exactly as in :func:`estep_block`.
    """
    n, N, k = ll_all.shape
    phi_all = np.zeros((n, N, k))
    ss = np.zeros(k)
    bound = 0.0
    n_rows = 0
    ll = np.empty((N, k))
    el = np.empty((N, k))
    lmax = np.empty(N)
    w = np.empty(N)
    phi = np.empty((N, k))
    dig = np.empty(k)
    lognorm = np.empty(N)
    idx = np.empty(N, dtype=np.int64)
    elog = np.empty(k)
    lgc = _lg_alpha_const(alpha)
    for i in range(n):
        m = 0
        wtot = 0.0
        for j in range(N):
            if not math.isnan(ll_all[i, j, 0]) and u[j] > 0.0:
                for h in range(k):
                    ll[m, h] = ll_all[i, j, h]
                w[m] = u[j]
                wtot += u[j]
                idx[m] = j
                m += 1
        if m == 0:
            for h in range(k):
                gamma[i, h] = alpha[h]
            continue
        if gamma[i, 0] < 0.0:
            for h in range(k):
                gamma[i, h] = alpha[h] + wtot / k
        linear_factors(ll[:m], el[:m], lmax[:m])
        row_estep(ll[:m], el[:m], lmax[:m], w[:m], alpha, gamma[i], phi[:m], dig, lognorm[:m], tol, max_iter)
        bound += row_bound(w[:m], alpha, lgc, gamma[i], phi[:m], dig, lognorm[:m], elog)
        n_rows += 1
        for h in range(k):
            ss[h] += elog[h]
        for r in range(m):
            for h in range(k):
                phi_all[i, idx[r], h] = phi[r, h]
    return phi_all, ss, bound, n_rows


@numba.njit(cache=True, nogil=True)
def column_counts(gidx_col, u, phi_col, R):
    """``counts[h, c] = sum_i u phi_ih [gidx_i == c]`` for one column (client-side eq. 7)."""
    n, k = phi_col.shape
    counts = np.zeros((k, R))
    for i in range(n):
        g = gidx_col[i]
        if g >= 0:
            for h in range(k):
                counts[h, g] += u * phi_col[i, h]
    return counts


@numba.njit(cache=True, nogil=True)
def mm_estep(gidx, w, logpi, logbeta):
    """E-step of the mixture of multinomials (MM) and its M-step counts.

    Row ``i`` (weight ``w_i``) has responsibilities ``r_ih`` proportional to
    ``pi_h prod_{j observed} beta_hj(x_ij)``. Returns ``resp (n, k)``, the weighted counts
    ``(k, R)`` of every global category, the weighted responsibility sums ``(k,)`` and the
    weighted log-likelihood ``sum_i w_i log p(x_i)`` of the rows with an observed label.
    """
    n, N = gidx.shape
    k = logpi.size
    R = logbeta.shape[1]
    resp = np.empty((n, k))
    counts = np.zeros((k, R))
    rsum = np.zeros(k)
    ll = np.empty(k)
    total = 0.0
    for i in range(n):
        m = 0
        for h in range(k):
            ll[h] = logpi[h]
        for j in range(N):
            g = gidx[i, j]
            if g >= 0:
                m += 1
                for h in range(k):
                    ll[h] += logbeta[h, g]
        mx = -np.inf
        for h in range(k):
            if ll[h] > mx:
                mx = ll[h]
        s = 0.0
        for h in range(k):
            resp[i, h] = math.exp(ll[h] - mx)
            s += resp[i, h]
        for h in range(k):
            resp[i, h] /= s
        if m == 0:
            continue
        total += w[i] * (mx + math.log(s))
        for h in range(k):
            rsum[h] += w[i] * resp[i, h]
        for j in range(N):
            g = gidx[i, j]
            if g >= 0:
                for h in range(k):
                    counts[h, g] += w[i] * resp[i, h]
    return resp, counts, rsum, total
