"""Probabilistic consensus clustering on co-association counts: PCC (papers/003) and PPC (papers/002).

Both estimators take the co-association counts of an ensemble (``c_ij`` times co-clustered,
``N_ij`` times co-present, for a set of stored pairs) and return soft memberships ``Y`` (n x K,
rows on the simplex). They run on NumPy alone; the numba kernels are in ``_pcc_kernels``.

PCC minimises ``f(Y) = sum_{pairs} N_ij d(c_ij / N_ij, y_i.y_j)`` for a double-convex Bregman
divergence ``d`` (KL: the Binomial likelihood of eq. 1; squared L2: eq. 4) by the greedy two-entry
descent of Sect. 5: at each iteration the point J and the entries (U, V) of eqs. (6)-(8) give the
steepest feasible direction, and the exact step of eq. (9) is taken (closed form for L2,
bisection, eq. 10, otherwise). The dense solver is Algorithm 1 on n x n matrices; the sparse one
(Sect. 5.4) keeps ``y_i.y_j`` only on the stored pairs and finds J with an indexed binary heap, so
an iteration costs O(l (K + log n)) for l stored pairs per point.

PPC minimises ``||C - Y Y^T||_F^2`` with the Baum-Eagon growth transformation (papers/002 eq. 5);
the sparse variant restricts the sum to the stored pairs (plus the diagonal, where ``c_ii = 1``).
"""

from __future__ import annotations

import numpy as np

from .._validation import check_choice, check_int, check_random_state
from . import _pcc_kernels as _k
from ._base import SoftConsensusMixin, as_pair_data, check_n_clusters, check_tol

__all__ = ["PCC", "PPC", "DIVERGENCES"]

#: name -> (kernel code, has a closed-form line search). See ``_pcc_kernels`` to add one.
DIVERGENCES = {"kl": (_k.KL, False), "l2": (_k.L2, True)}

_KL_EPS = 1e-10  # KL's second argument is clamped into [eps, 1 - eps]
_STEP_RTOL = 1e-4  # relative width at which the bisection line search stops
_INIT_CONCENTRATION = 10.0  # Dirichlet(alpha = this) start: random, near uniform
_DENSE_MAX_N = 2000  # solver="auto": dense up to this many points ...
_DENSE_MIN_DENSITY = 0.25  # ... when at least this fraction of the pairs is stored


def _resolve_solver(solver, data):
    if solver != "auto":
        return solver
    if data.n <= _DENSE_MAX_N and data.density >= _DENSE_MIN_DENSITY:
        return "dense"
    return "sparse"


def _start(rng, n, k):
    """A seeded random start near the uniform point (which is stationary, so never used itself)."""
    return np.ascontiguousarray(rng.dirichlet(np.full(k, _INIT_CONCENTRATION), size=n))


