"""BCE on a Dask cluster: the E-step runs on row blocks of a ``labels`` array where they live.

Each row block of the ``n x N`` labels array (a zarr array at a URL, or an in-memory array)
is read by a task on a worker and stays there encoded (:class:`LabelBlocks`), with the block's
variational ``gamma``. Per EM iteration the coordinator submits one E-step task per block with the
current parameters; only the packed sufficient statistics (a vector of ``k * sum_j k_j +
k + 2`` floats, see :class:`~ensemble_dask.consensus.bce._em.StatsLayout`) leave the worker, are
summed in a tree on the cluster, and one total reaches the coordinator. The EM driver, the
M-step and the random starts are those of :class:`~ensemble_dask.consensus.BCE`, so the
fit from random starts equals the in-memory one up to floating-point summation order; the seeded
start (:func:`seeded_start`) is computed on the blocks too.

This module only decides where the in-memory functions run; the algorithm lives in
:mod:`ensemble_dask.consensus.bce._bce`.
"""

from __future__ import annotations

import operator
import uuid

import numpy as np

from .._validation import InputError, check_labels_matrix, check_random_state, shown
from ..consensus._common.encoding import Encoding, compress_rows
from ..consensus.bce import BCE
from ..consensus.bce._base import fit_em
from ..consensus.bce._em import Params, StatsLayout, _offsets, encode_labels, estep_stats
from ..consensus.bce._seeding import seeded_alpha, seeded_beta, soft_gamma
from ..consensus.kcc import KCC
from ..consensus.kcc._blocks import block_norms
from ..consensus.kcc._kcc import kcc_starts
from ..io.readers import load_npy
from .blocks import DaskBlocks, in_order, sampled_kcc_start

__all__ = [
    "fit_bce_dask",
    "load_label_blocks",
    "LabelBlocks",
    "read_labels",
    "block_meta",
    "prepare_block",
    "estep_task",
]


DEFAULT_BLOCK_ROWS = 65536


def _local_path(url):
    return url[len("file://") :] if url.startswith("file://") else url


def read_labels(url, start=None, stop=None, storage_options=None):
    """Read rows ``start:stop`` of a labels matrix at ``url`` (zarr array, or ``.npy`` file).

    ``url`` may be a local path, ``file://``, ``memory://`` or any fsspec URL.
    """
    if url.endswith(".npy"):
        if "://" not in url or url.startswith("file://"):
            arr = load_npy(_local_path(url), mmap_mode="r")
        else:
            import fsspec

            with fsspec.open(url, "rb", **(storage_options or {})) as f:
                arr = load_npy(f)
        return np.ascontiguousarray(arr[start:stop])
    import zarr

    z = zarr.open_array(_local_path(url), mode="r", storage_options=storage_options if "://" in url else None)
    return np.asarray(z[start:stop])


def labels_shape(url, storage_options=None):
    """``(n, N)`` of the labels matrix at ``url`` and its row chunk size (None for ``.npy``)."""
    if url.endswith(".npy"):
        if "://" not in url or url.startswith("file://"):
            return tuple(load_npy(_local_path(url), mmap_mode="r").shape), None
        import fsspec

        fmt = np.lib.format
        with fsspec.open(url, "rb", **(storage_options or {})) as f:
            version = fmt.read_magic(f)
            read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, _, _ = read(f)
        return tuple(shape), None
    import zarr

    z = zarr.open_array(_local_path(url), mode="r", storage_options=storage_options if "://" in url else None)
    return tuple(z.shape), z.chunks[0]


def block_meta(block):
    """Number of columns, per-column distinct labels and the block-local empty rows."""
    block = check_labels_matrix(block)
    uniques = [np.unique(col[col >= 0]) for col in block.T]
    empty = np.flatnonzero((block < 0).all(axis=1))
    return block.shape[1], uniques, empty


def merge_categories(uniques_per_block):
    """Union, per column, of the blocks' distinct labels (what ``np.unique`` gives on the pooled rows)."""
    N = len(uniques_per_block[0])
    return [np.unique(np.concatenate([u[j] for u in uniques_per_block])).astype(np.int64) for j in range(N)]


def encode_block(block, categories):
    """Global category indices (int64) of a block."""
    return encode_labels(block, categories)[0]


def fresh_gamma(n_rows, k):
    """A block's ``gamma`` ahead of the first E-step (``-1`` = start from ``alpha + m / k``)."""
    return np.full((n_rows, k), -1.0)


