"""``ensemble-dask``: a thin command-line shell over :mod:`ensemble_dask.pipeline`.

One module per command, each adding its subcommands to the parser (:mod:`._parser`) and running them;
``main`` sets up logging and Ctrl-C and maps the outcome to one line and an exit status. Subcommands:
``run WORKFLOW`` (every stage of a workflow), and one per stage: ``ingest``,
``generate``, ``import-labels``, ``coassoc``, ``report``; ``verify`` (each stage's output against its
record); ``federated``, ``certs`` (a federation's CA,
signed site requests, or all keys at once for a demo) and ``site`` (``site init``: a site's own keys;
``site serve``: its agent). Errors on bad input print one line naming the file, parameter or value, and
exit with status 2; an I/O error (a full disk) and a cluster that fails under the command (a lost scheduler,
a worker killed as the embedded cluster starts) print one line and exit with status 1. When the reader of
stdout stops early (``ensemble-dask report --format json | head``), the command ends quietly with status 141
(128 + SIGPIPE).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import warnings

from .._validation import EnsembleDaskError
from ..runtime.clients import INTERRUPTED, interrupt, interrupt_handled, workers_ignore_ctrl_c
from ..runtime.faults import ClusterError
from ._parser import parser

__all__ = ["console", "main"]


def _on_sigint(signum, frame):
    """Ctrl-C: remember it (whatever error it then causes is reported as the interrupt) and raise
    ``KeyboardInterrupt``, once the process is out of numba's and llvmlite's code (:func:`_in_uncut_code`);
    a second one while the run closes, or while the first waits, ends the process at once."""
    if INTERRUPTED.is_set() or _DEFERRED.is_set():
        print(f"ensemble-dask: {_INTERRUPTED_LINE}", file=sys.stderr)
        os._exit(130)
    if _in_uncut_code(frame):
        _DEFERRED.set()
        _ALARM[0] = signal.signal(signal.SIGALRM, _on_retry)
        signal.setitimer(signal.ITIMER_REAL, _RETRY_SECONDS)
        return
    _raise_interrupt()


#: Packages whose Python code Ctrl-C must not cut. numba loads a cached kernel's machine code through a
#: callback that LLVM calls (``_object_getbuffer_hook``): a ``KeyboardInterrupt`` raised in a callback is
#: reported and dropped, the load goes on without the code, and the kernel's first call jumps to address 0:
#: a segmentation fault instead of exit 130. The interrupt waits until the main thread is out of their code:
#: at most the load or compilation it is in (a kernel's cold compile takes up to seconds), checked every
#: ``_RETRY_SECONDS``.
_UNCUT = frozenset({"numba", "llvmlite"})
_RETRY_SECONDS = 0.02
_DEFERRED = threading.Event()
_ALARM = [signal.SIG_DFL]  # SIGALRM's handler while the interrupt waits


def _in_uncut_code(frame):
    """Whether ``frame`` or a frame that called it runs code of a package of ``_UNCUT``."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).partition(".")[0] in _UNCUT:
            return True
        frame = frame.f_back
    return False


def _on_retry(signum, frame):
    """SIGALRM after a deferred Ctrl-C: raise it now if the main thread is out of the uncut code."""
    if _in_uncut_code(frame):
        signal.setitimer(signal.ITIMER_REAL, _RETRY_SECONDS)
        return
    _stop_retrying()
    _raise_interrupt()


def _stop_retrying():
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, _ALARM[0])
    _DEFERRED.clear()


def _raise_interrupt():
    quiet = logging.getLogger().level > logging.DEBUG
    interrupt(quiet=quiet)
    if quiet:  # the callbacks and finalisers the interrupt cuts short would each say so at exit
        sys.unraisablehook = _unraisable_after_interrupt
        # and so would a coroutine it stopped before it was scheduled (zarr's sync() makes one and then hands
        # it to its event loop's thread): "coroutine ... was never awaited" when it is collected. Not a
        # warnings filter: the interrupt may fall inside a ``warnings.catch_warnings()`` block (ours around
        # zarr's writes, or a library's), which drops the filters added in it when the interrupt leaves it;
        # the hook that the interpreter calls for such a coroutine is no filter, and stays.
        warnings._warn_unawaited_coroutine = _unawaited_after_interrupt
    raise KeyboardInterrupt


