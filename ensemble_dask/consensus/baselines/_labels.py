"""Baselines on the labels matrix: HGPA, MCLA (Strehl & Ghosh 2002) and HBGF (Fern & Brodley 2004).

Each ``fit`` takes an ``n x N`` labels matrix (``-1`` = missing; a missing label simply leaves
the point out of that clustering's clusters). Points with identical label rows are identical for
all three methods, so each works on the distinct rows weighted by their multiplicity.
"""

from __future__ import annotations

import os
import tempfile
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from ..._validation import InputError, check_labels_matrix, check_random_state
from .._common.base import SoftConsensusMixin
from .._common.encoding import Encoding, check_encoding, column_categories, compress_rows, encode
from .._common.params import Interval, Options, check_n_clusters
from .._common.small import SMALL_KMEANS, kmeans
from . import _kernels as kern
from ._pairs import metis_parts, one_hot, relabel

__all__ = ["HGPA", "MCLA", "HBGF", "KAHYPAR_CONFIG"]


def _ones(indptr, indices, n_cols):
    """The sparse 0/1 matrix of the CSR pattern (``indptr``, ``indices``)."""
    shape = (indptr.shape[0] - 1, n_cols)
    return sp.csr_array((np.ones(indices.size), indices, indptr), shape=shape, copy=False)


def _incidence(labels):
    """Validated ``(B_u (distinct rows x G) sparse 0/1, multiplicity, inverse, n, gidx_u, encoding)``."""
    indptr, indices, w, inv, n, g, enc = _pattern(labels)
    return _ones(indptr, indices, enc.n_categories), w, inv, n, g, enc


def _pattern(labels):
    """:func:`_incidence` with ``B_u`` as its CSR pattern ``(indptr, indices)`` (its data would be ones)."""
    labels = check_labels_matrix(labels)
    gidx, enc = encode(labels)
    check_encoding(enc, labels.shape)
    n = labels.shape[0]
    del labels
    g, w, inv = compress_rows(gidx)
    del gidx
    # CSR built directly (row by row the present entries, whose global indices ascend with the
    # clustering): no COO row and column arrays and no conversion, a few times less peak memory
    indptr, indices = kern.present_csr(g)
    return indptr, indices, w, inv, n, g, enc


