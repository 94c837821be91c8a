"""KCC's row blocks: what one block of label rows contributes to a Lloyd step, and the in-memory backend.

Each function takes plain arrays (a block's ``gidx`` rows, their weights, the centroids ``MT``) and returns
sums over the block's rows, so that :func:`~ensemble_dask.consensus.kcc._kcc.lloyd` runs the same on
:class:`LocalBlocks` here as on Dask's blocks (:mod:`ensemble_dask.rowblocks.blocks`).
"""

from __future__ import annotations

import numpy as np

from . import _kernels as kern

# --------------------------------------------------------------------------- block functions


def block_sizes(gidx, weight, n_categories):
    """Weighted count of each global category and total weight of a block: ``(counts (G,), total)``."""
    return kern.category_counts(gidx, weight, n_categories), float(weight.sum())


def block_step(gidx, weight, labels, MT, sq, n_far):
    """One Lloyd assignment of a row block: ``(stats, new labels)``; ``labels`` is not modified.

    ``stats`` is a dict of the block's sufficient statistics for centroids ``MT`` (``G x K``) with
    block norms ``sq`` (``K x N``): ``counts`` (``K x G`` weighted label counts per cluster),
    ``sizes`` (``K``), ``sse`` (squared error to ``MT``), ``changed`` (weighted rows whose cluster
    changed) and the ``n_far`` rows farthest from their centroid (``far_d``, ``far_rows`` as
    ``gidx`` rows), the only row-level data a block gives out, used to reseed empty clusters.
    """
    K = MT.shape[1]
    labels = np.array(labels, dtype=np.int64, copy=True)
    counts = np.zeros((K, MT.shape[0]))
    sizes = np.zeros(K)
    far_d = np.empty(n_far)
    far_i = np.empty(n_far, dtype=np.int64)
    sse, changed = kern.assign_stats(gidx, weight, MT, sq, labels, counts, sizes, far_d, far_i)
    keep = far_i >= 0
    stats = {
        "counts": counts,
        "sizes": sizes,
        "sse": sse,
        "changed": changed,
        "far_d": far_d[keep],
        "far_rows": np.asarray(gidx[far_i[keep]]),
    }
    return stats, labels


def combine_stats(*parts):
    """Sum of block statistics (the far rows merged, largest distances first)."""
    out = {
        k: (np.array(parts[0][k], copy=True) if k != "sse" and k != "changed" else parts[0][k])
        for k in parts[0]
    }
    for p in parts[1:]:
        out["counts"] = out["counts"] + p["counts"]
        out["sizes"] = out["sizes"] + p["sizes"]
        out["sse"] = out["sse"] + p["sse"]
        out["changed"] = out["changed"] + p["changed"]
        out["far_d"] = np.concatenate([out["far_d"], p["far_d"]])
        out["far_rows"] = np.concatenate([out["far_rows"], p["far_rows"]])
    m = out["sizes"].shape[0]
    order = np.argsort(-out["far_d"], kind="stable")[:m]
    out["far_d"], out["far_rows"] = out["far_d"][order], out["far_rows"][order]
    return out


def block_sums(A, offsets):
    """Sum of each block ``offsets[i]:offsets[i + 1]`` of ``A``'s rows (``len(offsets) - 1`` of them). An
    empty block sums to 0: ``np.add.reduceat`` gives it the next row instead, or fails when it is the last;
    the other blocks' sums are ``reduceat``'s, bit for bit."""
    offsets = np.asarray(offsets)
    out = np.zeros((offsets.size - 1, *A.shape[1:]))
    full = np.flatnonzero(np.diff(offsets) > 0)
    if full.size:
        out[full] = np.add.reduceat(A, offsets[full], axis=0)
    return out


def block_norms(MT, offsets):
    """``sq[k, i] = ||m_{k,i}||^2`` of centroids ``MT`` (``G x K``): ``K x N``, 0 for an empty block."""
    return block_sums(MT * MT, offsets).T.copy()


