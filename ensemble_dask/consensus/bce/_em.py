"""Shared machinery of the BCE family: label coding, packed E-step statistics, M-step and EM driver.

BCE (Wang et al. 2011 Sect. 4-5) treats the row ``x_i`` of the ``n x N`` base-labels matrix as a
bag of discrete features drawn from a mixed-membership model; it is fitted by variational EM:
the E-step runs eqs. 5-6 per row (numba, :mod:`._kernels`), the M-step is eq. 7 for
``beta`` and the Newton iteration of eq. 8 for ``alpha``.

The E-step of a block of rows returns only its sufficient statistics, packed in one float
vector (:class:`StatsLayout`): the beta counts, the Gaussian moments, the alpha digamma sums
``sum_i Psi(gamma_ih) - Psi(sum_h gamma_ih)``, the block's lower bound and its number of rows.
The EM driver (:func:`run_em`) only ever sees the total of those vectors, so the same driver
runs in memory, on Dask row blocks (:mod:`ensemble_dask.rowblocks.bce`) and across sites with
secure aggregation (:mod:`ensemble_dask.federated`); one aggregation per EM iteration suffices
because alpha's Newton iteration needs only the vector ``ss`` (DESIGN.md).

The estimators live in :mod:`._bce` (BCE), :mod:`._gbce` (GBCE) and :mod:`._mm` (MM); the
shared estimator base class in :mod:`._base`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import digamma, gammaln, polygamma

from ..._validation import InputError
from ...runtime.threads import thread_map
from .._common.encoding import Encoding, UnseenLabelsWarning, column_categories, compress_rows
from .._common.encoding import encode_new_labels as _encode_new
from . import _kernels as kern

__all__ = [
    "BCEWarning",
    "EmptyRowsWarning",
    "UnseenLabelsWarning",
    "StatsLayout",
    "Params",
    "encode_labels",
    "encode_new_labels",
    "check_fitted_labels",
    "label_categories",
    "estep_stats",
    "m_step",
    "normalise_counts",
    "run_em",
    "update_alpha",
]

_TINY = 1e-300
#: rows per E-step block in memory: blocks run on the cores side by side, their statistics summed in order
ESTEP_BLOCK = 65_536


class BCEWarning(UserWarning):
    """Base class of the warnings of the BCE family."""


class EmptyRowsWarning(BCEWarning):
    """Some rows have no observed base label (nor feature): they get the prior's memberships."""


# --------------------------------------------------------------------------- label coding


def label_categories(labels):
    """Per column, the sorted distinct non-missing labels (``np.unique`` of the values >= 0), read in one pass
    over the rows when the labels are small
    (:func:`~ensemble_dask.consensus._common.encoding.column_categories`, shared with KCC)."""
    return column_categories(labels)


def _offsets(categories):
    sizes = np.array([c.size for c in categories], dtype=np.int64)
    return np.concatenate([[0], np.cumsum(sizes)])


def encode_labels(labels, categories):
    """Map each label to its global category index ``offset_j + position in categories[j]``.

    Missing labels and labels not in ``categories[j]`` give ``-1``. Returns ``(gidx, n_unseen)``;
    ``gidx`` is int32 (half the memory of int64), the encoding of KCC
    (:class:`~ensemble_dask.consensus._common.encoding.Encoding`, a table lookup per row when the labels are
    small).
    """
    labels = np.asarray(labels)
    enc = Encoding.from_categories(categories)
    if enc.n_categories >= 2**31:
        raise InputError(f"labels hold {enc.n_categories} categories; at most 2**31 - 1 are supported")
    gidx = enc.transform(labels)
    n_unseen = int(np.count_nonzero(gidx < 0) - np.count_nonzero(labels < 0))
    return gidx, n_unseen


# --------------------------------------------------------------------------- statistics


