"""The embedded cluster starts only when a stage has work to do; a run that computes writes a performance
report."""

import logging
import os
import re

import pytest

from ensemble_dask.io.store import RunStore
from ensemble_dask.pipeline import PERFORMANCE_REPORT, client_for_store, run_workflow
from ensemble_dask.runtime.clients import LazyClient, dask_client
from tests.io.test_content_stages import _small_csv


@pytest.fixture
def clients_started(monkeypatch):
    """How many Dask clients the workflow's stages made: the count, not the log, is the evidence."""
    import ensemble_dask.pipeline as pipeline

    made = []

    def counting(*args, **kwargs):
        made.append(args)
        return dask_client(*args, **kwargs)

    monkeypatch.setattr(pipeline, "dask_client", counting)
    return made


@pytest.mark.slow
def test_rerun_of_a_finished_workflow_starts_no_cluster(
    tmp_path, caplog, clients_started, figures_on, performance_report_on
):
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
    assert len(clients_started) == 1
    # no consensus method of this workflow fits on the workers: the cluster is closed before them (the pair
    # method's start is computed while the coassoc stage runs, and the fit reads it from the store)
    text = caplog.text
    assert text.index("label starts for K=2 computed") < text.index("closing the Dask client")
    assert text.index("closing the Dask client") < text.index("label starts for K=2: from the store")
    assert (tmp_path / "run.zarr" / "report" / "cluster.json").exists()
    report = tmp_path / "run.zarr" / PERFORMANCE_REPORT
    assert report.exists() and b"<html" in report.read_bytes()[:4000].lower()
    # the figure of a method on "full" pairs (figures are on in this test)
    assert (tmp_path / "run.zarr" / "report" / "fig-method-pcc-l2.png").stat().st_size > 20_000
    pages = [report, *(tmp_path / "run.zarr" / "report" / f for f in ("metrics.json", "index.html"))]
    stamps = [os.stat(p).st_mtime_ns for p in pages]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ensemble_dask"):
        again = run_workflow(spec)
    assert len(clients_started) == 1  # none more
    assert "report: up to date, skipped" in caplog.text  # the report is keyed on content too
    assert again["methods"] == first["methods"] and again["base_partitions"] == first["base_partitions"]
    assert again["html"] == first["html"]
    assert [os.stat(p).st_mtime_ns for p in pages] == stamps  # nothing computed, nothing rewritten

    # a new consensus method: it runs in this process (no cluster), its label starts and the base
    # partitions' scores come from the store, and the report is rebuilt with both methods
    caplog.clear()
    spec["consensus"]["pcc-kl"] = {"n_clusters": 2}
    with caplog.at_level(logging.INFO, logger="ensemble_dask"):
        third = run_workflow(spec)
    assert len(clients_started) == 1
    assert (
        "label starts for K=2: from the store" in caplog.text and "starts for K=2 computed" not in caplog.text
    )
    assert "report: base partition scores from the store" in caplog.text
    assert (
        sorted(third["methods"]) == ["pcc-kl", "pcc-l2"]
        and third["methods"]["pcc-l2"] == first["methods"]["pcc-l2"]
    )
    assert third["base_partitions"] == first["base_partitions"]
    assert os.stat(pages[2]).st_mtime_ns != stamps[2]


@pytest.mark.slow
def test_no_performance_report_when_the_dask_config_says_so(tmp_path, monkeypatch):
    """``ensemble-dask.report.dask-performance: false``: the run computes on its cluster and describes it, and
    writes no performance report (the tests' default: tests/conftest.py); a value that is no boolean is an
    error naming the setting, before any stage."""
    import dask

    from ensemble_dask import InputError

    store = RunStore(tmp_path / "run.zarr")
    with dask.config.set({"ensemble-dask.report.dask-performance": False}):
        with client_for_store(store, dask_options={"n_workers": 1}) as client:
            assert client.submit(sum, [1, 2]).result() == 3
    report, facts = (tmp_path / "run.zarr" / p for p in (PERFORMANCE_REPORT, "report/cluster.json"))
    assert client.started and facts.exists() and not report.exists()
    with dask.config.set({"ensemble-dask.report.dask-performance": True}):
        with client_for_store(store, dask_options={"n_workers": 1}) as client:
            assert client.submit(sum, [1, 2]).result() == 3
    assert report.exists()
    monkeypatch.setenv("DASK_ENSEMBLE_DASK__REPORT__DASK_PERFORMANCE", "sometimes")
    dask.config.refresh()
    try:
        said = "(env DASK_ENSEMBLE_DASK__REPORT__DASK_PERFORMANCE) must be true or false; got 'sometimes'"
        with pytest.raises(InputError, match=re.escape(said)):
            with client_for_store(RunStore(tmp_path / "other.zarr")):
                pass
    finally:
        monkeypatch.undo()
        dask.config.refresh()


