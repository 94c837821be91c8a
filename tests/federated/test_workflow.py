"""`ensemble-dask federated workflows/federated-bce.yaml` in an empty directory: one command, over TLS."""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import zarr

from ensemble_dask.consensus.bce import BCE, EmptyRowsWarning
from ensemble_dask.io.store import RunStore
from ensemble_dask.metrics import partition_scores
from tests.conftest import REPO

pytestmark = pytest.mark.slow

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
        tmp_path, "--no-progress", "--set", f"federated.demo={SMALL_DEMO}", "--set", "federated.tol=0.001"
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "CommClosedError" not in proc.stderr
    assert "federated BCE (secure, mutual TLS) over 3 sites (1200 rows)" in proc.stdout
    assert "demo: making every key of the federation" in proc.stdout  # the demo says who holds the keys
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
        central = BCE(6, init="random", tol=1e-3, random_state=rs).fit(labels)
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
    assert [p.name for p in (root / "coordinator.zarr" / "federated").iterdir() if not p.is_dir()] == [
        "zarr.json"
    ]
    # `ensemble-dask report` redraws the coordinator's page from its model and summary
    page = root / "coordinator.zarr" / "report" / "index.html"
    page.unlink()
    rep = subprocess.run(
        [sys.executable, "-m", "ensemble_dask.cli", "report", "--store", str(root / "coordinator.zarr"),
         "--format", "html"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout.strip() == str(page) and "site-a" in page.read_text()


def test_the_command_names_an_unreachable_site_without_a_traceback(tmp_path):
    """A site whose agent does not answer: one error line naming it, the resume hint, exit status 3."""
    import yaml

    from ensemble_dask.federated.protocol.certs import make_certs

    make_certs(tmp_path / "certs", ["coordinator"])
    spec = {
        "name": "lost-site",
        "store": str(tmp_path / "coordinator.zarr"),
        "federated": {
            "n_clusters": 3,
            "certs": str(tmp_path / "certs"),
            "timeout": 4,
            "sites": [{"name": n, "address": "https://127.0.0.1:9"} for n in ("site-a", "site-b")],
        },
    }
    (tmp_path / "wf.yaml").write_text(yaml.safe_dump(spec))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "ensemble_dask.cli", "federated", str(tmp_path / "wf.yaml"), "--no-progress"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "site(s) ['site-a', 'site-b'] lost in joining the session" in proc.stderr
    assert "run the same command" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_split_sites_writes_each_site_below_out_once(tmp_path):
    """Plain, distinct names (issue 29: `--names a,a` overwrote half the rows, `--names ../x,b` wrote
    outside --out); each site gets the data section of its own site.yaml."""
    from ensemble_dask import InputError
    from ensemble_dask.stages.sites import split_sites

    store = RunStore(tmp_path / "s.zarr")
    store.group.create_array("labels", data=np.arange(20, dtype=np.int32).reshape(10, 2))
    for names, match in ((["a", "a"], "distinct"), (["../x", "b"], "certificate names must be")):
        with pytest.raises(InputError, match=match):
            split_sites(store, tmp_path / "out", names)
    assert not (tmp_path / "x").exists() and not (tmp_path / "out").exists()
    sites = split_sites(store, tmp_path / "out", ["a", "b"])
    assert [s["name"] for s in sites] == ["a", "b"] and set(sites[0]["data"]) == {"labels"}
    np.testing.assert_array_equal(
        zarr.open_array(sites[1]["data"]["labels"], mode="r")[:], store["labels"][5:]
    )
