"""The digamma function as a Numba kernel (for the BCE E-step kernels of :mod:`._kernels`)."""

from __future__ import annotations

import math

import numba

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)

__all__ = ["digamma"]

#: :func:`digamma` takes its series at 0 below this
_DIGAMMA_SMALL = 1e-2
_EULER = 0.5772156649015329
#: zeta(2), ..., zeta(8)
_Z = (
    1.6449340668482264,
    1.2020569031595942,
    1.0823232337111381,
    1.03692775514337,
    1.0173430619844492,
    1.008349277381923,
    1.0040773561979444,
)


@numba.njit(cache=True, nogil=True)
def digamma(x):
    """Digamma function for ``x > 0`` (below :data:`_DIGAMMA_SMALL` the series at 0, else the recurrence to
    ``x >= 10``, then the asymptotic series)."""
    if x < _DIGAMMA_SMALL:
        # near 0: -1/x plus the Taylor series of Psi(1 + x) = -gamma + sum_n (-1)^n zeta(n) x^(n - 1), through
        # x^7 (the next term, < 1e-16, is below the rounding of -1/x); most of a row's gamma sit here
        # (near alpha), where the recurrence below took five divisions
        return (
            x * (_Z[0] - x * (_Z[1] - x * (_Z[2] - x * (_Z[3] - x * (_Z[4] - x * (_Z[5] - x * _Z[6]))))))
            - _EULER
            - 1.0 / x
        )
    result = 0.0
    # two steps of the recurrence per division: 1/x + 1/(x+1) = (2*x + 1) / (x*(x + 1))
    while x < 9.0:
        result -= (2.0 * x + 1.0) / (x * (x + 1.0))
        x += 2.0
    if x < 10.0:
        result -= 1.0 / x
        x += 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    result += (
        math.log(x)
        - 0.5 * inv
        - inv2
        * (1.0 / 12.0 - inv2 * (1.0 / 120.0 - inv2 * (1.0 / 252.0 - inv2 * (1.0 / 240.0 - inv2 / 132.0))))
    )
    return result
