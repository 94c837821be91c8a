"""The graph consensus: Genie on a spanning tree, the sparse co-association graph, base clusters' votes."""

import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial.distance import pdist, squareform
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs, make_moons
from sklearn.metrics import adjusted_rand_score

from ensemble_dask._validation import InputError
from ensemble_dask.consensus import GraphConsensus
from ensemble_dask.consensus.graph import _kernels as kernels


def _tree(X):
    T = minimum_spanning_tree(squareform(pdist(X))).tocoo()
    order = np.argsort(T.data, kind="stable")
    return T.row[order].astype(np.int64), T.col[order].astype(np.int64)


@pytest.mark.parametrize("K", [2, 3, 6])
def test_genie_of_threshold_one_is_single_linkage(K):
    X = np.random.default_rng(K).normal(size=(120, 2))
    u, v = _tree(X)
    single = fcluster(linkage(X, "single"), K, criterion="maxclust")
    assert adjusted_rand_score(single, kernels.genie(u, v, len(X), K, 1.0)) == 1.0


@pytest.mark.parametrize("threshold", [0.3, 1.0])
def test_one_sequence_of_merges_cut_at_each_k_is_genie_at_that_k(threshold):
    """Genie's choice at each merge does not depend on K: one sequence, cut at any K, is Genie at K."""
    u, v = _tree(np.random.default_rng(0).normal(size=(80, 2)))
    merges = kernels.genie_merges(u, v, 80, 1, threshold)
    assert len(merges) == 79 and len(np.unique(merges)) == 79
    for K in (1, 2, 3, 7, 30, 80):
        assert np.array_equal(kernels.cut(u, v, merges[: 80 - K], 80), kernels.genie(u, v, 80, K, threshold))


def test_genie_joins_an_outlier_that_single_linkage_leaves_alone():
    """Two groups of 10 points 5 apart and one point 12 beyond the second: single linkage's two clusters are
    the outlier and the rest; at three clusters of sizes 10, 10 and 1 the Gini index is 18 / 42 > 0.3, so
    Genie joins the outlier to its group and splits the groups."""
    x = np.r_[np.arange(10.0), 14 + np.arange(10.0), 35.0][:, None]
    u, v = _tree(x)
    assert np.bincount(kernels.genie(u, v, len(x), 2, 1.0)).tolist() == [20, 1]
    z = kernels.genie(u, v, len(x), 2, 0.3)
    assert z[:10].tolist() == [z[0]] * 10 and z[10:].tolist() == [z[10]] * 11 and z[0] != z[10]


def test_genie_on_a_forest_stops_at_its_trees():
    u, v = np.array([0, 2], dtype=np.int64), np.array([1, 3], dtype=np.int64)  # 5 points, 3 trees
    assert len(np.unique(kernels.genie(u, v, 5, 2, 0.3))) == 3


