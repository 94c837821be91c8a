"""Where and how the work runs: Dask clients and clusters (:mod:`.clients`: the embedded ``LocalCluster`` or
an existing scheduler, Ctrl-C and worker logs), threads within one process (:mod:`.threads`) and where numba
caches the compiled kernels (:mod:`.numba_cache`).

This ``__init__`` imports nothing, so that a solver using :mod:`.threads` does not import ``distributed``.
The federation's TLS is not here: a site makes its own contexts from its own files
(:mod:`ensemble_dask.federated.certs`), with nothing from the coordinator's side.
"""
