"""Bayesian cluster ensembles (BCE), generalized BCE (GBCE) and the mixture-model consensus (MM).

BCE (papers/001 Sect. 4-5) treats the row ``x_i`` of the ``n x N`` base-labels matrix as a
bag of discrete features drawn from a mixed-membership model: ``theta_i ~ Dirichlet(alpha)``,
then for each observed base clustering ``j`` a consensus cluster ``z_ij ~ theta_i`` and the
label ``x_ij ~ discrete(beta_hj)``. It is fitted by variational EM: the E-step runs eqs. 5-6
per row (numba, :mod:`._bce_kernels`), the M-step is eq. 7 for ``beta`` and the Newton
iteration of eq. 8 for ``alpha``. GBCE (Sect. 6) adds the original features with a Gaussian per
(cluster, feature) and weights ``u`` (eqs. 12-17). MM is the finite mixture of multinomials of
Topchy et al., fitted by plain EM.

The E-step of a block of rows returns only its sufficient statistics, packed in one float
vector (:class:`StatsLayout`): the beta counts, the Gaussian moments, the alpha digamma sums
``sum_i Psi(gamma_ih) - Psi(sum_h gamma_ih)``, the block's lower bound and its number of rows.
The EM driver (:func:`run_em`) only ever sees the total of those vectors, so the same driver
runs in memory, on Dask row blocks (:mod:`ensemble_dask.dask_bce`) and across sites with
secure aggregation (:mod:`ensemble_dask.federated`); one aggregation per EM iteration suffices
because alpha's Newton iteration needs only the vector ``ss`` (DESIGN.md).

Missing labels (``-1``) and missing features (``nan``) are skipped. Rows without any observed
entry carry no information: they are left out of the fit, get the prior's memberships
``alpha / sum(alpha)``, are listed in ``empty_rows_`` and reported by an
:class:`EmptyRowsWarning`.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import digamma, gammaln, logsumexp, polygamma

from .._validation import InputError, check_int, check_labels_matrix, check_random_state
from . import _bce_kernels as kern
from ._base import normalized_entropy

__all__ = [
    "BCE",
    "GBCE",
    "MM",
    "BCEWarning",
    "EmptyRowsWarning",
    "ConvergenceWarning",
    "UnseenLabelsWarning",
    "StatsLayout",
    "Params",
    "encode_labels",
    "compress_rows",
    "label_categories",
    "estep_stats",
    "m_step",
    "run_em",
    "update_alpha",
]

_TINY = 1e-300


class BCEWarning(UserWarning):
    """Base class of the warnings of the BCE family."""


class EmptyRowsWarning(BCEWarning):
    """Some rows have no observed base label (nor feature): they get the prior's memberships."""


class ConvergenceWarning(BCEWarning):
    """EM stopped at ``max_iter`` before the lower bound converged."""


class UnseenLabelsWarning(BCEWarning):
    """``transform`` met base labels absent from the fit; they are treated as missing."""


# --------------------------------------------------------------------------- label coding


def label_categories(labels):
    """Per column, the sorted distinct non-missing labels (``np.unique`` of the values >= 0)."""
    return [np.unique(col[col >= 0]).astype(np.int64) for col in np.asarray(labels).T]


def _offsets(categories):
    sizes = np.array([c.size for c in categories], dtype=np.int64)
    return np.concatenate([[0], np.cumsum(sizes)])


def encode_labels(labels, categories):
    """Map each label to its global category index ``offset_j + position in categories[j]``.

    Missing labels and labels not in ``categories[j]`` give ``-1``. Returns ``(gidx, n_unseen)``.
    """
    labels = np.asarray(labels)
    offsets = _offsets(categories)
    gidx = np.full(labels.shape, -1, dtype=np.int64)
    n_unseen = 0
    for j, cats in enumerate(categories):
        col = labels[:, j]
        obs = col >= 0
        if cats.size == 0:
            n_unseen += int(obs.sum())
            continue
        pos = np.searchsorted(cats, col[obs])
        pos_c = np.minimum(pos, cats.size - 1)
        hit = cats[pos_c] == col[obs]
        n_unseen += int((~hit).sum())
        vals = np.where(hit, offsets[j] + pos_c, -1)
        gidx[obs, j] = vals
    return gidx, n_unseen


