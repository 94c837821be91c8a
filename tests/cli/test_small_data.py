"""A consensus command on small data without fixed costs (issue 60, item 4): the report page drawn when asked,
not after every fit, and no scikit-learn, matplotlib or pandas imported for a fit on a thousand rows. No
timings here: ``benchmarks/cli_overhead.py`` measures the command against the imports it cannot avoid."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    """1,000 rows of blobs with their labels (``ingest --labels``) and 12 base clusterings of them
    (``import-labels``): a store for every method, made without a cluster."""
    from sklearn.cluster import KMeans
    from sklearn.datasets import make_blobs

    from ensemble_dask.cli import main

    path = tmp_path_factory.mktemp("small")
    X, y = make_blobs(1000, centers=3, n_features=4, random_state=0)
    np.save(path / "X.npy", X)
    np.save(path / "y.npy", y)
    rng = np.random.default_rng(0)
    parts = np.stack(
        [KMeans(int(rng.integers(2, 7)), n_init=1, random_state=t).fit_predict(X) for t in range(12)], 1
    )
    np.save(path / "parts.npy", parts)
    store = path / "s.zarr"
    for args in (
        ("ingest", path / "X.npy", "--labels", path / "y.npy"),
        ("import-labels", path / "parts.npy"),
    ):
        assert main([*map(str, args), "--store", str(store), "-q"]) == 0
    assert main(["coassoc", "--store", str(store), "-q", "--n-workers", "1"]) == 0
    return store


def test_the_consensus_command_draws_the_report_when_asked(small_store, tmp_path, capsys):
    """Before: every consensus command redrew the report page (its figures: seconds on any data)."""
    import shutil

    from ensemble_dask.cli import main

    store = tmp_path / "s.zarr"
    shutil.copytree(small_store, store)
    assert main(["consensus", "kcc", "--store", str(store), "--n-clusters", "3"]) == 0
    out = capsys.readouterr().out
    assert "kcc" in out and f"report: not redrawn; ensemble-dask report --store {store} draws it" in out
    assert not (store / "report" / "metrics.json").exists()
    assert main(["report", "--store", str(store)]) == 0
    assert set(json.loads((store / "report" / "metrics.json").read_text())["methods"]) == {"kcc"}
    capsys.readouterr()
    assert main(["consensus", "hbgf", "--store", str(store), "--n-clusters", "3", "--report"]) == 0
    assert "report: not redrawn" not in capsys.readouterr().out
    assert set(json.loads((store / "report" / "metrics.json").read_text())["methods"]) == {"kcc", "hbgf"}
    assert (store / "report" / "index.html").exists()


_IMPORTS = """
import sys
from ensemble_dask.cli import main

HEAVY = ("sklearn", "matplotlib", "pandas", "scipy.optimize", "distributed")
for method in sys.argv[2:]:
    assert main(["consensus", method, "--store", sys.argv[1], "--n-clusters", "3", "-q"]) == 0
    print("imported:", method, sorted(m for m in HEAVY if m in sys.modules))
"""


def test_a_consensus_command_on_small_data_imports_no_scikit_learn(small_store, tmp_path):
    """Before: scikit-learn (about a second to import, with SciPy's statistics and pandas) for the graph's
    neighbours and the spectral k-means, the starts' k-means and the scores; matplotlib for the report."""
    import shutil

    store = tmp_path / "s.zarr"
    shutil.copytree(small_store, store)
    methods = ["graph", "pcc-kl", "kcc", "hbgf", "bce", "mm", "ppc"]
    r = subprocess.run(
        [sys.executable, "-c", _IMPORTS, str(store), *methods],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stdout.splitlines() if line.startswith("imported:")]
    assert said == [f"imported: {m} []" for m in methods], r.stdout
    report = json.loads(subprocess.run(
        [sys.executable, "-m", "ensemble_dask", "report", "--store", str(store), "--format", "json"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    ).stdout)  # fmt: skip
    for m in methods:  # each scored against the data's labels, as before
        assert report["methods"][m]["ARI"] > 0.9, (m, report["methods"][m])
