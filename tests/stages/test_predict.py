"""New rows labelled by a fitted ensemble: the store's base clusterings' centres, then the consensus result
(issue 27)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ensemble_dask._validation import InputError
from ensemble_dask.io.readers import iter_table_chunks
from ensemble_dask.io.store import RunStore
from ensemble_dask.metrics import h_criterion

pytestmark = pytest.mark.slow  # a workflow on an embedded cluster


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A KDD-schema table cut into the rows a workflow fits (90%) and new rows (10%)."""
    from ensemble_dask import pipeline

    d = tmp_path_factory.mktemp("predict")
    df = pd.concat([f for _, f in iter_table_chunks("synthetic:kdd99?n=4000&seed=2")], ignore_index=True)
    new = np.random.default_rng(0).random(len(df)) < 0.1
    df[~new].to_csv(d / "fit.csv", index=False, header=False)
    df[new].to_csv(d / "new.csv", index=False, header=False)
    spec = {
        "seed": 0,
        "store": str(d / "run.zarr"),
        "data": {"url": str(d / "fit.csv"), "schema": "kdd99"},
        "generate": {"n_clusterings": 16, "rate": 0.5},
        "consensus": {
            "bce": {"n_clusters": 4},
            "kcc": {"n_clusters": 4},
            "pcc-kl": {"n_clusters": 4},
            "hbgf": {"n_clusters": 4},
            "mm": {"n_clusters": 4},
            "gbce": {"n_clusters": 4},
            "gkcc": {"n_clusters": 4},
            "eac-al": {"n_clusters": 4},
            "graph": {"n_clusters": 4},
        },
    }
    pipeline.run_workflow(spec, report=False)  # (no page: predict reads the results, not the report)
    return d, df, new


@pytest.mark.parametrize("method", ["bce", "kcc", "pcc-kl", "mm", "gbce", "gkcc", "hbgf", "eac-al", "graph"])
def test_new_rows_are_labelled_as_the_fit_labels_its_own(fitted, method, process_client, capsys):
    """Every method's result labels new rows: BCE, GBCE, MM and KCC by their models, PCC by each row's own
    problem, GKCC and the baselines by the nearest centroid of their partition in the base labels' space."""
    from ensemble_dask.cli import main

    d, df, new = fitted
    store = str(d / "run.zarr")
    out = d / f"{method}.parquet"
    opts = ["--store", store, "--method", method, "--scheduler", process_client.scheduler.address]
    assert main(["predict", str(d / "new.csv"), *opts, "--out", str(out)]) == 0
    assert f"predict: {new.sum()} rows by {method}" in capsys.readouterr().out
    pred = pd.read_parquet(out)
    assert list(pred.columns) == ["label", "uncertainty", "m0", "m1", "m2", "m3"] and len(pred) == new.sum()
    np.testing.assert_allclose(pred[["m0", "m1", "m2", "m3"]].sum(axis=1), 1.0, rtol=1e-5)
    s = RunStore(store, mode="r")
    classes = s["y_true"].attrs["classes"]
    y_new = np.searchsorted(classes, df[new]["label"].astype(str).str.rstrip(".").to_numpy())
    fit_h = h_criterion(s[f"consensus/{method}/labels"][:], s["y_true"][:])
    assert h_criterion(pred["label"].to_numpy(), y_new) >= fit_h - 0.05  # as accurate as in the fit
    # the fitted rows, labelled again as new rows, get the fit's labels
    again = d / f"{method}-again.zarr"
    assert main(["predict", str(d / "fit.csv"), *opts, "--out", str(again)]) == 0
    import zarr

    same = np.mean(zarr.open_group(str(again), mode="r")["labels"][:] == s[f"consensus/{method}/labels"][:])
    assert same >= 0.97, (
        same
    )  # a fitted row, new, has all 16 base labels, where its fit saw half (GBCE: 0.974)


@pytest.mark.parametrize("method", ["bce", "gbce", "mm", "kcc", "gkcc", "hbgf", "graph"])
def test_the_rebuilt_model_gives_the_fitted_rows_their_labels(fitted, method):
    """Given a fitted row's own base labels (and features), the model rebuilt from the store labels it as the
    fit did: what the store keeps is the fitted model (the partitions: their centroids' rule)."""
    from ensemble_dask.stages.predict import _consensus_model

    d, _, _ = fitted
    s = RunStore(str(d / "run.zarr"), mode="r")
    labels = np.asarray(s["labels"][:])
    model = _consensus_model(s, method, labels)
    same = np.mean(
        np.argmax(model(labels, np.asarray(s["X"][:])), axis=1) == s[f"consensus/{method}/labels"][:]
    )
    # BCE's and GBCE's variational E-step started afresh can settle elsewhere than the fit's warm one (GBCE:
    # 0.977 of the rows as the fit; its own transform does the same, tests/consensus/test_from_parameters.py)
    assert same >= (0.999 if method in ("mm", "kcc") else 0.97), same


