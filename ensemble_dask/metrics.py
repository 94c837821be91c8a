"""Evaluation criteria for hard and soft partitions (NumPy only).

All hard-partition criteria ignore points whose predicted label is ``-1`` (absent from a
subsampled base clustering), so the accuracy of an incomplete partition is computed on the
points it actually clustered, as in Lourenço et al. 2015 Sect. 7.3.
"""

from __future__ import annotations

import numpy as np

from ._validation import InputError

__all__ = [
    "contingency",
    "h_criterion",
    "ari",
    "nmi",
    "partition_scores",
    "micro_precision",
    "normalized_rand",
    "js_divergence",
    "js_criterion",
    "cluster_overlap",
    "soft_centroids",
    "contingency_counts",
    "table_scores",
]


def _linear_sum_assignment(cost, maximize=False):
    """scipy's, imported on first use (scipy.optimize takes a quarter of a second; a federation site, which
    imports this module for its counts, never matches clusters)."""
    from scipy.optimize import linear_sum_assignment

    return linear_sum_assignment(cost, maximize=maximize)


def _max_assignment(table):
    """``(rows, cols)``: a one-to-one matching of the rows of ``table`` to its columns of the largest total,
    as ``linear_sum_assignment(table, maximize=True)`` finds one (a tie may be matched otherwise, at the same
    total), by scipy's sparse solver (:func:`scipy.sparse.csgraph.min_weight_full_bipartite_matching`): a
    score needs no ``scipy.optimize``, a quarter of a second to import."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import min_weight_full_bipartite_matching

    t = np.asarray(table, dtype=np.float64)
    if t.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # every pair an edge (the solver reads a zero as none): the weights shifted above zero, which adds the
    # same to every full matching (each has min(rows, columns) edges)
    return min_weight_full_bipartite_matching(csr_matrix(t - t.min() + 1.0), maximize=True)


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
    """Accuracy under the best one-to-one matching of clusters to classes (Lourenço et al. 2015 eq. 11).

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
    rows, cols = _max_assignment(table)
    return float(table[rows, cols].sum() / n)


def ari(labels_pred, labels_true):
    """Adjusted Rand index over the points with ``labels_pred >= 0``."""
    from sklearn.metrics import adjusted_rand_score  # imported when a score is asked (a second to import)

    pred, true = _paired(labels_pred, labels_true)
    return float(adjusted_rand_score(true, pred)) if pred.size else float("nan")


def nmi(labels_pred, labels_true):
    """Normalised mutual information (arithmetic mean) over the points with ``labels_pred >= 0``."""
    from sklearn.metrics import normalized_mutual_info_score

    pred, true = _paired(labels_pred, labels_true)
    return float(normalized_mutual_info_score(true, pred)) if pred.size else float("nan")


def partition_scores(labels_pred, labels_true):
    """``{"H": ..., "ARI": ..., "NMI": ...}`` of one (possibly incomplete) partition: the values of
    :func:`h_criterion`, :func:`ari` and :func:`nmi`, from their contingency table (:func:`table_scores`;
    scikit-learn, a second to import, is not imported)."""
    scores = table_scores(contingency(labels_pred, labels_true))
    return {key: scores[key] for key in ("H", "ARI", "NMI")}


# --------------------------------------------------------------------------- more hard criteria


def micro_precision(labels_pred, labels_true):
    """Micro-precision of Wang et al. 2011 Sect. 7: ``MP = sum_h a_h / n``.

    Each consensus cluster h is given the class it overlaps most and ``a_h`` counts its points
    of that class (several clusters may pick the same class, unlike :func:`h_criterion`).
    Points with ``labels_pred == -1`` are ignored; ``nan`` when none is left.

    Examples
    --------
    >>> micro_precision([0, 0, 0, 1, 1, 2], [0, 0, 1, 1, 1, 1])
    0.8333333333333334
    """
    table = contingency(labels_pred, labels_true)
    n = table.sum()
    if n == 0:
        return float("nan")
    return float(table.max(axis=1).sum() / n)


