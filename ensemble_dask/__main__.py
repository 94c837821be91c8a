"""``python -m ensemble_dask ARGS``: the ``ensemble-dask`` command (:mod:`ensemble_dask.cli`)."""

import sys

from .cli import console

if __name__ == "__main__":
    sys.exit(console())
