"""Faults the resumable stages hold, with real processes: a `dask scheduler`, `dask worker`
processes (each under its nanny, which replaces a worker that dies) and the `ensemble-dask` command.

Every faulty run must end with the labels, the co-association store and the consensus result of an
uninterrupted run, byte for byte. A fault the run cannot get over (a lost scheduler, a worker killed as the
embedded cluster starts, a full disk) ends in one line, exit 1 and the stage not marked; the same command
then ends as an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import time

import pytest

from ensemble_dask.io.store import RunStore
from tests.conftest import EXE, _exe, _free_port, _stop, _wait_port

WORKFLOW = """\
seed: 3
data: {url: "synthetic:kdd99?n=2000&seed=1"}
generate: {n_clusterings: 24, k_min: 2, k_max: 8, rate: 0.5}
coassoc: {strategy: per-point, l: 10, block_size: 256, row_block: 512}
consensus:
  pcc-kl: {n_clusters: 4}
"""
ARRAYS = (
    "labels",
    "pairs/indptr",
    "pairs/indices",
    "pairs/co",
    "pairs/both",
    "consensus/pcc-kl/labels",
    "consensus/pcc-kl/Y",
)
TIMEOUT = 180


@contextlib.contextmanager
def _dask_processes(workdir, n_workers):
    """A `dask scheduler` and ``n_workers`` nanny-managed `dask worker` processes on 127.0.0.1; yields
    (address, the scheduler's process)."""
    port = _free_port()
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    quiet = dict(cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sched = subprocess.Popen(
        [_exe("dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"],
        **quiet,
    )
    procs = [sched]
    try:
        _wait_port(port, sched)
        address = f"tcp://127.0.0.1:{port}"
        for _ in range(n_workers):
            cmd = [
                _exe("dask"),
                "worker",
                address,
                "--nthreads",
                "1",
                "--host",
                "127.0.0.1",
                "--no-dashboard",
            ]
            procs.append(subprocess.Popen(cmd, **quiet))
        yield address, sched
    finally:
        for p in procs:  # all at once: each may take seconds to close
            p.terminate()
        for p in procs:
            _stop(p)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A `dask scheduler` and two nanny-managed `dask worker` processes on 127.0.0.1 (this module's own:
    its tests kill workers); yields (address, client)."""
    from distributed import Client

    with (
        _dask_processes(tmp_path_factory.mktemp("faults-dask"), 2) as (address, _),
        Client(address, timeout="30s") as client,
    ):
        client.wait_for_workers(2, timeout=60)
        yield address, client


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    path = tmp_path_factory.mktemp("faults") / "wf.yaml"
    path.write_text(WORKFLOW)
    return path


def _start(workflow, store, address, *sets):
    args = [EXE, "run", str(workflow), "--store", str(store), "--scheduler", address, "--no-progress"]
    for s in sets:
        args += ["--set", s]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc):
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err
    return out


def _results(store):
    s = RunStore(store, mode="r")
    assert all(rec["complete"] for rec in s.records().values())
    return {name: s[name][:] for name in ARRAYS}


def _assert_same(a, b):
    for name in ARRAYS:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
        assert a[name].tobytes() == b[name].tobytes(), name


def _wait_for(condition, proc, what):
    """Poll ``condition()`` every 10 ms until it returns something true; return that."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        if proc.poll() is not None:
            pytest.fail(f"the run ended ({proc.returncode}) before {what}: {proc.stderr.read()}")
        time.sleep(0.01)
    pytest.fail(f"no {what} within {TIMEOUT} s")


def _busy_worker(client, prefix=""):
    """Address of a worker processing a task whose key starts with ``prefix``, or None."""
    for worker, keys in client.processing().items():
        if any(str(k).startswith(prefix) for k in keys):
            return worker
    return None


def _stage_complete(store, name):
    try:
        return bool((RunStore(store, mode="r").record(name) or {}).get("complete"))
    except Exception:  # the store is being created or rewritten by the run
        return False


def _kill_worker(client, worker):
    """SIGKILL the worker process at ``worker`` (its nanny starts a new one); return the pid."""
    pid = client.run(os.getpid, workers=[worker])[worker]
    os.kill(pid, signal.SIGKILL)
    return pid


@pytest.fixture(scope="module")
def reference(cluster, workflow, tmp_path_factory):
    """The results of an uninterrupted run (in this process: the same code path, less start-up)."""
    from ensemble_dask.pipeline import apply_overrides, load_workflow, run_workflow

    address, _ = cluster
    store = tmp_path_factory.mktemp("reference") / "run.zarr"
    run_workflow(apply_overrides(load_workflow(workflow), store=str(store), scheduler=address))
    return _results(store)


@pytest.mark.slow
def test_run_killed_mid_generate_resumes_to_the_same_results(cluster, workflow, reference, tmp_path):
    address, client = cluster
    store = tmp_path / "run.zarr"
    proc = _start(workflow, store, address)
    _wait_for(lambda: _busy_worker(client, "_cluster_task"), proc, "a clustering task")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    records = RunStore(store, mode="r").records()
    assert records["ingest"]["complete"] and "generate" not in records  # killed mid-generate
    out = _finish(_start(workflow, store, address))
    assert "pcc-kl" in out
    _assert_same(_results(store), reference)


@pytest.mark.slow
def test_workers_killed_mid_generate_and_mid_coassoc_are_replaced(cluster, workflow, reference, tmp_path):
    address, client = cluster
    store = tmp_path / "run.zarr"
    proc = _start(workflow, store, address)
    worker = _wait_for(lambda: _busy_worker(client, "_cluster_task"), proc, "a clustering task")
    killed = [_kill_worker(client, worker)]
    assert not _stage_complete(store, "generate")
    worker = _wait_for(
        lambda: _stage_complete(store, "generate") and _busy_worker(client), proc, "a coassoc task"
    )
    killed.append(_kill_worker(client, worker))
    assert not _stage_complete(store, "coassoc")
    _finish(proc)
    _assert_same(_results(store), reference)
    client.wait_for_workers(2, timeout=60)  # each nanny started a new worker process
    assert not set(killed) & set(client.run(os.getpid).values())


@pytest.mark.slow
def test_two_workflows_on_one_scheduler(cluster, workflow, reference, tmp_path):
    address, _ = cluster
    a = _start(workflow, tmp_path / "a.zarr", address)
    b = _start(workflow, tmp_path / "b.zarr", address, "consensus.pcc-l2={n_clusters: 4}")
    _finish(a)
    assert "pcc-l2" in _finish(b)
    _assert_same(_results(tmp_path / "a.zarr"), reference)
    _assert_same(_results(tmp_path / "b.zarr"), reference)
    assert RunStore(tmp_path / "b.zarr")["consensus/pcc-l2/labels"].shape == (2000,)


#: a file-size limit that lets ingest and generate write (X's one chunk is 39 kB) and stops coassoc at
#: pairs/indices (63 kB)
_COASSOC_LIMIT = 45_000


@pytest.mark.slow
def test_a_full_disk_during_run_is_one_line_and_the_rerun_ends_as_a_clean_run(workflow, reference, tmp_path):
    """Issue 61: a full disk (a file-size limit as a stand-in) during `ensemble-dask run` on the embedded
    cluster printed the clear line after 28 lines of the in-process scheduler's tracebacks (coassoc
    cancelled its tasks, and distributed's scheduler asserted on a task of the failed compute that nobody
    wanted any more: ``stimulus_cancel``'s ``assert ts.who_wants``). The clear line only, exit 1, coassoc
    not marked; the same command without the limit ends as a clean run, byte for byte."""

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (_COASSOC_LIMIT, _COASSOC_LIMIT))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG

    store = tmp_path / "run.zarr"
    command = [EXE, "run", str(workflow), "--store", str(store), "--no-progress"]
    failed = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, preexec_fn=limited)
    assert failed.returncode == 1, failed.stderr
    assert failed.stderr == (
        f"ensemble-dask: error: I/O error on {store}: File too large; the stage is not marked complete: "
        "fix the cause (free space, permissions) and run the same command again\n"
    )
    assert _stage_complete(store, "generate") and not _stage_complete(store, "coassoc")
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    _assert_same(_results(store), reference)


_RUN_AGAIN = "the stage is not marked complete: "


@pytest.mark.slow
@pytest.mark.parametrize("after_generate", [False, True], ids=["mid-generate", "after-generate"])
def test_a_lost_scheduler_is_one_line_and_a_rerun_ends_as_a_clean_run(
    cluster, workflow, reference, tmp_path, after_generate
):
    """Issue 61: the scheduler of `--scheduler` killed mid-stage printed 3 tracebacks, the last ending in
    "Client lost the connection to the scheduler"; killed just after a stage, 11 s later (the client tries to
    reconnect for 10 s), a traceback of "FutureCancelledError ... cancelled for reason: unknown". One line
    naming the scheduler and the stage it ran, exit 1, that stage not marked; the same command on a live
    scheduler ends as a clean run."""
    from distributed import Client

    store = tmp_path / "run.zarr"
    (tmp_path / "dask").mkdir()
    with (
        _dask_processes(tmp_path / "dask", 1) as (address, scheduler),
        Client(address, timeout="30s") as watch,
    ):
        watch.wait_for_workers(1, timeout=60)
        proc = _start(workflow, store, address)
        if after_generate:
            _wait_for(lambda: _stage_complete(store, "generate"), proc, "generate complete")
        else:
            _wait_for(lambda: _busy_worker(watch, "_cluster_task"), proc, "a clustering task")
        scheduler.kill()
        _, err = proc.communicate(timeout=TIMEOUT)
    stage = "coassoc" if after_generate else "generate"
    assert proc.returncode == 1, err
    assert err == (
        f"ensemble-dask: error: lost the connection to the Dask scheduler at {address} during stage "
        f"{stage!r}; {_RUN_AGAIN}start the scheduler again (or run without one, on an embedded cluster) and "
        "run the same command again\n"
    )
    assert _stage_complete(store, "ingest") and not _stage_complete(store, stage)
    _finish(_start(workflow, store, cluster[0]))
    _assert_same(_results(store), reference)


@pytest.mark.slow
def test_a_worker_killed_as_the_embedded_cluster_starts_is_one_line_and_a_rerun_ends_as_a_clean_run(
    workflow, reference, tmp_path
):
    """Issue 61: a worker process killed while the embedded cluster starts printed 81 lines ending in
    "RuntimeError: PatientNanny failed to start.". Here the test kills it (SIGKILL, as the kernel's OOM
    killer would): the command forks its workers from multiprocessing's fork server, its child, so its first
    grandchild is the worker process. Seen within milliseconds of its fork, it is killed long before it has
    registered with the scheduler (which takes it a second or more); a worker killed after that would be
    replaced by its nanny, and the run would end well (the test would then fail on the exit status). One
    line, exit 1, generate not marked; the same command ends as a clean run."""
    import psutil

    store = tmp_path / "run.zarr"
    command = [EXE, "run", str(workflow), "--store", str(store), "--no-progress", "--n-workers", "1"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run = psutil.Process(proc.pid)

    def worker_process():
        for child in run.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if child.ppid() != proc.pid:  # forked by the fork server
                    return child
        return None

    _wait_for(worker_process, proc, "a worker process").kill()
    _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 1, err
    assert err == (
        "ensemble-dask: error: a worker process of the embedded Dask cluster was killed by signal 9 as it "
        f"started; {_RUN_AGAIN}run the same command again (with fewer workers, --n-workers, if memory is "
        "short)\n"
    )
    assert _stage_complete(store, "ingest") and not _stage_complete(store, "generate")
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    _assert_same(_results(store), reference)