# --------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class StatsLayout:
    """Layout of the packed sufficient-statistics vector of an E-step.

    ``[counts (k*R), wsum (k*D), wy (k*D), wy2 (k*D), ss (k), bound, n_rows]``.
    """

    k: int
    R: int
    D: int = 0

    @property
    def size(self):
        return self.k * self.R + 3 * self.k * self.D + self.k + 2

    def pack(self, counts, wsum, wy, wy2, ss, bound, n_rows):
        return np.concatenate(
            [counts.ravel(), wsum.ravel(), wy.ravel(), wy2.ravel(), ss, [float(bound), float(n_rows)]]
        )

    def unpack(self, vec):
        k, R, D = self.k, self.R, self.D
        o = 0
        counts = vec[o : o + k * R].reshape(k, R)
        o += k * R
        wsum = vec[o : o + k * D].reshape(k, D)
        o += k * D
        wy = vec[o : o + k * D].reshape(k, D)
        o += k * D
        wy2 = vec[o : o + k * D].reshape(k, D)
        o += k * D
        ss = vec[o : o + k]
        return {
            "counts": counts,
            "wsum": wsum,
            "wy": wy,
            "wy2": wy2,
            "ss": ss,
            "bound": float(vec[o + k]),
            "n_rows": float(vec[o + k + 1]),
        }


@dataclass
class Params:
    """Model parameters: ``alpha`` (k,), flat ``beta`` (k, R), Gaussian ``mu`` and ``var`` (k, D)."""

    alpha: np.ndarray
    beta: np.ndarray
    mu: np.ndarray
    var: np.ndarray

    @property
    def logbeta(self):
        return np.log(np.maximum(self.beta, _TINY))

    def copy(self):
        return Params(self.alpha.copy(), self.beta.copy(), self.mu.copy(), self.var.copy())


def compress_rows(gidx):
    """Distinct rows of ``gidx``: ``(distinct rows, multiplicities as float64, inverse index)``.

    Identical label rows have identical E-steps (same start, same parameters), so the
    E-step runs once per distinct row, weighted by its multiplicity.
    """
    gidx = np.ascontiguousarray(gidx, dtype=np.int64)
    if gidx.shape[0] == 0:
        return gidx, np.zeros(0), np.zeros(0, dtype=np.int64)
    keys = gidx.view(np.dtype((np.void, gidx.dtype.itemsize * gidx.shape[1]))).ravel()
    _, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    return np.ascontiguousarray(gidx[first]), counts.astype(np.float64), inverse.ravel().astype(np.int64)


def estep_stats(gidx, ucol, X, ufeat, params, gamma, tol, max_iter, rweight=None):
    """E-step of a block of rows: returns the packed statistics vector; ``gamma`` is updated in place.

    This NumPy-level function is what the Dask layer maps over row blocks and what a site
    runs on its own rows. ``rweight`` gives each row's multiplicity (default 1).
    """
    k = params.alpha.size
    if rweight is None:
        rweight = np.ones(gidx.shape[0])
    counts, wsum, wy, wy2, ss, bound, n_rows, _ = kern.estep_block(
        gidx,
        rweight,
        ucol,
        params.logbeta,
        X,
        ufeat,
        params.mu,
        params.var,
        params.alpha,
        gamma,
        tol,
        max_iter,
    )
    layout = StatsLayout(k, params.beta.shape[1], X.shape[1])
    return layout.pack(counts, wsum, wy, wy2, ss, bound, n_rows)


# --------------------------------------------------------------------------- M-step


def _alpha_objective(alpha, n, ss):
    return n * (gammaln(alpha.sum()) - gammaln(alpha).sum()) + float(((alpha - 1.0) * ss).sum())


