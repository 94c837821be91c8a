"""How well a partition agrees with the base clusterings, from the labels alone (no reference labels)."""

from __future__ import annotations

import numpy as np

from ..._validation import InputError

__all__ = ["anmi"]


def anmi(consensus, labels, block_rows=1 << 20):
    """Average normalised mutual information of the partition ``consensus`` (``n`` ints >= 0) with each base
    clustering of ``labels`` (``n x N``, ``-1`` absent; an array or a zarr array, read a block of rows at a
    time): Strehl and Ghosh's (2002, eq. 4) criterion of a consensus, which needs no reference labels. Each
    clustering's NMI (``I / sqrt(H H')``) is over the rows it labels; 0 where either partition has one
    cluster there."""
    consensus = np.asarray(consensus, dtype=np.int64)
    n, N = labels.shape
    if consensus.shape != (n,) or (n and consensus.min() < 0):
        raise InputError(f"consensus must hold a label >= 0 for each of the {n} rows; got {consensus.shape}")
    K = int(consensus.max()) + 1 if n else 1
    tables = [np.zeros((0, K)) for _ in range(N)]
    for start in range(0, n, block_rows):
        block = np.asarray(labels[start : start + block_rows])
        mine = consensus[start : start + block.shape[0]]
        for j in range(N):
            col = block[:, j]
            seen = col >= 0
            if not seen.any():
                continue
            k = int(col[seen].max()) + 1
            if k > tables[j].shape[0]:
                tables[j] = np.vstack([tables[j], np.zeros((k - tables[j].shape[0], K))])
            cells = col[seen].astype(np.int64) * K + mine[seen]
            tables[j][:k] += np.bincount(cells, minlength=k * K).reshape(k, K)
    return float(np.mean([_nmi(t) for t in tables])) if N else 0.0


def _nmi(table):
    total = table.sum()
    if total <= 0:
        return 0.0
    p = table / total
    pa, pb = p.sum(axis=1), p.sum(axis=0)
    ha = -np.sum(pa[pa > 0] * np.log(pa[pa > 0]))
    hb = -np.sum(pb[pb > 0] * np.log(pb[pb > 0]))
    if ha < 1e-12 or hb < 1e-12:  # one cluster (up to rounding): no information
        return 0.0
    nz = p > 0
    mi = np.sum(p[nz] * np.log(p[nz] / np.outer(pa, pb)[nz]))
    return float(max(mi, 0.0) / np.sqrt(ha * hb))
