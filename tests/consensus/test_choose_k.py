"""Choosing K with the graph consensus: Genie's one sequence of merges, the criteria, the range of K."""

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from ensemble_dask._validation import InputError
from ensemble_dask.consensus import GraphConsensus
from ensemble_dask.consensus._common.krange import auto_k_max, k_range, largest_k
from ensemble_dask.consensus.graph import _choose_k


def _fine_labels(X, n_clusterings, seed, k_low=10):
    """k-means of half the rows with k in [k_low, sqrt(n)], every row by its nearest centre (as ``generate``
    draws the graph method's ensemble)."""
    rng = np.random.default_rng(seed)
    n = len(X)
    L = np.empty((n, n_clusterings), dtype=np.int32)
    for t in range(n_clusterings):
        rows = rng.choice(n, n // 2, replace=False)
        k = int(rng.integers(k_low, int(np.sqrt(n)) + 1))
        L[:, t] = KMeans(k, n_init=1, random_state=t).fit(X[rows]).predict(X)
    return L


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(500, centers=[[0, 0], [10, 0], [0, 10], [10, 10]], cluster_std=1.0, random_state=0)
    return X, y, _fine_labels(X, 20, 0)


def test_criteria_by_hand():
    co = np.array([0.0, 0.1, 0.15, 0.5, 0.9, 0.95, 1.0])
    assert _choose_k.pac(co) == pytest.approx(3 / 7)  # (0.1, 0.9]: 0.15, 0.5, 0.9
    cdf = _choose_k.consensus_cdf(co, np.array([0.0, 0.5, 1.0]))
    assert cdf == pytest.approx([1 / 7, 4 / 7, 1.0])
    a, b = np.array([0, 0, 1, 1, 2, 2]), np.array([1, 1, 0, 0, 0, 2])
    assert _choose_k._ari(a, b) == pytest.approx(adjusted_rand_score(a, b))
    assert _choose_k._ari(a, a[::-1]) == pytest.approx(adjusted_rand_score(a, a[::-1]))
    scores = {
        2: {"pac": 0.1, "eigengap": 0.2},
        3: {"pac": 0.1, "eigengap": 0.5},
        4: {"pac": 0.3, "eigengap": 0.5},
    }
    assert _choose_k.best_k(scores, "eigengap")[0] == 3  # the smaller K on a tie
    K, why = _choose_k.best_k(scores, "pac")  # the largest K as reproducible as the best
    assert K == 3 and "pac (smallest; the largest K within 0.01 of the best wins) 0.1 at K=3" in why
    scores[4]["pac"] = 0.105
    assert _choose_k.best_k(scores, "pac")[0] == 4
    stab = {2: {"stability": 1.0}, 3: {"stability": 0.995}, 4: {"stability": 0.9}}
    assert _choose_k.best_k(stab, "stability") == (
        3,
        "stability (largest; the largest K within 0.01 of the best wins) 0.995 at K=3; next 1 at K=2",
    )


def test_k_ranges_are_checked_and_named():
    assert (
        k_range("auto", 150) == (2, 10) and k_range("auto", 10**6) == (2, 30) and k_range("auto", 5) == (2, 4)
    )
    assert auto_k_max(160_000) == 30 and auto_k_max(4_000) == 15
    assert k_range([3, 8]) == (3, 8) and k_range("2:20") == (2, 20) and k_range((4, 4), 5) == (4, 4)
    assert (
        largest_k("auto", 150) == 10
        and largest_k([2, 7]) == 7
        and largest_k(5) == 5
        and largest_k(None) is None
    )
    for bad in ([1, 5], [5, 3], [2], "two", "2:x", [2.0, 5], (True, 3)):
        with pytest.raises(
            InputError, match=r"'n_clusters' parameter must be an integer >= 2, 'auto' or a range"
        ):
            k_range(bad)
    with pytest.raises(InputError, match=r"k_max must be <= n_samples - 1 = 9; got \[2, 10\]"):
        k_range([2, 10], 10)


def test_the_graph_consensus_chooses_k_on_blobs(blobs):
    X, y, L = blobs
    est = GraphConsensus((2, 8), random_state=0).fit(L, X)
    assert est.n_clusters_ == 4 and est.memberships_.shape == (500, 4)
    assert adjusted_rand_score(y, est.labels_) > 0.95
    assert sorted(est.k_scores_) == list(range(2, 9))
    for K, s in est.k_scores_.items():
        assert set(s) == {*_choose_k.CRITERIA, "candidate", "cut"}
        assert 0 <= s["pac"] <= 1 and -1 <= s["stability"] <= 1 and s["candidate"] in est.cuts_ or K != 4
        assert len(est.k_cdf_[K]) == len(_choose_k.CDF_GRID) and est.k_cdf_[K][-1] == 1.0
    assert f"K={est.n_clusters_}" in est.k_reason_
    # the partition kept at the K chosen is the graph consensus at that K
    fixed = GraphConsensus(4, random_state=0).fit(L, X)
    assert adjusted_rand_score(fixed.labels_, est.labels_) > 0.99
    # a refit at one K drops the scores of the range
    est.set_params(n_clusters=3).fit(L, X)
    assert est.n_clusters_ == 3 and not hasattr(est, "k_scores_")


@pytest.mark.parametrize("criterion", list(_choose_k.CRITERIA))
def test_each_criterion_chooses_within_the_range_and_is_seeded(blobs, criterion):
    X, y, L = blobs
    est = GraphConsensus([3, 6], k_criterion=criterion, n_resamples=3, random_state=1).fit(L, X)
    assert 3 <= est.n_clusters_ <= 6 and est.n_clusters_ == _choose_k.best_k(est.k_scores_, criterion)[0]
    again = GraphConsensus([3, 6], k_criterion=criterion, n_resamples=3, random_state=1).fit(L, X)
    assert again.k_scores_ == est.k_scores_ and np.array_equal(again.labels_, est.labels_)


def test_edge_cases_of_a_range(blobs):
    X, y, L = blobs
    one = GraphConsensus([4, 4], random_state=0).fit(L, X)
    assert one.n_clusters_ == 4 and list(one.k_scores_) == [4] and "only K" in one.k_reason_
    small = GraphConsensus("auto", sample_size=40, random_state=0).fit(L, X)  # auto: [2, 10] at 500 rows
    assert sorted(small.k_scores_) == list(range(2, 11)) and len(small.sample_) == 40
    with pytest.raises(InputError, match="k_max must be <= n_samples - 1 = 39"):
        GraphConsensus([2, 45], sample_size=40).fit(L, X)
    with pytest.raises(InputError, match="at least 2; got 1"):
        GraphConsensus([2, 5], random_state=0).fit(L[:, :1], X)
    with pytest.raises(InputError, match="'k_criterion' parameter of GraphConsensus"):
        GraphConsensus([2, 5], k_criterion="gap").fit(L, X)
    with pytest.raises(InputError, match="'n_clusters' parameter of GraphConsensus"):
        GraphConsensus("many").fit(L, X)


def test_the_spectral_candidate_is_cut_at_the_k_chosen_only(blobs):
    X, y, L = blobs
    est = GraphConsensus((2, 6), random_state=0).fit(L, X)
    K = est.n_clusters_
    assert set(est.cuts_) == {"genie-ca", "genie-weighted", "spectral"}  # at K: every candidate compared
    assert est.cuts_[est.candidate_] == min(est.cuts_.values()) == est.k_scores_[K]["cut"]
    assert all(est.k_scores_[k]["candidate"] != "spectral" for k in est.k_scores_ if k != K)
    alone = GraphConsensus((2, 6), candidates=["spectral"], random_state=0).fit(L, X)
    assert alone.candidate_ == "spectral" and alone.k_scores_[alone.n_clusters_]["candidate"] == "spectral"
    assert all(alone.k_scores_[k]["candidate"] is None for k in alone.k_scores_ if k != alone.n_clusters_)
