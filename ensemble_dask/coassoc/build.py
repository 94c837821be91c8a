"""The sparse co-association store: pair sampling, exact counting, symmetric CSR in zarr.

For a sparse set P of point pairs (papers/003, Sects. 3 and 5.4) this module computes
c_ij (number of base clusterings putting i and j in the same cluster) and N_ij (number of
clusterings whose subsample holds both); ``-1`` entries of ``labels`` count towards neither.

Layers
------
* pair sampling (:func:`sample_pairs`): four seeded strategies, ``full``, ``uniform``,
  ``per-point`` and ``cocluster``. Randomness is drawn per fixed-size *seed block* of rows
  (``block_size``, a parameter of the strategy) from ``SeedSequence(seed, spawn_key=(b,))``,
  the b-th child of ``SeedSequence(seed).spawn``; so the same seed gives the same pairs
  whatever the number of Dask partitions or workers.
* counting (:func:`count_pairs`, :func:`coassociation`): NumPy + numba kernels, no Dask.
* the store: group ``pairs/`` of the run store holds the symmetric CSR (both (i, j) and
  (j, i)) as ``indptr`` (n + 1, int64, chunked by rows), ``indices`` (int64), ``co`` and
  ``both`` (int32), the last three chunked along nnz. Its attributes record the strategy, its
  parameters, the seed, ``n``, ``n_clusterings`` (the number of ``labels`` columns counted,
  columns ``0 .. n_clusterings - 1``) and ``complete``, written last.
* the Dask layer (:func:`build_coassociation`, :func:`update_coassociation`): it only
  decides which in-memory function runs on which rows. Tasks open the run store themselves
  (URL + storage_options) and read the label rows they need; only pairs and counts travel
  between tasks, in task results or, for large builds (``spill``), through temporary arrays
  under ``pairs/_tmp/`` so that no worker holds more than the pieces of its current task.
  The build runs in four rounds: draw and deduplicate pairs by row partition; count each
  piece (rows of partition r x rows of partition q) into row-sorted forward and mirrored
  pieces; write ``indptr``; and assemble, each task owning a run of whole nnz chunks.

Examples
--------
>>> import numpy as np
>>> labels = np.array([[0, 1], [0, -1], [1, 1], [1, 0]])
>>> pc = coassociation(labels, strategy="full", seed=0)
>>> pc.to_dense()[0].tolist()
[[0, 1, 1, 0], [1, 0, 0, 0], [1, 0, 0, 1], [0, 0, 1, 0]]
"""

from __future__ import annotations

import logging
import math
import numbers
import time
from dataclasses import dataclass

import numpy as np

from .._validation import InputError, check_choice, check_int, check_labels_matrix, check_rate, stage_seed
from . import _kernels as _k
from .counting import PairCounts

__all__ = [
    "STRATEGIES",
    "PairBlock",
    "sample_pairs",
    "count_pairs",
    "coassociation",
    "write_pairs",
    "read_pairs",
    "iter_pair_blocks",
    "build_coassociation",
    "update_coassociation",
]

logger = logging.getLogger(__name__)

STRATEGIES = ("full", "uniform", "per-point", "cocluster")
_STRATEGY_PARAMS = {
    "full": {"max_n": 5000},
    "uniform": {"p": 0.00025},
    "per-point": {"l": 30},
    "cocluster": {"l": 30, "fraction": 0.5},
}
DEFAULT_BLOCK_SIZE = 4096
DEFAULT_NNZ_CHUNK = 1 << 20
_AUTO_JOIN_BYTES = 512 << 20  # labels larger than this are counted by row-block join
_LABEL_GEN_TASKS = 2  # drawing tasks of the strategies that read the whole labels matrix
_AUTO_SPILL_BYTES = 256 << 20  # pairs in transit larger than this go through pairs/_tmp
_TRANSIT_BYTES_PER_PAIR = 16
_TMP_CHUNK = 1 << 18  # chunk length of the temporary arrays
_ASSEMBLE_BYTES = 64 << 20  # at most about this many output bytes per assembling task
_CHECK_BYTES = 64 << 20  # label bytes per validation task of update_coassociation
_READ_BYTES = 32 << 20  # int32 label bytes read at once when compacting a row block
PAIRS_GROUP = "pairs"
TMP_GROUP = "_tmp"


# --------------------------------------------------------------------------- pair sampling


