"""Evaluation criteria for hard and soft partitions (NumPy only).

All hard-partition criteria ignore points whose predicted label is ``-1`` (absent from a
subsampled base clustering), so the accuracy of an incomplete partition is computed on the
points it actually clustered, as in papers/003 Sect. 7.3.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from ._validation import InputError

__all__ = [
    "contingency",
    "h_criterion",
    "ari",
    "nmi",
    "partition_scores",
]


def _paired(labels_pred, labels_true):
    pred = np.asarray(labels_pred).ravel()
    true = np.asarray(labels_true).ravel()
    if pred.shape != true.shape:
        raise InputError(
            f"labels_pred and labels_true must have the same length; got {pred.size} and {true.size}"
        )
    keep = pred >= 0
    return pred[keep], true[keep]


def contingency(labels_pred, labels_true):
    """Dense contingency table ``M[a, b] = |P_a ∩ Q_b|`` over points with ``labels_pred >= 0``."""
    pred, true = _paired(labels_pred, labels_true)
    _, p = np.unique(pred, return_inverse=True)
    _, t = np.unique(true, return_inverse=True)
    table = np.zeros((p.max(initial=-1) + 1, t.max(initial=-1) + 1), dtype=np.int64)
    np.add.at(table, (p, t), 1)
    return table


def h_criterion(labels_pred, labels_true):
    """Accuracy under the best one-to-one matching of clusters to classes (papers/003 eq. 11).

    ``H(P, Q) = (1/n) max_v sum_j |P_j ∩ Q_{v_j}|``; the smaller partition is padded with
    empty clusters, so unmatched clusters count as errors. Returns a float in [0, 1]
    (``nan`` when no point is labelled).

    Examples
    --------
    >>> h_criterion([0, 0, 1, 1], [1, 1, 0, 0])
    1.0
    >>> h_criterion([0, 0, 0, 1], [0, 0, 1, 1])
    0.75
    """
    table = contingency(labels_pred, labels_true)
    n = table.sum()
    if n == 0:
        return float("nan")
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum() / n)


def ari(labels_pred, labels_true):
    """Adjusted Rand index over the points with ``labels_pred >= 0``."""
    pred, true = _paired(labels_pred, labels_true)
    return float(adjusted_rand_score(true, pred)) if pred.size else float("nan")


def nmi(labels_pred, labels_true):
    """Normalised mutual information (arithmetic mean) over the points with ``labels_pred >= 0``."""
    pred, true = _paired(labels_pred, labels_true)
    return float(normalized_mutual_info_score(true, pred)) if pred.size else float("nan")


def partition_scores(labels_pred, labels_true):
    """``{"H": ..., "ARI": ..., "NMI": ...}`` of one (possibly incomplete) partition."""
    return {
        "H": h_criterion(labels_pred, labels_true),
        "ARI": ari(labels_pred, labels_true),
        "NMI": nmi(labels_pred, labels_true),
    }