def update_alpha(alpha, n, ss, *, max_iter=100, tol=1e-12):
    """Maximise ``n (lgamma(sum a) - sum lgamma(a_h)) + sum (a_h - 1) ss_h`` by eq. 8 (Newton).

    The Newton step of eq. 8 is halved while it leaves the positive orthant or lowers the
    (concave) objective, so the M-step never decreases the bound.
    """
    alpha = np.asarray(alpha, dtype=np.float64).copy()
    if n <= 0 or alpha.size == 1:  # with k = 1 the bound does not depend on alpha
        return alpha
    f = _alpha_objective(alpha, n, ss)
    for _ in range(max_iter):
        g = n * (digamma(alpha.sum()) - digamma(alpha)) + ss
        ell = -n * polygamma(1, alpha)
        v = n * polygamma(1, alpha.sum())
        c = (g / ell).sum() / (1.0 / v + (1.0 / ell).sum())
        step = (g - c) / ell
        t = 1.0
        while True:
            new = alpha - t * step
            if np.all(new > 0):
                fn = _alpha_objective(new, n, ss)
                if fn >= f - 1e-14 * abs(f):
                    break
            t *= 0.5
            if t < 1e-30:
                return alpha
        moved = np.max(np.abs(new - alpha)) / max(1.0, np.max(alpha))
        alpha, f = new, fn
        if moved < tol:
            break
    return alpha


def normalise_counts(counts, offsets):
    """Eq. 7: normalise each (cluster, clustering) block of ``counts`` over its categories.

    A block with zero mass (an empty cluster or a clustering without labels) becomes uniform.
    """
    beta = np.empty_like(counts)
    for j in range(offsets.size - 1):
        a, b = offsets[j], offsets[j + 1]
        if a == b:
            continue
        block = counts[:, a:b]
        tot = block.sum(axis=1, keepdims=True)
        beta[:, a:b] = np.where(tot > 0, block / np.where(tot > 0, tot, 1.0), 1.0 / (b - a))
    return beta


def m_step(stats, params, offsets, *, reg_covar=1e-6, fit_alpha=True):
    """M-step from total statistics: beta by eq. 7/15, (mu, var) by eqs. 16-17, alpha by eq. 8."""
    beta = normalise_counts(stats["counts"], offsets)
    mu, var = params.mu.copy(), params.var.copy()
    wsum = stats["wsum"]
    if wsum.size:
        ok = wsum > 0
        safe = np.where(ok, wsum, 1.0)
        new_mu = stats["wy"] / safe
        new_var = stats["wy2"] / safe - new_mu**2
        mu = np.where(ok, new_mu, mu)
        var = np.where(ok, np.maximum(new_var, reg_covar), var)
    alpha = params.alpha
    if fit_alpha:
        alpha = update_alpha(params.alpha, stats["n_rows"], stats["ss"])
    return Params(alpha, beta, mu, var)


def run_em(estep, params, layout, offsets, *, max_iter, tol, reg_covar=1e-6, fit_alpha=True, callback=None):
    """Variational EM driver shared by the in-memory, Dask and federated fits.

    ``estep(params, iteration)`` must return the TOTAL packed statistics over all rows for
    ``params`` (and keep the rows' ``gamma`` for the next call). Each iteration records the
    bound ``L(params_{t-1}, q_t)``; EM stops when its relative change is ``<= tol`` or after
    ``max_iter`` E-steps. The returned ``params`` are those of the last E-step, so the rows'
    ``gamma`` and the parameters are consistent.

    Returns ``(params, trace, n_iter, converged, last_stats)``.
    """
    trace = []
    converged = False
    stats = None
    for t in range(max_iter):
        stats = layout.unpack(estep(params, t))
        trace.append(stats["bound"])
        if callback is not None:
            callback(t, params, stats)
        if t > 0 and abs(trace[-1] - trace[-2]) <= tol * abs(trace[-1]):
            converged = True
            break
        if t == max_iter - 1:
            break
        params = m_step(stats, params, offsets, reg_covar=reg_covar, fit_alpha=fit_alpha)
    return params, trace, len(trace), converged, stats


# --------------------------------------------------------------------------- estimators