def test_the_same_labels_in_this_process_and_on_any_number_of_workers(fitted, process_client):
    """Blocks labelled as tasks of a cluster's worker processes, or here, one by one: the same result (PCC's
    partners are drawn from the seed and the block's first row, not from the order the blocks run in)."""
    from ensemble_dask.stages.predict import predict_rows

    d, _, new = fitted
    store = RunStore(str(d / "run.zarr"), mode="r")
    here = predict_rows(store, "pcc-kl", str(d / "new.csv"), chunk_rows=100)
    there = predict_rows(store, "pcc-kl", str(d / "new.csv"), chunk_rows=100, client=process_client)
    assert here[0].size == new.sum() and len(process_client.scheduler_info()["workers"]) == 2
    for a, b in zip(here, there, strict=True):
        np.testing.assert_array_equal(a, b)


def test_what_predict_refuses(fitted, tmp_path):
    from ensemble_dask.stages.predict import predict_rows

    d, df, new = fitted
    store = RunStore(str(d / "run.zarr"), mode="r+")
    with pytest.raises(InputError, match="no consensus result 'ppc'"):
        predict_rows(store, "ppc", str(d / "new.csv"))
    odd = df[new].copy()
    odd.iloc[3, 2] = "no_such_service"  # a category the fitted data never held
    odd.to_csv(tmp_path / "odd.csv", index=False, header=False)
    with pytest.raises(
        InputError, match="odd.csv, line 4: value 'no_such_service' of categorical column 'service'"
    ):
        predict_rows(store, "kcc", str(tmp_path / "odd.csv"))
    odd = df[new].copy()
    odd.iloc[5, 2] = None  # an empty field of a categorical column (pandas 3 keeps it missing as text)
    odd.to_csv(tmp_path / "gap.csv", index=False, header=False)
    with pytest.raises(InputError, match="gap.csv, line 6: missing value in categorical column 'service'"):
        predict_rows(store, "kcc", str(tmp_path / "gap.csv"))
    import shutil

    shutil.copytree(d / "run.zarr", tmp_path / "old.zarr")  # a KCC result from before its centroids were kept
    old = RunStore(str(tmp_path / "old.zarr"), mode="r+")
    for name, key in (("kcc", "centers"), ("mm", "weights"), ("gbce", "variances")):
        del old.group[f"consensus/{name}/{key}"]  # a result from before its model was kept
        with pytest.raises(InputError, match=rf"'{name}' was computed before its model \({key}\) was kept"):
            predict_rows(old, name, str(d / "new.csv"))

    df[new].iloc[:, :10].to_csv(tmp_path / "narrow.csv", index=False, header=False)
    with pytest.raises(InputError, match="narrow.csv"):
        predict_rows(store, "kcc", str(tmp_path / "narrow.csv"))


def test_base_centres_are_computed_once_and_kept(fitted, monkeypatch):
    from ensemble_dask.partitions import models
    from ensemble_dask.stages.predict import base_centers

    d, _, _ = fitted
    store = RunStore(str(d / "run.zarr"), mode="r+")
    first = base_centers(store)
    added = []
    monkeypatch.setattr(models.ClusterCenters, "add", lambda self, X, lab: added.append(X.shape))
    np.testing.assert_array_equal(base_centers(store), first)
    assert added == []  # read from the store
    assert first.shape[0] == 16 and np.isnan(first).any()  # k varies: the smaller clusterings are padded


def test_the_cli_refuses_an_out_that_exists_or_is_the_store(fitted, tmp_path, capsys):
    from ensemble_dask.cli import main

    d, _, _ = fitted
    store, new = str(d / "run.zarr"), str(d / "new.csv")
    assert main(["predict", new, "--store", store, "--method", "kcc", "--out", store]) == 2
    assert f"--out '{store}' is the run store ('{store}'), inside it or holds it" in capsys.readouterr().err
    assert main(["predict", new, "--store", store, "--method", "kcc", "--out", f"{store}/p.zarr"]) == 2
    out = tmp_path / "p.parquet"
    out.write_text("mine")
    assert main(["predict", new, "--store", store, "--method", "kcc", "--out", str(out)]) == 2
    assert "exists: remove it, or give --overwrite" in capsys.readouterr().err and out.read_text() == "mine"
    assert main(["predict", new, "--store", store, "--method", "kcc", "--out", str(out), "--overwrite"]) == 0
    assert len(pd.read_parquet(out)) > 0
    assert (d / "run.zarr" / "consensus").exists()  # the store is whole


