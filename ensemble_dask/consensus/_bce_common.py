"""Shared machinery of the BCE family: label coding, packed E-step statistics, M-step and EM driver.

BCE (papers/001 Sect. 4-5) treats the row ``x_i`` of the ``n x N`` base-labels matrix as a
bag of discrete features drawn from a mixed-membership model; it is fitted by variational EM:
the E-step runs eqs. 5-6 per row (numba, :mod:`._bce_kernels`), the M-step is eq. 7 for
``beta`` and the Newton iteration of eq. 8 for ``alpha``.

The E-step of a block of rows returns only its sufficient statistics, packed in one float
vector (:class:`StatsLayout`): the beta counts, the Gaussian moments, the alpha digamma sums
``sum_i Psi(gamma_ih) - Psi(sum_h gamma_ih)``, the block's lower bound and its number of rows.
The EM driver (:func:`run_em`) only ever sees the total of those vectors, so the same driver
runs in memory, on Dask row blocks (:mod:`ensemble_dask.dask_bce`) and across sites with
secure aggregation (:mod:`ensemble_dask.federated`); one aggregation per EM iteration suffices
because alpha's Newton iteration needs only the vector ``ss`` (DESIGN.md).

The estimators live in :mod:`.bce` (BCE), :mod:`.gbce` (GBCE) and :mod:`.mm` (MM); the
shared estimator base class in :mod:`._bce_base`.
"""

from __future__ import annotations

import math
import numbers
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy.special import digamma, gammaln, polygamma

from .._threads import thread_map
from .._validation import InputError
from . import _bce_kernels as kern

__all__ = [
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
    "hard_gamma",
    "m_step",
    "normalise_counts",
    "run_em",
    "seed_partition",
    "seeded_alpha",
    "seeded_beta",
    "update_alpha",
]

_TINY = 1e-300
#: rows per E-step block in memory: blocks run on the cores side by side, their statistics summed in order
ESTEP_BLOCK = 65_536


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
    return [_present(col[col >= 0]) for col in np.asarray(labels).T]


def _present(values):
    """Sorted distinct values of a 1-d array of non-negative integers (a bincount when they are small)."""
    if values.size and values.max() < 4 * values.size + 1024:
        return np.flatnonzero(np.bincount(values)).astype(np.int64)
    return np.unique(values).astype(np.int64)


def _offsets(categories):
    sizes = np.array([c.size for c in categories], dtype=np.int64)
    return np.concatenate([[0], np.cumsum(sizes)])


def gidx_dtype(n_categories):
    """The dtype of global category indices: int32 below 2**31 categories, else int64."""
    return np.dtype(np.int32 if n_categories < 2**31 else np.int64)


