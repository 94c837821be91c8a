"""The embedded cluster starts only when a stage has work to do; a run that computes writes a performance report."""

import logging
import os

from ensemble_dask.io.store import RunStore
from ensemble_dask.parallel import LazyClient, dask_client
from ensemble_dask.pipeline import PERFORMANCE_REPORT, client_for_store, run_workflow

from .test_content_stages import _small_csv

STARTED = "starting the Dask client"


def test_rerun_of_a_finished_workflow_starts_no_cluster(tmp_path, caplog):
    src = _small_csv(tmp_path / "x.csv.gz")
    spec = {
        "name": "lazy",
        "seed": 0,
        "store": str(tmp_path / "run.zarr"),
        "dask": {"n_workers": 1},
        "data": {"url": str(src), "label_column": 3},
        "generate": {"n_clusterings": 4, "k_min": 2, "k_max": 3},
        "coassoc": {"strategy": "full"},
        "consensus": {"pcc-l2": {"n_clusters": 2}},
    }
    with caplog.at_level(logging.INFO, logger="ensemble_dask"):
        first = run_workflow(spec)
    assert STARTED in caplog.text
    report = tmp_path / "run.zarr" / PERFORMANCE_REPORT
    assert report.exists() and b"<html" in report.read_bytes()[:4000].lower()
    stamp = os.stat(report).st_mtime_ns
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ensemble_dask"):
        again = run_workflow(spec)
    assert STARTED not in caplog.text
    assert again["methods"] == first["methods"]
    assert os.stat(report).st_mtime_ns == stamp  # nothing computed, no new report


def test_lazy_client_starts_on_first_use_only(tmp_path):
    with LazyClient(lambda: dask_client(processes=False, n_workers=1)) as lazy:
        assert not lazy.started
        assert lazy.submit(sum, [1, 2]).result() == 3
        assert lazy.started
    store = RunStore(f"memory://lazy-{tmp_path.name}")
    with client_for_store(store) as client:
        pass
    assert not client.started and PERFORMANCE_REPORT not in store
