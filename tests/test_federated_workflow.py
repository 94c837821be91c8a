"""The federated workflow: sites simulated by local worker processes offering their resources."""

import warnings

import numpy as np
import pytest
import zarr

from ensemble_dask import InputError
from ensemble_dask.consensus.bce import BCE, ConvergenceWarning
from ensemble_dask.io.store import RunStore
from ensemble_dask.pipeline import run_workflow
from ensemble_dask.stages.federated import split_sites


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    root = tmp_path_factory.mktemp("fed")
    run_workflow(
        {
            "store": str(root / "run.zarr"),
            "dask": {"n_workers": 1},
            "data": "synthetic:blobs?n=300&d=4&centers=3&seed=5",
            "generate": {"n_clusterings": 6, "k_min": 2, "k_max": 4, "rate": 0.8},
        }
    )
    store = RunStore(root / "run.zarr")
    return root, store["labels"][:], split_sites(store, root / "sites", ["site-a", "site-b", "site-c"])


def test_federated_workflow_equals_centralised_bce(sites):
    root, labels, declared = sites
    spec = {
        "seed": 2,
        "store": str(root / "coordinator.zarr"),
        "federated": {"mode": "secure", "n_clusters": 3, "max_iter": 40, "sites": declared},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        summary = run_workflow(spec)["federated"]
        coord = RunStore(root / "coordinator.zarr")
        rs = coord.record("federated")["params"]["random_state"]
        central = BCE(3, max_iter=40, random_state=rs).fit(labels)
    assert summary["sites"] == ["site-a", "site-b", "site-c"] and summary["mode"] == "secure"
    np.testing.assert_allclose(coord["federated/alpha"][:], central.alpha_, rtol=1e-8)
    memberships = np.concatenate([zarr.open_array(s["output"], mode="r")[:] for s in declared])
    np.testing.assert_allclose(memberships, central.memberships_, atol=1e-6)
    # the coordinator's store holds the model, never the sites' memberships
    assert set(coord["federated"].array_keys()) == {"alpha", "beta"}


def test_missing_site_data_names_the_site(sites, tmp_path):
    root, _, declared = sites
    bad = [dict(s) for s in declared]
    bad[1]["url"] = str(tmp_path / "nowhere.zarr")
    spec = {"store": str(tmp_path / "c.zarr"), "federated": {"n_clusters": 3, "sites": bad}}
    with pytest.raises(InputError, match="site-b"):
        run_workflow(spec)
    assert RunStore(tmp_path / "c.zarr").record("federated") is None
