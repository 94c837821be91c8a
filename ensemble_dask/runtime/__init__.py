"""Where and how the work runs: Dask clients and clusters (:mod:`.clients`: the embedded ``LocalCluster`` or
an existing scheduler, Ctrl-C and worker logs; :mod:`.faults`: a cluster that fails under a command, told in
one error; :mod:`.site`: a site's own cluster, over TLS or in-process, that only its agent reaches), threads
within one process (:mod:`.threads`; :mod:`.imports` for imports on first use on several threads) and where
numba caches the compiled kernels (:mod:`.numba_cache`).

This ``__init__`` imports nothing, so that a solver using :mod:`.threads` does not import ``distributed``.
The federation's HTTPS between agents and coordinator is not a Dask matter: each party makes its TLS
contexts from its own files (:mod:`ensemble_dask.federated.protocol.certs`).
"""