def test_the_cli_refuses_an_out_that_is_the_store_or_the_rows_however_spelt(
    fitted, tmp_path, capsys, monkeypatch
):
    """From a user review: --out compared as strings, so ./run.zarr, file:///.../run.zarr or a path through a
    link passed, and --overwrite then deleted the whole run store (exit 0). The new rows too."""
    import os
    import shutil

    from ensemble_dask.cli import main

    d, _, _ = fitted
    shutil.copytree(d / "run.zarr", tmp_path / "run.zarr")
    store = str(tmp_path / "run.zarr")
    monkeypatch.chdir(tmp_path)
    os.symlink(tmp_path, tmp_path / "link")
    before = sorted(p.name for p in (tmp_path / "run.zarr").iterdir())
    for out in ("./run.zarr", f"file://{store}", str(tmp_path / "link" / "run.zarr"), "run.zarr/"):
        argv = [
            "predict",
            str(d / "new.csv"),
            "--store",
            store,
            "--method",
            "kcc",
            "--out",
            out,
            "--overwrite",
        ]
        assert main(argv) == 2, out
        assert "is the run store" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "run.zarr").iterdir()) == before  # the store is whole
    rows = pd.read_csv(d / "new.csv", header=None)
    rows.columns = [str(c) for c in rows.columns]
    rows.to_parquet(tmp_path / "rows.parquet")
    argv = [
        "predict",
        "./rows.parquet",
        "--store",
        store,
        "--method",
        "kcc",
        "--out",
        str(tmp_path / "rows.parquet"),
    ]
    assert main([*argv, "--overwrite"]) == 2
    assert "is the new rows ('./rows.parquet')" in capsys.readouterr().err
    assert len(pd.read_parquet(tmp_path / "rows.parquet")) == len(rows)


def test_an_out_that_cannot_be_reached_is_one_line(fitted, capsys):
    """From the same review: an --out on an object store that cannot be reached was a botocore traceback and
    exit 1 (its existence was asked outside any error handling)."""
    import json

    from ensemble_dask.cli import main

    d, _, _ = fitted
    dead = {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": "http://127.0.0.1:9"},
            "config_kwargs": {"retries": {"max_attempts": 1}}}  # fmt: skip
    argv = ["predict", str(d / "new.csv"), "--store", str(d / "run.zarr"), "--method", "kcc"]
    assert main([*argv, "--out", "s3://bucket/p.parquet", "--out-storage-options", json.dumps(dead)]) == 2
    err = capsys.readouterr().err
    assert "--out 's3://bucket/p.parquet' cannot be reached" in err and "Traceback" not in err
    # a review: new rows that cannot be resolved were blamed on --out; their own reader names them
    out = str(d / "elsewhere.parquet")
    assert main([*argv[:1], "zip://new.csv::/no/such.zip", *argv[2:], "--out", out]) == 2
    err = capsys.readouterr().err
    assert "--out" not in err and "such.zip" in err


def test_an_unseen_category_can_be_placed_at_the_column_mean(fitted, tmp_path, caplog):
    """New traffic holds services the fitted data never had: predict stopped at the first. With
    unseen="mean" (--unseen mean) such a value is placed at its column's mean, as impute: mean places a
    missing number, and a warning counts them; every other row is labelled as before."""
    from ensemble_dask.stages.predict import new_rows, predict_rows

    d, df, new = fitted
    store = RunStore(str(d / "run.zarr"), mode="r+")
    odd = df[new].copy()
    odd.iloc[3, 2] = "no_such_service"
    odd.iloc[7, 2] = "another_one"
    odd.to_csv(tmp_path / "odd.csv", index=False, header=False)
    plain = predict_rows(store, "kcc", str(d / "new.csv"))
    with caplog.at_level("WARNING", logger="ensemble_dask.stages.predict"):
        got = predict_rows(store, "kcc", str(tmp_path / "odd.csv"), unseen="mean")
    assert "'service' 2 row(s)" in caplog.text
    others = np.ones(new.sum(), dtype=bool)
    others[[3, 7]] = False
    for a, b in zip(got, plain, strict=True):
        np.testing.assert_array_equal(a[others], b[others])
    X = np.concatenate([b for _, b in new_rows(store, str(tmp_path / "odd.csv"), unseen="mean")])
    service = list(store["X"].attrs["feature_names"]).index("service")
    np.testing.assert_allclose(X[[3, 7], service], 0.0, atol=1e-12)  # the mean, standardised
    Xp = np.concatenate([b for _, b in new_rows(store, str(d / "new.csv"))])
    np.testing.assert_array_equal(np.delete(X, service, axis=1), np.delete(Xp, service, axis=1))
    with pytest.raises(InputError, match="The 'unseen' parameter must be 'error' or 'mean'; got 'drop'"):
        predict_rows(store, "kcc", str(tmp_path / "odd.csv"), unseen="drop")


