"""The pair methods' shortcuts equal the plain computation: pair CSR without a global sort, starts on the
distinct label rows, the start choice from label changes, the descent's passes; tol="auto" and the cocluster
default l."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score

from ensemble_dask import InputError
from ensemble_dask.coassoc import _kernels as CK
from ensemble_dask.coassoc import coassociation, dense_coassociation
from ensemble_dask.coassoc.counting import PairCounts, count_pairs
from ensemble_dask.coassoc.sampling import _make_sampler, _sample_keys, sample_pairs
from ensemble_dask.consensus._common import pair_kernels as PK
from ensemble_dask.consensus._common.base import as_pair_data
from ensemble_dask.consensus._common.encoding import compress_rows
from ensemble_dask.consensus.baselines import HBGF
from ensemble_dask.consensus.kcc import KCC
from ensemble_dask.consensus.pcc import PCC, PPC
from ensemble_dask.consensus.pcc import _kernels as K
from ensemble_dask.consensus.pcc import _sweep as SW
from ensemble_dask.consensus.pcc._pcc import _best_start, check_init
from ensemble_dask.consensus.starts import label_starts
from ensemble_dask.stages.coassoc import default_pairs_per_point, resolve_strategy
from ensemble_dask.stages.consensus import TooFewPairsWarning, _check_pairs_per_point


def _labels(n=300, n_clust=8, k=4, missing=0.0, seed=0):
    """Noisy copies of a k-block truth; ``missing`` of the entries set to -1."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n)
    labels = np.column_stack(
        [np.where(rng.random(n) < 0.8, truth, rng.integers(0, k + 2, n)) for _ in range(n_clust)]
    )
    labels[rng.random(labels.shape) < missing] = -1
    return truth, labels.astype(np.int32)


# --------------------------------------------------------------------------- pairs


@pytest.mark.parametrize(
    "strategy, params", [("cocluster", {"l": 7}), ("per-point", {"l": 5}), ("uniform", {"p": 0.02})]
)
@pytest.mark.parametrize("missing", [0.0, 0.3])
def test_coassociation_equals_sorted_pairs_counted(strategy, params, missing):
    """The O(pairs) CSR equals the old path: globally sorted unique keys, counted, PairCounts.from_pairs."""
    _, labels = _labels(n=400, missing=missing, seed=1)
    pc = coassociation(labels, strategy=strategy, seed=5, block_size=64, **params)
    sampler = _make_sampler(strategy, labels.shape[0], 5, 64, params)
    keys = _sample_keys(sampler, labels)
    i, j = keys // sampler.n, keys % sampler.n
    co, both = count_pairs(labels, i, j)
    ref = PairCounts.from_pairs(sampler.n, i, j, co, both, labels.shape[1])
    for name in ("indptr", "indices", "co", "both"):
        np.testing.assert_array_equal(getattr(pc, name), getattr(ref, name))
    si, sj = sample_pairs(strategy, labels.shape[0], seed=5, labels=labels, block_size=64, **params)
    np.testing.assert_array_equal(si, i)
    np.testing.assert_array_equal(sj, j)


def test_upper_csr_kernel_sorts_and_deduplicates():
    n = 7
    pairs = [(3, 5), (0, 6), (3, 4), (0, 6), (3, 5), (1, 2), (0, 1)]
    keys = np.array([i * n + j for i, j in pairs], dtype=np.int64)
    indptr, cols = CK.upper_csr_kernel(keys, n)
    assert indptr.tolist() == [0, 2, 3, 3, 5, 5, 5, 5]
    assert cols.tolist() == [1, 6, 2, 4, 5]