def normalized_rand(labels_pred, labels_true):
    """Normalised Rand index R_n of Li & Liu 2018 eq. (8) (algebraically the adjusted Rand index).

    ``R_n = (2 S_ij - 2 S_i S_j / C(n,2)) / (S_i + S_j - 2 S_i S_j / C(n,2))`` with ``S_ij`` the
    sum of ``C(n_ij, 2)`` over the contingency table and ``S_i``, ``S_j`` the same over its row
    and column sums. Points with ``labels_pred == -1`` are ignored. When the denominator is 0
    (both partitions trivial) the partitions are identical up to labels and 1.0 is returned,
    as scikit-learn does.

    Examples
    --------
    >>> normalized_rand([0, 0, 1, 1], [1, 1, 0, 0])
    1.0
    >>> round(normalized_rand([0, 0, 1, 1], [0, 1, 0, 1]), 12)
    -0.5
    """
    table = contingency(labels_pred, labels_true).astype(np.float64)
    n = table.sum()
    if n == 0:
        return float("nan")

    def c2(v):
        return v * (v - 1.0) / 2.0

    s_ij = c2(table).sum()
    s_i = c2(table.sum(axis=1)).sum()
    s_j = c2(table.sum(axis=0)).sum()
    expected = 2.0 * s_i * s_j / c2(n) if n > 1 else 0.0
    den = s_i + s_j - expected
    if den == 0:
        return 1.0
    return float((2.0 * s_ij - expected) / den)


# --------------------------------------------------------------------------- soft partitions


def _check_soft(Y, name, *, atol=1e-6):
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[0] == 0 or Y.shape[1] == 0:
        raise InputError(f"{name} must be a non-empty 2-d array (n points x K clusters); got shape {Y.shape}")
    if not np.all(np.isfinite(Y)) or Y.min() < -atol:
        raise InputError(
            f"{name} must hold finite non-negative probabilities; got minimum {float(np.nanmin(Y))!r}"
        )
    sums = Y.sum(axis=1)
    bad = np.abs(sums - 1.0) > atol
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"each row of {name} must sum to 1; row {i} sums to {float(sums[i])!r}")
    return np.clip(Y, 0.0, None)


def _js_terms(p, q):
    """Elementwise ``(p log2(2p/(p+q)) + q log2(2q/(p+q))) / 2`` with 0 log 0 = 0."""
    m = p + q
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(p > 0, p * np.log2(2.0 * p / m), 0.0)
        b = np.where(q > 0, q * np.log2(2.0 * q / m), 0.0)
    return 0.5 * (a + b)


