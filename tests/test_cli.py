"""The ``ensemble-dask`` command, run as a subprocess, as a user would."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from ensemble_dask.io.store import RunStore

REPO = Path(__file__).resolve().parents[1]
EXE = shutil.which("ensemble-dask", path=str(Path(sys.executable).parent)) or "ensemble-dask"


def cli(*args, cwd=None):
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_run_demo_workflow(tmp_path):
    store = tmp_path / "demo.zarr"
    r = cli(
        "run", REPO / "workflows" / "demo.yaml", "--store", store, "--n-workers", 2, "--no-progress",
        "--set", "data.url=synthetic:kdd99?n=3000&seed=1", "--set", "generate.n_clusterings=6",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "base partitions" in r.stdout
    report = json.loads((store / "report" / "metrics.json").read_text())
    assert set(report) == {"dataset", "base_partitions", "methods"}
    assert report["dataset"]["n"] == 3000 and report["dataset"]["n_clusterings"] == 6
    assert set(report["base_partitions"]) == {"H", "ARI", "NMI"}
    assert 0 < report["base_partitions"]["H"]["min"] <= report["base_partitions"]["H"]["mean"] <= 1
    labels = zarr.open_array(str(store / "labels"), mode="r")
    assert labels.shape == (3000, 6) and (labels[:] == -1).mean() == pytest.approx(0.5)


def test_stage_commands_and_rerun(kdd_sample, tmp_path):
    store = tmp_path / "run.zarr"
    r = cli("ingest", kdd_sample, "--store", store, "--schema", "kdd99", "--subset", 800)
    assert r.returncode == 0, r.stderr
    assert "n=800" in r.stdout
    r = cli("ingest", kdd_sample, "--store", store, "--schema", "kdd99", "--subset", 800)
    assert "up to date" in r.stdout
    r = cli("generate", "--store", store, "-N", 4, "--rate", 0.5, "--n-workers", 1, "--no-progress")
    assert r.returncode == 0, r.stderr
    r = cli("report", "--store", store)
    assert r.returncode == 0 and "base partitions" in r.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["ingest", "nope.csv.gz", "--schema", "kdd99"], "input file 'nope.csv.gz' does not exist"),
        (["generate", "-N", "3", "--rate", "1.5"], r"'rate' parameter must be in (0, 1]; got 1.5"),
        (["generate", "-N", "3", "--k-min", "6", "--k-max", "3"], "k_min=6 must be <= k_max=3"),
        (["generate", "-N", "3", "--ensemble", "type2", "--algorithms", "kmeans,optics"], "got 'optics'"),
    ],
)
def test_bad_input_exits_non_zero(args, message, kdd_sample, tmp_path):
    store = tmp_path / "run.zarr"
    assert cli("ingest", kdd_sample, "--store", store, "--schema", "kdd99", "--subset", 300).returncode == 0
    r = cli(*args, "--store", store, cwd=tmp_path)
    assert r.returncode == 2
    assert message in r.stderr
    assert set(RunStore(store).records()) == {"ingest"}


def test_bad_workflow_key(tmp_path):
    wf = tmp_path / "wf.yaml"
    wf.write_text("data: synthetic:kdd99\ngenerat: {n_clusterings: 3}\n")
    r = cli("run", wf, "--store", tmp_path / "s.zarr")
    assert r.returncode == 2 and "unknown key(s) ['generat']" in r.stderr
    r = cli("run", wf, "--store", tmp_path / "s.zarr", "--set", "generat=", "--set", "data.subsett=4")
    assert r.returncode == 2


def test_existing_scheduler(dask_scheduler_address, tmp_path):
    """`--scheduler` submits to real `dask scheduler` / `dask worker` processes."""
    store = tmp_path / "run.zarr"
    r = cli(
        "run", REPO / "workflows" / "demo.yaml", "--store", store, "--scheduler", dask_scheduler_address,
        "--no-progress", "--set", "data.url=synthetic:kdd99?n=2000", "--set", "generate.n_clusterings=4",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    from distributed import Client

    with Client(dask_scheduler_address) as c:
        assert len(c.scheduler_info()["workers"]) == 2
    lab = RunStore(store)["labels"][:]
    assert lab.shape == (2000, 4)
    # the same run on the embedded cluster gives the same labels
    other = tmp_path / "local.zarr"
    r = cli(
        "run", REPO / "workflows" / "demo.yaml", "--store", other, "--n-workers", 1, "--no-progress",
        "--set", "data.url=synthetic:kdd99?n=2000", "--set", "generate.n_clusterings=4",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(RunStore(other)["labels"][:], lab)


def test_unreachable_scheduler(tmp_path):
    r = cli(
        "run", REPO / "workflows" / "demo.yaml", "--store", tmp_path / "s.zarr", "--scheduler", "tcp://127.0.0.1:1",
        "--set", "data.url=synthetic:kdd99?n=500",
    )  # fmt: skip
    assert r.returncode == 2 and "cannot reach the Dask scheduler at 'tcp://127.0.0.1:1'" in r.stderr


def test_coassoc_and_consensus_commands(tmp_path):
    store = tmp_path / "run.zarr"
    assert cli("ingest", "synthetic:blobs?n=500&d=6&centers=3", "--store", store).returncode == 0
    r = cli("generate", "--store", store, "-N", 8, "--k-max", 5, "--n-workers", 1, "--no-progress")
    assert r.returncode == 0, r.stderr
    r = cli("coassoc", "--store", store, "--strategy", "per-point", "--l", 10, "--n-workers", 1)
    assert r.returncode == 0, r.stderr
    r = cli("consensus", "pcc-l2", "--store", store, "--set", "n_clusters=3")
    assert r.returncode == 0, r.stderr
    assert "pcc-l2" in r.stdout
    report = json.loads((store / "report" / "metrics.json").read_text())
    assert report["methods"]["pcc-l2"]["effective_k"] <= 3
    r = cli("consensus", "pcc-kl", "--store", store, "--set", "n_clusters=0")
    assert r.returncode == 2 and "n_clusters" in r.stderr
    r = cli("consensus", "pcc-kl", "--store", store, "--set", "divergence=hellinger")
    assert r.returncode == 2 and "hellinger" in r.stderr


def test_stage_commands_do_not_create_stores(tmp_path):
    r = cli("report", "--store", tmp_path / "typo.zarr")
    assert r.returncode == 2 and "does not exist" in r.stderr
    assert not (tmp_path / "typo.zarr").exists()
