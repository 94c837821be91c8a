"""ensemble_dask: consensus clustering at scale.

Base clusterings of subsamples generated as a Dask graph, a sparse co-association store in
zarr, and the consensus methods PCC (KL, squared L2), PPC, BCE/GBCE/MM on top.
"""

import logging
from typing import TYPE_CHECKING

from ._validation import EnsembleDaskError, InputError

# a library's loggers are quiet until the application configures logging (the CLI does): without a handler
# of its own, Python's last resort printed each of the package's warning lines to stderr, beside the
# warning the fit raises through ``warnings`` (which a user can filter)
logging.getLogger(__name__).addHandler(logging.NullHandler())

# numba and the kernels are imported where they are used (each module of cached kernels imports
# runtime.numba_cache first, which puts their caches in the user's cache folder): a command that runs no
# kernel (--help, certs, site init, ingest) and every worker process that runs none start without them
if TYPE_CHECKING:  # what type checkers and the API docs read; at run time each is imported on first use
    from .coassoc.counting import PairCounts, dense_coassociation

__version__ = "0.1.0"

__all__ = [
    "ConsensusClustering",
    "EnsembleDaskError",
    "InputError",
    "PairCounts",
    "dense_coassociation",
    "__version__",
]


def __getattr__(name):  # imported on first use: the estimator brings scikit-learn and the pipeline
    if name == "ConsensusClustering":
        from .estimator import ConsensusClustering

        return ConsensusClustering
    if name in ("PairCounts", "dense_coassociation"):  # numba and the co-association kernels
        from .coassoc import counting

        return getattr(counting, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
