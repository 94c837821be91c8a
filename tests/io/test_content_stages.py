"""Stages keyed on content: inputs by their bytes (not their URL), stages by their inputs' content."""

import gzip
import os
import shutil
import threading
import warnings

import numpy as np
import pytest

from ensemble_dask import InputError
from ensemble_dask.io.store import RunStore
from ensemble_dask.io.urls import source_fingerprint
from ensemble_dask.stages.coassoc import coassoc_stage
from ensemble_dask.stages.generate import generate, import_labels
from ensemble_dask.stages.ingest import ingest


def _small_csv(path, n=200, seed=0):
    rng = np.random.default_rng(seed)
    x = np.vstack([rng.normal(0, 1, (n // 2, 3)), rng.normal(6, 1, (n - n // 2, 3))])
    y = np.repeat(["a", "b"], [n // 2, n - n // 2])
    with gzip.open(path, "wt") as fh:
        for row, lab in zip(x, y, strict=True):
            fh.write(",".join(f"{v:.6f}" for v in row) + f",{lab}\n")
    return path


def test_two_spellings_of_one_input_run_once(tmp_path, monkeypatch):
    os.makedirs(tmp_path / "data")
    src = _small_csv(tmp_path / "data" / "x.csv.gz")
    store = RunStore(tmp_path / "run.zarr")
    monkeypatch.chdir(tmp_path)
    assert ingest(store, "./data/x.csv.gz", label_column=3)["skipped"] is False
    assert ingest(store, str(src), label_column=3)["skipped"] is True
    assert ingest(store, f"file://{src}", label_column=3)["skipped"] is True
    # a copy elsewhere is the same data
    copy = tmp_path / "elsewhere.csv.gz"
    shutil.copy(src, copy)
    assert ingest(store, str(copy), label_column=3)["skipped"] is True
    # the report names the URL the data was last read from, which is not part of the identity
    assert store.record("ingest")["meta"]["url"] == "./data/x.csv.gz"


def test_one_changed_byte_runs_again(tmp_path):
    src = _small_csv(tmp_path / "x.csv.gz")
    store = RunStore(tmp_path / "run.zarr")
    assert ingest(store, str(src), label_column=3)["skipped"] is False
    before = store.stage_hash("ingest")
    raw = bytearray(gzip.decompress(src.read_bytes()))
    i = raw.index(b".") + 1  # first decimal digit of the first value: same size, other data
    raw[i] = ord("9") if raw[i] != ord("9") else ord("1")
    src.write_bytes(gzip.compress(bytes(raw)))
    assert ingest(store, str(src), label_column=3)["skipped"] is False
    assert store.stage_hash("ingest") != before


def test_fingerprint_is_content_not_name(tmp_path):
    a = tmp_path / "a.bin"
    a.write_bytes(b"x" * 1000)
    b = tmp_path / "sub" / "b.bin"
    b.parent.mkdir()
    b.write_bytes(b"x" * 1000)
    assert source_fingerprint(str(a)) == source_fingerprint(str(b))
    b.write_bytes(b"x" * 999 + b"y")
    assert source_fingerprint(str(a)) != source_fingerprint(str(b))
    # a directory: relative names and contents, not where it lives
    for root in ("d1", "d2"):
        (tmp_path / root / "c").mkdir(parents=True)
        (tmp_path / root / "c" / "0").write_bytes(b"abc")
    assert source_fingerprint(str(tmp_path / "d1")) == source_fingerprint(str(tmp_path / "d2"))
    (tmp_path / "d2" / "c" / "0").write_bytes(b"abd")
    assert source_fingerprint(str(tmp_path / "d1")) != source_fingerprint(str(tmp_path / "d2"))


def test_fingerprint_of_an_object_store_uses_its_etag(s3_bucket):
    import s3fs

    bucket, opts = s3_bucket
    fs = s3fs.S3FileSystem(**opts)
    fs.pipe(f"{bucket}/a/x.csv", b"1,2\n3,4\n")
    fs.pipe(f"{bucket}/b/y.csv", b"1,2\n3,4\n")
    fa = source_fingerprint(f"s3://{bucket}/a/x.csv", opts)
    assert "ETag" in fa["content"]
    assert fa == source_fingerprint(f"s3://{bucket}/b/y.csv", opts)
    fs.pipe(f"{bucket}/b/y.csv", b"1,2\n3,5\n")
    assert fa != source_fingerprint(f"s3://{bucket}/b/y.csv", opts)


def test_unchanged_upstream_recomputed_keeps_the_later_stages(tmp_path, client):
    src = _small_csv(tmp_path / "x.csv.gz")
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(src), label_column=3)
    assert generate(store, client, n_clusterings=4, k_min=2, k_max=3, seed=0)["skipped"] is False
    first = coassoc_stage(store, client, strategy="full", seed=0)
    assert first["skipped"] is False
    # ingest runs again with other parameters that give the same X: generate keeps its labels
    info = ingest(store, str(src), label_column=3, classes=["b", "a"])
    assert info["skipped"] is False
    assert generate(store, client, n_clusterings=4, k_min=2, k_max=3, seed=0)["skipped"] is True
    assert coassoc_stage(store, client, strategy="full", seed=0)["skipped"] is True


def test_imported_labels_are_keyed_on_their_content(tmp_path, client):
    src = _small_csv(tmp_path / "x.csv.gz")
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(src), label_column=3)
    lab = np.random.default_rng(0).integers(-1, 3, size=(200, 5)).astype(np.int32)
    np.save(tmp_path / "l1.npy", lab)
    (tmp_path / "other").mkdir()
    np.save(tmp_path / "other" / "l2.npy", lab)
    assert import_labels(store, str(tmp_path / "l1.npy"))["skipped"] is False
    assert coassoc_stage(store, client, strategy="full", seed=0)["skipped"] is False
    assert import_labels(store, str(tmp_path / "other" / "l2.npy"))["skipped"] is True
    assert coassoc_stage(store, client, strategy="full", seed=0)["skipped"] is True
    lab[7, 2] = (lab[7, 2] + 1) % 3
    np.save(tmp_path / "l1.npy", lab)
    assert import_labels(store, str(tmp_path / "l1.npy"))["skipped"] is False
    # issue 29: the pairs counted from the old labels are no longer marked complete beside the new ones
    assert store.record("coassoc")["complete"] is False and store.record("coassoc")["stale"] is True
    assert coassoc_stage(store, client, strategy="full", seed=0)["skipped"] is False


def test_stage_records_survive_concurrent_writers(tmp_path):
    url = tmp_path / "run.zarr"
    RunStore(url)

    start = threading.Barrier(3)

    def writer(w):
        store = RunStore(url, mode="r+")  # each writer its own handle, as worker processes have
        start.wait()  # all three write their first record at once: the records folder is created in a race
        for i in range(15):
            with store.stage(f"w{w}/s{i}", {"i": i}, []):
                pass

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    records = RunStore(url, mode="r").records()
    assert sorted(records) == sorted(f"w{w}/s{i}" for w in range(3) for i in range(15))
    assert all(rec["complete"] for rec in records.values())


@pytest.mark.parametrize("url", ["memory://records-test", None])
def test_records_are_cleared_by_a_new_ingest(url, tmp_path):
    store = RunStore(url or tmp_path / "run.zarr")
    with store.stage("x", {}, []):
        pass
    assert set(store.records()) == {"x"}
    store.clear_records()
    assert store.records() == {} and store.record("x") is None


def _replace_array(store, path):
    """Another run's array in place of ``path``: same shape, dtype and chunks, other content."""
    old = store.group[path]
    data = old[:]
    del store.group[path]
    new = store.group.create_array(path, shape=old.shape, chunks=old.chunks, dtype=old.dtype)
    new[:] = np.zeros_like(data)


def test_a_stage_whose_output_is_not_its_records_is_never_skipped(tmp_path, client, capsys):
    """Issue 29: two writers once left ingest and generate marked complete over an X of zeros and single-
    cluster labels, and a re-run skipped them as up to date. Each record now describes what its stage wrote
    (shapes, dtypes, chunk counts) and stamps it with its hash; a re-run checks both, names what disagrees
    and the command that repairs it."""
    from ensemble_dask.cli import main

    src = _small_csv(tmp_path / "x.csv.gz")
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(src), label_column=3)
    generate(store, client, n_clusterings=4, k_min=2, k_max=3, seed=0)
    coassoc_stage(store, client, strategy="full", seed=0)
    assert store.verify("ingest") == [] and store.verify("coassoc") == []
    assert main(["verify", "--store", str(tmp_path / "run.zarr")]) == 0
    assert "ingest: ok" in capsys.readouterr().out

    _replace_array(store, "X")
    with pytest.raises(
        InputError, match=r"stage 'ingest' is recorded complete, but .*X was written by another run"
    ):
        ingest(store, str(src), label_column=3)
    with pytest.raises(InputError, match=r"ensemble-dask verify --store .* --repair"):
        generate(store, client, n_clusterings=4, k_min=2, k_max=3, seed=0)  # it reads ingest's identity
    assert main(["verify", "--store", str(tmp_path / "run.zarr")]) == 1
    assert "ingest: X was written by another run" in capsys.readouterr().out

    assert main(["verify", "--store", str(tmp_path / "run.zarr"), "--repair"]) == 0
    assert "unmarked ingest" in capsys.readouterr().out
    # the stages that read it are out of date too; the same commands recompute them
    assert not (store.record("generate") or {}).get("complete")
    assert ingest(store, str(src), label_column=3)["skipped"] is False
    assert generate(store, client, n_clusterings=4, k_min=2, k_max=3, seed=0)["skipped"] is False
    assert coassoc_stage(store, client, strategy="full", seed=0)["skipped"] is False
    assert all(store.verify(name) == [] for name in store.records())


def test_a_lost_chunk_or_a_reshaped_output_disagrees_with_its_record(tmp_path, client):
    src = _small_csv(tmp_path / "x.csv.gz")
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(src), label_column=3)
    generate(store, client, n_clusterings=4, k_min=2, k_max=3, seed=0)
    chunk = next(
        p for p in (tmp_path / "run.zarr" / "labels").rglob("*") if p.is_file() and p.name != "zarr.json"
    )
    chunk.unlink()
    assert store.verify("generate") == ["labels holds 3 chunks, recorded 4"]
    store.group["X"].resize((150, store.group["X"].shape[1]))
    assert store.verify("ingest") == ["X is (150, 3) float32, recorded (200, 3) float32"]
    # a record written before content identities describes nothing: it is trusted as before
    rec = store.record("ingest")
    store._set_record("ingest", {k: v for k, v in rec.items() if k != "content"})
    assert store.verify("ingest") == []


def test_a_workflow_never_generates_over_labels_whose_record_disagrees(tmp_path):
    """Review of issue 29: the workflow's default ``generate`` runs where the store has no complete labels; a
    lost chunk of imported labels made their record disagree, read as "not run", and 100 generated columns
    replaced the user's own. It is the content error now, with its repair."""
    from ensemble_dask.io.store import StageContentError
    from ensemble_dask.pipeline import _missing

    store = RunStore(tmp_path / "run.zarr")
    labels = np.random.default_rng(0).integers(0, 3, size=(50, 4))
    import_labels(store, "labels-table", labels=labels)
    assert _missing(store, "generate") is False
    chunk = next(
        p for p in (tmp_path / "run.zarr" / "labels").rglob("*") if p.is_file() and p.name != "zarr.json"
    )
    chunk.unlink()
    with pytest.raises(StageContentError, match="verify --store .* --repair"):
        RunStore(tmp_path / "run.zarr")._check_content("generate", store.record("generate"))
    with pytest.raises(StageContentError):
        _missing(RunStore(tmp_path / "run.zarr"), "generate")


def test_a_store_whose_metadata_was_consolidated_shows_what_stages_wrote_since(tmp_path):
    """zarr reads a group through its consolidated metadata when it has some (zarr.consolidate_metadata, run
    by a user or a tool to open the store faster): a copy that does not change when a stage writes. A stage
    output written after it was then missing to the next command, which reran the stage."""
    import zarr

    store = RunStore(tmp_path / "run.zarr")
    with store.stage("ingest", {"n": 1}, [], writes=("X",)):
        store.group.create_array("X", data=np.ones((4, 2)))
    with warnings.catch_warnings():  # (it says the stage records are no zarr nodes)
        warnings.simplefilter("ignore", zarr.errors.ZarrUserWarning)
        zarr.consolidate_metadata(str(tmp_path / "run.zarr"))
    store = RunStore(tmp_path / "run.zarr")
    with store.stage("generate", {"n": 1}, [], writes=("labels",)):
        store.group.create_array("labels", data=np.zeros((4, 3), dtype=np.int32))
    later = RunStore(tmp_path / "run.zarr", mode="r")
    assert "labels" in later and later["labels"].shape == (4, 3)
    assert later.verify("generate") == [] and later.stage_hash("generate")


def test_the_report_of_a_store_whose_labels_disagree_with_their_record_is_the_content_error(tmp_path):
    """Review: with a chunk of the labels lost, consensus and predict stopped with the content error, but the
    report wrote the base partitions' scores as nan (it scored the damaged labels) and left out every result
    read from the labels, exit 0."""
    from ensemble_dask.io.store import StageContentError
    from ensemble_dask.stages.consensus import consensus_stage, current_results
    from ensemble_dask.stages.report import write_report

    src = _small_csv(tmp_path / "x.csv.gz", n=120)
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(src), label_column=3)
    labels = np.column_stack([np.repeat([0, 1], 60)] * 4).astype(np.int32)
    import_labels(store, "labels-table", labels=labels)
    consensus_stage(store, "kcc", seed=0, n_clusters=2)
    assert set(current_results(store)) == {"kcc"}
    next(
        p for p in (tmp_path / "run.zarr" / "labels").rglob("*") if p.is_file() and p.name != "zarr.json"
    ).unlink()
    store = RunStore(tmp_path / "run.zarr")
    with pytest.raises(StageContentError, match="'generate' is recorded complete.*--repair"):
        current_results(store)
    with pytest.raises(StageContentError, match="'generate' is recorded complete.*--repair"):
        write_report(store, force=True)


def test_verify_reads_the_labels_a_writer_that_lost_its_lease_overwrote(tmp_path, client, capsys):
    """From a stress review: a writer that lost its lease and went on wrote chunks into the holder's
    completed labels; their shape, chunk count and stamp stayed the record's, and ``verify`` said ok. It now
    reads the labels' columns against the record's content identity, and ``--repair`` unmarks them."""
    from ensemble_dask.cli import main

    src = _small_csv(tmp_path / "x.csv.gz")
    store = RunStore(tmp_path / "run.zarr")
    ingest(store, str(src), label_column=3)
    generate(store, client, n_clusterings=4, k_min=2, k_max=3, seed=0)
    assert main(["verify", "--store", str(tmp_path / "run.zarr")]) == 0
    labels = store.group["labels"]
    labels[:50, 1] = (labels[:50, 1] + 1) % 3  # another run's column, written in place
    assert store.verify("generate") == []  # (what a stage's re-run checks: shape, chunks, stamp)
    assert main(["verify", "--store", str(tmp_path / "run.zarr")]) == 1
    assert "generate: labels's stored bytes are not those stage 'generate' wrote" in capsys.readouterr().out
    rec = store.record("generate")  # a record of before the digests: the labels' columns are read
    store._set_record("generate", {**rec, "content": {"labels": rec["content"]["labels"][:3]}})
    assert main(["verify", "--store", str(tmp_path / "run.zarr")]) == 1
    assert "generate: labels hold other columns than the record's" in capsys.readouterr().out
    assert main(["verify", "--store", str(tmp_path / "run.zarr"), "--repair"]) == 0
    assert not store.record("generate")["complete"]
    assert generate(store, client, n_clusterings=4, k_min=2, k_max=3, seed=0)["skipped"] is False
    assert main(["verify", "--store", str(tmp_path / "run.zarr")]) == 0


def test_a_record_that_does_not_parse_is_a_damaged_stage_in_one_line(tmp_path, client, capsys):
    """A stage record that is not JSON (``_stages/generate.json`` holding ``{garbage``) gave a
    JSONDecodeError traceback from ``verify`` and from ``run``; it is now a damaged stage, named with its
    repair, and ``verify --repair`` unmarks it so that the stage runs again."""
    from ensemble_dask.cli import main

    src = _small_csv(tmp_path / "x.csv.gz")
    url = str(tmp_path / "run.zarr")
    store = RunStore(url)
    ingest(store, str(src), label_column=3)
    generate(store, client, n_clusterings=4, k_min=2, k_max=3, seed=0)
    (tmp_path / "run.zarr" / "_stages" / "generate.json").write_text("{garbage")
    with pytest.raises(InputError, match=r"stage 'generate' \(_stages/generate.json\) does not parse"):
        generate(store, client, n_clusterings=4, k_min=2, k_max=3, seed=0)
    assert main(["consensus", "kcc", "--store", url, "--n-clusters", "2"]) == 2
    assert "does not parse, a damaged stage; run `ensemble-dask verify" in capsys.readouterr().err
    assert main(["verify", "--store", url]) == 1
    assert "generate: its record (_stages/generate.json) does not parse" in capsys.readouterr().out
    assert main(["verify", "--store", url, "--repair"]) == 0
    assert store.record("generate") is None
    assert generate(store, client, n_clusterings=4, k_min=2, k_max=3, seed=0)["skipped"] is False
    assert main(["verify", "--store", url]) == 0


@pytest.mark.slow
def test_verify_reads_every_chunk_against_the_bytes_its_stage_wrote(tmp_path, capsys):
    """Issue 61: ``verify`` said every stage was ok after X's rows were reversed in place, after ``pairs/co``
    was incremented by one and after a consensus result's labels were permuted (a record checked shapes,
    dtypes, chunk counts and stamps only). Each record now holds the digest of the bytes its stage stored;
    ``verify`` reads every chunk against it (``--quick`` checks metadata as before), ``--repair`` unmarks the
    stage and its readers, and the same workflow then ends with the clean run's bytes. A whole workflow,
    predict and report included, leaves every stage's bytes as recorded (no stage writes into another's)."""
    from ensemble_dask.cli import main
    from ensemble_dask.pipeline import run_workflow

    url = str(tmp_path / "run.zarr")
    spec = {
        "seed": 3,
        "store": url,
        "dask": {"n_workers": 1},
        "data": {"url": "synthetic:blobs?n=300&d=3&centers=3&seed=1"},
        "generate": {"n_clusterings": 6, "k_min": 2, "k_max": 5},
        "coassoc": {"strategy": "per-point", "l": 10},
        "consensus": {"pcc-kl": {"n_clusters": 3}, "graph": {"n_clusters": 3}},
    }
    run_workflow(spec)
    np.save(tmp_path / "new.npy", np.random.default_rng(0).normal(size=(5, 3)))
    assert (
        main(
            [
                "predict",
                str(tmp_path / "new.npy"),
                "--store",
                url,
                "--method",
                "pcc-kl",
                "--out",
                str(tmp_path / "p.parquet"),
                "-q",
            ]
        )
        == 0
    )
    assert main(["report", "--store", url, "-q", "--format", "html"]) == 0
    capsys.readouterr()
    assert main(["verify", "--store", url]) == 0
    assert capsys.readouterr().out.count(": ok") == len(RunStore(url).records())
    clean = {p: RunStore(url).bytes_digest(p) for p in ("X", "pairs/co", "consensus/pcc-kl/labels")}

    store = RunStore(url)
    store.group["X"][:] = store.group["X"][:][::-1]
    store.group["pairs/co"][:] = store.group["pairs/co"][:] + 1
    labels = store.group["consensus/pcc-kl/labels"]
    labels[:] = np.random.default_rng(1).permutation(labels[:])
    assert main(["verify", "--store", url, "--quick"]) == 0  # metadata: as a re-run checks
    capsys.readouterr()
    assert main(["verify", "--store", url]) == 1
    out = capsys.readouterr().out
    for stage, path in (
        ("ingest", "X"),
        ("coassoc", "pairs/co"),
        ("consensus/pcc-kl", "consensus/pcc-kl/labels"),
    ):
        assert f"{stage}: {path}'s stored bytes are not those stage '{stage}' wrote" in out
    assert "generate: ok" in out

    assert main(["verify", "--store", url, "--repair"]) == 0
    assert not RunStore(url).record("ingest")["complete"]
    run_workflow(spec)
    assert {p: RunStore(url).bytes_digest(p) for p in clean} == clean
    capsys.readouterr()
    assert main(["verify", "--store", url]) == 0