def test_a_headerless_table_with_categorical_columns_by_position(fitted, tmp_path):
    """A CSV without header names its columns 0, 1, ...; the store keeps them as text: new rows are coded
    with the same vocabularies. An extra column is refused: by places, one at the end cannot be told from one
    in front, which shifted every feature (a user review)."""
    from ensemble_dask import pipeline
    from ensemble_dask.stages.predict import predict_rows

    d, df, new = fitted
    spec = {
        "seed": 0,
        "store": str(tmp_path / "pos.zarr"),
        "data": {"url": str(d / "fit.csv"), "label_column": 41, "categorical": [1, 2, 3]},
        "generate": {"n_clusterings": 6, "rate": 0.5},
        "consensus": {"kcc": {"n_clusters": 4}},
    }
    pipeline.run_workflow(spec)
    store = RunStore(spec["store"], mode="r+")
    extra = df[new].copy()
    extra[42] = "an id"  # a column the fitted table did not have
    extra.to_csv(tmp_path / "extra.csv", index=False, header=False)
    with pytest.raises(InputError, match="extra.csv: 43 columns, but the store's data set was read by their"):
        predict_rows(store, "kcc", str(tmp_path / "extra.csv"))
    labels = predict_rows(store, "kcc", str(d / "new.csv"))[0]
    assert labels.size == new.sum()
    # new rows without the label column at the end (a review: refused once the width was checked)
    df[new].drop(columns=df.columns[41]).to_csv(tmp_path / "unlabelled.csv", index=False, header=False)
    np.testing.assert_array_equal(predict_rows(store, "kcc", str(tmp_path / "unlabelled.csv"))[0], labels)


def test_a_result_older_than_the_base_clusterings_is_refused(fitted, tmp_path):
    """A store whose base clusterings changed after its consensus: the result is stale, and predict says
    to run it again rather than label with it."""
    import shutil

    from ensemble_dask.stages.generate import generate
    from ensemble_dask.stages.predict import predict_rows

    d, _, _ = fitted
    shutil.copytree(d / "run.zarr", tmp_path / "run.zarr")
    store = RunStore(str(tmp_path / "run.zarr"), mode="r+")
    from ensemble_dask.runtime.clients import dask_client

    with dask_client(processes=False, n_workers=1) as client:
        generate(store, client, n_clusterings=16, rate=0.8, k_min=2, k_max=10, seed=0)
    with pytest.raises(InputError, match="'kcc' is not up to date with the store's base clusterings"):
        predict_rows(store, "kcc", str(d / "new.csv"))


def _numbered_table(tmp_path):
    """A store ingested from a CSV whose first line numbers its columns (``0,1,2,3,digit``: pandas' ``to_csv``
    of a frame with numbered columns), said to be a header; and the frame."""
    from ensemble_dask.stages.ingest import ingest

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(30, 4)))
    frame["digit"] = rng.integers(0, 3, 30)
    frame.to_csv(tmp_path / "t.csv", index=False)
    store = RunStore(str(tmp_path / "s.zarr"))
    ingest(store, str(tmp_path / "t.csv"), header=True, label_column="digit")
    return store, frame