def _distinct_pattern(labels, rows=None):
    """``(indptr, indices, n, encoding)``: the CSR pattern of the global indices of the ``n`` rows
    ``labels[rows]`` (None: every row), which the caller knows to be the distinct rows of ``labels`` (each
    row's first occurrence: their labels are all of ``labels``'), read through the encoding's lookup table
    with no copy of the rows and no ``n x N`` global indices."""
    labels = check_labels_matrix(labels)
    enc = Encoding.from_categories(column_categories(labels))
    rows = np.arange(labels.shape[0], dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    if rows.size and (rows.min() < 0 or rows.max() >= labels.shape[0]):  # read below with no bounds checks
        raise InputError(
            f"rows must index the {labels.shape[0]} rows of labels; got {rows.min()}..{rows.max()}"
        )
    check_encoding(enc, (rows.size, labels.shape[1]))
    table = enc.lookup(labels.size)
    if table is None:  # label values too large for a table: through the rows' global indices
        indptr, indices = kern.present_csr(enc.transform(labels[rows]))
    else:
        indptr, indices = kern.lookup_csr(labels, rows, *table)
    return indptr, indices, rows.size, enc


class _LabelBaseline(SoftConsensusMixin):
    _parameter_constraints = {"n_clusters": [Interval(Integral, 2, None)], "random_state": ["random_state"]}

    def _finish(self, labels_u, inv):
        labels = relabel(labels_u[inv])  # numbered 0 .. m - 1
        m = int(labels.max()) + 1
        # what _set_memberships gives for one-hot memberships, without its passes over the n x K matrix:
        # the argmax is the label, every entropy 0
        self.memberships_ = one_hot(labels, max(self._k, m))
        self.labels_ = labels
        self.uncertainty_ = np.zeros(labels.shape[0])
        self.effective_k_ = m
        return self

    def fit_predict(self, labels, y=None):
        return self.fit(labels).labels_


# KaHyPar's Python wheel ships no preset; this is a lean direct k-way preset (connectivity
# objective, multilevel coarsening, pool initial partitioning, k-way FM refinement, no flows).
#: HBGF's G x G eigenproblem (G = base clusters) runs on one BLAS thread up to this size
SMALL_EIGH = 5000
#: with ``eigen_solver="auto"`` HBGF takes the dense ``eigh`` up to this many base clusters (or when K is more
#: than a fifth of them) and ARPACK's Lanczos (``eigsh``) above; both give the same subspace to rounding
EIGSH_MIN_G = 1000
#: relative accuracy of the Ritz values asked of ARPACK: the vectors' error is about this over the relative
#: gap between the K-th and (K+1)-th eigenvalues (0.1, ccHBGF's, lost 4 of 100 vectors at G = 4,636; 1e-6
#: and 1e-10 took the same time there)
EIGSH_TOL = 1e-10
# Above this many distinct rows HBGF's n_init k-means starts are compared on a uniform sample of them
# (weighted by multiplicity), and only the best runs on every row: on 500,000 rows the ten full runs
# were 80% of the fit. 10,000 rows (at least 50 a cluster) choose starts of the same final inertia as
# 20,000 on blobs, overlapping blobs and uniform noise at K = 100, in half the time
# (benchmarks/hbgf_kmeans_sample.py)
KMEANS_SAMPLE = 10_000

KAHYPAR_CONFIG = """\
mode=direct
objective=km1
seed=-1
cmaxnet=-1
vcycles=0
p-use-sparsifier=false
p-detect-communities=false
p-detect-communities-in-ip=false
p-reuse-communities=false
p-max-louvain-pass-iterations=100
p-min-eps-improvement=0.0001
p-louvain-edge-weight=hybrid
p-large-he-threshold=1000
p-smallest-maxnet-threshold=50000
p-maxnet-removal-factor=0.01
c-type=ml_style
c-s=1
c-t=160
c-rating-score=heavy_edge
c-rating-use-communities=false
c-rating-heavy_node_penalty=no_penalty
c-rating-acceptance-criterion=best_prefer_unmatched
c-fixed-vertex-acceptance-criterion=fixed_vertex_allowed
i-mode=recursive
i-technique=multi
i-c-type=ml_style
i-c-s=1
i-c-t=150
i-c-rating-score=heavy_edge
i-c-rating-use-communities=false
i-c-rating-heavy_node_penalty=no_penalty
i-c-rating-acceptance-criterion=best_prefer_unmatched
i-c-fixed-vertex-acceptance-criterion=fixed_vertex_allowed
i-algo=pool
i-runs=20
i-bp-algorithm=worst_fit
i-bp-heuristic-prepacking=false
i-bp-early-restart=true
i-bp-late-restart=true
i-r-type=twoway_fm
i-r-runs=-1
i-r-fm-stop=simple
i-r-fm-stop-i=50
r-type=kway_fm_km1
r-runs=-1
r-fm-stop=adaptive_opt
r-fm-stop-alpha=1
r-fm-stop-i=350
"""


class HGPA(_LabelBaseline):
    """Hypergraph partitioning (Strehl & Ghosh 2002) with KaHyPar.

    Every base cluster is a hyperedge over its members; KaHyPar (the ``kahypar`` wheel) cuts the
    hypergraph into ``K`` parts of balanced weight (``epsilon`` imbalance) minimising the
    connectivity of the cut hyperedges. Points with identical label rows form one node weighted
    by their count.

    Parameters
    ----------
    n_clusters : int, default=2
    epsilon : float, default=0.05
        Allowed imbalance of the parts.
    random_state : int, Generator or None, default=None
        Seeds KaHyPar.

    Attributes
    ----------
    labels_, memberships_ (one-hot), uncertainty_, effective_k_
    """

    _parameter_constraints = {
        **_LabelBaseline._parameter_constraints,
        "epsilon": [Interval(Real, 0, None)],
    }

    def __init__(self, n_clusters=2, *, epsilon=0.05, random_state=None):
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.random_state = random_state

    def fit(self, labels, y=None):
        import kahypar

        B, w, inv, n, g, enc = _incidence(labels)
        self._validate_params()
        self._k = check_n_clusters(self, n)
        seed = int(check_random_state(self.random_state).integers(2**31 - 1))
        H = B.T.tocsr()  # hyperedges x nodes
        H.sort_indices()
        hg = kahypar.Hypergraph(
            B.shape[0],
            H.shape[0],
            H.indptr.astype(np.int64).tolist(),
            H.indices.astype(np.int64).tolist(),
            self._k,
            [],
            w.astype(np.int64).tolist(),
        )
        ctx = kahypar.Context()
        fd, path = tempfile.mkstemp(suffix=".ini")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(KAHYPAR_CONFIG)
            ctx.loadINIconfiguration(path)
        finally:
            os.unlink(path)
        ctx.setK(self._k)
        ctx.setEpsilon(float(self.epsilon))
        ctx.setSeed(seed)
        ctx.suppressOutput(True)
        kahypar.partition(hg, ctx)
        parts = np.array([hg.blockID(i) for i in range(B.shape[0])], dtype=np.int64)
        return self._finish(parts, inv)


class MCLA(_LabelBaseline):
    """Meta-clustering (Strehl & Ghosh 2002): clusters grouped by METIS on their Jaccard graph.

    The meta-graph has one node per base cluster and edges weighted ``round(1000 J)`` with ``J``
    the Jaccard similarity of the two clusters' members; METIS cuts it into ``K`` meta-clusters.
    A point's association with a meta-cluster is the share of that meta-cluster's clusters that
    hold it, among those of the clusterings where the point is present; the association rows, normalised, are
    ``memberships_`` (uniform for a point in none) and a point goes to its most associated meta-cluster (ties:
    the first).

    Parameters
    ----------
    n_clusters : int, default=2
    random_state : int, Generator or None, default=None
        Seeds METIS.

    Attributes
    ----------
    labels_, memberships_, uncertainty_, effective_k_
    meta_labels_ : ndarray of int64, shape (G,)
        Meta-cluster of each base cluster (clusterings in column order, labels sorted).
    """

    def __init__(self, n_clusters=2, *, random_state=None):
        self.n_clusters = n_clusters
        self.random_state = random_state

    def fit(self, labels, y=None):
        B, w, inv, n, g, enc = _incidence(labels)
        self._validate_params()
        self._k = check_n_clusters(self, n)
        G = B.shape[1]
        if self._k > G:
            raise InputError(f"MCLA needs n_clusters <= the number of base clusters {G}; got {self._k}")
        seed = int(check_random_state(self.random_state).integers(2**31 - 1))
        Bw = B.multiply(w[:, None]).tocsr()
        inter = (B.T @ Bw).toarray()
        size = np.diag(inter).copy()
        J = inter / np.maximum(size[:, None] + size[None, :] - inter, 1e-300)
        np.fill_diagonal(J, 0.0)
        W = sp.csr_array(np.rint(1000 * J))
        W.eliminate_zeros()
        meta = metis_parts(W.indptr, W.indices, W.data, self._k, seed)
        self.meta_labels_ = meta
        P = sp.csr_array((np.ones(G), (np.arange(G), meta)), shape=(G, self._k))
        # share of the meta-cluster's clusters holding the point, over the clusterings it is in
        Q = np.zeros((enc.n_clusterings, self._k))
        np.add.at(Q, (enc.column, meta), 1.0)
        A = (B @ P).toarray() / np.maximum((g >= 0).astype(np.float64) @ Q, 1.0)
        tot = A.sum(1, keepdims=True)
        Y = np.where(tot > 0, A / np.where(tot > 0, tot, 1), 1.0 / self._k)
        self._set_memberships(Y[inv])
        return self


def _kmeans(U, w, k, n_init, seed, scratch=False):
    """Labels of weighted k-means on the rows of ``U``: the best of ``n_init`` starts (by inertia), which on
    more than :data:`KMEANS_SAMPLE` rows are run on a uniform sample of ``max(KMEANS_SAMPLE, 50 k)``
    rows (an unbiased estimate of the inertia, weights kept) and only the winner's centres refined on all.
    ``scratch``: ``U`` is the caller's to lose, so k-means centres it in place (``copy_x=False``: the same
    labels, ``U`` changed by rounding) instead of centring an ``n x k`` copy. On a small
    ``U``, NumPy's k-means (:func:`~ensemble_dask.consensus._common.small.kmeans`: no scikit-learn import)."""
    if U.shape[0] * k <= SMALL_KMEANS:
        return kmeans(U, k, n_init=n_init, seed=seed, sample_weight=w)
    from sklearn.cluster import KMeans

    m = max(KMEANS_SAMPLE, 50 * k)
    if U.shape[0] <= m or n_init == 1:
        with threadpool_limits(1 if U.shape[0] <= m else None):
            km = KMeans(k, n_init=n_init, random_state=seed, copy_x=not scratch)
            return km.fit_predict(U, sample_weight=w)
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(U.shape[0], size=m, replace=False))
    with threadpool_limits(1):  # small fits: OpenMP threads that wait for a busy core cost more than the fit
        fit = KMeans(k, n_init=n_init, random_state=seed).fit(U[sample], sample_weight=w[sample])
    km = KMeans(k, init=fit.cluster_centers_, n_init=1, random_state=seed, copy_x=not scratch)
    return km.fit_predict(U, sample_weight=w)


