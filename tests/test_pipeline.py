import warnings

import numpy as np
import pytest

from ensemble_dask import InputError
from ensemble_dask.io.store import RunStore
from ensemble_dask.pipeline import apply_overrides, run_workflow


def test_memory_store_runs_on_an_embedded_cluster_of_threads():
    spec = {
        "seed": 5,
        "store": "memory://pipeline-demo",
        "dask": {"n_workers": 2},
        "data": {"url": "synthetic:blobs?n=600&d=3&centers=3&seed=2"},
        "generate": {"n_clusterings": 5, "k_min": 2, "k_max": 4, "rate": 0.8},
    }
    report = run_workflow(spec)
    assert report["dataset"]["n"] == 600
    assert report["base_partitions"]["H"]["max"] > 0.9
    lab = RunStore("memory://pipeline-demo")["labels"][:]
    assert lab.shape == (600, 5) and np.isclose((lab == -1).mean(), 0.2)


def test_memory_store_refuses_an_external_scheduler():
    spec = {
        "store": "memory://x",
        "scheduler": "tcp://127.0.0.1:1",
        "data": "synthetic:blobs?n=50",
        "generate": {},
    }
    with pytest.raises(InputError, match="lives in this process's memory"):
        run_workflow(spec)


def test_overrides():
    spec = {"data": {"url": "a.csv"}, "generate": {"n_clusterings": 3}}
    out = apply_overrides(spec, ["generate.rate=0.5", "generate.algorithms=[kmeans, ward]"], data="b.csv")
    assert out["generate"] == {"n_clusterings": 3, "rate": 0.5, "algorithms": ["kmeans", "ward"]}
    assert out["data"]["url"] == "b.csv" and spec["data"]["url"] == "a.csv"
    with pytest.raises(InputError, match="--set expects key=value"):
        apply_overrides(spec, ["generate.rate"])


def _spec(store, **consensus):
    return {
        "seed": 1,
        "store": store,
        "dask": {"n_workers": 2},
        "data": {"url": "synthetic:blobs?n=800&d=6&centers=3&seed=3"},
        "generate": {"n_clusterings": 10, "k_min": 2, "k_max": 6, "rate": 0.5},
        "coassoc": {"strategy": "per-point", "l": 15},
        "consensus": consensus,
    }


def test_consensus_methods_end_to_end():
    store_url = "memory://pipeline-consensus"
    report = run_workflow(
        _spec(
            store_url, **{"pcc-kl": {"n_clusters": 3}, "pcc-l2": {"n_clusters": 3}, "ppc": {"n_clusters": 3}}
        )
    )
    store = RunStore(store_url)
    assert set(report["methods"]) == {"pcc-kl", "pcc-l2", "ppc"}
    for name, m in report["methods"].items():
        assert set(m) >= {"H", "ARI", "NMI", "effective_k", "seconds", "objective"}
        Y = store[f"consensus/{name}/Y"][:]
        assert Y.shape == (800, 3) and np.allclose(Y.sum(1), 1, atol=1e-5)
        np.testing.assert_array_equal(store[f"consensus/{name}/labels"][:], Y.argmax(1))
        u = store[f"consensus/{name}/uncertainty"][:]
        assert ((u >= 0) & (u <= 1)).all()
    assert report["methods"]["pcc-kl"]["H"] > max(0.95, report["base_partitions"]["H"]["mean"])
    assert store["consensus/pcc-l2"].attrs["params"]["divergence"] == "l2"
    # half of the entries are missing: some stored pairs were never co-present, and are skipped
    assert (store["pairs/both"][:] == 0).any()


def test_stale_results_leave_the_report():
    store_url = "memory://pipeline-stale"
    run_workflow(_spec(store_url, **{"pcc-kl": {"n_clusters": 3}}))
    spec = _spec(store_url, **{"pcc-l2": {"n_clusters": 3}})
    spec["coassoc"]["l"] = 10  # new pairs: the old pcc-kl result no longer matches them
    report = run_workflow(spec)
    assert set(report["methods"]) == {"pcc-l2"}


def test_unknown_consensus_method():
    with pytest.raises(InputError, match="unknown method 'pcx'"):
        run_workflow(_spec("memory://pipeline-bad", pcx={}))
    with pytest.raises(InputError, match="n_clusters"):
        run_workflow(_spec("memory://pipeline-bad2", **{"pcc-kl": {"n_clusters": 0}}))
    assert RunStore("memory://pipeline-bad2").record("consensus/pcc-kl") is None


def test_bayesian_methods_end_to_end():
    store_url = "memory://pipeline-bce"
    methods = {
        "bce": {"n_clusters": 3},
        "mm": {"n_clusters": 3, "n_init": 5},
        "gbce": {"n_clusters": 3},
        "bce-local": {"method": "bce", "n_clusters": 3},
    }
    spec = _spec(store_url, **methods)
    del spec["coassoc"]
    from ensemble_dask.consensus.bce import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # recorded as 'converged' with the result
        report = run_workflow(spec)
    store = RunStore(store_url)
    assert set(report["methods"]) == set(methods)
    for name, m in report["methods"].items():
        assert m["H"] > max(0.9, report["base_partitions"]["H"]["mean"]), name
        Y = store[f"consensus/{name}/Y"][:]
        assert Y.shape == (800, 3) and np.allclose(Y.sum(1), 1, atol=1e-5)
    beta = store["consensus/bce/beta"]
    assert beta.shape[0] == 3 and beta.attrs["offsets"][-1] == beta.shape[1]
    assert store["consensus/bce/alpha"].shape == (3,)
    # BCE on the cluster (E-step on the workers' row blocks) equals BCE in this process
    from ensemble_dask.consensus.bce import BCE

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # recorded with the stage's result too
        local = BCE(3, random_state=store["consensus/bce"].attrs["params"]["random_state"]).fit(
            store["labels"][:]
        )
    assert store["consensus/bce"].attrs["converged"] == local.converged_
    np.testing.assert_allclose(store["consensus/bce/Y"][:], local.memberships_, atol=1e-5)


def test_bad_consensus_parameters_keep_the_previous_result():
    store_url = "memory://pipeline-keep"
    run_workflow(_spec(store_url, **{"pcc-kl": {"n_clusters": 3}}))
    with pytest.raises(InputError, match="n_clusters"):
        run_workflow(_spec(store_url, **{"pcc-kl": {"n_clusters": 10_000}}))
    store = RunStore(store_url)
    assert store.record("consensus/pcc-kl")["complete"]
    assert store["consensus/pcc-kl/Y"].shape == (800, 3)
