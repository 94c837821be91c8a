"""The classic baselines (EAC-SL, EAC-AL, CSPA on pairs; HGPA, MCLA, HBGF on labels)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from ensemble_dask import InputError
from ensemble_dask.coassoc import coassociation, dense_coassociation
from ensemble_dask.consensus import registry
from ensemble_dask.consensus.baselines import CSPA, HBGF, EACAverageLink, EACSingleLink

PAIR_METHODS = ["eac-sl", "eac-al", "cspa"]
LABEL_METHODS = ["hgpa", "mcla", "hbgf"]

# two groups {0,1,2} and {3,4,5}: every clustering agrees except for one swap per clustering
SMALL = np.array(
    [
        [0, 0, 1, 2],
        [0, 0, 1, 2],
        [0, 1, 1, 2],
        [1, 2, 0, 0],
        [1, 2, 0, 1],
        [1, 2, 2, 1],
    ]
)


def _make(name, k, seed=0):
    cls = registry.get(name).estimator_class()
    return cls(k, random_state=seed) if "random_state" in cls.__init__.__code__.co_varnames else cls(k)


def _same_partition(a, b):
    return adjusted_rand_score(a, b) == 1.0


@pytest.mark.parametrize("name", PAIR_METHODS + LABEL_METHODS)
def test_small_hand_checked(name):
    est = _make(name, 2)
    data = dense_coassociation(SMALL) if registry.get(name).fits_on == "pairs" else SMALL
    est.fit(data)
    assert _same_partition(est.labels_, [0, 0, 0, 1, 1, 1])
    assert est.memberships_.shape == (6, 2)
    np.testing.assert_allclose(est.memberships_.sum(1), 1.0)
    np.testing.assert_array_equal(est.memberships_.argmax(1), est.labels_)


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(3000, centers=6, n_features=5, cluster_std=1.0, center_box=(-20, 20), random_state=1)
    ks = np.random.default_rng(0).integers(4, 12, 15)
    labels = np.column_stack(
        [KMeans(int(k), n_init=1, random_state=s).fit_predict(X) for s, k in enumerate(ks)]
    )
    return labels, y


@pytest.mark.parametrize("name", PAIR_METHODS + LABEL_METHODS)
def test_blobs(blobs, name):
    labels, y = blobs
    if registry.get(name).fits_on == "pairs":
        data = coassociation(labels, strategy="cocluster", seed=0, l=30)
    else:
        data = labels
    est = _make(name, 6).fit(data)
    assert adjusted_rand_score(y, est.labels_) >= 0.95


@pytest.mark.parametrize("name", LABEL_METHODS)
def test_missing_labels(blobs, name):
    labels, y = blobs
    labels = labels.copy()
    labels[np.random.default_rng(2).random(labels.shape) < 0.1] = -1  # missing labels are skipped
    assert adjusted_rand_score(y, _make(name, 6).fit(labels).labels_) >= 0.9


@pytest.mark.parametrize(("method", "cls"), [("single", EACSingleLink), ("average", EACAverageLink)])
def test_linkages_equal_scipy_on_full_pairs(method, cls):
    # random counts out of ~10^6 clusterings: no ties of heights, so the dendrogram is unique
    rng = np.random.default_rng(0)
    n = 120
    both = rng.integers(10**6, 2 * 10**6, (n, n))
    co = (rng.random((n, n)) ** 3 * both).astype(np.int64)
    co, both = np.triu(co, 1), np.triu(both, 1)
    co, both = co + co.T, both + both.T
    D = 1 - co / np.where(both > 0, both, 1)
    np.fill_diagonal(D, 0)
    Z = linkage(squareform(D, checks=False), method)
    for k in (2, 3, 5, 8, 13):
        ref = fcluster(Z, k, "maxclust")
        assert _same_partition(cls(k).fit((co, both)).labels_, ref), k


def test_unstored_pairs_and_components():
    # two pairs of points never stored together: 2 components; K=3 cuts inside the larger one
    co = np.array([[0, 2, 1, 0, 0], [2, 0, 1, 0, 0], [1, 1, 0, 0, 0], [0, 0, 0, 0, 2], [0, 0, 0, 2, 0]])
    both = np.where(co > 0, 2, 0)
    for cls in (EACSingleLink, EACAverageLink):
        assert _same_partition(cls(2).fit((co, both)).labels_, [0, 0, 0, 1, 1])
        assert _same_partition(cls(3).fit((co, both)).labels_, [0, 0, 1, 2, 2])
    # one cluster asked for fewer than the components: the largest stays apart, the rest join
    co3 = np.zeros((6, 6), dtype=int)
    for a, b in ((0, 1), (0, 2), (1, 2), (3, 4)):
        co3[a, b] = co3[b, a] = 1
    sl = EACSingleLink(2).fit((co3, co3.copy()))
    assert sl.n_components_ == 3
    assert _same_partition(sl.labels_, [0, 0, 0, 1, 1, 1])


def test_cspa_deterministic(blobs):
    pc = coassociation(blobs[0], strategy="cocluster", seed=0, l=10)
    np.testing.assert_array_equal(
        CSPA(6, random_state=3).fit(pc).labels_, CSPA(6, random_state=3).fit(pc).labels_
    )


@pytest.mark.parametrize("name", LABEL_METHODS)
@pytest.mark.parametrize(
    ("labels", "k", "match"),
    [
        (SMALL, 1, r"'n_clusters' parameter of \w+ must be an integer >= 2; got 1"),
        (SMALL, 7, "n_samples=6; got 7"),
        (np.full((4, 2), -1), 2, "all missing"),
        (np.array([[0, 1], [0, 0], [0, 1]]), 2, "column 0 has a single label 0"),
    ],
)
def test_label_methods_bad_input(name, labels, k, match):
    with pytest.raises(InputError, match=match):
        _make(name, k).fit(labels)


@pytest.mark.parametrize("name", PAIR_METHODS)
def test_pair_methods_bad_input(name):
    pairs = dense_coassociation(SMALL)
    with pytest.raises(InputError, match=r"'n_clusters' parameter of \w+ must be an integer >= 2; got 1"):
        _make(name, 1).fit(pairs)
    with pytest.raises(InputError, match="n_samples=6; got 9"):
        _make(name, 9).fit(pairs)
    with pytest.raises(InputError, match="PairCounts"):
        _make(name, 2).fit(SMALL)


@pytest.mark.parametrize("name", LABEL_METHODS)
def test_more_clusters_asked_than_distinct_label_rows(name):
    """Three distinct rows of labels, K = 5: no error; HBGF and HGPA keep each row in its own cluster
    (MCLA groups the base clusters, so it may join rows)."""
    labels = np.repeat(np.array([[0, 0], [1, 1], [2, 1]]), 10, axis=0)
    est = _make(name, 5).fit(labels)
    assert est.memberships_.shape == (30, 5)
    if name != "mcla":
        assert _same_partition(est.labels_, np.repeat([0, 1, 2], 10))


def _many_cluster_labels(n, n_clusterings, k_range, seed):
    """k-means labelings (k in ``k_range``, on random halves: ``-1`` elsewhere) of 12 blobs."""
    X, _ = make_blobs(n, centers=12, n_features=5, cluster_std=2.0, random_state=seed)
    rng = np.random.default_rng(seed)
    labels = np.full((n, n_clusterings), -1, dtype=np.int64)
    for j in range(n_clusterings):
        rows = np.sort(rng.choice(n, n // 2, replace=False))
        k = int(rng.integers(*k_range))
        labels[rows, j] = KMeans(k, n_init=1, random_state=j).fit_predict(X[rows])
    return labels


def _hbgf_problem(labels):
    from ensemble_dask.consensus.baselines import _labels as hb

    B, w, _, _, _, _ = hb._incidence(labels)
    dx = np.maximum(np.diff(B.indptr), 1).astype(np.float64)
    dc = np.asarray(B.T @ w).ravel()
    return B, w / dx, 1 / np.sqrt(dc)


# 8 linked components of clusters (each blob's clusterings apart) with G^2 > 2 nnz (the sparse products),
# and one component with G^2 <= 2 nnz (the formed matrix)
@pytest.mark.parametrize(("n", "k_range", "n_comp"), [(300, (20, 40), 8), (2000, (4, 8), 1)])
def test_hbgf_lanczos_eigenpairs_equal_the_dense_ones(n, k_range, n_comp):
    """ARPACK's top K eigenpairs of HBGF's G x G problem (the eigenvalue 1 of each linked component deflated)
    are the exact ones (eigh) up to rounding, whether the matrix is applied as the sparse products or formed,
    and HBGF's partition is the same (up to a few points)."""
    from scipy.linalg import eigh, subspace_angles

    from ensemble_dask.consensus.baselines import HBGF
    from ensemble_dask.consensus.baselines import _kernels as kern
    from ensemble_dask.consensus.baselines import _labels as hb

    labels = _many_cluster_labels(n, 8, k_range, seed=1)
    B, wd, sc = _hbgf_problem(labels)
    G = B.shape[1]
    assert (G * G > 2 * B.nnz) == (n_comp > 1)
    assert kern.linked_components(B.indptr, B.indices, G)[0] == n_comp
    vals, V = hb._top_eigenpairs(B.indptr, B.indices, wd, sc, 12, "dense", 0)
    every = eigh((B.T @ (wd[:, None] * B)).toarray() * sc[:, None] * sc[None, :], eigvals_only=True)
    assert every[-12] - every[-13] > 1e-3  # the top 12 are a well-defined subspace
    np.testing.assert_allclose(vals[-n_comp:], 1.0, atol=1e-12)
    lv, LV = hb._top_eigenpairs(B.indptr, B.indices, wd, sc, 12, "arpack", 0)
    assert np.all(np.diff(lv) >= 0) and vals.shape == lv.shape == (12,)
    np.testing.assert_allclose(lv, vals, rtol=0, atol=1e-8)
    assert np.max(subspace_angles(V, LV)) < 1e-6
    np.testing.assert_allclose(LV.T @ LV, np.eye(12), atol=1e-8)
    dense = HBGF(12, eigen_solver="dense", random_state=0).fit(labels)
    lanczos = HBGF(12, eigen_solver="arpack", random_state=0).fit(labels)
    # the embeddings agree to rounding; k-means on them may place a few points on a tie differently
    assert adjusted_rand_score(dense.labels_, lanczos.labels_) > 0.99


