"""A site's own Dask cluster, which nothing outside the site's agent process can reach (see
:func:`site_cluster`). The site agent (:mod:`ensemble_dask.federated.site.agent`) opens it from the
``compute`` section of the site's own config; the coordinator never names or reaches it.
"""

from __future__ import annotations

import contextlib

__all__ = ["site_cluster"]

#: distributed always starts an HTTP server per scheduler and worker: on the site's cluster, one of no route
_NO_ROUTES = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}

#: Dask's diagnostics that nothing reads on a site's own embedded cluster, whose HTTP servers serve no route:
#: each scheduler and worker samples its threads' stacks every 10 ms (the statistical profile), ticks its
#: event loop every 20 ms and reads its process's counters every 500 ms. The agent keeps its cluster while it
#: waits for the coordinator's next call, for minutes or days; idle, a cluster of one worker thread took
#: 3.8-4.4% of a core with Dask's defaults and 0.8% with these. The workers' memory checks (spilling, pausing)
#: keep Dask's interval, and the tick still reports a blocked event loop.
_QUIET = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "500ms",
    "distributed.admin.system-monitor.interval": "5s",
}


def _quiet_worker_class():
    from distributed import Worker

    class QuietWorker(Worker):
        """A worker without its status pages (its HTTP server then serves no route at all)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "dashboard": False})

    return QuietWorker


@contextlib.contextmanager
def site_cluster(compute):
    """A client of the site's own cluster, from the ``compute`` section of its config.

    ``scheduler``: an address of the site's own scheduler (``tls://`` with ``tls: {ca, cert, key}``, the
    site's credentials). Otherwise an embedded ``LocalCluster`` whose HTTP servers (distributed starts one
    per scheduler and worker) listen on loopback and serve no route: ``processes: false`` (default) keeps
    the workers as threads of the agent, reached in-process only (``inproc://``, no comm port);
    ``processes: true`` starts worker processes on 127.0.0.1 over TLS with credentials made in the
    agent's process (``Security.temporary()``), so no other process can connect as a client.
    """
    import dask
    from distributed import Client, LocalCluster, Security

    compute = dict(compute or {})
    if compute.get("scheduler"):
        tls = compute.get("tls")
        security = None
        if tls:
            security = Security(
                tls_ca_file=tls["ca"], tls_client_cert=tls["cert"], tls_client_key=tls["key"],
                require_encryption=True,
            )  # fmt: skip
        with Client(compute["scheduler"], security=security, timeout="30s") as client:
            yield client
        return
    processes = bool(compute.get("processes", False))
    opts = {
        "n_workers": int(compute.get("n_workers", 1)),
        "threads_per_worker": int(compute.get("threads_per_worker", 1)),
        "processes": processes,
        # distributed always starts an HTTP server per scheduler and worker: on loopback, with no route
        "dashboard_address": "127.0.0.1:0",
        "worker_dashboard_address": "127.0.0.1:0",
        "scheduler_kwargs": {"dashboard": False},
    }
    if processes:  # (their workers' own status pages stay on, on loopback)
        opts.update(host="127.0.0.1", protocol="tls://", security=Security.temporary())
    else:  # the scheduler and its workers talk within the agent's process
        opts.update(protocol="inproc://", worker_class=_quiet_worker_class())
    with (
        dask.config.set({**_NO_ROUTES, **_QUIET}),
        LocalCluster(**opts) as cluster,
        Client(cluster) as client,
    ):
        yield client
