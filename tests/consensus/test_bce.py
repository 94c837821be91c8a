"""Tests of BCE / GBCE / MM in memory (Wang et al. 2011 Sect. 4-7)."""

from __future__ import annotations

import contextlib
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import digamma, gammaln, polygamma
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning

from ensemble_dask import InputError
from ensemble_dask.consensus._common.encoding import compress_rows
from ensemble_dask.consensus.bce import BCE, GBCE, MM, EmptyRowsWarning, UnseenLabelsWarning
from ensemble_dask.consensus.bce import _kernels as kern
from ensemble_dask.consensus.bce import _seed_kernels as seed_kern
from ensemble_dask.consensus.bce._digamma import _DIGAMMA_SMALL
from ensemble_dask.consensus.bce._em import encode_labels, label_categories, update_alpha
from ensemble_dask.consensus.bce._seeding import seed_partition, seeded_alpha, seeded_beta
from ensemble_dask.metrics import micro_precision

UCI = Path(__file__).resolve().parents[1] / "data" / "uci"  # tests/data/README.md: provenance, licence


def load_uci(name):
    X = np.loadtxt(UCI / f"{name}.data.gz")
    y = np.loadtxt(UCI / f"{name}.labels0.gz").astype(int)
    return X, y


def kmeans_labels(X, k, n, seed0=0):
    return np.column_stack(
        [KMeans(k, n_init=1, init="random", random_state=seed0 + s).fit_predict(X) for s in range(n)]
    ).astype(np.int32)


@pytest.fixture(scope="module")
def iris_labels():
    X, y = load_uci("iris")
    return kmeans_labels(X, 3, 20), y


def random_labels(rng, n, N, kmax=4, missing=0.2, k_true=3):
    """Noisy copies of a planted partition, with missing entries and arbitrary label values."""
    truth = rng.integers(0, k_true, n)
    L = np.empty((n, N), dtype=np.int64)
    for j in range(N):
        kj = rng.integers(2, kmax + 1)
        perm = rng.permutation(max(kj, k_true))[:k_true] % kj
        col = perm[truth]
        flip = rng.random(n) < 0.15
        col[flip] = rng.integers(0, kj, flip.sum())
        L[:, j] = col * 3 + 11  # arbitrary non-negative ids
    L[rng.random((n, N)) < missing] = -1
    return L, truth


@contextlib.contextmanager
def quiet(*categories):
    with warnings.catch_warnings():
        for c in categories:
            warnings.simplefilter("ignore", c)
        yield


# --------------------------------------------------------------------------- kernels


def test_digamma_kernel_matches_scipy():
    xs = np.concatenate([np.geomspace(1e-6, 1e4, 200), [0.5, 1.0, 5.999, 6.0, 6.001]])
    got = np.array([kern.digamma(x) for x in xs])
    np.testing.assert_allclose(got, digamma(xs), rtol=1e-13, atol=1e-12)


