"""Estimator base class shared by BCE and GBCE (the E-step kernel handles both)."""

from __future__ import annotations

import math
import warnings
from numbers import Integral, Real

import numpy as np

from ..._validation import InputError, check_random_state, convergence_warning
from .._common.base import normalized_entropy
from .._common.params import Interval, Options, ParamsMixin, check_n_clusters
from . import _kernels as kern
from ._em import (
    EmptyRowsWarning,
    Params,
    StatsLayout,
    _InMemoryEStep,
    _offsets,
    check_fitted_labels,
    encode_labels,
    encode_new_labels,
    label_categories,
    run_em,
)
from ._seeding import (
    SEEDED_INITS,
    hard_label_counts,
    partition_start,
    seed_partition,
    seeded_alpha,
    seeded_beta,
    soft_gamma,
)

__all__ = ["_BCEBase", "fit_em", "EM_CONSTRAINTS", "INIT_CONSTRAINT"]

#: the parameters of the EM that BCE, GBCE and MM share
EM_CONSTRAINTS = {
    "n_clusters": [Interval(Integral, 2, None)],
    "n_init": [Interval(Integral, 1, None)],
    "max_iter": [Interval(Integral, 1, None)],
    "tol": [Interval(Real, 0, None, inf_ok=True)],
    "random_state": ["random_state"],
}
#: a named start, or a partition of the rows (checked in ``fit``, where the rows are known); to start from
#: fitted parameters, ``fit(labels, init=estimator or dict)``
INIT_CONSTRAINT = [Options(*SEEDED_INITS, "random"), "array-like"]


