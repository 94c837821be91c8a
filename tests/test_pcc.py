"""PCC (papers/003) and PPC (papers/002): kernels, solvers and estimators."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import KMeans

from ensemble_dask import InputError, PairCounts, dense_coassociation
from ensemble_dask.consensus import _pcc_kernels as K
from ensemble_dask.consensus.pcc import PCC, PPC
from ensemble_dask.metrics import h_criterion, js_criterion

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _data_dir():
    assert DATA.is_dir(), f"shared test data not found at {DATA}"
    return DATA


# --------------------------------------------------------------------------- helpers


def _simulate(seed, n_per=200, n_partitions=1000):
    """papers/003 Sect. 7.1: 4 planar Gaussians, soft truth Z, hard partitions sampled from Z."""
    rng = np.random.default_rng(seed)
    signs = np.array([[1, 1], [-1, 1], [-1, -1], [1, -1]])
    means = signs * rng.uniform(0.5, 2.5, size=(4, 2))
    X = np.concatenate([rng.normal(m, 1.0, size=(n_per, 2)) for m in means])
    dens = np.stack([np.exp(-0.5 * ((X - m) ** 2).sum(axis=1)) for m in means], axis=1)
    Z = dens / dens.sum(axis=1, keepdims=True)
    cum = Z.cumsum(axis=1)
    u = rng.random((X.shape[0], n_partitions))
    labels = np.minimum((u[:, :, None] > cum[:, None, :]).sum(axis=2), 3)
    co = np.zeros((X.shape[0], X.shape[0]))
    for k in range(4):  # dense_coassociation's loop would take seconds for N = 1000
        B = (labels == k).astype(np.float64)
        co += B @ B.T
    both = np.full(co.shape, n_partitions, dtype=np.int32)
    return Z, labels, co.astype(np.int32), both


def _blocks(seed, sizes=(12, 10, 8), n_partitions=30, noise=0.15, missing=0.0):
    """A labels matrix of noisy copies of a block partition, with optional missing entries."""
    rng = np.random.default_rng(seed)
    truth = np.repeat(np.arange(len(sizes)), sizes)
    n = truth.size
    labels = np.empty((n, n_partitions), dtype=np.int64)
    for u in range(n_partitions):
        col = rng.permutation(len(sizes) + 1)[truth]
        flip = rng.random(n) < noise
        col[flip] = rng.integers(0, len(sizes) + 1, flip.sum())
        col[rng.random(n) < missing] = -1
        labels[:, u] = col
    return truth, labels


def _f_reference(Y, co, both, divergence, eps=1e-10):
    """f(Y) of eq. (3) in plain NumPy over the observed pairs i < j."""
    iu, ju = np.triu_indices(len(Y), 1)
    N = both[iu, ju].astype(float)
    keep = N > 0
    iu, ju, N = iu[keep], ju[keep], N[keep]
    x = co[iu, ju] / N
    a = np.einsum("ik,ik->i", Y[iu], Y[ju])
    if divergence == "l2":
        return float((N * 2 * (x - a) ** 2).sum())
    c = np.clip(a, eps, 1 - eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(x > 0, x * np.log(x / c), 0) + np.where(x < 1, (1 - x) * np.log((1 - x) / (1 - c)), 0)
    d += (c - x) / (c * (1 - c)) * (a - c)
    return float((N * d).sum())


def _kkt_gap_reference(Y, co, both, divergence, eps=1e-10):
    """max_j ([g_j]_V - [g_j]_U) / (sum N / n), g of eq. (7) computed densely."""
    N = both.astype(float).copy()
    np.fill_diagonal(N, 0)
    X = np.divide(co, N, out=np.zeros_like(N), where=N > 0)
    A = Y @ Y.T
    if divergence == "l2":
        D = 4 * (A - X)
    else:
        c = np.clip(A, eps, 1 - eps)
        D = (c - X) / (c * (1 - c))
    G = (N * D) @ Y
    gmax_supp = np.where(Y > 0, G, -np.inf).max(axis=1)
    return float((gmax_supp - G.min(axis=1)).max() / (N.sum() / len(Y)))


def _random_sparse_pairs(seed, n=60, frac=0.3, n_partitions=20):
    truth, labels = _blocks(
        seed, sizes=(n // 3, n // 3, n - 2 * (n // 3)), n_partitions=n_partitions, missing=0.1
    )
    co, both = dense_coassociation(labels)
    rng = np.random.default_rng(seed + 1)
    iu, ju = np.triu_indices(n, 1)
    keep = (rng.random(iu.size) < frac) & (both[iu, ju] > 0)
    iu, ju = iu[keep], ju[keep]
    return truth, PairCounts.from_pairs(n, iu, ju, co[iu, ju], both[iu, ju], n_partitions)


# --------------------------------------------------------------------------- kernels


def test_divergences_hand_computed():
    eps = 1e-10
    assert K.div(K.KL, 0.5, 0.5, eps) == pytest.approx(0.0)
    assert K.div(K.KL, 1.0, 0.5, eps) == pytest.approx(np.log(2))
    assert K.div(K.KL, 0.25, 0.5, eps) == pytest.approx(0.25 * np.log(0.5) + 0.75 * np.log(1.5))
    assert K.ddiv(K.KL, 0.25, 0.5, eps) == pytest.approx((0.5 - 0.25) / 0.25)
    assert K.div(K.L2, 0.25, 0.75, eps) == pytest.approx(2 * 0.25)
    assert K.ddiv(K.L2, 0.25, 0.75, eps) == pytest.approx(2.0)
    # KL is clamped and continued along its tangent: finite at x2 = 0 and x2 = 1
    assert np.isfinite(K.div(K.KL, 0.0, 1.0, eps)) and np.isfinite(K.div(K.KL, 1.0, 0.0, eps))
    h = 1e-6
    for x1, x2 in [(0.3, 0.6), (0.0, 0.2), (1.0, 0.9)]:
        num = (K.div(K.KL, x1, x2 + h, eps) - K.div(K.KL, x1, x2 - h, eps)) / (2 * h)
        assert K.ddiv(K.KL, x1, x2, eps) == pytest.approx(num, rel=1e-5)


def test_second_derivative_matches_finite_differences():
    eps, h = 1e-10, 1e-6
    for code in (K.KL, K.L2):
        for x1, x2 in [(0.3, 0.6), (0.0, 0.2), (1.0, 0.9), (0.5, 0.5), (0.9, 0.05)]:
            num = (K.ddiv(code, x1, x2 + h, eps) - K.ddiv(code, x1, x2 - h, eps)) / (2 * h)
            assert K.d2div(code, x1, x2, eps) == pytest.approx(num, rel=1e-5)
    # along the tangent continuation of KL the derivative is constant
    assert K.d2div(K.KL, 0.3, 0.0, eps) == 0.0 and K.d2div(K.KL, 0.3, 1.0, eps) == 0.0


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(1, 30), rtol=st.sampled_from([1e-4, 1e-8, 1e-12]))
def test_newton_line_search_brackets_the_exact_step(seed, m, rtol):
    """KL step of eq. (9): rho(step) <= 0 (no increase of f) and the root lies within rtol above."""
    rng = np.random.default_rng(seed)
    eps = 1e-10
    x = rng.choice([0.0, 1.0, 0.5, 0.25], size=m) * (rng.random(m) < 0.7) + rng.random(m) * (
        rng.random(m) < 0.3
    )
    x = np.clip(x, 0.0, 1.0)
    w = rng.integers(1, 100, size=m).astype(float)
    a = rng.uniform(0.0, 1.0, size=m)
    y_vj = rng.uniform(0.01, 1.0)
    delta = rng.uniform(-1.0, 1.0, size=m)
    delta = np.clip(delta, -a, 1.0 - a)  # y_J.y_i stays in [0, 1] along the segment, as on the simplex
    r0, dr0 = K._rho(K.KL, eps, 0.0, x, w, 0, a, delta, m)
    step = K._line_search(K.KL, False, eps, rtol, x, w, 0, a, delta, m, y_vj, r0, dr0)
    assert 0.0 <= step <= y_vj
    if r0 >= 0:
        assert step == 0.0
        return
    assert K._rho(K.KL, eps, step, x, w, 0, a, delta, m)[0] <= 0.0
    if step < y_vj:  # the root is in (step, step (1 + rtol)]: rho changes sign there
        hi = step + rtol * max(step, 1e-300) * 1.0000001
        assert K._rho(K.KL, eps, min(hi, y_vj), x, w, 0, a, delta, m)[0] > 0.0


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=1, max_size=40), st.data())
def test_heap_keeps_the_minimum_on_top(keys, data):
    n = len(keys)
    key = np.array(keys)
    hkey, hnode, pos = np.empty(n), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    K.heap_build(hkey, hnode, pos, key)
    for _ in range(data.draw(st.integers(0, 30))):
        node = data.draw(st.integers(0, n - 1))
        key[node] = data.draw(st.floats(-10, 10))
        K.heap_update(hkey, hnode, pos, node, key[node])
        assert (hkey[0], hnode[0]) == min((key[j], j) for j in range(n))
        np.testing.assert_array_equal(hnode[pos], np.arange(n))
        np.testing.assert_array_equal(hkey[pos], key)


def test_l2_closed_form_step_equals_bisection():
    truth, labels = _blocks(0)
    co, both = dense_coassociation(labels)
    n, k = len(truth), 4
    X = np.divide(co, both, out=np.zeros(co.shape), where=both > 0)
    W = both.astype(float)
    np.fill_diagonal(W, 0)
    out = []
    for closed in (True, False):
        Y = np.random.default_rng(1).dirichlet(np.ones(k), size=n)
        tf, ti = np.empty(60), np.empty(60, dtype=np.int64)
        K.pcc_dense(X, W, Y, K.L2, closed, 1e-10, 1e-12, 1e-9, 60, n, tf, ti)
        out.append(Y)
    np.testing.assert_allclose(out[0], out[1], atol=1e-9)


# --------------------------------------------------------------------------- PCC


@pytest.mark.parametrize("divergence", ["kl", "l2"])
def test_simulation_of_sect_7_1_recovers_the_soft_truth(divergence):
    Z, _, co, both = _simulate(0)
    n = len(Z)
    model = PCC(8, divergence=divergence, solver="dense", max_iter=20 * n * 8, random_state=0)
    model.fit((co, both))
    assert model.n_iter_ < 20 * n * 8  # stopped on the KKT gap, not on the cap
    assert model.effective_k_ == 4
    assert js_criterion(model.memberships_, Z) <= 0.002  # paper: 0.0012


@pytest.mark.parametrize("divergence", ["kl", "l2"])
@pytest.mark.parametrize("solver", ["dense", "sparse"])
def test_objective_never_increases_and_rows_stay_stochastic(divergence, solver):
    _, pairs = _random_sparse_pairs(3, n=40, frac=0.5)
    co, both = pairs.to_dense()
    objectives, prev = [], None
    for t in [0, 1, 2, 5, 10, 20, 40, 80, 120, 200, 400]:
        m = PCC(5, divergence=divergence, solver=solver, max_iter=t, random_state=7).fit(pairs)
        Y = m.memberships_
        assert Y.min() >= 0.0
        np.testing.assert_allclose(Y.sum(axis=1), 1.0, atol=1e-12)
        # the reported objective is f(Y) of eq. (3)
        assert m.objective_ == pytest.approx(_f_reference(Y, co, both, divergence), rel=1e-9)
        if prev is not None:
            assert m.objective_ <= prev * (1 + 1e-12)
        prev = m.objective_
        objectives.append(m.objective_)
    assert objectives[-1] < objectives[0]
    trace = m.objective_trace_
    assert trace[0, 0] == 0 and trace[-1, 0] == m.n_iter_
    assert np.all(np.diff(trace[:, 1]) <= 1e-9 * abs(trace[0, 1]))


@pytest.mark.parametrize("divergence", ["kl", "l2"])
def test_kkt_gap_below_tol_at_convergence(divergence):
    truth, labels = _blocks(1, missing=0.2)
    co, both = dense_coassociation(labels)
    m = PCC(5, divergence=divergence, tol=1e-6, max_iter=100_000, random_state=2).fit((co, both))
    assert m.n_iter_ < 100_000
    assert m.kkt_gap_ <= 1e-6
    assert _kkt_gap_reference(m.memberships_, co, both, divergence) == pytest.approx(m.kkt_gap_, abs=1e-9)
    assert h_criterion(m.labels_, truth) == 1.0
    assert m.effective_k_ == 3


@pytest.mark.parametrize("divergence", ["kl", "l2"])
def test_dense_equals_sparse_on_the_same_pairs(divergence):
    _, pairs = _random_sparse_pairs(5, n=45, frac=0.4)
    a = PCC(4, divergence=divergence, solver="dense", max_iter=3000, random_state=11).fit(pairs)
    b = PCC(4, divergence=divergence, solver="sparse", max_iter=3000, random_state=11).fit(pairs)
    assert (a.solver_, b.solver_) == ("dense", "sparse")
    assert a.n_iter_ == b.n_iter_
    np.testing.assert_allclose(a.memberships_, b.memberships_, atol=1e-12)
    assert a.objective_ == pytest.approx(b.objective_, rel=1e-12)
    # all pairs stored, given as a dense tuple and as PairCounts
    _, labels = _blocks(6)
    co, both = dense_coassociation(labels)
    a = PCC(4, divergence=divergence, solver="dense", random_state=1).fit((co, both))
    b = PCC(4, divergence=divergence, solver="sparse", random_state=1).fit(PairCounts.from_dense(co, both))
    np.testing.assert_allclose(a.memberships_, b.memberships_, atol=1e-12)


def test_invariant_to_relabelling_a_base_clustering():
    truth, labels = _blocks(8, missing=0.1)
    relabelled = labels.copy()
    for u in (0, 3, 7):
        col = relabelled[:, u]
        present = col >= 0
        col[present] = (np.array([3, 0, 2, 1])[col[present]] + 5) * 7  # any injective relabelling
    a = PCC(4, random_state=3).fit(dense_coassociation(labels))
    b = PCC(4, random_state=3).fit(dense_coassociation(relabelled))
    np.testing.assert_array_equal(a.memberships_, b.memberships_)


def test_outputs_restarts_and_determinism():
    truth, labels = _blocks(9, noise=0.3)
    pairs = dense_coassociation(labels)
    one = PCC(6, random_state=4).fit(pairs)
    again = PCC(6, random_state=4).fit(pairs)
    np.testing.assert_array_equal(one.memberships_, again.memberships_)
    three = PCC(6, n_init=3, random_state=4).fit(pairs)  # the first start is the same draw
    assert three.objective_ <= one.objective_
    m = three
    np.testing.assert_array_equal(m.labels_, m.memberships_.argmax(axis=1))
    assert m.effective_k_ == np.unique(m.labels_).size
    assert m.uncertainty_.min() >= 0 and m.uncertainty_.max() <= 1
    Y = m.memberships_
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(Y > 0, Y * np.log(Y), 0).sum(axis=1) / np.log(6)
    np.testing.assert_allclose(m.uncertainty_, h, atol=1e-12)
    np.testing.assert_array_equal(PCC(6, random_state=4).fit_predict(pairs), one.labels_)


def test_default_iteration_cap_is_n_times_k():
    _, labels = _blocks(10, noise=0.4)
    pairs = dense_coassociation(labels)
    m = PCC(3, tol=1e-12, random_state=0).fit(pairs)
    assert m.n_iter_ <= 30 * 3


def test_sparse_solver_on_subsampled_pairs_finds_the_blocks():
    truth, pairs = _random_sparse_pairs(12, n=300, frac=0.05, n_partitions=30)
    for divergence in ("kl", "l2"):
        m = PCC(6, divergence=divergence, max_iter=20_000, random_state=0).fit(pairs)
        assert m.solver_ == "sparse"
        assert h_criterion(m.labels_, truth) >= 0.95


_BAD_INPUT = [
    ({"n_clusters": 0}, None, "'n_clusters' parameter must be >= 1; got 0"),
    ({"n_clusters": 31}, None, "n_samples=30; got 31"),
    ({"divergence": "hellinger"}, None, "'divergence'.*'hellinger'"),
    ({"solver": "gpu"}, None, "'solver'.*'gpu'"),
    ({"tol": 0.0}, None, "'tol'.*got 0.0"),
    ({"tol": -1}, None, "'tol'.*got -1"),
    ({"n_init": 0}, None, "'n_init'.*got 0"),
    ({}, "empty", "no pair.*nnz=0"),
    ({}, "zero_n", "N_ij > 0; got N_ij=0 for pair"),
    ({}, "co_gt_n", "c=3 > N=2"),
    ({}, "no_observed", "no observed pair"),
    ({}, "list", "got list"),
]


@pytest.mark.parametrize(
    ("estimator", "kwargs", "pairs", "match"),
    # PPC has no 'divergence' parameter: that case is PCC's only
    [(e, *case) for e in (PCC, PPC) for case in _BAD_INPUT if not (e is PPC and "divergence" in case[0])],
)
def test_bad_input_is_a_clear_error(estimator, kwargs, pairs, match):
    _, labels = _blocks(0)
    data = dense_coassociation(labels)
    if pairs == "empty":
        data = PairCounts.from_pairs(5, [], [], [], [], 3)
    elif pairs == "zero_n":
        data = PairCounts.from_pairs(4, [0, 1], [1, 2], [0, 1], [0, 2], 2)
    elif pairs == "co_gt_n":
        data = PairCounts.from_pairs(4, [0, 1], [1, 2], [3, 1], [2, 2], 2)
    elif pairs == "no_observed":
        data = (np.zeros((4, 4), dtype=np.int32), np.eye(4, dtype=np.int32))
    elif pairs == "list":
        data = [[0, 1], [1, 0]]
    with pytest.raises(InputError, match=match):
        estimator(**({"n_clusters": 2} | kwargs)).fit(data)


def test_iris_type_2_ensemble_real_data():
    uci = _data_dir() / "uci"
    X = np.loadtxt(uci / "iris.data.gz")
    y = np.loadtxt(uci / "iris.labels0.gz", dtype=int)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    labels = np.column_stack(
        [KMeans(k, n_init=1, random_state=s).fit_predict(X) for k in (3, 4, 5, 6, 8, 10) for s in range(5)]
    )
    pairs = dense_coassociation(labels)
    for divergence in ("kl", "l2"):
        m = PCC(3, divergence=divergence, max_iter=20 * 150 * 3, random_state=0).fit(pairs)
        assert h_criterion(m.labels_, y) >= 0.8


# --------------------------------------------------------------------------- PPC


def test_ppc_sweep_is_eq_5_of_the_paper():
    truth, labels = _blocks(13)
    co, both = dense_coassociation(labels)
    n, k = len(truth), 4
    C = co / both  # every pair observed here, diagonal = 1
    Y = np.random.default_rng(0).dirichlet(np.ones(k), size=n)
    G = (C - Y @ Y.T) @ Y  # [Y(C - Y^T Y)]^T in our n x K layout
    expected = Y * (n + G) / (n + (Y * G).sum(axis=1))[:, None]
    pairs = PairCounts.from_dense(co, both)
    x = pairs.co / pairs.both
    Ynew = np.empty_like(Y)
    obj, _ = K.ppc_sparse_sweep(pairs.indptr, pairs.indices, x, np.ones(pairs.nnz), Y, Ynew)
    np.testing.assert_allclose(Ynew, expected, atol=1e-14)
    assert obj == pytest.approx(((C - Y @ Y.T) ** 2).sum())


@pytest.mark.parametrize("solver", ["dense", "sparse"])
def test_ppc_objective_never_increases_and_finds_blocks(solver):
    truth, pairs = _random_sparse_pairs(14, n=60, frac=0.6)
    m = PPC(4, solver=solver, max_iter=3000, random_state=0).fit(pairs)
    trace = m.objective_trace_[:, 1]
    assert np.all(np.diff(trace) <= 1e-12 * trace[0])
    assert trace[-1] < trace[0]
    np.testing.assert_allclose(m.memberships_.sum(axis=1), 1.0, atol=1e-12)
    assert h_criterion(m.labels_, truth) == 1.0


def test_ppc_dense_equals_sparse_and_converges():
    _, pairs = _random_sparse_pairs(15, n=40, frac=0.5)
    a = PPC(3, solver="dense", tol=1e-5, max_iter=30_000, random_state=2).fit(pairs)
    b = PPC(3, solver="sparse", tol=1e-5, max_iter=30_000, random_state=2).fit(pairs)
    assert a.n_iter_ == b.n_iter_ < 30_000
    assert a.kkt_gap_ <= 1e-5
    np.testing.assert_allclose(a.memberships_, b.memberships_, atol=1e-10)
    # regression: dividing by S + y.G (eq. 5 verbatim) let rounding in sum(y_i) grow until P blew up
    for m in (a, b):
        trace = m.objective_trace_[:, 1]
        assert np.all(np.diff(trace) <= 1e-12 * trace[0])
        np.testing.assert_allclose(m.memberships_.sum(axis=1), 1.0, atol=1e-12)


# --------------------------------------------------------------------------- properties


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(3, 14),
    k=st.integers(1, 4),
    divergence=st.sampled_from(["kl", "l2"]),
)
def test_property_descent_stochastic_and_solvers_agree(seed, n, k, divergence):
    k = min(k, n)
    rng = np.random.default_rng(seed)
    labels = rng.integers(-1, 3, size=(n, 6))
    co, both = dense_coassociation(labels)
    if not (both[~np.eye(n, dtype=bool)] > 0).any():
        return
    a = PCC(k, divergence=divergence, solver="dense", max_iter=200, random_state=seed).fit((co, both))
    b = PCC(k, divergence=divergence, solver="sparse", max_iter=200, random_state=seed).fit((co, both))
    np.testing.assert_allclose(a.memberships_, b.memberships_, atol=1e-10)
    Y = a.memberships_
    assert Y.min() >= 0
    np.testing.assert_allclose(Y.sum(axis=1), 1.0, atol=1e-12)
    start = PCC(k, divergence=divergence, solver="dense", max_iter=0, random_state=seed).fit((co, both))
    assert a.objective_ <= start.objective_ * (1 + 1e-12) + 1e-12
