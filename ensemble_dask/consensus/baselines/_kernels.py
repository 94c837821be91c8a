"""Numba kernels of the baseline consensus methods (plain arrays only)."""

from __future__ import annotations

import numba
import numpy as np

from ...runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)

__all__ = [
    "best_neighbours",
    "find_roots",
    "union_merges",
    "weighted_gram",
    "weighted_gram_ones",
    "present_csr",
    "lookup_csr",
    "column_sums",
    "row_embedding",
    "sum_of_squares",
    "first_seen_codes",
]


@numba.njit(cache=True, nogil=True)
def best_neighbours(indptr, indices, data, sizes, best, best_sim):
    """Each row's neighbour of highest average similarity ``data / (size_i size_j)``.

    Ties go to the smaller neighbour index; ``best[i] = -1`` for a row without neighbours.
    """
    n = indptr.shape[0] - 1
    for i in range(n):
        b = -1
        bs = -1.0
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            if j == i:
                continue
            s = data[e] / (sizes[i] * sizes[j])
            if s > bs or (s == bs and j < b):
                bs = s
                b = j
        best[i] = b
        best_sim[i] = bs


@numba.njit(cache=True, nogil=True)
def _find(parent, x):
    r = x
    while parent[r] != r:
        r = parent[r]
    while parent[x] != r:
        nxt = parent[x]
        parent[x] = r
        x = nxt
    return r


@numba.njit(cache=True, nogil=True)
def union_merges(parent, a, b, n_merges):
    """Apply the first ``n_merges`` unions ``(a[t], b[t])`` to the union-find ``parent``."""
    for t in range(n_merges):
        ra = _find(parent, a[t])
        rb = _find(parent, b[t])
        if ra != rb:
            if ra < rb:
                parent[rb] = ra
            else:
                parent[ra] = rb


@numba.njit(cache=True, nogil=True)
def find_roots(parent):
    """Root of every element (compresses the paths)."""
    out = np.empty(parent.shape[0], dtype=np.int64)
    for x in range(parent.shape[0]):
        out[x] = _find(parent, x)
    return out


@numba.njit(cache=True, nogil=True)
def mutual_best_matching(indptr, indices, data, sizes, best_sim, match):
    """Greedy matching on the edges ``(i, j)`` whose average similarity is the best of both ends.

    Every such pair is a valid next merge of a reducible linkage (ties included), and a maximal
    matching merges many at once even when whole groups tie. ``match[i]`` receives the partner
    or ``-1``. Returns the number of matched pairs.
    """
    n = indptr.shape[0] - 1
    for i in range(n):
        match[i] = -1
    count = 0
    for i in range(n):
        if match[i] >= 0 or best_sim[i] <= 0.0:
            continue
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            if j == i or match[j] >= 0:
                continue
            s = data[e] / (sizes[i] * sizes[j])
            if s == best_sim[i] and s == best_sim[j]:
                match[i] = j
                match[j] = i
                count += 1
                break
    return count


@numba.njit(cache=True, nogil=True)
def contract(indptr, indices, data, mapping, group_ptr, group, m):
    """Sum a symmetric CSR graph over groups of rows: ``P^T S P`` without the diagonal.

    ``group[group_ptr[u]:group_ptr[u + 1]]`` are the old rows of new row ``u``; ``mapping`` maps old
    to new indices. Each unordered pair is summed once (upper triangle) and mirrored, so the
    result is exactly symmetric; rows are not sorted. Returns ``(indptr, indices, data)``.
    """
    nnz = indptr[-1]
    up_ptr = np.empty(m + 1, dtype=np.int64)
    up_idx = np.empty(nnz, dtype=np.int64)
    up_val = np.empty(nnz)
    mark = np.full(m, -1, dtype=np.int64)
    slot = np.empty(m, dtype=np.int64)
    pos = 0
    for u in range(m):
        up_ptr[u] = pos
        for t in range(group_ptr[u], group_ptr[u + 1]):
            r = group[t]
            for e in range(indptr[r], indptr[r + 1]):
                c = mapping[indices[e]]
                if c <= u:
                    continue
                if mark[c] != u:
                    mark[c] = u
                    slot[c] = pos
                    up_idx[pos] = c
                    up_val[pos] = data[e]
                    pos += 1
                else:
                    up_val[slot[c]] += data[e]
    up_ptr[m] = pos
    deg = np.zeros(m + 1, dtype=np.int64)
    for u in range(m):
        deg[u + 1] += up_ptr[u + 1] - up_ptr[u]
        for e in range(up_ptr[u], up_ptr[u + 1]):
            deg[up_idx[e] + 1] += 1
    out_ptr = np.cumsum(deg)
    fill = out_ptr[:-1].copy()
    out_idx = np.empty(2 * pos, dtype=np.int64)
    out_val = np.empty(2 * pos)
    for u in range(m):
        for e in range(up_ptr[u], up_ptr[u + 1]):
            c = up_idx[e]
            out_idx[fill[u]] = c
            out_val[fill[u]] = up_val[e]
            fill[u] += 1
            out_idx[fill[c]] = u
            out_val[fill[c]] = up_val[e]
            fill[c] += 1
    return out_ptr, out_idx, out_val


