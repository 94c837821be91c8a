"""What runs on the coordinator: its calls to the site agents and the fits it drives through them.

* :mod:`.link` - HTTPS calls to the agents (:class:`~.link.Federation`) and the secure sums;
* :mod:`.bce` - row-distributed BCE over the agents (Wang et al. 2011, Sect. 5.2.1);
* :mod:`.kcc` - row-distributed KCC over the agents (``federated: method: kcc``);
* :mod:`.columns` - column-distributed BCE (Sect. 5.2.2) on one Dask cluster whose workers hold the columns.
"""
