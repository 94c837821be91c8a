"""Numba kernels of the co-association store: pair counting and co-cluster partner draws.

Plain arrays and scalars in, plain arrays out; no zarr, no Dask, no estimators. Randomness
comes in as an explicit 64-bit state (splitmix64), seeded by the caller from a NumPy
generator, so a kernel draws the same numbers whatever thread or worker runs it.
"""

from __future__ import annotations

import numba
import numpy as np

from ..runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)
from ..runtime.prefetch import prefetch, prefetch1

__all__ = [
    "count_pairs_kernel",
    "lower_counts_kernel",
    "count_symmetric_kernel",
    "cluster_index_kernel",
    "cluster_index_columns",
    "cocluster_draws_kernel",
    "cluster_histogram_kernel",
    "cocluster_requests_kernel",
    "resolve_requests_kernel",
    "request_owner_kernel",
    "scatter_rows_kernel",
    "split_pieces_kernel",
]


@numba.njit(cache=True, nogil=True)
def count_pairs_kernel(labels_a, labels_b, rows_a, rows_b, co, both):
    """Count c_ij and N_ij for pairs ``(labels_a[rows_a[p]], labels_b[rows_b[p]])``.

    Parameters
    ----------
    labels_a, labels_b : ndarray of shape (m_a, N) and (m_b, N), int32
        Label rows (``-1`` = absent); the two may be the same array.
    rows_a, rows_b : ndarray of shape (P,), int64
        Local row of the first and second point of each pair.
    co, both : ndarray of shape (P,), int32
        Output: clusterings putting the two together, clusterings holding both.
    """
    for p in range(rows_a.shape[0]):
        co[p], both[p] = _count_one(labels_a, rows_a[p], labels_b, rows_b[p])


@numba.njit(cache=True, nogil=True, inline="always")
def _count_one(labels_a, a, labels_b, b):
    """``(c, N)`` of rows a of ``labels_a`` and b of ``labels_b``."""
    c = 0
    m = 0
    for u in range(labels_a.shape[1]):
        x = labels_a[a, u]
        y = labels_b[b, u]
        present = (x >= 0) & (y >= 0)
        m += present
        c += present & (x == y)
    return c, m


@numba.njit(cache=True, nogil=True)
def cluster_index_kernel(labels, n_ids):
    """Members of every base cluster, by a counting sort of each column.

    Parameters
    ----------
    labels : ndarray of shape (n, N), int32
        Cluster ids in ``[0, n_ids)``, ``-1`` = absent.
    n_ids : int
        One more than the largest cluster id.

    Returns
    -------
    members : ndarray of shape (N, n), int32
        ``members[u, start[u, c]:start[u, c + 1]]`` are the points of cluster c in clustering u,
        ascending; entries past ``start[u, n_ids]`` are unused. (int32: the callers hold n < 2**31.)
    start : ndarray of shape (N, n_ids + 1), int64
    """
    n, n_clust = labels.shape
    members = np.empty((n_clust, n), dtype=np.int32)  # entries past start[u, n_ids] are never read
    start = np.zeros((n_clust, n_ids + 1), dtype=np.int64)
    cluster_index_columns(labels, 0, n_clust, members, start)
    return members, start


@numba.njit(cache=True, nogil=True)
def cluster_index_columns(labels, u0, u1, members, start):
    """:func:`cluster_index_kernel` for the clusterings ``u0 .. u1 - 1`` only, into ``members`` and
    ``start`` (``start`` zero on those rows): disjoint column ranges can be filled by separate threads.
    The labels are read row by row (two passes over their rows, not two per clustering)."""
    n = labels.shape[0]
    n_ids = start.shape[1] - 1
    for i in range(n):
        for u in range(u0, u1):
            c = labels[i, u]
            if c >= 0:
                start[u, c + 1] += 1
    for u in range(u0, u1):
        for c in range(n_ids):
            start[u, c + 1] += start[u, c]
    fill = start[u0:u1, :n_ids].copy()
    for i in range(n):
        for u in range(u0, u1):
            c = labels[i, u]
            if c >= 0:
                members[u, fill[u - u0, c]] = i
                fill[u - u0, c] += 1


