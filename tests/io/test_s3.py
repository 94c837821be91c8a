"""Ingest from s3:// and a run store on s3://, against a moto S3 server process on 127.0.0.1."""

import json
import subprocess

import numpy as np
import pytest
import s3fs

from ensemble_dask import InputError
from ensemble_dask.io.store import RunStore
from ensemble_dask.stages.generate import generate
from ensemble_dask.stages.ingest import ingest
from tests.conftest import EXE, REPO


def test_ingest_and_store_on_s3(kdd_sample, s3_bucket, process_client, tmp_path):
    bucket, opts = s3_bucket
    fs = s3fs.S3FileSystem(**opts)
    fs.put(str(kdd_sample), f"{bucket}/in/kdd.csv.gz")
    store = RunStore(f"s3://{bucket}/runs/a.zarr", opts)
    info = ingest(store, f"s3://{bucket}/in/kdd.csv.gz", storage_options=opts, schema="kdd99", subset=600)
    assert info["n"] == 600
    # worker processes open the s3 store themselves with the same storage_options
    generate(store, process_client, n_clusterings=3, rate=0.5)
    lab = RunStore(f"s3://{bucket}/runs/a.zarr", opts, mode="r")["labels"][:]
    assert lab.shape == (600, 3) and (lab == -1).sum() == 900
    local = RunStore(tmp_path / "local.zarr")
    ingest(local, str(kdd_sample), schema="kdd99", subset=600)
    np.testing.assert_array_equal(local["X"][:], store["X"][:])


@pytest.mark.slow
def test_cli_on_s3(s3_bucket, tmp_path):
    """The demo's stages on S3, with one pair method and one labels method of its six (each writes its
    arrays and the report page to the object store; the six took 42 s here). Figures on S3: tests/report."""
    bucket, opts = s3_bucket
    demo = (REPO / "workflows" / "demo.yaml").read_text()
    workflow = tmp_path / "demo.yaml"
    workflow.write_text(
        demo[: demo.index("consensus:")] + "consensus: {pcc-kl: {n_clusters: 4}, bce: {n_clusters: 4}}\n"
    )
    r = subprocess.run(
        [
            EXE, "run", str(workflow), "--store", f"s3://{bucket}/demo.zarr",
            "--storage-options", json.dumps(opts), "--n-workers", "1", "--no-progress",
            "--set", "data.url=synthetic:kdd99?n=1000", "--set", "generate.n_clusterings=3",
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    fs = s3fs.S3FileSystem(**opts)
    report = json.loads(fs.cat(f"{bucket}/demo.zarr/report/metrics.json"))
    assert report["dataset"]["n"] == 1000 and sorted(report["methods"]) == ["bce", "pcc-kl"]


def test_import_labels_from_s3_with_the_tables_own_storage_options(s3_bucket, tmp_path, capsys):
    """import-labels took no options for the labels table (only the store's): a table in an object store
    that needs them (here: the endpoint of the S3 server) could not be read. --data-storage-options."""
    from ensemble_dask.cli import main

    bucket, opts = s3_bucket
    lab = np.random.default_rng(0).integers(0, 3, (30, 3))
    table = "".join("\t".join(map(str, row)) + "\n" for row in lab)
    s3fs.S3FileSystem(**opts).pipe(f"{bucket}/labels.tsv", table.encode())
    store = tmp_path / "byo.zarr"
    args = ["import-labels", f"s3://{bucket}/labels.tsv", "--store", str(store)]
    assert main([*args, "--data-storage-options", json.dumps(opts)]) == 0, capsys.readouterr().err
    np.testing.assert_array_equal(RunStore(store, mode="r")["labels"][:], lab)


def test_missing_bucket_and_key(s3_server):
    with pytest.raises(InputError, match="does not exist"):
        ingest(RunStore("memory://s3-missing"), "s3://no-such-bucket/x.csv", storage_options=s3_server)


def test_a_record_is_one_request_and_a_check_reads_each_array_once(s3_bucket, s3_requests):
    """Each command reads the records of the stages before it and checks their arrays: a record was opened
    as a file (its size asked first, then read) and each array was looked up, then opened."""
    bucket, opts = s3_bucket
    store = RunStore(f"s3://{bucket}/run.zarr", opts)
    with store.stage("generate", {"n": 1}, [], writes=("labels", "extra")):
        store.group.create_array("labels", data=np.zeros((10, 3), dtype=np.int32))
        store.group.require_group("extra").create_array("a", data=np.ones(4))
    s3_requests.clear()
    assert store.record("generate")["complete"]
    assert s3_requests == [("GET", f"{bucket}/run.zarr/_stages/generate.json")]
    s3_requests.clear()
    assert store.verify("generate", chunks=False) == []
    for array in ("labels", "extra/a"):
        assert [r for r in s3_requests if r[1].startswith(f"{bucket}/run.zarr/{array}/")] == [
            ("GET", f"{bucket}/run.zarr/{array}/zarr.json")
        ], s3_requests


def test_opening_a_run_store_reads_its_metadata_only(s3_bucket, s3_requests):
    """A run store is zarr 3: opened without probing for a zarr 2 store's .zgroup, .zattrs and .zmetadata
    (three more requests each time a command or a worker opened it)."""
    bucket, opts = s3_bucket
    RunStore(f"s3://{bucket}/run.zarr", opts).group.create_array("X", data=np.ones(3))
    s3_requests.clear()
    assert RunStore(f"s3://{bucket}/run.zarr", opts, mode="r")["X"].shape == (3,)
    assert {key.rsplit("/", 1)[-1] for _, key in s3_requests} == {"zarr.json"}, s3_requests
