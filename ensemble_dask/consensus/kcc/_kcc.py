"""KCC: K-means-based consensus clustering on the 1-of-K binary matrix (Li & Liu 2018 Sect. 3.1, eq. 3).

K-means on the binary matrix ``B`` of eq. 3 maximises the category-utility consensus function
(Wu et al., *K-means-based consensus clustering: a unified view*, TKDE 2015). ``B`` is never built:
a point's squared distance to a centroid is a sum, over its clusterings, of a lookup in that
clustering's centroid block (see :mod:`._kernels`), so memory is ``O(n N)`` for the labels and
``O(K sum_i K_i)`` for the centroids.

Missing labels (``-1``) follow KCC for incomplete basic partitions (Wu et al., Sect. 5): the
distance of ``x`` runs over the clusterings ``i`` where ``x`` is present, and block ``i`` of centroid
``k`` is the mean of the one-hot vectors of the members of cluster ``k`` present in clustering ``i``.
The total squared error then equals ``sum_i n_i (1 - sum_j P_ij^2) - n sum_i p_i U_c(H*, H_i)``
with ``U_c`` (eq. 2) computed on the ``n_i`` points present in clustering ``i`` and weighted by
their share ``p_i = n_i / n``: minimising it maximises that normalised utility.

The fit is written against a *backend* of row blocks (:class:`LocalBlocks` here, a Dask one in
:mod:`ensemble_dask.rowblocks.kcc`): per Lloyd iteration each block returns its sufficient statistics
(:func:`block_step`), they are combined (:func:`combine_stats`) and the centroids are derived from
the total (:func:`centers_from_stats`), so a row-distributed fit is the same code.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np

from ..._validation import InputError, check_labels_matrix, check_random_state, convergence_warning
from .._common.base import normalized_entropy
from .._common.encoding import (  # noqa: F401 (re-exported)
    Encoding,
    check_encoding,
    column_categories,
    compress_rows,
    encode,
    encode_new_labels,
)
from .._common.params import Interval, Options, ParamsMixin, check_n_clusters
from ..starts import spectral_partition
from ._blocks import (  # noqa: F401 (re-exported: the row-block API of KCC)
    LocalBlocks,
    _proportions,
    _row_center,
    block_closest,
    block_cooccurrence,
    block_memberships,
    block_norms,
    block_pick,
    block_row,
    block_sizes,
    block_step,
    block_trials,
    centers_from_partition,
    centers_from_stats,
    combine_stats,
)

__all__ = [
    "KCC",
    "Encoding",
    "encode",
    "block_step",
    "combine_stats",
    "centers_from_stats",
    "centers_from_partition",
    "block_sizes",
    "block_cooccurrence",
    "LocalBlocks",
    "fit_kcc",
    "assign_new_rows",
    "kcc_starts",
]


#: without weights, fit on the distinct label rows when they are at most this share of the rows
DISTINCT_SHARE = 0.5
#: above this many (distinct) rows the random starts are compared on a sample of them
START_SAMPLE = 20_000


def _locate(totals, r):
    """Block index and residual where the cumulative ``totals`` reach ``r``."""
    cs = np.cumsum(totals)
    b = min(int(np.searchsorted(cs, r)), len(totals) - 1)
    return b, r - (cs[b - 1] if b > 0 else 0.0)


def _uniform_row(backend, rng):
    if getattr(backend, "weighted_picks", False):
        totals = np.array([float(w.sum()) for w in backend.weight])
        b, r = _locate(totals, rng.uniform() * totals.sum())
        j = min(int(np.searchsorted(np.cumsum(backend.weight[b]), r)), backend.n_rows[b] - 1)
        return backend.row(b, j)
    n = sum(backend.n_rows)
    j = int(rng.integers(n))
    b, j = _locate(np.asarray(backend.n_rows, dtype=np.float64), j + 0.5)
    return backend.row(b, int(j))


def _kmeanspp(backend, K, enc, prior, rng):
    """Greedy k-means++ (Arthur & Vassilvitskii; ``2 + log K`` local trials as scikit-learn)."""
    n_trials = 2 + int(np.log(K))
    centers = [_row_center(_uniform_row(backend, rng), enc, prior)]
    totals = backend.set_closest(centers[0], _csq(centers[0], enc))
    for _ in range(1, K):
        pot = float(totals.sum())
        cands = []
        for r in rng.uniform(size=n_trials) * pot:
            b, rr = _locate(totals, r)
            cands.append(_row_center(backend.pick(b, rr), enc, prior))
        csqs = [_csq(c, enc) for c in cands]
        best = int(np.argmin(backend.trials(cands, csqs)))
        centers.append(cands[best])
        totals = backend.set_closest(cands[best], csqs[best])
    return np.ascontiguousarray(np.array(centers).T)


def _random_init(backend, K, enc, prior, rng):
    n = sum(backend.n_rows)
    if getattr(backend, "weighted_picks", False):
        w = np.concatenate(backend.weight)
        ids = np.sort(rng.choice(n, size=K, replace=False, p=w / w.sum()))
    else:
        ids = np.sort(rng.choice(n, size=K, replace=False))
    bounds = np.concatenate([[0], np.cumsum(backend.n_rows)])
    rows = []
    for j in ids:
        b = int(np.searchsorted(bounds, j, side="right") - 1)
        rows.append(_row_center(backend.row(b, int(j - bounds[b])), enc, prior))
    return np.ascontiguousarray(np.array(rows).T)


def _clusters_init(backend, K, enc, prior, rng, counts):
    """Centroids of ``K`` clusters of the basic partitions: a start that needs no individual row.

    ``K`` distinct global categories are drawn with probability proportional to their counts (the
    category of a uniformly drawn row's uniformly drawn clustering, as far as distinct draws go);
    centroid ``k`` is the mean of the one-hot rows carrying category ``k``. Only per-cluster counts,
    the statistics of a Lloyd step, are needed, so a federation can compute it by a secure sum.
    """
    G = enc.n_categories
    p = counts / counts.sum()
    chosen = np.sort(rng.choice(G, size=K, replace=bool(np.count_nonzero(p) < K), p=p))
    co, sizes = backend.cooccurrence(chosen, G)
    st = {"counts": co, "sizes": sizes, "far_rows": np.zeros((0, enc.n_clusterings), dtype=np.int32)}
    return centers_from_stats(st, enc, prior)


def _spectral_centroids(gidx, w, K, enc, seed):
    """``K x G`` centroids of HBGF's partition of the rows ``gidx`` (weighted by ``w``), or None when it
    cannot run (no clustering with two labels among these rows, or fewer rows than clusters)."""
    lab = spectral_partition(gidx, w, K, seed)
    if lab is None:
        return None
    present = gidx >= 0
    G = enc.n_categories
    flat = (lab[:, None] * G + gidx)[present]
    counts = np.bincount(flat, weights=np.broadcast_to(w[:, None], gidx.shape)[present], minlength=K * G)
    return _proportions(counts.reshape(K, G), enc)


def _spectral_init(backend, K, enc, prior, rng):
    """``G x K`` centroids of HBGF's partition of the rows (of a uniform sample of ``max(START_SAMPLE, 50 K)``
    of them, weights kept, on more), or of a k-means++ seeding where HBGF gives none."""
    n, size = sum(backend.n_rows), max(START_SAMPLE, 50 * K)
    sample = np.arange(n) if n <= size else np.sort(rng.choice(n, size=size, replace=False))
    rows = backend.take(sample)
    w = backend.take_weights(sample)  # ones on unweighted rows, as every backend holds
    rows, _, inverse = compress_rows(rows)  # HBGF's fit on the distinct rows, weighted: the same partition
    mult = np.bincount(inverse, weights=np.asarray(w, dtype=np.float64), minlength=rows.shape[0])
    spectral = _spectral_centroids(rows, mult, K, enc, int(rng.integers(2**31 - 1)))
    if spectral is None:
        return _kmeanspp(backend, K, enc, prior, rng)
    return np.ascontiguousarray(spectral.T)


def _csq(center, enc):
    return np.add.reduceat(center * center, enc.offsets[:-1])


def lloyd(backend, MT, enc, prior, max_iter, tol):
    """Lloyd's iterations from centroids ``MT``: ``(MT, sse, n_iter, converged)``.

    Stops when no row changes cluster or when the squared centroid shift is at most ``tol``
    (absolute), as scikit-learn's ``KMeans``; a final assignment pass then makes the labels
    consistent with the returned centroids, whose squared error is ``sse``.
    """
    backend.reset()
    K = MT.shape[1]
    strict = converged = False
    it = 0
    for it in range(max_iter):
        st = backend.step(MT, block_norms(MT, enc.offsets), K)
        new = centers_from_stats(st, enc, prior)
        shift = float(((new - MT) ** 2).sum())
        MT = new
        if it > 0 and st["changed"] == 0:
            strict = converged = True
            break
        if shift <= tol:
            converged = True
            break
    if strict:
        sse = st["sse"]
    else:
        sse = backend.step(MT, block_norms(MT, enc.offsets), 0)["sse"]
    return MT, float(sse), it + 1, converged


def kcc_starts(est, backend, enc, rng, start=None):
    """Run ``est``'s starts on ``backend``: ``((MT, sse, n_iter, converged) of the best, total weight)``.

    Everything it reads from ``backend`` is a sum over rows (sizes, statistics), except for the
    ``'k-means++'`` and ``'random'`` starts, which fetch individual rows, and ``'spectral'``, which fetches a
    uniform sample of up to ``max(START_SAMPLE, 50 K)`` rows. ``start`` (``K x G``
    centroids, as an array ``init``) replaces ``est.init`` by one start from there.
    """
    K = est._k
    counts, n_weight = backend.sizes(enc.n_categories)
    prior = _proportions(counts[None, :], enc)[0]
    p = counts / n_weight  # column means of the dense B (missing entries as 0), for the tolerance
    tol = est.tol * float(np.mean(p * (1 - p)))
    best = None
    init = est.init if start is None else start
    n_init = 1 if not isinstance(init, str) or init == "spectral" else est.n_init
    for _ in range(n_init):
        if isinstance(init, str) and init == "k-means++":
            MT0 = _kmeanspp(backend, K, enc, prior, rng)
        elif isinstance(init, str) and init == "clusters":
            MT0 = _clusters_init(backend, K, enc, prior, rng, counts)
        elif isinstance(init, str) and init == "spectral":
            MT0 = _spectral_init(backend, K, enc, prior, rng)
        elif isinstance(init, str):
            MT0 = _random_init(backend, K, enc, prior, rng)
        else:
            MT0 = np.ascontiguousarray(np.asarray(init, dtype=np.float64).T)
        res = lloyd(backend, MT0, enc, prior, est.max_iter, tol)
        if best is None or res[1] < best[1]:
            best = res
    return best, n_weight


def best_sample_start(est, part, enc, rng):
    """Centroids (``K x G``) of the best start on the sample backend ``part``: ``est``'s random starts, then
    HBGF's partition of the sample as one more start, kept when its Lloyd run ends lower (at many clusters
    the random starts share a local optimum that it avoids; the benchmarks page, "Starts")."""
    (MT, sse, *_), _ = kcc_starts(est, part, enc, rng)
    spectral = _spectral_centroids(part.gidx[0], part.weight[0], est._k, enc, int(rng.integers(2**31 - 1)))
    if spectral is not None:
        (MT_s, sse_s, *_), _ = kcc_starts(est, part, enc, rng, start=spectral)
        MT = MT_s if sse_s < sse - 1e-9 * abs(sse) else MT
    return np.ascontiguousarray(MT.T)


def fit_kcc(est, backend, enc, rng, start=None):
    """Run ``est``'s starts on ``backend`` (or one from ``start``) and set its fitted attributes (the shared
    driver)."""
    (MT, sse, n_iter, converged), n_weight = kcc_starts(est, backend, enc, rng, start)
    labels, Y = backend.memberships(MT, block_norms(MT, enc.offsets))
    est.encoding_ = enc
    est.cluster_centers_ = [
        np.ascontiguousarray(MT[a:b].T) for a, b in zip(enc.offsets[:-1], enc.offsets[1:], strict=True)
    ]
    est.inertia_ = sse
    est.objective_ = sse / n_weight**2
    est.n_iter_ = n_iter
    est.converged_ = converged
    est.memberships_ = Y
    est.labels_ = labels
    est.uncertainty_ = normalized_entropy(Y)
    est.effective_k_ = int(np.unique(labels).size)
    if not converged:
        warnings.warn(
            f"KCC did not converge in max_iter={est.max_iter} Lloyd iterations (centroid shift above tol)",
            convergence_warning(),
            stacklevel=3,
        )
    return est


def assign_new_rows(est, labels):
    """``(labels, memberships)`` of (new) rows for a fitted KCC or GKCC ``est``: the nearest fitted centroid
    over each row's observed base labels (``-1``, and labels the fit never saw, are missing)."""
    name = type(est).__name__
    if not hasattr(est, "cluster_centers_"):
        raise InputError(f"This {name} is not fitted yet; call fit first")
    enc = est.encoding_
    # int32, C-contiguous, as the fit's (one compiled kernel); labels the fit never saw: missing, and said
    _, gidx = encode_new_labels(labels, enc, stacklevel=3)
    MT = np.ascontiguousarray(np.concatenate(est.cluster_centers_, axis=1).T)
    return block_memberships(gidx, MT, block_norms(MT, enc.offsets))


