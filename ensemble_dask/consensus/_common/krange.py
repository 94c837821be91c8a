"""``n_clusters`` that asks for K to be chosen: ``"auto"`` or a range ``(k_min, k_max)``, and their checks.

Plain Python: the workflow checks, the pipeline and the command line read it without importing a solver.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..._validation import InputError

__all__ = ["auto_k_max", "is_k_range", "k_range", "largest_k"]


def auto_k_max(n):
    """The largest K of ``n_clusters="auto"``: ``floor(sqrt(n) / 4)`` clipped to ``[10, 30]`` (10 up to
    2,000 rows, 30 from 14,400), at most ``n - 1``."""
    return int(min(max(10, int(np.sqrt(n) / 4)), 30, max(n - 1, 2)))


def largest_k(value, n=None):
    """The largest K that ``n_clusters`` asks for: itself (an integer), or its range's ``k_max``; None when
    it is None, or ``"auto"`` without ``n``."""
    if value is None or (value == "auto" and n is None):
        return None
    return k_range(value, n)[1] if is_k_range(value) else value


def is_k_range(value):
    """Whether ``n_clusters`` asks for K to be chosen (``"auto"`` or a pair ``(k_min, k_max)``)."""
    return isinstance(value, str) or isinstance(value, list | tuple)


def k_range(value, n=None, name="n_clusters"):
    """``(k_min, k_max)`` of ``value``: ``"auto"`` (:func:`auto_k_max`, needs ``n``), a pair of integers
    ``2 <= k_min <= k_max`` (a list or a tuple) or a string ``"k_min:k_max"``; with ``n``, ``k_max <= n - 1``
    is checked (the rows less one: the eigengap at ``k_max`` reads eigenvalue ``k_max + 1``)."""
    got = value
    if isinstance(value, str) and value != "auto":
        lo, sep, hi = value.partition(":")
        try:
            value = (int(lo), int(hi)) if sep else None
        except ValueError:
            value = None
    if value == "auto":
        if n is None:
            raise InputError(f"The {name!r} parameter 'auto' needs the number of rows")
        return 2, auto_k_max(n)
    ok = (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value)
        and 2 <= value[0] <= value[1]
    )
    if not ok:
        raise InputError(
            f"The {name!r} parameter must be an integer >= 2, 'auto' or a range of K [k_min, k_max] (on the "
            f"command line k_min:k_max) with 2 <= k_min <= k_max; got {got!r}"
        )
    lo, hi = int(value[0]), int(value[1])
    if n is not None and hi > n - 1:
        raise InputError(f"The {name!r} parameter's k_max must be <= n_samples - 1 = {n - 1}; got {got!r}")
    return lo, hi
