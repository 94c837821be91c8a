"""PCC and PPC on pairs read from the store a block of rows at a time (``StoredPairs``, out of core)."""

import gc
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score

from ensemble_dask import InputError
from ensemble_dask.coassoc import coassociation, write_pairs
from ensemble_dask.coassoc.csr import StoredPairs
from ensemble_dask.consensus._common.base import as_pair_data
from ensemble_dask.consensus.pcc import PCC, PPC
from ensemble_dask.consensus.pcc import _kernels as K
from ensemble_dask.consensus.starts import label_starts
from ensemble_dask.io.store import RunStore

METHODS = [(PCC, {"divergence": "l2"}), (PCC, {"divergence": "kl"}), (PPC, {})]


@pytest.fixture(scope="module")
def ensemble():
    """10 k-means labelings (k in 2..8) of 4 blobs, their cocluster pairs in a memory:// store."""
    X, _ = make_blobs(1500, centers=4, n_features=5, cluster_std=2.5, random_state=0)
    rng = np.random.default_rng(0)
    labels = np.stack(
        [KMeans(int(rng.integers(2, 9)), n_init=1, random_state=s).fit_predict(X) for s in range(10)], axis=1
    ).astype(np.int32)
    pairs = coassociation(labels, strategy="cocluster", l=10, seed=0)
    group = zarr.open_group(store="memory://test-pcc-stored", mode="w")
    write_pairs(group, pairs)
    return labels, pairs, group


