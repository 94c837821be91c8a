"""Reference labels from a file of their own (issue 60, item 6): ``ingest --labels`` beside the data's table,
and ``import-labels --reference`` beside base labels brought without data, so that such a store's results are
scored."""

import json

import numpy as np
import pandas as pd
import pytest

from ensemble_dask import InputError
from ensemble_dask.io.store import RunStore
from ensemble_dask.stages.ingest import ingest

NAMES = np.array(["setosa", "versicolor", "virginica"])


@pytest.fixture
def data(tmp_path):
    """A table of 30 rows (X.npy) and its labels, in every form a labels file takes."""
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 10)
    X = rng.normal(size=(30, 3)) + 4.0 * y[:, None]
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)  # 1-d
    np.save(tmp_path / "y2d.npy", y[:, None])  # one column
    pd.Series(y).to_csv(tmp_path / "y.csv", index=False)  # pandas' header "0" above the labels
    np.savetxt(tmp_path / "y-bare.csv", y, fmt="%d")  # no header
    pd.Series(NAMES[y], name="species").to_csv(tmp_path / "names.csv", index=False)
    pd.DataFrame({"species": NAMES[y]}).to_parquet(tmp_path / "names.parquet")
    np.save(tmp_path / "y29.npy", y[:29])
    pd.DataFrame({"a": y, "b": y}).to_csv(tmp_path / "two.csv", index=False)
    return tmp_path, X, y


@pytest.mark.parametrize("name", ["y.npy", "y2d.npy", "y.csv", "y-bare.csv", "names.csv", "names.parquet"])
def test_ingest_takes_the_labels_from_a_file_of_their_own(data, name):
    path, _, y = data
    store = RunStore(path / "s.zarr")
    info = ingest(store, str(path / "X.npy"), labels=str(path / name))
    assert info["d"] == 3 and info["class_counts"] is not None  # every column a feature
    classes = store["y_true"].attrs["classes"]
    assert classes == (NAMES.tolist() if "names" in name else ["0", "1", "2"])
    np.testing.assert_array_equal(store["y_true"][:], y)
    assert store.record("ingest")["meta"]["labels"] == str(path / name)


def test_the_labels_file_selects_classes_and_is_part_of_the_data_s_identity(data):
    path, _, y = data
    store = RunStore(path / "s.zarr")
    info = ingest(store, str(path / "X.npy"), labels=str(path / "names.csv"), classes=["virginica"])
    assert info["n"] == 10 and info["classes"] == ["virginica"]
    assert ingest(store, str(path / "X.npy"), labels=str(path / "names.csv"), classes=["virginica"])[
        "skipped"
    ]
    # other labels (the same table): read again
    pd.Series(NAMES[::-1][y], name="species").to_csv(path / "other.csv", index=False)
    args = dict(labels=str(path / "other.csv"), classes=["virginica"], overwrite=True)
    assert not ingest(store, str(path / "X.npy"), **args)["skipped"]
    assert RunStore(path / "s.zarr", mode="r")["X"][:, 0].mean() < 0  # now the rows of class 0


def test_a_workflow_s_data_section_takes_the_labels_file(data):
    from ensemble_dask.pipeline import run_workflow

    path, _, y = data
    spec = {
        "store": str(path / "w.zarr"),
        "data": {"url": str(path / "X.npy"), "labels": str(path / "y.npy")},
    }
    run_workflow(spec, report=False)
    np.testing.assert_array_equal(RunStore(path / "w.zarr", mode="r")["y_true"][:], y)
    spec["data"]["label_column"] = 0
    with pytest.raises(InputError, match=r"workflow section 'data': The reference labels come from a column"):
        run_workflow(spec, report=False)


@pytest.mark.parametrize(
    ("labels", "options", "message"),
    [
        (
            "y29.npy",
            {},
            r"labels file '.*y29.npy' has 29 rows, but data '.*X.npy' has 30: a file of reference labels "
            r"holds one label per row of the data, in its order",
        ),
        ("two.csv", {}, r"labels file '.*two.csv' has 2 columns; a file of reference labels holds one"),
        ("y.npy", {"label_column": "0"}, r"from a column of the table \(label_column\) or from a file of"),
        ("nope.npy", {}, r"input file '.*nope.npy' does not exist"),
    ],
)
def test_a_labels_file_that_does_not_fit_the_data_is_named(data, labels, options, message):
    path = data[0]
    store = RunStore(path / "s.zarr")
    with pytest.raises(InputError, match=message):
        ingest(store, str(path / "X.npy"), labels=str(path / labels), **options)
    assert "X" not in store and store.record("ingest") is None


