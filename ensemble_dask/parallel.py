"""Where work runs: the embedded LocalCluster or an existing Dask cluster.

This is the only module that decides about clusters and clients; the stages hand it
in-memory functions and small arguments (store URLs, seeds, index ranges), never large data.
"""

from __future__ import annotations

import contextlib
import logging
import os

from ._validation import InputError

__all__ = ["dask_client", "gather_with_progress"]

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
            yield client
        return
    n_workers = n_workers or max(1, os.cpu_count() or 1)
    network = {"host": "127.0.0.1"} if processes else {}
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
        yield client


@contextlib.contextmanager
def _resource_cluster(resources, threads_per_worker):
    import dask
    from distributed import Nanny, Scheduler, SpecCluster

    workers = {
        f"worker-{i}": {
            "cls": Nanny,
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
