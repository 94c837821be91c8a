"""BCE and KCC on one Dask cluster's row blocks, for labels too large for one process: the solvers' own
drivers (:mod:`ensemble_dask.consensus`), with each E-step or Lloyd step a task per block and the block
statistics summed (:mod:`.bce`, :mod:`.kcc`, :mod:`.blocks`). Not a federation: every block is on workers
of the same cluster, which sees them all (:mod:`ensemble_dask.federated` is the one across sites)."""