def test_hbgf_lanczos_with_more_components_than_clusters_is_the_dense_solve():
    """K at most the number of linked components: the top eigenvalue 1 fills the K eigenpairs, which the dense
    solve then gives (an arbitrary basis of its eigenspace either way)."""
    from ensemble_dask.consensus.baselines import _labels as hb

    labels = _many_cluster_labels(300, 8, (20, 40), seed=1)  # 8 components
    B, wd, sc = _hbgf_problem(labels)
    for k in (6, 8):
        lv, LV = hb._top_eigenpairs(B.indptr, B.indices, wd, sc, k, "arpack", 0)
        vals, V = hb._top_eigenpairs(B.indptr, B.indices, wd, sc, k, "dense", 0)
        np.testing.assert_array_equal(lv, vals)
        np.testing.assert_array_equal(LV, V)


def test_hbgf_auto_solver_switches_at_the_threshold(monkeypatch):
    """``eigen_solver="auto"`` is the dense solve up to EIGSH_MIN_G base clusters and Lanczos above (when K is
    at most a fifth of them); a Lanczos run that does not converge falls back to the dense solve."""
    import scipy.sparse.linalg as spla

    from ensemble_dask.consensus.baselines import HBGF
    from ensemble_dask.consensus.baselines import _labels as hb

    labels = _many_cluster_labels(400, 6, (15, 25), seed=2)
    assert hb._incidence(labels)[0].shape[1] > 5 * 8
    calls = []
    real = spla.eigsh
    monkeypatch.setattr(spla, "eigsh", lambda *a, **kw: calls.append(a[1]) or real(*a, **kw))
    HBGF(8, random_state=0).fit(labels)
    assert calls == []  # G ~ 120 < EIGSH_MIN_G: dense
    monkeypatch.setattr(hb, "EIGSH_MIN_G", 50)
    auto = HBGF(8, random_state=0).fit(labels)
    assert len(calls) == 1  # K minus the linked components' eigenvalues 1
    HBGF(40, random_state=0).fit(labels)  # 5 K > G: dense
    assert len(calls) == 1
    arpack = HBGF(8, eigen_solver="arpack", random_state=0).fit(labels)
    np.testing.assert_array_equal(auto.labels_, arpack.labels_)

    def no_convergence(*a, **kw):
        raise spla.ArpackNoConvergence("no", np.empty(0), np.empty((0, 0)))

    monkeypatch.setattr(spla, "eigsh", no_convergence)
    fallback = HBGF(8, eigen_solver="arpack", random_state=0).fit(labels)
    dense = HBGF(8, eigen_solver="dense", random_state=0).fit(labels)
    np.testing.assert_array_equal(fallback.labels_, dense.labels_)
    np.testing.assert_array_equal(fallback.embedding_, dense.embedding_)
    with pytest.raises(InputError, match="eigen_solver"):
        HBGF(8, eigen_solver="lobpcg").fit(labels)