@numba.njit(cache=True, nogil=True)
def weighted_gram(indptr, indices, data, w, out):
    """``out += A^T diag(w) A`` for the CSR matrix ``A`` (``indptr``, ``indices``, ``data``), ``out`` dense.

    One pass over the rows, each adding the outer product of its few entries: no sparse product
    and no temporary copy of ``A``.
    """
    n = indptr.shape[0] - 1
    for i in range(n):
        wi = w[i]
        for e in range(indptr[i], indptr[i + 1]):
            a = indices[e]
            v = wi * data[e]
            for f in range(indptr[i], indptr[i + 1]):
                out[a, indices[f]] += v * data[f]


@numba.njit(cache=True, nogil=True)
def weighted_gram_ones(indptr, indices, w, out):
    """``out += A^T diag(w) A`` for the 0/1 CSR pattern ``A`` (``indptr``, ``indices``) with distinct columns
    in each row, ``out`` dense and symmetric on entry: each row adds ``w_i`` to the upper triangle of its
    outer product, mirrored at the end. The same additions in the same order as :func:`weighted_gram` on
    ``data = 1`` (bit-identical), half the stores."""
    n = indptr.shape[0] - 1
    G = out.shape[0]
    for i in range(n):
        wi = w[i]
        for e in range(indptr[i], indptr[i + 1]):
            a = indices[e]
            out[a, a] += wi
            for f in range(e + 1, indptr[i + 1]):
                b = indices[f]
                if a < b:
                    out[a, b] += wi
                else:
                    out[b, a] += wi
    for a in range(G):
        for b in range(a + 1, G):
            out[b, a] = out[a, b]


@numba.njit(cache=True, nogil=True)
def present_csr(g):
    """``(indptr, indices)`` of the CSR pattern of the entries ``>= 0`` of ``g`` (row by row, in column
    order; ``indices`` int32): what ``cumsum((g >= 0).sum(1))`` and ``g[g >= 0]`` give, in two passes with no
    ``n x N`` mask."""
    n, N = g.shape
    indptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        c = 0
        for j in range(N):
            if g[i, j] >= 0:
                c += 1
        indptr[i + 1] = indptr[i] + c
    indices = np.empty(indptr[n], dtype=np.int32)
    p = 0
    for i in range(n):
        for j in range(N):
            v = g[i, j]
            if v >= 0:
                indices[p] = v
                p += 1
    return indptr, indices


@numba.njit(cache=True, nogil=True)
def lookup_csr(labels, rows, lut, lut_offsets):
    """``(indptr, indices)``: :func:`present_csr` of the global indices of ``labels[rows]`` (label ``v >= 0``
    of clustering ``i`` is ``lut[lut_offsets[i] + v]``, which must hold every label of ``labels``), read from
    the labels themselves: neither the rows' copy nor their ``n x N`` global indices are made.

    The present labels of every row are counted in one pass in order, so that the rows (in any order: distinct
    rows come in the order of their hashes) are read at random once, not twice."""
    n = rows.shape[0]
    m, N = labels.shape
    present = np.zeros(m, dtype=np.int32)
    for x in range(m):
        c = 0
        for i in range(N):
            c += labels[x, i] >= 0
        present[x] = c
    indptr = np.zeros(n + 1, dtype=np.int64)
    for r in range(n):
        indptr[r + 1] = indptr[r] + present[rows[r]]
    indices = np.empty(indptr[n], dtype=np.int32)
    p = 0
    for r in range(n):
        x = rows[r]
        for i in range(N):
            v = labels[x, i]
            if v >= 0:
                indices[p] = lut[lut_offsets[i] + v]
                p += 1
    return indptr, indices


@numba.njit(cache=True, nogil=True)
def column_sums(indptr, indices, w, n_cols):
    """``A^T w`` for the 0/1 CSR pattern ``A``: the additions of ``scipy``'s product on ``data = 1``, in its
    order (bit-identical), with no data array."""
    out = np.zeros(n_cols)
    for i in range(indptr.shape[0] - 1):
        for e in range(indptr[i], indptr[i + 1]):
            out[indices[e]] += w[i]
    return out


