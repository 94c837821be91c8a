"""The ``ensemble-dask`` command, run as a subprocess, as a user would."""

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
import zarr

from ensemble_dask.io.store import RunStore
from tests.conftest import EXE, REPO


def cli(*args, cwd=None):
    return subprocess.run([EXE, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_run_demo_workflow(tmp_path, performance_report_on):
    """The demo as a user runs it, with Dask's performance report (its profiles made the workers warn)."""
    store = tmp_path / "demo.zarr"
    r = cli(
        "run", REPO / "workflows" / "demo.yaml", "--store", store, "--n-workers", 2, "--no-progress",
        "--set", "data.url=synthetic:kdd99?n=3000&seed=1", "--set", "generate.n_clusterings=6",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "base partitions" in r.stdout
    assert r.stdout.strip().endswith(f"report: {store / 'report' / 'index.html'}")  # the page to open
    # a run that went well ends quietly: no worker killed at the end, no traceback, no sizeof warnings
    for noise in ("Traceback", "still alive", "Sizeof calculation", "CommClosedError"):
        assert noise not in r.stderr, r.stderr
    assert (store / "report" / "dask-performance.html").stat().st_size > 10_000
    page = (store / "report" / "index.html").read_text()
    assert "<a href='dask-performance.html'>Dask performance report</a>" in page  # linked from the page
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
    # without K the range is the one for small K, and the command says how to give K
    assert "4 clusterings (k in [2, 10])" in r.stdout and "generate --n-clusters K" in r.stdout
    r = cli(
        "generate",
        "--store",
        store,
        "-N",
        4,
        "--rate",
        0.5,
        "--n-clusters",
        12,
        "--n-workers",
        1,
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    assert "4 clusterings (k in [6, 24]), 4 computed" in r.stdout and "--n-clusters K" not in r.stdout
    r = cli("report", "--store", store)
    assert r.returncode == 0 and "base partitions" in r.stdout


@pytest.fixture(scope="module")
def ingested(kdd_sample, tmp_path_factory):
    """A store of 300 KDD records, ingested once by the command (each test takes a copy)."""
    store = tmp_path_factory.mktemp("ingested") / "run.zarr"
    assert cli("ingest", kdd_sample, "--store", store, "--schema", "kdd99", "--subset", 300).returncode == 0
    return store


@pytest.mark.parametrize(
    "args, message",
    [
        (["ingest", "nope.csv.gz", "--schema", "kdd99"], "input file 'nope.csv.gz' does not exist"),
        (["ingest", "kddcup.data_10_percent.gz", "--schema", "kdd99"], "exist; the KDD Cup 99 files"),
        (["generate", "-N", "3", "--rate", "1.5"], r"'rate' parameter must be in (0, 1]; got 1.5"),
        (["generate", "-N", "3", "--k-min", "6", "--k-max", "3"], "k_min=6 must be <= k_max=3"),
        (["generate", "-N", "3", "--ensemble", "type2", "--algorithms", "kmeans,optics"], "got 'optics'"),
    ],
)
def test_bad_input_exits_non_zero(args, message, ingested, tmp_path):
    store = tmp_path / "run.zarr"
    shutil.copytree(ingested, store)
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


@pytest.mark.slow
def test_existing_scheduler(dask_scheduler_address, tmp_path):
    """`--scheduler` submits to real `dask scheduler` / `dask worker` processes, and they give the labels the
    embedded cluster gives (one consensus: the stages before it are what runs on the cluster)."""
    workflow = tmp_path / "wf.yaml"
    workflow.write_text(
        "seed: 0\ndata: {url: 'synthetic:kdd99?n=2000'}\ngenerate: {n_clusterings: 4}\n"
        "consensus: {kcc: {n_clusters: 3}}\n"
    )
    store = tmp_path / "run.zarr"
    # the same run on the embedded cluster, on a store of its own: started first, it runs beside the one on
    # the scheduler (each waits on its workers for most of its time); its labels are compared below
    other = tmp_path / "local.zarr"
    embedded = subprocess.Popen(
        [EXE, "run", str(workflow), "--store", str(other), "--n-workers", "1", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        r = cli("run", workflow, "--store", store, "--scheduler", dask_scheduler_address, "--no-progress")
        _, embedded_err = embedded.communicate(timeout=300)
    finally:
        if embedded.poll() is None:  # not waited for: it and its workers go
            os.killpg(embedded.pid, signal.SIGKILL)
            embedded.communicate()
    assert r.returncode == 0, r.stderr
    from distributed import Client

    with Client(dask_scheduler_address) as c:
        assert len(c.scheduler_info()["workers"]) == 2
    lab = RunStore(store)["labels"][:]
    assert lab.shape == (2000, 4)
    # the same run on the embedded cluster gives the same labels
    assert embedded.returncode == 0, embedded_err
    np.testing.assert_array_equal(RunStore(other)["labels"][:], lab)
    np.testing.assert_array_equal(
        RunStore(other)["consensus/kcc/labels"][:], RunStore(store)["consensus/kcc/labels"][:]
    )


def test_unreachable_scheduler(tmp_path):
    r = cli(
        "run", REPO / "workflows" / "demo.yaml", "--store", tmp_path / "s.zarr", "--scheduler", "tcp://127.0.0.1:1",
        "--set", "data.url=synthetic:kdd99?n=500",
    )  # fmt: skip
    assert r.returncode == 2 and "cannot reach the Dask scheduler at 'tcp://127.0.0.1:1'" in r.stderr
    # found before ingest (a user review: after it, which on a large table is long): no stage ran
    assert not (tmp_path / "s.zarr").exists()


def test_coassoc_and_consensus_commands(tmp_path):
    store = tmp_path / "run.zarr"
    assert cli("ingest", "synthetic:blobs?n=500&d=6&centers=3", "--store", store).returncode == 0
    r = cli("generate", "--store", store, "-N", 8, "--k-max", 5, "--n-workers", 1, "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "8 clusterings (k in [2, 5])" in r.stdout and "--n-clusters K" not in r.stdout
    r = cli("coassoc", "--store", store, "--strategy", "per-point", "--l", 10, "--n-workers", 1)
    assert r.returncode == 0, r.stderr
    r = cli("consensus", "pcc-l2", "--store", store, "--set", "n_clusters=3", "--report")
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


# --- bad input of issue 9's list: one line naming the file, parameter or value; exit 2; nothing marked


def main(capsys, *args):
    """``ensemble-dask ARGS`` in this process: (exit status, stdout, stderr)."""
    from ensemble_dask.cli import main as cli_main

    rc = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def _records(path):
    return RunStore(path, mode="r").records() if Path(path).exists() else {}


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_object_store_is_one_line(tmp_path):
    """Before: six tracebacks ending in a ContextVar ValueError, exit 1."""
    opts = {
        "key": "k",
        "secret": "s",
        "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{_free_port()}"},
        "config_kwargs": {"retries": {"max_attempts": 1}},
    }
    r = cli(
        "ingest",
        "synthetic:blobs?n=50",
        "--store",
        "s3://bucket/run.zarr",
        "--storage-options",
        json.dumps(opts),
    )
    assert r.returncode == 2
    assert r.stderr.startswith("ensemble-dask: error: cannot reach run store 's3://bucket/run.zarr': ")
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_missing_label_column_names_the_columns(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text("a,b,c\n1,2,x\n3,4,y\n5,6,x\n")
    store = tmp_path / "run.zarr"
    rc, _, err = main(capsys, "ingest", table, "--store", store, "--header", "--label-column", "nosuch")
    assert rc == 2
    assert err == f"ensemble-dask: error: {table}: no column 'nosuch'; columns are ['a', 'b', 'c']\n"
    assert _records(store) == {}
    # without a header the columns are numbered, and a number picks one
    rc, _, err = main(capsys, "ingest", table, "--store", store, "--no-header", "--label-column", "5")
    assert rc == 2 and "no column 5; the file has no header" in err and "numbered 0..2" in err
    # not said: the first line (no number on it, numbers below) is taken for the header
    rc, out, err = main(capsys, "ingest", table, "--store", store, "--label-column", "c")
    assert rc == 0 and "n=3 d=2" in out, err
    bare = tmp_path / "bare.csv"
    bare.write_text("1,2,x\n3,4,y\n5,7,x\n")
    rc, out, err = main(capsys, "ingest", bare, "--store", tmp_path / "bare.zarr", "--label-column", "2")
    assert rc == 0 and "n=3 d=2" in out, err
    assert RunStore(tmp_path / "bare.zarr")["y_true"][:].tolist() == [0, 1, 0]


def test_labels_table_without_labels(tmp_path, capsys):
    store = tmp_path / "run.zarr"
    assert main(capsys, "ingest", "synthetic:blobs?n=40&d=2&centers=2", "--store", store)[0] == 0
    np.save(tmp_path / "none.npy", np.full((40, 4), -1))
    rc, _, err = main(capsys, "import-labels", tmp_path / "none.npy", "--store", store)
    assert rc == 2 and "labels no point: every entry is -1" in err and "none.npy" in err
    lab = np.zeros((40, 3), dtype=int)
    lab[:, 1] = -1
    np.save(tmp_path / "col.npy", lab)
    rc, _, err = main(capsys, "import-labels", tmp_path / "col.npy", "--store", store)
    assert rc == 2 and "column 1 labels no point" in err
    assert set(_records(store)) == {"ingest"}
    # so the later stages have nothing to count: they say which stage to run first
    rc, _, err = main(capsys, "consensus", "bce", "--store", store, "--set", "n_clusters=2")
    assert rc == 2 and "stage 'generate' has not completed" in err


def test_report_on_an_empty_store(tmp_path, capsys):
    zarr.open_group(str(tmp_path / "empty.zarr"), mode="w")
    rc, out, err = main(capsys, "report", "--store", tmp_path / "empty.zarr")
    assert rc == 2 and out == ""
    assert "holds no data set (no 'X' and no 'labels'); run ingest or import-labels first" in err
    assert not (tmp_path / "empty.zarr" / "report").exists()


def test_table_of_constant_columns(tmp_path, capsys):
    (tmp_path / "c.csv").write_text("1,2,3\n1,2,3\n1,2,3\n")
    rc, _, err = main(capsys, "ingest", tmp_path / "c.csv", "--store", tmp_path / "run.zarr")
    assert rc == 2 and "c.csv: every feature column is constant over the 3 rows kept (0, 1, 2)" in err
    assert _records(tmp_path / "run.zarr") == {}


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "generate.bogus=1",
            "workflow section 'generate': unknown key(s) ['bogus']; known keys: ['algorithms', ",
        ),
        (
            "consensus.pcc-kl.bogus=1",
            "consensus method 'pcc-kl' (pcc): unknown parameter(s) ['bogus']; PCC takes",
        ),
        (
            "consensus.mine={method: bce, bogus: 1}",
            "consensus method 'mine' (bce): unknown parameter(s) ['bogus']",
        ),
        (
            "consensus.mine={method: nosuch}",
            "consensus method 'mine': unknown method 'nosuch'; known: ['auto', 'bce', ",
        ),
        (
            "consensus.pcc-kl.n_clusters=0",
            "consensus method 'pcc-kl': The 'n_clusters' parameter of PCC must be an integer >= 2; got 0",
        ),
        (
            "consensus.pcc-kl.divergence=hellinger",
            "consensus method 'pcc-kl' is pcc with divergence='kl'; got divergence='hellinger'",
        ),
        ("consensus.pcc.divergence=hellinger", "'divergence' parameter of PCC must be one of 'kl', 'l2'"),
        (
            "consensus.bce={alpha_init: -1}",
            "consensus method 'bce': The 'alpha_init' parameter of BCE must be",
        ),
        (
            "generate.rate=abc",
            "workflow section 'generate': The 'rate' parameter must be a number in (0, 1]; got 'abc'",
        ),
        ("generate.k_max=1", "workflow section 'generate': The 'k_max' parameter must be >= 2; got 1"),
        ("generate.algorithms=[kmeans, optics]", "got 'optics'"),
        ("coassoc.l=0", "workflow section 'coassoc': The 'l' parameter must be >= 1; got 0"),
        ("coassoc.p=0.1", "unknown key(s) ['p'] for strategy 'per-point'"),
        ("data.subset=0", "workflow section 'data': The 'subset' parameter must be >= 1; got 0"),
        ("data.bogus=1", "workflow section 'data': unknown key(s) ['bogus']"),
    ],
)
def test_workflow_is_validated_before_the_first_stage(override, message, tmp_path, capsys):
    """Before: these failed after ingest, generate and coassoc had run (or with Python's TypeError)."""
    store = tmp_path / "run.zarr"
    rc, _, err = main(capsys, "run", REPO / "workflows" / "demo.yaml", "--store", store, "--set", override)
    assert rc == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1 and "unexpected keyword" not in err
    assert not store.exists()


def test_more_clusters_than_points_stops_before_ingest_marks_its_stage(tmp_path, capsys):
    """Before: found by the consensus stage, after generate and coassoc had run; then (a review) after ingest
    had written the data and marked its stage, leaving a new store behind. Now as ingest counts the rows."""
    store = tmp_path / "run.zarr"
    rc, _, err = main(
        capsys, "run", REPO / "workflows" / "demo.yaml", "--store", store,
        "--set", "data.url=synthetic:kdd99?n=300&seed=1", "--set", "consensus.pcc-l2.n_clusters=301",
    )  # fmt: skip
    assert rc == 2
    assert err.strip().endswith(
        "consensus method 'pcc-l2': The 'n_clusters' parameter must be <= n=300 "
        "(the data set's points); got 301"
    )
    assert not store.exists()  # no stage marked: the new store is not left behind


def test_failed_ingest_or_run_leaves_no_new_empty_store(tmp_path, capsys):
    """Before: a typo left a new run store holding only its zarr.json."""
    (tmp_path / "t.csv").write_text("1,2,3\n4,x,6\n")
    store = tmp_path / "new.zarr"
    rc, _, err = main(capsys, "ingest", tmp_path / "t.csv", "--store", store)
    assert rc == 2 and "non-numeric value 'x'" in err and not store.exists()
    rc, _, err = main(
        capsys, "run", REPO / "workflows" / "demo.yaml", "--store", store, "--set", "data.url=nope.csv"
    )
    assert rc == 2 and "does not exist" in err and not store.exists()
    # a store that existed is left as it was, even one holding nothing yet
    zarr.open_group(str(store), mode="w")
    rc, _, _ = main(capsys, "ingest", tmp_path / "t.csv", "--store", store)
    assert rc == 2 and (store / "zarr.json").exists()
    good = tmp_path / "good.zarr"
    assert main(capsys, "ingest", "synthetic:blobs?n=40&d=2", "--store", good)[0] == 0
    assert main(capsys, "ingest", tmp_path / "t.csv", "--store", good)[0] == 2
    assert set(_records(good)) == {"ingest"} and RunStore(good, mode="r").n == 40


def test_federated_takes_no_progress(tmp_path, capsys):
    wf = tmp_path / "wf.yaml"
    wf.write_text("data: synthetic:blobs?n=20\n")
    rc, _, err = main(capsys, "federated", wf, "--no-progress")
    assert rc == 2 and "has no 'federated' section" in err  # parsed; refused for the workflow only


def test_short_csv_row_is_named_by_line(tmp_path, capsys):
    (tmp_path / "s.csv").write_text("1,2,3\n4,5,6\n7,8,9\n1,2\n3,4,5\n")
    rc, _, err = main(
        capsys, "ingest", tmp_path / "s.csv", "--store", tmp_path / "run.zarr", "--impute", "mean"
    )
    assert rc == 2 and err.strip().endswith("s.csv, line 4 has 2 fields, expected 3")
    assert _records(tmp_path / "run.zarr") == {}


def test_another_data_set_into_a_store_stops(tmp_path, capsys):
    store = tmp_path / "run.zarr"
    a, b = "synthetic:blobs?n=60&d=2&seed=1", "synthetic:blobs?n=60&d=2&seed=2"
    assert main(capsys, "ingest", a, "--store", store)[0] == 0
    rc, _, err = main(capsys, "ingest", b, "--store", store)
    assert rc == 2
    assert f"run store '{store}' holds the data set read from '{a}', not from '{b}'" in err
    assert "--overwrite" in err
    assert RunStore(store).record("ingest")["meta"]["url"] == a
    # the same source again is up to date; --overwrite replaces the data set
    assert "up to date" in main(capsys, "ingest", a, "--store", store)[1]
    rc, out, _ = main(capsys, "ingest", b, "--store", store, "--overwrite")
    assert rc == 0 and RunStore(store).record("ingest")["meta"]["url"] == b


def test_demo_asks_for_the_classes_it_has():
    from ensemble_dask.io.datasets import iter_synthetic_chunks
    from ensemble_dask.pipeline import load_workflow

    spec = load_workflow(REPO / "workflows" / "demo.yaml")
    query = dict(kv.split("=") for kv in spec["data"]["url"].split("?")[1].split("&"))
    labels = set()
    for _, frame in iter_synthetic_chunks("kdd99", **query):
        labels |= set(frame["label"])
    assert len(labels) == 4
    assert {p["n_clusters"] for p in spec["consensus"].values()} == {len(labels)}


def test_import_labels_creates_the_store(tmp_path, capsys):
    """Bring-your-own partitions need no data set: n comes from the labels."""
    from sklearn.cluster import KMeans
    from sklearn.datasets import make_blobs

    X, _ = make_blobs(300, centers=3, cluster_std=0.5, random_state=0)
    lab = np.stack([KMeans(k, n_init=1, random_state=k).fit_predict(X) for k in (3, 4, 5, 6, 3, 4, 5, 6)], 1)
    np.save(tmp_path / "labels.npy", lab)
    store = tmp_path / "byo.zarr"
    # a bad table creates nothing
    np.save(tmp_path / "none.npy", np.full((300, 2), -1))
    rc, _, err = main(capsys, "import-labels", tmp_path / "none.npy", "--store", store)
    assert rc == 2 and "labels no point" in err and not store.exists()
    rc, out, err = main(capsys, "import-labels", tmp_path / "labels.npy", "--store", store)
    assert rc == 0 and "8 clusterings" in out and "up to date" not in out, err
    rc, out, err = main(capsys, "import-labels", tmp_path / "labels.npy", "--store", store)
    assert rc == 0 and "8 clusterings (up to date)" in out, err  # as ingest says it (a user review)
    assert RunStore(store, mode="r").n == 300
    for args in (("coassoc",), ("consensus", "pcc-l2", "--set", "n_clusters=3")):
        rc, out, err = main(capsys, *args, "--store", store)
        assert rc == 0, err
    assert set(_records(store)) >= {"generate", "coassoc", "consensus/pcc-l2"}
    assert RunStore(store, mode="r")["consensus/pcc-l2/labels"].shape == (300,)


def test_ingest_takes_the_separator_or_guesses_it(tmp_path, capsys):
    """``--sep`` names a CSV's field separator (one character, 'tab' or 'whitespace'); not given, it is
    guessed; a bad one is an error that names it, with no store left behind."""
    table = tmp_path / "t.data"
    table.write_text("1 2 x\n3  4 y\n5 7 x\n")
    rc, out, err = main(capsys, "ingest", table, "--store", tmp_path / "a.zarr", "--label-column", "2")
    assert rc == 0 and "n=3 d=2" in out, err
    semi = tmp_path / "t.csv"
    semi.write_text("a;b;c\n1;2;x\n3;4;y\n")
    rc, out, err = main(
        capsys, "ingest", semi, "--store", tmp_path / "b.zarr", "--sep", ";", "--label-column", "c"
    )
    assert rc == 0 and "n=2 d=2" in out, err
    rc, _, err = main(capsys, "ingest", semi, "--store", tmp_path / "c.zarr", "--sep", "::")
    assert rc == 2 and "The 'sep' parameter must be one character" in err and "'::'" in err
    assert not (tmp_path / "c.zarr").exists()


def test_import_labels_takes_a_header(tmp_path, capsys):
    """A labels CSV whose first line numbers its columns (pandas' ``to_csv``) could be a point as well: the
    command says to tell it, creates nothing, and ``--header`` / ``--no-header`` tell it."""
    lab = np.random.default_rng(0).integers(0, 3, (40, 4))
    table, store = tmp_path / "labels.csv", tmp_path / "byo.zarr"
    table.write_text("0,1,2,3\n" + "".join(",".join(map(str, row)) + "\n" for row in lab))
    rc, _, err = main(capsys, "import-labels", table, "--store", store)
    assert rc == 2 and "the first line ('0,1,2,3') numbers the columns 0..3" in err and "--header" in err
    assert not store.exists()
    rc, out, err = main(capsys, "import-labels", table, "--store", store, "--header")
    assert rc == 0 and "4 clusterings" in out, err
    assert RunStore(store, mode="r").n == 40
    rc, out, err = main(capsys, "import-labels", table, "--store", tmp_path / "row.zarr", "--no-header")
    assert rc == 0 and RunStore(tmp_path / "row.zarr", mode="r").n == 41, err


def test_import_labels_takes_a_separator(tmp_path, capsys):
    """import-labels read a CSV as comma-separated only: a tab-separated table was one column of text
    ("'0\\t1\\t2' in column 0 is no cluster id"). The separator is guessed as ingest guesses it, or said
    with --sep. (Its own storage options, --data-storage-options: tests/io/test_s3.py.)"""
    lab = np.random.default_rng(0).integers(0, 3, (30, 3))
    for name, sep, said in (("tab.tsv", "\t", []), ("ws.data", "  ", []), ("semi.csv", ";", ["--sep", ";"])):
        table = tmp_path / name
        table.write_text("".join(sep.join(map(str, row)) + "\n" for row in lab))
        store = tmp_path / f"{name}.zarr"
        rc, out, err = main(capsys, "import-labels", table, "--store", store, *said)
        assert rc == 0 and "3 clusterings" in out, (name, err)
        np.testing.assert_array_equal(RunStore(store, mode="r")["labels"][:], lab)
    store = tmp_path / "x.zarr"
    rc, _, err = main(capsys, "import-labels", tmp_path / "semi.csv", "--store", store, "--sep", "::")
    assert rc == 2 and "The 'sep' parameter must be one character" in err and not store.exists()
    # --sep is what splits the fields: said otherwise than the table is written, the fields are text
    rc, _, err = main(capsys, "import-labels", tmp_path / "tab.tsv", "--store", store, "--sep", ";")
    assert rc == 2 and "is no cluster id" in err and "another separator? say it with --sep" in err
    assert not store.exists()


# every test here runs the command, a workflow or a process: the quick set (-m "not slow") leaves them out
pytestmark = pytest.mark.slow


def test_a_store_that_is_a_file_and_a_format_not_told_are_named(tmp_path, capsys):
    """A user review (2026-12-06): a store path that is a file said only '[Errno 17] File exists', and a file
    whose format its name does not tell asked for 'format=', an option the command line spells --format."""
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(20, 2)))
    (tmp_path / "notastore").write_text("mine")
    rc, _, err = main(capsys, "ingest", tmp_path / "x.npy", "--store", tmp_path / "notastore")
    assert rc == 2 and "notastore' is a file; a run store is a folder" in err, err
    assert (tmp_path / "notastore").read_text() == "mine"
    (tmp_path / "weird.dat").write_text("1,2\n3,4\n")
    rc, _, err = main(capsys, "ingest", tmp_path / "weird.dat", "--store", tmp_path / "s.zarr")
    assert rc == 2 and "rename it, or give its format where the command takes one (ingest" in err, err
    assert "format=" not in err and not (tmp_path / "s.zarr").exists()


def test_a_folder_of_other_files_is_no_store_and_loses_nothing(tmp_path, capsys):
    """A folder that holds a user's files and no store was made one, and its stages replaced what they write
    there: ``ingest --overwrite`` removed the user's ``report`` folder. So did one that holds a zarr group of
    the user's own. Both are refused, and left as they were; an empty folder, one of hidden files only, and a
    store written before stores were marked take a store."""
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(20, 2)))
    project, group = tmp_path / "project", tmp_path / "theirs.zarr"
    zarr.open_group(str(group), mode="w").create_array("features", data=np.arange(5))
    for folder in (project, group):
        (folder / "report").mkdir(parents=True)
        (folder / "report" / "summary.html").write_text("mine")
    (project / ".git").mkdir()
    refused = {project: "a folder of other files", group: "a zarr group that is not a run store"}
    for folder, what in refused.items():
        before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        for extra in ((), ("--overwrite",)):
            rc, _, err = main(capsys, "ingest", tmp_path / "x.npy", "--store", folder, *extra)
            assert rc == 2 and f"'{folder}' is {what}; give a new or empty folder" in err, err
            assert err.count("\n") == 1
        assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    for name in ("empty", "hidden"):
        (tmp_path / name).mkdir()
    (tmp_path / "hidden" / ".DS_Store").write_text("")
    for name in ("empty", "hidden"):
        assert main(capsys, "ingest", tmp_path / "x.npy", "--store", tmp_path / name)[0] == 0
        assert RunStore(tmp_path / name, mode="r")["X"].shape == (20, 2)
    # a store of before the mark: its stage records make it one, and writing to it marks it
    meta = tmp_path / "empty" / "zarr.json"
    spec = json.loads(meta.read_text())
    del spec["attributes"]["ensemble_dask"]
    meta.write_text(json.dumps(spec))
    assert main(capsys, "ingest", tmp_path / "x.npy", "--store", tmp_path / "empty", "--overwrite")[0] == 0
    assert "ensemble_dask" in json.loads(meta.read_text())["attributes"]