def prepare_block(block, categories):
    """Encode a block and merge its identical rows: ``{"gidx", "weight", "inverse"}``."""
    gidx, weight, inverse = compress_rows(encode_labels(block, categories)[0])
    return {"gidx": gidx, "weight": weight, "inverse": inverse}


def fresh_gamma_like(prepared, k):
    """Fresh ``gamma`` for a prepared block (computed where the block lives)."""
    return fresh_gamma(prepared["gidx"].shape[0], k)


def expand_gamma(gamma, prepared):
    """Per-row ``gamma`` of a block from the ``gamma`` of its distinct rows."""
    return gamma[prepared["inverse"]]


def estep_task(prepared, gamma, params, tol, max_iter, clip=None, exact=False):
    """E-step of one prepared block: ``(stats vector, new gamma)``; the input gamma is not modified
    (``clip``, ``exact``: see :func:`~ensemble_dask.consensus.bce._em.estep_stats`)."""
    gamma = gamma.copy()
    gidx = prepared["gidx"]
    N = gidx.shape[1]
    vec = estep_stats(
        gidx,
        np.ones(N),
        np.empty((gidx.shape[0], 0)),
        np.empty(0),
        params,
        gamma,
        tol,
        max_iter,
        prepared["weight"],
        clip,
        exact,
    )
    return vec, gamma


def _added(total, vec):
    """``total + vec`` as float64, or as int64 for exact sums: a new array (a block's result is never changed
    in place)."""
    return np.add(total, vec, dtype=np.int64 if vec.dtype.kind == "i" else np.float64)


class DaskBlockEStep:
    """E-step over row-block futures; keeps every block's gamma on its worker between iterations
    (``clip``, ``exact``: see :func:`~ensemble_dask.consensus.bce._em.estep_stats`)."""

    def __init__(
        self, client, prepared_futures, k, tol, max_iter, submit_kwargs=None, clip=None, exact=False
    ):
        self.client = client
        self.gidx = prepared_futures
        self.k = k
        self.tol, self.max_iter = tol, max_iter
        self.clip, self.exact = clip, exact
        self.kw = [dict(s) for s in (submit_kwargs or [{}] * len(prepared_futures))]
        self.reset()

    def reset(self):
        self.gamma = [
            self.client.submit(fresh_gamma_like, g, self.k, pure=False, **kw)
            for g, kw in zip(self.gidx, self.kw, strict=True)
        ]

    def __call__(self, params, t):
        c = self.client
        gamma = list(self.gamma)

        def submit(b):
            kw = self.kw[b]
            r = c.submit(estep_task, self.gidx[b], gamma[b], params, self.tol, self.max_iter, self.clip,
                         self.exact, pure=False, **kw)  # fmt: skip
            self.gamma[b] = c.submit(operator.getitem, r, 1, pure=False, **kw)
            return c.submit(operator.getitem, r, 0, pure=False, **kw)

        # the blocks' statistics summed in this process in block order, a few held at once (in_order)
        return in_order(c, submit, len(self.gidx), _added)

    def gammas(self):
        full = [
            self.client.submit(expand_gamma, g, p, pure=False, **kw)
            for g, p, kw in zip(self.gamma, self.gidx, self.kw, strict=True)
        ]
        return np.concatenate(self.client.gather(full), axis=0)


def _row_blocks(n, chunk):
    return [(a, min(a + chunk, n)) for a in range(0, n, chunk)]


