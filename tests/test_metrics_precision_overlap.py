"""Micro-precision, R_n, the JS criterion, cluster overlap and soft centroids."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon
from sklearn.metrics import adjusted_rand_score

from ensemble_dask import InputError
from ensemble_dask.metrics import (
    cluster_overlap,
    js_criterion,
    js_divergence,
    micro_precision,
    normalized_rand,
    soft_centroids,
)


def _soft(rng, n, k, alpha=0.5):
    return rng.dirichlet(np.full(k, alpha), size=n)


# --------------------------------------------------------------------------- micro-precision


def test_micro_precision_hand_computed():
    # clusters {0,1,2} -> class 0 (2 right), {3,4} -> class 1 (2 right), {5} -> class 1 (1 right)
    assert micro_precision([0, 0, 0, 1, 1, 2], [0, 0, 1, 1, 1, 1]) == pytest.approx(5 / 6)


def test_micro_precision_is_many_to_one_unlike_h():
    # two clusters both mostly class 0: MP counts both majorities, H can match only one
    pred, true = [0, 0, 0, 1, 1, 1], [0, 0, 1, 0, 0, 1]
    assert micro_precision(pred, true) == pytest.approx(4 / 6)
    # every point its own cluster: perfect micro-precision
    assert micro_precision(np.arange(6), true) == 1.0


def test_micro_precision_ignores_absent_points():
    assert micro_precision([0, -1, 1, 1, -1], [3, 4, 5, 5, 3]) == 1.0
    assert np.isnan(micro_precision([-1, -1], [0, 1]))


# --------------------------------------------------------------------------- R_n


def test_normalized_rand_hand_computed():
    # table [[2, 1], [0, 3]]: S_ij = 1 + 0 + 0 + 3 = 4, S_i = 3 + 3 = 6, S_j = 1 + 6 = 7, C(6,2) = 15
    # R_n = (8 - 2*6*7/15) / (6 + 7 - 2*6*7/15) = (8 - 5.6) / (13 - 5.6)
    assert normalized_rand([0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1]) == pytest.approx(2.4 / 7.4)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3)), min_size=2, max_size=60),
)
def test_normalized_rand_equals_sklearn_ari(pairs):
    pred, true = np.array(pairs).T
    assert normalized_rand(pred, true) == pytest.approx(adjusted_rand_score(true, pred), abs=1e-12)


# --------------------------------------------------------------------------- JS


def test_js_divergence_matches_scipy():
    rng = np.random.default_rng(0)
    p, q = _soft(rng, 50, 5), _soft(rng, 50, 5)
    ref = np.array([jensenshannon(a, b, base=2) ** 2 for a, b in zip(p, q, strict=True)])
    np.testing.assert_allclose(js_divergence(p, q), ref, atol=1e-12)


def test_js_divergence_bounds_and_zero_entries():
    assert js_divergence([1.0, 0.0, 0.0], [0.0, 0.5, 0.5]) == pytest.approx(1.0)
    assert js_divergence([0.25, 0.75], [0.25, 0.75]) == 0.0


def test_js_criterion_is_zero_for_a_relabelled_copy():
    rng = np.random.default_rng(1)
    Z = _soft(rng, 40, 4)
    perm = np.array([2, 0, 3, 1])
    value, matched = js_criterion(Z[:, perm], Z, return_permutation=True)
    assert value == pytest.approx(0.0, abs=1e-14)
    np.testing.assert_array_equal(perm[matched], np.arange(4))


def test_js_criterion_equals_brute_force_over_permutations():
    rng = np.random.default_rng(2)
    Y, Z = _soft(rng, 30, 4), _soft(rng, 30, 4)
    best = min(js_divergence(Z, Y[:, list(p)]).mean() for p in itertools.permutations(range(4)))
    assert js_criterion(Y, Z) == pytest.approx(best, abs=1e-12)


def test_js_criterion_pads_the_smaller_partition():
    rng = np.random.default_rng(3)
    Z = _soft(rng, 25, 3)
    Y = np.zeros((25, 6))
    Y[:, [4, 1, 5]] = Z
    assert js_criterion(Y, Z) == pytest.approx(0.0, abs=1e-14)
    assert js_criterion(Z, Y) == pytest.approx(0.0, abs=1e-14)
    v = js_criterion(_soft(rng, 25, 6), Z)
    assert 0.0 < v <= 1.0


def test_js_criterion_rejects_non_stochastic_rows():
    with pytest.raises(InputError, match="row 1 sums to 0.5"):
        js_criterion([[1.0, 0.0], [0.25, 0.25]], [[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(InputError, match="same number of rows"):
        js_criterion([[1.0]], [[1.0], [1.0]])


# --------------------------------------------------------------------------- overlap, centroids


def test_cluster_overlap_hand_computed():
    Y = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 1.0, 0.0]])
    m = cluster_overlap(Y)
    # mass: 1.5, 1.5, 0; Y^T Y = [[1.25, .25, 0], [.25, 1.25, 0], [0, 0, 0]]
    np.testing.assert_allclose(m, [[1.25 / 1.5, 0.25 / 1.5, 0], [0.25 / 1.5, 1.25 / 1.5, 0], [0, 0, 0]])


def test_cluster_overlap_rows_sum_to_one_and_threshold_removes_small_entries():
    rng = np.random.default_rng(4)
    Y = _soft(rng, 100, 5)
    m = cluster_overlap(Y)
    np.testing.assert_allclose(m.sum(axis=1), 1.0)  # sum_j y_xj = 1 for every point x
    Y = np.array([[0.95, 0.05], [0.05, 0.95], [0.6, 0.4]])
    m = cluster_overlap(Y, threshold=0.1)
    # after dropping the 0.05 entries: rows (1, 0), (0, 1), (.6, .4)
    np.testing.assert_allclose(m[0], [(1 + 0.36) / 1.6, 0.24 / 1.6])
    with pytest.raises(InputError, match="threshold"):
        cluster_overlap(Y, threshold=1.5)


def test_soft_centroids_hard_memberships_give_class_means():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 3))
    labels = rng.integers(0, 4, 60)
    Y = np.eye(4)[labels]
    mu = soft_centroids(Y, X)
    for k in range(4):
        np.testing.assert_allclose(mu[k], X[labels == k].mean(axis=0))


def test_soft_centroids_hand_computed_and_threshold():
    X = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 8.0]])
    Y = np.array([[1.0, 0.0], [0.5, 0.5], [0.1, 0.9]])
    mu = soft_centroids(Y, X)
    np.testing.assert_allclose(mu[0], [2.0 / 1.6, 0.8 / 1.6])
    np.testing.assert_allclose(mu[1], [2.0 / 1.4, 7.2 / 1.4])
    mu = soft_centroids(Y, X, threshold=0.2)  # drops the 0.1 entry: row 2 becomes (0, 1)
    np.testing.assert_allclose(mu[0], [2.0 / 1.5, 0.0])
    with pytest.raises(InputError, match="3 rows"):
        soft_centroids(Y, X[:2])