@numba.njit(cache=True, nogil=True)
def _splitmix64(state):
    """Advance ``state[0]`` and return the next 64-bit output (as uint64)."""
    z = np.uint64(state[0]) + np.uint64(0x9E3779B97F4A7C15)
    state[0] = np.int64(z)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def _below(state, m):
    """A random integer in ``[0, m)`` for ``m >= 1`` (modulo bias below 2**-40 for m < 2**24)."""
    return np.int64(_splitmix64(state) % np.uint64(m))


@numba.njit(cache=True, nogil=True)
def _present_in(labels_rows, r, present):
    """The clusterings where row r has a label, into ``present``: returns their number."""
    n_present = 0
    for u in range(labels_rows.shape[1]):
        if labels_rows[r, u] >= 0:
            present[n_present] = u
            n_present += 1
    return n_present


@numba.njit(cache=True, nogil=True)
def cocluster_draws_kernel(labels_rows, row0, n, members, start, n_cocluster, n_uniform, state, keys):
    """Draw partners for the points ``row0 .. row0 + len(labels_rows) - 1``.

    Each point makes ``n_cocluster`` co-cluster draws (a clustering u where it is present, chosen
    uniformly, then a uniform other member of its cluster in u) and ``n_uniform`` uniform draws
    among the other ``n - 1`` points. A co-cluster draw for a point present nowhere, or alone in
    its cluster, falls back to a uniform draw. Pair ``(i, j)`` is written as ``min * n + max``.

    Parameters
    ----------
    labels_rows : ndarray of shape (m, N), int32
        Labels of the drawing points.
    row0 : int
        Global index of the first drawing point.
    n : int
        Number of points.
    members, start : ndarray
        Output of :func:`cluster_index_kernel` on the whole labels matrix.
    n_cocluster, n_uniform : int
        Draws of each kind per point.
    state : ndarray of shape (1,), int64
        splitmix64 state, advanced in place.
    keys : ndarray of shape (m * (n_cocluster + n_uniform),), int64
        Output pair keys.
    """
    m, n_clust = labels_rows.shape
    per = n_cocluster + n_uniform
    present = np.empty(n_clust, dtype=np.int64)
    for r in range(m):
        i = row0 + r
        n_present = _present_in(labels_rows, r, present)
        for t in range(per):
            j = -1
            if t < n_cocluster and n_present > 0:
                u = present[_below(state, n_present)]
                c = labels_rows[r, u]
                s0 = start[u, c]
                size = start[u, c + 1] - s0
                if size > 1:
                    j = members[u, s0 + _below(state, size - 1)]
                    if j == i:
                        j = members[u, s0 + size - 1]
            if j < 0:
                j = _below(state, n - 1)
                if j >= i:
                    j += 1
            if i < j:
                keys[r * per + t] = i * n + j
            else:
                keys[r * per + t] = j * n + i


@numba.njit(cache=True, nogil=True)
def scatter_rows_kernel(ptr, data, fill, out_cols, out_co, out_both):
    """Append each row's entries of one row-sorted piece at that row's fill position.

    Parameters
    ----------
    ptr : ndarray of shape (m + 1,), int64
        Entries of local row x of the piece are rows ``ptr[x]:ptr[x + 1]`` of ``data``.
    data : ndarray of shape (P, 3), int32 or int64
        Column, c_ij and N_ij of each entry.
    fill : ndarray of shape (m,), int64
        Output position of the next entry of each row; advanced in place.
    out_cols : ndarray, int64
    out_co, out_both : ndarray, int32
    """
    for x in range(ptr.shape[0] - 1):
        q = fill[x]
        for e in range(ptr[x], ptr[x + 1]):
            out_cols[q] = data[e, 0]
            out_co[q] = data[e, 1]
            out_both[q] = data[e, 2]
            q += 1
        fill[x] = q


