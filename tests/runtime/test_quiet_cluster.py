"""The embedded cluster ends a run without noise when nothing is wrong (issue 9's "first hour").

Real worker processes: one that takes longer than distributed's 4 s to exit is waited for, not killed
with "Worker process still alive after 4.0 seconds, killing"; the workers' profile call trees (too deep
for dask's sizeof) no longer print "Sizeof calculation ... failed" twice per run; the heartbeat traceback
of a closing worker is dropped, one of a running worker kept.
"""

from __future__ import annotations

import logging

import pytest

from ensemble_dask.runtime.clients import dask_client
from ensemble_dask.runtime.quiet import _HEARTBEAT_FAILURE, _NoiseWhileClosing


def _records_of(logger_name, action):
    """The messages ``logger_name`` passes to its handlers while ``action()`` runs (in this process)."""
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    log = logging.getLogger(logger_name)
    log.addHandler(handler)
    try:
        action()
    finally:
        log.removeHandler(handler)
    return seen


def _worker_log_checks():
    """Run in a worker process: what its loggers let through, for a deep message and a heartbeat failure."""
    from distributed.sizeof import safe_sizeof

    deep = node = {}
    for _ in range(1000):  # deeper than sizeof's recursion can go, as a profile call tree is
        node["children"] = node = {}
    return {
        "sizeof": _records_of("distributed.sizeof", lambda: safe_sizeof(deep, default_size=-1)),
        "heartbeat": _records_of(
            "distributed.worker", lambda: logging.getLogger("distributed.worker").error(_HEARTBEAT_FAILURE)
        ),
    }


def _exit_slowly(marker, seconds):
    """Run in a worker process: when the process exits, take ``seconds`` first, then write ``marker``."""
    import atexit
    import time
    from pathlib import Path

    def slow():
        time.sleep(seconds)
        Path(marker).write_text("exited by itself")

    atexit.register(slow)


@pytest.mark.slow
def test_worker_processes_close_quietly(tmp_path):
    marker = tmp_path / "exited"
    nanny = []
    with dask_client(n_workers=1) as client:
        (checks,) = client.run(_worker_log_checks).values()
        client.run(_exit_slowly, str(marker), 5.0)
        handler = logging.Handler()
        handler.emit = lambda record: nanny.append(record.getMessage())
        logging.getLogger("distributed.nanny").addHandler(handler)
    logging.getLogger("distributed.nanny").removeHandler(handler)
    assert checks["sizeof"] == []  # before: "Sizeof calculation for object of type 'dict' failed ..."
    assert checks["heartbeat"] == [_HEARTBEAT_FAILURE]  # a running worker's heartbeat failure is news
    # the worker process took 5 s to exit and was waited for (distributed's nanny kills it after 4 s)
    assert marker.read_text() == "exited by itself"
    assert not [m for m in nanny if "still alive" in m], nanny


def test_heartbeat_failure_of_a_closing_worker_is_dropped():
    from distributed import LocalCluster

    record = logging.LogRecord(
        "distributed.worker", logging.ERROR, __file__, 0, _HEARTBEAT_FAILURE, None, None
    )
    other = logging.LogRecord("distributed.worker", logging.ERROR, __file__, 0, "Compute Failed", None, None)
    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster:
        (worker,) = cluster.workers.values()
        quiet = _NoiseWhileClosing(worker)
        assert quiet.filter(record) and quiet.filter(other)  # running: kept
    assert not quiet.filter(record)  # closed: dropped
    assert quiet.filter(other)  # and nothing else is


def test_the_embedded_clusters_comms_closing_with_it_are_not_logged():
    """A fit's embedded cluster closed its in-process comms with an INFO "Batched Comm Closed" and a
    traceback, which distributed's logging config prints on stderr (4 of 24 quiet fits of a user review).
    Dropped while the embedded cluster lives; the same record logged after it is kept."""

    def log_it():
        logging.getLogger("distributed.batched").info("Batched Comm Closed %r", "comm")

    def inside():
        with dask_client(n_workers=1, processes=False):
            log_it()

    assert _records_of("distributed.batched", inside) == []
    assert _records_of("distributed.batched", log_it) == ["Batched Comm Closed 'comm'"]


def test_a_close_timeout_left_unretrieved_by_the_embedded_cluster_is_not_printed():
    """From the user review (issue 60): "Future exception was never retrieved ... TimeoutError: Timeout" on
    stderr after fits on a loaded machine (a comm's close given up on as the embedded cluster closed; asyncio
    prints it when the future is collected). Dropped once an embedded cluster ran; other exceptions kept."""

    def unretrieved(exc):
        def log():
            logging.getLogger("asyncio").error(
                "Future exception was never retrieved\nfuture: <Future>", exc_info=(type(exc), exc, None)
            )

        return log

    with dask_client(n_workers=1, processes=False):
        pass
    assert _records_of("asyncio", unretrieved(TimeoutError("Timeout"))) == []
    assert _records_of("asyncio", unretrieved(ValueError("x"))) != []