def _row_center(row, enc, prior):
    """Centre (length G) at a ``gidx`` row; blocks of clusterings where it is missing take ``prior``."""
    c = prior.copy()
    for i, g in enumerate(row):
        if g >= 0:
            a, b = enc.offsets[i], enc.offsets[i + 1]
            c[a:b] = 0.0
            c[g] = 1.0
    return c


def _proportions(counts, enc):
    """Per clustering, counts divided by their block total (0 where the block is empty)."""
    tot = np.add.reduceat(counts, enc.offsets[:-1], axis=-1) if counts.shape[-1] else counts
    tot = np.repeat(tot, np.diff(enc.offsets), axis=-1)
    return np.divide(counts, tot, out=np.zeros_like(counts, dtype=np.float64), where=tot > 0)


def centers_from_stats(stats, enc, prior):
    """Centroids ``MT`` (``G x K``) of the combined ``stats``.

    Block ``i`` of centroid ``k`` is the label distribution of the members of ``k`` present in
    clustering ``i``; where there are none it is ``prior`` (clustering ``i``'s overall distribution).
    An empty cluster is reseeded at the farthest rows of ``stats`` (as scikit-learn does).
    """
    counts = stats["counts"]
    M = _proportions(counts, enc)
    tot = np.add.reduceat(counts, enc.offsets[:-1], axis=1)
    missing = np.repeat(tot <= 0, np.diff(enc.offsets), axis=1)
    M = np.where(missing, prior[None, :], M)
    empty = np.flatnonzero(stats["sizes"] <= 0)
    for j, k in enumerate(empty):
        if j < stats["far_rows"].shape[0]:
            M[k] = _row_center(stats["far_rows"][j], enc, prior)
    return np.ascontiguousarray(M.T)


def centers_from_partition(gidx, weight, part, K, enc, prior):
    """Centroids ``MT`` of a given partition ``part`` (int, ``0..K-1``) of the rows."""
    counts = np.zeros((K, enc.n_categories))
    kern.partition_counts(
        gidx, np.asarray(weight, dtype=np.float64), np.asarray(part, dtype=np.int64), counts
    )
    sizes = np.bincount(part, weights=weight, minlength=K)
    st = {"counts": counts, "sizes": sizes, "far_rows": np.zeros((0, gidx.shape[1]), dtype=np.int32)}
    return centers_from_stats(st, enc, prior)


def block_cooccurrence(gidx, weight, chosen, n_categories):
    """Label counts (``K x G``) and weights (``K``) of the block's rows carrying each ``chosen`` category.

    Row ``k`` holds the statistics of cluster ``chosen[k]`` of a basic partition, the same kind of
    per-cluster counts :func:`block_step` returns (a row may count in several of them).
    """
    counts = np.zeros((len(chosen), n_categories))
    sizes = np.zeros(len(chosen))
    for k, g in enumerate(chosen):
        members = (gidx == g).any(axis=1)
        rows = gidx[members]
        w = np.broadcast_to(weight[members][:, None], rows.shape)
        ok = rows >= 0
        counts[k] = np.bincount(rows[ok], weights=w[ok], minlength=n_categories)
        sizes[k] = float(weight[members].sum())
    return counts, sizes


def block_closest(gidx, weight, closest, center, csq):
    """``(min(closest, d(., center)), its weighted sum)`` over a block; ``closest=None`` starts fresh."""
    out = np.empty(gidx.shape[0])
    cl = np.empty(0) if closest is None else np.array(closest, copy=True)
    kern.point_distances(gidx, center, csq, cl, out)
    cl = out if closest is None else cl
    return cl, _wsum(weight, cl)


def block_trials(gidx, weight, closest, centers, csqs):
    """Weighted potential ``sum w min(closest, d(., c))`` of each candidate centre ``c``."""
    out = np.empty(gidx.shape[0])
    res = np.empty(len(centers))
    for t, (c, s) in enumerate(zip(centers, csqs, strict=True)):
        kern.point_distances(gidx, c, s, np.empty(0), out)
        res[t] = _wsum(weight, np.minimum(closest, out, out=out))
    return res


