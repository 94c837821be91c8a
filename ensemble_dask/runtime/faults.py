"""A Dask cluster that fails under a command, told in one error: its scheduler lost, a worker process of the
embedded cluster dead as it started (see :mod:`.clients`, which raises them).

Each is a :class:`ClusterError`: the message names what happened, that the stage is not marked complete and
what to do; the CLI prints it as one line and exits 1 (the cluster failed, not the input).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys

from .._validation import EnsembleDaskError

__all__ = ["ClusterError", "SchedulerLostError", "WorkerStartError"]

#: what distributed's client logs when it gives up reconnecting (then it closes, its futures cancelled)
_GAVE_UP = "Failed to reconnect to scheduler"


class ClusterError(EnsembleDaskError):
    """The Dask cluster failed under the command (not its input); the stage it ran is not marked complete."""


class SchedulerLostError(ClusterError):
    """The connection to an existing scheduler (``--scheduler``) was lost while a stage ran on it."""


class WorkerStartError(ClusterError):
    """A worker process of the embedded cluster ended before it started (killed, or out of memory)."""


class LostScheduler(logging.Filter):
    """Watches an existing scheduler's client (``client``, set once connected) for the loss of its scheduler.

    As a context, it is a filter on ``distributed.client``, which drops what the client logs of a lost
    scheduler while it is not connected (that it gave up reconnecting, and the traceback of its reconnection,
    a ``CancelledError``, cut short when it is closed): :meth:`error` reports it in one line. While the client
    is connected (or before it is), every record passes.
    """

    _client = None
    #: the scheduler's address, noted when the client is set (a client that gave up reconnecting forgets it)
    address = None

    @property
    def client(self):
        return self._client

    @client.setter
    def client(self, client):
        self._client = client
        self.address = getattr(getattr(client, "scheduler", None), "address", None)

    def __enter__(self):
        logging.getLogger("distributed.client").addFilter(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger("distributed.client").removeFilter(self)

    def _lost(self):
        client = self.client
        if client is None or getattr(client, "cluster", None) is not None:  # none yet, or an embedded cluster
            return False
        return getattr(client, "status", "running") != "running"

    def filter(self, record):
        if not self._lost():
            return True
        if str(record.msg).startswith(_GAVE_UP):
            return False
        import asyncio

        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, asyncio.CancelledError)

    def error(self, stage):
        """A :class:`SchedulerLostError` naming ``stage`` (None: unnamed) when the client is no longer
        connected to its scheduler, else None.

        A scheduler that goes away mid-stage cancels every future of the client ("scheduler-connection-lost");
        one that goes away between two stages leaves the next stage's futures waiting while the client tries
        to reconnect (its connection timeout), then cancelled ("unknown"). Either way, while the stage's error
        travels, the client is reconnecting or closed: that, not the error's type, tells the loss.
        """
        if not self._lost():
            return None
        address, during = self.address or "?", f" during stage {stage!r}" if stage else ""
        return SchedulerLostError(
            f"lost the connection to the Dask scheduler at {address}{during}; the stage is not marked "
            "complete: start the scheduler again (or run without one, on an embedded cluster) and run the "
            "same command again"
        )


@contextlib.contextmanager
def started(cls, nanny, **options):
    """The cluster ``cls(**options)``, closed on exit; a worker process of ``nanny`` (its nanny class, with
    ``ended_at_start``; or None) that ends before it started is a :class:`WorkerStartError` (distributed's
    80 lines of tracebacks ended in "PatientNanny failed to start.")."""
    try:
        cluster = cls(**options)
    except RuntimeError as exc:
        ended = getattr(nanny, "ended_at_start", None) or [None]
        error = worker_start_error(exc, ended[0])
        if error is None:
            raise
        raise error from exc
    with cluster:
        yield cluster


def worker_start_error(exc, exitcode):
    """A :class:`WorkerStartError` for ``exc``, distributed's "<Nanny> failed to start." when the nanny's
    worker process ended before it started (exit status ``exitcode``: negative for a signal; None if
    unknown); None for any other error."""
    cause = exc.__cause__
    if not (
        isinstance(exc, RuntimeError)
        and str(exc).endswith("failed to start.")
        and isinstance(cause, RuntimeError)
        and str(cause) == "Nanny failed to start worker process"
    ):
        return None
    if exitcode is None:
        how = "ended"
    elif exitcode < 0:
        how = f"was killed by signal {-exitcode}"
    else:
        how = f"exited with status {exitcode}"
    return WorkerStartError(
        f"a worker process of the embedded Dask cluster {how} as it started; the stage is not marked "
        "complete: run the same command again (with fewer workers, --n-workers, if memory is short)"
        + (_script_hint() if exitcode is not None and exitcode > 0 else "")
    )


#: a worker process imports the script that started it (multiprocessing's spawn and forkserver)
_GUARD_HINT = (
    "; if this is a script that starts the cluster (a ConsensusClustering with a store on disk), put its "
    'code under `if __name__ == "__main__":`: each worker process imports the script, and without the '
    "guard it starts a cluster of its own"
)


#: a script read from standard input cannot be imported by a worker process, guard or not
_STDIN_HINT = (
    "; a cluster of worker processes cannot start from a script read on standard input (each worker process "
    "imports the script that started it): save it to a file and run that, or leave the estimator's store "
    "None (its own store in memory runs on threads)"
)


def _script_hint():
    """What a user's script that started the cluster can do (:data:`_GUARD_HINT`, or :data:`_STDIN_HINT` for
    one read from standard input); nothing for ``ensemble-dask`` or an interactive interpreter."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or "ensemble_dask" in path or os.path.basename(sys.argv[0]).startswith("ensemble-dask"):
        return ""
    return _GUARD_HINT if os.path.isfile(path) else _STDIN_HINT
