"""GKCC's candidates run together (one pass over the rows per iteration for all of them): the same
labels, squared errors and convergence flags, bit for bit, as each candidate's own Lloyd run."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble_dask import InputError
from ensemble_dask.consensus._common.encoding import compress_rows, encode
from ensemble_dask.consensus.kcc import GKCC
from ensemble_dask.consensus.kcc._blocks import centers_from_partition
from ensemble_dask.consensus.kcc._gkcc import _prior_tol, run_candidate, run_candidates


def _labels(n=1500, N=16, seed=0, missing=0.3, dup=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    L = np.column_stack(
        [(y + (rng.random(n) < 0.25) * rng.integers(0, 3, n)) % rng.integers(2, 6) for _ in range(N)]
    )
    L[rng.random(L.shape) < missing] = -1
    if dup:  # repeated rows: weights above 1 after compress_rows
        L = np.vstack([L, L[rng.integers(0, n, dup)]])
    return L, y


def _setup(L, K, seed):
    g, enc = encode(L)
    g, w, _ = compress_rows(g)
    g = np.asarray(g, dtype=np.int32)
    prior, tol = _prior_tol(g, w, enc, 1e-4)
    rng = np.random.default_rng(seed)
    if K == 2:
        MT_prev = prior[:, None].copy()
    else:
        MT_prev = centers_from_partition(g, w, rng.integers(0, K - 1, g.shape[0]), K - 1, enc, prior)
    return g, w, enc, prior, tol, MT_prev, rng


@pytest.mark.parametrize("K", [2, 3, 5])
@pytest.mark.parametrize(("max_iter", "tol"), [(300, None), (300, 0.0), (2, None)])
def test_candidates_together_equal_each_alone(K, max_iter, tol):
    L, _ = _labels(dup=400, seed=K)
    g, w, enc, prior, tol0, MT_prev, rng = _setup(L, K, K)
    assert w.max() > 1  # the weighted (compressed) case
    tol = tol0 if tol is None else tol
    ids = rng.choice(g.shape[0], 9, replace=False)
    lab, sse, conv = run_candidates(g, w, enc, prior, MT_prev, g[ids], max_iter, tol)
    assert lab.dtype == np.int32 and lab.shape == (g.shape[0], 9)
    for j, i in enumerate(ids):
        ref_lab, ref_sse, ref_conv = run_candidate(g, w, enc, prior, MT_prev, g[i], max_iter, tol)
        np.testing.assert_array_equal(lab[:, j], ref_lab)
        assert sse[j] == ref_sse  # bit for bit
        assert conv[j] == ref_conv
    if max_iter == 2:
        assert not conv.all()  # the path of a run stopped by the cap is exercised


def test_candidates_together_reseed_an_empty_cluster_as_alone():
    """Two equal previous centres: the second is empty after the first pass and is reseeded at the
    farthest rows, which the shared pass must find per candidate as a lone run does."""
    L, _ = _labels(n=800, seed=7)
    g, w, enc, prior, tol, MT_prev, rng = _setup(L, 2, 7)
    MT_prev = np.column_stack([MT_prev, MT_prev])
    ids = rng.choice(g.shape[0], 6, replace=False)
    lab, sse, conv = run_candidates(g, w, enc, prior, MT_prev, g[ids], 300, tol)
    for j, i in enumerate(ids):
        ref = run_candidate(g, w, enc, prior, MT_prev, g[i], 300, tol)
        np.testing.assert_array_equal(lab[:, j], ref[0])
        assert sse[j] == ref[1] and conv[j] == ref[2]
    assert all(np.unique(lab[:, j]).size == 3 for j in range(len(ids)))


def _one_by_one(func, args):
    """The former path: each candidate its own Lloyd run (``run_candidate``), in a group's order."""
    out = []
    for gidx, weight, enc, prior, MT_prev, rows, max_iter, tol in args:
        res = [run_candidate(gidx, weight, enc, prior, MT_prev, r, max_iter, tol) for r in rows]
        out.append(
            (
                np.column_stack([r[0] for r in res]).astype(np.int32),
                np.array([r[1] for r in res]),
                np.array([r[2] for r in res]),
            )
        )
    return out


