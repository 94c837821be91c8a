"""ingest's scaling of a generic table: what becomes of a column constant over the kept rows."""

import numpy as np
import pytest

from ensemble_dask.cli import main as cli_main
from ensemble_dask.io.store import RunStore
from ensemble_dask.stages.ingest import ingest

TABLE = "a,b,c,label\n1,5,0.5,x\n2,5,0.25,y\n4,5,1.0,x\n7,5,0.0,y\n"


@pytest.mark.parametrize("standardize", [True, False])
def test_a_constant_column_is_kept_and_named(standardize, tmp_path):
    (tmp_path / "t.csv").write_text(TABLE)
    store = RunStore(tmp_path / "run.zarr")
    info = ingest(store, str(tmp_path / "t.csv"), header=True, label_column="label", standardize=standardize)
    X = store["X"][:]
    assert info["feature_names"] == ["a", "b", "c"] and info["dropped_constant"] == []
    assert info["constant_columns"] == ["b"]
    assert store["X"].attrs["summary"]["constant_columns"] == ["b"]
    if standardize:  # centred, not scaled: zeros, which add nothing to any distance
        np.testing.assert_array_equal(X[:, 1], 0.0)
        np.testing.assert_allclose(X[:, [0, 2]].std(0), 1.0, rtol=1e-6)
        assert store["X"].attrs["scale"][1] == 1.0
    else:
        np.testing.assert_array_equal(X[:, 1], 5.0)


def test_a_constant_column_dropped_on_request(tmp_path):
    (tmp_path / "t.csv").write_text(TABLE)
    store = RunStore(tmp_path / "run.zarr")
    info = ingest(
        store, str(tmp_path / "t.csv"), header=True, label_column="label", standardize=True, drop_constant=True
    )
    assert info["feature_names"] == ["a", "c"] and info["dropped_constant"] == ["b"]
    assert info["constant_columns"] == [] and store["X"].shape == (4, 2)


def test_cli_names_the_constant_columns(tmp_path, capsys):
    (tmp_path / "t.csv").write_text(TABLE)
    rc = cli_main(["ingest", str(tmp_path / "t.csv"), "--store", str(tmp_path / "run.zarr"), "--header",
                   "--label-column", "label"])  # fmt: skip
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out == "ingest: n=4 d=3 (constant over the rows kept: b)\n"