def test_new_rows_are_read_with_the_header_and_separator_ingest_recorded(tmp_path):
    """predict guessed a CSV's header again: the line of column numbers that ingest was told is a header
    became a row, and every prediction was one row off. It reads the table as ingest did; ``header`` and
    ``sep`` given say otherwise."""
    from ensemble_dask.stages.predict import new_rows

    store, frame = _numbered_table(tmp_path)

    def rows(name, **kw):
        return np.concatenate([b for _, b in new_rows(store, str(tmp_path / name), **kw)])

    np.testing.assert_allclose(rows("t.csv"), store["X"][:], atol=1e-5)  # 30 rows, not 31
    frame.to_csv(tmp_path / "semi.csv", index=False, sep=";")
    np.testing.assert_allclose(rows("semi.csv", sep=";"), store["X"][:], atol=1e-5)
    frame.to_csv(tmp_path / "bare.csv", index=False, header=False)  # its columns by position: 0, 1, ...
    np.testing.assert_allclose(rows("bare.csv", header=False), store["X"][:], atol=1e-5)
    with pytest.raises(InputError, match="semi.csv: no column '0'"):  # read with the fit's ","
        rows("semi.csv")


def test_predict_takes_header_and_sep(tmp_path, capsys):
    """The CLI: ``predict`` reads the table as ingest read the store's data; ``--header/--no-header`` and
    ``--sep`` say otherwise."""
    from ensemble_dask.cli import main

    store, frame = _numbered_table(tmp_path)
    np.save(tmp_path / "labels.npy", np.random.default_rng(1).integers(0, 3, (30, 4)))
    assert main(["import-labels", str(tmp_path / "labels.npy"), "--store", store.url]) == 0
    assert main(["consensus", "kcc", "--store", store.url, "--set", "n_clusters=2"]) == 0
    frame.to_csv(tmp_path / "bare.data", index=False, header=False, sep=" ")
    for name, flags in (("t.csv", []), ("bare.data", ["--no-header", "--sep", "whitespace"])):
        out = tmp_path / f"{name}.parquet"
        args = ["predict", str(tmp_path / name), "--store", store.url, "--method", "kcc", "--out", str(out)]
        assert main([*args, "--n-workers", "1", "--no-progress", *flags]) == 0, capsys.readouterr().err
        assert len(pd.read_parquet(out)) == 30


def test_tables_of_no_rows_are_named_as_such(fitted, tmp_path):
    """Review: a CSV of a header alone was read as one empty block and refused by the model as "labels must
    have at least one point" (no file named) in predict, and as a table with no header in ingest; a 1-d .npy
    was "expected a 2-d array of features" (no file named) in import-labels too."""
    from ensemble_dask.stages.generate import import_labels
    from ensemble_dask.stages.ingest import ingest
    from ensemble_dask.stages.predict import predict_rows

    d, df, new = fitted
    store = RunStore(str(d / "run.zarr"), mode="r+")
    (tmp_path / "none.csv").write_text("")
    with pytest.raises(InputError, match="none.csv: no rows to label"):
        predict_rows(store, "kcc", str(tmp_path / "none.csv"))
    from ensemble_dask.stages.predict import new_rows

    named, frame = _numbered_table(tmp_path)  # a store read from a CSV with a header
    frame.iloc[:0].to_csv(tmp_path / "names.csv", index=False)  # its header alone
    assert list(new_rows(named, str(tmp_path / "names.csv"))) == []  # no empty block for the model to refuse
    (tmp_path / "head.csv").write_text("a,b,class\n")
    with pytest.raises(InputError, match="head.csv: the table is empty"):
        ingest(RunStore(str(tmp_path / "h.zarr")), str(tmp_path / "head.csv"), label_column="class")
    np.save(tmp_path / "flat.npy", np.arange(5))
    with pytest.raises(InputError, match="flat.npy: expected a 2-d array"):
        import_labels(RunStore(str(tmp_path / "f.zarr")), str(tmp_path / "flat.npy"))


def test_a_missing_number_in_new_rows_says_what_predict_can_do(fitted, tmp_path):
    """Review: predict said "set impute: mean, or --impute mean", an option of ingest, not of predict."""
    from ensemble_dask.stages.predict import predict_rows

    d, df, new = fitted
    odd = df[new].copy()
    odd.iloc[2, 0] = np.nan  # duration, a number
    odd.to_csv(tmp_path / "nan.csv", index=False, header=False)
    with pytest.raises(
        InputError, match=r"nan.csv, line 3: value nan .* ingested without impute: mean"
    ) as err:
        predict_rows(RunStore(str(d / "run.zarr"), mode="r+"), "kcc", str(tmp_path / "nan.csv"))
    assert "--impute mean and fit again" in str(err.value) and "(set impute" not in str(err.value)


