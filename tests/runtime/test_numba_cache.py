"""Work keyed on content beside the stages (label starts of the pair methods), and the leaner label
encoders."""

import os

import numpy as np
import scipy.sparse as sp

from ensemble_dask.consensus._common.encoding import column_categories, compress_rows
from ensemble_dask.consensus.baselines import _kernels as bkern
from ensemble_dask.consensus.starts import label_starts
from ensemble_dask.io.store import RunStore
from ensemble_dask.stages.consensus import STARTS_CACHE, _label_starts
from ensemble_dask.stages.generate import import_labels


def _labels(seed, n=300, n_clust=8):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 3, n)
    lab = np.where(rng.random((n, n_clust)) < 0.8, truth[:, None], rng.integers(0, 3, (n, n_clust)))
    lab[rng.random(lab.shape) < 0.2] = -1
    return lab.astype(np.int32)


def test_label_starts_are_kept_under_the_labels_content(tmp_path):
    store = RunStore(tmp_path / "run.zarr")
    lab = _labels(0)
    np.save(tmp_path / "a.npy", lab)
    import_labels(store, str(tmp_path / "a.npy"))
    want = label_starts(lab, 3, random_state=7)
    first = _label_starts(store, 3, 7)
    assert [a.tolist() for a in first] == [a.tolist() for a in want]
    assert len(list(store[STARTS_CACHE].array_keys())) == 1
    # read back from the store: the same starts; another K or seed is another entry
    again = _label_starts(store, 3, 7)
    assert [a.tolist() for a in again] == [a.tolist() for a in want]
    _label_starts(store, 2, 7)
    _label_starts(store, 3, 8)
    assert len(list(store[STARTS_CACHE].array_keys())) == 3
    # other labels (one entry changed): other starts, computed afresh
    lab2 = lab.copy()
    lab2[0, 0] = 2 if lab2[0, 0] != 2 else 1
    np.save(tmp_path / "b.npy", lab2)
    import_labels(store, str(tmp_path / "b.npy"))
    got = _label_starts(store, 3, 7)
    assert [a.tolist() for a in got] == [a.tolist() for a in label_starts(lab2, 3, random_state=7)]
    assert len(list(store[STARTS_CACHE].array_keys())) == 4


def test_compress_rows_keeps_int32_input_without_a_wide_copy():
    lab = _labels(1, n=500, n_clust=4)
    lab[100:200] = lab[0]  # repeated rows
    g32 = np.where(lab >= 0, lab + 3 * np.arange(lab.shape[1]), -1).astype(np.int32)
    u32, w32, inv32 = compress_rows(g32)
    u64, w64, inv64 = compress_rows(g32.astype(np.int64))
    assert (
        u32.dtype == np.int32 and u64.dtype == np.int64 and np.array_equal(u32, u64)
    )  # the input dtype kept
    assert np.array_equal(w32, w64) and np.array_equal(inv32, inv64)
    assert np.array_equal(u32[inv32], g32) and w32.sum() == lab.shape[0] and u32.shape[0] < 500


def test_column_categories_by_one_pass_equal_unique():
    lab = _labels(2)
    lab[:, 3] = -1
    lab[5, 2] = 40
    want = [np.unique(c[c >= 0]) for c in lab.T]
    for arr in (lab, lab.astype(np.int64)):
        got = column_categories(arr)
        assert [g.tolist() for g in got] == [w.tolist() for w in want]
    big = lab.astype(np.int64)
    big[0, 1] = 10**9  # a large label: the per-column path
    assert column_categories(big)[1].tolist() == np.unique(big[:, 1][big[:, 1] >= 0]).tolist()


def test_weighted_gram_equals_the_sparse_product():
    rng = np.random.default_rng(3)
    A = sp.random_array((200, 30), density=0.1, random_state=4, format="csr")
    A.sort_indices()
    w = rng.random(200)
    M = np.zeros((30, 30))
    bkern.weighted_gram(A.indptr, A.indices, A.data, w, M)
    want = (A.T @ sp.diags_array(w) @ A).toarray()
    assert np.allclose(M, want)


def test_auto_strategy_draws_cocluster_pairs_at_any_n():
    from ensemble_dask.stages.coassoc import resolve_strategy

    # 5,000,000 x 100 labels (2 GB): cocluster pairs too, drawn by tasks that each read one row partition
    # of the labels (coassoc/_tasks.py: _cluster_histogram, _cocluster_requests, _resolve_requests)
    assert resolve_strategy("auto", (5_000_000, 100), {}, n_clusters=3) == ("cocluster", {"l": 10})
    assert resolve_strategy("auto", (100_000, 100), {}, n_clusters=3)[0] == "cocluster"


def test_spill_of_a_remote_store_goes_through_local_disk_on_a_local_cluster(tmp_path, monkeypatch):
    import tempfile

    from ensemble_dask.coassoc import build_coassociation, coassociation, read_pairs

    made = []
    real = tempfile.mkdtemp

    def mkdtemp(**kw):
        made.append(real(dir=tmp_path, **kw))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    labels = _labels(5, n=200, n_clust=6)
    store = RunStore(f"memory://scale2-transit-{tmp_path.name}")  # a URL with a scheme: not this disk
    store.group.create_array("labels", data=labels)
    want = coassociation(labels, strategy="per-point", seed=3, l=4, block_size=16)
    for count_mode in ("rows", "join"):
        summary = build_coassociation(
            store.url,
            strategy="per-point",
            seed=3,
            l=4,
            block_size=16,
            row_block=64,
            count_mode=count_mode,
            spill=True,
            client_or_scheduler="threads",
        )
        assert summary["spill"] is True and "_tmp" not in store.group["pairs"]
        got = read_pairs(store.group)
        assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
        assert np.array_equal(got.co, want.co) and np.array_equal(got.both, want.both)
    # each build spilled into its own local directory, removed at its end
    assert len(made) == 2 and not any(os.path.exists(d) for d in made)
