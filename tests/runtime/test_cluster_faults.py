"""What a cluster's faults are told as (issue 61), without a cluster: only those faults, and nothing else,
become a one-line error or lose a log record. The faults themselves, on real processes: tests/test_faults.py.
"""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest

from ensemble_dask.runtime.clients import LazyClient
from ensemble_dask.runtime.faults import LostScheduler, SchedulerLostError, worker_start_error

ADDRESS = "tcp://127.0.0.1:8786"


def _client(status, cluster=None):
    return SimpleNamespace(status=status, cluster=cluster, scheduler=SimpleNamespace(address=ADDRESS))


def _record(msg, exc=None):
    exc_info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord("distributed.client", logging.ERROR, __file__, 1, msg, (), exc_info)


def _failed_to_start(cause):
    try:
        try:
            raise cause
        except RuntimeError as exc:
            raise RuntimeError("PatientNanny failed to start.") from exc
    except RuntimeError as exc:
        return exc


@pytest.mark.parametrize(
    ("exitcode", "how"),
    [(-9, "was killed by signal 9"), (3, "exited with status 3"), (None, "ended")],
)
def test_a_worker_process_that_ended_as_it_started_is_named_with_its_exit(exitcode, how):
    nanny = _failed_to_start(RuntimeError("Nanny failed to start worker process"))
    error = worker_start_error(nanny, exitcode)
    assert str(error).startswith(f"a worker process of the embedded Dask cluster {how} as it started; ")


@pytest.mark.slow
def test_a_script_without_the_main_guard_is_told_to_add_it(tmp_path):
    """A user's five-line script fitting a ConsensusClustering with a store on disk, with no ``if __name__ ==
    "__main__":``: each worker process imports the script and starts a cluster of its own, and the error said
    to run the same command again (with fewer workers). It now names the guard; the same script with the
    guard fits."""
    import os
    import subprocess
    import sys

    body = (
        "import numpy as np\n"
        "from ensemble_dask import ConsensusClustering\n"
        "X = np.random.default_rng(0).normal(size=(60, 2))\n"
        f"store = {str(tmp_path / 's.zarr')!r}\n"
        "ConsensusClustering(2, n_clusterings=3, store=store, random_state=0).fit(X)\n"
    )
    script = tmp_path / "fit.py"
    script.write_text(body)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=240)
    assert out.returncode == 1
    assert 'put its code under `if __name__ == "__main__":`' in out.stderr.strip().splitlines()[-1]
    guarded = "def main():\n" + "".join(f"    {line}\n" for line in body.splitlines())
    script.write_text(guarded + "\n\nif __name__ == '__main__':\n    main()\n")
    ok = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=240)
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_the_guard_hint_is_for_a_script_of_the_user_only(monkeypatch, tmp_path):
    """The guard for a script file; for one read on standard input (where the guard does not help: no worker
    can import ``<stdin>``) a file, or the estimator's own store; nothing for ``ensemble-dask``."""
    import sys

    nanny = _failed_to_start(RuntimeError("Nanny failed to start worker process"))
    monkeypatch.setattr("sys.argv", ["/usr/bin/ensemble-dask", "run"])
    assert "__main__" not in str(worker_start_error(nanny, 1))
    script = tmp_path / "fit.py"
    script.write_text("")
    monkeypatch.setattr("sys.argv", [str(script)])
    monkeypatch.setitem(sys.modules, "__main__", SimpleNamespace(__file__=str(script)))
    assert "__main__" in str(worker_start_error(nanny, 1)) and "__main__" not in str(
        worker_start_error(nanny, -9)
    )
    monkeypatch.setattr("sys.argv", ["-"])
    monkeypatch.setitem(sys.modules, "__main__", SimpleNamespace(__file__="<stdin>"))
    told = str(worker_start_error(nanny, 1))
    assert "read on standard input" in told and "__main__" not in told


def test_any_other_failure_to_start_is_not_told_as_a_killed_worker():
    assert worker_start_error(_failed_to_start(RuntimeError("Could not start Nanny on host x")), -9) is None
    assert worker_start_error(RuntimeError("PatientNanny failed to start."), -9) is None  # no cause
    assert worker_start_error(RuntimeError("something else"), -9) is None


def test_the_lost_scheduler_is_told_only_while_the_client_is_not_connected():
    watch = LostScheduler()
    assert watch.error("generate") is None  # no client yet
    watch.client = _client("running")
    assert watch.error("generate") is None
    watch.client = _client("closed", cluster=object())  # an embedded cluster's client, closed with it
    assert watch.error("generate") is None
    for status in ("connecting", "closed"):
        watch.client = _client(status)
        watch.client.scheduler.address = None  # as distributed leaves it once the client gave up reconnecting
        assert str(watch.error("coassoc")).startswith(
            f"lost the connection to the Dask scheduler at {ADDRESS} during stage 'coassoc'; "
        )


def test_only_the_lost_connection_s_own_records_are_dropped_and_only_while_it_is_lost():
    watch = LostScheduler()
    gave_up = _record("Failed to reconnect to scheduler after 10.00 seconds, closing client")
    cut_short = _record("", asyncio.CancelledError())
    other = _record("a real error", ValueError("x"))
    watch.client = _client("running")
    assert all(watch.filter(r) for r in (gave_up, cut_short, other))
    watch.client = _client("connecting")
    assert [watch.filter(r) for r in (gave_up, cut_short, other)] == [False, False, True]
    with watch:
        assert watch in logging.getLogger("distributed.client").filters
    assert watch not in logging.getLogger("distributed.client").filters


def test_a_stage_s_error_becomes_the_lost_scheduler_only_when_it_is_lost():
    lazy = LazyClient(lambda: None)
    lazy._watch = LostScheduler()
    lazy._watch.client = _client("running")
    with pytest.raises(ValueError, match="a bug"), lazy.running("generate"):
        raise ValueError("a bug")
    lazy._watch.client = _client("connecting")
    with pytest.raises(SchedulerLostError, match="during stage 'generate'") as info, lazy.running("generate"):
        raise ValueError("what distributed raised for it")
    assert isinstance(info.value.__cause__, ValueError)
