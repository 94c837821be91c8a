"""What ``ingest`` writes, a block at a time: the columns' statistics over the observed values, the blocks of
``X`` (imputed, scaled), and the identity of it all that the later stages key on."""

from __future__ import annotations

import json

import numpy as np


def _merge_moments(cnt, mean, m2, block):
    """Merge a block's per-column count, mean and sum of squared deviations (Chan et al.).

    Stable for columns with a large offset, where ``E[x^2] - E[x]^2`` loses every digit.
    """
    ok = np.isfinite(block)
    nb = ok.sum(0).astype(np.float64)
    vals = np.where(ok, block, 0.0)
    mb = vals.sum(0) / np.maximum(nb, 1)
    m2b = (np.where(ok, block - mb, 0.0) ** 2).sum(0)
    total = cnt + nb
    delta = mb - mean
    frac = np.divide(nb, total, out=np.zeros_like(nb), where=total > 0)
    return total, mean + delta * frac, m2 + m2b + delta**2 * cnt * frac


def _blocks(reader, p, mean, center, scale, keep_cols):
    """``(frame, block of X)`` of the rows kept, as ``ingest`` writes them (imputed, scaled, float32)."""
    for offset, frame in reader.chunks():
        block = reader.features(offset, frame)
        if p["impute"] == "mean":
            block = np.where(np.isnan(block), mean, block)
        yield frame, np.ascontiguousarray(((block - center) / scale)[:, keep_cols], dtype=np.float32)


def _identity(content, reader, d, kept):
    """The identity of what ingest writes (the later stages key on it): ``content`` (a sha256 of ``X``'s
    blocks) with its shape, its columns' names, the classes and the reference labels."""
    content.update(json.dumps([[reader.n, d], kept, reader.classes]).encode())
    if reader.y is not None:
        content.update(reader.y.tobytes())
    return content.hexdigest()[:32]
