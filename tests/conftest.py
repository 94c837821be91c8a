"""Shared fixtures: small real data in tests/data, Dask clusters, a local S3 server.

Everything here is real: LocalClusters, `dask scheduler` / `dask worker` processes and a moto S3
server process, all bound to 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: The report page of a run is drawn without its figures in the tests (about a second of CPU a figure, in
#: every command that ends in a report), and with them where a test is about them (:func:`figures_on`:
#: tests/report). Set before any command starts, so the commands the tests run as subprocesses inherit it.
os.environ.setdefault("DASK_ENSEMBLE_DASK__REPORT__FIGURES", "False")  # a run with =True draws them all
#: And an embedded cluster of one worker process where a test gives no number (the tests run side by side on
#: a 2-core machine, and each worker process costs its start-up: imports, kernels loaded from the cache);
#: a test about several workers says how many.
os.environ.setdefault("DASK_ENSEMBLE_DASK__CLUSTER__N_WORKERS", "1")
#: And no Dask performance report (about a second of CPU in every command that starts a cluster, rendering
#: bokeh's page), except where a test is about it (:func:`performance_report_on`).
os.environ.setdefault("DASK_ENSEMBLE_DASK__REPORT__DASK_PERFORMANCE", "False")
#: And embedded clusters without Dask's dashboard (about half a second of CPU in every command that starts a
#: cluster: importing bokeh), except where a test is about it (tests/runtime/test_lazy_cluster.py).
os.environ.setdefault("DASK_ENSEMBLE_DASK__CLUSTER__DASHBOARD", "False")
#: And Dask's own diagnostics less often, as distributed's own tests have them (``config_for_cluster_tests``).
#: Each scheduler and worker ticks its event loop every 20 ms, samples its threads' stacks every 10 ms (the
#: statistical profile) and reads its memory every 100 ms (nanny) and 500 ms: an idle LocalCluster of two
#: worker processes took 13% of a core, one of two threads 5%, and the suite keeps clusters idle for minutes
#: (the session's clusters, each site agent's own cluster while the agent waits). With these, 1.4% and 0.5%.
#: No test reads them; the profile is back on where a test is about it (:func:`performance_report_on`).
QUIET_DASK = {
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "500ms",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s",
    "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s",
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
}
for _key, _value in QUIET_DASK.items():
    os.environ.setdefault(_key, _value)
import dask  # noqa: E402  (after the environment it reads)

dask.config.refresh()

REPO = Path(__file__).resolve().parents[1]
TEST_DATA = REPO / "tests" / "data"  # small real data, shipped with its provenance (tests/data/README.md)
#: the installed command (the tests of a command run it as a user does)
EXE = shutil.which("ensemble-dask", path=str(Path(sys.executable).parent)) or "ensemble-dask"
BIN = Path(sys.executable).parent


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process {proc.args} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def _stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _exe(name):
    path = BIN / name
    return str(path) if path.exists() else shutil.which(name)


@contextlib.contextmanager
def _setting_on(key):
    """Our dask setting ``ensemble-dask.KEY`` true, as by default, in this process and the commands it starts
    (the environment above turns it off for the others)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DASK_ENSEMBLE_DASK__" + key.upper().replace(".", "__").replace("-", "_"), "True")
        with dask.config.set({f"ensemble-dask.{key}": True}):
            yield


def figures_drawn():
    """Report pages drawn with their figures, as by default, in this process and the commands it starts."""
    return _setting_on("report.figures")


@pytest.fixture
def figures_on():
    """:func:`figures_drawn` for one test."""
    with figures_drawn():
        yield


@pytest.fixture
def performance_report_on():
    """Commands write Dask's performance report, as by default, with their workers' profiles (the report's
    profile pages), in this test and the commands it starts."""
    with _setting_on("report.dask-performance"), pytest.MonkeyPatch.context() as mp:
        mp.setenv("DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED", "True")
        with dask.config.set({"distributed.worker.profile.enabled": True}):
            yield


@pytest.fixture(scope="session")
def kdd_sample():
    """Every 100th record of the real KDD Cup 99 10% file (4,941 rows, all the big classes), as .csv.gz:
    tests/data/kdd_sample.csv.gz (provenance in tests/data/README.md)."""
    return TEST_DATA / "kdd_sample.csv.gz"


@pytest.fixture(scope="session")
def uci_dir():
    """Four small UCI sets of the papers' tables (iris, wine, glass, wdbc): tests/data/uci."""
    return TEST_DATA / "uci"