def main(capsys, *args):
    from ensemble_dask.cli import main as cli_main

    rc = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def _report(store):
    return json.loads((store / "report" / "metrics.json").read_text())


def test_a_store_of_imported_labels_is_scored_against_a_reference(data, capsys):
    """Base labels brought without data, and a reference beside them: the report scores the base partitions
    and the results (it could not: a store made by import-labels had no y_true, ever)."""
    path, X, y = data
    parts = np.stack([y, (y + 1) % 3, np.where(y == 2, 1, y), y, np.where(y == 0, 1, y)], axis=1)
    np.save(path / "parts.npy", parts)
    store = path / "byo.zarr"
    rc, _, err = main(
        capsys, "import-labels", path / "parts.npy", "--store", store, "--reference", path / "y29.npy"
    )
    assert rc == 2 and not store.exists(), err  # checked before the store is made
    assert (
        "labels file" in err
        and "y29.npy' has 29 rows, but labels table" in err
        and "parts.npy' has 30" in err
    )
    rc, out, err = main(
        capsys, "import-labels", path / "parts.npy", "--store", store, "--reference", path / "y.npy"
    )
    assert rc == 0 and "reference labels of 3 classes" in out, err
    rc, out, err = main(
        capsys, "import-labels", path / "parts.npy", "--store", store, "--reference", path / "y.npy"
    )
    assert rc == 0 and "reference labels of 3 classes (up to date)" in out, err
    for args in (("coassoc",), ("consensus", "pcc-l2", "--n-clusters", 3), ("report",)):
        assert main(capsys, *args, "--store", store)[0] == 0
    report = _report(store)
    assert report["methods"]["pcc-l2"]["ARI"] == pytest.approx(1.0)
    assert report["base_partitions"]["ARI"]["max"] == pytest.approx(1.0)
    # another reference: the results are scored against it, not kept with the old scores
    swapped = np.where(y == 0, 1, np.where(y == 1, 0, 2))
    np.save(path / "other.npy", np.where(np.arange(30) < 15, y, swapped))
    assert (
        main(
            capsys, "import-labels", path / "parts.npy", "--store", store, "--reference", path / "other.npy"
        )[0]
        == 0
    )
    assert main(capsys, "report", "--store", store)[0] == 0
    assert _report(store)["methods"]["pcc-l2"]["ARI"] < 0.9
    assert main(capsys, "verify", "--store", store)[0] == 0


@pytest.mark.parametrize("own_labels", [False, True])
def test_the_data_s_first_ingest_keeps_the_reference_or_replaces_it_with_its_own(data, capsys, own_labels):
    """The data of a store of imported labels (gbce and predict need X): without labels of its own, the
    reference stays; with them, they are the store's reference (the imported one's record goes, the results
    are scored against them)."""
    path, X, y = data
    np.save(path / "parts.npy", np.stack([y, (y + 1) % 3, np.where(y == 2, 1, y)], axis=1))
    store = path / "byo.zarr"
    np.save(path / "half.npy", np.where(np.arange(30) < 15, y, 0))
    assert (
        main(capsys, "import-labels", path / "parts.npy", "--store", store, "--reference", path / "half.npy")[
            0
        ]
        == 0
    )
    assert main(capsys, "consensus", "hbgf", "--store", store, "--n-clusters", 3, "--report")[0] == 0
    before = _report(store)["methods"]["hbgf"]["ARI"]
    extra = ["--labels", path / "y.npy"] if own_labels else []
    rc, _, err = main(capsys, "ingest", path / "X.npy", "--store", store, *extra)
    assert rc == 0, err
    assert main(capsys, "verify", "--store", store)[0] == 0  # every stage's output as its record says
    s = RunStore(store, mode="r")
    assert (s.record("reference") is None) == own_labels
    np.testing.assert_array_equal(s["y_true"][:], y if own_labels else np.where(np.arange(30) < 15, y, 0))
    assert main(capsys, "report", "--store", store)[0] == 0
    after = _report(store)["methods"]["hbgf"]["ARI"]
    assert after == pytest.approx(1.0) if own_labels else after == before
    # a store with data: its reference comes with it
    rc, _, err = main(
        capsys, "import-labels", path / "parts.npy", "--store", store, "--reference", path / "y.npy"
    )
    assert rc == 2 and "holds a data set: its reference labels come with it (ingest" in err, err