def _wsum(weight, values):
    """``sum weight * values`` in this thread: ``np.dot`` hands vectors this long to OpenBLAS's threads,
    which on a loaded machine wait for a core."""
    return float(np.add.reduce(weight * values))


def block_pick(gidx, weight, closest, r):
    """The ``gidx`` row where the block's cumulative ``weight * closest`` reaches ``r``."""
    cs = np.cumsum(weight * closest)
    j = min(int(np.searchsorted(cs, r)), gidx.shape[0] - 1)
    return np.asarray(gidx[j])


def block_row(gidx, j):
    return np.asarray(gidx[j])


def block_memberships(gidx, MT, sq):
    """``(labels, memberships)`` of a block for final centroids ``MT``."""
    labels = np.empty(gidx.shape[0], dtype=np.int64)
    Y = np.empty((gidx.shape[0], MT.shape[1]))
    kern.memberships(gidx, MT, sq, labels, Y)
    return labels, Y


# --------------------------------------------------------------------------- backends and driver


class LocalBlocks:
    """In-memory backend: row blocks of ``gidx`` with their weights, processed in this process."""

    def __init__(self, gidx_blocks, weight_blocks=None, *, weighted_picks=False):
        self.gidx = [np.ascontiguousarray(g) for g in gidx_blocks]
        self.weight = weight_blocks or [np.ones(g.shape[0]) for g in self.gidx]
        # rows stand for their weight's worth of points also where a start picks rows at random
        # (k-means++'s first centre, the 'random' init); off, a pick is uniform over the rows
        self.weighted_picks = weighted_picks
        self.n_rows = [g.shape[0] for g in self.gidx]
        self.reset()

    def reset(self):
        self.labels = [np.full(n, -1, dtype=np.int64) for n in self.n_rows]
        self.closest = [None] * len(self.gidx)

    def take(self, rows):
        """The rows at (sorted) global positions ``rows``, as one array."""
        return _take_blocks(self.gidx, self.n_rows, rows)

    def take_weights(self, rows):
        return _take_blocks(self.weight, self.n_rows, rows)

    def sizes(self, n_categories):
        parts = [block_sizes(g, w, n_categories) for g, w in zip(self.gidx, self.weight, strict=True)]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)

    def step(self, MT, sq, n_far):
        res = [
            block_step(g, w, lab, MT, sq, n_far)
            for g, w, lab in zip(self.gidx, self.weight, self.labels, strict=True)
        ]
        self.labels = [r[1] for r in res]
        return combine_stats(*[r[0] for r in res])

    def row(self, b, j):
        return block_row(self.gidx[b], j)

    def set_closest(self, center, csq):
        res = [
            block_closest(g, w, c, center, csq)
            for g, w, c in zip(self.gidx, self.weight, self.closest, strict=True)
        ]
        self.closest = [r[0] for r in res]
        return np.array([r[1] for r in res])

    def trials(self, centers, csqs):
        return sum(
            block_trials(g, w, c, centers, csqs)
            for g, w, c in zip(self.gidx, self.weight, self.closest, strict=True)
        )

    def pick(self, b, r):
        return block_pick(self.gidx[b], self.weight[b], self.closest[b], r)

    def cooccurrence(self, chosen, n_categories):
        parts = [
            block_cooccurrence(g, w, chosen, n_categories)
            for g, w in zip(self.gidx, self.weight, strict=True)
        ]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)

    def memberships(self, MT, sq):
        res = [block_memberships(g, MT, sq) for g in self.gidx]
        return np.concatenate([r[0] for r in res]), np.concatenate([r[1] for r in res])


def _take_blocks(blocks, n_rows, rows):
    """Rows at sorted global positions ``rows`` of arrays cut into consecutive ``blocks``."""
    edges = np.concatenate([[0], np.cumsum(n_rows)])
    cuts = np.searchsorted(rows, edges)
    return np.concatenate([b[rows[cuts[i] : cuts[i + 1]] - edges[i]] for i, b in enumerate(blocks)])
