"""`ensemble-dask federated workflows/federated-bce.yaml` in an empty directory: one command, over TLS."""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import zarr

from ensemble_dask.consensus.bce import BCE, ConvergenceWarning, EmptyRowsWarning
from ensemble_dask.io.store import RunStore
from ensemble_dask.metrics import partition_scores

from .conftest import REPO, random_sites

WORKFLOW = REPO / "workflows" / "federated-bce.yaml"
SMALL_DEMO = '{data: "synthetic:kdd99?n=1200&seed=0", n_clusterings: 10, k_min: 3, k_max: 8, rate: 1.0}'


def run_cli(cwd, *args):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "ensemble_dask.cli", "federated", str(WORKFLOW), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_one_command_in_an_empty_directory(tmp_path):
    proc = run_cli(
        tmp_path, "--no-progress", "--set", f"federated.demo={SMALL_DEMO}", "--set", "federated.tol=0.0001"
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "CommClosedError" not in proc.stderr
    assert "federated BCE (secure, TLS) over 3 sites (1200 rows)" in proc.stdout
    root = tmp_path / "runs" / "federated-bce"
    assert {"ca.pem", "ca-key.pem", "coordinator.pem", "site-a-mask.key", "site-c-mask.pub"} <= {
        p.name for p in (root / "certs").iterdir()
    }
    metrics = json.loads((root / "coordinator.zarr" / "report" / "metrics.json").read_text())
    assert metrics["tls"] is True and metrics["mode"] == "secure" and metrics["converged"] is True
    assert metrics["rows_per_site"] == {"site-a": 400, "site-b": 400, "site-c": 400}
    assert metrics["iterations"] == len(metrics["bound_trace"]) and metrics["seconds"] > 0
    # the model equals centralised BCE on the pooled rows (read here from the sites' own files)
    sites = ["site-a", "site-b", "site-c"]
    labels = np.vstack([zarr.open_array(root / "sites" / s / "labels.zarr", mode="r")[:] for s in sites])
    coord = RunStore(root / "coordinator.zarr")
    rs = coord.record("federated")["params"]["random_state"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyRowsWarning)  # a few demo rows have no label
        central = BCE(6, init="random", tol=1e-4, random_state=rs).fit(labels)
    np.testing.assert_allclose(coord["federated/alpha"][:], central.alpha_, rtol=1e-8)
    memb = np.vstack([zarr.open_array(root / "sites" / s / "memberships.zarr", mode="r")[:] for s in sites])
    np.testing.assert_allclose(memb, central.memberships_, atol=1e-6)
    # H, ARI, NMI of the whole federation, from securely summed contingency tables
    y = np.concatenate([zarr.open_array(root / "sites" / s / "reference.zarr", mode="r")[:] for s in sites])
    expected = partition_scores(central.labels_, y)
    for key in ("H", "ARI", "NMI"):
        assert metrics[key] == pytest.approx(expected[key], abs=1e-9)
    assert metrics["ARI"] > 0.5  # a consensus worth scoring (not one cluster for all rows)
    # the coordinator's store holds the model, never memberships; the checkpoint is gone once complete
    assert set(coord["federated"].array_keys()) == {"alpha", "beta"}
    assert "checkpoint" not in set(coord["federated"].group_keys())
    # `ensemble-dask report` redraws the coordinator's page from its model and summary
    page = root / "coordinator.zarr" / "report" / "index.html"
    page.unlink()
    rep = subprocess.run(
        [sys.executable, "-m", "ensemble_dask.cli", "report", "--store", str(root / "coordinator.zarr"), "--format", "html"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout.strip() == str(page) and "site-a" in page.read_text()


def test_plain_tcp_is_refused_unless_insecure(tmp_path):
    proc = run_cli(tmp_path, "--scheduler", "tcp://127.0.0.1:9", "--set", "federated.demo=false")
    assert proc.returncode == 2
    assert "refuses plain TCP unless federated.insecure is true" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_plain_tcp_client_is_refused_unless_insecure(tmp_path):
    """The rule holds for a client handed in too; with ``insecure: true`` the run goes ahead, ``"tls": false``."""
    from distributed import Client, Scheduler, SpecCluster, Worker

    from ensemble_dask import InputError
    from ensemble_dask.stages.federated import run_federated_workflow

    sites = random_sites(tmp_path, (30, 4))
    spec = {
        "store": str(tmp_path / "coordinator.zarr"),
        "federated": {"mode": "plain", "n_clusters": 2, "max_iter": 3, "tol": 0.1, "sites": sites},
    }
    workers = {  # threads of this process on plain TCP
        name: {"cls": Worker, "options": {"nthreads": 1, "resources": {name: 1}, "host": "127.0.0.1"}}
        for name in ("site-a", "site-b")
    }
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": ":0", "host": "127.0.0.1"}}
    with SpecCluster(scheduler=scheduler, workers=workers) as cluster, Client(cluster) as client:
        assert client.scheduler.address.startswith("tcp://")
        with pytest.raises(InputError, match="refuses plain TCP unless federated.insecure is true"):
            run_federated_workflow(spec, client=client)
        spec["federated"]["insecure"] = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # 3 EM iterations may not converge
            summary = run_federated_workflow(spec, client=client)
    assert summary["tls"] is False and summary["mode"] == "plain" and summary["n_rows"] == 60
    metrics = json.loads((tmp_path / "coordinator.zarr" / "report" / "metrics.json").read_text())
    assert metrics["tls"] is False