def _unraisable_after_interrupt(unraisable):
    """Nothing: after Ctrl-C, what a cut-short callback or finaliser raises is the interrupt itself."""


def _unawaited_after_interrupt(coro):
    """Nothing: after Ctrl-C, a coroutine collected before it was scheduled is the interrupt itself."""


_INTERRUPTED_LINE = "interrupted; run the same command to resume"


def _command_parser(ap, args):
    """The parser of the command ``args`` ran (of its subcommand, for ``certs`` and ``site``), or ``ap``."""
    import argparse

    for action in ap._actions:  # argparse keeps its subparsers there, the chosen one's name under its dest
        chosen = getattr(args, action.dest, None)
        if isinstance(action, argparse._SubParsersAction) and chosen in action.choices:
            return _command_parser(action.choices[chosen], args)
    return ap


def main(argv=None):
    """Entry point of the ``ensemble-dask`` command; returns the exit status."""
    ap = parser()
    args, extra = ap.parse_known_args(argv)
    if extra:  # told by the command's own parser, with its usage (not the program's)
        _command_parser(ap, args).error(f"unrecognized arguments: {' '.join(extra)}")
    if args.verbose < 2:
        # read by dask's config when distributed is first imported (its own loggers say INFO)
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    level = [logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)]
    if getattr(args, "quiet", False):
        level = logging.ERROR
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    interrupt_handled()  # nothing of an earlier call's interrupt (in this process) carries over
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        with workers_ignore_ctrl_c():  # the command owns its process: it handles Ctrl-C, closes its workers
            status = args.run(args)  # the command's module, which set it as its parser's default
        sys.stdout.flush()  # here, not at exit: a reader that has gone is then caught below
        if INTERRUPTED.is_set():  # an interrupt swallowed on the way (by a library)
            raise KeyboardInterrupt
        return status
    except BaseException as exc:  # noqa: BLE001 - each kind mapped to one line and a status
        return _failure(exc, args)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
            if _DEFERRED.is_set():  # an interrupt still waiting when the command ended (it ends as one)
                _stop_retrying()
        interrupt_handled()


def console(argv=None):
    """The ``ensemble-dask`` program (its entry point): :func:`main`, and after Ctrl-C the loggers stay quiet
    until the process ends.

    :func:`main` gives a caller that goes on (a test session, a notebook) its loggers back. The program does
    not go on: what it collects on the way out (the tasks the interrupt left pending in zarr's event-loop
    thread: asyncio's "Task was destroyed but it is pending!") is the interrupt, already reported.
    """
    status = main(argv)
    if status == 130 and logging.getLogger().level > logging.DEBUG:
        interrupt(quiet=True)
    return status


def _failure(exc, args):
    """The one line a failed command prints, and its exit status (re-raises what is not ours)."""
    if INTERRUPTED.is_set() or isinstance(exc, KeyboardInterrupt):
        # after Ctrl-C, the error it caused (a cancelled future, numba's SystemError) is the interrupt
        print(f"ensemble-dask: {_INTERRUPTED_LINE}", file=sys.stderr)
        return 130
    if isinstance(exc, EnsembleDaskError):
        print(f"ensemble-dask: error: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, ClusterError) else 2  # the cluster failed, not the input
    if isinstance(exc, BrokenPipeError):
        # the reader of stdout stopped early (``report --format json | head``): end quietly, as
        # Python's docs advise: stdout points at devnull so that flushing it at exit cannot raise again
        with contextlib.suppress(AttributeError, OSError, ValueError):  # not a real file (tests)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE (13): the status a shell reports for a command SIGPIPE ended
    if isinstance(exc, OSError):  # a full disk, a file-size limit, a permission: the path and the cause
        where = getattr(exc, "filename", None) or getattr(args, "store", None)
        where = f" {where}" if where else ""
        print(
            f"ensemble-dask: error: I/O error on{where}: {exc.strerror or exc}; the stage is not marked "
            "complete: fix the cause (free space, permissions) and run the same command again",
            file=sys.stderr,
        )
        return 1
    raise exc
