"""The sparse co-association store: pair sampling, exact counting, symmetric CSR in zarr.

* :mod:`.sampling` - seeded pair strategies (``full``, ``uniform``, ``per-point``, ``cocluster``);
* :mod:`.counting` - c_ij and N_ij of given pairs (numba kernels in :mod:`._kernels`), in memory;
* :mod:`.csr` - the ``pairs/`` group of the run store: write, read, iterate by row blocks;
* :mod:`.build` - the Dask graph that samples, counts and writes the store, and its update.
"""

from typing import TYPE_CHECKING

from ..runtime.imports import lazy_names

# what type checkers and the API docs read; at run time a submodule is imported on first use
if TYPE_CHECKING:
    from .build import build_coassociation, update_coassociation
    from .counting import PairCounts, coassociation, count_pairs, dense_coassociation
    from .csr import PairBlock, StoredPairs, iter_pair_blocks, read_pairs, write_pairs
    from .sampling import STRATEGIES, sample_pairs

#: where each name lives: the model code that needs only the counts (the consensus solvers, a federation
#: site) does not import the Dask graph of :mod:`.build`
_HOME = {
    "build_coassociation": ".build",
    "update_coassociation": ".build",
    "PairCounts": ".counting",
    "coassociation": ".counting",
    "count_pairs": ".counting",
    "dense_coassociation": ".counting",
    "PairBlock": ".csr",
    "StoredPairs": ".csr",
    "iter_pair_blocks": ".csr",
    "read_pairs": ".csr",
    "write_pairs": ".csr",
    "STRATEGIES": ".sampling",
    "sample_pairs": ".sampling",
}

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


__getattr__, __dir__ = lazy_names(__name__, _HOME)
