"""The sparse co-association store: pair sampling, exact counting, symmetric CSR in zarr.

* :mod:`.sampling` - seeded pair strategies (``full``, ``uniform``, ``per-point``, ``cocluster``);
* :mod:`.counting` - c_ij and N_ij of given pairs (numba kernels in :mod:`._kernels`), in memory;
* :mod:`.csr` - the ``pairs/`` group of the run store: write, read, iterate by row blocks;
* :mod:`.build` - the Dask graph that samples, counts and writes the store, and its update.
"""

from .build import build_coassociation, update_coassociation
from .counting import PairCounts, coassociation, count_pairs, dense_coassociation
from .csr import PairBlock, StoredPairs, iter_pair_blocks, read_pairs, write_pairs
from .sampling import STRATEGIES, sample_pairs

__all__ = [
    "STRATEGIES",
    "PairBlock",
    "PairCounts",
    "StoredPairs",
    "dense_coassociation",
    "sample_pairs",
    "count_pairs",
    "coassociation",
    "write_pairs",
    "read_pairs",
    "iter_pair_blocks",
    "build_coassociation",
    "update_coassociation",
]