def encode_labels(labels, categories):
    """Map each label to its global category index ``offset_j + position in categories[j]``.

    Missing labels and labels not in ``categories[j]`` give ``-1``. Returns ``(gidx, n_unseen)``;
    ``gidx`` is int32 (half the memory of int64: 0.2 GB on all of KDD 10%) unless there are 2**31
    categories or more.
    """
    labels = np.asarray(labels)
    offsets = _offsets(categories)
    gidx = np.full(labels.shape, -1, dtype=gidx_dtype(offsets[-1]))
    n_unseen = 0
    for j, cats in enumerate(categories):
        col = labels[:, j]
        obs = col >= 0
        if cats.size == 0:
            n_unseen += int(obs.sum())
            continue
        vals = col[obs]
        top = max(int(cats[-1]), int(vals.max(initial=0)))
        if top < 4 * vals.size + 1024:  # a lookup table instead of a binary search
            table = np.full(top + 1, -1, dtype=gidx.dtype)
            table[cats] = offsets[j] + np.arange(cats.size)
            mapped = table[vals]
            n_unseen += int((mapped < 0).sum())
            gidx[obs, j] = mapped
            continue
        pos = np.searchsorted(cats, vals)
        pos_c = np.minimum(pos, cats.size - 1)
        hit = cats[pos_c] == vals
        n_unseen += int((~hit).sum())
        gidx[obs, j] = np.where(hit, offsets[j] + pos_c, -1)
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
    if gidx.shape[0] == 0:
        return gidx, np.zeros(0), np.zeros(0, dtype=np.int64)
    # distinct 64-bit row hashes first (one sort of integers), checked against the rows; the exact
    # byte-wise comparison is the fallback should two distinct rows ever share a hash
    _, first, inverse, counts = np.unique(
        kern.row_hashes(gidx), return_index=True, return_inverse=True, return_counts=True
    )
    if first.size == gidx.shape[0]:  # distinct hashes: distinct rows
        return gidx, np.ones(gidx.shape[0]), np.arange(gidx.shape[0], dtype=np.int64)
    inverse = inverse.ravel().astype(np.int64)
    distinct = gidx[first]
    step = max(1, (16 << 20) // max(1, gidx.itemsize * gidx.shape[1]))  # checked in blocks of ~16 MiB
    if not all(
        np.array_equal(distinct[inverse[s : s + step]], gidx[s : s + step])
        for s in range(0, gidx.shape[0], step)
    ):
        keys = gidx.view(np.dtype((np.void, gidx.dtype.itemsize * gidx.shape[1]))).ravel()
        _, first, inverse, counts = np.unique(
            keys, return_index=True, return_inverse=True, return_counts=True
        )
        inverse = inverse.ravel().astype(np.int64)
        distinct = gidx[first]
    return np.ascontiguousarray(distinct), counts.astype(np.float64), inverse


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


# --------------------------------------------------------------------------- seeding


#: k-means++ seedings tried by :func:`seed_partition`; the lowest KCC objective is kept. One seeding
#: reached ARI 0.870 on 10 blobs (k in [5, 20], 5,000 points) where BCE's optimum is 0.999; the
#: seedings cost a Lloyd run each, far less than the EM they start
N_SEEDINGS = 5
#: ... while the (distinct) label rows are at most this many; above, one seeding: there the seedings would
#: cost more than the EM (500,000 subsampled rows, all distinct: BCE 10.8 s with five, against ccHBGF's 1.8 s)
SEEDINGS_FEW_ROWS = 20_000
#: besides the seedings, :func:`seed_partition` offers HBGF's spectral partition and keeps the lower KCC
#: objective: at K = 30 (500,000 subsampled rows) k-means++ and Lloyd stop in a local optimum (ARI 0.951, then
#: BCE 32 s for 45 EM iterations) that the spectral start avoids (0.992, BCE 8.3 s, 4 iterations). The two run
#: side by side on two threads above this many rows while the rows take at most SIDE_BY_SIDE_BYTES
SIDE_BY_SIDE_ROWS = 50_000
SIDE_BY_SIDE_BYTES = 64 << 20
#: HBGF partitions at most this many (distinct) label rows for that start; Lloyd steps take it to every row
SPECTRAL_SAMPLE = 20_000


def seed_partition(gidx, w, offsets, k, rng, *, max_lloyd=20, n_seedings=None, spectral=True):
    """A hard start for EM: the best of ``n_seedings`` greedy k-means++ seedings on the label rows,
    each followed by Lloyd steps of KCC, and of HBGF's spectral partition of the rows
    (:class:`~.baselines_labels.HBGF`, on a sample of them above :data:`SPECTRAL_SAMPLE` rows) followed
    by Lloyd steps likewise, by KCC's objective (the weighted squared distance of the
    rows to their cluster's centroid, over the observed entries). ``n_seedings`` defaults to
    :data:`N_SEEDINGS` up to :data:`SEEDINGS_FEW_ROWS` rows, else 1.

    KCC is k-means on the one-hot coded labels (``-1`` entries skipped); the k-means++ distance
    between two rows is the share of their jointly observed entries that differ
    (:func:`._bce_kernels.row_distance`). ``w`` weighs each row (its multiplicity when identical
    rows were merged). Lloyd steps stop when fewer than 0.1 % of the rows move, or after
    ``max_lloyd``. Every random draw comes from ``rng``. ``spectral=False`` leaves HBGF out;
    ``n_seedings=0`` leaves only it.

    Returns ``counts`` ``(k, R)``: per cluster, the weight of its rows holding each global
    category (the M-step counts of the hard partition), and ``assign`` ``(n,)``: each row's
    cluster (``-1`` for a row without any observed label).
    """
    gidx = _int_rows(gidx)
    w = np.ascontiguousarray(w, dtype=np.float64)
    R = int(offsets[-1])
    N = gidx.shape[1]
    keep = (gidx >= 0).any(axis=1)
    full = np.full(gidx.shape[0], -1, dtype=np.int64)
    if not keep.all():
        gidx, w = np.ascontiguousarray(gidx[keep]), np.ascontiguousarray(w[keep])
    if gidx.shape[0] == 0:
        return np.zeros((k, R)), full
    if n_seedings is None:
        n_seedings = N_SEEDINGS if gidx.shape[0] <= SEEDINGS_FEW_ROWS else 1
    col_of_cat = np.repeat(np.arange(N), np.diff(offsets))
    to_col = np.zeros((R, N))
    to_col[np.arange(R), col_of_cat] = 1.0
    spectral = (spectral and 1 < k <= gidx.shape[0]) or n_seedings == 0
    # drawn first: the seedings' draws never depend on threads
    hbgf_seed = int(rng.integers(2**31 - 1)) if spectral else None

    def seedings():
        best = None
        for _ in range(n_seedings):
            obj, counts, assign = _seeded_lloyd(gidx, w, k, R, col_of_cat, to_col, rng, max_lloyd)
            # a near-tie keeps the earlier seeding, so rounding (e.g. merged identical rows) cannot decide
            if best is None or obj < best[0] - 1e-9 * abs(best[0]):
                best = (obj, counts, assign)
        return best

    def spectral_candidate():
        return _spectral_lloyd(gidx, w, k, R, col_of_cat, to_col, hbgf_seed, max_lloyd)

    if not spectral:
        best, hb = seedings(), None
    elif gidx.shape[0] > SIDE_BY_SIDE_ROWS and gidx.nbytes <= SIDE_BY_SIDE_BYTES:
        # side by side on two threads (the kernels and the eigensolver release the GIL)
        best, hb = thread_map(lambda f: f(), [seedings, spectral_candidate], max_threads=2)
    else:
        best, hb = seedings(), spectral_candidate()
    if hb is not None and (best is None or hb[0] < best[0] - 1e-9 * abs(best[0])):
        best = hb
    if best is None:  # n_seedings=0 and no spectral partition: one seeding after all
        best = _seeded_lloyd(gidx, w, k, R, col_of_cat, to_col, rng, max_lloyd)
    _, counts, assign = best
    full[keep] = assign
    return counts, full


def _seeded_lloyd(gidx, w, k, R, col_of_cat, to_col, rng, max_lloyd):
    """One k-means++ seeding and its Lloyd steps: ``(KCC objective, counts, assign)``."""
    first = int(rng.choice(gidx.shape[0], p=w / w.sum()))
    u = rng.random((k, 2 + int(np.log(k))))
    centers = kern.kmeanspp_rows(gidx, w, first, u)
    centroid = np.zeros((k, R))
    for h, c in enumerate(centers):
        g = gidx[c][gidx[c] >= 0]
        centroid[h, g] = 1.0
    return _lloyd(gidx, w, centroid, col_of_cat, to_col, max_lloyd)


def _lloyd(gidx, w, centroid, col_of_cat, to_col, max_lloyd):
    """Lloyd steps of KCC from ``centroid`` (k, R), updated in place: ``(KCC objective, counts, assign)``."""
    k, R = centroid.shape
    assign = np.full(gidx.shape[0], -1, dtype=np.int64)
    for _ in range(max_lloyd):
        moved = kern.kcc_assign(gidx, centroid, centroid**2 @ to_col, assign)
        counts, nobs = kern.kcc_counts(gidx, w, assign, k, R)
        if moved <= 1e-3 * gidx.shape[0]:
            break
        _set_centroids(centroid, counts, nobs, col_of_cat)
    return _kcc_objective(counts, nobs, col_of_cat), counts, assign


def _set_centroids(centroid, counts, nobs, col_of_cat):
    """Each cluster's centroid: the share of its rows holding each category, per clustering (an
    emptied cluster keeps its centroid)."""
    per_cat = nobs[:, col_of_cat]
    live = nobs.sum(axis=1) > 0
    centroid[live] = np.where(
        per_cat[live] > 0, counts[live] / np.where(per_cat[live] > 0, per_cat[live], 1), 0
    )


def _spectral_lloyd(gidx, w, k, R, col_of_cat, to_col, seed, max_lloyd):
    """HBGF's spectral partition as a start, then Lloyd steps of KCC: ``(KCC objective, counts, assign)``,
    or None when no clustering holds two labels among the rows HBGF sees.

    Above :data:`SPECTRAL_SAMPLE` rows HBGF partitions a uniform sample of them (weights kept), whose
    centroids start the Lloyd steps on every row: the cost stays that of the sample (on all of KDD
    10%, 494,021 distinct rows of 100 labels, HBGF on every row added 11 s and 650 MiB to BCE).
    """
    rng = np.random.default_rng(seed)
    rows = np.arange(gidx.shape[0])
    if gidx.shape[0] > SPECTRAL_SAMPLE:
        rows = np.sort(rng.choice(gidx.shape[0], size=SPECTRAL_SAMPLE, replace=False))
    sw = np.ascontiguousarray(w[rows])
    lab = spectral_partition(gidx[rows], sw, k, int(rng.integers(2**31 - 1)))
    if lab is None:
        return None
    counts, nobs = kern.kcc_counts(gidx[rows], sw, lab, k, R)
    centroid = np.zeros((k, R))
    _set_centroids(centroid, counts, nobs, col_of_cat)
    return _lloyd(gidx, w, centroid, col_of_cat, to_col, max_lloyd)


def spectral_partition(gidx, w, k, seed):
    """HBGF's partition (int64 labels) of the rows ``gidx`` weighted by ``w``, from the clusterings that
    hold two labels among them (HBGF refuses the others, which separate nothing); None when there is no
    such clustering or fewer rows than ``k``. A start: HBGF's own convergence warnings are silenced."""
    from .baselines_labels import HBGF

    cols = two_label_columns(gidx)
    if cols.size == 0 or k < 2 or gidx.shape[0] < k:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = HBGF(k, random_state=seed).fit(np.ascontiguousarray(gidx[:, cols]), sample_weight=w)
    return fit.labels_.astype(np.int64)


def two_label_columns(labels):
    """Indices of the columns of ``labels`` (``-1`` = missing) that hold at least two distinct labels."""
    labels = np.asarray(labels)
    present = labels >= 0
    lo = np.where(present, labels, np.iinfo(labels.dtype).max).min(axis=0, initial=np.iinfo(labels.dtype).max)
    hi = np.where(present, labels, -1).max(axis=0, initial=-1)
    return np.flatnonzero(hi > lo)


def _kcc_objective(counts, nobs, col_of_cat):
    """KCC's objective of a hard partition from its M-step counts: the sum over clusters h and
    clusterings j of ``n_hj - sum_c counts_hc^2 / n_hj`` (the squared distances of one-hot rows)."""
    per_cat = nobs[:, col_of_cat]
    sq = np.where(per_cat > 0, counts**2 / np.where(per_cat > 0, per_cat, 1), 0.0)
    return float(nobs.sum() - sq.sum())


def soft_gamma(gidx, beta, a):
    """``gamma_i = a + sum_j phi_ij`` with ``phi_ijh`` proportional to ``beta_h(x_ij)`` (a flat prior):
    a warm start for the E-step that lets every row choose its clusters under ``beta``."""
    logbeta = np.log(np.maximum(beta, _TINY))
    p = np.exp(logbeta.T - logbeta.max(axis=0)[:, None])  # (R, k): phi of each category, one per label
    p /= p.sum(axis=1, keepdims=True)
    gamma = np.empty((gidx.shape[0], beta.shape[0]))
    kern.soft_gamma_rows(_int_rows(gidx), p, float(a), gamma)
    return gamma


def hard_gamma(gidx, assign, a, k):
    """``gamma_i = a + m_i e_{assign_i}``: the variational Dirichlet of a row placed wholly in its
    cluster (``m_i`` observed labels); a warm start for the E-step (``-1`` rows: fresh start)."""
    m = (np.asarray(gidx) >= 0).sum(axis=1).astype(np.float64)
    gamma = np.full((len(assign), k), float(a))
    ok = assign >= 0
    gamma[np.flatnonzero(ok), assign[ok]] += m[ok]
    gamma[~ok] = -1.0
    return gamma


def seeded_alpha(gidx, w, beta, rng, *, assign=None, lower=1e-3, upper=1.0, max_rows=5_000, max_rounds=10):
    """A symmetric Dirichlet parameter ``a`` in ``[lower, upper]`` for a seeded start with ``beta``.

    With ``phi`` fixed, every row's optimal ``gamma_i`` is ``a + n_i`` (``n_ih = sum_j phi_ijh``)
    and the bound depends on ``a`` through :func:`._bce_kernels.polya_objective`, maximised by
    golden-section search on ``log a``. Rounds alternate that fit with the E-step of the rows
    under ``(a, beta)`` (:func:`._bce_kernels.estep_block`, warm-started from the previous
    ``gamma``); the first round takes ``n_i`` from the hard partition ``assign`` when given (else
    from an E-step at ``a = upper``). Rounds stop when ``a`` moves by less than 5 %. On an
    ensemble whose rows agree with one cluster the optimum lies at the lower end: started there,
    EM needs a few iterations, against hundreds from ``a = 1`` (EM shrinks ``a`` by a small
    fraction per iteration while the bound creeps up). At most ``max_rows`` rows (drawn by
    ``rng`` in proportion to ``w``) are used.
    """
    gidx = _int_rows(gidx)
    w = np.asarray(w, dtype=np.float64)
    k = beta.shape[0]
    if k == 1 or gidx.shape[0] == 0:
        return float(upper)
    if gidx.shape[0] > max_rows:
        rows = rng.choice(gidx.shape[0], size=max_rows, p=w / w.sum())
        gidx, w = np.ascontiguousarray(gidx[rows]), np.ones(max_rows)
        assign = None if assign is None else assign[rows]
    logbeta = np.log(np.maximum(beta, _TINY))
    ones, X0 = np.ones(gidx.shape[1]), np.empty((gidx.shape[0], 0))
    a = float(upper)
    gamma = np.full((gidx.shape[0], k), -1.0) if assign is None else hard_gamma(gidx, assign, a, k)
    for r in range(max_rounds):
        if r or assign is None:
            kern.estep_block(
                gidx, w, ones, logbeta, X0, np.empty(0), np.zeros((k, 0)), np.ones((k, 0)),
                np.full(k, a), gamma, 1e-4, 100,
            )  # fmt: skip
        n_ih = np.ascontiguousarray(np.maximum(gamma - a, 0.0))
        new = math.exp(
            _golden_max(
                lambda t, n_ih=n_ih: kern.polya_objective(n_ih, w, math.exp(t)),
                math.log(lower),
                math.log(upper),
            )
        )
        gamma = np.where(gamma >= 0, n_ih + new, -1.0)  # the optimal gamma for the new a
        if abs(math.log(new / a)) < 0.05:
            return new
        a = new
    return a


def _golden_max(f, lo, hi, n_iter=30):
    """Argmax of ``f`` on ``[lo, hi]`` by golden-section search (ends included)."""
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = f(a), f(b)
    ends = (lo, hi)
    for _ in range(n_iter):
        if fa >= fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = f(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = f(b)
    return max((f(ends[0]), ends[0]), (fa, a), (fb, b), (f(ends[1]), ends[1]))[1]


def seeded_beta(counts, offsets, prior=1.0):
    """``beta`` from hard-partition counts, each (cluster, clustering) block smoothed by a total
    pseudo-count ``prior`` spread evenly over its categories (no label gets probability 0)."""
    sizes = np.diff(offsets)
    pseudo = np.repeat(prior / np.maximum(sizes, 1), sizes)
    return normalise_counts(counts + pseudo, offsets)


# --------------------------------------------------------------------------- helpers of the estimators


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
        with ThreadPoolExecutor(min(len(blocks), len(os.sched_getaffinity(0)))) as pool:
            parts = list(pool.map(block, blocks))
        return np.sum(parts, axis=0)

    def reset(self):
        self.gamma.fill(-1.0)

    def gammas(self):
        return self.gamma if self.inverse is None else self.gamma[self.inverse]
