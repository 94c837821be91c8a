"""The consensus stage on labels above DASK_LABELS_BYTES: KCC fits on the cluster's row blocks.

The threshold is lowered to 0 (our own knob) so that a small ensemble takes the path 5 million rows
take; the labels are read by the worker processes from a zarr store on disk.
"""

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

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


def test_kcc_on_large_labels_fits_on_the_workers(monkeypatch, tmp_path, process_client):
    from distributed import Client, LocalCluster

    monkeypatch.setattr(stage, "DASK_LABELS_BYTES", 0)
    labels, y = _labels()
    distinct = np.unique(labels, axis=0).shape[0]
    assert distinct > 0.5 * labels.shape[0]  # the in-memory fit compares its starts on a sample of rows
    results = []
    with (
        LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0", host="127.0.0.1") as one,
        Client(one) as one_client,
    ):
        for name, client in (("two", process_client), ("one", one_client)):
            store = _store(tmp_path / f"{name}.zarr", labels)
            assert stage.uses_cluster(store, "kcc", {"n_clusters": 3})
            assert not stage.uses_cluster(store, "mm", {"n_clusters": 3})
            metrics = stage.consensus_stage(store, "kcc", seed=0, client=client, n_clusters=3)
            results.append((store, metrics))
    (two, m2), (one, m1) = results
    # the same seed, the same result on 1 and 2 workers
    np.testing.assert_array_equal(two["consensus/kcc/labels"][:], one["consensus/kcc/labels"][:])
    assert m1["objective"] == pytest.approx(m2["objective"], rel=1e-12)
    # what was written is complete and consistent
    out = two["consensus/kcc"]
    Y, lab, unc = out["Y"][:], out["labels"][:], out["uncertainty"][:]
    assert Y.shape == (labels.shape[0], 3) and np.allclose(Y.sum(1), 1, atol=1e-5)
    np.testing.assert_array_equal(lab, Y.argmax(1))
    assert unc.shape == (labels.shape[0],) and np.all((unc >= 0) & (unc <= 1 + 1e-6))
    assert two.record("consensus/kcc")["complete"]
    # the in-memory fit with the stage's seed: the same starts (compared on the same sample), the same fit
    params = out.attrs["params"]
    local = KCC(3, random_state=params["random_state"]).fit(labels)
    assert out.attrs["converged"] is local.converged_ is m2["converged"]
    assert out.attrs["n_iter"] == local.n_iter_
    assert m2["objective"] == pytest.approx(local.objective_, rel=1e-9)
    assert adjusted_rand_score(local.labels_, lab) == 1.0
    assert adjusted_rand_score(y, lab) > 0.9