class KCC(ParamsMixin):
    """K-means-based consensus clustering (KCC, KCC++) on a labels matrix with missing entries.

    Parameters
    ----------
    n_clusters : int, default=2
        Number of consensus clusters ``K`` (``2 <= K <= n``).
    init : {'spectral', 'k-means++', 'random', 'clusters'} or array of shape (K, G), default='spectral'
        Start: the centroids of HBGF's spectral partition of the rows (the default; of a uniform sample of
        ``max(20,000, 50 K)`` rows on more: the lowest objective is not the best consensus where clusters
        differ much in size, see :func:`~ensemble_dask.consensus.starts.label_starts` and the benchmarks
        page, "Starts"), greedy k-means++ on ``B`` (KCC++ of Li & Liu 2018), ``K`` distinct random points
        (KCC), the centroids of ``K`` random clusters of the basic partitions (drawn in proportion to their
        sizes; needs only per-cluster counts: the start of the federated KCC), or explicit centroids over
        the ``G = sum_i K_i`` categories (the sorted distinct labels of each clustering, clustering by
        clustering, as :func:`encode` orders them).
    n_init : int, default=5
        Number of random starts (``'k-means++'``, ``'random'``, ``'clusters'``); the lowest objective is
        kept (ignored for ``'spectral'`` and an explicit ``init``: one start). One random start is a lottery
        on hard data (the benchmarks page, "Starts"). Each start costs one Lloyd run over the labels; with
        random starts on more than ``max(20,000, 50 K)`` rows the starts are compared on a sample of that
        many rows (distinct label rows weighted by multiplicity when at most half the rows are distinct),
        with HBGF's partition of the sample as one more start, and only the best is run on all of them.
    max_iter : int, default=300
    tol : float, default=1e-4
        Relative tolerance on the squared centroid shift, scaled by the mean variance of the
        columns of ``B`` (scikit-learn's convention); 0 runs until no point changes cluster.
    random_state : int, Generator or None, default=None

    Attributes
    ----------
    labels_ : ndarray of int64, shape (n,)
    cluster_centers_ : list of ndarray
        One ``K x K_i`` block per clustering: the label distribution of each cluster's members.
    objective_ : float
        ``sum_x ||b(x) - m_{k(x)}||^2 / n^2`` (Li & Liu 2018 Sect. 5.2's condensed form), over the
        clusterings where each point is present.
    inertia_ : float
        The same sum, not divided by ``n^2``.
    n_iter_ : int
    converged_ : bool
        False when the best start stopped at ``max_iter`` (a :class:`ConvergenceWarning` is issued).
    memberships_ : ndarray, shape (n, K)
        Soft memberships ``exp(-d(x, k) / 2)`` normalised over ``k``, with ``d`` the squared distance
        to centroid ``k``: a point gains a factor ``e`` toward a pure centroid per clustering on
        which it agrees with it; rows with every label missing are uniform.
    uncertainty_ : ndarray, shape (n,)
        Normalised entropy of ``memberships_``.
    effective_k_ : int
    encoding_ : Encoding

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.array([[0, 1], [0, 1], [1, 0], [1, 0]])
    >>> KCC(2, random_state=0).fit(labels).labels_.tolist() in ([0, 0, 1, 1], [1, 1, 0, 0])
    True
    """

    _parameter_constraints = {
        "n_clusters": [Interval(Integral, 2, None)],
        "init": [Options("spectral", "k-means++", "random", "clusters"), "array-like"],
        "n_init": [Interval(Integral, 1, None)],
        "max_iter": [Interval(Integral, 1, None)],
        "tol": [Interval(Real, 0, None, inf_ok=True)],
        "random_state": ["random_state"],
    }

    def __init__(self, n_clusters=2, *, init="spectral", n_init=5, max_iter=300, tol=1e-4, random_state=None):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _validate_params(self):
        super()._validate_params()
        self._k = int(self.n_clusters)

    def _check_data(self, n, n_categories):
        """What depends on the data: ``n_clusters`` at most the ``n`` rows, an ``init`` array of shape
        ``(n_clusters, n_categories)``."""
        self._k = check_n_clusters(self, n)
        if not isinstance(self.init, str):
            a = np.asarray(self.init, dtype=np.float64)
            if a.shape != (self._k, n_categories):
                raise InputError(
                    "The 'init' array of KCC must have shape "
                    f"(n_clusters, n_categories)=({self._k}, {n_categories}); got {a.shape}"
                )

    def fit(self, labels, y=None, sample_weight=None):
        """Fit on an ``n x N`` labels matrix (``-1`` = missing).

        ``sample_weight`` (positive, shape ``(n,)``; None: all 1) makes row x count as that many
        points, in the centroids, the objective and the random picks of the start: a matrix of
        the distinct label rows weighted by their multiplicity is fitted like the whole matrix,
        in a fraction of the time. Without weights, with string starts (not ``'clusters'``) on more than
        20,000 rows, this is done whenever at most half the rows are distinct (the k-means++ picks are then
        drawn by multiplicity: the same distribution, other draws than row by row: there a seed gives
        another result than the row-distributed fit), and the starts are compared on a sample (as
        the row-distributed fit compares them).
        """
        labels = check_labels_matrix(labels)
        gidx, enc = encode(labels)
        check_encoding(enc, labels.shape)
        self._validate_params()
        self._check_data(labels.shape[0], enc.n_categories)
        rng = check_random_state(self.random_state)
        if sample_weight is None:
            if not self._sampled_starts(gidx.shape[0]):  # row by row, as the row-distributed fit
                return fit_kcc(self, LocalBlocks([gidx]), enc, rng)
            rows, mult, inverse = compress_rows(gidx)
            if rows.shape[0] > DISTINCT_SHARE * gidx.shape[0]:
                del rows, mult, inverse  # nearly every row distinct: not worth holding a copy
                return self._fit_rows(gidx, None, enc, rng)
            # few distinct label rows (complete ensembles: a few thousand among 500,000 points): the same
            # objective on the distinct rows weighted by their multiplicity, in a fraction of the time
            del gidx
            self._fit_rows(rows, mult, enc, rng)
            self.labels_, self.memberships_ = self.labels_[inverse], self.memberships_[inverse]
            self.uncertainty_ = self.uncertainty_[inverse]
            return self
        w = np.asarray(sample_weight, dtype=np.float64)
        if w.shape != (labels.shape[0],) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise InputError(
                f"The 'sample_weight' parameter must hold {labels.shape[0]} positive finite numbers; "
                f"got shape {w.shape}"
            )
        return self._fit_rows(gidx, w, enc, rng)

    def _start_sample(self):
        return max(START_SAMPLE, 50 * self._k)

    def _sampled_starts(self, n_rows):
        """Whether a fit on ``n_rows`` rows takes the fast path: string starts (k-means++, random, spectral)
        on more rows than the start sample. (The row-distributed fit and explicit starts work row by row.)"""
        return isinstance(self.init, str) and self.init != "clusters" and n_rows > self._start_sample()

    def _starts_on_sample(self, n_rows):
        """Whether the ``n_init`` random starts (and HBGF's) are compared on a sample before the one run on
        every row (a spectral start is one start: nothing to compare)."""
        return self._sampled_starts(n_rows) and self.n_init > 1 and self.init != "spectral"

    def _fit_rows(self, gidx, w, enc, rng):
        """Fit on rows ``gidx`` weighted by ``w`` (None: 1 each). Above :data:`START_SAMPLE` rows the
        ``n_init`` random starts are compared on a uniform sample of them (weights kept: an unbiased estimate
        of the objective), with HBGF's partition of the sample as one more start, and the best one's centroids
        start the one Lloyd run on every row."""
        backend = LocalBlocks([gidx]) if w is None else LocalBlocks([gidx], [w], weighted_picks=True)
        if not self._starts_on_sample(gidx.shape[0]):
            return fit_kcc(self, backend, enc, rng)
        sample = np.sort(rng.choice(gidx.shape[0], size=self._start_sample(), replace=False))
        part = (
            LocalBlocks([gidx[sample]])
            if w is None
            else LocalBlocks([gidx[sample]], [w[sample]], weighted_picks=True)
        )
        return fit_kcc(self, backend, enc, rng, start=best_sample_start(self, part, enc, rng))

    @classmethod
    def from_parameters(cls, cluster_centers, categories, **params):
        """A fitted KCC from its centroids, as a run store keeps them: ``cluster_centers`` (one ``K x K_i``
        block per clustering) over ``categories`` (each clustering's sorted labels, those of the fit);
        :meth:`transform` and :meth:`predict` then label new rows."""
        enc = Encoding.from_categories(categories)
        blocks = [np.asarray(b, dtype=np.float64) for b in cluster_centers]
        if len(blocks) != enc.n_clusterings or any(
            b.shape[1] != c.size or b.shape[0] != blocks[0].shape[0]
            for b, c in zip(blocks, enc.categories, strict=True)
        ):
            raise InputError(
                "KCC.from_parameters: one (K, K_i) block of centroids per clustering of categories; got "
                f"{[b.shape for b in blocks]} for {[c.size for c in enc.categories]} labels"
            )
        est = cls(blocks[0].shape[0], **params)
        est._validate_params()
        est.encoding_, est.cluster_centers_ = enc, blocks
        return est

    @classmethod
    def from_partition(cls, labels, partition, **params):
        """A fitted KCC whose centroids are those of a given ``partition`` (ints ``0..K-1``, ``K`` its largest
        label plus one) of the rows of ``labels`` (``n x N``, ``-1`` missing): in each clustering, the
        distribution of the base labels among each cluster's members. :meth:`predict` then labels a new row
        by KCC's rule, the nearest of these centroids over its observed labels: how a consensus result with no
        centroids of its own (GKCC's, the baselines') labels new rows."""
        labels = check_labels_matrix(labels)
        partition = np.asarray(partition)
        if partition.shape != (labels.shape[0],) or partition.size == 0 or partition.min() < 0:
            raise InputError(
                f"KCC.from_partition: partition must hold a label >= 0 for each of the {labels.shape[0]} "
                f"rows of labels; got shape {partition.shape}"
            )
        K = int(partition.max()) + 1
        enc = Encoding.from_categories(column_categories(labels))
        gidx = enc.transform(labels)  # int32, C-contiguous, as the fit's (one compiled kernel)
        weight = np.ones(labels.shape[0])
        counts, _ = LocalBlocks([gidx], [weight]).sizes(enc.n_categories)
        prior = _proportions(counts[None, :], enc)[0]
        MT = centers_from_partition(gidx, weight, partition.astype(np.int64), K, enc, prior)
        blocks = [
            np.ascontiguousarray(MT[a:b].T) for a, b in zip(enc.offsets[:-1], enc.offsets[1:], strict=True)
        ]
        return cls.from_parameters(blocks, enc.categories, **params)

    def transform(self, labels):
        """Memberships of (new) rows from their base labels, as the fit gives its own rows' (``-1``, and
        labels the fit never saw, are missing)."""
        return assign_new_rows(self, labels)[1]

    def predict(self, labels):
        """The consensus cluster of (new) rows: the nearest fitted centroid over their observed labels."""
        return assign_new_rows(self, labels)[0]

    def fit_predict(self, labels, y=None):
        return self.fit(labels).labels_