def test_digamma_kernel_matches_the_one_step_recurrence():
    # the kernel takes two recurrence steps per division; the same values as one step at a time to rounding
    def one_step(x):
        r = 0.0
        while x < 10.0:
            r -= 1.0 / x
            x += 1.0
        inv2 = 1.0 / (x * x)
        series = 1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 / 132)))
        return r + math.log(x) - 0.5 / x - inv2 * series

    xs = np.concatenate([np.geomspace(1e-8, 30, 500), np.arange(0.25, 12, 0.25)])
    got = np.array([kern.digamma(x) for x in xs])
    want = np.array([one_step(x) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


def test_digamma_kernel_near_zero_is_exact_to_rounding():
    # below 1e-2 the kernel takes the series of Psi at 0 (one division): as exact as the recurrence was
    xs = np.concatenate([np.geomspace(1e-12, 2e-2, 3000), np.nextafter(_DIGAMMA_SMALL, [0.0, 1.0])])
    got = np.array([kern.digamma(x) for x in xs])
    np.testing.assert_allclose(got, digamma(xs), rtol=2e-15, atol=0)


def test_update_alpha_reaches_the_stationary_point_of_eq8():
    rng = np.random.default_rng(0)
    gam = rng.gamma(2.0, 1.0, size=(50, 4)) + 0.1
    ss = (digamma(gam) - digamma(gam.sum(axis=1, keepdims=True))).sum(axis=0)
    a = update_alpha(np.ones(4), 50, ss)
    grad = 50 * (digamma(a.sum()) - digamma(a)) + ss
    np.testing.assert_allclose(grad, 0, atol=1e-8)


# --------------------------------------------------------------------------- eqs. 5-8 transcription


def transcription(x, alpha, betas, n_iter, e_tol):
    """Direct NumPy transcription of Wang et al. 2011 eqs. 5-8 (gamma warm-started between E-steps).

    ``x`` holds codes 0..k_j-1 (or -1). Returns alpha, betas, gamma and the bound of each E-step.
    """
    n, N = x.shape
    k = alpha.size
    alpha = alpha.copy()
    betas = [b.copy() for b in betas]
    gamma = np.array([alpha + (x[i] >= 0).sum() / k for i in range(n)])
    bounds = []
    for it in range(n_iter):
        phis = np.zeros((n, N, k))
        for i in range(n):
            obs = [j for j in range(N) if x[i, j] >= 0]
            g = gamma[i].copy()
            while True:
                for j in obs:  # eq. 5
                    a = np.exp(digamma(g) - digamma(g.sum()) + np.log(betas[j][:, x[i, j]]))
                    phis[i, j] = a / a.sum()
                g_new = alpha + phis[i, obs].sum(axis=0)  # eq. 6
                done = np.max(np.abs(g_new - g)) < e_tol
                g = g_new
                if done:
                    break
            gamma[i] = g
        bound = 0.0
        for i in range(n):
            g = gamma[i]
            el = digamma(g) - digamma(g.sum())
            bound += gammaln(alpha.sum()) - gammaln(alpha).sum() + ((alpha - 1) * el).sum()
            bound += -gammaln(g.sum()) + gammaln(g).sum() - ((g - 1) * el).sum()
            for j in range(N):
                if x[i, j] >= 0:
                    p = phis[i, j]
                    bound += (p * (el + np.log(betas[j][:, x[i, j]]) - np.log(p))).sum()
        bounds.append(bound)
        if it == n_iter - 1:
            break
        for j in range(N):  # eq. 7
            cnt = np.zeros_like(betas[j])
            for i in range(n):
                if x[i, j] >= 0:
                    cnt[:, x[i, j]] += phis[i, j]
            betas[j] = cnt / cnt.sum(axis=1, keepdims=True)
        ssum = (digamma(gamma) - digamma(gamma.sum(axis=1, keepdims=True))).sum(axis=0)
        for _ in range(200):  # eq. 8
            g_ = n * (digamma(alpha.sum()) - digamma(alpha)) + ssum
            l_ = -n * polygamma(1, alpha)
            v = n * polygamma(1, alpha.sum())
            c = (g_ / l_).sum() / (1 / v + (1 / l_).sum())
            new = alpha - (g_ - c) / l_
            if np.max(np.abs(new - alpha)) < 1e-14:
                alpha = new
                break
            alpha = new
        # the last E-step's gamma is recomputed with the new parameters next iteration
    return alpha, betas, gamma, np.array(bounds)


@pytest.mark.parametrize("n_iter", [1, 2, 4])
def test_updates_match_direct_transcription_of_eqs_5_to_8(n_iter):
    x = np.array(
        [[0, 1, 2], [0, 1, -1], [1, 1, 2], [1, 0, 0], [1, 0, 1], [-1, 0, 1], [0, -1, 2]],
        dtype=np.int64,
    )
    rng = np.random.default_rng(3)
    alpha0 = np.array([0.7, 1.3])
    betas0 = [rng.dirichlet(np.ones(kj), size=2) for kj in (2, 2, 3)]
    a, b, g, bounds = transcription(x, alpha0, betas0, n_iter, 1e-13)
    est = BCE(2, max_iter=n_iter, tol=0.0, e_step_tol=1e-13, e_step_max_iter=10_000)
    with pytest.warns(ConvergenceWarning):
        est.fit(np.where(x >= 0, x * 5 + 2, -1), init={"alpha": alpha0, "beta": betas0})  # arbitrary ids
    np.testing.assert_allclose(est.alpha_, a, rtol=1e-9)
    for j in range(3):
        np.testing.assert_allclose(est.beta_[j], b[j], rtol=1e-9)
    np.testing.assert_allclose(est.memberships_, g / g.sum(axis=1, keepdims=True), rtol=1e-9)
    np.testing.assert_allclose(est.lower_bound_trace_, bounds, rtol=1e-10)
    assert est.n_iter_ == n_iter


# --------------------------------------------------------------------------- properties


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    k=st.integers(2, 4),  # (a consensus of one cluster is refused, as by every method)
    missing=st.sampled_from([0.0, 0.3, 0.6]),
    init=st.sampled_from(["k-means++", "random"]),
)
def test_lower_bound_never_decreases(seed, k, missing, init):
    rng = np.random.default_rng(seed)
    L, _ = random_labels(rng, 40, 6, missing=missing)
    with quiet(EmptyRowsWarning, ConvergenceWarning):
        est = BCE(k, max_iter=60, tol=1e-12, init=init, random_state=seed).fit(L)
    trace = est.lower_bound_trace_
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))
    assert np.all(np.isfinite(est.memberships_))
    np.testing.assert_allclose(est.memberships_.sum(axis=1), 1.0)
    assert np.all((est.uncertainty_ >= 0) & (est.uncertainty_ <= 1))


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_gbce_bound_never_decreases(seed):
    rng = np.random.default_rng(seed)
    L, truth = random_labels(rng, 50, 3)
    X = truth[:, None] + rng.normal(0, 0.5, (50, 2))
    X[rng.random(X.shape) < 0.1] = np.nan
    with quiet(ConvergenceWarning):
        est = GBCE(3, max_iter=60, tol=1e-12, random_state=seed).fit(L, X)
    trace = est.lower_bound_trace_
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_mm_log_likelihood_never_decreases(seed):
    rng = np.random.default_rng(seed)
    L, _ = random_labels(rng, 40, 5)
    with quiet(ConvergenceWarning):
        est = MM(3, max_iter=50, tol=1e-12, random_state=seed).fit(L)
    trace = est.lower_bound_trace_
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))


def test_invariant_under_relabelling_a_base_clustering():
    rng = np.random.default_rng(5)
    L, _ = random_labels(rng, 60, 5)
    est = BCE(3, random_state=1).fit(L)
    init = {"alpha": np.full(3, 1.0), "beta": [rng.dirichlet(np.ones(b.shape[1]), 3) for b in est.beta_]}
    ref = BCE(3).fit(L, init=init)
    # relabel column 2 by a permutation of its ids; permute the initial beta the same way
    cats = ref.categories_[2]
    perm = rng.permutation(cats.size)
    new_ids = np.array([100, 7, 55, 3, 999])[: cats.size][perm]
    L2 = L.copy()
    for pos, c in enumerate(cats):
        L2[L[:, 2] == c, 2] = new_ids[pos]
    order = np.argsort(new_ids)  # sorted categories of the relabelled column
    init2 = {"alpha": init["alpha"], "beta": list(init["beta"])}
    init2["beta"][2] = init["beta"][2][:, order]
    got = BCE(3).fit(L2, init=init2)
    np.testing.assert_allclose(got.memberships_, ref.memberships_, rtol=1e-10)
    np.testing.assert_allclose(got.lower_bound_, ref.lower_bound_, rtol=1e-12)


def test_same_seed_same_result_and_restarts_keep_the_best_bound():
    rng = np.random.default_rng(2)
    L, _ = random_labels(rng, 80, 8)
    a = BCE(3, n_init=4, random_state=7).fit(L)
    b = BCE(3, n_init=4, random_state=7).fit(L)
    np.testing.assert_array_equal(a.memberships_, b.memberships_)
    singles = []
    seeds = np.random.default_rng(7)
    for _ in range(4):
        singles.append(BCE(3, n_init=1, random_state=seeds).fit(L).lower_bound_)
    assert a.lower_bound_ == pytest.approx(max(singles), rel=1e-12)


# --------------------------------------------------------------------------- accuracy on real data