def _check_tol(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
        raise InputError(f"The {name!r} parameter must be a non-negative number; got {value!r}")
    return float(value)


class _InMemoryEStep:
    """E-step over all rows in memory, keeping each row's gamma between EM iterations.

    Without features, identical rows are merged (:func:`compress_rows`) and processed once.
    """

    def __init__(self, gidx, ucol, X, ufeat, k, tol, max_iter):
        if X.shape[1] == 0:
            gidx, self.rweight, self.inverse = compress_rows(gidx)
            X = np.empty((gidx.shape[0], 0))
        else:
            self.rweight, self.inverse = np.ones(gidx.shape[0]), None
        self.gidx, self.ucol, self.X, self.ufeat = gidx, ucol, X, ufeat
        self.gamma = np.full((gidx.shape[0], k), -1.0)
        self.tol, self.max_iter = tol, max_iter

    def __call__(self, params, t):
        return estep_stats(
            self.gidx,
            self.ucol,
            self.X,
            self.ufeat,
            params,
            self.gamma,
            self.tol,
            self.max_iter,
            self.rweight,
        )

    def reset(self):
        self.gamma.fill(-1.0)

    def gammas(self):
        return self.gamma if self.inverse is None else self.gamma[self.inverse]


class _BCEBase:
    """Shared machinery of BCE and GBCE (the E-step kernel handles both)."""

    _n_features = 0

    def _check_params(self):
        self._k = check_int(self.n_clusters, "n_clusters", min_value=1)
        check_int(self.n_init, "n_init", min_value=1)
        check_int(self.max_iter, "max_iter", min_value=1)
        check_int(self.e_step_max_iter, "e_step_max_iter", min_value=1)
        _check_tol(self.tol, "tol")
        _check_tol(self.e_step_tol, "e_step_tol")
        if isinstance(self.alpha_init, bool) or not isinstance(self.alpha_init, numbers.Real):
            raise InputError(f"The 'alpha_init' parameter must be a positive number; got {self.alpha_init!r}")
        if not self.alpha_init > 0:
            raise InputError(f"The 'alpha_init' parameter must be > 0; got {self.alpha_init!r}")

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

    def _fit_backend(self, estep, categories, layout, *, init_params_list, gammas, empty_rows):
        """Run EM from each start in ``init_params_list`` and keep the highest final bound."""
        offsets = _offsets(categories)
        best = None
        for start, params0 in enumerate(init_params_list):
            if start:
                estep.reset()
            params, trace, n_iter, converged, _ = run_em(
                estep,
                params0,
                layout,
                offsets,
                max_iter=self.max_iter,
                tol=self.tol,
                reg_covar=getattr(self, "reg_covar", 1e-6),
            )
            if best is None or trace[-1] > best[1][-1]:
                best = (params, trace, n_iter, converged, np.array(gammas(), dtype=np.float64))
        params, trace, n_iter, converged, gamma = best
        self._set_results(params, categories, trace, n_iter, converged, gamma, empty_rows)
        return self

    def _set_results(self, params, categories, trace, n_iter, converged, gamma, empty_rows):
        offsets = _offsets(categories)
        self.categories_ = categories
        self.n_clusterings_ = len(categories)
        self.alpha_ = params.alpha
        self.beta_ = [params.beta[:, offsets[j] : offsets[j + 1]].copy() for j in range(len(categories))]
        self._params = params
        gamma = np.array(gamma, dtype=np.float64)
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
                ConvergenceWarning,
                stacklevel=stacklevel,
            )

    def _check_fitted(self):
        if not hasattr(self, "alpha_"):
            raise InputError(f"This {type(self).__name__} is not fitted yet; call fit first")

    def _transform(self, labels, X=None):
        self._check_fitted()
        labels = check_labels_matrix(labels)
        if labels.shape[1] != self.n_clusterings_:
            raise InputError(
                f"labels must have the {self.n_clusterings_} clusterings of the fit; got {labels.shape[1]}"
            )
        gidx, n_unseen = encode_labels(labels, self.categories_)
        if n_unseen:
            warnings.warn(
                f"{n_unseen} base labels were not seen in the fit; they are treated as missing",
                UnseenLabelsWarning,
                stacklevel=3,
            )
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
        )
        return gamma / gamma.sum(axis=1, keepdims=True)

    def fit_predict(self, *args, **kwargs):
        """Fit and return ``labels_``."""
        return self.fit(*args, **kwargs).labels_


