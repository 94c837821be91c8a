"""Starts for the pair methods (PCC, PPC) computed from the labels matrix.

PCC and PPC fit the co-association pairs, whose objective has many local optima; a start near a good one
matters more than anything else (from a random start PCC can stop far from the consensus that k-means on the
one-hot labels finds). :func:`label_starts` gives a fast consensus partition of the labels,
:class:`~ensemble_dask.consensus.HBGF`'s (spectral, on the bipartite graph of points and
clusters), from which the estimator descends (given as ``init``).

Examples
--------
>>> import numpy as np
>>> from ensemble_dask.coassoc import coassociation
>>> from ensemble_dask.consensus import PCC
>>> labels = np.repeat(np.array([[0, 1], [1, 0], [2, 2]]), 20, axis=0)
>>> pairs = coassociation(labels, strategy="full", seed=0)
>>> model = PCC(3, init=label_starts(labels, 3, random_state=0), random_state=0).fit(pairs)
>>> len(np.unique(model.labels_)), model.converged_
(3, True)
"""

from __future__ import annotations

import contextlib
import numbers
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

from ..._validation import check_labels_matrix, check_random_state
from .._common._kernels import column_label_range
from .._common.encoding import distinct_rows
from ..baselines import HBGF

__all__ = ["import_start_modules", "label_starts", "spectral_partition", "two_label_columns"]

#: up to this many distinct label rows HBGF runs on one BLAS/OpenMP thread: the problem is too small to
#: share, and on a loaded machine the threads' start-up and spinning cost more than the work
ONE_THREAD_ROWS = 50_000


def label_starts(labels, n_clusters, *, random_state=None):
    """``[HBGF labels]`` of ``labels`` (n x N, -1 = absent): the start of PCC/PPC (a list, as ``init`` takes).

    HBGF (:class:`~ensemble_dask.consensus.HBGF`, a spectral partition of the bipartite graph
    of points and base clusters) runs on the distinct label rows weighted by their multiplicity (the same fit
    as on every row), which an ensemble of a few dozen clusterings has far fewer of than points. The pair
    methods then descend from it to the nearest KKT point.

    Why HBGF's partition and not KCC's (k-means on the one-hot labels), nor the one of the two with the lower
    PCC objective: the pair objective counts pairs, so a large cluster that the base
    partitions often split weighs more than small clusters kept whole, and from KCC's partition (k-means'
    own preference for equal sizes) the descent keeps that split. The benchmarks page ("Starts") has the
    measurements, on 12 data sets x 2 ensembles, and the one case where it lost.
    """
    labels = check_labels_matrix(labels)
    cols = two_label_columns(labels)  # a clustering of one label separates nothing (and HBGF refuses it)
    if 0 < cols.size < labels.shape[1]:
        labels = np.ascontiguousarray(labels[:, cols])
    first, mult, inv = distinct_rows(labels)
    n_rows = labels.shape[0] if first is None else first.size
    if n_rows <= n_clusters:  # no more distinct label rows than clusters: one cluster each
        return [inv.astype(np.int64)]
    if not isinstance(random_state, (numbers.Integral, type(None))):  # a Generator: one seed, drawn here
        random_state = int(check_random_state(random_state).integers(2**31 - 1))
    hbgf = HBGF(n_clusters, random_state=random_state)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a start need not have converged: PCC/PPC report their own status
        with threadpool_limits(1) if n_rows <= ONE_THREAD_ROWS else contextlib.nullcontext():
            # on the distinct rows where they lie in labels: neither compressed again nor copied
            hbgf._fit(labels, mult, distinct=True, labels_only=True, rows=first)
    return [hbgf.labels_[inv].astype(np.int64)]


def import_start_modules():
    """Import now what :func:`label_starts` imports on first use: HBGF's eigen-solvers and k-means, and what
    Numba imports on a process's first kernel call (its extensions' entry points, its typing registries).

    A caller that computes a start on a thread of its own while its own thread goes on calls this first, from
    its own thread (importing this module has then imported the package's part of it); the start's thread then
    imports nothing. Two threads that import at once can meet a concurrent circular import, which CPython's
    import locks resolve by handing one of them a half-initialised module: ``benchmarks/peers.py --real``
    failed so in most fresh processes (``ImportError: cannot import name 'PairCounts' from partially
    initialized module 'ensemble_dask.coassoc.counting'``), its start thread importing
    ``consensus._common.base``, which imports ``coassoc.counting``, while its main thread ran the ``__init__``
    of :mod:`ensemble_dask.coassoc`, which imports it too.
    """
    from ...runtime.imports import import_once

    import_once("scipy.linalg", "scipy.sparse.linalg", "sklearn.cluster")
    two_label_columns(np.zeros((1, 1), dtype=np.int64))  # a first kernel call: Numba's own imports, here


def spectral_partition(gidx, w, k, seed):
    """HBGF's partition (int64 labels) of the rows ``gidx`` weighted by ``w``, from the clusterings that
    hold two labels among them (HBGF refuses the others, which separate nothing); None when there is no
    such clustering or fewer rows than ``k``. A start: HBGF's own convergence warnings are silenced."""
    cols = two_label_columns(gidx)
    if cols.size == 0 or k < 2 or gidx.shape[0] < k:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = HBGF(k, random_state=seed).fit(np.ascontiguousarray(gidx[:, cols]), sample_weight=w)
    return fit.labels_.astype(np.int64)


def two_label_columns(labels):
    """Indices of the columns of ``labels`` (``-1`` = missing) that hold at least two distinct labels."""
    labels = np.asarray(labels)
    if labels.dtype.kind != "i":
        labels = labels.astype(np.int64)
    # one pass over the rows, no n x N temporaries
    lo = np.full(labels.shape[1], np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(labels.shape[1], -1, dtype=np.int64)
    column_label_range(np.ascontiguousarray(labels), lo, hi)
    return np.flatnonzero(hi > lo)