def _top_eigenpairs(indptr, indices, wd, sc, k, solver, seed):
    """``(vals, V)``: the ``k`` largest eigenpairs of ``M = D_c^{-1/2} B^T diag(wd) B D_c^{-1/2}`` (``B`` the
    0/1 CSR pattern ``indptr``, ``indices`` of ``len(sc)`` columns, ``sc`` the diagonal ``D_c^{-1/2}``),
    ascending.

    ``"dense"``: ``M`` formed and ``scipy.linalg.eigh`` (exact). ``"arpack"``: the top eigenvalue of ``M`` is
    1, once per linked component of the clusters (points link the clusters that hold them), with the
    eigenvector ``sqrt(dc)`` on the component's clusters; those are known, and a single-vector Lanczos could
    miss copies of a repeated eigenvalue, so they are deflated and ``scipy.sparse.linalg.eigsh`` (Lanczos,
    :data:`EIGSH_TOL`, its start vector drawn from ``seed``) finds the next ``k - c`` eigenpairs of ``M``
    minus them. ``M`` is applied as the sparse products when they cost less than the dense ``M`` (``2
    nnz(B)`` against ``G^2`` per product). Falls back to ``"dense"`` when ARPACK does not converge or when
    the ``c`` components leave nothing (``k <= c``) or too little (``k - c >= G - c``) to find.
    """
    from scipy.linalg import eigh
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    G = sc.shape[0]
    nnz = indices.shape[0]
    if solver == "arpack":
        c, comp = kern.linked_components(indptr, indices, G)
        if not 1 <= k - c < G - c:
            solver = "dense"
    M = None
    if solver == "dense" or G * G <= 2 * nnz:
        # A = D_x^{-1/2} B D_c^{-1/2} is never formed (its entries would be three nnz-long temporaries):
        # A^T D_w A = D_c^{-1/2} (B^T D_{w/dx} B) D_c^{-1/2}, on B's ones
        M = np.zeros((G, G))
        kern.weighted_gram_ones(indptr, indices, wd, M)  # no sparse product; B is 0/1
        M *= sc[:, None]
        M *= sc[None, :]
    if solver == "arpack":
        z = 1 / sc  # sqrt(dc), each component's part of unit norm: the eigenvalue-1 vectors
        z /= np.sqrt(np.bincount(comp, weights=z * z, minlength=c))[comp]
        if M is None:
            B = _ones(indptr, indices, G)
            BT = B.T.tocsr()

            def apply(v):
                return sc * (BT @ (wd * (B @ (sc * v))))
        else:

            def apply(v):
                return M @ v

        def matvec(v):
            v = np.ravel(v)
            return apply(v) - z * np.bincount(comp, weights=z * v, minlength=c)[comp]

        op = LinearOperator((G, G), matvec=matvec, dtype=np.float64)
        v0 = np.random.default_rng(seed).uniform(-1.0, 1.0, G)
        try:
            with threadpool_limits(1 if G <= SMALL_EIGH else None):
                vals, V = eigsh(op, k - c, which="LA", tol=EIGSH_TOL, v0=v0)
        except ArpackNoConvergence:
            return _top_eigenpairs(indptr, indices, wd, sc, k, "dense", seed)
        order = np.argsort(vals)
        Z = np.zeros((G, c))
        Z[np.arange(G), comp] = z
        return np.concatenate([vals[order], np.ones(c)]), np.hstack([V[:, order], Z])
    # one BLAS thread for a G x G problem of this size: more threads spin waiting for a core on a loaded
    # machine
    with threadpool_limits(1 if G <= SMALL_EIGH else None):
        return eigh(M, subset_by_index=[G - k, G - 1])


