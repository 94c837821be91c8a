import numpy as np
import pytest

from ensemble_dask import InputError, PairCounts, dense_coassociation


def brute(labels):
    n, nc = labels.shape
    co = np.zeros((n, n), int)
    both = np.zeros((n, n), int)
    for i in range(n):
        for j in range(n):
            for u in range(nc):
                if labels[i, u] >= 0 and labels[j, u] >= 0:
                    both[i, j] += 1
                    co[i, j] += labels[i, u] == labels[j, u]
    return co, both


def test_dense_matches_brute_force():
    rng = np.random.default_rng(0)
    labels = rng.integers(-1, 4, size=(30, 7))
    co, both = dense_coassociation(labels)
    bco, bboth = brute(labels)
    np.testing.assert_array_equal(co, bco)
    np.testing.assert_array_equal(both, bboth)


def test_paircounts_roundtrip_dense():
    rng = np.random.default_rng(1)
    labels = rng.integers(-1, 3, size=(12, 5))
    co, both = dense_coassociation(labels)
    pc = PairCounts.from_dense(co, both, 5, keep_zero_both=True)
    assert pc.n == 12 and pc.n_pairs == 66
    c2, b2 = pc.to_dense()
    off = ~np.eye(12, dtype=bool)
    np.testing.assert_array_equal(c2[off], co[off])
    np.testing.assert_array_equal(b2[off], both[off])
    assert (c2 == c2.T).all()


def test_bad_labels():
    with pytest.raises(InputError, match="-2 at row 1, column 0"):
        dense_coassociation([[0, 1], [-2, 0]])
    with pytest.raises(InputError, match="integer cluster ids; got 0.5"):
        dense_coassociation([[0.0, 0.5]])


def test_observed_drops_pairs_never_co_present():
    labels = np.array([[0, -1], [-1, 0], [0, 0], [1, 0]])
    co, both = dense_coassociation(labels)
    pc = PairCounts.from_dense(co, both, 2, keep_zero_both=True)
    obs = pc.observed()
    assert pc.n_pairs == 6 and obs.n_pairs == 5
    assert (obs.both > 0).all()
    c2, b2 = obs.to_dense()
    np.testing.assert_array_equal(b2[~np.eye(4, dtype=bool)], both[~np.eye(4, dtype=bool)])