def test_upper_csr_kernel_long_and_short_rows_equal_a_global_sort():
    """Rows of up to 32 entries are sorted in place, longer ones by a sort call: both give np.unique's
    order."""
    rng = np.random.default_rng(0)
    n = 500
    i = np.concatenate([rng.integers(0, n - 1, 3000), np.zeros(200, dtype=np.int64), np.full(40, 7)])
    j = np.minimum(i + 1 + rng.integers(0, 60, i.size), n - 1)
    keys = i * n + j
    indptr, cols = CK.upper_csr_kernel(rng.permutation(keys), n)
    ref = np.unique(keys)
    np.testing.assert_array_equal(cols, ref % n)
    np.testing.assert_array_equal(indptr, np.searchsorted(ref // n, np.arange(n + 1)))
    assert np.diff(indptr).max() > 32 and np.median(np.diff(indptr)[np.diff(indptr) > 0]) <= 32


@pytest.mark.parametrize("strategy, params", [("cocluster", {"l": 6}), ("per-point", {"l": 4})])
def test_coassociation_on_threads_equals_one_thread(monkeypatch, strategy, params):
    """Seed blocks drawn, cluster index built and pairs counted on threads: the very same store."""
    import ensemble_dask.coassoc.counting as counting
    import ensemble_dask.coassoc.sampling as sampling

    _, labels = _labels(n=3000, n_clust=5, missing=0.2, seed=3)
    one = coassociation(labels, strategy=strategy, seed=2, block_size=100, **params)
    monkeypatch.setattr(sampling, "THREADED_ROWS", 10)
    monkeypatch.setattr(counting, "THREADED_ROWS", 10)
    monkeypatch.setattr(sampling, "THREADED_LABELS", 10)
    monkeypatch.setattr(sampling, "usable_cores", lambda: 3)  # more threads than this machine's cores
    monkeypatch.setattr(counting, "usable_cores", lambda: 3)
    threaded = coassociation(labels, strategy=strategy, seed=2, block_size=100, **params)
    for name in ("indptr", "indices", "co", "both"):
        np.testing.assert_array_equal(getattr(threaded, name), getattr(one, name))


def test_coassociation_counts_and_mirrors_like_a_plain_symmetric_csr(monkeypatch):
    """Pairs counted and written at both places in one pass, on 1 or 3 threads: the symmetric CSR of the
    sampled pairs and their counts, rows sorted, exactly (built here with NumPy from sample_pairs)."""
    import ensemble_dask.coassoc.counting as counting

    _, labels = _labels(n=2000, n_clust=6, missing=0.3, seed=5)
    i, j = sample_pairs("cocluster", 2000, seed=4, labels=labels, block_size=64, l=7)
    c, m = count_pairs(labels, i, j)
    rows, cols = np.concatenate([i, j]), np.concatenate([j, i])
    order = np.lexsort((cols, rows))
    indptr = np.searchsorted(rows[order], np.arange(2001))
    for threads in (1, 3):
        monkeypatch.setattr(counting, "THREADED_ROWS", 10)
        monkeypatch.setattr(counting, "usable_cores", lambda t=threads: t)
        pc = coassociation(labels, strategy="cocluster", seed=4, block_size=64, l=7)
        np.testing.assert_array_equal(pc.indptr, indptr)
        np.testing.assert_array_equal(pc.indices, cols[order])
        np.testing.assert_array_equal(pc.co, np.concatenate([c, c])[order])
        np.testing.assert_array_equal(pc.both, np.concatenate([m, m])[order])
        assert pc.indices.dtype == np.int32 and pc.co.dtype == np.int32 and pc.indptr.dtype == np.int64


# --------------------------------------------------------------------------- starts


def test_label_starts_leave_out_clusterings_of_one_label():
    """A base clustering that puts every point in one cluster separates nothing: the starts are those of
    the other clusterings (KCC and HBGF would refuse it), and PCC starts from them."""
    truth, labels = _labels(n=300, seed=9)
    with_const = np.column_stack([labels, np.full(300, 3, dtype=np.int32)])
    starts = label_starts(with_const, 4, random_state=0)
    for a, b in zip(starts, label_starts(labels, 4, random_state=0), strict=True):
        np.testing.assert_array_equal(a, b)
    pc = coassociation(with_const, strategy="per-point", l=20, seed=0)
    model = PCC(4, init=starts, random_state=0).fit(pc)
    assert adjusted_rand_score(truth, model.labels_) > 0.9


def test_kcc_on_distinct_rows_with_weights_equals_kcc_on_every_row():
    """Rows weighted by multiplicity: the same centroids and objective as the full matrix from the same
    explicit centroids (k-means++ draws differ, the Lloyd fit does not)."""
    _, labels = _labels(n=500, missing=0.2, seed=2)
    rows, mult, inv = compress_rows(labels)
    assert rows.shape[0] < labels.shape[0]
    start = KCC(4, random_state=0).fit(labels)
    init = np.concatenate(start.cluster_centers_, axis=1)
    full = KCC(4, init=init).fit(labels)
    weighted = KCC(4, init=init).fit(rows, sample_weight=mult)
    np.testing.assert_array_equal(weighted.labels_[inv], full.labels_)
    np.testing.assert_allclose(weighted.objective_, full.objective_, rtol=1e-12)
    for a, b in zip(weighted.cluster_centers_, full.cluster_centers_, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-12)
    seeded = KCC(4, n_init=3, random_state=1).fit(rows, sample_weight=mult)  # k-means++ with weighted picks
    assert seeded.converged_ and seeded.effective_k_ == 4


def test_hbgf_on_distinct_rows_with_weights_equals_hbgf_on_every_row():
    _, labels = _labels(n=500, missing=0.2, seed=3)
    rows, mult, inv = compress_rows(labels)
    full = HBGF(4, random_state=0).fit(labels)
    weighted = HBGF(4, random_state=0).fit(rows, sample_weight=mult)
    assert adjusted_rand_score(weighted.labels_[inv], full.labels_) == 1.0  # the same partition


@pytest.mark.parametrize("cls", [KCC, HBGF])
def test_sample_weight_bad_input(cls):
    _, labels = _labels(n=50)
    for bad in (np.ones(49), -np.ones(50), np.full(50, np.nan)):
        with pytest.raises(InputError, match="'sample_weight' parameter must hold 50 positive"):
            cls(3).fit(labels, sample_weight=bad)


def test_label_starts_recover_the_blocks():
    truth, labels = _labels(n=400, seed=4)
    for start in label_starts(labels, 4, random_state=0):
        assert start.shape == (400,)
        # each start is a partition close to the truth
        table = np.bincount(truth * 4 + start, minlength=16).reshape(4, 4)
        assert table.max(axis=1).sum() >= 0.95 * 400


# --------------------------------------------------------------------------- start choice


def _pair_data(labels, seed=0):
    pc = coassociation(labels, strategy="cocluster", l=8, seed=seed)
    data = as_pair_data(pc, None)
    return pc, data, data.indices.astype(np.int32)


@pytest.mark.parametrize("code", [K.KL, K.L2])
def test_objective_from_labels_and_its_change_equal_the_objective(code):
    truth, labels = _labels(n=300, seed=5)
    _, data, ind = _pair_data(labels)
    rng = np.random.default_rng(0)
    other = np.where(rng.random(300) < 0.1, rng.integers(0, 4, 300), truth)
    fa = K.objective(data.indptr, ind, data.x, data.w, check_init(truth, 300, 4), code, 1e-10, 0.0)
    fb = K.objective(data.indptr, ind, data.x, data.w, check_init(other, 300, 4), code, 1e-10, 0.0)
    np.testing.assert_allclose(
        PK.objective_labels(data.indptr, ind, data.x, data.w, truth, code, 1e-10), fa, rtol=1e-12
    )
    change = PK.objective_change_labels(data.indptr, ind, data.x, data.w, truth, other, code, 1e-10)
    np.testing.assert_allclose(fa + change, fb, rtol=1e-10)


def test_best_start_picks_the_lowest_objective_and_reports_it():
    truth, labels = _labels(n=300, seed=6)
    _, data, ind = _pair_data(labels)
    rng = np.random.default_rng(1)
    noisy = np.where(rng.random(300) < 0.3, rng.integers(0, 4, 300), truth)
    relabelled = (truth + 1) % 4  # the same partition: the same objective
    for cands in ([noisy, truth], [truth, noisy], [relabelled, noisy]):
        Ys = check_init(cands, 300, 4)
        best, f = _best_start(Ys, data, data.w, ind, K.KL, 0.0)
        exact = [K.objective(data.indptr, ind, data.x, data.w, Y, K.KL, 1e-10, 0.0) for Y in Ys]
        assert best is Ys[int(np.argmin(exact))]
        np.testing.assert_allclose(f, min(exact), rtol=1e-10)
    # candidates given as vertex labels: the same choice and objective, and the chosen one as its matrix
    for cands in ([noisy, truth], [relabelled, noisy]):
        labs = check_init(cands, 300, 4, vertex_labels=True)
        assert all(lab.shape == (300,) for lab in labs)
        best, f = _best_start(labs, data, data.w, ind, K.KL, 0.0, 4)
        Ys = check_init(cands, 300, 4)
        exact = [K.objective(data.indptr, ind, data.x, data.w, Y, K.KL, 1e-10, 0.0) for Y in Ys]
        np.testing.assert_array_equal(best, Ys[int(np.argmin(exact))])
        np.testing.assert_allclose(f, min(exact), rtol=1e-10)
    # a start that uses fewer labels than n_clusters keeps its K columns
    best, _ = _best_start(
        check_init(np.zeros(300, dtype=int), 300, 4, vertex_labels=True), data, data.w, ind, K.KL, 0.0, 4
    )
    assert best.shape == (300, 4) and np.all(best[:, 0] == 1.0)
    soft = [np.full((300, 4), 0.25) + 0.01 * np.eye(4)[truth], check_init(noisy, 300, 4)]  # not vertices
    best, f = _best_start(soft, data, data.w, ind, K.L2, 0.0)
    exact = [K.objective(data.indptr, ind, data.x, data.w, Y, K.L2, 1e-10, 0.0) for Y in soft]
    assert best is soft[int(np.argmin(exact))] and f == min(exact)
    # one candidate and no need of its objective (PCC-KL): the start as a matrix, f not computed
    one = check_init(truth, 300, 4, vertex_labels=True)
    best, f = _best_start(one, data, data.w, ind, K.KL, 0.0, 4, need_f=False)
    np.testing.assert_array_equal(best, check_init(truth, 300, 4))
    assert np.isnan(f)


def test_vertex_starts_are_chosen_by_their_changes_alone_when_f_is_not_needed(monkeypatch):
    """Without ``need_f`` (the estimators: PCC-KL's descent starts from an L2 pass, PCC-L2's and PPC's first
    pass sums f) several hard-label starts (a user's ``init=[...]``) are compared by f(B) - f(A) alone: f(A)
    was a pass over every pair, with KL's logarithms (HBGF's and KCC's labels at 500,000 points, K = 8:
    0.23 s). The same choice; f is nan."""
    import ensemble_dask.consensus.pcc._starts as starts_module

    truth, labels = _labels(n=300, seed=6)
    _, data, ind = _pair_data(labels)
    rng = np.random.default_rng(1)
    noisy = np.where(rng.random(300) < 0.3, rng.integers(0, 4, 300), truth)
    passes = []
    real = starts_module._pairk.objective_labels
    monkeypatch.setattr(
        starts_module._pairk, "objective_labels", lambda *a: passes.append(1) or real(*a), raising=True
    )
    for cands in ([noisy, truth], [truth, noisy], [(truth + 1) % 4, noisy, truth]):
        for code in (K.KL, K.L2):
            Ys = check_init(cands, 300, 4)
            chosen, f = _best_start(Ys, data, data.w, ind, code, 0.0, need_f=False)
            assert passes == [] and np.isnan(f)
            exact = [K.objective(data.indptr, ind, data.x, data.w, Y, code, 1e-10, 0.0) for Y in Ys]
            np.testing.assert_array_equal(chosen, Ys[int(np.argmin(exact))])
            labs = check_init(cands, 300, 4, vertex_labels=True)
            chosen, f = _best_start(labs, data, data.w, ind, code, 0.0, 4, need_f=False, matrix=False)
            assert passes == [] and np.isnan(f)
            np.testing.assert_array_equal(chosen, labs[int(np.argmin(exact))])


def test_pcc_kl_from_hard_labels_is_unchanged_by_skipping_the_unread_objectives():
    """PCC-KL from hard labels neither computes the start's KL objective nor the L2 objective of its L2
    pass (neither is read): f, its trace and the memberships are those of the L2 pass (PCC-L2 with max_iter=1)
    then KL with the objective computed from scratch."""
    truth, labels = _labels(n=300, seed=8)
    pc, data, ind = _pair_data(labels)
    kl = PCC(4, divergence="kl", init=truth, random_state=0).fit(pc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        l2 = PCC(4, divergence="l2", init=truth, max_iter=1, random_state=0).fit(pc)
    then = PCC(4, divergence="kl", init=l2.memberships_, random_state=0).fit(pc)
    np.testing.assert_allclose(kl.memberships_, then.memberships_, atol=1e-9)
    np.testing.assert_allclose(kl.objective_trace_, then.objective_trace_, rtol=1e-9)
    f = K.objective(data.indptr, ind, data.x, data.w, kl.memberships_, K.KL, 1e-10, 0.0)
    assert kl.objective_ == pytest.approx(f, rel=1e-9)


@pytest.mark.parametrize(
    "make", [lambda i: PCC(4, init=i), lambda i: PCC(4, divergence="l2", init=i), lambda i: PPC(4, init=i)]
)
def test_descent_from_a_list_equals_descent_from_its_best_start(make):
    """The start's objective handed to the descent is the objective: the fit and its trace are the same as
    from that start alone (which computes it itself)."""
    truth, labels = _labels(n=300, seed=7)
    pc, _, _ = _pair_data(labels)
    rng = np.random.default_rng(2)
    noisy = np.where(rng.random(300) < 0.3, rng.integers(0, 4, 300), truth)
    alone = make(truth).fit(pc)
    listed = make([noisy, truth]).fit(pc)
    np.testing.assert_array_equal(listed.memberships_, alone.memberships_)
    np.testing.assert_allclose(listed.objective_trace_, alone.objective_trace_, rtol=1e-10)
    assert np.all(np.diff(listed.objective_trace_[:, 1]) <= 1e-9 * abs(listed.objective_trace_[0, 1]))


# --------------------------------------------------------------------------- tolerance and defaults


def test_tol_auto_is_loose_from_a_given_start_and_tight_from_a_random_one():
    truth, labels = _labels(n=300, seed=8)
    pc, _, _ = _pair_data(labels)
    given = PCC(4, init=truth, random_state=0).fit(pc)
    given_loose = PCC(4, init=truth, tol=3e-2, random_state=0).fit(pc)
    np.testing.assert_array_equal(given.memberships_, given_loose.memberships_)
    rand = PCC(4, random_state=0).fit(pc)
    rand_tight = PCC(4, tol=1e-3, random_state=0).fit(pc)
    np.testing.assert_array_equal(rand.memberships_, rand_tight.memberships_)
    assert given.converged_ and given.kkt_gap_ <= 3e-2 and rand.kkt_gap_ <= 1e-3
    with pytest.raises(InputError, match="'tol'"):
        PCC(4, tol="loose").fit(pc)


def test_cap_is_still_reported_with_tol_auto():
    truth, labels = _labels(n=300, seed=9)
    pc, _, _ = _pair_data(labels)
    with pytest.warns(ConvergenceWarning):
        est = PCC(4, init=(truth + 1) % 4 * (np.arange(300) % 2), max_iter=1).fit(pc)
    assert not est.converged_


def test_cocluster_default_pairs_per_point_and_warning():
    assert default_pairs_per_point(100, "cocluster") == 10
    assert default_pairs_per_point(100) == 200 and default_pairs_per_point(None) == 30
    assert resolve_strategy("auto", (1000, 20), {}, n_clusters=100) == ("cocluster", {"l": 10})
    assert resolve_strategy("per-point", (1000, 20), {}, n_clusters=100) == ("per-point", {"l": 200})
    _, labels = _labels(n=300)
    pc = coassociation(labels, strategy="cocluster", l=10, seed=0)  # about 20 partners per point
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _check_pairs_per_point(pc, 30, "cocluster")
    with pytest.warns(TooFewPairsWarning, match="2 K that n_clusters=30 needs"):
        _check_pairs_per_point(pc, 30, "per-point")
    few = coassociation(labels, strategy="cocluster", l=2, seed=0)
    with pytest.warns(TooFewPairsWarning, match="cocluster strategy's default l"):
        _check_pairs_per_point(few, 30, "cocluster")


def test_pair_data_one_pass_equals_the_checked_path():
    _, labels = _labels(n=200, missing=0.3, seed=10)
    pc = coassociation(labels, strategy="cocluster", l=6, seed=0)
    data = as_pair_data(pc.observed(), None)  # every N_ij > 0: the one-pass kernel
    kept = pc.both > 0
    np.testing.assert_array_equal(data.x, pc.co[kept] / pc.both[kept])
    np.testing.assert_array_equal(data.w, pc.both[kept].astype(np.float64))
    assert (pc.both == 0).any()
    before = [a.copy() for a in (pc.indptr, pc.indices, pc.co, pc.both)]
    zero = as_pair_data(pc, None)  # N_ij = 0 entries present: dropped in one pass (compact_observed)
    for name in ("x", "w", "indptr", "indices"):
        np.testing.assert_array_equal(getattr(zero, name), getattr(data, name))
    for a, b in zip(before, (pc.indptr, pc.indices, pc.co, pc.both), strict=True):
        np.testing.assert_array_equal(a, b)  # the caller's pairs are left whole
    weighted = as_pair_data(pc, np.ones(pc.nnz))  # with weights: the checked path, the same pairs
    np.testing.assert_array_equal(weighted.indices, data.indices)
    co = pc.co.copy()
    co[np.flatnonzero(kept)[0]] = 99
    bad = PairCounts(pc.indptr, pc.indices, co, pc.both, pc.n_clusterings)
    with pytest.raises(InputError, match="c_ij <= N_ij; got c=99"):
        as_pair_data(bad, None)


@pytest.mark.parametrize("missing", [0.0, 0.3])
def test_int32_counts_as_weights_fit_as_their_float64_copy(missing):
    """Without sample weights the pair weights are int32, the counts themselves (no float64 copy) or PPC's
    ones: PCC-KL and PCC-L2 from labels or at random, and PPC, end at the same f, trace, memberships and
    labels as on float64 weights (a PairData of them, or unit sample weights, whose product is float64)."""
    from ensemble_dask.consensus._common.base import PairData

    _, labels = _labels(n=400, missing=missing, seed=11)
    pc = coassociation(labels, strategy="cocluster", l=7, seed=0).observed()
    data = as_pair_data(pc, None)
    assert data.w.dtype == np.int32 and np.shares_memory(data.w, pc.both)
    assert as_pair_data(dense_coassociation(labels[:50])).w.dtype == np.int32
    f64 = PairData(data.n, data.indptr, data.indices, data.x, data.w.astype(np.float64))
    start = label_starts(labels, 4, random_state=0)
    for make in (
        lambda: PCC(4, init=start),
        lambda: PCC(4, init=start, divergence="l2"),
        lambda: PCC(4, random_state=0),
        lambda: PPC(4, init=start),
    ):
        a = make().fit(pc)
        for b in (make().fit(f64), make().fit(pc, sample_weight=np.ones(pc.nnz))):
            assert a.objective_ == b.objective_ and a.kkt_gap_ == b.kkt_gap_
            np.testing.assert_array_equal(a.objective_trace_, b.objective_trace_)
            np.testing.assert_array_equal(a.memberships_, b.memberships_)
            np.testing.assert_array_equal(a.labels_, b.labels_)


def test_hbgf_compares_its_kmeans_starts_on_a_sample_of_many_rows(monkeypatch):
    """Above KMEANS_SAMPLE distinct rows the n_init starts run on a sample and the best is refined on all:
    the same partition of a clear ensemble as the n_init full runs, deterministic for a seed."""
    from ensemble_dask.consensus.baselines import _labels as baselines_labels

    truth, labels = _labels(n=3000, missing=0.4, seed=12)
    rows, mult, inv = compress_rows(labels)
    assert rows.shape[0] > 1000
    full = HBGF(4, random_state=0).fit(rows, sample_weight=mult).labels_
    monkeypatch.setattr(baselines_labels, "KMEANS_SAMPLE", 200)
    sampled = HBGF(4, random_state=0).fit(rows, sample_weight=mult).labels_
    again = HBGF(4, random_state=0).fit(rows, sample_weight=mult).labels_
    np.testing.assert_array_equal(sampled, again)
    assert adjusted_rand_score(sampled, full) > 0.98
    assert adjusted_rand_score(truth, sampled[inv]) >= adjusted_rand_score(truth, full[inv]) - 0.01 > 0.9


def test_label_starts_on_blas_threads_equal_the_one_thread_ones(monkeypatch):
    """Many distinct rows: HBGF on the BLAS/OpenMP pools, with the result of the one-thread path."""
    from ensemble_dask.consensus import starts

    _, labels = _labels(n=600, missing=0.4, seed=13)
    one = label_starts(labels, 4, random_state=0)
    monkeypatch.setattr(starts, "ONE_THREAD_ROWS", 10)
    many = label_starts(labels, 4, random_state=0)
    np.testing.assert_array_equal(one[0], many[0])


def test_label_starts_draw_an_int_seed_from_a_generator(monkeypatch):
    """HBGF gets an int seed drawn from a Generator (the draw is the same wherever it runs); an int seed is
    passed on as it is."""
    from ensemble_dask.consensus import starts

    seen = []
    real = starts.HBGF
    monkeypatch.setattr(starts, "HBGF", lambda *a, **kw: seen.append(kw["random_state"]) or real(*a, **kw))
    _, labels = _labels(n=300, missing=0.4, seed=14)
    first = label_starts(labels, 4, random_state=np.random.default_rng(0))
    again = label_starts(labels, 4, random_state=np.random.default_rng(0))
    np.testing.assert_array_equal(first[0], again[0])
    assert len(seen) == 2 and isinstance(seen[0], int) and seen[0] == seen[1]
    seen.clear()
    label_starts(labels, 4, random_state=7)
    assert seen == [7]


def test_label_starts_with_fewer_distinct_rows_than_clusters():
    """Three distinct label rows, K = 5: one start, each distinct row its own cluster (no error)."""
    labels = np.repeat(np.array([[0, 0], [1, 1], [2, 1]]), 10, axis=0)
    (start,) = label_starts(labels, 5, random_state=0)
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(start, np.repeat([0, 1, 2], 10)) == 1.0 and start.max() < 5


@pytest.mark.parametrize("n, width", [(1, 2), (7, 16), (1000, 6)])
def test_aligned_rows_is_an_aligned_c_array_of_the_shape(n, width):
    """The descent's ``n x 2K`` array starts on a cache line (a row of 16 floats: two lines, not three)."""
    Y = K.aligned_rows(n, width)
    assert Y.shape == (n, width) and Y.dtype == np.float64 and Y.flags.c_contiguous and Y.flags.writeable
    assert Y.ctypes.data % 64 == 0
    Y[:] = 1.0
    assert Y.sum() == n * width


def test_pcc_descends_in_its_own_array_made_from_the_start():
    """PCC writes its start (hard labels: their one-hot rows) straight into the descent's aligned n x 2K
    array, where PCC-KL's L2 pass runs too, with no n x K copy first (pcc_rows_on): the fit ends where
    pcc_rows ends from the start's matrix, bit for bit, for PCC-KL and PCC-L2 from labels, a matrix or at
    random, capped or not; PCC from labels ends where it ends from their one-hot matrix."""
    from ensemble_dask.consensus.pcc import _pcc
    from ensemble_dask.consensus.pcc._pcc import _work_rows

    truth, labels = _labels(n=300, missing=0.2, seed=9)
    lab = check_init(truth, 300, 4, vertex_labels=True)
    onehot = np.zeros((300, 4))
    onehot[np.arange(300), truth] = 1.0
    for start in (lab, onehot):
        Y = _work_rows(start, 4)
        assert Y.shape == (300, 8) and Y.ctypes.data % 64 == 0
        np.testing.assert_array_equal(Y[:, :4], onehot)
    pc, data, ind = _pair_data(labels)
    soft = np.random.default_rng(3).dirichlet(np.ones(4), 300)
    for kw in ({"divergence": "kl"}, {"divergence": "l2"}):
        code, closed = _pcc.DIVERGENCES[kw["divergence"]]
        for init, max_iter in ((truth, 300), (truth, 2), (soft, 300), ("random", 300)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                fit = PCC(4, init=init, max_iter=max_iter, random_state=0, **kw).fit(pc)
            # the same fit by pcc_rows on an n x K start (the L2 pass on an aligned n x K copy, as before)
            scale = float(data.w.sum()) / 300
            gap_tol = (_pcc._TOL_RANDOM if isinstance(init, str) else _pcc._TOL_GIVEN) * scale
            if init is truth:
                Y = K.aligned_rows(300, 4)
                Y[:] = onehot
                if code == K.KL:
                    SW.l2_sweep_rows(
                        data.indptr, ind, data.x, data.w, Y, 4, 0, 300, gap_tol, 0.5 * gap_tol, 28
                    )
            elif init is soft:
                Y = check_init(soft, 300, 4)
            else:
                Y = np.random.default_rng(0).dirichlet(np.full(4, 10.0), size=300)
            tol_start = 0.1 * scale if isinstance(init, str) else gap_tol
            trace, stats = np.empty(max_iter + 1), np.zeros(3, dtype=np.int64)
            passes, f, gap, conv = K.pcc_rows(
                data.indptr, ind, data.x, data.w, Y, code, closed, 1e-10, 0.0, 1e-4, gap_tol, 0.5 * gap_tol,
                max_iter, 28, trace, stats, np.nan, tol_start,
            )  # fmt: skip
            assert fit.objective_ == f and fit.n_iter_ == passes and fit.converged_ == conv
            np.testing.assert_array_equal(fit.memberships_, Y)
            np.testing.assert_array_equal(fit.objective_trace_[:, 1], trace[: passes + 1])
            assert fit.memberships_.flags.c_contiguous and fit.memberships_.flags.owndata
        a, b = PCC(4, init=truth, **kw).fit(pc), PCC(4, init=onehot, **kw).fit(pc)
        assert a.objective_ == b.objective_
        np.testing.assert_array_equal(a.memberships_, b.memberships_)


@pytest.mark.parametrize(
    "code, closed, diag", [(K.KL, False, 0.0), (K.L2, True, 0.0), (K.L2, False, 1.0), (K.L2, True, 1.0)]
)
@pytest.mark.parametrize("max_passes", [0, 1, 300])
def test_descent_sums_the_start_objective_in_its_first_pass(code, closed, diag, max_passes):
    """``pcc_rows`` without ``f_start`` sums f(Y) in its first pass: the trace starts at f of the start and
    ends at f of the result, as when f is given (at most rounding apart), and the memberships are the same."""
    truth, labels = _labels(n=300, seed=9)
    _, data, ind = _pair_data(labels)
    rng = np.random.default_rng(4)
    start = rng.dirichlet(np.full(4, 10.0), size=300)
    w = data.w if diag == 0.0 else np.ones(data.nnz)
    gap_tol = 1e-3 * (w.sum() / 300 + diag)
    runs = []
    for given in (False, True):
        Y = start.copy()
        f0 = K.objective(data.indptr, ind, data.x, w, start, code, 1e-10, diag) if given else np.nan
        trace = np.full(max_passes + 1, -1.0)
        out = K.pcc_rows(
            data.indptr, ind, data.x, w, Y, code, closed, 1e-10, diag, 1e-4, gap_tol, 0.5 * gap_tol,
            max_passes, 28, trace, np.zeros(3, dtype=np.int64), f0, 10.0 * gap_tol,
        )  # fmt: skip
        runs.append((Y, trace[: out[0] + 1], out))
    (Ya, ta, oa), (Yb, tb, ob) = runs
    np.testing.assert_array_equal(Ya, Yb)
    assert oa[0] == ob[0] and oa[3] == ob[3]
    np.testing.assert_allclose(ta, tb, rtol=1e-12)
    f_end = K.objective(data.indptr, ind, data.x, w, Ya, code, 1e-10, diag)
    f_start = K.objective(data.indptr, ind, data.x, w, start, code, 1e-10, diag)
    assert ta[0] == pytest.approx(f_start, rel=1e-12)
    assert oa[1] == pytest.approx(f_end, rel=1e-9) and ta[-1] == pytest.approx(f_end, rel=1e-9)


@pytest.mark.parametrize("start_seed", [4, 5])
def test_ppc_descent_with_the_closed_form_decrease_check_is_the_loops(start_seed):
    """PPC's descent (L2, diagonal term) checks that f went down along a step from the pairs' part in closed
    form (``closed_form=True``, as PPC runs it) instead of a loop over the row's pairs: the same memberships,
    passes and f as the loop (``closed_form=False``), up to rounding."""
    _, labels = _labels(n=300, seed=9)
    _, data, ind = _pair_data(labels)
    start = np.random.default_rng(start_seed).dirichlet(np.full(4, 1.0), size=300)
    w = np.ones(data.nnz)
    gap_tol = 1e-3 * (w.sum() / 300 + 1.0)
    runs = []
    for closed in (False, True):
        Y = start.copy()
        out = K.pcc_rows(
            data.indptr, ind, data.x, w, Y, K.L2, closed, 1e-10, 1.0, 1e-4, gap_tol, 0.5 * gap_tol, 300, 28,
            np.empty(301), np.zeros(3, dtype=np.int64), np.nan, 10.0 * gap_tol,
        )  # fmt: skip
        runs.append((Y, out))
    (Ya, oa), (Yb, ob) = runs
    np.testing.assert_allclose(Ya, Yb, rtol=0, atol=1e-12)
    assert oa[0] == ob[0] and oa[3] and ob[3]
    assert ob[1] == pytest.approx(oa[1], rel=1e-12)


@pytest.mark.parametrize("split", [None, 170])
@pytest.mark.parametrize("start_kind", ["labels", "soft"])
def test_l2_sweep_is_the_first_pass_of_the_l2_descent(split, start_kind):
    """``l2_sweep_rows`` (the L2 pass PCC-KL starts with from hard labels) gives the memberships of the first
    pass of ``descend_rows`` on L2 bit for bit, without the kept gradients and f; over row ranges in turn (the
    stored pairs' blocks) as over every row."""
    truth, labels = _labels(n=300, seed=9)
    _, data, ind = _pair_data(labels)
    rng = np.random.default_rng(2)
    if start_kind == "labels":
        start = np.eye(4)[np.where(rng.random(300) < 0.3, rng.integers(0, 4, 300), truth)]
    else:
        start = rng.dirichlet(np.full(4, 10.0), size=300)
    gap_tol = 3e-2 * data.w.sum() / 300
    Y = K.aligned_rows(300, 8)
    Y[:, :4] = start
    K.descend_rows(
        data.indptr, ind, data.x, data.w, Y, 4, np.ones(300, dtype=np.bool_), 0, 300, K.L2, True, 1e-10, 0.0,
        1e-4, gap_tol, 0.5 * gap_tol, 1, 28, np.empty(2), np.zeros(3, dtype=np.int64), 0.0, gap_tol,
    )  # fmt: skip
    S = start.copy()
    bounds = [0, 300] if split is None else [0, split, 300]
    for row0, row1 in zip(bounds[:-1], bounds[1:], strict=True):
        lo, hi = data.indptr[row0], data.indptr[row1]
        SW.l2_sweep_rows(
            data.indptr[row0 : row1 + 1] - lo, ind[lo:hi], data.x[lo:hi], data.w[lo:hi], S, 4, row0, row1,
            gap_tol, 0.5 * gap_tol, 28,
        )  # fmt: skip
    assert not np.array_equal(S, start)
    np.testing.assert_array_equal(S, Y[:, :4])
    np.testing.assert_allclose(S.sum(axis=1), 1.0)


@pytest.mark.parametrize("seed, missing", [(3, 0.0), (4, 0.2)])
def test_pcc_kl_from_hard_labels_ends_lower_after_one_l2_pass(seed, missing):
    """PCC-KL from hard labels starts KL after one pass of L2, not after L2 to its tolerance (as it did): on
    these ensembles KL ends lower from there (by 2-6%), with the same labels."""
    truth, labels = _labels(n=600, k=4, missing=missing, seed=seed)
    pc, data, ind = _pair_data(labels)
    start = label_starts(labels, 4, random_state=0)
    kl = PCC(4, divergence="kl", init=start, random_state=0).fit(pc)
    l2 = PCC(4, divergence="l2", init=start, random_state=0).fit(pc)  # L2 to its tolerance
    old = PCC(4, divergence="kl", init=l2.memberships_, random_state=0).fit(pc)
    assert kl.objective_ < old.objective_
    assert adjusted_rand_score(kl.labels_, old.labels_) == 1.0


def test_prefetch_is_a_hint_on_any_row_and_column():
    """``prefetch(A, i, k)`` and ``prefetch1(a, i)`` compile for int32 and int64 indices and C or strided
    arrays, and change nothing (the descent and the pair count use them on the rows they read next)."""
    import numba

    from ensemble_dask.runtime.prefetch import prefetch, prefetch1

    @numba.njit
    def touch_all(A, rows):
        s = 0.0
        for i in rows:
            prefetch(A, i, 0)
            prefetch(A, i, A.shape[1] - 1)
            prefetch1(A[:, 0], i)
            s += A[i, 0]
        return s

    A = np.arange(40.0).reshape(10, 4)
    for rows in (np.arange(10, dtype=np.int32), np.arange(10)[::-1].copy()):
        before = A.copy()
        assert touch_all(A, rows) == A[:, 0].sum()
        assert touch_all(A[:, ::2], rows) == A[:, 0].sum()
        np.testing.assert_array_equal(A, before)