def test_a_stage_out_of_date_is_not_called_never_run(tmp_path, capsys):
    """A user review (2026-12-06): after new base clusterings, a consensus on the old pairs said "stage
    'coassoc' has not completed ... run it first", of a stage that had completed and was out of date."""
    rng = np.random.default_rng(0)
    np.save(tmp_path / "a.npy", rng.integers(0, 3, (100, 6)))
    np.save(tmp_path / "b.npy", rng.integers(0, 3, (100, 6)))
    store = tmp_path / "s.zarr"
    assert main(capsys, "import-labels", tmp_path / "a.npy", "--store", store)[0] == 0
    assert main(capsys, "coassoc", "--store", store)[0] == 0
    assert main(capsys, "import-labels", tmp_path / "b.npy", "--store", store)[0] == 0
    rc, _, err = main(capsys, "consensus", "pcc-l2", "--store", store, "--n-clusters", 3)
    assert rc == 2 and "stage 'coassoc' is out of date in run store" in err and "run it again" in err, err


def test_an_unknown_method_lists_the_names_a_result_may_take(tmp_path, capsys):
    """A user review (2026-12-06): ``consensus pcc_kl`` listed the methods without pcc-kl and pcc-l2, and
    gave a name of no method no hint of ``--set method=``."""
    rng = np.random.default_rng(0)
    np.save(tmp_path / "a.npy", rng.integers(0, 3, (50, 4)))
    store = tmp_path / "s.zarr"
    assert main(capsys, "import-labels", tmp_path / "a.npy", "--store", store)[0] == 0
    rc, _, err = main(capsys, "consensus", "pcc_kl", "--store", store, "--n-clusters", 3)
    assert rc == 2 and "'ppc'] and pcc-kl, pcc-l2 (PCC with that divergence); a result of a name" in err, err
    assert "(method: M, --set method=M)" in err
    rc, _, err = main(capsys, "consensus", "mine", "--store", store, "--set", "method=nosuch")
    assert rc == 2 and "unknown method 'nosuch'" in err and "--set method" not in err, err