class HBGF(_LabelBaseline):
    """Hybrid bipartite graph formulation (Fern & Brodley 2004), solved spectrally.

    Points and base clusters are the two sides of a bipartite graph with an edge from each point
    to each of its clusters. The spectral relaxation of its normalised cut uses the top ``K``
    singular vectors of ``D_x^{-1/2} B D_c^{-1/2}``, found from the small ``G x G`` eigenproblem
    (``scipy.linalg.eigh``, or ARPACK's Lanczos for many base clusters); the points' rows of the embedding,
    normalised, are clustered with k-means (weighted by multiplicity).

    Parameters
    ----------
    n_clusters : int, default=2
    n_init : int, default=10
        Starts of the final k-means (on more than ``max(10,000, 50 K)`` distinct label rows, compared
        on a sample of that many; the best is then refined on all rows).
    eigen_solver : {"auto", "dense", "arpack"}, default="auto"
        How the ``G x G`` eigenproblem is solved: ``"dense"`` exactly (``scipy.linalg.eigh``), ``"arpack"``
        by Lanczos iterations (``scipy.sparse.linalg.eigsh``, relative tolerance 1e-10: the same subspace up
        to rounding where the K-th and (K+1)-th eigenvalues are apart, a few times faster on thousands of
        base clusters), ``"auto"``: ``"arpack"`` above 1,000 base clusters when K is at most a fifth of
        them, else ``"dense"``.
    random_state : int, Generator or None, default=None

    Attributes
    ----------
    labels_, memberships_ (one-hot), uncertainty_, effective_k_
    embedding_ : ndarray, shape (n, K)
    """

    _parameter_constraints = {
        **_LabelBaseline._parameter_constraints,
        "n_init": [Interval(Integral, 1, None)],
        "eigen_solver": [Options("auto", "dense", "arpack")],
    }

    def __init__(self, n_clusters=2, *, n_init=10, eigen_solver="auto", random_state=None):
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.eigen_solver = eigen_solver
        self.random_state = random_state

    def fit(self, labels, y=None, sample_weight=None):
        """Fit on an ``n x N`` labels matrix (``-1`` = missing); ``sample_weight`` (positive, shape
        ``(n,)``, None: all 1) makes a row count as that many points (e.g. distinct rows weighted by
        their multiplicity)."""
        return self._fit(labels, sample_weight)

    def _fit(self, labels, sample_weight=None, distinct=False, labels_only=False, rows=None):
        """:meth:`fit`; ``distinct``: the rows ``labels[rows]`` (None: every row) are known to be the distinct
        rows of ``labels`` (as :func:`~ensemble_dask.consensus.starts.label_starts` finds them), so neither
        compressed again nor copied (the same fit, on those rows); ``labels_only``: only ``labels_`` is set (a
        start needs no ``n x K`` memberships and embedding)."""
        if distinct:
            indptr, indices, n, enc = _distinct_pattern(labels, rows)
            w, inv = np.ones(n), np.arange(n, dtype=np.int64)
        else:
            indptr, indices, w, inv, n, _, enc = _pattern(labels)
        del labels
        self._validate_params()
        self._k = check_n_clusters(self, n)
        if sample_weight is not None:
            sw = np.asarray(sample_weight, dtype=np.float64)
            if sw.shape != (n,) or not np.all(np.isfinite(sw)) or np.any(sw <= 0):
                raise InputError(
                    f"The 'sample_weight' parameter must hold {n} positive finite numbers; "
                    f"got shape {sw.shape}"
                )
            w = np.bincount(inv, weights=sw, minlength=w.size)
        rng = check_random_state(self.random_state)
        seed = int(rng.integers(2**31 - 1))
        counts = np.diff(indptr)
        dx = np.where(counts > 0, counts, 1).astype(np.float64)
        G = enc.n_categories
        dc = kern.column_sums(indptr, indices, w, G)
        sc = 1 / np.sqrt(np.where(dc > 0, dc, 1.0))
        k = min(self._k, G)
        solver = self.eigen_solver
        if solver == "auto":
            solver = "arpack" if G > EIGSH_MIN_G and 5 * k <= G else "dense"
        vals, V = _top_eigenpairs(indptr, indices, w / dx, sc, k, solver, seed)
        sig = np.sqrt(np.maximum(vals, 1e-300))
        # A V = D_x^{-1/2} B (D_c^{-1/2} V) on B's pattern of ones, each row normalised, in one pass
        U = np.empty((dx.size, V.shape[1]))
        kern.row_embedding(indptr, indices, np.ascontiguousarray(sc[:, None] * V), sig, U)
        if U.shape[0] <= self._k:  # no more distinct label rows than clusters asked: one cluster each
            parts = np.arange(U.shape[0])
        else:
            parts = _kmeans(U, w, self._k, self.n_init, seed, scratch=labels_only)  # a start keeps no U
        if labels_only:
            self.labels_ = relabel(parts[inv])
            return self
        self.embedding_ = U[inv]
        return self._finish(parts, inv)