@pytest.mark.parametrize("Est", [BCE, GBCE, MM])
def test_the_cap_is_reported_honestly(Est, iris_labels):
    """Stopped at max_iter: converged_ is False, with a ConvergenceWarning; given room, True and silent."""
    L, _ = iris_labels
    X, _ = load_uci("iris")
    args = (L, X) if Est is GBCE else (L,)
    with pytest.warns(ConvergenceWarning, match=f"{Est.__name__} did not converge in max_iter=2"):
        capped = Est(3, max_iter=2, tol=0.0, random_state=0).fit(*args)
    assert capped.converged_ is False and capped.n_iter_ == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        free = Est(3, random_state=0).fit(*args)
    assert free.converged_ is True and free.n_iter_ < free.max_iter


def test_bce_and_mm_recover_iris(iris_labels):
    L, y = iris_labels
    bce = BCE(3, n_init=3, random_state=0).fit(L)
    mm = MM(3, n_init=3, random_state=0).fit(L)
    base = np.mean([micro_precision(L[:, j], y) for j in range(L.shape[1])])
    assert micro_precision(bce.labels_, y) >= 0.85
    assert micro_precision(bce.labels_, y) >= base - 0.02
    assert micro_precision(mm.labels_, y) >= 0.8
    assert bce.effective_k_ == 3
    assert bce.converged_


@pytest.mark.parametrize("missing", [0.0, 0.3, 0.6, 0.9])
def test_missing_labels_degrade_gracefully(iris_labels, missing):
    L, y = iris_labels
    rng = np.random.default_rng(11)
    Lm = L.copy()
    Lm[rng.random(L.shape) < missing] = -1
    empty = (Lm < 0).all(axis=1)
    ctx = pytest.warns(EmptyRowsWarning) if empty.any() else contextlib.nullcontext()
    with ctx, quiet(ConvergenceWarning):  # very sparse rows converge slowly
        est = BCE(3, n_init=3, random_state=0).fit(Lm)
    np.testing.assert_array_equal(est.empty_rows_, np.flatnonzero(empty))
    mp = micro_precision(est.labels_[~empty], y[~empty])
    floor = {0.0: 0.85, 0.3: 0.85, 0.6: 0.8, 0.9: 0.6}[missing]
    assert mp >= floor


# --------------------------------------------------------------------------- special rows and input


def test_empty_rows_get_the_prior_memberships():
    rng = np.random.default_rng(4)
    L, _ = random_labels(rng, 30, 4, missing=0.0)
    L[[3, 17]] = -1
    with pytest.warns(EmptyRowsWarning, match="2 of 30 rows"):
        est = BCE(3, random_state=0).fit(L)
    np.testing.assert_array_equal(est.empty_rows_, [3, 17])
    np.testing.assert_allclose(est.memberships_[3], est.alpha_ / est.alpha_.sum())
    # the empty rows do not influence the fit
    ref = BCE(3, random_state=0).fit(np.delete(L, [3, 17], axis=0))
    np.testing.assert_allclose(ref.alpha_, est.alpha_, rtol=1e-10)
    np.testing.assert_allclose(np.delete(est.memberships_, [3, 17], axis=0), ref.memberships_, rtol=1e-10)


@pytest.mark.parametrize(
    "labels, kwargs, match",
    [
        (np.zeros((5, 0), int), {}, "at least one point and one clustering"),
        (
            np.zeros((5, 2), int),
            {"n_clusters": 1},  # (every method refuses a consensus of one cluster)
            r"'n_clusters' parameter of BCE must be an integer >= 2; got 1",
        ),
        (np.array([[0, 1.5], [1, 0]]), {}, r"got 1.5 at row 0, column 1"),
        (np.array([[0, 1], [1, -3]]), {}, r"got -3 at row 1, column 1"),
        (np.array([["a", "b"]]), {}, "integer cluster ids"),
        (np.zeros((5, 2), int), {"tol": -1.0}, "'tol'"),
        (np.zeros((5, 2), int), {"alpha_init": 0.0}, "'alpha_init'"),
    ],
)
def test_bad_input_is_rejected_with_the_value(labels, kwargs, match):
    with pytest.raises(InputError, match=match):
        BCE(**{"n_clusters": 2, **kwargs}).fit(labels)


def test_mm_and_gbce_reject_bad_input():
    with pytest.raises(InputError, match="got -2 at row 0, column 0"):
        MM(2).fit([[-2, 0], [1, 1]])
    with pytest.raises(InputError, match="'n_clusters'"):
        MM(0).fit([[0, 0], [1, 1]])
    with pytest.raises(InputError, match="X must be a 2-d array with the 2 rows"):
        GBCE(2).fit([[0, 0], [1, 1]], np.zeros((3, 1)))
    with pytest.raises(InputError, match="'feature_weight'"):
        GBCE(2, feature_weight=-1.0).fit([[0, 0], [1, 1]], np.zeros((2, 1)))


# --------------------------------------------------------------------------- out of sample, warm start


def test_transform_and_predict_on_new_rows(iris_labels):
    L, y = iris_labels
    est = BCE(3, n_init=2, random_state=0).fit(L[::2])
    memb = est.transform(L[1::2])
    assert memb.shape == (75, 3)
    np.testing.assert_allclose(memb.sum(axis=1), 1.0)
    assert micro_precision(est.predict(L[1::2]), y[1::2]) >= 0.85
    # on the training rows transform agrees with the fit (fresh vs warm-started E-step)
    np.testing.assert_allclose(est.transform(L[::2]), est.memberships_, atol=1e-4)
    bad = L[1::2].copy()
    bad[0, 0] = 77
    for model in (est, MM(3, random_state=0).fit(L[::2])):  # one check of new rows for both
        with pytest.warns(UnseenLabelsWarning, match="1 base labels") as rec:
            model.transform(bad)
        assert rec[0].filename == __file__  # points at the caller's line
        with pytest.raises(InputError, match="20 clusterings"):
            model.transform(L[:, :5])
    with pytest.raises(InputError, match="not fitted"):
        BCE(3).transform(L)


def test_refit_with_added_columns_starts_from_previous_fit(iris_labels):
    L, y = iris_labels
    more = kmeans_labels(load_uci("iris")[0], 3, 10, seed0=100)
    first = BCE(3, n_init=2, random_state=0).fit(L)
    cold = BCE(3, init="random", random_state=1).fit(np.hstack([L, more]))
    warm = BCE(3, warm_start=True, n_init=2, random_state=0).fit(L)
    warm.fit(np.hstack([L, more]))
    assert len(warm.beta_) == 30
    # the warm start begins near the optimum: a much higher first bound, fewer iterations
    assert warm.lower_bound_trace_[0] > cold.lower_bound_trace_[0] + 100
    assert micro_precision(warm.labels_, y) >= micro_precision(first.labels_, y) - 0.02
    via_init = BCE(3).fit(np.hstack([L, more]), init=first)
    np.testing.assert_allclose(via_init.memberships_, warm.memberships_, rtol=1e-8)
    with pytest.raises(InputError, match="fewer than the 20"):
        BCE(3).fit(L[:, :5], init=first)


