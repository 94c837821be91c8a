"""What runs on a site: its agent and everything the agent runs, and nothing of the coordinator's.

* :mod:`.config` - the site's policy and keys, read from its own ``site.yaml``;
* :mod:`.agent` - the site agent (``ensemble-dask site serve``): sessions, transcripts, the secure rounds;
* :mod:`.https` - its HTTPS server: mutual TLS and bounds on what any caller can make it hold;
* :mod:`.ops` - the coordinator's arguments checked, then the site's functions;
* :mod:`.data` - the site's rows read, counted and scored, its memberships written;
* :mod:`.rows` - BCE's E-step and KCC's Lloyd step over the site's row blocks, on its own Dask cluster.

A site imports from :mod:`..protocol` and the model code below (``rowblocks``, ``consensus``), never from
:mod:`..coordinator` (a test of the package's layout checks it, through every module on the way).
"""
