"""Row blocks of encoded labels held on a Dask cluster, as a backend of KCC's shared driver.

:class:`DaskBlocks` runs :mod:`ensemble_dask.consensus.kcc._kcc`'s block functions where the blocks live
and sums their statistics in this process in block order, a few blocks at a time (:func:`in_order`); only
sums, a few rows and the final ``n``-row results reach the coordinator. Used by the row-distributed KCC
(:mod:`.kcc`) and by the seeded start of the row-distributed BCE (:mod:`.bce`).
"""

from __future__ import annotations

import collections
import operator

import numpy as np

from ..consensus.kcc._blocks import (
    LocalBlocks,
    block_closest,
    block_cooccurrence,
    block_memberships,
    block_pick,
    block_row,
    block_sizes,
    block_step,
    block_trials,
    combine_stats,
)
from ..consensus.kcc._kcc import best_sample_start

__all__ = ["DaskBlocks", "in_order", "sampled_kcc_start"]


def _ones(gidx):
    return np.ones(gidx.shape[0])


def _take_rows(gidx, rows):
    return np.ascontiguousarray(gidx[rows])


def _take_weights(weight, rows):
    return np.asarray(weight[rows], dtype=np.float64)


def in_order(client, submit, n_blocks, combine, *, window=None):
    """``combine(...combine(r_0, r_1)..., r_last)`` of the blocks' results ``r_b = submit(b).result()``, in
    block order, with at most ``window`` blocks submitted and not yet combined (None: the cluster's threads,
    at least 2).

    Each result is combined in this process and let go as it arrives, so at most ``window`` results are held
    on the cluster at once, whatever the number of blocks: a tree of tasks holds every block's result until
    its node runs, and the cluster runs all the blocks first. The order of the sums is the blocks' order, as
    the in-memory backends sum."""
    if window is None:
        window = max(2, sum(client.nthreads().values()))
    pending = collections.deque()
    total, b = None, 0
    while b < n_blocks or pending:
        while b < n_blocks and len(pending) < window:
            pending.append(submit(b))
            b += 1
        fut = pending.popleft()
        part = fut.result()
        fut.release()
        total = part if total is None else combine(total, part)
    return total


def _pairs_sum(a, b):
    return a[0] + b[0], a[1] + b[1]


class DaskBlocks:
    """Backend of :func:`~ensemble_dask.consensus.kcc._kcc.fit_kcc` over row-block futures of ``gidx``.

    Mirrors :class:`~ensemble_dask.consensus.kcc._kcc.LocalBlocks`; every row-level array (the encoded
    labels, the assignment, the k-means++ distances) stays on the workers. ``weight_futures`` (one
    per block; None: 1 per row) weigh the rows in the centroids and the objective, e.g. distinct rows
    by their multiplicity; the starts' random picks stay uniform over the rows.
    """

    def __init__(self, client, gidx_futures, n_rows, weight_futures=None):
        self.client = client
        self.gidx = list(gidx_futures)
        self.weighted = weight_futures is not None
        self.weight = (
            list(weight_futures)
            if self.weighted
            else [client.submit(_ones, g, pure=False) for g in self.gidx]
        )
        self.n_rows = list(n_rows)
        self.reset()

    def _map(self, func, *args):
        return [self.client.submit(func, *a, pure=False) for a in zip(*args, strict=True)]

    def reset(self):
        self.labels = [np.full(n, -1, dtype=np.int64) for n in self.n_rows]
        self.closest = [None] * len(self.gidx)

    def _summed(self, func, combine, *args):
        """:func:`in_order` of ``func(gidx, weight, *args)`` over the blocks."""

        def submit(b):
            return self.client.submit(func, self.gidx[b], self.weight[b], *args, pure=False)

        return in_order(self.client, submit, len(self.gidx), combine)

    def sizes(self, n_categories):
        return self._summed(block_sizes, _pairs_sum, n_categories)

    def step(self, MT, sq, n_far):
        c = self.client
        MT_f, sq_f = c.scatter([MT, sq], broadcast=True, hash=False)
        labels = list(self.labels)

        def submit(b):
            res = c.submit(block_step, self.gidx[b], self.weight[b], labels[b], MT_f, sq_f, n_far, pure=False)
            self.labels[b] = c.submit(operator.getitem, res, 1, pure=False)
            return c.submit(operator.getitem, res, 0, pure=False)

        return in_order(c, submit, len(self.gidx), combine_stats)

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
        return self._summed(block_cooccurrence, _pairs_sum, chosen, n_categories)

    def take(self, rows, func=_take_rows):
        """The ``gidx`` rows at the sorted global indices ``rows`` (a sample: they come to this process);
        ``func=_take_weights``: their weights."""
        bounds = np.concatenate([[0], np.cumsum(self.n_rows)])
        cut = np.searchsorted(rows, bounds)
        data = self.gidx if func is _take_rows else self.weight
        parts = [
            self.client.submit(func, g, rows[cut[b] : cut[b + 1]] - bounds[b], pure=False)
            for b, g in enumerate(data)
            if cut[b + 1] > cut[b]
        ]
        return np.concatenate(self.client.gather(parts))

    def take_weights(self, rows):
        """The weights of the rows at the sorted global indices ``rows``."""
        return self.take(rows, _take_weights)

    def memberships(self, MT, sq):
        m = len(self.gidx)
        res = self.client.gather(self._map(block_memberships, self.gidx, [MT] * m, [sq] * m))
        return np.concatenate([r[0] for r in res]), np.concatenate([r[1] for r in res])


def sampled_kcc_start(est, backend, enc, rng):
    """Centroids (``K x G``) to start the Lloyd run on all rows from, or None (``est``'s own starts).

    With random starts on more than ``max(20,000, 50 K)`` rows, :class:`~ensemble_dask.consensus.KCC`
    compares its ``n_init`` starts and HBGF's partition on a uniform sample of that many rows; this draws
    the same sample with ``rng`` (fetched to this process: ``sample x N`` int32), runs the starts on it here
    and returns the best one's centroids, so that the row-distributed fit makes the in-memory fit's draws
    (on weighted rows, the sample's picks are weighted, as KCC's on merged rows).
    """
    n = sum(backend.n_rows)
    if not est._starts_on_sample(n):
        return None
    sample = np.sort(rng.choice(n, size=est._start_sample(), replace=False))
    rows = backend.take(sample)
    part = (
        LocalBlocks([rows], [backend.take_weights(sample)], weighted_picks=True)
        if backend.weighted
        else LocalBlocks([rows])
    )
    return best_sample_start(est, part, enc, rng)