def test_one_cluster_is_refused_by_the_commands_naming_the_estimator_that_gives_it(tmp_path, capsys):
    """Issue 60, item 10: K = 1 is the estimator's (as KMeans's: every row in one cluster); a consensus
    command, every method alike, refuses it naming the parameter and where that partition is given."""
    np.save(tmp_path / "a.npy", np.random.default_rng(0).integers(0, 3, (50, 4)))
    store = tmp_path / "s.zarr"
    assert main(capsys, "import-labels", tmp_path / "a.npy", "--store", store)[0] == 0
    for method in ("graph", "pcc-kl", "kcc", "auto", "hbgf"):
        rc, _, err = main(capsys, "consensus", method, "--store", store, "--n-clusters", 1)
        assert rc == 2 and "'n_clusters' parameter" in err and "got 1" in err, err
        assert "(one cluster holds every row; ConsensusClustering(n_clusters=1) gives it)" in err, err
    rc, _, err = main(capsys, "consensus", "kcc", "--store", store, "--n-clusters", 0)
    assert rc == 2 and err.rstrip().endswith("got 0"), err


def test_an_unknown_option_is_told_with_its_commands_usage(tmp_path):
    """A user review (2026-12-06): ``consensus bce --n-clusterz 4`` printed the program's usage, not the
    consensus command's, whose options it lists."""
    r = cli("consensus", "bce", "--n-clusterz", 4, "--store", tmp_path / "s.zarr")
    assert r.returncode == 2 and r.stderr.startswith("usage: ensemble-dask consensus [-h]"), r.stderr
    assert "ensemble-dask consensus: error: unrecognized arguments: --n-clusterz 4" in r.stderr
    r = cli("site", "serve", tmp_path / "site.yaml", "--bogus")
    assert r.returncode == 2 and "site serve: error: unrecognized arguments: --bogus" in r.stderr
    # a value equal to a subcommand's name is no subcommand (certs' --out ca)
    r = cli("certs", "--out", "ca", "--bogus")
    assert r.returncode == 2 and "ensemble-dask certs: error: unrecognized arguments: --bogus" in r.stderr
    assert not (tmp_path / "s.zarr").exists()