@pytest.mark.parametrize("K", [2, 4])
def test_gkcc_equals_the_candidate_by_candidate_fit(K):
    L, _ = _labels(n=1200, N=12, seed=11, dup=300)
    new = GKCC(K, n_candidates=7, random_state=3).fit(L)
    old = GKCC(K, n_candidates=7, random_state=3).fit(L, mapper=_one_by_one)
    np.testing.assert_array_equal(new.partitions_, old.partitions_)
    np.testing.assert_array_equal(new.labels_, old.labels_)
    np.testing.assert_array_equal(new.step_objectives_, old.step_objectives_)
    assert new.objective_ == old.objective_


def test_gkcc_does_not_depend_on_the_grouping_of_candidates():
    L, _ = _labels(n=900, N=10, seed=5)
    ref = GKCC(3, n_candidates=11, random_state=2).fit(L)
    calls = []

    def mapper(func, args):
        calls.append(len(args))
        return [func(*a) for a in args]

    for n_tasks in (2, 5, 11, 40):
        got = GKCC(3, n_candidates=11, random_state=2).fit(L, mapper=mapper, n_tasks=n_tasks)
        np.testing.assert_array_equal(got.partitions_, ref.partitions_)
        np.testing.assert_array_equal(got.labels_, ref.labels_)
    assert calls == [2, 2, 5, 5, 11, 11, 11, 11]


def test_gkcc_threads_give_the_same_fit():
    L, _ = _labels(n=1000, N=10, seed=8, dup=200)
    ref = GKCC(3, n_candidates=9, random_state=4).fit(L)
    for n_jobs in (2, 3, -1):
        got = GKCC(3, n_candidates=9, random_state=4, n_jobs=n_jobs).fit(L)
        np.testing.assert_array_equal(got.partitions_, ref.partitions_)
        np.testing.assert_array_equal(got.labels_, ref.labels_)
        np.testing.assert_array_equal(got.step_objectives_, ref.step_objectives_)


@pytest.mark.parametrize("n_jobs", [0, -2, 1.5, True])
def test_gkcc_bad_n_jobs(n_jobs):
    L, _ = _labels(n=50, N=4)
    with pytest.raises(InputError, match="'n_jobs'"):
        GKCC(2, n_candidates=2, n_jobs=n_jobs).fit(L)


def test_gkcc_with_more_categories_than_int16_indices():
    """33,000 labels in one clustering: the augmented data's indices are int32, the fit the same."""
    rng = np.random.default_rng(3)
    n = 34_000
    y = rng.integers(0, 3, n)
    L = np.column_stack([y, (y + (rng.random(n) < 0.1)) % 3, rng.permutation(n) % 33_000])
    assert np.unique(L[:, 2]).size > np.iinfo(np.int16).max
    new = GKCC(3, n_candidates=3, random_state=0).fit(L)
    old = GKCC(3, n_candidates=3, random_state=0).fit(L, mapper=_one_by_one)
    np.testing.assert_array_equal(new.partitions_, old.partitions_)
    np.testing.assert_array_equal(new.labels_, old.labels_)


def test_gkcc_candidates_in_small_chunks_give_the_same_fit(monkeypatch):
    """Chunks of one or two candidates (the tables of large K) change nothing but the memory."""
    import ensemble_dask.consensus.kcc._gkcc as gkcc

    L, _ = _labels(n=700, N=8, seed=9, dup=100)
    ref = GKCC(4, n_candidates=7, random_state=6).fit(L)
    G = sum(np.unique(c[c >= 0]).size for c in L.T)
    monkeypatch.setattr(gkcc, "CHUNK_BYTES", 8 * 3 * (G + L.shape[1]) * 2)  # step 2: two per chunk
    got = GKCC(4, n_candidates=7, random_state=6).fit(L)
    np.testing.assert_array_equal(got.partitions_, ref.partitions_)
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    np.testing.assert_array_equal(got.step_objectives_, ref.step_objectives_)


