"""Probabilistic consensus clustering on co-association counts: PCC (Lourenço et al. 2015) and PPC
(Rota Bulò et al. 2010).

Both estimators take the co-association counts of an ensemble (``c_ij`` times co-clustered,
``N_ij`` times co-present, for a set of stored pairs) and return soft memberships ``Y`` (n x K,
rows on the simplex). They run on NumPy alone; the numba kernels are in ``_kernels``.

PCC minimises ``f(Y) = sum_{pairs} N_ij d(c_ij / N_ij, y_i.y_j)`` for a double-convex Bregman
divergence ``d`` (KL: the Binomial likelihood of eq. 1; squared L2: eq. 4) by the two-entry
descent of Sect. 5: a step moves mass in one row J between the entries (U, V) of eq. (6) with the
exact step of eq. (9) (closed form for L2, safeguarded Newton otherwise). Rows are visited from a
work list, many steps per visit (``_kernels.pcc_rows``), so an iteration reads J's l
neighbours once and the stopping test is the exact KKT test of Sect. 5.3.

PPC minimises ``||C - Y Y^T||_F^2`` restricted to the stored pairs (plus the diagonal, where
``c_ii = 1``), by the same row-wise descent or by the paper's Baum-Eagon growth transformation
(Rota Bulò et al. 2010 eq. 5).
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np

from ..._validation import InputError, check_random_state, convergence_warning
from ...coassoc.csr import StoredPairs
from .._common.base import SoftConsensusMixin, as_pair_data
from .._common.params import Interval, Options, check_n_clusters
from . import _kernels as _k
from . import _ppc_kernels as _ppck
from . import _stored as _pcc_stored
from . import _sweep
from ._starts import (  # noqa: F401 (check_init, _KL_EPS: the callers' code)
    _KL_EPS,
    _best_start,
    _start,
    _start_matrix,
    _vertex_labels,
    _work_rows,
    check_init,
)

__all__ = ["PCC", "PPC", "DIVERGENCES"]

#: name -> (kernel code, has a closed-form line search). See ``_kernels`` to add one.
DIVERGENCES = {"kl": (_k.KL, False), "l2": (_k.L2, True)}

_STEP_RTOL = 1e-4  # relative width at which the bisection line search stops
_INIT_SMOOTHING = 0.0  # a hard-label start keeps this much mass spread evenly over the K entries
_BE_INIT_SMOOTHING = 0.1  # ... for Baum-Eagon, which never revives a zero entry
_INNER_TOL = 0.5  # a row visit stops at this fraction of the KKT tolerance
_MAX_INNER = 20  # ... or after this many steps, plus 2 K
#: tol="auto": from a random start the descent crosses the simplex, and a loose test can stop it in a poor
#: region; from a given start (e.g. ``label_starts``) it refines, and 3e-2 keeps the ARI of 1e-3 (to 4 digits)
#: on the blobs of benchmarks/peers.py at K = 3, 8 and 30 with half to two thirds fewer row visits
#: (benchmarks/pcc_profile.py)
_TOL_RANDOM = 1e-3
_TOL_GIVEN = 3e-2
#: from a random start the KKT test begins at this tolerance and tightens tenfold each time it holds, down to
#: ``tol`` (``_kernels.pcc_rows``, ``gap_tol_start``): the first visits take short moves instead of solving
#: each row exactly. From a given start it gains nothing (the start is near its optimum)
_TOL_START_RANDOM = 0.1


def _resolve_tol(tol, start):
    if isinstance(tol, str):  # "auto"
        return _TOL_RANDOM if start is None else _TOL_GIVEN
    return float(tol)


#: the parameters PCC and PPC share
_CONSTRAINTS = {
    "n_clusters": [Interval(Integral, 2, None)],
    "init": [Options("random"), "array-like"],
    "tol": [Options("auto"), Interval(Real, 0, None, closed="neither")],
    "max_iter": [Interval(Integral, 0, None)],
    "n_init": [Interval(Integral, 1, None)],
    "random_state": ["random_state"],
}


class PCC(SoftConsensusMixin):
    """Probabilistic consensus clustering with a Bregman divergence (Lourenço et al. 2015).

    Minimises ``f(Y) = sum_{stored pairs i < j} s_ij N_ij d(c_ij / N_ij, y_i.y_j)`` over soft
    memberships Y (rows on the simplex), ``s_ij`` the sample weights (1 when not given).

    Parameters
    ----------
    n_clusters : int, default=8
        K, the *maximum* number of clusters: clusters may be left empty (see ``effective_k_``).
    divergence : {"kl", "l2"}, default="kl"
        ``"kl"``: the Binomial maximum likelihood (PCC-KL); ``"l2"``: squared Euclidean (PCC-L2).
    init : "random" or array-like, default="random"
        The start. ``"random"``: rows drawn from Dirichlet(10), near the uniform point (which is
        stationary, so never used itself). An array of shape ``(n,)``: hard labels (any integer
        codes, at most ``n_clusters`` distinct; -1 = unknown, a uniform row), e.g. k-means on
        the one-hot base labels; each row becomes the vertex of its label. An array of
        shape ``(n, n_clusters)``: memberships (non-negative rows, normalised here). With an
        array start every restart is the same, so ``n_init`` is ignored. A list of such arrays:
        candidate starts (e.g. the labels of KCC and of HBGF), of which the one with the lowest
        objective is descended (the consensus stage gives one, HBGF's: see
        :func:`~ensemble_dask.consensus.starts.label_starts`). With ``divergence="kl"`` a start of hard labels
        first takes a pass of the squared-L2 descent (KL's derivative is unbounded at a vertex), then descends
        KL.
    tol : float or "auto", default="auto"
        ``"auto"``: 1e-3 from a random start, 3e-2 from a given ``init`` (a refinement needs less).
        From a random start the test begins at 0.1 (or ``tol`` if larger) and is tightened tenfold
        each time every row passes it, down to ``tol``: the early visits, while the neighbours are
        still far from their final rows, take short moves instead of solving each row exactly.
        KKT tolerance: the fit has converged when every row's gap ``y_j.g_j - min_k g_jk``
        (``g_j`` the gradient of f in row j, eq. 7; the gap is 0 exactly where the KKT conditions
        of Sect. 5.3 hold, and bounds how much re-optimising row j alone could lower f) is at
        most ``tol`` times the mean per-point weight ``sum_ij s_ij N_ij / n``, which makes
        ``tol`` independent of the ensemble size and of the number of stored pairs.
    max_iter : int, default=300
        Cap on the passes over the work list of rows (the first pass visits every row, a later
        one the rows whose neighbours moved; the passes of all the tolerances together, most of
        them short). A fit that stops at the cap warns with ``ConvergenceWarning`` and sets
        ``converged_ = False``.
    n_init : int, default=1
        Restarts from different random points; the lowest objective is kept.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the random starts.

    Attributes
    ----------
    memberships_ : ndarray of shape (n, n_clusters)
        Soft assignments Y, rows on the simplex.
    labels_ : ndarray of shape (n,)
        Row-wise argmax of ``memberships_``.
    uncertainty_ : ndarray of shape (n,)
        Normalised entropy of each row, in [0, 1].
    objective_ : float
        f(Y) at the end of the best run.
    objective_trace_ : ndarray of shape (n_iter_ + 1, 2)
        ``(pass, f)`` of the best run: at the start and after every pass.
    n_iter_ : int
        Passes of the best run.
    converged_ : bool
        True when the KKT test passed (every row's gap at most ``tol``), False when
        ``max_iter`` stopped the best run.
    effective_k_ : int
        Number of clusters that are the argmax of at least one point.
    kkt_gap_ : float
        Final KKT gap ``max_j (y_j.g_j - min_k g_jk)``, in the same units as ``tol`` (an upper
        bound kept during the descent when it converged; recomputed from Y at the cap).
    n_visits_, n_moves_, n_steps_ : int
        Row visits of the best run, visits that moved the row, and two-entry steps taken.

    Notes
    -----
    The descent is the paper's (Sect. 5): a step moves mass in one row J from the entry V of
    largest gradient on J's support to the entry U of smallest gradient, with the exact step of
    eq. (9) (closed form for L2, safeguarded Newton on the derivative otherwise), so f never
    increases. Where the paper picks J by the largest KKT violation (a heap over the points,
    one step per pick, each updating the gradients of J's neighbours), this solver visits rows
    from a work list and, per visit, gathers J's neighbours once and takes steps on y_J until
    J's own gap is below half the tolerance; a row that moved puts its neighbours back on the
    list. This does the same descent with far fewer random memory accesses per step, and its
    stopping test is exact: the list runs empty only when every row was checked after its
    neighbours' last move.

    Examples
    --------
    >>> import numpy as np
    >>> from ensemble_dask import dense_coassociation
    >>> labels = np.array([[0, 0, 1], [0, 0, 1], [0, 1, 1], [1, 2, 0], [1, 2, 0], [1, 2, 2]])
    >>> model = PCC(2, random_state=0).fit(dense_coassociation(labels))
    >>> model.labels_[:3].tolist() == [model.labels_[0]] * 3, model.effective_k_, model.converged_
    (True, 2, True)
    >>> bool(model.labels_[0] != model.labels_[3])
    True
    """

    _parameter_constraints = {**_CONSTRAINTS, "divergence": [Options(*DIVERGENCES)]}

    def __init__(
        self,
        n_clusters=8,
        *,
        divergence="kl",
        init="random",
        tol="auto",
        max_iter=300,
        n_init=1,
        random_state=None,
    ):
        self.n_clusters = n_clusters
        self.divergence = divergence
        self.init = init
        self.tol = tol
        self.max_iter = max_iter
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, pairs, y=None, sample_weight=None):
        """Fit on co-association counts.

        Parameters
        ----------
        pairs : PairCounts, tuple (co, both) or PairData
            Stored pairs with their ``c_ij`` and ``N_ij``, or dense ``n x n`` count matrices, or
            :func:`~ensemble_dask.consensus._common.base.as_pair_data` of either (converted once).
            Pairs with ``N_ij = 0`` (never both present) carry no evidence and are skipped.
        y : ignored
        sample_weight : array-like or None, default=None
            A positive weight ``s_ij`` per stored pair, multiplying its term of f: shape
            ``(pairs.nnz,)`` aligned with the stored entries of a PairCounts (the same for
            (i, j) and (j, i)), or ``(n, n)`` for a ``(co, both)`` tuple. With pairs drawn
            unequally (e.g. the ``cocluster`` strategy), the inverse of each pair's inclusion
            probability makes f an unbiased estimate of the objective over all pairs.

        Returns
        -------
        self
        """
        self._validate_params()
        code, closed = DIVERGENCES[self.divergence]
        if isinstance(pairs, StoredPairs):
            return _fit_stored(self, "PCC", pairs, sample_weight, code, closed, 0.0, _INIT_SMOOTHING)
        data = as_pair_data(pairs, sample_weight, keep_unobserved=True)  # every sum weighs a pair by N_ij
        n = data.n
        k, max_iter, n_init, rng, start, tol = _checked(self, n, _INIT_SMOOTHING)

        w = data.w if data.s is None else data.w * data.s
        scale = float(w.sum()) / n  # mean per-point weight sum_j s_ij N_ij
        gap_tol = tol * scale
        indices = data.indices  # int32 below 2**31 points: half the memory traffic of int64
        # f of a single start is not computed here: pcc_rows sums it in its first pass, from the products its
        # gathers compute anyway (and from hard labels, KL descends L2 first)
        start, f_start = _best_start(start, data, w, indices, code, 0.0, k, need_f=False, matrix=False)
        # the descent runs on its own n x 2K array, made from the start (no n x K copy first); PCC-KL's L2
        # pass runs on it too
        work = None
        if start is not None and code == _k.KL and _vertex_labels(start) is not None:
            # KL's derivative is unbounded at a vertex start (y_i.y_j is 0 or 1 where 0 < x_ij < 1): a pass
            # of the squared-L2 descent (closed-form steps) takes the rows off the vertices first
            if max_iter >= 1:
                # on rows aligned to cache lines (K = 8: a row's memberships are one line, which the pass
                # prefetches)
                work = _work_rows(start, k)
                _sweep.l2_sweep_rows(
                    data.indptr, indices, data.x, w, work, k, 0, n, gap_tol, _INNER_TOL * gap_tol,
                    _MAX_INNER + 2 * k,
                )  # fmt: skip
            f_start = np.nan
        best = None
        for _ in range(1 if start is not None else n_init):
            if work is None:
                work = _work_rows(_start(rng, n, k) if start is None else start, k)
            tol_start = max(_TOL_START_RANDOM, tol) * scale if start is None else gap_tol
            trace = np.empty(max_iter + 1)
            stats = np.zeros(3, dtype=np.int64)
            passes, obj, gap, conv = _k.pcc_rows_on(
                data.indptr,
                indices,
                data.x,
                w,
                work,
                k,
                code,
                closed,
                _KL_EPS,
                0.0,
                _STEP_RTOL,
                gap_tol,
                _INNER_TOL * gap_tol,
                max_iter,
                _MAX_INNER + 2 * k,
                trace,
                stats,
                f_start,
                tol_start,
            )
            if best is None or obj < best[0]:
                trace = np.column_stack([np.arange(passes + 1, dtype=np.float64), trace[: passes + 1]])
                best = (obj, work, trace, int(passes), gap / scale, bool(conv), stats)
            work = None
        # the pairs' fractions made here are let go before the memberships are copied out, which then take
        # memory just freed instead of new to the process (on a VM that maps it on first touch)
        del data, w, indices
        self.objective_, Y, self.objective_trace_, self.n_iter_, self.kkt_gap_, self.converged_, stats = best
        Y = np.array(Y[:, :k])
        self.n_visits_, self.n_moves_, self.n_steps_ = (int(v) for v in stats)
        self._set_memberships(Y)
        if not self.converged_:
            _warn_cap("PCC", max_iter, self.kkt_gap_, tol)
        return self


class PPC(SoftConsensusMixin):
    """Pairwise probabilistic clustering: the least-squares fit of Rota Bulò et al. 2010.

    Minimises ``P(Y) = sum_i (1 - y_i.y_i)^2 + sum_{stored (i, j)} s_ij (x_ij - y_i.y_j)^2`` over
    ordered pairs (``||C - Y Y^T||_F^2`` of eq. 1 when every pair is stored and ``s = 1``;
    ``x_ij = c_ij / N_ij``, ``x_ii = 1``).

    Parameters
    ----------
    n_clusters : int, default=8
        K, the maximum number of clusters.
    init : "random" or array-like, default="random"
        As in :class:`PCC`. (The Baum-Eagon algorithm never revives a zero entry, so there an
        array start keeps 0.1 of each row spread evenly over the K entries.)
    algorithm : {"rows", "baum-eagon"}, default="rows"
        ``"rows"``: the row-wise two-entry descent of :class:`PCC` (exact line search on P;
        the diagonal term makes it a quartic along a step, solved by safeguarded Newton with a
        check that P went down). ``"baum-eagon"``: the paper's growth transformation (eq. 5),
        ``y_ik <- y_ik (S_i + G_ik) / (S_i + y_i.G_i)`` with ``G_i = sum_j s_ij (x_ij - y_i.y_j)
        y_j`` (diagonal included) and ``S_i = 1 + sum_j s_ij``: all rows at once per sweep, never
        increasing P, but needing many sweeps.
    tol : float or "auto", default="auto"
        As in :class:`PCC` (``"auto"``: 1e-3 from a random start, 3e-2 from a given ``init``; with
        ``"rows"`` from a random start, tightened tenfold from 0.1).
        Stop when every row's KKT gap ``y_i.p_i - min_k p_ik`` (``p = dP/dY``) is at most
        ``tol`` times the mean ``S_i``.
    max_iter : int, default=100
        Cap on passes (``"rows"``, as in :class:`PCC`) or sweeps (``"baum-eagon"``). A fit
        stopped by it warns with ``ConvergenceWarning`` and sets ``converged_ = False``.
    n_init : int, default=1
        Restarts from different random points; the lowest objective is kept.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the random starts.

    Attributes
    ----------
    memberships_, labels_, uncertainty_, effective_k_, converged_
        As in :class:`PCC`.
    objective_ : float
        P(Y) at the end of the best run.
    objective_trace_ : ndarray of shape (n_iter_ + 1, 2)
        ``(pass or sweep, P)`` at the start and after every pass or sweep.
    n_iter_ : int
        Passes or sweeps of the best run.
    kkt_gap_ : float
        Final KKT gap in units of ``tol``.

    Examples
    --------
    >>> import numpy as np
    >>> from ensemble_dask import dense_coassociation
    >>> labels = np.array([[0, 0, 1], [0, 0, 1], [0, 1, 1], [1, 2, 0], [1, 2, 0], [1, 2, 2]])
    >>> model = PPC(2, random_state=0).fit(dense_coassociation(labels))
    >>> len(set(model.labels_[:3].tolist())), len(set(model.labels_[3:].tolist()))
    (1, 1)
    >>> bool(model.labels_[0] != model.labels_[3])
    True
    """

    _parameter_constraints = {**_CONSTRAINTS, "algorithm": [Options("rows", "baum-eagon")]}

    def __init__(
        self,
        n_clusters=8,
        *,
        init="random",
        algorithm="rows",
        tol="auto",
        max_iter=100,
        n_init=1,
        random_state=None,
    ):
        self.n_clusters = n_clusters
        self.init = init
        self.algorithm = algorithm
        self.tol = tol
        self.max_iter = max_iter
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, pairs, y=None, sample_weight=None):
        """Fit on co-association counts (see :meth:`PCC.fit`); returns self.

        ``sample_weight`` gives ``s_ij`` (1 when None); the counts N_ij only form ``x_ij``.
        """
        self._validate_params()
        algorithm = self.algorithm
        if isinstance(pairs, StoredPairs):
            if algorithm != "rows":
                raise InputError("PPC on pairs read from a store (StoredPairs) runs algorithm='rows' only")
            return _fit_stored(self, "PPC", pairs, sample_weight, _k.L2, True, 1.0, _INIT_SMOOTHING)
        data = as_pair_data(pairs, sample_weight, keep_unobserved=True)
        n = data.n
        smoothing = _INIT_SMOOTHING if algorithm == "rows" else _BE_INIT_SMOOTHING
        k, max_iter, n_init, rng, start, tol = _checked(self, n, smoothing)

        # unit weights as int32, like PCC's counts: the kernels' one build for pairs without sample weights;
        # 0 for the pairs never both present, which no sum then sees (with sample weights they are left out)
        w = np.ones(data.nnz, dtype=np.int32) if data.s is None else data.s
        if data.unobserved:
            w = w.copy() if w is data.s else w  # the caller's sample weights stay as they are
            w[data.w == 0] = 0
        scale = 1.0 + float(w.sum()) / n  # mean S_i
        gap_tol = tol * scale
        indices = data.indices
        rows = algorithm == "rows"
        # the row descent runs on its own n x 2K array made from the start, as PCC's (no n x K start matrix
        # first, nor a copy back into it)
        start, f_start = _best_start(start, data, w, indices, _k.L2, 1.0, k, need_f=False, matrix=not rows)
        best = None
        for _ in range(1 if start is not None else n_init):
            Y = _start(rng, n, k) if start is None else start  # check_init made it: ours to update
            if rows:
                Y = _work_rows(Y, k)
                tol_start = max(_TOL_START_RANDOM, tol) * scale if start is None else gap_tol
                trace = np.empty(max_iter + 1)
                it, obj, gap, conv = _k.pcc_rows_on(
                    data.indptr,
                    indices,
                    data.x,
                    w,
                    Y,
                    k,
                    _k.L2,
                    True,  # the pairs' part of f along a step in closed form (_kernels.descend_rows)
                    _KL_EPS,
                    1.0,
                    _STEP_RTOL,
                    gap_tol,
                    _INNER_TOL * gap_tol,
                    max_iter,
                    _MAX_INNER + 2 * k,
                    trace,
                    np.zeros(3, np.int64),
                    f_start,
                    tol_start,
                )
                trace = trace[: it + 1]
            else:
                Y, it, obj, gap, conv, trace = _baum_eagon(
                    data.indptr, indices, data.x, w, Y, gap_tol, max_iter
                )
            if best is None or obj < best[0]:
                trace = np.column_stack([np.arange(it + 1, dtype=np.float64), trace])
                best = (obj, Y, trace, int(it), gap / scale, bool(conv))
        del data, w, indices  # let go before the memberships are copied out (memory just freed, see PCC.fit)
        self.objective_, Y, self.objective_trace_, self.n_iter_, self.kkt_gap_, self.converged_ = best
        self._set_memberships(np.array(Y[:, :k]) if rows else Y)
        if not self.converged_:
            _warn_cap("PPC", max_iter, self.kkt_gap_, tol)
        return self


def _baum_eagon(indptr, indices, x, w, Y, gap_tol, max_iter):
    """Sweeps of Rota Bulò et al. 2010 eq. (5) until every row's gap is at most ``gap_tol``."""
    Ynew = np.empty_like(Y)
    trace = []
    it = 0
    while True:
        obj, gap = _ppck.ppc_sparse_sweep(indptr, indices, x, w, Y, Ynew)
        trace.append(obj)
        if gap <= gap_tol or it >= max_iter:
            break
        Y, Ynew = Ynew, Y
        it += 1
    return Y, it, obj, gap, gap <= gap_tol, np.array(trace)


def _checked(est, n, smoothing):
    """``(k, max_iter, n_init, rng, start, tol)``: PCC's or PPC's parameters validated for ``n`` points, the
    start from :func:`check_init` and ``tol`` resolved for it."""
    k = check_n_clusters(est, n)
    max_iter, n_init = int(est.max_iter), int(est.n_init)
    rng = check_random_state(est.random_state)
    start = check_init(est.init, n, k, smoothing, vertex_labels=True)
    return k, max_iter, n_init, rng, start, _resolve_tol(est.tol, start)


def _fit_stored(est, name, pairs, sample_weight, code, closed, diag, smoothing):
    """:meth:`PCC.fit` / :meth:`PPC.fit` on :class:`~ensemble_dask.coassoc.csr.StoredPairs`: the same descent,
    the pairs read a block of rows at a time (:mod:`._stored`); sets the estimator's attributes."""
    if sample_weight is not None:
        raise InputError(f"{name}: sample_weight is not supported with pairs read from a store (StoredPairs)")
    n = pairs.n
    k, max_iter, n_init, rng, start, tol = _checked(est, n, smoothing)
    if start is not None:
        runs = [[_start_matrix(s, k) for s in (start if isinstance(start, list) else [start])]]
    else:
        runs = [[_start(rng, n, k)] for _ in range(n_init)]
    best = None
    for starts in runs:
        out = _pcc_stored.fit(
            pairs, starts, k, code, closed, diag, diag != 0.0, tol, max_iter, l2_first=code == _k.KL,
            tol_start=max(_TOL_START_RANDOM, tol) if start is None else 0.0,
        )  # fmt: skip
        if best is None or out[1] < best[1]:
            best = out
    Y, est.objective_, trace, est.n_iter_, est.kkt_gap_, est.converged_, stats = best
    est.objective_trace_ = np.column_stack([np.arange(len(trace), dtype=np.float64), trace])
    if name == "PCC":
        est.n_visits_, est.n_moves_, est.n_steps_ = (int(v) for v in stats)
    est._set_memberships(Y)
    if not est.converged_:
        _warn_cap(name, max_iter, est.kkt_gap_, tol)
    return est


def _warn_cap(name, max_iter, gap, tol):
    warnings.warn(
        f"{name} stopped at max_iter={max_iter} with KKT gap {gap:.3g} > tol={tol:g}; "
        "raise max_iter or tol, or start from a better init",
        convergence_warning(),
        stacklevel=3,
    )
