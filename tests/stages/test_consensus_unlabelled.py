"""Rows in no base clustering (absent from every subsample, or all -1 in imported labels), from a user
review: PCC, PPC, HBGF and the other methods gave them an arbitrary cluster with uncertainty 0, and KCC
uncertainty 1, with no word. The consensus stage now gives them the clusters' shares of the other rows (the
largest cluster, with that distribution's uncertainty) and warns; BCE and MM did so already (their prior)."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble_dask.io.store import RunStore
from ensemble_dask.stages import consensus as stage
from ensemble_dask.stages.coassoc import coassoc_stage
from ensemble_dask.stages.generate import import_labels


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(3)
    y = np.repeat([0, 1, 2], [300, 200, 100])
    cols = []
    for _ in range(8):
        col = rng.permutation(3)[y]
        col[rng.random(600) < 0.2] = -1
        cols.append(col)
    labels = np.column_stack(cols).astype(np.int32)
    labels[:10] = -1  # ten rows in no clustering
    store = RunStore(str(tmp_path_factory.mktemp("unlabelled") / "run.zarr"))
    import_labels(store, "labels-table", labels=labels)
    coassoc_stage(store, None, strategy="cocluster", l=10, seed=0)
    return store


@pytest.mark.parametrize("method", ["pcc-kl", "ppc", "kcc", "hbgf", "bce"])
def test_rows_in_no_clustering_get_the_clusters_shares_and_a_warning(store, method):
    metrics = stage.consensus_stage(store, method, seed=0, n_clusters=3)
    Y = store[f"consensus/{method}/Y"][:]
    labels = store[f"consensus/{method}/labels"][:]
    u = store[f"consensus/{method}/uncertainty"][:]
    assert np.all(u[:10] > 0.8), u[:10]  # (the shares 1/2, 1/3, 1/6: 0.92)
    assert np.median(u[10:]) < 0.5
    assert len(set(labels[:10].tolist())) == 1 and np.allclose(Y[:10], Y[0], atol=0.05)
    if method != "bce":  # (BCE's own EmptyRowsWarning and prior)
        np.testing.assert_allclose(Y[0], Y[10:].mean(axis=0), atol=1e-4)  # (stored as float32)
        assert any("10 of 600 rows are in no base clustering" in w for w in metrics["warnings"])