class _BCEBase(ParamsMixin):
    """Shared machinery of BCE and GBCE (the E-step kernel handles both)."""

    _n_features = 0
    _parameter_constraints = {
        **EM_CONSTRAINTS,
        "e_step_tol": [Interval(Real, 0, None, inf_ok=True)],
        "e_step_max_iter": [Interval(Integral, 1, None)],
        "alpha_init": [Interval(Real, 0, None, closed="neither", inf_ok=True)],
    }
    _gaussian = False  # GBCE: its features are Gaussian per cluster (means_, variances_)

    def _validate_params(self):
        super()._validate_params()
        self._k = int(self.n_clusters)

    def _random_params(self, rng, categories, X=None):
        k = self._k
        offsets = _offsets(categories)
        beta = np.empty((k, offsets[-1]))
        for j, cats in enumerate(categories):
            if cats.size:
                beta[:, offsets[j] : offsets[j + 1]] = rng.dirichlet(np.ones(cats.size), size=k)
        D = 0 if X is None else X.shape[1]
        mu = np.zeros((k, D))
        var = np.ones((k, D))
        if D:
            mean = np.nanmean(X, axis=0)
            sd = np.sqrt(np.maximum(np.nanvar(X, axis=0), self.reg_covar))
            rows = rng.choice(X.shape[0], size=k, replace=X.shape[0] < k)
            mu = np.where(np.isnan(X[rows]), mean, X[rows])
            var = np.tile(sd**2, (k, 1))
        return Params(np.full(k, float(self.alpha_init)), beta, mu, var)

    def _seeded_params(self, rng, categories, estep, counts=None):
        """Start from a hard partition: :func:`seed_partition`'s (HBGF, or k-means++, and KCC on the labels),
        or the one whose label ``counts`` are given (``init`` a partition, :func:`hard_label_counts`).

        ``beta`` from the partition's label counts (:func:`seeded_beta`), a symmetric ``alpha`` fitted to
        the memberships it implies, in ``[1e-3, alpha_init]`` (:func:`seeded_alpha`).
        Returns the parameters and the rows' warm-start ``gamma`` (:func:`soft_gamma`).
        """
        offsets = _offsets(categories)
        if counts is None:
            counts, _ = seed_partition(
                estep.gidx, estep.rweight, offsets, self._k, rng, spectral_first=self.init == "spectral"
            )
        beta = seeded_beta(counts, offsets)
        upper = float(self.alpha_init)
        a = seeded_alpha(estep.gidx, estep.rweight, beta, rng, lower=min(1e-3 / self._k, upper), upper=upper)
        weight = None
        if np.any(estep.ucol != 1.0):  # GBCE's label weights: each label counts u_j times
            weight = np.repeat(estep.ucol, np.diff(offsets))
        gamma0 = soft_gamma(estep.gidx, beta, a, weight)
        mu, var = self._seeded_gaussians(estep.X, gamma0, a)
        return Params(np.full(self._k, a), beta, mu, var), gamma0

    def _seeded_gaussians(self, X, gamma0, a):
        """GBCE's means and variances per cluster and feature (eqs. 16-17) under the memberships of the
        start's warm-start ``gamma0`` (a row without labels, ``gamma0 < 0``, and a missing feature count for
        nothing); a cluster without weight on a feature gets that feature's overall mean and variance."""
        k, D = self._k, X.shape[1]
        if D == 0:
            return np.zeros((k, 0)), np.ones((k, 0))
        r = np.where(gamma0[:, :1] < 0, 0.0, gamma0 - a)
        tot = r.sum(axis=1, keepdims=True)
        r = r / np.where(tot > 0, tot, 1.0)
        obs = ~np.isnan(X)
        X0 = np.where(obs, X, 0.0)
        wsum = r.T @ obs.astype(np.float64)
        safe = np.where(wsum > 0, wsum, 1.0)
        mu = (r.T @ X0) / safe
        var = (r.T @ (X0 * X0)) / safe - mu**2
        mean = np.nanmean(np.where(obs.any(axis=0), X, 0.0), axis=0)
        allvar = np.nanvar(np.where(obs.any(axis=0), X, 0.0), axis=0)
        ok = wsum > 1e-12
        mu = np.where(ok, mu, mean)
        var = np.maximum(np.where(ok, var, allvar), self.reg_covar)
        return mu, var

    def _params_from_init(self, init, categories, labels, X=None):
        """Start from a fitted estimator (or a dict of parameters); new columns' beta from its memberships."""
        k = self._k
        offsets = _offsets(categories)
        D = 0 if X is None else X.shape[1]
        if isinstance(init, dict):
            alpha = np.asarray(init["alpha"], dtype=np.float64)
            betas = [np.asarray(b, dtype=np.float64) for b in init["beta"]]
            if alpha.shape != (k,):
                raise InputError(f"init['alpha'] must have shape ({k},); got {alpha.shape}")
            if len(betas) != len(categories):
                raise InputError(f"init['beta'] must hold {len(categories)} matrices; got {len(betas)}")
            beta = np.empty((k, offsets[-1]))
            for j, b in enumerate(betas):
                if b.shape != (k, categories[j].size):
                    raise InputError(
                        f"init['beta'][{j}] must have shape {(k, categories[j].size)}; got {b.shape}"
                    )
                beta[:, offsets[j] : offsets[j + 1]] = b
            mu = np.asarray(init.get("mu", np.zeros((k, D))), dtype=np.float64)
            var = np.asarray(init.get("var", np.ones((k, D))), dtype=np.float64)
            return Params(alpha.copy(), beta, mu, var)
        if not hasattr(init, "alpha_"):
            raise InputError(
                f"init must be a fitted {type(self).__name__} or a dict of parameters; got {init!r}"
            )
        if init.alpha_.size != k:
            raise InputError(f"init has n_clusters={init.alpha_.size} but n_clusters={k}")
        n_old = len(init.beta_)
        if n_old > len(categories):
            raise InputError(
                f"labels have {len(categories)} clusterings, fewer than the {n_old} of the init estimator"
            )
        beta = np.empty((k, offsets[-1]))
        same_rows = getattr(init, "memberships_", None) is not None and init.memberships_.shape[0] == len(
            labels
        )
        for j, cats in enumerate(categories):
            a, b = offsets[j], offsets[j + 1]
            if a == b:
                continue
            if j < n_old:
                old_cats = init.categories_[j]
                blk = np.full((k, cats.size), 1e-3 / max(cats.size, 1))
                pos = np.searchsorted(cats, old_cats)
                inside = (pos < cats.size) & (cats[np.minimum(pos, cats.size - 1)] == old_cats)
                blk[:, pos[inside]] += init.beta_[j][:, inside]
                beta[:, a:b] = blk / blk.sum(axis=1, keepdims=True)
            elif same_rows:
                col = labels[:, j]
                obs = col >= 0
                codes = np.searchsorted(cats, col[obs])
                cnt = np.zeros((k, cats.size))
                for h in range(k):
                    cnt[h] = np.bincount(codes, weights=init.memberships_[obs, h], minlength=cats.size)
                cnt += 1e-3 / cats.size
                beta[:, a:b] = cnt / cnt.sum(axis=1, keepdims=True)
            else:
                beta[:, a:b] = 1.0 / cats.size
        mu = getattr(init, "means_", np.zeros((k, D)))
        var = getattr(init, "variances_", np.ones((k, D)))
        if mu.shape != (k, D):
            mu, var = np.zeros((k, D)), np.ones((k, D))
        return Params(init.alpha_.copy(), beta, np.array(mu, dtype=float), np.array(var, dtype=float))

    def _set_results(self, params, categories, trace, n_iter, converged, gamma, empty_rows):
        offsets = _offsets(categories)
        self.categories_ = categories
        self.n_clusterings_ = len(categories)
        self.alpha_ = params.alpha
        self.beta_ = [params.beta[:, offsets[j] : offsets[j + 1]].copy() for j in range(len(categories))]
        self._params = params
        gamma = np.asarray(gamma, dtype=np.float64)  # read only: no copy
        self.memberships_ = gamma / gamma.sum(axis=1, keepdims=True)
        self.labels_ = np.argmax(self.memberships_, axis=1).astype(np.int32)
        self.uncertainty_ = normalized_entropy(self.memberships_)
        self.lower_bound_ = float(trace[-1])
        self.lower_bound_trace_ = np.asarray(trace)
        self.n_iter_ = n_iter
        self.converged_ = converged
        nonempty = np.ones(gamma.shape[0], dtype=bool)
        nonempty[np.asarray(empty_rows, dtype=np.int64)] = False
        self.effective_k_ = int(np.unique(self.labels_[nonempty]).size)
        self.empty_rows_ = np.asarray(empty_rows, dtype=np.int64)

    def _emit_fit_warnings(self, stacklevel=3):
        """Warn about empty rows and non-convergence (``stacklevel`` 3 = the caller of ``fit``)."""
        n = self.memberships_.shape[0]
        if self.empty_rows_.size:
            warnings.warn(
                f"{self.empty_rows_.size} of {n} rows have no observed base label "
                f"(first: row {self.empty_rows_[0]}); they get the prior's memberships "
                "alpha / sum(alpha) (see empty_rows_)",
                EmptyRowsWarning,
                stacklevel=stacklevel,
            )
        if not self.converged_:
            warnings.warn(
                f"{type(self).__name__} did not converge in max_iter={self.max_iter} EM iterations "
                f"(last relative bound change above tol={self.tol})",
                convergence_warning(),
                stacklevel=stacklevel,
            )

    @classmethod
    def from_parameters(cls, alpha, beta, categories, *, means=None, variances=None, **params):
        """A fitted model from its parameters, as a run store keeps them; :meth:`transform` and
        :meth:`predict` then label new rows.

        Parameters
        ----------
        alpha : array-like (k,)
            The Dirichlet prior.
        beta : list of array-like (k, k_j)
            Each clustering's label distributions per cluster.
        categories : list of array-like
            Each clustering's sorted labels (those of the fit).
        means, variances : array-like (k, D), optional
            GBCE's Gaussians (required for GBCE, refused for BCE).
        **params
            The estimator's other parameters (``e_step_tol``, ``label_weight``, ...).
        """
        name = f"{cls.__name__}.from_parameters"
        alpha = np.asarray(alpha, dtype=np.float64)
        k = alpha.size
        beta, categories = check_fitted_labels(cls.__name__, k, beta, categories)
        gaussian = cls._gaussian
        if gaussian != (means is not None and variances is not None):
            raise InputError(f"{name}: means and variances are {'required' if gaussian else 'not taken'}")
        mu = np.zeros((k, 0)) if means is None else np.asarray(means, dtype=np.float64)
        var = np.ones((k, 0)) if variances is None else np.asarray(variances, dtype=np.float64)
        if mu.shape != var.shape or mu.shape[0] != k:
            raise InputError(f"{name}: means and variances must be ({k}, D); got {mu.shape}, {var.shape}")
        est = cls(k, **params)
        est._validate_params()
        est._params = Params(alpha, np.concatenate(beta, axis=1), mu, var)
        est.alpha_, est.beta_, est.categories_, est.n_clusterings_ = alpha, beta, categories, len(beta)
        if gaussian:
            est.means_, est.variances_ = mu, var
        return est

    def _check_fitted(self):
        if not hasattr(self, "alpha_"):
            raise InputError(f"This {type(self).__name__} is not fitted yet; call fit first")

    def _transform(self, labels, X=None):
        self._check_fitted()
        labels, gidx = encode_new_labels(labels, self.categories_, stacklevel=4)
        ucol, Xf, ufeat = self._weights_for(labels.shape[1], X, labels.shape[0])
        gamma = np.full((labels.shape[0], self._k), -1.0)
        kern.estep_block(
            gidx,
            np.ones(gidx.shape[0]),
            ucol,
            self._params.logbeta,
            Xf,
            ufeat,
            self._params.mu,
            self._params.var,
            self._params.alpha,
            gamma,
            float(self.e_step_tol),
            int(self.e_step_max_iter),
            math.inf,
        )
        return gamma / gamma.sum(axis=1, keepdims=True)

    def fit_predict(self, *args, **kwargs):
        """Fit and return ``labels_``."""
        return self.fit(*args, **kwargs).labels_

    def _fit_arrays(self, labels, X, init):
        check_n_clusters(self, labels.shape[0])
        rng = check_random_state(self.random_state)
        categories = label_categories(labels)
        gidx, _ = encode_labels(labels, categories)
        ucol, Xf, ufeat = self._weights_for(labels.shape[1], X, labels.shape[0])
        observed = ((gidx >= 0) & (ucol > 0)).any(axis=1)
        if Xf.shape[1]:
            observed |= (~np.isnan(Xf) & (ufeat > 0)).any(axis=1)
        empty_rows = np.flatnonzero(~observed)
        estep = _InMemoryEStep(
            gidx, ucol, Xf, ufeat, self._k, float(self.e_step_tol), int(self.e_step_max_iter)
        )
        gammas0 = None
        start = getattr(self, "init", "random")
        if init is not None:
            starts = [self._params_from_init(init, categories, labels, Xf)]
        elif not isinstance(start, str):  # a partition: one start (more would repeat it)
            assign = partition_start(start, labels.shape[0], self._k)
            counts = hard_label_counts(gidx, assign, int(_offsets(categories)[-1]), self._k)
            params, gamma0 = self._seeded_params(rng, categories, estep, counts)
            starts, gammas0 = [params], [gamma0]
        elif start in SEEDED_INITS:
            seeded = [self._seeded_params(rng, categories, estep) for _ in range(self.n_init)]
            starts, gammas0 = [p for p, _ in seeded], [g for _, g in seeded]
        else:
            starts = [
                self._random_params(rng, categories, Xf if Xf.shape[1] else None) for _ in range(self.n_init)
            ]
        layout = StatsLayout(self._k, int(_offsets(categories)[-1]), Xf.shape[1])
        return fit_em(
            self,
            estep,
            categories,
            layout,
            init_params_list=starts,
            gammas=estep.gammas,
            empty_rows=empty_rows,
            init_gammas=gammas0,
        )