@numba.njit(cache=True, nogil=True)
def split_pieces_kernel(rows_a, rows_b, co, both, row0_a, row0_b, ptr_a, data_a, ptr_b, data_b):
    """Counted pairs (a, b), sorted by (a, b), as row-sorted pieces over rows a and over rows b.

    Parameters
    ----------
    rows_a, rows_b : ndarray of shape (P,), int64
        Local rows of the two points (rows of block A and of block B), sorted by (a, b).
    co, both : ndarray of shape (P,), int32
    row0_a, row0_b : int
        Global index of the first row of each block.
    ptr_a, ptr_b : ndarray of shape (m_a + 1,) and (m_b + 1,), int64, zero
        Output: entries of local row x of each piece are ``ptr[x]:ptr[x + 1]``.
    data_a, data_b : ndarray of shape (P, 3), int32 or int64
        Output: (global column, c_ij, N_ij) of each entry; ``data_a`` lists (a, b) in its order
        (columns b + row0_b), ``data_b`` the mirrored pairs grouped by b, stably (columns
        a + row0_a ascending within a row).
    """
    m = rows_a.shape[0]
    for p in range(m):
        ptr_a[rows_a[p] + 1] += 1
        ptr_b[rows_b[p] + 1] += 1
    for x in range(ptr_a.shape[0] - 1):
        ptr_a[x + 1] += ptr_a[x]
    for x in range(ptr_b.shape[0] - 1):
        ptr_b[x + 1] += ptr_b[x]
    fill = ptr_b[:-1].copy()
    for p in range(m):
        data_a[p, 0] = rows_b[p] + row0_b
        data_a[p, 1] = co[p]
        data_a[p, 2] = both[p]
        y = rows_b[p]
        q = fill[y]
        data_b[q, 0] = rows_a[p] + row0_a
        data_b[q, 1] = co[p]
        data_b[q, 2] = both[p]
        fill[y] = q + 1


@numba.njit(cache=True, nogil=True)
def cluster_histogram_kernel(labels, hist):
    """``hist[u, c]`` += the rows of ``labels`` (``m x N``) with label c in clustering u."""
    for i in range(labels.shape[0]):
        for u in range(labels.shape[1]):
            c = labels[i, u]
            if c >= 0:
                hist[u, c] += 1


@numba.njit(cache=True, nogil=True)
def cocluster_requests_kernel(
    labels_rows, row0, n, sizes, seen, n_cocluster, n_uniform, state, keys, req_i, req_u, req_c, req_r
):
    """:func:`cocluster_draws_kernel`'s draws, the same random numbers in the same order, without the
    cluster index: a co-cluster draw becomes a request ``(i, u, c, rank)`` for the member of global rank
    ``rank`` (in index order) of cluster c of clustering u, resolved where that member's rows are.

    ``sizes`` (``N x n_ids``) are the clusters' global sizes; ``seen[u, c]`` is the number of points before
    ``row0`` in cluster c of u (advanced in place past these rows: a point's own rank, which a draw skips,
    as the index draw skips the point itself). ``keys`` receives the uniform draws' pair keys and -1 at
    each request; returns the number of requests written.
    """
    m, n_clust = labels_rows.shape
    per = n_cocluster + n_uniform
    present = np.empty(n_clust, dtype=np.int64)
    q = 0
    for r in range(m):
        i = row0 + r
        n_present = _present_in(labels_rows, r, present)
        for t in range(per):
            slot = r * per + t
            if t < n_cocluster and n_present > 0:
                u = present[_below(state, n_present)]
                c = labels_rows[r, u]
                size = sizes[u, c]
                if size > 1:
                    rank = _below(state, size - 1)
                    if rank == seen[u, c]:  # the point itself: the last member instead
                        rank = size - 1
                    keys[slot] = -1
                    req_i[q] = i
                    req_u[q] = u
                    req_c[q] = c
                    req_r[q] = rank
                    q += 1
                    continue
            j = _below(state, n - 1)
            if j >= i:
                j += 1
            keys[slot] = i * n + j if i < j else j * n + i
        for u in range(n_clust):
            c = labels_rows[r, u]
            if c >= 0:
                seen[u, c] += 1
    return q


@numba.njit(cache=True, nogil=True)
def resolve_requests_kernel(req_i, req_u, req_c, req_r, base, members, start, row0, n, keys):
    """Pair keys of requests ``(i, u, c, rank)`` whose member lies in the rows from ``row0``: ``base[u, c]``
    members of cluster c of u come before them, and ``members``/``start`` are
    :func:`cluster_index_kernel` of those rows."""
    for q in range(req_i.shape[0]):
        u = req_u[q]
        c = req_c[q]
        j = row0 + members[u, start[u, c] + req_r[q] - base[u, c]]
        i = req_i[q]
        keys[q] = i * n + j if i < j else j * n + i