# --------------------------------------------------------------------------- GBCE and MM


def test_gbce_without_feature_weight_equals_bce():
    rng = np.random.default_rng(8)
    L, truth = random_labels(rng, 50, 5)
    X = rng.normal(size=(50, 3))
    est = BCE(3, random_state=0).fit(L)
    init = {"alpha": np.ones(3), "beta": [rng.dirichlet(np.ones(b.shape[1]), 3) for b in est.beta_]}
    a = BCE(3).fit(L, init=init)
    b = GBCE(3, label_weight=1.0, feature_weight=0.0).fit(L, X, init=init)
    np.testing.assert_allclose(b.memberships_, a.memberships_, rtol=1e-12)
    np.testing.assert_allclose(b.lower_bound_trace_, a.lower_bound_trace_, rtol=1e-12)


def test_gbce_features_rescue_a_poor_ensemble():
    X, y = load_uci("iris")
    Xs = (X - X.mean(0)) / X.std(0)
    rng = np.random.default_rng(0)
    # two poor base clusterings: random partitions
    L = rng.integers(0, 3, size=(150, 2))
    bce = BCE(3, n_init=3, random_state=0).fit(L)
    gbce = GBCE(3, label_weight=1.0, n_init=5, random_state=0).fit(L, Xs)
    assert micro_precision(gbce.labels_, y) >= 0.8
    assert micro_precision(gbce.labels_, y) > micro_precision(bce.labels_, y) + 0.2
    assert gbce.means_.shape == (3, 4) and np.all(gbce.variances_ > 0)
    # a fresh E-step may settle in another mode for a few ambiguous rows
    assert np.mean(gbce.predict(L, Xs) == gbce.labels_) >= 0.95


def subsample_kmeans_labels(X, K, n_base, rng):
    """``n_base`` k-means labelings of 50 % subsamples (k in [K, 2K]; the other rows -1)."""
    n = X.shape[0]
    L = np.full((n, n_base), -1, dtype=np.int32)
    for j in range(n_base):
        rows = rng.choice(n, n // 2, replace=False)
        k = int(rng.integers(K, 2 * K + 1))
        L[rows, j] = KMeans(k, n_init=1, random_state=j).fit_predict(X[rows])
    return L


@pytest.mark.parametrize("seed", [0, 1])
def test_gbce_default_start_is_as_good_as_bce(seed):
    # issue 28: GBCE's one random start ended at ARI 0.485 and 0.545 on these ensembles of wine, below the
    # base partitions' mean (0.637, 0.750), where BCE reaches 0.833 and 0.913; from BCE's spectral start
    # GBCE reaches BCE's partition
    from sklearn.datasets import load_wine
    from sklearn.metrics import adjusted_rand_score

    X, y = load_wine(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    L = subsample_kmeans_labels(X, 3, 20, np.random.default_rng(seed))
    base = np.mean([adjusted_rand_score(y[L[:, j] >= 0], L[L[:, j] >= 0, j]) for j in range(L.shape[1])])
    bce = adjusted_rand_score(y, BCE(3, random_state=0).fit(L).labels_)
    ari = adjusted_rand_score(y, GBCE(3, random_state=0).fit(L, X).labels_)
    assert ari >= bce - 0.02 and ari > base + 0.1, (ari, bce, base)


def mm_transcription(x, pi, betas, n_iter):
    n, N = x.shape
    lls = []
    for it in range(n_iter):
        logr = np.tile(np.log(pi), (n, 1))
        for j in range(N):
            for i in range(n):
                if x[i, j] >= 0:
                    logr[i] += np.log(betas[j][:, x[i, j]])
        mx = logr.max(axis=1, keepdims=True)
        norm = mx + np.log(np.exp(logr - mx).sum(axis=1, keepdims=True))
        r = np.exp(logr - norm)
        lls.append(norm.sum())
        if it == n_iter - 1:
            break
        pi = r.mean(axis=0)
        for j in range(N):
            cnt = np.zeros_like(betas[j])
            for i in range(n):
                if x[i, j] >= 0:
                    cnt[:, x[i, j]] += r[i]
            betas[j] = cnt / cnt.sum(axis=1, keepdims=True)
    return r, np.array(lls)


def test_mm_matches_direct_em_transcription():
    rng = np.random.default_rng(9)
    L, _ = random_labels(rng, 25, 4, missing=0.2)
    L[(L < 0).all(axis=1), 0] = 11
    est = MM(3, max_iter=1, init="random", random_state=4)
    with pytest.warns(ConvergenceWarning):
        est.fit(L)
    # replicate the random start, then run 6 EM iterations both ways
    start = np.random.default_rng(4)
    betas = [start.dirichlet(np.ones(c.size), size=3) for c in est.categories_]
    codes = np.column_stack([np.searchsorted(c, L[:, j]) for j, c in enumerate(est.categories_)])
    codes[L < 0] = -1
    r, lls = mm_transcription(codes, np.full(3, 1 / 3), betas, 6)
    with pytest.warns(ConvergenceWarning):
        got = MM(3, max_iter=6, tol=0.0, init="random", random_state=4).fit(L)
    np.testing.assert_allclose(got.memberships_, r, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.lower_bound_trace_, lls, rtol=1e-12)


def test_identical_rows_are_merged_exactly():
    from ensemble_dask.consensus._common.encoding import compress_rows

    g = np.array([[0, 3], [1, -1], [0, 3], [0, 3], [1, -1], [2, 4]])
    u, w, inv = compress_rows(g)
    np.testing.assert_array_equal(u[inv], g)
    assert w.sum() == 6 and sorted(w.tolist()) == [1.0, 2.0, 3.0]
    rng = np.random.default_rng(12)
    L, _ = random_labels(rng, 40, 5)
    a = BCE(3, random_state=0).fit(L)
    b = BCE(3, random_state=0).fit(np.repeat(L, 3, axis=0))  # every statistic triples
    np.testing.assert_allclose(b.alpha_, a.alpha_, rtol=1e-9)
    np.testing.assert_allclose(b.memberships_[::3], a.memberships_, rtol=1e-9)
    np.testing.assert_allclose(b.lower_bound_, 3 * a.lower_bound_, rtol=1e-12)


# --------------------------------------------------------------------------- the seeded start
# (k-means++ and KCC)


def blob_ensemble(n=2000, centers=6, n_clusterings=12, subsample=1.0, seed=0):
    """k-means labelings (k drawn in 3..12) of well-separated blobs; with ``subsample < 1`` each
    clustering sees a random share of the points and the others get -1."""
    from sklearn.datasets import make_blobs

    X, y = make_blobs(n, centers=centers, n_features=5, cluster_std=1.0, random_state=seed)
    rng = np.random.default_rng(seed)
    L = np.full((n, n_clusterings), -1, dtype=np.int64)
    for j in range(n_clusterings):
        rows = rng.random(n) < subsample
        k = int(rng.integers(3, 13))
        L[rows, j] = KMeans(k, n_init=1, init="random", random_state=j).fit_predict(X[rows])
    return L, y


def test_row_distance_counts_jointly_observed_disagreements():
    a = np.array([0, 1, 2, -1, 4])
    b = np.array([0, 3, -1, 5, 4])
    assert seed_kern.row_distance(a, b) == pytest.approx(1 / 3)  # columns 0, 1, 4 observed in both
    assert seed_kern.row_distance(a, a) == 0.0
    assert seed_kern.row_distance(np.array([0, -1]), np.array([-1, 1])) == 1.0  # nothing in common


def test_kmeanspp_picks_one_row_per_group_of_identical_rows():
    g = np.repeat(np.array([[0, 3], [1, 4], [2, 5]]), 5, axis=0)
    u = np.random.default_rng(0).random((3, 3))
    centers = seed_kern.kmeanspp_rows(g, np.ones(15), 7, u)
    assert sorted(set(g[centers, 0].tolist())) == [0, 1, 2]
    # asking for more centres than distinct rows stops at the distinct rows
    assert seed_kern.kmeanspp_rows(g, np.ones(15), 0, np.random.default_rng(1).random((5, 3))).size == 3


@pytest.mark.parametrize("Est", [BCE, MM])
def test_seeded_start_is_deterministic_for_a_seed(Est):
    L, _ = blob_ensemble(600, subsample=0.7)
    a = Est(6, random_state=3).fit(L)
    b = Est(6, random_state=np.random.default_rng(3)).fit(L)
    np.testing.assert_array_equal(a.memberships_, b.memberships_)
    np.testing.assert_array_equal(a.lower_bound_trace_, b.lower_bound_trace_)


@pytest.mark.parametrize("subsample", [1.0, 0.5])
@pytest.mark.parametrize("Est", [BCE, MM])
def test_one_seeded_start_recovers_separated_blobs(Est, subsample):
    from sklearn.metrics import adjusted_rand_score

    L, y = blob_ensemble(subsample=subsample)
    with quiet(EmptyRowsWarning):  # a row or two may miss every clustering at subsample 0.5
        est = Est(6, random_state=0).fit(L)  # n_init=1
    assert est.converged_
    assert adjusted_rand_score(y, est.labels_) > 0.95
    assert est.n_iter_ <= 20
    trace = est.lower_bound_trace_
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))


