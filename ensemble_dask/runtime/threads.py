"""Threads of this process for numba kernels that release the GIL (``nogil=True``).

The kernels write disjoint slices of preallocated outputs, or return parts that the caller combines
in a fixed order, so a result never depends on how many threads ran it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["usable_cores", "thread_map", "even_splits"]


def usable_cores():
    """Cores this process may run on (its CPU affinity, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def thread_map(func, items, *, max_threads=None):
    """``[func(item) for item in items]``, on up to ``max_threads`` threads (default: the usable cores).

    One item, or one usable core, runs in the calling thread with no pool.
    """
    items = list(items)
    threads = min(len(items), usable_cores() if max_threads is None else max(1, int(max_threads)))
    if threads <= 1:
        return [func(item) for item in items]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(func, items))


def even_splits(indptr, parts):
    """Row bounds ``[r_0 = 0, ..., r_parts = n]`` of a CSR ``indptr`` with about the same number of
    entries between consecutive bounds (non-decreasing; some ranges may be empty)."""
    indptr = np.asarray(indptr)
    n = indptr.shape[0] - 1
    targets = np.linspace(0, indptr[-1], parts + 1)[1:-1]
    inner = np.searchsorted(indptr, targets, side="left").clip(0, n)
    return [0, *(int(r) for r in inner), n]
