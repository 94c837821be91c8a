"""Progress on stderr: a bar of a stage's tasks on the cluster (:func:`gather_with_progress`), and for a step
that reports no steps of its own, the time spent in it, on a terminal (:func:`elapsed_line`).

A consensus fit in this process reports nothing while it runs, so it
shows how long it has been running, as a sign of life and no more: no fraction done is claimed.
"""

from __future__ import annotations

import contextlib
import sys
import threading

__all__ = ["elapsed_line", "gather_with_progress"]


@contextlib.contextmanager
def elapsed_line(desc, *, progress=True, every=1.0, file=None):
    """Within: a line ``DESC: 00:12`` on ``file`` (default stderr) counting the time spent in the block,
    redrawn every ``every`` seconds by a thread and cleared at the end. Only on a terminal (a pipe or a log
    file gets nothing) and when ``progress`` is true."""
    file = sys.stderr if file is None else file
    isatty = getattr(file, "isatty", None)
    if not progress or not (callable(isatty) and isatty()):
        yield
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=None, desc=desc, file=file, bar_format="{desc}: {elapsed}", leave=False)
    stop = threading.Event()

    def tick():
        while not stop.wait(every):
            bar.refresh()

    thread = threading.Thread(target=tick, name="ensemble-dask-elapsed", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        bar.close()


def gather_with_progress(client, futures, *, desc, progress=True):
    """Results of ``futures`` in submission order, with a tqdm bar on stderr as they finish."""
    from distributed import as_completed
    from tqdm.auto import tqdm

    from .clients import INTERRUPTED

    try:
        with tqdm(total=len(futures), desc=desc, disable=not progress, unit="task") as bar:
            for fut in as_completed(futures):
                if fut.status == "error":
                    fut.result()  # raises the task's exception here, with its traceback
                bar.update(1)
        return client.gather(futures)
    except BaseException:
        if not INTERRUPTED.is_set():  # after an interrupt the client closes, and its tasks go with it
            client.cancel(futures)  # no task of a failed stage keeps writing
        raise
