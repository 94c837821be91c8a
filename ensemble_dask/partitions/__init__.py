"""The base clusterings: the clusterers that partition a subsample (:mod:`.clusterers`), which the
``generate`` stage runs as a Dask graph."""