def test_hbgf_compares_its_starts_on_a_sample_above_kmeans_sample(monkeypatch):
    """Above ``max(KMEANS_SAMPLE, 50 K)`` distinct label rows the ``n_init`` k-means starts run on a uniform
    sample of that many rows and only the best is refined on all: on separated blobs the partition is the one
    the starts on every row give, but for a few points between blobs."""
    import sklearn.cluster

    from ensemble_dask.consensus.baselines import HBGF
    from ensemble_dask.consensus.baselines import _labels as hb

    X, y = make_blobs(3000, centers=6, n_features=5, cluster_std=1.0, random_state=3)
    rng = np.random.default_rng(3)
    labels = np.full((3000, 12), -1, dtype=np.int64)
    for j in range(12):
        rows = np.sort(rng.choice(3000, 1500, replace=False))
        labels[rows, j] = KMeans(int(rng.integers(6, 13)), n_init=1, random_state=j).fit_predict(X[rows])
    distinct = hb._incidence(labels)[0].shape[0]
    fitted_rows = []

    class Recording(sklearn.cluster.KMeans):
        def fit(self, X, y=None, sample_weight=None):
            fitted_rows.append((X.shape[0], self.n_init))
            return super().fit(X, y, sample_weight=sample_weight)

    monkeypatch.setattr(sklearn.cluster, "KMeans", Recording)
    monkeypatch.setattr(hb, "SMALL_KMEANS", 0)  # scikit-learn's k-means at any size (NumPy's below it)
    everywhere = HBGF(6, random_state=0).fit(labels)
    assert fitted_rows == [(distinct, 10)]
    monkeypatch.setattr(hb, "KMEANS_SAMPLE", 400)
    fitted_rows.clear()
    sampled = HBGF(6, random_state=0).fit(labels)
    assert fitted_rows == [(400, 10), (distinct, 1)]
    assert adjusted_rand_score(sampled.labels_, everywhere.labels_) > 0.99
    assert adjusted_rand_score(y, sampled.labels_) > 0.99
    monkeypatch.setattr(hb, "KMEANS_SAMPLE", 10)  # at least 50 rows per cluster
    fitted_rows.clear()
    HBGF(6, random_state=0).fit(labels)
    assert fitted_rows[0] == (300, 10)