def _fine_labels(X, n_clusterings, seed):
    """k-means of half the rows with k up to sqrt(n), every row by its nearest centre."""
    rng = np.random.default_rng(seed)
    n = len(X)
    L = np.empty((n, n_clusterings), dtype=np.int32)
    for t in range(n_clusterings):
        rows = rng.choice(n, n // 2, replace=False)
        km = KMeans(int(rng.integers(2, int(np.sqrt(n)) + 1)), n_init=1, random_state=t).fit(X[rows])
        L[:, t] = km.predict(X)
    return L


@pytest.fixture(scope="module")
def moons():
    X, y = make_moons(600, noise=0.06, random_state=0)
    return X, y, _fine_labels(X, 20, 0)


def test_a_graph_consensus_of_small_clusters_finds_the_moons(moons):
    """k-means with k = 2 cuts each moon in half (ARI about 0.5); the small clusters' graph does not."""
    X, y, L = moons
    est = GraphConsensus(2, random_state=0).fit(L, X)
    assert adjusted_rand_score(y, est.labels_) > 0.95
    assert adjusted_rand_score(y, KMeans(2, n_init=10, random_state=0).fit_predict(X)) < 0.6
    assert est.candidate_ in est.cuts_ and est.cuts_[est.candidate_] == min(est.cuts_.values())
    np.testing.assert_allclose(est.memberships_.sum(axis=1), 1.0)
    assert np.array_equal(est.labels_, est.memberships_.argmax(axis=1))
    assert ((est.uncertainty_ >= 0) & (est.uncertainty_ <= 1)).all()
    same = GraphConsensus(2, random_state=0).fit(L, X)
    assert np.array_equal(same.labels_, est.labels_) and np.array_equal(same.memberships_, est.memberships_)


@pytest.mark.parametrize("candidate", ["genie-ca", "genie-weighted", "spectral"])
def test_each_candidate_alone(moons, candidate):
    X, y, L = moons
    est = GraphConsensus(2, candidates=[candidate], random_state=0).fit(L, X)
    assert est.candidate_ == candidate and list(est.cuts_) == [candidate]
    assert adjusted_rand_score(y, est.labels_) > 0.9


def test_the_spectral_candidate_is_left_out_for_many_clusters(moons):
    """Above ``spectral_max_clusters`` the spectral candidate is not computed while another remains (its
    leading eigenvalues crowd near 1 and Lanczos's answer depends on its start); asked for alone, or with no
    limit, it is; the Genie candidates give the same partition either way."""
    X, y, L = moons
    capped = GraphConsensus(3, spectral_max_clusters=2, random_state=0).fit(L, X)
    assert set(capped.cuts_) == {"genie-ca", "genie-weighted"}
    free = GraphConsensus(3, spectral_max_clusters=None, random_state=0).fit(L, X)
    assert set(free.cuts_) == {"genie-ca", "genie-weighted", "spectral"}
    for name in capped.cuts_:
        assert capped.cuts_[name] == free.cuts_[name]
    alone = GraphConsensus(3, candidates=["spectral"], spectral_max_clusters=2, random_state=0).fit(L, X)
    assert list(alone.cuts_) == ["spectral"]
    assert set(GraphConsensus(2, spectral_max_clusters=2, random_state=0).fit(L, X).cuts_) == set(free.cuts_)
    with pytest.raises(InputError, match="spectral_max_clusters"):
        GraphConsensus(3, spectral_max_clusters=0).fit(L, X)


def test_rows_out_of_the_sample_and_new_rows_get_their_base_clusters_votes(moons):
    X, y, L = moons
    est = GraphConsensus(2, sample_size=200, random_state=0).fit(L, X)
    assert len(est.sample_) == 200 and len(np.unique(est.sample_)) == 200
    out = np.setdiff1d(np.arange(len(X)), est.sample_)
    np.testing.assert_allclose(est.memberships_[out], est.transform(L[out]))
    assert np.array_equal(est.predict(L[out]), est.labels_[out])
    assert adjusted_rand_score(y, est.labels_) > 0.9
    # a base cluster the sample never saw, and a row absent everywhere, do not vote: uniform
    unseen = np.full((1, L.shape[1]), -1, dtype=np.int32)
    np.testing.assert_allclose(est.transform(unseen), [[0.5, 0.5]])


def test_votes_by_hand():
    """Two base clusterings; the consensus labels of the fit's rows make each base cluster's table."""
    L = np.array([[0, 0], [0, 1], [1, 1], [1, 1]], dtype=np.int32)
    z = np.array([0, 0, 1, 1])
    est = GraphConsensus(2)
    est._tables(L, z, L.max(axis=0) + 1, 2)
    # clustering 0: cluster 0 = rows 0, 1 (labels 0, 0); cluster 1 = rows 2, 3 (1, 1)
    # clustering 1: cluster 0 = row 0 (0); cluster 1 = rows 1, 2, 3 (0, 1, 1)
    np.testing.assert_allclose(est.tables_, [[1, 0], [0, 1], [1, 0], [1 / 3, 2 / 3]])
    np.testing.assert_allclose(est.transform(L)[1], [(1 + 1 / 3) / 2, (0 + 2 / 3) / 2])
    np.testing.assert_allclose(est.transform(np.array([[1, -1]]))[0], [0, 1])


@pytest.mark.parametrize("candidate", ["genie-ca", "genie-weighted", "spectral"])
def test_a_disconnected_neighbour_graph_is_joined(candidate):
    """Three blobs far apart and two pairs of points farther still: each row's 5 neighbours stay in its
    group, so the neighbour graph has five components for K = 3. The joined graph's spanning tree spans,
    and the spectral embedding is that of a connected graph (with the components' indicators, eigenvalue 1
    five times, an eigensolver returns any 3 of them)."""
    X, y = make_blobs(300, centers=[[0, 0], [100, 0], [0, 100]], random_state=0)
    X = np.r_[X, [[0, -30], [0.5, -30], [130, 0], [130, 0.5]]]
    nearest = [y[np.argmin(np.linalg.norm(X[:300] - p, axis=1))] for p in ([0, -30], [130, 0])]
    y = np.r_[y, np.repeat(nearest, 2)]  # a pair belongs to its nearest blob
    L = _fine_labels(X, 10, 1)
    est = GraphConsensus(3, n_neighbors=5, candidates=[candidate], random_state=0).fit(L, X)
    assert adjusted_rand_score(y, est.labels_) == 1.0


def test_bad_input_is_named(moons):
    X, _, L = moons
    with pytest.raises(InputError, match="X must be a 2-d array of the labels' 600 rows"):
        GraphConsensus(2).fit(L, X[:10])
    with pytest.raises(InputError, match="finite"):
        GraphConsensus(2).fit(L, np.where(np.arange(600)[:, None] == 3, np.nan, X))
    with pytest.raises(InputError, match="'candidates' parameter of GraphConsensus"):
        GraphConsensus(2, candidates=["genie"]).fit(L, X)
    with pytest.raises(InputError, match="'gini_threshold' parameter of GraphConsensus"):
        GraphConsensus(2, gini_threshold=1.5).fit(L, X)
    with pytest.raises(InputError, match="the fitted ensemble's 20 columns"):
        GraphConsensus(2, random_state=0).fit(L, X).transform(L[:, :3])


def test_as_many_clusters_as_rows_less_one():
    X = np.array([[0.0, 0], [0, 1], [5, 5], [9, 0]])
    L = np.array([[0, 0], [0, 1], [1, 2], [2, 3]], dtype=np.int32)
    for candidate in ("genie-ca", "spectral"):
        est = GraphConsensus(3, candidates=[candidate], random_state=0).fit(L, X)
        assert len(np.unique(est.labels_)) == 3
