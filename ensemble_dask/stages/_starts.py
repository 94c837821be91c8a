"""The pair methods' label starts kept in the run store: their key, and their reading and writing.

A start depends only on the labels' content, K and the seed (:func:`starts_key`), so one computation serves
every pair method of a run and any later run on the same labels. The ``consensus`` stage reads and computes
them (``stages.consensus._label_starts``); a workflow computes them while its ``coassoc`` stage runs
(``pipeline.label_starts_alongside``).
"""

from __future__ import annotations

import numbers

import numpy as np

from .._validation import InputError
from ..io.store import stage_hash

__all__ = ["STARTS_CACHE", "starts_key", "is_kept", "kept_starts", "keep_starts"]

#: where the label starts are kept, one ``(candidates, n)`` int32 array per key
STARTS_CACHE = "_cache/starts"
_STARTS_VERSION = 3  # bump when label_starts changes its result (2: HBGF only; 3: HBGF's Lanczos)


def starts_key(store, n_clusters, random_state):
    """The content key of the label starts: the labels' identity, K and the seed (None: not cacheable)."""
    if not isinstance(random_state, numbers.Integral) or isinstance(random_state, bool):
        return None
    try:
        labels_id = store.stage_hash("generate")
    except InputError:
        return None
    params = {"n_clusters": int(n_clusters), "random_state": int(random_state), "version": _STARTS_VERSION}
    return stage_hash(params, [labels_id])


def is_kept(store, key):
    """Whether the store keeps complete starts under ``key``."""
    path = f"{STARTS_CACHE}/{key}"
    return key is not None and path in store and bool(store[path].attrs.get("complete"))


def kept_starts(store, key):
    """The starts kept under ``key`` (a list of int64 label arrays), or None."""
    if not is_kept(store, key):
        return None
    return list(np.asarray(store[f"{STARTS_CACHE}/{key}"][:], dtype=np.int64))


def keep_starts(store, key, starts):
    """Keep ``starts`` under ``key`` (nothing when the key is None or the store is read-only)."""
    if key is None or store.mode == "r":
        return
    arr = store.group.create_array(
        f"{STARTS_CACHE}/{key}",
        data=np.stack(starts).astype(np.int32),
        chunks=(1, max(1, min(len(starts[0]), 1 << 22))),
        overwrite=True,
    )
    arr.attrs["complete"] = True  # set last: a half-written array is never read back