@pytest.fixture(scope="session")
def client():
    """A 2-worker LocalCluster of threads (shares memory:// stores with the test process)."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="session")
def process_client():
    """A 2-worker LocalCluster of worker processes."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", host="127.0.0.1"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="session")
def dask_scheduler_address(tmp_path_factory):
    """A real `dask scheduler` and two `dask worker` processes on 127.0.0.1; yields the address."""
    port = _free_port()
    workdir = tmp_path_factory.mktemp("dask")
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    sched = subprocess.Popen(
        [_exe("dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    procs = [sched]
    try:
        _wait_port(port, sched)
        address = f"tcp://127.0.0.1:{port}"
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        _exe("dask"),
                        "worker",
                        address,
                        "--nthreads",
                        "1",
                        "--host",
                        "127.0.0.1",
                        "--no-dashboard",
                    ],
                    cwd=workdir,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        from distributed import Client

        with Client(address, timeout="30s") as c:
            c.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for p in reversed(procs):
            _stop(p)


def start_s3_server(port, *options):
    """``python -m tests._s3_server 127.0.0.1 PORT *options`` (moto's server), as a process."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests._s3_server", "127.0.0.1", str(port), *options],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A moto S3 server process on 127.0.0.1 (with S3's atomic conditional writes:
    tests/_s3_server.py); yields the storage_options to reach it."""
    port = _free_port()
    proc = start_s3_server(port)
    try:
        _wait_port(port, proc)
        yield {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}", "region_name": "us-east-1"},
        }
    finally:
        _stop(proc)


@pytest.fixture
def s3_bucket(s3_server):
    """A fresh bucket on the moto server; yields (bucket name, storage_options)."""
    import uuid

    import s3fs

    fs = s3fs.S3FileSystem(**s3_server)
    name = f"test-{uuid.uuid4().hex[:12]}"
    fs.call_s3("create_bucket", Bucket=name)
    return name, s3_server


@pytest.fixture
def s3_requests(monkeypatch):
    """The requests this process's S3 clients send while the test runs (zarr's too), as ``(method, key)``;
    the test clears the list where it starts counting."""
    from urllib.parse import unquote, urlsplit

    from aiobotocore.endpoint import AioEndpoint

    sent = []
    send = AioEndpoint._send

    async def counted(self, request):
        sent.append((request.method, unquote(urlsplit(request.url).path).lstrip("/")))
        return await send(self, request)

    monkeypatch.setattr(AioEndpoint, "_send", counted)
    return sent


#: fixtures that start a Dask cluster or a process: every test that uses one is ``slow``
_STARTS_SOMETHING = {"client", "process_client", "dask_scheduler_address", "s3_server", "s3_bucket"}


#: the kernels' own tests, most of them in the test processes themselves: first, so that the numba cache is
#: warm before the commands, workers and site agents of the slow tests start (each compiled every kernel it
#: met again)
_KERNEL_TESTS = ("tests/consensus/", "tests/coassoc/", "tests/rowblocks/")


def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` every test that starts a cluster or a process through a shared fixture (the others that
    do carry the mark themselves), so that ``pytest -m "not slow"`` is the quick set.

    On several test processes (``-n 2 --dist loadfile --no-loadscope-reorder``, the project's default) each
    module runs whole on one process, so that a module-scoped fixture (a workflow run, a demo, site agents:
    seconds to a minute and a half) runs once, not once per process. The kernels' own tests come first: most
    of them compile the numba kernels in the two test processes and fill the cache, which every later command,
    worker and site agent reads (in a fresh environment, where only the README's first command had filled it,
    the slow tests' processes each compiled the kernels they met again, side by side: the suite took 1,438 s
    of CPU against 1,179 s in this order). Then the modules with slow tests, so that the quick ones fill the
    processes' ends instead of one long module. (Not ``--dist loadgroup`` with ``xdist_group`` marks, as
    before: pytest-xdist 3.8 puts a test in its group by rewriting its node id, which pytest 9.2 ignores, so
    each process ran every module fixture again and the suite took minutes longer:
    pytest-dev/pytest-xdist#1386.)"""
    for item in items:
        if _STARTS_SOMETHING & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    slow_modules = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}

    def order(item):
        module = item.nodeid.split("::")[0]
        return 0 if module.startswith(_KERNEL_TESTS) else 1 if module in slow_modules else 2

    items.sort(key=order)  # stable: modules stay whole