def js_divergence(p, q):
    """Jensen-Shannon divergence (base 2, so in [0, 1]) between the rows of ``p`` and ``q``.

    Examples
    --------
    >>> js_divergence([[1.0, 0.0]], [[0.0, 1.0]]).tolist()
    [1.0]
    >>> js_divergence([0.5, 0.5], [0.5, 0.5])
    0.0
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.shape != q.shape:
        raise InputError(f"p and q must have the same shape; got {p.shape} and {q.shape}")
    out = _js_terms(p, q).sum(axis=-1)
    return float(out) if out.ndim == 0 else out


def js_criterion(memberships, reference, *, return_permutation=False):
    """JS criterion of Lourenço et al. 2015 Sect. 7: ``J(Y, Z) = (1/n) min_P sum_i D_JS(z_i || P y_i)``.

    Compares soft memberships ``Y`` to a soft ground truth ``Z`` (both n x K, rows on the
    simplex; the one with fewer clusters is padded with zero columns). The JS divergence of
    two distributions is a sum over components, so the best cluster permutation is an
    assignment problem on the ``K x K`` cost ``sum_i js(z_ia, y_ib)``, solved exactly with the
    Hungarian method. Base-2 logarithms, so ``0 <= J <= 1``.

    Parameters
    ----------
    memberships : array-like of shape (n, K1)
    reference : array-like of shape (n, K2)
    return_permutation : bool, default=False
        Also return ``perm`` with ``perm[a]`` the column of ``memberships`` matched to column
        ``a`` of ``reference`` (padded columns are numbered past the real ones).

    Examples
    --------
    >>> Z = [[0.9, 0.1], [0.2, 0.8]]
    >>> js_criterion([[0.1, 0.9], [0.8, 0.2]], Z)
    0.0
    >>> js_criterion([[1.0], [1.0]], [[1.0, 0.0], [0.0, 1.0]])
    0.5
    """
    Y = _check_soft(memberships, "memberships")
    Z = _check_soft(reference, "reference")
    if Y.shape[0] != Z.shape[0]:
        raise InputError(
            f"memberships and reference must have the same number of rows; got {Y.shape[0]} and {Z.shape[0]}"
        )
    k = max(Y.shape[1], Z.shape[1])
    Yp = np.zeros((Y.shape[0], k))
    Yp[:, : Y.shape[1]] = Y
    Zp = np.zeros((Z.shape[0], k))
    Zp[:, : Z.shape[1]] = Z
    cost = _js_terms(Zp[:, :, None], Yp[:, None, :]).sum(axis=0)
    rows, cols = _linear_sum_assignment(cost)
    value = float(cost[rows, cols].sum() / Y.shape[0])
    if return_permutation:
        return value, cols
    return value


def _thresholded(Y, threshold):
    if isinstance(threshold, bool) or not np.isscalar(threshold) or not (0.0 <= float(threshold) < 1.0):
        raise InputError(f"The 'threshold' parameter must be a number in [0, 1); got {threshold!r}")
    if threshold == 0:
        return Y
    keep = (Y >= threshold) | (Y == Y.max(axis=1, keepdims=True))
    Y = np.where(keep, Y, 0.0)
    return Y / Y.sum(axis=1, keepdims=True)


def cluster_overlap(memberships, *, threshold=0.0):
    """Cluster overlap matrix ``m_ij`` of Lourenço et al. 2015 Sect. 7.

    ``m_ij = E_Y[|P_i ∩ P_j|] / E_Y[|P_i|] = sum_x y_xi y_xj / sum_x y_xi``: the expected share
    of cluster i's mass that it has in common with cluster j (not symmetric). Entries below
    ``threshold`` are first set to 0 and each point's row renormalised (its largest entry is
    always kept). Rows of clusters with no mass are 0.

    Parameters
    ----------
    memberships : array-like of shape (n, K)
    threshold : float, default=0.0
        The delta of the paper.

    Returns
    -------
    ndarray of shape (K, K)

    Examples
    --------
    >>> cluster_overlap([[1.0, 0.0], [0.5, 0.5]]).tolist()
    [[0.8333333333333334, 0.16666666666666666], [0.5, 0.5]]
    """
    Y = _thresholded(_check_soft(memberships, "memberships"), threshold)
    mass = Y.sum(axis=0)
    co = Y.T @ Y
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(mass[:, None] > 0, co / mass[:, None], 0.0)
    return m


def soft_centroids(memberships, X, *, threshold=0.0):
    """Soft centroids ``mu_k = sum_j y_jk x_j / sum_j y_jk`` of Lourenço et al. 2015 Sect. 7.

    Parameters
    ----------
    memberships : array-like of shape (n, K)
    X : array-like of shape (n, d)
        The points.
    threshold : float, default=0.0
        Entries of ``memberships`` below it are dropped first, as for :func:`cluster_overlap`.

    Returns
    -------
    ndarray of shape (K, d)
        Rows of clusters with no mass are ``nan``.

    Examples
    --------
    >>> soft_centroids([[1.0, 0.0], [0.5, 0.5]], [[0.0, 0.0], [3.0, 6.0]]).tolist()
    [[1.0, 2.0], [3.0, 6.0]]
    """
    Y = _thresholded(_check_soft(memberships, "memberships"), threshold)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != Y.shape[0]:
        raise InputError(f"X must be a 2-d array with {Y.shape[0]} rows; got shape {X.shape}")
    mass = Y.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (Y.T @ X) / mass[:, None]


# --------------------------------------------------------------------------- from a contingency table


def contingency_counts(labels_pred, labels_true):
    """Contingency table of non-negative integer labels by ``bincount``: linear in n, no sort.

    The table of :func:`contingency` (empty rows and columns dropped) for labels that are small
    non-negative integers (cluster ids, class codes); points with a negative label on either side
    are ignored.

    Examples
    --------
    >>> contingency_counts([0, 0, 2, -1], [1, 1, 0, 0]).tolist()
    [[0, 2], [1, 0]]
    """
    pred = np.asarray(labels_pred, dtype=np.int64).ravel()
    true = np.asarray(labels_true, dtype=np.int64).ravel()
    if pred.shape != true.shape:
        raise InputError(
            f"labels_pred and labels_true must have the same length; got {pred.size} and {true.size}"
        )
    keep = (pred >= 0) & (true >= 0)
    pred, true = pred[keep], true[keep]
    if pred.size == 0:
        return np.zeros((0, 0), dtype=np.int64)
    kt = int(true.max()) + 1
    table = np.bincount(pred * kt + true, minlength=(int(pred.max()) + 1) * kt).reshape(-1, kt)
    table = table[table.sum(axis=1) > 0]
    return table[:, table.sum(axis=0) > 0]


def table_scores(table):
    """H, ARI, NMI, micro-precision (MP) and normalised Rand R_n of a contingency table.

    The same values as :func:`h_criterion`, :func:`ari`, :func:`nmi`, :func:`micro_precision`
    and :func:`normalized_rand` on the labels the table counts, from the table alone (use it with
    :func:`contingency_counts` at large n). Keys ``"H"``, ``"ARI"``, ``"NMI"``, ``"MP"``, ``"R_n"``.

    Examples
    --------
    >>> s = table_scores(np.array([[2, 0], [0, 2]]))
    >>> [round(s[k], 6) for k in ("H", "ARI", "NMI", "MP", "R_n")]
    [1.0, 1.0, 1.0, 1.0, 1.0]
    """
    t = np.asarray(table, dtype=np.float64)
    n = t.sum()
    if n == 0:
        return dict.fromkeys(("H", "ARI", "NMI", "MP", "R_n"), float("nan"))
    r, c = _max_assignment(t)
    h = t[r, c].sum() / n
    mp = t.max(axis=1).sum() / n

    def c2(v):
        return v * (v - 1.0) / 2.0

    s_ij, s_i, s_j = c2(t).sum(), c2(t.sum(axis=1)).sum(), c2(t.sum(axis=0)).sum()
    expected = 2.0 * s_i * s_j / c2(n) if n > 1 else 0.0
    den = s_i + s_j - expected
    rn = 1.0 if den == 0 else (2.0 * s_ij - expected) / den
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0]  # empty clusters or classes carry no entropy
    pa, pb = t.sum(axis=1) / n, t.sum(axis=0) / n
    nz = t > 0
    mi = float(np.sum(t[nz] / n * np.log(t[nz] / n / np.outer(pa, pb)[nz])))
    ha, hb = -np.sum(pa * np.log(pa)), -np.sum(pb * np.log(pb))
    if t.shape[0] == 1 and t.shape[1] == 1:
        nmi = 1.0
    else:
        denom = (ha + hb) / 2.0
        nmi = mi / denom if denom > 0 else 0.0
    return {
        "H": float(h),
        "ARI": float(rn),
        "NMI": float(min(max(nmi, 0.0), 1.0)),
        "MP": float(mp),
        "R_n": float(rn),
    }
