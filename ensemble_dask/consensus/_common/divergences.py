"""Numba kernels of the divergences of PCC (Lourenço et al. 2015): value and first two derivatives in ``x2``.

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
``ensemble_dask.consensus.pcc._pcc.DIVERGENCES``. The line search then works unchanged; a
closed-form step can be added in :func:`~ensemble_dask.consensus.pcc._kernels._line_search` like the L2 one.
"""

from __future__ import annotations

import numba
import numpy as np

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)

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
