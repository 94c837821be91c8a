"""KCC on a Dask cluster: Lloyd's assignment runs on row blocks of ``labels`` where they live.

Each row block of the ``n x N`` labels matrix (a zarr array or ``.npy`` file at a URL, or an
in-memory array) is read by a task on a worker and stays there encoded, with the block's current
assignment (a URL is read twice, once for its labels' categories and once to encode it, so that the
raw labels are never held next to their encoding: :class:`~.bce.LabelBlocks`). Per Lloyd iteration the
coordinator submits one task per block with the current centroids (``sum_i K_i x K`` floats); only the block's
sufficient statistics leave the worker (per cluster, per clustering and label counts, cluster sizes, squared
error, the number of points that changed cluster, and the few rows farthest from their centroid that reseed an
empty cluster), are combined in a tree on the cluster, and one total reaches the coordinator. k-means++ runs
the same way: the blocks keep their distances to the chosen centres and return only their sums and, for the
block a random draw falls in, one row; ``init="spectral"`` (the default) fetches a uniform sample of up
to ``max(20,000, 50 K)`` rows to the coordinator for HBGF's partition. The driver, the starts and the centroid
update are those of :class:`~ensemble_dask.consensus.KCC` (:func:`~ensemble_dask.consensus.kcc._kcc.fit_kcc`),
so the fit equals the in-memory one up to floating-point summation order.

This module only decides where the in-memory functions run; the algorithm lives in
:mod:`ensemble_dask.consensus.kcc._kcc`.
"""

from __future__ import annotations

import numpy as np

from .._validation import InputError, check_labels_matrix, check_random_state
from ..consensus._common.encoding import Encoding, check_encoding, column_categories
from ..consensus.kcc import KCC
from ..consensus.kcc._kcc import fit_kcc
from .bce import LabelBlocks
from .blocks import DaskBlocks, sampled_kcc_start  # noqa: F401 (re-exported)

__all__ = ["fit_kcc_dask", "fit_gkcc_dask", "DaskBlocks"]


def _block_categories(block):
    block = check_labels_matrix(block)
    return block.shape[1], column_categories(block)


def _encode_block(block, enc):
    return enc.transform(block)


def fit_kcc_dask(labels, n_clusters=2, *, client=None, block_rows=None, storage_options=None, **kcc_params):
    """Fit :class:`~ensemble_dask.consensus.KCC` with the Lloyd assignment on row blocks on Dask.

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
    est._validate_params()
    source = LabelBlocks(client, labels, block_rows, storage_options, "kcc")
    blocks = source.blocks
    metas = client.gather(source.map(_block_categories))
    if len({m[0] for m in metas}) != 1:
        raise InputError(
            f"labels blocks disagree on the number of clusterings: {sorted({m[0] for m in metas})}"
        )
    cats = [np.unique(np.concatenate([m[1][i] for m in metas])).astype(np.int64) for i in range(metas[0][0])]
    enc = Encoding.from_categories(cats)
    n, N = blocks[-1][1], metas[0][0]
    check_encoding(enc, (n, N))
    est._check_data(n, enc.n_categories)
    gidx = source.map(_encode_block, enc)
    source.release()
    backend = DaskBlocks(client, gidx, [b - a for a, b in blocks])
    rng = check_random_state(est.random_state)
    return fit_kcc(est, backend, enc, rng, start=sampled_kcc_start(est, backend, enc, rng))


def _candidate_mapper(client):
    """``mapper`` for :meth:`GKCC.fit`: a step's candidates as tasks, the shared arrays sent once."""

    def mapper(func, args):
        shared = client.scatter(list(args[0][:5]), broadcast=True, hash=False)
        per = list(zip(*[a[5:] for a in args], strict=True))
        futures = client.map(func, *[[f] * len(args) for f in shared], *per, pure=False)
        return client.gather(futures)

    return mapper


def fit_gkcc_dask(labels, n_clusters=2, *, client=None, **gkcc_params):
    """Fit :class:`~ensemble_dask.consensus.GKCC` with each step's candidate k-means in groups as Dask
    tasks.

    The candidates' results are gathered in their order, so the fit equals the in-memory one.
    """
    from ..consensus.kcc import GKCC

    if client is None:
        from distributed import get_client

        client = get_client()
    # one group of candidates per worker thread (each group runs its candidates in shared passes)
    n_tasks = max(1, sum(client.nthreads().values()))
    return GKCC(n_clusters, **gkcc_params).fit(labels, mapper=_candidate_mapper(client), n_tasks=n_tasks)