def test_lazy_client_starts_on_first_use_only(tmp_path):
    with LazyClient(lambda: dask_client(processes=False, n_workers=1)) as lazy:
        assert not lazy.started
        assert lazy.submit(sum, [1, 2]).result() == 3
        assert lazy.started
        first = lazy.resolve()
        lazy.release()  # closed now; a later use starts a new cluster
        assert first.status in ("closing", "closed") and lazy.started
        assert lazy.submit(sum, [3, 4]).result() == 7 and lazy.resolve() is not first
    store = RunStore(f"memory://lazy-{tmp_path.name}")
    with client_for_store(store) as client:
        pass
    assert not client.started and PERFORMANCE_REPORT not in store


def test_a_failing_close_does_not_replace_the_error(caplog):
    """Issue 29: with the scheduler dead mid-stage, the performance report's cleanup raised an
    AttributeError that replaced the real error (the lost connection)."""
    from ensemble_dask.runtime.clients import LazyClient

    class Stack:
        def close(self):
            raise AttributeError("'NoneType' object has no attribute 'performance_report'")

    lazy = LazyClient(lambda: None)
    with pytest.raises(ConnectionError, match="lost the scheduler"):
        with lazy:
            lazy._stack = Stack()
            raise ConnectionError("lost the scheduler")
    assert "failed too" in caplog.text
    lazy._stack = Stack()
    with pytest.raises(AttributeError):  # without an error, a failing close is still raised
        with lazy:
            pass


def test_the_embedded_cluster_s_default_workers_come_from_the_dask_config():
    """``ensemble-dask.cluster.n-workers`` (the suite sets it to 1) is the default; unset, one per core; a bad
    value is an error naming the setting."""
    import dask

    from ensemble_dask import InputError
    from ensemble_dask.runtime.clients import default_n_workers

    with dask.config.set({"ensemble-dask.cluster.n-workers": 3}):
        assert default_n_workers() == 3
    with dask.config.set({"ensemble-dask.cluster.n-workers": None}):
        assert default_n_workers() == max(1, os.cpu_count() or 1)
    for bad in (0, "two", True):
        with dask.config.set({"ensemble-dask.cluster.n-workers": bad}):
            with pytest.raises(InputError, match="ensemble-dask.cluster.n-workers"):
                default_n_workers()


@pytest.mark.slow
def test_the_config_s_workers_are_the_embedded_cluster_s():
    """The setting reaches a command's embedded cluster: two workers here, where the suite says one."""
    import dask

    with dask.config.set({"ensemble-dask.cluster.n-workers": 2}), dask_client() as client:
        assert len(client.scheduler_info()["workers"]) == 2


@pytest.mark.slow
@pytest.mark.parametrize("on", [True, False])
def test_the_dashboard_setting_gives_the_embedded_cluster_its_dashboard_or_none(on):
    """``ensemble-dask.cluster.dashboard``: on by default (the tests turn it off, as a user may, to start
    clusters without importing bokeh)."""
    import urllib.error
    import urllib.request

    import dask

    with dask.config.set({"ensemble-dask.cluster.dashboard": on}):
        with dask_client(n_workers=1, processes=False) as client:
            try:
                status = urllib.request.urlopen(client.dashboard_link, timeout=30).status
            except urllib.error.HTTPError as exc:
                status = exc.code
    assert status == (200 if on else 404), client.dashboard_link
