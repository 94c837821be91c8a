"""Imports on first use on several threads of one fresh process (:mod:`ensemble_dask.runtime.imports`)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ensemble_dask

# Thread K runs a k-means base clustering (scikit-learn, which imports SciPy); thread H, as soon as K has
# begun importing SciPy, a hierarchical one (scipy.cluster.hierarchy): two tasks of a Dask worker of two
# threads in a fresh process. Prints which threads imported a module of SciPy or scikit-learn, and errors.
TWO_CLUSTERINGS = """
import json
import sys
import threading

import numpy as np

from ensemble_dask.partitions.clusterers import run_clustering

importers, errors = set(), []


class Recorder:  # sees each module the first time any thread imports it
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("scipy", "sklearn"):
            importers.add(threading.current_thread().name)


def k():
    try:
        run_clustering(x.copy(), {"algorithm": "kmeans", "k": 3, "seed": 0})
    except BaseException as exc:
        errors.append(repr(exc))


def h():
    while "scipy" not in sys.modules:
        pass
    try:
        run_clustering(x.copy(), {"algorithm": "single", "k": 3, "seed": 1})
    except BaseException as exc:
        errors.append(repr(exc))


if __name__ == "__main__":
    if "scipy" in sys.modules:
        sys.exit("scipy is imported before the threads start: nothing to test")
    sys.meta_path.insert(0, Recorder())
    x = np.random.default_rng(0).normal(size=(300, 3))
    threads = [threading.Thread(target=h, name="H"), threading.Thread(target=k, name="K")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"importers": sorted(importers), "errors": errors}))
"""


@pytest.mark.slow
def test_base_clusterings_on_two_threads_import_one_at_a_time(tmp_path):
    """A k-means and a hierarchical clustering starting together on two threads of a fresh process: only
    the first imports SciPy and scikit-learn, the other waits for it. Before, both imported, and the
    hierarchical one could load ``scipy.cluster`` while SciPy's ``__init__`` ran on the other thread: a
    concurrent circular import, which failed the generate stage with ``ImportError: cannot import name
    'PytestTester' from partially initialized module 'scipy._lib._testutils'`` and ``KeyError: 'scipy'``
    (a helper's hunt: 7 of 30 fresh processes with this timing, 1 of 20 through ``generate`` on a cluster of
    one worker of four threads)."""
    script = tmp_path / "two_clusterings.py"
    script.write_text(TWO_CLUSTERINGS)
    env = {**os.environ, "PYTHONPATH": str(Path(ensemble_dask.__file__).parents[1])}  # this checkout's
    cmd = [sys.executable, str(script)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"importers": ["K"], "errors": []}
