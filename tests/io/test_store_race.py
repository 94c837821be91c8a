"""Three workflows with different data started at once on one fresh store, on a local path and on S3 (a moto
server): exactly one finishes, its store equals a clean run of its workflow, the others exit with the lease's
error, and no stage is ever marked complete over content from two runs (issue 29).

``ED_RACE_TRIALS`` sets the trials per store kind (default 1, to keep the suite short; the issue's acceptance
is 20).
"""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

from ensemble_dask.io.store import RunStore
from tests.conftest import EXE

pytestmark = pytest.mark.slow

WORKFLOW = """\
seed: 5
data: {{url: "synthetic:kdd99?n={n}&seed={seed}"}}
generate: {{n_clusterings: 8, k_min: 2, k_max: 6, rate: 0.5}}
coassoc: {{l: 8}}
consensus: {{pcc-kl: {{n_clusters: 4}}}}
"""
ARRAYS = ("X", "labels", "pairs/indptr", "pairs/indices", "pairs/co", "pairs/both", "consensus/pcc-kl/Y")
TRIALS = int(os.environ.get("ED_RACE_TRIALS", 1))


class Workflows(list):
    """The three workflow files; :meth:`clean` gives the arrays of one's clean run (run once, when a race
    has shown which one won: the losers' clean runs are never needed)."""

    def __init__(self, paths, folder):
        super().__init__(paths)
        self._folder, self._clean = folder, {}

    def clean(self, i):
        if i not in self._clean:
            store = self._folder / f"clean{i}.zarr"
            proc = subprocess.run([EXE, "run", str(self[i]), "--store", str(store), "--no-progress"],
                                  capture_output=True, text=True, timeout=300)  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            self._clean[i] = {name: RunStore(store, mode="r")[name][:] for name in ARRAYS}
        return self._clean[i]


@pytest.fixture(scope="module")
def workflows(tmp_path_factory):
    """Three workflows on different data."""
    folder = tmp_path_factory.mktemp("race")
    paths = []
    for i in range(3):
        paths.append(folder / f"wf{i}.yaml")
        paths[-1].write_text(WORKFLOW.format(n=1200 + 300 * i, seed=i))
    return Workflows(paths, folder)


def _race(workflows, url, storage_options=None):
    extra = ["--storage-options", json.dumps(storage_options)] if storage_options else []
    procs = [
        subprocess.Popen(
            [EXE, "run", str(path), "--store", url, "--no-progress", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for path in workflows
    ]
    return [(p.returncode, *p.communicate(timeout=600)) for p in procs if p.wait(timeout=600) is not None]


def _check(workflows, url, storage_options, results):
    codes = [code for code, _, _ in results]
    assert sorted(codes) == [0, 2, 2], results
    for code, _, err in results:
        if code:
            assert "Traceback" not in err and err.count("\n") == 1, err
            assert "is being written by pid" in err or "holds the data set read from" in err, err
    winner = codes.index(0)
    store = RunStore(url, storage_options, mode="r")
    records = store.records()
    assert records and all(rec["complete"] for rec in records.values()), records
    assert all(store.verify(name) == [] for name in records)
    clean = workflows.clean(winner)
    for name in ARRAYS:
        np.testing.assert_array_equal(store[name][:], clean[name], err_msg=name)


@pytest.mark.parametrize("trial", range(TRIALS))
def test_three_workflows_on_one_fresh_local_store(workflows, tmp_path, trial):
    url = str(tmp_path / "race.zarr")
    _check(workflows, url, None, _race(workflows, url))


@pytest.mark.parametrize("trial", range(TRIALS))
def test_three_workflows_on_one_fresh_s3_store(workflows, s3_bucket, trial):
    bucket, options = s3_bucket
    url = f"s3://{bucket}/race.zarr"
    _check(workflows, url, options, _race(workflows, url, options))
