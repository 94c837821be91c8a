"""The labels matrix as the label methods see it: each clustering's sorted distinct labels and every
label's global category index ``offset_i + code`` (``-1`` for missing), as :func:`encode` gives them, and the
distinct rows with their multiplicities (:func:`compress_rows`)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..._validation import InputError, check_labels_matrix
from . import _kernels as kern

__all__ = [
    "Encoding",
    "UnseenLabelsWarning",
    "column_categories",
    "encode",
    "encode_new_labels",
    "check_encoding",
    "compress_rows",
    "distinct_rows",
]


class UnseenLabelsWarning(UserWarning):
    """``transform`` or ``predict`` met base labels absent from the fit; they are treated as missing."""


@dataclass(frozen=True)
class Encoding:
    """Global category indices of a labels matrix.

    Attributes
    ----------
    categories : list of ndarray
        Sorted distinct labels of each clustering.
    offsets : ndarray of int64, shape (N + 1,)
        Category ``j`` of clustering ``i`` has global index ``offsets[i] + j``.
    """

    categories: list
    offsets: np.ndarray

    @classmethod
    def from_categories(cls, categories):
        cats = [np.asarray(c, dtype=np.int64) for c in categories]
        sizes = np.array([c.size for c in cats], dtype=np.int64)
        return cls(cats, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))

    @property
    def n_clusterings(self):
        return len(self.categories)

    @property
    def n_categories(self):
        return int(self.offsets[-1])

    def lookup(self, size):
        """``(lut, lut_offsets)``: label ``v`` of clustering ``i`` has global index
        ``lut[lut_offsets[i] + v]`` (int32, ``-1`` for a label the encoding has not seen), or None when the
        labels' values are too large for such a table next to a labels matrix of ``size`` entries."""
        tops = [int(c[-1]) + 1 if c.size else 0 for c in self.categories]
        if sum(tops) > 4 * size + 1024:
            return None
        lut_off = np.concatenate([[0], np.cumsum(tops)]).astype(np.int64)
        lut = np.full(lut_off[-1], -1, dtype=np.int32)
        for i, cats in enumerate(self.categories):
            lut[lut_off[i] + cats] = self.offsets[i] + np.arange(cats.size)
        return lut, lut_off

    @property
    def column(self):
        """Clustering of each global category, shape (G,)."""
        return np.repeat(np.arange(self.n_clusterings), np.diff(self.offsets))

    def transform(self, labels):
        """``gidx`` (int32, ``-1`` where missing or unseen) of a labels block."""
        labels = np.ascontiguousarray(labels)
        table = self.lookup(labels.size)
        if table is not None:
            lut, lut_off = table
            gidx = np.empty(labels.shape, dtype=np.int32)
            if labels.dtype not in (np.int32, np.int64):  # int32 labels are read as they are (no copy)
                labels = labels.astype(np.int64)
            kern.encode_lut(labels, lut, lut_off, gidx)
            return gidx
        gidx = np.full(labels.shape, -1, dtype=np.int32)
        for i, cats in enumerate(self.categories):
            col = labels[:, i]
            obs = col >= 0
            if cats.size == 0 or not obs.any():
                continue
            pos = np.minimum(np.searchsorted(cats, col[obs]), cats.size - 1)
            gidx[obs, i] = np.where(cats[pos] == col[obs], self.offsets[i] + pos, -1)
        return gidx


def column_categories(labels):
    """Sorted distinct non-missing labels of each column."""
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.size and labels.dtype.kind in "iu":
        top = np.maximum(labels.max(axis=0).astype(np.int64) + 1, 0)
        if int(top.max()) <= 4 * labels.shape[0] + 1024:  # small labels: one pass over the rows
            seen = np.zeros((labels.shape[1], int(top.max())), dtype=np.bool_)
            kern.column_presence(np.ascontiguousarray(labels), top, seen)
            return [np.flatnonzero(row).astype(np.int64) for row in seen]
    out = []
    for col in np.asarray(labels).T:
        obs = col[col >= 0]
        if obs.size and int(obs.max()) <= 4 * col.size + 1024:
            out.append(np.flatnonzero(np.bincount(obs)).astype(np.int64))
        else:
            out.append(np.unique(obs).astype(np.int64))
    return out


