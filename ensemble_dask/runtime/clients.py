"""Where work runs: the embedded LocalCluster or an existing Dask cluster.

This is the only module that decides about clusters and clients; the stages hand it
in-memory functions and small arguments (store URLs, seeds, index ranges), never large data.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading

from .._config import flag
from .._validation import InputError
from .faults import ClusterError, LostScheduler, started
from .quiet import _QUIET_PLUGIN, _DropMessages, _quiet_worker_logs, quiet_close_timeouts

__all__ = [
    "active_client",
    "cluster_facts",
    "dask_client",
    "interrupt",
    "interrupt_handled",
    "LazyClient",
    "resolve_client",
    "scheduler_for_compute",
    "INTERRUPTED",
]

logger = logging.getLogger(__name__)

#: set when the user interrupts the run: the embedded cluster then closes at once (no waiting for
#: busy workers, no performance report)
INTERRUPTED = threading.Event()


def interrupt(*, quiet=True):
    """Note that the user interrupted the run (Ctrl-C): the embedded cluster is then closed at once.

    With ``quiet``, distributed's and asyncio's loggers say nothing more: what they would tell of (the
    tasks, futures and connections the close cuts short) is the interrupt itself, already reported.
    """
    INTERRUPTED.set()
    if quiet:
        for name in _quieted_names():
            if _QUIETED.get(name) is None:  # the level before the first interrupt, not a quieted one
                _QUIETED[name] = logging.getLogger(name).level
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)


#: the loggers an interrupt quiets, each with its level from before (None: not quieted now)
_QUIETED = {"distributed": None, "asyncio": None}


def _quieted_names():
    """``distributed``, ``asyncio``, and each logger below them or below ``tornado`` with a level of its own,
    which theirs does not reach: distributed sets ``distributed.client``'s and ``tornado.application``'s (CI:
    after Ctrl-C in the coassoc stage, the client's cancelled reconnection logged an ERROR and its traceback
    before the interrupt's line)."""
    loggers = dict(logging.Logger.manager.loggerDict)  # a copy: other threads may add loggers meanwhile
    below = ("distributed.", "asyncio.", "tornado.")
    own = [n for n, lg in loggers.items() if n.startswith(below) and getattr(lg, "level", logging.NOTSET)]
    return [*_QUIETED, *own]


def interrupt_handled():
    """The interrupt has been reported: forget it, and give distributed's and asyncio's loggers their levels
    back (a process that goes on, such as a test session, runs as before)."""
    INTERRUPTED.clear()
    for name, level in list(_QUIETED.items()):
        if level is not None:
            logging.getLogger(name).setLevel(level)
            _QUIETED[name] = None


_WORKERS_IGNORE_CTRL_C = False


@contextlib.contextmanager
def workers_ignore_ctrl_c():
    """Within: this process handles Ctrl-C for the embedded clusters it starts (the ``ensemble-dask``
    command does).

    Ctrl-C reaches every process of the terminal's group, so each worker process printed its own
    tracebacks, even one still importing, before any code of ours runs in it. Embedded clusters started
    within fork their worker processes from multiprocessing's fork server, started with SIGINT ignored:
    a process inherits an ignored signal and the fork server hands its own handling on, so every worker
    (restarts included) ignores Ctrl-C from its first instruction, and this process closes them. The
    fork server is this process's for good (a program that forks its own processes from it would see
    them ignore Ctrl-C too): only a program that owns its process asks for this.
    """
    global _WORKERS_IGNORE_CTRL_C
    before, _WORKERS_IGNORE_CTRL_C = _WORKERS_IGNORE_CTRL_C, True
    try:
        yield
    finally:
        _WORKERS_IGNORE_CTRL_C = before


def _process_config():
    """dask config of the embedded cluster's worker processes, for its whole life (restarts too)."""
    config = _worker_environ()
    if _fork_server_wanted():
        config["distributed.worker.multiprocessing-method"] = "forkserver"
    return config


def _start_fork_server():
    """Start multiprocessing's fork server (with distributed's preload) with SIGINT ignored, for the caller
    of :func:`workers_ignore_ctrl_c`."""
    if not _fork_server_wanted():
        return
    import multiprocessing.forkserver

    from distributed.utils import get_mp_context

    get_mp_context()  # distributed's preload of the fork server (it imports distributed once, for all)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # for the milliseconds of its fork and exec
    try:
        relay = _StderrRelay()
        with relay.as_stderr():
            multiprocessing.forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)


