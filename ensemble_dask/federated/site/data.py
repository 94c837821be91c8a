"""A site's own rows: read at join, counted for the category space, scored, and its memberships written.

Called by the site's agent (:mod:`.agent`, :mod:`.ops`) on its session ``st`` with arguments it has checked;
what these return is one statistics vector, which the agent masks, or the counts told at join.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..._validation import InputError, check_labels_matrix
from ...rowblocks.bce import read_labels

__all__ = [
    "rows_key", "bce_open", "bce_label_bits", "bce_reference_bits", "bce_label_counts", "bce_contingency",
    "write_memberships",
]  # fmt: skip


def rows_key(labels):
    """SHA-256 of the site's labels (shape, dtype, bytes): a checkpoint is bound to the rows it was written
    for, so a site whose rows changed finds none, whatever layout the coordinator names (never sent)."""
    arr = np.ascontiguousarray(labels)
    digest = hashlib.sha256(f"{arr.shape}{arr.dtype.str}".encode())
    digest.update(memoryview(arr).cast("B"))
    return digest.hexdigest()


def bce_open(st, url, storage_options, reference):
    """Read the site's rows (and reference labels); returns only their counts."""
    try:
        labels = check_labels_matrix(read_labels(url, storage_options=storage_options))
    except InputError as exc:
        raise InputError(f"site {st.name!r}: labels at {url!r}: {exc}") from exc
    except Exception as exc:  # missing file, unreadable store, ...
        raise InputError(f"site {st.name!r}: cannot read labels at {url!r}: {exc}") from exc
    st.data["labels"] = labels
    st.data["rows_key"] = rows_key(labels)
    if reference:
        try:
            ref = np.asarray(read_labels(reference, storage_options=storage_options)).ravel()
        except Exception as exc:
            raise InputError(
                f"site {st.name!r}: cannot read reference labels at {reference!r}: {exc}"
            ) from exc
        if ref.shape[0] != labels.shape[0]:
            raise InputError(
                f"site {st.name!r}: reference has {ref.shape[0]} labels for {labels.shape[0]} rows"
            )
        st.data["reference"] = ref.astype(np.int64)
    return {"n_rows": int(labels.shape[0]), "n_clusterings": int(labels.shape[1])}


def _bit_onehot(columns):
    """Per column (64 bins), the count of the entries of each bit length (``-1``, missing: none): a sum over
    the rows of each row's own one-hot, so the round's total depends on the pooled rows alone (a one-hot of
    each site's largest value counted the sites per bit length, which told two splits of the same rows
    apart). The coordinator reads the largest bin with a count, as before."""
    powers = np.left_shift(1, np.arange(63, dtype=np.int64))
    out = np.zeros((len(columns), 64))
    for j, col in enumerate(columns):
        col = np.asarray(col, dtype=np.int64)
        out[j] = np.bincount(np.searchsorted(powers, col[col >= 0], side="right"), minlength=64)
    return out.ravel()


def bce_label_bits(st):
    return _bit_onehot(st.data["labels"].T)


def bce_reference_bits(st):
    return _bit_onehot([st.data["reference"]])


def bce_label_counts(st, sizes):
    """Per clustering, the count of each label ``0 .. sizes[j] - 1`` among the site's rows, then the count
    of its labels ``>= sizes[j]`` (an overflow entry: summed like the rest, so that whether a site's labels
    fit shows only in the total, never in a refusal of that site alone)."""
    labels = st.data["labels"]
    parts = []
    for j, size in enumerate(sizes):
        col = labels[:, j]
        col = col[col >= 0]
        over = col >= size
        parts.append(np.bincount(col[~over], minlength=size).astype(np.float64))
        parts.append(np.array([float(over.sum())]))
    return np.concatenate(parts) if parts else np.zeros(0)


def write_memberships(output, memb, storage_options):
    """Write a site's memberships (float32) to its own ``output`` (``.npy`` path or zarr URL)."""
    from ...rowblocks.bce import _local_path

    memb32 = memb.astype(np.float32)
    if output.endswith(".npy"):
        np.save(_local_path(output), memb32)
        return
    import zarr

    from ...io.urls import make_zarr_store

    z = zarr.create_array(
        make_zarr_store(output, storage_options),
        shape=memb32.shape,
        dtype="float32",
        chunks=(min(memb32.shape[0], 65536) or 1, memb32.shape[1]),
        overwrite=True,
    )
    z[:] = memb32


def bce_contingency(st, n_classes):
    """``k x n_classes`` counts of (consensus label, reference class) over the site's labelled rows."""
    ref = st.data["reference"]
    pred = st.data["labels_"]
    keep = (ref >= 0) & (ref < n_classes)  # classes beyond n_classes: counted in the last entry
    table = np.zeros((st.data["k"], n_classes))
    np.add.at(table, (pred[keep], ref[keep]), 1.0)
    return np.concatenate([table.ravel(), [float(np.sum(ref >= n_classes))]])