class BCE(_BCEBase):
    """Bayesian cluster ensemble (papers/001 Sect. 4-5): mixed-membership consensus by variational EM.

    Parameters
    ----------
    n_clusters : int, default=2
        Number ``k`` of consensus clusters (a maximum: clusters may end up empty, see
        ``effective_k_``).
    n_init : int, default=1
        Number of seeded random starts; the fit with the highest final lower bound is kept.
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
        Seed of the random starts (Dirichlet draws of ``beta``).

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
    >>> bce = BCE(n_clusters=2, n_init=3, random_state=0).fit(labels)
    >>> bool(bce.labels_[0] == bce.labels_[2] != bce.labels_[3] == bce.labels_[5])
    True
    >>> bool(bce.uncertainty_[2] > bce.uncertainty_[0])  # row 2 disagrees on one clustering
    True
    >>> bce.memberships_.shape, len(bce.beta_), bce.beta_[2].shape
    ((6, 2), 3, (2, 2))
    """

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
        self._check_params()
        labels = check_labels_matrix(labels)
        if init is None and self.warm_start and hasattr(self, "alpha_"):
            init = self
        self._fit_arrays(labels, None, init)
        self._emit_fit_warnings()
        return self

    def _fit_arrays(self, labels, X, init):
        rng = check_random_state(self.random_state)
        categories = label_categories(labels)
        gidx, _ = encode_labels(labels, categories)
        ucol, Xf, ufeat = self._weights_for(labels.shape[1], X, labels.shape[0])
        observed = ((gidx >= 0) & (ucol > 0)).any(axis=1)
        if Xf.shape[1]:
            observed |= (~np.isnan(Xf) & (ufeat > 0)).any(axis=1)
        empty_rows = np.flatnonzero(~observed)
        if init is not None:
            starts = [self._params_from_init(init, categories, labels, Xf)]
        else:
            starts = [
                self._random_params(rng, categories, Xf if Xf.shape[1] else None) for _ in range(self.n_init)
            ]
        layout = StatsLayout(self._k, int(_offsets(categories)[-1]), Xf.shape[1])
        estep = _InMemoryEStep(
            gidx, ucol, Xf, ufeat, self._k, float(self.e_step_tol), int(self.e_step_max_iter)
        )
        return self._fit_backend(
            estep,
            categories,
            layout,
            init_params_list=starts,
            gammas=estep.gammas,
            empty_rows=empty_rows,
        )

    def transform(self, labels):
        """Memberships of (new) rows by the E-step with the fitted ``alpha_`` and ``beta_``.

        Labels unseen in the fit are treated as missing (with an :class:`UnseenLabelsWarning`).
        """
        return self._transform(labels)

    def predict(self, labels):
        """Hard consensus labels of (new) rows: ``argmax`` of :meth:`transform`."""
        return np.argmax(self.transform(labels), axis=1).astype(np.int32)


class GBCE(_BCEBase):
    """Generalized BCE (papers/001 Sect. 6): base labels plus original features, with weights.

    Each feature is Gaussian per consensus cluster (eqs. 13, 16, 17); each base clustering
    and each feature has a weight ``u`` (eqs. 12-15). Missing labels are ``-1``, missing
    features ``nan``.

    Parameters
    ----------
    n_clusters : int, default=2
        Number of consensus clusters.
    label_weight : float or array-like (N,) or None, default=None
        Weight ``u_j`` of each base clustering; None uses the paper's choice (Sect. 7.6): the
        number of features ``D``.
    feature_weight : float or array-like (D,), default=1.0
        Weight of each feature.
    reg_covar : float, default=1e-6
        Lower bound on every variance.
    n_init, max_iter, tol, e_step_tol, e_step_max_iter, alpha_init, warm_start, random_state
        As in :class:`BCE`; random starts also draw the initial means among the rows.

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
    >>> g = GBCE(n_clusters=2, n_init=3, random_state=0).fit(labels, X)
    >>> bool(g.labels_[0] == g.labels_[2] != g.labels_[3] == g.labels_[5])
    True
    >>> g.means_.shape
    (2, 2)
    """

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
        self._check_params()
        _check_tol(self.reg_covar, "reg_covar")
        labels = check_labels_matrix(labels)
        if init is None and self.warm_start and hasattr(self, "alpha_"):
            init = self
        BCE._fit_arrays(self, labels, X, init)
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