@dataclass(frozen=True)
class _Sampler:
    """A validated strategy: which pairs of ``n`` points, drawn from ``seed`` per seed block."""

    strategy: str
    n: int
    seed: int
    block_size: int
    params: dict

    @property
    def n_blocks(self) -> int:
        return -(-self.n // self.block_size)

    @property
    def row_local(self) -> bool:
        """Whether every pair drawn by a seed block has its smaller point in that block."""
        return self.strategy in ("full", "uniform")

    @property
    def needs_labels(self) -> bool:
        return self.strategy == "cocluster"

    def rng(self, b):
        return np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(b,)))

    def block_keys(self, b, cluster_index=None, labels=None):
        """Pair keys ``i * n + j`` (i < j) drawn by seed block ``b``.

        For ``full`` and ``uniform`` they are sorted and unique; for the other strategies they
        may repeat (deduplicate the union over blocks).
        """
        n = self.n
        r0 = b * self.block_size
        r1 = min(r0 + self.block_size, n)
        if self.strategy == "full":
            return _triangle_keys(n, r0, r1, np.arange(_triangle_len(n, r0, r1), dtype=np.int64))
        if self.strategy == "uniform":
            return _triangle_keys(
                n, r0, r1, _bernoulli_positions(self.rng(b), _triangle_len(n, r0, r1), self.params["p"])
            )
        l = self.params["l"]
        rng = self.rng(b)
        if self.strategy == "per-point":
            i = np.repeat(np.arange(r0, r1, dtype=np.int64), l)
            j = rng.integers(0, n - 1, size=i.size, dtype=np.int64)
            j += j >= i
            return np.minimum(i, j) * n + np.maximum(i, j)
        members, start = cluster_index
        n_co = int(math.floor(self.params["fraction"] * l + 0.5))
        keys = np.empty((r1 - r0) * l, dtype=np.int64)
        state = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, size=1, dtype=np.int64)
        _k.cocluster_draws_kernel(labels[r0:r1], r0, n, members, start, n_co, l - n_co, state, keys)
        return keys

    def attrs(self):
        return {
            "strategy": self.strategy,
            "params": dict(self.params),
            "seed": self.seed,
            "block_size": self.block_size,
        }


def _triangle_len(n, r0, r1):
    """Number of pairs (i, j), r0 <= i < r1, i < j < n."""
    return (r1 - r0) * (n - 1) - (r0 + r1 - 1) * (r1 - r0) // 2


def _triangle_keys(n, r0, r1, pos):
    """Map sorted positions in the row-major upper triangle of rows r0..r1-1 to keys i*n+j."""
    rows = np.arange(r0, r1, dtype=np.int64)
    ends = np.cumsum(n - 1 - rows)
    r = np.searchsorted(ends, pos, side="right")
    starts = ends - (n - 1 - rows)
    i = rows[r]
    j = i + 1 + (pos - starts[r])
    return i * n + j


def _bernoulli_positions(rng, m, p):
    """Sorted positions in ``[0, m)``, each kept independently with probability p (geometric skips)."""
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    out = []
    last = -1
    while True:
        expect = (m - 1 - last) * p
        size = int(expect + 6.0 * math.sqrt(expect) + 64)
        pos = last + np.cumsum(rng.geometric(p, size=size), dtype=np.int64)
        if pos[-1] >= m:
            out.append(pos[: np.searchsorted(pos, m)])
            break
        out.append(pos)
        last = int(pos[-1])
    return np.concatenate(out)


def _resolve_seed(seed):
    if seed is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InputError(f"The 'seed' parameter must be a non-negative integer or None; got {seed!r}")
    return int(seed)


def _make_sampler(strategy, n, seed, block_size, params):
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    n = check_int(n, "n", min_value=2)
    block_size = check_int(block_size, "block_size", min_value=1)
    unknown = set(params) - set(_STRATEGY_PARAMS[strategy])
    if unknown:
        raise InputError(
            f"Unknown parameter(s) {sorted(unknown)} for strategy {strategy!r}; "
            f"it takes {sorted(_STRATEGY_PARAMS[strategy])}"
        )
    resolved = {**_STRATEGY_PARAMS[strategy], **params}
    if strategy == "full":
        resolved["max_n"] = check_int(resolved["max_n"], "max_n", min_value=2)
        if n > resolved["max_n"]:
            raise InputError(
                f"strategy 'full' stores all n*(n-1)/2 pairs and is limited to n <= "
                f"max_n={resolved['max_n']}; got n={n} (raise max_n, or sample with another strategy)"
            )
    if strategy == "uniform":
        resolved["p"] = check_rate(resolved["p"], "p")
    if strategy in ("per-point", "cocluster"):
        resolved["l"] = check_int(resolved["l"], "l", min_value=1)
        if resolved["l"] >= n:
            raise InputError(f"The 'l' parameter must be < n={n}; got l={resolved['l']}")
    if strategy == "cocluster":
        resolved["fraction"] = _check_fraction(resolved["fraction"])
    return _Sampler(strategy, n, _resolve_seed(seed), block_size, resolved)