def test_seeded_start_beats_random_starts_on_the_bound():
    L, _ = blob_ensemble(1500, centers=8, n_clusterings=10)
    seeded = BCE(8, random_state=0).fit(L)
    with quiet(ConvergenceWarning):
        rnd = BCE(8, init="random", n_init=2, max_iter=100, random_state=0).fit(L)
    assert seeded.lower_bound_ >= rnd.lower_bound_


def test_seeded_alpha_stays_in_its_interval_and_is_small_on_clean_rows():
    L, _ = blob_ensemble(800)
    cats = label_categories(L)
    gidx, _ = encode_labels(L, cats)
    offsets = np.concatenate([[0], np.cumsum([c.size for c in cats])])
    counts, assign = seed_partition(gidx, np.ones(len(gidx)), offsets, 6, np.random.default_rng(0))
    assert np.all(np.bincount(assign, minlength=6) > 0)
    assert counts.sum() == (gidx >= 0).sum()  # every observed label in one cluster
    beta = seeded_beta(counts, offsets)
    assert np.all(beta > 0)
    a = seeded_alpha(gidx, np.ones(len(gidx)), beta, np.random.default_rng(0), lower=1e-3, upper=1.0)
    assert 1e-3 <= a < 0.05
    # uniform beta: every row is mixed evenly, the bound prefers a large alpha
    flat = seeded_beta(np.zeros_like(counts), offsets)
    assert seeded_alpha(gidx, np.ones(len(gidx)), flat, np.random.default_rng(0), upper=2.0) > 1.0


def test_row_hash_compression_equals_the_bytewise_one():
    rng = np.random.default_rng(4)
    g = rng.integers(-1, 3, size=(500, 4))
    u, w, inv = compress_rows(g)
    np.testing.assert_array_equal(u[inv], g)
    assert len(u) == len(np.unique(g, axis=0)) and w.sum() == 500


def test_encode_labels_with_large_label_values_and_unseen_ones():
    L = np.array([[10**9, 2], [5, -1], [10**9, 7]])
    cats = label_categories(L)
    assert [c.tolist() for c in cats] == [[5, 10**9], [2, 7]]
    g, unseen = encode_labels(np.array([[5, 7], [6, 2], [10**9, 3]]), cats)
    assert g.tolist() == [[0, 3], [-1, 2], [1, -1]] and unseen == 2


@pytest.mark.parametrize("Est", [BCE, MM])
def test_bad_init_names_the_parameter(Est):
    with pytest.raises(
        InputError,
        match=(
            rf"'init' parameter of {Est.__name__} must be one of 'spectral', 'k-means\+\+', 'random' or an "
            "array; got 'kmeans'"
        ),
    ):
        Est(2, init="kmeans").fit(np.array([[0, 1], [1, 0], [0, 0]]))


