"""Starts of the BCE family's EM: hard partitions of the label rows and the parameters they imply.

:func:`seed_partition` gives the partition (the best by KCC's objective of k-means++ seedings with Lloyd
steps, and of HBGF's spectral partition with the same Lloyd steps); :func:`seeded_beta`,
:func:`seeded_alpha`, :func:`soft_gamma` and :func:`hard_gamma` turn it into a start of the EM of
:mod:`._em`. The spectral partition is :func:`~ensemble_dask.consensus.starts.spectral_partition`, shared
with KCC's sampled starts.
"""

from __future__ import annotations

import math

import numpy as np

from ..._validation import InputError, shown
from ...runtime.threads import thread_map
from .._common.base import dense_codes
from .._common.encoding import _int_rows
from ..starts import spectral_partition
from . import _kernels as kern
from . import _seed_kernels as seed_kern
from ._em import _TINY, normalise_counts

__all__ = [
    "seed_partition",
    "seeded_alpha",
    "seeded_beta",
    "soft_gamma",
    "hard_gamma",
]

#: k-means++ seedings tried by :func:`seed_partition`; the lowest KCC objective is kept. One seeding can
#: stop far from BCE's optimum; the seedings cost a Lloyd run each, far less than the EM they start
N_SEEDINGS = 5
#: ... while the (distinct) label rows are at most this many; above, one seeding: there the seedings would
#: cost more than the EM
SEEDINGS_FEW_ROWS = 20_000
#: besides the seedings, :func:`seed_partition` offers HBGF's spectral partition and keeps the lower KCC
#: objective (k-means++ and Lloyd can stop in a local optimum that the spectral start avoids). The two run
#: side by side on two threads above this many rows while the rows take at most SIDE_BY_SIDE_BYTES
SIDE_BY_SIDE_ROWS = 50_000
SIDE_BY_SIDE_BYTES = 64 << 20
#: HBGF partitions at most this many (distinct) label rows for that start; Lloyd steps take it to every row
SPECTRAL_SAMPLE = 20_000
#: the ``init`` values of BCE and MM that start from :func:`seed_partition`
SEEDED_INITS = ("spectral", "k-means++")


#: row blocks of this many rows run on threads in the row-wise kernels of the seeding (:func:`_row_blocks`)
ROW_BLOCK = 131_072


def _row_blocks(n):
    """Fixed row slices of :data:`ROW_BLOCK` rows: a row-wise kernel run on them, each on a thread, gives the
    same result on any number of threads (rows are independent; counts are integers)."""
    return [slice(a, min(a + ROW_BLOCK, n)) for a in range(0, n, ROW_BLOCK)]


def _kcc_assign(gidx, centroid, sqnorm, assign):
    """:func:`._seed_kernels.kcc_assign` on row blocks, threaded: the rows that moved."""

    def block(b):
        return seed_kern.kcc_assign(gidx[b], centroid, sqnorm, assign[b])

    return sum(thread_map(block, _row_blocks(len(gidx))))


def partition_start(init, n, k):
    """Each row's cluster in ``[0, k)`` (``-1``: none) of a partition given as ``init``: ``n`` integer
    labels, any ``k`` or fewer distinct values (e.g. another method's ``labels_``), ``-1`` for a row
    the start leaves out."""
    arr = np.asarray(init)
    if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
        raise InputError(
            f"The 'init' parameter must be 'spectral', 'k-means++', 'random' or a partition of the {n} rows "
            f"({n} integer labels, -1 = none); got {shown(init)}"
        )
    if n and int(arr.min()) < -1:
        raise InputError(f"The 'init' partition holds {int(arr.min())}; labels are >= 0, or -1 for none")
    known = arr >= 0
    n_codes, inv = dense_codes(arr[known], n)
    if n_codes > k:
        raise InputError(f"The 'init' partition has {n_codes} clusters, more than n_clusters={k}")
    out = np.full(n, -1, dtype=np.int64)
    out[known] = inv
    return out


def hard_label_counts(gidx, assign, n_categories, k):
    """``(k, R)`` label counts of a hard partition: per cluster, its rows holding each global category
    (``gidx``: the rows' global category indices, ``-1`` missing; ``assign``: each row's cluster or -1)."""
    gidx = np.asarray(gidx)
    obs = (gidx >= 0) & (np.asarray(assign)[:, None] >= 0)
    cluster = np.broadcast_to(np.asarray(assign)[:, None], gidx.shape)[obs]
    flat = cluster * n_categories + gidx[obs].astype(np.int64)
    return np.bincount(flat, minlength=k * n_categories).reshape(k, n_categories).astype(np.float64)