def _quiet(fit, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit(*args)


@pytest.mark.parametrize("cls, kw", METHODS)
@pytest.mark.parametrize("init", ["labels", "random"])
def test_one_block_is_the_in_memory_fit(cls, kw, init, ensemble):
    """With every row in one block the work list is the in-memory one: the same steps, bit for bit."""
    labels, pairs, group = ensemble
    start = label_starts(labels, 4, random_state=0) if init == "labels" else "random"
    a = cls(4, init=start, random_state=0, **kw).fit(pairs)
    b = cls(4, init=start, random_state=0, **kw).fit(StoredPairs(group, entries_per_block=10**9))
    assert b.objective_ == a.objective_ and b.converged_
    np.testing.assert_array_equal(b.memberships_, a.memberships_)


@pytest.mark.parametrize("cls, kw", METHODS)
def test_many_blocks_descend_to_a_kkt_point(cls, kw, ensemble):
    """Block by block (a few rows each), f never increases and the fit ends where the KKT test holds, as
    recomputed from scratch on the whole pairs; from the label starts it finds the in-memory partition."""
    labels, pairs, group = ensemble
    starts = label_starts(labels, 4, random_state=0)
    stored = StoredPairs(group, entries_per_block=2000)
    assert len(stored.bounds) > 10 and stored.bounds[0][0] == 0 and stored.bounds[-1][1] == pairs.n
    a = cls(4, init=starts, random_state=0, tol=1e-3, **kw).fit(pairs)
    b = cls(4, init=starts, random_state=0, tol=1e-3, **kw).fit(stored)
    assert b.converged_
    trace = b.objective_trace_[:, 1]
    assert np.all(np.diff(trace) <= 1e-9 * abs(trace[0]))
    data = as_pair_data(pairs)
    code, diag = (K.KL, 0.0) if kw.get("divergence") == "kl" else (K.L2, 0.0 if cls is PCC else 1.0)
    w = data.w if cls is PCC else np.ones(data.nnz)
    f, gap = K.objective_and_gap(data.indptr, data.indices, data.x, w, b.memberships_, code, 1e-10, diag)
    assert f == pytest.approx(b.objective_, rel=1e-9)
    scale = w.sum() / pairs.n + diag
    assert gap / scale <= 1e-3 * (1 + 1e-9) and b.kkt_gap_ == pytest.approx(gap / scale, rel=1e-6, abs=1e-12)
    assert adjusted_rand_score(a.labels_, b.labels_) > 0.99  # another order of visits: the same partition
    assert b.objective_ == pytest.approx(a.objective_, rel=1e-3)


def test_the_objective_by_blocks_sums_to_the_objective(ensemble):
    _, pairs, group = ensemble
    data = as_pair_data(pairs)
    Y = np.random.default_rng(1).dirichlet(np.ones(4), pairs.n)
    stored = StoredPairs(group, entries_per_block=3000)
    for code in (K.KL, K.L2):
        whole = K.objective(data.indptr, data.indices, data.x, data.w, Y, code, 1e-10, 0.0)
        parts = 0.0
        for r0, r1 in stored.bounds:
            ptr, ind, co, both = stored.read(r0, r1)
            parts += K.objective_rows(ptr, ind, co / both, both.astype(float), Y, 4, r0, r1, code, 1e-10, 0.0)
        assert parts == pytest.approx(whole, rel=1e-12)


def test_a_capped_fit_says_so(ensemble):
    labels, _, group = ensemble
    stored = StoredPairs(group, entries_per_block=2000)
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        model = PCC(4, divergence="kl", random_state=0, max_iter=1).fit(stored)
    assert not model.converged_ and model.n_iter_ == 1 and model.kkt_gap_ > 1e-3


def test_what_the_stored_fit_does_not_take(ensemble):
    _, pairs, group = ensemble
    stored = StoredPairs(group)
    with pytest.raises(InputError, match="sample_weight is not supported"):
        PCC(4).fit(stored, sample_weight=np.ones(pairs.nnz))
    with pytest.raises(InputError, match="algorithm='rows' only"):
        PPC(4, algorithm="baum-eagon").fit(stored)
    with pytest.raises(InputError, match="entries_per_block"):
        StoredPairs(group, entries_per_block=0)


def test_a_local_copy_serves_the_later_sweeps(ensemble, tmp_path):
    """``local_copy=True``: each block is read from the store once, then from local disk (the same arrays,
    the counts in the narrowest type); the copy is removed on close."""
    labels, pairs, _ = ensemble
    group = zarr.open_group(str(tmp_path / "run.zarr"), mode="w")
    write_pairs(group, pairs)
    plain = StoredPairs(group, entries_per_block=2000)
    assert plain.local_copy is None and len(plain.bounds) > 2  # a local store: auto keeps no copy
    wanted = [plain.read(*b) for b in plain.bounds]
    with StoredPairs(group, entries_per_block=2000, local_copy=True, local_dir=tmp_path) as copied:
        first = [copied.read(*b) for b in copied.bounds]
        del group["pairs/indices"], group["pairs/co"]  # later sweeps no longer need the store
        for b, a, want in zip(copied.bounds, first, wanted, strict=True):
            again = copied.read(*b)
            for x, y, z in zip(again, a, want, strict=True):
                np.testing.assert_array_equal(x, y)
                np.testing.assert_array_equal(x, z)
                assert x.dtype == z.dtype
        assert np.load(next((tmp_path / copied.local_copy).glob("*.co.npy"))).dtype == np.uint8
        where = copied.local_copy
    assert copied.local_copy is None and not (tmp_path / where).exists()


def test_a_local_copy_on_object_storage_by_default(ensemble, s3_bucket):
    """Pairs on s3:// (a moto server process): ``auto`` keeps a local copy, and a fit from it is the fit
    from the store's blocks."""
    labels, pairs, group = ensemble
    bucket, opts = s3_bucket
    remote = RunStore(f"s3://{bucket}/pairs.zarr", opts)
    write_pairs(remote.group, pairs)
    stored = StoredPairs(f"s3://{bucket}/pairs.zarr", storage_options=opts, entries_per_block=4000)
    assert stored.local_copy is not None
    start = label_starts(labels, 4, random_state=0)
    a = PCC(4, init=start, random_state=0).fit(StoredPairs(group, entries_per_block=4000))
    b = PCC(4, init=start, random_state=0).fit(stored)
    assert b.objective_ == a.objective_
    np.testing.assert_array_equal(b.memberships_, a.memberships_)
    where = Path(stored.local_copy)
    assert len(list(where.glob("*.indices.npy"))) == len(stored.bounds) > 1
    del stored
    gc.collect()
    assert not where.exists()


def test_local_copy_must_be_a_choice(ensemble):
    with pytest.raises(InputError, match="local_copy must be 'auto', True or False; got 'yes'"):
        StoredPairs(ensemble[2], local_copy="yes")


def test_a_full_disk_leaves_the_blocks_to_the_store(ensemble, tmp_path, monkeypatch, caplog):
    """A local copy that cannot be written (OSError) is no error: the block is read from the store each time,
    with a warning, and nothing half-written is left; memory:// stores keep no copy under ``auto``."""
    _, pairs, memory_group = ensemble
    assert StoredPairs(memory_group).local_copy is None
    group = zarr.open_group(str(tmp_path / "run.zarr"), mode="w")
    write_pairs(group, pairs)
    want = [
        StoredPairs(group, entries_per_block=2000).read(*b)
        for b in StoredPairs(group, entries_per_block=2000).bounds
    ]
    real = np.save

    def full(path, arr):
        real(path, arr)
        if str(path).endswith(".co.npy"):
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "save", full)
    with StoredPairs(group, entries_per_block=2000, local_copy=True, local_dir=tmp_path) as copied:
        with caplog.at_level("WARNING", logger="ensemble_dask.coassoc.csr"):
            for _ in range(2):
                for b, w in zip(copied.bounds, want, strict=True):
                    for x, y in zip(copied.read(*b), w, strict=True):
                        np.testing.assert_array_equal(x, y)
        assert "No space left on device" in caplog.text
        assert not list((tmp_path / copied.local_copy).iterdir())