def _check_fraction(value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (0.0 <= float(value) <= 1.0):
        raise InputError(f"The 'fraction' parameter must be a number in [0, 1]; got {value!r}")
    return float(value)


def _unique(keys):
    """Sorted unique values of an int64 array (a sort and a mask: faster than ``np.unique`` here)."""
    keys = np.sort(keys)
    if keys.size:
        keep = np.empty(keys.size, dtype=bool)
        keep[0] = True
        np.not_equal(keys[1:], keys[:-1], out=keep[1:])
        keys = keys[keep]
    return keys


def _cluster_index(labels):
    n_ids = int(labels.max(initial=-1)) + 1
    return _k.cluster_index_kernel(labels, max(n_ids, 1))


def _sample_keys(sampler, labels=None, blocks=None):
    """Sorted unique pair keys drawn by the given seed blocks (all by default)."""
    blocks = range(sampler.n_blocks) if blocks is None else blocks
    index = _cluster_index(labels) if sampler.needs_labels else None
    parts = [sampler.block_keys(b, index, labels) for b in blocks]
    keys = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return keys if sampler.row_local else _unique(keys)


def sample_pairs(strategy, n, *, seed, labels=None, block_size=DEFAULT_BLOCK_SIZE, **params):
    """Draw a sparse set of unordered point pairs.

    Parameters
    ----------
    strategy : {"full", "uniform", "per-point", "cocluster"}
        ``full``: every pair (refused for ``n > max_n``). ``uniform``: each pair kept
        independently with probability ``p``, drawn by geometric skips over the upper
        triangle, never enumerating the n^2 pairs. ``per-point``: every point draws ``l``
        partners uniformly (with replacement; pairs deduplicated, so a point has about
        ``2 l`` neighbours in the end). ``cocluster``: like ``per-point``, but a share
        ``fraction`` of each point's ``l`` draws is a uniform other member of its cluster in
        a uniformly chosen base clustering that holds it (needs ``labels``).
    n : int
        Number of points.
    seed : int or None
        Root of all randomness; ``None`` draws fresh OS entropy.
    labels : array-like of shape (n, N), default=None
        Base labels; required by ``cocluster`` only.
    block_size : int, default=4096
        Rows per seed block. Changing it changes the pairs; the Dask chunking does not.
    **params
        ``max_n`` (full, default=5000), ``p`` (uniform, in (0, 1], default=0.00025, the
        paper's 0.25 per mille), ``l`` (per-point and cocluster, 1 <= l < n, default=30),
        ``fraction`` (cocluster, in [0, 1], default=0.5).

    Returns
    -------
    i, j : ndarray of shape (P,), int64
        Unique pairs with ``i < j``, sorted by i then j.

    Examples
    --------
    >>> i, j = sample_pairs("full", 3, seed=0)
    >>> i.tolist(), j.tolist()
    ([0, 0, 1], [1, 2, 2])
    >>> i, j = sample_pairs("per-point", 1000, seed=1, l=5)
    >>> bool(np.all(i < j)), 4000 < len(i) <= 5000
    (True, True)
    """
    sampler = _make_sampler(strategy, n, seed, block_size, params)
    if sampler.needs_labels:
        if labels is None:
            raise InputError("strategy 'cocluster' draws partners from base clusters: pass labels")
        labels = check_labels_matrix(labels)
        if labels.shape[0] != sampler.n:
            raise InputError(f"labels has {labels.shape[0]} rows but n={sampler.n}")
    keys = _sample_keys(sampler, labels)
    return keys // sampler.n, keys % sampler.n


# --------------------------------------------------------------------------- counting


def count_pairs(labels, i, j):
    """c_ij and N_ij for the pairs ``(i[p], j[p])``.

    Parameters
    ----------
    labels : array-like of shape (n, N)
        Base-cluster ids, ``-1`` where a point is absent from a clustering.
    i, j : array-like of shape (P,)
        Point indices in ``[0, n)``.

    Returns
    -------
    co, both : ndarray of shape (P,), int32

    Examples
    --------
    >>> co, both = count_pairs([[0, 1], [0, -1], [1, 1]], [0, 0, 1], [1, 2, 2])
    >>> co.tolist(), both.tolist()
    ([1, 1, 0], [1, 2, 1])
    """
    labels = check_labels_matrix(labels)
    i = np.ascontiguousarray(i, dtype=np.int64)
    j = np.ascontiguousarray(j, dtype=np.int64)
    if i.shape != j.shape or i.ndim != 1:
        raise InputError(f"i and j must be 1-d of the same length; got shapes {i.shape} and {j.shape}")
    n = labels.shape[0]
    for name, idx in (("i", i), ("j", j)):
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            bad = idx[(idx < 0) | (idx >= n)][0]
            raise InputError(f"{name} holds point index {bad}, outside [0, n={n})")
    co = np.empty(i.size, dtype=np.int32)
    both = np.empty(i.size, dtype=np.int32)
    _k.count_pairs_kernel(labels, labels, i, j, co, both)
    return co, both


def coassociation(labels, *, strategy, seed, block_size=DEFAULT_BLOCK_SIZE, **params):
    """Sample pairs and count them, in memory (no Dask).

    Parameters
    ----------
    labels : array-like of shape (n, N)
        Base-cluster ids, ``-1`` where a point is absent.
    strategy, seed, block_size, **params
        As in :func:`sample_pairs`.

    Returns
    -------
    PairCounts
        Symmetric counts; equal to what :func:`build_coassociation` stores for the same
        arguments.

    Examples
    --------
    >>> pc = coassociation([[0, 0], [0, 1], [1, 1]], strategy="full", seed=0)
    >>> pc.n_pairs, pc.co.tolist(), pc.both.tolist()
    (3, [1, 0, 1, 1, 0, 1], [2, 2, 2, 2, 2, 2])
    """
    labels = check_labels_matrix(labels)
    i, j = sample_pairs(strategy, labels.shape[0], seed=seed, labels=labels, block_size=block_size, **params)
    co, both = count_pairs(labels, i, j)
    return PairCounts.from_pairs(labels.shape[0], i, j, co, both, labels.shape[1])


# --------------------------------------------------------------------------- the store


def _open_url(url, storage_options=None, mode="a"):
    """Open the run store at a URL the way :class:`~ensemble_dask.io.store.RunStore` does."""
    import zarr

    from ..io.store import make_zarr_store

    try:
        store = make_zarr_store(url, storage_options, read_only=mode == "r")
        return zarr.open_group(store=store, mode=mode)
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
    for name, dtype in (("indices", "int64"), ("co", "int32"), ("both", "int32")):
        pg.create_array(name, shape=(nnz,), chunks=(c,), dtype=dtype, fill_value=0, compressors=codec)
    return pg


def _pairs_codec():
    """The codec of the ``pairs/`` arrays: byte-shuffled LZ4 (Blosc).

    On stored pairs it compresses about as well as zarr's default Zstandard (better on
    ``indices``, a little worse on the small counts) and writes ~10x and reads ~15x faster.
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
    >>> import zarr
    >>> g = zarr.open_group(store="memory://doc-read-pairs", mode="w")
    >>> _ = write_pairs(g, coassociation([[0], [0], [1]], strategy="full", seed=0))
    >>> read_pairs(g).to_dense()[0].tolist()
    [[0, 1, 0], [1, 0, 0], [0, 0, 0]]
    """
    pg = _pairs_group(group_or_url, storage_options)
    return PairCounts(
        np.asarray(pg["indptr"][:], dtype=np.int64),
        np.asarray(pg["indices"][:], dtype=np.int64),
        np.asarray(pg["co"][:], dtype=np.int32),
        np.asarray(pg["both"][:], dtype=np.int32),
        int(pg.attrs["n_clusterings"]),
    )


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


# --------------------------------------------------------------------------- block functions
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
    """Pair keys drawn by the seed blocks ``blocks``, bucketed by partition of their smaller point."""
    labels = None
    index = None
    if sampler.needs_labels:
        arr = _labels_array(locator.open("r"), str(locator))
        labels = _checked_rows(arr, 0, sampler.n)
        index = _cluster_index(labels)
    parts = [sampler.block_keys(b, index, labels) for b in blocks]
    keys = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    del parts, labels, index
    if not sampler.row_local:
        keys = _unique(keys)
    cuts = np.searchsorted(keys, bounds * sampler.n)
    tmp = transit.open("gen")
    return [transit.put(tmp, f"{g}_{r}", keys=keys[cuts[r] : cuts[r + 1]]) for r in range(len(bounds) - 1)]


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


def _update_range(locator, e0, e1, row0, indptr, c0, c1):
    """Add the counts of label columns ``c0:c1`` to stored entries ``e0:e1`` (whole nnz chunks)."""
    group = locator.open("r+")
    pg = group[PAIRS_GROUP]
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


# --------------------------------------------------------------------------- the Dask layer


def _resolve_scheduler(client_or_scheduler):
    """A value for ``dask.compute(scheduler=...)``; a ``tcp://`` address connects a Client."""
    if isinstance(client_or_scheduler, str) and "://" in client_or_scheduler:
        from distributed import Client

        return Client(client_or_scheduler), True
    return client_or_scheduler, False


def _partition_bounds(n, block_size, row_block):
    """Partition boundaries: runs of whole seed blocks of about ``row_block`` rows."""
    if row_block is None:
        row_block = max(block_size, min(1 << 19, -(-n // 8)))
    row_block = check_int(row_block, "row_block", min_value=1)
    per = max(1, -(-row_block // block_size))
    step = per * block_size
    bounds = np.arange(0, n, step, dtype=np.int64)
    return np.append(bounds, n), per


def build_coassociation(
    group_or_url,
    *,
    strategy,
    seed=None,
    client_or_scheduler=None,
    storage_options=None,
    block_size=DEFAULT_BLOCK_SIZE,
    row_block=None,
    count_mode="auto",
    nnz_chunk=DEFAULT_NNZ_CHUNK,
    spill="auto",
    **params,
):
    """Sample pairs, count them over ``labels`` and write ``pairs/``, as a Dask graph.

    Parameters
    ----------
    group_or_url : zarr.Group or str
        The run store (holding ``labels``). Tasks reopen it themselves: with a distributed
        cluster of processes pass a URL (local path, ``file://``, ``s3://``...) and
        ``storage_options``, or a group whose store pickles (not a process-local memory store).
    strategy : {"full", "uniform", "per-point", "cocluster"}
        See :func:`sample_pairs`; ``**params`` are its parameters.
    seed : int or None, default=None
        Root of all randomness; ``None`` draws one, recorded in the attributes.
    client_or_scheduler : distributed.Client, str or None, default=None
        Where to run: a Client, a scheduler address (``tcp://...``), a dask scheduler name
        (``"threads"``, ``"sync"``), or ``None`` for Dask's default.
    storage_options : dict, default=None
        fsspec options for a URL.
    block_size : int, default=4096
        Rows per seed block (part of the strategy: it changes the pairs).
    row_block : int, default=None
        Rows per Dask partition, rounded up to whole seed blocks (does not change the result).
        ``None`` picks about n / 8, at most 524288.
    count_mode : {"auto", "rows", "join"}, default="auto"
        ``rows``: a partition's counting task reads the span of label rows its pairs touch
        (labels fit a worker). ``join``: pairs are bucketed by (row partition of i, row
        partition of j) and each task reads just those two row blocks. ``auto`` joins when
        ``labels`` is larger than 512 MiB.
    nnz_chunk : int, default=1048576
        Chunk length of ``indices``, ``co``, ``both``.
    spill : {"auto", True, False}, default="auto"
        Whether pairs travel between tasks through temporary arrays under ``pairs/_tmp/`` of
        the run store (deleted at the end) instead of worker memory. Workers then hold at most
        the pieces of the tasks they run. ``auto`` spills when the strategy is expected to draw
        more than 256 MiB of pairs (about 16.7 million). Does not change the result.

    Returns
    -------
    dict
        The attributes written to ``pairs/`` (strategy, params, seed, n, nnz, n_pairs,
        n_clusterings, complete...).

    Examples
    --------
    >>> import zarr
    >>> g = zarr.open_group(store="memory://doc-build", mode="w")
    >>> _ = g.create_array("labels", data=np.array([[0, 1], [0, 1], [1, -1]], dtype="int32"))
    >>> summary = build_coassociation(g, strategy="full", seed=0, client_or_scheduler="sync")
    >>> summary["n_pairs"], read_pairs(g).co.tolist()
    (3, [2, 0, 2, 0, 0, 0])
    """
    import dask

    group = _open_group(group_or_url, storage_options)
    labels = _labels_array(group, group_or_url if isinstance(group_or_url, str) else str(group.store))
    n, n_clust = (int(s) for s in labels.shape)
    sampler = _make_sampler(strategy, n, seed, block_size, params)
    count_mode = check_choice(count_mode, "count_mode", ("auto", "rows", "join"))
    nnz_chunk = check_int(nnz_chunk, "nnz_chunk", min_value=1)
    spill = _check_spill(spill)
    if count_mode == "auto":
        count_mode = "join" if n * n_clust * 4 > _AUTO_JOIN_BYTES else "rows"
    if spill == "auto":
        spill = _expected_pairs(sampler) * _TRANSIT_BYTES_PER_PAIR > _AUTO_SPILL_BYTES
    bounds, per = _partition_bounds(n, sampler.block_size, row_block)
    n_parts = len(bounds) - 1
    locator = _locator(group_or_url, storage_options)
    transit = _Transit(locator if spill else None)
    scheduler, owned = _resolve_scheduler(client_or_scheduler)
    attrs = {
        **sampler.attrs(),
        "count_mode": count_mode,
        "row_block": int(bounds[1] - bounds[0]),
        "spill": bool(spill),
    }
    pg = None
    if spill:
        pg = _new_pairs_group(group, attrs)
        for kind in ("gen", "up", "cnt", "lab"):
            pg.require_group(f"{TMP_GROUP}/{kind}")
    running = []
    try:
        clock = time.perf_counter()
        # Phase 1: draw and deduplicate the pairs; only their numbers reach the client.
        # cocluster draws need the whole labels matrix and its cluster index in each drawing
        # task: draw in at most _LABEL_GEN_TASKS tasks, each reading the labels once.
        n_gen = min(n_parts, _LABEL_GEN_TASKS) if sampler.needs_labels else n_parts
        cuts = np.linspace(0, n_parts, n_gen + 1).round().astype(int) * per
        gen = [
            dask.delayed(_gen_partition, pure=True)(
                sampler,
                range(int(cuts[p]), min(int(cuts[p + 1]), sampler.n_blocks)),
                bounds,
                locator,
                transit,
                p,
            )
            for p in range(n_gen)
        ]
        upper = []
        for r in range(n_parts):
            srcs = [gen[r]] if sampler.row_local else gen
            buckets = [dask.delayed(_pick, pure=True)(g, r) for g in srcs]
            upper.append(dask.delayed(_upper_partition, pure=True)(n, bounds, transit, r, *buckets))
        # Joins on spilled pieces read compact copies of the label blocks, validated and written
        # once per partition (the joins then read 1/4 of the bytes when the ids fit int8).
        compact = []
        if spill and count_mode == "join":
            compact = [
                dask.delayed(_compact_partition, pure=True)(locator, transit, bounds, r)
                for r in range(n_parts)
            ]
        persisted = dask.persist(*upper, *compact, scheduler=scheduler)
        upper, compact = list(persisted[:n_parts]), list(persisted[n_parts:])
        running.extend(upper + compact)
        sizes = np.array(dask.compute(*[dask.delayed(_sizes)(u) for u in upper], scheduler=scheduler))
        clock = _log_round("drew and deduplicated %d pairs in %d partitions", clock, sizes.sum(), n_parts)
        _drop_tmp(transit, "gen")
        # Entry counts of every row partition: its own pairs (i, j) and the mirrored (j, i).
        nnz_part = sizes.sum(axis=1) + sizes.sum(axis=0)
        offsets = np.concatenate([[0], np.cumsum(nnz_part)])
        nnz = int(offsets[-1])
        if pg is None:
            pg = _new_pairs_group(group, attrs)
        _create_pairs_arrays(pg, n, nnz, row_chunk=int(bounds[1] - bounds[0]), nnz_chunk=nnz_chunk)
        nnz_chunk = pg["indices"].chunks[0]
        # Phase 2: count every piece (rows of r x rows of q) into a forward and a mirror piece.
        counted = {}
        for r in range(n_parts):
            if count_mode == "rows":
                task = dask.delayed(_count_rows, pure=True)(locator, transit, n, bounds, r, upper[r][r:])
                for q in range(r, n_parts):
                    counted[r, q] = dask.delayed(_pick, pure=True)(task, q - r)
            else:
                for q in range(r, n_parts):
                    if sizes[r, q] or q == r:  # (r, r) always runs: it validates block r
                        piece = dask.delayed(_pick, pure=True)(upper[r], q)
                        after = [compact[r], compact[q]] if compact else []
                        counted[r, q] = dask.delayed(_count_join, pure=True)(
                            locator, transit, n, bounds, r, q, piece, *after
                        )
        counted = dict(zip(counted, dask.persist(*counted.values(), scheduler=scheduler), strict=True))
        running.extend(counted.values())
        del upper, compact
        # Phase 3: indptr of each partition, and the rows at every nnz chunk start.
        row_pieces = []
        for r in range(n_parts):
            mirrors = [
                dask.delayed(_pick, pure=True)(counted[q, r], 1) for q in range(r + 1) if (q, r) in counted
            ]
            forwards = [
                dask.delayed(_pick, pure=True)(counted[r, q], 0)
                for q in range(r, n_parts)
                if (r, q) in counted
            ]
            row_pieces.append(mirrors + forwards)
        marks = dask.compute(
            *[
                dask.delayed(_write_indptr, pure=True)(
                    locator, transit, n, bounds, r, int(offsets[r]), nnz_chunk, *row_pieces[r]
                )
                for r in range(n_parts)
            ],
            scheduler=scheduler,
        )
        clock = _log_round("counted %d pieces and wrote indptr", clock, len(counted))
        _drop_tmp(transit, "up")
        _drop_tmp(transit, "lab")
        # Phase 4: each task gathers the rows of a run of whole nnz chunks and writes them.
        starts = np.concatenate([m[0] for m in marks])
        right = dict(zip(starts.tolist(), np.concatenate([m[1] for m in marks]).tolist(), strict=True))
        left = dict(zip(starts.tolist(), np.concatenate([m[2] for m in marks]).tolist(), strict=True))
        n_chunks = len(starts)
        most = max(1, _ASSEMBLE_BYTES // (_TRANSIT_BYTES_PER_PAIR * nnz_chunk))
        step = max(1, min(most, -(-n_chunks // (4 * n_parts))))
        writes = []
        for k in range(0, n_chunks, step):
            e0 = k * nnz_chunk
            e1 = min((k + step) * nnz_chunk, nnz)
            ra, rb = right[e0], left[e1] if e1 < nnz else n
            parts = range(
                int(np.searchsorted(bounds, ra, side="right")) - 1,
                int(np.searchsorted(bounds, rb - 1, side="right")),
            )
            writes.append(
                dask.delayed(_assemble_range, pure=True)(
                    locator, transit, bounds, e0, e1, ra, rb, {r: row_pieces[r] for r in parts}
                )
            )
        dask.compute(*writes, scheduler=scheduler)
        _log_round("assembled %d entries in %d tasks", clock, nnz, len(writes))
        running.clear()
    finally:
        if running and hasattr(scheduler, "cancel"):
            scheduler.cancel(running)
        if owned:
            scheduler.close()
        if spill:
            _drop_tmp(transit, None)
    summary = {**attrs, **_summary(n, nnz, n_clust), "updates": []}
    _finish(pg, summary)
    logger.info("coassoc: %d pairs of %d points over %d clusterings", nnz // 2, n, n_clust)
    return dict(pg.attrs)


def _log_round(message, clock, *args):
    now = time.perf_counter()
    logger.info("coassoc: " + message + " (%.1f s)", *args, now - clock)
    return now


def _check_spill(spill):
    if spill == "auto" or (isinstance(spill, (bool, np.bool_))):
        return spill if spill == "auto" else bool(spill)
    raise InputError(f"The 'spill' parameter must be 'auto', True or False; got {spill!r}")


def _expected_pairs(sampler):
    """About how many pairs the strategy draws (before deduplication)."""
    n = sampler.n
    if sampler.strategy == "full":
        return n * (n - 1) // 2
    if sampler.strategy == "uniform":
        return int(sampler.params["p"] * n * (n - 1) / 2)
    return n * sampler.params["l"]


def _drop_tmp(transit, kind):
    """Delete the spilled pieces of ``kind`` (all of ``pairs/_tmp`` for None); nothing if not spilling."""
    if transit.locator is None:
        return
    pg = transit.locator.open("r+")[PAIRS_GROUP]
    path = TMP_GROUP if kind is None else f"{TMP_GROUP}/{kind}"
    if path in pg:
        del pg[path]
        if kind is not None:
            pg.require_group(path)


def update_coassociation(group_or_url, *, client_or_scheduler=None, storage_options=None, chunks_per_task=4):
    """Add the counts of new ``labels`` columns to the stored pairs.

    Columns ``0 .. n_clusterings - 1`` are already counted; columns from there to
    ``labels.shape[1]`` are counted for every stored entry and added to ``co`` and
    ``both``; the old columns are not read. Every row of the new columns is validated first
    (bad labels raise :class:`InputError` and leave the stored pairs as they were). While the
    counts are added the group is marked incomplete
    (``complete=False``, ``updating=[old, new]``); a run killed halfway leaves it so, and
    the store must then be rebuilt.

    Parameters
    ----------
    group_or_url : zarr.Group or str
    client_or_scheduler : distributed.Client, str or None, default=None
    storage_options : dict, default=None
    chunks_per_task : int, default=4
        nnz chunks per task (tasks own whole chunks, so no two write the same one).

    Returns
    -------
    dict
        The attributes of ``pairs/`` after the update.

    Examples
    --------
    >>> import zarr
    >>> g = zarr.open_group(store="memory://doc-update", mode="w")
    >>> lab = g.create_array("labels", shape=(3, 2), chunks=(3, 1), dtype="int32")
    >>> lab[:, 0] = [0, 0, 1]
    >>> _ = write_pairs(g, coassociation(lab[:, :1], strategy="full", seed=0))
    >>> lab[:, 1] = [1, 1, 1]
    >>> update_coassociation(g, client_or_scheduler="sync")["n_clusterings"]
    2
    >>> read_pairs(g).co.tolist()
    [2, 1, 2, 1, 1, 1]
    """
    import dask

    chunks_per_task = check_int(chunks_per_task, "chunks_per_task", min_value=1)
    group = _open_group(group_or_url, storage_options)
    where = group_or_url if isinstance(group_or_url, str) else str(group.store)
    pg = _pairs_group(group, storage_options)
    labels = _labels_array(group, where)
    n = int(pg.attrs["n"])
    old = int(pg.attrs["n_clusterings"])
    new = int(labels.shape[1])
    if labels.shape[0] != n:
        raise InputError(f"'labels' has {labels.shape[0]} rows but the stored pairs are over n={n} points")
    if new < old:
        raise InputError(f"'labels' has {new} columns but {old} are already counted")
    if new == old:
        return dict(pg.attrs)
    locator = _locator(group_or_url, storage_options)
    scheduler, owned = _resolve_scheduler(client_or_scheduler)
    try:
        # Every row of the new columns is validated first (also rows no stored pair touches):
        # bad labels leave the stored pairs complete and untouched.
        label_rows = int(labels.chunks[0])
        per = max(1, _CHECK_BYTES // (4 * (new - old)))
        per = -(-per // label_rows) * label_rows
        checks = [
            dask.delayed(_check_label_block, pure=True)(locator, r0, min(r0 + per, n), old, new)
            for r0 in range(0, n, per)
        ]
        dask.compute(*checks, scheduler=scheduler)
        pg.attrs.update({"complete": False, "updating": [old, new]})
        indptr = np.asarray(pg["indptr"][:], dtype=np.int64)
        nnz = int(indptr[-1])
        step = pg["indices"].chunks[0] * chunks_per_task
        tasks = []
        for e0 in range(0, nnz, step):
            e1 = min(e0 + step, nnz)
            ra = int(np.searchsorted(indptr, e0, side="right")) - 1
            rb = int(np.searchsorted(indptr, e1, side="left"))
            tasks.append(
                dask.delayed(_update_range, pure=True)(locator, e0, e1, ra, indptr[ra : rb + 1], old, new)
            )
        dask.compute(*tasks, scheduler=scheduler)
    finally:
        if owned:
            scheduler.close()
    updates = list(pg.attrs.get("updates", [])) + [[old, new]]
    pg.attrs.update({"n_clusterings": new, "updates": updates, "updating": None})
    pg.attrs.update({"complete": True})
    return dict(pg.attrs)


# --------------------------------------------------------------------------- the pipeline stage


def coassoc_stage(
    store,
    client=None,
    *,
    strategy="uniform",
    seed=0,
    block_size=DEFAULT_BLOCK_SIZE,
    row_block=None,
    count_mode="auto",
    nnz_chunk=DEFAULT_NNZ_CHUNK,
    spill="auto",
    **params,
):
    """Run the ``coassoc`` stage on a :class:`~ensemble_dask.io.store.RunStore`.

    Skipped when its record matches (same parameters, same ``generate`` output). When the only
    change since the last run is that ``generate`` appended clusterings to the same ensemble,
    the stored pairs are updated with the new columns (:func:`update_coassociation`) instead
    of being rebuilt.

    Parameters
    ----------
    store : RunStore
    client : distributed.Client, default=None
        Where the graph runs (``None``: Dask's default scheduler).
    strategy, seed, block_size, row_block, count_mode, nnz_chunk, spill, **params
        As in :func:`build_coassociation`. ``row_block``, ``count_mode``, ``nnz_chunk`` and
        ``spill`` do not change the result and are not part of the stage's identity.

    Returns
    -------
    dict
        ``{"n_pairs", "nnz", "n_clusterings", "skipped", "updated"}``.
    """
    # the stage's own branch of the run seed (no stream shared with ingest or generate)
    seed = int(stage_seed(seed, "coassoc").generate_state(1)[0])
    sampler = _make_sampler(strategy, store["labels"].shape[0], seed, block_size, params)
    p = sampler.attrs()
    inputs = [store.stage_hash("generate")]
    gen_params = {k: v for k, v in (store.record("generate") or {}).get("params", {}).items()}
    if store.is_complete("coassoc", p, inputs):
        attrs = dict(store["pairs"].attrs)
        logger.info("coassoc: up to date, skipped")
        return {**_stage_result(attrs), "skipped": True, "updated": False}
    prev = store.record("coassoc")
    appendable = False
    # an update keeps the stored pairs: only right when the pairs do not depend on the labels
    # (cocluster draws them from the labels, so more clusterings mean other pairs: rebuild)
    if (
        not sampler.needs_labels
        and prev
        and prev.get("complete")
        and prev.get("params") == _json_round_trip(p)
        and "pairs" in store
    ):
        old_gen = dict(store["pairs"].attrs.get("generate_params") or {})
        if old_gen and gen_params and "n_clusterings" in gen_params:
            same = {**old_gen, "n_clusterings": gen_params["n_clusterings"]} == gen_params
            appendable = same and old_gen["n_clusterings"] < gen_params["n_clusterings"]
    with store.stage("coassoc", p, inputs):
        if appendable:
            attrs = update_coassociation(store, client_or_scheduler=client)
        else:
            attrs = build_coassociation(
                store,
                strategy=strategy,
                seed=sampler.seed,
                client_or_scheduler=client,
                block_size=block_size,
                row_block=row_block,
                count_mode=count_mode,
                nnz_chunk=nnz_chunk,
                spill=spill,
                **params,
            )
        store["pairs"].attrs["generate_params"] = gen_params
    return {**_stage_result(attrs), "skipped": False, "updated": appendable}


def _json_round_trip(obj):
    import json

    return json.loads(json.dumps(obj, sort_keys=True, default=str))


def _stage_result(attrs):
    return {k: attrs[k] for k in ("n_pairs", "nnz", "n_clusterings")}
