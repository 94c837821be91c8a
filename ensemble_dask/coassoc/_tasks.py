"""The block functions of the co-association graph: what one Dask task of :mod:`.build` runs.

Each takes plain values (a :class:`~ensemble_dask.coassoc.csr._Locator` naming the run store, row bounds,
pieces of pairs) and opens what it needs itself, so that only pairs and counts travel between tasks: in task
results or, for large builds, through temporary arrays under ``pairs/_tmp/`` (:class:`_Transit`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _kernels as _k
from .csr import PAIRS_GROUP, TMP_GROUP, _checked_rows, _common_dtype, _compact_rows, _labels_array, _Locator
from .sampling import _unique

_TMP_CHUNK = 1 << 18  # chunk length of the temporary arrays


# In-memory functions the Dask graph maps over partitions of rows. A partition is a run of
# whole seed blocks, so its pairs do not depend on how many partitions there are.
#
# Pieces of pairs travel between tasks either as task results (small inputs) or, when the
# build spills, as arrays under ``pairs/_tmp/<kind>/`` of the run store: a task then returns
# only a :class:`_Spilled` handle, and the workers hold no pairs between tasks.


@dataclass(frozen=True)
class _Spilled:
    """A piece written to ``pairs/_tmp/<kind>/``: its name and the shape and dtype of each array."""

    kind: str
    name: str
    arrays: tuple  # ((key, shape, dtype str), ...)

    def shape(self, key):
        return next(shape for k, shape, _ in self.arrays if k == key)

    def dtype(self, key):
        return next(np.dtype(d) for k, _, d in self.arrays if k == key)


@dataclass(frozen=True)
class _Transit:
    """How pieces of pairs travel: ``locator`` None keeps them in task results, else they spill."""

    locator: _Locator | None = None
    chunk: int = _TMP_CHUNK

    def __dask_tokenize__(self):
        where = None if self.locator is None else self.locator.__dask_tokenize__()
        return ("ensemble_dask.coassoc._Transit", where, self.chunk)

    def open(self, kind):
        """The temporary group of ``kind`` (None when pieces stay in memory)."""
        if self.locator is None:
            return None
        return self.locator.open("r+")[f"{PAIRS_GROUP}/{TMP_GROUP}/{kind}"]

    def put(self, tmp, name, **arrays):
        """A piece of named arrays: the arrays themselves, or a handle to their spilled copies."""
        if tmp is None:
            return arrays
        spec = []
        for key, a in arrays.items():
            a = np.ascontiguousarray(a)
            if a.size:
                tmp.create_array(
                    f"{name}.{key}",
                    data=a,
                    chunks=(min(self.chunk, a.shape[0]), *a.shape[1:]),
                    compressors=_tmp_codec(),
                    overwrite=True,
                )
            spec.append((key, tuple(int(x) for x in a.shape), a.dtype.str))
        return _Spilled(tmp.basename, name, tuple(spec))


def _tmp_codec():
    """A fast codec for the temporary arrays (written once, read once or twice)."""
    from zarr.codecs import BloscCodec

    return BloscCodec(cname="lz4", clevel=1, shuffle="shuffle")


def _get(tmp, piece, key, start=0, stop=None):
    """Rows ``start:stop`` of array ``key`` of a piece (in memory or spilled)."""
    if isinstance(piece, dict):
        return piece[key][start:stop]
    shape = piece.shape(key)
    stop = shape[0] if stop is None else stop
    if stop <= start or shape[0] == 0:
        return np.zeros((0, *shape[1:]), dtype=piece.dtype(key))
    return np.asarray(tmp[f"{piece.name}.{key}"][start:stop])


def _length(piece, key):
    return len(piece[key]) if isinstance(piece, dict) else piece.shape(key)[0]


def _gen_partition(sampler, blocks, bounds, locator, transit, g):
    """Pair keys drawn by the seed blocks ``blocks``, bucketed by partition of their smaller point (the
    strategies that draw without the labels)."""
    parts = [sampler.block_keys(b) for b in blocks]
    keys = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    del parts
    if not sampler.row_local:
        keys = _unique(keys)
    return _bucket_keys(transit, sampler.n, bounds, keys, str(g))


def _bucket_keys(transit, n, bounds, keys, name):
    """Sorted unique ``keys`` as pieces (``gen`` kind) by partition of their smaller point."""
    cuts = np.searchsorted(keys, bounds * n)
    tmp = transit.open("gen")
    return [transit.put(tmp, f"{name}_{r}", keys=keys[cuts[r] : cuts[r + 1]]) for r in range(len(bounds) - 1)]


# ``cocluster`` draws without the whole labels matrix in any task: each partition counts its members of every
# base cluster (_cluster_histogram); each partition then draws as the in-memory sampler does, with the same
# random numbers, a co-cluster partner becoming a request for the member of some global rank of a cluster
# (_cocluster_requests); the partition holding that member resolves it into a pair (_resolve_requests).


def _cluster_histogram(locator, bounds, r):
    """Validate the label rows of partition r and count its members of each base cluster (``N x ids``)."""
    arr = _labels_array(locator.open("r"), str(locator))
    lab = _checked_rows(arr, int(bounds[r]), int(bounds[r + 1]))
    hist = np.zeros((lab.shape[1], int(lab.max(initial=-1)) + 1), dtype=np.int64)
    _k.cluster_histogram_kernel(lab, hist)
    return hist


def _cocluster_requests(sampler, blocks, bounds, locator, transit, g, seen, sizes, before):
    """The ``cocluster`` draws of the seed blocks ``blocks`` (the rows of partition g): ``(pieces of the
    uniform draws' keys by partition of the smaller point, pieces of the requests by partition of their
    member)``. ``seen`` (``N x ids``): members of each cluster before the partition; ``sizes``: their
    totals; ``before`` (``N x ids x partitions``): members before each partition."""
    n, bs, l, n_co = sampler.n, sampler.block_size, sampler.params["l"], sampler.n_cocluster
    r0 = int(bounds[g])
    arr = _labels_array(locator.open("r"), str(locator))
    lab = _checked_rows(arr, r0, int(bounds[g + 1]))
    seen = seen.copy()
    size = int(lab.shape[0]) * n_co
    req = {"i": np.empty(size, np.int64), "u": np.empty(size, np.int32), "c": np.empty(size, np.int32)}
    req["r"] = np.empty(size, np.int64)
    keys, q = [], 0
    for b in blocks:
        a0, a1 = b * bs - r0, min((b + 1) * bs, n) - r0
        out = np.empty((a1 - a0) * l, dtype=np.int64)
        q += _k.cocluster_requests_kernel(
            lab[a0:a1], r0 + a0, n, sizes, seen, n_co, l - n_co, sampler.state(b), out,
            req["i"][q:], req["u"][q:], req["c"][q:], req["r"][q:],
        )  # fmt: skip
        keys.append(out[out >= 0])
    del lab
    key_pieces = _bucket_keys(transit, n, bounds, _unique(np.concatenate(keys)), str(g))
    req = {k: v[:q] for k, v in req.items()}
    owner = np.empty(q, dtype=np.int64)
    _k.request_owner_kernel(req["u"], req["c"], req["r"], before, owner)
    order = np.argsort(owner, kind="stable")
    cuts = np.searchsorted(owner[order], np.arange(len(bounds)))
    req = {k: v[order] for k, v in req.items()}
    tmp = transit.open("req")
    req_pieces = [
        transit.put(tmp, f"{g}_{p}", **{k: v[cuts[p] : cuts[p + 1]] for k, v in req.items()})
        for p in range(len(bounds) - 1)
    ]
    return key_pieces, req_pieces


def _resolve_requests(locator, transit, n, bounds, q, base, *pieces):
    """Pair keys of the requests ``pieces`` (of every drawing task) for members in partition q, as pieces by
    partition of the smaller point; ``base`` (``N x ids``): members of each cluster before the partition."""
    q0 = int(bounds[q])
    arr = _labels_array(locator.open("r"), str(locator))
    members, start = _k.cluster_index_kernel(_checked_rows(arr, q0, int(bounds[q + 1])), base.shape[1])
    tmp = transit.open("req")
    req = {k: [_get(tmp, p, k) for p in pieces] for k in ("i", "u", "c", "r")}
    req = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in req.items()}
    keys = np.empty(req["i"].size, dtype=np.int64)
    _k.resolve_requests_kernel(req["i"], req["u"], req["c"], req["r"], base, members, start, q0, n, keys)
    del members, start, req
    return _bucket_keys(transit, n, bounds, _unique(keys), f"res{q}")


def _upper_partition(n, bounds, transit, r, *buckets):
    """Unique pairs owned by partition r, split by the partition of their larger point."""
    tmp = transit.open("gen")
    parts = [_get(tmp, b, "keys") for b in buckets]
    keys = parts[0] if len(parts) == 1 else _unique(np.concatenate(parts))
    del parts
    part_of_j = np.searchsorted(bounds, keys % n, side="right") - 1
    small = np.int16 if len(bounds) < 2**15 else np.int64  # int16: a linear-time radix sort
    order = np.argsort(part_of_j.astype(small), kind="stable")
    cuts = np.searchsorted(part_of_j[order], np.arange(len(bounds)))
    del part_of_j
    keys = keys[order]
    del order
    out = transit.open("up")
    return [transit.put(out, f"{r}_{q}", keys=keys[cuts[q] : cuts[q + 1]]) for q in range(len(bounds) - 1)]


def _sizes(upper):
    return [_length(piece, "keys") for piece in upper]


def _put_counted(transit, tmp, n, bounds, r, q, il, jl, co, both):
    """The counted pairs (i, j) of rows r x rows q as two row-sorted pieces: forward (rows i) and mirror.

    ``il`` and ``jl`` are local rows in partitions r and q, sorted by (i, j). Each piece holds
    ``data`` of shape (P, 3), the (global column, c_ij, N_ij) of its entries (int32 when n fits
    int32), and ``ptr``: the entries of local row x are ``ptr[x]:ptr[x + 1]``, columns ascending.
    ``None`` when there are no pairs.
    """
    if il.size == 0:
        return None, None
    r0, r1, q0, q1 = int(bounds[r]), int(bounds[r + 1]), int(bounds[q]), int(bounds[q + 1])
    dtype = np.int32 if n <= np.iinfo(np.int32).max else np.int64
    fdata = np.empty((il.size, 3), dtype=dtype)
    mdata = np.empty((il.size, 3), dtype=dtype)
    fptr = np.zeros(r1 - r0 + 1, dtype=np.int64)
    mptr = np.zeros(q1 - q0 + 1, dtype=np.int64)
    _k.split_pieces_kernel(il, jl, co, both, r0, q0, fptr, fdata, mptr, mdata)
    forward = transit.put(tmp, f"fw_{r}_{q}", data=fdata, ptr=fptr)
    del fdata
    mirror = transit.put(tmp, f"mi_{r}_{q}", data=mdata, ptr=mptr)
    return forward, mirror


def _count_join(locator, transit, n, bounds, r, q, piece, *after):
    """Count the pairs with i in partition r and j in partition q, reading those two row blocks.

    ``after`` are the results of the tasks that must run first (the compacted label blocks r, q).
    """
    arr = _labels_array(locator.open("r"), str(locator))
    r0, r1, q0, q1 = int(bounds[r]), int(bounds[r + 1]), int(bounds[q]), int(bounds[q + 1])
    if transit.locator is None:
        la = _compact_rows(arr, r0, r1)
        lb = la if q == r else _compact_rows(arr, q0, q1)
    else:  # the compact copies written by _compact_partition
        tmp = transit.open("lab")
        la = np.asarray(tmp[str(r)][:])
        lb = la if q == r else np.asarray(tmp[str(q)][:])
    la, lb = _common_dtype(la, lb)
    keys = _get(transit.open("up"), piece, "keys")
    il = keys // n - r0
    jl = keys % n - q0
    del keys
    co = np.empty(il.size, dtype=np.int32)
    both = np.empty(il.size, dtype=np.int32)
    _k.count_pairs_kernel(la, lb, il, jl, co, both)
    del la, lb
    return _put_counted(transit, transit.open("cnt"), n, bounds, r, q, il, jl, co, both)


def _count_rows(locator, transit, n, bounds, r, upper):
    """Count all pairs owned by partition r, reading the span of rows they touch.

    ``upper`` are its pieces (r, q) for q = r, r + 1, ...; returns their (forward, mirror) pieces.
    """
    arr = _labels_array(locator.open("r"), str(locator))
    tmp = transit.open("up")
    parts = [_get(tmp, piece, "keys") for piece in upper]
    lengths = [len(k) for k in parts]
    keys = np.concatenate(parts)
    del parts
    r0, r1 = int(bounds[r]), int(bounds[r + 1])
    hi = max(int((keys % n).max()) + 1 if keys.size else 0, r1)
    lab = _compact_rows(arr, r0, hi)
    i = keys // n
    j = keys % n
    del keys
    co = np.empty(i.size, dtype=np.int32)
    both = np.empty(i.size, dtype=np.int32)
    _k.count_pairs_kernel(lab, lab, i - r0, j - r0, co, both)
    del lab
    out = []
    start = 0
    cnt = transit.open("cnt")
    for q, length in enumerate(lengths, start=r):
        s = slice(start, start + length)
        il = i[s] - r0
        jl = j[s] - int(bounds[q])
        out.append(_put_counted(transit, cnt, n, bounds, r, q, il, jl, co[s], both[s]))
        start += length
    return out


def _pick(seq, k):
    return seq[k]


def _write_indptr(locator, transit, n, bounds, r, offset, nnz_chunk, *pieces):
    """Write ``indptr`` of partition r from the row counts of its pieces; locate the nnz chunk starts.

    Returns the nnz chunk starts ``c`` in this partition's entries and, for each, the last row
    starting at or before it and the first row starting at or after it.
    """
    r0, r1 = int(bounds[r]), int(bounds[r + 1])
    counts = np.zeros(r1 - r0, dtype=np.int64)
    tmp = transit.open("cnt")
    for piece in pieces:
        if piece is not None:
            counts += np.diff(_get(tmp, piece, "ptr"))
    indptr = np.empty(r1 - r0 + 1, dtype=np.int64)
    indptr[0] = offset
    np.cumsum(counts, out=indptr[1:])
    indptr[1:] += offset
    pg = locator.open("r+")[PAIRS_GROUP]
    stop = r1 + 1 if r1 == n else r1
    pg["indptr"][r0:stop] = indptr[: stop - r0]
    starts = np.arange(-(-offset // nnz_chunk) * nnz_chunk, indptr[-1], nnz_chunk, dtype=np.int64)
    right = r0 + np.searchsorted(indptr, starts, side="right") - 1
    left = r0 + np.searchsorted(indptr, starts, side="left")
    return starts, right, left


def _assemble_range(locator, transit, bounds, e0, e1, ra, rb, row_pieces):
    """Write entries ``e0:e1`` (whole nnz chunks) of the CSR: rows ``ra .. rb - 1`` from their pieces.

    ``row_pieces[r]`` are the pieces of partition r in column order: mirrors of (q, r) for
    q <= r, then forwards of (r, q) for q >= r.
    """
    pg = locator.open("r+")[PAIRS_GROUP]
    indptr = np.asarray(pg["indptr"][ra : rb + 1], dtype=np.int64)
    base = int(indptr[0])
    size = int(indptr[-1]) - base
    cols = np.empty(size, dtype=np.int64)
    co = np.empty(size, dtype=np.int32)
    both = np.empty(size, dtype=np.int32)
    fill = indptr[:-1] - base
    tmp = transit.open("cnt")
    for r, pieces in sorted(row_pieces.items()):
        r0, r1 = int(bounds[r]), int(bounds[r + 1])
        a, b = max(ra, r0), min(rb, r1)
        for piece in pieces:
            if piece is None:
                continue
            ptr = np.asarray(_get(tmp, piece, "ptr", a - r0, b - r0 + 1), dtype=np.int64)
            s0, s1 = int(ptr[0]), int(ptr[-1])
            if s1 > s0:
                data = _get(tmp, piece, "data", s0, s1)
                _k.scatter_rows_kernel(ptr - s0, data, fill[a - ra : b - ra], cols, co, both)
    if not np.array_equal(fill, indptr[1:] - base):
        raise RuntimeError(f"coassoc: rows {ra}..{rb - 1} did not receive their {size} entries")
    sl = slice(e0 - base, e1 - base)
    pg["indices"][e0:e1] = cols[sl]
    pg["co"][e0:e1] = co[sl]
    pg["both"][e0:e1] = both[sl]
    return e1 - e0


def _compact_partition(locator, transit, bounds, r):
    """Validate the label rows of partition r and spill them compacted (int8 when ids allow) for the joins."""
    arr = _labels_array(locator.open("r"), str(locator))
    lab = _compact_rows(arr, int(bounds[r]), int(bounds[r + 1]))
    transit.open("lab").create_array(
        str(r),
        data=lab,
        chunks=(max(1, min(lab.shape[0], _TMP_CHUNK // 4)), lab.shape[1]),
        compressors=_tmp_codec(),
        overwrite=True,
    )
    return lab.dtype.str


def _check_label_block(locator, r0, r1, c0, c1):
    """Validate label rows ``r0:r1``, columns ``c0:c1`` (values >= -1 that fit int32)."""
    arr = _labels_array(locator.open("r"), str(locator))
    _checked_rows(arr, r0, r1, c0, c1)
    return r1 - r0


def _update_range(locator, e0, e1, row0, row1, c0, c1):
    """Add the counts of label columns ``c0:c1`` to stored entries ``e0:e1`` (whole nnz chunks).

    The entries lie in rows ``row0:row1``; the task reads their ``indptr`` from the store itself.
    """
    group = locator.open("r+")
    pg = group[PAIRS_GROUP]
    indptr = np.asarray(pg["indptr"][row0 : row1 + 1], dtype=np.int64)
    cols = np.asarray(pg["indices"][e0:e1], dtype=np.int64)
    rows = row0 + np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    rows = rows[e0 - indptr[0] : e1 - indptr[0]]
    if cols.size == 0:
        return 0
    lo = int(min(rows[0], cols.min()))
    hi = int(max(rows[-1], cols.max())) + 1
    lab = _checked_rows(_labels_array(group, str(locator)), lo, hi, c0, c1)
    co = np.empty(cols.size, dtype=np.int32)
    both = np.empty(cols.size, dtype=np.int32)
    _k.count_pairs_kernel(lab, lab, rows - lo, cols - lo, co, both)
    pg["co"][e0:e1] = np.asarray(pg["co"][e0:e1], dtype=np.int32) + co
    pg["both"][e0:e1] = np.asarray(pg["both"][e0:e1], dtype=np.int32) + both
    return cols.size