@pytest.mark.parametrize("name", LABEL_METHODS[:1] + LABEL_METHODS[2:])
def test_hard_label_baselines_set_the_memberships_outputs(name):
    """HGPA's and HBGF's one-hot memberships give the outputs _set_memberships derives: the argmax as labels,
    entropy 0, the clusters used."""
    from ensemble_dask.consensus._common.base import normalized_entropy

    labels = _many_cluster_labels(300, 6, (3, 6), seed=3)
    m = _make(name, 4).fit(labels)
    np.testing.assert_array_equal(m.labels_, np.argmax(m.memberships_, axis=1))
    assert m.labels_.dtype == np.int64
    np.testing.assert_array_equal(m.uncertainty_, normalized_entropy(m.memberships_))
    assert m.effective_k_ == np.unique(m.labels_).size


def test_normalized_entropy_kernel_matches_the_numpy_expression():
    # one pass without n x K temporaries; the same values as the former NumPy expression to rounding
    from ensemble_dask.consensus._common.base import normalized_entropy

    rng = np.random.default_rng(0)
    Y = rng.dirichlet(np.full(8, 0.05), size=2000)
    Y[:50, 3] = 0.0
    Y[50:60] = 0.0
    Y[60, 2] = np.nan
    Y[61] = np.eye(8)[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.clip(-np.where(Y > 0, Y * np.log(Y), 0.0).sum(axis=1) / np.log(8), 0.0, 1.0)
    np.testing.assert_allclose(normalized_entropy(Y), want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(normalized_entropy(Y[:, ::2].T.copy().T), normalized_entropy(Y[:, ::2]))
    assert normalized_entropy(Y[:, :1]).tolist() == [0.0] * 2000
    assert normalized_entropy(Y.astype(np.float32)).dtype == np.float64


def test_hbgf_incidence_and_gram_kernels_match_the_numpy_forms():
    # present_csr: the CSR of the entries >= 0; weighted_gram_ones: bit-identical to weighted_gram on ones;
    # relabel's table path: the same numbering by first appearance as the sort path
    from ensemble_dask.consensus.baselines import _kernels as bk
    from ensemble_dask.consensus.baselines._pairs import relabel

    rng = np.random.default_rng(1)
    sizes = np.array([3, 5, 2, 4])
    off = np.concatenate([[0], np.cumsum(sizes)])
    g = (rng.integers(0, 100, size=(400, 4)) % sizes + off[:-1]).astype(np.int32)
    g[rng.random(g.shape) < 0.4] = -1
    indptr, indices = bk.present_csr(g)
    np.testing.assert_array_equal(indptr, np.concatenate([[0], np.cumsum((g >= 0).sum(axis=1))]))
    np.testing.assert_array_equal(indices, g[g >= 0])
    assert indices.dtype == np.int32
    w = rng.random(400)
    want = np.zeros((off[-1], off[-1]))
    bk.weighted_gram(indptr, indices, np.ones(indices.size), w, want)
    got = np.zeros_like(want)
    bk.weighted_gram_ones(indptr, indices, w, got)
    np.testing.assert_array_equal(got, want)
    for lab in (rng.integers(0, 7, 500), rng.integers(0, 10**9, 50), np.array([3, 3, 1, -1, 1])):
        _, first, inv = np.unique(lab, return_index=True, return_inverse=True)
        np.testing.assert_array_equal(relabel(lab), np.argsort(np.argsort(first, kind="stable"))[inv])


def test_hbgf_pattern_kernels_match_the_sparse_forms():
    """``lookup_csr`` is ``present_csr`` of the encoded rows (in any order), ``column_sums`` is
    scipy's ``B^T w`` bit for bit, and ``row_embedding`` HBGF's ``(B SV) / sqrt(deg) / sig``, rows of unit
    length."""
    import scipy.sparse as sp

    from ensemble_dask.consensus._common.encoding import encode
    from ensemble_dask.consensus.baselines import _kernels as bk

    rng = np.random.default_rng(3)
    labels = rng.integers(-1, 6, size=(300, 5)).astype(np.int32)
    labels[:4] = -1  # rows of no label: empty CSR rows, a zero embedding
    gidx, enc = encode(labels)
    lut, off = enc.lookup(labels.size)
    rows = rng.choice(300, 120, replace=False).astype(np.int64)  # in any order, as distinct rows come
    indptr, indices = bk.lookup_csr(labels, rows, lut, off)
    want_ptr, want_ind = bk.present_csr(gidx[rows])
    np.testing.assert_array_equal(indptr, want_ptr)
    np.testing.assert_array_equal(indices, want_ind)

    G = enc.n_categories
    B = sp.csr_array((np.ones(indices.size), indices, indptr), shape=(rows.size, G))
    w = rng.random(rows.size)
    np.testing.assert_array_equal(bk.column_sums(indptr, indices, w, G), B.T @ w)
    dx = np.maximum(np.diff(indptr), 1).astype(np.float64)
    for k in (3, 8, 9, 20):  # NumPy sums 8 or more squares pairwise: the kernel too (bit for bit)
        SV, sig = rng.normal(size=(G, k)), rng.uniform(0.5, 1.0, k)
        U = (B @ SV) / np.sqrt(dx)[:, None] / sig[None, :]
        U /= np.maximum(np.linalg.norm(U, axis=1, keepdims=True), 1e-300)
        got = np.empty((rows.size, k))
        bk.row_embedding(indptr, indices, SV, sig, got)
        np.testing.assert_array_equal(got, U)
    for k in list(range(1, 140)) + [255, 256, 300, 1000]:
        V = rng.normal(size=(20, k)) * rng.uniform(0.1, 10.0, size=(20, 1))
        got = np.sqrt([bk.sum_of_squares(v, np.zeros((64, 4))) for v in V])
        np.testing.assert_array_equal(got, np.linalg.norm(V, axis=1), err_msg=f"{k} terms")


@pytest.mark.parametrize("values", ["small", "large"])
def test_hbgf_on_distinct_rows_in_place_is_the_fit_on_their_copy(values):
    """HBGF on the distinct rows where they lie (``rows=``, as ``label_starts`` hands them) is the fit on
    their copy, through the lookup table (small labels) and through the encoded rows (labels too large for a
    table), with either eigen-solver."""
    from ensemble_dask.consensus._common.encoding import compress_rows, distinct_rows
    from ensemble_dask.consensus.baselines import HBGF

    rng = np.random.default_rng(4)
    truth = rng.integers(0, 4, 2000)
    cols = [np.where(rng.random(2000) < 0.85, truth, rng.integers(0, 4, 2000)) for _ in range(8)]
    labels = np.stack(cols, 1)
    labels = np.where(rng.random(labels.shape) < 0.2, -1, labels * (10**8 if values == "large" else 1))
    labels = labels.astype(np.int32)
    first, mult, _ = distinct_rows(labels)
    copy, mult_c, _ = compress_rows(labels)
    assert first is not None and first.size < 2000
    np.testing.assert_array_equal(labels[first], copy)
    for solver in ("dense", "arpack"):
        a = HBGF(4, eigen_solver=solver, random_state=0).fit(copy, sample_weight=mult_c)
        b = HBGF(4, eigen_solver=solver, random_state=0)._fit(labels, mult, distinct=True, rows=first)
        np.testing.assert_array_equal(a.labels_, b.labels_)
        # a start's labels only: its k-means centres the embedding in place, the same labels
        c = HBGF(4, eigen_solver=solver, random_state=0)
        c._fit(labels, mult, distinct=True, labels_only=True, rows=first)
        np.testing.assert_array_equal(a.labels_, c.labels_)
        np.testing.assert_allclose(a.embedding_, b.embedding_, rtol=1e-12, atol=1e-14)


def _subsampled_labels(n):
    """``(truth, labels)``: 4 classes and 20 clusterings of 4 or 8 clusters, each on a random half of the
    ``n`` points (nearly every label row distinct)."""
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 4, n)
    labels = np.empty((n, 20), dtype=np.int32)
    for c in range(20):
        labels[:, c] = np.where(rng.random(n) < 0.9, truth, rng.integers(0, 4, n)) + 4 * (c % 2) * (truth > 1)
        labels[rng.random(n) < 0.5, c] = -1
    return truth, labels


def _traced_peak(fit):
    """``(fit(), the peak of the NumPy memory traced while it ran)``."""
    import tracemalloc

    tracemalloc.start()
    try:
        return fit(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_label_starts_allocate_no_copy_of_the_rows_nor_sparse_data():
    """The pair methods' start on subsampled labels (nearly every row distinct): no copy of the distinct rows,
    no ``n x N`` global indices, no sparse matrix of ones, no ``n x K`` temporaries, and its k-means centres
    the embedding in place (traced NumPy memory 169 bytes a row; 400 with all of them, 201 with the copy of
    the embedding; 200,000 points and 20 clusterings each on half of them)."""
    from ensemble_dask.consensus.starts import label_starts

    n = 200_000
    truth, labels = _subsampled_labels(n)
    label_starts(labels[:5000], 4, random_state=0)  # compiled and imported outside the trace
    (start,), peak = _traced_peak(lambda: label_starts(labels, 4, random_state=0))
    assert adjusted_rand_score(truth, start) > 0.9
    assert peak < 185 * n, f"{peak / n:.0f} bytes a row"


def test_hbgf_fit_builds_no_sparse_matrix_of_ones():
    """HBGF's fit works on the pattern of its incidence matrix (its data would be ones, 8 bytes a present
    label): traced memory 275 bytes a row, against 315 with the matrix (200,000 points, 20 clusterings each
    on half of them)."""
    n = 200_000
    truth, labels = _subsampled_labels(n)
    HBGF(4, random_state=0).fit(labels[:5000])  # compiled and imported outside the trace
    fit, peak = _traced_peak(lambda: HBGF(4, random_state=0).fit(labels))
    assert adjusted_rand_score(truth, fit.labels_) > 0.9
    assert peak < 295 * n, f"{peak / n:.0f} bytes a row"