@numba.njit(cache=True, nogil=True)
def request_owner_kernel(req_u, req_c, req_r, offsets, owner):
    """The partition holding each request's member: the last p with ``offsets[u, c, p] <= rank``
    (``offsets[u, c]``: members of cluster c of u before each partition, non-decreasing)."""
    n_parts = offsets.shape[2]
    for q in range(req_u.shape[0]):
        row = offsets[req_u[q], req_c[q]]
        lo = 0
        hi = n_parts
        while hi - lo > 1:  # the last p with row[p] <= rank (row[0] = 0)
            mid = (lo + hi) // 2
            if row[mid] <= req_r[q]:
                lo = mid
            else:
                hi = mid
        owner[q] = lo


@numba.njit(cache=True, nogil=True)
def upper_csr_kernel(keys, n):
    """Distinct pair keys ``i * n + j`` (i < j, any order, repeats allowed) as an upper-triangle CSR.

    A counting sort by ``i`` and a sort of each (short) row: O(P) work with local memory access,
    instead of a global sort of the P keys.

    Returns
    -------
    indptr : ndarray of shape (n + 1,), int64
    cols : ndarray of shape (nnz,), int64
        The ``j`` of row ``i``'s distinct pairs, ascending within a row.
    """
    m = keys.shape[0]
    start = np.zeros(n + 1, dtype=np.int64)
    row = np.empty(m, dtype=np.int64)  # each key's i, divided once (a 64-bit division is slow)
    for p in range(m):
        i = keys[p] // n
        row[p] = i
        start[i + 1] += 1
    for i in range(n):
        start[i + 1] += start[i]
    cols = np.empty(m, dtype=np.int64)
    fill = start[:-1].copy()
    for p in range(m):
        i = row[p]
        cols[fill[i]] = keys[p] - i * n
        fill[i] += 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    w = 0
    for i in range(n):
        a = start[i]
        b = start[i + 1]
        if b - a <= 32:  # the usual short row: an insertion sort in place, no call
            for t in range(a + 1, b):
                v = cols[t]
                u = t - 1
                while u >= a and cols[u] > v:
                    cols[u + 1] = cols[u]
                    u -= 1
                cols[u + 1] = v
        else:
            cols[a:b].sort()
        last = -1
        for t in range(a, b):
            c = cols[t]
            if c != last:
                cols[w] = c
                w += 1
                last = c
        indptr[i + 1] = w
    return indptr, cols[:w]


@numba.njit(cache=True, nogil=True)
def lower_counts_kernel(uptr, ucols, r0, r1, counts):
    """``counts[j]`` += the pairs (i, j) of the upper-triangle CSR rows ``r0 .. r1 - 1`` (the lower
    entries that those rows give row j of the symmetric CSR); one array per row range, so that separate
    threads can count disjoint ranges."""
    for e in range(uptr[r0], uptr[r1]):
        counts[ucols[e]] += 1


@numba.njit(cache=True, nogil=True)
def count_symmetric_kernel(labels, uptr, ucols, r0, r1, indptr, low, fill, indices, co, both):
    """Count the pairs of upper-triangle CSR rows ``r0 .. r1 - 1`` over ``labels`` and write each at both
    of its places in the symmetric CSR: counting and mirroring in one pass, on threads, with no
    upper-triangle copy of the counts (each pair is counted once).

    Row r of the symmetric CSR (``indptr``) holds its ``low[r]`` lower entries (columns < r, ascending)
    then its upper ones (ascending). ``fill[j]`` is where the next lower entry of row j from these rows
    goes (advanced in place): ``indptr[j]`` plus the lower entries of row j from rows above ``r0``.
    Disjoint, consecutive row ranges with their own ``fill`` write disjoint entries, so threads can run
    them, and the result is that of one thread.
    """
    last = labels.shape[1] - 1
    for i in range(r0, r1):
        # the next row's partners' label rows (two lines: 20 int32 span a line boundary) and fill entries are
        # on their way while this row is counted (a hint: the same output)
        if i + 1 < r1:
            for e in range(uptr[i + 1], uptr[i + 2]):
                j = ucols[e]
                prefetch(labels, j, 0)
                prefetch(labels, j, last)
                prefetch1(fill, j)
        q_up = indptr[i] + low[i]
        for e in range(uptr[i], uptr[i + 1]):
            j = ucols[e]
            c, m = _count_one(labels, i, labels, j)
            indices[q_up] = j
            co[q_up] = c
            both[q_up] = m
            q_up += 1
            q = fill[j]
            indices[q] = i
            co[q] = c
            both[q] = m
            fill[j] = q + 1
