"""Starts for the pair methods (PCC, PPC) computed from the labels matrix.

PCC and PPC fit the co-association pairs, whose objective has many local optima; a start near a good one
matters more than anything else (issue 10: from a random start PCC stopped at ARI 0.76 where k-means on the
one-hot labels reached 0.997). :func:`label_starts` offers two fast consensus partitions of the labels, by
:class:`~ensemble_dask.consensus.kcc.KCC` (k-means on the one-hot labels) and by
:class:`~ensemble_dask.consensus.baselines_labels.HBGF` (spectral, on the bipartite graph of points and
clusters); given as ``init``, the estimator descends from the one with the lower objective.

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

import numbers
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

from .._threads import thread_map
from .._validation import check_labels_matrix, check_random_state
from ._bce_common import compress_rows
from ._bce_seeding import two_label_columns
from .baselines_labels import HBGF
from .kcc import KCC

__all__ = ["label_starts"]

#: k-means++ starts of the KCC candidate: cheap, as above 20,000 distinct label rows KCC compares its starts on a
#: sample of them and runs only the best on all (on the 500,000-point sub50 blobs one start reached ARI 0.83)
KCC_N_INIT = 3
#: up to this many distinct label rows the starts run on one BLAS/OpenMP thread: the problem is too small to
#: share, and on a loaded machine the threads' start-up and spinning cost 10x the work (0.16 s against 1.8 s
#: for 500,000 points with 1,900 distinct rows)
ONE_THREAD_ROWS = 50_000
#: above it, KCC and HBGF fit side by side on two threads while the distinct label rows take at most this many
#: bytes: on all of KDD 10% (494,021 x 100 labels, 198 MB) side by side added 962 MiB at the peak against 778 MiB
#: one after the other, for 3.9 s against 5.6 s
SIDE_BY_SIDE_BYTES = 64 << 20


def label_starts(labels, n_clusters, *, random_state=None):
    """``[KCC labels, HBGF labels]`` of ``labels`` (n x N, -1 = absent): candidate starts for PCC/PPC.

    Both run on the distinct label rows weighted by their multiplicity (the same fit as on every row:
    points with equal labels are equal to both methods), which an ensemble of a few dozen clusterings
    has far fewer of than points.
    """
    labels = check_labels_matrix(labels)
    cols = two_label_columns(labels)  # a clustering of one label separates nothing (and KCC/HBGF refuse it)
    if 0 < cols.size < labels.shape[1]:
        labels = np.ascontiguousarray(labels[:, cols])
    rows, mult, inv = compress_rows(labels)
    if rows.shape[0] <= n_clusters:  # no more distinct label rows than clusters: one cluster each
        return [inv.astype(np.int64)]
    if not isinstance(random_state, (numbers.Integral, type(None))):  # a Generator: one seed each, drawn
        # here, so that the two fits never share it (on two threads the order of their draws would vary)
        random_state = [int(s) for s in check_random_state(random_state).integers(2**31 - 1, size=2)]
    else:
        random_state = [random_state, random_state]
    kcc = KCC(n_clusters, n_init=KCC_N_INIT, random_state=random_state[0])
    hbgf = HBGF(n_clusters, random_state=random_state[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a start need not have converged: PCC/PPC report their own status
        if rows.shape[0] <= ONE_THREAD_ROWS:
            with threadpool_limits(1):
                kcc.fit(rows, sample_weight=mult)
                hbgf.fit(rows, sample_weight=mult)
        elif rows.nbytes > SIDE_BY_SIDE_BYTES:  # one after the other: their working sets never add up
            kcc.fit(rows, sample_weight=mult)
            hbgf.fit(rows, sample_weight=mult)
        else:  # the two fits side by side (KCC's kernels release the GIL); each is deterministic on its own
            thread_map(lambda m: m.fit(rows, sample_weight=mult), [kcc, hbgf], max_threads=2)
    return [kcc.labels_[inv], hbgf.labels_[inv]]