class MM:
    """Mixture-model consensus (Topchy, Jain and Punch 2004): a finite mixture of multinomials.

    ``p(x_i) = sum_h pi_h prod_{j observed} beta_hj(x_ij)``, fitted by EM; missing labels are
    skipped (they are marginalised out).

    Parameters
    ----------
    n_clusters : int, default=2
        Number of mixture components.
    n_init : int, default=1
        Random starts; the highest log-likelihood is kept.
    max_iter : int, default=200
        Maximum EM iterations.
    tol : float, default=1e-6
        Stop when the relative change of the log-likelihood is at most ``tol``.
    random_state : int, Generator or None, default=None
        Seed of the random starts.

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
    >>> mm = MM(n_clusters=2, n_init=3, random_state=0).fit(labels)
    >>> bool(mm.labels_[0] == mm.labels_[2] != mm.labels_[3] == mm.labels_[5])
    True
    """

    def __init__(self, n_clusters=2, *, n_init=1, max_iter=200, tol=1e-6, random_state=None):
        self.n_clusters = n_clusters
        self.n_init = n_init
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
        k = check_int(self.n_clusters, "n_clusters", min_value=1)
        check_int(self.n_init, "n_init", min_value=1)
        check_int(self.max_iter, "max_iter", min_value=1)
        _check_tol(self.tol, "tol")
        labels = check_labels_matrix(labels)
        rng = check_random_state(self.random_state)
        categories = label_categories(labels)
        offsets = _offsets(categories)
        gidx, _ = encode_labels(labels, categories)
        empty = ~(gidx >= 0).any(axis=1)
        empty_rows = np.flatnonzero(empty)
        if empty_rows.size:
            warnings.warn(
                f"{empty_rows.size} of {labels.shape[0]} rows have no observed base label; "
                "they get the mixing proportions as memberships (see empty_rows_)",
                EmptyRowsWarning,
                stacklevel=2,
            )
        best = None
        for _ in range(self.n_init):
            beta = np.empty((k, offsets[-1]))
            for j, cats in enumerate(categories):
                if cats.size:
                    beta[:, offsets[j] : offsets[j + 1]] = rng.dirichlet(np.ones(cats.size), size=k)
            pi = np.full(k, 1.0 / k)
            trace = []
            converged = False
            for t in range(self.max_iter):
                ll = self._loglik(gidx, np.log(np.maximum(pi, _TINY)), np.log(np.maximum(beta, _TINY)))
                norm = logsumexp(ll, axis=1, keepdims=True)
                trace.append(float(norm[~empty].sum()))
                resp = np.exp(ll - norm)
                if t > 0 and abs(trace[-1] - trace[-2]) <= self.tol * abs(trace[-1]):
                    converged = True
                    break
                if t == self.max_iter - 1:
                    break
                r = resp[~empty]
                pi = r.sum(axis=0) / max(r.shape[0], 1) if r.shape[0] else pi
                counts = np.zeros((k, offsets[-1]))
                for j in range(gidx.shape[1]):
                    g = gidx[:, j]
                    obs = g >= 0
                    for h in range(k):
                        counts[h] += np.bincount(g[obs], weights=resp[obs, h], minlength=offsets[-1])
                beta = normalise_counts(counts, offsets)
            if best is None or trace[-1] > best[0][-1]:
                best = (trace, converged, pi, beta, resp)
        trace, converged, pi, beta, resp = best
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
        self.effective_k_ = int(np.unique(self.labels_[~empty]).size)
        self.empty_rows_ = empty_rows
        if not converged:
            warnings.warn(
                f"MM did not converge in max_iter={self.max_iter} EM iterations",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def transform(self, labels):
        """Posterior responsibilities of (new) rows under the fitted mixture."""
        if not hasattr(self, "weights_"):
            raise InputError("This MM is not fitted yet; call fit first")
        labels = check_labels_matrix(labels)
        if labels.shape[1] != self.n_clusterings_:
            raise InputError(
                f"labels must have the {self.n_clusterings_} clusterings of the fit; got {labels.shape[1]}"
            )
        gidx, n_unseen = encode_labels(labels, self.categories_)
        if n_unseen:
            warnings.warn(
                f"{n_unseen} base labels were not seen in the fit; they are treated as missing",
                UnseenLabelsWarning,
                stacklevel=2,
            )
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
