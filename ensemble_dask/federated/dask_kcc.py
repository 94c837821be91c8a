"""KCC on a Dask cluster: Lloyd's assignment runs on row blocks of ``labels`` where they live.

Each row block of the ``n x N`` labels matrix (a zarr array or ``.npy`` file at a URL, or an
in-memory array) is read and encoded once by a task on a worker and stays there, with the block's
current assignment. Per Lloyd iteration the coordinator submits one task per block with the current
centroids (``sum_i K_i x K`` floats); only the block's sufficient statistics leave the worker (per
cluster, per clustering and label counts, cluster sizes, squared error, the number of points that
changed cluster, and the few rows farthest from their centroid that reseed an empty cluster), are
combined in a tree on the cluster, and one total reaches the coordinator. k-means++ runs the same
way: the blocks keep their distances to the chosen centres and return only their sums and, for the
block a random draw falls in, one row. The driver, the starts and the centroid update are those of
:class:`~ensemble_dask.consensus.kcc.KCC` (:func:`~ensemble_dask.consensus.kcc.fit_kcc`), so the fit
equals the in-memory one up to floating-point summation order.

This module only decides where the in-memory functions run; the algorithm lives in
:mod:`ensemble_dask.consensus.kcc`.
"""

from __future__ import annotations

import operator

import numpy as np

from .._validation import InputError, check_labels_matrix, check_random_state
from ..consensus.kcc import (
    KCC,
    Encoding,
    LocalBlocks,
    block_closest,
    block_cooccurrence,
    block_memberships,
    block_pick,
    block_row,
    block_sizes,
    block_step,
    block_trials,
    check_encoding,
    column_categories,
    combine_stats,
    fit_kcc,
    kcc_starts,
)
from .dask import load_label_blocks

__all__ = ["fit_kcc_dask", "fit_gkcc_dask", "DaskBlocks"]


def _block_categories(block):
    block = check_labels_matrix(block)
    return block.shape[1], column_categories(block)


def _encode_block(block, enc):
    return enc.transform(block)


def _ones(gidx):
    return np.ones(gidx.shape[0])


def _take_rows(gidx, rows):
    return np.ascontiguousarray(gidx[rows])


def tree_reduce(client, futures, func, *, fan_in=8):
    """Combine futures with a tree of ``func(*parts)`` tasks on the cluster; returns a future."""
    level = list(futures)
    while len(level) > 1:
        level = [
            client.submit(func, *level[i : i + fan_in], pure=False) for i in range(0, len(level), fan_in)
        ]
    return level[0]


class DaskBlocks:
    """Backend of :func:`~ensemble_dask.consensus.kcc.fit_kcc` over row-block futures of ``gidx``.

    Mirrors :class:`~ensemble_dask.consensus.kcc.LocalBlocks`; every row-level array (the encoded
    labels, the assignment, the k-means++ distances) stays on the workers.
    """

    def __init__(self, client, gidx_futures, n_rows):
        self.client = client
        self.gidx = list(gidx_futures)
        self.weight = [client.submit(_ones, g, pure=False) for g in self.gidx]
        self.n_rows = list(n_rows)
        self.reset()

    def _map(self, func, *args):
        return [self.client.submit(func, *a, pure=False) for a in zip(*args, strict=True)]

    def reset(self):
        self.labels = [np.full(n, -1, dtype=np.int64) for n in self.n_rows]
        self.closest = [None] * len(self.gidx)

    def sizes(self, n_categories):
        G = [n_categories] * len(self.gidx)
        parts = self.client.gather(self._map(block_sizes, self.gidx, self.weight, G))
        return sum(p[0] for p in parts), sum(p[1] for p in parts)

    def step(self, MT, sq, n_far):
        c = self.client
        m = len(self.gidx)
        MT_f, sq_f = c.scatter([MT, sq], broadcast=True, hash=False)
        res = self._map(block_step, self.gidx, self.weight, self.labels, [MT_f] * m, [sq_f] * m, [n_far] * m)
        self.labels = [c.submit(operator.getitem, r, 1, pure=False) for r in res]
        stats = [c.submit(operator.getitem, r, 0, pure=False) for r in res]
        return c.gather(tree_reduce(c, stats, combine_stats))

    def row(self, b, j):
        return self.client.submit(block_row, self.gidx[b], j, pure=False).result()

    def set_closest(self, center, csq):
        m = len(self.gidx)
        res = self._map(block_closest, self.gidx, self.weight, self.closest, [center] * m, [csq] * m)
        self.closest = [self.client.submit(operator.getitem, r, 0, pure=False) for r in res]
        tot = [self.client.submit(operator.getitem, r, 1, pure=False) for r in res]
        return np.array(self.client.gather(tot))

    def trials(self, centers, csqs):
        m = len(self.gidx)
        res = self._map(block_trials, self.gidx, self.weight, self.closest, [centers] * m, [csqs] * m)
        return sum(self.client.gather(res))

    def pick(self, b, r):
        return self.client.submit(
            block_pick, self.gidx[b], self.weight[b], self.closest[b], r, pure=False
        ).result()

    def cooccurrence(self, chosen, n_categories):
        m = len(self.gidx)
        parts = self.client.gather(
            self._map(block_cooccurrence, self.gidx, self.weight, [chosen] * m, [n_categories] * m)
        )
        return sum(p[0] for p in parts), sum(p[1] for p in parts)

    def take(self, rows):
        """The ``gidx`` rows at the sorted global indices ``rows`` (a sample: they come to this process)."""
        bounds = np.concatenate([[0], np.cumsum(self.n_rows)])
        cut = np.searchsorted(rows, bounds)
        parts = [
            self.client.submit(_take_rows, g, rows[cut[b] : cut[b + 1]] - bounds[b], pure=False)
            for b, g in enumerate(self.gidx)
            if cut[b + 1] > cut[b]
        ]
        return np.concatenate(self.client.gather(parts))

    def memberships(self, MT, sq):
        m = len(self.gidx)
        res = self.client.gather(self._map(block_memberships, self.gidx, [MT] * m, [sq] * m))
        return np.concatenate([r[0] for r in res]), np.concatenate([r[1] for r in res])


