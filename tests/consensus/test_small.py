"""The small inputs' k-means and nearest neighbours (no scikit-learn import), against scikit-learn's, and the
scores without it against scikit-learn's and scipy.optimize's (issue 60, item 4)."""

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.neighbors import NearestNeighbors

from ensemble_dask import metrics
from ensemble_dask.consensus._common.small import kmeans
from ensemble_dask.consensus.graph import _kernels as graph_kernels


def _inertia(U, labels, w):
    centres = np.stack(
        [np.average(U[labels == c], axis=0, weights=w[labels == c]) for c in np.unique(labels)]
    )
    return float(w @ ((U - centres[np.unique(labels, return_inverse=True)[1]]) ** 2).sum(axis=1))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_kmeans_finds_scikit_learn_s_partition_or_a_better_one(seed, weighted):
    U, _ = make_blobs(600, centers=5, n_features=3, cluster_std=1.5, random_state=seed)
    w = np.random.default_rng(seed).uniform(0.5, 2.0, 600) if weighted else np.ones(600)
    ours = kmeans(U, 5, n_init=10, seed=seed, sample_weight=w if weighted else None)
    theirs = KMeans(5, n_init=10, random_state=seed).fit_predict(U, sample_weight=w)
    assert ours.dtype == np.int64 and set(ours) == set(range(5))
    assert (
        _inertia(U, ours, w) <= _inertia(U, theirs, w) * (1 + 1e-9) or adjusted_rand_score(ours, theirs) == 1
    )


def test_kmeans_on_rows_that_coincide():
    """More clusters than distinct rows: each distinct row a cluster, the rest filled by emptied clusters'
    relocations, never an error or a NaN centre."""
    U = np.repeat(np.array([[0.0, 0.0], [1.0, 1.0], [5.0, 5.0]]), 4, axis=0)
    labels = kmeans(U, 3, seed=0)
    assert adjusted_rand_score(np.repeat([0, 1, 2], 4), labels) == 1.0
    assert set(kmeans(np.zeros((6, 2)), 2, seed=0)) <= {0, 1}


def test_nearest_is_scikit_learn_s_neighbours_ties_by_index():
    X, _ = make_blobs(700, centers=4, n_features=3, random_state=0)
    X = np.round(X, 1)  # rows at the same distance: many
    dist, ind = np.empty((700, 9)), np.empty((700, 9), dtype=np.int64)
    graph_kernels.nearest(X, X, dist, ind)
    d_sk, i_sk = NearestNeighbors(n_neighbors=9).fit(X).kneighbors(X)
    np.testing.assert_allclose(dist, d_sk, rtol=1e-12, atol=1e-12)
    squared = ((X[ind] - X[:, None, :]) ** 2).sum(axis=2)
    np.testing.assert_array_equal(dist, np.sqrt(squared))  # the distances of the rows it names
    assert (np.diff(squared, axis=1) >= 0).all()
    same = squared[:, 1:] == squared[:, :-1]
    assert same.any() and (ind[:, 1:][same] > ind[:, :-1][same]).all()  # a tie: the lower index first


def test_the_graph_consensus_on_a_small_sample_is_the_one_scikit_learn_gives(monkeypatch):
    """The same candidates and partition with NumPy's k-means and the kernel's neighbours (small) as with
    scikit-learn's (forced by thresholds of 0)."""
    from ensemble_dask.consensus import GraphConsensus
    from ensemble_dask.consensus._common import small as small_module
    from ensemble_dask.consensus.graph import _graph

    X, y = make_blobs(800, centers=4, n_features=4, cluster_std=1.2, random_state=2)
    rng = np.random.default_rng(2)
    L = np.stack(
        [KMeans(int(rng.integers(4, 20)), n_init=1, random_state=t).fit_predict(X) for t in range(15)], 1
    )
    small = GraphConsensus(4, random_state=0).fit(L, X)
    monkeypatch.setattr(_graph, "SMALL_SEARCH", 0)
    monkeypatch.setattr(small_module, "SMALL_KMEANS", 0)  # (read when the spectral candidate runs)
    large = GraphConsensus(4, random_state=0).fit(L, X)
    assert adjusted_rand_score(small.labels_, large.labels_) == 1.0
    assert small.cuts_ == pytest.approx(large.cuts_)
    assert adjusted_rand_score(y, small.labels_) > 0.95


@pytest.mark.parametrize("seed", range(5))
def test_scores_without_scikit_learn_are_its_scores(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    pred, true = rng.integers(-1, rng.integers(1, 9), n), rng.integers(0, rng.integers(1, 6), n)
    got = metrics.partition_scores(pred, true)
    keep = pred >= 0
    if not keep.any():
        assert all(np.isnan(v) for v in got.values())
        return
    assert got["ARI"] == pytest.approx(adjusted_rand_score(true[keep], pred[keep]), abs=1e-12)
    assert got["NMI"] == pytest.approx(normalized_mutual_info_score(true[keep], pred[keep]), abs=1e-12)
    table = metrics.contingency(pred, true)
    r, c = linear_sum_assignment(table, maximize=True)
    assert got["H"] == pytest.approx(table[r, c].sum() / keep.sum(), abs=1e-15)


def test_the_best_matching_is_scipy_optimize_s_total():
    rng = np.random.default_rng(0)
    for _ in range(500):
        table = rng.integers(0, int(rng.integers(1, 40)), tuple(rng.integers(1, 9, 2)))
        rows, cols = metrics._max_assignment(table)
        r, c = linear_sum_assignment(table, maximize=True)
        assert table[rows, cols].sum() == table[r, c].sum()
        assert len(set(rows)) == len(set(cols)) == min(table.shape) == len(rows)