def load_label_blocks(client, labels, block_rows=None, storage_options=None, prefix="labels"):
    """Row blocks of ``labels`` on the workers: ``(blocks, futures)``, ``blocks`` the ``(start, stop)`` rows.

    A URL (zarr array or ``.npy``) is read by the workers themselves, block by block; an in-memory array
    (NumPy, zarr or dask) is scattered in blocks. Blocks have a fixed size (at most
    ``DEFAULT_BLOCK_ROWS``, or ``block_rows``), not one per worker, so sums over them are the same on any
    cluster.
    """
    fit_id = uuid.uuid4().hex  # task keys unique to this fit
    if isinstance(labels, str):
        (n, _), chunk = labels_shape(labels, storage_options)
        chunk = block_rows or min(chunk or DEFAULT_BLOCK_ROWS, DEFAULT_BLOCK_ROWS)
        blocks = _row_blocks(n, chunk)
        data = [
            client.submit(
                read_labels, labels, a, b, storage_options, pure=False, key=f"{prefix}-read-{a}-{b}-{fit_id}"
            )
            for a, b in blocks
        ]
        return blocks, data
    if hasattr(labels, "chunks") and hasattr(labels, "shape") and not isinstance(labels, np.ndarray):
        chunk = block_rows or labels.chunks[0]
        if isinstance(chunk, tuple):  # dask array chunks
            chunk = chunk[0]
    else:
        labels = check_labels_matrix(labels)
        chunk = block_rows or max(1, -(-labels.shape[0] // 8))
    blocks = _row_blocks(labels.shape[0], chunk)
    # hash=False: equal blocks (or a re-run's) must not share a key, or releasing one
    # future would drop the data another still needs ("lost dependencies").
    return blocks, [client.scatter(np.asarray(labels[a:b]), hash=False) for a, b in blocks]


def read_and_apply(url, start, stop, storage_options, func, *args):
    """``func(rows start:stop of the labels at url, *args)``: the block is read and used in one task, so
    that only ``func``'s result stays on the worker."""
    return func(read_labels(url, start, stop, storage_options), *args)


class LabelBlocks:
    """Row blocks of a labels matrix for tasks on the cluster: ``map(func, *args)`` gives one future of
    ``func(block, *args)`` per block.

    A URL is read by the tasks themselves, once per ``map`` (a pass of :func:`block_meta` and one of
    :func:`prepare_block` read each block twice, and never hold the raw labels next to their encoding);
    an in-memory array is scattered once
    (:func:`load_label_blocks`). Blocks have a fixed size, so sums over them are the same on any cluster.
    """

    def __init__(self, client, labels, block_rows=None, storage_options=None, prefix="labels"):
        self.client, self.prefix = client, prefix
        self.fit_id = uuid.uuid4().hex  # task keys unique to this fit
        if isinstance(labels, str):
            (n, _), chunk = labels_shape(labels, storage_options)
            self.blocks = _row_blocks(n, block_rows or min(chunk or DEFAULT_BLOCK_ROWS, DEFAULT_BLOCK_ROWS))
            self.url, self.storage_options, self.data = labels, storage_options, None
        else:
            self.blocks, self.data = load_label_blocks(client, labels, block_rows, storage_options, prefix)

    def map(self, func, *args):
        if self.data is not None:
            return [self.client.submit(func, d, *args, pure=False) for d in self.data]
        name = getattr(func, "__name__", "apply").strip("_")
        return [
            self.client.submit(
                read_and_apply,
                self.url,
                a,
                b,
                self.storage_options,
                func,
                *args,
                pure=False,
                key=f"{self.prefix}-{name}-{a}-{b}-{self.fit_id}",
            )
            for a, b in self.blocks
        ]

    def release(self):
        """Let the scattered blocks go (once every block has been turned into what the fit keeps)."""
        self.data = None


def _n_rows(prepared):
    return prepared["gidx"].shape[0]


def block_soft_gamma(prepared, beta, a):
    """The seeded start's ``gamma`` of a prepared block's distinct rows (:func:`soft_gamma`)."""
    return soft_gamma(prepared["gidx"], beta, a)


#: Lloyd steps of the KCC partition that seeds the row-distributed BCE (as ``seed_partition``'s ``max_lloyd``)
SEED_LLOYD = 20
#: rows (distinct rows of the blocks, with their multiplicity) on which the seeded start fits ``alpha``
SEED_ALPHA_ROWS = 5_000


def seeded_start(client, est, prepared, categories, rng):
    """BCE's seeded start computed on the cluster's blocks: ``(params, gamma futures)``.

    The counterpart of the in-memory seeded starts (a hard partition of the label rows,
    ``beta`` from its label counts, a fitted symmetric ``alpha``, a soft warm start of ``gamma``), with the
    hard partition from KCC on the blocks' distinct rows weighted by their multiplicity
    (:class:`~.blocks.DaskBlocks`: ``init="spectral"``, HBGF's partition of a sample of rows fetched
    here, or ``"k-means++"``, k-means++ starts compared on a sample of rows; then at most :data:`SEED_LLOYD`
    Lloyd steps on all rows) instead of the in-memory ones: the same kind of start, other draws. ``alpha`` is
    fitted on :data:`SEED_ALPHA_ROWS` rows fetched to this process; only sums and that sample leave the
    workers.
    """
    enc = Encoding.from_categories(categories)
    gidx = [client.submit(operator.getitem, p, "gidx", pure=False) for p in prepared]
    weight = [client.submit(operator.getitem, p, "weight", pure=False) for p in prepared]
    n_rows = client.gather([client.submit(_n_rows, p, pure=False) for p in prepared])
    backend = DaskBlocks(client, gidx, n_rows, weight)
    kcc = KCC(est._k, max_iter=SEED_LLOYD, init="spectral" if est.init == "spectral" else "k-means++")
    kcc._check_data(sum(n_rows), enc.n_categories)
    (MT, *_), _ = kcc_starts(kcc, backend, enc, rng, sampled_kcc_start(kcc, backend, enc, rng))
    counts = backend.step(MT, block_norms(MT, enc.offsets), 0)["counts"]  # the partition nearest MT
    beta = seeded_beta(counts, enc.offsets)
    n = sum(n_rows)
    sample = np.sort(rng.choice(n, size=min(n, SEED_ALPHA_ROWS), replace=False))
    upper = float(est.alpha_init)
    a = seeded_alpha(
        backend.take(sample),
        backend.take_weights(sample),
        beta,
        rng,
        lower=min(1e-3 / est._k, upper),
        upper=upper,
        max_rows=SEED_ALPHA_ROWS,
    )
    del backend, gidx, weight
    params = Params(np.full(est._k, a), beta, np.zeros((est._k, 0)), np.ones((est._k, 0)))
    return params, [client.submit(block_soft_gamma, p, beta, a, pure=False) for p in prepared]


def fit_bce_dask(labels, n_clusters=2, *, client=None, block_rows=None, storage_options=None, **bce_params):
    """Fit :class:`~ensemble_dask.consensus.BCE` with the E-step on row blocks on a Dask cluster.

    Parameters
    ----------
    labels : str, zarr array or array-like (n, N)
        The labels matrix: a URL or path of a zarr array (or ``.npy`` file) read by the
        workers block by block, or an in-memory array (scattered in blocks).
    n_clusters : int, default=2
        Number of consensus clusters.
    client : distributed.Client, default=None
        The cluster; None uses ``distributed.get_client()``.
    block_rows : int, default=None
        Rows per block; None uses blocks of at most 65,536 rows (the zarr row chunk if smaller).
    storage_options : dict, default=None
        fsspec options of ``labels``'s URL.
    **bce_params
        Other :class:`BCE` parameters (``n_init``, ``max_iter``, ``tol``, ``random_state``, ...).
        ``init="random"`` (the default here) draws the starts at random: use ``n_init`` of 3-10.
        ``init="k-means++"`` or ``"spectral"`` starts from a seeded partition computed on the cluster
        (:func:`seeded_start`: KCC on the blocks, from k-means++ starts or from HBGF's partition of a sample
        of rows fetched here), one EM run per ``n_init``: far fewer EM iterations than random starts, but
        other draws than the in-memory start.

    Returns
    -------
    BCE
        A fitted estimator. With ``init="random"``, the same as
        ``BCE(n_clusters, init="random", **bce_params).fit(labels)`` up to floating-point summation order.
    """
    if client is None:
        from distributed import get_client

        client = get_client()
    bce_params.setdefault("init", "random")
    if not isinstance(bce_params["init"], str) or bce_params["init"] not in (
        "random",
        "k-means++",
        "spectral",
    ):
        raise InputError(
            f"fit_bce_dask starts from random draws (init='random'; use n_init=3-10) or from a seeded "
            f"partition (init='k-means++' or 'spectral'); got init={shown(bce_params['init'])}"
        )
    est = BCE(n_clusters, **bce_params)
    est._validate_params()
    source = LabelBlocks(client, labels, block_rows, storage_options, "bce")
    blocks = source.blocks
    metas = client.gather(source.map(block_meta))
    if len({m[0] for m in metas}) != 1:
        raise InputError(
            f"labels blocks disagree on the number of clusterings: {sorted({m[0] for m in metas})}"
        )
    categories = merge_categories([m[1] for m in metas])
    empty_rows = np.concatenate([m[2] + a for m, (a, _) in zip(metas, blocks, strict=True)]).astype(np.int64)
    gidx = source.map(prepare_block, categories)
    source.release()
    rng = check_random_state(est.random_state)
    gammas0 = None
    if est.init != "random" and est._k > 1:
        seeded = [seeded_start(client, est, gidx, categories, rng) for _ in range(est.n_init)]
        starts, gammas0 = [p for p, _ in seeded], [g for _, g in seeded]
    else:  # random draws (one cluster: every start is the same)
        starts = [est._random_params(rng, categories) for _ in range(est.n_init)]
    layout = StatsLayout(est._k, int(_offsets(categories)[-1]), 0)
    estep = DaskBlockEStep(client, gidx, est._k, float(est.e_step_tol), int(est.e_step_max_iter))
    fit_em(
        est,
        estep,
        categories,
        layout,
        init_params_list=starts,
        gammas=estep.gammas,
        empty_rows=empty_rows,
        init_gammas=gammas0,
    )
    est._emit_fit_warnings(stacklevel=3)
    return est
