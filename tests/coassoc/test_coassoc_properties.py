"""Properties of the co-association counts and of the pair sampling (Hypothesis, modest example counts)."""

import numpy as np
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ensemble_dask.coassoc import build_coassociation, coassociation, read_pairs, sample_pairs

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def labels_matrices(draw, max_n=30, max_clust=6):
    n = draw(st.integers(2, max_n))
    n_clust = draw(st.integers(1, max_clust))
    return draw(arrays(np.int32, (n, n_clust), elements=st.integers(-1, 4)))


@st.composite
def strategy_and_params(draw, n):
    strategy = draw(st.sampled_from(["full", "uniform", "per-point", "cocluster"]))
    if strategy == "uniform":
        return strategy, {"p": draw(st.floats(0.05, 1.0))}
    if strategy == "per-point":
        return strategy, {"l": draw(st.integers(1, n - 1))}
    if strategy == "cocluster":
        return strategy, {"l": draw(st.integers(1, n - 1)), "fraction": draw(st.floats(0.0, 1.0))}
    return strategy, {}


@SETTINGS
@given(data=st.data(), labels=labels_matrices(), seed=st.integers(0, 2**32))
def test_counts_bounded_symmetric_and_n_ij_is_co_presence(data, labels, seed):
    n, n_clust = labels.shape
    strategy, params = data.draw(strategy_and_params(n))
    pc = coassociation(
        labels, strategy=strategy, seed=seed, block_size=data.draw(st.integers(1, 8)), **params
    )
    co, both = pc.to_scipy()
    assert (co != co.T).nnz == 0 and (both != both.T).nnz == 0
    assert np.all(pc.co >= 0) and np.all(pc.co <= pc.both) and np.all(pc.both <= n_clust)
    rows = pc.rows()
    present = labels >= 0
    np.testing.assert_array_equal(pc.both, np.sum(present[rows] & present[pc.indices], axis=1))


@SETTINGS
@given(data=st.data(), labels=labels_matrices(), seed=st.integers(0, 2**32))
def test_relabelling_a_base_clustering_changes_nothing(data, labels, seed):
    n, n_clust = labels.shape
    strategy, params = data.draw(strategy_and_params(n))
    u = data.draw(st.integers(0, n_clust - 1))
    perm = np.asarray(data.draw(st.permutations(range(5))), dtype=np.int32)
    relabelled = labels.copy()
    keep = labels[:, u] >= 0
    relabelled[keep, u] = perm[labels[keep, u]]
    a = coassociation(labels, strategy=strategy, seed=seed, block_size=4, **params)
    b = coassociation(relabelled, strategy=strategy, seed=seed, block_size=4, **params)
    for name in ("indptr", "indices", "co", "both"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), labels=labels_matrices(max_n=40), seed=st.integers(0, 2**32))
def test_same_seed_same_pairs_whatever_the_partitions(data, labels, seed):
    n = labels.shape[0]
    strategy, params = data.draw(strategy_and_params(n))
    block_size = data.draw(st.integers(4, 16))
    i, j = sample_pairs(strategy, n, seed=seed, labels=labels, block_size=block_size, **params)
    g = zarr.open_group(store="memory://coassoc-prop-partitions", mode="w")
    g.create_array("labels", data=labels, chunks=(7, 1))
    for row_block, mode, scheduler in (
        (1, "join", "sync"),
        (data.draw(st.integers(1, n)), "rows", "threads"),
    ):
        build_coassociation(
            g,
            strategy=strategy,
            seed=seed,
            block_size=block_size,
            row_block=row_block,
            count_mode=mode,
            nnz_chunk=data.draw(st.integers(16, 256)),
            client_or_scheduler=scheduler,
            **params,
        )
        pc = read_pairs(g)
        upper = pc.rows() < pc.indices
        np.testing.assert_array_equal(pc.rows()[upper], i)
        np.testing.assert_array_equal(pc.indices[upper], j)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), labels=labels_matrices(max_n=30), seed=st.integers(0, 2**32))
def test_spilled_and_in_memory_builds_store_the_same(data, labels, seed):
    n = labels.shape[0]
    strategy, params = data.draw(strategy_and_params(n))
    block_size = data.draw(st.integers(1, 8))
    g = zarr.open_group(store="memory://coassoc-prop-spill", mode="w")
    g.create_array("labels", data=labels, chunks=(5, 1))
    stored = []
    for spill in (False, True):
        build_coassociation(
            g,
            strategy=strategy,
            seed=seed,
            block_size=block_size,
            row_block=data.draw(st.integers(max(1, n // 4), n)),  # 1 to about 4 partitions
            count_mode=data.draw(st.sampled_from(["rows", "join"])),
            nnz_chunk=data.draw(st.integers(1, 64)),
            spill=spill,
            client_or_scheduler="sync",
            **params,
        )
        stored.append(read_pairs(g))
    for name in ("indptr", "indices", "co", "both"):
        np.testing.assert_array_equal(getattr(stored[0], name), getattr(stored[1], name))