def fit_kcc_dask(labels, n_clusters=2, *, client=None, block_rows=None, storage_options=None, **kcc_params):
    """Fit :class:`~ensemble_dask.consensus.kcc.KCC` with the Lloyd assignment on row blocks on Dask.

    Parameters
    ----------
    labels : str, zarr array or array-like (n, N)
        The labels matrix: a URL or path of a zarr array (or ``.npy`` file) read by the workers
        block by block, or an in-memory array (scattered in blocks).
    n_clusters : int, default=2
    client : distributed.Client, default=None
        None uses ``distributed.get_client()``.
    block_rows : int, default=None
        Rows per block; None uses blocks of at most 65,536 rows (the zarr row chunk if smaller),
        or 8 blocks for an in-memory array.
    storage_options : dict, default=None
        fsspec options of ``labels``'s URL.
    **kcc_params
        Other :class:`KCC` parameters (``init``, ``n_init``, ``max_iter``, ``tol``, ``random_state``).

    Returns
    -------
    KCC
        A fitted estimator, equal to ``KCC(n_clusters, **kcc_params).fit(labels)`` up to
        floating-point summation order. With random starts (``'k-means++'``, ``'random'``) on more
        than ``max(20,000, 50 K)`` rows, the ``n_init`` starts are compared, as in memory, on a
        uniform sample of that many rows (fetched to this process: ``sample x N`` int32) and only the
        best one is run on all rows; the in-memory fit does exactly this when more than half of the
        rows are distinct (subsampled ensembles), and otherwise fits the distinct rows weighted by
        their multiplicity: the same objective, other draws.
    """
    if client is None:
        from distributed import get_client

        client = get_client()
    est = KCC(n_clusters, **kcc_params)
    est._check_params()
    blocks, data = load_label_blocks(client, labels, block_rows, storage_options, "kcc")
    metas = client.gather([client.submit(_block_categories, d, pure=False) for d in data])
    if len({m[0] for m in metas}) != 1:
        raise InputError(
            f"labels blocks disagree on the number of clusterings: {sorted({m[0] for m in metas})}"
        )
    cats = [np.unique(np.concatenate([m[1][i] for m in metas])).astype(np.int64) for i in range(metas[0][0])]
    enc = Encoding.from_categories(cats)
    n, N = blocks[-1][1], metas[0][0]
    check_encoding(enc, (n, N))
    est._check_params(n, enc.n_categories)
    gidx = [client.submit(_encode_block, d, enc, pure=False) for d in data]
    del data
    backend = DaskBlocks(client, gidx, [b - a for a, b in blocks])
    rng = check_random_state(est.random_state)
    start = None
    if est._sampled_starts(n) and est.n_init > 1:  # the draws of KCC._fit_rows, in the same order
        sample = np.sort(rng.choice(n, size=est._start_sample(), replace=False))
        (MT, *_), _ = kcc_starts(est, LocalBlocks([backend.take(sample)]), enc, rng)
        start = np.ascontiguousarray(MT.T)
    return fit_kcc(est, backend, enc, rng, start=start)


def _candidate_mapper(client):
    """``mapper`` for :meth:`GKCC.fit`: a step's candidates as tasks, the shared arrays sent once."""

    def mapper(func, args):
        shared = client.scatter(list(args[0][:5]), broadcast=True, hash=False)
        per = list(zip(*[a[5:] for a in args], strict=True))
        futures = client.map(func, *[[f] * len(args) for f in shared], *per, pure=False)
        return client.gather(futures)

    return mapper


def fit_gkcc_dask(labels, n_clusters=2, *, client=None, **gkcc_params):
    """Fit :class:`~ensemble_dask.consensus.gkcc.GKCC` with each step's candidate k-means in groups as Dask tasks.

    The candidates' results are gathered in their order, so the fit equals the in-memory one.
    """
    from ..consensus.gkcc import GKCC

    if client is None:
        from distributed import get_client

        client = get_client()
    # one group of candidates per worker thread (each group runs its candidates in shared passes)
    n_tasks = max(1, sum(client.nthreads().values()))
    return GKCC(n_clusters, **gkcc_params).fit(labels, mapper=_candidate_mapper(client), n_tasks=n_tasks)
