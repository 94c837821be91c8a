"""The report through the CLI: a file where its folder goes, a reader of stdout that stops early,
the stages listed in the order they ran."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ensemble_dask.cli import main as cli_main
from ensemble_dask.io.store import RunStore

REPO = Path(__file__).resolve().parents[2]


def main(capsys, *args):
    """``ensemble-dask ARGS`` in this process: (exit status, stdout, stderr)."""
    rc = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def _labelled_store(tmp_path, capsys):
    """A store with X (60 points) and 5 imported base partitions: every later stage can run on it."""
    store = tmp_path / "run.zarr"
    assert main(capsys, "ingest", "synthetic:blobs?n=60&d=2&centers=2", "--store", store)[0] == 0
    np.save(tmp_path / "labels.npy", np.random.default_rng(0).integers(0, 3, (60, 5)))
    assert main(capsys, "import-labels", tmp_path / "labels.npy", "--store", store)[0] == 0
    return store


def _file_in_place_of_report(store):
    shutil.rmtree(store / "report", ignore_errors=True)
    (store / "report").write_text("not a folder\n")
    return store / "report"


def _one_line_error(rc, err, path):
    assert rc == 2, err
    assert "Traceback" not in err
    assert err.startswith("ensemble-dask: error: ") and err.count("\n") == 1, err
    assert f"{str(path)!r} is a file" in err and "move or remove that file" in err


@pytest.mark.parametrize(
    "command",
    [
        ["generate", "-N", 2, "--no-progress"],
        ["coassoc"],
        ["consensus", "bce", "--set", "n_clusters=2", "--report"],
        ["report"],
    ],
    ids=lambda c: c[0],
)
def test_a_file_where_report_goes_stops_the_stage_commands(command, tmp_path, capsys):
    """Before: each ended in a FileExistsError traceback; generate and coassoc after their stage was
    marked complete (writing report/cluster.json), consensus after its fit."""
    store = _labelled_store(tmp_path, capsys)
    before = RunStore(store, mode="r").records()
    path = _file_in_place_of_report(store)
    rc, out, err = main(capsys, *command, "--store", store)
    _one_line_error(rc, err, path)
    assert RunStore(store, mode="r").records() == before  # nothing newly marked complete
    assert path.read_text() == "not a folder\n"


def test_a_file_where_report_goes_stops_a_workflow_before_its_first_stage(tmp_path, capsys):
    store = tmp_path / "run.zarr"
    RunStore(store)  # a new store, as the first command of a run makes it
    path = _file_in_place_of_report(store)
    rc, out, err = main(
        capsys, "run", REPO / "workflows" / "demo.yaml", "--store", store, "--no-progress",
        "--set", "data.url=synthetic:blobs?n=60&d=2&centers=2", "--set", "generate.n_clusterings=4",
    )  # fmt: skip
    _one_line_error(rc, err, path)
    assert RunStore(store, mode="r").records() == {} and "X" not in RunStore(store, mode="r")


def test_python_dash_m():
    """``python -m ensemble_dask`` is the command (before: "cannot be directly executed")."""
    r = subprocess.run(
        [sys.executable, "-m", "ensemble_dask", "--version"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stdout.startswith("ensemble-dask "), r.stderr


@pytest.mark.slow
def test_reader_of_stdout_that_stops_early(tmp_path, capsys):
    """``report --format json | head -1``: before, a BrokenPipeError traceback and status 1."""
    table = tmp_path / "t.csv"
    n = 6000  # one class per row: the JSON (class counts) is far larger than a pipe holds
    rows = "".join(f"{i % 7}.5,{(i * 3) % 11},c{i:05d}\n" for i in range(n))
    table.write_text("a,b,label\n" + rows)
    store = tmp_path / "run.zarr"
    rc, _, err = main(capsys, "ingest", table, "--store", store, "--header", "--label-column", "label")
    assert rc == 0, err
    proc = subprocess.Popen(
        [sys.executable, "-m", "ensemble_dask", "report", "--format", "json", "--store", str(store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout.readline() == b"{\n"
        proc.stdout.close()  # the reader goes; more than a pipe's worth of JSON is still to come
        err = proc.stderr.read().decode()
        rc = proc.wait(timeout=120)
    finally:
        proc.kill()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert err == ""
    assert rc == 141
    # read to the end, the same command prints the whole document
    r = subprocess.run(
        [sys.executable, "-m", "ensemble_dask", "report", "--format", "json", "--store", str(store)],
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 0 and len(r.stdout) > 200_000
    assert len(json.loads(r.stdout)["dataset"]["class_counts"]) == n


def _stages_on_page(store):
    page = (store / "report" / "index.html").read_text()
    table = page[page.index("<h3>Stages</h3>") :].split("</table>")[0]
    return re.findall(r"<tr><td>([^<]+)</td><td class='num'>", table)


def test_page_lists_the_stages_in_the_order_they_ran(tmp_path, capsys):
    """Before: alphabetically (consensus/bce, consensus/mm, generate, ingest)."""
    store = _labelled_store(tmp_path, capsys)  # ingest, then generate (import-labels)
    for name in ("mm", "bce"):
        rc, _, err = main(capsys, "consensus", name, "--store", store, "--set", "n_clusters=2")
        assert rc == 0, err
    assert main(capsys, "report", "--store", store)[0] == 0
    assert _stages_on_page(store) == ["ingest", "generate", "consensus/mm", "consensus/bce"]
    assert list(RunStore(store, mode="r").records()) == [
        "ingest",
        "generate",
        "consensus/mm",
        "consensus/bce",
    ]


def test_records_without_start_times_keep_the_pipeline_order(tmp_path):
    """Records written before they had ``started``: by when they finished (to the second), ties in
    the order a workflow runs the stages."""
    store = RunStore(tmp_path / "run.zarr")
    at = "2026-01-01T10:00:0{}+00:00".format
    old = {
        "consensus/bce": at(1),
        "coassoc": at(1),
        "consensus/a-late": at(3),
        "generate": at(1),
        "ingest": at(1),
        "consensus/zz": at(2),
    }
    for name, finished in old.items():
        store._set_record(name, {"complete": True, "finished": finished, "hash": name})
    assert list(store.records()) == [
        "ingest", "generate", "coassoc", "consensus/bce", "consensus/zz", "consensus/a-late"
    ]  # fmt: skip


def test_the_table_keeps_its_columns_where_a_result_has_no_scores():
    """Review: on a store without y_true (imported labels) a result's k_eff and seconds were printed under
    H and ARI: a missing score printed as nothing, not as a blank of its column's width."""
    import io

    from ensemble_dask.cli._options import print_summary

    out = io.StringIO()
    report = {
        "dataset": {"n": 10, "n_clusterings": 3},
        "methods": {"kcc": {"effective_k": 3, "seconds": 1.05}, "bce": {"H": 0.9, "ARI": 0.8, "NMI": 0.7,
                                                                        "effective_k": 3, "seconds": 2.5}},
    }  # fmt: skip
    print_summary(report, out)
    header, kcc, bce = out.getvalue().splitlines()[1:]
    for line in (kcc, bce):
        assert len(line) == len(header) and line.index(" 3 ") == bce.index(" 3 ")  # k_eff in its column
    assert kcc[26:].split() == ["3", "1.05"]
