"""An estimator's own run stores: where one lives for the workers of its cluster to see it; their removal.

A :class:`~ensemble_dask.ConsensusClustering` given no ``store`` keeps its runs in a store of its own: in this
process's memory when its cluster runs in this process (the embedded one, or any of ``inproc://`` address),
in a temporary folder of this machine when the cluster's workers are other processes here. A store of its
own is removed once the estimator is gone (at the next fit in the process, :func:`remove_abandoned`).
"""

from __future__ import annotations

import os
import tempfile

from .._validation import InputError

__all__ = ["ABANDONED", "MEMORY_ROOT", "is_own_store", "own_store_root", "remove_abandoned", "remove_store"]

#: the root of the stores of this process's memory
MEMORY_ROOT = "memory://ensemble_dask/"
#: own stores whose estimator is gone, removed at the next fit
ABANDONED = []


def _folder_root():
    return os.path.join(tempfile.gettempdir(), "ensemble_dask-")


def own_store_root(address):
    """The root of an estimator's own store for the cluster at ``address`` (None: an embedded one)."""
    if address is None or address.startswith("inproc://"):
        return MEMORY_ROOT
    host = address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise InputError(
            f"the cluster at {address!r} is not on this machine: its workers can see neither this process's "
            "memory nor its temporary folders; give store= (a path they share, or an s3:// URL)"
        )
    return _folder_root()


def is_own_store(url):
    """Whether ``url`` is a store of an estimator's own (in memory, or in a temporary folder of its own)."""
    return url.startswith((MEMORY_ROOT, _folder_root()))


def remove_store(url):
    """Remove a folder of this process's memory or of this machine at ``url``, if it is there."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def remove_abandoned():
    while ABANDONED:
        remove_store(ABANDONED.pop())
