"""``python -m ensemble_dask.cli ARGS``: the ``ensemble-dask`` command."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
