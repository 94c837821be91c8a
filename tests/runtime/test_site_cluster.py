"""A site's own embedded cluster (:func:`ensemble_dask.runtime.site.site_cluster`) while its agent waits."""

from __future__ import annotations

import dask

from ensemble_dask.runtime.site import site_cluster

#: Dask's own defaults of what the suite's environment turns down (tests/conftest.py, ``QUIET_DASK``)
DASK_DEFAULTS = {
    "distributed.worker.profile.enabled": True,
    "distributed.admin.tick.interval": "20ms",
    "distributed.admin.system-monitor.interval": "500ms",
    "distributed.worker.memory.monitor-interval": "100ms",
}


def test_the_site_s_cluster_runs_no_diagnostics_that_nothing_reads():
    """Under Dask's defaults, the site's cluster samples no profile and ticks and reads its counters less
    often (its HTTP servers serve no route, so nothing shows them), and keeps the memory checks' interval."""
    with dask.config.set(DASK_DEFAULTS), site_cluster({}) as client:
        scheduler, (worker,) = client.cluster.scheduler, client.cluster.workers.values()
        assert "profile" not in worker.periodic_callbacks
        for server in (scheduler, worker):
            assert server.periodic_callbacks["tick"].callback_time == 500
            assert server.periodic_callbacks["monitor"].callback_time == 5000
        assert worker.memory_manager.memory_monitor_interval == 0.1
    assert dask.config.get("distributed.worker.profile.enabled") is False  # the suite's setting, as before
