"""Mixture-model consensus (MM) of Topchy, Jain and Punch (2004): a finite mixture of multinomials.

MM is fitted by plain EM on the base-labels matrix; missing labels (``-1``) are marginalised out.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import logsumexp

from ..._validation import InputError, check_labels_matrix, check_random_state, convergence_warning
from .._common.base import normalized_entropy
from .._common.encoding import compress_rows
from .._common.params import ParamsMixin, check_n_clusters
from . import _kernels as kern
from ._base import EM_CONSTRAINTS, INIT_CONSTRAINT
from ._em import (
    _TINY,
    EmptyRowsWarning,
    _offsets,
    check_fitted_labels,
    encode_labels,
    encode_new_labels,
    label_categories,
    normalise_counts,
)
from ._seeding import (
    SEEDED_INITS,
    hard_label_counts,
    partition_start,
    seed_partition,
    seeded_beta,
)

__all__ = ["MM"]


class MM(ParamsMixin):
    """Mixture-model consensus (Topchy, Jain and Punch 2004): a finite mixture of multinomials.

    ``p(x_i) = sum_h pi_h prod_{j observed} beta_hj(x_ij)``, fitted by EM; missing labels are
    skipped (they are marginalised out).

    Parameters
    ----------
    n_clusters : int, default=2
        Number of mixture components.
    n_init : int, default=1
        Starts; the highest log-likelihood is kept. With the default ``init="spectral"`` one start is
        enough, as for :class:`~ensemble_dask.consensus.BCE`; more starts rerun HBGF with other seeds
        (k-means++ seedings only where HBGF gives no partition). Use 3-10 with ``init="random"``.
    max_iter : int, default=200
        Maximum EM iterations.
    tol : float, default=1e-6
        Stop when the relative change of the log-likelihood is at most ``tol``.
    init : {"spectral", "k-means++", "random"} or array-like of shape (n_samples,), default="spectral"
        A partition of the rows (integer labels, at most ``n_clusters`` distinct values, ``-1`` for a row
        it leaves out; e.g. another method's ``labels_``): ``beta`` and ``pi`` from its label counts, one
        start. ``"spectral"``: ``beta`` and ``pi`` from HBGF's spectral partition of the label rows and KCC
        Lloyd steps (see :class:`~ensemble_dask.consensus.BCE` for why); ``"k-means++"``: from the
        partition of k-means++ seeding and KCC Lloyd steps, or HBGF's where its KCC objective is lower
        (:func:`~._seeding.seed_partition`); ``"random"``: ``beta`` drawn from flat Dirichlets,
        uniform ``pi``.
    random_state : int, Generator or None, default=None
        Seed of every random draw of the starts.

    Attributes
    ----------
    memberships_ : ndarray (n, k)
        Posterior responsibilities.
    labels_, uncertainty_, beta_, categories_, n_iter_, converged_, effective_k_, empty_rows_
        As in :class:`BCE`.
    weights_ : ndarray (k,)
        Mixing proportions ``pi``.
    lower_bound_, lower_bound_trace_ : float, ndarray
        Log-likelihood (exact for MM) at the end and at every iteration.

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.array([[0, 1], [0, 1], [0, -1], [1, 0], [1, 0], [-1, 0]])
    >>> mm = MM(n_clusters=2, random_state=0).fit(labels)
    >>> bool(mm.labels_[0] == mm.labels_[2] != mm.labels_[3] == mm.labels_[5])
    True
    """

    _parameter_constraints = {**EM_CONSTRAINTS, "init": INIT_CONSTRAINT}

    def __init__(self, n_clusters=2, *, n_init=1, max_iter=200, tol=1e-6, init="spectral", random_state=None):
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _loglik(self, gidx, logpi, logbeta):
        ll = np.broadcast_to(logpi, (gidx.shape[0], logpi.size)).copy()
        for j in range(gidx.shape[1]):
            g = gidx[:, j]
            obs = g >= 0
            ll[obs] += logbeta[:, g[obs]].T
        return ll

    def fit(self, labels, y=None):
        """Fit on an ``n x N`` labels matrix (``-1`` = missing); returns ``self``."""
        self._validate_params()
        k = int(self.n_clusters)
        labels = check_labels_matrix(labels)
        check_n_clusters(self, labels.shape[0])
        rng = check_random_state(self.random_state)
        categories = label_categories(labels)
        offsets = _offsets(categories)
        gidx, _ = encode_labels(labels, categories)
        # identical rows have identical responsibilities: EM runs on the distinct rows, weighted
        rows, weight, inverse = compress_rows(gidx)
        empty = ~(rows >= 0).any(axis=1)
        empty_rows = np.flatnonzero(~(gidx >= 0).any(axis=1))
        if empty_rows.size:
            warnings.warn(
                f"{empty_rows.size} of {labels.shape[0]} rows have no observed base label; "
                "they get the mixing proportions as memberships (see empty_rows_)",
                EmptyRowsWarning,
                stacklevel=2,
            )
        wfit = np.where(empty, 0.0, weight)
        given = None
        if not isinstance(self.init, str):  # a partition: one start (more would repeat it)
            given = hard_label_counts(gidx, partition_start(self.init, labels.shape[0], k), offsets[-1], k)
        best = None
        for _ in range(1 if given is not None else self.n_init):
            if given is not None or self.init in SEEDED_INITS:
                counts = given
                if counts is None:
                    counts, _ = seed_partition(
                        rows, wfit, offsets, k, rng, spectral_first=self.init == "spectral"
                    )
                beta = seeded_beta(counts, offsets)
                size = counts.sum(axis=1) + 1.0
                pi = size / size.sum()
            else:
                beta = np.empty((k, offsets[-1]))
                for j, cats in enumerate(categories):
                    if cats.size:
                        beta[:, offsets[j] : offsets[j + 1]] = rng.dirichlet(np.ones(cats.size), size=k)
                pi = np.full(k, 1.0 / k)
            trace = []
            converged = False
            for t in range(self.max_iter):
                resp, counts, rsum, ll = kern.mm_estep(
                    rows, wfit, np.log(np.maximum(pi, _TINY)), np.log(np.maximum(beta, _TINY))
                )
                trace.append(float(ll))
                if t > 0 and abs(trace[-1] - trace[-2]) <= self.tol * abs(trace[-1]):
                    converged = True
                    break
                if t == self.max_iter - 1:
                    break
                pi = rsum / wfit.sum() if wfit.sum() > 0 else pi
                beta = normalise_counts(counts, offsets)
            if best is None or trace[-1] > best[0][-1]:
                best = (trace, converged, pi, beta, resp)
        trace, converged, pi, beta, resp = best
        resp = resp[inverse]
        self.categories_ = categories
        self.n_clusterings_ = len(categories)
        self.weights_ = pi
        self.beta_ = [beta[:, offsets[j] : offsets[j + 1]].copy() for j in range(len(categories))]
        self._beta = beta
        self.memberships_ = resp
        self.labels_ = np.argmax(resp, axis=1).astype(np.int32)
        self.uncertainty_ = normalized_entropy(resp)
        self.lower_bound_trace_ = np.asarray(trace)
        self.lower_bound_ = float(trace[-1])
        self.n_iter_ = len(trace)
        self.converged_ = converged
        nonempty = np.ones(labels.shape[0], dtype=bool)
        nonempty[empty_rows] = False
        self.effective_k_ = int(np.unique(self.labels_[nonempty]).size)
        self.empty_rows_ = empty_rows
        if not converged:
            warnings.warn(
                f"MM did not converge in max_iter={self.max_iter} EM iterations",
                convergence_warning(),
                stacklevel=2,
            )
        return self

    @classmethod
    def from_parameters(cls, weights, beta, categories, **params):
        """A fitted MM from its parameters, as a run store keeps them: the mixing ``weights`` (k,), ``beta``
        (one ``k x k_j`` matrix of label probabilities per clustering) and ``categories`` (each clustering's
        sorted labels, those of the fit); :meth:`transform` and :meth:`predict` then label new rows."""
        weights = np.asarray(weights, dtype=np.float64)
        k = weights.size
        beta, categories = check_fitted_labels("MM", k, beta, categories)
        est = cls(k, **params)
        est._validate_params()
        est.categories_, est.n_clusterings_, est.weights_, est.beta_ = categories, len(beta), weights, beta
        est._beta = np.concatenate(beta, axis=1)
        return est

    def transform(self, labels):
        """Posterior responsibilities of (new) rows under the fitted mixture."""
        if not hasattr(self, "weights_"):
            raise InputError("This MM is not fitted yet; call fit first")
        _, gidx = encode_new_labels(labels, self.categories_, stacklevel=3)
        ll = self._loglik(
            gidx, np.log(np.maximum(self.weights_, _TINY)), np.log(np.maximum(self._beta, _TINY))
        )
        return np.exp(ll - logsumexp(ll, axis=1, keepdims=True))

    def predict(self, labels):
        """Hard labels of (new) rows."""
        return np.argmax(self.transform(labels), axis=1).astype(np.int32)

    def fit_predict(self, labels, y=None):
        """Fit and return ``labels_``."""
        return self.fit(labels).labels_
