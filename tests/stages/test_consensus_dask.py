"""The consensus stage on labels above DASK_LABELS_BYTES: KCC fits on the cluster's row blocks.

The threshold is lowered to 0 (our own knob) so that a small ensemble takes the path 5 million rows
take; the labels are read by the worker processes from a zarr store on disk, never whole by the client.
"""

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from ensemble_dask.consensus.bce import BCE
from ensemble_dask.consensus.kcc import KCC
from ensemble_dask.io.store import RunStore
from ensemble_dask.stages import consensus as stage
from ensemble_dask.stages.generate import import_labels


def _labels(n=24_000, n_clusterings=12, seed=0):
    """Noisy, subsampled relabelings of 3 classes: most rows distinct, as in a subsampled ensemble."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    cols = []
    for _ in range(n_clusterings):
        k = int(rng.integers(3, 6))
        col = rng.permutation(k)[y]
        noisy = rng.random(n) < 0.25
        col[noisy] = rng.integers(0, k, int(noisy.sum()))
        col[rng.random(n) < 0.4] = -1
        cols.append(col)
    return np.column_stack(cols).astype(np.int32), y


def _store(path, labels):
    store = RunStore(str(path))
    import_labels(store, "labels-table", labels=labels)
    return store


@pytest.fixture(scope="module")
def fitted(tmp_path_factory, process_client):
    """KCC and BCE fitted by the stage on the same labels on 2 and on 1 worker processes:
    ``(labels, y, runs)``."""
    from distributed import Client, LocalCluster

    labels, y = _labels()
    runs = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stage, "DASK_LABELS_BYTES", 0)
        with (
            LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0", host="127.0.0.1") as one,
            Client(one) as one_client,
        ):
            for workers, client in ((2, process_client), (1, one_client)):
                store = _store(tmp_path_factory.mktemp(f"workers{workers}") / "run.zarr", labels)
                assert stage.uses_cluster(store, "kcc", {"n_clusters": 3})
                assert stage.uses_cluster(store, "bce", {"n_clusters": 3})
                assert not stage.uses_cluster(store, "mm", {"n_clusters": 3})
                for method in ("kcc", "bce"):
                    metrics = stage.consensus_stage(store, method, seed=0, client=client, n_clusters=3)
                    runs[workers, method] = (store, metrics)
    return labels, y, runs


def _check_written(store, name, n):
    out = store[f"consensus/{name}"]
    Y, lab, unc = out["Y"][:], out["labels"][:], out["uncertainty"][:]
    assert Y.shape == (n, 3) and np.allclose(Y.sum(1), 1, atol=1e-5)
    np.testing.assert_array_equal(lab, Y.argmax(1))
    assert unc.shape == (n,) and np.all((unc >= 0) & (unc <= 1 + 1e-6))
    assert store.record(f"consensus/{name}")["complete"]
    return out, lab


@pytest.mark.slow
@pytest.mark.parametrize("method", ["kcc", "bce"])
def test_same_result_on_one_and_two_workers(fitted, method):
    labels, _, runs = fitted
    (two, m2), (one, m1) = runs[2, method], runs[1, method]
    np.testing.assert_array_equal(two[f"consensus/{method}/labels"][:], one[f"consensus/{method}/labels"][:])
    assert m1["objective"] == pytest.approx(m2["objective"], rel=1e-9)
    _check_written(two, method, labels.shape[0])


def test_kcc_on_the_workers_equals_the_in_memory_fit(fitted):
    labels, y, runs = fitted
    assert np.unique(labels, axis=0).shape[0] > 0.5 * labels.shape[0]  # KCC.fit compares starts on a sample
    store, metrics = runs[2, "kcc"]
    out, lab = _check_written(store, "kcc", labels.shape[0])
    # the in-memory fit with the stage's seed: the same starts (compared on the same sample), the same fit
    local = KCC(3, random_state=out.attrs["params"]["random_state"]).fit(labels)
    assert out.attrs["converged"] is local.converged_ is metrics["converged"]
    assert out.attrs["n_iter"] == local.n_iter_
    assert metrics["objective"] == pytest.approx(local.objective_, rel=1e-9)
    assert adjusted_rand_score(local.labels_, lab) == 1.0
    assert adjusted_rand_score(y, lab) > 0.9


def test_bce_on_the_workers_starts_from_a_seeded_partition(fitted):
    """BCE's k-means++ start on the workers is a KCC partition of the blocks: other draws than in memory,
    the same optimum here, in a few EM iterations (random starts need tens)."""
    labels, y, runs = fitted
    store, metrics = runs[2, "bce"]
    out, lab = _check_written(store, "bce", labels.shape[0])
    local = BCE(3, random_state=out.attrs["params"]["random_state"]).fit(labels)
    assert out.attrs["converged"] is local.converged_ is metrics["converged"] is True
    assert metrics["objective"] == pytest.approx(local.lower_bound_, rel=1e-4)  # EM stops at tol=1e-5
    assert adjusted_rand_score(local.labels_, lab) > 0.99
    assert adjusted_rand_score(y, lab) > 0.9
    assert out.attrs["n_iter"] <= 2 * local.n_iter_ + 5


@pytest.mark.slow
def test_workflow_fits_kcc_on_fresh_workers(monkeypatch, tmp_path, caplog):
    """A workflow whose consensus fits on the embedded cluster restarts its worker processes first (they keep
    memory of generate); the fit on the new workers is the in-memory one."""
    from ensemble_dask.pipeline import run_workflow

    monkeypatch.setattr(stage, "DASK_LABELS_BYTES", 0)
    store_url = str(tmp_path / "run.zarr")
    spec = {
        "seed": 1,
        "store": store_url,
        "dask": {"n_workers": 2},
        "data": {"url": "synthetic:blobs?n=600&d=4&centers=3&seed=3"},
        "generate": {"n_clusterings": 8, "k_min": 2, "k_max": 5, "rate": 0.5},
        "consensus": {"kcc": {"n_clusters": 3}},
    }
    with caplog.at_level("INFO", logger="ensemble_dask.pipeline"):
        report = run_workflow(spec)
    assert "restarting the embedded cluster's workers" in caplog.text
    store = RunStore(store_url)
    out = store["consensus/kcc"]
    labels = store["labels"][:]
    local = KCC(3, random_state=out.attrs["params"]["random_state"]).fit(labels)
    seen = (labels >= 0).any(axis=1)  # (the rows in no clustering get the clusters' shares: the stage's)
    np.testing.assert_array_equal(out["labels"][:][seen], local.labels_[seen])
    assert report["methods"]["kcc"]["effective_k"] == 3


def test_pair_methods_on_large_labels_and_pairs(monkeypatch, tmp_path, process_client):
    """Above both thresholds (lowered to 0) PCC and PPC take their start from KCC fitted on the workers' row
    blocks and read the pairs a block of rows at a time: neither the labels nor the pairs are read whole
    here, and the partition is the one the in-memory path finds. ``init: random`` needs no cluster."""
    import ensemble_dask.coassoc.csr as csr
    import ensemble_dask.consensus.starts as starts
    from ensemble_dask.stages.coassoc import coassoc_stage

    labels, y = _labels(n=6_000)
    small, large = _store(tmp_path / "small.zarr", labels), _store(tmp_path / "large.zarr", labels)
    for store in (small, large):
        coassoc_stage(store, None, strategy="cocluster", l=10, seed=0)
    for method in ("pcc-l2", "ppc"):
        stage.consensus_stage(small, method, seed=0, n_clusters=3)
    monkeypatch.setattr(stage, "DASK_LABELS_BYTES", 0)
    monkeypatch.setattr(stage, "PAIRS_IN_MEMORY_BYTES", 0)
    assert stage.uses_cluster(large, "pcc-l2", {"n_clusters": 3})
    assert not stage.uses_cluster(large, "pcc-l2", {"n_clusters": 3, "init": "random"})

    def whole(*args, **kwargs):
        raise AssertionError("read whole")

    monkeypatch.setattr(starts, "label_starts", whole)
    monkeypatch.setattr(csr, "read_pair_fractions", whole)
    for method in ("pcc-l2", "ppc"):
        metrics = stage.consensus_stage(large, method, seed=0, client=process_client, n_clusters=3)
        assert metrics["converged"] and metrics["effective_k"] == 3
        lab = large[f"consensus/{method}/labels"][:]
        assert adjusted_rand_score(small[f"consensus/{method}/labels"][:], lab) > 0.99
        assert adjusted_rand_score(y, lab) > 0.9
