"""ensemble_dask: consensus clustering at scale.

Base clusterings of subsamples generated as a Dask graph, a sparse co-association store in
zarr, and the consensus methods PCC (KL, squared L2), PPC, BCE/GBCE/MM on top.
"""

from .runtime import numba_cache as _numba_cache

_numba_cache.register()  # before any kernel module is imported: caches go to the user's cache folder

from ._validation import EnsembleDaskError, InputError  # noqa: E402
from .coassoc.counting import PairCounts, dense_coassociation  # noqa: E402

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
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