def check_fitted_labels(name, k, beta, categories):
    """``(beta, categories)`` of a model rebuilt from its parameters (``name``'s ``from_parameters``): one
    ``k x k_j`` matrix of label distributions per clustering, over each clustering's sorted labels."""
    beta = [np.asarray(b, dtype=np.float64) for b in beta]
    categories = [np.asarray(c, dtype=np.int64) for c in categories]
    if len(beta) != len(categories) or any(
        b.shape != (k, c.size) for b, c in zip(beta, categories, strict=True)
    ):
        raise InputError(
            f"{name}.from_parameters: beta must hold one ({k}, k_j) matrix per clustering of categories; got "
            f"shapes {[b.shape for b in beta]} for {[c.size for c in categories]} labels"
        )
    return beta, categories


def encode_new_labels(labels, categories, *, stacklevel):
    """``(labels, gidx)``: new rows' labels checked and coded with the ``categories`` of a fit
    (:func:`~ensemble_dask.consensus._common.encoding.encode_new_labels`: labels the fit never saw are
    missing, with an :class:`UnseenLabelsWarning` ``stacklevel`` frames up)."""
    return _encode_new(labels, Encoding.from_categories(categories), stacklevel=stacklevel)


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


def estep_stats(gidx, ucol, X, ufeat, params, gamma, tol, max_iter, rweight=None, clip=None, exact=False):
    """E-step of a block of rows: returns the packed statistics vector; ``gamma`` is updated in place.

    This NumPy-level function is what the Dask layer maps over row blocks and what a site
    runs on its own rows. ``rweight`` gives each row's multiplicity (default 1). With ``clip``, each row's
    terms of ``ss`` and ``bound`` are clipped to ``[-clip, clip]`` and the vector ends with one more entry,
    the (weighted) count of rows clipped (see :func:`._kernels.estep_block`). With ``exact`` (BCE only: no
    features, integer ``rweight``), the vector is int64 of shape ``(2, size)``: whole parts, then units of
    ``2**-32``, each row's terms rounded to that grid and summed exactly
    (:func:`._kernels.estep_block_exact`).
    """
    k = params.alpha.size
    if rweight is None:
        rweight = np.ones(gidx.shape[0])
    R = params.beta.shape[1]
    if exact and (X.shape[1] or ucol.max(initial=0.0) > 1.0):
        raise ValueError("exact sums are for BCE: no features, clustering weights at most 1")
    q = [np.zeros(shape, dtype=np.int64) for shape in ([(R, k), (2, k), (2, 1)] if exact else [(0, 0)] * 3)]
    counts, wsum, wy, wy2, ss, bound, n_rows, _, clipped = kern.estep_block_exact(
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
        math.inf if clip is None else float(clip),
        *q,
    )
    if exact:  # the layout of pack, with no features: [counts, ss, bound, n_rows(, clipped)]
        qcounts, qss, qbound = q
        tail = [round(n_rows)] + ([] if clip is None else [round(clipped)])
        whole = np.concatenate([np.zeros(k * R, np.int64), qss[0], qbound[0], tail])
        return np.stack([whole, np.concatenate([qcounts.T.ravel(), qss[1], qbound[1], [0] * len(tail)])])
    vec = StatsLayout(k, params.beta.shape[1], X.shape[1]).pack(counts, wsum, wy, wy2, ss, bound, n_rows)
    return vec if clip is None else np.append(vec, clipped)


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


# --------------------------------------------------------------------------- seeding


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
        n = self.gidx.shape[0]
        blocks = [slice(a, min(a + ESTEP_BLOCK, n)) for a in range(0, n, ESTEP_BLOCK)]

        def block(b):
            g = self.gamma[b]  # a view: updated in place
            return estep_stats(
                self.gidx[b],
                self.ucol,
                self.X[b],
                self.ufeat,
                params,
                g,
                self.tol,
                self.max_iter,
                self.rweight[b],
            )

        if len(blocks) == 1:
            return block(blocks[0])
        # fixed blocks summed in their order: the same result on any number of threads
        return np.sum(thread_map(block, blocks), axis=0)

    def reset(self):
        self.gamma.fill(-1.0)

    def gammas(self):
        return self.gamma if self.inverse is None else self.gamma[self.inverse]
