"""What the embedded clusters do not log: noise of a close when nothing is wrong (see :mod:`.clients`)."""

from __future__ import annotations

import logging

_QUIET_PLUGIN = "ensemble-dask-quiet-worker-logs"
# what distributed's worker logs when a heartbeat is in flight as the worker closes its connections
_HEARTBEAT_FAILURE = "Failed to communicate with scheduler during heartbeat."


class _NoiseWhileClosing(logging.Filter):
    """Drops what a worker logs about its own close once ``worker`` is no longer running.

    * A heartbeat in flight while the worker closes fails with ``CommClosedError: ConnectionPool
      closing``, which distributed logs as an ERROR with its traceback: at the end of a run, noise. A
      heartbeat failure while the worker runs (a lost scheduler) is still logged.
    * A task still running when the worker closes (the run was interrupted) ends with "Async instruction
      ... ended with CancelledError", which distributed says happens only in ``Worker.close()``.
    """

    def __init__(self, worker):
        super().__init__()
        self.worker = worker

    def filter(self, record):
        msg = str(record.msg)
        if msg != _HEARTBEAT_FAILURE and not (
            msg.startswith("Async instruction for") and msg.endswith("ended with CancelledError")
        ):
            return True
        from distributed.core import Status

        return self.worker.status == Status.running


class _DropMessages(logging.Filter):
    """Drops the log records whose message (formatted) starts with ``prefix``."""

    def __init__(self, prefix):
        super().__init__()
        self.prefix = prefix

    def filter(self, record):
        return not record.getMessage().startswith(self.prefix)


def _quiet_worker_logs():
    """A WorkerPlugin for the embedded clusters' worker processes: no noise when nothing is wrong.

    * ``distributed.sizeof`` warnings go: the worker's statistical profile is a call tree as deep as
      the deepest stack it sampled (zarr's async calls, numba), and sizing it before sending it
      (for the Dask performance report) exceeds Python's recursion limit, so every run printed
      "Sizeof calculation for object of type 'dict' failed" twice; distributed then just
      serialises that message off the event loop, which is all the warning says.
    * what a closing worker says of its close goes (see :class:`_NoiseWhileClosing`).
    * a failed task's "Compute Failed" report goes: its exception reaches the client, which reports it
      (one line for a full disk or bad input, the task's traceback for a bug); the worker printed the
      same error again, once per failed task.
    """
    from distributed.diagnostics.plugin import WorkerPlugin

    class QuietWorkerLogs(WorkerPlugin):
        def setup(self, worker):
            logging.getLogger("distributed.sizeof").setLevel(logging.ERROR)
            for name in ("distributed.worker", "distributed.worker.state_machine"):
                logging.getLogger(name).addFilter(_NoiseWhileClosing(worker))
            logging.getLogger("distributed.worker").addFilter(_DropMessages("Compute Failed"))

    return QuietWorkerLogs()


class _UnretrievedCloseTimeout(logging.Filter):
    """Drops asyncio's "Future exception was never retrieved" of a ``TimeoutError('Timeout')``: what is left
    of a distributed comm whose close (``BatchedSend.close``, tornado's ``with_timeout``) was given up on as
    an embedded cluster closed on a loaded machine, printed when the future is collected, whenever that is.
    Any other unretrieved exception is kept."""

    def filter(self, record):
        if not str(record.msg).startswith("Future exception was never retrieved"):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, TimeoutError) and exc.args == ("Timeout",))


_CLOSE_TIMEOUTS = _UnretrievedCloseTimeout()


def quiet_close_timeouts():
    """Install :class:`_UnretrievedCloseTimeout` on asyncio's logger (once: such a future is collected after
    its cluster is gone)."""
    logger = logging.getLogger("asyncio")
    if _CLOSE_TIMEOUTS not in logger.filters:
        logger.addFilter(_CLOSE_TIMEOUTS)