def fit_em(est, estep, categories, layout, *, init_params_list, gammas, empty_rows, init_gammas=None):
    """Fit ``est`` (a BCE or GBCE) by EM over any E-step: run EM from each start in ``init_params_list``,
    keep the highest final bound and set the estimator's attributes; returns ``est``.

    ``estep`` computes the packed statistics of every row (in memory, :class:`~._em._InMemoryEStep`; on a
    cluster's row blocks, :mod:`ensemble_dask.rowblocks.bce`); ``gammas()`` gives the rows' variational
    parameters after a run; ``init_gammas`` (in memory only): per start, the rows' warm-start ``gamma``.
    """
    offsets = _offsets(categories)
    best = None
    for start, params0 in enumerate(init_params_list):
        if init_gammas is not None:
            estep.gamma[:] = init_gammas[start]
        elif start:
            estep.reset()
        params, trace, n_iter, converged, _ = run_em(
            estep,
            params0,
            layout,
            offsets,
            max_iter=est.max_iter,
            tol=est.tol,
            reg_covar=getattr(est, "reg_covar", 1e-6),
        )
        if best is None or trace[-1] > best[1][-1]:
            best = (params, trace, n_iter, converged, np.array(gammas(), dtype=np.float64))
    params, trace, n_iter, converged, gamma = best
    est._set_results(params, categories, trace, n_iter, converged, gamma, empty_rows)
    return est
