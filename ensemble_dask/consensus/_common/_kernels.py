"""Numba kernels on the encoded labels shared by the families (plain arrays only): row hashes for
:func:`~ensemble_dask.consensus._common.encoding.compress_rows`, the label lookup and the presence table of
:func:`~ensemble_dask.consensus._common.encoding.encode`, and each row's entropy for
:func:`~ensemble_dask.consensus._common.base.normalized_entropy`."""

from __future__ import annotations

import math

import numba
import numpy as np

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)

__all__ = [
    "row_hashes",
    "rows_match",
    "unique_hashes",
    "encode_lut",
    "column_presence",
    "column_label_range",
    "row_entropy",
]


@numba.njit(cache=True, nogil=True)
def row_hashes(gidx):
    """A 64-bit hash of each row (FNV-1a over the entries); equal rows have equal hashes."""
    n, N = gidx.shape
    out = np.empty(n, dtype=np.uint64)
    prime = np.uint64(1099511628211)
    for i in range(n):
        h = np.uint64(14695981039346656037)
        for j in range(N):
            h = (h ^ np.uint64(gidx[i, j] + 1)) * prime
        out[i] = h
    return out


@numba.njit(cache=True, nogil=True)
def unique_hashes(h):
    """``(first, inverse, counts)`` of the uint64 ``h`` as ``np.unique(h, return_index=True,
    return_inverse=True, return_counts=True)`` gives them (ascending distinct values; ``first`` the first
    occurrence): a stable LSD radix sort (six passes of 11 bits) orders them as NumPy's stable sort does."""
    n = h.shape[0]
    perm = np.arange(n)
    tmp = np.empty(n, dtype=np.int64)
    cnt = np.empty(2049, dtype=np.int64)
    mask = np.uint64(2047)
    for p in range(6):
        shift = np.uint64(11 * p)
        cnt[:] = 0
        for i in range(n):
            cnt[((h[i] >> shift) & mask) + 1] += 1
        if cnt.max() == n:  # one digit for all: this pass keeps the order
            continue
        for d in range(2048):
            cnt[d + 1] += cnt[d]
        for i in range(n):
            e = perm[i]
            d = (h[e] >> shift) & mask
            tmp[cnt[d]] = e
            cnt[d] += 1
        perm, tmp = tmp, perm
    inverse = np.empty(n, dtype=np.int64)
    m = 0
    for i in range(n):
        if i == 0 or h[perm[i]] != h[perm[i - 1]]:
            m += 1
        inverse[perm[i]] = m - 1
    first = np.empty(m, dtype=np.int64)
    counts = np.zeros(m, dtype=np.int64)
    u = -1
    for i in range(n):
        if i == 0 or h[perm[i]] != h[perm[i - 1]]:
            u += 1
            first[u] = perm[i]
        counts[u] += 1
    return first, inverse, counts


@numba.njit(cache=True, nogil=True)
def rows_match(gidx, first, inverse):
    """Whether every row ``i`` of ``gidx`` equals row ``first[inverse[i]]`` (no ``n x N`` gathered copy)."""
    n, N = gidx.shape
    for i in range(n):
        r = first[inverse[i]]
        if r == i:
            continue
        for j in range(N):
            if gidx[i, j] != gidx[r, j]:
                return False
    return True


@numba.njit(cache=True, nogil=True)
def encode_lut(labels, lut, lut_offsets, out):
    """``out[x, i] = lut[lut_offsets[i] + labels[x, i]]`` (``-1`` for missing or out-of-table labels)."""
    n, N = labels.shape
    for x in range(n):
        for i in range(N):
            v = labels[x, i]
            a = lut_offsets[i]
            if v < 0 or a + v >= lut_offsets[i + 1]:
                out[x, i] = -1
            else:
                out[x, i] = lut[a + v]


@numba.njit(cache=True, nogil=True)
def column_presence(labels, top, out):
    """``out[i, v] = True`` where label ``v`` (``0 <= v < top[i]``) occurs in column ``i``: one pass over the
    rows for the labels below 64, a second only when a column has larger ones."""
    n, N = labels.shape
    # labels below 64 set a bit of the column's word (branch-free ors, not stores into the table), larger
    # ones their table entry in a second pass; the words go to the table at the end (bits at or above top[i]
    # left out there)
    bits = np.zeros(N, dtype=np.uint64)
    big = -1
    for x in range(n):
        for i in range(N):
            v = np.int64(labels[x, i])
            big = max(big, v)
            bits[i] |= np.uint64(1) << np.uint64(v & 63) if v >= 0 and v < 64 else np.uint64(0)
    if big >= 64:
        for x in range(n):
            for i in range(N):
                v = labels[x, i]
                if v >= 64 and v < top[i]:
                    out[i, v] = True
    for i in range(N):
        for v in range(min(64, top[i])):
            if (bits[i] >> np.uint64(v)) & np.uint64(1):
                out[i, v] = True


@numba.njit(cache=True, nogil=True)
def column_label_range(labels, lo, hi):
    """``lo[i]``, ``hi[i]``: the smallest and largest non-missing (``>= 0``) label of column ``i`` (left as
    given where the column has none); one pass over the rows."""
    n, N = labels.shape
    for x in range(n):
        for i in range(N):
            v = labels[x, i]
            if v >= 0:
                if v < lo[i]:
                    lo[i] = v
                if v > hi[i]:
                    hi[i] = v


@numba.njit(cache=True, nogil=True)
def row_entropy(Y, out):
    """``out[i]``: the entropy of row ``i`` of ``Y`` (entries ``<= 0`` or NaN count 0) over ``log K``, clipped
    to ``[0, 1]``; one pass, no ``n x K`` temporaries."""
    n, k = Y.shape
    lk = math.log(k)
    for i in range(n):
        s = 0.0
        for h in range(k):
            y = Y[i, h]
            if y > 0.0:
                s -= y * math.log(y)
        out[i] = min(max(s / lk, 0.0), 1.0)