@pytest.mark.parametrize("Est", [BCE, MM])
def test_an_init_that_is_no_partition_of_the_rows_gets_a_clear_error(Est):
    """Not compared element-wise with the names (numpy's 'truth value is ambiguous'), but named."""
    labels = np.array([[0, 1], [1, 0], [0, 0]])
    with pytest.raises(InputError, match=r"a partition of the 3 rows .*got an array of shape \(3, 2\)"):
        Est(2, init=labels).fit(labels)
    with pytest.raises(InputError, match=r"got an array of shape \(3,\) and dtype float64"):
        Est(2, init=np.array([0.0, 1.0, 0.0])).fit(labels)
    with pytest.raises(InputError, match="has 3 clusters, more than n_clusters=2"):
        Est(2, init=[0, 1, 2]).fit(labels)
    with pytest.raises(InputError, match="holds -2"):
        Est(2, init=[0, 1, -2]).fit(labels)


@pytest.mark.parametrize("Est", [BCE, MM])
def test_a_start_from_a_partition_is_that_partition(Est):
    """From the true partition the fit stays there; from a partition of other codes (another method's
    labels, -1 for rows left out) too; and the start, not the default's, decides where EM ends."""
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 60)
    cols = []
    for _ in range(12):
        col = rng.permutation(4)[y]
        flip = rng.random(y.size) < 0.15
        col[flip] = rng.integers(0, 4, int(flip.sum()))
        cols.append(col)
    labels = np.column_stack(cols)
    codes = np.array([7, 3, 11, 5])[y]
    codes[::17] = -1
    for start in (y, codes):
        fit = Est(4, init=start, random_state=0).fit(labels)
        assert adjusted_rand_score(y, fit.labels_) == 1.0
        assert fit.n_iter_ >= 1 and fit.converged_
    # a start that merges two classes into one cluster and splits another: EM from it ends elsewhere
    merged = np.where(y == 1, 0, y)
    merged[(y == 2) & (np.arange(y.size) % 2 == 0)] = 1
    with pytest.warns(UserWarning, match="max_iter=1"):
        other = Est(4, init=merged, random_state=0, max_iter=1).fit(labels)
    assert adjusted_rand_score(merged, other.labels_) > adjusted_rand_score(y, other.labels_)


def _kcc_objective(gidx, assign, k):
    """Sum over rows of the squared distance of the one-hot row to its cluster's mean (observed entries)."""
    total = 0.0
    for j in range(gidx.shape[1]):
        for h in range(k):
            g = gidx[(assign == h) & (gidx[:, j] >= 0), j]
            if g.size:
                share = np.bincount(g) / g.size
                total += g.size - g.size * np.sum(share**2)
    return total


def test_seed_partition_keeps_the_best_of_its_seedings():
    L, _ = blob_ensemble(1200, centers=8, n_clusterings=10)
    cats = label_categories(L)
    gidx, _ = encode_labels(L, cats)
    offsets = np.concatenate([[0], np.cumsum([c.size for c in cats])])
    w = np.ones(len(gidx))
    singles = []
    rng = np.random.default_rng(3)
    for _ in range(5):
        _, a = seed_partition(gidx, w, offsets, 8, rng, n_seedings=1, spectral=False)
        singles.append(_kcc_objective(gidx, a, 8))
    _, best = seed_partition(gidx, w, offsets, 8, np.random.default_rng(3), n_seedings=5, spectral=False)
    assert _kcc_objective(gidx, best, 8) == pytest.approx(min(singles), rel=1e-12)
    assert len({round(s, 6) for s in singles}) > 1  # the seedings differ, so the choice mattered


def test_seed_partition_offers_the_spectral_partition_and_keeps_the_lower_objective(monkeypatch):
    import ensemble_dask.consensus.bce._seeding as common

    """At K = 30 one k-means++ seeding and its Lloyd steps stop in a local optimum that HBGF's partition
    avoids: the start is the candidate with the lower KCC objective."""
    from sklearn.datasets import make_blobs
    from sklearn.metrics import adjusted_rand_score

    X, y = make_blobs(3000, centers=30, n_features=10, cluster_std=2.0, random_state=3)
    rng = np.random.default_rng(3)
    L = np.column_stack(
        [
            KMeans(int(rng.integers(20, 41)), n_init=1, init="random", random_state=j).fit_predict(X)
            for j in range(15)
        ]
    )
    cats = label_categories(L)
    gidx, _ = encode_labels(L, cats)
    offsets = np.concatenate([[0], np.cumsum([c.size for c in cats])])
    w = np.ones(len(gidx))
    _, both = seed_partition(gidx, w, offsets, 30, np.random.default_rng(0), n_seedings=1)
    _, spectral = seed_partition(gidx, w, offsets, 30, np.random.default_rng(0), n_seedings=0)
    rng = np.random.default_rng(0)
    rng.integers(2**31 - 1)  # the same draws: HBGF's seed first, then the seeding's
    _, seeded = seed_partition(gidx, w, offsets, 30, rng, n_seedings=1, spectral=False)
    objs = [_kcc_objective(gidx, a, 30) for a in (seeded, spectral)]
    assert _kcc_objective(gidx, both, 30) == pytest.approx(min(objs), rel=1e-12)
    assert objs[1] < 0.9 * objs[0]  # here the spectral partition wins
    assert adjusted_rand_score(y, both) > adjusted_rand_score(y, seeded) + 0.03
    # above SPECTRAL_SAMPLE rows HBGF partitions a sample and Lloyd steps take it to every row
    monkeypatch.setattr(common, "SPECTRAL_SAMPLE", 1000)
    _, sampled = seed_partition(gidx, w, offsets, 30, np.random.default_rng(0), n_seedings=0)
    assert sampled.min() >= 0 and adjusted_rand_score(y, sampled) > adjusted_rand_score(y, seeded)


def test_seed_partition_spectral_start_skips_clusterings_of_one_label(monkeypatch):
    """A clustering with a single label (all of it, or all the rows HBGF sees) is left out of HBGF's
    graph instead of failing the fit; with no clustering left the start is one seeding."""
    import ensemble_dask.consensus.bce._seeding as common

    L, y = blob_ensemble(600, centers=4, n_clusterings=6)
    L[:, 2] = 5  # one cluster holds every point
    L[:, 4] = np.where(np.arange(600) == 7, 1, 0)  # a single point apart
    monkeypatch.setattr(common, "SPECTRAL_SAMPLE", 300)
    for seed in range(3):
        est = BCE(4, random_state=seed).fit(L)
        assert est.memberships_.shape == (600, 4) and est.effective_k_ == 4
    cats = label_categories(L[:, [2]])
    gidx, _ = encode_labels(L[:, [2]], cats)
    _, assign = seed_partition(
        gidx, np.ones(600), np.array([0, 1]), 2, np.random.default_rng(0), n_seedings=0
    )
    assert assign.shape == (600,)