class PCC(SoftConsensusMixin):
    """Probabilistic consensus clustering with a Bregman divergence (papers/003).

    Parameters
    ----------
    n_clusters : int, default=8
        K, the *maximum* number of clusters: clusters may be left empty (see ``effective_k_``).
    divergence : {"kl", "l2"}, default="kl"
        ``"kl"``: the Binomial maximum likelihood (PCC-KL); ``"l2"``: squared Euclidean (PCC-L2).
    solver : {"auto", "dense", "sparse"}, default="auto"
        ``"dense"``: Algorithm 1 on n x n matrices (small n); ``"sparse"``: stored pairs only and a
        heap (Sect. 5.4). ``"auto"`` picks dense when n <= 2000 and at least a quarter of the
        pairs are stored. Both give the same result on the same pairs.
    tol : float, default=1e-4
        Stop when the KKT gap ``max_j ([g_j]_V - [g_j]_U)`` (Sect. 5.3) falls below ``tol`` times
        the mean per-point weight ``sum_ij N_ij / n``; this makes ``tol`` independent of the
        ensemble size and of the number of stored pairs.
    max_iter : int or None, default=None
        Iteration cap (one iteration moves mass between two entries of one row); ``None`` means
        ``n * n_clusters`` as in the paper.
    n_init : int, default=1
        Restarts from different random points; the lowest objective is kept.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the starts (Dirichlet(10) rows, near uniform: the uniform point is stationary).

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
    objective_trace_ : ndarray of shape (n_trace, 2)
        ``(iteration, f)`` of the best run, sampled every n iterations, first and last included.
    n_iter_ : int
        Iterations of the best run.
    effective_k_ : int
        Number of clusters that are the argmax of at least one point.
    kkt_gap_ : float
        Final KKT gap, in the same units as ``tol``.
    solver_ : str
        The solver that ran.

    Examples
    --------
    >>> import numpy as np
    >>> from ensemble_dask import dense_coassociation
    >>> labels = np.array([[0, 0, 1], [0, 0, 1], [0, 1, 1], [1, 2, 0], [1, 2, 0], [1, 2, 2]])
    >>> model = PCC(2, random_state=0).fit(dense_coassociation(labels))
    >>> model.labels_[:3].tolist() == [model.labels_[0]] * 3, model.effective_k_
    (True, 2)
    >>> bool(model.labels_[0] != model.labels_[3])
    True
    """

    def __init__(
        self,
        n_clusters=8,
        *,
        divergence="kl",
        solver="auto",
        tol=1e-4,
        max_iter=None,
        n_init=1,
        random_state=None,
    ):
        self.n_clusters = n_clusters
        self.divergence = divergence
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, pairs, y=None):
        """Fit on co-association counts.

        Parameters
        ----------
        pairs : PairCounts or tuple (co, both)
            Stored pairs with their ``c_ij`` and ``N_ij > 0``, or dense ``n x n`` count
            matrices (pairs with ``both == 0`` are unobserved).
        y : ignored

        Returns
        -------
        self
        """
        data = as_pair_data(pairs)
        n = data.n
        k = check_n_clusters(self.n_clusters, n)
        code, closed = DIVERGENCES[check_choice(self.divergence, "divergence", DIVERGENCES)]
        solver = _resolve_solver(check_choice(self.solver, "solver", {"auto", "dense", "sparse"}), data)
        tol = check_tol(self.tol)
        max_iter = n * k if self.max_iter is None else check_int(self.max_iter, "max_iter", min_value=0)
        n_init = check_int(self.n_init, "n_init", min_value=1)
        rng = check_random_state(self.random_state)

        scale = float(data.w.sum()) / n  # mean per-point weight sum_j N_ij
        gap_tol = tol * scale
        refresh = max(n, 1)
        if solver == "dense":
            X, W = data.dense()
        else:  # int32 point indices: half the memory traffic of the CSR pattern, exact below 2**31
            indices = data.indices.astype(np.int32) if n < 2**31 else data.indices
        best = None
        for _ in range(n_init):
            Y = _start(rng, n, k)
            trace_f = np.empty(max_iter // refresh + 3)
            trace_it = np.empty(max_iter // refresh + 3, dtype=np.int64)
            if solver == "dense":
                it, nt, gap = _k.pcc_dense(
                    X, W, Y, code, closed, _KL_EPS, _STEP_RTOL, gap_tol, max_iter, refresh, trace_f, trace_it
                )
            else:
                it, nt, gap = _k.pcc_sparse(
                    data.indptr,
                    indices,
                    data.x,
                    data.w,
                    Y,
                    code,
                    closed,
                    _KL_EPS,
                    _STEP_RTOL,
                    gap_tol,
                    max_iter,
                    refresh,
                    trace_f,
                    trace_it,
                )
            obj = float(trace_f[nt - 1])
            if best is None or obj < best[0]:
                trace = np.column_stack([trace_it[:nt].astype(np.float64), trace_f[:nt]])
                best = (obj, Y, trace, int(it), gap / scale)
        self.objective_, Y, self.objective_trace_, self.n_iter_, self.kkt_gap_ = best
        self.solver_ = solver
        self._set_memberships(Y)
        return self


class PPC(SoftConsensusMixin):
    """Pairwise probabilistic clustering by the Baum-Eagon growth transformation (papers/002).

    Minimises ``P(Y) = sum_{(i, j) observed} (x_ij - y_i.y_j)^2`` over ordered pairs, the
    diagonal included with ``x_ii = 1`` (``||C - Y Y^T||_F^2`` of eq. 1 when every pair is
    observed; ``x_ij = c_ij / N_ij``), by iterating
    ``y_ik <- y_ik (S_i + G_ik) / (S_i + y_i.G_i)`` with ``G_i = sum_j (x_ij - y_i.y_j) y_j`` and
    ``S_i`` the number of observed pairs of i (n when all are: eq. 5). Each sweep updates all rows
    at once and never increases P.

    Parameters
    ----------
    n_clusters : int, default=8
        K, the maximum number of clusters.
    solver : {"auto", "dense", "sparse"}, default="auto"
        ``"dense"``: matrix products on n x n arrays; ``"sparse"``: a numba sweep over the stored
        pairs. ``"auto"`` as for :class:`PCC`. Both give the same result on the same pairs.
    tol : float, default=1e-4
        Stop when the KKT gap ``max_i (y_i.p_i - min_k p_ik)`` (``p = dP/dY``) falls below ``tol``
        times the mean ``S_i``.
    max_iter : int, default=1000
        Maximum number of sweeps.
    n_init : int, default=1
        Restarts from different random points; the lowest objective is kept.
    random_state : None, int or numpy.random.Generator, default=None
        Seeds the starts.

    Attributes
    ----------
    memberships_, labels_, uncertainty_, effective_k_
        As in :class:`PCC`.
    objective_ : float
        P(Y) at the end of the best run.
    objective_trace_ : ndarray of shape (n_iter_ + 1, 2)
        ``(sweep, P)`` before every sweep and at the end.
    n_iter_ : int
        Sweeps of the best run.
    kkt_gap_ : float
        Final KKT gap in units of ``tol``.
    solver_ : str
        The solver that ran.

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

    def __init__(self, n_clusters=8, *, solver="auto", tol=1e-4, max_iter=1000, n_init=1, random_state=None):
        self.n_clusters = n_clusters
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, pairs, y=None):
        """Fit on co-association counts (see :meth:`PCC.fit`); returns self."""
        data = as_pair_data(pairs)
        n = data.n
        k = check_n_clusters(self.n_clusters, n)
        solver = _resolve_solver(check_choice(self.solver, "solver", {"auto", "dense", "sparse"}), data)
        tol = check_tol(self.tol)
        max_iter = check_int(self.max_iter, "max_iter", min_value=0)
        n_init = check_int(self.n_init, "n_init", min_value=1)
        rng = check_random_state(self.random_state)

        ones = np.ones(data.nnz)
        if solver == "dense":
            X, M = data.dense()
            M = (M > 0).astype(np.float64)
            np.fill_diagonal(X, 1.0)
            np.fill_diagonal(M, 1.0)
            S = M.sum(axis=1)

            def sweep(Y, Ynew):
                R = M * (X - Y @ Y.T)
                G = R @ Y
                yg = np.einsum("ik,ik->i", Y, G)
                num = Y * (S[:, None] + G)
                Ynew[:] = num / num.sum(axis=1, keepdims=True)  # = S + y.G on the simplex, but stable
                return float(np.einsum("ij,ij->", R, R)), float(4.0 * np.max(G.max(axis=1) - yg))

        else:
            S = 1.0 + np.diff(data.indptr).astype(np.float64)

            def sweep(Y, Ynew):
                return _k.ppc_sparse_sweep(data.indptr, data.indices, data.x, ones, Y, Ynew)

        scale = float(S.mean())
        best = None
        for _ in range(n_init):
            Y = _start(rng, n, k)
            Ynew = np.empty_like(Y)
            trace = []
            it = 0
            while True:
                obj, gap = sweep(Y, Ynew)
                trace.append((it, obj))
                if gap <= tol * scale or it >= max_iter:
                    break
                Y, Ynew = Ynew, Y
                it += 1
            if best is None or obj < best[0]:
                best = (obj, Y.copy(), np.array(trace, dtype=np.float64), it, gap / scale)
        self.objective_, Y, self.objective_trace_, self.n_iter_, self.kkt_gap_ = best
        self.solver_ = solver
        self._set_memberships(Y)
        return self
