"""Row blocks of encoded labels held on a Dask cluster, as a backend of KCC's shared driver.

:class:`DaskBlocks` runs :mod:`ensemble_dask.consensus.kcc._kcc`'s block functions where the blocks live
and combines their statistics in a tree on the cluster (:func:`tree_reduce`); only sums, a few rows
and the final ``n``-row results reach the coordinator. Used by the row-distributed KCC
(:mod:`.kcc`) and by the seeded start of the row-distributed BCE (:mod:`.bce`).
"""

from __future__ import annotations

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

__all__ = ["DaskBlocks", "tree_reduce", "sampled_kcc_start"]


def _ones(gidx):
    return np.ones(gidx.shape[0])


def _take_rows(gidx, rows):
    return np.ascontiguousarray(gidx[rows])


def _take_weights(weight, rows):
    return np.asarray(weight[rows], dtype=np.float64)


def tree_reduce(client, futures, func, *, fan_in=8):
    """Combine futures with a tree of ``func(*parts)`` tasks on the cluster; returns a future."""
    level = list(futures)
    while len(level) > 1:
        level = [
            client.submit(func, *level[i : i + fan_in], pure=False) for i in range(0, len(level), fan_in)
        ]
    return level[0]


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