def _fork_server_wanted():
    """Only for :func:`workers_ignore_ctrl_c`'s caller, on its main thread, where the platform has one."""
    import multiprocessing

    return (
        _WORKERS_IGNORE_CTRL_C
        and threading.current_thread() is threading.main_thread()
        and "forkserver" in multiprocessing.get_all_start_methods()
    )


class _StderrRelay:
    """A pipe whose bytes a thread copies to this process's stderr, until the run is interrupted.

    The fork server and the workers forked from it write their stderr into it. After Ctrl-C, what they
    say of being cut short (a worker forked just then fails to unpickle its start-up state, a task is
    cancelled) is the interrupt itself, already reported in one line: it is dropped.
    """

    def __init__(self):
        self._read, self._write = os.pipe()
        threading.Thread(target=self._copy, name="ensemble-dask-stderr-relay", daemon=True).start()

    def _copy(self):
        with contextlib.suppress(OSError):
            while chunk := os.read(self._read, 1 << 16):
                if not INTERRUPTED.is_set():
                    os.write(2, chunk)
        os.close(self._read)

    @contextlib.contextmanager
    def as_stderr(self):
        """Within: this process's stderr (fd 2) is the pipe, so the processes it starts inherit it."""
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(self._write, 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            os.close(self._write)


def dask_setup(worker):
    """Preload of the embedded cluster's worker processes (``Nanny(preload=[__name__])``).

    A worker process ignores Ctrl-C from here on (from birth after :func:`workers_ignore_ctrl_c`): the
    client process handles the interrupt and closes the workers.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _worker_environ():
    """distributed's worker environment without ``MALLOC_TRIM_THRESHOLD_``.

    Setting any explicit glibc trim threshold also switches off glibc's dynamic mmap threshold, so
    every large temporary array (k-means, EM) is mmap'ed and page-faulted afresh, which costs CPU time
    in a worker process. The embedded clusters keep
    glibc's defaults; the other variables (one BLAS/OpenMP thread per worker thread) stay.
    """
    import dask

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    return {"distributed.nanny.pre-spawn-environ": env}


def cluster_facts(client):
    """A JSON-able description of the Dask cluster behind ``client`` (for the report's facts)."""
    info = client.scheduler_info()
    workers = info.get("workers", {})
    cluster = getattr(client, "cluster", None)
    return {
        "kind": type(cluster).__name__ if cluster is not None else "existing scheduler",
        "scheduler": info.get("address"),
        "workers": len(workers),
        "threads": int(sum(w.get("nthreads", 0) for w in workers.values())),
        "memory_bytes": int(sum(w.get("memory_limit", 0) or 0 for w in workers.values())),
    }


def default_n_workers():
    """Workers of an embedded cluster when none are given: the dask config ``ensemble-dask.cluster.n-workers``
    (``DASK_ENSEMBLE_DASK__CLUSTER__N_WORKERS=1`` in the environment, or ``cluster: {n-workers: 1}`` under
    ``ensemble-dask`` in a dask config file), or one per core when it is unset or null."""
    import dask

    value = dask.config.get("ensemble-dask.cluster.n-workers", default=None)
    if value is None:
        return max(1, os.cpu_count() or 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(
            f"the dask config 'ensemble-dask.cluster.n-workers' must be an int >= 1 or null; got {value!r}"
        )
    return value


def active_client():
    """The current ``distributed.Client`` of this process (the one ``dask.compute`` would use), or None;
    distributed is not imported for it."""
    if "distributed" not in sys.modules:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:  # no client
        return None


@contextlib.contextmanager
def dask_client(scheduler=None, *, n_workers=None, threads_per_worker=1, processes=True, resources=None):
    """Yield a ``distributed.Client``.

    Parameters
    ----------
    scheduler : str or Client, default=None
        Address of an existing scheduler (``tcp://host:8786``) or a Client to use as is. When
        None, an embedded ``LocalCluster`` is started (and closed on exit).
    n_workers : int, default=None
        Workers of the embedded cluster (default: the dask config ``ensemble-dask.cluster.n-workers`` when
        set, else one per core; see :func:`default_n_workers`).
    threads_per_worker : int, default=1
    processes : bool, default=True
        Worker processes (False: threads of this process, required for ``memory://`` stores,
        which live in this process's memory).
    resources : list of dict, default=None
        One worker process per entry, offering those Dask worker resources (e.g.
        ``[{"site-a": 1}, {"site-b": 1}]``: a local stand-in for the sites of a federated run).
        Replaces ``n_workers``.
    """
    from distributed import Client

    if isinstance(scheduler, LazyClient):
        scheduler = scheduler.resolve()
    if isinstance(scheduler, Client):
        yield scheduler
        return
    if scheduler:
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as exc:
            raise InputError(f"cannot reach the Dask scheduler at {scheduler!r}: {exc}") from exc
        except TypeError as exc:  # distributed's complaint when a tls:// address meets no credentials
            if not str(scheduler).startswith("tls://"):
                raise
            raise InputError(
                f"the Dask scheduler at {scheduler!r} needs TLS credentials: set "
                "DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT and "
                "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY (see deploy/README.md)"
            ) from exc
        with client:
            yield client
        return

    if resources is not None:
        with _resource_cluster(resources, threads_per_worker) as cluster, Client(cluster) as client:
            client.register_plugin(_quiet_worker_logs(), name=_QUIET_PLUGIN)
            yield client
        return
    n_workers = n_workers or default_n_workers()
    # the embedded cluster's own comms closing with it: distributed logs each at INFO with a traceback (on
    # stderr by its logging config), though nothing is wrong
    closing = _DropMessages("Batched Comm Closed")
    logging.getLogger("distributed.batched").addFilter(closing)
    quiet_close_timeouts()
    try:
        yield from _embedded(n_workers, threads_per_worker, processes)
    finally:
        logging.getLogger("distributed.batched").removeFilter(closing)


def _embedded(n_workers, threads_per_worker, processes):
    """The embedded ``LocalCluster``'s client (see :func:`dask_client`)."""
    import dask
    from distributed import Client, LocalCluster

    network = (
        {"host": "127.0.0.1", "worker_class": _patient_nanny(), "preload": [__name__]} if processes else {}
    )
    with dask.config.set(_process_config()):
        if processes:
            _start_fork_server()
        with (
            started(
                LocalCluster,
                network.get("worker_class"),
                n_workers=n_workers,
                threads_per_worker=threads_per_worker,
                processes=processes,
                dashboard_address=":0",
                # Dask's dashboard unless the config says no (without it, no bokeh import)
                scheduler_kwargs={"dashboard": flag("cluster.dashboard")},
                **network,
            ) as cluster,
            Client(cluster) as client,
        ):
            if processes:
                client.register_plugin(_quiet_worker_logs(), name=_QUIET_PLUGIN)
            yield client


_NANNY_CLOSE_SECONDS = 30
#: after an interrupt: the workers' tasks are abandoned, their processes ended at once
_NANNY_CLOSE_INTERRUPTED = 1


def _patient_nanny():
    """A Nanny that gives its worker process time to exit before killing it.

    distributed's Nanny kills a worker process still alive 4 s after it was asked to close. A
    worker that has imported zarr, pandas, numba and scikit-learn takes about that long to shut
    down on a loaded machine, so the embedded cluster ended with distributed's "Worker process still
    alive ..., killing". The process exits by itself; this nanny waits up to 30 s for it.
    """
    from distributed import Nanny
    from distributed.core import Status

    class PatientNanny(Nanny):
        #: exit statuses of the worker processes that ended before their nanny started (for the error)
        ended_at_start = []

        def _on_worker_exit_sync(self, exitcode):  # distributed's callback when the worker process exits
            if self.status == Status.init:  # the nanny has not started: it is starting this process
                PatientNanny.ended_at_start.append(exitcode)
            super()._on_worker_exit_sync(exitcode)

        async def close(self, timeout=_NANNY_CLOSE_SECONDS, reason="nanny-close"):
            if INTERRUPTED.is_set():
                timeout = min(timeout, _NANNY_CLOSE_INTERRUPTED)
            return await super().close(timeout=timeout, reason=reason)

    return PatientNanny


@contextlib.contextmanager
def _resource_cluster(resources, threads_per_worker):
    import dask
    from distributed import Scheduler, SpecCluster

    nanny = _patient_nanny()  # one class: the exit statuses of its processes that ended as they started
    workers = {
        f"worker-{i}": {
            "cls": nanny,
            "options": {
                "nthreads": threads_per_worker,
                "resources": dict(res),
                "host": "127.0.0.1",
                "preload": [__name__],
            },
        }
        for i, res in enumerate(resources)
    }
    options = {"host": "127.0.0.1", "dashboard": flag("cluster.dashboard"), "dashboard_address": ":0"}
    scheduler = {"cls": Scheduler, "options": options}
    with dask.config.set(_process_config()):
        _start_fork_server()
        with started(SpecCluster, nanny, workers=workers, scheduler=scheduler) as cluster:
            yield cluster


class LazyClient:
    """A stand-in for a ``distributed.Client`` whose cluster starts on first use.

    Stages receive it like a client; one that is up to date never touches it, so a re-run of a
    finished workflow starts no cluster. Any attribute (``submit``, ``gather`` ...) starts the
    cluster and is looked up on the real client; :meth:`resolve` returns that client (for
    ``dask.compute(scheduler=...)``).

    Parameters
    ----------
    open_client : callable
        Returns a context manager yielding a Client (e.g. ``functools.partial(dask_client, ...)``).
    report : str, default=None
        Local path of a Dask performance report (``distributed.performance_report``) of
        everything run on the cluster, written when the context closes (if the cluster started).
    before_close : callable, default=None
        Called with the real Client just before the cluster is closed (e.g. to describe it).
    """

    def __init__(self, open_client, report=None, before_close=None):
        self._open_client = open_client
        self._report = report
        self._before_close = before_close
        self._stack = None
        self._client = None
        self._started = False
        self._report_cm = None
        self._watch = None  # of an existing scheduler, for its loss (:class:`~.faults.LostScheduler`)

    @property
    def started(self):
        """Whether the cluster has been started (and maybe released since)."""
        return self._started

    def resolve(self):
        """The real Client (started now if need be)."""
        if self._client is None:
            from distributed import performance_report

            logger.info("starting the Dask client (a stage has work to do)")
            stack = contextlib.ExitStack()
            try:
                watch = stack.enter_context(LostScheduler())  # entered first: it quiets the client's close
                client = watch.client = stack.enter_context(self._open_client())
                if self._report is not None and _has_bokeh():
                    report = performance_report(filename=self._report)
                    report.__enter__()
                    self._report_cm = report
            except BaseException:
                stack.close()
                raise
            self._stack, self._client, self._started, self._watch = stack, client, True, watch
        return self._client

    @contextlib.contextmanager
    def running(self, stage):
        """Within: stage ``stage`` runs on the cluster; the loss of an existing scheduler is then a
        :class:`~.faults.SchedulerLostError` that names it, whatever distributed raised for it."""
        try:
            yield
        except Exception as exc:
            lost = self._watch.error(stage) if self._watch is not None else None
            if lost is None:
                raise
            raise lost from exc

    def __getattr__(self, name):
        if name.startswith("__") or name in (
            "_open_client",
            "_report",
            "_before_close",
            "_stack",
            "_client",
            "_started",
            "_report_cm",
            "_watch",
        ):
            raise AttributeError(name)
        return getattr(self.resolve(), name)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
            return
        # after an error (a scheduler that died, a full disk, Ctrl-C ...): no performance report or
        # description of a failed run (each would fail again on the dead scheduler or the full disk), and
        # closing must not replace the error with its own (but the loss of the scheduler, told before it
        # closes, replaces distributed's error for it outside a stage of :meth:`running`)
        interrupted = INTERRUPTED.is_set() or issubclass(exc_type, KeyboardInterrupt)
        lost = None
        if not (interrupted or issubclass(exc_type, ClusterError)) and self._watch is not None:
            lost = self._watch.error(None)
        try:
            if interrupted:
                self.abort()
            else:
                self._discard()
        except Exception as cleanup:  # noqa: BLE001 - the first error is the one to report
            logger.warning("closing the Dask client after %s failed too: %r", exc_type.__name__, cleanup)
        if lost is not None:
            raise lost from exc

    def close(self):
        """Write the performance report (if any) and close the cluster, when it was started."""
        stack, self._stack = self._stack, None
        client, self._client = self._client, None
        report, self._report_cm, self._watch = self._report_cm, None, None
        if stack is not None:
            try:
                if self._before_close is not None:
                    self._before_close(client)
            finally:
                try:
                    if report is not None:
                        self._write_report(report)
                finally:
                    stack.close()

    def _write_report(self, report):
        """Write the performance report; a failed write (a full disk) is a warning, not the run's failure:
        the stages are complete, only this by-product is missing."""
        drop = _DropMessages("Exception while handling op performance_report")  # the scheduler's traceback
        core = logging.getLogger("distributed.core")
        core.addFilter(drop)
        try:
            report.__exit__(None, None, None)
        except OSError as exc:
            logger.warning(
                "the Dask performance report %s was not written: %s", self._report, exc.strerror or exc
            )
        finally:
            core.removeFilter(drop)

    def abort(self):
        """Close the cluster at once after an interrupt: no performance report, no description, and the
        workers' running tasks abandoned (their processes ended, quietly)."""
        noted = INTERRUPTED.is_set()
        INTERRUPTED.set()  # the nannies read it: workers busy with abandoned tasks are ended at once
        try:
            self._discard()
        finally:
            if not noted:  # a library caller's KeyboardInterrupt: nothing global stays changed
                INTERRUPTED.clear()

    def _discard(self):
        """Close the cluster without writing its performance report or description."""
        stack, self._stack, self._client, self._report_cm, self._watch = self._stack, None, None, None, None
        if stack is not None:
            stack.close()

    def release(self):
        """Close the cluster now, when no later stage needs it: its worker processes end and give
        their memory back while this process works on alone. A later use starts a new cluster
        (and its performance report replaces the first one's)."""
        if self._stack is not None:
            logger.info("closing the Dask client (no later stage needs it)")
        self.close()


def resolve_client(client):
    """``client`` itself, or the real Client behind a :class:`LazyClient`."""
    return client.resolve() if isinstance(client, LazyClient) else client


def scheduler_for_compute(client_or_scheduler):
    """``(value for dask.compute(scheduler=...), owned)``: a client as it is (a :class:`LazyClient` resolved),
    a ``tcp://`` (any ``://``) address connected as a new Client that the caller closes (``owned``), any other
    value (a scheduler name, None) as it is."""
    client_or_scheduler = resolve_client(client_or_scheduler)
    if isinstance(client_or_scheduler, str) and "://" in client_or_scheduler:
        from distributed import Client

        return Client(client_or_scheduler), True
    return client_or_scheduler, False


def _has_bokeh():
    import importlib.util

    if importlib.util.find_spec("bokeh") is None:
        logger.warning("bokeh is not installed: no Dask performance report is written")
        return False
    return True
