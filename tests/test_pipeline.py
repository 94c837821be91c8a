import numpy as np
import pytest

from ensemble_dask import InputError
from ensemble_dask.pipeline import apply_overrides, run_workflow
from ensemble_dask.store import RunStore


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