@numba.njit(cache=True, nogil=True)
def row_embedding(indptr, indices, SV, sig, out):
    """``out[i] = (A SV)[i] / sqrt(deg_i) / sig`` for the 0/1 CSR pattern ``A`` (``deg_i`` its row's entries,
    1 for an empty row), each row then scaled to unit length (a zero row stays zero): HBGF's embedding in one
    pass, with no ``n x K`` temporaries, the same bit for bit as scipy's product and NumPy's divisions and
    ``np.linalg.norm`` (:func:`sum_of_squares`)."""
    n = indptr.shape[0] - 1
    k = SV.shape[1]
    stack = np.zeros((64, 4))  # sum_of_squares' frames, made once
    for i in range(n):
        for j in range(k):
            out[i, j] = 0.0
        for e in range(indptr[i], indptr[i + 1]):
            g = indices[e]
            for j in range(k):
                out[i, j] += SV[g, j]
        deg = indptr[i + 1] - indptr[i]
        root = np.sqrt(np.float64(deg if deg > 0 else 1))
        for j in range(k):
            out[i, j] = out[i, j] / root / sig[j]
        norm = max(np.sqrt(sum_of_squares(out[i], stack)), 1e-300)
        for j in range(k):
            out[i, j] /= norm


@numba.njit(cache=True, nogil=True)
def sum_of_squares(v, stack):
    """``sum(v ** 2)`` added in NumPy's pairwise order (``np.linalg.norm(U, axis=1)`` of a row is its square
    root bit for bit): below 8 terms one after the other, up to 128 in eight running sums joined as
    ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))`` and the rest added after, above 128 the two halves
    (cut at a multiple of 8) summed so and added. NumPy's recursion runs on ``stack`` (a ``(64, 4)`` float64
    scratch: start, length, stage and left sum of each frame; a recursive kernel crashed numba's compilation
    of its callers), one function so that numba compiles one signature."""
    top = 0
    stack[0, 0] = 0.0
    stack[0, 1] = v.shape[0]
    stack[0, 2] = 0.0
    ret = 0.0
    while top >= 0:
        lo = int(stack[top, 0])
        n = int(stack[top, 1])
        if n < 8:
            ret = 0.0
            for i in range(lo, lo + n):
                ret += v[i] * v[i]
            top -= 1
        elif n <= 128:
            r0, r1 = v[lo] * v[lo], v[lo + 1] * v[lo + 1]
            r2, r3 = v[lo + 2] * v[lo + 2], v[lo + 3] * v[lo + 3]
            r4, r5 = v[lo + 4] * v[lo + 4], v[lo + 5] * v[lo + 5]
            r6, r7 = v[lo + 6] * v[lo + 6], v[lo + 7] * v[lo + 7]
            i = 8
            while i < n - n % 8:
                p = lo + i
                r0 += v[p] * v[p]
                r1 += v[p + 1] * v[p + 1]
                r2 += v[p + 2] * v[p + 2]
                r3 += v[p + 3] * v[p + 3]
                r4 += v[p + 4] * v[p + 4]
                r5 += v[p + 5] * v[p + 5]
                r6 += v[p + 6] * v[p + 6]
                r7 += v[p + 7] * v[p + 7]
                i += 8
            ret = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
            while i < n:
                ret += v[lo + i] * v[lo + i]
                i += 1
            top -= 1
        else:
            half = n // 2
            half -= half % 8
            stage = stack[top, 2]
            if stage == 0.0:  # the left half first
                stack[top, 2] = 1.0
                top += 1
                stack[top, 0], stack[top, 1], stack[top, 2] = lo, half, 0.0
            elif stage == 1.0:  # the left half's sum is in ret: the right half
                stack[top, 3] = ret
                stack[top, 2] = 2.0
                top += 1
                stack[top, 0], stack[top, 1], stack[top, 2] = lo + half, n - half, 0.0
            else:  # left + right, to the caller's frame
                ret = stack[top, 3] + ret
                top -= 1
    return ret


@numba.njit(cache=True, nogil=True)
def first_seen_codes(labels, top):
    """Each of ``labels`` (integers in ``[0, top)``) numbered ``0, 1, ...`` by first appearance."""
    code = np.full(top, -1, dtype=np.int64)
    out = np.empty(labels.shape[0], dtype=np.int64)
    m = 0
    for i in range(labels.shape[0]):
        v = labels[i]
        if code[v] < 0:
            code[v] = m
            m += 1
        out[i] = code[v]
    return out


@numba.njit(cache=True, nogil=True)
def _find(parent, a):
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


@numba.njit(cache=True, nogil=True)
def linked_components(indptr, indices, n_cols):
    """Connected components of the columns of the CSR pattern (``indptr``, ``indices``): two columns are
    linked when a row holds both (union-find, one pass over the entries). Returns ``(count, comp)``, ``comp``
    each column's component numbered ``0 .. count - 1`` in the order of their first column."""
    parent = np.arange(n_cols)
    for i in range(indptr.shape[0] - 1):
        if indptr[i + 1] > indptr[i]:
            a = _find(parent, indices[indptr[i]])
            for e in range(indptr[i] + 1, indptr[i + 1]):
                b = _find(parent, indices[e])
                if a != b:
                    parent[b] = a
    comp = np.full(n_cols, -1, dtype=np.int64)
    code = np.full(n_cols, -1, dtype=np.int64)
    count = 0
    for c in range(n_cols):
        r = _find(parent, c)
        if code[r] < 0:
            code[r] = count
            count += 1
        comp[c] = code[r]
    return count, comp