def test_plan_work_keeps_the_paper_where_it_fits_and_bounds_it_elsewhere():
    from ensemble_dask.consensus.kcc._gkcc import SAMPLE_ROWS_PER_CLUSTER, WORK_BUDGET, plan_work

    def work(J, K, rows):
        return J * J * sum(k**3 for k in range(2, K + 1)) * rows

    assert plan_work(5_000, 5_000, 3) == (59, None)  # small: Algorithm 1 on every row
    J, rows = plan_work(50_000, 50_000, 30)  # K = 30: 59 candidates on a sample within the budget
    assert J == 59 and SAMPLE_ROWS_PER_CLUSTER * 30 <= rows < 50_000
    assert work(J, 30, rows) <= WORK_BUDGET < work(J, 30, rows + 1)
    assert plan_work(50_000, 300, 30) == (59, None)  # few distinct label rows: all of them
    J, rows = plan_work(100_000, 100_000, 100)  # K = 100: the smallest sample, fewer candidates
    assert rows == SAMPLE_ROWS_PER_CLUSTER * 100 and 2 <= J < 59 and work(J, 100, rows) <= WORK_BUDGET
    # explicit values are kept as given
    assert plan_work(100_000, 100_000, 100, 59, None) == (59, None)
    assert plan_work(100_000, 100_000, 30, 7, 2_000) == (7, 2_000)


def test_gkcc_on_a_sample_then_lloyd_on_every_row(monkeypatch):
    """Above the work budget the greedy steps run on a seeded sample; Lloyd's steps from its partition give
    every row a label (a fixed point: each row in its nearest cluster), deterministically for a seed."""
    from sklearn.metrics import adjusted_rand_score

    import ensemble_dask.consensus.kcc._gkcc as gkcc

    L, y = _labels(n=3000, N=12, seed=4, missing=0.3)
    exact = GKCC(4, n_candidates=8, max_rows=None, random_state=2, compare=None).fit(L)
    assert exact.sample_indices_ is None and exact.partitions_.shape == (3000, 8 * 3)
    monkeypatch.setattr(gkcc, "WORK_BUDGET", 8 * 8 * 99 * 400)  # room for 400 rows at K = 4
    a = GKCC(4, n_candidates=8, random_state=2, compare=None).fit(L)
    b = GKCC(4, n_candidates=8, random_state=2, compare=None).fit(L)
    assert a.sample_indices_.size == 400 and np.all(np.diff(a.sample_indices_) > 0)
    assert a.partitions_.shape == (400, 8 * 3) and np.isin(a.candidates_, a.sample_indices_).all()
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.labels_.shape == (3000,) and a.converged_
    np.testing.assert_array_equal(a.labels_, a.memberships_.argmax(axis=1))
    # on these labels the sample finds the partition of the whole (the 4 planted groups)
    assert adjusted_rand_score(exact.labels_, a.labels_) > 0.95
    assert adjusted_rand_score(y, a.labels_) == pytest.approx(adjusted_rand_score(y, exact.labels_), abs=0.03)
    assert a.start_ == exact.start_ == "greedy" and a.anmi_ is None


@pytest.mark.parametrize("max_rows", [1, 0, "all", 2.5])
def test_gkcc_bad_max_rows(max_rows):
    L, _ = _labels(n=50, N=4)
    with pytest.raises(InputError, match="'max_rows'"):
        GKCC(3, n_candidates=2, max_rows=max_rows).fit(L)


@pytest.mark.parametrize("K", [2, 4])
def test_the_kernels_see_one_layout_of_the_data(K, monkeypatch):
    """The augmented data GKCC hands its kernels is a view of one more column than it uses, so never
    contiguous: numba compiles each kernel for one layout of it, not two (the last step's data, and K = 2's,
    were the whole array: 7 signatures of each kernel in the suite, from 4 layouts and dtypes)."""
    from ensemble_dask.consensus.kcc import _gkcc

    seen = []

    def recording(real):
        def kernel(gidx, *args):
            seen.append(gidx.flags.c_contiguous)
            return real(gidx, *args)

        return kernel

    for name in ("assign_first", "assign_many"):
        monkeypatch.setattr(_gkcc.kern, name, recording(getattr(_gkcc.kern, name)))
    L, _ = _labels(n=400, N=8)
    GKCC(K, random_state=0).fit(L)
    assert seen and not any(seen)
