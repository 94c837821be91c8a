"""ensemble_dask: consensus clustering at scale.

Base clusterings of subsamples generated as a Dask graph, a sparse co-association store in
zarr, and the consensus methods PCC (KL, squared L2), PPC, BCE/GBCE/MM on top.
"""

from ._validation import EnsembleDaskError, InputError
from .coassoc.counting import PairCounts, dense_coassociation

__version__ = "0.1.0"

__all__ = ["EnsembleDaskError", "InputError", "PairCounts", "dense_coassociation", "__version__"]
