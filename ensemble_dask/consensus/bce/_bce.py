"""Bayesian cluster ensembles (BCE): mixed-membership consensus by variational EM.

BCE (Wang et al. 2011 Sect. 4-5) treats the row ``x_i`` of the ``n x N`` base-labels matrix as a bag of
discrete features drawn from a mixed-membership model: ``theta_i ~ Dirichlet(alpha)``, then for each observed
base clustering ``j`` a consensus cluster ``z_ij ~ theta_i`` and the label ``x_ij ~ discrete(beta_hj)``. The
EM that fits it (the E-step's packed statistics, the M-step, the driver that runs in memory, on a cluster's
row blocks and across sites) is :mod:`._em`'s.

Missing labels (``-1``) are skipped. Rows without any observed entry carry no information: they are left out
of the fit, get the prior's memberships ``alpha / sum(alpha)``, are listed in ``empty_rows_`` and reported by
an :class:`~ensemble_dask.consensus.bce.EmptyRowsWarning`.
"""

from __future__ import annotations

import numpy as np

from ..._validation import check_labels_matrix
from ._base import INIT_CONSTRAINT, _BCEBase

__all__ = ["BCE"]


class BCE(_BCEBase):
    """Bayesian cluster ensemble (Wang et al. 2011 Sect. 4-5): mixed-membership consensus by variational EM.

    Parameters
    ----------
    n_clusters : int, default=2
        Number ``k`` of consensus clusters (a maximum: clusters may end up empty, see
        ``effective_k_``).
    n_init : int, default=1
        Number of starts; the fit with the highest final lower bound is kept. With the default
        ``init="spectral"`` one start is enough: every spectral start is HBGF's partition again (with
        another seed of its k-means), and among several the lower bound, like KCC's objective, prefers
        those that split large clusters. Use 3-10 starts with ``init="random"``. Figures: the benchmarks
        page, "Starts".
    init : {"spectral", "k-means++", "random"} or array-like of shape (n_samples,), default="spectral"
        How a start is drawn (when ``fit`` gets no ``init``). A partition of the rows (integer labels,
        at most ``n_clusters`` distinct values, ``-1`` for a row it leaves out; e.g. another method's
        ``labels_``) is the start itself, as for ``"spectral"`` after its partition is found: one start.
        ``"spectral"``: HBGF's spectral
        partition of the label rows (on a sample of 20,000 distinct rows above that) and Lloyd steps
        of k-means on the one-hot labels (KCC, ``-1`` skipped); ``"k-means++"``: greedy k-means++
        seedings on the label rows (distance: the share of jointly observed labels that differ) and
        the same Lloyd steps, or HBGF's partition where its KCC objective is lower. Then ``beta``
        from that partition's label counts and a symmetric ``alpha`` in ``[1e-3, alpha_init]`` fitted
        to the memberships it implies (:func:`~._seeding.seeded_alpha`). ``"random"``: ``beta``
        drawn from flat Dirichlets and ``alpha = alpha_init`` (the starts of :mod:`ensemble_dask.federated`).
        ``"spectral"`` is the default because KCC's objective, like the likelihood, prefers splitting a
        large cluster to keeping small ones apart, and HBGF's partition keeps them apart (the benchmarks
        page, "Starts").
    max_iter : int, default=300
        Maximum number of EM iterations (E-steps).
    tol : float, default=1e-5
        EM stops when the relative change of the lower bound is at most ``tol``.
    e_step_tol : float, default=1e-4
        A row's E-step stops when the mean absolute change of its ``gamma`` is below
        ``e_step_tol``.
    e_step_max_iter : int, default=100
        Maximum number of (phi, gamma) sweeps per row and E-step. Because every row's
        ``gamma`` is warm-started from the previous EM iteration, a partial E-step still
        increases the bound (Neal and Hinton's incremental EM), so a cap only trades
        E-step work for EM iterations.
    alpha_init : float, default=1.0
        Initial value of every ``alpha_h``.
    warm_start : bool, default=False
        When True and the estimator is already fitted, ``fit`` starts from the current fit
        (for example after base clusterings were appended as new columns).
    random_state : int, Generator or None, default=None
        Seed of every random draw of the starts (the same seed gives the same fit).

    Attributes
    ----------
    memberships_ : ndarray (n, k)
        Normalised variational Dirichlet parameters ``gamma_i / sum(gamma_i)``.
    labels_ : ndarray (n,) int32
        ``argmax`` of the memberships.
    uncertainty_ : ndarray (n,)
        Entropy of the memberships divided by ``log k``, in [0, 1].
    alpha_ : ndarray (k,)
        Dirichlet parameter.
    beta_ : list of ndarray (k, k_j)
        Per base clustering, the distribution of its labels (in ``categories_[j]`` order) per
        consensus cluster.
    categories_ : list of ndarray
        Per base clustering, the sorted distinct labels seen in the fit.
    lower_bound_, lower_bound_trace_ : float, ndarray
        Final variational lower bound and its value at every EM iteration (non-decreasing).
    n_iter_ : int
        Number of EM iterations run.
    converged_ : bool
        Whether the bound converged before ``max_iter``.
    effective_k_ : int
        Number of consensus clusters holding at least one (non-empty) row.
    empty_rows_ : ndarray of int
        Rows without any observed label; they get ``alpha_ / alpha_.sum()`` as memberships.

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.array([[0, 1, 5], [0, 1, 5], [0, 1, 7], [1, 0, 7], [1, 0, 7], [1, 0, 5]])
    >>> bce = BCE(n_clusters=2, random_state=0).fit(labels)  # one seeded start
    >>> bool(bce.labels_[0] == bce.labels_[2] != bce.labels_[3] == bce.labels_[5])
    True
    >>> rnd = BCE(n_clusters=2, init="random", n_init=3, random_state=0).fit(labels)
    >>> bool(bce.lower_bound_ > rnd.lower_bound_), bool(bce.n_iter_ < rnd.n_iter_)
    (True, True)
    >>> bce.memberships_.shape, len(bce.beta_), bce.beta_[2].shape
    ((6, 2), 3, (2, 2))
    """

    _parameter_constraints = {**_BCEBase._parameter_constraints, "init": INIT_CONSTRAINT}

    def __init__(
        self,
        n_clusters=2,
        *,
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
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.e_step_tol = e_step_tol
        self.e_step_max_iter = e_step_max_iter
        self.alpha_init = alpha_init
        self.init = init
        self.warm_start = warm_start
        self.random_state = random_state

    reg_covar = 1e-6

    def _weights_for(self, N, X, n):
        return np.ones(N), np.empty((n, 0)), np.empty(0)

    def fit(self, labels, y=None, *, init=None):
        """Fit on an ``n x N`` labels matrix (``-1`` = missing).

        Parameters
        ----------
        labels : array-like (n, N) of int
            Base clusterings as columns; labels are arbitrary non-negative integers.
        y : ignored
        init : fitted BCE or dict, optional
            Start from this fit's ``alpha_`` and ``beta_`` (its first columns must be the
            first columns of ``labels``; new columns start from the M-step of its memberships
            when the rows are the same) or from ``{"alpha": ..., "beta": [...]}``. A single
            start is then run.

        Returns
        -------
        self
        """
        self._validate_params()
        labels = check_labels_matrix(labels)
        if init is None and self.warm_start and hasattr(self, "alpha_"):
            init = self
        self._fit_arrays(labels, None, init)
        self._emit_fit_warnings()
        return self

    def transform(self, labels):
        """Memberships of (new) rows by the E-step with the fitted ``alpha_`` and ``beta_``.

        Labels unseen in the fit are treated as missing (with an :class:`UnseenLabelsWarning`).
        """
        return self._transform(labels)

    def predict(self, labels):
        """Hard consensus labels of (new) rows: ``argmax`` of :meth:`transform`."""
        return np.argmax(self.transform(labels), axis=1).astype(np.int32)