def test_seed_partition_seeds_once_on_many_rows(monkeypatch):
    import ensemble_dask.consensus.bce._seeding as common

    L, _ = blob_ensemble(1200, centers=8, n_clusterings=10)
    cats = label_categories(L)
    gidx, _ = encode_labels(L, cats)
    offsets = np.concatenate([[0], np.cumsum([c.size for c in cats])])
    w = np.ones(len(gidx))
    many = [
        seed_partition(gidx, w, offsets, 8, np.random.default_rng(s), spectral=False)[1] for s in range(3)
    ]
    monkeypatch.setattr(common, "SEEDINGS_FEW_ROWS", 100)
    one = [seed_partition(gidx, w, offsets, 8, np.random.default_rng(s), spectral=False)[1] for s in range(3)]
    ref = [
        seed_partition(gidx, w, offsets, 8, np.random.default_rng(s), n_seedings=1, spectral=False)[1]
        for s in range(3)
    ]
    for a, b in zip(one, ref, strict=True):
        np.testing.assert_array_equal(a, b)
    five = [
        seed_partition(gidx, w, offsets, 8, np.random.default_rng(s), n_seedings=5, spectral=False)[1]
        for s in range(3)
    ]
    for a, b in zip(many, five, strict=True):  # below the threshold: five seedings
        np.testing.assert_array_equal(a, b)


def test_label_rows_stay_int32():
    """Encoded label rows are int32 end to end (half the memory of int64 on KDD-sized ensembles)."""
    from ensemble_dask.consensus._common.encoding import compress_rows
    from ensemble_dask.consensus.bce._em import encode_labels, label_categories

    labels = np.array([[0, 5], [0, 5], [1, -1], [2, 7]], dtype=np.int32)
    gidx, unseen = encode_labels(labels, label_categories(labels))
    assert gidx.dtype == np.int32 and unseen == 0
    assert gidx.tolist() == [[0, 3], [0, 3], [1, -1], [2, 4]]
    rows, mult, inv = compress_rows(gidx)
    assert rows.dtype == np.int32 and sorted(mult.tolist()) == [1.0, 1.0, 2.0]
    assert np.array_equal(rows[inv], gidx)


def test_compress_rows_returns_distinct_rows_as_they_are():
    """All rows distinct (subsampled clusterings): the rows come back uncopied, in their order."""
    from ensemble_dask.consensus._common.encoding import compress_rows

    gidx = np.array([[0, 3], [1, -1], [2, 4]], dtype=np.int32)
    rows, mult, inv = compress_rows(gidx)
    assert rows is gidx and mult.tolist() == [1.0, 1.0, 1.0] and inv.tolist() == [0, 1, 2]
    rows, mult, inv = compress_rows(gidx[[0, 1, 0]])
    assert (
        rows.shape == (2, 2)
        and sorted(mult.tolist()) == [1.0, 2.0]
        and np.array_equal(rows[inv], gidx[[0, 1, 0]])
    )


# --------------------------------------------------------------------------- E-step arithmetic and blocks


def test_row_estep_linear_factors_and_log_domain_fallback_agree_with_the_log_domain():
    """phi from k exponentials per sweep (and, where every product underflows, the log-domain form) equals
    the log-domain softmax; lognorm gives log phi = Psi + ll - lognorm."""
    ll = np.array([[-1.0, -2.0, -0.5], [-900.0, 0.0, -5.0], [0.0, -900.0, -800.0]])
    for gamma0 in (np.array([0.5, 2.0, 1.0]), np.array([1e-300, 1e-300, 300.0])):
        gamma = gamma0.copy()
        el, lmax = np.empty_like(ll), np.empty(3)
        kern.linear_factors(ll, el, lmax)
        phi, dig, lognorm = np.empty_like(ll), np.empty(3), np.empty(3)
        kern.row_estep(ll, el, lmax, np.ones(3), np.full(3, 0.1), gamma, phi, dig, lognorm, 1e-12, 1)
        d = digamma(gamma0)
        v = d[None, :] + ll
        ref = np.exp(v - v.max(axis=1, keepdims=True))
        ref /= ref.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(phi, ref, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(dig, d, rtol=1e-12)
        mask = ref > 1e-200
        np.testing.assert_allclose((d[None, :] + ll - lognorm[:, None])[mask], np.log(ref[mask]), atol=1e-9)


def test_estep_blocks_on_threads_give_one_result_on_any_number_of_cores(monkeypatch):
    """Rows in fixed E-step blocks, run side by side and summed in block order: the same fit on 1 or 4
    threads, and the fit of one block up to rounding."""
    from ensemble_dask.consensus.bce import _em as _bce_common
    from ensemble_dask.runtime import threads as _threads

    labels, _ = random_labels(np.random.default_rng(5), 400, 8)
    assert np.unique(labels, axis=0).shape[0] > 4 * 37
    whole = BCE(3, random_state=0).fit(labels)
    monkeypatch.setattr(_bce_common, "ESTEP_BLOCK", 37)
    fits = []
    for cores in (1, 4):
        monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid, cores=cores: set(range(cores)))
        fits.append(BCE(3, random_state=0).fit(labels))
    np.testing.assert_array_equal(fits[0].memberships_, fits[1].memberships_)
    np.testing.assert_array_equal(fits[0].lower_bound_trace_, fits[1].lower_bound_trace_)
    np.testing.assert_allclose(fits[0].memberships_, whole.memberships_, rtol=1e-8, atol=1e-12)
    np.testing.assert_array_equal(fits[0].labels_, whole.labels_)


def test_a_bce_rebuilt_from_its_parameters_labels_new_rows_as_the_fit(iris_labels):
    """Issue 27: the run store keeps BCE's alpha and beta; the model they rebuild (from_parameters) gives
    the fitted model's memberships of any rows."""
    L, _ = iris_labels
    est = BCE(3, random_state=0).fit(L[::2])
    rebuilt = BCE.from_parameters(est.alpha_, est.beta_, est.categories_)
    np.testing.assert_array_equal(rebuilt.transform(L[1::2]), est.transform(L[1::2]))
    np.testing.assert_array_equal(rebuilt.predict(L), est.predict(L))
    with pytest.raises(InputError, match="one \\(3, k_j\\) matrix per clustering"):
        BCE.from_parameters(est.alpha_, est.beta_[:-1], est.categories_)


