"""Generalized Bayesian cluster ensembles (GBCE, Wang et al. 2011 Sect. 6): base labels plus features.

GBCE adds the original features to BCE with a Gaussian per (cluster, feature) and weights ``u``
(eqs. 12-17); the E-step kernel and the EM driver are BCE's (:mod:`._em`).
"""

from __future__ import annotations

from numbers import Real

import numpy as np

from ..._validation import InputError, check_labels_matrix
from .._common.params import Interval
from ._base import INIT_CONSTRAINT, _BCEBase

__all__ = ["GBCE"]


class GBCE(_BCEBase):
    """Generalized BCE (Wang et al. 2011 Sect. 6): base labels plus original features, with weights.

    Each feature is Gaussian per consensus cluster (eqs. 13, 16, 17); each base clustering
    and each feature has a weight ``u`` (eqs. 12-15). Missing labels are ``-1``, missing
    features ``nan``.

    Parameters
    ----------
    n_clusters : int, default=2
        Number of consensus clusters.
    label_weight : float or array-like (N,) or None, default=None
        Weight ``u_j`` of each base clustering: its label of a row counts ``u_j`` times in the row's
        memberships (eq. 14) and in the M-step (eq. 15), against a weight ``feature_weight`` per feature.
        None uses the paper's choice (Sect. 7.6): the number of features ``D``, so that one base clustering
        weighs as much as the whole feature vector (with weight 1 per feature, the features would decide
        the consensus when ``D`` exceeds the number of clusterings).
    feature_weight : float or array-like (D,), default=1.0
        Weight of each feature (0 leaves a feature out; with every feature at 0 the model is BCE's on
        the labels weighted by ``label_weight``).
    reg_covar : float, default=1e-6
        Lower bound on every variance.
    init : {"spectral", "k-means++", "random"} or array-like of shape (n_samples,), default="spectral"
        How a start is drawn, as for :class:`BCE`: ``"spectral"`` is HBGF's partition of the label rows
        refined by Lloyd steps of KCC; ``beta`` then comes from its label counts and each cluster's
        Gaussians from the features of its rows (eqs. 16-17 under the start's memberships). ``"random"``
        draws ``beta`` from flat Dirichlets and the means among the rows; use 5-10 starts with it. The
        default is ``"spectral"`` because a single random start stops in a poor optimum of the bound, with
        or without the features (the benchmarks page, "Starts").
    n_init, max_iter, tol, e_step_tol, e_step_max_iter, alpha_init, warm_start, random_state
        As in :class:`BCE`.

    Attributes
    ----------
    memberships_, labels_, uncertainty_, alpha_, beta_, categories_, lower_bound_,
    lower_bound_trace_, n_iter_, converged_, effective_k_, empty_rows_
        As in :class:`BCE`.
    means_, variances_ : ndarray (k, D)
        Gaussian parameters per cluster and feature.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 1.0], [0.1, 1.2], [0.2, 0.9], [0.9, 3.0], [1.1, 3.1], [1.2, 2.9]])
    >>> labels = np.array([[0, 2], [0, 2], [1, 2], [1, 4], [1, 4], [0, 4]])
    >>> g = GBCE(n_clusters=2, random_state=0).fit(labels, X)
    >>> bool(g.labels_[0] == g.labels_[2] != g.labels_[3] == g.labels_[5])
    True
    >>> g.means_.shape
    (2, 2)
    """

    _parameter_constraints = {
        **_BCEBase._parameter_constraints,
        "label_weight": [None, Interval(Real, 0, None), "array-like"],
        "feature_weight": [Interval(Real, 0, None), "array-like"],
        "reg_covar": [Interval(Real, 0, None, inf_ok=True)],
        "init": INIT_CONSTRAINT,
    }
    _gaussian = True  # its features are Gaussian per cluster

    def __init__(
        self,
        n_clusters=2,
        *,
        label_weight=None,
        feature_weight=1.0,
        reg_covar=1e-6,
        n_init=1,
        max_iter=300,
        tol=1e-5,
        e_step_tol=1e-4,
        e_step_max_iter=100,
        alpha_init=1.0,
        init="spectral",
        warm_start=False,
        random_state=None,
    ):
        self.n_clusters = n_clusters
        self.label_weight = label_weight
        self.feature_weight = feature_weight
        self.reg_covar = reg_covar
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.e_step_tol = e_step_tol
        self.e_step_max_iter = e_step_max_iter
        self.alpha_init = alpha_init
        self.init = init
        self.warm_start = warm_start
        self.random_state = random_state

    def _weights_for(self, N, X, n):
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] != n:
            raise InputError(f"X must be a 2-d array with the {n} rows of labels; got shape {X.shape}")
        D = X.shape[1]
        ucol = np.broadcast_to(
            np.asarray(float(D) if self.label_weight is None else self.label_weight, dtype=np.float64), (N,)
        )
        ufeat = np.broadcast_to(np.asarray(self.feature_weight, dtype=np.float64), (D,))
        for name, u in (("label_weight", ucol), ("feature_weight", ufeat)):
            if not np.all(np.isfinite(u)) or np.any(u < 0):
                raise InputError(f"The {name!r} parameter must hold non-negative numbers; got {u}")
        return np.ascontiguousarray(ucol), np.ascontiguousarray(X), np.ascontiguousarray(ufeat)

    def fit(self, labels, X, *, init=None):
        """Fit on base labels ``(n, N)`` and features ``X`` ``(n, D)``; returns ``self``."""
        self._validate_params()
        labels = check_labels_matrix(labels)
        if init is None and self.warm_start and hasattr(self, "alpha_"):
            init = self
        self._fit_arrays(labels, X, init)
        self._emit_fit_warnings()
        return self

    def _set_results(self, params, *args):
        super()._set_results(params, *args)
        self.means_ = params.mu
        self.variances_ = params.var

    def transform(self, labels, X):
        """Memberships of (new) rows from their base labels and features."""
        return self._transform(labels, X)

    def predict(self, labels, X):
        """Hard consensus labels of (new) rows."""
        return np.argmax(self.transform(labels, X), axis=1).astype(np.int32)
