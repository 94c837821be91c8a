"""The ``pairs/`` group of the run store: a symmetric CSR of c_ij and N_ij in zarr.

Both (i, j) and (j, i) are stored, as ``indptr`` (n + 1, int64, chunked by rows), ``indices`` (int64), ``co``
and ``both`` (int32), the last three chunked along nnz, in shuffled LZ4. The group's attributes record the
strategy, its parameters, the seed, ``n``, ``n_clusterings`` (the number of ``labels`` columns counted,
columns ``0 .. n_clusterings - 1``) and ``complete``, written last. Readers: :func:`read_pairs` (all in
memory, as :class:`~ensemble_dask.coassoc.counting.PairCounts`) and :func:`iter_pair_blocks` (row blocks).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass

import numpy as np

from .._validation import InputError, check_int
from .counting import PairCounts, index_dtype

__all__ = ["PairBlock", "write_pairs", "read_pairs", "iter_pair_blocks"]

logger = logging.getLogger(__name__)

DEFAULT_NNZ_CHUNK = 1 << 20
PAIRS_GROUP = "pairs"
TMP_GROUP = "_tmp"
_READ_BYTES = 32 << 20  # int32 label bytes read at once when compacting a row block


def _open_url(url, storage_options=None, mode="a"):
    """Open the run store at a URL the way :class:`~ensemble_dask.io.store.RunStore` does."""
    import zarr

    from ..io.urls import GROUP_FORMAT, make_zarr_store

    try:
        store = make_zarr_store(url, storage_options, read_only=mode == "r")
        return zarr.open_group(store=store, mode=mode, **GROUP_FORMAT)
    except FileNotFoundError as exc:
        raise InputError(f"no run store at {url!r}") from exc


def _open_group(group_or_url, storage_options=None, mode="a"):
    """A zarr group from a group, a :class:`~ensemble_dask.io.store.RunStore` or a URL."""
    import zarr

    if isinstance(group_or_url, zarr.Group):
        return group_or_url
    if hasattr(group_or_url, "group") and hasattr(group_or_url, "url"):  # a RunStore
        return group_or_url.group
    if not isinstance(group_or_url, str):
        raise InputError(f"expected a zarr group, a RunStore or a store URL; got {group_or_url!r}")
    return _open_url(group_or_url, storage_options, mode)


@dataclass(frozen=True)
class _Locator:
    """What a task needs to reopen the run store: a URL (or a store object), a path, fsspec options."""

    store: object
    path: str
    storage_options: dict | None

    def __dask_tokenize__(self):
        where = self.store if isinstance(self.store, str) else f"{type(self.store).__name__}:{self.store}"
        return ("ensemble_dask.coassoc._Locator", where, self.path, repr(self.storage_options))

    def open(self, mode="r+"):
        import zarr

        if isinstance(self.store, str):
            return _open_url(self.store, self.storage_options, mode)
        return zarr.open_group(store=self.store, mode=mode, path=self.path or None)

    def __str__(self):
        return self.store if isinstance(self.store, str) else str(self.store)


def _locator(group_or_url, storage_options):
    import zarr

    if isinstance(group_or_url, zarr.Group):
        return _Locator(group_or_url.store, group_or_url.path, None)
    if hasattr(group_or_url, "group") and hasattr(group_or_url, "url"):  # a RunStore
        return _Locator(group_or_url.url, "", dict(group_or_url.storage_options) or None)
    return _Locator(group_or_url, "", storage_options or None)


def _labels_array(group, where):
    if "labels" not in group or not hasattr(group["labels"], "shape"):
        raise InputError(f"the run store {where!r} has no 'labels' array (run the generate stage first)")
    arr = group["labels"]
    if len(arr.shape) != 2 or arr.shape[0] < 2 or arr.shape[1] < 1:
        raise InputError(f"'labels' must be an n x N array with n >= 2, N >= 1; got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise InputError(f"'labels' must hold integer cluster ids; got dtype {arr.dtype}")
    return arr


def _checked_rows(arr, r0, r1, c0=0, c1=None):
    """Label rows ``r0:r1`` (columns ``c0:c1``) as int32, rejecting values below -1."""
    block = np.asarray(arr[r0:r1, c0:c1])
    if block.size and block.min() < -1:
        r, c = np.argwhere(block < -1)[0]
        raise InputError(
            f"labels values must be >= -1 (-1 marks a missing label); got {block[r, c]} "
            f"at row {r0 + r}, column {c0 + c}"
        )
    if block.size and block.max() > np.iinfo(np.int32).max:
        raise InputError(f"labels values must fit in int32; got {block.max()}")
    return np.ascontiguousarray(block, dtype=np.int32)


def _compact_rows(arr, r0, r1):
    """Label rows ``r0:r1`` validated and held in the smallest of int8, int16, int32 that fits them.

    Read by groups of columns, so that no more than about ``_READ_BYTES`` of int32 is held
    besides the result (and reading by whole columns avoids a strided copy of every chunk).
    """
    n_cols = int(arr.shape[1])
    step = int(arr.chunks[1])
    width = max(step, (_READ_BYTES // (4 * max(1, r1 - r0))) // step * step)
    out = np.empty((r1 - r0, n_cols), dtype=np.int8)
    for c0 in range(0, n_cols, width):
        c1 = min(c0 + width, n_cols)
        block = _checked_rows(arr, r0, r1, c0, c1)
        top = int(block.max(initial=-1))
        if top > np.iinfo(out.dtype).max:
            out = out.astype(np.int16 if top <= np.iinfo(np.int16).max else np.int32)
        out[:, c0:c1] = block
    return out


def _common_dtype(a, b):
    """The two label blocks in one dtype (the wider of theirs), so the kernel sees one signature."""
    if a.dtype == b.dtype:
        return a, b
    wide = np.promote_types(a.dtype, b.dtype)
    return a.astype(wide), b.astype(wide)


def _create_pairs_group(group, n, nnz, *, row_chunk, nnz_chunk, attrs):
    """(Re)create ``pairs/`` with empty arrays and ``complete=False`` attributes."""
    return _create_pairs_arrays(
        _new_pairs_group(group, attrs), n, nnz, row_chunk=row_chunk, nnz_chunk=nnz_chunk
    )


def _new_pairs_group(group, attrs):
    """(Re)create an empty ``pairs/`` group with ``complete=False`` attributes."""
    if PAIRS_GROUP in group:
        del group[PAIRS_GROUP]
    pg = group.create_group(PAIRS_GROUP)
    pg.attrs.put({**attrs, "complete": False})
    return pg


def _create_pairs_arrays(pg, n, nnz, *, row_chunk, nnz_chunk):
    """The empty CSR arrays of ``pairs/``."""
    codec = _pairs_codec()
    pg.create_array(
        "indptr", shape=(n + 1,), chunks=(max(1, row_chunk),), dtype="int64", fill_value=0, compressors=codec
    )
    c = max(1, min(nnz_chunk, nnz)) if nnz else 1
    for name, dtype in (("indices", index_dtype(n)), ("co", "int32"), ("both", "int32")):
        pg.create_array(name, shape=(nnz,), chunks=(c,), dtype=dtype, fill_value=0, compressors=codec)
    return pg


def _pairs_codec():
    """The codec of the ``pairs/`` arrays: byte-shuffled LZ4 (Blosc).

    On stored pairs it compresses about as well as zarr's default Zstandard (better on
    ``indices``, a little worse on the small counts) and writes and reads faster.
    """
    from zarr.codecs import BloscCodec

    return BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")


def _finish(pg, summary):
    pg.attrs.update({**summary, "complete": True})


def write_pairs(group_or_url, pair_counts, *, storage_options=None, nnz_chunk=DEFAULT_NNZ_CHUNK, attrs=None):
    """Write in-memory counts to ``pairs/`` of a run store (replacing what is there).

    Parameters
    ----------
    group_or_url : zarr.Group or str
        The run store.
    pair_counts : PairCounts
    storage_options : dict, default=None
        fsspec options when ``group_or_url`` is a URL.
    nnz_chunk : int, default=1048576
        Chunk length of ``indices``, ``co`` and ``both``.
    attrs : dict, default=None
        Extra attributes (e.g. the strategy record of :func:`coassociation`).

    Returns
    -------
    dict
        The attributes written.

    Examples
    --------
    >>> from ensemble_dask.coassoc import coassociation, read_pairs, write_pairs
    >>> import zarr
    >>> g = zarr.open_group(store="memory://doc-write-pairs", mode="w")
    >>> pc = coassociation([[0, 0], [0, 1], [1, 1]], strategy="full", seed=0)
    >>> write_pairs(g, pc)["nnz"]
    6
    >>> read_pairs(g).co.tolist()
    [1, 0, 1, 1, 0, 1]
    """
    group = _open_group(group_or_url, storage_options)
    nnz_chunk = check_int(nnz_chunk, "nnz_chunk", min_value=1)
    pc = pair_counts
    summary = {**(attrs or {}), **_summary(pc.n, pc.nnz, pc.n_clusterings)}
    pg = _create_pairs_group(group, pc.n, pc.nnz, row_chunk=1 << 16, nnz_chunk=nnz_chunk, attrs=summary)
    pg["indptr"][:] = pc.indptr
    if pc.nnz:
        pg["indices"][:] = pc.indices
        pg["co"][:] = pc.co
        pg["both"][:] = pc.both
    _finish(pg, summary)
    return dict(pg.attrs)


def _summary(n, nnz, n_clusterings):
    return {
        "format": "symmetric-csr",
        "n": int(n),
        "nnz": int(nnz),
        "n_pairs": int(nnz) // 2,
        "n_clusterings": int(n_clusterings),
    }


def _pairs_group(group_or_url, storage_options):
    group = _open_group(group_or_url, storage_options, mode="r")
    if PAIRS_GROUP not in group:
        raise InputError(f"the run store {group_or_url!r} has no '{PAIRS_GROUP}/' group (run coassoc first)")
    pg = group[PAIRS_GROUP]
    if not pg.attrs.get("complete", False):
        raise InputError(f"'{PAIRS_GROUP}/' in {group_or_url!r} is not complete (an interrupted write?)")
    return pg


def read_pairs(group_or_url, *, storage_options=None):
    """Read ``pairs/`` of a run store into memory.

    Parameters
    ----------
    group_or_url : zarr.Group or str
    storage_options : dict, default=None

    Returns
    -------
    PairCounts

    Examples
    --------
    >>> from ensemble_dask.coassoc import coassociation, read_pairs, write_pairs
    >>> import zarr
    >>> g = zarr.open_group(store="memory://doc-read-pairs", mode="w")
    >>> _ = write_pairs(g, coassociation([[0], [0], [1]], strategy="full", seed=0))
    >>> read_pairs(g).to_dense()[0].tolist()
    [[0, 1, 0], [1, 0, 0], [0, 0, 0]]
    """
    pg = _pairs_group(group_or_url, storage_options)
    indptr = _read_as(pg["indptr"], np.int64)
    return PairCounts(
        indptr,
        _read_as(pg["indices"], index_dtype(len(indptr) - 1)),
        _read_as(pg["co"], np.int32),
        _read_as(pg["both"], np.int32),
        int(pg.attrs["n_clusterings"]),
    )


def read_pair_fractions(group_or_url, *, storage_options=None, block=1 << 22):
    """``(n, indptr, indices, x, w)`` of ``pairs/``: ``x = c_ij / N_ij`` (float64) and ``w = N_ij`` (int32,
    the counts as the pair methods take them as weights; both 0 where ``N_ij = 0``) of every stored entry,
    computed a few chunks at a time so that the int32 counts are never held whole next to them.

    Raises
    ------
    InputError
        When an entry's counts are not ``0 <= c_ij <= N_ij`` (naming the entry and both counts).
    """
    pg = _pairs_group(group_or_url, storage_options)
    indptr = _read_as(pg["indptr"], np.int64)
    n = len(indptr) - 1
    indices = _read_as(pg["indices"], index_dtype(n))
    co, both = pg["co"], pg["both"]
    x = np.empty(co.shape[0])
    w = np.empty(co.shape[0], dtype=np.int32)
    step = max(1, block // co.chunks[0]) * co.chunks[0]
    for a in range(0, co.shape[0], step):
        c = np.asarray(co[a : a + step])
        b = np.asarray(both[a : a + step])
        bad = (c < 0) | (c > b)
        if bad.any():
            e = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"'{PAIRS_GROUP}/' in {group_or_url!r}: entry {a + e} has c_ij={c[e]} and N_ij={b[e]}; "
                "the counts must satisfy 0 <= c_ij <= N_ij"
            )
        w[a : a + len(b)] = b
        np.divide(c, b, out=x[a : a + len(b)], where=b > 0)
        x[a : a + len(b)][b == 0] = 0.0
    return n, indptr, indices, x, w


def _read_as(arr, dtype, block=1 << 23):
    """A 1-d zarr array read whole as ``dtype``, a few chunks at a time: a store written with int64
    point indices (until they are int32) is never held in memory as int64."""
    if arr.dtype == dtype:
        return np.asarray(arr[:])
    out = np.empty(arr.shape, dtype=dtype)
    step = max(1, block // arr.chunks[0]) * arr.chunks[0]
    for a in range(0, arr.shape[0], step):
        out[a : a + step] = arr[a : a + step]
    return out


@dataclass(frozen=True)
class PairBlock:
    """Rows ``row_start .. row_stop - 1`` of the stored symmetric CSR.

    Attributes
    ----------
    row_start, row_stop : int
    indptr : ndarray of shape (row_stop - row_start + 1,), int64
        Offsets into this block's ``indices`` (starting at 0).
    indices : ndarray, int64
        Global column of each entry.
    co, both : ndarray, int32
    n_clusterings : int
    """

    row_start: int
    row_stop: int
    indptr: np.ndarray
    indices: np.ndarray
    co: np.ndarray
    both: np.ndarray
    n_clusterings: int

    def rows(self):
        """Global row of each entry."""
        return np.repeat(np.arange(self.row_start, self.row_stop, dtype=np.int64), np.diff(self.indptr))


def iter_pair_blocks(group_or_url, *, rows_per_block=1 << 16, storage_options=None):
    """Stream ``pairs/`` by blocks of rows, never holding more than one block.

    Parameters
    ----------
    group_or_url : zarr.Group or str
    rows_per_block : int, default=65536
    storage_options : dict, default=None

    Yields
    ------
    PairBlock

    Examples
    --------
    >>> from ensemble_dask.coassoc import coassociation, iter_pair_blocks, write_pairs
    >>> import zarr
    >>> g = zarr.open_group(store="memory://doc-iter-pairs", mode="w")
    >>> _ = write_pairs(g, coassociation([[0], [0], [0]], strategy="full", seed=0))
    >>> [(b.row_start, b.indices.tolist()) for b in iter_pair_blocks(g, rows_per_block=2)]
    [(0, [1, 2, 0, 2]), (2, [0, 1])]
    """
    rows_per_block = check_int(rows_per_block, "rows_per_block", min_value=1)
    pg = _pairs_group(group_or_url, storage_options)
    n = int(pg.attrs["n"])
    n_clust = int(pg.attrs["n_clusterings"])
    for r0 in range(0, n, rows_per_block):
        r1 = min(r0 + rows_per_block, n)
        ptr = np.asarray(pg["indptr"][r0 : r1 + 1], dtype=np.int64)
        e0, e1 = int(ptr[0]), int(ptr[-1])
        yield PairBlock(
            r0,
            r1,
            ptr - e0,
            np.asarray(pg["indices"][e0:e1], dtype=np.int64),
            np.asarray(pg["co"][e0:e1], dtype=np.int32),
            np.asarray(pg["both"][e0:e1], dtype=np.int32),
            n_clust,
        )


class StoredPairs:
    """The ``pairs/`` group of a run store, read a block of rows at a time (out of core).

    The input of the pair methods' out-of-core fit (:class:`~ensemble_dask.consensus.PCC` and
    :class:`~ensemble_dask.consensus.PPC` given a ``StoredPairs``), which holds every point's memberships
    but the pairs of one block of rows at a time, read again on each sweep over the blocks.

    Parameters
    ----------
    group_or_url : zarr.Group or str
        The run store (or its URL).
    entries_per_block : int, default=4194304
        About this many stored entries a block (whole rows; a row of more entries is a block of its own).
    storage_options : dict, default=None
    local_copy : {"auto", True, False}, default="auto"
        Whether each block read is also kept in a temporary directory on local disk, which later sweeps
        read instead of the store (``c_ij`` and ``N_ij`` in the narrowest unsigned type that holds
        ``n_clusterings``: 6 bytes an entry below 256 clusterings). ``auto`` keeps a copy when the store is
        remote (object storage, not a local path or ``memory://``): a fit sweeps the blocks several times,
        and each sweep would fetch every block again. The directory is removed by :meth:`close`, at the
        end of a ``with`` block, or when the object is garbage-collected.
    local_dir : str, default=None
        Where the local copy's directory is made (default: the system's temporary directory). A block
        that cannot be written there (a full disk) is read from the store each time instead.

    Attributes
    ----------
    n, nnz, n_clusterings : int
    bounds : list of (int, int)
        ``(row0, row1)`` of each block, in row order, covering ``0 .. n``.
    local_copy : str or None
        The directory of the local copy, or None when the blocks are read from the store every time.

    Notes
    -----
    Not thread-safe: one fit reads it at a time.

    Examples
    --------
    >>> import zarr
    >>> from ensemble_dask.coassoc import coassociation, write_pairs
    >>> g = zarr.open_group(store="memory://doc-stored-pairs", mode="w")
    >>> _ = write_pairs(g, coassociation([[0], [0], [1]], strategy="full", seed=0))
    >>> pairs = StoredPairs(g, entries_per_block=2)
    >>> pairs.bounds, pairs.read(1, 3)[1].tolist()
    ([(0, 1), (1, 2), (2, 3)], [0, 2, 0, 1])
    """

    def __init__(
        self,
        group_or_url,
        *,
        entries_per_block=1 << 22,
        storage_options=None,
        local_copy="auto",
        local_dir=None,
    ):
        per = check_int(entries_per_block, "entries_per_block", min_value=1)
        if not (local_copy == "auto" or isinstance(local_copy, (bool, np.bool_))):
            raise InputError(f"StoredPairs: local_copy must be 'auto', True or False; got {local_copy!r}")
        self._pg = _pairs_group(group_or_url, storage_options)
        self.indptr = _read_as(self._pg["indptr"], np.int64)
        self.n = len(self.indptr) - 1
        self.nnz = int(self.indptr[-1])
        self.n_clusterings = int(self._pg.attrs["n_clusterings"])
        cuts = np.searchsorted(self.indptr, np.arange(per, self.nnz, per), side="right") - 1
        edges = np.unique(np.concatenate([[0], np.clip(cuts, 1, max(self.n - 1, 1)), [self.n]]))
        self.bounds = [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]
        if local_copy == "auto":
            local_copy = _is_remote(self._pg.store)
        self.local_copy = (
            tempfile.mkdtemp(prefix="ensemble-dask-pairs-", dir=local_dir) if local_copy else None
        )
        self._copied = set()
        self._cleanup = None
        if self.local_copy is not None:
            self._cleanup = weakref.finalize(self, shutil.rmtree, self.local_copy, True)

    def read(self, row0, row1):
        """``(indptr, indices, co, both)`` of rows ``row0 .. row1 - 1`` (``indptr`` from 0; ``indices``
        global, int32 below 2**31 points; the counts int32)."""
        e0, e1 = int(self.indptr[row0]), int(self.indptr[row1])
        indptr = self.indptr[row0 : row1 + 1] - e0
        name = f"{row0}-{row1}"
        if name in self._copied:
            path = os.path.join(self.local_copy, name)
            return (
                indptr,
                np.load(f"{path}.indices.npy"),
                np.load(f"{path}.co.npy").astype(np.int32),
                np.load(f"{path}.both.npy").astype(np.int32),
            )
        pg = self._pg
        indices = np.asarray(pg["indices"][e0:e1]).astype(index_dtype(self.n), copy=False)
        co = np.asarray(pg["co"][e0:e1], dtype=np.int32)
        both = np.asarray(pg["both"][e0:e1], dtype=np.int32)
        if self.local_copy is not None:
            self._keep(name, indices, co, both)
        return indptr, indices, co, both

    def _keep(self, name, indices, co, both):
        """Write a block's copy; a full disk (or any OSError) leaves that block to be read from the store."""
        path = os.path.join(self.local_copy, name)
        # the narrowest type of the counts as stored (n_clusterings bounds them in a valid store)
        narrow = np.min_scalar_type(
            max(self.n_clusterings, int(co.max(initial=0)), int(both.max(initial=0)), 1)
        )
        try:
            np.save(f"{path}.indices.npy", indices)
            np.save(f"{path}.co.npy", co.astype(narrow))
            np.save(f"{path}.both.npy", both.astype(narrow))
        except OSError as exc:
            logger.warning(
                "StoredPairs: no local copy of rows %s (%s): they are read from the store", name, exc
            )
            for part in ("indices", "co", "both"):
                with contextlib.suppress(OSError):
                    os.remove(f"{path}.{part}.npy")
            return
        self._copied.add(name)

    def close(self):
        """Remove the local copy (if any); later reads go to the store again."""
        if self._cleanup is not None:
            self._cleanup()
        self._copied.clear()
        self.local_copy = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _is_remote(store):
    """Whether a zarr store reads over a network (object storage, HTTP): not a local path, not in memory."""
    from zarr.storage import FsspecStore

    if not isinstance(store, FsspecStore):
        return False  # LocalStore, MemoryStore, ...
    protocol = store.fs.protocol
    protocols = {protocol} if isinstance(protocol, str) else set(protocol)
    return not protocols & {"file", "local", "memory"}
