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
        store,
        str(tmp_path / "t.csv"),
        header=True,
        label_column="label",
        standardize=True,
        drop_constant=True,
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


def _blobs_table(path, scale_a=1.0):
    rng = np.random.default_rng(0)
    a = rng.normal(size=50) * 3 + 10
    b = rng.normal(size=50) * 0.01
    lines = [
        f"{float(x) * scale_a!r},{float(y)!r},{i % 2}" for i, (x, y) in enumerate(zip(a, b, strict=True))
    ]
    path.write_text("a,b,label\n" + "\n".join(lines) + "\n")
    return np.column_stack([a, b])


def test_a_generic_table_is_standardised_by_default(tmp_path):
    """Before: a generic table was kept as read, so its clusterings depended on each column's unit."""
    raw = _blobs_table(tmp_path / "cm.csv")
    _blobs_table(tmp_path / "um.csv", scale_a=1e4)  # column a in another unit
    X = {}
    for name in ("cm", "um"):
        store = RunStore(tmp_path / f"{name}.zarr")
        ingest(store, str(tmp_path / f"{name}.csv"), header=True, label_column="label")
        X[name] = store["X"][:].astype(np.float64)
    z = (raw - raw.mean(0)) / raw.std(0)
    np.testing.assert_allclose(X["cm"], z, atol=1e-5)
    np.testing.assert_allclose(X["um"], X["cm"], atol=1e-5)  # the unit no longer matters
    # --no-standardize keeps the values as read
    rc = cli_main(["ingest", str(tmp_path / "cm.csv"), "--store", str(tmp_path / "raw.zarr"), "--header",
                   "--label-column", "label", "--no-standardize"])  # fmt: skip
    assert rc == 0
    np.testing.assert_allclose(RunStore(tmp_path / "raw.zarr")["X"][:], raw.astype(np.float32))
    assert RunStore(tmp_path / "raw.zarr").record("ingest")["params"]["standardize"] is False