def _every_parser():
    import argparse

    from ensemble_dask.cli._parser import _subparsers, parser

    ap = parser()
    return ap, [("",), *[p for p, _ in _subparsers(ap)]], dict(_subparsers(ap)), argparse


def test_every_option_and_positional_of_every_command_has_a_help_line():
    ap, _, subs, argparse = _every_parser()
    missing = [
        (" ".join(path), action.option_strings or action.dest)
        for path, sp in subs.items()
        for action in sp._actions
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) and not action.help
    ]
    assert not missing, f"options without help: {missing}"


def test_every_command_shows_examples_that_parse_and_its_defaults():
    ap, _, subs, _ = _every_parser()
    for path, sp in subs.items():
        text = sp.format_help()
        assert "examples:\n  ensemble-dask " + " ".join(path) in text, " ".join(path)
        for line in text.split("examples:\n", 1)[1].splitlines():
            if line.startswith("  ensemble-dask "):
                ap.parse_args(line.split()[1:])  # an example that does not parse exits 2
    assert "--seed SEED           the seed of every base clustering's draws (default: 0)" in (
        subs[("generate",)].format_help()
    )


def test_generate_takes_a_k_range_to_the_square_root_and_extended_rows(capsys):
    ap, _, _, _ = _every_parser()
    args = ap.parse_args(["generate", "--store", "run.zarr", "--k-max", "sqrt", "--extend"])
    assert (args.k_max, args.extend) == ("sqrt", True)
    assert ap.parse_args(["generate", "--store", "run.zarr", "--k-max", "12"]).k_max == 12
    with pytest.raises(SystemExit) as exc:
        ap.parse_args(["generate", "--store", "run.zarr", "--k-max", "root"])
    assert exc.value.code == 2 and "an integer or 'sqrt'; got 'root'" in capsys.readouterr().err
