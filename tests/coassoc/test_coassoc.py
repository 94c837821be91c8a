"""The co-association store: strategies, counting, the Dask graph on real schedulers, the zarr store."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import zarr
from distributed import Client, LocalCluster
from sklearn.cluster import KMeans

from ensemble_dask import InputError, PairCounts, dense_coassociation
from ensemble_dask.coassoc import (
    build_coassociation,
    coassociation,
    count_pairs,
    iter_pair_blocks,
    read_pairs,
    sample_pairs,
    update_coassociation,
    write_pairs,
)

REPO = Path(__file__).resolve().parents[2]
PARAMS = {"full": {}, "uniform": {"p": 0.05}, "per-point": {"l": 4}, "cocluster": {"l": 6, "fraction": 0.5}}


@pytest.fixture(scope="module")
def kdd_labels(kdd_sample):
    """10 k-means clusterings (k in 2..10, 50% subsamples) of 3000 KDD'99 records of its 3 main classes
    (from the sample of every 100th record in tests/data)."""
    df = pd.read_csv(kdd_sample, header=None)
    df = df[df[41].isin(["smurf.", "neptune.", "normal."])]
    rng = np.random.default_rng(7)
    df = df.iloc[np.sort(rng.choice(len(df), 3000, replace=False))]
    X = df.drop(columns=[1, 2, 3, 41]).to_numpy(dtype=np.float64)
    X = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
    labels = np.full((len(X), 10), -1, dtype=np.int32)
    for u in range(10):
        keep = rng.random(len(X)) < 0.5
        km = KMeans(n_clusters=int(rng.integers(2, 11)), n_init=1, random_state=int(rng.integers(2**31)))
        labels[keep, u] = km.fit_predict(X[keep])
    return labels, pd.factorize(df[41])[0]


def random_labels(n, n_clust, k=4, missing=0.3, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, size=(n, n_clust)).astype(np.int32)
    labels[rng.random((n, n_clust)) < missing] = -1
    return labels


def run_store(url, labels, row_chunk=50):
    g = zarr.open_group(store=str(url), mode="w")
    g.create_array("labels", data=labels, chunks=(row_chunk, 1))
    return g


def assert_matches_dense(pc, labels):
    """Every stored entry equals the brute-force dense counts; the CSR is symmetric and sorted."""
    dco, dboth = dense_coassociation(labels)
    rows = pc.rows()
    np.testing.assert_array_equal(pc.co, dco[rows, pc.indices])
    np.testing.assert_array_equal(pc.both, dboth[rows, pc.indices])
    assert np.all(rows != pc.indices)
    co, both = pc.to_scipy()
    assert (co != co.T).nnz == 0 and (both != both.T).nnz == 0
    keys = rows * pc.n + pc.indices
    assert np.all(np.diff(keys) > 0)


def stage_seed_of(seed):
    """The seed ``coassoc_stage`` samples with under run seed ``seed`` (its own branch of the run seed)."""
    from ensemble_dask._validation import stage_seed

    return int(stage_seed(seed, "coassoc").generate_state(1)[0])


def assert_same(a, b):
    for name in ("indptr", "indices", "co", "both"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.n_clusterings == b.n_clusterings


# --------------------------------------------------------------------------- hand-computed


def test_hand_computed_counts():
    labels = np.array([[0, 1, -1], [0, 2, 5], [1, 1, 5], [-1, -1, -1]])
    pc = coassociation(labels, strategy="full", seed=0)
    co, both = pc.to_dense()
    # pair (0,1): together in clustering 0 only, both present in 0 and 1
    assert (co[0, 1], both[0, 1]) == (1, 2)
    # pair (0,2): together in 1, present in 0 and 1
    assert (co[0, 2], both[0, 2]) == (1, 2)
    # pair (1,2): together in 2, present in all three
    assert (co[1, 2], both[1, 2]) == (1, 3)
    # point 3 is never present: its pairs are stored with N_ij = 0
    assert both[3].tolist() == [0, 0, 0, 0] and pc.n_pairs == 6
    assert pc.n_clusterings == 3


def test_count_pairs_hand_and_errors():
    co, both = count_pairs([[3, -1], [3, 3], [4, 3]], [0, 1, 0], [1, 2, 2])
    assert co.tolist() == [1, 1, 0] and both.tolist() == [1, 2, 1]
    with pytest.raises(InputError, match="j holds point index 3"):
        count_pairs([[0], [0], [1]], [0], [3])
    with pytest.raises(InputError, match="-2 at row 1"):
        count_pairs([[0], [-2]], [0], [1])


# --------------------------------------------------------------------------- strategies


@pytest.mark.parametrize("strategy", list(PARAMS))
def test_pairs_unique_ordered_and_counts_exact(strategy):
    labels = random_labels(200, 6, seed=1)
    i, j = sample_pairs(strategy, 200, seed=5, labels=labels, block_size=32, **PARAMS[strategy])
    assert i.dtype == np.int64 and j.dtype == np.int64
    assert np.all(i < j) and np.all(j < 200)
    keys = i * 200 + j
    assert np.all(np.diff(keys) > 0)
    pc = coassociation(labels, strategy=strategy, seed=5, block_size=32, **PARAMS[strategy])
    assert pc.n_pairs == len(i)
    assert_matches_dense(pc, labels)


def test_full_is_every_pair_and_uniform_p1_is_full():
    i, j = sample_pairs("full", 50, seed=0, block_size=7)
    iu, ju = np.triu_indices(50, k=1)
    np.testing.assert_array_equal(i, iu)
    np.testing.assert_array_equal(j, ju)
    i2, j2 = sample_pairs("uniform", 50, seed=3, block_size=7, p=1.0)
    np.testing.assert_array_equal(i2, iu)
    np.testing.assert_array_equal(j2, ju)


def test_uniform_rate_and_spread():
    n, p = 3000, 0.01
    i, j = sample_pairs("uniform", n, seed=11, p=p, block_size=256)
    m = n * (n - 1) // 2
    sd = np.sqrt(m * p * (1 - p))
    assert abs(len(i) - m * p) < 5 * sd
    # each row i keeps ~Binomial(n-1-i, p) partners: compare the first and last thirds of the triangle
    first = np.count_nonzero(i < n // 3)
    expected_first = p * sum(n - 1 - r for r in range(n // 3))
    assert abs(first - expected_first) < 5 * np.sqrt(expected_first)
    # and j is spread over the whole row, not clustered near i
    gaps = j - i
    assert gaps.max() > 0.9 * n and np.median(gaps) > n / 5


def test_per_point_every_point_has_partners():
    n, l = 500, 3
    i, j = sample_pairs("per-point", n, seed=2, l=l, block_size=64)
    deg = np.bincount(np.concatenate([i, j]), minlength=n)
    assert deg.min() >= 1
    assert n * l * 0.98 <= len(i) <= n * l
    assert abs(deg.mean() - 2 * l) < 0.2


def test_cocluster_draws_from_shared_clusters():
    labels = random_labels(400, 8, k=3, missing=0.4, seed=4)
    i, j = sample_pairs("cocluster", 400, seed=9, labels=labels, l=5, fraction=1.0)
    co, _ = count_pairs(labels, i, j)
    assert np.all(co >= 1)  # every point is in some cluster of size > 1 here: no fallback draws
    iu, ju = sample_pairs("per-point", 400, seed=9, l=5)
    cu, _ = count_pairs(labels, iu, ju)
    assert np.mean(cu >= 1) < 0.95
    # fraction=0 draws exactly like per-point's budget: no more than n*l pairs, not all co-clustered
    i0, j0 = sample_pairs("cocluster", 400, seed=9, labels=labels, l=5, fraction=0.0)
    c0, _ = count_pairs(labels, i0, j0)
    assert len(i0) <= 2000 and np.mean(c0 >= 1) < 0.95


def test_seed_determines_pairs():
    a = sample_pairs("per-point", 300, seed=1, l=3)
    b = sample_pairs("per-point", 300, seed=1, l=3)
    c = sample_pairs("per-point", 300, seed=2, l=3)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert len(a[0]) != len(c[0]) or not np.array_equal(a[1], c[1])


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("strategy", "params", "match"),
    [
        ("uniform", {"p": 0.0}, r"'p' parameter must be in \(0, 1\]; got 0.0"),
        ("uniform", {"p": 1.5}, r"'p' parameter must be in \(0, 1\]; got 1.5"),
        ("per-point", {"l": 0}, "'l' parameter must be >= 1; got 0"),
        ("per-point", {"l": 60}, "'l' parameter must be < n=60; got l=60"),
        ("cocluster", {"l": 2, "fraction": 1.5}, "'fraction' parameter must be a number in"),
        ("full", {"max_n": 50}, "max_n=50; got n=60"),
        ("uniform", {"l": 3}, r"Unknown parameter\(s\) \['l'\] for strategy 'uniform'"),
        ("nearest", {}, "'strategy' parameter must be one of"),
    ],
)
def test_bad_parameters_write_nothing(strategy, params, match):
    g = run_store(f"memory://coassoc-bad-{strategy}", random_labels(60, 3))
    with pytest.raises(InputError, match=match):
        build_coassociation(g, strategy=strategy, seed=0, client_or_scheduler="sync", **params)
    assert "pairs" not in g
    with pytest.raises(InputError, match=match):
        sample_pairs(strategy, 60, seed=0, labels=random_labels(60, 3), **params)


def test_full_refuses_large_n_by_default():
    with pytest.raises(InputError, match="max_n=5000; got n=5001"):
        sample_pairs("full", 5001, seed=0)


def test_bad_labels_in_store_never_complete():
    labels = random_labels(100, 4)
    labels[37, 2] = -2
    g = run_store("memory://coassoc-bad-labels", labels)
    for strategy, params in (("uniform", {"p": 0.1}), ("cocluster", {"l": 3})):
        with pytest.raises(InputError, match="got -2 at row 37, column 2"):
            build_coassociation(g, strategy=strategy, seed=0, client_or_scheduler="sync", **params)
        assert "pairs" not in g or g["pairs"].attrs["complete"] is False
        with pytest.raises(InputError, match="not complete|no 'pairs/'"):
            read_pairs(g)


def test_store_without_labels():
    g = zarr.open_group(store="memory://coassoc-no-labels", mode="w")
    with pytest.raises(InputError, match="has no 'labels' array"):
        build_coassociation(g, strategy="uniform", seed=0, p=0.1)
    with pytest.raises(InputError, match="no 'pairs/' group"):
        read_pairs(g)


# --------------------------------------------------------------------------- the Dask graph


@pytest.fixture(scope="module")
def thread_cluster_client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            yield client


@pytest.mark.parametrize("strategy", list(PARAMS))
@pytest.mark.parametrize("count_mode", ["rows", "join"])
def test_dask_threads_equals_in_memory_and_brute_force(strategy, count_mode):
    labels = random_labels(300, 7, seed=3)
    g = run_store(f"memory://coassoc-threads-{strategy}-{count_mode}", labels)
    expected = coassociation(labels, strategy=strategy, seed=42, block_size=32, **PARAMS[strategy])
    assert_matches_dense(expected, labels)
    for row_block in (32, 96, 1000):
        summary = build_coassociation(
            g,
            strategy=strategy,
            seed=42,
            block_size=32,
            row_block=row_block,
            count_mode=count_mode,
            nnz_chunk=max(64, expected.nnz // 7),
            client_or_scheduler="threads",
            **PARAMS[strategy],
        )
        assert summary["complete"] is True and summary["n_pairs"] == expected.n_pairs
        assert_same(read_pairs(g), expected)


@pytest.mark.parametrize("strategy", list(PARAMS))
def test_distributed_in_process_memory_store(thread_cluster_client, strategy):
    labels = random_labels(250, 5, seed=8)
    url = f"memory://coassoc-dist-{strategy}"
    run_store(url, labels)
    expected = coassociation(labels, strategy=strategy, seed=3, block_size=40, **PARAMS[strategy])
    summary = build_coassociation(
        url,
        strategy=strategy,
        seed=3,
        block_size=40,
        row_block=80,
        count_mode="join",
        nnz_chunk=max(64, expected.nnz // 5),
        client_or_scheduler=thread_cluster_client,
        **PARAMS[strategy],
    )
    assert summary["strategy"] == strategy and summary["seed"] == 3 and summary["n_clusterings"] == 5
    assert_same(read_pairs(url), expected)
    assert_matches_dense(read_pairs(url), labels)


@pytest.mark.slow
def test_distributed_processes_directory_store(tmp_path):
    labels = random_labels(240, 6, seed=12)
    url = str(tmp_path / "run.zarr")
    run_store(url, labels, row_chunk=64)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            for strategy in PARAMS:
                expected = coassociation(labels, strategy=strategy, seed=1, block_size=48, **PARAMS[strategy])
                build_coassociation(
                    url,
                    strategy=strategy,
                    seed=1,
                    block_size=48,
                    row_block=48,
                    nnz_chunk=max(64, expected.nnz // 4),
                    client_or_scheduler=client,
                    **PARAMS[strategy],
                )
                assert_same(read_pairs(url), expected)
            # an incremental update on process workers, too
            g = zarr.open_group(store=url, mode="a")
            g["labels"].resize((240, 8))
            g["labels"][:, 6:] = random_labels(240, 2, seed=13)
            update_coassociation(url, client_or_scheduler=client, chunks_per_task=1)
    assert_matches_dense(read_pairs(url), zarr.open_group(store=url, mode="r")["labels"][:])


def test_kdd_kmeans_labels(kdd_labels, thread_cluster_client):
    labels, truth = kdd_labels
    url = "memory://coassoc-kdd"
    run_store(url, labels, row_chunk=500)
    results = {}
    for strategy, params in (("uniform", {"p": 0.004}), ("per-point", {"l": 6}), ("cocluster", {"l": 6})):
        build_coassociation(
            url,
            strategy=strategy,
            seed=2026,
            client_or_scheduler=thread_cluster_client,
            block_size=256,
            **params,
        )
        pc = read_pairs(url)
        assert_same(pc, coassociation(labels, strategy=strategy, seed=2026, block_size=256, **params))
        rows = pc.rows()
        present = labels >= 0
        np.testing.assert_array_equal(
            pc.both, np.einsum("ij,ij->i", present[rows].astype(int), present[pc.indices].astype(int))
        )
        same = labels[rows] == labels[pc.indices]
        np.testing.assert_array_equal(pc.co, np.sum(same & present[rows] & present[pc.indices], axis=1))
        results[strategy] = pc
    # about half the points are in each 50% subsample: N_ij is about N/4 on average
    assert 2.0 < results["uniform"].both.mean() < 3.0
    # pairs drawn from shared clusters are co-clustered far more often than uniform ones
    frac = {s: np.mean(pc.co > 0) for s, pc in results.items()}
    assert frac["cocluster"] > frac["per-point"] + 0.2
    # the co-association fractions carry the class structure: same-class pairs co-cluster more
    pc = results["per-point"]
    rows = pc.rows()
    ok = pc.both > 0
    rate = pc.co[ok] / pc.both[ok]
    same_class = truth[rows[ok]] == truth[pc.indices[ok]]
    assert rate[same_class].mean() > rate[~same_class].mean() + 0.3


# --------------------------------------------------------------------------- store, readers, update


def test_write_read_and_stream_blocks():
    labels = random_labels(150, 4, seed=6)
    pc = coassociation(labels, strategy="per-point", seed=0, l=5)
    g = zarr.open_group(store="memory://coassoc-write", mode="w")
    attrs = write_pairs(g, pc, nnz_chunk=100, attrs={"strategy": "per-point"})
    assert attrs["complete"] is True and attrs["nnz"] == pc.nnz and attrs["n"] == 150
    assert g["pairs/indices"].chunks == (100,)
    assert_same(read_pairs(g), pc)
    blocks = list(iter_pair_blocks(g, rows_per_block=40))
    assert [(b.row_start, b.row_stop) for b in blocks] == [(0, 40), (40, 80), (80, 120), (120, 150)]
    np.testing.assert_array_equal(np.concatenate([b.indices for b in blocks]), pc.indices)
    np.testing.assert_array_equal(np.concatenate([b.co for b in blocks]), pc.co)
    np.testing.assert_array_equal(np.concatenate([b.rows() for b in blocks]), pc.rows())
    assert all(b.indptr[0] == 0 and b.indptr[-1] == len(b.indices) for b in blocks)


def test_incremental_update_counts_only_new_columns():
    full = random_labels(200, 9, seed=21)
    g = zarr.open_group(store="memory://coassoc-update", mode="w")
    arr = g.create_array("labels", shape=(200, 6), chunks=(50, 1), dtype="int32")
    arr[:] = full[:, :6]
    build_coassociation(g, strategy="uniform", seed=4, p=0.2, nnz_chunk=500, client_or_scheduler="sync")
    before = read_pairs(g)
    # scramble the already-counted columns: an update that re-read them would change the counts
    arr[:] = random_labels(200, 6, seed=99)
    arr.resize((200, 9))
    arr[:, 6:] = full[:, 6:]
    attrs = update_coassociation(g, client_or_scheduler="threads", chunks_per_task=1)
    assert attrs["n_clusterings"] == 9 and attrs["complete"] is True and attrs["updates"] == [[6, 9]]
    after = read_pairs(g)
    np.testing.assert_array_equal(after.indices, before.indices)
    arr[:, :6] = full[:, :6]
    assert_matches_dense(after, full)
    assert after.n_clusterings == 9
    # nothing new: a no-op
    assert update_coassociation(g, client_or_scheduler="sync")["n_clusterings"] == 9


def test_update_refuses_fewer_columns():
    g = run_store("memory://coassoc-update-bad", random_labels(50, 3))
    write_pairs(g, coassociation(random_labels(50, 4), strategy="full", seed=0))
    with pytest.raises(InputError, match="has 3 columns but 4 are already counted"):
        update_coassociation(g)


def test_paircounts_round_trip_types():
    labels = random_labels(40, 3, seed=2)
    g = run_store("memory://coassoc-types", labels)
    build_coassociation(g, strategy="full", seed=0, client_or_scheduler="sync")
    pc = read_pairs(g)
    assert isinstance(pc, PairCounts)
    # int32 point indices, on disk and in memory: half the bytes of the pattern every solver streams
    assert g["pairs/indices"].dtype == np.int32
    assert pc.indptr.dtype == np.int64 and pc.indices.dtype == np.int32
    assert pc.co.dtype == np.int32 and pc.both.dtype == np.int32
    attrs = g["pairs"].attrs
    assert attrs["params"] == {"max_n": 5000} and attrs["block_size"] == 4096 and attrs["n"] == 40
    # a store written with int64 indices (before they were int32) reads the same, as int32, chunk by chunk
    idx = g["pairs/indices"][:]
    del g["pairs/indices"]
    g["pairs"].create_array("indices", shape=idx.shape, chunks=(7,), dtype="int64")
    g["pairs/indices"][:] = idx.astype(np.int64)
    old = read_pairs(g)
    assert old.indices.dtype == np.int32 and np.array_equal(old.indices, pc.indices)
    assert np.array_equal(old.co, pc.co) and np.array_equal(old.indptr, pc.indptr)


# --------------------------------------------------------------------------- pipeline stage and CLI


@pytest.mark.slow
def test_workflow_stage_skips_then_updates_with_appended_clusterings():
    from ensemble_dask.io.store import RunStore
    from ensemble_dask.pipeline import run_workflow

    spec = {
        "seed": 3,
        "store": "memory://coassoc-workflow",
        "dask": {"n_workers": 2},
        "data": {"url": "synthetic:blobs?n=400&d=3&centers=3&seed=2"},
        "generate": {"n_clusterings": 4, "k_min": 2, "k_max": 5, "rate": 0.7},
        "coassoc": {"strategy": "per-point", "l": 5, "block_size": 64},
    }
    run_workflow(spec)
    store = RunStore("memory://coassoc-workflow")
    labels = store["labels"][:]
    seed = stage_seed_of(3)
    assert store["pairs"].attrs["seed"] == seed != 3
    assert_same(read_pairs(store), coassociation(labels, strategy="per-point", seed=seed, l=5, block_size=64))
    first = store.record("coassoc")
    assert first["complete"] and first["params"]["strategy"] == "per-point"
    run_workflow(spec)  # nothing changed: the stage is skipped
    assert store.record("coassoc")["finished"] == first["finished"]
    assert store.record("coassoc")["hash"] == first["hash"]
    spec["generate"]["n_clusterings"] = 6  # generate appends two columns; coassoc adds only theirs
    run_workflow(spec)
    labels6 = store["labels"][:]
    np.testing.assert_array_equal(labels6[:, :4], labels)
    pc = read_pairs(store)
    assert store["pairs"].attrs["updates"] == [[4, 6]] and pc.n_clusterings == 6
    assert_same(pc, coassociation(labels6, strategy="per-point", seed=seed, l=5, block_size=64))


def generated_store(url, labels):
    """A run store whose ``generate`` stage is complete with ``labels`` (as import-labels leaves it)."""
    from ensemble_dask.io.store import RunStore

    store = RunStore(url)
    with store.stage("generate", {"n_clusterings": labels.shape[1]}, []):
        store.group.create_array("labels", data=labels, chunks=(64, 1))
    return store


def test_cli_coassoc(tmp_path, capsys):
    from ensemble_dask.cli import main

    labels = random_labels(300, 3, seed=5)
    url = str(tmp_path / "run.zarr")
    generated_store(url, labels)
    argv = [
        "coassoc",
        "--store",
        url,
        "--strategy",
        "uniform",
        "--p",
        "0.05",
        "--seed",
        "4",
        "--n-workers",
        "2",
    ]
    assert main(argv) == 0
    n_pairs = read_pairs(url).n_pairs
    assert f"coassoc: {n_pairs} pairs over 3 clusterings" in capsys.readouterr().out
    assert_same(read_pairs(url), coassociation(labels, strategy="uniform", seed=stage_seed_of(4), p=0.05))
    generated_store("memory://coassoc-cli-bad", labels)
    assert (
        main(["coassoc", "--store", "memory://coassoc-cli-bad", "--strategy", "uniform", "--p", "1.5"]) == 2
    )
    assert "'p' parameter must be in (0, 1]; got 1.5" in capsys.readouterr().err
    assert (
        main(["coassoc", "--store", "memory://coassoc-cli-bad", "--strategy", "per-point", "--l", "300"]) == 2
    )
    assert "'l' parameter must be < n=300; got l=300" in capsys.readouterr().err


# --------------------------------------------------------------------------- spilled transit


def test_kernels_split_pieces_and_scatter_by_hand():
    from ensemble_dask.coassoc import _kernels as k

    # pairs (a, b) sorted by (a, b); block A starts at row 10, block B at row 20
    a = np.array([0, 0, 1, 2], dtype=np.int64)
    b = np.array([1, 2, 1, 0], dtype=np.int64)
    co = np.array([5, 6, 7, 8], dtype=np.int32)
    ptr_a, ptr_b = np.zeros(4, dtype=np.int64), np.zeros(4, dtype=np.int64)
    data_a, data_b = np.zeros((4, 3), dtype=np.int32), np.zeros((4, 3), dtype=np.int32)
    k.split_pieces_kernel(a, b, co, co + 10, 10, 20, ptr_a, data_a, ptr_b, data_b)
    assert ptr_a.tolist() == [0, 2, 3, 4] and data_a[:, 0].tolist() == [21, 22, 21, 20]
    assert data_a[:, 1].tolist() == [5, 6, 7, 8] and data_a[:, 2].tolist() == [15, 16, 17, 18]
    # mirrored: row b=0 gets a=2; row 1 gets a=0 then a=1 (stable); row 2 gets a=0
    assert ptr_b.tolist() == [0, 1, 3, 4] and data_b[:, 0].tolist() == [12, 10, 11, 10]
    assert data_b[:, 1].tolist() == [8, 5, 7, 6] and data_b[:, 2].tolist() == [18, 15, 17, 16]
    # two pieces over rows 0..2 appended row by row: row 0 gets [7, 8], row 1 [9], row 2 [5, 6]
    fill = np.array([0, 2, 3], dtype=np.int64)
    cols = np.zeros(5, dtype=np.int64)
    co = np.zeros(5, dtype=np.int32)
    both = np.zeros(5, dtype=np.int32)
    first = (np.array([0, 1, 2, 3]), np.array([7, 9, 5], dtype=np.int32))
    second = (np.array([0, 1, 1, 2]), np.array([8, 6], dtype=np.int32))
    for p, c in (first, second):
        k.scatter_rows_kernel(p.astype(np.int64), np.stack([c, c, c + 1], axis=1), fill, cols, co, both)
    assert cols.tolist() == [7, 8, 9, 5, 6] and co.tolist() == [7, 8, 9, 5, 6]
    assert both.tolist() == [8, 9, 10, 6, 7] and fill.tolist() == [2, 3, 5]


def test_spilled_build_equals_in_memory():
    labels = random_labels(120, 7, seed=31)
    g = run_store("memory://coassoc-spill", labels)
    for strategy in PARAMS:
        expected = coassociation(labels, strategy=strategy, seed=8, block_size=16, **PARAMS[strategy])
        # 4 partitions and small nnz chunks: a task writes several chunks, its rows straddle
        # partitions; then one partition
        for count_mode, row_block, nnz_chunk in (
            ("rows", 32, expected.nnz // 41),
            ("join", 32, expected.nnz // 41),
            ("join", 1000, expected.nnz // 7),
        ):
            summary = build_coassociation(
                g,
                strategy=strategy,
                seed=8,
                block_size=16,
                row_block=row_block,
                count_mode=count_mode,
                nnz_chunk=nnz_chunk,
                spill=True,
                client_or_scheduler="threads",
                **PARAMS[strategy],
            )
            assert summary["spill"] is True and summary["complete"] is True
            assert "_tmp" not in g["pairs"]  # temporaries are gone
            assert sorted(g["pairs"].array_keys()) == ["both", "co", "indices", "indptr"]
            assert_same(read_pairs(g), expected)


def test_spill_auto_follows_the_expected_pair_volume(monkeypatch):
    import ensemble_dask.coassoc.build as coassoc_module

    labels = random_labels(200, 4, seed=32)
    g = run_store("memory://coassoc-spill-auto", labels)
    expected = coassociation(labels, strategy="per-point", seed=1, l=3)
    summary = build_coassociation(g, strategy="per-point", seed=1, l=3, client_or_scheduler="sync")
    assert summary["spill"] is False
    # 200 points x l=3 draws x 16 bytes = 9600 bytes: above a tiny threshold, the build spills
    monkeypatch.setattr(coassoc_module, "_AUTO_SPILL_BYTES", 9599)
    summary = build_coassociation(g, strategy="per-point", seed=1, l=3, client_or_scheduler="sync")
    assert summary["spill"] is True
    assert_same(read_pairs(g), expected)
    monkeypatch.setattr(coassoc_module, "_AUTO_SPILL_BYTES", 9600)
    assert (
        build_coassociation(g, strategy="per-point", seed=1, l=3, client_or_scheduler="sync")["spill"]
        is False
    )
    with pytest.raises(InputError, match="'spill' parameter must be 'auto', True or False; got 'yes'"):
        build_coassociation(g, strategy="per-point", seed=1, l=3, spill="yes")


@pytest.mark.slow
def test_spilled_build_on_process_workers(process_client, tmp_path):
    labels = random_labels(260, 5, seed=33)
    url = str(tmp_path / "run.zarr")
    run_store(url, labels, row_chunk=64)
    for strategy, count_mode in (("per-point", "join"), ("uniform", "rows"), ("cocluster", "join")):
        expected = coassociation(labels, strategy=strategy, seed=5, block_size=40, **PARAMS[strategy])
        build_coassociation(
            url,
            strategy=strategy,
            seed=5,
            block_size=40,
            row_block=80,
            count_mode=count_mode,
            nnz_chunk=max(16, expected.nnz // 9),
            spill=True,
            client_or_scheduler=process_client,
            **PARAMS[strategy],
        )
        assert_same(read_pairs(url), expected)
        assert not (tmp_path / "run.zarr" / "pairs" / "_tmp").exists()


def test_spilled_build_with_bad_labels_cleans_up():
    labels = random_labels(120, 4, seed=34)
    labels[101, 3] = -3
    g = run_store("memory://coassoc-spill-bad", labels)
    for count_mode in ("rows", "join"):
        with pytest.raises(InputError, match="got -3 at row 101, column 3"):
            build_coassociation(
                g,
                strategy="uniform",
                p=0.02,
                seed=0,
                row_block=32,
                block_size=32,
                count_mode=count_mode,
                spill=True,
                client_or_scheduler="sync",
            )
        assert g["pairs"].attrs["complete"] is False and "_tmp" not in g["pairs"]
        with pytest.raises(InputError, match="not complete"):
            read_pairs(g)


def test_update_checks_every_row_of_the_new_columns():
    """A bad value in a row that no stored pair touches is still refused, and the store stays complete."""
    labels = random_labels(400, 4, seed=35)
    g = zarr.open_group(store="memory://coassoc-update-check", mode="w")
    arr = g.create_array("labels", shape=(400, 4), chunks=(50, 1), dtype="int32")
    arr[:] = labels
    build_coassociation(g, strategy="uniform", p=0.0005, seed=0, client_or_scheduler="sync")
    before = read_pairs(g)
    untouched = np.setdiff1d(np.arange(400), np.concatenate([before.rows(), before.indices]))
    assert untouched.size > 300
    arr.resize((400, 6))
    new = random_labels(400, 2, seed=36)
    new[untouched[-1], 1] = -4
    arr[:, 4:] = new
    with pytest.raises(InputError, match=f"got -4 at row {untouched[-1]}, column 5"):
        update_coassociation(g, client_or_scheduler="threads", chunks_per_task=1)
    assert g["pairs"].attrs["complete"] is True and g["pairs"].attrs["n_clusterings"] == 4
    assert_same(read_pairs(g), before)


def test_stage_spill_is_not_part_of_its_identity():
    from ensemble_dask.stages.coassoc import coassoc_stage

    labels = random_labels(150, 3, seed=37)
    store = generated_store("memory://coassoc-stage-spill", labels)
    # "sync": a session's process-worker Client may be Dask's default, and memory:// is per process
    info = coassoc_stage(
        store, "sync", strategy="per-point", l=4, seed=6, spill=True, row_block=64, block_size=32
    )
    assert info["skipped"] is False and store["pairs"].attrs["spill"] is True
    assert_same(
        read_pairs(store),
        coassociation(labels, strategy="per-point", seed=stage_seed_of(6), l=4, block_size=32),
    )
    # the same stage without spilling is up to date: same pairs, nothing recomputed
    assert (
        coassoc_stage(store, "threads", strategy="per-point", l=4, seed=6, spill=False, block_size=32)[
            "skipped"
        ]
        is True
    )


@pytest.mark.slow
def test_cocluster_pairs_are_rebuilt_not_updated_when_clusterings_are_added():
    """cocluster draws pairs from the labels: N=4 then N=6 must equal N=6 directly."""
    from ensemble_dask.io.store import RunStore
    from ensemble_dask.pipeline import run_workflow

    def spec(url, n_clusterings):
        return {
            "seed": 3,
            "store": url,
            "dask": {"n_workers": 1},
            "data": {"url": "synthetic:blobs?n=300&d=3&centers=3&seed=2"},
            "generate": {"n_clusterings": n_clusterings, "k_min": 2, "k_max": 5, "rate": 0.7},
            "coassoc": {"strategy": "cocluster", "l": 5, "block_size": 64},
        }

    run_workflow(spec("memory://cocluster-a", 4))
    run_workflow(spec("memory://cocluster-a", 6))
    run_workflow(spec("memory://cocluster-b", 6))
    a, b = RunStore("memory://cocluster-a"), RunStore("memory://cocluster-b")
    assert "updates" not in a["pairs"].attrs or a["pairs"].attrs["updates"] == []
    assert_same(read_pairs(a), read_pairs(b))


def test_pairs_arrays_use_shuffled_lz4():
    from zarr.codecs import BloscCodec

    g = run_store("memory://coassoc-codec", random_labels(60, 3, seed=38))
    build_coassociation(g, strategy="full", seed=0, client_or_scheduler="sync")
    for name in ("indptr", "indices", "co", "both"):
        (codec,) = g["pairs"][name].compressors
        assert (
            isinstance(codec, BloscCodec) and codec.cname.value == "lz4" and codec.shuffle.value == "shuffle"
        )


def test_read_pair_fractions_equals_the_counts_path_chunk_by_chunk():
    """The consensus stage's reader: c/N and N computed a few chunks at a time equal the in-memory
    conversion of the whole counts (pairs never both present left out), and bad counts name the entry."""
    from ensemble_dask.coassoc.csr import read_pair_fractions
    from ensemble_dask.consensus._common.base import as_pair_data, pair_data_from_fractions

    labels = random_labels(60, 6, missing=0.6, seed=3)  # many pairs never both present
    g = zarr.open_group(store="memory://pair-fractions", mode="w")
    write_pairs(g, coassociation(labels, strategy="full", seed=0), nnz_chunk=97)
    whole = as_pair_data(read_pairs(g))
    n, indptr, indices, x, w = read_pair_fractions(g, block=200)  # 3 chunks per read: many reads
    assert (w == 0).any() and indices.dtype == np.int32 and w.dtype == np.int32  # the counts as weights
    lean = pair_data_from_fractions(n, indptr, indices, x, w)
    assert lean.n == whole.n and lean.nnz == whole.nnz < len(indices)
    for a, b in (
        (lean.indptr, whole.indptr),
        (lean.indices, whole.indices),
        (lean.x, whole.x),
        (lean.w, whole.w),
    ):
        assert np.array_equal(a, b) and a.dtype == b.dtype
    co = g["pairs/co"][:]
    co[150] = g["pairs/both"][150] + 1
    g["pairs/co"][:] = co
    with pytest.raises(InputError, match=r"entry 150 has c_ij=\d+ and N_ij=\d+"):
        read_pair_fractions(g, block=200)


def test_cocluster_requests_resolve_to_the_index_draws():
    """The distributed ``cocluster`` draws (requests by global rank, resolved in the member's partition)
    give the keys of the in-memory draws from the whole cluster index, slot for slot."""
    from ensemble_dask.coassoc import _kernels as K

    labels = random_labels(300, 6, seed=21)
    labels[::7, 2] = -1
    labels[5] = -1  # a point present nowhere: uniform draws only
    n, N = labels.shape
    n_ids = int(labels.max()) + 1
    members, start = K.cluster_index_kernel(labels, n_ids)
    expected = np.empty(n * 6, dtype=np.int64)
    K.cocluster_draws_kernel(labels, 0, n, members, start, 4, 2, np.array([77], np.int64), expected)
    bounds = np.array([0, 100, 180, 300])
    hist = [np.zeros((N, n_ids), np.int64) for _ in range(3)]
    for p in range(3):
        K.cluster_histogram_kernel(labels[bounds[p] : bounds[p + 1]], hist[p])
    before = np.concatenate([np.zeros((1, N, n_ids), np.int64), np.cumsum(hist, axis=0)]).transpose(1, 2, 0)
    sizes = np.ascontiguousarray(before[:, :, 3])
    seen = np.zeros((N, n_ids), np.int64)
    keys = np.empty(n * 6, dtype=np.int64)
    req = [np.empty(n * 4, dt) for dt in (np.int64, np.int32, np.int32, np.int64)]
    q = K.cocluster_requests_kernel(labels, 0, n, sizes, seen, 4, 2, np.array([77], np.int64), keys, *req)
    np.testing.assert_array_equal(seen, sizes)
    req = [a[:q] for a in req]
    owner = np.empty(q, np.int64)
    K.request_owner_kernel(req[1], req[2], req[3], np.ascontiguousarray(before[:, :, :3]), owner)
    slots = np.flatnonzero(keys < 0)
    assert slots.size == q and np.array_equal(keys[keys >= 0], expected[keys >= 0])
    for p in range(3):
        sel = owner == p
        m, s = K.cluster_index_kernel(labels[bounds[p] : bounds[p + 1]], n_ids)
        out = np.empty(int(sel.sum()), np.int64)
        base = np.ascontiguousarray(before[:, :, p])
        K.resolve_requests_kernel(*[a[sel] for a in req], base, m, s, bounds[p], n, out)
        np.testing.assert_array_equal(out, expected[slots[sel]])
