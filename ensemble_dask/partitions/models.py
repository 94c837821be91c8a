"""What a base clustering needs to label a new row: the centre of each of its clusters.

A base clustering labels a new row by its nearest cluster centre, the mean of the cluster's members in ``X``
(for k-means, its fitted centre: a converged Lloyd iteration's centres are its clusters' means). For the other
algorithms (agglomerative, spectral) this is a rule of ours, documented here: their clusters are not convex in
general, and a nearest-centre label can differ from the one a refit would give. Plain arrays in and out.
"""

from __future__ import annotations

import numba
import numpy as np

from ..runtime import numba_cache  # noqa: F401 (registers the package's cache locator: before the kernels)

__all__ = ["ClusterCenters", "nearest_centers"]


@numba.njit(cache=True, nogil=True)
def _add_cluster_sums(X, labels, sums, counts):
    """``sums[u, c] += X[i]`` and ``counts[u, c] += 1`` for each row ``i`` of cluster ``c`` of
    clustering ``u``."""
    n, d = X.shape
    N = labels.shape[1]
    for i in range(n):
        for u in range(N):
            c = labels[i, u]
            if c >= 0:
                counts[u, c] += 1.0
                for f in range(d):
                    sums[u, c, f] += X[i, f]


@numba.njit(cache=True, nogil=True)
def _nearest(X, centers, present, out):
    """``out[i, u]``: the cluster of clustering ``u`` whose centre is nearest to row ``i`` (squared
    Euclidean; the first of equals)."""
    m, d = X.shape
    N, kmax = present.shape
    for i in range(m):
        for u in range(N):
            best = np.inf
            arg = -1
            for c in range(kmax):
                if not present[u, c]:
                    continue
                dist = 0.0
                for f in range(d):
                    diff = X[i, f] - centers[u, c, f]
                    dist += diff * diff
                if dist < best:
                    best = dist
                    arg = c
            out[i, u] = arg


class ClusterCenters:
    """Accumulates, block by block of rows, the centres of every base clustering's clusters.

    ``add(X_block, labels_block)`` with the rows' features and base labels (``-1``: not in that clustering);
    ``centers`` (N x k_max x d float64, NaN where a clustering has no such cluster) once every row was added;
    ``k_max`` grows with the labels seen, so the rows are read once.
    """

    def __init__(self, n_clusterings, d):
        self.sums = np.zeros((n_clusterings, 0, d))
        self.counts = np.zeros((n_clusterings, 0))

    def add(self, X, labels):
        grow = int(np.max(labels, initial=-1)) + 1 - self.counts.shape[1]
        if grow > 0:
            self.sums = np.pad(self.sums, ((0, 0), (0, grow), (0, 0)))
            self.counts = np.pad(self.counts, ((0, 0), (0, grow)))
        _add_cluster_sums(
            np.ascontiguousarray(X, dtype=np.float64), np.ascontiguousarray(labels), self.sums, self.counts
        )

    @property
    def centers(self):
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.sums / self.counts[:, :, None]


def nearest_centers(X, centers):
    """Base labels (``m x N`` int32) of the rows ``X`` (``m x d``): per clustering, the nearest of its
    cluster ``centers`` (``N x k_max x d``, NaN rows: no such cluster)."""
    centers = np.ascontiguousarray(centers, dtype=np.float64)
    present = ~np.isnan(centers).any(axis=2)
    out = np.empty((X.shape[0], centers.shape[0]), dtype=np.int32)
    _nearest(np.ascontiguousarray(X, dtype=np.float64), centers, present, out)
    return out
