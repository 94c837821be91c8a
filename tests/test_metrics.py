import numpy as np
import pytest
from sklearn.metrics import accuracy_score, adjusted_rand_score

from ensemble_dask.metrics import ari, contingency, h_criterion, nmi, partition_scores


def test_h_hand_computed():
    # P = {0,1,2 | 3,4 | 5}, Q = {0,1 | 2,3,4 | 5}: best matching 2 + 2 + 1 = 5 of 6
    assert h_criterion([0, 0, 0, 1, 1, 2], [0, 0, 1, 1, 1, 2]) == pytest.approx(5 / 6)


def test_h_pads_with_empty_clusters():
    # two predicted clusters against three classes: the third class is unmatched
    assert h_criterion([0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 2, 2]) == pytest.approx(4 / 6)


def test_h_equals_accuracy_under_the_true_permutation():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 500)
    perm = np.array([2, 0, 3, 1])
    pred = perm[y]
    flip = rng.random(500) < 0.1
    pred[flip] = rng.integers(0, 4, flip.sum())
    inv = np.argsort(perm)
    assert h_criterion(pred, y) >= accuracy_score(y, inv[pred]) - 1e-12


def test_absent_points_are_ignored():
    pred = np.array([0, 0, -1, 1, 1, -1])
    true = np.array([5, 5, 9, 7, 7, 9])
    assert h_criterion(pred, true) == 1.0
    assert ari(pred, true) == 1.0
    assert nmi(pred, true) == pytest.approx(1.0)
    assert contingency(pred, true).sum() == 4


def test_agrees_with_sklearn():
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 3, 200), rng.integers(0, 4, 200)
    s = partition_scores(a, b)
    assert s["ARI"] == pytest.approx(adjusted_rand_score(b, a))
    assert set(s) == {"H", "ARI", "NMI"}


def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="same length"):
        h_criterion([0, 1], [0, 1, 2])
