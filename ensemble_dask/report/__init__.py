"""The report's figures (:mod:`.plots`) and HTML (:mod:`.html`), drawn from plain arrays; the ``report``
stage (:mod:`ensemble_dask.stages.report_page`) reads the run store and calls them."""