def encode(labels):
    """Validated ``(gidx, Encoding)`` of an in-memory labels matrix (no checks on its content)."""
    labels = np.asarray(labels)
    enc = Encoding.from_categories(column_categories(labels))
    return enc.transform(labels), enc


def check_encoding(enc, shape, name="labels"):
    """Reject a labels matrix of ``shape`` all missing, or with a clustering of fewer than 2 labels."""
    if all(c.size == 0 for c in enc.categories):
        raise InputError(f"{name} are all missing (-1) in shape {tuple(shape)}; nothing to fit")
    for i, u in enumerate(enc.categories):
        if u.size < 2:
            what = "no label (all missing)" if u.size == 0 else f"a single label {int(u[0])}"
            raise InputError(f"{name} column {i} has {what}; each basic partition needs at least 2 clusters")


def _int_rows(gidx):
    """``gidx`` C-contiguous as int32 or int64 (kept as it is when it already is one of them)."""
    gidx = np.asarray(gidx)
    return np.ascontiguousarray(gidx, dtype=gidx.dtype if gidx.dtype in (np.int32, np.int64) else np.int64)


def compress_rows(gidx):
    """Distinct rows of ``gidx``: ``(distinct rows, multiplicities as float64, inverse index)``.

    Identical label rows have identical E-steps (same start, same parameters), so the
    E-step runs once per distinct row, weighted by its multiplicity. When every row is distinct
    (subsampled base clusterings: each row has its own pattern of missing labels) ``gidx`` itself
    is returned, in its own order, with no copy.
    """
    gidx = _int_rows(gidx)
    first, counts, inverse = distinct_rows(gidx)
    if first is None:
        return gidx, counts, inverse
    return np.ascontiguousarray(gidx[first]), counts, inverse


def distinct_rows(gidx):
    """``(first, multiplicities as float64, inverse index)`` of the distinct rows of the integer matrix
    ``gidx``: the distinct rows are ``gidx[first]`` (``first`` is None when every row is distinct; the rows
    are then ``gidx`` itself in its own order), as :func:`compress_rows` gives them, without their copy."""
    if gidx.shape[0] == 0:
        return None, np.zeros(0), np.zeros(0, dtype=np.int64)
    # distinct 64-bit row hashes first (one sort of integers), checked against the rows; the exact
    # byte-wise comparison is the fallback should two distinct rows ever share a hash
    # (np.unique's first, inverse and counts by a radix sort)
    first, inverse, counts = kern.unique_hashes(kern.row_hashes(gidx))
    if first.size == gidx.shape[0]:  # distinct hashes: distinct rows
        return None, np.ones(gidx.shape[0]), np.arange(gidx.shape[0], dtype=np.int64)
    if not kern.rows_match(gidx, first, inverse):
        rows = np.ascontiguousarray(gidx)
        keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
        _, first, inverse, counts = np.unique(
            keys, return_index=True, return_inverse=True, return_counts=True
        )
        inverse = inverse.ravel().astype(np.int64)
    return first, counts.astype(np.float64), inverse


def encode_new_labels(labels, encoding, *, stacklevel):
    """``(labels, gidx)``: new rows' labels checked and coded with the :class:`Encoding` of a fit; another
    number of clusterings is refused, and labels the fit never saw are missing (an
    :class:`UnseenLabelsWarning`, ``stacklevel`` frames up from the caller, says how many)."""
    labels = check_labels_matrix(labels)
    if labels.shape[1] != encoding.n_clusterings:
        raise InputError(
            f"labels must have the {encoding.n_clusterings} clusterings of the fit; got {labels.shape[1]}"
        )
    gidx = encoding.transform(labels)
    n_unseen = int(np.count_nonzero(gidx < 0) - np.count_nonzero(labels < 0))
    if n_unseen:
        warnings.warn(
            f"{n_unseen} base labels were not seen in the fit; they are treated as missing",
            UnseenLabelsWarning,
            stacklevel=stacklevel + 1,
        )
    return labels, gidx