def seed_partition(
    gidx, w, offsets, k, rng, *, max_lloyd=20, n_seedings=None, spectral=True, spectral_first=False
):
    """A hard start for EM: the best of ``n_seedings`` greedy k-means++ seedings on the label rows,
    each followed by Lloyd steps of KCC, and of HBGF's spectral partition of the rows
    (:class:`~ensemble_dask.consensus.HBGF`, on a sample of them above :data:`SPECTRAL_SAMPLE` rows) followed
    by Lloyd steps likewise, by KCC's objective (the weighted squared distance of the
    rows to their cluster's centroid, over the observed entries). ``n_seedings`` defaults to
    :data:`N_SEEDINGS` up to :data:`SEEDINGS_FEW_ROWS` rows, else 1.

    KCC is k-means on the one-hot coded labels (``-1`` entries skipped); the k-means++ distance
    between two rows is the share of their jointly observed entries that differ
    (:func:`._seed_kernels.row_distance`). ``w`` weighs each row (its multiplicity when identical
    rows were merged). Lloyd steps stop when fewer than 0.1 % of the rows move, or after
    ``max_lloyd``. Every random draw comes from ``rng``. ``spectral=False`` leaves HBGF out;
    ``n_seedings=0`` leaves only it. ``spectral_first=True`` takes HBGF's partition (and its Lloyd steps)
    whatever its objective, and runs the k-means++ seedings only where HBGF gives none (BCE's and MM's
    ``init="spectral"``: KCC's objective, like theirs, prefers splitting a large cluster to keeping small ones
    apart, see :func:`~ensemble_dask.consensus.starts.label_starts`).

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

    if spectral and spectral_first:
        hb = spectral_candidate()
        best = seedings() if hb is None else hb
    elif not spectral:
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
    centers = seed_kern.kmeanspp_rows(gidx, w, first, u)
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
        moved = _kcc_assign(gidx, centroid, centroid**2 @ to_col, assign)
        counts, nobs = seed_kern.kcc_counts(gidx, w, assign, k, R)
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
    centroids start the Lloyd steps on every row: the cost stays that of the sample.
    """
    rng = np.random.default_rng(seed)
    rows = np.arange(gidx.shape[0])
    if gidx.shape[0] > SPECTRAL_SAMPLE:
        rows = np.sort(rng.choice(gidx.shape[0], size=SPECTRAL_SAMPLE, replace=False))
    sw = np.ascontiguousarray(w[rows])
    lab = spectral_partition(gidx[rows], sw, k, int(rng.integers(2**31 - 1)))
    if lab is None:
        return None
    counts, nobs = seed_kern.kcc_counts(gidx[rows], sw, lab, k, R)
    centroid = np.zeros((k, R))
    _set_centroids(centroid, counts, nobs, col_of_cat)
    return _lloyd(gidx, w, centroid, col_of_cat, to_col, max_lloyd)


def _kcc_objective(counts, nobs, col_of_cat):
    """KCC's objective of a hard partition from its M-step counts: the sum over clusters h and
    clusterings j of ``n_hj - sum_c counts_hc^2 / n_hj`` (the squared distances of one-hot rows)."""
    per_cat = nobs[:, col_of_cat]
    sq = np.where(per_cat > 0, counts**2 / np.where(per_cat > 0, per_cat, 1), 0.0)
    return float(nobs.sum() - sq.sum())


def soft_gamma(gidx, beta, a, weight=None):
    """``gamma_i = a + sum_j u_j phi_ij`` with ``phi_ijh`` proportional to ``beta_h(x_ij)`` (a flat prior):
    a warm start for the E-step that lets every row choose its clusters under ``beta``. ``weight`` ``(R,)``:
    each global category's ``u_j``, its clustering's weight (GBCE's ``label_weight``; default 1)."""
    logbeta = np.log(np.maximum(beta, _TINY))
    p = np.exp(logbeta.T - logbeta.max(axis=0)[:, None])  # (R, k): phi of each category, one per label
    p /= p.sum(axis=1, keepdims=True)
    if weight is not None:
        p *= np.asarray(weight, dtype=np.float64)[:, None]
    gamma = np.empty((gidx.shape[0], beta.shape[0]))
    gidx = _int_rows(gidx)
    thread_map(lambda b: kern.soft_gamma_rows(gidx[b], p, float(a), gamma[b]), _row_blocks(len(gidx)))
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
    and the bound depends on ``a`` through :func:`._seed_kernels.polya_objective`, maximised by
    golden-section search on ``log a``. Rounds alternate that fit with the E-step of the rows
    under ``(a, beta)`` (:func:`._kernels.estep_block`, warm-started from the previous
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
                np.full(k, a), gamma, 1e-4, 100, math.inf,
            )  # fmt: skip
        n_ih = np.ascontiguousarray(np.maximum(gamma - a, 0.0))
        new = math.exp(
            _golden_max(
                lambda t, n_ih=n_ih: seed_kern.polya_objective(n_ih, w, math.exp(t)),
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