def test_a_bucket_that_does_not_exist_is_refused_not_created(fitted, s3_server, tmp_path, capsys):
    """From a user review: the lease's makedirs of the store's folder, and fsspec's of --out's, created a
    mistyped bucket (in the user's account, on AWS) and the command went on, exit 0."""
    import json

    import s3fs

    from ensemble_dask.cli import main
    from ensemble_dask.stages.predict import write_predictions

    d, _, _ = fitted
    fs = s3fs.S3FileSystem(**s3_server)
    so = json.dumps(s3_server)
    assert (
        main(
            ["ingest", str(d / "new.csv"), "--store", "s3://no-such-store/run.zarr", "--storage-options", so]
        )
        == 2
    )
    assert "cannot reach run store 's3://no-such-store/run.zarr'" in capsys.readouterr().err
    argv = ["predict", str(d / "new.csv"), "--store", str(d / "run.zarr"), "--method", "kcc"]
    assert main([*argv, "--out", "s3://no-such-out/p.parquet", "--out-storage-options", so]) == 2
    assert "bucket 'no-such-out' does not exist" in capsys.readouterr().err
    for out in ("s3://no-such-file/p.parquet", "s3://no-such-group/p.zarr"):
        with pytest.raises(InputError, match="does not exist"):
            write_predictions(out, np.zeros(3, dtype=int), np.full((3, 2), 0.5), np.zeros(3), s3_server)
    assert not {"no-such-store", "no-such-out", "no-such-file", "no-such-group"} & set(
        fs.ls("/", refresh=True)
    )
    out = tmp_path / "new" / "folder" / "p.parquet"  # a local folder is still made
    write_predictions(str(out), np.zeros(3, dtype=int), np.full((3, 2), 0.5), np.zeros(3))
    assert len(pd.read_parquet(out)) == 3


def test_predict_labels_new_rows_while_another_command_writes_the_store(fitted, tmp_path):
    """From the same review: predict took the store's lease at every call (to keep the base clusterings'
    centres), so it failed while any workflow wrote the store ("being written by pid ..."), even with the
    centres kept. It now reads; it takes the lease only to keep centres not kept yet, and when the store is
    busy computes them without keeping them."""
    import shutil

    from ensemble_dask import pipeline
    from ensemble_dask.cli import main
    from ensemble_dask.stages.predict import centers_kept

    d, _, _ = fitted
    shutil.copytree(d / "run.zarr", tmp_path / "run.zarr")
    store = str(tmp_path / "run.zarr")
    argv = ["predict", str(d / "new.csv"), "--store", store, "--method", "kcc", "--out"]
    with pipeline.store_lease(store, None):  # another writer holds it
        shutil.rmtree(tmp_path / "run.zarr" / "_cache", ignore_errors=True)  # (no centres kept)
        assert not centers_kept(RunStore(store, mode="r"))
        assert main([*argv, str(tmp_path / "busy.parquet")]) == 0
        assert not centers_kept(RunStore(store, mode="r"))
    assert main([*argv, str(tmp_path / "free.parquet")]) == 0
    assert centers_kept(RunStore(store, mode="r"))
    with pipeline.store_lease(store, None):
        assert main([*argv, str(tmp_path / "kept.parquet")]) == 0
    frames = [pd.read_parquet(tmp_path / f"{name}.parquet") for name in ("busy", "free", "kept")]
    pd.testing.assert_frame_equal(frames[0], frames[1])
    pd.testing.assert_frame_equal(frames[0], frames[2])


def test_a_store_written_while_predict_reads_it_is_refused(fitted, tmp_path, monkeypatch):
    """A review of 2e1786a: predict reads a store another command may be writing (it takes no lease to
    read), so it could pair new base labels with an old consensus model. What it read must be one state of
    the store: a stage recorded meanwhile (here, between its reads of the model and the rows) is refused."""
    import shutil

    from ensemble_dask.stages import predict as predict_stage

    d, _, _ = fitted
    shutil.copytree(d / "run.zarr", tmp_path / "run.zarr")
    store = RunStore(str(tmp_path / "run.zarr"), mode="r+")
    real = predict_stage.new_rows

    def meanwhile(*args, **kwargs):  # another writer records a stage while predict reads
        with store.stage("generate", {"n_clusterings": 1}, [store.stage_hash("ingest")], writes=()) as rec:
            rec["output"] = "other"
        return real(*args, **kwargs)

    monkeypatch.setattr(predict_stage, "new_rows", meanwhile)
    with pytest.raises(InputError, match="changed while predict read it"):
        predict_stage.predict_rows(store, "kcc", str(d / "new.csv"))
