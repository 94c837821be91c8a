"""The test suite's own set-up: how ``pytest`` (the README's second command) spreads the tests over processes.

A module-scoped fixture of a slow module (a demo run, a workflow, site agents: up to a minute and a half) must
run once per suite, not once per test process. With ``--dist loadgroup`` it ran once per process under
pytest 9.2: pytest-xdist 3.8 put a test in its group by rewriting the test's node id, which pytest 9.2 no
longer reads (pytest-dev/pytest-xdist#1386), and the suite took minutes longer in a fresh environment.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import textwrap
import tomllib

import pytest

from tests.conftest import REPO

MODULE = textwrap.dedent(
    """
    import os, time
    import pytest

    @pytest.fixture(scope="module")
    def expensive():
        with open(os.environ["FIXTURE_LOG"], "a") as f:
            f.write(__name__ + "\\n")

    @pytest.mark.slow
    @pytest.mark.parametrize("i", range(6))
    def test_uses_it(expensive, i):
        with open(os.environ["RUN_LOG"], "a") as f:
            f.write(f"{os.getpid()} {__name__}\\n")
        time.sleep(0.1)  # long enough that both processes ask for work while the module runs
    """
)
#: a module of more quick tests, first by name: it runs after the slow ones all the same
QUICK = textwrap.dedent(
    """
    import os
    import pytest

    @pytest.mark.parametrize("i", range(10))
    def test_quick(i):
        with open(os.environ["RUN_LOG"], "a") as f:
            f.write(f"{os.getpid()} {__name__}\\n")
    """
)


@pytest.mark.slow
def test_each_module_fixture_runs_once_on_the_suite_s_processes(tmp_path):
    """Two modules of slow tests sharing a module fixture, run with the project's ``addopts`` (two processes)
    and its conftest's ordering: each fixture ran once, and each process began with a slow module (the quick
    tests fill the processes' ends)."""
    addopts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa\n")
    for name in ("test_first", "test_second"):
        (project / f"{name}.py").write_text(MODULE)
    (project / "test_a_quick.py").write_text(QUICK)
    log, run_log = tmp_path / "fixture.log", tmp_path / "run.log"
    options = [o for o in addopts if o != "--doctest-modules"]
    (project / "pytest.ini").write_text(f"[pytest]\naddopts = {shlex.join(options)}\nmarkers = slow\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}  # the project's options only
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(project)],
        cwd=project, env={**env, "FIXTURE_LOG": str(log), "RUN_LOG": str(run_log), "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "-n" in options, shlex.join(options)  # the suite runs on several processes
    assert sorted(log.read_text().split()) == ["test_first", "test_second"], (shlex.join(options), r.stdout)
    first = {}
    for line in run_log.read_text().splitlines():
        pid, module = line.split()
        first.setdefault(pid, module)
    assert len(first) == 2 and set(first.values()) <= {"test_first", "test_second"}, run_log.read_text()


class _Item:
    """What the conftest's ordering reads of a collected test: its node id, fixtures and marks."""

    def __init__(self, nodeid, slow=False):
        self.nodeid, self.fixturenames, self._slow = nodeid, (), slow

    def add_marker(self, mark):  # pragma: no cover - these items start nothing
        raise AssertionError(mark)

    def get_closest_marker(self, name):
        return name == "slow" and self._slow or None


def test_kernel_tests_first_then_slow_modules_each_module_whole():
    """The kernels' own tests run first (they fill the numba cache before the slow tests' commands, workers
    and agents start, each of which compiled the kernels again), then the modules with slow tests, then the
    rest; each module stays whole and in its order."""
    from tests.conftest import pytest_collection_modifyitems

    ids = [
        ("tests/cli/test_cli.py::test_a", True),
        ("tests/cli/test_cli.py::test_b", False),
        ("tests/coassoc/test_coassoc.py::test_a", True),
        ("tests/coassoc/test_coassoc.py::test_b", False),
        ("tests/consensus/test_kcc.py::test_a", False),
        ("tests/consensus/test_kcc.py::test_b", False),
        ("tests/test_metrics.py::test_a", False),
        ("tests/test_deploy.py::test_a", True),
    ]
    items = [_Item(nodeid, slow) for nodeid, slow in ids]
    pytest_collection_modifyitems(None, items)
    assert [item.nodeid for item in items] == [
        "tests/coassoc/test_coassoc.py::test_a",
        "tests/coassoc/test_coassoc.py::test_b",
        "tests/consensus/test_kcc.py::test_a",
        "tests/consensus/test_kcc.py::test_b",
        "tests/cli/test_cli.py::test_a",
        "tests/cli/test_cli.py::test_b",
        "tests/test_deploy.py::test_a",
        "tests/test_metrics.py::test_a",
    ]


def _diagnostics():
    """The diagnostics an in-process LocalCluster's worker runs: (profile on, tick ms, monitor ms)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        calls = next(iter(cluster.workers.values())).periodic_callbacks
        return "profile" in calls, calls["tick"].callback_time, calls["monitor"].callback_time


def test_the_suite_s_clusters_run_dask_s_diagnostics_less_often_but_the_performance_report_s(request):
    """conftest's ``QUIET_DASK``: a cluster the tests start (their commands and agents inherit the
    environment) samples no profile, ticks every 500 ms and runs its system monitor every 5 s (Dask: 10, 20
    and 500 ms); a test about the performance report gets its workers' profiles back."""
    from tests.conftest import QUIET_DASK

    assert all(os.environ[key] == value for key, value in QUIET_DASK.items())
    assert _diagnostics() == (False, 500, 5000)
    request.getfixturevalue("performance_report_on")
    assert os.environ["DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED"] == "True"
    assert _diagnostics()[0] is True
