"""Where work runs: the embedded LocalCluster or an existing Dask cluster.

This is the only module that decides about clusters and clients; the stages hand it
in-memory functions and small arguments (store URLs, seeds, index ranges), never large data.
"""

from __future__ import annotations

import contextlib
import logging
import os

from ._validation import InputError

__all__ = ["dask_client", "gather_with_progress", "LazyClient", "resolve_client"]

logger = logging.getLogger(__name__)


def _worker_environ():
    """distributed's worker environment without ``MALLOC_TRIM_THRESHOLD_``.

    Setting any explicit glibc trim threshold also switches off glibc's dynamic mmap threshold, so
    every large temporary array (k-means, EM) is mmap'ed and page-faulted afresh: measured here,
    the same clustering task used 2x the CPU time in a worker process. The embedded clusters keep
    glibc's defaults; the other variables (one BLAS/OpenMP thread per worker thread) stay.
    """
    import dask

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    return {"distributed.nanny.pre-spawn-environ": env}


@contextlib.contextmanager
def dask_client(scheduler=None, *, n_workers=None, threads_per_worker=1, processes=True, resources=None):
    """Yield a ``distributed.Client``.

    Parameters
    ----------
    scheduler : str or Client, default=None
        Address of an existing scheduler (``tcp://host:8786``) or a Client to use as is. When
        None, an embedded ``LocalCluster`` is started (and closed on exit).
    n_workers : int, default=None
        Workers of the embedded cluster (default: one per core).
    threads_per_worker : int, default=1
    processes : bool, default=True
        Worker processes (False: threads of this process, required for ``memory://`` stores,
        which live in this process's memory).
    resources : list of dict, default=None
        One worker process per entry, offering those Dask worker resources (e.g.
        ``[{"site-a": 1}, {"site-b": 1}]``: a local stand-in for the sites of a federated run).
        Replaces ``n_workers``.
    """
    from distributed import Client, LocalCluster

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
    import dask

    if resources is not None:
        with _resource_cluster(resources, threads_per_worker) as cluster, Client(cluster) as client:
            client.register_plugin(_quiet_worker_logs(), name=_QUIET_PLUGIN)
            yield client
        return
    n_workers = n_workers or max(1, os.cpu_count() or 1)
    network = {"host": "127.0.0.1", "worker_class": _patient_nanny()} if processes else {}
    with (
        dask.config.set(_worker_environ()),
        LocalCluster(
            n_workers=n_workers,
            threads_per_worker=threads_per_worker,
            processes=processes,
            dashboard_address=":0",
            **network,
        ) as cluster,
        Client(cluster) as client,
    ):
        if processes:
            client.register_plugin(_quiet_worker_logs(), name=_QUIET_PLUGIN)
        yield client


_QUIET_PLUGIN = "ensemble-dask-quiet-worker-logs"
# what distributed's worker logs when a heartbeat is in flight as the worker closes its connections
_HEARTBEAT_FAILURE = "Failed to communicate with scheduler during heartbeat."


class _HeartbeatWhileClosing(logging.Filter):
    """Drops the worker's heartbeat-failure traceback once ``worker`` is no longer running.

    A heartbeat in flight while the worker closes fails with ``CommClosedError: ConnectionPool
    closing``, which distributed logs as an ERROR with its traceback: at the end of a run, noise. A
    heartbeat failure while the worker runs (a lost scheduler) is still logged.
    """

    def __init__(self, worker):
        super().__init__()
        self.worker = worker

    def filter(self, record):
        if record.msg != _HEARTBEAT_FAILURE:
            return True
        from distributed.core import Status

        return self.worker.status == Status.running


def _quiet_worker_logs():
    """A WorkerPlugin for the embedded clusters' worker processes: no noise when nothing is wrong.

    * ``distributed.sizeof`` warnings go: the worker's statistical profile is a call tree as deep as
      the deepest stack it sampled (zarr's async calls, numba), and sizing it before sending it
      (for the Dask performance report) exceeds Python's recursion limit, so every run printed
      "Sizeof calculation for object of type 'dict' failed" twice; distributed then just
      serialises that message off the event loop, which is all the warning says.
    * the heartbeat failure of a closing worker goes (see :class:`_HeartbeatWhileClosing`).
    """
    from distributed.diagnostics.plugin import WorkerPlugin

    class QuietWorkerLogs(WorkerPlugin):
        def setup(self, worker):
            logging.getLogger("distributed.sizeof").setLevel(logging.ERROR)
            logging.getLogger("distributed.worker").addFilter(_HeartbeatWhileClosing(worker))

    return QuietWorkerLogs()


_NANNY_CLOSE_SECONDS = 30


def _patient_nanny():
    """A Nanny that gives its worker process time to exit before killing it.

    distributed's Nanny kills a worker process still alive 4 s after it was asked to close. A
    worker that has imported zarr, pandas, numba and scikit-learn takes about that long to shut
    down on a loaded machine, so the embedded cluster ended with "Worker process still alive
    after 4.0 seconds, killing". The process exits by itself; this nanny waits up to 30 s for it.
    """
    from distributed import Nanny

    class PatientNanny(Nanny):
        async def close(self, timeout=_NANNY_CLOSE_SECONDS, reason="nanny-close"):
            return await super().close(timeout=timeout, reason=reason)

    return PatientNanny


@contextlib.contextmanager
def _resource_cluster(resources, threads_per_worker):
    import dask
    from distributed import Scheduler, SpecCluster

    workers = {
        f"worker-{i}": {
            "cls": _patient_nanny(),
            "options": {"nthreads": threads_per_worker, "resources": dict(res), "host": "127.0.0.1"},
        }
        for i, res in enumerate(resources)
    }
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard_address": ":0"}}
    with dask.config.set(_worker_environ()), SpecCluster(workers=workers, scheduler=scheduler) as cluster:
        yield cluster


def gather_with_progress(client, futures, *, desc, progress=True):
    """Results of ``futures`` in submission order, with a tqdm bar on stderr as they finish."""
    from distributed import as_completed
    from tqdm.auto import tqdm

    try:
        with tqdm(total=len(futures), desc=desc, disable=not progress, unit="task") as bar:
            for fut in as_completed(futures):
                if fut.status == "error":
                    fut.result()  # raises the task's exception here, with its traceback
                bar.update(1)
        return client.gather(futures)
    except BaseException:
        client.cancel(futures)  # no task of a failed stage keeps writing
        raise


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
                client = stack.enter_context(self._open_client())
                if self._report is not None and _has_bokeh():
                    stack.enter_context(performance_report(filename=self._report))
            except BaseException:
                stack.close()
                raise
            self._stack, self._client, self._started = stack, client, True
        return self._client

    def __getattr__(self, name):
        if name.startswith("__") or name in (
            "_open_client",
            "_report",
            "_before_close",
            "_stack",
            "_client",
            "_started",
        ):
            raise AttributeError(name)
        return getattr(self.resolve(), name)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
            return
        try:  # after an error (a scheduler that died, ...), closing must not replace it with its own
            self.close()
        except Exception as cleanup:  # noqa: BLE001 - the first error is the one to report
            logger.warning("closing the Dask client after %s failed too: %r", exc_type.__name__, cleanup)

    def close(self):
        """Write the performance report (if any) and close the cluster, when it was started."""
        stack, self._stack = self._stack, None
        client, self._client = self._client, None
        if stack is not None:
            try:
                if self._before_close is not None:
                    self._before_close(client)
            finally:
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


def _has_bokeh():
    import importlib.util

    if importlib.util.find_spec("bokeh") is None:
        logger.warning("bokeh is not installed: no Dask performance report is written")
        return False
    return True