def test_compress_rows_falls_back_when_hashes_collide(monkeypatch):
    """Two distinct rows that share a hash (forced here: every row hashes to 0 or 1) are told apart by the
    row check, and the exact byte-wise path gives the distinct rows; equal hashes of equal rows pass it."""
    from ensemble_dask.consensus._common import _kernels as ck
    from ensemble_dask.consensus._common.encoding import compress_rows

    rng = np.random.default_rng(0)
    gidx = rng.integers(-1, 3, size=(300, 4)).astype(np.int32)
    want_rows, want_mult, want_inv = compress_rows(gidx)
    assert want_rows.shape[0] < 300  # some rows repeat
    assert (
        ck.rows_match(gidx, np.unique(gidx, axis=0, return_index=True)[1][[0]], np.zeros(300, np.int64))
        is False
    )
    monkeypatch.setattr(ck, "row_hashes", lambda g: (g[:, 0] > 0).astype(np.uint64))
    rows, mult, inv = compress_rows(gidx)
    np.testing.assert_array_equal(rows[inv], gidx)
    assert rows.shape == want_rows.shape and mult.sum() == 300
    assert sorted(map(tuple, rows.tolist())) == sorted(map(tuple, want_rows.tolist()))
    _, first, inverse = np.unique(gidx, axis=0, return_index=True, return_inverse=True)
    assert ck.rows_match(gidx, first.astype(np.int64), inverse.ravel().astype(np.int64)) is True


@pytest.mark.filterwarnings("ignore::ensemble_dask.consensus.bce.EmptyRowsWarning")  # on purpose
def test_seeding_row_blocks_give_the_same_start_on_any_number_of_threads(monkeypatch):
    """kcc_assign and soft_gamma_rows run on fixed row blocks, threaded: the same seeding, warm start and fit
    on one thread as on three, and as on one block."""
    from ensemble_dask.consensus.bce import _seeding
    from ensemble_dask.runtime import threads

    rng = np.random.default_rng(4)
    labels = np.repeat(rng.integers(0, 4, size=(6, 5)), 150, axis=0) + rng.integers(0, 2, size=(900, 5))
    labels[rng.random(labels.shape) < 0.4] = -1
    fits = []
    for block, cores in ((10**9, 1), (64, 1), (64, 3)):
        monkeypatch.setattr(_seeding, "ROW_BLOCK", block)
        monkeypatch.setattr(threads, "usable_cores", lambda c=cores: c)
        fits.append(BCE(n_clusters=4, random_state=0).fit(labels))
    for m in fits[1:]:
        np.testing.assert_array_equal(m.labels_, fits[0].labels_)
        np.testing.assert_array_equal(m.memberships_, fits[0].memberships_)
        assert m.lower_bound_ == fits[0].lower_bound_


def test_unique_hashes_matches_numpy_unique():
    """compress_rows' radix sort of the row hashes: the first occurrences, inverse and counts of np.unique."""
    from ensemble_dask.consensus._common import _kernels as ck

    rng = np.random.default_rng(2)
    wide = rng.integers(0, 2**63, 5000, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(1)
    cases = [
        np.concatenate([wide, wide[::7]]),
        rng.integers(0, 30, 2000).astype(np.uint64),
        np.zeros(4, np.uint64),
        np.array([2**64 - 1, 0, 2**64 - 1, 2**40, 0], dtype=np.uint64),
        np.zeros(1, np.uint64),
    ]
    for h in cases:
        _, first, inverse, counts = np.unique(h, return_index=True, return_inverse=True, return_counts=True)
        got = ck.unique_hashes(h)
        for a, b in zip((first, inverse.ravel(), counts), got, strict=True):
            np.testing.assert_array_equal(a, b)


def test_column_presence_matches_the_table_of_the_labels():
    """column_presence keeps labels below 64 in a bit word per column and larger ones in the table: the same
    table as the labels' own (labels at or above a column's ``top`` and -1 left out)."""
    from ensemble_dask.consensus._common import _kernels as ck

    rng = np.random.default_rng(3)
    for hi in (5, 64, 65, 200):
        labels = rng.integers(-1, hi, size=(3000, 6)).astype(np.int32)
        labels[:, 2] = np.where(labels[:, 2] >= 0, labels[:, 2] % 3 + 61, -1)  # 61..63 only
        top = np.array([hi, hi, 64, hi // 2 + 1, 1, 0], dtype=np.int64)
        seen = np.zeros((6, max(hi, 64)), dtype=np.bool_)
        ck.column_presence(labels, top, seen)
        want = np.zeros_like(seen)
        for i in range(6):
            col = labels[:, i]
            want[i, col[(col >= 0) & (col < top[i])]] = True
        np.testing.assert_array_equal(seen, want)


@pytest.mark.parametrize("cls", [BCE, MM, GBCE])
def test_more_clusters_than_rows_is_refused(cls):
    """As KCC and PCC refuse it: BCE(n_clusters=5000) on 50 rows ran and only warned it had not converged."""
    labels = np.random.default_rng(0).integers(0, 3, (50, 5))
    args = (labels, np.zeros((50, 2))) if cls is GBCE else (labels,)
    with pytest.raises(InputError, match=f"'n_clusters' parameter of {cls.__name__} must be <= n_samples=50"):
        cls(n_clusters=51).fit(*args)


def test_a_fit_and_a_transform_compile_one_e_step_per_input_type():
    """BCE's start and its ``transform`` left ``estep_block``'s ``clip`` out and its EM passed it: numba
    compiled the kernel twice for the same arrays (2.6 s more in a fresh environment). No call leaves it
    out."""
    from numba.core import types

    from ensemble_dask.consensus.bce import _kernels as kern

    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 200)
    noise = rng.integers(0, 3, (200, 6))
    labels = np.where(rng.random((200, 6)) < 0.8, truth[:, None], noise).astype(np.int32)
    BCE(3, random_state=0).fit(labels).transform(labels)
    assert kern.estep_block.signatures
    omitted = [sig for sig in kern.estep_block.signatures if any(isinstance(t, types.Omitted) for t in sig)]
    assert omitted == []
