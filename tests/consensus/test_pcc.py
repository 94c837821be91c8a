"""PCC (Lourenço et al. 2015) and PPC (Rota Bulò et al. 2010): kernels, solvers and estimators."""

import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning

from ensemble_dask import InputError, PairCounts, dense_coassociation
from ensemble_dask.consensus.pcc import PCC, PPC
from ensemble_dask.consensus.pcc import _kernels as K
from ensemble_dask.consensus.pcc import _line_search as LS
from ensemble_dask.consensus.pcc import _ppc_kernels as PK
from ensemble_dask.metrics import h_criterion, js_criterion

UCI = Path(__file__).resolve().parents[1] / "data" / "uci"  # tests/data/README.md: provenance, licence


# --------------------------------------------------------------------------- helpers


def _simulate(seed, n_per=200, n_partitions=1000):
    """Lourenço et al. 2015 Sect. 7.1: 4 planar Gaussians, soft truth Z, hard partitions sampled from Z."""
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


def _f_reference(Y, co, both, divergence, eps=1e-10, weight=None):
    """f(Y) of eq. (3) in plain NumPy over the observed pairs i < j (times ``weight[i, j]``)."""
    iu, ju = np.triu_indices(len(Y), 1)
    N = both[iu, ju].astype(float)
    if weight is not None:
        N = N * weight[iu, ju]
    keep = N > 0
    iu, ju, N = iu[keep], ju[keep], N[keep]
    x = co[iu, ju] / both[iu, ju]
    a = np.einsum("ik,ik->i", Y[iu], Y[ju])
    if divergence == "l2":
        return float((N * 2 * (x - a) ** 2).sum())
    c = np.clip(a, eps, 1 - eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(x > 0, x * np.log(x / c), 0) + np.where(x < 1, (1 - x) * np.log((1 - x) / (1 - c)), 0)
    d += (c - x) / (c * (1 - c)) * (a - c)
    return float((N * d).sum())


def _gradient_reference(Y, co, both, divergence, eps=1e-10, weight=None):
    """``(G, W)``: the gradient of f (eq. 7) computed densely, and the pair weights."""
    W = both.astype(float).copy()
    if weight is not None:
        W = W * weight
    np.fill_diagonal(W, 0)
    X = np.divide(co, both, out=np.zeros_like(W), where=W > 0)
    A = Y @ Y.T
    if divergence == "l2":
        D = 4 * (A - X)
    else:
        c = np.clip(A, eps, 1 - eps)
        D = (c - X) / (c * (1 - c))
    return (W * D) @ Y, W


def _kkt_gap_reference(Y, co, both, divergence, eps=1e-10, weight=None):
    """max_j (y_j.g_j - min_k g_jk) / (sum W / n): zero exactly at a KKT point of f."""
    G, W = _gradient_reference(Y, co, both, divergence, eps, weight)
    return float(((Y * G).sum(axis=1) - G.min(axis=1)).max() / (W.sum() / len(Y)))


def _ppc_reference(Y, co, both):
    """P(Y) = sum_i (1 - y_i.y_i)^2 + sum_{observed i != j} (x_ij - y_i.y_j)^2, and its KKT gap."""
    M = (both > 0).astype(float)
    np.fill_diagonal(M, 1.0)
    X = np.divide(co, both, out=np.zeros(co.shape), where=both > 0)
    np.fill_diagonal(X, 1.0)
    R = M * (X - Y @ Y.T)
    G = -4 * R @ Y
    gap = ((Y * G).sum(axis=1) - G.min(axis=1)).max() / M.sum(axis=1).mean()
    return float((R**2).sum()), float(gap)


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
    r0, dr0 = LS._rho(K.KL, eps, 0.0, x, w, 0, a, delta, m, 0.0, 0.0, 0.0)
    step = LS._line_search(K.KL, False, eps, rtol, x, w, 0, a, delta, m, y_vj, r0, dr0, 0.0, 0.0, 0.0)
    assert 0.0 <= step <= y_vj
    if r0 >= 0:
        assert step == 0.0
        return
    assert LS._rho(K.KL, eps, step, x, w, 0, a, delta, m, 0.0, 0.0, 0.0)[0] <= 0.0
    if step < y_vj:  # the root is in (step, step (1 + rtol)]: rho changes sign there
        hi = step + rtol * max(step, 1e-300) * 1.0000001
        assert LS._rho(K.KL, eps, min(hi, y_vj), x, w, 0, a, delta, m, 0.0, 0.0, 0.0)[0] > 0.0


def test_rho_with_the_diagonal_term_is_the_derivative_of_the_quartic():
    """PPC's row function along a step: pairs plus diag (1 - y.y)^2; rho and rho' by finite differences."""
    rng = np.random.default_rng(0)
    m, diag = 7, 1.5
    x, w, a = rng.random(m), rng.uniform(1, 3, m), rng.random(m)
    delta = rng.uniform(-0.5, 0.5, m)
    y = rng.dirichlet(np.ones(4))
    u, v = 0, 2
    q0, dq1 = y @ y, 2 * (y[u] - y[v])

    def phi(t):
        yt = y.copy()
        yt[u] += t
        yt[v] -= t
        pairs = sum(w[s] * K.div(K.L2, x[s], a[s] + t * delta[s], 1e-10) for s in range(m))
        return pairs + diag * (1 - yt @ yt) ** 2

    h = 1e-5
    for t in (0.0, 0.05, 0.2):
        r, dr = LS._rho(K.L2, 1e-10, t, x, w, 0, a, delta, m, diag, q0, dq1)
        assert r == pytest.approx((phi(t + h) - phi(t - h)) / (2 * h), rel=1e-6, abs=1e-8)
        r_hi = LS._rho(K.L2, 1e-10, t + h, x, w, 0, a, delta, m, diag, q0, dq1)[0]
        r_lo = LS._rho(K.L2, 1e-10, t - h, x, w, 0, a, delta, m, diag, q0, dq1)[0]
        assert dr == pytest.approx((r_hi - r_lo) / (2 * h), rel=1e-6, abs=1e-8)


def _run_rows(pairs, Y, code, closed, **kw):
    """Run the row kernel directly on ``pairs`` (PairCounts) from ``Y``; returns its outputs."""
    x = pairs.co / pairs.both
    w = pairs.both.astype(float)
    p = {"diag": 0.0, "step_rtol": 1e-12, "gap_tol": 1e-9, "max_passes": 50, "gap_tol_start": 0.0} | kw
    trace, stats = np.empty(4 * p["max_passes"] + 1), np.zeros(3, dtype=np.int64)
    out = K.pcc_rows(
        pairs.indptr,
        pairs.indices,
        x,
        w,
        Y,
        code,
        closed,
        1e-10,
        p["diag"],
        p["step_rtol"],
        p["gap_tol"],
        0.5 * p["gap_tol"],
        p["max_passes"],
        50,
        trace,
        stats,
        np.nan,
        p["gap_tol_start"],
    )
    return out, trace, stats


@pytest.mark.parametrize("code, closed, diag", [(K.KL, False, 0.0), (K.L2, True, 0.0), (K.L2, False, 1.0)])
def test_tightening_tolerance_ends_at_the_final_kkt_test(code, closed, diag):
    """Started at a loose tolerance and tightened tenfold: f never increases across the levels, and
    ``converged`` means the final test holds for the returned Y (gap recomputed from scratch)."""
    _, labels = _blocks(3, sizes=(40, 30, 20), noise=0.3)
    pairs = PairCounts.from_dense(*dense_coassociation(labels))
    x, w = pairs.co / pairs.both, pairs.both.astype(float)
    Y0 = np.random.default_rng(0).dirichlet(np.ones(3), size=90)
    Y = Y0.copy()
    (passes, f, gap, conv), trace, stats = _run_rows(
        pairs, Y, code, closed, diag=diag, gap_tol=1e-6, gap_tol_start=1.0, step_rtol=1e-10, max_passes=2000
    )
    assert conv and passes > 0
    f_ref, gap_ref = K.objective_and_gap(pairs.indptr, pairs.indices, x, w, Y, code, 1e-10, diag)
    assert gap_ref <= 1e-6 * (1 + 1e-6) and f == pytest.approx(f_ref, rel=1e-9)
    assert gap == pytest.approx(gap_ref, rel=1e-6, abs=1e-12)  # the kept gradients' gap is the true one
    assert np.all(np.diff(trace[: passes + 1]) <= 1e-9 * abs(trace[0]))
    # the same final test as a descent run at the final tolerance from the start
    Y2 = Y0.copy()
    (_, f2, _, conv2), _, _ = _run_rows(
        pairs, Y2, code, closed, diag=diag, gap_tol=1e-6, step_rtol=1e-10, max_passes=2000
    )
    assert conv2 and f == pytest.approx(f2, rel=1e-4)


def test_tightening_tolerance_stopped_by_the_cap_is_not_converged():
    """A cap that stops the loose levels early never reports the final test as passed."""
    _, labels = _blocks(4, sizes=(40, 30, 20), noise=0.3)
    pairs = PairCounts.from_dense(*dense_coassociation(labels))
    Y = np.random.default_rng(1).dirichlet(np.ones(3), size=90)
    (passes, f, gap, conv), _, _ = _run_rows(
        pairs, Y, K.KL, False, gap_tol=1e-9, gap_tol_start=1.0, max_passes=1
    )
    assert not conv and gap > 1e-9


def test_l2_closed_form_step_equals_newton():
    _, labels = _blocks(0)
    pairs = PairCounts.from_dense(*dense_coassociation(labels))
    out = []
    for closed in (True, False):
        Y = np.random.default_rng(1).dirichlet(np.ones(4), size=pairs.n)
        _run_rows(pairs, Y, K.L2, closed, max_passes=3)
        out.append(Y)
    np.testing.assert_allclose(out[0], out[1], atol=1e-8)


# --------------------------------------------------------------------------- PCC


@pytest.mark.parametrize("divergence", ["kl", "l2"])
def test_simulation_of_sect_7_1_recovers_the_soft_truth(divergence):
    Z, _, co, both = _simulate(0)
    tol = {"kl": 1e-3, "l2": 1e-4}[divergence]
    model = PCC(8, divergence=divergence, tol=tol, random_state=0).fit((co, both))
    assert model.converged_  # stopped by the KKT test, not by the cap
    assert model.effective_k_ == 4
    assert js_criterion(model.memberships_, Z) <= 0.002  # paper: 0.0012


@pytest.mark.parametrize("divergence", ["kl", "l2"])
def test_objective_never_increases_and_rows_stay_stochastic(divergence):
    _, pairs = _random_sparse_pairs(3, n=40, frac=0.5)
    co, both = pairs.to_dense()
    prev = None
    for t in [0, 1, 2, 3, 5, 8, 13, 30]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            m = PCC(5, divergence=divergence, tol=1e-9, max_iter=t, random_state=7).fit(pairs)
        Y = m.memberships_
        assert Y.min() >= 0.0
        np.testing.assert_allclose(Y.sum(axis=1), 1.0, atol=1e-12)
        # the reported objective is f(Y) of eq. (3), computed independently
        assert m.objective_ == pytest.approx(_f_reference(Y, co, both, divergence), rel=1e-9)
        if prev is not None:
            assert m.objective_ <= prev * (1 + 1e-12)
        prev = m.objective_
    trace = m.objective_trace_
    assert trace[0, 0] == 0 and trace[-1, 0] == m.n_iter_
    assert np.all(np.diff(trace[:, 1]) <= 1e-9 * abs(trace[0, 1]))
    assert trace[-1, 1] < trace[0, 1]


@pytest.mark.parametrize("divergence", ["kl", "l2"])
def test_converged_fit_passes_an_independent_kkt_test(divergence):
    truth, labels = _blocks(1, missing=0.2)
    co, both = dense_coassociation(labels)
    m = PCC(5, divergence=divergence, tol=1e-6, max_iter=1000, random_state=2).fit((co, both))
    assert m.converged_
    # the reported gap bounds the true one, computed densely in NumPy, and both are below tol
    ref = _kkt_gap_reference(m.memberships_, co, both, divergence)
    assert ref <= m.kkt_gap_ * (1 + 1e-9) + 1e-12
    assert m.kkt_gap_ <= 1e-6
    assert m.objective_ == pytest.approx(_f_reference(m.memberships_, co, both, divergence), rel=1e-9)
    assert h_criterion(m.labels_, truth) == 1.0
    assert m.effective_k_ == 3


@pytest.mark.parametrize("estimator", ["pcc-kl", "pcc-l2", "ppc-rows", "ppc-baum-eagon"])
def test_the_cap_is_reported_honestly(estimator):
    _, labels = _blocks(2, noise=0.3)
    pairs = dense_coassociation(labels)
    name, variant = estimator.split("-", 1)
    est = (
        PCC(4, divergence=variant, tol=1e-12, max_iter=1, random_state=0)
        if name == "pcc"
        else PPC(4, algorithm=variant, tol=1e-12, max_iter=1, random_state=0)
    )
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        est.fit(pairs)
    assert est.converged_ is False and est.n_iter_ == 1
    if name == "pcc":  # at the cap the gap is recomputed from Y
        co, both = pairs
        assert est.kkt_gap_ == pytest.approx(
            _kkt_gap_reference(est.memberships_, co, both, variant), rel=1e-6
        )


@pytest.mark.parametrize("estimator", ["pcc-kl", "pcc-l2", "ppc-rows", "ppc-baum-eagon"])
def test_a_start_at_the_true_partition_stays_there(estimator):
    truth, labels = _blocks(3, noise=0.05)
    pairs = dense_coassociation(labels)
    name, variant = estimator.split("-", 1)
    for init in (truth, np.eye(4)[truth]):
        est = (
            PCC(4, divergence=variant, init=init)
            if name == "pcc"
            else PPC(4, algorithm=variant, init=init, max_iter=3000)
        )
        est.fit(pairs)
        assert est.converged_
        np.testing.assert_array_equal(est.labels_, truth)


def test_pairs_never_co_present_are_skipped():
    _, pairs = _random_sparse_pairs(4, n=30, frac=0.5)
    co, both = pairs.to_dense()
    # add pairs with N_ij = 0: they must change nothing
    rng = np.random.default_rng(0)
    iu, ju = np.triu_indices(30, 1)
    free = both[iu, ju] == 0
    add = rng.random(free.sum()) < 0.5
    ai, aj = iu[free][add], ju[free][add]
    rows, cols = pairs.rows(), pairs.indices
    keep = rows < cols
    with_zero = PairCounts.from_pairs(
        30,
        np.concatenate([rows[keep], ai]),
        np.concatenate([cols[keep], aj]),
        np.concatenate([pairs.co[keep], np.zeros(ai.size, dtype=np.int32)]),
        np.concatenate([pairs.both[keep], np.zeros(ai.size, dtype=np.int32)]),
        pairs.n_clusterings,
    )
    assert with_zero.nnz > pairs.nnz
    start = [np.arange(30) % 3]  # hard labels: PCC-KL's pass of L2 first
    for est in (
        PCC(3, random_state=1),
        PCC(3, divergence="l2", random_state=1),
        PPC(3, random_state=1),
        PCC(3, init=start),
        PPC(3, init=start),
        PPC(3, algorithm="baum-eagon", max_iter=20, random_state=1),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            a = est.fit(pairs).memberships_.copy()
            b = est.fit(with_zero).memberships_
        np.testing.assert_array_equal(a, b)


def test_pairs_never_co_present_are_weighed_out_not_copied_out():
    """PCC and PPC keep the caller's pairs never both present where they are, with weight 0 (the fit above is
    the same bit for bit), instead of copying its indices and counts without them, and PPC's row descent runs
    on its own array made from the start, as PCC's, with no start matrix first: traced memory of a fit 12.1
    and 16.1 bytes a stored entry, against 20.5 and 25.6 with the copies (PPC 17.3 with its start matrix;
    100,000 points, 20 clusterings each on half of them: 0.3 % of the pairs never both present)."""
    import tracemalloc

    from ensemble_dask.coassoc import coassociation

    rng = np.random.default_rng(0)
    n = 100_000
    truth = rng.integers(0, 4, n)
    labels = np.empty((n, 20), dtype=np.int32)
    for c in range(20):
        labels[:, c] = np.where(rng.random(n) < 0.9, truth, rng.integers(0, 4, n))
        labels[rng.random(n) < 0.5, c] = -1
    pairs = coassociation(labels, strategy="cocluster", l=10, seed=0)
    assert 0 < np.count_nonzero(pairs.both == 0) < pairs.nnz / 100
    for est, bound in ((PCC(4, init=[truth], divergence="l2"), 16), (PPC(4, init=[truth]), 16.6)):
        est.fit(pairs)  # compiled outside the trace
        tracemalloc.start()
        try:
            est.fit(pairs)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < bound * pairs.nnz, f"{type(est).__name__}: {peak / pairs.nnz:.1f} bytes a stored entry"


@pytest.mark.parametrize("divergence", ["kl", "l2"])
def test_sample_weights_multiply_the_terms_of_f(divergence):
    _, pairs = _random_sparse_pairs(5, n=40, frac=0.4)
    co, both = pairs.to_dense()
    rng = np.random.default_rng(3)
    Wt = np.triu(rng.uniform(0.2, 5.0, size=(40, 40)), 1)
    Wt = Wt + Wt.T
    sw = Wt[pairs.rows(), pairs.indices]
    m = PCC(4, divergence=divergence, tol=1e-6, max_iter=1000, random_state=0).fit(pairs, sample_weight=sw)
    assert m.converged_
    Y = m.memberships_
    assert m.objective_ == pytest.approx(_f_reference(Y, co, both, divergence, weight=Wt), rel=1e-9)
    assert _kkt_gap_reference(Y, co, both, divergence, weight=Wt) <= 1e-6 * (1 + 1e-9)
    # the same weights as an (n, n) matrix with a dense (co, both) input
    d = PCC(4, divergence=divergence, tol=1e-6, max_iter=1000, random_state=0).fit(
        (co, both), sample_weight=Wt
    )
    np.testing.assert_allclose(d.memberships_, Y, atol=1e-12)
    # a constant weight scales f and leaves Y alone (tol is relative to the mean weight)
    u = PCC(4, divergence=divergence, random_state=0).fit(pairs)
    c = PCC(4, divergence=divergence, random_state=0).fit(pairs, sample_weight=np.full(pairs.nnz, 2.0))
    np.testing.assert_allclose(c.memberships_, u.memberships_, atol=1e-12)
    assert c.objective_ == pytest.approx(2.0 * u.objective_, rel=1e-12)


def test_init_from_labels_and_memberships():
    truth, labels = _blocks(6, noise=0.2)
    pairs = dense_coassociation(labels)
    codes = np.array([7, 3, 40])[truth]  # any non-negative integer codes
    unknown = codes.copy()
    unknown[0] = -1
    with pytest.warns(ConvergenceWarning):
        a = PCC(3, init=codes, max_iter=0).fit(pairs)  # a hard-label start is the vertex of its label
        b = PCC(3, init=unknown, max_iter=0).fit(pairs)
        c = PCC(3, init=2 * np.eye(3)[truth] + 1, max_iter=0).fit(pairs)  # memberships are normalised
    np.testing.assert_array_equal(a.memberships_, np.eye(3)[np.unique(codes, return_inverse=True)[1]])
    np.testing.assert_allclose(b.memberships_[0], 1 / 3)
    np.testing.assert_allclose(c.memberships_, (2 * np.eye(3)[truth] + 1) / 5)
    # review: a plain list of labels (``labels_.tolist()``) was read as a list of starts and refused
    with pytest.warns(ConvergenceWarning):
        d = PCC(3, init=codes.tolist(), max_iter=0).fit(pairs)
        e = PPC(3, init=tuple(codes.tolist()), max_iter=0).fit(pairs)
    np.testing.assert_array_equal(d.memberships_, a.memberships_)
    np.testing.assert_array_equal(e.labels_, a.labels_)


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


def test_subsampled_pairs_find_the_blocks():
    truth, pairs = _random_sparse_pairs(12, n=300, frac=0.05, n_partitions=30)
    for est in (PCC(6, random_state=0), PCC(6, divergence="l2", random_state=0), PPC(6, random_state=0)):
        est.fit(pairs)
        assert est.converged_
        assert h_criterion(est.labels_, truth) >= 0.95


_BAD_INPUT = [
    ({"n_clusters": 1}, None, r"'n_clusters' parameter of P[CP]C must be an integer >= 2; got 1"),
    ({"n_clusters": 31}, None, "n_samples=30; got 31"),
    ({"divergence": "hellinger"}, None, "'divergence'.*'hellinger'"),
    ({"algorithm": "em"}, None, "'algorithm'.*'em'"),
    ({"tol": 0.0}, None, "'tol'.*got 0.0"),
    ({"tol": -1}, None, "'tol'.*got -1"),
    ({"n_init": 0}, None, "'n_init'.*got 0"),
    ({"max_iter": -1}, None, "'max_iter'.*got -1"),
    ({"init": "k-means++"}, None, "'init'.*'k-means\\+\\+'"),
    ({"init": np.zeros(29, dtype=int)}, None, "'init' parameter must be 'random', 30 integer labels"),
    ({"init": np.arange(30)}, None, "at most n_clusters=2 distinct values; got 30"),
    ({"init": -np.ones((30, 2))}, None, "'init' memberships must be finite, non-negative"),
    ({}, "empty", "no pair.*nnz=0"),
    ({}, "all_zero_n", "no pair with N_ij > 0"),
    ({}, "co_gt_n", "c=3 > N=2"),
    ({}, "no_observed", "no observed pair"),
    ({}, "list", "got list"),
    ({}, "weight_shape", "sample_weight must have shape"),
    ({}, "weight_negative", "sample_weight must be positive and finite; got -1.0"),
    ({}, "weight_asymmetric", "sample_weight must be symmetric"),
]


@pytest.mark.parametrize(
    ("estimator", "kwargs", "pairs", "match"),
    # 'divergence' is PCC's parameter only, 'algorithm' PPC's
    [
        (e, *case)
        for e in (PCC, PPC)
        for case in _BAD_INPUT
        if not (e is PPC and "divergence" in case[0]) and not (e is PCC and "algorithm" in case[0])
    ],
)
def test_bad_input_is_a_clear_error(estimator, kwargs, pairs, match):
    _, labels = _blocks(0)
    data = dense_coassociation(labels)
    sw = None
    if pairs == "empty":
        data = PairCounts.from_pairs(5, [], [], [], [], 3)
    elif pairs == "all_zero_n":
        data = PairCounts.from_pairs(4, [0, 1], [1, 2], [0, 0], [0, 0], 2)
    elif pairs == "co_gt_n":
        data = PairCounts.from_pairs(4, [0, 1], [1, 2], [3, 1], [2, 2], 2)
    elif pairs == "no_observed":
        data = (np.zeros((4, 4), dtype=np.int32), np.eye(4, dtype=np.int32))
    elif pairs == "list":
        data = [[0, 1], [1, 0]]
    elif pairs is not None and pairs.startswith("weight"):
        data = PairCounts.from_pairs(4, [0, 1], [1, 2], [1, 1], [2, 2], 2)
        sw = {"weight_shape": np.ones(3), "weight_negative": np.array([1.0, -1.0, -1.0, 1.0])}.get(
            pairs, np.array([1.0, 2.0, 3.0, 4.0])
        )
    with pytest.raises(InputError, match=match):
        estimator(**({"n_clusters": 2} | kwargs)).fit(data, sample_weight=sw)


def test_iris_type_2_ensemble_real_data():
    X = np.loadtxt(UCI / "iris.data.gz")
    y = np.loadtxt(UCI / "iris.labels0.gz", dtype=int)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    labels = np.column_stack(
        [KMeans(k, n_init=1, random_state=s).fit_predict(X) for k in (3, 4, 5, 6, 8, 10) for s in range(5)]
    )
    pairs = dense_coassociation(labels)
    for divergence in ("kl", "l2"):
        m = PCC(3, divergence=divergence, random_state=0).fit(pairs)
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
    obj, _ = PK.ppc_sparse_sweep(pairs.indptr, pairs.indices, x, np.ones(pairs.nnz), Y, Ynew)
    np.testing.assert_allclose(Ynew, expected, atol=1e-14)
    assert obj == pytest.approx(((C - Y @ Y.T) ** 2).sum())


@pytest.mark.parametrize("algorithm", ["rows", "baum-eagon"])
def test_ppc_objective_never_increases_converges_and_finds_blocks(algorithm):
    truth, pairs = _random_sparse_pairs(14, n=60, frac=0.6)
    co, both = pairs.to_dense()
    m = PPC(4, algorithm=algorithm, max_iter=20_000, random_state=0).fit(pairs)
    assert m.converged_
    trace = m.objective_trace_[:, 1]
    assert np.all(np.diff(trace) <= 1e-12 * trace[0])
    assert trace[-1] < trace[0]
    np.testing.assert_allclose(m.memberships_.sum(axis=1), 1.0, atol=1e-12)
    # objective and KKT gap against a dense NumPy transcription of P
    obj, gap = _ppc_reference(m.memberships_, co, both)
    assert m.objective_ == pytest.approx(obj, rel=1e-9)
    assert gap <= 1e-3 * (1 + 1e-6)
    assert h_criterion(m.labels_, truth) == 1.0


def test_ppc_algorithms_reach_the_same_fit():
    _, pairs = _random_sparse_pairs(15, n=40, frac=0.5)
    a = PPC(3, algorithm="rows", tol=1e-7, max_iter=10_000, random_state=2).fit(pairs)
    b = PPC(3, algorithm="baum-eagon", tol=1e-7, max_iter=100_000, init=a.labels_).fit(pairs)
    assert a.converged_ and b.converged_
    assert a.objective_ == pytest.approx(b.objective_, rel=1e-5)
    np.testing.assert_allclose(a.memberships_, b.memberships_, atol=1e-3)


# --------------------------------------------------------------------------- properties


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(3, 14),
    k=st.integers(2, 4),  # (a consensus of one cluster is refused, as by every method)
    divergence=st.sampled_from(["kl", "l2"]),
)
def test_property_descent_stochastic_and_objective_is_eq_3(seed, n, k, divergence):
    k = min(k, n)
    rng = np.random.default_rng(seed)
    labels = rng.integers(-1, 3, size=(n, 6))
    co, both = dense_coassociation(labels)
    if not (both[~np.eye(n, dtype=bool)] > 0).any():
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = PCC(k, divergence=divergence, max_iter=20, random_state=seed).fit((co, both))
    Y = a.memberships_
    assert Y.min() >= 0
    np.testing.assert_allclose(Y.sum(axis=1), 1.0, atol=1e-12)
    assert a.objective_ == pytest.approx(_f_reference(Y, co, both, divergence), rel=1e-9, abs=1e-9)
    start = PCC(k, divergence=divergence, max_iter=0, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start.fit((co, both))
    assert a.objective_ <= start.objective_ * (1 + 1e-12) + 1e-12


@pytest.mark.parametrize("cls", [PCC, PPC])
def test_candidate_starts_descend_from_the_lower_objective(cls):
    """A list of starts: the estimator evaluates its objective at each and descends from the lowest,
    whatever the order of the list (here the true partition against a random labelling)."""
    from ensemble_dask.coassoc import coassociation

    rng = np.random.default_rng(3)
    truth = np.repeat(np.arange(3), 40)
    labels = np.column_stack(
        [np.where(rng.random(120) < 0.9, truth, rng.integers(0, 3, 120)) for _ in range(15)]
    )
    pairs = coassociation(labels, strategy="per-point", l=20, seed=0)
    bad = rng.integers(0, 3, 120)
    alone = cls(3, init=truth, random_state=0).fit(pairs)
    for starts in ([bad, truth], [truth, bad]):
        picked = cls(3, init=starts, random_state=0).fit(pairs)
        np.testing.assert_allclose(picked.memberships_, alone.memberships_)
    # at a tight tolerance (the default from a given start, 3e-2, may stop either run early; PCC-KL at 1e-3
    # from the bad start still ends 0.6% lower than from the truth, 95.82 against 96.42; at 1e-5 both are at
    # the same optimum within 1e-8)
    tight = cls(3, init=truth, tol=1e-5, random_state=0).fit(pairs)
    from_bad = cls(3, init=bad, tol=1e-5, random_state=0).fit(pairs)
    assert tight.objective_ <= from_bad.objective_ * (1 + 1e-9)  # the same optimum: rounding either way


def test_kl_from_hard_labels_descends_l2_first():
    """PCC-KL from a start of hard labels is a pass of PCC-L2's descent from it (the first pass of PCC-L2 with
    max_iter=1), then KL from there (KL's derivative is unbounded at a vertex); from a soft start it descends
    KL alone."""
    from ensemble_dask.coassoc import coassociation
    from ensemble_dask.consensus import KCC

    _, labels = _blocks(5, sizes=(40, 30, 20), noise=0.3)
    pairs = coassociation(labels, strategy="per-point", l=20, seed=0)
    start = KCC(3, random_state=0).fit(labels).labels_
    kl = PCC(3, divergence="kl", init=start, random_state=0).fit(pairs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        l2 = PCC(3, divergence="l2", init=start, max_iter=1, random_state=0).fit(pairs)
    then = PCC(3, divergence="kl", init=l2.memberships_, random_state=0).fit(pairs)
    np.testing.assert_allclose(kl.memberships_, then.memberships_, atol=1e-9)
    assert kl.objective_ == pytest.approx(then.objective_, rel=1e-9) and kl.converged_
    assert not np.allclose(l2.memberships_, kl.memberships_)  # the KL descent did run after it


def test_sample_weights_on_converted_pairs_keep_the_unobserved_ones_weighed_out():
    """Sample weights given with pairs already converted (``as_pair_data(..., keep_unobserved=True)``, as a
    caller that converts once does) still weigh the pairs never both present out, and the caller's weights
    are left as they are: the fit on the counts with the same weights."""
    from ensemble_dask.consensus._common.base import as_pair_data

    _, pairs = _random_sparse_pairs(4, n=60, frac=0.5)
    co, both = pairs.to_dense()
    iu, ju = np.triu_indices(60, 1)
    pick = np.flatnonzero(both[iu, ju] == 0)[:40]
    rows, cols = pairs.rows(), pairs.indices
    keep = rows < cols
    with_zero = PairCounts.from_pairs(
        60,
        np.concatenate([rows[keep], iu[pick]]),
        np.concatenate([cols[keep], ju[pick]]),
        np.concatenate([pairs.co[keep], np.zeros(pick.size, dtype=np.int32)]),
        np.concatenate([pairs.both[keep], np.zeros(pick.size, dtype=np.int32)]),
        pairs.n_clusterings,
    )
    data = as_pair_data(with_zero, keep_unobserved=True)
    assert data.unobserved == 2 * pick.size
    Wt = np.triu(np.random.default_rng(1).uniform(0.5, 2.0, size=(60, 60)), 1)
    sw = (Wt + Wt.T)[with_zero.rows(), with_zero.indices]  # symmetric
    before = sw.copy()
    for est in (PPC(3, random_state=0), PCC(3, divergence="l2", random_state=0)):
        a = est.fit(with_zero, sample_weight=sw)
        a_f, a_y = a.objective_, a.memberships_.copy()
        b = est.fit(data, sample_weight=sw)
        assert b.objective_ == a_f
        np.testing.assert_array_equal(b.memberships_, a_y)
    np.testing.assert_array_equal(sw, before)
